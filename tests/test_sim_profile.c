/* The sim's cost model (option profile= and the cost keys): a modelled
 * copy never completes before its deadline and waits for it asleep; each
 * cost key delays what it models; overrides apply over a profile in any
 * order; "none" (the default) models nothing; bad names and values fail
 * the open with a message naming them. Only lower bounds on time are
 * asserted: a loaded machine can always be slower. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "device/sim/sim.h"
#include "test.h"

#define MS UINT64_C(1000000)

static uint64_t now_ns(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static hbg__sim_info info(hbg_device *d) {
  hbg__sim_info in;
  ASSERT_OK(hbg__sim_get_info(hbg__sim_from(d), &in));
  return in;
}

static hbg_device *open_sim(const char *opts) {
  hbg_device *d;
  ASSERT_OK(hbg_device_open("sim", opts, &d));
  return d;
}

/* The default and profile=none model nothing: copies of both kinds,
 * allocations and frees are never delayed by the model. */
static void test_none(const char *opts) {
  hbg_device *d = open_sim(opts);
  hbg__sim_info in = info(d);
  ASSERT_STREQ(in.profile, "none");
  hbg__sim_model zero;
  memset(&zero, 0, sizeof zero);
  ASSERT(memcmp(&in.model, &zero, sizeof zero) == 0);

  const size_t n = 100 << 10;
  hbg_devptr a;
  uint8_t *pinned, *pageable = malloc(n);
  ASSERT(pageable);
  memset(pageable, 7, n);
  ASSERT_OK(hbg_dev_host_alloc(d, n, (void **)&pinned));
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &a));
  ASSERT_OK(hbg_dev_copy_h2d(d, a, pinned, n));
  ASSERT_OK(hbg_dev_copy_h2d(d, a, pageable, n));
  ASSERT_OK(hbg_dev_copy_d2h(d, pageable, a, n));
  ASSERT_OK(hbg_dev_mem_free(d, a));
  in = info(d);
  ASSERT_UEQ(in.modelled, 0);
  ASSERT_UEQ(in.modelled_ns, 0);
  ASSERT_OK(hbg_dev_host_free(d, pinned));
  free(pageable);
  hbg_device_close(d);
}

/* A preset sets its parameters; the same copies as above are now modelled
 * (a profile's effect, compared with none's through the same counters). */
static void test_presets(void) {
  static const char *names[] = {"ascend-a2", "h200-pcie5"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char opts[64];
    snprintf(opts, sizeof opts, "profile=%s", names[i]);
    hbg_device *d = open_sim(opts);
    hbg__sim_info in = info(d);
    ASSERT_STREQ(in.profile, names[i]);
    ASSERT(in.model.copy_ns > 0 && in.model.h2d_mbps > 0);
    hbg_devptr a;
    uint8_t buf[4096] = {1};
    ASSERT_OK(hbg_dev_mem_alloc(d, sizeof buf, &a));
    ASSERT_OK(hbg_dev_copy_h2d(d, a, buf, sizeof buf));
    ASSERT_OK(hbg_dev_mem_free(d, a));
    in = info(d);
    ASSERT_UGE(in.modelled, 1);
    ASSERT_UGE(in.modelled_ns, in.model.copy_ns);
    hbg_device_close(d);
  }
  hbg_device *d = open_sim("profile=ascend-a2");
  ASSERT_UEQ(info(d).model.h2d_mbps, 3850); /* 3.85 GB/s */
  hbg_device_close(d);
}

/* Sync pinned, sync pageable (per-chunk cost and its own bandwidth) and
 * queued copies: each returns no sooner than its modelled duration after
 * it was submitted, and exactly that duration is accounted. */
static void test_copy_deadlines(void) {
  hbg_device *d = open_sim("chunk=4K,copy_us=20000,h2d_gbps=0.001,"
                           "pageable_gbps=0.002,chunk_us=2000");
  const size_t n = 10000; /* 10 ms at 1 MB/s; 3 chunks of 4 KiB */
  hbg_devptr a;
  uint8_t *pinned, *pageable = malloc(n);
  ASSERT(pageable);
  memset(pageable, 3, n);
  ASSERT_OK(hbg_dev_host_alloc(d, n, (void **)&pinned));
  memset(pinned, 5, n);
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &a));

  hbg__sim_info i0 = info(d);
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  ASSERT_OK(hbg_dev_copy_h2d(d, a, pinned, n));
  uint64_t t1 = now_ns(CLOCK_MONOTONIC);
  hbg__sim_info i1 = info(d);
  ASSERT_UEQ(i1.modelled_ns - i0.modelled_ns, 30 * MS);
  ASSERT_UGE(t1 - t0, 30 * MS);

  /* 20 ms once + 3 x 2 ms per chunk + 10000 B at 2 MB/s (5 ms) */
  ASSERT_OK(hbg_dev_copy_h2d(d, a, pageable, n));
  uint64_t t2 = now_ns(CLOCK_MONOTONIC);
  hbg__sim_info i2 = info(d);
  ASSERT_UEQ(i2.modelled_ns - i1.modelled_ns, 31 * MS);
  ASSERT_UGE(t2 - t1, 31 * MS);
  uint8_t back[10000];
  ASSERT_OK(hbg_dev_copy_d2h(d, back, a, n));
  ASSERT(memcmp(back, pageable, n) == 0); /* the copy was performed */

  /* Two queued copies: the second starts after the first completes. */
  hbg_dev_queue *q;
  hbg_dev_event *ev;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_OK(hbg_dev_event_create(d, &ev));
  uint64_t t3 = now_ns(CLOCK_MONOTONIC);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, a, pinned, n));
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, a, pinned, n));
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  ASSERT_OK(hbg_dev_event_wait(d, ev));
  ASSERT_UGE(now_ns(CLOCK_MONOTONIC) - t3, 60 * MS);
  ASSERT_OK(hbg_dev_queue_sync(d, q));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, a, n));
  ASSERT(memcmp(back, pinned, n) == 0);

  ASSERT_OK(hbg_dev_event_destroy(d, ev));
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, a));
  ASSERT_OK(hbg_dev_host_free(d, pinned));
  free(pageable);
  hbg_device_close(d);
}

/* 20 modelled copies of 20 ms each (long, so that a sanitized build's
 * fixed CPU cost stays small beside them), with the longest polling window
 * the sim allows: the waits sleep, so the process uses far less CPU than
 * the wall time (a wait that polled to the deadline would use about as much
 * CPU as wall time). */
static void test_waits_sleep(void) {
  hbg_device *d = open_sim("spin=100000,copy_us=20000");
  hbg_devptr a;
  uint8_t *pinned;
  ASSERT_OK(hbg_dev_host_alloc(d, 4096, (void **)&pinned));
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &a));
  uint64_t w0 = now_ns(CLOCK_MONOTONIC);
  uint64_t c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < 20; i++)
    ASSERT_OK(hbg_dev_copy_h2d(d, a, pinned, 4096));
  uint64_t c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  uint64_t w1 = now_ns(CLOCK_MONOTONIC);
  ASSERT_UGE(w1 - w0, 400 * MS);
  ASSERT_ULE(c1 - c0, (w1 - w0) / 3);
  ASSERT_OK(hbg_dev_mem_free(d, a));
  ASSERT_OK(hbg_dev_host_free(d, pinned));
  hbg_device_close(d);
}

/* Cost keys override the profile's values whichever order they come in;
 * the profile's other values stay; decimals are exact. */
static void test_overrides(void) {
  static const char *opts[] = {"profile=ascend-a2,copy_us=1500.25",
                               "copy_us=1500.25,profile=ascend-a2"};
  hbg_device *base = open_sim("profile=ascend-a2");
  hbg__sim_model pm = info(base).model;
  hbg_device_close(base);
  for (size_t i = 0; i < 2; i++) {
    hbg_device *d = open_sim(opts[i]);
    hbg__sim_info in = info(d);
    ASSERT_STREQ(in.profile, "ascend-a2");
    ASSERT_UEQ(in.model.copy_ns, 1500250);
    ASSERT_UEQ(in.model.h2d_mbps, pm.h2d_mbps);
    ASSERT_UEQ(in.model.alloc_ns, pm.alloc_ns);
    hbg_devptr a;
    uint8_t buf[64] = {0};
    ASSERT_OK(hbg_dev_mem_alloc(d, sizeof buf, &a));
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    ASSERT_OK(hbg_dev_copy_h2d(d, a, buf, sizeof buf));
    ASSERT_UGE(now_ns(CLOCK_MONOTONIC) - t0, 1500250);
    ASSERT_OK(hbg_dev_mem_free(d, a));
    hbg_device_close(d);
  }
  /* An override to 0 switches a preset's cost off. */
  hbg_device *d = open_sim("profile=h200-pcie5,free_sync=0,launch_us=0");
  ASSERT_UEQ(info(d).model.free_sync, 0);
  ASSERT_UEQ(info(d).model.launch_ns, 0);
  hbg_device_close(d);
}

/* Allocation, free and launch costs delay the calling op. */
static void test_op_costs(void) {
  hbg_device *d = open_sim("alloc_us=10000,free_us=12000,launch_us=8000");
  hbg_devptr a, st;
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &a));
  uint64_t t1 = now_ns(CLOCK_MONOTONIC);
  ASSERT_UGE(t1 - t0, 10 * MS);
  ASSERT_OK(hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &st));
  hbg_dev_queue *q;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  hbg_dev_launch_desc l = {.struct_size = sizeof l, .status = st};
  uint64_t t2 = now_ns(CLOCK_MONOTONIC);
  ASSERT_OK(hbg_dev_launch(d, q, &l)); /* an empty window: fails inside */
  ASSERT_UGE(now_ns(CLOCK_MONOTONIC) - t2, 8 * MS);
  (void)hbg_dev_queue_sync(d, q);
  uint64_t t3 = now_ns(CLOCK_MONOTONIC);
  ASSERT_OK(hbg_dev_mem_free(d, a));
  ASSERT_UGE(now_ns(CLOCK_MONOTONIC) - t3, 12 * MS);
  ASSERT_UEQ(info(d).modelled_ns, 2 * 10 * MS + 8 * MS + 12 * MS);
  ASSERT_OK(hbg_dev_mem_free(d, st));
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  hbg_device_close(d);
}

/* free_sync=1: a free returns only once every queue has drained, as
 * cudaFree synchronises the device. */
static void test_free_sync(void) {
  hbg_device *d = open_sim("free_sync=1,copy_us=30000");
  hbg_devptr a, b;
  uint8_t *pinned;
  ASSERT_OK(hbg_dev_host_alloc(d, 4096, (void **)&pinned));
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &a));
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &b));
  hbg_dev_queue *q;
  hbg_dev_event *ev;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_OK(hbg_dev_event_create(d, &ev));
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, a, pinned, 4096));
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  ASSERT_OK(hbg_dev_mem_free(d, b)); /* not the block being copied to */
  ASSERT_UGE(now_ns(CLOCK_MONOTONIC) - t0, 30 * MS);
  ASSERT_OK(hbg_dev_event_query(d, ev));
  ASSERT_OK(hbg_dev_event_destroy(d, ev));
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, a));
  ASSERT_OK(hbg_dev_host_free(d, pinned));
  hbg_device_close(d);
}

static void open_fails(const char *opts, const char *want) {
  hbg_device *d = NULL;
  ASSERT_ERR(hbg_device_open("sim", opts, &d), HBG_E_INVAL);
  ASSERT(d == NULL);
  const char *e = hbg_device_open_error();
  if (!strstr(e, want))
    T_FAIL("open '%s': error '%s' does not name '%s'", opts, e, want);
}

static void test_errors(void) {
  open_fails("profile=tpu-v9", "unknown profile");
  open_fails("profile=tpu-v9", "'profile=tpu-v9'");
  open_fails("mem=64M,profile=", "'profile='");
  open_fails("copy_us=abc", "bad or out-of-range value in 'copy_us=abc'");
  open_fails("copy_us=", "'copy_us='");
  open_fails("copy_us=1.2345", "'copy_us=1.2345'");
  open_fails("copy_us=1..2", "'copy_us=1..2'");
  open_fails("copy_us=-1", "'copy_us=-1'");
  open_fails("alloc_us=1000001", "'alloc_us=1000001'");
  open_fails("h2d_gbps=1e3", "'h2d_gbps=1e3'");
  open_fails("free_sync=2", "'free_sync=2'");
  open_fails("profile=ascend-a2,launch_us=x", "'launch_us=x'");
  open_fails("copy_ms=5", "unknown option 'copy_ms'");
}

int main(void) {
  test_none(NULL);
  test_none("profile=none");
  test_presets();
  test_copy_deadlines();
  test_waits_sleep();
  test_overrides();
  test_op_costs();
  test_free_sync();
  test_errors();
  return 0;
}
