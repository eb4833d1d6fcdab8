/* The peer executors (hbg_peer.h), on a GPU or on the stand-in driver
 * library (HBG_CUDA_LIB), which runs the same device source (hbg_dc_node)
 * as one CTA of one lane:
 *   - names parse both ways; a sim runtime is HBG_E_UNSUPPORTED naming it;
 *   - qwen3-14b and dsv4 (2 layers), eager and cuda-graph, three steps
 *     each: outputs equal the host reference bit for bit; eager launches
 *     every call; cuda-graph captures at the first step only, then
 *     updates some nodes (not all) and launches once; device time is
 *     measured; the stand-in ran one kernel per call; a step whose calls
 *     differ in number captures again;
 *   - launch returns before any kernel ran (stand-in hold); a second
 *     launch is HBG_E_BUSY, a wait with nothing launched HBG_E_STATE;
 *   - a call the device rejects (its kernel id made a user kernel's by the
 *     stand-in) comes back from hbg_peer_wait as HBG_E_KERNEL naming the
 *     call, and the next step runs clean;
 *   - without the optional kernel-node calls cuda-graph is
 *     HBG_E_UNSUPPORTED naming the symbol and eager runs, timed through
 *     cuEventElapsedTime's v1 symbol; without either elapsed-time symbol
 *     device_ns is 0;
 *   - a failure injected at each driver call the peers make is returned
 *     naming the call and leaks no driver object.
 * The cuda parts skip (77) where the cuda backend cannot open, unless
 * HBG_CUDA_LIB names the stand-in (cuda_skip.h): then that is a failure. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_peer.h>
#include <hbg/hbg_workload.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h"
#include "test.h"

static hbg_runtime *rt_open(const char *device, const char *opts) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = device;
  cfg.device_options = opts;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static hbg_workload *wl_open(hbg_runtime *rt, const char *name,
                             uint32_t layers) {
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = name;
  wc.layers = layers;
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  return w;
}

static void test_names(void) {
  int k = 0;
  ASSERT_OK(hbg_peer_parse("eager", &k));
  ASSERT_EQ(k, HBG_PEER_EAGER);
  ASSERT_OK(hbg_peer_parse("cuda-graph", &k));
  ASSERT_EQ(k, HBG_PEER_CUDA_GRAPH);
  ASSERT_ERR(hbg_peer_parse("graph", &k), HBG_E_INVAL);
  ASSERT_STREQ(hbg_peer_name(HBG_PEER_EAGER), "eager");
  ASSERT_STREQ(hbg_peer_name(HBG_PEER_CUDA_GRAPH), "cuda-graph");
  ASSERT(hbg_peer_name(0) == NULL && hbg_peer_name(3) == NULL);
}

static void test_sim(void) {
  hbg_runtime *rt = rt_open("sim", NULL);
  hbg_workload *w = wl_open(rt, "qwen3-14b", 1);
  hbg_peer *p = NULL;
  ASSERT_ERR(hbg_peer_create(w, HBG_PEER_EAGER, &p), HBG_E_UNSUPPORTED);
  printf("  sim: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "cuda") && strstr(hbg_last_error(), "sim"));
  ASSERT(p == NULL);
  ASSERT_ERR(hbg_peer_create(w, 7, &p), HBG_E_INVAL);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

#ifdef HBG_HAVE_CUDA
#include <dlfcn.h>

#include "device/cuda/devcode/devcode.h"
#include "workload/wl.h" /* test_recapture: the layer count */

static long (*mock_kernels_run)(void);
static void (*mock_hold)(int on);
static void (*mock_poke)(int nth, uint32_t offset, uint32_t value);
static void (*mock_fail)(const char *name, int code, int nth);
static int (*mock_armed)(void);
static long (*mock_live)(void);
static int mocked;

/* The stand-in's hooks, where HBG_CUDA_LIB names it: every one must be
 * there (a lost export fails; the stand-in's checks are never skipped). */
static void *msym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    T_FAIL("HBG_CUDA_LIB=%s is not the stand-in this test was built with "
           "(no %s)",
           getenv("HBG_CUDA_LIB"), name);
  return p;
}

static void load_mock(void) {
  void *h = cuda_standin();
  if (!h)
    return;
  mocked = 1;
  void *p = msym(h, "hbgmock_kernels_run");
  memcpy(&mock_kernels_run, &p, sizeof p);
  p = msym(h, "hbgmock_hold");
  memcpy(&mock_hold, &p, sizeof p);
  p = msym(h, "hbgmock_poke");
  memcpy(&mock_poke, &p, sizeof p);
  p = msym(h, "hbgmock_fail");
  memcpy(&mock_fail, &p, sizeof p);
  p = msym(h, "hbgmock_armed");
  memcpy(&mock_armed, &p, sizeof p);
  p = msym(h, "hbgmock_live");
  memcpy(&mock_live, &p, sizeof p);
}

static uint32_t n_calls(hbg_workload *w, uint32_t step) {
  uint32_t n = 0;
  ASSERT_OK(hbg_workload_nodes(w, step, 64, NULL, 0, &n));
  return n;
}

static void verify(hbg_workload *w, uint32_t step, const char *what) {
  double err = -1;
  int rc = hbg_workload_verify(w, step, &err);
  if (rc)
    T_FAIL("%s step %u: verify %s (max_abs_err %g)", what, step,
           hbg_err_name(rc), err);
}

static void run_peer(const char *name, int kind) {
  hbg_runtime *rt = rt_open("cuda", NULL);
  hbg_workload *w = wl_open(rt, name, 2);
  hbg_peer *p = NULL;
  ASSERT_OK(hbg_peer_create(w, kind, &p));
  const uint32_t n = n_calls(w, 3);
  ASSERT_GT(n, 0);
  for (uint32_t step = 3; step < 6; step++) {
    long k0 = mocked ? mock_kernels_run() : 0;
    ASSERT_OK(hbg_peer_launch(p, step));
    hbg_peer_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    ASSERT_OK(hbg_peer_wait(p, &st));
    printf("  %-10s %-10s step %u: %llu calls, %llu launches, %llu updates, "
           "control %.2f ms (capture %.2f, instantiate %.2f), device %.2f "
           "ms, exec %.2f ms\n",
           name, hbg_peer_name(kind), step, (unsigned long long)st.nodes,
           (unsigned long long)st.launches, (unsigned long long)st.updates,
           st.control_plane_ns / 1e6, st.capture_ns / 1e6,
           st.instantiate_ns / 1e6, st.device_ns / 1e6, st.exec_ns / 1e6);
    ASSERT_UEQ(st.struct_size, sizeof st);
    ASSERT_UEQ(st.kind, kind);
    ASSERT_UEQ(st.nodes, n);
    ASSERT(st.control_plane_ns > 0 && st.device_ns > 0);
    if (kind == HBG_PEER_EAGER) {
      ASSERT_UEQ(st.launches, n);
      ASSERT_UEQ(st.updates, 0);
      ASSERT_UEQ(st.capture_ns, 0);
    } else if (step == 3) {
      ASSERT_UEQ(st.launches, 1);
      ASSERT(st.capture_ns > 0);
      ASSERT_UEQ(st.updates, 0);
    } else {
      ASSERT_UEQ(st.launches, 1);
      ASSERT_UEQ(st.capture_ns, 0);
      ASSERT_UEQ(st.instantiate_ns, 0);
      ASSERT(st.updates > 0 && st.updates < n);
    }
    if (mocked)
      ASSERT_EQ(mock_kernels_run(), k0 + (long)n);
    verify(w, step, name);
  }
  hbg_peer_destroy(p);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* Launch returns with nothing run; launch and wait out of order. */
static void test_async(int kind) {
  hbg_runtime *rt = rt_open("cuda", NULL);
  hbg_workload *w = wl_open(rt, "qwen3-14b", 1);
  hbg_peer *p = NULL;
  ASSERT_OK(hbg_peer_create(w, kind, &p));
  hbg_peer_stats st = {.struct_size = sizeof st};
  ASSERT_ERR(hbg_peer_wait(p, &st), HBG_E_STATE);
  long k0 = mock_kernels_run();
  mock_hold(1);
  ASSERT_OK(hbg_peer_launch(p, 1));
  ASSERT_EQ(mock_kernels_run(), k0); /* returned, nothing ran */
  ASSERT_ERR(hbg_peer_launch(p, 2), HBG_E_BUSY);
  printf("  %s: launch while launched: %s\n", hbg_peer_name(kind),
         hbg_last_error());
  mock_hold(0);
  st.struct_size = 4; /* too short for any statistic */
  ASSERT_ERR(hbg_peer_wait(p, &st), HBG_E_INVAL);
  ASSERT_OK(hbg_peer_wait(p, NULL));
  ASSERT_EQ(mock_kernels_run(), k0 + (long)n_calls(w, 1));
  verify(w, 1, "async");
  ASSERT_ERR(hbg_peer_wait(p, NULL), HBG_E_STATE);
  /* destroy waits for a step still launched */
  mock_hold(1);
  ASSERT_OK(hbg_peer_launch(p, 2));
  mock_hold(0);
  hbg_peer_destroy(p);
  verify(w, 2, "destroyed while launched");
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* A call the device rejects comes back from wait, located. */
static void test_device_error(int kind) {
  hbg_runtime *rt = rt_open("cuda", NULL);
  hbg_workload *w = wl_open(rt, "dsv4", 1);
  hbg_peer *p = NULL;
  ASSERT_OK(hbg_peer_create(w, kind, &p));
  const uint32_t bad = 5;
  if (kind == HBG_PEER_CUDA_GRAPH) { /* captured clean first */
    ASSERT_OK(hbg_peer_launch(p, 1));
    ASSERT_OK(hbg_peer_wait(p, NULL));
  }
  mock_poke((int)bad, (uint32_t)offsetof(hbg_dc_node_args, kernel),
            HBG_KERNEL_USER_MIN);
  ASSERT_OK(hbg_peer_launch(p, 2));
  ASSERT_ERR(hbg_peer_wait(p, NULL), HBG_E_KERNEL);
  printf("  %s: %s\n", hbg_peer_name(kind), hbg_last_error());
  char want[32];
  snprintf(want, sizeof want, "call %u ", bad);
  ASSERT(strstr(hbg_last_error(), want) != NULL);
  /* The status word was reset: the next step runs clean. */
  ASSERT_OK(hbg_peer_launch(p, 3));
  ASSERT_OK(hbg_peer_wait(p, NULL));
  verify(w, 3, "after a device error");
  hbg_peer_destroy(p);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* cuda-graph captures again when a step's calls differ in number: the
 * workload's layer count is lowered in place (its buffers were sized for
 * more), then restored. */
static void test_recapture(void) {
  hbg_runtime *rt = rt_open("cuda", NULL);
  hbg_workload *w = wl_open(rt, "qwen3-14b", 2);
  hbg_peer *p = NULL;
  ASSERT_OK(hbg_peer_create(w, HBG_PEER_CUDA_GRAPH, &p));
  const uint32_t layers[] = {2, 1, 1, 2};
  for (uint32_t i = 0; i < 4; i++) {
    w->layers = layers[i];
    hbg_peer_stats st = {.struct_size = sizeof st};
    ASSERT_OK(hbg_peer_launch(p, i + 1));
    ASSERT_OK(hbg_peer_wait(p, &st));
    printf("  recapture: %u layer(s): %llu calls, capture %.2f ms, %llu "
           "updates\n",
           layers[i], (unsigned long long)st.nodes, st.capture_ns / 1e6,
           (unsigned long long)st.updates);
    ASSERT_UEQ(st.nodes, n_calls(w, i + 1));
    if (i == 2)
      ASSERT(st.capture_ns == 0 && st.updates > 0);
    else
      ASSERT(st.capture_ns > 0 && st.updates == 0);
  }
  verify(w, 4, "recaptured at the workload's own layer count");
  hbg_peer_destroy(p);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* Drivers without the optional symbols (stand-in variants). */
static void test_optional(void) {
  const char *noopt = getenv("HBG_CUDA_NOOPT_LIB");
  const char *notimer = getenv("HBG_CUDA_NOTIMER_LIB");
  if (!noopt || !*noopt || !notimer || !*notimer) {
    printf("  optional symbols: stand-in variants not named, not checked\n");
    return;
  }
  char o[1024];
  snprintf(o, sizeof o, "lib=%s", noopt);
  hbg_runtime *rt = rt_open("cuda", o);
  hbg_workload *w = wl_open(rt, "qwen3-14b", 1);
  hbg_peer *p = NULL;
  ASSERT_ERR(hbg_peer_create(w, HBG_PEER_CUDA_GRAPH, &p), HBG_E_UNSUPPORTED);
  printf("  no kernel-node calls: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "cuGraphGetNodes") != NULL);
  ASSERT_OK(hbg_peer_create(w, HBG_PEER_EAGER, &p));
  hbg_peer_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_peer_launch(p, 1));
  ASSERT_OK(hbg_peer_wait(p, &st));
  ASSERT(st.device_ns > 0); /* cuEventElapsedTime (v1) */
  verify(w, 1, "no optional symbols");
  hbg_peer_destroy(p);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);

  snprintf(o, sizeof o, "lib=%s", notimer);
  rt = rt_open("cuda", o);
  w = wl_open(rt, "qwen3-14b", 1);
  ASSERT_OK(hbg_peer_create(w, HBG_PEER_CUDA_GRAPH, &p));
  for (uint32_t step = 1; step < 3; step++) {
    ASSERT_OK(hbg_peer_launch(p, step));
    ASSERT_OK(hbg_peer_wait(p, &st));
    ASSERT_UEQ(st.device_ns, 0); /* no timer */
    ASSERT(st.exec_ns > 0);
    verify(w, step, "no elapsed time");
  }
  hbg_peer_destroy(p);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* The driver calls the peers make. */
static const char *const calls[] = {
    "cuDeviceGetAttribute", "cuStreamCreate",
    "cuEventCreate",        "cuMemAlloc_v2",
    "cuMemcpyHtoDAsync_v2", "cuLaunchKernel",
    "cuEventRecord",        "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",   "cuGraphInstantiateWithFlags",
    "cuGraphGetNodes",      "cuGraphKernelNodeGetParams_v2",
    "cuGraphExecKernelNodeSetParams_v2", "cuGraphLaunch",
    "cuEventSynchronize",   "cuEventElapsedTime_v2",
    "cuMemcpyDtoHAsync_v2", "cuStreamSynchronize",
    "cuGraphExecDestroy",   "cuGraphDestroy",
    "cuEventDestroy_v2",    "cuStreamDestroy_v2",
    "cuMemFree_v2",
};

/* Teardown calls: a failure leaves that one object behind, as in
 * test_cuda_driver. */
static int leaks_by_design(const char *call) {
  return !strcmp(call, "cuGraphExecDestroy") ||
         !strcmp(call, "cuGraphDestroy") ||
         !strcmp(call, "cuEventDestroy_v2") ||
         !strcmp(call, "cuStreamDestroy_v2") || !strcmp(call, "cuMemFree_v2");
}

/* Create, two steps, destroy. @return the first error (0 if none). */
static int scenario(hbg_workload *w, int kind, char *msg, size_t len) {
  hbg_peer *p = NULL;
  int rc = hbg_peer_create(w, kind, &p);
  for (uint32_t step = 1; rc == 0 && step < 3; step++) {
    rc = hbg_peer_launch(p, step);
    if (rc == 0)
      rc = hbg_peer_wait(p, NULL);
  }
  snprintf(msg, len, "%s", hbg_last_error());
  hbg_peer_destroy(p);
  return rc;
}

static void test_sweep(int kind) {
  hbg_runtime *rt = rt_open("cuda", NULL);
  hbg_workload *w = wl_open(rt, "qwen3-14b", 1);
  char msg[512];
  ASSERT_OK(scenario(w, kind, msg, sizeof msg));
  long base = mock_live();
  unsigned fired = 0;
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    for (int nth = 0; nth < 3; nth++) {
      mock_fail(calls[i], 999 /* CUDA_ERROR_UNKNOWN */, nth);
      int rc = scenario(w, kind, msg, sizeof msg);
      int was_fired = !mock_armed();
      mock_fail(NULL, 0, 0);
      int teardown = leaks_by_design(calls[i]);
      if (!was_fired) {
        ASSERT_OK(rc);
        /* every call listed is made by its kind's scenario */
        int graph_only = !strncmp(calls[i], "cuGraph", 7) ||
                         strstr(calls[i], "Capture") != NULL;
        if (nth == 0 && (kind == HBG_PEER_CUDA_GRAPH || !graph_only))
          T_FAIL("%s: never called by %s", calls[i], hbg_peer_name(kind));
        continue;
      }
      fired++;
      if (rc == 0) {
        /* only a teardown call may fail unreported (destroy is void) */
        if (!teardown && strcmp(calls[i], "cuStreamSynchronize"))
          T_FAIL("%s #%d: not reported", calls[i], nth);
      } else if (rc != HBG_E_DEVICE || !strstr(msg, calls[i])) {
        T_FAIL("%s #%d: %s, '%s'", calls[i], nth, hbg_err_name(rc), msg);
      }
      long live = mock_live();
      if (teardown)
        ASSERT_LE(live - base, 1);
      else if (live != base)
        T_FAIL("%s #%d: %ld driver objects leaked", calls[i], nth,
               live - base);
      base = live;
    }
  }
  printf("  sweep %s: %u injected failures\n", hbg_peer_name(kind), fired);
  ASSERT(fired > 0);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

static int cuda_tests(void) {
  load_mock();
  hbg_device *probe = NULL;
  if (hbg_device_open("cuda", NULL, &probe) < 0) {
    char why[600];
    snprintf(why, sizeof why, "cannot open cuda: %s", hbg_last_error());
    cuda_skip(why);
  }
  hbg_device_close(probe);
  printf("peers on %s\n", mocked ? "the stand-in driver library" : "the GPU");
  for (int kind = HBG_PEER_EAGER; kind <= HBG_PEER_CUDA_GRAPH; kind++) {
    run_peer("qwen3-14b", kind);
    run_peer("dsv4", kind);
  }
  test_recapture();
  if (!mocked) {
    printf("  (stand-in checks skipped on a GPU)\n");
    return 0;
  }
  for (int kind = HBG_PEER_EAGER; kind <= HBG_PEER_CUDA_GRAPH; kind++) {
    test_async(kind);
    test_device_error(kind);
  }
  test_optional();
  for (int kind = HBG_PEER_EAGER; kind <= HBG_PEER_CUDA_GRAPH; kind++)
    test_sweep(kind);
  return 0;
}
#endif

int main(void) {
  test_names();
  test_sim();
#ifdef HBG_HAVE_CUDA
  int rc = cuda_tests();
  if (rc)
    return rc;
#else
  cuda_skip("cuda backend not built (names and the sim checked)");
  return T_EXIT_SKIP;
#endif
  printf("cuda peer: ok\n");
  return 0;
}
