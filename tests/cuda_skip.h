/* The real-GPU tests: skip (exit 77) unless the cuda backend is built and
 * its probe finds a usable device. */
#ifndef HBG_TESTS_CUDA_SKIP_H
#define HBG_TESTS_CUDA_SKIP_H

#include <stdio.h>
#include <stdlib.h>

#include <hbg/hbg_device.h>

#include "test.h"

static void skip_without_gpu(void) {
  const hbg_dev_ops *ops = hbg_device_find("cuda");
  char why[256] = "";
  if (!ops) {
    printf("SKIP: cuda backend not built\n");
    exit(T_EXIT_SKIP);
  }
  if (ops->probe && ops->probe(why, sizeof why) != 0) {
    printf("SKIP: cuda: %s\n", why);
    exit(T_EXIT_SKIP);
  }
  printf("cuda: %s\n", why);
}

#endif
