/* The fault-injection wrapper: forwarding, per-op counts, k-th call
 * semantics per op and for any op, native error text, releasing ops that
 * still release, reset and disarm, and a full allocation-failure sweep
 * that must never leak. */
#include <pthread.h>
#include <stdint.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "device/sim/sim.h"
#include "test.h"

static hbg_dev_stats stats(hbg_device *d) {
  hbg_dev_stats st;
  ASSERT_OK(hbg_dev_stats_get(d, &st));
  return st;
}

static hbg__sim_info info(hbg_device *d) {
  hbg__sim_info in;
  ASSERT_OK(hbg__sim_get_info(hbg__sim_from(d), &in));
  return in;
}

static void test_forwarding(void) {
  hbg_device *f;
  ASSERT_OK(hbg_device_open("fault", "inner=sim;mem=8M,chunk=4K", &f));
  ASSERT_STREQ(hbg_device_name(f), "fault");
  hbg_device *in = hbg_fault_inner(f);
  ASSERT(in != NULL);
  ASSERT_STREQ(hbg_device_name(in), "sim");
  ASSERT(hbg__sim_from(f) == hbg__sim_from(in));
  ASSERT(hbg__sim_from(f) != NULL);

  hbg_dev_caps a, b;
  ASSERT_OK(hbg_dev_caps_get(f, &a));
  ASSERT_OK(hbg_dev_caps_get(in, &b));
  ASSERT(memcmp(&a, &b, sizeof a) == 0);
  ASSERT_UEQ(a.mem_bytes, 8u << 20);

  /* every op is forwarded and counted */
  hbg_devptr p;
  void *h;
  hbg_dev_queue *q;
  hbg_dev_event *ev;
  uint8_t buf[10000];
  memset(buf, 3, sizeof buf);
  ASSERT_OK(hbg_dev_mem_alloc(f, sizeof buf, &p));
  ASSERT_OK(hbg_dev_host_alloc(f, 4096, &h));
  ASSERT_OK(hbg_dev_host_register(f, buf, sizeof buf));
  ASSERT_OK(hbg_dev_copy_h2d(f, p, buf, sizeof buf));
  ASSERT_OK(hbg_dev_host_unregister(f, buf));
  ASSERT_OK(hbg_dev_copy_h2d(f, p, buf, sizeof buf)); /* pageable, 4K chunks */
  ASSERT_OK(hbg_dev_copy_d2h(f, buf, p, sizeof buf));
  ASSERT_OK(hbg_dev_queue_create(f, &q));
  ASSERT_OK(hbg_dev_event_create(f, &ev));
  ASSERT_OK(hbg_dev_copy_h2d_async(f, q, p, h, 4096));
  ASSERT_OK(hbg_dev_event_record(f, ev, q));
  ASSERT_OK(hbg_dev_event_wait(f, ev));
  ASSERT_OK(hbg_dev_event_query(f, ev));
  hbg_devptr st;
  ASSERT_OK(hbg_dev_mem_alloc(f, sizeof(hbg_dev_status), &st));
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = p,
                           .window_bytes = 256,
                           .status = st};
  ASSERT_OK(hbg_dev_launch(f, q, &l));
  ASSERT_OK(hbg_dev_queue_sync(f, q));
  ASSERT_OK(hbg_dev_event_destroy(f, ev));
  ASSERT_OK(hbg_dev_queue_destroy(f, q));
  ASSERT_OK(hbg_dev_host_free(f, h));
  ASSERT_OK(hbg_dev_mem_free(f, p));
  ASSERT_OK(hbg_dev_mem_free(f, st));

  static const int once[] = {
      HBG_DEV_OP_HOST_ALLOC,   HBG_DEV_OP_HOST_FREE,    HBG_DEV_OP_HOST_REGISTER,
      HBG_DEV_OP_HOST_UNREGISTER, HBG_DEV_OP_COPY_D2H,  HBG_DEV_OP_QUEUE_CREATE,
      HBG_DEV_OP_QUEUE_DESTROY, HBG_DEV_OP_COPY_H2D_ASYNC, HBG_DEV_OP_QUEUE_SYNC,
      HBG_DEV_OP_EVENT_CREATE, HBG_DEV_OP_EVENT_DESTROY, HBG_DEV_OP_EVENT_RECORD,
      HBG_DEV_OP_EVENT_QUERY,  HBG_DEV_OP_EVENT_WAIT,   HBG_DEV_OP_LAUNCH};
  for (size_t i = 0; i < sizeof once / sizeof once[0]; i++)
    if (hbg_fault_calls(f, once[i]) != 1)
      T_FAIL("%s: %llu calls", hbg_dev_op_name(once[i]),
             (unsigned long long)hbg_fault_calls(f, once[i]));
  ASSERT_UEQ(hbg_fault_calls(f, HBG_DEV_OP_MEM_ALLOC), 2);
  ASSERT_UEQ(hbg_fault_calls(f, HBG_DEV_OP_MEM_FREE), 2);
  ASSERT_UEQ(hbg_fault_calls(f, HBG_DEV_OP_COPY_H2D), 2);
  ASSERT_UEQ(hbg_fault_calls(f, HBG_DEV_OP_ANY), 15 + 6);
  ASSERT_UEQ(hbg_fault_calls(f, 999), 0);
  ASSERT_UEQ(hbg_fault_fired(f), 0);

  /* stats are the inner device's */
  hbg_dev_stats sf = stats(f), si = stats(in);
  ASSERT(memcmp(&sf, &si, sizeof sf) == 0);
  ASSERT_UEQ(sf.bounce_chunks, 3 + 3);
  ASSERT_UEQ(sf.pinned_direct, 2);
  ASSERT_UEQ(sf.launches, 1);

  /* inner errors come through with the inner's native message */
  ASSERT_ERR(hbg_dev_mem_free(f, p), HBG_E_RANGE);
  int64_t code;
  const char *msg;
  ASSERT_OK(hbg_device_native_error(f, &code, &msg));
  ASSERT(strstr(msg, "mem_free") != NULL);
  hbg_device_close(f);

  /* default inner is sim */
  ASSERT_OK(hbg_device_open("fault", NULL, &f));
  ASSERT_STREQ(hbg_device_name(hbg_fault_inner(f)), "sim");
  hbg_device_close(f);
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &f));
  hbg_device_close(f);
}

static void test_arm(void) {
  hbg_device *f;
  ASSERT_OK(hbg_device_open("fault", "inner=sim;mem=4M", &f));
  hbg_devptr p[4], x = 0x1234;
  int64_t code;
  const char *msg;

  /* misuse */
  ASSERT_ERR(hbg_fault_arm(NULL, HBG_DEV_OP_ANY, 1, 0), HBG_E_INVAL);
  ASSERT_ERR(hbg_fault_arm(f, HBG_DEV_OP__COUNT, 1, 0), HBG_E_INVAL);
  ASSERT_ERR(hbg_fault_arm(f, -1, 1, 0), HBG_E_INVAL);
  ASSERT_ERR(hbg_fault_arm(f, HBG_DEV_OP_ANY, 1, 5), HBG_E_INVAL);
  ASSERT_UEQ(hbg_fault_calls(NULL, HBG_DEV_OP_ANY), 0);
  ASSERT_UEQ(hbg_fault_fired(NULL), 0);
  hbg_fault_reset(NULL);
  ASSERT(hbg_fault_inner(NULL) == NULL);

  /* k-th call of one op, counted from the arm */
  ASSERT_OK(hbg_dev_mem_alloc(f, 64, &p[0]));
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_MEM_ALLOC, 3, 0));
  ASSERT_OK(hbg_dev_copy_h2d(f, p[0], "abc", 3)); /* other ops don't count */
  ASSERT_OK(hbg_dev_mem_alloc(f, 64, &p[1]));
  ASSERT_OK(hbg_dev_mem_alloc(f, 64, &p[2]));
  ASSERT_ERR(hbg_dev_mem_alloc(f, 64, &x), HBG_E_INJECTED);
  ASSERT_UEQ(x, 0x1234); /* output untouched */
  ASSERT_UEQ(hbg_fault_fired(f), 1);
  ASSERT_OK(hbg_device_native_error(f, &code, &msg));
  ASSERT_EQ(code, 9999);
  ASSERT_STREQ(msg, "injected fault in mem_alloc (call 4)");
  ASSERT_UEQ(stats(f).mem_allocs, 3); /* not forwarded */
  ASSERT_OK(hbg_dev_mem_alloc(f, 64, &p[3])); /* one-shot */
  ASSERT_UEQ(hbg_fault_fired(f), 1);
  ASSERT_UEQ(hbg_fault_calls(f, HBG_DEV_OP_MEM_ALLOC), 5);

  /* a chosen error code */
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_COPY_D2H, 1, HBG_E_DEVICE));
  char b[3];
  ASSERT_ERR(hbg_dev_copy_d2h(f, b, p[0], 3), HBG_E_DEVICE);
  ASSERT_OK(hbg_dev_copy_d2h(f, b, p[0], 3));
  ASSERT(memcmp(b, "abc", 3) == 0);

  /* any op */
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_ANY, 2, 0));
  hbg_dev_queue *q = NULL;
  ASSERT_OK(hbg_dev_copy_h2d(f, p[0], "xyz", 3));
  ASSERT_ERR(hbg_dev_queue_create(f, &q), HBG_E_INJECTED);
  ASSERT(q == NULL);
  ASSERT_OK(hbg_device_native_error(f, &code, &msg));
  ASSERT_STREQ(msg, "injected fault in queue_create (call 1)");
  ASSERT_OK(hbg_dev_queue_create(f, &q));

  /* disarm with k == 0 */
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_ANY, 1, 0));
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_ANY, 0, 0));
  ASSERT_OK(hbg_dev_queue_sync(f, q));
  /* re-arming replaces the previous arm */
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_MEM_ALLOC, 1, 0));
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_QUEUE_SYNC, 1, 0));
  hbg_devptr y;
  ASSERT_OK(hbg_dev_mem_alloc(f, 64, &y));
  ASSERT_ERR(hbg_dev_queue_sync(f, q), HBG_E_INJECTED);

  /* reset: counts and fired back to 0, armed fault dropped */
  ASSERT_GT(hbg_fault_calls(f, HBG_DEV_OP_ANY), 0);
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_MEM_FREE, 1, 0));
  hbg_fault_reset(f);
  ASSERT_UEQ(hbg_fault_calls(f, HBG_DEV_OP_ANY), 0);
  ASSERT_UEQ(hbg_fault_fired(f), 0);
  ASSERT_OK(hbg_dev_mem_free(f, y));
  ASSERT_UEQ(hbg_fault_calls(f, HBG_DEV_OP_MEM_FREE), 1);

  /* releasing ops release anyway, then report the injected error */
  hbg_dev_event *ev;
  void *h;
  static char reg[4096];
  ASSERT_OK(hbg_dev_event_create(f, &ev));
  ASSERT_OK(hbg_dev_host_alloc(f, 100, &h));
  ASSERT_OK(hbg_dev_host_register(f, reg, sizeof reg));
  hbg__sim_info i0 = info(f);
  hbg_dev_stats s0 = stats(f);

  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_MEM_FREE, 1, 0));
  ASSERT_ERR(hbg_dev_mem_free(f, p[1]), HBG_E_INJECTED);
  ASSERT_ERR(hbg_dev_mem_free(f, p[1]), HBG_E_RANGE); /* really freed */
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_HOST_FREE, 1, 0));
  ASSERT_ERR(hbg_dev_host_free(f, h), HBG_E_INJECTED);
  ASSERT_ERR(hbg_dev_host_free(f, h), HBG_E_INVAL);
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_HOST_UNREGISTER, 1, 0));
  ASSERT_ERR(hbg_dev_host_unregister(f, reg), HBG_E_INJECTED);
  ASSERT_ERR(hbg_dev_host_unregister(f, reg), HBG_E_INVAL);
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_EVENT_DESTROY, 1, 0));
  ASSERT_ERR(hbg_dev_event_destroy(f, ev), HBG_E_INJECTED);
  ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_QUEUE_DESTROY, 1, 0));
  ASSERT_ERR(hbg_dev_queue_destroy(f, q), HBG_E_INJECTED);
  ASSERT_UEQ(hbg_fault_fired(f), 5);
  ASSERT_OK(hbg_device_native_error(f, &code, &msg));
  ASSERT_STREQ(msg, "injected fault in queue_destroy (call 1)");

  hbg__sim_info i1 = info(f);
  hbg_dev_stats s1 = stats(f);
  ASSERT_EQ(i1.queues, i0.queues - 1);
  ASSERT_EQ(i1.events, i0.events - 1);
  ASSERT_UEQ(i1.registrations, i0.registrations - 2);
  ASSERT_UEQ(s1.mem_frees - s0.mem_frees, 1);
  ASSERT_UEQ(s1.host_frees - s0.host_frees, 1);

  for (int i = 0; i < 4; i++)
    if (i != 1)
      ASSERT_OK(hbg_dev_mem_free(f, p[i]));
  ASSERT_UEQ(stats(f).mem_in_use, 0);
  hbg_device_close(f);
}

/* A scenario that unwinds on any error; the sweep fails each call in turn. */
static int scenario(hbg_device *f) {
  int rc;
  void *h = NULL;
  hbg_devptr p = 0, st = 0;
  hbg_dev_queue *q = NULL;
  hbg_dev_event *ev = NULL;
  static uint8_t page[20000];
  if ((rc = hbg_dev_host_alloc(f, 20000, &h)) < 0)
    goto err;
  if ((rc = hbg_dev_mem_alloc(f, 20000, &p)) < 0)
    goto err_host;
  if ((rc = hbg_dev_mem_alloc(f, sizeof(hbg_dev_status), &st)) < 0)
    goto err_mem;
  if ((rc = hbg_dev_queue_create(f, &q)) < 0)
    goto err_st;
  if ((rc = hbg_dev_event_create(f, &ev)) < 0)
    goto err_queue;
  if ((rc = hbg_dev_host_register(f, page, sizeof page)) < 0)
    goto err_event;
  memset(h, 1, 20000);
  if ((rc = hbg_dev_copy_h2d_async(f, q, p, h, 20000)) < 0)
    goto err_reg;
  if ((rc = hbg_dev_event_record(f, ev, q)) < 0)
    goto err_reg;
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = p,
                           .window_bytes = 256,
                           .status = st};
  if ((rc = hbg_dev_launch(f, q, &l)) < 0)
    goto err_reg;
  if ((rc = hbg_dev_event_wait(f, ev)) < 0)
    goto err_reg;
  if ((rc = hbg_dev_event_query(f, ev)) < 0)
    goto err_reg;
  if ((rc = hbg_dev_queue_sync(f, q)) < 0)
    goto err_reg;
  if ((rc = hbg_dev_copy_d2h(f, page, p, sizeof page)) < 0)
    goto err_reg;
  if ((rc = hbg_dev_copy_h2d(f, p, page, sizeof page)) < 0)
    goto err_reg;
  if (page[0] != 1 || page[sizeof page - 1] != 1)
    rc = HBG_E_VERIFY;

err_reg:
  hbg_dev_host_unregister(f, page);
err_event:
  hbg_dev_event_destroy(f, ev);
err_queue:
  hbg_dev_queue_destroy(f, q);
err_st:
  hbg_dev_mem_free(f, st);
err_mem:
  hbg_dev_mem_free(f, p);
err_host:
  hbg_dev_host_free(f, h);
err:
  return rc;
}

static void test_sweep(void) {
  hbg_device *f;
  ASSERT_OK(hbg_device_open("fault", "inner=sim;mem=4M,chunk=4K", &f));
  hbg__sim_info base = info(f);
  ASSERT_OK(scenario(f));
  uint64_t calls = hbg_fault_calls(f, HBG_DEV_OP_ANY);
  ASSERT_GE(calls, 20);
  uint64_t k;
  for (k = 1;; k++) {
    hbg_fault_reset(f);
    ASSERT_OK(hbg_fault_arm(f, HBG_DEV_OP_ANY, k, 0));
    int rc = scenario(f);
    if (!hbg_fault_fired(f)) {
      ASSERT_OK(rc);
      break;
    }
    /* a failure in a releasing op is reported by the unwind only, which
     * ignores it; any other injected failure surfaces */
    hbg_dev_stats st = stats(f);
    hbg__sim_info in = info(f);
    if (st.mem_in_use || st.host_in_use || in.queues != base.queues ||
        in.events != base.events || in.registrations != base.registrations)
      T_FAIL("leak after failing call %llu", (unsigned long long)k);
  }
  ASSERT_UEQ(k, calls + 1);
  hbg_device_close(f);
}

static hbg_device *qdev;
static hbg_dev_event *qev;
static void *query_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++)
    if (hbg_dev_event_query(qdev, qev) < 0)
      return (void *)1;
  return NULL;
}

static void test_threads(void) {
  ASSERT_OK(hbg_device_open("fault", "inner=sim;mem=1M", &qdev));
  ASSERT_OK(hbg_dev_event_create(qdev, &qev));
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    ASSERT_EQ(pthread_create(&t[i], NULL, query_thread, NULL), 0);
  for (int i = 0; i < 1000; i++)
    ASSERT_OK(hbg_dev_event_query(qdev, qev));
  for (int i = 0; i < 2; i++) {
    void *r;
    ASSERT_EQ(pthread_join(t[i], &r), 0);
    ASSERT(r == NULL);
  }
  ASSERT_UEQ(hbg_fault_calls(qdev, HBG_DEV_OP_EVENT_QUERY), 3000);
  ASSERT_OK(hbg_dev_event_destroy(qdev, qev));
  hbg_device_close(qdev);
}

int main(void) {
  test_forwarding();
  test_arm();
  test_sweep();
  test_threads();
  printf("fault: ok\n");
  return 0;
}
