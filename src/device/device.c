#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/device_internal.h"

#ifdef HBG_HAVE_ACL
static const hbg__backend acl_backend = {.ops = &hbg__acl_ops};
#endif
static const hbg__backend fault_backend = {.ops = &hbg__fault_ops};

static const hbg__backend *const builtin[] = {
    &hbg__sim_backend,
#ifdef HBG_HAVE_CUDA
    &hbg__cuda_backend,
#endif
#ifdef HBG_HAVE_ACL
    &acl_backend,
#endif
    &fault_backend,
};

uint32_t hbg_device_count(void) { return (uint32_t)HBG__ARRAY_LEN(builtin); }

const hbg_dev_ops *hbg_device_backend(uint32_t i) {
  return i < HBG__ARRAY_LEN(builtin) ? builtin[i]->ops : NULL;
}

const hbg_dev_ops *hbg_device_find(const char *name) {
  if (!name)
    return NULL;
  for (size_t i = 0; i < HBG__ARRAY_LEN(builtin); i++)
    if (strcmp(builtin[i]->ops->name, name) == 0)
      return builtin[i]->ops;
  return NULL;
}

hbg_device *hbg__dev_base(hbg_device *dev) {
  for (hbg_device *inner; dev && (inner = hbg_fault_inner(dev));)
    dev = inner;
  return dev;
}

const hbg__backend *hbg__backend_of(hbg_device *dev, hbg_device **impl) {
  dev = hbg__dev_base(dev);
  if (!dev)
    return NULL;
  for (size_t i = 0; i < HBG__ARRAY_LEN(builtin); i++)
    if (builtin[i]->ops == dev->ops) {
      if (impl)
        *impl = dev;
      return builtin[i];
    }
  return NULL;
}

const char *hbg_dev_op_name(int op) {
  switch (op) {
#define HBG__OP_NAME(up, low)                                                  \
  case HBG_DEV_OP_##up:                                                        \
    return #low;
    HBG_DEV_OP_MAP(HBG__OP_NAME)
#undef HBG__OP_NAME
  case HBG_DEV_OP_ANY:
    return "any";
  default:
    return NULL;
  }
}

const char *hbg_device_open_error(void) { return hbg_last_error(); }

int hbg_device_open_ops(const hbg_dev_ops *ops, const char *options,
                        hbg_device **out) {
  hbg__error_clear();
  HBG__RETURN_IF(!ops || !out, HBG_E_INVAL);
  HBG__RETURN_IF(ops->struct_size < HBG_DEV_OPS_V1_SIZE ||
                     ops->abi_version != HBG_DEV_ABI_VERSION || !ops->open ||
                     !ops->close || !ops->name,
                 HBG_E_INVAL);
  hbg_device *d = calloc(1, sizeof *d);
  if (!d)
    return HBG_E_NOMEM;
  d->ops = ops;
  if (ops->struct_size >= offsetof(hbg_dev_ops, event_elapsed) +
                              sizeof ops->event_elapsed)
    d->event_elapsed = ops->event_elapsed;
  if (ops->struct_size >= offsetof(hbg_dev_ops, clock_ns) +
                              sizeof ops->clock_ns)
    d->clock_ns = ops->clock_ns;
  if (ops->struct_size >= offsetof(hbg_dev_ops, queue_wait_event) +
                              sizeof ops->queue_wait_event)
    d->queue_wait_event = ops->queue_wait_event;
  if (ops->struct_size >= offsetof(hbg_dev_ops, mem_unimport) +
                              sizeof ops->mem_unimport) {
    d->mem_import = ops->mem_import;
    d->mem_unimport = ops->mem_unimport;
  }
#define HBG__OPT_OP(fn)                                                        \
  if (ops->struct_size >= offsetof(hbg_dev_ops, fn) + sizeof ops->fn)          \
    d->fn = ops->fn;
  HBG__OPT_OP(queue_borrow)
  HBG__OPT_OP(queue_unborrow)
  HBG__OPT_OP(queue_capture)
  HBG__OPT_OP(capture_retain)
#undef HBG__OPT_OP
  int rc = ops->open(d, options);
  if (rc < 0) {
    if (d->has_native)
      hbg__error_set("%s: %s (native %lld)", ops->name, d->native_msg,
                     (long long)d->native_code);
    else
      hbg__error_set("%s: %s", ops->name, hbg_strerror(rc));
    free(d);
    return rc;
  }
  *out = d;
  return 0;
}

int hbg_device_open(const char *name, const char *options, hbg_device **out) {
  hbg__error_clear();
  HBG__RETURN_IF(!name || !out, HBG_E_INVAL);
  const hbg_dev_ops *ops = hbg_device_find(name);
  if (!ops) {
    hbg__error_set("unknown device '%s'", name);
    return HBG_E_NOTFOUND;
  }
  return hbg_device_open_ops(ops, options, out);
}

void hbg_device_close(hbg_device *dev) {
  if (!dev)
    return;
  dev->ops->close(dev);
  free(dev);
}

const hbg_dev_ops *hbg_device_ops(const hbg_device *dev) {
  return dev ? dev->ops : NULL;
}
const char *hbg_device_name(const hbg_device *dev) {
  return dev ? dev->ops->name : NULL;
}
void hbg_device_set_impl(hbg_device *dev, void *impl) { dev->impl = impl; }
void *hbg_device_impl(const hbg_device *dev) { return dev->impl; }

void hbg_device_set_native(hbg_device *dev, int64_t code, const char *fmt,
                           ...) {
  if (!dev)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dev->native_msg, sizeof dev->native_msg, fmt, ap);
  va_end(ap);
  dev->native_code = code;
  dev->has_native = 1;
}

int hbg_device_native_error(const hbg_device *dev, int64_t *code,
                            const char **msg) {
  HBG__RETURN_IF(!dev, HBG_E_INVAL);
  if (!dev->has_native)
    return HBG_E_NOTFOUND;
  if (code)
    *code = dev->native_code;
  if (msg)
    *msg = dev->native_msg;
  return 0;
}

void hbg_device_set_trace(hbg_device *dev, hbg_trace_fn fn, void *user) {
  if (!dev)
    return;
  dev->trace_fn = fn;
  dev->trace_user = user;
  /* A wrapper's inner device does the work, so it emits the events. */
  hbg_device *inner = hbg_fault_inner(dev);
  if (inner)
    hbg_device_set_trace(inner, fn, user);
}

void hbg_device_trace(hbg_device *dev, const hbg_trace_event *ev) {
  if (dev && dev->trace_fn && ev)
    dev->trace_fn(dev->trace_user, ev);
}

int hbg_device_tracing(const hbg_device *dev) {
  return dev && dev->trace_fn != NULL;
}

static int as_returned(hbg_device *dev, int rc) {
  (void)dev;
  return rc;
}

/* A failed release is counted on the handle it went through. */
static int release_counted(hbg_device *dev, int rc) {
  if (rc < 0 && dev)
    atomic_fetch_add(&dev->free_failures, 1);
  return rc;
}

int hbg_dev_capturing(hbg_device *dev, uint64_t *id) {
  if (!dev || !dev->n_borrowed || !dev->queue_capture)
    return 0;
  for (uint32_t i = 0; i < dev->n_borrowed; i++) {
    uint32_t st = HBG_DEV_CAPTURE_NONE;
    uint64_t cid = 0;
    if (dev->queue_capture(dev, dev->borrowed[i], &st, &cid) == 0 &&
        st != HBG_DEV_CAPTURE_NONE) {
      if (id)
        *id = cid;
      return 1;
    }
  }
  return 0;
}

/* A call that a capture forbids (it allocates, frees, copies
 * synchronously, waits or queries) is refused while a queue borrowed
 * through dev is being captured: made, it would invalidate the caller's
 * capture. */
static int capture_guard(hbg_device *dev, const char *op) {
  uint64_t id = 0;
  if (!hbg_dev_capturing(dev, &id))
    return 0;
  hbg__error_set("%s: refused while the caller captures a queue hbg "
                 "launched on (capture %llu): made now, the call would "
                 "invalidate the capture",
                 op, (unsigned long long)id);
  return HBG_E_CAPTURING;
}
#define HBG__GUARD_CAPTURE(op)                                                 \
  do {                                                                         \
    if (dev && dev->n_borrowed) {                                              \
      int guard__rc = capture_guard(dev, op);                                  \
      if (guard__rc < 0)                                                       \
        return guard__rc;                                                      \
    }                                                                          \
  } while (0)

/* Call dev's op fn and hand its result to then(dev, rc). */
#define HBG__DISPATCH_THEN(then, fn, ...)                                      \
  do {                                                                         \
    if (!dev)                                                                  \
      return HBG_E_INVAL;                                                      \
    if (!dev->ops->fn)                                                         \
      return HBG_E_UNSUPPORTED;                                                \
    return then(dev, dev->ops->fn(dev, __VA_ARGS__));                          \
  } while (0)
#define HBG__DISPATCH(fn, ...) HBG__DISPATCH_THEN(as_returned, fn, __VA_ARGS__)
#define HBG__RELEASE(fn, ...)                                                  \
  HBG__DISPATCH_THEN(release_counted, fn, __VA_ARGS__)

int hbg_dev_caps_get(hbg_device *dev, hbg_dev_caps *caps) {
  HBG__RETURN_IF(!caps, HBG_E_INVAL);
  HBG__DISPATCH(get_caps, caps);
}
_Static_assert(offsetof(hbg_dev_stats, scratch_allocs) ==
                   HBG_DEV_STATS_SIZE_V1,
               "the scratch counters follow the first version's");
_Static_assert(offsetof(hbg_dev_stats, free_failures) ==
                   HBG_DEV_STATS_SIZE_V2,
               "free_failures follows the scratch counters");

/* The backend fills a whole current struct; a caller built before the
 * scratch counters or before free_failures (struct_size
 * HBG_DEV_STATS_SIZE_V1 or _V2) gets its part, any other gets it all. */
int hbg_dev_stats_get(hbg_device *dev, hbg_dev_stats *st) {
  HBG__RETURN_IF(!st || !dev, HBG_E_INVAL);
  const uint32_t size = st->struct_size;
  HBG__RETURN_IF(!dev->ops->get_stats, HBG_E_UNSUPPORTED);
  hbg_dev_stats full;
  memset(&full, 0, sizeof full);
  full.struct_size = sizeof full;
  HBG__TRY(dev->ops->get_stats(dev, &full));
  full.free_failures = atomic_load(&dev->free_failures);
  const uint32_t n =
      size == HBG_DEV_STATS_SIZE_V1 || size == HBG_DEV_STATS_SIZE_V2
          ? size
          : (uint32_t)sizeof full;
  memcpy(st, &full, n);
  st->struct_size = n;
  return 0;
}

int hbg_dev_host_alloc(hbg_device *dev, size_t bytes, void **out) {
  HBG__RETURN_IF(!out || bytes == 0, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("host_alloc");
  HBG__DISPATCH(host_alloc, bytes, out);
}
int hbg_dev_host_free(hbg_device *dev, void *p) {
  HBG__GUARD_CAPTURE("host_free");
  HBG__RELEASE(host_free, p);
}
int hbg_dev_host_register(hbg_device *dev, void *p, size_t bytes) {
  HBG__RETURN_IF(!p || bytes == 0, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("host_register");
  HBG__DISPATCH(host_register, p, bytes);
}
int hbg_dev_host_unregister(hbg_device *dev, void *p) {
  HBG__RETURN_IF(!p, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("host_unregister");
  HBG__RELEASE(host_unregister, p);
}
int hbg_dev_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out) {
  HBG__RETURN_IF(!out || bytes == 0, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("mem_alloc");
  HBG__DISPATCH(mem_alloc, bytes, out);
}
int hbg_dev_mem_free(hbg_device *dev, hbg_devptr p) {
  HBG__GUARD_CAPTURE("mem_free");
  HBG__RELEASE(mem_free, p);
}
int hbg_dev_copy_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                     size_t bytes) {
  HBG__RETURN_IF(!src && bytes, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("copy_h2d");
  HBG__DISPATCH(copy_h2d, dst, src, bytes);
}
int hbg_dev_copy_d2h(hbg_device *dev, void *dst, hbg_devptr src,
                     size_t bytes) {
  HBG__RETURN_IF(!dst && bytes, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("copy_d2h");
  HBG__DISPATCH(copy_d2h, dst, src, bytes);
}
int hbg_dev_queue_create(hbg_device *dev, hbg_dev_queue **out) {
  HBG__RETURN_IF(!out, HBG_E_INVAL);
  HBG__DISPATCH(queue_create, out);
}
int hbg_dev_queue_destroy(hbg_device *dev, hbg_dev_queue *q) {
  HBG__GUARD_CAPTURE("queue_destroy");
  HBG__RELEASE(queue_destroy, q);
}
int hbg_dev_copy_h2d_async(hbg_device *dev, hbg_dev_queue *q, hbg_devptr dst,
                           const void *src, size_t bytes) {
  HBG__RETURN_IF(!q || (!src && bytes), HBG_E_INVAL);
  HBG__DISPATCH(copy_h2d_async, q, dst, src, bytes);
}
int hbg_dev_queue_sync(hbg_device *dev, hbg_dev_queue *q) {
  HBG__RETURN_IF(!q, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("queue_sync");
  HBG__DISPATCH(queue_sync, q);
}
int hbg_dev_event_create(hbg_device *dev, hbg_dev_event **out) {
  HBG__RETURN_IF(!out, HBG_E_INVAL);
  HBG__DISPATCH(event_create, out);
}
int hbg_dev_event_destroy(hbg_device *dev, hbg_dev_event *ev) {
  HBG__RELEASE(event_destroy, ev);
}
int hbg_dev_event_record(hbg_device *dev, hbg_dev_event *ev,
                         hbg_dev_queue *q) {
  HBG__RETURN_IF(!ev || !q, HBG_E_INVAL);
  HBG__DISPATCH(event_record, ev, q);
}
int hbg_dev_event_query(hbg_device *dev, hbg_dev_event *ev) {
  HBG__RETURN_IF(!ev, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("event_query");
  HBG__DISPATCH(event_query, ev);
}
int hbg_dev_event_wait(hbg_device *dev, hbg_dev_event *ev) {
  HBG__RETURN_IF(!ev, HBG_E_INVAL);
  HBG__GUARD_CAPTURE("event_wait");
  HBG__DISPATCH(event_wait, ev);
}
_Static_assert(offsetof(hbg_dev_launch_desc, n_tasks) ==
                   HBG_DEV_LAUNCH_DESC_SIZE_V1,
               "the sizing fields follow the first version's");
_Static_assert(offsetof(hbg_dev_launch_desc, def_bytes) ==
                   HBG_DEV_LAUNCH_DESC_SIZE_V2,
               "the images' sizing fields follow the second version's");

int hbg_dev_launch(hbg_device *dev, hbg_dev_queue *q, const hbg_dev_launch_desc *l) {
  HBG__RETURN_IF(!q || !l || l->struct_size < HBG_DEV_LAUNCH_DESC_SIZE_V1,
                 HBG_E_INVAL);
  /* The backend sees a whole current descriptor: what an older caller did
   * not have reads as zero (no sizing). */
  hbg_dev_launch_desc d;
  memset(&d, 0, sizeof d);
  memcpy(&d, l, HBG__MIN((size_t)l->struct_size, sizeof d));
  if (l->struct_size < HBG_DEV_LAUNCH_DESC_SIZE_V2)
    d.flags &= ~(uint32_t)HBG_DEV_LAUNCH_SIZED;
  if (l->struct_size < sizeof d || !(d.flags & HBG_DEV_LAUNCH_SIZED))
    d.flags &= ~(uint32_t)HBG_DEV_LAUNCH_SIZED_IMAGES;
  d.struct_size = sizeof d;
  HBG__DISPATCH(launch, q, &d);
}
int hbg_dev_event_elapsed(hbg_device *dev, hbg_dev_event *start,
                          hbg_dev_event *end, uint64_t *ns) {
  HBG__RETURN_IF(!dev || !start || !end || !ns, HBG_E_INVAL);
  if (!dev->event_elapsed)
    return HBG_E_UNSUPPORTED;
  return dev->event_elapsed(dev, start, end, ns);
}

int hbg_dev_queue_wait_event(hbg_device *dev, hbg_dev_queue *q,
                             hbg_dev_event *ev) {
  HBG__RETURN_IF(!dev || !q || !ev, HBG_E_INVAL);
  if (!dev->queue_wait_event)
    return HBG_E_UNSUPPORTED;
  return dev->queue_wait_event(dev, q, ev);
}

int hbg_dev_mem_import(hbg_device *dev, uint64_t addr, size_t bytes,
                       hbg_devptr *out) {
  HBG__RETURN_IF(!dev || !out || !addr || bytes == 0, HBG_E_INVAL);
  if (!dev->mem_import) {
    hbg_device_set_native(dev, HBG_E_UNSUPPORTED,
                          "%s: the backend cannot import memory (no "
                          "mem_import op)",
                          dev->ops->name);
    return HBG_E_UNSUPPORTED;
  }
  return dev->mem_import(dev, addr, bytes, out);
}

int hbg_dev_mem_unimport(hbg_device *dev, hbg_devptr p) {
  HBG__RETURN_IF(!dev, HBG_E_INVAL);
  if (!dev->mem_unimport)
    return HBG_E_UNSUPPORTED;
  return release_counted(dev, dev->mem_unimport(dev, p));
}

int hbg__dev_host_ptr(hbg_device *dev, hbg_devptr addr, uint64_t bytes,
                      void **out) {
  HBG__RETURN_IF(!dev || !out, HBG_E_INVAL);
  hbg_device *impl = NULL;
  const hbg__backend *b = hbg__backend_of(dev, &impl);
  if (!b || !b->host_ptr)
    return HBG_E_UNSUPPORTED;
  return b->host_ptr(impl, addr, bytes, out);
}

int hbg_dev_queue_borrow(hbg_device *dev, void *native, hbg_dev_queue **out) {
  HBG__RETURN_IF(!dev || !out, HBG_E_INVAL);
  if (!dev->queue_borrow)
    return HBG_E_UNSUPPORTED;
  if (dev->n_borrowed == HBG_DEV_BORROWED_MAX) {
    hbg__error_set("queue_borrow: %u queues are borrowed already (at most "
                   "HBG_DEV_BORROWED_MAX)",
                   dev->n_borrowed);
    return HBG_E_LIMIT;
  }
  hbg_dev_queue *q = NULL;
  HBG__TRY(dev->queue_borrow(dev, native, &q));
  dev->borrowed[dev->n_borrowed++] = q;
  *out = q;
  return 0;
}

int hbg_dev_queue_unborrow(hbg_device *dev, hbg_dev_queue *q) {
  HBG__RETURN_IF(!dev || !q, HBG_E_INVAL);
  if (!dev->queue_unborrow)
    return HBG_E_UNSUPPORTED;
  uint32_t i = 0;
  while (i < dev->n_borrowed && dev->borrowed[i] != q)
    i++;
  HBG__RETURN_IF(i == dev->n_borrowed, HBG_E_INVAL);
  dev->borrowed[i] = dev->borrowed[--dev->n_borrowed];
  return release_counted(dev, dev->queue_unborrow(dev, q));
}

int hbg_dev_queue_capture(hbg_device *dev, hbg_dev_queue *q, uint32_t *state,
                          uint64_t *id) {
  HBG__RETURN_IF(!dev || !q || !state || !id, HBG_E_INVAL);
  *state = HBG_DEV_CAPTURE_NONE;
  *id = 0;
  if (!dev->queue_capture)
    return 0;
  return dev->queue_capture(dev, q, state, id);
}

int hbg_dev_capture_retain(hbg_device *dev, hbg_dev_queue *q, void *ptr,
                           void (*destroy)(void *ptr)) {
  HBG__RETURN_IF(!dev || !q || !destroy, HBG_E_INVAL);
  if (!dev->capture_retain)
    return HBG_E_UNSUPPORTED;
  return dev->capture_retain(dev, q, ptr, destroy);
}

uint64_t hbg_dev_clock_ns(hbg_device *dev) {
  uint64_t ns;
  if (dev && dev->clock_ns && dev->clock_ns(dev, &ns) == 0)
    return ns;
  return hbg__now_ns();
}

int hbg__dev_times_events(hbg_device *dev) {
  if (!dev || !dev->event_elapsed)
    return 0;
  hbg_device *inner = hbg_fault_inner(dev);
  return inner ? hbg__dev_times_events(inner) : 1;
}
