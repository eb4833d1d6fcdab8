/* hbg_buffer_import on cuda (the sim's half is test_import): device memory
 * the caller allocated itself with the driver's cuMemAlloc_v2 (resolved
 * from the driver library the backend loads, as an engine's allocator
 * would own it), imported and used without a copy:
 * - sub-blocks of one allocation (a caching allocator's tensors in its
 *   segment) imported and run by binds with exec=device under every
 *   policy, and checked by the verifier (exec=verify); results read back
 *   and compared with the host's;
 * - a tensor straddling an import's end is HBG_E_RANGE at submit; a range
 *   straddling the allocation's end is refused at import ("ends N bytes
 *   early");
 * - refusals, named: a pointer the driver does not know, pinned host
 *   memory, an overlap with an hbg_buffer_alloc buffer or another import;
 *   hbg_buffer_host_ptr is HBG_E_UNSUPPORTED (device memory);
 * - free and destroy forget imports: the caller's allocation is never
 *   passed to cuMemFree_v2 (counted by the stand-in), its bytes stay, and
 *   the caller frees it itself at the end.
 * Against the stand-in (test_cuda_import_mock) also: a range inside a VMM
 * reservation larger than the allocation (accepted: the bounds are the
 * caller's), an allocation of a foreign context (refused, named), an
 * injected cuPointerGetAttributes failure, and a driver without
 * cuPointerGetAttributes (HBG_E_UNSUPPORTED). */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "cuda_skip.h"
#include "scale_fixture.h"
#include "test.h"

#define N 512u

typedef unsigned long long cu_ptr; /* CUdeviceptr on 64-bit hosts */

static int (*cu_init)(unsigned flags);
static int (*cu_retain)(void **ctx, int dev);
static int (*cu_release)(int dev);
static int (*cu_set_current)(void *ctx);
static int (*cu_alloc)(cu_ptr *p, size_t bytes);
static int (*cu_free)(cu_ptr p);
static void (*mock_vmm)(uint64_t before, uint64_t after);
static int (*mock_alloc_foreign)(cu_ptr *p, size_t bytes);
static void (*mock_watch_free)(cu_ptr p);
static long (*mock_watched_frees)(void);
static void (*mock_fail)(const char *name, int code, int nth);
static int mocked;

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    T_FAIL("%s: no %s in the driver library",
           getenv("HBG_CUDA_LIB") ? getenv("HBG_CUDA_LIB") : "libcuda.so.1",
           name);
  return p;
}

#define LOAD(h, var, name)                                                     \
  do {                                                                         \
    void *p__ = sym(h, name);                                                  \
    memcpy(&var, &p__, sizeof p__);                                            \
  } while (0)

static void load_driver(void) {
  void *h = cuda_standin();
  if (h) {
    mocked = 1;
    LOAD(h, mock_vmm, "hbgmock_vmm");
    LOAD(h, mock_alloc_foreign, "hbgmock_alloc_foreign");
    LOAD(h, mock_watch_free, "hbgmock_watch_free");
    LOAD(h, mock_watched_frees, "hbgmock_watched_frees");
    LOAD(h, mock_fail, "hbgmock_fail");
  } else {
    const char *lib = getenv("HBG_CUDA_LIB");
    h = dlopen(lib && *lib ? lib : "libcuda.so.1",
               RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h)
      T_FAIL("cannot load the driver library: %s", dlerror());
  }
  LOAD(h, cu_init, "cuInit");
  LOAD(h, cu_retain, "cuDevicePrimaryCtxRetain");
  LOAD(h, cu_release, "cuDevicePrimaryCtxRelease_v2");
  LOAD(h, cu_set_current, "cuCtxSetCurrent");
  LOAD(h, cu_alloc, "cuMemAlloc_v2");
  LOAD(h, cu_free, "cuMemFree_v2");
  /* The caller holds device 0's primary context itself, current on this
   * thread, as an engine does: its memory outlives hbg's runtimes. */
  void *ctx = NULL;
  ASSERT_EQ(cu_init(0), 0);
  ASSERT_EQ(cu_retain(&ctx, 0), 0);
  ASSERT_EQ(cu_set_current(ctx), 0);
}

static void expect_said(const char *what, const char *says) {
  expect_msg(what, says);
  printf("  %s: %s\n", what, hbg_last_error());
}

/* A runtime on cuda; its creation makes the device's primary context
 * current on this thread, where the caller's cuMemAlloc_v2 then runs (as
 * an engine's allocator runs in that context). */
static hbg_runtime *mk(int policy, const char *opts) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = opts;
  cfg.policy = (uint32_t)policy;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

/* y = 2 x (a task), z = 3 y (a graph replay after it), then read back
 * and compared. */
static void bind_check(hbg_runtime *rt, uint64_t ix, uint64_t iyz,
                       const float *x, int executes, const char *what) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task_id t0 = HBG_TASK_NONE;
  ASSERT_OK(submit_scale(b, vec(ix, 0, N, HBG_ACCESS_IN),
                         vec(iyz, 0, N, HBG_ACCESS_OUT), 2.0f, &t0));
  ASSERT_OK(submit_graph(b, vec(iyz, 0, N, HBG_ACCESS_IN),
                         vec(iyz, N * 4, N, HBG_ACCESS_OUT), &t0));
  ASSERT_OK(hbg_bind_launch(b));
  int rc = hbg_bind_wait(b);
  if (rc != 0)
    T_FAIL("%s: hbg_bind_wait: %s: %s", what, hbg_err_name(rc),
           hbg_last_error());
  hbg_bind_end(b);
  if (!executes) /* exec=verify: checked, not run */
    return;
  float *yz = malloc(2 * N * 4);
  ASSERT(yz);
  ASSERT_OK(hbg_buffer_read(rt, yz, iyz, 2 * N * 4));
  for (uint32_t i = 0; i < N; i++) {
    float y = x[i] * 2.0f, z = y * 3.0f;
    if (yz[i] != y || yz[N + i] != z)
      T_FAIL("%s: element %u: y %g z %g, expected %g %g", what, i,
             (double)yz[i], (double)yz[N + i], (double)y, (double)z);
  }
  free(yz);
}

/* Tensors in sub-blocks of one caller-owned allocation, every policy. */
static void binds(int policy, const char *opts, int executes) {
  hbg_runtime *rt = mk(policy, opts);
  const size_t seg_bytes = 4 * N * 4 + 4096;
  cu_ptr seg = 0;
  ASSERT_EQ(cu_alloc(&seg, seg_bytes), 0);
  if (mocked)
    mock_watch_free(seg);
  /* two tensors inside the segment, neither at its start */
  uint64_t x_at = seg + 512, yz_at = seg + 512 + N * 4 + 256;
  uint64_t ix = 0, iyz = 0;
  ASSERT_OK(hbg_buffer_import(rt, x_at, N * 4, &ix));
  ASSERT_UEQ(ix, x_at); /* cuda: the same address */
  ASSERT_OK(hbg_buffer_import(rt, yz_at, 2 * N * 4, &iyz));
  float x[N];
  for (uint32_t i = 0; i < N; i++)
    x[i] = (float)(i % 17) * 0.5f - 3.0f;
  ASSERT_OK(hbg_buffer_write(rt, ix, x, sizeof x));
  char what[64];
  snprintf(what, sizeof what, "%s %s", hbg_policy_name(policy), opts);
  bind_check(rt, ix, iyz, x, executes, what);
  for (uint32_t i = 0; i < N; i++)
    x[i] = (float)((i * 5) % 23) - 11.0f;
  ASSERT_OK(hbg_buffer_write(rt, ix, x, sizeof x));
  bind_check(rt, ix, iyz, x, executes, what);

  /* a tensor straddling an import's end */
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_ERR(submit_scale(b, vec(ix, 4, N, HBG_ACCESS_IN),
                          vec(iyz, 0, N, HBG_ACCESS_OUT), 1.0f, NULL),
             HBG_E_RANGE);
  /* the gap between the two imports is no buffer of the runtime's */
  ASSERT_ERR(submit_scale(b, vec(x_at + N * 4, 0, 64, HBG_ACCESS_IN),
                          vec(iyz, 0, 64, HBG_ACCESS_OUT), 1.0f, NULL),
             HBG_E_RANGE);
  hbg_bind_end(b);

  /* free forgets x: no cuMemFree_v2 of the caller's memory; a later task
   * naming it is refused */
  ASSERT_OK(hbg_buffer_free(rt, ix));
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_ERR(submit_scale(b, vec(ix, 0, N, HBG_ACCESS_IN),
                          vec(iyz, 0, N, HBG_ACCESS_OUT), 1.0f, NULL),
             HBG_E_RANGE);
  hbg_bind_end(b);
  /* destroy forgets yz */
  hbg__error_clear();
  hbg_runtime_destroy(rt);
  ASSERT_STREQ(hbg_last_error(), "");
  if (mocked)
    ASSERT_EQ(mock_watched_frees(), 0);

  /* the caller's bytes are still there: a new runtime imports the whole
   * segment (no overlap left behind) and reads them */
  rt = mk(policy, opts);
  uint64_t iseg = 0;
  ASSERT_OK(hbg_buffer_import(rt, seg, seg_bytes, &iseg));
  float back[N];
  ASSERT_OK(hbg_buffer_read(rt, back, x_at, sizeof back));
  ASSERT(memcmp(back, x, sizeof x) == 0);
  ASSERT_OK(hbg_buffer_read(rt, back, yz_at + N * 4, sizeof back));
  for (uint32_t i = 0; i < N && executes; i++)
    ASSERT(back[i] == x[i] * 2.0f * 3.0f);
  hbg_runtime_destroy(rt);
  if (mocked)
    ASSERT_EQ(mock_watched_frees(), 0);
  ASSERT_EQ(cu_free(seg), 0); /* the caller frees its own memory */
  if (mocked)
    ASSERT_EQ(mock_watched_frees(), 1);
  printf("%s: imported sub-blocks: ok\n", what);
}

static void refusals(void) {
  hbg_runtime *rt = mk(HBG_POLICY_COALESCED, "exec=device");
  hbg_device *dev = hbg_runtime_device(rt);
  cu_ptr seg = 0;
  ASSERT_EQ(cu_alloc(&seg, 8192), 0);
  uint64_t d = 0, d2 = 0;
  char addr[32];
  /* straddling the allocation's end: named with the bytes missing */
  ASSERT_ERR(hbg_buffer_import(rt, seg + 8192 - 128, 256, &d), HBG_E_RANGE);
  snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)(seg + 8064));
  expect_said("past the allocation's end", addr);
  expect_said("past the allocation's end", "ends 128 bytes early");
  /* not CUDA memory */
  static float host[64];
  ASSERT_ERR(hbg_buffer_import(rt, (uint64_t)(uintptr_t)host, sizeof host, &d),
             HBG_E_RANGE);
  expect_said("a host array", "is not CUDA memory");
  /* pinned host memory is CUDA memory but not device memory */
  void *pin = NULL;
  ASSERT_OK(hbg_dev_host_alloc(dev, 4096, &pin));
  ASSERT_ERR(hbg_buffer_import(rt, (uint64_t)(uintptr_t)pin, 4096, &d),
             HBG_E_RANGE);
  expect_said("pinned host memory", "is host memory, not device memory");
  ASSERT_OK(hbg_dev_host_free(dev, pin));
  /* overlaps */
  uint64_t mine = 0;
  ASSERT_OK(hbg_buffer_alloc(rt, 4096, &mine));
  ASSERT_ERR(hbg_buffer_import(rt, mine + 256, 256, &d), HBG_E_INVAL);
  expect_said("an hbg_buffer_alloc buffer", "overlaps the device allocation");
  ASSERT_OK(hbg_buffer_import(rt, seg, 4096, &d));
  ASSERT_ERR(hbg_buffer_import(rt, seg + 4000, 512, &d2), HBG_E_INVAL);
  snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)seg);
  expect_said("a second import", "overlaps the import");
  expect_said("a second import", addr);
  ASSERT_OK(hbg_buffer_import(rt, seg + 4096, 4096, &d2)); /* adjacent */
  /* device memory has no host address */
  void *p = NULL;
  ASSERT_ERR(hbg_buffer_host_ptr(rt, d, 16, &p), HBG_E_UNSUPPORTED);
  expect_said("host_ptr", "not addressable from the host");
  ASSERT_ERR(hbg_buffer_host_ptr(rt, mine, 16, &p), HBG_E_UNSUPPORTED);
  ASSERT_ERR(hbg_buffer_host_ptr(rt, seg + 8192, 16, &p), HBG_E_RANGE);
  if (mocked) {
    mock_watch_free(seg);
    /* a reservation larger than the allocation (expandable segments):
     * the driver's range holds the caller's bounds, which are what is
     * imported */
    cu_ptr v = 0;
    ASSERT_EQ(cu_alloc(&v, 4096), 0);
    mock_vmm(1u << 20, 1u << 20);
    uint64_t dv = 0;
    ASSERT_OK(hbg_buffer_import(rt, v + 1024, 8192, &dv));
    ASSERT_UEQ(dv, v + 1024);
    ASSERT_ERR(hbg_buffer_import(rt, v, (1u << 20) + 4096 + 1, &d2),
               HBG_E_INVAL); /* overlaps dv */
    ASSERT_OK(hbg_buffer_free(rt, dv));
    ASSERT_ERR(hbg_buffer_import(rt, v, (1u << 20) + 4096 + 1, &dv),
               HBG_E_RANGE);
    expect_said("past the reservation", "ends 1 bytes early");
    mock_vmm(0, 0);
    ASSERT_ERR(hbg_buffer_import(rt, v + 1024, 8192, &dv), HBG_E_RANGE);
    ASSERT_EQ(cu_free(v), 0);
    /* another context's memory */
    cu_ptr f = 0;
    ASSERT_EQ(mock_alloc_foreign(&f, 4096), 0);
    ASSERT_ERR(hbg_buffer_import(rt, f, 4096, &d2), HBG_E_RANGE);
    expect_said("a foreign context", "belongs to another context");
    snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)f);
    expect_said("a foreign context", addr);
    ASSERT_EQ(cu_free(f), 0);
    /* the driver's failure, mapped and named */
    mock_fail("cuPointerGetAttributes", 1 /* CUDA_ERROR_INVALID_VALUE */, 0);
    cu_ptr g = 0;
    ASSERT_EQ(cu_alloc(&g, 4096), 0);
    ASSERT_ERR(hbg_buffer_import(rt, g, 4096, &d2), HBG_E_DEVICE);
    expect_said("injected", "cuPointerGetAttributes");
    ASSERT_EQ(cu_free(g), 0);
  }
  hbg__error_clear();
  hbg_runtime_destroy(rt);
  ASSERT_STREQ(hbg_last_error(), "");
  if (mocked)
    ASSERT_EQ(mock_watched_frees(), 0);
  ASSERT_EQ(cu_free(seg), 0);
  printf("refusals: ok\n");
}

/* A driver without cuPointerGetAttributes (the stand-in's _noopt build):
 * imports are unsupported, named; everything else runs. */
static void no_pointer_attributes(void) {
  const char *lib = getenv("HBG_CUDA_NOOPT_LIB");
  if (!mocked || !lib)
    return;
  char opts[1200];
  snprintf(opts, sizeof opts, "exec=device,lib=%s", lib);
  hbg_runtime *rt = mk(HBG_POLICY_DEFERRED, opts);
  uint64_t d = 0, mine = 0;
  ASSERT_ERR(hbg_buffer_import(rt, 0x7d0000001000ull, 4096, &d),
             HBG_E_UNSUPPORTED);
  expect_said("no cuPointerGetAttributes", "cuPointerGetAttributes");
  ASSERT_OK(hbg_buffer_alloc(rt, 4096, &mine));
  hbg_runtime_destroy(rt);
  printf("no cuPointerGetAttributes: ok\n");
}

int main(void) {
  skip_without_gpu();
  load_driver();
  refusals();
  for (int policy = 0; policy < HBG_POLICY__COUNT; policy++)
    binds(policy, "exec=device", 1);
  binds(HBG_POLICY_PINNED_BULK, "exec=verify", 0);
  no_pointer_attributes();
  ASSERT_EQ(cu_release(0), 0);
  return 0;
}
