/* acl backend: every op through the stand-in AscendCL library, checked by
 * the exact ACL call sequence it makes, plus caps, stats, error mapping and
 * launch verification. */
#include <stddef.h>
#include <stdlib.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "common/util.h"
#include "device/acl/acl_api.h"
#include "graph/graph.h"
#include "hbgstub.h"
#include "test.h"

static hbgstub S;

#define SEQ_FROM(m) hbgstub_seq(&S, (m))
#define ASSERT_SEQ(m, s) ASSERT_STREQ(SEQ_FROM(m), (s))

static hbg_device *open_dev(void) {
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("acl", NULL, &d));
  return d;
}

static hbg_dev_stats stats(hbg_device *d) {
  hbg_dev_stats st;
  ASSERT_OK(hbg_dev_stats_get(d, &st));
  ASSERT_EQ(st.struct_size, sizeof st);
  return st;
}

static void test_caps(void) {
  hbg_device *d = open_dev();
  hbg_dev_caps c;
  ASSERT_OK(hbg_dev_caps_get(d, &c));
  ASSERT_EQ(c.struct_size, sizeof c);
  ASSERT_UEQ(c.flags, HBG_DEV_CAP_ASYNC_NEEDS_PINNED | HBG_DEV_CAP_VERIFIES);
  ASSERT(!(c.flags & HBG_DEV_CAP_EXECUTES));
  ASSERT(!(c.flags & HBG_DEV_CAP_HOST_REGISTER));
  /* CANN: each piece of one block is ALIGN_UP(len, 32) + 32, 64-aligned */
  ASSERT_EQ(c.stage_align, 64);
  ASSERT_EQ(c.piece_pad_align, 32);
  ASSERT_EQ(c.piece_pad_extra, 32);
  ASSERT_EQ(c.dev_align, 64);
  ASSERT_EQ(c.max_batch, 0);

  /* Pieces carved by that rule from one aclrtMallocHost block all count as
   * pinned: every async copy goes out as aclrtMemcpyAsync. */
  void *blk;
  hbg_devptr dst;
  hbg_dev_queue *q;
  ASSERT_OK(hbg_dev_host_alloc(d, 4096, &blk));
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &dst));
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  const uint64_t lens[] = {1, 31, 32, 33, 100, 130};
  uint64_t off = 0;
  size_t m = S.calls();
  for (size_t i = 0; i < HBG__ARRAY_LEN(lens); i++) {
    uint64_t piece = HBG__ALIGN_UP(lens[i], c.piece_pad_align) + c.piece_pad_extra;
    ASSERT_UEQ(piece % 32, 0);
    ASSERT_UGE(piece, lens[i] + 32);
    uint8_t *p = (uint8_t *)blk + off;
    memset(p, (int)i + 1, lens[i]);
    ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst + off, p, lens[i]));
    off = HBG__ALIGN_UP(off + piece, c.stage_align);
  }
  ASSERT_SEQ(m, "aclrtMemcpyAsync aclrtMemcpyAsync aclrtMemcpyAsync "
                "aclrtMemcpyAsync aclrtMemcpyAsync aclrtMemcpyAsync");
  ASSERT_OK(hbg_dev_queue_sync(d, q));
  hbg_dev_stats st = stats(d);
  ASSERT_UEQ(st.async_copies, 6);
  ASSERT_UEQ(st.async_degraded, 0);
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, dst));
  ASSERT_OK(hbg_dev_host_free(d, blk));
  ASSERT_UEQ(S.count("hazards"), 0);
  hbg_device_close(d);
}

static void test_memory(void) {
  hbg_device *d = open_dev();
  S.reset();
  hbg_devptr p = 0;
  ASSERT_OK(hbg_dev_mem_alloc(d, 1000, &p));
  ASSERT_SEQ(0, "aclrtMalloc");
  ASSERT_UEQ(S.call_arg(0, 1), 1000);
  ASSERT_UEQ(S.call_arg(0, 2), ACL_MEM_MALLOC_HUGE_FIRST);
  ASSERT(p != 0);
  ASSERT_UEQ(p % 64, 0);
  void *h = NULL;
  ASSERT_OK(hbg_dev_host_alloc(d, 5000, &h));
  ASSERT_UEQ((uintptr_t)h % 64, 0);
  ASSERT_SEQ(0, "aclrtMalloc aclrtMallocHost");
  ASSERT_UEQ(S.call_arg(1, 1), 5000);
  hbg_dev_stats st = stats(d);
  ASSERT_UEQ(st.mem_allocs, 1);
  ASSERT_UEQ(st.mem_in_use, 1000);
  ASSERT_UEQ(st.host_allocs, 1);
  ASSERT_UEQ(st.host_in_use, 5000);

  /* host_register is not offered */
  char local[64];
  ASSERT_ERR(hbg_dev_host_register(d, local, sizeof local), HBG_E_UNSUPPORTED);
  ASSERT_ERR(hbg_dev_host_unregister(d, local), HBG_E_UNSUPPORTED);

  /* frees of unknown pointers are refused before ACL sees them */
  size_t m = S.calls();
  ASSERT_ERR(hbg_dev_mem_free(d, p + 64), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_free(d, (uint8_t *)h + 64), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_free(d, local), HBG_E_INVAL);
  ASSERT_OK(hbg_dev_mem_free(d, 0));
  ASSERT_OK(hbg_dev_host_free(d, NULL));
  ASSERT_UEQ(S.calls(), m);

  ASSERT_OK(hbg_dev_mem_free(d, p));
  ASSERT_OK(hbg_dev_host_free(d, h));
  ASSERT_SEQ(m, "aclrtFree aclrtFreeHost");
  ASSERT_UEQ(S.call_arg(m, 0), p);
  ASSERT_UEQ(S.call_arg(m + 1, 0), (uintptr_t)h);
  st = stats(d);
  ASSERT_UEQ(st.mem_frees, 1);
  ASSERT_UEQ(st.mem_in_use, 0);
  ASSERT_UEQ(st.host_frees, 1);
  ASSERT_UEQ(st.host_in_use, 0);
  ASSERT_UEQ(S.count("dev_blocks"), 0);
  ASSERT_UEQ(S.count("host_blocks"), 0);
  hbg_device_close(d);
}

static void test_sync_copies(void) {
  hbg_device *d = open_dev();
  hbg_devptr p;
  void *pin;
  ASSERT_OK(hbg_dev_mem_alloc(d, 1000, &p));
  ASSERT_OK(hbg_dev_host_alloc(d, 1000, &pin));
  uint8_t src[1000], back[1000];
  for (int i = 0; i < 1000; i++)
    src[i] = (uint8_t)(i * 7);
  S.reset();
  ASSERT_OK(hbg_dev_copy_h2d(d, p, src, 1000));
  ASSERT_SEQ(0, "aclrtMemcpy");
  ASSERT_UEQ(S.call_arg(0, 0), p);
  ASSERT_UEQ(S.call_arg(0, 1), 1000); /* destMax: rest of the allocation */
  ASSERT_UEQ(S.call_arg(0, 2), (uintptr_t)src);
  ASSERT_UEQ(S.call_arg(0, 3), 1000);
  ASSERT_UEQ(S.call_arg(0, 4), ACL_MEMCPY_HOST_TO_DEVICE);

  ASSERT_OK(hbg_dev_copy_h2d(d, p + 900, src, 100));
  ASSERT_UEQ(S.call_arg(1, 1), 100);
  /* past the allocation, or outside any: refused, ACL not called */
  size_t m = S.calls();
  ASSERT_ERR(hbg_dev_copy_h2d(d, p + 901, src, 100), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d(d, p + 4096, src, 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_d2h(d, back, p + 1, 1000), HBG_E_RANGE);
  ASSERT_OK(hbg_dev_copy_h2d(d, p, src, 0));
  ASSERT_UEQ(S.calls(), m);

  ASSERT_OK(hbg_dev_copy_h2d(d, p, src, 1000));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, p, 1000));
  ASSERT_SEQ(m, "aclrtMemcpy aclrtMemcpy");
  ASSERT_UEQ(S.call_arg(m + 1, 0), (uintptr_t)back);
  ASSERT_UEQ(S.call_arg(m + 1, 1), 1000);
  ASSERT_UEQ(S.call_arg(m + 1, 2), p);
  ASSERT_UEQ(S.call_arg(m + 1, 4), ACL_MEMCPY_DEVICE_TO_HOST);
  ASSERT(memcmp(src, back, 1000) == 0);

  /* from pinned memory: read directly */
  memcpy(pin, src, 1000);
  ASSERT_OK(hbg_dev_copy_h2d(d, p, pin, 1000));
  hbg_dev_stats st = stats(d);
  ASSERT_UEQ(st.h2d_copies, 4);
  ASSERT_UEQ(st.h2d_bytes, 1000 + 100 + 1000 + 1000);
  ASSERT_UEQ(st.d2h_copies, 1);
  ASSERT_UEQ(st.d2h_bytes, 1000);
  ASSERT_UEQ(st.pinned_direct, 1);
  ASSERT_UEQ(st.async_copies, 0);
  hbg_device_close(d);
}

static void test_async(void) {
  hbg_device *d = open_dev();
  hbg_devptr p;
  uint8_t *pin;
  ASSERT_OK(hbg_dev_mem_alloc(d, 256, &p));
  ASSERT_OK(hbg_dev_host_alloc(d, 256, (void **)&pin));
  S.reset();
  hbg_dev_queue *q;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_SEQ(0, "aclrtCreateStream");

  /* from aclrtMallocHost memory: a real async copy, still queued */
  memset(pin, 0x11, 256);
  size_t m = S.calls();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, p, pin, 256));
  ASSERT_SEQ(m, "aclrtMemcpyAsync");
  ASSERT_UEQ(S.call_arg(m, 1), 256);
  ASSERT_UEQ(S.call_arg(m, 4), ACL_MEMCPY_HOST_TO_DEVICE);
  ASSERT_UEQ(S.count("pending"), 1);
  uint8_t peek[256];
  ASSERT_EQ(S.peek(p, peek, 256), 0);
  ASSERT_EQ(peek[0], 0xA5); /* not there yet */
  m = S.calls();
  ASSERT_OK(hbg_dev_queue_sync(d, q));
  ASSERT_SEQ(m, "aclrtSynchronizeStream");
  ASSERT_EQ(S.peek(p, peek, 256), 0);
  ASSERT_EQ(peek[255], 0x11);

  /* from pageable memory: waits for the stream, then a synchronous copy */
  uint8_t heap[256];
  memset(heap, 0x22, sizeof heap);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, p, pin, 128)); /* queued first */
  m = S.calls();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, p, heap, 256));
  ASSERT_SEQ(m, "aclrtSynchronizeStream aclrtMemcpy");
  ASSERT_UEQ(S.call_arg(m + 1, 2), (uintptr_t)heap);
  ASSERT_UEQ(S.count("pending"), 0);
  ASSERT_EQ(S.peek(p, peek, 256), 0);
  ASSERT_EQ(peek[0], 0x22); /* the later copy landed last */
  memset(heap, 0x33, sizeof heap); /* reusable at once */
  ASSERT_UEQ(S.count("pageable_async"), 0);
  /* the tail of the pinned block is pinned too */
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, p, pin + 200, 56));
  ASSERT_ERR(hbg_dev_copy_h2d_async(d, q, p + 200, pin, 57), HBG_E_RANGE);

  hbg_dev_stats st = stats(d);
  ASSERT_UEQ(st.async_copies, 4); /* issued as async, degraded included */
  ASSERT_UEQ(st.async_degraded, 1);
  ASSERT_UEQ(st.pinned_direct, 3);
  ASSERT_UEQ(st.h2d_copies, 4);

  m = S.calls();
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_SEQ(m, "aclrtSynchronizeStream aclrtDestroyStream");
  ASSERT_UEQ(S.count("streams"), 0);
  ASSERT_UEQ(S.count("hazards"), 0);
  hbg_device_close(d);
}

static void test_events(void) {
  hbg_device *d = open_dev();
  hbg_devptr p;
  uint8_t *pin;
  hbg_dev_queue *q;
  hbg_dev_event *ev;
  ASSERT_OK(hbg_dev_mem_alloc(d, 256, &p));
  ASSERT_OK(hbg_dev_host_alloc(d, 256, (void **)&pin));
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  S.reset();
  ASSERT_OK(hbg_dev_event_create(d, &ev));
  ASSERT_SEQ(0, "aclrtCreateEvent");
  /* never recorded: complete, without asking ACL */
  ASSERT_OK(hbg_dev_event_query(d, ev));
  ASSERT_OK(hbg_dev_event_wait(d, ev));
  ASSERT_UEQ(S.calls(), 1);

  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, p, pin, 128));
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, p + 128, pin + 128, 128));
  size_t m = S.calls();
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  ASSERT_SEQ(m, "aclrtRecordEvent");
  ASSERT_ERR(hbg_dev_event_query(d, ev), HBG_E_AGAIN); /* one of two ran */
  ASSERT_OK(hbg_dev_event_query(d, ev));
  ASSERT_SEQ(m, "aclrtRecordEvent aclrtQueryEventStatus aclrtQueryEventStatus");

  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, p, pin, 64));
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  m = S.calls();
  ASSERT_OK(hbg_dev_event_wait(d, ev));
  ASSERT_SEQ(m, "aclrtSynchronizeEvent");
  ASSERT_UEQ(S.count("pending"), 0);
  m = S.calls();
  ASSERT_OK(hbg_dev_event_destroy(d, ev));
  ASSERT_OK(hbg_dev_event_destroy(d, NULL));
  ASSERT_SEQ(m, "aclrtDestroyEvent");
  ASSERT_UEQ(S.count("events"), 0);
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  hbg_device_close(d);
}

/* ---- error mapping ---- */

typedef struct fx {
  hbg_device *d;
  hbg_devptr p;
  void *pin;
  hbg_dev_queue *q;
  hbg_dev_event *ev;
} fx;

static int run_op(fx *f, const char *fn) {
  uint8_t buf[64] = {0};
  if (!strcmp(fn, "aclrtMalloc")) {
    hbg_devptr x = 0;
    int rc = hbg_dev_mem_alloc(f->d, 64, &x);
    if (!rc)
      hbg_dev_mem_free(f->d, x);
    return rc;
  }
  if (!strcmp(fn, "aclrtMallocHost")) {
    void *x = NULL;
    int rc = hbg_dev_host_alloc(f->d, 64, &x);
    if (!rc)
      hbg_dev_host_free(f->d, x);
    return rc;
  }
  if (!strcmp(fn, "aclrtMemcpy"))
    return hbg_dev_copy_h2d(f->d, f->p, buf, sizeof buf);
  if (!strcmp(fn, "aclrtMemcpyAsync"))
    return hbg_dev_copy_h2d_async(f->d, f->q, f->p, f->pin, 64);
  if (!strcmp(fn, "aclrtSynchronizeStream"))
    return hbg_dev_queue_sync(f->d, f->q);
  if (!strcmp(fn, "aclrtCreateStream")) {
    hbg_dev_queue *x = NULL;
    int rc = hbg_dev_queue_create(f->d, &x);
    if (!rc)
      hbg_dev_queue_destroy(f->d, x);
    return rc;
  }
  if (!strcmp(fn, "aclrtCreateEvent")) {
    hbg_dev_event *x = NULL;
    int rc = hbg_dev_event_create(f->d, &x);
    if (!rc)
      hbg_dev_event_destroy(f->d, x);
    return rc;
  }
  if (!strcmp(fn, "aclrtRecordEvent"))
    return hbg_dev_event_record(f->d, f->ev, f->q);
  if (!strcmp(fn, "aclrtQueryEventStatus"))
    return hbg_dev_event_query(f->d, f->ev);
  if (!strcmp(fn, "aclrtSynchronizeEvent"))
    return hbg_dev_event_wait(f->d, f->ev);
  T_FAIL("no op for %s", fn);
}

static void test_error_mapping(void) {
  static const struct {
    const char *fn;
    int code, expect;
  } cases[] = {
      {"aclrtMalloc", ACL_ERROR_RT_MEMORY_ALLOCATION, HBG_E_DEVMEM},
      {"aclrtMalloc", ACL_ERROR_BAD_ALLOC, HBG_E_DEVMEM},
      {"aclrtMalloc", ACL_ERROR_INVALID_PARAM, HBG_E_INVAL},
      {"aclrtMalloc", 507899, HBG_E_DEVICE},
      {"aclrtMallocHost", ACL_ERROR_BAD_ALLOC, HBG_E_NOMEM},
      {"aclrtMallocHost", ACL_ERROR_RT_MEMORY_ALLOCATION, HBG_E_NOMEM},
      {"aclrtMemcpy", ACL_ERROR_RT_PARAM_INVALID, HBG_E_INVAL},
      {"aclrtMemcpy", ACL_ERROR_INTERNAL_ERROR, HBG_E_DEVICE},
      {"aclrtMemcpy", ACL_ERROR_RT_MEMORY_ALLOCATION, HBG_E_DEVICE},
      {"aclrtMemcpyAsync", ACL_ERROR_RT_FEATURE_NOT_SUPPORT, HBG_E_DEVICE},
      {"aclrtMemcpyAsync", ACL_ERROR_INVALID_PARAM, HBG_E_INVAL},
      {"aclrtSynchronizeStream", 507011, HBG_E_DEVICE},
      {"aclrtCreateStream", ACL_ERROR_BAD_ALLOC, HBG_E_DEVICE},
      {"aclrtCreateEvent", 207008, HBG_E_DEVICE},
      {"aclrtRecordEvent", ACL_ERROR_RT_CONTEXT_NULL, HBG_E_DEVICE},
      {"aclrtQueryEventStatus", 507000, HBG_E_DEVICE},
      {"aclrtSynchronizeEvent", 507000, HBG_E_DEVICE},
  };
  fx f = {0};
  f.d = open_dev();
  ASSERT_OK(hbg_dev_mem_alloc(f.d, 64, &f.p));
  ASSERT_OK(hbg_dev_host_alloc(f.d, 64, &f.pin));
  ASSERT_OK(hbg_dev_queue_create(f.d, &f.q));
  ASSERT_OK(hbg_dev_event_create(f.d, &f.ev));
  ASSERT_OK(hbg_dev_copy_h2d_async(f.d, f.q, f.p, f.pin, 64));
  ASSERT_OK(hbg_dev_event_record(f.d, f.ev, f.q)); /* query/wait ask ACL */
  for (size_t i = 0; i < HBG__ARRAY_LEN(cases); i++) {
    char msg[128];
    snprintf(msg, sizeof msg, "EE9999: case %zu says no", i);
    S.reset();
    S.set_errmsg(msg);
    ASSERT_EQ(S.fail(cases[i].fn, 1, cases[i].code), 0);
    hbg_dev_stats before = stats(f.d);
    int rc = run_op(&f, cases[i].fn);
    if (rc != cases[i].expect)
      T_FAIL("%s failing with %d -> %s, expected %s", cases[i].fn,
             cases[i].code, hbg_err_name(rc), hbg_err_name(cases[i].expect));
    ASSERT_EQ(S.fired(), 1);
    int64_t code = 0;
    const char *nmsg = NULL;
    ASSERT_OK(hbg_device_native_error(f.d, &code, &nmsg));
    ASSERT_EQ(code, cases[i].code);
    ASSERT(strstr(nmsg, cases[i].fn) != NULL);
    ASSERT(strstr(nmsg, msg) != NULL);
    /* the failing call, then the message, nothing after */
    size_t n = S.calls();
    ASSERT_STREQ(S.call_name(n - 1), "aclGetRecentErrMsg");
    ASSERT_STREQ(S.call_name(n - 2), cases[i].fn);
    ASSERT_EQ(S.call_rc(n - 2), cases[i].code);
    hbg_dev_stats after = stats(f.d);
    ASSERT_UEQ(after.mem_in_use, before.mem_in_use);
    ASSERT_UEQ(after.host_in_use, before.host_in_use);
    ASSERT_UEQ(after.h2d_copies, before.h2d_copies);
  }

  /* the k-th call: the third aclrtMalloc fails, the fourth works again */
  S.reset();
  S.set_errmsg(NULL);
  ASSERT_EQ(S.fail("aclrtMalloc", 3, ACL_ERROR_RT_MEMORY_ALLOCATION), 0);
  hbg_devptr x[4] = {0};
  ASSERT_OK(hbg_dev_mem_alloc(f.d, 32, &x[0]));
  ASSERT_OK(hbg_dev_mem_alloc(f.d, 32, &x[1]));
  ASSERT_ERR(hbg_dev_mem_alloc(f.d, 32, &x[2]), HBG_E_DEVMEM);
  ASSERT_UEQ(x[2], 0); /* output untouched */
  ASSERT_OK(hbg_dev_mem_alloc(f.d, 32, &x[3]));
  int64_t code;
  const char *nmsg;
  ASSERT_OK(hbg_device_native_error(f.d, &code, &nmsg));
  ASSERT_EQ(code, ACL_ERROR_RT_MEMORY_ALLOCATION);
  ASSERT(strstr(nmsg, "injected failure of aclrtMalloc") != NULL);
  ASSERT_SEQ(0, "aclrtMalloc aclrtMalloc aclrtMalloc aclGetRecentErrMsg "
                "aclrtMalloc");
  /* real out-of-memory from the library, not an injected one */
  S.set_mem_limit(1);
  ASSERT_ERR(hbg_dev_mem_alloc(f.d, 1 << 20, &x[2]), HBG_E_DEVMEM);
  ASSERT_OK(hbg_device_native_error(f.d, &code, &nmsg));
  ASSERT_EQ(code, ACL_ERROR_RT_MEMORY_ALLOCATION);
  ASSERT(strstr(nmsg, "out of device memory") != NULL);
  S.set_mem_limit(0);

  /* a failed free keeps the block; freeing again works */
  ASSERT_EQ(S.fail("aclrtFree", 1, ACL_ERROR_INTERNAL_ERROR), 0);
  ASSERT_ERR(hbg_dev_mem_free(f.d, x[0]), HBG_E_DEVICE);
  ASSERT_UEQ(stats(f.d).mem_in_use, 64 + 32 * 3);
  ASSERT_OK(hbg_dev_mem_free(f.d, x[0]));
  ASSERT_EQ(S.fail("aclrtFreeHost", 1, ACL_ERROR_INTERNAL_ERROR), 0);
  ASSERT_ERR(hbg_dev_host_free(f.d, f.pin), HBG_E_DEVICE);
  ASSERT_OK(hbg_dev_host_free(f.d, f.pin));

  /* destroy failures still release hbg's side of the object */
  ASSERT_EQ(S.fail("aclrtDestroyEvent", 1, 507000), 0);
  ASSERT_ERR(hbg_dev_event_destroy(f.d, f.ev), HBG_E_DEVICE);
  ASSERT_EQ(S.fail("aclrtDestroyStream", 1, 507000), 0);
  ASSERT_ERR(hbg_dev_queue_destroy(f.d, f.q), HBG_E_DEVICE);
  /* ... while the objects ACL refused to destroy stay ACL's */
  ASSERT_UEQ(S.count("streams"), 1);
  ASSERT_UEQ(S.count("events"), 1);
  hbg_device_close(f.d); /* frees x[1], x[3], f.p */
  ASSERT_UEQ(S.count("dev_blocks"), 0);
}

static void test_open_errors(void) {
  hbg_device *d = NULL;
  S.reset();
  S.set_errmsg("EE1001: no such device");
  ASSERT_EQ(S.fail("aclrtSetDevice", 1, 107001), 0);
  ASSERT_ERR(hbg_device_open("acl", NULL, &d), HBG_E_DEVICE);
  ASSERT(d == NULL);
  ASSERT(strstr(hbg_device_open_error(), "EE1001: no such device") != NULL);
  ASSERT(strstr(hbg_device_open_error(), "107001") != NULL);
  /* the initialisation it made is undone */
  ASSERT_SEQ(0, "aclInit aclrtSetDevice aclGetRecentErrMsg aclFinalize");
  ASSERT_UEQ(S.count("inited"), 0);

  S.reset();
  ASSERT_EQ(S.fail("aclInit", 1, ACL_ERROR_INTERNAL_ERROR), 0);
  ASSERT_ERR(hbg_device_open("acl", NULL, &d), HBG_E_DEVICE);
  ASSERT_SEQ(0, "aclInit aclGetRecentErrMsg");

  /* two devices share one aclInit; the last close finalizes */
  hbg_device *d1, *d2;
  S.reset();
  ASSERT_OK(hbg_device_open("acl", NULL, &d1));
  ASSERT_OK(hbg_device_open("acl", "device=1", &d2));
  ASSERT_SEQ(0, "aclInit aclrtSetDevice aclrtSetDevice");
  hbg_device_close(d1);
  ASSERT_UEQ(S.count("inited"), 1);
  hbg_device_close(d2);
  ASSERT_SEQ(0, "aclInit aclrtSetDevice aclrtSetDevice aclrtResetDevice "
                "aclrtResetDevice aclFinalize");

  /* ACL initialised by the application stays the application's */
  aclError (*init)(const char *) = NULL, (*fini)(void) = NULL;
  void *sym = dlsym(S.lib, "aclInit");
  memcpy(&init, &sym, sizeof sym);
  sym = dlsym(S.lib, "aclFinalize");
  memcpy(&fini, &sym, sizeof sym);
  ASSERT(init && fini);
  ASSERT_EQ(init(NULL), ACL_SUCCESS);
  S.reset();
  ASSERT_OK(hbg_device_open("acl", NULL, &d));
  hbg_device_close(d);
  ASSERT_SEQ(0, "aclInit aclrtSetDevice aclrtResetDevice");
  ASSERT_EQ(S.call_rc(0), ACL_ERROR_REPEAT_INITIALIZE);
  ASSERT_UEQ(S.count("inited"), 1);
  ASSERT_EQ(fini(), ACL_SUCCESS);
}

static void test_close_frees_leftovers(void) {
  hbg_device *d = open_dev();
  hbg_devptr a, b;
  void *h;
  ASSERT_OK(hbg_dev_mem_alloc(d, 100, &a));
  ASSERT_OK(hbg_dev_mem_alloc(d, 200, &b));
  ASSERT_OK(hbg_dev_host_alloc(d, 300, &h));
  S.reset();
  hbg_device_close(d);
  ASSERT_SEQ(0, "aclrtFree aclrtFree aclrtFreeHost aclrtResetDevice "
                "aclFinalize");
  ASSERT_UEQ(S.count("dev_blocks"), 0);
  ASSERT_UEQ(S.count("host_blocks"), 0);
}

/* ---- launch: verification of what arrived ---- */

typedef struct win {
  _Alignas(8) uint8_t buf[2048];
  uint32_t len, n, idx[16];
} win;

static void win_add(win *w, const hbg_win_task *t) {
  if (!w->len)
    w->len = sizeof(hbg_win_hdr);
  w->idx[w->n++] = w->len;
  memcpy(w->buf + w->len, t, sizeof *t);
  w->len += sizeof *t;
}

static uint32_t win_finish(win *w) {
  hbg_win_hdr h = {.magic = HBG_WIN_MAGIC, .version = HBG_IMG_VERSION,
                   .n_tasks = w->n, .off_index = w->len, .bind_seq = 1};
  memcpy(w->buf + w->len, w->idx, w->n * 4u);
  w->len = HBG__ALIGN_UP(w->len + w->n * 4u, 8u);
  h.total_size = w->len;
  memcpy(w->buf, &h, sizeof h);
  return w->len;
}

/* in, out: device buffers of at least n floats (the verifier checks that
 * boundary tensors lie in live device memory). */
static hbg__def *make_def_n(hbg_tensor bt[2], uint32_t n, hbg_devptr in,
                            hbg_devptr out) {
  uint32_t dims[1] = {n};
  ASSERT_OK(hbg_tensor_contig(&bt[0], in, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_IN));
  ASSERT_OK(hbg_tensor_contig(&bt[1], out, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_OUT));
  hbg_recorder *rec;
  ASSERT_OK(hbg__rec_begin(bt, 2, NULL, 0, &rec));
  hbg_tensor args[2] = {bt[0], bt[1]};
  hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = args};
  ASSERT_OK(hbg_record_task(rec, &t, NULL));
  hbg__def *def;
  ASSERT_OK(hbg__rec_finish(rec, &def));
  return def;
}

static hbg__def *make_def(hbg_tensor bt[2], hbg_devptr in, hbg_devptr out) {
  return make_def_n(bt, 16, in, out);
}

static hbg_dev_status read_status(hbg_device *d, hbg_devptr st_dev) {
  hbg_dev_status st;
  ASSERT_OK(hbg_dev_copy_d2h(d, &st, st_dev, sizeof st));
  return st;
}

static void test_launch(void) {
  hbg_device *d = open_dev();
  hbg_dev_queue *q;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  hbg_tensor bt[2];
  hbg_devptr xin, xout;
  ASSERT_OK(hbg_dev_mem_alloc(d, 64, &xin));
  ASSERT_OK(hbg_dev_mem_alloc(d, 64, &xout));
  hbg__def *def = make_def(bt, xin, xout);

  /* a Submission with its Definition inline (deferred / pinned-eager) */
  uint32_t s1 = hbg__sub_size(def, 1), s2 = hbg__sub_size(def, 0);
  uint8_t *h1 = calloc(1, s1), *h2 = calloc(1, s2);
  ASSERT(h1 && h2);
  ASSERT_EQ(hbg__sub_write(h1, s1, def, 7, 0, bt, NULL, 1), (int)s1);
  ASSERT_EQ(hbg__sub_write(h2, s2, def, 7, 1, bt, NULL, 0), (int)s2);
  hbg_devptr sub1, sub2, defd, wind, std_;
  ASSERT_OK(hbg_dev_mem_alloc(d, s1, &sub1));
  ASSERT_OK(hbg_dev_mem_alloc(d, s2, &sub2));
  ASSERT_OK(hbg_dev_mem_alloc(d, def->size, &defd));
  ASSERT_OK(hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &std_));
  ASSERT_OK(hbg_dev_copy_h2d(d, sub1, h1, s1));
  ASSERT_OK(hbg_dev_copy_h2d(d, sub2, h2, s2));
  ASSERT_OK(hbg_dev_copy_h2d(d, defd, def->image, def->size));

  /* window: an ordinary task, the inline one, the resident one twice */
  win w = {0};
  hbg_win_task t0 = {.kind = HBG_WIN_TASK, .size = sizeof t0,
                     .kernel = HBG_KERNEL_NOP};
  hbg_win_task g1 = {.kind = HBG_WIN_GRAPH, .size = sizeof g1,
                     .sub_size = s1, .sub_addr = sub1,
                     .def_addr = sub1 + (s1 - def->size),
                     .def_size = def->size};
  hbg_win_task g2 = {.kind = HBG_WIN_GRAPH, .size = sizeof g2,
                     .sub_size = s2, .sub_addr = sub2, .def_addr = defd,
                     .def_size = def->size};
  win_add(&w, &t0);
  win_add(&w, &g1);
  win_add(&w, &g2);
  win_add(&w, &g2);
  uint32_t wlen = win_finish(&w);
  hbg__win_view wv;
  ASSERT_OK(hbg__win_validate(w.buf, wlen, &wv));
  ASSERT_OK(hbg_dev_mem_alloc(d, wlen, &wind));
  ASSERT_OK(hbg_dev_copy_h2d(d, wind, w.buf, wlen));

  hbg_dev_launch_desc l = {.struct_size = sizeof l, .window = wind,
                           .window_bytes = wlen, .status = std_};
  size_t m = S.calls();
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  /* sync, window, sub1, sub2, def (verified once), sub2 again, status */
  ASSERT_SEQ(m, "aclrtSynchronizeStream aclrtMemcpy aclrtMemcpy aclrtMemcpy "
                "aclrtMemcpy aclrtMemcpy aclrtMemcpy");
  ASSERT_UEQ(S.call_arg(m + 1, 2), wind);
  ASSERT_UEQ(S.call_arg(m + 1, 4), ACL_MEMCPY_DEVICE_TO_HOST);
  ASSERT_UEQ(S.call_arg(m + 2, 2), sub1);
  ASSERT_UEQ(S.call_arg(m + 3, 2), sub2);
  ASSERT_UEQ(S.call_arg(m + 4, 2), defd);
  ASSERT_UEQ(S.call_arg(m + 5, 2), sub2);
  ASSERT_UEQ(S.call_arg(m + 6, 0), std_);
  ASSERT_UEQ(S.call_arg(m + 6, 4), ACL_MEMCPY_HOST_TO_DEVICE);
  hbg_dev_status st = read_status(d, std_);
  ASSERT_EQ(st.error, 0);
  ASSERT_UEQ(st.task, UINT32_MAX);
  ASSERT_UEQ(st.node, UINT32_MAX);
  ASSERT_UEQ(st.tasks_done, 4);
  ASSERT_UEQ(st.nodes_done, 0); /* verified, not executed */
  ASSERT_UEQ(st.defs_verified, 2);
  ASSERT_UEQ(stats(d).launches, 1);

  /* both Definitions stay verified across launches (the resident one is
   * not even read back; the inline one rides along in its Submission) ... */
  m = S.calls();
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  ASSERT_SEQ(m, "aclrtSynchronizeStream aclrtMemcpy aclrtMemcpy aclrtMemcpy "
                "aclrtMemcpy aclrtMemcpy");
  st = read_status(d, std_);
  ASSERT_EQ(st.error, 0);
  ASSERT_UEQ(st.defs_verified, 0);

  /* ... until the host writes it: then it is read and checked again */
  const size_t hoff = offsetof(hbg_def_hdr, hash);
  uint8_t bad = def->image[hoff] ^ 0x40;
  ASSERT_OK(hbg_dev_copy_h2d(d, defd + hoff, &bad, 1));
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  st = read_status(d, std_);
  ASSERT_EQ(st.error, HBG_E_IMG_HASH);
  ASSERT_UEQ(st.task, 2);
  ASSERT_UEQ(st.tasks_done, 2);
  ASSERT_OK(hbg_dev_copy_h2d(d, defd, def->image, def->size));
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  ASSERT_EQ(read_status(d, std_).error, 0);

  /* a Submission that does not match its Definition: written for another
   * signature, i.e. another Definition (the signature is not in the
   * Submission, its def_hash is what differs) */
  uint8_t *h3 = malloc(s2);
  ASSERT(h3);
  hbg_tensor other[2];
  hbg__def *odef = make_def_n(other, 8, xin, xout);
  ASSERT_EQ(odef->size, def->size);
  ASSERT_EQ(hbg__sub_size(odef, 0), s2);
  ASSERT_EQ(hbg__sub_write(h3, s2, odef, 7, 1, other, NULL, 0), (int)s2);
  hbg__def_free(odef);
  ASSERT_OK(hbg_dev_copy_h2d(d, sub2, h3, s2));
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  st = read_status(d, std_);
  ASSERT_EQ(st.error, HBG_E_IMG_DEF);
  ASSERT_UEQ(st.task, 2);
  /* a boundary tensor at address 0 */
  hbg_tensor zero[2] = {bt[0], bt[1]};
  zero[1].addr = 0;
  ASSERT_EQ(hbg__sub_write(h3, s2, def, 7, 1, zero, NULL, 0), (int)s2);
  ASSERT_OK(hbg_dev_copy_h2d(d, sub2, h3, s2));
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  st = read_status(d, std_);
  ASSERT_EQ(st.error, HBG_E_IMG_FIELD);
  ASSERT_UEQ(st.task, 2);
  ASSERT_OK(hbg_dev_copy_h2d(d, sub2, h2, s2));

  /* a corrupted inline Definition */
  ASSERT_OK(hbg_dev_copy_h2d(d, sub1 + (s1 - def->size) + hoff, &bad, 1));
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  st = read_status(d, std_);
  ASSERT_EQ(st.error, HBG_E_IMG_HASH);
  ASSERT_UEQ(st.task, 1);
  ASSERT_OK(hbg_dev_copy_h2d(d, sub1, h1, s1));

  /* a Submission address outside device memory */
  win w2 = {0};
  hbg_win_task g3 = g2;
  g3.sub_addr = 0x1000;
  win_add(&w2, &t0);
  win_add(&w2, &g3);
  uint32_t w2len = win_finish(&w2);
  hbg_devptr win2;
  ASSERT_OK(hbg_dev_mem_alloc(d, w2len, &win2));
  ASSERT_OK(hbg_dev_copy_h2d(d, win2, w2.buf, w2len));
  hbg_dev_launch_desc l2 = l;
  l2.window = win2;
  l2.window_bytes = w2len;
  ASSERT_OK(hbg_dev_launch(d, q, &l2));
  st = read_status(d, std_);
  ASSERT_EQ(st.error, HBG_E_RANGE);
  ASSERT_UEQ(st.task, 1);

  /* a bad window: magic, then short lengths */
  uint32_t junk = 0x12345678;
  ASSERT_OK(hbg_dev_copy_h2d(d, win2, &junk, 4));
  ASSERT_OK(hbg_dev_launch(d, q, &l2));
  ASSERT_EQ(read_status(d, std_).error, HBG_E_IMG_MAGIC);
  l2.window = wind;
  l2.window_bytes = wlen - 8;
  ASSERT_OK(hbg_dev_launch(d, q, &l2));
  ASSERT_EQ(read_status(d, std_).error, HBG_E_IMG_TRUNCATED);
  l2.window_bytes = 0; /* as on the sim and cuda */
  ASSERT_OK(hbg_dev_launch(d, q, &l2));
  ASSERT_EQ(read_status(d, std_).error, HBG_E_IMG_TRUNCATED);

  /* descriptor errors are the caller's: returned, nothing written */
  l2 = l;
  l2.status = std_ + 8;
  ASSERT_ERR(hbg_dev_launch(d, q, &l2), HBG_E_RANGE);
  l2 = l;
  l2.struct_size = 8;
  ASSERT_ERR(hbg_dev_launch(d, q, &l2), HBG_E_INVAL);

  /* an ACL failure inside launch is returned as a device error */
  S.reset();
  ASSERT_EQ(S.fail("aclrtMemcpy", 3, ACL_ERROR_INTERNAL_ERROR), 0);
  ASSERT_ERR(hbg_dev_launch(d, q, &l), HBG_E_DEVICE);
  ASSERT_EQ(S.fail("aclrtSynchronizeStream", 1, 507011), 0);
  ASSERT_ERR(hbg_dev_launch(d, q, &l), HBG_E_DEVICE);
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  ASSERT_EQ(read_status(d, std_).error, 0);

  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  hbg_devptr all[] = {sub1, sub2, defd, wind, std_, win2, xin, xout};
  for (size_t i = 0; i < HBG__ARRAY_LEN(all); i++)
    ASSERT_OK(hbg_dev_mem_free(d, all[i]));
  ASSERT_UEQ(stats(d).mem_in_use, 0);
  free(h1);
  free(h2);
  free(h3);
  hbg__def_free(def);
  hbg_device_close(d);
}

typedef struct tr {
  int copies, launches;
  uint64_t bytes;
} tr;

static void on_trace(void *user, const hbg_trace_event *ev) {
  tr *t = user;
  if (ev->track == HBG_TRACK_COPY) {
    t->copies++;
    t->bytes += ev->bytes;
  } else if (ev->track == HBG_TRACK_DEVICE) {
    t->launches++;
  }
}

static void test_trace(void) {
  hbg_device *d = open_dev();
  tr t = {0};
  hbg_devptr p;
  uint8_t buf[100] = {0};
  ASSERT_OK(hbg_dev_mem_alloc(d, 100, &p));
  hbg_device_set_trace(d, on_trace, &t);
  ASSERT_OK(hbg_dev_copy_h2d(d, p, buf, 100));
  ASSERT_OK(hbg_dev_copy_d2h(d, buf, p, 50));
  hbg_device_set_trace(d, NULL, NULL);
  ASSERT_OK(hbg_dev_copy_h2d(d, p, buf, 100));
  ASSERT_EQ(t.copies, 2);
  ASSERT_UEQ(t.bytes, 150);
  hbg_device_close(d);
}

int main(void) {
  const char *lib = hbgstub_path("HBG_ACL_LIB", hbg_device_find("acl") != NULL);
  ASSERT_EQ(hbgstub_attach(&S, lib), 0);
  test_caps();
  test_memory();
  test_sync_copies();
  test_async();
  test_events();
  test_error_mapping();
  test_open_errors();
  test_close_frees_leftovers();
  test_launch();
  test_trace();
  ASSERT_UEQ(S.count("inited"), 0);
  ASSERT_UEQ(S.count("dev_blocks"), 0);
  ASSERT_UEQ(S.count("host_blocks"), 0);
  printf("acl_ops: ok\n");
  return 0;
}
