/* Device time by device events: the sim's event_elapsed measures on its own
 * completion clock (at least a modelled copy's duration between two
 * events); a bind's device_ns lies inside its exec_ns; the fault wrapper
 * passes the op through and a failed start record or elapsed read leaves
 * the bind untimed but intact; an ops table built against the first ABI
 * (shorter struct_size) opens, reads the op as NULL and binds with
 * device_ns 0. The sim's executor reports its own split of the launch
 * (set-up and run by its clock, inside device_ns; node records set-up
 * read; Definitions validated), a caller built before the split gets its
 * struct and nothing past it, and a backend that writes only the first
 * version of the status leaves the split unreported. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chain_fixture.h"
#include "core/core.h"
#include "test.h"

#define MODEL_US 2000u

/* Two events around an async copy the cost model holds for MODEL_US: the
 * copy's completion is not before its service start + MODEL_US, and the
 * start event completed no later than that service start. */
static void test_sim_elapsed(void) {
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("sim", "copy_us=2000", &d));
  hbg_dev_queue *q = NULL;
  hbg_dev_event *a = NULL, *b = NULL;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_OK(hbg_dev_event_create(d, &a));
  ASSERT_OK(hbg_dev_event_create(d, &b));
  uint64_t ns = 7;
  ASSERT_ERR(hbg_dev_event_elapsed(d, a, b, &ns), HBG_E_STATE);
  ASSERT_ERR(hbg_dev_event_elapsed(d, a, b, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_elapsed(d, NULL, b, &ns), HBG_E_INVAL);
  ASSERT_UEQ(ns, 7);
  uint8_t *pin = NULL;
  hbg_devptr dst = 0;
  ASSERT_OK(hbg_dev_host_alloc(d, 4096, (void **)&pin));
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &dst));
  memset(pin, 0x5a, 4096);
  ASSERT_OK(hbg_dev_event_record(d, a, q));
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, pin, 4096));
  ASSERT_OK(hbg_dev_event_record(d, b, q));
  ASSERT_OK(hbg_dev_event_wait(d, b));
  ASSERT_OK(hbg_dev_event_elapsed(d, a, b, &ns));
  ASSERT_UGE(ns, (uint64_t)MODEL_US * 1000u);
  /* end before start reads as 0 */
  ASSERT_OK(hbg_dev_event_elapsed(d, b, a, &ns));
  ASSERT_UEQ(ns, 0);
  ASSERT_OK(hbg_dev_event_destroy(d, a));
  ASSERT_OK(hbg_dev_event_destroy(d, b));
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, dst));
  ASSERT_OK(hbg_dev_host_free(d, pin));
  hbg_device_close(d);
}

static hbg_runtime *mk(hbg_device *dev, int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device_handle = dev;
  cfg.arena_bytes = 64 << 10;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

/* Every policy on the sim, directly and through the fault wrapper: the
 * launch is timed, inside launch -> completion on the host clock the sim
 * shares. */
static void test_bind_device_ns(const char *name, const char *opts) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open(name, opts, &dev));
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_runtime *rt = mk(dev, p);
    chain c;
    ASSERT_OK(chain_create(&c, rt, 4, 1024));
    for (uint32_t step = 0; step < 3; step++) {
      hbg_bind_stats st;
      memset(&st, 0xff, sizeof st);
      ASSERT_OK(chain_bind(&c, step, &st));
      ASSERT(st.device_ns > 0);
      ASSERT_ULE(st.device_ns, st.exec_ns);
      /* the sim's executor times its own set-up and run inside that */
      ASSERT_UEQ(st.exec_split, 1);
      ASSERT(st.device_setup_ns > 0 && st.device_run_ns > 0);
      ASSERT_ULE(st.device_setup_ns + st.device_run_ns, st.device_ns);
      /* at most one per graph submission; a resident Definition's verdict
       * is kept after its first bind; set-up reads node records only to
       * validate a Definition (no walk of every node) */
      ASSERT_ULE(st.exec_defs_validated, st.n_graphs);
      ASSERT_EQ(st.exec_setup_nodes > 0, st.exec_defs_validated > 0);
      if (p == HBG_POLICY_COALESCED && step > 0) {
        ASSERT_UEQ(st.exec_defs_validated, 0);
        ASSERT_UEQ(st.exec_setup_nodes, 0);
      }
    }
    chain_destroy(&c);
    hbg_runtime_destroy(rt);
  }
  hbg_device_close(dev);
}

/* A caller built before device_ns (struct_size HBG_BIND_STATS_SIZE_V1)
 * gets its struct and nothing past it; a current caller gets device_ns. */
static void test_v1_bind_stats(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", NULL, &dev));
  hbg_runtime *rt = mk(dev, HBG_POLICY_COALESCED);
  chain c;
  ASSERT_OK(chain_create(&c, rt, 2, 256));
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit(&c, b, 1));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  unsigned char raw[sizeof(hbg_bind_stats)];
  memset(raw, 0xA5, sizeof raw);
  hbg_bind_stats *old = (hbg_bind_stats *)(void *)raw;
  old->struct_size = HBG_BIND_STATS_SIZE_V1;
  ASSERT_OK(hbg_bind_stats_get(b, old));
  ASSERT_UEQ(old->struct_size, HBG_BIND_STATS_SIZE_V1);
  ASSERT(old->control_plane_ns > 0);
  for (size_t k = HBG_BIND_STATS_SIZE_V1; k < sizeof raw; k++)
    ASSERT_EQ(raw[k], 0xA5);
  /* built before the executor's split: device_ns and nothing after */
  memset(raw, 0xA5, sizeof raw);
  old->struct_size = HBG_BIND_STATS_SIZE_V2;
  ASSERT_OK(hbg_bind_stats_get(b, old));
  ASSERT_UEQ(old->struct_size, HBG_BIND_STATS_SIZE_V2);
  ASSERT(old->device_ns > 0);
  for (size_t k = HBG_BIND_STATS_SIZE_V2; k < sizeof raw; k++)
    ASSERT_EQ(raw[k], 0xA5);
  hbg_bind_stats st;
  st.struct_size = sizeof st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  ASSERT_UEQ(st.struct_size, sizeof st);
  ASSERT(st.device_ns > 0);
  ASSERT_UEQ(st.device_ns, old->device_ns);
  ASSERT_UEQ(st.exec_split, 1);
  ASSERT_UEQ(st.control_plane_ns, old->control_plane_ns);
  hbg_bind_end(b);
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  hbg_device_close(dev);
}

/* One bind with the k-th call of op failing by injection. */
static hbg_bind_stats faulted_bind(hbg_device *dev, hbg_runtime *rt, chain *c,
                                   int op, uint64_t step) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit(c, b, (uint32_t)step));
  hbg_fault_reset(dev);
  ASSERT_OK(hbg_fault_arm(dev, op, 1, 0));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  ASSERT_OK(hbg_fault_arm(dev, op, 0, 0));
  ASSERT_UEQ(hbg_fault_fired(dev), 1);
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_EVENT_WAIT), 1); /* tracked */
  hbg_bind_stats st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  ASSERT_EQ(st.device_status, 0);
  hbg_bind_end(b);
  ASSERT_OK(chain_verify(c, (uint32_t)step));
  return st;
}

/* The start record (the launch's first) or the elapsed read fails: the
 * bind runs, is waited on its completion event and has device_ns 0. */
static void test_timer_faults(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_runtime *rt = mk(dev, HBG_POLICY_COALESCED);
  chain c;
  ASSERT_OK(chain_create(&c, rt, 4, 1024));
  hbg_bind_stats st = faulted_bind(dev, rt, &c, HBG_DEV_OP_EVENT_RECORD, 0);
  ASSERT_UEQ(st.device_ns, 0);
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_EVENT_ELAPSED), 0);
  st = faulted_bind(dev, rt, &c, HBG_DEV_OP_EVENT_ELAPSED, 1);
  ASSERT_UEQ(st.device_ns, 0);
  ASSERT(st.exec_ns > 0);
  /* and the next bind is timed again */
  hbg_fault_reset(dev);
  ASSERT_OK(chain_bind(&c, 2, &st));
  ASSERT(st.device_ns > 0);
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_EVENT_ELAPSED), 1);
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  hbg_device_close(dev);
}

/* The sim's ops in a table that ends where the first ABI's did, in a heap
 * block of exactly that size (a read past it is an ASan error). */
static void test_v1_ops(void) {
  const hbg_dev_ops *sim = hbg_device_find("sim");
  ASSERT(sim && sim->event_elapsed);
  unsigned char *blk = malloc(HBG_DEV_OPS_V1_SIZE);
  ASSERT(blk);
  memcpy(blk, sim, HBG_DEV_OPS_V1_SIZE);
  uint32_t size = (uint32_t)HBG_DEV_OPS_V1_SIZE;
  memcpy(blk + offsetof(hbg_dev_ops, struct_size), &size, sizeof size);
  const hbg_dev_ops *v1 = (const hbg_dev_ops *)(void *)blk;
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open_ops(v1, NULL, &dev));
  hbg_dev_queue *q = NULL;
  hbg_dev_event *a = NULL;
  ASSERT_OK(hbg_dev_queue_create(dev, &q));
  ASSERT_OK(hbg_dev_event_create(dev, &a));
  ASSERT_OK(hbg_dev_event_record(dev, a, q));
  ASSERT_OK(hbg_dev_event_wait(dev, a));
  uint64_t ns = 7;
  ASSERT_ERR(hbg_dev_event_elapsed(dev, a, a, &ns), HBG_E_UNSUPPORTED);
  ASSERT_UEQ(ns, 7);
  ASSERT_OK(hbg_dev_event_destroy(dev, a));
  ASSERT_OK(hbg_dev_queue_destroy(dev, q));
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_runtime *rt = mk(dev, p);
    chain c;
    ASSERT_OK(chain_create(&c, rt, 4, 1024));
    hbg_bind_stats st;
    memset(&st, 0xff, sizeof st);
    ASSERT_OK(chain_bind(&c, 1, &st));
    ASSERT_UEQ(st.device_ns, 0);
    ASSERT(st.exec_ns > 0);
    chain_destroy(&c);
    hbg_runtime_destroy(rt);
  }
  hbg_device_close(dev);
  /* one byte short of the first ABI is refused */
  size--;
  memcpy(blk + offsetof(hbg_dev_ops, struct_size), &size, sizeof size);
  dev = NULL;
  ASSERT_ERR(hbg_device_open_ops(v1, NULL, &dev), HBG_E_INVAL);
  ASSERT(dev == NULL);
  free(blk);
}

/* The status word's fields past the first version read 0 until a backend
 * writes them, whatever the allocation held: the memory the sim hands the
 * runtime's status word is first filled with 0xff and freed. */
static void test_status_zeroed(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", NULL, &dev));
  hbg_devptr junk = 0;
  unsigned char ff[sizeof(hbg_dev_status)];
  memset(ff, 0xff, sizeof ff);
  ASSERT_OK(hbg_dev_mem_alloc(dev, sizeof ff, &junk));
  ASSERT_OK(hbg_dev_copy_h2d(dev, junk, ff, sizeof ff));
  ASSERT_OK(hbg_dev_mem_free(dev, junk));
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device_handle = dev;
  cfg.policy = HBG_POLICY_DEFERRED; /* no arena: the status comes first */
  cfg.pipeline_depth = 1;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_UEQ(rt->slots[0].status_dev, junk); /* the sim's first fit */
  hbg_dev_status st;
  memset(&st, 0xab, sizeof st);
  ASSERT_OK(hbg_dev_copy_d2h(dev, &st, rt->slots[0].status_dev, sizeof st));
  ASSERT_UEQ(st.flags, 0);
  ASSERT_UEQ(st.setup_nodes, 0);
  hbg_runtime_destroy(rt);
  hbg_device_close(dev);
}

int main(void) {
  test_sim_elapsed();
  test_status_zeroed();
  test_v1_bind_stats();
  test_bind_device_ns("sim", NULL);
  test_bind_device_ns("fault", "inner=sim");
  test_timer_faults();
  test_v1_ops();
  printf("device timing: ok\n");
  return 0;
}
