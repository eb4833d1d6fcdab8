/*
 * cuda backend: the CUDA runtime API behind the hbg device ops.
 *
 * Synchronous copies run on an internal non-blocking stream followed by a
 * stream synchronize, so they return only once the DMA has landed (a plain
 * cudaMemcpy from pageable memory may return while the DMA is still in
 * flight). Queues are non-blocking streams; events are created with timing
 * disabled. Every CUDA status is checked where it is returned and mapped
 * there, the native code and message kept on the device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/cuda/cuda_internal.h"
#include "device/device_internal.h"

static hbg__cuda *impl_of(hbg_device *dev) { return hbg_device_impl(dev); }

int hbg__cu_err(hbg_device *dev, cudaError_t e, const char *call, int oom) {
  hbg_device_set_native(dev, (int64_t)e, "%s: %s: %s", call,
                        cudaGetErrorName(e), cudaGetErrorString(e));
  switch (e) {
  case cudaErrorMemoryAllocation:
    return oom;
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorStubLibrary:
  case cudaErrorNotSupported:
  case cudaErrorCallRequiresNewerDriver:
    return HBG_E_UNSUPPORTED;
  default:
    return HBG_E_DEVICE;
  }
}

/* Make the device current on the calling thread (per-thread in CUDA). */
static int cu_current(hbg_device *dev, const hbg__cuda *c) {
  cudaError_t e = cudaSetDevice(c->ordinal);
  return e == cudaSuccess ? 0 : hbg__cu_err(dev, e, "cudaSetDevice", HBG_E_DEVMEM);
}

/* For teardown paths that cannot return an error: keep the native one. */
static void cu_note(hbg_device *dev, cudaError_t e, const char *call) {
  if (e != cudaSuccess)
    (void)hbg__cu_err(dev, e, call, HBG_E_DEVICE);
}

/* ---------------- address registries ---------------- */

const hbg__range *hbg__cu_ranges_find(const hbg__rtab *t, uint64_t lo,
                                      uint64_t len) {
  ptrdiff_t i = hbg__rtab_floor(t, lo);
  if (i < 0)
    return NULL;
  const hbg__range *r = &t->v[i];
  uint64_t off = lo - r->start;
  if (off >= r->len || (len ? len : 1) > r->len - off)
    return NULL;
  return r;
}

static int ranges_overlap(const hbg__rtab *t, uint64_t lo, uint64_t len) {
  size_t i = hbg__rtab_upper(t, lo);
  if (i > 0 && lo - t->v[i - 1].start < t->v[i - 1].len)
    return 1;
  return i < t->n && t->v[i].start - lo < len;
}

static int ranges_insert(hbg__rtab *t, uint64_t lo, uint64_t len,
                         uint32_t kind) {
  return hbg__rtab_insert(t, (hbg__range){.start = lo, .len = len, .kind = kind});
}

/* Index of the range starting exactly at lo with this kind, or t->n. */
static size_t ranges_exact(const hbg__rtab *t, uint64_t lo, uint32_t kind) {
  ptrdiff_t i = hbg__rtab_floor(t, lo);
  if (i >= 0 && t->v[i].start == lo && t->v[i].kind == kind)
    return (size_t)i;
  return t->n;
}

static int host_pinned(const hbg__cuda *c, const void *p, size_t n) {
  return hbg__cu_ranges_find(&c->host, (uint64_t)(uintptr_t)p, n) != NULL;
}

/* ---------------- pinned scratch ---------------- */

int hbg__cu_scratch_reserve(hbg_device *dev, hbg__cu_scratch *s, size_t need) {
  if (need <= s->cap)
    return 0;
  size_t cap = HBG__MAX(need, s->cap * 2);
  cap = HBG__ALIGN_UP(HBG__MAX(cap, (size_t)65536), (size_t)65536);
  hbg__cu_scratch_free(dev, s);
  void *p = NULL;
  cudaError_t e = cudaHostAlloc(&p, cap, cudaHostAllocPortable);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaHostAlloc", HBG_E_NOMEM);
  s->p = p;
  s->cap = cap;
  return 0;
}

void hbg__cu_scratch_free(hbg_device *dev, hbg__cu_scratch *s) {
  if (s->p)
    cu_note(dev, cudaFreeHost(s->p), "cudaFreeHost");
  s->p = NULL;
  s->cap = 0;
}

/* ---------------- probe / open / close ---------------- */

static int cu_probe(char *buf, size_t len) {
  char dummy[1];
  if (!buf || !len) {
    buf = dummy;
    len = sizeof dummy;
  }
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    snprintf(buf, len, "no GPU: %s", cudaGetErrorString(e));
    return HBG_E_UNSUPPORTED;
  }
  if (n <= 0) {
    snprintf(buf, len, "no GPU: no CUDA-capable device is detected");
    return HBG_E_UNSUPPORTED;
  }
  struct cudaDeviceProp p;
  memset(&p, 0, sizeof p);
  e = cudaGetDeviceProperties(&p, 0);
  if (e != cudaSuccess) {
    snprintf(buf, len, "no GPU: %s", cudaGetErrorString(e));
    return HBG_E_UNSUPPORTED;
  }
  p.name[sizeof p.name - 1] = '\0';
  snprintf(buf, len, "available: %d GPU(s), %s, CC %d.%d", n, p.name, p.major,
           p.minor);
  return 0;
}

static int cu_open(hbg_device *dev, const char *options) {
  uint64_t ord = 0;
  HBG__RETURN_IF(hbg__opt_u64(options, "device", &ord) < 0, HBG_E_INVAL);
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)hbg__cu_err(dev, e, "cudaGetDeviceCount", HBG_E_DEVICE);
    return HBG_E_UNSUPPORTED;
  }
  if (n <= 0) {
    hbg_device_set_native(dev, (int64_t)cudaErrorNoDevice,
                          "cudaGetDeviceCount: no CUDA-capable device");
    return HBG_E_UNSUPPORTED;
  }
  if (ord >= (uint64_t)n) {
    hbg_device_set_native(dev, (int64_t)cudaErrorInvalidDevice,
                          "device=%llu: only %d GPU(s)",
                          (unsigned long long)ord, n);
    return HBG_E_NOTFOUND;
  }
  hbg__cuda *c = calloc(1, sizeof *c);
  if (!c)
    return HBG_E_NOMEM;
  c->ordinal = (int)ord;
  int rc;
  e = cudaSetDevice(c->ordinal);
  if (e != cudaSuccess) {
    rc = hbg__cu_err(dev, e, "cudaSetDevice", HBG_E_DEVICE);
    goto err_free;
  }
  size_t mfree = 0, mtotal = 0;
  e = cudaMemGetInfo(&mfree, &mtotal);
  if (e != cudaSuccess) {
    rc = hbg__cu_err(dev, e, "cudaMemGetInfo", HBG_E_DEVICE);
    goto err_free;
  }
  c->mem_bytes = mtotal;
  e = cudaStreamCreateWithFlags(&c->sync, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    rc = hbg__cu_err(dev, e, "cudaStreamCreateWithFlags", HBG_E_DEVICE);
    goto err_free;
  }
  hbg_device_set_impl(dev, c);
  return 0;

err_free:
  free(c);
  return rc;
}

static void cu_close(hbg_device *dev) {
  hbg__cuda *c = impl_of(dev);
  if (!c)
    return;
  cu_note(dev, cudaSetDevice(c->ordinal), "cudaSetDevice");
  cu_note(dev, cudaStreamSynchronize(c->sync), "cudaStreamSynchronize");
  cu_note(dev, cudaStreamDestroy(c->sync), "cudaStreamDestroy");
  hbg__cu_scratch_free(dev, &c->img);
  hbg__cu_scratch_free(dev, &c->win);
  hbg__cu_verify_free(c);
  /* Whatever the caller leaked, newest first. */
  for (size_t i = c->dmem.n; i-- > 0;)
    cu_note(dev, cudaFree((void *)(uintptr_t)c->dmem.v[i].start), "cudaFree");
  for (size_t i = c->host.n; i-- > 0;) {
    void *p = (void *)(uintptr_t)c->host.v[i].start;
    if (c->host.v[i].kind == HBG__CU_HOST_ALLOC)
      cu_note(dev, cudaFreeHost(p), "cudaFreeHost");
    else
      cu_note(dev, cudaHostUnregister(p), "cudaHostUnregister");
  }
  hbg__rtab_free(&c->dmem);
  hbg__rtab_free(&c->host);
  free(c);
  hbg_device_set_impl(dev, NULL);
}

static int cu_get_caps(hbg_device *dev, hbg_dev_caps *caps) {
  hbg__cuda *c = impl_of(dev);
  memset(caps, 0, sizeof *caps);
  caps->struct_size = sizeof *caps;
  caps->flags = HBG_DEV_CAP_ASYNC_NEEDS_PINNED | HBG_DEV_CAP_VERIFIES |
                HBG_DEV_CAP_HOST_REGISTER;
  caps->stage_align = 64;
  caps->piece_pad_align = 1;
  caps->piece_pad_extra = 0;
  caps->dev_align = 256;
  caps->max_batch = 0;
  caps->mem_bytes = c->mem_bytes;
  return 0;
}

static int cu_get_stats(hbg_device *dev, hbg_dev_stats *out) {
  hbg__cuda *c = impl_of(dev);
  hbg_dev_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
#define LOAD(f) s.f = atomic_load_explicit(&c->st.f, memory_order_relaxed)
  LOAD(h2d_copies);
  LOAD(h2d_bytes);
  LOAD(d2h_copies);
  LOAD(d2h_bytes);
  LOAD(async_copies);
  LOAD(async_degraded);
  LOAD(pinned_direct);
  LOAD(handshakes);
  LOAD(mem_allocs);
  LOAD(mem_frees);
  LOAD(mem_in_use);
  LOAD(host_allocs);
  LOAD(host_frees);
  LOAD(host_in_use);
  LOAD(launches);
#undef LOAD
  *out = s;
  return 0;
}

/* ---------------- host memory ---------------- */

static int cu_host_alloc(hbg_device *dev, size_t bytes, void **out) {
  hbg__cuda *c = impl_of(dev);
  void *p = NULL;
  cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaHostAlloc", HBG_E_NOMEM);
  if (ranges_insert(&c->host, (uint64_t)(uintptr_t)p, bytes,
                    HBG__CU_HOST_ALLOC) < 0) {
    cu_note(dev, cudaFreeHost(p), "cudaFreeHost");
    return HBG_E_NOMEM;
  }
  HBG__CU_ADD(c, host_allocs, 1);
  HBG__CU_ADD(c, host_in_use, bytes);
  *out = p;
  return 0;
}

static int cu_host_free(hbg_device *dev, void *p) {
  hbg__cuda *c = impl_of(dev);
  if (!p)
    return 0;
  size_t i = ranges_exact(&c->host, (uint64_t)(uintptr_t)p, HBG__CU_HOST_ALLOC);
  HBG__RETURN_IF(i == c->host.n, HBG_E_INVAL);
  cudaError_t e = cudaFreeHost(p);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaFreeHost", HBG_E_DEVICE);
  uint64_t len = c->host.v[i].len;
  hbg__rtab_remove_at(&c->host, i);
  HBG__CU_ADD(c, host_frees, 1);
  atomic_fetch_sub_explicit(&c->st.host_in_use, len, memory_order_relaxed);
  return 0;
}

static int cu_host_register(hbg_device *dev, void *p, size_t bytes) {
  hbg__cuda *c = impl_of(dev);
  uint64_t lo = (uint64_t)(uintptr_t)p;
  HBG__RETURN_IF(bytes > UINT64_MAX - lo, HBG_E_INVAL);
  HBG__RETURN_IF(ranges_overlap(&c->host, lo, bytes), HBG_E_INVAL);
  cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaHostRegister", HBG_E_NOMEM);
  if (ranges_insert(&c->host, lo, bytes, HBG__CU_HOST_REGISTER) < 0) {
    cu_note(dev, cudaHostUnregister(p), "cudaHostUnregister");
    return HBG_E_NOMEM;
  }
  return 0;
}

static int cu_host_unregister(hbg_device *dev, void *p) {
  hbg__cuda *c = impl_of(dev);
  size_t i =
      ranges_exact(&c->host, (uint64_t)(uintptr_t)p, HBG__CU_HOST_REGISTER);
  HBG__RETURN_IF(i == c->host.n, HBG_E_INVAL);
  cudaError_t e = cudaHostUnregister(p);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaHostUnregister", HBG_E_DEVICE);
  hbg__rtab_remove_at(&c->host, i);
  return 0;
}

/* ---------------- device memory ---------------- */

static int cu_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out) {
  hbg__cuda *c = impl_of(dev);
  int rc = cu_current(dev, c);
  if (rc < 0)
    return rc;
  cudaError_t e;
  void *p = NULL;
  e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaMalloc", HBG_E_DEVMEM);
  if (ranges_insert(&c->dmem, (uint64_t)(uintptr_t)p, bytes,
                    HBG__CU_DEV_ALLOC) < 0) {
    cu_note(dev, cudaFree(p), "cudaFree");
    return HBG_E_NOMEM;
  }
  HBG__CU_ADD(c, mem_allocs, 1);
  HBG__CU_ADD(c, mem_in_use, bytes);
  *out = (hbg_devptr)(uintptr_t)p;
  return 0;
}

static int cu_mem_free(hbg_device *dev, hbg_devptr p) {
  hbg__cuda *c = impl_of(dev);
  if (!p)
    return 0;
  size_t i = ranges_exact(&c->dmem, p, HBG__CU_DEV_ALLOC);
  HBG__RETURN_IF(i == c->dmem.n, HBG_E_INVAL);
  int rc = cu_current(dev, c);
  if (rc < 0)
    return rc;
  cudaError_t e;
  e = cudaFree((void *)(uintptr_t)p);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaFree", HBG_E_DEVMEM);
  uint64_t len = c->dmem.v[i].len;
  hbg__rtab_remove_at(&c->dmem, i);
  HBG__CU_ADD(c, mem_frees, 1);
  atomic_fetch_sub_explicit(&c->st.mem_in_use, len, memory_order_relaxed);
  return 0;
}

/* ---------------- copies ---------------- */

static void trace_copy(hbg_device *dev, const char *name, uint64_t t0,
                       uint64_t bytes) {
  hbg_trace_event ev = {.track = HBG_TRACK_COPY,
                        .name = name,
                        .start_ns = t0,
                        .dur_ns = hbg__now_ns() - t0,
                        .bytes = bytes};
  hbg_device_trace(dev, &ev);
}

static int cu_copy_sync(hbg_device *dev, void *dst, const void *src,
                        size_t bytes, enum cudaMemcpyKind kind) {
  hbg__cuda *c = impl_of(dev);
  const int h2d = kind == cudaMemcpyHostToDevice;
  const int tracing = hbg_device_tracing(dev);
  uint64_t t0 = tracing ? hbg__now_ns() : 0;
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, c->sync);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaMemcpyAsync", HBG_E_DEVICE);
  e = cudaStreamSynchronize(c->sync);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaStreamSynchronize", HBG_E_DEVICE);
  if (host_pinned(c, h2d ? src : dst, bytes))
    HBG__CU_ADD(c, pinned_direct, 1);
  HBG__CU_ADD(c, handshakes, 1);
  if (h2d) {
    HBG__CU_ADD(c, h2d_copies, 1);
    HBG__CU_ADD(c, h2d_bytes, bytes);
  } else {
    HBG__CU_ADD(c, d2h_copies, 1);
    HBG__CU_ADD(c, d2h_bytes, bytes);
  }
  if (tracing)
    trace_copy(dev, h2d ? "h2d" : "d2h", t0, bytes);
  return 0;
}

static int cu_copy_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                       size_t bytes) {
  if (!bytes)
    return 0;
  return cu_copy_sync(dev, (void *)(uintptr_t)dst, src, bytes,
                      cudaMemcpyHostToDevice);
}

static int cu_copy_d2h(hbg_device *dev, void *dst, hbg_devptr src,
                       size_t bytes) {
  if (!bytes)
    return 0;
  return cu_copy_sync(dev, dst, (const void *)(uintptr_t)src, bytes,
                      cudaMemcpyDeviceToHost);
}

/* ---------------- queues ---------------- */

static int cu_queue_create(hbg_device *dev, hbg_dev_queue **out) {
  hbg__cuda *c = impl_of(dev);
  hbg_dev_queue *q = calloc(1, sizeof *q);
  if (!q)
    return HBG_E_NOMEM;
  int rc = cu_current(dev, c);
  if (rc < 0)
    goto err_free;
  cudaError_t e = cudaStreamCreateWithFlags(&q->s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    rc = hbg__cu_err(dev, e, "cudaStreamCreateWithFlags", HBG_E_DEVMEM);
    goto err_free;
  }
  *out = q;
  return 0;

err_free:
  free(q);
  return rc;
}

static int cu_queue_destroy(hbg_device *dev, hbg_dev_queue *q) {
  if (!q)
    return 0;
  int rc = 0;
  /* The status slot may still be the source of a queued copy. */
  cudaError_t e = cudaStreamSynchronize(q->s);
  if (e != cudaSuccess)
    rc = hbg__cu_err(dev, e, "cudaStreamSynchronize", HBG_E_DEVICE);
  e = cudaStreamDestroy(q->s);
  if (e != cudaSuccess && rc == 0)
    rc = hbg__cu_err(dev, e, "cudaStreamDestroy", HBG_E_DEVICE);
  if (q->status) {
    e = cudaFreeHost(q->status);
    if (e != cudaSuccess && rc == 0)
      rc = hbg__cu_err(dev, e, "cudaFreeHost", HBG_E_DEVICE);
  }
  free(q);
  return rc;
}

static int cu_copy_h2d_async(hbg_device *dev, hbg_dev_queue *q, hbg_devptr dst,
                             const void *src, size_t bytes) {
  hbg__cuda *c = impl_of(dev);
  if (!bytes)
    return 0;
  /* From pageable memory the driver stages the source before returning, so
   * the copy stays correct; it is just not asynchronous. */
  cudaError_t e = cudaMemcpyAsync((void *)(uintptr_t)dst, src, bytes,
                                  cudaMemcpyHostToDevice, q->s);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaMemcpyAsync", HBG_E_DEVICE);
  HBG__CU_ADD(c, h2d_copies, 1);
  HBG__CU_ADD(c, h2d_bytes, bytes);
  HBG__CU_ADD(c, async_copies, 1);
  if (host_pinned(c, src, bytes))
    HBG__CU_ADD(c, pinned_direct, 1);
  else
    HBG__CU_ADD(c, async_degraded, 1);
  return 0;
}

static int cu_queue_sync(hbg_device *dev, hbg_dev_queue *q) {
  cudaError_t e = cudaStreamSynchronize(q->s);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaStreamSynchronize", HBG_E_DEVICE);
  HBG__CU_ADD(impl_of(dev), handshakes, 1);
  return 0;
}

/* ---------------- events ---------------- */

static int cu_event_create(hbg_device *dev, hbg_dev_event **out) {
  hbg__cuda *c = impl_of(dev);
  hbg_dev_event *ev = calloc(1, sizeof *ev);
  if (!ev)
    return HBG_E_NOMEM;
  int rc = cu_current(dev, c);
  if (rc < 0)
    goto err_free;
  cudaError_t e = cudaEventCreateWithFlags(&ev->e, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    rc = hbg__cu_err(dev, e, "cudaEventCreateWithFlags", HBG_E_DEVMEM);
    goto err_free;
  }
  *out = ev;
  return 0;

err_free:
  free(ev);
  return rc;
}

static int cu_event_destroy(hbg_device *dev, hbg_dev_event *ev) {
  if (!ev)
    return 0;
  cudaError_t e = cudaEventDestroy(ev->e);
  free(ev);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaEventDestroy", HBG_E_DEVICE);
  return 0;
}

static int cu_event_record(hbg_device *dev, hbg_dev_event *ev,
                           hbg_dev_queue *q) {
  cudaError_t e = cudaEventRecord(ev->e, q->s);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaEventRecord", HBG_E_DEVICE);
  return 0;
}

static int cu_event_query(hbg_device *dev, hbg_dev_event *ev) {
  cudaError_t e = cudaEventQuery(ev->e);
  if (e == cudaSuccess)
    return 0;
  if (e == cudaErrorNotReady)
    return HBG_E_AGAIN;
  return hbg__cu_err(dev, e, "cudaEventQuery", HBG_E_DEVICE);
}

static int cu_event_wait(hbg_device *dev, hbg_dev_event *ev) {
  cudaError_t e = cudaEventSynchronize(ev->e);
  if (e != cudaSuccess)
    return hbg__cu_err(dev, e, "cudaEventSynchronize", HBG_E_DEVICE);
  HBG__CU_ADD(impl_of(dev), handshakes, 1);
  return 0;
}

const hbg_dev_ops hbg__cuda_ops = {
    .struct_size = sizeof(hbg_dev_ops),
    .abi_version = HBG_DEV_ABI_VERSION,
    .name = "cuda",
    .summary = "CUDA runtime (cudaMalloc, cudaMemcpy, streams, events); "
               "launch verifies the images on the device, options device=N",
    .probe = cu_probe,
    .open = cu_open,
    .close = cu_close,
    .get_caps = cu_get_caps,
    .get_stats = cu_get_stats,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .host_register = cu_host_register,
    .host_unregister = cu_host_unregister,
    .mem_alloc = cu_mem_alloc,
    .mem_free = cu_mem_free,
    .copy_h2d = cu_copy_h2d,
    .copy_d2h = cu_copy_d2h,
    .queue_create = cu_queue_create,
    .queue_destroy = cu_queue_destroy,
    .copy_h2d_async = cu_copy_h2d_async,
    .queue_sync = cu_queue_sync,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .event_query = cu_event_query,
    .event_wait = cu_event_wait,
    .launch = hbg__cu_launch,
};
