/* cuda backend: open, caps, every memory/copy/queue/event op, pinned vs
 * pageable accounting, async copies and events. Skips (77) without a GPU or
 * when the backend is not built. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h"
#include "test.h"

static void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 31u + seed * 7u + (i >> 9));
}

static hbg_dev_stats stats(hbg_device *d) {
  hbg_dev_stats s;
  ASSERT_OK(hbg_dev_stats_get(d, &s));
  ASSERT_UEQ(s.struct_size, sizeof s);
  return s;
}

static void test_caps(hbg_device *d) {
  hbg_dev_caps c;
  ASSERT_OK(hbg_dev_caps_get(d, &c));
  ASSERT_UEQ(c.flags, HBG_DEV_CAP_ASYNC_NEEDS_PINNED | HBG_DEV_CAP_VERIFIES |
                          HBG_DEV_CAP_HOST_REGISTER);
  ASSERT_UEQ(c.stage_align, 64);
  ASSERT_UEQ(c.piece_pad_align, 1);
  ASSERT_UEQ(c.piece_pad_extra, 0);
  ASSERT_UEQ(c.dev_align, 256);
  ASSERT_UEQ(c.max_batch, 0);
  ASSERT(c.mem_bytes > 0);
}

/* Sync copies at the three reference sizes, from pinned and pageable. */
static void test_sync_copies(hbg_device *d) {
  const size_t sizes[] = {2560, 133120, 5u << 20};
  const size_t max = 5u << 20;
  hbg_dev_stats s0 = stats(d);
  uint8_t *pin = NULL, *pg = malloc(max), *back = malloc(max);
  ASSERT(pg && back);
  ASSERT_OK(hbg_dev_host_alloc(d, max, (void **)&pin));
  hbg_devptr dp = 0;
  ASSERT_OK(hbg_dev_mem_alloc(d, max, &dp));
  ASSERT(dp != 0);
  ASSERT_UEQ(dp % 256, 0);
  hbg_dev_stats s1 = stats(d);
  ASSERT_UEQ(s1.mem_allocs, s0.mem_allocs + 1);
  ASSERT_UEQ(s1.mem_in_use, s0.mem_in_use + max);
  ASSERT_UEQ(s1.host_allocs, s0.host_allocs + 1);
  ASSERT_UEQ(s1.host_in_use, s0.host_in_use + max);

  uint64_t bytes = 0;
  for (uint32_t k = 0; k < 3; k++) {
    size_t n = sizes[k];
    fill(pin, n, k);
    memset(back, 0, n);
    ASSERT_OK(hbg_dev_copy_h2d(d, dp, pin, n));
    ASSERT_OK(hbg_dev_copy_d2h(d, back, dp, n));
    ASSERT_EQ(memcmp(back, pin, n), 0);
    fill(pg, n, k + 100);
    ASSERT_OK(hbg_dev_copy_h2d(d, dp, pg, n));
    ASSERT_OK(hbg_dev_copy_d2h(d, back, dp, n));
    ASSERT_EQ(memcmp(back, pg, n), 0);
    bytes += 2 * n;
  }
  hbg_dev_stats s2 = stats(d);
  ASSERT_UEQ(s2.h2d_copies, s1.h2d_copies + 6);
  ASSERT_UEQ(s2.d2h_copies, s1.d2h_copies + 6);
  ASSERT_UEQ(s2.h2d_bytes, s1.h2d_bytes + bytes);
  ASSERT_UEQ(s2.d2h_bytes, s1.d2h_bytes + bytes);
  ASSERT_UEQ(s2.pinned_direct, s1.pinned_direct + 3);
  ASSERT_UGE(s2.handshakes, s1.handshakes + 12);
  ASSERT_UEQ(s2.async_copies, s1.async_copies);

  /* D2H into pinned memory counts as pinned; unaligned offsets work. */
  fill(pg, 3000, 9);
  ASSERT_OK(hbg_dev_copy_h2d(d, dp + 1000, pg + 7, 3000));
  ASSERT_OK(hbg_dev_copy_d2h(d, pin + 3, dp + 1000, 3000));
  ASSERT_EQ(memcmp(pin + 3, pg + 7, 3000), 0);
  hbg_dev_stats s3 = stats(d);
  ASSERT_UEQ(s3.pinned_direct, s2.pinned_direct + 1);
  /* Zero-byte copies are no-ops. */
  ASSERT_OK(hbg_dev_copy_h2d(d, dp, pg, 0));
  ASSERT_UEQ(stats(d).h2d_copies, s3.h2d_copies);

  ASSERT_OK(hbg_dev_mem_free(d, dp));
  ASSERT_OK(hbg_dev_host_free(d, pin));
  hbg_dev_stats s4 = stats(d);
  ASSERT_UEQ(s4.mem_frees, s0.mem_frees + 1);
  ASSERT_UEQ(s4.host_frees, s0.host_frees + 1);
  ASSERT_UEQ(s4.mem_in_use, s0.mem_in_use);
  ASSERT_UEQ(s4.host_in_use, s0.host_in_use);
  ASSERT_OK(hbg_dev_mem_free(d, 0));
  ASSERT_OK(hbg_dev_host_free(d, NULL));
  free(pg);
  free(back);
}

static void test_register(hbg_device *d) {
  const size_t n = 1u << 20;
  uint8_t *reg = aligned_alloc(4096, n), *back = malloc(n);
  ASSERT(reg && back);
  hbg_devptr dp = 0;
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &dp));
  ASSERT_OK(hbg_dev_host_register(d, reg, n));
  ASSERT_ERR(hbg_dev_host_register(d, reg + 4096, 4096), HBG_E_INVAL);
  hbg_dev_stats s0 = stats(d);
  fill(reg, n, 3);
  ASSERT_OK(hbg_dev_copy_h2d(d, dp, reg + 64, 100000));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dp, 100000));
  ASSERT_EQ(memcmp(back, reg + 64, 100000), 0);
  ASSERT_UEQ(stats(d).pinned_direct, s0.pinned_direct + 1);
  ASSERT_UEQ(stats(d).host_in_use, s0.host_in_use);
  ASSERT_OK(hbg_dev_host_unregister(d, reg));
  ASSERT_ERR(hbg_dev_host_unregister(d, reg), HBG_E_INVAL);
  hbg_dev_stats s1 = stats(d);
  ASSERT_OK(hbg_dev_copy_h2d(d, dp, reg, 4096));
  ASSERT_UEQ(stats(d).pinned_direct, s1.pinned_direct);
  ASSERT_OK(hbg_dev_mem_free(d, dp));
  free(reg);
  free(back);
}

static void test_async(hbg_device *d) {
  const size_t chunk = 1u << 20, n = 5 * chunk;
  uint8_t *pin = NULL, *pg = malloc(chunk), *back = malloc(n);
  ASSERT(pg && back);
  ASSERT_OK(hbg_dev_host_alloc(d, n, (void **)&pin));
  hbg_devptr dp = 0, dp2 = 0;
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &dp));
  ASSERT_OK(hbg_dev_mem_alloc(d, chunk, &dp2));
  hbg_dev_queue *q = NULL, *q2 = NULL;
  hbg_dev_event *ev = NULL, *ev2 = NULL;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_OK(hbg_dev_queue_create(d, &q2));
  ASSERT_OK(hbg_dev_event_create(d, &ev));
  ASSERT_OK(hbg_dev_event_create(d, &ev2));
  ASSERT_OK(hbg_dev_event_query(d, ev)); /* never recorded: complete */
  ASSERT_OK(hbg_dev_queue_sync(d, q));   /* empty queue */

  hbg_dev_stats s0 = stats(d);
  fill(pin, n, 5);
  for (size_t i = 0; i < 5; i++)
    ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dp + i * chunk, pin + i * chunk,
                                     chunk));
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  int rc = hbg_dev_event_query(d, ev);
  ASSERT(rc == 0 || rc == HBG_E_AGAIN);
  ASSERT_OK(hbg_dev_event_wait(d, ev));
  ASSERT_OK(hbg_dev_event_query(d, ev));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dp, n));
  ASSERT_EQ(memcmp(back, pin, n), 0);
  hbg_dev_stats s1 = stats(d);
  ASSERT_UEQ(s1.async_copies, s0.async_copies + 5);
  ASSERT_UEQ(s1.async_degraded, s0.async_degraded);
  ASSERT_UEQ(s1.pinned_direct, s0.pinned_direct + 5);
  ASSERT_UEQ(s1.h2d_copies, s0.h2d_copies + 5);
  ASSERT_UEQ(s1.h2d_bytes, s0.h2d_bytes + n);

  /* Polling reaches completion too. */
  fill(pin, chunk, 6);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dp, pin, chunk));
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  for (long spins = 0; (rc = hbg_dev_event_query(d, ev)) == HBG_E_AGAIN;
       spins++)
    ASSERT(spins < 2000000000L);
  ASSERT_OK(rc);

  /* From pageable memory: correct, counted as degraded. */
  fill(pg, chunk, 7);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q2, dp2, pg, chunk));
  ASSERT_OK(hbg_dev_event_record(d, ev2, q2));
  ASSERT_OK(hbg_dev_event_wait(d, ev2));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dp2, chunk));
  ASSERT_EQ(memcmp(back, pg, chunk), 0);
  hbg_dev_stats s2 = stats(d);
  ASSERT_UEQ(s2.async_degraded, s1.async_degraded + 1);
  ASSERT_UEQ(s2.async_copies, s1.async_copies + 2);

  /* Queue sync orders later sync copies after the queued ones. */
  fill(pin, n, 8);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dp, pin, n));
  ASSERT_OK(hbg_dev_queue_sync(d, q));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dp, n));
  ASSERT_EQ(memcmp(back, pin, n), 0);

  ASSERT_OK(hbg_dev_event_destroy(d, ev));
  ASSERT_OK(hbg_dev_event_destroy(d, ev2));
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_queue_destroy(d, q2));
  ASSERT_OK(hbg_dev_queue_destroy(d, NULL));
  ASSERT_OK(hbg_dev_event_destroy(d, NULL));
  ASSERT_OK(hbg_dev_mem_free(d, dp));
  ASSERT_OK(hbg_dev_mem_free(d, dp2));
  ASSERT_OK(hbg_dev_host_free(d, pin));
  free(pg);
  free(back);
}

static void test_open(void) {
  hbg_device *d = NULL;
  ASSERT_ERR(hbg_device_open("cuda", "device=100000", &d), HBG_E_NOTFOUND);
  ASSERT(d == NULL);
  ASSERT(strstr(hbg_device_open_error(), "cuda") != NULL);
  printf("open device=100000: %s\n", hbg_device_open_error());
  ASSERT_ERR(hbg_device_open("cuda", "device=abc", &d), HBG_E_INVAL);
  /* Open, use and close twice: nothing is process-wide. */
  for (int i = 0; i < 2; i++) {
    ASSERT_OK(hbg_device_open("cuda", NULL, &d));
    hbg_devptr p = 0;
    ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &p));
    void *h = NULL;
    ASSERT_OK(hbg_dev_host_alloc(d, 4096, &h));
    /* Left allocated on purpose: close releases what the caller leaked. */
    hbg_device_close(d);
    d = NULL;
  }
  hbg_device_close(NULL);
}

int main(void) {
  skip_without_gpu();
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("cuda", "device=0", &d));
  ASSERT_STREQ(hbg_device_name(d), "cuda");
  hbg_dev_stats s = stats(d);
  ASSERT_UEQ(s.h2d_copies + s.d2h_copies + s.mem_allocs + s.launches, 0);
  test_caps(d);
  test_sync_copies(d);
  test_register(d);
  test_async(d);
  s = stats(d);
  ASSERT_UEQ(s.mem_in_use, 0);
  ASSERT_UEQ(s.host_in_use, 0);
  hbg_device_close(d);
  test_open();
  printf("cuda device: ok\n");
  return 0;
}
