/*
 * cuda backend, the driver itself: loading libcuda with dlopen (lib=,
 * HBG_CUDA_LIB or libcuda.so.1) and resolving cuda_api.h's symbols;
 * probing whether a GPU is usable (describe, then load hbg's device module
 * once); mapping a CUresult to an hbg error with the driver's own name and
 * text kept as the device's native error; making the context current.
 * The device ops that use all this are in cuda.c.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/cuda/cuda_internal.h"
#include "device/device_internal.h"

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "dlsym results must fit a function pointer");

/* ---------------- errors ---------------- */

/* The driver's name and text for e; fallback (32 bytes) holds the name
 * when the library does not know e (the toolkit's stub knows none). */
static void cu_names(const hbg__cu_fns *f, CUresult e, char *fallback,
                     const char **name, const char **str) {
  *name = NULL;
  *str = NULL;
  if (f->cuGetErrorName && f->cuGetErrorName(e, name) != CUDA_SUCCESS)
    *name = NULL;
  if (f->cuGetErrorString && f->cuGetErrorString(e, str) != CUDA_SUCCESS)
    *str = NULL;
  if (!*name) {
    snprintf(fallback, 32, "CUresult %d", (int)e);
    *name = fallback;
  }
  if (!*str)
    *str = e == CUDA_ERROR_STUB_LIBRARY
               ? "the CUDA toolkit's link-time stub, not the driver"
               : "not known to this driver library";
}

static int cu_map(CUresult e, int oom) {
  switch (e) {
  case CUDA_ERROR_OUT_OF_MEMORY:
    return oom;
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_STUB_LIBRARY:
  case CUDA_ERROR_NOT_SUPPORTED:
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
  case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
  case CUDA_ERROR_DEVICE_UNAVAILABLE:
  /* the device cannot run the embedded module (cuModuleLoadData) */
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
  case CUDA_ERROR_INVALID_PTX:
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
  case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
  case CUDA_ERROR_JIT_COMPILATION_DISABLED:
    return HBG_E_UNSUPPORTED;
  case CUDA_ERROR_INVALID_DEVICE:
    return HBG_E_NOTFOUND;
  /* a stream capture refused the call, or was invalidated */
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
  case CUDA_ERROR_STREAM_CAPTURE_MERGE:
  case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
  case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
  case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
  case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
  case CUDA_ERROR_CAPTURED_EVENT:
  case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
    return HBG_E_CAPTURING;
  default:
    return HBG_E_DEVICE;
  }
}

int hbg__cu_err_why(hbg_device *dev, CUresult e, const char *call, int oom,
                    const char *why) {
  const hbg__cuda *c = hbg_device_impl(dev);
  const char *name, *str;
  char fallback[32];
  cu_names(&c->f, e, fallback, &name, &str);
  hbg_device_set_native(dev, (int64_t)e, "%s: %s: %s%s%s", call, name, str,
                        why ? "; " : "", why ? why : "");
  return cu_map(e, oom);
}

int hbg__cu_err(hbg_device *dev, CUresult e, const char *call, int oom) {
  return hbg__cu_err_why(dev, e, call, oom, NULL);
}

int hbg__cu_enter(hbg_device *dev, const hbg__cuda *c) {
  CUcontext cur = NULL;
  CUresult e = c->f.cuCtxGetCurrent(&cur);
  if (e == CUDA_SUCCESS && cur == c->ctx)
    return 0;
  e = c->f.cuCtxSetCurrent(c->ctx);
  return e == CUDA_SUCCESS ? 0 : hbg__cu_err(dev, e, "cuCtxSetCurrent",
                                             HBG_E_DEVICE);
}

/* ---------------- loading ---------------- */

/* lib= option, else HBG_CUDA_LIB, else libcuda.so.1 through the loader's
 * search path (never the toolkit's link-time stub, which has no .so.1). */
int hbg__cu_lib_path(const char *options, char *path, size_t len) {
  int found = hbg__opt_get(options, "lib", path, len);
  if (found < 0)
    return HBG_E_INVAL;
  if (found && path[0])
    return 0;
  const char *env = getenv("HBG_CUDA_LIB");
  if (!env || !*env)
    env = HBG__CU_DEFAULT_LIB;
  if (strlen(env) >= len)
    return HBG_E_INVAL;
  strcpy(path, env);
  return 0;
}

/* Load path and resolve every symbol. RTLD_NODELETE: the driver starts
 * threads of its own at cuInit, so its code must stay mapped after the last
 * dlclose. @return 0, or HBG_E_LOAD with the reason in why. */
int hbg__cu_load(const char *path, void **lib, hbg__cu_fns *f, char *why,
                   size_t len) {
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, len,
             "cannot load the CUDA driver library %s (no NVIDIA driver "
             "installed? HBG_CUDA_LIB or lib= name another): %s",
             path, e ? e : "dlopen failed");
    return HBG_E_LOAD;
  }
  memset(f, 0, sizeof *f);
  void *sym;
  /* The prototypes in cuda_api.h must match cuda.h's (unevaluated). */
#define HBG__CU_CHECK(ret, name, params) (void)sizeof(f->name = name);
  HBG__CU_SYMBOLS(HBG__CU_CHECK)
  HBG__CU_OPTIONAL_SYMBOLS(HBG__CU_CHECK)
#undef HBG__CU_CHECK
#define HBG__CU_LOAD(ret, name, params)                                        \
  sym = dlsym(h, #name);                                                       \
  if (!sym) {                                                                  \
    snprintf(why, len, "%s: missing symbol %s", path, #name);                  \
    dlclose(h);                                                                \
    return HBG_E_LOAD;                                                         \
  }                                                                            \
  memcpy(&f->name, &sym, sizeof sym);
  HBG__CU_SYMBOLS(HBG__CU_LOAD)
#undef HBG__CU_LOAD
#define HBG__CU_LOAD_OPT(ret, name, params)                                    \
  sym = dlsym(h, #name);                                                       \
  memcpy(&f->name, &sym, sizeof sym);
  HBG__CU_OPTIONAL_SYMBOLS(HBG__CU_LOAD_OPT)
#undef HBG__CU_LOAD_OPT
  sym = dlsym(h, "cuStreamGetCaptureInfo_v3");
  memcpy(&f->cuStreamGetCaptureInfo_v3, &sym, sizeof sym);
  sym = dlsym(h, "cuStreamGetCaptureInfo_v2");
  memcpy(&f->cuStreamGetCaptureInfo_v2, &sym, sizeof sym);
  if (!f->cuEventElapsedTime_v2) { /* a driver before CUDA 12.8 */
    sym = dlsym(h, HBG__CU_EVENT_ELAPSED_V1);
    memcpy(&f->cuEventElapsedTime_v2, &sym, sizeof sym);
  }
  *lib = h;
  return 0;
}

/* ---------------- probe ---------------- */

/* What the driver reports, into buf. @return 0 if a GPU is usable, else a
 * mapped driver error (< 0). */
static int cu_describe(const hbg__cu_fns *f, const char *path, char *buf,
                       size_t len) {
  const char *call = "cuInit";
  CUresult e = f->cuInit(0);
  int n = 0;
  if (e == CUDA_SUCCESS) {
    call = "cuDeviceGetCount";
    e = f->cuDeviceGetCount(&n);
  }
  CUdevice d = 0;
  if (e == CUDA_SUCCESS && n > 0) {
    call = "cuDeviceGet";
    e = f->cuDeviceGet(&d, 0);
  }
  char name[128] = "";
  int major = 0, minor = 0, drv = 0;
  if (e == CUDA_SUCCESS && n > 0) {
    call = "cuDeviceGetName";
    e = f->cuDeviceGetName(name, (int)sizeof name, d);
  }
  if (e == CUDA_SUCCESS && n > 0) {
    call = "cuDeviceGetAttribute";
    e = f->cuDeviceGetAttribute(
        &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
    if (e == CUDA_SUCCESS)
      e = f->cuDeviceGetAttribute(
          &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
  }
  if (e == CUDA_SUCCESS && n > 0) {
    call = "cuDriverGetVersion";
    e = f->cuDriverGetVersion(&drv);
  }
  if (e != CUDA_SUCCESS) {
    const char *en, *es;
    char fallback[32];
    cu_names(f, e, fallback, &en, &es);
    snprintf(buf, len, "no GPU: %s: %s: %s (%s)", call, en, es, path);
    return cu_map(e, HBG_E_DEVICE);
  }
  if (n <= 0) {
    snprintf(buf, len, "no GPU: no CUDA-capable device is detected (%s)",
             path);
    return HBG_E_UNSUPPORTED;
  }
  name[sizeof name - 1] = '\0';
  snprintf(buf, len, "available: %d GPU(s), %s, CC %d.%d, driver %d.%d (%s)",
           n, name, major, minor, drv / 1000, drv % 1000 / 10, path);
  return 0;
}

/* Device 0 loads hbg's device module (after cu_describe succeeded): else
 * buf says why not. @return 0 or a mapped driver error. */
static int cu_probe_module(const hbg__cu_fns *f, char *buf, size_t len) {
  CUdevice d = 0;
  CUcontext ctx = NULL, prev = NULL;
  CUmodule m = NULL;
  const char *call = "cuDeviceGet";
  CUresult e = f->cuDeviceGet(&d, 0);
  if (e == CUDA_SUCCESS) {
    call = "cuDevicePrimaryCtxRetain";
    e = f->cuDevicePrimaryCtxRetain(&ctx, d);
  }
  if (e == CUDA_SUCCESS) {
    (void)f->cuCtxGetCurrent(&prev);
    call = "cuCtxSetCurrent";
    e = f->cuCtxSetCurrent(ctx);
    if (e == CUDA_SUCCESS) {
      call = "cuModuleLoadData";
      e = f->cuModuleLoadData(&m, hbg__cu_fatbin);
      if (e == CUDA_SUCCESS)
        (void)f->cuModuleUnload(m);
      (void)f->cuCtxSetCurrent(prev);
    }
    (void)f->cuDevicePrimaryCtxRelease_v2(d);
  }
  if (e == CUDA_SUCCESS)
    return 0;
  const char *en, *es;
  char fallback[32], was[512];
  cu_names(f, e, fallback, &en, &es);
  const char *avail = "available: ";
  snprintf(was, sizeof was, "%s",
           strncmp(buf, avail, strlen(avail)) ? buf : buf + strlen(avail));
  snprintf(buf, len,
           "no usable GPU: %s: %s: %s (hbg's device module: sm_90 cubin + "
           "compute_90 PTX); %s",
           call, en, es, was);
  return cu_map(e, HBG_E_DEVICE);
}

int hbg__cu_probe(char *buf, size_t len) {
  char dummy[1];
  if (!buf || !len) {
    buf = dummy;
    len = sizeof dummy;
  }
  char path[512];
  if (hbg__cu_lib_path(NULL, path, sizeof path) < 0) {
    snprintf(buf, len, "HBG_CUDA_LIB is too long");
    return HBG_E_INVAL;
  }
  void *lib = NULL;
  hbg__cu_fns f;
  int rc = hbg__cu_load(path, &lib, &f, buf, len);
  if (rc < 0)
    return rc;
  rc = cu_describe(&f, path, buf, len);
  if (rc == 0)
    rc = cu_probe_module(&f, buf, len);
  dlclose(lib);
  return rc;
}
