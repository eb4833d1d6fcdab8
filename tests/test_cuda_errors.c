/* cuda backend: CUDA failures map to hbg codes at the call site, the native
 * code and message are kept, API misuse is rejected before reaching CUDA,
 * and the device stays usable afterwards. Skips (77) without a GPU. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h"
#include "test.h"

/* CUresult values (pinned by the driver's ABI); the test does not include
 * the CUDA headers so that it builds without the toolkit. */
#define CUDA_ERROR_OUT_OF_MEMORY 2

static void expect_native(hbg_device *d, const char *call, int64_t code) {
  int64_t got = 0;
  const char *msg = NULL;
  ASSERT_OK(hbg_device_native_error(d, &got, &msg));
  printf("  native %lld: %s\n", (long long)got, msg);
  ASSERT_NE(got, 0);
  ASSERT(msg && strstr(msg, call) != NULL);
  if (code)
    ASSERT_EQ(got, code);
}

int main(void) {
  skip_without_gpu();
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("cuda", NULL, &d));
  ASSERT_ERR(hbg_device_native_error(d, NULL, NULL), HBG_E_NOTFOUND);

  uint8_t buf[256];
  memset(buf, 1, sizeof buf);
  const hbg_devptr bad = 0x10;
  ASSERT_ERR(hbg_dev_copy_h2d(d, bad, buf, sizeof buf), HBG_E_DEVICE);
  expect_native(d, "cuMemcpyHtoDAsync_v2", 0);
  ASSERT_ERR(hbg_dev_copy_d2h(d, buf, bad, sizeof buf), HBG_E_DEVICE);
  expect_native(d, "cuMemcpyDtoHAsync_v2", 0);

  hbg_devptr p = 0;
  ASSERT_ERR(hbg_dev_mem_alloc(d, (size_t)1 << 50, &p), HBG_E_DEVMEM);
  ASSERT(p == 0);
  expect_native(d, "cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY);
  void *h = NULL;
  ASSERT_ERR(hbg_dev_host_alloc(d, (size_t)1 << 50, &h), HBG_E_NOMEM);
  ASSERT(h == NULL);
  expect_native(d, "cuMemHostAlloc", CUDA_ERROR_OUT_OF_MEMORY);

  /* Misuse is caught by the backend's own registries. */
  ASSERT_ERR(hbg_dev_mem_free(d, 0x1000), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_free(d, buf), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_unregister(d, buf), HBG_E_INVAL);
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &p));
  ASSERT_ERR(hbg_dev_mem_free(d, p + 256), HBG_E_INVAL);

  hbg_dev_queue *q = NULL;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_ERR(hbg_dev_copy_h2d_async(d, q, bad, buf, sizeof buf), HBG_E_DEVICE);
  expect_native(d, "cuMemcpyHtoDAsync_v2", 0);
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = p,
                           .window_bytes = 64,
                           .status = bad};
  ASSERT_ERR(hbg_dev_launch(d, q, &l), HBG_E_RANGE);
  l.status = p + 4096 - 8; /* runs past the allocation */
  ASSERT_ERR(hbg_dev_launch(d, q, &l), HBG_E_RANGE);
  l.status = p;
  l.struct_size = 8;
  ASSERT_ERR(hbg_dev_launch(d, q, &l), HBG_E_INVAL);

  /* Still usable. */
  uint8_t back[256];
  ASSERT_OK(hbg_dev_copy_h2d(d, p, buf, sizeof buf));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, p, sizeof back));
  ASSERT_EQ(memcmp(back, buf, sizeof buf), 0);
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, p));
  hbg_device_close(d);

  /* A failed open keeps the native reason for the caller. */
  d = NULL;
  ASSERT_ERR(hbg_device_open("cuda", "device=4096", &d), HBG_E_NOTFOUND);
  ASSERT(d == NULL);
  printf("  open error: %s\n", hbg_device_open_error());
  ASSERT(strstr(hbg_device_open_error(), "device=4096") != NULL);
  printf("cuda errors: ok\n");
  return 0;
}
