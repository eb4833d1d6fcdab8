/* The sim's executor on hand-built task windows in device memory: order
 * between ordinary and graph tasks, heap blocks across replays, counters,
 * and errors reported through the status (never a crash or a hang). */
#include "test_exec_fixture.h"

#define N XG_N

static void rand_vec(float *v, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    v[i] = xrandf();
}

static void check_vec(xf *f, uint64_t a, const float *want, uint32_t n) {
  float got[4096];
  ASSERT(n <= 4096);
  xf_read(f, got, a, (size_t)n * 4);
  for (uint32_t i = 0; i < n; i++)
    if (memcmp(&got[i], &want[i], 4))
      T_FAIL("element %u: %.9g vs %.9g", i, (double)got[i], (double)want[i]);
}

/* FILL -> graph -> SCALE -> graph -> ADD, each waiting on the one before,
 * and a long alternating chain; repeated so a lost dependency shows. */
static void t_order(xf *f, const hbg__def *d, uint64_t def) {
  float b1[N], b2[N], ones[N], c[N], dd[N], e[N], fo[N];
  rand_vec(b1, N);
  rand_vec(b2, N);
  uint64_t B1 = xf_floats(f, b1, N), B2 = xf_floats(f, b2, N);
  uint64_t A = xf_alloc(f, N * 4), C = xf_alloc(f, N * 4),
           D = xf_alloc(f, N * 4), E = xf_alloc(f, N * 4),
           F = xf_alloc(f, N * 4), H1 = xf_alloc(f, d->heap_size),
           H2 = xf_alloc(f, d->heap_size);
  uint32_t s1, s2;
  uint64_t S1 = xg_sub(f, d, A, B1, C, 2.0f, 0, 0, &s1);
  uint64_t S2 = xg_sub(f, d, D, B2, E, 0.5f, 1, 0, &s2);
  for (int rep = 0; rep < 20; rep++) {
    float zero[N] = {0};
    xf_write(f, C, zero, sizeof zero);
    xf_write(f, F, zero, sizeof zero);
    wb w;
    wb_init(&w);
    hbg_tensor tA = xg_vec(A, 0, N, HBG_ACCESS_OUT);
    uint64_t one = hbg__kernel_f32(1.0f + (float)rep),
             three = hbg__kernel_f32(3.0f);
    uint32_t t0 = wb_task(&w, HBG_KERNEL_FILL, &tA, 1, &one, 1, NULL, 0);
    uint32_t g1 = wb_graph(&w, S1, s1, def, d->size, H1, &t0, 1);
    hbg_tensor sc[2] = {xg_vec(C, 0, N, HBG_ACCESS_IN),
                        xg_vec(D, 0, N, HBG_ACCESS_OUT)};
    uint32_t t2 = wb_task(&w, HBG_KERNEL_SCALE, sc, 2, &three, 1, &g1, 1);
    uint32_t g3 = wb_graph(&w, S2, s2, def, d->size, H2, &t2, 1);
    hbg_tensor ad[3] = {xg_vec(E, 0, N, HBG_ACCESS_IN),
                        xg_vec(A, 0, N, HBG_ACCESS_IN),
                        xg_vec(F, 0, N, HBG_ACCESS_OUT)};
    uint32_t deps[2] = {g3, t0};
    wb_task(&w, HBG_KERNEL_ADD, ad, 3, NULL, 0, deps, 2);
    uint64_t wbytes, W = wb_upload(&w, f, &wbytes);
    hbg_dev_status st;
    ASSERT_OK(xf_launch(f, W, wbytes, &st));
    ASSERT_EQ(st.task, UINT32_MAX);
    ASSERT_EQ(st.node, UINT32_MAX);
    ASSERT_EQ(st.tasks_done, 5);
    ASSERT_UEQ(st.nodes_done, 3 + 2 * 4);
    ASSERT_UEQ(st.defs_verified, rep == 0 ? 1 : 0);
    ASSERT_OK(hbg_dev_mem_free(f->dev, W));
    for (uint32_t i = 0; i < N; i++)
      ones[i] = 1.0f + (float)rep;
    xg_ref(ones, b1, 2.0f, c);
    for (uint32_t i = 0; i < N; i++)
      dd[i] = c[i] * 3.0f;
    xg_ref(dd, b2, 0.5f, e);
    for (uint32_t i = 0; i < N; i++)
      fo[i] = e[i] + ones[i];
    check_vec(f, F, fo, N);
  }

  /* 120 alternating graph / ordinary tasks through two ping-pong buffers */
  wb w;
  wb_init(&w);
  float x[N], ref[N];
  rand_vec(x, N);
  xf_write(f, A, x, sizeof x);
  uint64_t S[2], heaps[60];
  uint32_t ss[2];
  S[0] = xg_sub(f, d, A, B1, C, 0.75f, 0, 0, &ss[0]);
  S[1] = xg_sub(f, d, D, B2, A, 1.25f, 1, 0, &ss[1]);
  memcpy(ref, x, sizeof x);
  uint32_t prev = UINT32_MAX;
  for (int i = 0; i < 60; i++) {
    heaps[i] = xf_alloc(f, d->heap_size);
    int k = i % 2;
    if (k == 0) {
      prev = wb_graph(&w, S[0], ss[0], def, d->size, heaps[i], &prev,
                      prev == UINT32_MAX ? 0 : 1);
      float t[N];
      xg_ref(ref, b1, 0.75f, t);
      memcpy(ref, t, sizeof t);
      hbg_tensor cp[2] = {xg_vec(C, 0, N, HBG_ACCESS_IN),
                          xg_vec(D, 0, N, HBG_ACCESS_OUT)};
      prev = wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, &prev, 1);
    } else {
      prev = wb_graph(&w, S[1], ss[1], def, d->size, heaps[i], &prev, 1);
      float t[N];
      xg_ref(ref, b2, 1.25f, t);
      memcpy(ref, t, sizeof t);
      hbg_tensor sc[2] = {xg_vec(A, 0, N, HBG_ACCESS_IN),
                          xg_vec(A, 0, N, HBG_ACCESS_OUT)};
      uint64_t half = hbg__kernel_f32(0.5f);
      prev = wb_task(&w, HBG_KERNEL_SCALE, sc, 2, &half, 1, &prev, 1);
      for (uint32_t j = 0; j < N; j++)
        ref[j] *= 0.5f;
    }
  }
  uint64_t wbytes, W = wb_upload(&w, f, &wbytes);
  hbg_dev_status st;
  ASSERT_OK(xf_launch(f, W, wbytes, &st));
  ASSERT_EQ(st.tasks_done, 120);
  ASSERT_UEQ(st.nodes_done, 60 * 4 + 60);
  check_vec(f, A, ref, N);
  for (int i = 0; i < 60; i++)
    ASSERT_OK(hbg_dev_mem_free(f->dev, heaps[i]));
  uint64_t frees[] = {W, S[0], S[1], S1, S2, B1, B2, A, C, D, E, F, H1, H2};
  for (size_t i = 0; i < HBG__ARRAY_LEN(frees); i++)
    ASSERT_OK(hbg_dev_mem_free(f->dev, frees[i]));
}

/* Many replays of one Definition with no order between them: each internal
 * tensor lives in its own heap block, so every replay is right. Half use
 * the retained Definition, half carry it inline (deferred images). */
static void t_heap(xf *f, const hbg__def *d, uint64_t def) {
  enum { R = 80 };
  float x[R][N], b[R][N], y[N];
  uint64_t X[R], B[R], Y[R], S[R], H[R];
  uint32_t ss[R];
  wb w;
  wb_init(&w);
  for (int r = 0; r < R; r++) {
    rand_vec(x[r], N);
    rand_vec(b[r], N);
    X[r] = xf_floats(f, x[r], N);
    B[r] = xf_floats(f, b[r], N);
    Y[r] = xf_alloc(f, N * 4);
    H[r] = xf_alloc(f, d->heap_size);
    int inl = r % 2;
    S[r] = xg_sub(f, d, X[r], B[r], Y[r], 0.5f + (float)r, (uint32_t)r, inl,
                  &ss[r]);
    wb_graph(&w, S[r], ss[r], inl ? 0 : def, d->size, H[r], NULL, 0);
  }
  uint64_t wbytes, W = wb_upload(&w, f, &wbytes);
  for (int rep = 0; rep < 3; rep++) {
    hbg_dev_status st;
    ASSERT_OK(xf_launch(f, W, wbytes, &st));
    ASSERT_EQ(st.tasks_done, R);
    ASSERT_UEQ(st.nodes_done, R * 4);
    /* the retained Definition is verified already; R/2 inline copies */
    ASSERT_UEQ(st.defs_verified, rep == 0 ? R / 2 : 0);
    for (int r = 0; r < R; r++) {
      xg_ref(x[r], b[r], 0.5f + (float)r, y);
      check_vec(f, Y[r], y, N);
    }
  }
  /* two replays sharing the same boundary, each with its own heap: both
   * produce the same bits */
  wb_init(&w);
  float zero[N] = {0};
  xf_write(f, Y[0], zero, sizeof zero);
  wb_graph(&w, S[0], ss[0], def, d->size, H[0], NULL, 0);
  uint32_t t0 = 0;
  hbg_tensor cp[2] = {xg_vec(Y[0], 0, N, HBG_ACCESS_IN),
                      xg_vec(Y[1], 0, N, HBG_ACCESS_OUT)};
  uint32_t t1 = wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, &t0, 1);
  wb_graph(&w, S[0], ss[0], def, d->size, H[2], &t1, 1);
  uint64_t W2bytes, W2 = wb_upload(&w, f, &W2bytes);
  hbg_dev_status st;
  ASSERT_OK(xf_launch(f, W2, W2bytes, &st));
  xg_ref(x[0], b[0], 0.5f, y);
  check_vec(f, Y[0], y, N);
  check_vec(f, Y[1], y, N);
  for (int r = 0; r < R; r++) {
    uint64_t fr[] = {X[r], B[r], Y[r], S[r], H[r]};
    for (size_t i = 0; i < HBG__ARRAY_LEN(fr); i++)
      ASSERT_OK(hbg_dev_mem_free(f->dev, fr[i]));
  }
  ASSERT_OK(hbg_dev_mem_free(f->dev, W));
  ASSERT_OK(hbg_dev_mem_free(f->dev, W2));
}

/* A Definition whose node 1 (ROPE) reads its position from boundary
 * scalar 0: a bad position is a kernel error at run time, on that node. */
static hbg__def *rope_def(void) {
  uint32_t d8 = 8, cs[2] = {4, 4};
  hbg_tensor bt[4];
  bt[0] = xg_vec(0x1000, 0, 8, HBG_ACCESS_IN);
  ASSERT_OK(hbg_tensor_contig(&bt[1], 0x2000, 0, HBG_DTYPE_F32, 2, cs,
                              HBG_ACCESS_IN));
  ASSERT_OK(hbg_tensor_contig(&bt[2], 0x3000, 0, HBG_DTYPE_F32, 2, cs,
                              HBG_ACCESS_IN));
  bt[3] = xg_vec(0x4000, 0, 8, HBG_ACCESS_OUT);
  uint64_t bs = 0;
  hbg_recorder *rec;
  ASSERT_OK(hbg__rec_begin(bt, 4, &bs, 1, &rec));
  hbg_tensor a0[2] = {bt[0], xg_vec(0, 0, d8, HBG_ACCESS_OUT)};
  hbg_task k0 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a0};
  ASSERT_OK(hbg_record_task(rec, &k0, NULL));
  hbg_tensor x = a0[1];
  x.mode = HBG_ACCESS_IN;
  hbg_tensor a1[4] = {x, bt[1], bt[2], bt[3]};
  hbg_scalar s = {.kind = HBG_SCALAR_BOUNDARY, .index = 0};
  hbg_task k1 = {.kernel = HBG_KERNEL_ROPE,
                 .n_args = 4,
                 .args = a1,
                 .n_scalars = 1,
                 .scalars = &s};
  ASSERT_OK(hbg_record_task(rec, &k1, NULL));
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(rec, &d));
  return d;
}

static void t_errors(xf *f, const hbg__def *d, uint64_t def) {
  float x[N];
  rand_vec(x, N);
  uint64_t X = xf_floats(f, x, N), B = xf_floats(f, x, N),
           Y = xf_alloc(f, N * 4), Z = xf_alloc(f, N * 4),
           H = xf_alloc(f, d->heap_size);
  float sentinel[N];
  for (uint32_t i = 0; i < N; i++)
    sentinel[i] = 1234.5f;
  uint32_t ss;
  uint64_t S = xg_sub(f, d, X, B, Y, 2.0f, 0, 0, &ss);
  hbg_dev_status st;
  uint64_t W, wbytes;
  wb w;

  /* kernel arguments checked before anything runs */
  wb_init(&w);
  hbg_tensor cp[2] = {xg_vec(X, 0, N, HBG_ACCESS_IN),
                      xg_vec(Z, 0, N, HBG_ACCESS_OUT)};
  wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
  wb_graph(&w, S, ss, def, d->size, H, NULL, 0);
  hbg_tensor bad[3] = {xg_vec(X, 0, N, HBG_ACCESS_IN),
                       xg_vec(B, 0, N / 2, HBG_ACCESS_IN),
                       xg_vec(Z, 0, N, HBG_ACCESS_OUT)};
  wb_task(&w, HBG_KERNEL_ADD, bad, 3, NULL, 0, NULL, 0);
  W = wb_upload(&w, f, &wbytes);
  xf_write(f, Z, sentinel, sizeof sentinel);
  ASSERT_ERR(xf_launch(f, W, wbytes, &st), HBG_E_KERNEL);
  ASSERT_EQ(st.task, 2);
  ASSERT_EQ(st.node, UINT32_MAX);
  ASSERT_EQ(st.tasks_done, 0);
  ASSERT_UEQ(st.nodes_done, 0);
  check_vec(f, Z, sentinel, N);
  ASSERT_OK(hbg_dev_mem_free(f->dev, W));

  /* a run-time kernel error on a graph node stops what depends on it */
  hbg__def *rd = rope_def();
  uint64_t RD = xf_upload(f, rd->image, rd->size);
  uint64_t RH = xf_alloc(f, rd->heap_size);
  float tab[16];
  rand_vec(tab, 16);
  uint64_t T = xf_floats(f, tab, 16);
  uint32_t cs[2] = {4, 4};
  hbg_tensor rbt[4];
  rbt[0] = xg_vec(X, 0, 8, HBG_ACCESS_IN);
  ASSERT_OK(
      hbg_tensor_contig(&rbt[1], T, 0, HBG_DTYPE_F32, 2, cs, HBG_ACCESS_IN));
  rbt[2] = rbt[1];
  rbt[3] = xg_vec(Z, 0, 8, HBG_ACCESS_OUT);
  for (uint64_t pos = 2; pos <= 4; pos += 2) {
    uint8_t img[1024];
    uint32_t n = hbg__sub_size(rd, 0);
    ASSERT(n <= sizeof img);
    ASSERT_EQ(hbg__sub_write(img, n, rd, 1, 0, rbt, &pos, 0), (int)n);
    uint64_t RS = xf_upload(f, img, n);
    xf_write(f, Z, sentinel, sizeof sentinel);
    xf_write(f, Y, sentinel, sizeof sentinel);
    wb_init(&w);
    uint32_t t0 = wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
    uint32_t g1 = wb_graph(&w, RS, n, RD, rd->size, RH, &t0, 1);
    wb_graph(&w, S, ss, def, d->size, H, &g1, 1);
    W = wb_upload(&w, f, &wbytes);
    int rc = xf_launch(f, W, wbytes, &st);
    if (pos == 2) {
      ASSERT_OK(rc);
      ASSERT_EQ(st.tasks_done, 3);
    } else {
      ASSERT_EQ(rc, HBG_E_KERNEL);
      ASSERT_EQ(st.task, 1);
      ASSERT_EQ(st.node, 1);
      ASSERT_EQ(st.tasks_done, 1);
      ASSERT_UEQ(st.nodes_done, 2);
      check_vec(f, Y, sentinel, N);
    }
    ASSERT_OK(hbg_dev_mem_free(f->dev, W));
    ASSERT_OK(hbg_dev_mem_free(f->dev, RS));
  }

  /* range errors: freed boundary, bad heap, bad window, bad Submission */
  uint64_t G = xf_alloc(f, N * 4);
  uint32_t gs;
  uint64_t GS = xg_sub(f, d, G, B, Y, 1.0f, 0, 0, &gs);
  ASSERT_OK(hbg_dev_mem_free(f->dev, G));
  struct {
    uint64_t sub, def, heap;
    uint32_t sub_size;
    int err;
  } cases[] = {
      {GS, def, H, gs, HBG_E_RANGE},
      {S, def, H + 64, ss, HBG_E_RANGE},
      {S, def, H + 8, ss, HBG_E_IMG_TENSOR_ALIGN},
      {S, def, 0, ss, HBG_E_RANGE},
      {1, def, H, ss, HBG_E_RANGE},
      {S, def, H, ss - 8, HBG_E_IMG_TRUNCATED},
      {S, 1, H, ss, HBG_E_RANGE},
      {S, RD, H, ss, HBG_E_IMG_DEF},
      {X, def, H, N * 4, HBG_E_IMG_MAGIC},
  };
  for (size_t c = 0; c < HBG__ARRAY_LEN(cases); c++) {
    wb_init(&w);
    wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
    wb_graph(&w, cases[c].sub, cases[c].sub_size, cases[c].def,
             cases[c].def == RD ? rd->size : d->size, cases[c].heap, NULL, 0);
    W = wb_upload(&w, f, &wbytes);
    int rc = xf_launch(f, W, wbytes, &st);
    if (rc != cases[c].err)
      T_FAIL("case %zu: %s, expected %s", c, hbg_err_name(rc),
             hbg_err_name(cases[c].err));
    ASSERT_EQ(st.task, 1);
    ASSERT_EQ(st.tasks_done, 0);
    ASSERT_OK(hbg_dev_mem_free(f->dev, W));
  }
  /* a window that is not there, or not a window */
  ASSERT_ERR(xf_launch(f, 0, 64, &st), HBG_E_RANGE);
  ASSERT_ERR(xf_launch(f, X, N * 4, &st), HBG_E_IMG_MAGIC);
  ASSERT_EQ(st.task, UINT32_MAX);
  ASSERT_ERR(xf_launch(f, S, ss, &st), HBG_E_IMG_KIND);
  /* an empty window is fine */
  wb_init(&w);
  W = wb_upload(&w, f, &wbytes);
  ASSERT_OK(xf_launch(f, W, wbytes, &st));
  ASSERT_EQ(st.tasks_done, 0);
  ASSERT_OK(hbg_dev_mem_free(f->dev, W));

  uint64_t fr[] = {X, B, Y, Z, H, S, GS, RD, RH, T};
  for (size_t i = 0; i < HBG__ARRAY_LEN(fr); i++)
    ASSERT_OK(hbg_dev_mem_free(f->dev, fr[i]));
  hbg__def_free(rd);
}

int main(void) {
  const char *opts[] = {"workers=1", "workers=3"};
  for (int o = 0; o < 2; o++) {
    xf f;
    xf_open(&f, opts[o]);
    hbg__def *d = xg_def();
    uint64_t def = xf_upload(&f, d->image, d->size);
    t_order(&f, d, def);
    t_heap(&f, d, def);
    t_errors(&f, d, def);
    ASSERT_OK(hbg_dev_mem_free(f.dev, def));
    hbg__def_free(d);
    xf_close(&f);
  }
  printf("exec_sched: ok\n");
  return 0;
}
