/* The cuda stand-in's stream capture (tests/cuda_standin/cuda_mock.c),
 * driven through its driver entry points directly: what work on a
 * capturing stream becomes and how a replay runs it (a pinned source read
 * at each replay, kernel parameters copied at capture), the capture modes'
 * rules for potentially unsafe calls (900 and the capture invalidated,
 * 901 after), synchronisation on a capturing stream, captured events
 * (907), waits on outside events (CU_EVENT_WAIT_EXTERNAL), fork and join
 * (904 unjoined), the wrong thread ending (908), a graph launched into a
 * capture, user objects' destructors, two graphs on one stream, and the
 * per-thread call record (hbgmock_calls_begin / _end). Built with the cuda
 * backend it runs against the stand-in and never skips: a stand-in that
 * is missing or lacks an entry point is a failure. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "test.h"

#ifdef HBG_HAVE_CUDA
#include <cuda.h>

#define CK(expr) ASSERT_EQ((int)(expr), (int)CUDA_SUCCESS)
#define CKE(expr, code) ASSERT_EQ((int)(expr), (int)(code))

typedef CUresult (*info_v2_fn)(CUstream, CUstreamCaptureStatus *,
                               cuuint64_t *, CUgraph *, const CUgraphNode **,
                               size_t *);

#define FNS(X)                                                                 \
  X(cuInit) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)       \
  X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuMemAlloc_v2) X(cuMemFree_v2)      \
  X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostRegister_v2)                  \
  X(cuMemHostUnregister) X(cuModuleLoadData) X(cuModuleUnload)                \
  X(cuLinkCreate_v2) X(cuLinkDestroy) X(cuStreamCreate) X(cuStreamDestroy_v2) \
  X(cuStreamSynchronize) X(cuStreamQuery) X(cuCtxSynchronize)                 \
  X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord)                      \
  X(cuEventRecordWithFlags) X(cuEventQuery) X(cuEventSynchronize)             \
  X(cuStreamWaitEvent) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2)        \
  X(cuMemsetD32Async) X(cuMemsetD8Async) X(cuLaunchKernel)                    \
  X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) X(cuStreamIsCapturing)     \
  X(cuThreadExchangeStreamCaptureMode) X(cuStreamGetCaptureInfo_v3)           \
  X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy)       \
  X(cuGraphDestroy) X(cuGraphGetNodes) X(cuGraphKernelNodeGetParams_v2)       \
  X(cuUserObjectCreate) X(cuUserObjectRetain) X(cuUserObjectRelease)          \
  X(cuGraphRetainUserObject) X(cuGraphReleaseUserObject)

#define DECL(f) static __typeof__(&f) p_##f;
FNS(DECL)
#undef DECL
static info_v2_fn p_info_v2;
static CUfunction (*mock_fill_function)(void);
static long (*mock_live)(void);
static long (*mock_user_objects)(void);
static long (*mock_kernels_run)(void);
static void (*mock_hold)(int on);
static void (*mock_calls_begin)(void);
static size_t (*mock_calls_end)(const char **names, size_t max);

static CUcontext ctx;

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    T_FAIL("HBG_CUDA_LIB=%s lacks %s: not the stand-in this test was built "
           "with",
           getenv("HBG_CUDA_LIB"), name);
  return p;
}

#define LOAD(var, name)                                                        \
  do {                                                                         \
    void *p__ = sym(h, name);                                                  \
    memcpy(&(var), &p__, sizeof p__);                                          \
  } while (0)

static void load(void) {
  const char *lib = getenv("HBG_CUDA_LIB");
  if (!lib || !*lib)
    T_FAIL("HBG_CUDA_LIB is not set although the cuda backend is built "
           "(tests/CMakeLists.txt names the stand-in)");
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h)
    T_FAIL("HBG_CUDA_LIB=%s cannot be loaded: %s", lib, dlerror());
#define LD(f) LOAD(p_##f, #f);
  FNS(LD)
#undef LD
  LOAD(p_info_v2, "cuStreamGetCaptureInfo_v2");
  LOAD(mock_fill_function, "hbgmock_fill_function");
  LOAD(mock_live, "hbgmock_live");
  LOAD(mock_user_objects, "hbgmock_user_objects");
  LOAD(mock_kernels_run, "hbgmock_kernels_run");
  LOAD(mock_hold, "hbgmock_hold");
  LOAD(mock_calls_begin, "hbgmock_calls_begin");
  LOAD(mock_calls_end, "hbgmock_calls_end");
  CK(p_cuInit(0));
  CK(p_cuDevicePrimaryCtxRetain(&ctx, 0));
  CK(p_cuCtxSetCurrent(ctx));
}

static CUstream stream(void) {
  CUstream s;
  CK(p_cuStreamCreate(&s, 0));
  return s;
}

static CUevent event(void) {
  CUevent e;
  CK(p_cuEventCreate(&e, 0));
  return e;
}

static CUdeviceptr dalloc(size_t n) {
  CUdeviceptr d;
  CK(p_cuMemAlloc_v2(&d, n));
  return d;
}

static void *palloc(size_t n) {
  void *p;
  CK(p_cuMemHostAlloc(&p, n, 0));
  return p;
}

static CUstreamCaptureStatus status(CUstream s) {
  CUstreamCaptureStatus st = (CUstreamCaptureStatus)-1;
  CK(p_cuStreamIsCapturing(s, &st));
  return st;
}

static size_t nodes(CUgraph g) {
  size_t n = 0;
  CK(p_cuGraphGetNodes(g, NULL, &n));
  return n;
}

/* d's first n words, read back through pinned memory */
static void readback(CUstream s, CUdeviceptr d, uint32_t *out, size_t n) {
  uint32_t *p = palloc(n * 4);
  CK(p_cuMemcpyDtoHAsync_v2(p, d, n * 4, s));
  CK(p_cuStreamSynchronize(s));
  memcpy(out, p, n * 4);
  CK(p_cuMemFreeHost(p));
}

/* Instantiate, replay once on s, wait; the graph and exec destroyed. */
static void replay_once(CUgraph g, CUstream s) {
  CUgraphExec x;
  CK(p_cuGraphInstantiateWithFlags(&x, g, 0));
  CK(p_cuGraphLaunch(x, s));
  CK(p_cuStreamSynchronize(s));
  CK(p_cuGraphExecDestroy(x));
  CK(p_cuGraphDestroy(g));
}

/* memset + H2D from a pinned buffer + D2H, captured once, replayed N
 * times with the pinned source changed between replays. */
static void test_copies(void) {
  enum { W = 64, H = 32, R = 5 };
  CUstream s = stream();
  CUdeviceptr d = dalloc(W * 4);
  uint32_t *src = palloc(W * 4), *dst = palloc(W * 4);
  for (int i = 0; i < W; i++)
    dst[i] = 0x11;
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CK(p_cuMemsetD32Async(d, 0xAB, W, s));
  CK(p_cuMemcpyHtoDAsync_v2(d, src, H * 4, s));
  CK(p_cuMemcpyDtoHAsync_v2(dst, d, W * 4, s));
  CUgraph g = NULL;
  CK(p_cuStreamEndCapture(s, &g));
  ASSERT(g != NULL);
  ASSERT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_NONE);
  ASSERT_EQ(nodes(g), 3);
  CK(p_cuStreamSynchronize(s));
  for (int i = 0; i < W; i++) /* nothing ran at capture */
    ASSERT_EQ(dst[i], 0x11);
  CUgraphExec x;
  CK(p_cuGraphInstantiateWithFlags(&x, g, 0));
  for (int r = 0; r < R; r++) {
    for (int i = 0; i < W; i++)
      src[i] = (uint32_t)(r * 1000 + i);
    CK(p_cuGraphLaunch(x, s));
    CK(p_cuStreamSynchronize(s));
    for (int i = 0; i < H; i++)
      ASSERT_EQ(dst[i], r * 1000 + i);
    for (int i = H; i < W; i++)
      ASSERT_EQ(dst[i], 0xAB);
  }
  /* a byte memset too, outside a capture and captured */
  CK(p_cuMemsetD8Async(d, 0x5A, 8, s));
  uint32_t w[2];
  readback(s, d, w, 2);
  ASSERT_EQ(w[0], 0x5A5A5A5A);
  ASSERT_EQ(w[1], 0x5A5A5A5A);
  CK(p_cuGraphExecDestroy(x));
  CK(p_cuGraphDestroy(g));
  CK(p_cuMemFreeHost(src));
  CK(p_cuMemFreeHost(dst));
  CK(p_cuMemFree_v2(d));
  CK(p_cuStreamDestroy_v2(s));
  printf("ok copies: %d replays read the pinned source anew\n", R);
}

typedef struct fill_args {
  uint64_t dst;
  uint32_t val, n;
} fill_args;

static void test_kernel_params(void) {
  CUstream s = stream();
  CUdeviceptr d = dalloc(16 * 4);
  CUfunction f = mock_fill_function();
  fill_args a = {d, 7, 16};
  void *params[] = {&a};
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(p_cuLaunchKernel(f, 2, 1, 1, 2, 1, 1, 0, s, params, NULL));
  a.val = 9; /* after the capture: the node keeps 7 */
  CUgraph g;
  CK(p_cuStreamEndCapture(s, &g));
  CUgraphNode n;
  size_t k = 1;
  CK(p_cuGraphGetNodes(g, &n, &k));
  ASSERT_EQ(k, 1);
  CUDA_KERNEL_NODE_PARAMS kp;
  CK(p_cuGraphKernelNodeGetParams_v2(n, &kp));
  fill_args got;
  memcpy(&got, kp.kernelParams[0], sizeof got);
  ASSERT_EQ(got.val, 7);
  long ran = mock_kernels_run();
  replay_once(g, s);
  ASSERT_EQ(mock_kernels_run(), ran + 1);
  uint32_t w[16];
  readback(s, d, w, 16);
  for (int i = 0; i < 16; i++)
    ASSERT_EQ(w[i], 7);
  CK(p_cuMemFree_v2(d));
  CK(p_cuStreamDestroy_v2(s));
  printf("ok kernel parameters copied at capture\n");
}

/* ---- the potentially unsafe calls ---- */

/* What one call needs, made before the capture; what it leaves is
 * cleaned after it. */
typedef struct env {
  CUstream other;
  CUevent done; /* recorded outside any capture, completed */
  CUdeviceptr dfree;
  void *pfree, *reg, *unreg;
  int registered; /* unreg still is */
  void *out;
  CUlinkState link;
  CUmodule mod;
} env;

typedef CUresult (*call_fn)(env *e);

static CUresult c_alloc(env *e) {
  CUdeviceptr d;
  CUresult r = p_cuMemAlloc_v2(&d, 64);
  if (r == CUDA_SUCCESS)
    e->out = (void *)(uintptr_t)d;
  return r;
}
static CUresult c_free(env *e) {
  CUresult r = p_cuMemFree_v2(e->dfree);
  if (r == CUDA_SUCCESS)
    e->dfree = 0;
  return r;
}
static CUresult c_hostalloc(env *e) {
  void *p;
  CUresult r = p_cuMemHostAlloc(&p, 64, 0);
  (void)e;
  if (r == CUDA_SUCCESS)
    CK(p_cuMemFreeHost(p));
  return r;
}
static CUresult c_freehost(env *e) {
  CUresult r = p_cuMemFreeHost(e->pfree);
  if (r == CUDA_SUCCESS)
    e->pfree = NULL;
  return r;
}
static CUresult c_register(env *e) {
  CUresult r = p_cuMemHostRegister_v2(e->reg, 4096, 0);
  if (r == CUDA_SUCCESS)
    CK(p_cuMemHostUnregister(e->reg));
  return r;
}
static CUresult c_unregister(env *e) {
  CUresult r = p_cuMemHostUnregister(e->unreg);
  if (r == CUDA_SUCCESS)
    e->registered = 0;
  return r;
}
static CUresult c_modload(env *e) {
  static const char junk[64] = "not a fatbin";
  CUresult r = p_cuModuleLoadData(&e->mod, junk);
  /* past the capture rules, a bad image: INVALID_IMAGE */
  return r == CUDA_ERROR_INVALID_IMAGE ? CUDA_SUCCESS : r;
}
static CUresult c_modunload(env *e) {
  (void)e;
  CUresult r = p_cuModuleUnload(NULL);
  return r == CUDA_ERROR_INVALID_HANDLE ? CUDA_SUCCESS : r;
}
static CUresult c_link(env *e) {
  CUresult r = p_cuLinkCreate_v2(0, NULL, NULL, &e->link);
  if (r == CUDA_SUCCESS) {
    CK(p_cuLinkDestroy(e->link));
    e->link = NULL;
  }
  return r;
}
static CUresult c_ssync(env *e) { return p_cuStreamSynchronize(e->other); }
static CUresult c_squery(env *e) { return p_cuStreamQuery(e->other); }
static CUresult c_csync(env *e) {
  (void)e;
  return p_cuCtxSynchronize();
}
static CUresult c_esync(env *e) { return p_cuEventSynchronize(e->done); }
static CUresult c_equery(env *e) { return p_cuEventQuery(e->done); }

static const struct {
  const char *name;
  call_fn f;
} calls[] = {
    {"cuMemAlloc_v2", c_alloc},         {"cuMemFree_v2", c_free},
    {"cuMemHostAlloc", c_hostalloc},    {"cuMemFreeHost", c_freehost},
    {"cuMemHostRegister_v2", c_register}, {"cuMemHostUnregister", c_unregister},
    {"cuModuleLoadData", c_modload},    {"cuModuleUnload", c_modunload},
    {"cuLinkCreate_v2", c_link},        {"cuStreamSynchronize", c_ssync},
    {"cuStreamQuery", c_squery},        {"cuCtxSynchronize", c_csync},
    {"cuEventSynchronize", c_esync},    {"cuEventQuery", c_equery},
};
#define N_CALLS (sizeof calls / sizeof calls[0])

static void env_open(env *e) {
  memset(e, 0, sizeof *e);
  e->other = stream();
  e->done = event();
  CK(p_cuEventRecord(e->done, e->other));
  CK(p_cuEventSynchronize(e->done));
  e->dfree = dalloc(64);
  e->pfree = palloc(64);
  e->reg = aligned_alloc(4096, 4096);
  e->unreg = aligned_alloc(4096, 4096);
  ASSERT(e->reg && e->unreg);
  CK(p_cuMemHostRegister_v2(e->unreg, 4096, 0));
  e->registered = 1;
}

static void env_close(env *e) {
  if (e->out)
    CK(p_cuMemFree_v2((CUdeviceptr)(uintptr_t)e->out));
  if (e->dfree)
    CK(p_cuMemFree_v2(e->dfree));
  if (e->pfree)
    CK(p_cuMemFreeHost(e->pfree));
  if (e->registered)
    CK(p_cuMemHostUnregister(e->unreg));
  free(e->unreg);
  free(e->reg);
  CK(p_cuEventDestroy_v2(e->done));
  CK(p_cuStreamDestroy_v2(e->other));
}

typedef struct thr {
  call_fn f;
  env *e;
  CUresult r;
  CUstreamCaptureMode mode; /* the thread's exchange mode */
} thr;

static void *thr_main(void *arg) {
  thr *t = arg;
  CK(p_cuCtxSetCurrent(ctx));
  CUstreamCaptureMode m = t->mode;
  CK(p_cuThreadExchangeStreamCaptureMode(&m));
  t->r = t->f(t->e);
  return NULL;
}

/* f from another thread whose exchange mode is `mode` */
static CUresult on_thread(call_fn f, env *e, CUstreamCaptureMode mode) {
  thr t = {f, e, CUDA_ERROR_UNKNOWN, mode};
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, thr_main, &t), 0);
  ASSERT_EQ(pthread_join(th, NULL), 0);
  return t.r;
}

/* Each call during a capture of `mode` on this thread (from this thread or
 * another): prohibited (900, capture invalidated, 901 after and at the
 * end, graph NULL) or allowed (the capture goes on and ends with its
 * node). */
static void unsafe_case(CUstreamCaptureMode mode, int other_thread,
                        CUstreamCaptureMode thread_mode, int prohibited) {
  CUdeviceptr d = dalloc(64);
  for (size_t i = 0; i < N_CALLS; i++) {
    env e;
    env_open(&e);
    CUstream s = stream();
    CK(p_cuStreamBeginCapture_v2(s, mode));
    CK(p_cuMemsetD32Async(d, 1, 16, s));
    CUresult r = other_thread ? on_thread(calls[i].f, &e, thread_mode)
                              : calls[i].f(&e);
    CUgraph g = (CUgraph)&g;
    if (prohibited) {
      if (r != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
        T_FAIL("%s during a mode-%d capture (%s thread): %d, expected 900",
               calls[i].name, (int)mode, other_thread ? "another" : "its",
               (int)r);
      ASSERT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
      CKE(p_cuMemsetD32Async(d, 2, 16, s),
          CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
      CKE(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
      ASSERT(g == NULL);
    } else {
      if (r != CUDA_SUCCESS)
        T_FAIL("%s during a mode-%d capture (%s thread, mode %d): %d, "
               "expected success",
               calls[i].name, (int)mode, other_thread ? "another" : "its",
               (int)thread_mode, (int)r);
      ASSERT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
      CK(p_cuStreamEndCapture(s, &g));
      ASSERT(g != NULL);
      ASSERT_EQ(nodes(g), 1);
      CK(p_cuGraphDestroy(g));
    }
    ASSERT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    CK(p_cuStreamDestroy_v2(s));
    env_close(&e);
  }
  CK(p_cuMemFree_v2(d));
}

static void test_unsafe(void) {
  const CUstreamCaptureMode G = CU_STREAM_CAPTURE_MODE_GLOBAL,
                            T = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                            R = CU_STREAM_CAPTURE_MODE_RELAXED;
  unsafe_case(G, 0, G, 1); /* GLOBAL: its thread */
  unsafe_case(G, 1, G, 1); /* GLOBAL: any thread */
  unsafe_case(G, 1, T, 1); /* a THREAD_LOCAL thread too */
  unsafe_case(G, 1, R, 0); /* a RELAXED thread may */
  unsafe_case(T, 0, G, 1); /* THREAD_LOCAL: its own thread */
  unsafe_case(T, 1, G, 0); /* another thread may */
  unsafe_case(R, 0, G, 0); /* RELAXED: even its own thread */
  printf("ok unsafe calls: %zu calls by mode and thread\n", N_CALLS);
}

/* Synchronising with or querying the capturing stream: 900 in every
 * mode, the capture invalidated. */
static void test_sync_capturing(void) {
  for (int m = 0; m < 3; m++)
    for (int q = 0; q < 2; q++) {
      CUstream s = stream();
      CK(p_cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)m));
      CKE(q ? p_cuStreamQuery(s) : p_cuStreamSynchronize(s),
          CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
      ASSERT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
      CUgraph g = (CUgraph)&g;
      CKE(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
      ASSERT(g == NULL);
      CK(p_cuStreamDestroy_v2(s));
    }
  printf("ok sync/query on the capturing stream invalidates, every mode\n");
}

static void test_events(void) {
  CUstream s = stream(), o = stream();
  CUdeviceptr d = dalloc(64);
  CUevent e = event(), out = event(), ext = event();
  /* a captured event: 907 for query and synchronize, any mode */
  for (int m = 0; m < 3; m++) {
    CK(p_cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)m));
    CK(p_cuEventRecord(e, s));
    CKE(p_cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT);
    CKE(p_cuEventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT);
    CUgraph g;
    CK(p_cuStreamEndCapture(s, &g));
    ASSERT_EQ(nodes(g), 0);
    CK(p_cuGraphDestroy(g));
  }
  CKE(p_cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT); /* still its last */
  CK(p_cuEventRecord(e, s));
  CK(p_cuEventSynchronize(e));
  CK(p_cuEventQuery(e));
  /* waiting on an event recorded outside: 900 unless external */
  CK(p_cuEventRecord(out, o));
  CK(p_cuEventSynchronize(out));
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CKE(p_cuStreamWaitEvent(s, out, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ASSERT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph g = (CUgraph)&g;
  CKE(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT(g == NULL);
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(p_cuStreamWaitEvent(s, out, CU_EVENT_WAIT_EXTERNAL));
  CK(p_cuMemsetD32Async(d, 3, 16, s));
  CK(p_cuEventRecordWithFlags(ext, s, CU_EVENT_RECORD_EXTERNAL));
  CK(p_cuStreamEndCapture(s, &g));
  ASSERT_EQ(nodes(g), 3);
  /* the replay waits for out's latest record: one held back on o */
  CUgraphExec x;
  CK(p_cuGraphInstantiateWithFlags(&x, g, 0));
  mock_hold(1);
  CK(p_cuEventRecord(out, o));
  CK(p_cuGraphLaunch(x, s));
  mock_hold(0);
  CK(p_cuStreamSynchronize(s));
  CK(p_cuEventQuery(out)); /* the wait let s go after it */
  CK(p_cuEventQuery(ext)); /* an external record: a plain event */
  uint32_t w;
  readback(s, d, &w, 1);
  ASSERT_EQ(w, 3);
  CK(p_cuGraphExecDestroy(x));
  CK(p_cuGraphDestroy(g));
  CK(p_cuEventDestroy_v2(e));
  CK(p_cuEventDestroy_v2(out));
  CK(p_cuEventDestroy_v2(ext));
  CK(p_cuMemFree_v2(d));
  CK(p_cuStreamDestroy_v2(s));
  CK(p_cuStreamDestroy_v2(o));
  printf("ok captured events, outside and external waits\n");
}

static void test_fork_join(void) {
  CUstream s = stream(), o = stream();
  CUdeviceptr d = dalloc(3 * 4);
  CUevent e1 = event(), e2 = event();
  for (int join = 1; join >= 0; join--) {
    CK(p_cuMemsetD32Async(d, 0, 3, s));
    CK(p_cuStreamSynchronize(s));
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuMemsetD32Async(d, 1, 1, s));
    CK(p_cuEventRecord(e1, s));
    CK(p_cuStreamWaitEvent(o, e1, 0)); /* o forks into the capture */
    ASSERT_EQ(status(o), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUstreamCaptureStatus st;
    cuuint64_t id_s = 0, id_o = 0;
    CUgraph gs = NULL, go = NULL;
    const CUgraphNode *deps = NULL;
    size_t nd = 9;
    CK(p_info_v2(s, &st, &id_s, &gs, &deps, &nd));
    ASSERT_EQ(nd, 1);
    const CUgraphEdgeData *edges = (const CUgraphEdgeData *)&edges;
    CK(p_cuStreamGetCaptureInfo_v3(o, &st, &id_o, &go, &deps, &edges, &nd));
    ASSERT_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    ASSERT(id_s != 0 && id_s == id_o && gs == go && edges == NULL);
    CK(p_cuMemsetD32Async(d + 4, 2, 1, o));
    if (join) {
      CK(p_cuEventRecord(e2, o));
      CK(p_cuStreamWaitEvent(s, e2, 0));
    }
    CK(p_cuMemsetD32Async(d + 8, 3, 1, s));
    CUgraph g = (CUgraph)&g;
    if (!join) {
      CKE(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
      ASSERT(g == NULL);
      ASSERT_EQ(status(o), CU_STREAM_CAPTURE_STATUS_NONE);
      break;
    }
    CKE(p_cuStreamEndCapture(o, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    CK(p_cuStreamEndCapture(s, &g));
    ASSERT_EQ(status(o), CU_STREAM_CAPTURE_STATUS_NONE);
    ASSERT_EQ(nodes(g), 3);
    replay_once(g, s);
    uint32_t w[3];
    readback(s, d, w, 3);
    ASSERT_EQ(w[0], 1);
    ASSERT_EQ(w[1], 2);
    ASSERT_EQ(w[2], 3);
  }
  CK(p_cuEventDestroy_v2(e1));
  CK(p_cuEventDestroy_v2(e2));
  CK(p_cuMemFree_v2(d));
  CK(p_cuStreamDestroy_v2(s));
  CK(p_cuStreamDestroy_v2(o));
  printf("ok fork/join, unjoined 904\n");
}

static CUstream end_s;
static CUgraph end_g;

static void *end_main(void *arg) {
  CK(p_cuCtxSetCurrent(ctx));
  *(CUresult *)arg = p_cuStreamEndCapture(end_s, &end_g);
  return NULL;
}

static CUresult end_elsewhere(CUstream s) {
  CUresult r = CUDA_ERROR_UNKNOWN;
  pthread_t th;
  end_s = s;
  end_g = NULL;
  ASSERT_EQ(pthread_create(&th, NULL, end_main, &r), 0);
  ASSERT_EQ(pthread_join(th, NULL), 0);
  return r;
}

static void test_wrong_thread_and_graph_launch(void) {
  CUstream s = stream();
  CUdeviceptr d = dalloc(64);
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(p_cuMemsetD32Async(d, 1, 1, s));
  CKE(end_elsewhere(s), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  ASSERT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph g;
  CK(p_cuStreamEndCapture(s, &g));
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(end_elsewhere(s)); /* RELAXED: any thread ends it */
  ASSERT(end_g != NULL);
  CK(p_cuGraphDestroy(end_g));
  /* a graph launched into a capturing stream */
  CUgraphExec x;
  CK(p_cuGraphInstantiateWithFlags(&x, g, 0));
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CKE(p_cuGraphLaunch(x, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph g2 = (CUgraph)&g2;
  CKE(p_cuStreamEndCapture(s, &g2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT(g2 == NULL);
  CK(p_cuGraphExecDestroy(x));
  CK(p_cuGraphDestroy(g));
  CK(p_cuMemFree_v2(d));
  CK(p_cuStreamDestroy_v2(s));
  printf("ok end from the wrong thread 908, graph launch into a capture 900\n");
}

/* ---- user objects ---- */

static atomic_int dtor_runs;
static atomic_long dtor_kernels;
static pthread_t main_thread;
static atomic_int dtor_on_main, dtor_cu = -1;

static void dtor(void *p) {
  atomic_fetch_add(&dtor_runs, 1);
  atomic_store(&dtor_kernels, mock_kernels_run());
  atomic_store(&dtor_on_main, pthread_equal(pthread_self(), main_thread));
  CUcontext c;
  atomic_store(&dtor_cu, (int)p_cuCtxGetCurrent(&c));
  *(int *)p += 1;
}

static void wait_objects(long n) {
  for (int i = 0; i < 10000 && mock_user_objects() != n; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  ASSERT_EQ(mock_user_objects(), n);
}

static void test_user_objects(void) {
  main_thread = pthread_self();
  CUstream s = stream();
  CUdeviceptr d = dalloc(16 * 4);
  int hits = 0;
  CUuserObject obj;
  CKE(p_cuUserObjectCreate(&obj, &hits, dtor, 1, 0), CUDA_ERROR_INVALID_VALUE);
  CK(p_cuUserObjectCreate(&obj, &hits, dtor, 1,
                          CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  ASSERT_EQ(mock_user_objects(), 1);
  fill_args a = {d, 5, 16};
  void *params[] = {&a};
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(p_cuLaunchKernel(mock_fill_function(), 1, 1, 1, 1, 1, 1, 0, s, params,
                      NULL));
  CUstreamCaptureStatus st;
  CUgraph cg = NULL;
  CK(p_info_v2(s, &st, NULL, &cg, NULL, NULL));
  CK(p_cuGraphRetainUserObject(cg, obj, 1, CU_GRAPH_USER_OBJECT_MOVE));
  CUgraph g;
  CK(p_cuStreamEndCapture(s, &g));
  ASSERT(g == cg);
  CUgraphExec x;
  CK(p_cuGraphInstantiateWithFlags(&x, g, 0));
  long k0 = mock_kernels_run();
  mock_hold(1); /* replays queued, none completed */
  for (int i = 0; i < 3; i++)
    CK(p_cuGraphLaunch(x, s));
  CK(p_cuGraphDestroy(g));
  CK(p_cuGraphExecDestroy(x));
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
  ASSERT_EQ(atomic_load(&dtor_runs), 0);
  ASSERT_EQ(mock_user_objects(), 1);
  mock_hold(0);
  wait_objects(0);
  CK(p_cuStreamSynchronize(s));
  ASSERT_EQ(atomic_load(&dtor_runs), 1);
  ASSERT_EQ(hits, 1);
  ASSERT_EQ(atomic_load(&dtor_kernels), k0 + 3); /* after the last replay */
  ASSERT_EQ(atomic_load(&dtor_on_main), 0);
  ASSERT_EQ(atomic_load(&dtor_cu), CUDA_ERROR_NOT_PERMITTED);
  /* references without MOVE: the caller keeps its own */
  CK(p_cuUserObjectCreate(&obj, &hits, dtor, 2,
                          CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(p_cuMemsetD32Async(d, 1, 1, s));
  CK(p_cuStreamEndCapture(s, &g));
  CK(p_cuGraphRetainUserObject(g, obj, 2, 0));
  CK(p_cuGraphReleaseUserObject(g, obj, 1));
  CK(p_cuUserObjectRetain(obj, 1));
  CK(p_cuUserObjectRelease(obj, 3)); /* the graph's 1 left */
  ASSERT_EQ(mock_user_objects(), 1);
  CK(p_cuGraphDestroy(g));
  wait_objects(0);
  ASSERT_EQ(atomic_load(&dtor_runs), 2);
  ASSERT_EQ(hits, 2);
  CK(p_cuMemFree_v2(d));
  CK(p_cuStreamDestroy_v2(s));
  printf("ok user objects: destructor once, after the last replay, off the "
         "caller's thread, driver calls not permitted\n");
}

/* two graphs captured on one stream, replayed alternately */
static void test_two_graphs(void) {
  CUstream s = stream();
  CUdeviceptr d = dalloc(4);
  CUgraph g[2];
  CUgraphExec x[2];
  for (int i = 0; i < 2; i++) {
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuMemsetD32Async(d, 100u + (unsigned)i, 1, s));
    CK(p_cuStreamEndCapture(s, &g[i]));
    CK(p_cuGraphInstantiateWithFlags(&x[i], g[i], 0));
  }
  ASSERT(g[0] != g[1]);
  for (int r = 0; r < 6; r++) {
    CK(p_cuGraphLaunch(x[r & 1], s));
    uint32_t w;
    readback(s, d, &w, 1);
    ASSERT_EQ(w, 100 + (r & 1));
  }
  for (int i = 0; i < 2; i++) {
    CK(p_cuGraphExecDestroy(x[i]));
    CK(p_cuGraphDestroy(g[i]));
  }
  CK(p_cuMemFree_v2(d));
  CK(p_cuStreamDestroy_v2(s));
  printf("ok two graphs on one stream\n");
}

static void *other_calls(void *arg) {
  (void)arg;
  CUcontext c;
  CK(p_cuCtxGetCurrent(&c));
  return NULL;
}

static void test_calls(void) {
  CUstream s = stream();
  CUevent e = event();
  CUdeviceptr d = dalloc(4);
  const char *names[8] = {0};
  ASSERT_EQ(mock_calls_end(names, 8), 0); /* none running */
  mock_calls_begin();
  CK(p_cuMemsetD32Async(d, 1, 1, s));
  pthread_t th; /* another thread's calls are not this one's */
  ASSERT_EQ(pthread_create(&th, NULL, other_calls, NULL), 0);
  ASSERT_EQ(pthread_join(th, NULL), 0);
  CK(p_cuEventRecord(e, s));
  (void)p_cuStreamQuery(s);
  CK(p_cuEventSynchronize(e));
  size_t n = mock_calls_end(names, 3);
  ASSERT_EQ(n, 4);
  ASSERT_STREQ(names[0], "cuMemsetD32Async");
  ASSERT_STREQ(names[1], "cuEventRecord");
  ASSERT_STREQ(names[2], "cuStreamQuery");
  ASSERT(names[3] == NULL); /* max 3 */
  CK(p_cuEventQuery(e));
  ASSERT_EQ(mock_calls_end(names, 8), 0); /* stopped */
  CK(p_cuEventDestroy_v2(e));
  CK(p_cuMemFree_v2(d));
  CK(p_cuStreamDestroy_v2(s));
  printf("ok hbgmock_calls_begin/end\n");
}

/* The child: a replay whose pinned source was freed after the capture
 * must not return. */
static int dangling(void) {
  load();
  CUstream s = stream();
  CUdeviceptr d = dalloc(64);
  void *src = palloc(64);
  CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(p_cuMemcpyHtoDAsync_v2(d, src, 64, s));
  CUgraph g;
  CK(p_cuStreamEndCapture(s, &g));
  CUgraphExec x;
  CK(p_cuGraphInstantiateWithFlags(&x, g, 0));
  CK(p_cuMemFreeHost(src));
  (void)p_cuGraphLaunch(x, s);
  (void)p_cuStreamSynchronize(s);
  printf("the replay of a freed pinned source returned\n");
  return 0;
}

static void test_dangling(void) {
  pid_t pid;
  char *argv[] = {"test_cuda_capture_standin", "dangling", NULL};
  ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ),
            0);
  int ws = 0;
  ASSERT_EQ(waitpid(pid, &ws, 0), pid);
  ASSERT(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT);
  printf("ok a replay from freed pinned memory aborts\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "dangling") == 0)
    return dangling();
  load();
  long live = mock_live();
  test_dangling();
  test_copies();
  test_kernel_params();
  test_unsafe();
  test_sync_capturing();
  test_events();
  test_fork_join();
  test_wrong_thread_and_graph_launch();
  test_user_objects();
  test_two_graphs();
  test_calls();
  ASSERT_EQ(mock_live(), live);
  CK(p_cuDevicePrimaryCtxRelease_v2(0));
  printf("ok\n");
  return 0;
}
#else
int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  printf("SKIP: cuda backend not built\n");
  return T_EXIT_SKIP;
}
#endif
