/* Binds launched on a caller's CUstream, eagerly and into the caller's
 * stream capture, on the cuda stand-in (test_launch_capture_mock; without
 * HBG_CUDA_LIB naming the stand-in it skips: capture needs its driver).
 *
 * - An eager launch on a borrowed stream makes none of the calls the
 *   caller's capture forbids (no allocation, synchronisation, event or
 *   stream completion query, module load, stream creation or
 *   destruction): the stand-in records every driver call made inside it.
 * - A captured bind runs at every replay of the caller's graph, reading
 *   its inputs as they are then (5 replays, inputs changed between them),
 *   while the runtime goes on with other binds that reuse and regrow the
 *   slots' staging the capture took: the replays stay right.
 * - Two graphs captured on one stream replay alternately.
 * - While capturing, calls that would break the capture return
 *   HBG_E_CAPTURING and the capture stays valid (it ends with a graph).
 * - Destroying the graph frees the snapshot (its user object's destructor
 *   runs; the next hbg_bind_begin frees the memory).
 * - A capture the caller's own call invalidated is named at launch. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "cuda_skip.h"
#include "gate_fixture.h"
#include "pingpong_fixture.h"
#include "test.h"

typedef void *cu_t;
static struct {
  int (*stream_create)(cu_t *s, unsigned flags);
  int (*stream_sync)(cu_t s);
  int (*stream_destroy)(cu_t s);
  int (*begin)(cu_t s, int mode);
  int (*end)(cu_t s, cu_t *g);
  int (*instantiate)(cu_t *x, cu_t g, unsigned long long flags);
  int (*launch)(cu_t x, cu_t s);
  int (*exec_destroy)(cu_t x);
  int (*graph_destroy)(cu_t g);
  void (*calls_begin)(void);
  size_t (*calls_end)(const char **names, size_t max);
  long (*user_objects)(void);
} D;

static void load(const char *lib) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    T_FAIL("HBG_CUDA_LIB=%s: %s", lib, dlerror());
  STANDIN_LOAD(h, D.stream_create, "cuStreamCreate");
  STANDIN_LOAD(h, D.stream_sync, "cuStreamSynchronize");
  STANDIN_LOAD(h, D.stream_destroy, "cuStreamDestroy_v2");
  STANDIN_LOAD(h, D.begin, "cuStreamBeginCapture_v2");
  STANDIN_LOAD(h, D.end, "cuStreamEndCapture");
  STANDIN_LOAD(h, D.instantiate, "cuGraphInstantiateWithFlags");
  STANDIN_LOAD(h, D.launch, "cuGraphLaunch");
  STANDIN_LOAD(h, D.exec_destroy, "cuGraphExecDestroy");
  STANDIN_LOAD(h, D.graph_destroy, "cuGraphDestroy");
  STANDIN_LOAD(h, D.calls_begin, "hbgmock_calls_begin");
  STANDIN_LOAD(h, D.calls_end, "hbgmock_calls_end");
  STANDIN_LOAD(h, D.user_objects, "hbgmock_user_objects");
}

/* Calls a capture forbids, or that would touch the caller's stream's
 * life: none may happen inside a launch on a borrowed stream. */
static const char *const forbidden[] = {
    "cuMemAlloc_v2",        "cuMemFree_v2",        "cuMemHostAlloc",
    "cuMemFreeHost",        "cuMemHostRegister_v2", "cuMemHostUnregister",
    "cuStreamSynchronize",  "cuStreamQuery",       "cuEventQuery",
    "cuEventSynchronize",   "cuCtxSynchronize",    "cuModuleLoadData",
    "cuModuleUnload",       "cuLinkCreate_v2",     "cuLinkComplete",
    "cuStreamCreate",       "cuStreamDestroy_v2",  "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",      "cuDevicePrimaryCtxRetain"};

static void check_calls(const char *what) {
  const char *names[256];
  size_t n = D.calls_end(names, 256);
  ASSERT(n > 0 && n <= 256);
  int launched = 0;
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < sizeof forbidden / sizeof *forbidden; k++)
      if (!strcmp(names[i], forbidden[k]))
        T_FAIL("%s: called %s (call %zu of %zu)", what, names[i], i + 1, n);
    launched |= !strcmp(names[i], "cuLaunchKernel") ||
                !strcmp(names[i], "cuLaunchCooperativeKernel");
  }
  ASSERT(launched);
  printf("%s: %zu driver calls:", what, n);
  for (size_t i = 0; i < n; i++)
    printf(" %s", names[i]);
  printf("\n");
}

static void read_p(pp *w, uint32_t i, float *out) {
  ASSERT_OK(hbg_buffer_read(w->rt, out, w->p[i], N * 4));
}

static void eager_calls(hbg_device *dev) {
  hbg_runtime *rt = pp_runtime(dev, HBG_POLICY_COALESCED);
  cu_t s = NULL;
  ASSERT_EQ(D.stream_create(&s, 1), 0);
  pp w;
  pp_create(&w, rt, 0);
  for (uint32_t k = 0; k < 4; k++) {
    hbg_bind *b = pp_submit(&w, k, 0);
    if (k >= 2)
      D.calls_begin();
    ASSERT_OK(hbg_bind_launch_on(b, s));
    if (k >= 2)
      check_calls("eager launch on a borrowed stream");
    pp_wait(b);
  }
  pp_check(&w, 4);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
  ASSERT_EQ(D.stream_sync(s), 0); /* still the caller's */
  ASSERT_EQ(D.stream_destroy(s), 0);
}

/* Capture bind k of the ping-pong on s into a new graph. */
static cu_t capture_one(pp *w, cu_t s, uint32_t k) {
  ASSERT_EQ(D.begin(s, 0 /* GLOBAL */), 0);
  hbg_bind *b = pp_submit(w, k, 0);
  D.calls_begin();
  ASSERT_OK(hbg_bind_launch_on(b, s));
  check_calls("captured launch");
  ASSERT_OK(hbg_bind_wait(b)); /* nothing ran: returns at once */
  hbg_bind_end(b);
  cu_t g = NULL, x = NULL;
  ASSERT_EQ(D.end(s, &g), 0);
  ASSERT(g != NULL);
  ASSERT_EQ(D.instantiate(&x, g, 0), 0);
  ASSERT_EQ(D.graph_destroy(g), 0); /* the exec keeps the snapshot */
  return x;
}

static void replays(hbg_device *dev) {
  hbg_runtime *rt = pp_runtime(dev, HBG_POLICY_COALESCED);
  cu_t s = NULL;
  ASSERT_EQ(D.stream_create(&s, 1), 0);
  pp w;
  pp_create(&w, rt, 0);
  /* warm: the stream, the Definition resident, each slot's arena and heap
   * grown to the step (a slot grows at its next bind: 2 x depth binds) */
  pp_run_on(&w, s, 0, 4);
  hbg_dev_stats st0 = {.struct_size = sizeof st0};
  ASSERT_OK(hbg_dev_stats_get(dev, &st0));
  long uo0 = D.user_objects();
  cu_t xa = capture_one(&w, s, 0); /* P1 = P0 + 24 */
  cu_t xb = capture_one(&w, s, 1); /* P0 = P1 + 24 */
  ASSERT_EQ(D.user_objects(), uo0 + 2);
  /* The runtime goes on: binds on its own queue reuse the slots whose
   * staging the captures took (made anew), and their windows differ. */
  for (uint32_t k = 0; k < 6; k++)
    pp_wait(pp_launch(&w, k, 0));
  float p0[N], got[N];
  for (uint32_t r = 0; r < 5; r++) {
    for (uint32_t i = 0; i < N; i++)
      p0[i] = (float)(r * 100 + i);
    ASSERT_OK(hbg_buffer_write(rt, w.p[0], p0, sizeof p0));
    ASSERT_EQ(D.launch(xa, s), 0);
    ASSERT_EQ(D.stream_sync(s), 0);
    read_p(&w, 1, got);
    for (uint32_t i = 0; i < N; i++)
      if (got[i] != p0[i] + 24.0f)
        T_FAIL("replay %u of graph A: element %u is %g, want %g", r, i,
               (double)got[i], (double)(p0[i] + 24.0f));
    ASSERT_EQ(D.launch(xb, s), 0);
    ASSERT_EQ(D.launch(xa, s), 0);
    ASSERT_EQ(D.stream_sync(s), 0);
    read_p(&w, 1, got);
    for (uint32_t i = 0; i < N; i++)
      if (got[i] != p0[i] + 72.0f)
        T_FAIL("replay %u of graphs A, B, A: element %u is %g, want %g", r,
               i, (double)got[i], (double)(p0[i] + 72.0f));
  }
  printf("two captured graphs replayed 5 times each, inputs changed "
         "between replays, while the runtime ran 6 more binds: right\n");
  /* While the graphs live, the stream's executor block cannot grow: a
   * window larger than any before on s is refused, named, and nothing
   * runs; on the runtime's own queue it runs. */
  hbg_bind *wide = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &wide));
  hbg_task_id prev = HBG_TASK_NONE;
  for (uint32_t k = 0; k < 256; k++)
    pp_add(&w, wide, k, k ? &prev : NULL, &prev);
  ASSERT_ERR(hbg_bind_launch_on(wide, s), HBG_E_BUSY);
  ASSERT(strstr(hbg_last_error(), "while a captured graph holds it"));
  hbg_bind_end(wide);
  /* eager binds on the same stream after the replays run right too */
  pp_run_on(&w, s, 0, 2);
  read_p(&w, 0, got);
  ASSERT(got[0] == p0[0] + 96.0f); /* P0 = p0 + 48, then + 24 twice */
  ASSERT_EQ(D.exec_destroy(xa), 0);
  ASSERT_EQ(D.exec_destroy(xb), 0);
  ASSERT_EQ(D.stream_sync(s), 0);
  uint64_t t0 = now_ms();
  while (D.user_objects() != uo0 && now_ms() - t0 < 5000)
    ;
  ASSERT_EQ(D.user_objects(), uo0);
  /* the next begin frees the two snapshots */
  hbg_dev_stats st1 = {.struct_size = sizeof st1};
  ASSERT_OK(hbg_dev_stats_get(dev, &st1));
  pp_wait(pp_launch(&w, 0, 0));
  hbg_dev_stats st2 = {.struct_size = sizeof st2};
  ASSERT_OK(hbg_dev_stats_get(dev, &st2));
  ASSERT_UGE(st2.mem_frees - st1.mem_frees, 6); /* windows, statuses, heaps */
  ASSERT_UGE(st2.host_frees - st1.host_frees, 2); /* 2 pinned windows */
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
  ASSERT_EQ(D.stream_destroy(s), 0);
}

static void refusals(hbg_device *dev) {
  hbg_runtime *rt = pp_runtime(dev, HBG_POLICY_COALESCED);
  hbg_runtime *eager = pp_runtime(dev, HBG_POLICY_PINNED_EAGER);
  cu_t s = NULL, s2 = NULL;
  ASSERT_EQ(D.stream_create(&s, 1), 0);
  ASSERT_EQ(D.stream_create(&s2, 1), 0);
  pp w, e;
  pp_create(&w, rt, 0);
  pp_create(&e, eager, 0);
  pp_run_on(&w, s, 0, 4);
  hbg_bind *b = pp_submit(&e, 0, 0);
  ASSERT_OK(hbg_bind_launch_on(b, s));
  pp_wait(b);
  /* a bind left in flight before the capture */
  hbg_bind *inflight = pp_submit(&w, 1, 0);
  ASSERT_OK(hbg_bind_launch(inflight));
  hbg_bind_end(inflight); /* ended unwaited: its slot stays in flight */

  ASSERT_EQ(D.begin(s, 0), 0);
  uint64_t a = 0;
  ASSERT_ERR(hbg_buffer_alloc(rt, 256, &a), HBG_E_CAPTURING);
  ASSERT(strstr(hbg_last_error(), "capture"));
  float x[N] = {0};
  ASSERT_ERR(hbg_buffer_write(rt, w.p[0], x, sizeof x), HBG_E_CAPTURING);
  ASSERT_ERR(hbg_runtime_stream_forget(rt, s), HBG_E_CAPTURING);
  ASSERT(strstr(hbg_last_error(), "forget it after the capture"));
  /* an idle slot opens a bind (and ends it) without a device call */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_bind_end(b);
  ASSERT_ERR(hbg_bind_begin(rt, &b), HBG_E_CAPTURING); /* slot in flight */
  ASSERT(strstr(hbg_last_error(), "hbg_bind_wait every bind"));
  /* pinned-eager cannot be captured: refused before anything is queued */
  ASSERT_ERR(hbg_bind_begin(eager, &b), HBG_E_CAPTURING);
  ASSERT(strstr(hbg_last_error(), "only coalesced"));
  cu_t g = NULL;
  ASSERT_EQ(D.end(s, &g), 0); /* still valid */
  ASSERT(g != NULL);
  ASSERT_EQ(D.graph_destroy(g), 0);
  pp_wait(pp_launch(&w, 1, 0)); /* waits for the bind left in flight */

  ASSERT_EQ(D.begin(s, 0), 0);
  b = pp_submit(&w, 2, 0);
  ASSERT_ERR(hbg_bind_launch_on(b, s2), HBG_E_CAPTURING);
  ASSERT(strstr(hbg_last_error(), "launch once on it before capturing"));
  /* the caller breaks its own capture: the launch says so */
  ASSERT(D.stream_sync(s) != 0);
  ASSERT_ERR(hbg_bind_launch_on(b, s), HBG_E_CAPTURING);
  ASSERT(strstr(hbg_last_error(), "invalidated"));
  g = (cu_t)1;
  ASSERT(D.end(s, &g) != 0);
  ASSERT(g == NULL);
  /* the bind is still open and runs eagerly once the capture is over */
  ASSERT_OK(hbg_bind_launch_on(b, s));
  pp_wait(b);
  printf("refused while capturing: alloc, write, forget, begin with a "
         "bind in flight, pinned-eager, a new stream; an invalidated capture is "
         "named; the capture stayed valid\n");
  pp_destroy(&w);
  pp_destroy(&e);
  hbg_runtime_destroy(eager);
  hbg_runtime_destroy(rt);
  ASSERT_EQ(D.stream_destroy(s), 0);
  ASSERT_EQ(D.stream_destroy(s2), 0);
}

/* Binds a capture cannot take are refused, named, and the capture stays
 * valid: a window copied in chunks during orchestration
 * (coalesce_chunk_bytes), and a device checking launches on the host
 * (exec=verify: the launch fails after the window's copy was captured,
 * and says to discard the capture). */
static void untakeable(hbg_device *dev) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device_handle = dev;
  cfg.policy = HBG_POLICY_COALESCED;
  cfg.coalesce_chunk_bytes = 64;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  cu_t s = NULL;
  ASSERT_EQ(D.stream_create(&s, 1), 0);
  pp w;
  pp_create(&w, rt, 0);
  pp_run_on(&w, s, 0, 4);
  ASSERT_EQ(D.begin(s, 0), 0);
  hbg_bind *b = pp_submit(&w, 0, 0);
  ASSERT_ERR(hbg_bind_launch_on(b, s), HBG_E_CAPTURING);
  ASSERT(strstr(hbg_last_error(), "coalesce_chunk_bytes"));
  hbg_bind_end(b);
  cu_t g = NULL;
  ASSERT_EQ(D.end(s, &g), 0);
  ASSERT(g != NULL);
  ASSERT_EQ(D.graph_destroy(g), 0);
  pp_run_on(&w, s, 1, 1); /* the runtime goes on */
  pp_destroy(&w);
  hbg_runtime_destroy(rt);

  hbg_device *vdev = NULL;
  ASSERT_OK(hbg_device_open("cuda", "exec=verify", &vdev));
  rt = pp_runtime(vdev, HBG_POLICY_COALESCED);
  pp_create(&w, rt, 0);
  pp_run_on(&w, s, 0, 4);
  ASSERT_EQ(D.begin(s, 0), 0);
  b = pp_submit(&w, 0, 0);
  ASSERT_ERR(hbg_bind_launch_on(b, s), HBG_E_CAPTURING);
  ASSERT(strstr(hbg_last_error(), "exec=verify"));
  ASSERT(strstr(hbg_last_error(), "discard the capture"));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_STATE);
  hbg_bind_end(b);
  ASSERT_EQ(D.end(s, &g), 0);
  ASSERT_EQ(D.graph_destroy(g), 0);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
  hbg_device_close(vdev);
  ASSERT_EQ(D.stream_destroy(s), 0);
  printf("refused and named: a chunked window, a launch exec=verify "
         "cannot capture\n");
}

/* A graph that outlives the runtime: destroy says so, and destroying the
 * graph later is safe (its destructor finds the runtime gone). */
static void outlives(hbg_device *dev) {
  hbg_runtime *rt = pp_runtime(dev, HBG_POLICY_COALESCED);
  cu_t s = NULL;
  ASSERT_EQ(D.stream_create(&s, 1), 0);
  pp w;
  pp_create(&w, rt, 0);
  pp_run_on(&w, s, 0, 4);
  long uo0 = D.user_objects();
  cu_t x = capture_one(&w, s, 1);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
  ASSERT(strstr(hbg_last_error(), "destroy them before the runtime"));
  ASSERT_EQ(D.exec_destroy(x), 0);
  uint64_t t0 = now_ms();
  while (D.user_objects() != uo0 && now_ms() - t0 < 5000)
    ;
  ASSERT_EQ(D.user_objects(), uo0);
  ASSERT_EQ(D.stream_destroy(s), 0);
}

int main(void) {
  const char *lib = getenv("HBG_CUDA_LIB");
  if (!cuda_standin()) {
    printf("SKIP: needs the cuda stand-in (HBG_CUDA_LIB): capture is "
           "checked against its driver\n");
    return T_EXIT_SKIP;
  }
  load(lib);
  hbg_device *dev = NULL;
  if (hbg_device_open("cuda", NULL, &dev) < 0)
    cuda_skip(hbg_last_error());
  eager_calls(dev);
  replays(dev);
  refusals(dev);
  untakeable(dev);
  outlives(dev);
  hbg_device_close(dev);
  return 0;
}
