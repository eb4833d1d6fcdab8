/* Stress (meant for TSan too): many async copies interleaved with events
 * and launches on two queues, pinned staging slots reused only after their
 * event completed, a second thread polling events and counters, sync copies
 * mixed in. The device contents are checked at the end. The main thread
 * waits for the poller at checkpoints, so that polls overlap the traffic
 * however the threads are scheduled. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "test.h"

enum { QUEUES = 2, ITERS = 1500, SLOTS = 37, RING = 8, SLOT = 1024 };

static hbg_device *d;
static hbg_dev_event *evs[QUEUES][RING];
static atomic_int stop;
static atomic_long polls;

static void *poller(void *arg) {
  (void)arg;
  unsigned i = 0;
  while (!atomic_load(&stop)) {
    int rc = hbg_dev_event_query(d, evs[i % QUEUES][(i / QUEUES) % RING]);
    if (rc != 0 && rc != HBG_E_AGAIN)
      T_FAIL("event_query from a second thread -> %s", hbg_err_name(rc));
    hbg_dev_stats st;
    if (hbg_dev_stats_get(d, &st) != 0)
      T_FAIL("stats_get from a second thread failed");
    atomic_fetch_add(&polls, 1);
    i++;
  }
  return NULL;
}

/* Wait until the poller has made a round since the last checkpoint. */
static void await_poll(long *seen) {
  while (atomic_load(&polls) == *seen)
    sched_yield();
  *seen = atomic_load(&polls);
}

static uint8_t pattern(int q, int k, size_t j) {
  return (uint8_t)(q * 131 + k * 7 + (int)j);
}

int main(void) {
  ASSERT_OK(hbg_device_open("sim", "mem=16M,chunk=4K", &d));
  hbg_dev_queue *qs[QUEUES];
  hbg_devptr dev[QUEUES], status[QUEUES];
  uint8_t *ring[QUEUES];
  int last[QUEUES][SLOTS];
  for (int q = 0; q < QUEUES; q++) {
    /* one status block per queue: the queues' launches run at once, as a
     * GPU's streams do, so they may not share one */
    ASSERT_OK(hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &status[q]));
    ASSERT_OK(hbg_dev_queue_create(d, &qs[q]));
    ASSERT_OK(hbg_dev_mem_alloc(d, (size_t)SLOTS * SLOT, &dev[q]));
    ASSERT_OK(hbg_dev_host_alloc(d, (size_t)RING * SLOT, (void **)&ring[q]));
    for (int r = 0; r < RING; r++)
      ASSERT_OK(hbg_dev_event_create(d, &evs[q][r]));
    for (int sl = 0; sl < SLOTS; sl++)
      last[q][sl] = -1;
  }
  hbg_dev_stats s0;
  ASSERT_OK(hbg_dev_stats_get(d, &s0));

  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, poller, NULL), 0);
  uint8_t page[SLOT];
  long launches = 0, syncs = 0, asyncs = 0, seen = 0;
  for (int k = 0; k < ITERS; k++) {
    if (k % 250 == 0)
      await_poll(&seen);
    for (int q = 0; q < QUEUES; q++) {
      int r = k % RING, sl = (k * 5 + q) % SLOTS;
      size_t n = 1 + (size_t)((k * 131 + q * 17) % SLOT);
      /* the slot's previous copy must be done before it is rewritten */
      ASSERT_OK(hbg_dev_event_wait(d, evs[q][r]));
      uint8_t *src = ring[q] + (size_t)r * SLOT;
      for (size_t j = 0; j < SLOT; j++)
        src[j] = pattern(q, k, j);
      ASSERT_OK(hbg_dev_copy_h2d_async(d, qs[q], dev[q] + (size_t)sl * SLOT,
                                       src, n));
      if (n < SLOT)
        ASSERT_OK(hbg_dev_copy_h2d_async(
            d, qs[q], dev[q] + (size_t)sl * SLOT + n, src + n, SLOT - n));
      asyncs += n < SLOT ? 2 : 1;
      last[q][sl] = k;
      ASSERT_OK(hbg_dev_event_record(d, evs[q][r], qs[q]));
      if (k % 64 == q) {
        hbg_dev_launch_desc l = {.struct_size = sizeof l,
                                 .window = dev[q],
                                 .window_bytes = 256,
                                 .status = status[q]};
        ASSERT_OK(hbg_dev_launch(d, qs[q], &l));
        launches++;
      }
    }
    if (k % 97 == 0) {
      /* a synchronous pageable copy squeezed between the queues' work */
      ASSERT_OK(hbg_dev_queue_sync(d, qs[1]));
      memset(page, k & 0xff, sizeof page);
      int sl = (k * 5 + 1) % SLOTS;
      ASSERT_OK(hbg_dev_copy_h2d(d, dev[1] + (size_t)sl * SLOT, page,
                                 sizeof page));
      last[1][sl] = -2 - (k & 0xff);
      syncs++;
    }
  }
  for (int q = 0; q < QUEUES; q++)
    ASSERT_OK(hbg_dev_queue_sync(d, qs[q]));
  atomic_store(&stop, 1);
  ASSERT_EQ(pthread_join(t, NULL), 0);

  uint8_t back[SLOT];
  for (int q = 0; q < QUEUES; q++) {
    for (int sl = 0; sl < SLOTS; sl++) {
      if (last[q][sl] == -1)
        continue;
      ASSERT_OK(hbg_dev_copy_d2h(d, back, dev[q] + (size_t)sl * SLOT, SLOT));
      for (size_t j = 0; j < SLOT; j++) {
        uint8_t want = last[q][sl] >= 0 ? pattern(q, last[q][sl], j)
                                        : (uint8_t)(-2 - last[q][sl]);
        if (back[j] != want)
          T_FAIL("queue %d slot %d byte %zu: %u, want %u", q, sl, j, back[j],
                 want);
      }
    }
  }
  hbg_dev_stats s1;
  ASSERT_OK(hbg_dev_stats_get(d, &s1));
  ASSERT_UEQ(s1.async_copies - s0.async_copies, asyncs);
  ASSERT_UEQ(s1.async_degraded - s0.async_degraded, 0);
  ASSERT_UEQ(s1.launches - s0.launches, launches);
  ASSERT_UEQ(s1.h2d_copies - s0.h2d_copies, asyncs + syncs);

  for (int q = 0; q < QUEUES; q++) {
    for (int r = 0; r < RING; r++)
      ASSERT_OK(hbg_dev_event_destroy(d, evs[q][r]));
    ASSERT_OK(hbg_dev_queue_destroy(d, qs[q]));
    ASSERT_OK(hbg_dev_mem_free(d, dev[q]));
    ASSERT_OK(hbg_dev_host_free(d, ring[q]));
    ASSERT_OK(hbg_dev_mem_free(d, status[q]));
  }
  hbg_device_close(d);
  printf("sim_stress: ok (%ld polls)\n", (long)atomic_load(&polls));
  return 0;
}
