/* The device registry, open/close, option errors and dispatch misuse. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "device/sim/sim.h"
#include "test.h"

static int dummy_open(hbg_device *dev, const char *o) {
  (void)dev;
  (void)o;
  return 0;
}
static void dummy_close(hbg_device *dev) { (void)dev; }

static void test_registry(void) {
  uint32_t n = hbg_device_count();
  ASSERT_GE(n, 2);
  int have_sim = 0, have_fault = 0;
  for (uint32_t i = 0; i < n; i++) {
    const hbg_dev_ops *o = hbg_device_backend(i);
    ASSERT(o && o->name && o->summary);
    ASSERT_UEQ(o->abi_version, HBG_DEV_ABI_VERSION);
    ASSERT(hbg_device_find(o->name) == o);
    have_sim |= !strcmp(o->name, "sim");
    have_fault |= !strcmp(o->name, "fault");
  }
  ASSERT(have_sim && have_fault);
  ASSERT(hbg_device_backend(n) == NULL);
  ASSERT(hbg_device_find(NULL) == NULL);
  ASSERT(hbg_device_find("nope") == NULL);
}

static void test_open_errors(void) {
  hbg_device *d = (hbg_device *)0x1;
  ASSERT_ERR(hbg_device_open("nope", NULL, &d), HBG_E_NOTFOUND);
  ASSERT(strstr(hbg_device_open_error(), "nope") != NULL);
  ASSERT(d == (hbg_device *)0x1);
  ASSERT_ERR(hbg_device_open(NULL, NULL, &d), HBG_E_INVAL);
  ASSERT_ERR(hbg_device_open("sim", NULL, NULL), HBG_E_INVAL);

  static const char *const bad[] = {
      "bogus=1",   "mem",        "mem=",         "mem=abc",    "mem=1",
      "mem=-5",    "mem=64Q",    "chunk=1",      "chunk=1G",   "workers=0",
      "workers=x", "mem=2000G",  "mem=64M,zzz=1", "=5",         "spin=x",
      "spin=100001", "spin=-1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    d = (hbg_device *)0x1;
    int rc = hbg_device_open("sim", bad[i], &d);
    if (rc != HBG_E_INVAL)
      T_FAIL("open(sim, \"%s\") -> %s", bad[i], hbg_err_name(rc));
    ASSERT(d == (hbg_device *)0x1);
    ASSERT(strstr(hbg_device_open_error(), "sim") != NULL);
  }
  ASSERT_ERR(hbg_device_open("fault", "inner=nope", &d), HBG_E_NOTFOUND);
  ASSERT(strstr(hbg_device_open_error(), "nope") != NULL);
  ASSERT_ERR(hbg_device_open("fault", "inner=sim;mem=abc", &d), HBG_E_INVAL);
  ASSERT_ERR(hbg_device_open("fault", "outer=sim", &d), HBG_E_INVAL);
  ASSERT_ERR(hbg_device_open("fault", "inner=", &d), HBG_E_INVAL);

  /* good options, including empty tokens */
  ASSERT_OK(hbg_device_open("sim", "mem=1M,chunk=4K,workers=1,", &d));
  hbg_dev_caps caps;
  ASSERT_OK(hbg_dev_caps_get(d, &caps));
  ASSERT_UEQ(caps.mem_bytes, 1u << 20);
  hbg_device_close(d);
  ASSERT_OK(hbg_device_open("sim", "", &d));
  ASSERT_OK(hbg_dev_caps_get(d, &caps));
  ASSERT_UEQ(caps.mem_bytes, 256u << 20);
  hbg_device_close(d);
  hbg_device_close(NULL);
}

static void test_open_ops(void) {
  hbg_dev_ops o = {.struct_size = sizeof o,
                   .abi_version = HBG_DEV_ABI_VERSION,
                   .name = "dummy",
                   .summary = "test",
                   .open = dummy_open,
                   .close = dummy_close};
  hbg_device *d;
  ASSERT_ERR(hbg_device_open_ops(NULL, NULL, &d), HBG_E_INVAL);
  hbg_dev_ops bad = o;
  bad.abi_version = 99;
  ASSERT_ERR(hbg_device_open_ops(&bad, NULL, &d), HBG_E_INVAL);
  bad = o;
  bad.struct_size = 8;
  ASSERT_ERR(hbg_device_open_ops(&bad, NULL, &d), HBG_E_INVAL);
  ASSERT_OK(hbg_device_open_ops(&o, NULL, &d));
  ASSERT_STREQ(hbg_device_name(d), "dummy");
  /* NULL ops are UNSUPPORTED, not a crash */
  hbg_devptr p;
  void *h;
  ASSERT_ERR(hbg_dev_mem_alloc(d, 16, &p), HBG_E_UNSUPPORTED);
  ASSERT_ERR(hbg_dev_host_alloc(d, 16, &h), HBG_E_UNSUPPORTED);
  ASSERT(hbg__sim_from(d) == NULL);
  ASSERT(hbg_fault_inner(d) == NULL);
  ASSERT_ERR(hbg_fault_arm(d, HBG_DEV_OP_ANY, 1, 0), HBG_E_INVAL);
  ASSERT_UEQ(hbg_fault_calls(d, HBG_DEV_OP_ANY), 0);
  hbg_device_close(d);
}

static void test_dispatch_misuse(void) {
  hbg_device *d;
  ASSERT_OK(hbg_device_open("sim", "mem=1M", &d));
  ASSERT(hbg_device_ops(d) == hbg_device_find("sim"));
  ASSERT_STREQ(hbg_device_name(d), "sim");
  ASSERT(hbg__sim_from(d) != NULL);
  ASSERT(hbg__sim_from(NULL) == NULL);

  hbg_devptr p = 0;
  void *h = NULL;
  hbg_dev_queue *q = NULL;
  hbg_dev_event *ev = NULL;
  hbg_dev_caps caps;
  hbg_dev_stats st;
  char buf[16];
  ASSERT_ERR(hbg_dev_mem_alloc(NULL, 16, &p), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_mem_alloc(d, 0, &p), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_mem_alloc(d, 16, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_alloc(d, 0, &h), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_alloc(d, 16, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_caps_get(d, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_caps_get(NULL, &caps), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_stats_get(d, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_stats_get(NULL, &st), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_register(d, NULL, 16), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_register(d, buf, 0), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_unregister(d, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_unregister(d, buf), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_free(d, buf), HBG_E_INVAL);
  ASSERT_OK(hbg_dev_host_free(d, NULL));
  ASSERT_OK(hbg_dev_mem_free(d, 0));
  ASSERT_ERR(hbg_dev_copy_h2d(d, 0, NULL, 4), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_copy_d2h(d, NULL, 0, 4), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_queue_create(d, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_create(d, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_queue_sync(d, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_query(d, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_wait(d, NULL), HBG_E_INVAL);
  ASSERT_OK(hbg_dev_queue_destroy(d, NULL));
  ASSERT_OK(hbg_dev_event_destroy(d, NULL));

  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_OK(hbg_dev_event_create(d, &ev));
  ASSERT_ERR(hbg_dev_event_record(d, NULL, q), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_record(d, ev, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_copy_h2d_async(d, NULL, 0, buf, 4), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_launch(d, q, NULL), HBG_E_INVAL);
  hbg_dev_launch_desc l = {0};
  ASSERT_ERR(hbg_dev_launch(d, q, &l), HBG_E_INVAL); /* struct_size 0 */
  /* A caller built before the sizing fields: accepted, and what follows
   * its struct is not read (the sim's launch copies what it is given). */
  l.struct_size = HBG_DEV_LAUNCH_DESC_SIZE_V1 - 4;
  ASSERT_ERR(hbg_dev_launch(d, q, &l), HBG_E_INVAL);
  l.struct_size = HBG_DEV_LAUNCH_DESC_SIZE_V1;
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  ASSERT_OK(hbg_dev_queue_sync(d, q));

  /* Stats: a caller built before the scratch counters, or before
   * free_failures, gets nothing past its struct; a current one gets all. */
  union {
    hbg_dev_stats s;
    uint8_t b[sizeof(hbg_dev_stats)];
  } u;
  static const uint32_t old[2] = {HBG_DEV_STATS_SIZE_V1,
                                  HBG_DEV_STATS_SIZE_V2};
  for (int v = 0; v < 2; v++) {
    memset(&u, 0x5a, sizeof u);
    u.s.struct_size = old[v];
    ASSERT_OK(hbg_dev_stats_get(d, &u.s));
    ASSERT_EQ(u.s.struct_size, old[v]);
    ASSERT(u.s.launches >= 1 && u.s.launches < 0x5a5a5a5a5a5a5a5aull);
    for (size_t i = old[v]; i < sizeof u; i++)
      ASSERT_EQ(u.b[i], 0x5a);
  }
  memset(&u, 0x5a, sizeof u);
  u.s.struct_size = sizeof u.s;
  ASSERT_OK(hbg_dev_stats_get(d, &u.s));
  ASSERT_EQ(u.s.struct_size, sizeof u.s);
  ASSERT_UEQ(u.s.scratch_in_use, 0); /* the sim keeps none */

  /* handles of another device are rejected, not dereferenced */
  hbg_device *d2;
  ASSERT_OK(hbg_device_open("sim", "mem=1M", &d2));
  ASSERT_ERR(hbg_dev_queue_sync(d2, q), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_query(d2, ev), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_wait(d2, ev), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_record(d2, ev, q), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_queue_destroy(d2, q), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_destroy(d2, ev), HBG_E_INVAL);
  ASSERT_OK(hbg_dev_mem_alloc(d, 64, &p));
  ASSERT_ERR(hbg_dev_copy_h2d(d2, p, buf, 4), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_mem_free(d2, p), HBG_E_RANGE);
  hbg_device_close(d2);

  ASSERT_OK(hbg_dev_event_destroy(d, ev));
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_ERR(hbg_dev_queue_destroy(d, q), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_event_destroy(d, ev), HBG_E_INVAL);
  ASSERT_OK(hbg_dev_mem_free(d, p));

  /* native error text */
  ASSERT_ERR(hbg_dev_mem_free(d, p), HBG_E_RANGE);
  int64_t code = 0;
  const char *msg = NULL;
  ASSERT_OK(hbg_device_native_error(d, &code, &msg));
  ASSERT(msg && strstr(msg, "mem_free") != NULL);
  ASSERT_ERR(hbg_device_native_error(NULL, &code, &msg), HBG_E_INVAL);
  hbg_device_close(d);
}

int main(void) {
  test_registry();
  test_open_errors();
  test_open_ops();
  test_dispatch_misuse();
  printf("device_api: ok\n");
  return 0;
}
