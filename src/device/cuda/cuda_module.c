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

#include "common/util.h"
#include "device/cuda/cuda_internal.h"
#include "device/cuda/devcode/devcode.h"

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
                       offsetof(hbg_dev_status, defs_verified),
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
  CUdeviceptr p = 0;
  CUresult e = c->f.cuMemAlloc_v2(&p, (size_t)c->xscratch);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err_why(dev, e, "cuMemAlloc_v2", HBG_E_DEVMEM,
                           "the device executor's scratch block (scratch=)");
  /* The control header starts at generation 0 (the first launch publishes
   * 1): queued on the stream, so it lands before any launch. */
  static const hbg_dc_exec_ctl zero;
  e = c->f.cuMemcpyHtoDAsync_v2(p, &zero, sizeof zero, q->s);
  if (e != CUDA_SUCCESS) {
    int rc = hbg__cu_err(dev, e, "cuMemcpyHtoDAsync_v2", HBG_E_DEVICE);
    (void)c->f.cuMemFree_v2(p);
    return rc;
  }
  q->xblock = p;
  q->xbytes = c->xscratch;
  q->xgen = 0;
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
  hbg_dc_exec_args a = {.window = l->window,
                        .bytes = l->window_bytes,
                        .status = l->status,
                        .scratch = (uint64_t)q->xblock,
                        .scratch_bytes = q->xbytes,
                        .gen = q->xgen + 1};
  void *params[] = {&a};
  CUresult e = c->f.cuLaunchKernel(c->fn_exec, c->ctas, 1, 1, c->lanes, 1, 1,
                                   0, q->s, params, NULL);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(dev, e, "cuLaunchKernel", HBG_E_DEVICE);
  q->xgen++;
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
