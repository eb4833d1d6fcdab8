/* hbg inside an engine, end to end through the CUDA driver, as an engine
 * would call it: on a GPU (scripts/gpu-check.sh runs it; skips, exit 77,
 * without one) and on the cuda stand-in (test_gpu_interop_mock).
 *
 * - The engine's context: the device's primary context, retained and made
 *   current by the check; hbg opens on it (ctx=current) and leaves it.
 * - The engine's memory: two buffers from the engine's own cuMemAlloc_v2,
 *   imported (hbg_buffer_import), never freed by hbg.
 * - The engine's stream: a stream the check creates; its own
 *   cuMemsetD32Async writes the input, hbg_bind_launch_on runs
 *   out = 2 in on the same stream, and the check's cuMemcpyDtoHAsync reads
 *   the output, all without a host wait in between: the readback holds
 *   the bind's result for every one of 20 values, so the three ran in
 *   stream order.
 * - Capture: the same bind captured with the driver API, instantiated,
 *   and replayed 100 times with the input rewritten by the engine's memset
 *   before each replay: every replay's readback equals what an eager bind
 *   gives. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h"
#include "test.h"

#define N 4096u

typedef void *cu_t;
static struct {
  int (*stream_create)(cu_t *s, unsigned flags);
  int (*stream_sync)(cu_t s);
  int (*stream_destroy)(cu_t s);
  int (*alloc)(uint64_t *p, size_t n);
  int (*mfree)(uint64_t p);
  int (*memset32)(uint64_t p, unsigned v, size_t n, cu_t s);
  int (*d2h)(void *dst, uint64_t src, size_t n, cu_t s);
  int (*begin)(cu_t s, int mode);
  int (*end)(cu_t s, cu_t *g);
  int (*instantiate)(cu_t *x, cu_t g, unsigned long long flags);
  int (*launch)(cu_t x, cu_t s);
  int (*exec_destroy)(cu_t x);
  int (*graph_destroy)(cu_t g);
  int (*init)(unsigned flags);
  int (*retain)(cu_t *ctx, int dev);
  int (*release)(int dev);
  int (*set_current)(cu_t ctx);
} D;

static void load(void) {
  const char *lib = getenv("HBG_CUDA_LIB");
  if (!lib || !*lib)
    lib = "libcuda.so.1";
  void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    cuda_skip("no CUDA driver library");
  STANDIN_LOAD(h, D.stream_create, "cuStreamCreate");
  STANDIN_LOAD(h, D.stream_sync, "cuStreamSynchronize");
  STANDIN_LOAD(h, D.stream_destroy, "cuStreamDestroy_v2");
  STANDIN_LOAD(h, D.alloc, "cuMemAlloc_v2");
  STANDIN_LOAD(h, D.mfree, "cuMemFree_v2");
  STANDIN_LOAD(h, D.memset32, "cuMemsetD32Async");
  STANDIN_LOAD(h, D.d2h, "cuMemcpyDtoHAsync_v2");
  STANDIN_LOAD(h, D.begin, "cuStreamBeginCapture_v2");
  STANDIN_LOAD(h, D.end, "cuStreamEndCapture");
  STANDIN_LOAD(h, D.instantiate, "cuGraphInstantiateWithFlags");
  STANDIN_LOAD(h, D.launch, "cuGraphLaunch");
  STANDIN_LOAD(h, D.exec_destroy, "cuGraphExecDestroy");
  STANDIN_LOAD(h, D.graph_destroy, "cuGraphDestroy");
  STANDIN_LOAD(h, D.init, "cuInit");
  STANDIN_LOAD(h, D.retain, "cuDevicePrimaryCtxRetain");
  STANDIN_LOAD(h, D.release, "cuDevicePrimaryCtxRelease_v2");
  STANDIN_LOAD(h, D.set_current, "cuCtxSetCurrent");
}

static unsigned bits(float f) {
  unsigned u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static int rec_double(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &n);
  hbg_tensor a[2] = {bt[0], bt[1]};
  hbg_scalar sc = hbg_scalar_static(hbg_scalar_f32(2.0f));
  hbg_task t = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a,
                .n_scalars = 1, .scalars = &sc};
  return hbg_record_task(rec, &t, NULL);
}

/* out = 2 in, as a one-node graph, launched on the engine's stream. */
static hbg_bind *launch_double(hbg_runtime *rt, uint64_t in, uint64_t out,
                               cu_t s) {
  uint32_t n = N;
  hbg_tensor bt[2];
  ASSERT_OK(hbg_tensor_contig(&bt[0], in, 0, HBG_DTYPE_F32, 1, &n,
                              HBG_ACCESS_IN));
  ASSERT_OK(hbg_tensor_contig(&bt[1], out, 0, HBG_DTYPE_F32, 1, &n,
                              HBG_ACCESS_OUT));
  hbg_graph_submit g = {.key = 0x494e54ull, .n_tensors = 2, .tensors = bt,
                        .record = rec_double};
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_submit_graph(b, &g, NULL));
  ASSERT_OK(hbg_bind_launch_on(b, s));
  return b;
}

static void check(const float *got, float v, const char *what, uint32_t r) {
  for (uint32_t i = 0; i < N; i++)
    if (got[i] != 2.0f * v)
      T_FAIL("%s %u: element %u is %g, want %g", what, r, i, (double)got[i],
             (double)(2.0f * v));
}

int main(void) {
  /* The engine's side first, as PyTorch has it: the device's primary
   * context, retained and current; hbg opens on it. */
  hbg_device *probe = NULL;
  if (hbg_device_open("cuda", NULL, &probe) < 0)
    cuda_skip(hbg_last_error());
  hbg_device_close(probe);
  load();
  cu_t ctx = NULL;
  ASSERT_EQ(D.init(0), 0);
  ASSERT_EQ(D.retain(&ctx, 0), 0);
  ASSERT_EQ(D.set_current(ctx), 0);
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = "ctx=current";
  cfg.policy = HBG_POLICY_COALESCED;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  cu_t s = NULL;
  ASSERT_EQ(D.stream_create(&s, 1), 0);
  uint64_t ein = 0, eout = 0, in = 0, out = 0;
  ASSERT_EQ(D.alloc(&ein, N * 4), 0);
  ASSERT_EQ(D.alloc(&eout, N * 4), 0);
  ASSERT_OK(hbg_buffer_import(rt, ein, N * 4, &in));
  ASSERT_OK(hbg_buffer_import(rt, eout, N * 4, &out));
  float *got = malloc(N * 4);
  ASSERT(got != NULL);

  /* eager: the engine's memset, hbg's bind, the engine's readback */
  for (uint32_t r = 0; r < 20; r++) {
    float v = 0.25f * (float)r - 1.0f;
    ASSERT_EQ(D.memset32(ein, bits(v), N, s), 0);
    hbg_bind *b = launch_double(rt, in, out, s);
    ASSERT_EQ(D.d2h(got, eout, N * 4, s), 0);
    ASSERT_EQ(D.stream_sync(s), 0);
    check(got, v, "eager bind", r);
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_end(b);
  }
  printf("eager: 20 binds between the engine's memset and readback on its "
         "stream, in order\n");

  /* captured once, replayed 100 times with the input rewritten */
  ASSERT_EQ(D.begin(s, 0 /* GLOBAL */), 0);
  hbg_bind *b = launch_double(rt, in, out, s);
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  cu_t g = NULL, x = NULL;
  ASSERT_EQ(D.end(s, &g), 0);
  ASSERT(g != NULL);
  ASSERT_EQ(D.instantiate(&x, g, 0), 0);
  for (uint32_t r = 0; r < 100; r++) {
    float v = 3.0f + 0.5f * (float)r;
    ASSERT_EQ(D.memset32(ein, bits(v), N, s), 0);
    ASSERT_EQ(D.launch(x, s), 0);
    ASSERT_EQ(D.d2h(got, eout, N * 4, s), 0);
    ASSERT_EQ(D.stream_sync(s), 0);
    check(got, v, "replay", r);
  }
  printf("capture: 100 replays with the input rewritten between them, each "
         "equal to an eager bind\n");
  ASSERT_EQ(D.exec_destroy(x), 0);
  ASSERT_EQ(D.graph_destroy(g), 0);
  ASSERT_EQ(D.stream_sync(s), 0);

  ASSERT_OK(hbg_runtime_stream_forget(rt, s));
  ASSERT_OK(hbg_buffer_free(rt, in));
  ASSERT_OK(hbg_buffer_free(rt, out));
  hbg_runtime_destroy(rt);
  /* the engine's memory and stream are still its own */
  ASSERT_EQ(D.mfree(ein), 0);
  ASSERT_EQ(D.mfree(eout), 0);
  ASSERT_EQ(D.stream_destroy(s), 0);
  ASSERT_EQ(D.release(0), 0);
  free(got);
  return 0;
}
