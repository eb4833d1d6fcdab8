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
  e = c->f.cuModuleGetFunction(&c->fn_check, c->mod, "hbg_dc_check_window");
  if (e != CUDA_SUCCESS) {
    int rc = hbg__cu_err_why(dev, e, "cuModuleGetFunction", HBG_E_DEVICE,
                             "entry point hbg_dc_check_window of hbg's "
                             "device module");
    (void)c->f.cuModuleUnload(c->mod);
    c->mod = NULL;
    return rc;
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
