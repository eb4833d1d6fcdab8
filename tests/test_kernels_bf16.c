/* bf16 weights through the public API on the sim: GEMV, RMSNORM and COPY
 * tasks with a bf16 weight written by hbg_buffer_write, and a graph whose
 * boundary holds bf16 weights, recorded once and replayed on other
 * weights and at a 2-byte (not 4-byte) aligned offset. Every result equals,
 * bit for bit, the f32 kernel run here on the weight widened to f32. The
 * wrong dtypes are refused at submit and at record, the message naming the
 * kernel and the argument. */
#include <hbg/hbg.h>

#include "common/util.h"
#include "kernels/kernels.h"
#include "test.h"

enum { N = 48, K = 67, D = 130, V = 5 };

static hbg_runtime *rt;

static uint32_t rng = 777;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)(rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static void fill_bf16(uint16_t *b, float *wide, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) {
    b[i] = hbg__bf16_from_f32(frand() * scale);
    wide[i] = hbg__bf16_to_f32(b[i]);
  }
}

static hbg_tensor ten(uint64_t addr, uint64_t off, uint32_t dtype,
                      uint32_t mode, uint32_t d0, uint32_t d1) {
  hbg_tensor t;
  uint32_t dims[2] = {d0, d1};
  ASSERT_OK(hbg_tensor_contig(&t, addr, off, dtype, d1 ? 2 : 1, dims, mode));
  return t;
}

static uint64_t upload(const void *p, uint64_t bytes) {
  uint64_t a = 0;
  ASSERT_OK(hbg_buffer_alloc(rt, bytes, &a));
  ASSERT_OK(hbg_buffer_write(rt, a, p, bytes));
  return a;
}

static hbg__ktensor kt(void *data, uint32_t dtype, uint32_t mode, uint32_t d0,
                       uint32_t d1) {
  hbg_tensor t = ten(0, 0, dtype, mode, d0, d1);
  hbg__ktensor k;
  hbg__ktensor_from(&k, &t, data);
  return k;
}

/* The device's n floats at a equal want, bit for bit. */
static void expect(uint64_t a, const float *want, uint32_t n,
                   const char *what) {
  float got[N > D ? N : D];
  ASSERT(n <= HBG__ARRAY_LEN(got));
  ASSERT_OK(hbg_buffer_read(rt, got, a, (uint64_t)n * 4));
  for (uint32_t i = 0; i < n; i++)
    if (memcmp(&got[i], &want[i], 4) != 0)
      T_FAIL("%s: float %u is %.9g, the f32 kernel on the widened weight "
             "%.9g",
             what, i, (double)got[i], (double)want[i]);
}

static void run_bind(hbg_bind *b) {
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
}

static uint16_t wb[N * K], wb2[N * K], nb[N], tab[V * D], dnb[D + 1];
static float wf[N * K], wf2[N * K], nf[N], tabf[V * D], dnf[D + 1], x[K],
    x2[K], rows[2 * D];

/* Host references: the f32 kernels on the widened weights. */
static void ref_gemv(const float *w, const float *xv, float alpha, int scaled,
                     float *y) {
  hbg__ktensor t[3] = {kt((void *)w, HBG_DTYPE_F32, HBG_ACCESS_IN, N, K),
                       kt((void *)xv, HBG_DTYPE_F32, HBG_ACCESS_IN, K, 0),
                       kt(y, HBG_DTYPE_F32, HBG_ACCESS_OUT, N, 0)};
  uint64_t a = hbg__kernel_f32(alpha);
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_GEMV, t, 3, &a, scaled ? 1 : 0));
}

static void ref_rmsnorm(const float *in, uint32_t r, uint32_t d,
                        const float *w, float eps, float *out) {
  hbg__ktensor t[3] = {kt((void *)in, HBG_DTYPE_F32, HBG_ACCESS_IN, r, d),
                       kt((void *)w, HBG_DTYPE_F32, HBG_ACCESS_IN, d, 0),
                       kt(out, HBG_DTYPE_F32, HBG_ACCESS_OUT, r, d)};
  uint64_t e = hbg__kernel_f32(eps);
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_RMSNORM, t, 3, &e, 1));
}

/* ---- ordinary tasks ---- */

static void t_tasks(void) {
  uint64_t W = upload(wb, sizeof wb), X = upload(x, sizeof x);
  uint64_t TAB = upload(tab, sizeof tab), NW = upload(dnb, sizeof dnb);
  uint64_t Y, R, E;
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &Y));
  ASSERT_OK(hbg_buffer_alloc(rt, 2 * D * 4, &R));
  ASSERT_OK(hbg_buffer_alloc(rt, 2 * D * 4, &E));
  ASSERT_OK(hbg_buffer_write(rt, R, rows, sizeof rows));
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  /* y = W x * alpha, W bf16 [N][K] */
  hbg_tensor g[3] = {ten(W, 0, HBG_DTYPE_BF16, HBG_ACCESS_IN, N, K),
                     ten(X, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, K, 0),
                     ten(Y, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, N, 0)};
  hbg_scalar alpha = hbg_scalar_static(hbg_scalar_f32(0.375f));
  hbg_task t = {.kernel = HBG_KERNEL_GEMV, .n_args = 3, .args = g,
                .n_scalars = 1, .scalars = &alpha};
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  /* the embedding rows 1 and 3 of a bf16 [V][D] table into E (row 1 starts
   * at byte 260: 2-byte aligned, not 4) */
  hbg_tensor c0[2] = {ten(TAB, 1 * D * 2, HBG_DTYPE_BF16, HBG_ACCESS_IN, D, 0),
                      ten(E, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, D, 0)};
  hbg_tensor c1[2] = {ten(TAB, 3 * D * 2, HBG_DTYPE_BF16, HBG_ACCESS_IN, D, 0),
                      ten(E, D * 4, HBG_DTYPE_F32, HBG_ACCESS_OUT, D, 0)};
  t = (hbg_task){.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = c0};
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  t.args = c1;
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  /* rmsnorm of R [2][D] in place into R, w bf16 [D] at byte offset 2 */
  hbg_tensor r[3] = {ten(R, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 2, D),
                     ten(NW, 2, HBG_DTYPE_BF16, HBG_ACCESS_IN, D, 0),
                     ten(R, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 2, D)};
  ASSERT_ERR(hbg_submit_task(b, &(hbg_task){.kernel = HBG_KERNEL_RMSNORM,
                                           .n_args = 3, .args = r,
                                           .n_scalars = 1,
                                           .scalars = &alpha},
                             NULL),
             HBG_E_KERNEL); /* rmsnorm may not run in place */
  uint64_t R2;
  ASSERT_OK(hbg_buffer_alloc(rt, 2 * D * 4, &R2));
  r[2].addr = R2;
  hbg_scalar eps = hbg_scalar_static(hbg_scalar_f32(1e-6f));
  t = (hbg_task){.kernel = HBG_KERNEL_RMSNORM, .n_args = 3, .args = r,
                 .n_scalars = 1, .scalars = &eps};
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  run_bind(b);

  float want[2 * D];
  ref_gemv(wf, x, 0.375f, 1, want);
  expect(Y, want, N, "gemv, bf16 W");
  expect(E, &tabf[1 * D], D, "copy, bf16 row 1");
  expect(E + D * 4, &tabf[3 * D], D, "copy, bf16 row 3");
  ref_rmsnorm(rows, 2, D, dnf + 1, 1e-6f, want);
  expect(R2, want, D, "rmsnorm row 0, bf16 w");
  expect(R2 + D * 4, want + D, D, "rmsnorm row 1, bf16 w");

  /* refused at submit, with the kernel and the argument named; the bind
   * stays usable */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_tensor bad[3] = {g[0], g[1], g[2]};
  t = (hbg_task){.kernel = HBG_KERNEL_GEMV, .n_args = 3, .args = bad};
  bad[1] = ten(W, 0, HBG_DTYPE_BF16, HBG_ACCESS_IN, K, 0);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(),
               "hbg_submit_task: gemv: argument 1 (x) is bf16, must be f32");
  bad[1] = g[1];
  bad[0].dtype = HBG_DTYPE_F16;
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(), "hbg_submit_task: gemv: argument 0 (W) is "
                                 "f16, must be f32 or bf16");
  hbg_tensor cb[2] = {c0[0], ten(W, 0, HBG_DTYPE_BF16, HBG_ACCESS_OUT, D, 0)};
  t = (hbg_task){.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = cb};
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(),
               "hbg_submit_task: copy: argument 1 (out) is bf16, must be f32");
  /* a bf16 element 0 at an odd byte is misaligned; at 2 it is not */
  cb[1] = c0[1];
  cb[0].offset = 3;
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_INVAL);
  cb[0].offset = 2;
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  ASSERT_EQ(hbg_bind_fatal(b), 0);
  run_bind(b);
  float w2[D];
  for (uint32_t j = 0; j < D; j++)
    w2[j] = tabf[j + 1];
  expect(E, w2, D, "copy from byte 2");
  hbg_buffer_free(rt, W);
  hbg_buffer_free(rt, X);
  hbg_buffer_free(rt, TAB);
  hbg_buffer_free(rt, NW);
  hbg_buffer_free(rt, Y);
  hbg_buffer_free(rt, R);
  hbg_buffer_free(rt, R2);
  hbg_buffer_free(rt, E);
}

/* ---- a graph with bf16 weights in its boundary ---- */

typedef struct rec_ctx {
  int calls;
  int bad; /* record a GEMV whose x is bf16: 1 returns its error, 2 goes on
              and returns 0 */
} rec_ctx;

/* Boundary [W bf16 [N][K], x [K], nw bf16 [N], y [N]], scalar 0 = alpha:
 * h = W x * alpha; y = rmsnorm(h, nw). */
static int rec_layer(hbg_recorder *rec, void *user) {
  rec_ctx *c = user;
  c->calls++;
  uint32_t nt = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  ASSERT_EQ(nt, 4);
  hbg_tensor h = ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, N, 0);
  hbg_tensor g[3] = {bt[0], bt[1], h};
  if (c->bad)
    g[1] = ten(bt[0].addr, bt[0].offset, HBG_DTYPE_BF16, HBG_ACCESS_IN, K, 0);
  hbg_scalar alpha = hbg_scalar_boundary(0);
  hbg_task t = {.kernel = HBG_KERNEL_GEMV, .n_args = 3, .args = g,
                .n_scalars = 1, .scalars = &alpha};
  hbg_task_id id;
  int rc = hbg_record_task(rec, &t, &id);
  if (c->bad) {
    ASSERT_EQ(rc, HBG_E_KERNEL);
    ASSERT(strstr(hbg_last_error(),
                  "gemv: argument 1 (x) is bf16, must be f32") != NULL);
    if (c->bad == 1)
      return rc;
    return 0;
  }
  if (rc)
    return rc;
  hbg_tensor r[3] = {g[2], bt[2], bt[3]};
  r[0].mode = HBG_ACCESS_IN;
  hbg_scalar eps = hbg_scalar_static(hbg_scalar_f32(1e-5f));
  hbg_task t2 = {.kernel = HBG_KERNEL_RMSNORM, .n_args = 3, .args = r,
                 .n_scalars = 1, .scalars = &eps};
  return hbg_record_task(rec, &t2, NULL);
}

static void t_graph(void) {
  /* two weight sets in one buffer each; the second at byte offset 2 */
  uint64_t W1 = upload(wb, sizeof wb), X1 = upload(x, sizeof x),
           X2 = upload(x2, sizeof x2), NW = upload(nb, sizeof nb);
  uint64_t W2;
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof wb2 + 2, &W2));
  ASSERT_OK(hbg_buffer_write(rt, W2 + 2, wb2, sizeof wb2));
  uint64_t Y1, Y2, Y3;
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &Y1));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &Y2));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &Y3));
  rec_ctx c = {0};
  const uint64_t key = 0xbf16;
  struct {
    uint64_t w, woff, x, y;
    float alpha;
  } reps[3] = {{W1, 0, X1, Y1, 0.5f}, {W2, 2, X2, Y2, 2.0f},
               {W1, 0, X2, Y3, -1.25f}};
  for (int round = 0; round < 2; round++) {
    hbg_bind *b;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    for (int i = 0; i < 3; i++) {
      hbg_tensor bt[4] = {
          ten(reps[i].w, reps[i].woff, HBG_DTYPE_BF16, HBG_ACCESS_IN, N, K),
          ten(reps[i].x, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, K, 0),
          ten(NW, 0, HBG_DTYPE_BF16, HBG_ACCESS_IN, N, 0),
          ten(reps[i].y, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, N, 0)};
      uint64_t sc = hbg_scalar_f32(reps[i].alpha * (float)(round + 1));
      hbg_graph_submit g = {.key = key, .n_tensors = 4, .tensors = bt,
                            .scalars = &sc, .n_scalars = 1,
                            .record = rec_layer, .user = &c};
      ASSERT_OK(hbg_submit_graph(b, &g, NULL));
    }
    run_bind(b);
    ASSERT_EQ(c.calls, 1); /* recorded once, replayed six times */
    for (int i = 0; i < 3; i++) {
      float h[N], want[N];
      ref_gemv(i == 1 ? wf2 : wf, i == 0 ? x : x2,
               reps[i].alpha * (float)(round + 1), 1, h);
      ref_rmsnorm(h, 1, N, nf, 1e-5f, want);
      expect(reps[i].y, want, N, "graph replay, bf16 W and w");
    }
  }
  /* the same graph with a bf16 x: refused at record, never cached (the
   * callback returning the error, or ignoring it) */
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_tensor bt[4] = {ten(W1, 0, HBG_DTYPE_BF16, HBG_ACCESS_IN, N, K),
                      ten(X1, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, K, 0),
                      ten(NW, 0, HBG_DTYPE_BF16, HBG_ACCESS_IN, N, 0),
                      ten(Y1, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, N, 0)};
  uint64_t sc = hbg_scalar_f32(1.0f);
  for (int mode = 1; mode <= 2; mode++) {
    rec_ctx bad = {.bad = mode};
    hbg_graph_submit g = {.key = key + 1, .n_tensors = 4, .tensors = bt,
                          .scalars = &sc, .n_scalars = 1,
                          .record = rec_layer, .user = &bad};
    for (int i = 0; i < 2; i++) {
      ASSERT_ERR(hbg_submit_graph(b, &g, NULL),
                 mode == 1 ? HBG_E_RECORD : HBG_E_KERNEL);
      if (!strstr(hbg_last_error(),
                  "gemv: argument 1 (x) is bf16, must be f32"))
        T_FAIL("message '%s' does not name gemv's x", hbg_last_error());
    }
    ASSERT_EQ(bad.calls, 2);
  }
  /* a replay whose W is f32 where the recording's was bf16: refused */
  bt[0] = ten(W1, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, N, K / 2); /* fits */
  hbg_graph_submit g = {.key = key, .n_tensors = 4, .tensors = bt,
                        .scalars = &sc, .n_scalars = 1, .record = rec_layer,
                        .user = &c};
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_SIGNATURE);
  ASSERT_STREQ(hbg_last_error(), "hbg_submit_graph: key 48918: boundary "
                                 "tensor 0: dtype f32, recorded bf16");
  ASSERT_EQ(hbg_bind_fatal(b), 0);
  hbg_bind_end(b);
  uint64_t bufs[] = {W1, W2, X1, X2, NW, Y1, Y2, Y3};
  for (size_t i = 0; i < HBG__ARRAY_LEN(bufs); i++)
    hbg_buffer_free(rt, bufs[i]);
}

int main(void) {
  fill_bf16(wb, wf, N * K, 1.0f);
  fill_bf16(wb2, wf2, N * K, 0.5f);
  fill_bf16(nb, nf, N, 2.0f);
  fill_bf16(tab, tabf, V * D, 4.0f);
  fill_bf16(dnb, dnf, D + 1, 1.5f);
  for (int j = 0; j < K; j++) {
    x[j] = frand();
    x2[j] = frand() * 3.0f;
  }
  for (int j = 0; j < 2 * D; j++)
    rows[j] = frand() * 5.0f;
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim"; /* always built; not whatever HBG_DEVICE says */
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  t_tasks();
  t_graph();
  hbg_runtime_destroy(rt);
  printf("kernels_bf16: ok\n");
  return 0;
}
