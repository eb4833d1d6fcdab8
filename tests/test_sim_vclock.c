/* The sim's clock=virtual: modelled costs are not slept but advance the
 * device's clock (hbg_dev_clock_ns), so a wait for the device lasts its
 * modelled time on that clock: sync copies, copies queued behind each
 * other on the one copy engine, events and their elapsed time, allocation
 * costs; a bind's phases then include the modelled waits while the bind
 * itself takes far less real time. clock=real (the default) still sleeps,
 * and a bad value fails the open naming it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_workload.h>

#include "common/util.h"
#include "test.h"

#define KB 1024u
#define BYTES (512u * KB)
/* 8.5 us fixed + 512 KiB at 0.001 GB/s (1 byte per ns): long enough
 * that real copy times stay far below it even on a loaded machine under
 * a sanitizer */
#define COPY_NS (8500u + (uint64_t)BYTES * 1000u)
#define OPTS "profile=ascend-a2,h2d_gbps=0.001"

static hbg_device *open_sim(const char *opts) {
  hbg_device *d;
  ASSERT_OK(hbg_device_open("sim", opts, &d));
  return d;
}

static void sync_copies(int vclock) {
  hbg_device *d = open_sim(vclock ? OPTS ",clock=virtual" : OPTS);
  hbg_devptr dst;
  void *src;
  ASSERT_OK(hbg_dev_mem_alloc(d, BYTES, &dst));
  ASSERT_OK(hbg_dev_host_alloc(d, BYTES, &src));
  memset(src, 7, BYTES);
  const int n = vclock ? 4 : 1; /* the real clock sleeps them */
  uint64_t t0 = hbg__now_ns(), c0 = hbg_dev_clock_ns(d);
  for (int i = 0; i < n; i++)
    ASSERT_OK(hbg_dev_copy_h2d(d, dst, src, BYTES));
  uint64_t t1 = hbg__now_ns(), c1 = hbg_dev_clock_ns(d);
  if (vclock) {
    /* the device's clock moved by the modelled time plus the host's own
     * share of the real time, and the copies were not slept */
    ASSERT_UGE(c1 - c0, (uint64_t)n * COPY_NS);
    ASSERT_ULE(c1 - c0, (uint64_t)n * COPY_NS + (t1 - t0));
    ASSERT_LT(t1 - t0, (uint64_t)n * COPY_NS / 2);
  } else {
    ASSERT_UGE(t1 - t0, (uint64_t)n * COPY_NS);
    /* the real device's clock is the host's (each read after the host's) */
    ASSERT_UGE(c0, t0);
    ASSERT_UGE(c1, t1);
    ASSERT_UGE(c1 - c0, (uint64_t)n * COPY_NS);
  }
  ASSERT_OK(hbg_dev_host_free(d, src));
  ASSERT_OK(hbg_dev_mem_free(d, dst));
  hbg_device_close(d);
}

/* Queued copies share the copy engine: three take three modelled times on
 * the device's clock, which the queue sync (and an event behind them)
 * reach; the events' elapsed time is on that clock too. */
static void queued(void) {
  hbg_device *d = open_sim(OPTS ",clock=virtual");
  hbg_devptr dst;
  void *src;
  ASSERT_OK(hbg_dev_mem_alloc(d, 3 * BYTES, &dst));
  ASSERT_OK(hbg_dev_host_alloc(d, BYTES, &src));
  hbg_dev_queue *q;
  hbg_dev_event *a, *b;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_OK(hbg_dev_event_create(d, &a));
  ASSERT_OK(hbg_dev_event_create(d, &b));
  uint64_t t0 = hbg__now_ns(), c0 = hbg_dev_clock_ns(d);
  ASSERT_OK(hbg_dev_event_record(d, a, q));
  for (int i = 0; i < 3; i++)
    ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst + (uint64_t)i * BYTES, src,
                                     BYTES));
  ASSERT_OK(hbg_dev_event_record(d, b, q));
  ASSERT_OK(hbg_dev_queue_sync(d, q));
  uint64_t t1 = hbg__now_ns(), c1 = hbg_dev_clock_ns(d);
  ASSERT_UGE(c1 - c0, 3 * COPY_NS);
  ASSERT_ULE(c1 - c0, 3 * COPY_NS + (t1 - t0));
  ASSERT_OK(hbg_dev_event_wait(d, b));
  uint64_t el = 0;
  ASSERT_OK(hbg_dev_event_elapsed(d, a, b, &el));
  ASSERT_UGE(el, 3 * COPY_NS);
  ASSERT_ULE(el, 3 * COPY_NS + (t1 - t0));
  /* waiting again for work done long ago costs nothing */
  uint64_t c2 = hbg_dev_clock_ns(d);
  ASSERT_OK(hbg_dev_event_wait(d, b));
  ASSERT_OK(hbg_dev_queue_sync(d, q));
  ASSERT_ULE(hbg_dev_clock_ns(d) - c2, hbg__now_ns() - t1);
  /* an allocation's modelled cost (8.5 us under ascend-a2) */
  hbg_devptr x;
  uint64_t c3 = hbg_dev_clock_ns(d);
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &x));
  ASSERT_UGE(hbg_dev_clock_ns(d) - c3, 8500u);
  ASSERT_OK(hbg_dev_mem_free(d, x));
  ASSERT_OK(hbg_dev_event_destroy(d, a));
  ASSERT_OK(hbg_dev_event_destroy(d, b));
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_host_free(d, src));
  ASSERT_OK(hbg_dev_mem_free(d, dst));
  hbg_device_close(d);
}

/* A deferred bind: per layer an allocation and a copy of its image, each
 * modelled; graph_upload counts them on the device's clock while the bind
 * takes much less real time. The results still verify. */
static void bind_phases(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = HBG_POLICY_DEFERRED;
  cfg.device_options = "profile=ascend-a2,h2d_gbps=0.001,clock=virtual";
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.layers = 4;
  hbg_workload *w;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  for (uint32_t step = 0; step < 2; step++) {
    hbg_bind *b;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, step));
    uint64_t t0 = hbg__now_ns();
    ASSERT_OK(hbg_bind_launch(b)); /* deferred: every upload is here */
    uint64_t real = hbg__now_ns() - t0;
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_stats st;
    st.struct_size = sizeof st;
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    hbg_bind_end(b);
    ASSERT_OK(hbg_workload_verify(w, step, NULL));
    /* 4 images of ~63 KB at 0.001 GB/s: ~63 ms each, plus allocation */
    uint64_t model = 4 * (8500u + 8500u + st.graph.bytes / 4 * 1000u);
    ASSERT_UGE(st.graph_upload_ns, model);
    ASSERT_LT(real, model / 2);
    ASSERT_UEQ(st.control_plane_ns,
               st.host_orch_ns + st.graph_upload_ns + st.window_upload_ns);
  }
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

int main(void) {
  hbg_device *d = NULL;
  ASSERT_ERR(hbg_device_open("sim", "clock=sundial", &d), HBG_E_INVAL);
  if (!strstr(hbg_device_open_error(), "clock=sundial"))
    T_FAIL("message: %s", hbg_device_open_error());
  ASSERT_ERR(hbg_device_open("sim", "clock=", &d), HBG_E_INVAL);
  ASSERT(hbg_dev_clock_ns(NULL) > 0);
  sync_copies(1);
  sync_copies(0);
  queued();
  bind_phases();
  return 0;
}
