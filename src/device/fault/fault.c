/* The "fault" device: wraps another backend, forwards every op, counts the
 * calls per op and fails the k-th call of an armed op on demand. Releasing
 * ops are forwarded even when they fail by injection, so an allocation-
 * failure sweep never leaks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/device_internal.h"

typedef struct fault {
  hbg_device *inner;
  _Atomic uint64_t calls[HBG_DEV_OP__COUNT];
  _Atomic uint64_t fired;
  _Atomic int armed;
  pthread_mutex_t mu; /* arm state below */
  int arm_op;
  uint64_t arm_left;
  int arm_err;
} fault;

static fault *fault_of(const hbg_device *dev) {
  return dev && dev->ops == &hbg__fault_ops ? dev->impl : NULL;
}

/* Count a call of op. @return 0 to forward it, or the injected error. */
static int fault_hit(hbg_device *dev, fault *f, int op) {
  uint64_t n = atomic_fetch_add(&f->calls[op], 1) + 1;
  if (!atomic_load(&f->armed))
    return 0;
  int err = 0;
  pthread_mutex_lock(&f->mu);
  if (f->arm_left && (f->arm_op == HBG_DEV_OP_ANY || f->arm_op == op) &&
      --f->arm_left == 0) {
    err = f->arm_err;
    atomic_store(&f->armed, 0);
  }
  pthread_mutex_unlock(&f->mu);
  if (err) {
    atomic_fetch_add(&f->fired, 1);
    hbg_device_set_native(dev, 9999, "injected fault in %s (call %llu)",
                          hbg_dev_op_name(op), (unsigned long long)n);
  }
  return err;
}

/* Surface the inner device's native error on the wrapper. */
static int fault_pass(hbg_device *dev, fault *f, int rc) {
  int64_t code;
  const char *msg;
  if (rc < 0 && rc != HBG_E_AGAIN &&
      hbg_device_native_error(f->inner, &code, &msg) == 0)
    hbg_device_set_native(dev, code, "%s", msg);
  return rc;
}

#define FAULT_FWD(op, call)                                                    \
  do {                                                                         \
    fault *f = dev->impl;                                                      \
    int e = fault_hit(dev, f, HBG_DEV_OP_##op);                                \
    if (e)                                                                     \
      return e;                                                                \
    return fault_pass(dev, f, (call));                                         \
  } while (0)

#define FAULT_RELEASE(op, call)                                                \
  do {                                                                         \
    fault *f = dev->impl;                                                      \
    int e = fault_hit(dev, f, HBG_DEV_OP_##op);                                \
    int r = (call);                                                            \
    if (e)                                                                     \
      return e;                                                                \
    return fault_pass(dev, f, r);                                              \
  } while (0)

static int fault_probe(char *buf, size_t len) {
  const hbg_dev_ops *sim = hbg_device_find("sim");
  if (sim && sim->probe)
    return sim->probe(buf, len);
  if (buf && len)
    snprintf(buf, len, "available");
  return 0;
}

static int fault_bad_opts(hbg_device *dev, const char *why, const char *tok,
                          size_t n) {
  hbg_device_set_native(dev, HBG_E_INVAL, "%s '%.*s'", why, (int)n,
                        tok);
  return HBG_E_INVAL;
}

/* "inner=NAME[;INNER_OPTIONS]"; the inner device defaults to sim. */
static int fault_parse(hbg_device *dev, const char *options, char *name,
                       size_t name_len, const char **inner_opts) {
  snprintf(name, name_len, "sim");
  *inner_opts = NULL;
  if (!options)
    return 0;
  const char *semi = strchr(options, ';');
  size_t head = semi ? (size_t)(semi - options) : strlen(options);
  if (semi && semi[1])
    *inner_opts = semi + 1;
  for (const char *p = options; p < options + head;) {
    const char *end = memchr(p, ',', (size_t)(options + head - p));
    size_t n = end ? (size_t)(end - p) : (size_t)(options + head - p);
    if (n) {
      if (n <= 6 || memcmp(p, "inner=", 6) != 0)
        return fault_bad_opts(dev, "unknown option", p, n);
      if (n - 6 >= name_len)
        return fault_bad_opts(dev, "inner name too long", p, n);
      memcpy(name, p + 6, n - 6);
      name[n - 6] = '\0';
    }
    p = end ? end + 1 : p + n;
  }
  return 0;
}

static int fault_open(hbg_device *dev, const char *options) {
  char name[64];
  const char *inner_opts;
  HBG__TRY(fault_parse(dev, options, name, sizeof name, &inner_opts));
  fault *f = calloc(1, sizeof *f);
  if (!f)
    return HBG_E_NOMEM;
  if (pthread_mutex_init(&f->mu, NULL) != 0) {
    free(f);
    return HBG_E_NOMEM;
  }
  int rc = hbg_device_open(name, inner_opts, &f->inner);
  if (rc < 0) {
    /* The inner's open error already names it and its native code. */
    const char *why = hbg_device_open_error();
    const char *cut = strstr(why, " (native ");
    hbg_device_set_native(dev, rc, "inner %.*s",
                          (int)(cut ? (size_t)(cut - why) : strlen(why)), why);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return rc;
  }
  hbg_device_set_impl(dev, f);
  return 0;
}

static void fault_close(hbg_device *dev) {
  fault *f = dev->impl;
  if (!f)
    return;
  hbg_device_close(f->inner);
  pthread_mutex_destroy(&f->mu);
  free(f);
  dev->impl = NULL;
}

static int fault_get_caps(hbg_device *dev, hbg_dev_caps *caps) {
  fault *f = dev->impl;
  return fault_pass(dev, f, hbg_dev_caps_get(f->inner, caps));
}

static int fault_get_stats(hbg_device *dev, hbg_dev_stats *st) {
  fault *f = dev->impl;
  return fault_pass(dev, f, hbg_dev_stats_get(f->inner, st));
}

static int fault_host_alloc(hbg_device *dev, size_t bytes, void **out) {
  FAULT_FWD(HOST_ALLOC, hbg_dev_host_alloc(f->inner, bytes, out));
}
static int fault_host_free(hbg_device *dev, void *p) {
  FAULT_RELEASE(HOST_FREE, hbg_dev_host_free(f->inner, p));
}
static int fault_host_register(hbg_device *dev, void *p, size_t bytes) {
  FAULT_FWD(HOST_REGISTER, hbg_dev_host_register(f->inner, p, bytes));
}
static int fault_host_unregister(hbg_device *dev, void *p) {
  FAULT_RELEASE(HOST_UNREGISTER, hbg_dev_host_unregister(f->inner, p));
}
static int fault_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out) {
  FAULT_FWD(MEM_ALLOC, hbg_dev_mem_alloc(f->inner, bytes, out));
}
static int fault_mem_free(hbg_device *dev, hbg_devptr p) {
  FAULT_RELEASE(MEM_FREE, hbg_dev_mem_free(f->inner, p));
}
static int fault_copy_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                          size_t bytes) {
  FAULT_FWD(COPY_H2D, hbg_dev_copy_h2d(f->inner, dst, src, bytes));
}
static int fault_copy_d2h(hbg_device *dev, void *dst, hbg_devptr src,
                          size_t bytes) {
  FAULT_FWD(COPY_D2H, hbg_dev_copy_d2h(f->inner, dst, src, bytes));
}
static int fault_queue_create(hbg_device *dev, hbg_dev_queue **out) {
  FAULT_FWD(QUEUE_CREATE, hbg_dev_queue_create(f->inner, out));
}
static int fault_queue_destroy(hbg_device *dev, hbg_dev_queue *q) {
  FAULT_RELEASE(QUEUE_DESTROY, hbg_dev_queue_destroy(f->inner, q));
}
static int fault_copy_h2d_async(hbg_device *dev, hbg_dev_queue *q,
                                hbg_devptr dst, const void *src,
                                size_t bytes) {
  FAULT_FWD(COPY_H2D_ASYNC,
            hbg_dev_copy_h2d_async(f->inner, q, dst, src, bytes));
}
static int fault_queue_sync(hbg_device *dev, hbg_dev_queue *q) {
  FAULT_FWD(QUEUE_SYNC, hbg_dev_queue_sync(f->inner, q));
}
static int fault_event_create(hbg_device *dev, hbg_dev_event **out) {
  FAULT_FWD(EVENT_CREATE, hbg_dev_event_create(f->inner, out));
}
static int fault_event_destroy(hbg_device *dev, hbg_dev_event *ev) {
  FAULT_RELEASE(EVENT_DESTROY, hbg_dev_event_destroy(f->inner, ev));
}
static int fault_event_record(hbg_device *dev, hbg_dev_event *ev,
                              hbg_dev_queue *q) {
  FAULT_FWD(EVENT_RECORD, hbg_dev_event_record(f->inner, ev, q));
}
static int fault_event_query(hbg_device *dev, hbg_dev_event *ev) {
  FAULT_FWD(EVENT_QUERY, hbg_dev_event_query(f->inner, ev));
}
static int fault_event_wait(hbg_device *dev, hbg_dev_event *ev) {
  FAULT_FWD(EVENT_WAIT, hbg_dev_event_wait(f->inner, ev));
}
static int fault_launch(hbg_device *dev, hbg_dev_queue *q,
                        const hbg_dev_launch_desc *l) {
  FAULT_FWD(LAUNCH, hbg_dev_launch(f->inner, q, l));
}
static int fault_event_elapsed(hbg_device *dev, hbg_dev_event *start,
                               hbg_dev_event *end, uint64_t *ns) {
  FAULT_FWD(EVENT_ELAPSED, hbg_dev_event_elapsed(f->inner, start, end, ns));
}

static int fault_queue_wait_event(hbg_device *dev, hbg_dev_queue *q,
                                  hbg_dev_event *ev) {
  FAULT_FWD(QUEUE_WAIT_EVENT, hbg_dev_queue_wait_event(f->inner, q, ev));
}

static int fault_mem_import(hbg_device *dev, uint64_t addr, size_t bytes,
                            hbg_devptr *out) {
  FAULT_FWD(MEM_IMPORT, hbg_dev_mem_import(f->inner, addr, bytes, out));
}
static int fault_mem_unimport(hbg_device *dev, hbg_devptr p) {
  FAULT_RELEASE(MEM_UNIMPORT, hbg_dev_mem_unimport(f->inner, p));
}
static int fault_queue_borrow(hbg_device *dev, void *native,
                              hbg_dev_queue **out) {
  FAULT_FWD(QUEUE_BORROW, hbg_dev_queue_borrow(f->inner, native, out));
}
static int fault_queue_unborrow(hbg_device *dev, hbg_dev_queue *q) {
  FAULT_FWD(QUEUE_UNBORROW, hbg_dev_queue_unborrow(f->inner, q));
}
static int fault_queue_capture(hbg_device *dev, hbg_dev_queue *q,
                               uint32_t *state, uint64_t *id) {
  FAULT_FWD(QUEUE_CAPTURE, hbg_dev_queue_capture(f->inner, q, state, id));
}
static int fault_capture_retain(hbg_device *dev, hbg_dev_queue *q, void *ptr,
                                void (*destroy)(void *ptr)) {
  FAULT_FWD(CAPTURE_RETAIN, hbg_dev_capture_retain(f->inner, q, ptr, destroy));
}

/* The clock is a reading, not an operation that can fail: forwarded as is. */
static int fault_clock_ns(hbg_device *dev, uint64_t *ns) {
  fault *f = dev->impl;
  *ns = hbg_dev_clock_ns(f->inner);
  return 0;
}

const hbg_dev_ops hbg__fault_ops = {
    .struct_size = sizeof(hbg_dev_ops),
    .abi_version = HBG_DEV_ABI_VERSION,
    .name = "fault",
    .summary = "fault-injection wrapper: counts calls per op and fails the "
               "k-th one on demand (options inner=NAME[;INNER_OPTIONS])",
    .probe = fault_probe,
    .open = fault_open,
    .close = fault_close,
    .get_caps = fault_get_caps,
    .get_stats = fault_get_stats,
    .host_alloc = fault_host_alloc,
    .host_free = fault_host_free,
    .host_register = fault_host_register,
    .host_unregister = fault_host_unregister,
    .mem_alloc = fault_mem_alloc,
    .mem_free = fault_mem_free,
    .copy_h2d = fault_copy_h2d,
    .copy_d2h = fault_copy_d2h,
    .queue_create = fault_queue_create,
    .queue_destroy = fault_queue_destroy,
    .copy_h2d_async = fault_copy_h2d_async,
    .queue_sync = fault_queue_sync,
    .event_create = fault_event_create,
    .event_destroy = fault_event_destroy,
    .event_record = fault_event_record,
    .event_query = fault_event_query,
    .event_wait = fault_event_wait,
    .launch = fault_launch,
    .event_elapsed = fault_event_elapsed,
    .clock_ns = fault_clock_ns,
    .queue_wait_event = fault_queue_wait_event,
    .mem_import = fault_mem_import,
    .mem_unimport = fault_mem_unimport,
    .queue_borrow = fault_queue_borrow,
    .queue_unborrow = fault_queue_unborrow,
    .queue_capture = fault_queue_capture,
    .capture_retain = fault_capture_retain,
};

int hbg_fault_arm(hbg_device *dev, int op, uint64_t k, int err) {
  fault *f = fault_of(dev);
  HBG__RETURN_IF(!f, HBG_E_INVAL);
  HBG__RETURN_IF(op != HBG_DEV_OP_ANY && (op < 0 || op >= HBG_DEV_OP__COUNT),
                 HBG_E_INVAL);
  HBG__RETURN_IF(err > 0, HBG_E_INVAL);
  pthread_mutex_lock(&f->mu);
  f->arm_op = op;
  f->arm_left = k;
  f->arm_err = err ? err : HBG_E_INJECTED;
  atomic_store(&f->armed, k != 0);
  pthread_mutex_unlock(&f->mu);
  return 0;
}

uint64_t hbg_fault_calls(const hbg_device *dev, int op) {
  fault *f = fault_of(dev);
  if (!f)
    return 0;
  if (op == HBG_DEV_OP_ANY) {
    uint64_t n = 0;
    for (int i = 0; i < HBG_DEV_OP__COUNT; i++)
      n += atomic_load(&f->calls[i]);
    return n;
  }
  return op >= 0 && op < HBG_DEV_OP__COUNT ? atomic_load(&f->calls[op]) : 0;
}

uint64_t hbg_fault_fired(const hbg_device *dev) {
  fault *f = fault_of(dev);
  return f ? atomic_load(&f->fired) : 0;
}

void hbg_fault_reset(hbg_device *dev) {
  fault *f = fault_of(dev);
  if (!f)
    return;
  pthread_mutex_lock(&f->mu);
  f->arm_left = 0;
  atomic_store(&f->armed, 0);
  pthread_mutex_unlock(&f->mu);
  for (int i = 0; i < HBG_DEV_OP__COUNT; i++)
    atomic_store(&f->calls[i], 0);
  atomic_store(&f->fired, 0);
}

hbg_device *hbg_fault_inner(hbg_device *dev) {
  fault *f = fault_of(dev);
  return f ? f->inner : NULL;
}
