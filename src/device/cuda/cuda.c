/*
 * cuda backend: the CUDA driver API behind the hbg device ops. The driver
 * is loaded with dlopen at open (cuda_load.c, which also probes and maps
 * errors): libhbg has no link to libcuda or libcudart.
 *
 * At open the embedded device module is loaded (cuda_module.c) and
 * unloaded at close. The device's primary context is retained while it is
 * open and made
 * current on whichever thread calls an op. Synchronous copies run on an
 * internal non-blocking stream followed by a stream synchronize, so they
 * return only once the DMA has landed (a plain cuMemcpyHtoD from pageable
 * memory may return while the DMA is still in flight). Queues are
 * non-blocking streams; events are created with timing enabled where the
 * driver has cuEventElapsedTime (the event_elapsed op), disabled otherwise.
 * Every CUresult is checked where it is returned and mapped there, the
 * native code and message kept on the device.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/cuda/cuda_internal.h"
#include "device/cuda/cuda_link.h"
#include "device/cuda/cuda_peer.h"
#include "device/cuda/devcode/devcode.h"
#include "device/device_internal.h"

static hbg__cuda *impl_of(hbg_device *dev) { return hbg_device_impl(dev); }

/* For teardown paths that cannot return an error: keep the native one. */
static void cu_note(hbg_device *dev, CUresult e, const char *call) {
  if (e != CUDA_SUCCESS)
    (void)hbg__cu_err(dev, e, call, HBG_E_DEVICE);
}

#define CU_TRY(dev, c, oom, fn, ...)                                           \
  do {                                                                         \
    CUresult cu__e = (c)->f.fn(__VA_ARGS__);                                   \
    if (cu__e != CUDA_SUCCESS)                                                 \
      return hbg__cu_err((dev), cu__e, #fn, (oom));                            \
  } while (0)

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
  hbg__cuda *c = impl_of(dev);
  if (need <= s->cap)
    return 0;
  size_t cap = HBG__MAX(need, s->cap * 2);
  cap = HBG__ALIGN_UP(HBG__MAX(cap, (size_t)65536), (size_t)65536);
  hbg__cu_scratch_free(dev, s);
  void *p = NULL;
  CU_TRY(dev, c, HBG_E_NOMEM, cuMemHostAlloc, &p, cap,
         CU_MEMHOSTALLOC_PORTABLE);
  s->p = p;
  s->cap = cap;
  return 0;
}

void hbg__cu_scratch_free(hbg_device *dev, hbg__cu_scratch *s) {
  if (s->p)
    cu_note(dev, impl_of(dev)->f.cuMemFreeHost(s->p), "cuMemFreeHost");
  s->p = NULL;
  s->cap = 0;
}

/* The executor's block per stream starts this small: the first launch
 * with sizing hints (every bind's) grows it to what its window needs. */
#define CU_XSCRATCH_DEFAULT ((uint64_t)HBG_DC_EXEC_MIN_SCRATCH)

/* A launch of the executor may wait this long (device clock) for its
 * CTAs or its items before it fails with HBG_E_TIMEOUT. */
#define CU_DEADLINE_MS_DEFAULT 10000u
#define CU_DEADLINE_MS_MAX 86400000u /* a day */

/* deadline_ms= (else HBG_CUDA_DEADLINE_MS, else the default) into *ns.
 * @return 0 or HBG_E_INVAL, the native message naming where it came
 * from. */
static int cu_deadline_opt(hbg_device *dev, const char *options,
                           uint64_t *ns) {
  uint64_t ms = CU_DEADLINE_MS_DEFAULT;
  const char *from = "HBG_CUDA_DEADLINE_MS";
  int rc = hbg__env_u64(from, &ms);
  char v[8];
  if (hbg__opt_get(options, "deadline_ms", v, sizeof v) != 0) {
    from = "deadline_ms=";
    ms = 0;
    rc = hbg__opt_u64(options, "deadline_ms", &ms);
  }
  if (rc < 0 || ms < 1 || ms > CU_DEADLINE_MS_MAX) {
    hbg_device_set_native(dev, 0,
                          "%s: want milliseconds 1..%u: how long a launch "
                          "of the device executor may wait for its CTAs or "
                          "its items (default %u)",
                          from, CU_DEADLINE_MS_MAX, CU_DEADLINE_MS_DEFAULT);
    return HBG_E_INVAL;
  }
  *ns = ms * 1000000u;
  return 0;
}

/* exec=, scratch= and worker=: *device 0 (verify) or 1 (the default);
 * *scratch the initial size of the executor's block per stream; *cta 1
 * when a whole CTA is one worker (worker=cta), 0 for a warp (worker=warp,
 * the default). @return 0 or HBG_E_INVAL, the native message naming the
 * option. */
static int cu_exec_opts(hbg_device *dev, const char *options, int *device,
                        uint64_t *scratch, int *cta) {
  char v[16];
  int found = hbg__opt_get(options, "exec", v, sizeof v);
  *device = 1;
  if (found == 1 && strcmp(v, "verify") == 0)
    *device = 0;
  else if (found != 0 && !(found == 1 && strcmp(v, "device") == 0)) {
    char shown[64] = "";
    if (hbg__opt_get(options, "exec", shown, sizeof shown) < 0)
      snprintf(shown, sizeof shown, "(too long)");
    hbg_device_set_native(dev, 0,
                          "exec=%s: want exec=device (the device executor, "
                          "the default) or exec=verify (the host-side launch "
                          "verifier, no execution)",
                          shown);
    return HBG_E_INVAL;
  }
  *scratch = CU_XSCRATCH_DEFAULT;
  if (hbg__opt_u64(options, "scratch", scratch) < 0 ||
      *scratch < HBG_DC_EXEC_MIN_SCRATCH || *scratch > (1ull << 40)) {
    hbg_device_set_native(dev, 0,
                          "scratch=: want bytes %u..1T (K/M/G suffix): the "
                          "initial size of the device executor's block per "
                          "stream",
                          HBG_DC_EXEC_MIN_SCRATCH);
    return HBG_E_INVAL;
  }
  *cta = 0;
  found = hbg__opt_get(options, "worker", v, sizeof v);
  if (found == 1 && strcmp(v, "cta") == 0) {
    *cta = 1;
  } else if (found != 0 && !(found == 1 && strcmp(v, "warp") == 0)) {
    hbg_device_set_native(dev, 0,
                          "worker=: want worker=warp (each warp of the "
                          "device executor runs items, the default) or "
                          "worker=cta (each CTA runs one item at a time)");
    return HBG_E_INVAL;
  }
  return 0;
}

static int cu_open(hbg_device *dev, const char *options) {
  char path[512];
  char why[768];
  uint64_t ord = 0;
  HBG__RETURN_IF(hbg__opt_u64(options, "device", &ord) < 0, HBG_E_INVAL);
  HBG__RETURN_IF(hbg__cu_lib_path(options, path, sizeof path) < 0,
                 HBG_E_INVAL);
  int exec_device = 1, worker_cta = 0, ctx_current = 0;
  uint64_t xscratch = 0, deadline_ns = 0;
  char ctxv[16];
  int found = hbg__opt_get(options, "ctx", ctxv, sizeof ctxv);
  if (found < 0 || (found && strcmp(ctxv, "current") != 0 &&
                    strcmp(ctxv, "primary") != 0)) {
    hbg_device_set_native(dev, 0,
                          "ctx=: want ctx=primary (the device's primary "
                          "context, retained; the default) or ctx=current "
                          "(the context current on the calling thread, "
                          "borrowed)");
    return HBG_E_INVAL;
  }
  ctx_current = found && strcmp(ctxv, "current") == 0;
  HBG__TRY(cu_exec_opts(dev, options, &exec_device, &xscratch, &worker_cta));
  HBG__TRY(cu_deadline_opt(dev, options, &deadline_ns));
  hbg__cuda *c = calloc(1, sizeof *c);
  if (!c)
    return HBG_E_NOMEM;
  c->exec_device = exec_device;
  c->xscratch = xscratch;
  c->worker_cta = worker_cta;
  c->deadline_ns = deadline_ns;
  pthread_mutex_init(&c->dead_mu, NULL);
  int rc = hbg__cu_load(path, &c->lib, &c->f, why, sizeof why);
  if (rc < 0) {
    hbg_device_set_native(dev, 0, "%s", why);
    pthread_mutex_destroy(&c->dead_mu);
    free(c);
    return rc;
  }
  hbg_device_set_impl(dev, c); /* hbg__cu_err reads the table */
  CUresult e = c->f.cuInit(0);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err(dev, e, "cuInit", HBG_E_DEVICE);
    goto err_lib;
  }
  int n = 0;
  e = c->f.cuDeviceGetCount(&n);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err(dev, e, "cuDeviceGetCount", HBG_E_DEVICE);
    goto err_lib;
  }
  if (n <= 0) {
    hbg_device_set_native(dev, CUDA_ERROR_NO_DEVICE,
                          "cuDeviceGetCount: no CUDA-capable device");
    rc = HBG_E_UNSUPPORTED;
    goto err_lib;
  }
  if (ord >= (uint64_t)n) {
    hbg_device_set_native(dev, CUDA_ERROR_INVALID_DEVICE,
                          "device=%llu: only %d GPU(s)",
                          (unsigned long long)ord, n);
    rc = HBG_E_NOTFOUND;
    goto err_lib;
  }
  c->ordinal = (int)ord;
  e = c->f.cuDeviceGet(&c->cudev, c->ordinal);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err(dev, e, "cuDeviceGet", HBG_E_DEVICE);
    goto err_lib;
  }
  if (ctx_current) {
    /* The caller's context, current on this thread (PyTorch's: the
     * device's primary context): used as it is, never released. */
    CUcontext cur = NULL;
    e = c->f.cuCtxGetCurrent(&cur);
    if (e != CUDA_SUCCESS || !cur || !c->f.cuCtxGetDevice) {
      hbg_device_set_native(dev, e,
                            "ctx=current: %s",
                            !c->f.cuCtxGetDevice
                                ? "the driver has no cuCtxGetDevice"
                                : "no CUDA context is current on the "
                                  "calling thread");
      rc = HBG_E_STATE;
      goto err_lib;
    }
    e = c->f.cuCtxGetDevice(&c->cudev);
    if (e != CUDA_SUCCESS) {
      rc = hbg__cu_err(dev, e, "cuCtxGetDevice", HBG_E_DEVICE);
      goto err_lib;
    }
    c->ctx = cur;
    c->ctx_borrowed = 1;
  } else {
    e = c->f.cuDevicePrimaryCtxRetain(&c->ctx, c->cudev);
    if (e != CUDA_SUCCESS) {
      rc = hbg__cu_err(dev, e, "cuDevicePrimaryCtxRetain", HBG_E_DEVICE);
      goto err_lib;
    }
  }
  rc = hbg__cu_enter(dev, c);
  if (rc < 0)
    goto err_ctx;
  size_t total = 0;
  e = c->f.cuDeviceTotalMem_v2(&total, c->cudev);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err(dev, e, "cuDeviceTotalMem_v2", HBG_E_DEVICE);
    goto err_ctx;
  }
  c->mem_bytes = total;
  e = c->f.cuStreamCreate(&c->sync, CU_STREAM_NON_BLOCKING);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err(dev, e, "cuStreamCreate", HBG_E_DEVICE);
    goto err_ctx;
  }
  rc = hbg__cu_module_load(dev, c);
  if (rc < 0)
    goto err_sync;
  if (c->exec_device) {
    rc = hbg__cu_exec_shape(dev, c, c->fn_exec, &c->xbuilt);
    if (rc < 0)
      goto err_mod;
  }
  return 0;

err_mod:
  hbg__cu_module_unload(dev, c);
err_sync:
  (void)c->f.cuStreamDestroy_v2(c->sync);
err_ctx:
  if (!c->ctx_borrowed)
    (void)c->f.cuDevicePrimaryCtxRelease_v2(c->cudev);
err_lib:
  pthread_mutex_destroy(&c->dead_mu);
  dlclose(c->lib);
  hbg_device_set_impl(dev, NULL);
  free(c);
  return rc;
}

static void cu_close(hbg_device *dev) {
  hbg__cuda *c = impl_of(dev);
  if (!c)
    return;
  (void)hbg__cu_enter(dev, c);
  cu_note(dev, c->f.cuStreamSynchronize(c->sync), "cuStreamSynchronize");
  cu_note(dev, c->f.cuStreamDestroy_v2(c->sync), "cuStreamDestroy_v2");
  hbg__cu_scratch_free(dev, &c->img);
  hbg__cu_scratch_free(dev, &c->win);
  hbg__cu_verify_free(c);
  /* Whatever the caller leaked, newest first; imports are the caller's
   * memory: forgotten, never freed. */
  for (size_t i = c->dmem.n; i-- > 0;)
    if (c->dmem.v[i].kind == HBG__CU_DEV_ALLOC)
      cu_note(dev, c->f.cuMemFree_v2((CUdeviceptr)c->dmem.v[i].start),
              "cuMemFree_v2");
  for (size_t i = c->host.n; i-- > 0;) {
    void *p = (void *)(uintptr_t)c->host.v[i].start;
    if (c->host.v[i].kind == HBG__CU_HOST_ALLOC)
      cu_note(dev, c->f.cuMemFreeHost(p), "cuMemFreeHost");
    else
      cu_note(dev, c->f.cuMemHostUnregister(p), "cuMemHostUnregister");
  }
  hbg__cu_dead_reap(dev, c);
  hbg__cu_link_free(dev, c);
  hbg__cu_module_unload(dev, c);
  if (!c->ctx_borrowed)
    cu_note(dev, c->f.cuDevicePrimaryCtxRelease_v2(c->cudev),
            "cuDevicePrimaryCtxRelease_v2");
  dlclose(c->lib);
  pthread_mutex_destroy(&c->dead_mu);
  hbg__rtab_free(&c->dmem);
  free(c->xr_host);
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
  LOAD(scratch_allocs);
  LOAD(scratch_frees);
  LOAD(scratch_in_use);
#undef LOAD
  *out = s;
  return 0;
}

/* ---------------- host memory ---------------- */

static int cu_host_alloc(hbg_device *dev, size_t bytes, void **out) {
  hbg__cuda *c = impl_of(dev);
  HBG__TRY(hbg__cu_enter(dev, c));
  void *p = NULL;
  CU_TRY(dev, c, HBG_E_NOMEM, cuMemHostAlloc, &p, bytes,
         CU_MEMHOSTALLOC_PORTABLE);
  if (ranges_insert(&c->host, (uint64_t)(uintptr_t)p, bytes,
                    HBG__CU_HOST_ALLOC) < 0) {
    cu_note(dev, c->f.cuMemFreeHost(p), "cuMemFreeHost");
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
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVICE, cuMemFreeHost, p);
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
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_NOMEM, cuMemHostRegister_v2, p, bytes,
         CU_MEMHOSTREGISTER_PORTABLE);
  if (ranges_insert(&c->host, lo, bytes, HBG__CU_HOST_REGISTER) < 0) {
    cu_note(dev, c->f.cuMemHostUnregister(p), "cuMemHostUnregister");
    return HBG_E_NOMEM;
  }
  return 0;
}

static int cu_host_unregister(hbg_device *dev, void *p) {
  hbg__cuda *c = impl_of(dev);
  size_t i =
      ranges_exact(&c->host, (uint64_t)(uintptr_t)p, HBG__CU_HOST_REGISTER);
  HBG__RETURN_IF(i == c->host.n, HBG_E_INVAL);
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVICE, cuMemHostUnregister, p);
  hbg__rtab_remove_at(&c->host, i);
  return 0;
}

/* ---------------- device memory ---------------- */

static int cu_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out) {
  hbg__cuda *c = impl_of(dev);
  HBG__TRY(hbg__cu_enter(dev, c));
  CUdeviceptr p = 0;
  CU_TRY(dev, c, HBG_E_DEVMEM, cuMemAlloc_v2, &p, bytes);
  if (ranges_insert(&c->dmem, (uint64_t)p, bytes, HBG__CU_DEV_ALLOC) < 0) {
    cu_note(dev, c->f.cuMemFree_v2(p), "cuMemFree_v2");
    return HBG_E_NOMEM;
  }
  c->dmem_gen++;
  HBG__CU_ADD(c, mem_allocs, 1);
  HBG__CU_ADD(c, mem_in_use, bytes);
  *out = (hbg_devptr)p;
  return 0;
}

static int cu_mem_free(hbg_device *dev, hbg_devptr p) {
  hbg__cuda *c = impl_of(dev);
  if (!p)
    return 0;
  size_t i = ranges_exact(&c->dmem, p, HBG__CU_DEV_ALLOC);
  HBG__RETURN_IF(i == c->dmem.n, HBG_E_INVAL);
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVMEM, cuMemFree_v2, (CUdeviceptr)p);
  uint64_t len = c->dmem.v[i].len;
  hbg__rtab_remove_at(&c->dmem, i);
  c->dmem_gen++;
  HBG__CU_ADD(c, mem_frees, 1);
  atomic_fetch_sub_explicit(&c->st.mem_in_use, len, memory_order_relaxed);
  return 0;
}

/* ---------------- imported device memory ---------------- */

/* The live range of dmem overlapping [lo, lo + len), or NULL. */
static const hbg__range *ranges_overlapping(const hbg__rtab *t, uint64_t lo,
                                            uint64_t len) {
  size_t i = hbg__rtab_upper(t, lo);
  if (i > 0 && lo - t->v[i - 1].start < t->v[i - 1].len)
    return &t->v[i - 1];
  return i < t->n && t->v[i].start - lo < len ? &t->v[i] : NULL;
}

static const char *mem_type_name(unsigned type) {
  switch (type) {
  case CU_MEMORYTYPE_HOST:
    return "host memory";
  case CU_MEMORYTYPE_ARRAY:
    return "a CUDA array";
  case CU_MEMORYTYPE_UNIFIED:
    return "unified memory";
  default:
    return "memory of an unknown type";
  }
}

/* The caller's device memory [addr, addr + bytes), validated once with
 * cuPointerGetAttributes (its context, its memory type, the allocation's
 * range holding the caller's bounds) and registered as HBG__CU_DEV_IMPORT.
 * The bounds are the caller's: the driver's range is only checked to hold
 * them (a tensor of a caching allocator is a piece of a larger segment). */
static int cu_mem_import(hbg_device *dev, uint64_t addr, size_t bytes,
                         hbg_devptr *out) {
  hbg__cuda *c = impl_of(dev);
  uint64_t n = (uint64_t)bytes;
  if (!c->f.cuPointerGetAttributes) {
    hbg_device_set_native(dev, HBG_E_UNSUPPORTED,
                          "the driver lacks cuPointerGetAttributes: "
                          "imports cannot be validated");
    return HBG_E_UNSUPPORTED;
  }
  if (n > UINT64_MAX - addr) {
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "0x%llx + %llu bytes wraps around the address "
                          "space",
                          (unsigned long long)addr, (unsigned long long)n);
    return HBG_E_INVAL;
  }
  const hbg__range *o = ranges_overlapping(&c->dmem, addr, n);
  if (o) {
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "it overlaps the %s at 0x%llx, %llu bytes",
                          o->kind == HBG__CU_DEV_IMPORT
                              ? "import"
                              : "device allocation",
                          (unsigned long long)o->start,
                          (unsigned long long)o->len);
    return HBG_E_INVAL;
  }
  HBG__TRY(hbg__cu_enter(dev, c));
  CUcontext ctx = NULL;
  unsigned type = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attrs[] = {
      CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *data[] = {&ctx, &type, &start, &size};
  CU_TRY(dev, c, HBG_E_DEVICE, cuPointerGetAttributes,
         (unsigned)HBG__ARRAY_LEN(attrs), attrs, data, (CUdeviceptr)addr);
  if (!ctx && !type) {
    hbg_device_set_native(dev, HBG_E_RANGE,
                          "0x%llx is not CUDA memory (the driver knows no "
                          "allocation there)",
                          (unsigned long long)addr);
    return HBG_E_RANGE;
  }
  if (type != CU_MEMORYTYPE_DEVICE) {
    hbg_device_set_native(dev, HBG_E_RANGE,
                          "0x%llx is %s, not device memory",
                          (unsigned long long)addr, mem_type_name(type));
    return HBG_E_RANGE;
  }
  if (ctx != c->ctx) {
    hbg_device_set_native(dev, HBG_E_RANGE,
                          "0x%llx belongs to another context (%p), not "
                          "device %d's primary context (%p)",
                          (unsigned long long)addr, (void *)ctx, c->ordinal,
                          (void *)c->ctx);
    return HBG_E_RANGE;
  }
  uint64_t lo = (uint64_t)start, end = lo + (uint64_t)size;
  if (lo > addr || end < lo || end - addr < n) {
    if (lo > addr || end <= addr)
      hbg_device_set_native(dev, HBG_E_RANGE,
                            "the driver's range of 0x%llx, [0x%llx, +%llu), "
                            "does not hold it",
                            (unsigned long long)addr, (unsigned long long)lo,
                            (unsigned long long)size);
    else
      hbg_device_set_native(dev, HBG_E_RANGE,
                            "its allocation [0x%llx, +%llu) ends %llu bytes "
                            "early",
                            (unsigned long long)lo, (unsigned long long)size,
                            (unsigned long long)(addr + n - end));
    return HBG_E_RANGE;
  }
  if (ranges_insert(&c->dmem, addr, n, HBG__CU_DEV_IMPORT) < 0)
    return HBG_E_NOMEM;
  c->dmem_gen++;
  *out = (hbg_devptr)addr;
  return 0;
}

/* Forget an import: no driver call, the memory is the caller's. */
static int cu_mem_unimport(hbg_device *dev, hbg_devptr p) {
  hbg__cuda *c = impl_of(dev);
  size_t i = ranges_exact(&c->dmem, p, HBG__CU_DEV_IMPORT);
  if (i == c->dmem.n) {
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "mem_unimport of 0x%llx: not the start of a live "
                          "import",
                          (unsigned long long)p);
    return HBG_E_INVAL;
  }
  hbg__rtab_remove_at(&c->dmem, i);
  c->dmem_gen++;
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

/* Count a finished synchronous copy; host is its host side. */
static void sync_copied(hbg_device *dev, hbg__cuda *c, int h2d,
                        const void *host, size_t bytes, uint64_t t0) {
  if (host_pinned(c, host, bytes))
    HBG__CU_ADD(c, pinned_direct, 1);
  HBG__CU_ADD(c, handshakes, 1);
  if (h2d) {
    HBG__CU_ADD(c, h2d_copies, 1);
    HBG__CU_ADD(c, h2d_bytes, bytes);
  } else {
    HBG__CU_ADD(c, d2h_copies, 1);
    HBG__CU_ADD(c, d2h_bytes, bytes);
  }
  if (t0)
    trace_copy(dev, h2d ? "h2d" : "d2h", t0, bytes);
}

static int cu_copy_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                       size_t bytes) {
  hbg__cuda *c = impl_of(dev);
  if (!bytes)
    return 0;
  uint64_t t0 = hbg_device_tracing(dev) ? hbg__now_ns() : 0;
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVICE, cuMemcpyHtoDAsync_v2, (CUdeviceptr)dst, src,
         bytes, c->sync);
  CU_TRY(dev, c, HBG_E_DEVICE, cuStreamSynchronize, c->sync);
  sync_copied(dev, c, 1, src, bytes, t0);
  return 0;
}

static int cu_copy_d2h(hbg_device *dev, void *dst, hbg_devptr src,
                       size_t bytes) {
  hbg__cuda *c = impl_of(dev);
  if (!bytes)
    return 0;
  uint64_t t0 = hbg_device_tracing(dev) ? hbg__now_ns() : 0;
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVICE, cuMemcpyDtoHAsync_v2, dst, (CUdeviceptr)src,
         bytes, c->sync);
  CU_TRY(dev, c, HBG_E_DEVICE, cuStreamSynchronize, c->sync);
  sync_copied(dev, c, 0, dst, bytes, t0);
  return 0;
}

/* ---------------- queues ---------------- */

static int cu_queue_create(hbg_device *dev, hbg_dev_queue **out) {
  hbg__cuda *c = impl_of(dev);
  hbg_dev_queue *q = calloc(1, sizeof *q);
  if (!q)
    return HBG_E_NOMEM;
  int rc = hbg__cu_enter(dev, c);
  if (rc < 0)
    goto err_free;
  CUresult e = c->f.cuStreamCreate(&q->s, CU_STREAM_NON_BLOCKING);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err(dev, e, "cuStreamCreate", HBG_E_DEVMEM);
    goto err_free;
  }
  if (c->exec_device) {
    rc = hbg__cu_exec_queue_init(dev, c, q);
    if (rc < 0)
      goto err_stream;
  }
  atomic_init(&q->refs, 1);
  *out = q;
  return 0;

err_stream:
  (void)c->f.cuStreamDestroy_v2(q->s);
err_free:
  free(q);
  return rc;
}

static int cu_queue_destroy(hbg_device *dev, hbg_dev_queue *q) {
  hbg__cuda *c = impl_of(dev);
  if (!q)
    return 0;
  int rc = hbg__cu_enter(dev, c);
  /* The status slot may still be the source of a queued copy. */
  CUresult e = c->f.cuStreamSynchronize(q->s);
  if (e != CUDA_SUCCESS && rc == 0)
    rc = hbg__cu_err(dev, e, "cuStreamSynchronize", HBG_E_DEVICE);
  e = c->f.cuStreamDestroy_v2(q->s);
  if (e != CUDA_SUCCESS && rc == 0)
    rc = hbg__cu_err(dev, e, "cuStreamDestroy_v2", HBG_E_DEVICE);
  int xrc = hbg__cu_exec_queue_fini(dev, c, q);
  if (xrc < 0 && rc == 0)
    rc = xrc;
  if (q->status) {
    e = c->f.cuMemFreeHost(q->status);
    if (e != CUDA_SUCCESS && rc == 0)
      rc = hbg__cu_err(dev, e, "cuMemFreeHost", HBG_E_DEVICE);
  }
  free(q);
  return rc;
}

static int cu_copy_h2d_async(hbg_device *dev, hbg_dev_queue *q, hbg_devptr dst,
                             const void *src, size_t bytes) {
  hbg__cuda *c = impl_of(dev);
  if (!bytes)
    return 0;
  HBG__TRY(hbg__cu_enter(dev, c));
  /* From pageable memory the driver stages the source before returning, so
   * the copy stays correct; it is just not asynchronous. */
  CU_TRY(dev, c, HBG_E_DEVICE, cuMemcpyHtoDAsync_v2, (CUdeviceptr)dst, src,
         bytes, q->s);
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
  hbg__cuda *c = impl_of(dev);
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVICE, cuStreamSynchronize, q->s);
  HBG__CU_ADD(c, handshakes, 1);
  return 0;
}

/* ---------------- the caller's streams, and capture ---------------- */

static int capture_state(hbg__cuda *c, CUstream s, uint32_t *state,
                         uint64_t *id, CUgraph *graph) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t cid = 0;
  CUgraph g = NULL;
  CUresult e;
  if (c->f.cuStreamGetCaptureInfo_v3)
    e = c->f.cuStreamGetCaptureInfo_v3(s, &st, &cid, &g, NULL, NULL, NULL);
  else if (c->f.cuStreamGetCaptureInfo_v2)
    e = c->f.cuStreamGetCaptureInfo_v2(s, &st, &cid, &g, NULL, NULL);
  else if (c->f.cuStreamIsCapturing)
    e = c->f.cuStreamIsCapturing(s, &st);
  else
    e = CUDA_SUCCESS; /* a driver without capture queries: none */
  if (e != CUDA_SUCCESS)
    return (int)e;
  *state = st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? HBG_DEV_CAPTURE_ACTIVE
           : st == CU_STREAM_CAPTURE_STATUS_INVALIDATED
               ? HBG_DEV_CAPTURE_INVALIDATED
               : HBG_DEV_CAPTURE_NONE;
  *id = cid;
  if (graph)
    *graph = g;
  return 0;
}

static int cu_queue_capture(hbg_device *dev, hbg_dev_queue *q,
                            uint32_t *state, uint64_t *id) {
  hbg__cuda *c = impl_of(dev);
  HBG__TRY(hbg__cu_enter(dev, c));
  int e = capture_state(c, q->s, state, id, NULL);
  return e ? hbg__cu_err(dev, (CUresult)e, "cuStreamGetCaptureInfo",
                         HBG_E_DEVICE)
           : 0;
}

/* A caller's stream: wrapped, never created or destroyed here. With
 * exec=device it gets its own executor block, made now (device memory:
 * not while the stream is captured). */
static int cu_queue_borrow(hbg_device *dev, void *native, hbg_dev_queue **out) {
  hbg__cuda *c = impl_of(dev);
  HBG__RETURN_IF(!out, HBG_E_INVAL);
  HBG__TRY(hbg__cu_enter(dev, c));
  hbg__cu_dead_reap(dev, c);
  uint32_t st = HBG_DEV_CAPTURE_NONE;
  uint64_t id = 0;
  int e = capture_state(c, (CUstream)native, &st, &id, NULL);
  if (e)
    return hbg__cu_err(dev, (CUresult)e, "cuStreamGetCaptureInfo",
                       HBG_E_DEVICE);
  if (st != HBG_DEV_CAPTURE_NONE) {
    hbg_device_set_native(dev, 0,
                          "stream %p is being captured (capture %llu): its "
                          "first launch prepares device memory, which the "
                          "capture forbids; launch on it once before",
                          native, (unsigned long long)id);
    return HBG_E_CAPTURING;
  }
  hbg_dev_queue *q = calloc(1, sizeof *q);
  if (!q)
    return HBG_E_NOMEM;
  q->s = (CUstream)native;
  q->borrowed = 1;
  atomic_init(&q->refs, 1);
  if (c->exec_device) {
    int rc = hbg__cu_exec_queue_init(dev, c, q);
    if (rc < 0) {
      free(q);
      return rc;
    }
  }
  *out = q;
  return 0;
}

/* The queue's device state, freed: its launches have completed. */
static int queue_free(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q) {
  int rc = hbg__cu_exec_queue_fini(dev, c, q);
  if (q->status) {
    CUresult e = c->f.cuMemFreeHost(q->status);
    if (e != CUDA_SUCCESS && rc == 0)
      rc = hbg__cu_err(dev, e, "cuMemFreeHost", HBG_E_DEVICE);
  }
  free(q);
  return rc;
}

void hbg__cu_dead_reap(hbg_device *dev, hbg__cuda *c) {
  pthread_mutex_lock(&c->dead_mu);
  hbg_dev_queue *d = c->dead;
  c->dead = NULL;
  pthread_mutex_unlock(&c->dead_mu);
  while (d) {
    hbg_dev_queue *n = d->dead_next;
    (void)queue_free(dev, c, d);
    d = n;
  }
}

static int cu_queue_unborrow(hbg_device *dev, hbg_dev_queue *q) {
  hbg__cuda *c = impl_of(dev);
  HBG__RETURN_IF(!q || !q->borrowed, HBG_E_INVAL);
  HBG__TRY(hbg__cu_enter(dev, c));
  hbg__cu_dead_reap(dev, c);
  /* A captured graph still holding the block frees it when it goes. */
  if (atomic_fetch_sub(&q->refs, 1) != 1)
    return 0;
  return queue_free(dev, c, q);
}

/* What a graph keeps alive: the core's snapshot, and the queue whose
 * executor block its launch names. */
typedef struct cu_hold {
  void *ptr;
  void (*destroy)(void *ptr);
  hbg__cuda *c;
  hbg_dev_queue *q;
} cu_hold;

static void hold_nothing(void *p) { (void)p; }

static void CUDA_CB hold_destroy(void *p) {
  cu_hold *h = p;
  h->destroy(h->ptr);
  if (atomic_fetch_sub(&h->q->refs, 1) == 1) {
    pthread_mutex_lock(&h->c->dead_mu);
    h->q->dead_next = h->c->dead;
    h->c->dead = h->q;
    pthread_mutex_unlock(&h->c->dead_mu);
  }
  free(h);
}

static int cu_capture_retain(hbg_device *dev, hbg_dev_queue *q, void *ptr,
                             void (*destroy)(void *ptr)) {
  hbg__cuda *c = impl_of(dev);
  HBG__RETURN_IF(!q || !destroy, HBG_E_INVAL);
  if (!c->f.cuUserObjectCreate || !c->f.cuGraphRetainUserObject ||
      !c->f.cuUserObjectRelease ||
      (!c->f.cuStreamGetCaptureInfo_v3 && !c->f.cuStreamGetCaptureInfo_v2)) {
    hbg_device_set_native(dev, 0,
                          "the driver lacks cuUserObjectCreate, "
                          "cuGraphRetainUserObject or "
                          "cuStreamGetCaptureInfo_v2/_v3 (CUDA 11.4+)");
    return HBG_E_UNSUPPORTED;
  }
  HBG__TRY(hbg__cu_enter(dev, c));
  uint32_t st = 0;
  uint64_t id = 0;
  CUgraph g = NULL;
  int e = capture_state(c, q->s, &st, &id, &g);
  if (e)
    return hbg__cu_err(dev, (CUresult)e, "cuStreamGetCaptureInfo",
                       HBG_E_DEVICE);
  if (st != HBG_DEV_CAPTURE_ACTIVE || !g)
    return HBG_E_STATE;
  cu_hold *h = malloc(sizeof *h);
  if (!h)
    return HBG_E_NOMEM;
  *h = (cu_hold){.ptr = ptr, .destroy = destroy, .c = c, .q = q};
  CUuserObject obj = NULL;
  CUresult r = c->f.cuUserObjectCreate(&obj, h, hold_destroy, 1,
                                       CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  if (r != CUDA_SUCCESS) {
    free(h);
    return hbg__cu_err(dev, r, "cuUserObjectCreate", HBG_E_NOMEM);
  }
  atomic_fetch_add(&q->refs, 1);
  r = c->f.cuGraphRetainUserObject(g, obj, 1, CU_GRAPH_USER_OBJECT_MOVE);
  if (r != CUDA_SUCCESS) {
    /* Ours alone: releasing it runs hold_destroy later, on the driver's
     * thread; the snapshot stays the caller's (it is told of the
     * failure), so only the queue's reference goes there. */
    h->destroy = hold_nothing;
    (void)c->f.cuUserObjectRelease(obj, 1);
    return hbg__cu_err(dev, r, "cuGraphRetainUserObject", HBG_E_DEVICE);
  }
  return 0;
}

/* ---------------- events ---------------- */

static int cu_event_create(hbg_device *dev, hbg_dev_event **out) {
  hbg__cuda *c = impl_of(dev);
  hbg_dev_event *ev = calloc(1, sizeof *ev);
  if (!ev)
    return HBG_E_NOMEM;
  int rc = hbg__cu_enter(dev, c);
  if (rc < 0)
    goto err_free;
  unsigned flags = c->f.cuEventElapsedTime_v2 ? 0u : CU_EVENT_DISABLE_TIMING;
  CUresult e = c->f.cuEventCreate(&ev->e, flags);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err(dev, e, "cuEventCreate", HBG_E_DEVMEM);
    goto err_free;
  }
  *out = ev;
  return 0;

err_free:
  free(ev);
  return rc;
}

static int cu_event_destroy(hbg_device *dev, hbg_dev_event *ev) {
  hbg__cuda *c = impl_of(dev);
  if (!ev)
    return 0;
  int rc = hbg__cu_enter(dev, c);
  CUresult e = c->f.cuEventDestroy_v2(ev->e);
  free(ev);
  if (e != CUDA_SUCCESS && rc == 0)
    rc = hbg__cu_err(dev, e, "cuEventDestroy_v2", HBG_E_DEVICE);
  return rc;
}

static int cu_event_record(hbg_device *dev, hbg_dev_event *ev,
                           hbg_dev_queue *q) {
  hbg__cuda *c = impl_of(dev);
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVICE, cuEventRecord, ev->e, q->s);
  return 0;
}

static int cu_event_query(hbg_device *dev, hbg_dev_event *ev) {
  hbg__cuda *c = impl_of(dev);
  HBG__TRY(hbg__cu_enter(dev, c));
  CUresult e = c->f.cuEventQuery(ev->e);
  if (e == CUDA_SUCCESS)
    return 0;
  if (e == CUDA_ERROR_NOT_READY)
    return HBG_E_AGAIN;
  return hbg__cu_err(dev, e, "cuEventQuery", HBG_E_DEVICE);
}

static int cu_event_wait(hbg_device *dev, hbg_dev_event *ev) {
  hbg__cuda *c = impl_of(dev);
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVICE, cuEventSynchronize, ev->e);
  HBG__CU_ADD(c, handshakes, 1);
  return 0;
}

static int cu_queue_wait_event(hbg_device *dev, hbg_dev_queue *q,
                               hbg_dev_event *ev) {
  hbg__cuda *c = impl_of(dev);
  HBG__TRY(hbg__cu_enter(dev, c));
  CU_TRY(dev, c, HBG_E_DEVICE, cuStreamWaitEvent, q->s, ev->e, 0);
  return 0;
}

static int cu_event_elapsed(hbg_device *dev, hbg_dev_event *start,
                            hbg_dev_event *end, uint64_t *ns) {
  hbg__cuda *c = impl_of(dev);
  if (!c->f.cuEventElapsedTime_v2)
    return HBG_E_UNSUPPORTED;
  HBG__TRY(hbg__cu_enter(dev, c));
  float ms = 0.0f;
  CUresult e = c->f.cuEventElapsedTime_v2(&ms, start->e, end->e);
  if (e == CUDA_ERROR_NOT_READY)
    return HBG_E_AGAIN;
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(dev, e, "cuEventElapsedTime_v2", HBG_E_DEVICE);
  *ns = ms > 0.0f ? (uint64_t)((double)ms * 1e6) : 0;
  return 0;
}

const hbg_dev_ops hbg__cuda_ops = {
    .struct_size = sizeof(hbg_dev_ops),
    .abi_version = HBG_DEV_ABI_VERSION,
    .name = "cuda",
    .summary = "CUDA driver API, loaded at open (libcuda.so.1: no CUDA "
               "library at link time) with hbg's embedded sm_90 device "
               "module; launch runs the window on the GPU with the "
               "module's executor (exec=device, the default; its block per "
               "stream grown to each window's need from scratch=BYTES, "
               "default 4K), or reads the images back and verifies them on "
               "the host without executing them (exec=verify); options "
               "device=N, lib=PATH (or HBG_CUDA_LIB)",
    .probe = hbg__cu_probe,
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
    .event_elapsed = cu_event_elapsed,
    .queue_wait_event = cu_queue_wait_event,
    .mem_import = cu_mem_import,
    .mem_unimport = cu_mem_unimport,
    .queue_borrow = cu_queue_borrow,
    .queue_unborrow = cu_queue_unborrow,
    .queue_capture = cu_queue_capture,
    .capture_retain = cu_capture_retain,
};

static int cu_user_kernel_check(hbg_device *dev, const hbg_task *t,
                                char *why, size_t len) {
  return hbg__cu_link_check(impl_of(dev), t, why, len);
}

const hbg__backend hbg__cuda_backend = {
    .ops = &hbg__cuda_ops,
    .kernel_register = hbg__cu_kernel_register,
    .user_kernel_check = cu_user_kernel_check,
    .peers = &hbg__cu_peer_ops,
};
