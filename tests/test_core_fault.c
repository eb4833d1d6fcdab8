/* The fatal latch and a fault-injection sweep over every backend call of a
 * whole bind, for each policy: each failure gives an error, a failed bind is
 * never launched, nothing leaks, and the next bind succeeds. */
#include "chain_fixture.h"
#include "core/core.h"
#include "test.h"

#define L 4
#define N 32

static hbg_runtime *mk(hbg_device *dev, int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device_handle = dev;
  cfg.arena_bytes = 64 << 10;
  hbg_runtime *rt = NULL;
  int rc = hbg_runtime_create(&cfg, &rt);
  return rc ? NULL : rt;
}

static uint64_t launches(hbg_device *dev) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  return st.launches;
}

/* No device or pinned host memory is left allocated on the device. */
static void expect_nothing_held(hbg_device *inner) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(inner, &st));
  ASSERT_UEQ(st.mem_in_use, 0);
  ASSERT_UEQ(st.host_in_use, 0);
}

static void test_latch(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_runtime *rt = mk(dev, HBG_POLICY_PINNED_EAGER);
  ASSERT(rt);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  ASSERT_OK(chain_bind(&c, 0, NULL));
  ASSERT_OK(chain_bind(&c, 1, NULL));
  uint64_t before = launches(dev);
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  /* The third eager upload (layer 2) fails after its task was published. */
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_COPY_H2D, 3, 0));
  ASSERT_ERR(chain_submit(&c, b, 2), HBG_E_INJECTED);
  ASSERT_EQ(hbg_bind_fatal(b), HBG_E_INJECTED);
  hbg_task nop = {.kernel = HBG_KERNEL_NOP};
  ASSERT_ERR(hbg_submit_task(b, &nop, NULL), HBG_E_FATAL);
  ASSERT_ERR(hbg_bind_launch(b), HBG_E_FATAL);
  hbg_bind_stats st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  ASSERT_EQ(st.fatal, HBG_E_INJECTED);
  ASSERT_UEQ(launches(dev), before); /* never launched */
  int64_t code = 0;
  const char *msg = NULL;
  ASSERT_OK(hbg_runtime_last_native_error(rt, &code, &msg));
  ASSERT(strstr(msg, "injected") != NULL);
  hbg_bind_end(b);
  ASSERT_OK(chain_bind(&c, 3, NULL));
  /* An unreadable device status is the bind's outcome, also when asked
   * again. */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit(&c, b, 5));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_COPY_D2H, 1, 0));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_INJECTED);
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_INJECTED);
  hbg_bind_end(b);
  ASSERT_OK(chain_bind(&c, 4, NULL));
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  hbg_device_close(dev);
}

/* Recording the completion event fails after the launch: the bind has
 * reached the device, so it is not reported as failed (a caller retrying
 * it would run it twice). Launch drains the queue and collects the bind;
 * the wait gives the device's status without waiting again. */
static void test_untracked_launch(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_runtime *rt = mk(dev, p);
    ASSERT(rt);
    chain c;
    ASSERT_OK(chain_create(&c, rt, L, N));
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(chain_submit(&c, b, 0));
    uint64_t l0 = launches(dev);
    hbg_fault_reset(dev);
    ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_EVENT_RECORD, 1, 0));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_UEQ(hbg_fault_fired(dev), 1);
    ASSERT_UEQ(launches(dev), l0 + 1);
    ASSERT_EQ(hbg_bind_fatal(b), 0);
    ASSERT_OK(hbg_bind_wait(b));
    ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_EVENT_WAIT), 0);
    hbg_bind_end(b);
    ASSERT_OK(chain_verify(&c, 0));
    /* both slots work afterwards */
    ASSERT_OK(chain_bind(&c, 1, NULL));
    ASSERT_OK(chain_bind(&c, 2, NULL));
    chain_destroy(&c);
    hbg_runtime_destroy(rt);
  }
  expect_nothing_held(hbg_fault_inner(dev));
  hbg_device_close(dev);
}

/* Teardown waits for a bind still running on the device even when the
 * queue cannot be synchronised: the runtime's buffers it reads are not
 * freed under it, so it writes its right output. The bind is long (16
 * layers of 64K floats) so that it is likely still running when teardown
 * starts; three rounds per policy. */
static void test_teardown_sync_fails(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim;mem=256M", &dev));
  for (int i = 0; i < 3 * HBG_POLICY__COUNT; i++) {
    const int p = i % HBG_POLICY__COUNT;
    hbg_runtime *rt = mk(dev, p);
    ASSERT(rt);
    chain c;
    ASSERT_OK(chain_create(&c, rt, 16, 1u << 16));
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(chain_submit(&c, b, 0));
    ASSERT_OK(hbg_bind_launch(b));
    hbg_bind_end(b);
    hbg_fault_reset(dev);
    ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_QUEUE_SYNC, 1, 0));
    hbg_runtime_destroy(rt);
    ASSERT_UEQ(hbg_fault_fired(dev), 1);
    /* the chain's buffers belong to the device: read them on a new runtime */
    rt = mk(dev, p);
    ASSERT(rt);
    c.rt = rt;
    ASSERT_OK(chain_verify(&c, 0));
    chain_destroy(&c);
    hbg_runtime_destroy(rt);
  }
  expect_nothing_held(hbg_fault_inner(dev));
  hbg_device_close(dev);
}

/* A graph submission that fails before it is published gives its heap and
 * arena claims back (an extra heap block allocated for it is freed), leaves
 * the bind usable, and the same layer submitted again runs correctly. In a
 * cold bind the first layer claims an extra heap block (mem_alloc 1), then
 * its retained buffer (pinned-eager) or resident Definition (coalesced). */
static void test_unpublished_claims(int policy, int op, uint64_t k) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  hbg_runtime *rt = mk(dev, policy);
  ASSERT(rt);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task_id prev;
  ASSERT_OK(chain_submit_head(&c, b, &prev));
  const uint64_t heap0 = b->heap_used, arena0 = b->slot->arena.used;
  const uint32_t extra0 = b->slot->n_heap_extra, tasks0 = b->n_tasks;
  hbg_dev_stats st0 = {.struct_size = sizeof st0};
  ASSERT_OK(hbg_dev_stats_get(inner, &st0));

  ASSERT_OK(hbg_fault_arm(dev, op, k, 0));
  hbg_task_id p = prev;
  ASSERT_ERR(chain_submit_layer(&c, b, 0, 0, &p), HBG_E_INJECTED);
  ASSERT(hbg_fault_fired(dev));
  ASSERT_EQ(hbg_bind_fatal(b), 0); /* not published: no latch */
  ASSERT_UEQ(b->heap_used, heap0);
  ASSERT_UEQ(b->slot->arena.used, arena0);
  ASSERT_UEQ(b->slot->n_heap_extra, extra0);
  ASSERT_UEQ(b->n_tasks, tasks0);
  hbg_dev_stats st1 = {.struct_size = sizeof st1};
  ASSERT_OK(hbg_dev_stats_get(inner, &st1));
  ASSERT_UEQ(st1.mem_in_use, st0.mem_in_use);

  for (uint32_t l = 0; l < L; l++)
    ASSERT_OK(chain_submit_layer(&c, b, 0, l, &prev));
  ASSERT_OK(chain_submit_tail(&c, b, prev));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(chain_verify(&c, 0));
  ASSERT_OK(chain_bind(&c, 1, NULL));
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  expect_nothing_held(inner);
  hbg_device_close(dev);
}

/* Run one bind with the k-th backend call failing. */
static int bind_with_fault(hbg_device *dev, chain *c, uint32_t step,
                           uint64_t k, int *launched) {
  uint64_t l0 = launches(dev);
  hbg_fault_arm(dev, HBG_DEV_OP_ANY, k, 0);
  int rc = chain_bind(c, step, NULL);
  hbg_fault_arm(dev, HBG_DEV_OP_ANY, 0, 0);
  *launched = launches(dev) != l0;
  return rc;
}

static void sweep(int policy, int cold) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  hbg_dev_stats base = {.struct_size = sizeof base};
  ASSERT_OK(hbg_dev_stats_get(inner, &base));

  /* Count the calls of one bind. */
  hbg_runtime *rt = mk(dev, policy);
  ASSERT(rt);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  if (!cold)
    for (uint32_t s = 0; s < 2; s++)
      ASSERT_OK(chain_bind(&c, s, NULL));
  hbg_fault_reset(dev);
  ASSERT_OK(chain_bind(&c, 2, NULL));
  uint64_t calls = hbg_fault_calls(dev, HBG_DEV_OP_ANY);
  ASSERT(calls > 3);
  chain_destroy(&c);
  hbg_runtime_destroy(rt);

  uint64_t failed = 0;
  for (uint64_t k = 1; k <= calls; k++) {
    rt = mk(dev, policy);
    ASSERT(rt);
    ASSERT_OK(chain_create(&c, rt, L, N));
    if (!cold)
      for (uint32_t s = 0; s < 2; s++)
        ASSERT_OK(chain_bind(&c, s, NULL));
    hbg_fault_reset(dev);
    int launched = 0;
    int rc = bind_with_fault(dev, &c, 2, k, &launched);
    if (hbg_fault_fired(dev) && rc != 0)
      failed++;
    if (rc == HBG_E_VERIFY)
      T_FAIL("policy %s k=%llu: a failed call produced wrong output",
             hbg_policy_name(policy), (unsigned long long)k);
    /* Both binds after the failure work (both pipeline slots). */
    rc = chain_bind(&c, 3, NULL);
    if (rc)
      T_FAIL("policy %s k=%llu: next bind failed: %s", hbg_policy_name(policy),
             (unsigned long long)k, hbg_err_name(rc));
    ASSERT_OK(chain_bind(&c, 4, NULL));
    chain_destroy(&c);
    hbg_runtime_destroy(rt);
  }
  ASSERT(failed > 0);
  hbg_dev_stats end = {.struct_size = sizeof end};
  ASSERT_OK(hbg_dev_stats_get(inner, &end));
  ASSERT_UEQ(end.mem_in_use, base.mem_in_use);
  ASSERT_UEQ(end.host_in_use, base.host_in_use);
  printf("sweep %-12s %s: %llu calls, %llu failed binds\n",
         hbg_policy_name(policy), cold ? "cold" : "steady",
         (unsigned long long)calls, (unsigned long long)failed);
  hbg_device_close(dev);
}

static void sweep_create(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  hbg_fault_reset(dev);
  hbg_runtime *rt = mk(dev, HBG_POLICY_COALESCED);
  ASSERT(rt);
  uint64_t calls = hbg_fault_calls(dev, HBG_DEV_OP_ANY);
  hbg_runtime_destroy(rt);
  for (uint64_t k = 1; k <= calls; k++) {
    hbg_fault_arm(dev, HBG_DEV_OP_ANY, k, 0);
    rt = mk(dev, HBG_POLICY_COALESCED);
    hbg_fault_arm(dev, HBG_DEV_OP_ANY, 0, 0);
    if (hbg_fault_fired(dev))
      ASSERT(rt == NULL);
    hbg_runtime_destroy(rt);
    hbg_fault_reset(dev);
  }
  expect_nothing_held(inner);
  hbg_device_close(dev);
}

int main(void) {
  test_latch();
  test_untracked_launch();
  test_teardown_sync_fails();
  test_unpublished_claims(HBG_POLICY_PINNED_EAGER, HBG_DEV_OP_MEM_ALLOC, 2);
  test_unpublished_claims(HBG_POLICY_COALESCED, HBG_DEV_OP_MEM_ALLOC, 2);
  test_unpublished_claims(HBG_POLICY_COALESCED, HBG_DEV_OP_COPY_H2D, 1);
  sweep_create();
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    sweep(p, 0);
    sweep(p, 1);
  }
  printf("core fault: ok\n");
  return 0;
}
