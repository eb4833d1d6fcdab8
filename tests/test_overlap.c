/* The rule that a kernel's outputs do not overlap its inputs, enforced at
 * hbg_submit_task and at hbg_record_task for every kernel class: the
 * element-wise kernels and ROPE may run in place on the identical tensor
 * only; the others never; NOP is never checked; a user kernel's OUT / INOUT
 * arguments may not overlap its IN ones. A refusal names the task, the two
 * arguments and the overlapping byte range, changes nothing in the bind,
 * and a recording that broke the rule is not kept. */
#include <hbg/hbg.h>

#include "test.h"

#define NF 256u /* floats per buffer */

static hbg_runtime *rt;
static uint64_t A, B, C;

static hbg_tensor tn(uint64_t addr, uint64_t off, uint32_t mode, uint32_t d0,
                     uint32_t d1) {
  hbg_tensor t;
  uint32_t dims[2] = {d0, d1};
  ASSERT_OK(hbg_tensor_contig(&t, addr, off, HBG_DTYPE_F32, d1 ? 2 : 1, dims,
                              mode));
  return t;
}

static hbg_tensor vec(uint64_t addr, uint64_t off, uint32_t n, uint32_t mode) {
  return tn(addr, off, mode, n, 0);
}

static uint64_t f32bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

#define ASSERT_MSG(part)                                                       \
  do {                                                                         \
    if (!strstr(hbg_last_error(), (part)))                                     \
      T_FAIL("message '%s' lacks '%s'", hbg_last_error(), (part));             \
  } while (0)

/* The message names the byte range [lo, hi). */
static void assert_range(uint64_t lo, uint64_t hi) {
  char want[64];
  snprintf(want, sizeof want, "in bytes [0x%llx, 0x%llx)",
           (unsigned long long)lo, (unsigned long long)hi);
  ASSERT_MSG(want);
}

static int submit(hbg_bind *b, uint32_t kernel, hbg_tensor *a, uint32_t n,
                  const hbg_scalar *sc, uint32_t ns) {
  hbg_task t = {.kernel = kernel, .n_args = n, .args = a, .n_scalars = ns,
                .scalars = sc};
  return hbg_submit_task(b, &t, NULL);
}

static void write_f(uint64_t addr, const float *v, uint32_t n) {
  ASSERT_OK(hbg_buffer_write(rt, addr, v, (uint64_t)n * 4));
}

static void read_f(uint64_t addr, float *v, uint32_t n) {
  ASSERT_OK(hbg_buffer_read(rt, v, addr, (uint64_t)n * 4));
}

/* Element-wise kernels: the identical tensor runs in place (and computes
 * the right thing); one element of shift, or another layout of the same
 * bytes, is refused. */
static void t_elementwise(void) {
  float a[16], bv[16], out[16];
  for (int i = 0; i < 16; i++) {
    a[i] = (float)i;
    bv[i] = 100.0f;
  }
  write_f(A, a, 16);
  write_f(B, bv, 16);
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  /* in place: A = A + B */
  hbg_tensor ok[3] = {vec(A, 0, 16, HBG_ACCESS_IN), vec(B, 0, 16, HBG_ACCESS_IN),
                      vec(A, 0, 16, HBG_ACCESS_OUT)};
  ASSERT_OK(submit(b, HBG_KERNEL_ADD, ok, 3, NULL, 0));
  /* out shifted by one element against input 0 (the "all zeros") */
  hbg_tensor sh[3] = {vec(A, 0, 16, HBG_ACCESS_IN), vec(B, 0, 16, HBG_ACCESS_IN),
                      vec(A, 4, 16, HBG_ACCESS_OUT)};
  ASSERT_ERR(submit(b, HBG_KERNEL_ADD, sh, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_MSG("hbg_submit_task (task 1): add: output argument 2 overlaps "
             "input argument 0");
  assert_range(A + 4, A + 64);
  ASSERT_MSG("identical tensor");
  /* the same bytes as [4][4] against a flat [16]: not the same layout */
  hbg_tensor sq[3] = {tn(A, 0, HBG_ACCESS_IN, 4, 4),
                      vec(B, 0, 16, HBG_ACCESS_IN),
                      vec(A, 0, 16, HBG_ACCESS_OUT)};
  ASSERT_ERR(submit(b, HBG_KERNEL_ADD, sq, 3, NULL, 0), HBG_E_KERNEL);
  /* COPY with its output half over its input */
  hbg_tensor cp[2] = {vec(B, 0, 16, HBG_ACCESS_IN),
                      vec(B, 32, 16, HBG_ACCESS_OUT)};
  ASSERT_ERR(submit(b, HBG_KERNEL_COPY, cp, 2, NULL, 0), HBG_E_KERNEL);
  ASSERT_MSG("copy: output argument 1 overlaps input argument 0");
  assert_range(B + 32, B + 64);
  /* touching is not overlapping: [B, B+64) and [B+64, B+128) */
  cp[1] = vec(B, 64, 16, HBG_ACCESS_OUT);
  ASSERT_OK(submit(b, HBG_KERNEL_COPY, cp, 2, NULL, 0));
  /* the second input overlapping: MUL and SILU_MUL, in place on input 1 */
  hbg_tensor mu[3] = {vec(A, 0, 16, HBG_ACCESS_IN), vec(C, 0, 16, HBG_ACCESS_IN),
                      vec(C, 8, 16, HBG_ACCESS_OUT)};
  ASSERT_ERR(submit(b, HBG_KERNEL_MUL, mu, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_MSG("mul: output argument 2 overlaps input argument 1");
  ASSERT_ERR(submit(b, HBG_KERNEL_SILU_MUL, mu, 3, NULL, 0), HBG_E_KERNEL);
  mu[2] = mu[1];
  mu[2].mode = HBG_ACCESS_OUT;
  ASSERT_OK(submit(b, HBG_KERNEL_MUL, mu, 3, NULL, 0));
  /* SCALE in place; FILL has no input; a broadcast input (stride 0) under
   * the output is refused */
  hbg_scalar two = {.value = f32bits(2.0f), .kind = HBG_SCALAR_STATIC};
  hbg_tensor s[2] = {vec(C, 256, 16, HBG_ACCESS_IN),
                     vec(C, 256, 16, HBG_ACCESS_OUT)};
  ASSERT_OK(submit(b, HBG_KERNEL_SCALE, s, 2, &two, 1));
  ASSERT_OK(submit(b, HBG_KERNEL_FILL, &s[1], 1, &two, 1));
  s[0].strides[0] = 0;
  ASSERT_ERR(submit(b, HBG_KERNEL_SCALE, s, 2, &two, 1), HBG_E_KERNEL);
  /* a refused task leaves the bind as it was: the five good ones run */
  ASSERT_EQ(hbg_bind_fatal(b), 0);
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  ASSERT_EQ(st.n_tasks, 5);
  hbg_bind_end(b);
  read_f(A, out, 16);
  for (int i = 0; i < 16; i++)
    ASSERT(out[i] == (float)i + 100.0f);
}

/* GEMV, RMSNORM, SOFTMAX and ATTN never run in place: even the identical
 * tensor is refused (the GEMV gave [6,12,23,44] for [6,6,6,6]). */
static void t_not_in_place(void) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_scalar eps = {.value = f32bits(1e-5f), .kind = HBG_SCALAR_STATIC};
  /* GEMV: W [4][4] at C, x [4] at A, out == x */
  hbg_tensor g[3] = {tn(C, 0, HBG_ACCESS_IN, 4, 4), vec(A, 0, 4, HBG_ACCESS_IN),
                     vec(A, 0, 4, HBG_ACCESS_OUT)};
  ASSERT_ERR(submit(b, HBG_KERNEL_GEMV, g, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_MSG("gemv: output argument 2 overlaps input argument 1");
  assert_range(A, A + 16);
  ASSERT_MSG("only the element-wise kernels and rope may run in place");
  /* out over the end of W */
  g[2] = vec(C, 60, 4, HBG_ACCESS_OUT);
  ASSERT_ERR(submit(b, HBG_KERNEL_GEMV, g, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_MSG("output argument 2 overlaps input argument 0");
  assert_range(C + 60, C + 64);
  g[2] = vec(C, 64, 4, HBG_ACCESS_OUT);
  ASSERT_OK(submit(b, HBG_KERNEL_GEMV, g, 3, NULL, 0));
  /* RMSNORM in place, and its output over the weight */
  hbg_tensor r[3] = {tn(A, 0, HBG_ACCESS_IN, 2, 8), vec(B, 0, 8, HBG_ACCESS_IN),
                     tn(A, 0, HBG_ACCESS_OUT, 2, 8)};
  ASSERT_ERR(submit(b, HBG_KERNEL_RMSNORM, r, 3, &eps, 1), HBG_E_KERNEL);
  ASSERT_MSG("rmsnorm: output argument 2 overlaps input argument 0");
  r[2] = tn(B, 16, HBG_ACCESS_OUT, 2, 8);
  ASSERT_ERR(submit(b, HBG_KERNEL_RMSNORM, r, 3, &eps, 1), HBG_E_KERNEL);
  ASSERT_MSG("output argument 2 overlaps input argument 1");
  /* SOFTMAX in place */
  hbg_tensor sm[2] = {tn(A, 0, HBG_ACCESS_IN, 2, 8),
                      tn(A, 0, HBG_ACCESS_OUT, 2, 8)};
  ASSERT_ERR(submit(b, HBG_KERNEL_SOFTMAX, sm, 2, NULL, 0), HBG_E_KERNEL);
  ASSERT_MSG("softmax: output argument 1 overlaps input argument 0");
  /* ATTN: q [2][4], K and V [1][4][4], out over V */
  hbg_scalar len = {.value = 4, .kind = HBG_SCALAR_STATIC};
  uint32_t kv[3] = {1, 4, 4};
  hbg_tensor at[4];
  at[0] = tn(A, 0, HBG_ACCESS_IN, 2, 4);
  ASSERT_OK(hbg_tensor_contig(&at[1], B, 0, HBG_DTYPE_F32, 3, kv,
                              HBG_ACCESS_IN));
  ASSERT_OK(hbg_tensor_contig(&at[2], B, 64, HBG_DTYPE_F32, 3, kv,
                              HBG_ACCESS_IN));
  at[3] = tn(B, 96, HBG_ACCESS_OUT, 2, 4);
  ASSERT_ERR(submit(b, HBG_KERNEL_ATTN, at, 4, &len, 1), HBG_E_KERNEL);
  ASSERT_MSG("attn: output argument 3 overlaps input argument 2");
  assert_range(B + 96, B + 128);
  at[3] = tn(C, 512, HBG_ACCESS_OUT, 2, 4);
  ASSERT_OK(submit(b, HBG_KERNEL_ATTN, at, 4, &len, 1));
  hbg_bind_end(b); /* never launched: rolled back */
}

/* ROPE runs in place; its output over cos or sin is refused. A strided
 * view counts its whole extent: the odd elements written while the even
 * ones are read is refused although no element is shared. */
static void t_rope_and_strides(void) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_scalar pos = {.value = 1, .kind = HBG_SCALAR_STATIC};
  hbg_tensor ro[4] = {tn(A, 0, HBG_ACCESS_IN, 2, 4), tn(B, 0, HBG_ACCESS_IN, 2, 2),
                      tn(B, 16, HBG_ACCESS_IN, 2, 2),
                      tn(A, 0, HBG_ACCESS_OUT, 2, 4)};
  ASSERT_OK(submit(b, HBG_KERNEL_ROPE, ro, 4, &pos, 1));
  ro[3] = tn(B, 16, HBG_ACCESS_OUT, 2, 4);
  ASSERT_ERR(submit(b, HBG_KERNEL_ROPE, ro, 4, &pos, 1), HBG_E_KERNEL);
  ASSERT_MSG("rope: output argument 3 overlaps input argument 2");
  assert_range(B + 16, B + 32);
  /* even elements in, odd elements out: disjoint elements, overlapping
   * extents */
  hbg_tensor ev = vec(C, 0, 8, HBG_ACCESS_IN), od = vec(C, 4, 8, HBG_ACCESS_OUT);
  ev.strides[0] = 2;
  od.strides[0] = 2;
  hbg_tensor st[2] = {ev, od};
  ASSERT_ERR(submit(b, HBG_KERNEL_COPY, st, 2, NULL, 0), HBG_E_KERNEL);
  assert_range(C + 4, C + 60);
  hbg_bind_end(b);
}

/* NOP touches nothing; a user kernel's outputs (OUT, INOUT) may not
 * overlap its inputs (IN), though an INOUT tensor alone and two inputs
 * sharing bytes are fine. */
static void t_nop_and_user(void) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_tensor n[2] = {vec(A, 0, 16, HBG_ACCESS_IN), vec(A, 4, 16, HBG_ACCESS_OUT)};
  ASSERT_OK(submit(b, HBG_KERNEL_NOP, n, 2, NULL, 0));
  const uint32_t uk = HBG_KERNEL_USER_MIN + 5;
  hbg_tensor u[3] = {vec(A, 0, 16, HBG_ACCESS_IN), vec(A, 0, 16, HBG_ACCESS_IN),
                     vec(B, 0, 16, HBG_ACCESS_INOUT)};
  ASSERT_OK(submit(b, uk, u, 3, NULL, 0));
  u[1] = vec(A, 0, 16, HBG_ACCESS_OUT); /* identical, but user: refused */
  ASSERT_ERR(submit(b, uk, u, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_MSG("user kernel 0x1005: output argument 1 overlaps input "
             "argument 0");
  ASSERT_MSG("may not run in place");
  u[1] = vec(A, 128, 16, HBG_ACCESS_OUT);
  u[2] = vec(A, 32, 16, HBG_ACCESS_INOUT); /* over input 0's tail */
  ASSERT_ERR(submit(b, uk, u, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_MSG("output argument 2 overlaps input argument 0");
  assert_range(A + 32, A + 64);
  hbg_bind_end(b);
}

/* ---- recorded inner tasks ---- */

enum { REC_OK, REC_GEMV_ALIAS, REC_HEAP_SHIFT, REC_VIEW_SHIFT };

/* Boundary x[16] in, y[16] out. */
static int rec(hbg_recorder *r, void *user) {
  const int mode = *(const int *)user;
  uint32_t nt;
  const hbg_tensor *bt = hbg_record_tensors(r, &nt);
  hbg_tensor x = bt[0], y = bt[1];
  /* n0: t = x + x (a heap output); n1: t = t + t in place */
  hbg_tensor a0[3] = {x, x, vec(0, 0, 16, HBG_ACCESS_OUT)};
  hbg_task t0 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a0};
  ASSERT_OK(hbg_record_task(r, &t0, NULL));
  hbg_tensor t = a0[2];
  hbg_tensor a1[3] = {t, t, t};
  a1[0].mode = a1[1].mode = HBG_ACCESS_IN;
  hbg_task t1 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a1};
  ASSERT_OK(hbg_record_task(r, &t1, NULL));
  hbg_tensor tin = t;
  tin.mode = HBG_ACCESS_IN;
  switch (mode) {
  case REC_GEMV_ALIAS: {
    /* y[0:4] = W (x as [4][4]) @ y[0:4]: the output is its own input */
    hbg_tensor g[3] = {tn(x.addr, x.offset, HBG_ACCESS_IN, 4, 4),
                       vec(y.addr, y.offset, 4, HBG_ACCESS_IN),
                       vec(y.addr, y.offset, 4, HBG_ACCESS_OUT)};
    hbg_task tg = {.kernel = HBG_KERNEL_GEMV, .n_args = 3, .args = g};
    ASSERT_ERR(hbg_record_task(r, &tg, NULL), HBG_E_KERNEL);
    return 0; /* the recording is bad all the same */
  }
  case REC_HEAP_SHIFT: {
    /* t[1:9] = t[0:8] + t[0:8]: two views of one heap output */
    hbg_tensor v = vec(t.addr, 0, 8, HBG_ACCESS_IN);
    hbg_tensor h[3] = {v, v, vec(t.addr, 4, 8, HBG_ACCESS_OUT)};
    hbg_task th = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = h};
    ASSERT_ERR(hbg_record_task(r, &th, NULL), HBG_E_KERNEL);
    return 0;
  }
  case REC_VIEW_SHIFT: {
    /* y[1:9] = y[0:8] * 2: two views of a boundary tensor */
    hbg_scalar two = {.value = f32bits(2.0f), .kind = HBG_SCALAR_STATIC};
    hbg_tensor s[2] = {vec(y.addr, y.offset, 8, HBG_ACCESS_IN),
                       vec(y.addr, y.offset + 4, 8, HBG_ACCESS_OUT)};
    hbg_task ts = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = s,
                   .n_scalars = 1, .scalars = &two};
    ASSERT_ERR(hbg_record_task(r, &ts, NULL), HBG_E_KERNEL);
    return 0;
  }
  default: {
    hbg_tensor c[2] = {tin, y};
    hbg_task tc = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = c};
    return hbg_record_task(r, &tc, NULL);
  }
  }
}

static int graph(hbg_bind *b, uint64_t key, int *mode) {
  hbg_tensor bt[2] = {vec(A, 0, 16, HBG_ACCESS_IN), vec(B, 0, 16, HBG_ACCESS_OUT)};
  hbg_graph_submit g = {.key = key, .n_tensors = 2, .tensors = bt,
                        .record = rec, .user = mode};
  return hbg_submit_graph(b, &g, NULL);
}

static void t_record(void) {
  float x[16], y[16];
  for (int i = 0; i < 16; i++)
    x[i] = (float)i;
  write_f(A, x, 16);
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  int mode = REC_GEMV_ALIAS;
  ASSERT_ERR(graph(b, 1, &mode), HBG_E_KERNEL);
  ASSERT_MSG("the recording is not kept: hbg_record_task (inner task 2): "
             "gemv: output argument 2 overlaps input argument 1");
  assert_range(B, B + 16);
  mode = REC_HEAP_SHIFT;
  ASSERT_ERR(graph(b, 2, &mode), HBG_E_KERNEL);
  ASSERT_MSG("(inner task 2): add: output argument 2 overlaps input "
             "argument 0");
  mode = REC_VIEW_SHIFT;
  ASSERT_ERR(graph(b, 3, &mode), HBG_E_KERNEL);
  ASSERT_MSG("(inner task 2): scale: output argument 1 overlaps input "
             "argument 0");
  assert_range(B + 4, B + 32);
  /* nothing was cached: the same key with a good body records now, and
   * the in-place inner ADD (n1) computes t = 4x */
  mode = REC_OK;
  ASSERT_OK(graph(b, 1, &mode));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  ASSERT_EQ(st.n_recorded, 1);
  hbg_bind_end(b);
  read_f(B, y, 16);
  for (int i = 0; i < 16; i++)
    ASSERT(y[i] == 4.0f * (float)i);
}

int main(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_OK(hbg_buffer_alloc(rt, NF * 4, &A));
  ASSERT_OK(hbg_buffer_alloc(rt, NF * 4, &B));
  ASSERT_OK(hbg_buffer_alloc(rt, NF * 4, &C));
  float zero[NF] = {0};
  write_f(A, zero, NF);
  write_f(B, zero, NF);
  write_f(C, zero, NF);
  t_elementwise();
  t_not_in_place();
  t_rope_and_strides();
  t_nop_and_user();
  t_record();
  hbg_buffer_free(rt, A);
  hbg_buffer_free(rt, B);
  hbg_buffer_free(rt, C);
  hbg_runtime_destroy(rt);
  printf("overlap: ok\n");
  return 0;
}
