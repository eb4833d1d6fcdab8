/* The real-GPU tests: skip (exit 77) unless the cuda backend is built and
 * its probe finds a usable device. Run against the stand-in driver
 * (HBG_CUDA_LIB naming tests/cuda_standin's library: the _mock ctest
 * entries, gpu-check.sh --mock) a test never skips: the stand-in is built
 * with the cuda backend, so one that cannot be opened, or a backend that
 * is missing, is a failure, as test_cuda_driver has it. */
#ifndef HBG_TESTS_CUDA_SKIP_H
#define HBG_TESTS_CUDA_SKIP_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg_device.h>

#include "test.h"

/* @return the dlopen handle of the library HBG_CUDA_LIB names when it is
 * the stand-in (it exports the hbgmock_* hooks), NULL where HBG_CUDA_LIB
 * is unset or names the real driver. A library it names that cannot be
 * loaded at all is a failure: nothing there to skip for. */
static inline void *cuda_standin(void) {
  const char *lib = getenv("HBG_CUDA_LIB");
  if (!lib || !*lib)
    return NULL;
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h)
    T_FAIL("HBG_CUDA_LIB=%s cannot be loaded: %s", lib, dlerror());
  return dlsym(h, "hbgmock_live") ? h : NULL;
}

/* The entry point name of the driver library h (HBG_CUDA_LIB), into the
 * function pointer var; a missing one fails the test. */
static inline void *standin_sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    T_FAIL("HBG_CUDA_LIB=%s exports no %s", getenv("HBG_CUDA_LIB"), name);
  return p;
}
#define STANDIN_LOAD(h, var, name)                                             \
  do {                                                                         \
    void *standin__p = standin_sym(h, name);                                   \
    memcpy(&(var), &standin__p, sizeof standin__p);                            \
  } while (0)

/* Skip (exit 77) saying why, unless the test runs against the stand-in:
 * then fail saying why. */
static inline void cuda_skip(const char *why) {
  if (cuda_standin())
    T_FAIL("against the cuda stand-in (HBG_CUDA_LIB=%s), which must never "
           "skip: %s",
           getenv("HBG_CUDA_LIB"), why);
  printf("SKIP: %s\n", why);
  exit(T_EXIT_SKIP);
}

static inline void skip_without_gpu(void) {
  const hbg_dev_ops *ops = hbg_device_find("cuda");
  char why[256] = "";
  if (!ops)
    cuda_skip("cuda backend not built");
  if (ops->probe && ops->probe(why, sizeof why) != 0) {
    char msg[300];
    snprintf(msg, sizeof msg, "cuda: %s", why);
    cuda_skip(msg);
  }
  printf("cuda: %s\n", why);
}

#endif
