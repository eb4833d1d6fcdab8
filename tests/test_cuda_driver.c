/* cuda backend against the stand-in driver library (HBG_CUDA_LIB): a
 * missing library or symbol is an HBG_E_LOAD naming it; every CUresult maps
 * to its HBG_E_* with the native code and message kept (device and
 * runtime); ops work from any thread (the context is made current); a
 * failure injected at each driver call the ops make is reported naming the
 * call and leaks nothing (the device module's load, entry lookup, check
 * kernel launch and unload included). Skips (77) unless HBG_CUDA_LIB names
 * the stand-in. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#ifdef HBG_HAVE_CUDA
#include "device/cuda/cuda_internal.h" /* hbg__cu_check_window */
#endif

/* CUresult values (pinned by the driver's ABI). */
#define CU_INVALID_VALUE 1
#define CU_OUT_OF_MEMORY 2
#define CU_STUB_LIBRARY 34
#define CU_DEVICE_UNAVAILABLE 46
#define CU_NO_DEVICE 100
#define CU_INVALID_DEVICE 101
#define CU_NOT_READY 600
#define CU_ILLEGAL_ADDRESS 700
#define CU_LAUNCH_FAILED 719
#define CU_NOT_SUPPORTED 801
#define CU_SYSTEM_DRIVER_MISMATCH 803
#define CU_UNKNOWN 999

static void (*mock_fail)(const char *name, int code, int nth);
static int (*mock_armed)(void);
static long (*mock_live)(void);
static int (*mock_set_current)(void *ctx);
static const char *lib, *nosym;
static char opts[1024];

/* CMake names the stand-in whenever it builds the cuda backend: from
 * then on, a stand-in without one of its entry points is a failure (a lost
 * export), never a skip. */
static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    T_FAIL("%s is not the stand-in this test was built with (no %s)", lib,
           name);
  return p;
}

static void load_mock(void) {
  lib = getenv("HBG_CUDA_LIB");
  nosym = getenv("HBG_CUDA_NOSYM_LIB");
  if ((!lib || !*lib) && (!nosym || !*nosym) && !hbg_device_find("cuda")) {
    printf("SKIP: cuda backend not built\n");
    exit(T_EXIT_SKIP);
  }
  if (!lib || !*lib || !nosym || !*nosym)
    T_FAIL("HBG_CUDA_LIB / HBG_CUDA_NOSYM_LIB not set although the cuda "
           "backend is built (tests/CMakeLists.txt sets them)");
  if (!hbg_device_find("cuda"))
    T_FAIL("HBG_CUDA_LIB is set but libhbg has no cuda backend");
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  ASSERT(h != NULL);
  void *p = sym(h, "hbgmock_fail");
  memcpy(&mock_fail, &p, sizeof p);
  p = sym(h, "hbgmock_armed");
  memcpy(&mock_armed, &p, sizeof p);
  p = sym(h, "hbgmock_live");
  memcpy(&mock_live, &p, sizeof p);
  p = sym(h, "cuCtxSetCurrent");
  memcpy(&mock_set_current, &p, sizeof p);
  snprintf(opts, sizeof opts, "lib=%s", lib);
}

static void expect_native(hbg_device *d, int64_t code, const char *call,
                          const char *name) {
  int64_t got = 0;
  const char *msg = NULL;
  ASSERT_OK(hbg_device_native_error(d, &got, &msg));
  ASSERT_EQ(got, code);
  ASSERT(strstr(msg, call) != NULL);
  ASSERT(strstr(msg, name) != NULL);
}

static void test_missing(void) {
  hbg_device *d = NULL;
  ASSERT_ERR(hbg_device_open("cuda", "lib=/nonexistent/libcuda.so.1", &d),
             HBG_E_LOAD);
  ASSERT(d == NULL);
  printf("  missing library: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "/nonexistent/libcuda.so.1") != NULL);
  ASSERT(strstr(hbg_last_error(), "cannot load the CUDA driver library"));

  char o[1024];
  snprintf(o, sizeof o, "lib=%s", nosym);
  ASSERT_ERR(hbg_device_open("cuda", o, &d), HBG_E_LOAD);
  printf("  missing symbol: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "missing symbol cuMemcpyHtoDAsync_v2"));
  ASSERT(strstr(hbg_last_error(), nosym) != NULL);

  /* The probe (hbg devices) gives the same reasons. */
  const hbg_dev_ops *ops = hbg_device_find("cuda");
  char why[512];
  ASSERT_OK(ops->probe(why, sizeof why));
  ASSERT(strstr(why, "available: 1 GPU(s)") != NULL);
  setenv("HBG_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
  ASSERT_ERR(ops->probe(why, sizeof why), HBG_E_LOAD);
  ASSERT(strstr(why, "/nonexistent/libcuda.so.1") != NULL);
  setenv("HBG_CUDA_LIB", nosym, 1);
  ASSERT_ERR(ops->probe(why, sizeof why), HBG_E_LOAD);
  ASSERT(strstr(why, "missing symbol cuMemcpyHtoDAsync_v2") != NULL);
  setenv("HBG_CUDA_LIB", lib, 1);
  setenv("HBG_MOCK_CUDA_NDEV", "0", 1);
  ASSERT_ERR(ops->probe(why, sizeof why), HBG_E_UNSUPPORTED);
  printf("  no device: %s\n", why);
  ASSERT(strstr(why, "cuInit: CUDA_ERROR_NO_DEVICE") != NULL);
  ASSERT_ERR(hbg_device_open("cuda", opts, &d), HBG_E_UNSUPPORTED);
  ASSERT(strstr(hbg_last_error(), "cuInit: CUDA_ERROR_NO_DEVICE") != NULL);
  unsetenv("HBG_MOCK_CUDA_NDEV");
  ASSERT_EQ(mock_live(), 0);

  /* The toolkit's link-time stub loads but is no driver. */
  const char *stub = getenv("HBG_CUDA_STUB_LIB");
  if (stub && *stub && access(stub, R_OK) == 0) {
    char so[1024];
    snprintf(so, sizeof so, "lib=%s", stub);
    int rc = hbg_device_open("cuda", so, &d);
    printf("  toolkit stub: %s\n", hbg_last_error());
    ASSERT_EQ(rc, HBG_E_UNSUPPORTED);
    ASSERT(strstr(hbg_last_error(), "cuInit: ") != NULL);
    ASSERT(strstr(hbg_last_error(), "stub") != NULL);
  } else {
    printf("  toolkit stub: not found, not checked\n");
  }
}

/* CUresult -> HBG_E_*, at open and at the ops. */
static void test_mapping(void) {
  static const struct {
    int code, want;
    const char *name;
  } map[] = {
      {CU_OUT_OF_MEMORY, HBG_E_DEVMEM, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CU_INVALID_VALUE, HBG_E_DEVICE, "CUDA_ERROR_INVALID_VALUE"},
      {CU_ILLEGAL_ADDRESS, HBG_E_DEVICE, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {CU_LAUNCH_FAILED, HBG_E_DEVICE, "CUDA_ERROR_LAUNCH_FAILED"},
      {CU_UNKNOWN, HBG_E_DEVICE, "CUDA_ERROR_UNKNOWN"},
      {CU_NO_DEVICE, HBG_E_UNSUPPORTED, "CUDA_ERROR_NO_DEVICE"},
      {CU_STUB_LIBRARY, HBG_E_UNSUPPORTED, "CUDA_ERROR_STUB_LIBRARY"},
      {CU_NOT_SUPPORTED, HBG_E_UNSUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
      {CU_SYSTEM_DRIVER_MISMATCH, HBG_E_UNSUPPORTED,
       "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
      {CU_DEVICE_UNAVAILABLE, HBG_E_UNSUPPORTED,
       "CUDA_ERROR_DEVICE_UNAVAILABLE"},
      {CU_INVALID_DEVICE, HBG_E_NOTFOUND, "CUDA_ERROR_INVALID_DEVICE"},
      {12345, HBG_E_DEVICE, "CUresult 12345"}, /* unknown to the driver */
  };
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("cuda", opts, &d));
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    hbg_devptr p = 0;
    mock_fail("cuMemAlloc_v2", map[i].code, 0);
    ASSERT_ERR(hbg_dev_mem_alloc(d, 4096, &p), map[i].want);
    ASSERT(p == 0);
    expect_native(d, map[i].code, "cuMemAlloc_v2", map[i].name);
  }
  /* Out of memory is the op's own code: pinned host memory is host memory. */
  void *h = NULL;
  mock_fail("cuMemHostAlloc", CU_OUT_OF_MEMORY, 0);
  ASSERT_ERR(hbg_dev_host_alloc(d, 4096, &h), HBG_E_NOMEM);
  expect_native(d, CU_OUT_OF_MEMORY, "cuMemHostAlloc",
                "CUDA_ERROR_OUT_OF_MEMORY");
  /* Not ready is a state, not an error. */
  hbg_dev_event *ev = NULL;
  ASSERT_OK(hbg_dev_event_create(d, &ev));
  mock_fail("cuEventQuery", CU_NOT_READY, 0);
  ASSERT_ERR(hbg_dev_event_query(d, ev), HBG_E_AGAIN);
  ASSERT_OK(hbg_dev_event_query(d, ev));
  ASSERT_OK(hbg_dev_event_destroy(d, ev));
  hbg_device_close(d);

  mock_fail("cuInit", CU_SYSTEM_DRIVER_MISMATCH, 0);
  ASSERT_ERR(hbg_device_open("cuda", opts, &d), HBG_E_UNSUPPORTED);
  printf("  open: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(),
                "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH") != NULL);
  ASSERT(strstr(hbg_last_error(), "(native 803)") != NULL);
  char o[1100];
  snprintf(o, sizeof o, "%s,device=1", opts);
  ASSERT_ERR(hbg_device_open("cuda", o, &d), HBG_E_NOTFOUND);
  ASSERT(strstr(hbg_last_error(), "device=1: only 1 GPU(s)") != NULL);
  ASSERT_EQ(mock_live(), 0);
}

/* The runtime keeps the last native code and message. */
static void test_runtime_native(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = opts;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_ERR(hbg_runtime_last_native_error(rt, NULL, NULL), HBG_E_NOTFOUND);
  uint64_t buf = 0;
  ASSERT_OK(hbg_buffer_alloc(rt, 4096, &buf));
  uint8_t src[4096];
  memset(src, 7, sizeof src);
  mock_fail("cuMemcpyHtoDAsync_v2", CU_ILLEGAL_ADDRESS, 0);
  ASSERT_ERR(hbg_buffer_write(rt, buf, src, sizeof src), HBG_E_DEVICE);
  int64_t code = 0;
  const char *msg = NULL;
  ASSERT_OK(hbg_runtime_last_native_error(rt, &code, &msg));
  printf("  runtime native %lld: %s\n", (long long)code, msg);
  ASSERT_EQ(code, CU_ILLEGAL_ADDRESS);
  ASSERT(strstr(msg, "cuMemcpyHtoDAsync_v2: CUDA_ERROR_ILLEGAL_ADDRESS: "
                     "an illegal memory access was encountered") != NULL);
  ASSERT_OK(hbg_buffer_write(rt, buf, src, sizeof src)); /* still usable */
  ASSERT_OK(hbg_buffer_free(rt, buf));
  hbg_runtime_destroy(rt);
  ASSERT_EQ(mock_live(), 0);
}

/* CUDA contexts are per thread: an op from a thread that never saw the
 * device, or where another context was made current, still works. */
static void *other_thread(void *arg) {
  hbg_device *d = arg;
  hbg_devptr p = 0;
  uint8_t v[64] = {1, 2, 3}, back[64];
  if (hbg_dev_mem_alloc(d, sizeof v, &p) || hbg_dev_copy_h2d(d, p, v, sizeof v) ||
      hbg_dev_copy_d2h(d, back, p, sizeof back) || memcmp(v, back, sizeof v) ||
      hbg_dev_mem_free(d, p))
    return (void *)1;
  return NULL;
}

static void test_threads(void) {
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("cuda", opts, &d));
  for (int i = 0; i < 2; i++) {
    pthread_t th;
    void *ret = (void *)1;
    ASSERT_EQ(pthread_create(&th, NULL, other_thread, d), 0);
    ASSERT_EQ(pthread_join(th, &ret), 0);
    ASSERT(ret == NULL);
  }
  hbg_device_close(d);
  ASSERT_EQ(mock_live(), 0);
}

/* Every driver call the ops make, one failure at a time (each occurrence
 * up to the third): the op that made it fails with HBG_E_DEVICE and the
 * call's name, the rest of the sequence unwinds, nothing leaks. */
static const char *const calls[] = {
    "cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
    "cuCtxGetCurrent", "cuCtxSetCurrent", "cuDeviceTotalMem_v2",
    "cuStreamCreate", "cuMemHostAlloc", "cuMemHostRegister_v2",
    "cuMemAlloc_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
    "cuStreamSynchronize", "cuEventCreate", "cuEventRecord", "cuEventQuery",
    "cuEventSynchronize", "cuEventDestroy_v2", "cuMemFree_v2",
    "cuMemHostUnregister", "cuMemFreeHost", "cuStreamDestroy_v2",
    "cuDevicePrimaryCtxRelease_v2", "cuModuleLoadData", "cuModuleGetFunction",
    "cuModuleUnload",
#ifdef HBG_HAVE_CUDA
    "cuLaunchKernel",
    /* exec=device only: the grid's limits at open */
    "cuDeviceGetAttribute",
#endif
};

/* The sweep's pass: 0 the default launch (exec=verify), 1 exec=device. */
static int exec_device;

static char first_msg[512];

/* Every op once, the device left open in *dout (NULL if open failed).
 * @return the first failing rc (0 if none); *where the op's name, and
 * first_msg the native message it left. */
static int scenario(const char **where, hbg_device **dout) {
  hbg_device *d = NULL;
  hbg_dev_queue *q = NULL;
  hbg_dev_event *ev = NULL;
  void *pin = NULL;
  hbg_devptr p = 0, st = 0;
  static uint8_t reg[8192], back[4096];
  int rc, first = 0;
  *where = "open";
  first_msg[0] = '\0';
#define STEP(name, expr)                                                       \
  do {                                                                         \
    rc = (expr);                                                               \
    if (rc < 0 && rc != HBG_E_AGAIN && !first) {                               \
      const char *m = "";                                                      \
      first = rc;                                                              \
      *where = name;                                                           \
      ASSERT_OK(hbg_device_native_error(d, NULL, &m));                         \
      snprintf(first_msg, sizeof first_msg, "%s", m);                          \
    }                                                                          \
  } while (0)
  *dout = NULL;
  rc = hbg_device_open("cuda", opts, &d);
  if (rc < 0) {
    snprintf(first_msg, sizeof first_msg, "%s", hbg_last_error());
    return rc;
  }
  STEP("host_alloc", hbg_dev_host_alloc(d, 4096, &pin));
  STEP("host_register", hbg_dev_host_register(d, reg, sizeof reg));
  STEP("mem_alloc", hbg_dev_mem_alloc(d, 4096, &p));
  STEP("mem_alloc", hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &st));
  if (pin && p) {
    memset(pin, 3, 4096);
    STEP("copy_h2d", hbg_dev_copy_h2d(d, p, pin, 4096));
    STEP("copy_d2h", hbg_dev_copy_d2h(d, back, p, sizeof back));
  }
  STEP("queue_create", hbg_dev_queue_create(d, &q));
  STEP("event_create", hbg_dev_event_create(d, &ev));
  if (q && p && pin) {
    STEP("copy_h2d_async", hbg_dev_copy_h2d_async(d, q, p, pin, 4096));
    if (st) {
      /* A window too short to hold a header: a verdict, not an error. */
      hbg_dev_launch_desc l = {.struct_size = sizeof l,
                               .window = p,
                               .window_bytes = 8,
                               .status = st};
      if (exec_device) {
        /* Sizing past the queue's first block: the launch grows it (a
         * new block and an event; the old one freed at queue_destroy). */
        l.flags = HBG_DEV_LAUNCH_SIZED;
        l.n_tasks = 1;
        l.n_nodes = 4096;
      }
      STEP("launch", hbg_dev_launch(d, q, &l));
#ifdef HBG_HAVE_CUDA
      /* The device module's check kernel (a verdict, not an error). */
      STEP("check_window", hbg__cu_check_window(d, q, p, 8, st));
#endif
    }
  }
  if (q && ev) {
    STEP("event_record", hbg_dev_event_record(d, ev, q));
    STEP("event_query", hbg_dev_event_query(d, ev));
    STEP("event_wait", hbg_dev_event_wait(d, ev));
    STEP("queue_sync", hbg_dev_queue_sync(d, q));
  }
  STEP("event_destroy", hbg_dev_event_destroy(d, ev));
  STEP("queue_destroy", hbg_dev_queue_destroy(d, q));
  if (st)
    STEP("mem_free", hbg_dev_mem_free(d, st));
  if (p)
    STEP("mem_free", hbg_dev_mem_free(d, p));
  STEP("host_unregister", hbg_dev_host_unregister(d, reg));
  if (pin)
    STEP("host_free", hbg_dev_host_free(d, pin));
#undef STEP
  *dout = d;
  return first;
}

/* A failed cuCtxGetCurrent falls back to cuCtxSetCurrent: no error. */
static int silent(const char *call) { return !strcmp(call, "cuCtxGetCurrent"); }

static int run(const char **where) {
  hbg_device *d;
  int rc = scenario(where, &d);
  hbg_device_close(d);
  return rc;
}

/* A failed destroy or release leaves the driver's object behind (a queue's
 * pinned status slot included: the queue is gone when its free fails);
 * user allocations whose free failed stay registered and close frees them. */
static int leaks_by_design(const char *call) {
  /* exec=device: a queue whose scratch block's free failed is gone too. */
  if (exec_device && !strcmp(call, "cuMemFree_v2"))
    return 1;
  return !strcmp(call, "cuStreamDestroy_v2") ||
         !strcmp(call, "cuModuleUnload") ||
         !strcmp(call, "cuMemFreeHost") ||
         !strcmp(call, "cuEventDestroy_v2") ||
         !strcmp(call, "cuDevicePrimaryCtxRelease_v2");
}

static void test_sweep(void) {
  const char *where;
  ASSERT_OK(run(&where));
  /* The second pass starts after the first one's leaks by design. */
  long base = mock_live();
  if (!exec_device)
    ASSERT_EQ(base, 0);
  unsigned fired = 0, failed = 0;
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    for (int nth = 0; nth < 3; nth++) {
      ASSERT_EQ(mock_set_current(NULL), 0); /* as if another context ran */
      mock_fail(calls[i], CU_UNKNOWN, nth);
      hbg_device *d;
      int rc = scenario(&where, &d);
      int was_fired = !mock_armed(); /* before close: close reports nothing */
      hbg_device_close(d);
      int in_close = !was_fired && !mock_armed();
      mock_fail(NULL, 0, 0);
      /* Every call listed is made at least once by the scenario. */
      if (nth == 0 && !was_fired && !in_close &&
          (exec_device || strcmp(calls[i], "cuDeviceGetAttribute")))
        T_FAIL("%s: never called", calls[i]);
      fired += (unsigned)(was_fired || in_close);
      if (was_fired && !silent(calls[i])) {
        if (rc != HBG_E_DEVICE || !strstr(first_msg, calls[i]))
          T_FAIL("%s #%d: %s returned %d, native '%s'", calls[i], nth, where,
                 rc, first_msg);
        failed++;
      }
      long live = mock_live();
      if (leaks_by_design(calls[i]) && (was_fired || in_close))
        ASSERT_LE(live - base, 1);
      else if (live != base)
        T_FAIL("%s #%d: %ld driver objects leaked", calls[i], nth,
               live - base);
      base = live;
    }
  }
  printf("  sweep%s: %u injected failures, %u reported naming the call\n",
         exec_device ? " (exec=device)" : "", fired, failed);
  ASSERT_OK(run(&where));
}

int main(void) {
  load_mock();
  test_missing();
  test_mapping();
  test_runtime_native();
  test_threads();
  /* The host-side launch verifier (exec=verify) first. */
  size_t n = strlen(opts);
  snprintf(opts + n, sizeof opts - n, ",exec=verify");
  test_sweep();
  opts[n] = '\0';
#ifdef HBG_HAVE_CUDA
  /* The device executor's launch, scratch block, live-range table and
   * grid queries (the default). */
  snprintf(opts + n, sizeof opts - n, ",exec=device");
  exec_device = 1;
  test_sweep();
#endif
  printf("cuda driver: ok\n");
  return 0;
}
