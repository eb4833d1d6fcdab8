/* Binds launched on a queue the caller owns (hbg_bind_launch_on): on the
 * sim a queue the caller made with hbg_dev_queue_create, on the cuda
 * stand-in (test_launch_borrow_mock, HBG_CUDA_LIB) a CUstream the test
 * creates through the driver itself.
 *
 * - The caller's earlier work on the stream comes first: a bind of a
 *   second runtime on the same device, held on the device (sim: the gate
 *   task; stand-in: hbgmock_gate), is queued on the stream before; a bind
 *   launched on it after must not complete while the first is held.
 * - The caller's later work sees the results: an event the caller records
 *   on the stream after the launch, once complete, finds the bind's
 *   output in device memory (read with a plain device copy, no hbg wait).
 * - Launch order holds across queues: 40 ping-pong binds alternating the
 *   runtime's queue and the caller's, each reading the one before's
 *   output, every policy.
 * - Errors: NULL stream, a queue that is not the device's, more streams
 *   than HBG_DEV_BORROWED_MAX, forgetting a stream never used.
 * - hbg_runtime_stream_forget waits for the binds on the stream and lets
 *   the caller destroy it; the caller's stream is never destroyed by hbg
 *   (the stand-in: still usable after hbg_runtime_destroy). */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "cuda_skip.h"
#include "gate_fixture.h"
#include "pingpong_fixture.h"
#include "test.h"

/* The caller's side of a queue: the sim's device API, or the stand-in
 * driver's entry points (CUstream, CUdeviceptr as integers). */
typedef struct caller {
  hbg_device *dev;
  int cuda;
  int (*stream_create)(void **s, unsigned flags);
  int (*stream_sync)(void *s);
  int (*stream_destroy)(void *s);
  int (*copy_async)(uint64_t dst, const void *src, size_t n, void *s);
} caller;

static caller C;

static void caller_load(hbg_device *dev, const char *lib) {
  memset(&C, 0, sizeof C);
  C.dev = dev;
  if (!lib)
    return;
  C.cuda = 1;
  void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    T_FAIL("HBG_CUDA_LIB=%s: %s", lib, dlerror());
  STANDIN_LOAD(h, C.stream_create, "cuStreamCreate");
  STANDIN_LOAD(h, C.stream_sync, "cuStreamSynchronize");
  STANDIN_LOAD(h, C.stream_destroy, "cuStreamDestroy_v2");
  STANDIN_LOAD(h, C.copy_async, "cuMemcpyHtoDAsync_v2");
}

static void *cq_create(void) {
  void *s = NULL;
  if (C.cuda)
    ASSERT_EQ(C.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */), 0);
  else
    ASSERT_OK(hbg_dev_queue_create(C.dev, (hbg_dev_queue **)&s));
  return s;
}
static void cq_sync(void *s) {
  if (C.cuda)
    ASSERT_EQ(C.stream_sync(s), 0);
  else
    ASSERT_OK(hbg_dev_queue_sync(C.dev, s));
}
static void cq_destroy(void *s) {
  if (C.cuda)
    ASSERT_EQ(C.stream_destroy(s), 0);
  else
    ASSERT_OK(hbg_dev_queue_destroy(C.dev, s));
}
static void cq_copy(void *s, uint64_t dst, const void *src, size_t n) {
  if (C.cuda)
    ASSERT_EQ(C.copy_async(dst, src, n, s), 0);
  else
    ASSERT_OK(hbg_dev_copy_h2d_async(C.dev, s, dst, src, n));
}

static int done_now(hbg_bind *b) {
  return hbg_dev_event_query(b->rt->dev, b->slot->done) == 0;
}

/* A second runtime's held bind is the caller's earlier work on the
 * stream; the bind launched on it after waits for it, and the caller's
 * later work (a copy of fresh inputs, queued after the launch) lands only
 * after the bind has read them. */
static void fifo(hbg_device *dev, int policy, const char *name) {
  hbg_runtime *rt = pp_runtime(dev, policy), *other = pp_runtime(dev, policy);
  void *s = cq_create();
  pp w, o;
  pp_create(&w, rt, !C.cuda);
  pp_create(&o, other, !C.cuda);
  /* warm both on the stream (the first launch prepares it) */
  hbg_bind *b = pp_submit(&o, 0, 0);
  ASSERT_OK(hbg_bind_launch_on(b, s));
  pp_wait(b);
  b = pp_submit(&w, 0, 0);
  ASSERT_OK(hbg_bind_launch_on(b, s));
  pp_wait(b);
  gate_close();
  hbg_bind *held = pp_submit(&o, 1, 1);
  ASSERT_OK(hbg_bind_launch_on(held, s));
  b = pp_submit(&w, 1, 0);
  ASSERT_OK(hbg_bind_launch_on(b, s));
  /* the caller's later work: overwrite the bind's input once it ran (from
   * pinned memory: a copy from pageable memory is staged at once) */
  float *later = NULL;
  ASSERT_OK(hbg_dev_host_alloc(dev, N * 4, (void **)&later));
  for (uint32_t i = 0; i < N; i++)
    later[i] = 1000.0f;
  cq_copy(s, w.p[1], later, N * 4);
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < HELD_MS)
    if (done_now(b))
      T_FAIL("%s: a bind launched on the caller's stream completed while "
             "the caller's earlier work there (another runtime's bind) "
             "was held",
             name);
  gate_open();
  cq_sync(s); /* the caller's view: everything queued on s is done */
  ASSERT(done_now(b));
  /* P0 + 24 read by the bind before the caller's later copy, then the copy */
  float got[N];
  ASSERT_OK(hbg_dev_copy_d2h(dev, got, w.p[0], sizeof got));
  float after[N];
  ASSERT_OK(hbg_dev_copy_d2h(dev, after, w.p[1], sizeof after));
  ASSERT_OK(hbg_dev_host_free(dev, later));
  for (uint32_t i = 0; i < N; i++) {
    ASSERT(after[i] == 1000.0f);
    if (got[i] != w.host[0][i] + 48.0f)
      T_FAIL("%s: element %u is %g, want %g", name, i, (double)got[i],
             (double)(w.host[0][i] + 48.0f));
  }
  pp_wait(held);
  pp_wait(b);
  ASSERT_OK(hbg_runtime_stream_forget(rt, s));
  ASSERT_ERR(hbg_runtime_stream_forget(rt, s), HBG_E_NOTFOUND);
  pp_destroy(&w);
  pp_destroy(&o);
  hbg_runtime_destroy(other);
  hbg_runtime_destroy(rt);
  /* hbg never destroyed the caller's stream */
  cq_sync(s);
  cq_destroy(s);
}

/* Ping-pong across the runtime's queue and the caller's: each bind reads
 * the one launched before it. */
static void alternate(hbg_device *dev, int policy, const char *name) {
  hbg_runtime *rt = pp_runtime(dev, policy);
  void *s = cq_create();
  pp w;
  pp_create(&w, rt, !C.cuda);
  hbg_bind *prev = NULL;
  for (uint32_t k = 0; k < 40; k++) {
    hbg_bind *b = pp_submit(&w, k, 0);
    if (k % 3 == 1)
      ASSERT_OK(hbg_bind_launch(b));
    else
      ASSERT_OK(hbg_bind_launch_on(b, s));
    if (prev)
      pp_wait(prev);
    prev = b;
  }
  pp_wait(prev);
  pp_check(&w, 40);
  pp_destroy(&w);
  hbg_runtime_destroy(rt); /* forgets the stream, never destroys it */
  cq_sync(s);
  cq_destroy(s);
  printf("%s: 40 binds alternating the runtime's queue and the caller's "
         "stay in launch order\n",
         name);
}

static void errors(hbg_device *dev) {
  hbg_runtime *rt = pp_runtime(dev, HBG_POLICY_COALESCED);
  pp w;
  pp_create(&w, rt, !C.cuda);
  hbg_bind *b = pp_submit(&w, 0, 0);
  ASSERT_ERR(hbg_bind_launch_on(b, NULL), HBG_E_INVAL);
  ASSERT(strstr(hbg_last_error(), "NULL"));
  if (!C.cuda) {
    /* a queue of another sim device is not this device's */
    hbg_device *d2 = NULL;
    hbg_dev_queue *q2 = NULL;
    ASSERT_OK(hbg_device_open("sim", NULL, &d2));
    ASSERT_OK(hbg_dev_queue_create(d2, &q2));
    ASSERT_ERR(hbg_bind_launch_on(b, q2), HBG_E_INVAL);
    ASSERT(strstr(hbg_last_error(), "not a live queue of this sim device"));
    ASSERT_OK(hbg_dev_queue_destroy(d2, q2));
    hbg_device_close(d2);
  }
  /* the bind is still open and launches fine after a refusal */
  void *s[HBG_DEV_BORROWED_MAX + 1];
  for (uint32_t i = 0; i <= HBG_DEV_BORROWED_MAX; i++)
    s[i] = cq_create();
  ASSERT_OK(hbg_bind_launch_on(b, s[0]));
  pp_wait(b);
  for (uint32_t k = 1; k < HBG_DEV_BORROWED_MAX; k++) {
    b = pp_submit(&w, k, 0);
    ASSERT_OK(hbg_bind_launch_on(b, s[k]));
    pp_wait(b);
  }
  b = pp_submit(&w, HBG_DEV_BORROWED_MAX, 0);
  ASSERT_ERR(hbg_bind_launch_on(b, s[HBG_DEV_BORROWED_MAX]), HBG_E_LIMIT);
  ASSERT(strstr(hbg_last_error(), "hbg_runtime_stream_forget"));
  ASSERT_OK(hbg_runtime_stream_forget(rt, s[3]));
  ASSERT_OK(hbg_bind_launch_on(b, s[HBG_DEV_BORROWED_MAX]));
  pp_wait(b);
  pp_check(&w, HBG_DEV_BORROWED_MAX + 1);
  ASSERT_ERR(hbg_runtime_stream_forget(rt, (void *)&w), HBG_E_NOTFOUND);
  ASSERT_ERR(hbg_runtime_stream_forget(NULL, s[0]), HBG_E_INVAL);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
  for (uint32_t i = 0; i <= HBG_DEV_BORROWED_MAX; i++)
    cq_destroy(s[i]);
  printf("errors: NULL and foreign queues, the stream limit, forget\n");
}

/* ctx=current: the device opens on the context current on the calling
 * thread and never releases it (the caller's context stays usable after
 * hbg closes); with none current the open fails, named. Run before
 * anything else retains the primary context, so that a release hbg made
 * would leave it with no reference. */
static void *borrowed_context(void *arg) {
  const char *lib = arg;
  void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  ASSERT(h != NULL);
  int (*init)(unsigned), (*retain)(void **, int), (*release)(int);
  int (*set_current)(void *), (*alloc)(uint64_t *, size_t);
  int (*mfree)(uint64_t);
  STANDIN_LOAD(h, init, "cuInit");
  STANDIN_LOAD(h, retain, "cuDevicePrimaryCtxRetain");
  STANDIN_LOAD(h, release, "cuDevicePrimaryCtxRelease_v2");
  STANDIN_LOAD(h, set_current, "cuCtxSetCurrent");
  STANDIN_LOAD(h, alloc, "cuMemAlloc_v2");
  STANDIN_LOAD(h, mfree, "cuMemFree_v2");
  hbg_device *d = NULL;
  ASSERT_EQ(init(0), 0);
  ASSERT_ERR(hbg_device_open("cuda", "ctx=current", &d), HBG_E_STATE);
  ASSERT(strstr(hbg_last_error(), "no CUDA context is current"));
  ASSERT_ERR(hbg_device_open("cuda", "ctx=mine", &d), HBG_E_INVAL);
  ASSERT(strstr(hbg_last_error(), "ctx=current"));
  void *ctx = NULL;
  ASSERT_EQ(retain(&ctx, 0), 0);
  ASSERT_EQ(set_current(ctx), 0);
  ASSERT_OK(hbg_device_open("cuda", "ctx=current", &d));
  hbg_runtime *rt = pp_runtime(d, HBG_POLICY_COALESCED);
  pp w;
  pp_create(&w, rt, 0);
  pp_wait(pp_launch(&w, 0, 0));
  pp_check(&w, 1);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
  hbg_device_close(d);
  uint64_t p = 0;
  if (alloc(&p, 64) != 0)
    T_FAIL("ctx=current: the caller's context is unusable after the device "
           "closed (hbg released what it borrowed)");
  ASSERT_EQ(mfree(p), 0);
  ASSERT_EQ(release(0), 0);
  printf("ctx=current: opened on the caller's context, left it usable\n");
  return NULL;
}

int main(void) {
  const char *lib = NULL;
  hbg_device *dev = NULL;
  if (getenv("HBG_CUDA_LIB") && *getenv("HBG_CUDA_LIB")) {
    if (!cuda_standin())
      cuda_skip("HBG_CUDA_LIB names a real driver: this test drives the "
                "stand-in's gate");
    lib = getenv("HBG_CUDA_LIB");
    pthread_t th; /* a thread with no context current */
    ASSERT_EQ(pthread_create(&th, NULL, borrowed_context, (void *)lib), 0);
    ASSERT_EQ(pthread_join(th, NULL), 0);
    if (hbg_device_open("cuda", NULL, &dev) < 0)
      cuda_skip(hbg_last_error());
    gate_mock_load(lib);
  } else {
    ASSERT_OK(hbg_device_open("sim", "workers=2", &dev));
    ASSERT_OK(gate_register(dev));
  }
  caller_load(dev, lib);
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    fifo(dev, p, hbg_policy_name(p));
    alternate(dev, p, hbg_policy_name(p));
  }
  printf("%s: the caller's earlier work ran first and its later work saw "
         "the results, every policy\n",
         lib ? "cuda stand-in" : "sim");
  errors(dev);
  hbg_device_close(dev);
  return 0;
}
