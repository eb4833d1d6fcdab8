/* The executor tests' user kernels (uk_test.c) as the tests register them:
 * ids, the PTX nvcc built from the source (HBG_TEST_UK_PTX_FILE; on the
 * stand-in the shared object HBG_MOCK_USER_LIB names runs the same
 * source's host build), and a cuda runtime to register them on. */
#ifndef HBG_TESTS_UK_UK_TEST_H
#define HBG_TESTS_UK_UK_TEST_H

#include <hbg/hbg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define UK_SLEEP 0x1100u /* [x, out]; s0 = milliseconds */
#define UK_FAIL 0x1101u  /* [x, out]; s0 = a lane, s1 = a phase */
#define UK_FAIL_PHASES 4u

/* A runtime on the cuda device with these options and this policy. */
static inline hbg_runtime *uk_cuda_runtime(const char *opts, int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = opts;
  cfg.policy = (uint32_t)policy;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

/* Register `symbol` of uk_test.c under id `kernel` with `phases` phases on
 * rt's device. @return hbg_kernel_register's result. */
static inline int uk_register(hbg_runtime *rt, uint32_t kernel,
                              const char *symbol, uint32_t phases) {
  const char *path = getenv("HBG_TEST_UK_PTX_FILE");
  FILE *f = path ? fopen(path, "rb") : NULL;
  if (!f)
    T_FAIL("cannot read %s (HBG_TEST_UK_PTX_FILE)", path ? path : "(unset)");
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *ptx = malloc((size_t)len + 1);
  ASSERT(ptx && fread(ptx, 1, (size_t)len, f) == (size_t)len);
  ptx[len] = '\0';
  fclose(f);
  hbg_kernel_impl k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.kernel = kernel;
  k.phases = phases;
  k.symbol = symbol;
  k.image = ptx;
  k.image_size = (size_t)len + 1;
  int rc = hbg_kernel_register(hbg_runtime_device(rt), &k, 1);
  free(ptx);
  return rc;
}

#endif
