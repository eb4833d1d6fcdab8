/*
 * cuda backend, device code: the module libhbg embeds (built by nvcc from
 * src/device/cuda/devcode at build time, see CMakeLists.txt) is loaded at
 * open with cuModuleLoadData, which picks the sm_90 cubin on a device that
 * runs it and otherwise JIT-compiles the compute_90 PTX; its entry points
 * are resolved by name once. Launches go through cuLaunchKernel on a
 * queue's stream and return as soon as the kernel is queued.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/cuda/cuda_internal.h"
#include "device/cuda/cuda_link.h"
#include "device/cuda/devcode/devcode.h"
#include "device/cuda/devcode/exec_layout.h"

_Static_assert(sizeof(hbg_dc_status) == sizeof(hbg_dev_status) &&
                   offsetof(hbg_dc_status, task) ==
                       offsetof(hbg_dev_status, task) &&
                   offsetof(hbg_dc_status, node) ==
                       offsetof(hbg_dev_status, node) &&
                   offsetof(hbg_dc_status, tasks_done) ==
                       offsetof(hbg_dev_status, tasks_done) &&
                   offsetof(hbg_dc_status, nodes_done) ==
                       offsetof(hbg_dev_status, nodes_done) &&
                   offsetof(hbg_dc_status, defs_verified) ==
                       offsetof(hbg_dev_status, defs_verified) &&
                   offsetof(hbg_dc_status, flags) ==
                       offsetof(hbg_dev_status, flags) &&
                   offsetof(hbg_dc_status, setup_ns) ==
                       offsetof(hbg_dev_status, setup_ns) &&
                   offsetof(hbg_dc_status, run_ns) ==
                       offsetof(hbg_dev_status, run_ns) &&
                   offsetof(hbg_dc_status, setup_nodes) ==
                       offsetof(hbg_dev_status, setup_nodes) &&
                   offsetof(hbg_dc_status, phase) ==
                       offsetof(hbg_dev_status, phase) &&
                   offsetof(hbg_dc_status, dispatch_ops) ==
                       offsetof(hbg_dev_status, dispatch_ops) &&
                   offsetof(hbg_dc_status, kernel_phases) ==
                       offsetof(hbg_dev_status, kernel_phases) &&
                   offsetof(hbg_dc_status, body_ns) ==
                       offsetof(hbg_dev_status, body_ns) &&
                   offsetof(hbg_dc_status, tail_ns) ==
                       offsetof(hbg_dev_status, tail_ns) &&
                   offsetof(hbg_dc_status, workers) ==
                       offsetof(hbg_dev_status, workers) &&
                   offsetof(hbg_dc_status, step) ==
                       offsetof(hbg_dev_status, step) &&
                   offsetof(hbg_dc_status, arrived) ==
                       offsetof(hbg_dev_status, arrived) &&
                   offsetof(hbg_dc_status, ctas) ==
                       offsetof(hbg_dev_status, ctas) &&
                   HBG_DEV_STATUS_SPLIT == HBG_DC_STATUS_SPLIT &&
                   HBG_DEV_STATUS_COUNTS == HBG_DC_STATUS_COUNTS &&
                   HBG_DEV_PHASE_START == HBG_DC_PHASE_START &&
                   HBG_DEV_PHASE_SETUP == HBG_DC_PHASE_SETUP &&
                   HBG_DEV_PHASE_RUN == HBG_DC_PHASE_RUN &&
                   HBG_E_TIMEOUT == HBG_DC_E_TIMEOUT,
               "the device code's status is hbg_dev_status");

int hbg__cu_module_load(hbg_device *dev, hbg__cuda *c) {
  CUresult e = c->f.cuModuleLoadData(&c->mod, hbg__cu_fatbin);
  if (e != CUDA_SUCCESS) {
    int major = 0, minor = 0;
    (void)c->f.cuDeviceGetAttribute(
        &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->cudev);
    (void)c->f.cuDeviceGetAttribute(
        &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->cudev);
    char why[256];
    snprintf(why, sizeof why,
             "loading hbg's device module (%zu bytes: sm_90 cubin + "
             "compute_90 PTX) on a compute capability %d.%d device",
             hbg__cu_fatbin_size, major, minor);
    c->mod = NULL;
    return hbg__cu_err_why(dev, e, "cuModuleLoadData", HBG_E_DEVICE, why);
  }
  static const char *const names[] = {"hbg_dc_check_window", "hbg_dc_exec",
                                      "hbg_dc_node"};
  CUfunction *fns[] = {&c->fn_check, &c->fn_exec, &c->fn_node};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    e = c->f.cuModuleGetFunction(fns[i], c->mod, names[i]);
    if (e != CUDA_SUCCESS) {
      char why[128];
      snprintf(why, sizeof why, "entry point %s of hbg's device module",
               names[i]);
      int rc = hbg__cu_err_why(dev, e, "cuModuleGetFunction", HBG_E_DEVICE,
                               why);
      (void)c->f.cuModuleUnload(c->mod);
      c->mod = NULL;
      return rc;
    }
  }
  return 0;
}

void hbg__cu_module_unload(hbg_device *dev, hbg__cuda *c) {
  if (!c->mod)
    return;
  CUresult e = c->f.cuModuleUnload(c->mod);
  if (e != CUDA_SUCCESS)
    (void)hbg__cu_err(dev, e, "cuModuleUnload", HBG_E_DEVICE);
  c->mod = NULL;
  c->fn_check = NULL;
  c->fn_exec = NULL;
  c->fn_node = NULL;
}

int hbg__cu_check_window(hbg_device *dev, hbg_dev_queue *q, hbg_devptr window,
                         uint64_t bytes, hbg_devptr status) {
  hbg__cuda *c = hbg_device_impl(dev);
  HBG__RETURN_IF(!q || !c->fn_check, HBG_E_INVAL);
  HBG__RETURN_IF(!hbg__cu_ranges_find(&c->dmem, window, bytes) ||
                     !hbg__cu_ranges_find(&c->dmem, status,
                                          sizeof(hbg_dev_status)),
                 HBG_E_RANGE);
  HBG__TRY(hbg__cu_enter(dev, c));
  hbg_dc_check_args a = {.window = window, .bytes = bytes, .status = status};
  void *params[] = {&a};
  CUresult e = c->f.cuLaunchKernel(c->fn_check, 1, 1, 1, 1, 1, 1, 0, q->s,
                                   params, NULL);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(dev, e, "cuLaunchKernel", HBG_E_DEVICE);
  return 0;
}

int hbg__cu_exec_queue_init(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q) {
  /* A zeroed control header has generation 0, which no launch publishes
   * (the first publishes 1). */
  void *z = NULL;
  CUresult e = c->f.cuMemHostAlloc(&z, sizeof(hbg_dc_exec_ctl),
                                   CU_MEMHOSTALLOC_PORTABLE);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(dev, e, "cuMemHostAlloc", HBG_E_NOMEM);
  memset(z, 0, sizeof(hbg_dc_exec_ctl));
  int rc;
  CUdeviceptr p = 0;
  e = c->f.cuMemAlloc_v2(&p, (size_t)c->xscratch);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err_why(dev, e, "cuMemAlloc_v2", HBG_E_DEVMEM,
                         "the device executor's scratch block (scratch=)");
    goto err_z;
  }
  /* Queued on the stream, so it lands before any launch. */
  e = c->f.cuMemcpyHtoDAsync_v2(p, z, sizeof(hbg_dc_exec_ctl), q->s);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err(dev, e, "cuMemcpyHtoDAsync_v2", HBG_E_DEVICE);
    (void)c->f.cuMemFree_v2(p);
    goto err_z;
  }
  q->xblock = p;
  q->xbytes = c->xscratch;
  q->xgen = 0;
  q->xneed = 0;
  q->xpool = 0;
  q->xretired = NULL;
  q->xzero = z;
  HBG__CU_ADD(c, scratch_allocs, 1);
  HBG__CU_ADD(c, scratch_in_use, c->xscratch);
  return 0;

err_z:
  (void)c->f.cuMemFreeHost(z);
  return rc;
}

static CUresult exec_block_free(hbg__cuda *c, CUdeviceptr p, uint64_t bytes) {
  CUresult e = c->f.cuMemFree_v2(p);
  if (e == CUDA_SUCCESS) {
    HBG__CU_ADD(c, scratch_frees, 1);
    atomic_fetch_sub_explicit(&c->st.scratch_in_use, bytes,
                              memory_order_relaxed);
  }
  return e;
}

/* Free the retired blocks whose last launch has completed; with all, every
 * one (the stream is synchronised). @return 0 or the first failing call's
 * mapped error (the block and event are gone either way). */
static int exec_reap(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q,
                     int all) {
  int rc = 0;
  hbg__cu_xretired **pp = &q->xretired;
  while (*pp) {
    hbg__cu_xretired *r = *pp;
    if (!all && c->f.cuEventQuery(r->done) != CUDA_SUCCESS) {
      pp = &r->next; /* pending (or failed: kept for the end) */
      continue;
    }
    CUresult e = r->bytes ? exec_block_free(c, r->block, r->bytes)
                          : c->f.cuMemFree_v2(r->block);
    if (e != CUDA_SUCCESS && rc == 0)
      rc = hbg__cu_err(dev, e, "cuMemFree_v2", HBG_E_DEVICE);
    e = c->f.cuEventDestroy_v2(r->done);
    if (e != CUDA_SUCCESS && rc == 0)
      rc = hbg__cu_err(dev, e, "cuEventDestroy_v2", HBG_E_DEVICE);
    *pp = r->next;
    free(r);
  }
  return rc;
}

int hbg__cu_exec_queue_fini(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q) {
  int rc = exec_reap(dev, c, q, 1);
  if (q->xr) {
    CUresult e = c->f.cuMemFree_v2(q->xr);
    if (e != CUDA_SUCCESS && rc == 0)
      rc = hbg__cu_err(dev, e, "cuMemFree_v2", HBG_E_DEVICE);
    q->xr = 0;
    q->xr_cap = 0;
  }
  if (q->xblock) {
    CUresult e = exec_block_free(c, q->xblock, q->xbytes);
    if (e != CUDA_SUCCESS && rc == 0)
      rc = hbg__cu_err(dev, e, "cuMemFree_v2", HBG_E_DEVICE);
    q->xblock = 0;
    q->xbytes = 0;
  }
  if (q->xzero) {
    CUresult e = c->f.cuMemFreeHost(q->xzero);
    if (e != CUDA_SUCCESS && rc == 0)
      rc = hbg__cu_err(dev, e, "cuMemFreeHost", HBG_E_DEVICE);
    q->xzero = NULL;
  }
  return rc;
}

/* Retire device memory p (a table when bytes is 0, else a scratch block
 * of bytes) behind an event recorded on q after the work queued so far.
 * @return 0 or a mapped driver error (p is left to the caller then). */
static int exec_retire(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q,
                       CUdeviceptr p, uint64_t bytes, const char *why) {
  hbg__cu_xretired *r = calloc(1, sizeof *r);
  if (!r)
    return HBG_E_NOMEM;
  CUresult e = c->f.cuEventCreate(&r->done, CU_EVENT_DISABLE_TIMING);
  if (e != CUDA_SUCCESS) {
    free(r);
    return hbg__cu_err_why(dev, e, "cuEventCreate", HBG_E_DEVICE, why);
  }
  e = c->f.cuEventRecord(r->done, q->s);
  if (e != CUDA_SUCCESS) {
    (void)c->f.cuEventDestroy_v2(r->done);
    free(r);
    return hbg__cu_err_why(dev, e, "cuEventRecord", HBG_E_DEVICE, why);
  }
  r->block = p;
  r->bytes = bytes;
  r->next = q->xretired;
  q->xretired = r;
  return 0;
}

/* Replace q's block by one of need bytes (rounded up to 64K) whose pool
 * holds `pool` bytes, for the launches queued from now on; the old one is
 * retired behind an event recorded after the work queued so far (its
 * verdict cache goes with it). Every failure leaves q as it was.
 * @return 0, HBG_E_DEVMEM, HBG_E_NOMEM or a mapped driver error. */
static int exec_grow(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q,
                     uint64_t need, uint64_t pool) {
  char why[160];
  snprintf(why, sizeof why,
           "growing the device executor's scratch block from %llu to %llu "
           "bytes for this window",
           (unsigned long long)q->xbytes, (unsigned long long)need);
  if (need > ((uint64_t)1 << 48)) { /* UINT64_MAX: past every limit */
    hbg_device_set_native(dev, CUDA_ERROR_OUT_OF_MEMORY, "%s: too large",
                          why);
    return HBG_E_DEVMEM;
  }
  uint64_t cap = HBG__ALIGN_UP(need, (uint64_t)65536);
  hbg__cu_xretired *r = calloc(1, sizeof *r);
  if (!r)
    return HBG_E_NOMEM;
  int rc;
  CUdeviceptr p = 0;
  CUresult e = c->f.cuMemAlloc_v2(&p, (size_t)cap);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err_why(dev, e, "cuMemAlloc_v2", HBG_E_DEVMEM, why);
    goto err_r;
  }
  e = c->f.cuEventCreate(&r->done, CU_EVENT_DISABLE_TIMING);
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err_why(dev, e, "cuEventCreate", HBG_E_DEVICE, why);
    goto err_mem;
  }
  const char *call = "cuEventRecord";
  e = c->f.cuEventRecord(r->done, q->s);
  if (e == CUDA_SUCCESS) {
    call = "cuMemcpyHtoDAsync_v2";
    e = c->f.cuMemcpyHtoDAsync_v2(p, q->xzero, sizeof(hbg_dc_exec_ctl), q->s);
  }
  if (e != CUDA_SUCCESS) {
    rc = hbg__cu_err_why(dev, e, call, HBG_E_DEVICE, why);
    (void)c->f.cuEventDestroy_v2(r->done);
    goto err_mem;
  }
  r->block = q->xblock;
  r->bytes = q->xbytes;
  r->next = q->xretired;
  q->xretired = r;
  q->xblock = p;
  q->xbytes = cap;
  q->xpool = pool;
  HBG__CU_ADD(c, scratch_allocs, 1);
  HBG__CU_ADD(c, scratch_in_use, cap);
  return 0;

err_mem:
  (void)c->f.cuMemFree_v2(p);
err_r:
  free(r);
  return rc;
}

/* Bring q's live-range table up to the device's registry (c->dmem) when it
 * changed since q's last upload: a larger device table first if needed
 * (the old one retired behind the work queued so far), then one
 * stream-ordered copy from pageable memory (the driver stages it before
 * returning, so c->xr_host is free again at once). After a failure q's
 * table is uploaded again at its next launch. @return 0 or an error. */
static int exec_ranges(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q) {
  if (q->xr && q->xr_gen == c->dmem_gen)
    return 0;
  const char *why = "the device executor's live-range table";
  uint64_t n = c->dmem.n;
  if (n > c->xr_host_cap) {
    size_t cap = c->xr_host_cap ? c->xr_host_cap : 64;
    while (cap < n)
      cap *= 2;
    uint64_t *v = realloc(c->xr_host, cap * 2 * sizeof *v);
    if (!v)
      return HBG_E_NOMEM;
    c->xr_host = v;
    c->xr_host_cap = cap;
  }
  for (uint64_t i = 0; i < n; i++) {
    c->xr_host[2 * i] = c->dmem.v[i].start;
    c->xr_host[2 * i + 1] = c->dmem.v[i].start + c->dmem.v[i].len;
  }
  if (!q->xr || n > q->xr_cap) {
    uint64_t cap = q->xr_cap ? q->xr_cap : 64;
    while (cap < n)
      cap *= 2;
    CUdeviceptr p = 0;
    CUresult e = c->f.cuMemAlloc_v2(&p, (size_t)(cap * 16));
    if (e != CUDA_SUCCESS)
      return hbg__cu_err_why(dev, e, "cuMemAlloc_v2", HBG_E_DEVMEM, why);
    if (q->xr) {
      int rc = exec_retire(dev, c, q, q->xr, 0, why);
      if (rc < 0) {
        (void)c->f.cuMemFree_v2(p);
        return rc;
      }
    }
    q->xr = p;
    q->xr_cap = cap;
    q->xr_gen = c->dmem_gen - 1; /* its contents are not the registry's */
  }
  if (n) {
    CUresult e = c->f.cuMemcpyHtoDAsync_v2(q->xr, c->xr_host,
                                           (size_t)(n * 16), q->s);
    if (e != CUDA_SUCCESS)
      return hbg__cu_err_why(dev, e, "cuMemcpyHtoDAsync_v2", HBG_E_DEVICE,
                             why);
  }
  q->xr_n = n;
  q->xr_gen = c->dmem_gen;
  q->xr_uploads++;
  return 0;
}

/* CU_TRY for the shape: a failing call's error, named. */
#define SHAPE_TRY(call, ...)                                                   \
  do {                                                                         \
    CUresult shape__e = c->f.call(__VA_ARGS__);                                \
    if (shape__e != CUDA_SUCCESS)                                              \
      return hbg__cu_err(dev, shape__e, #call, HBG_E_DEVICE);                  \
  } while (0)

int hbg__cu_exec_shape(hbg_device *dev, hbg__cuda *c, CUfunction fn,
                       hbg__cu_exec *out) {
  int sms = 0, max_grid = 0, max_block = 0, warp = 0, coop = 0, fmax = 0;
  int regs = 0, local = 0;
  SHAPE_TRY(cuDeviceGetAttribute, &sms,
            CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->cudev);
  SHAPE_TRY(cuDeviceGetAttribute, &max_grid,
            CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, c->cudev);
  SHAPE_TRY(cuDeviceGetAttribute, &max_block,
            CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, c->cudev);
  SHAPE_TRY(cuDeviceGetAttribute, &warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE,
            c->cudev);
  SHAPE_TRY(cuDeviceGetAttribute, &coop,
            CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, c->cudev);
  SHAPE_TRY(cuFuncGetAttribute, &fmax,
            CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
  SHAPE_TRY(cuFuncGetAttribute, &regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
  SHAPE_TRY(cuFuncGetAttribute, &local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
            fn);
  warp = HBG__MAX(warp, 1);
  /* The most lanes up to 256, a whole number of warps, that one SM holds
   * (a linked function may take more registers per thread). */
  int lanes = HBG__MAX(HBG__MIN(HBG__MIN(256, max_block), fmax), 1);
  if (lanes > warp)
    lanes -= lanes % warp;
  int per_sm = 0;
  for (;;) {
    SHAPE_TRY(cuOccupancyMaxActiveBlocksPerMultiprocessor, &per_sm, fn,
              lanes, 0);
    if (per_sm > 0 || lanes <= warp)
      break;
    lanes = HBG__MAX(lanes / 2 / warp * warp, warp);
  }
  if (per_sm <= 0) {
    hbg_device_set_native(dev, 0,
                          "the device executor cannot run: not one CTA of %d "
                          "threads fits an SM (%d registers and %d bytes of "
                          "local memory per thread)",
                          lanes, regs, local);
    return HBG_E_LIMIT;
  }
  /* Its frame on the stack: the context's limit raised to it (never
   * lowered: the context is shared with the application). */
  size_t stack = 0;
  SHAPE_TRY(cuCtxGetLimit, &stack, CU_LIMIT_STACK_SIZE);
  if (local > 0 && (size_t)local > stack)
    SHAPE_TRY(cuCtxSetLimit, CU_LIMIT_STACK_SIZE, (size_t)local);
  out->fn = fn;
  out->ctas = (unsigned)HBG__MAX(HBG__MIN(sms, max_grid), 1);
  out->lanes = (unsigned)lanes;
  out->per_sm = per_sm;
  out->regs = regs;
  out->local_bytes = local;
  /* a warp per worker only when warps tile the CTA */
  out->worker_lanes = out->lanes;
  if (!c->worker_cta && lanes % warp == 0 && lanes / warp <= 8)
    out->worker_lanes = (unsigned)warp;
  c->coop = coop != 0;
  return 0;
}

int hbg__cu_exec_launch(hbg_device *dev, hbg_dev_queue *q,
                        const hbg_dev_launch_desc *l) {
  hbg__cuda *c = hbg_device_impl(dev);
  HBG__RETURN_IF(!c->fn_exec || !q->xblock, HBG_E_INVAL);
  HBG__RETURN_IF(!hbg__cu_ranges_find(&c->dmem, l->window, l->window_bytes) ||
                     !hbg__cu_ranges_find(&c->dmem, l->status,
                                          sizeof(hbg_dev_status)),
                 HBG_E_RANGE);
  const int tracing = hbg_device_tracing(dev);
  uint64_t t0 = tracing ? hbg__now_ns() : 0;
  HBG__TRY(hbg__cu_enter(dev, c));
  const hbg__cu_exec *ex = hbg__cu_link_exec(c);
  const uint64_t n_workers =
      (uint64_t)ex->ctas * (ex->lanes / ex->worker_lanes);
  /* Captured: replayed later with these arguments, so nothing here may
   * wait, query or allocate, and the block is the graph's to reuse. */
  const int captured = (l->flags & HBG_DEV_LAUNCH_CAPTURED) != 0;
  /* A captured graph may replay with the block and range table the queue
   * has now: they stay (the block does not grow) while one lives. */
  const int held = atomic_load(&q->refs) > 1;
  if (q->xretired && !captured)
    (void)exec_reap(dev, c, q, 0); /* a failure is kept as the native error */
  if (l->flags & HBG_DEV_LAUNCH_SIZED) {
    /* The same function the kernel's set-up lays the block out with. The
     * pool keeps its size unless the window's Definitions need more (a
     * larger pool in the same block starts the verdict cache over). */
    uint64_t pool = q->xpool;
    if (l->flags & HBG_DEV_LAUNCH_SIZED_IMAGES)
      pool = HBG__MAX(pool, hbg_dc_exec_pool_bytes(l->def_bytes, l->n_defs));
    hbg_dc_exec_layout lay;
    hbg_dc_exec_layout_of(HBG_DC_EXEC_CACHE_SLOTS, pool, l->window_bytes,
                          l->n_tasks, c->dmem.n, l->n_deps, l->n_nodes,
                          l->n_btensors, l->n_bscalars,
                          hbg__cu_link_floats(c, l->kernel_scratch),
                          n_workers, &lay);
    q->xneed = lay.need;
    if (lay.need > q->xbytes) {
      if (captured || held) {
        hbg_device_set_native(dev, 0,
                              "the device executor's scratch block of this "
                              "stream (%llu bytes) is too small for this "
                              "window (%llu bytes) and cannot grow %s",
                              (unsigned long long)q->xbytes,
                              (unsigned long long)lay.need,
                              captured ? "inside a capture (launch the "
                                         "window once before capturing)"
                                       : "while a captured graph holds it "
                                         "(destroy the graph, or launch on "
                                         "another stream)");
        return captured ? HBG_E_CAPTURING : HBG_E_BUSY;
      }
      HBG__TRY(exec_grow(dev, c, q, lay.need, pool));
    }
    q->xpool = pool;
  }
  if ((captured || held) && (!q->xr || q->xr_gen != c->dmem_gen) &&
      (captured || c->dmem.n > q->xr_cap)) {
    hbg_device_set_native(dev, 0,
                          "the device's allocations changed since this "
                          "stream's last launch, and its range table %s",
                          captured ? "cannot be uploaded inside a capture "
                                     "(launch once before capturing)"
                                   : "cannot grow while a captured graph "
                                     "holds it");
    return captured ? HBG_E_CAPTURING : HBG_E_BUSY;
  }
  HBG__TRY(exec_ranges(dev, c, q));
  if (captured) {
    /* Every replay starts from a zeroed control header (generation 0) and
     * publishes generation 1; later direct launches publish from 2 on. */
    CUresult e = c->f.cuMemcpyHtoDAsync_v2(q->xblock, q->xzero,
                                           sizeof(hbg_dc_exec_ctl), q->s);
    if (e != CUDA_SUCCESS)
      return hbg__cu_err(dev, e, "cuMemcpyHtoDAsync_v2", HBG_E_DEVICE);
  }
  hbg_dc_exec_args a = {.window = l->window,
                        .bytes = l->window_bytes,
                        .status = l->status,
                        .scratch = (uint64_t)q->xblock,
                        .scratch_bytes = q->xbytes,
                        .gen = captured ? 1 : q->xgen + 1,
                        .ranges = (uint64_t)q->xr,
                        .n_ranges = q->xr_n,
                        .cache_slots = HBG_DC_EXEC_CACHE_SLOTS,
                        .pool_bytes = q->xpool,
                        .worker_lanes = ex->worker_lanes,
                        .deadline_ns = c->deadline_ns};
  void *params[] = {&a};
  /* Cooperative: the grid starts only once every CTA is resident (its
   * CTAs wait for each other at set-up); a device without cooperative
   * launches gets a plain one, its waits bounded by the deadline. */
  CUresult e =
      c->coop ? c->f.cuLaunchCooperativeKernel(ex->fn, ex->ctas, 1, 1,
                                               ex->lanes, 1, 1, 0, q->s,
                                               params)
              : c->f.cuLaunchKernel(ex->fn, ex->ctas, 1, 1, ex->lanes, 1, 1,
                                    0, q->s, params, NULL);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(dev, e,
                       c->coop ? "cuLaunchCooperativeKernel"
                               : "cuLaunchKernel",
                       HBG_E_DEVICE);
  q->xgen = captured ? HBG__MAX(q->xgen, 1) : q->xgen + 1;
  HBG__CU_ADD(c, launches, 1);
  if (tracing) {
    hbg_trace_event ev = {.track = HBG_TRACK_DEVICE,
                          .name = "launch",
                          .start_ns = t0,
                          .dur_ns = hbg__now_ns() - t0,
                          .bytes = 0};
    hbg_device_trace(dev, &ev);
  }
  return 0;
}
