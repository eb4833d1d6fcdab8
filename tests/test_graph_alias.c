/* A Definition replayed over aliasing boundary tensors. Its nodes and
 * their order were recorded for the first submission's addresses; a later
 * replay may pass any. Two boundary tensors may share bytes when every
 * node touching one is ordered with every node touching the other (the
 * results are those of the recorded order), and may not when two
 * unordered nodes access the shared bytes and one writes them: that would
 * be a wrong result with no error, so the submission is refused
 * (HBG_E_INVAL, naming both tensors and the bytes) and the bind goes on.
 * Checked with views (only the bytes nodes touch count), with one node
 * touching both, with the first submission aliasing already (the recorder
 * orders what it sees overlap), and on a graph with too many accesses
 * to look at, where an overlap with a written tensor is refused. */
#include <string.h>

#include <hbg/hbg.h>

#include "test.h"

#define N 64u

static hbg_runtime *rt;
static uint64_t buf; /* 8 * N floats */

static hbg_tensor vec(uint64_t off_elems, uint32_t n, uint32_t mode) {
  hbg_tensor t;
  uint32_t dims[1] = {n};
  ASSERT_OK(hbg_tensor_contig(&t, buf, off_elems * 4, HBG_DTYPE_F32, 1, dims,
                              mode));
  return t;
}

static hbg_tensor inner(uint32_t n) {
  hbg_tensor t;
  uint32_t dims[1] = {n};
  ASSERT_OK(hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_OUT));
  return t;
}

static uint64_t f32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* Boundary X (in), Y (out), Z (out). "indep": Y = 2X and Z = X + X, two
 * nodes nothing orders. "chain": t = 2X, then Y = t and Z = t + t, both
 * after the first and unordered with each other. */
static int indep(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  hbg_tensor a0[2] = {b[0], b[1]};
  hbg_scalar two = {.kind = HBG_SCALAR_STATIC, .value = f32(2.0f)};
  hbg_task k0 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a0,
                 .n_scalars = 1, .scalars = &two};
  int rc = hbg_record_task(rec, &k0, NULL);
  hbg_tensor a1[3] = {b[0], b[0], b[2]};
  hbg_task k1 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a1};
  return rc ? rc : hbg_record_task(rec, &k1, NULL);
}

static int chain(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  hbg_tensor a0[2] = {b[0], inner(N)};
  hbg_scalar two = {.kind = HBG_SCALAR_STATIC, .value = f32(2.0f)};
  hbg_task k0 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a0,
                 .n_scalars = 1, .scalars = &two};
  hbg_task_id t0;
  int rc = hbg_record_task(rec, &k0, &t0);
  hbg_tensor t = a0[1];
  t.mode = HBG_ACCESS_IN;
  hbg_tensor a1[2] = {t, b[1]};
  hbg_task k1 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a1,
                 .n_deps = 1, .deps = &t0};
  if (!rc)
    rc = hbg_record_task(rec, &k1, NULL);
  hbg_tensor a2[3] = {t, t, b[2]};
  hbg_task k2 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a2,
                 .n_deps = 1, .deps = &t0};
  return rc ? rc : hbg_record_task(rec, &k2, NULL);
}

/* Y = 2 X (SCALE, which may run in place), then Z = Y. */
static int single(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  hbg_tensor a0[2] = {b[0], b[1]};
  hbg_scalar two = {.kind = HBG_SCALAR_STATIC, .value = f32(2.0f)};
  hbg_task k0 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a0,
                 .n_scalars = 1, .scalars = &two};
  int rc = hbg_record_task(rec, &k0, NULL);
  hbg_tensor a1[2] = {b[1], b[2]};
  a1[0].mode = HBG_ACCESS_IN;
  hbg_task k1 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a1};
  return rc ? rc : hbg_record_task(rec, &k1, NULL);
}

/* Node 0: Y[0, N/2) = 2 X[0, N/2); node 1: Z[0, N/2) = X[N/2, N); nothing
 * orders them. */
static int halves(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  uint32_t d[1] = {N / 2};
  hbg_tensor x0 = b[0], x1 = b[0], y0 = b[1], z0 = b[2];
  x0.shape[0] = x1.shape[0] = y0.shape[0] = z0.shape[0] = d[0];
  x1.offset += N / 2 * 4;
  hbg_tensor a0[2] = {x0, y0};
  hbg_scalar two = {.kind = HBG_SCALAR_STATIC, .value = f32(2.0f)};
  hbg_task k0 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a0,
                 .n_scalars = 1, .scalars = &two};
  int rc = hbg_record_task(rec, &k0, NULL);
  hbg_tensor a1[2] = {x1, z0};
  hbg_task k1 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a1};
  return rc ? rc : hbg_record_task(rec, &k1, NULL);
}

/* 2100 one-element copies X[k % N] -> Y[k % N]: X and Y have 2100
 * accesses each, 4.4M pairs, past what a replay looks at. */
static int big(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  int rc = 0;
  for (uint32_t k = 0; k < 2100 && !rc; k++) {
    hbg_tensor a[2] = {b[0], b[1]};
    a[0].shape[0] = a[1].shape[0] = 1;
    a[0].offset += (k % N) * 4;
    a[1].offset += (k % N) * 4;
    hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a};
    rc = hbg_record_task(rec, &t, NULL);
  }
  return rc;
}

/* Every node ordered: t = 2 X, then Y = t, then Z = t + t after Y, and no
 * node touches two boundary tensors. No placement of X, Y and Z can race:
 * overlaps run in the recorded order, whatever bytes they share. */
static int line(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  hbg_tensor a0[2] = {b[0], inner(N)};
  hbg_scalar two = {.kind = HBG_SCALAR_STATIC, .value = f32(2.0f)};
  hbg_task k0 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a0,
                 .n_scalars = 1, .scalars = &two};
  hbg_task_id t0, t1;
  int rc = hbg_record_task(rec, &k0, &t0);
  hbg_tensor t = a0[1];
  t.mode = HBG_ACCESS_IN;
  hbg_tensor a1[2] = {t, b[1]};
  hbg_task k1 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a1,
                 .n_deps = 1, .deps = &t0};
  if (!rc)
    rc = hbg_record_task(rec, &k1, &t1);
  hbg_tensor a2[3] = {t, t, b[2]};
  hbg_task k2 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a2,
                 .n_deps = 1, .deps = &t1};
  return rc ? rc : hbg_record_task(rec, &k2, NULL);
}

/* One submission of key over (x, y, z) element offsets in buf; the bind
 * launched and waited when the submission is accepted. */
static int replay(uint64_t key, hbg_record_fn fn, uint64_t x, uint64_t y,
                  uint64_t z) {
  hbg_tensor bt[3] = {vec(x, N, HBG_ACCESS_IN), vec(y, N, HBG_ACCESS_OUT),
                      vec(z, N, HBG_ACCESS_OUT)};
  hbg_graph_submit g = {.key = key, .n_tensors = 3, .tensors = bt,
                        .record = fn};
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  int rc = hbg_submit_graph(b, &g, NULL);
  if (rc == 0) {
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
  } else {
    ASSERT_EQ(hbg_bind_fatal(b), 0); /* refused before publication */
  }
  hbg_bind_end(b);
  return rc;
}

static void fill(void) {
  float v[8 * N];
  for (uint32_t i = 0; i < 8 * N; i++)
    v[i] = (float)(i % N) + 1.0f;
  ASSERT_OK(hbg_buffer_write(rt, buf, v, sizeof v));
}

static float at(uint64_t elem) {
  float f;
  ASSERT_OK(hbg_buffer_read(rt, &f, buf + elem * 4, 4));
  return f;
}

int main(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_OK(hbg_buffer_alloc(rt, 8 * N * 4, &buf));

  /* unordered nodes: disjoint replays run, an aliasing one is refused */
  fill();
  ASSERT_OK(replay(1, indep, 0, N, 2 * N));
  ASSERT(at(N) == 2.0f && at(2 * N) == 2.0f);
  ASSERT_OK(replay(1, indep, 3 * N, 4 * N, 5 * N));
  ASSERT_ERR(replay(1, indep, 0, 0, 2 * N), HBG_E_INVAL); /* Y over X */
  ASSERT(strstr(hbg_last_error(), "key 1: boundary tensors 0 and 1 share"));
  ASSERT(strstr(hbg_last_error(), "not ordered"));
  ASSERT_ERR(replay(1, indep, 0, N, N + N / 2), HBG_E_INVAL); /* Z over Y */
  ASSERT(strstr(hbg_last_error(), "boundary tensors 1 and 2"));
  /* one element of overlap is enough */
  ASSERT_ERR(replay(1, indep, 0, N - 1, 3 * N), HBG_E_INVAL);
  /* nothing ran: the values are the first replay's */
  ASSERT(at(N) == 2.0f && at(0) == 1.0f);

  /* ordered nodes: Y and Z may alias X, the recorded order decides */
  fill();
  ASSERT_OK(replay(2, chain, 0, N, 2 * N)); /* records */
  ASSERT_OK(replay(2, chain, 3 * N, 3 * N, 4 * N)); /* Y is X */
  ASSERT(at(3 * N) == 2.0f && at(4 * N) == 4.0f);
  /* but Y and Z are written by nodes nothing orders with each other */
  ASSERT_ERR(replay(2, chain, 0, N, N), HBG_E_INVAL);

  /* recorded over aliasing tensors: the recorder saw the overlap and
   * ordered the nodes, so the same aliasing replays run */
  fill();
  ASSERT_OK(replay(3, indep, 0, 0, 2 * N));
  ASSERT_OK(replay(3, indep, 3 * N, 3 * N, 5 * N));
  ASSERT_OK(replay(3, indep, 0, N, 2 * N));

  /* one node touching two aliasing tensors (an ADD whose output is an
   * input's bytes under another boundary index) */
  fill();
  ASSERT_OK(replay(4, indep, 0, N, 2 * N));
  ASSERT_ERR(replay(4, indep, 0, N, 0), HBG_E_INVAL); /* Z over X */
  ASSERT(strstr(hbg_last_error(), "boundary tensors 0 and 2"));

  /* in place: one SCALE node may have Y be X exactly (its COPY into Z
   * comes after it), not shifted by an element */
  fill();
  ASSERT_OK(replay(7, single, 0, N, 2 * N));
  ASSERT_OK(replay(7, single, 3 * N, 3 * N, 5 * N));
  ASSERT(at(3 * N) == 2.0f && at(5 * N) == 2.0f);
  ASSERT_ERR(replay(7, single, 0, 1, 2 * N), HBG_E_INVAL);

  /* views: only the bytes nodes touch count. Y's second half is touched by
   * no node, so it may lie over X; its first half, which node 0 writes,
   * may not lie over the half of X node 1 reads. */
  fill();
  ASSERT_OK(replay(5, halves, 0, N, 2 * N));
  ASSERT_OK(replay(5, halves, 4 * N, 4 * N - N / 2, 6 * N));
  ASSERT(at(4 * N - N / 2) == 2.0f && at(6 * N) == (float)(N / 2) + 1.0f);
  ASSERT_ERR(replay(5, halves, 4 * N, 4 * N + N / 2, 6 * N), HBG_E_INVAL);

  /* every node ordered: any overlap runs, in the recorded order (element
   * k of X is k + 1 before, so Y's is 2 (k + 1) and Z's 4 (k + 1),
   * whichever bytes they share) */
  fill();
  ASSERT_OK(replay(8, line, 0, N, 2 * N));
  ASSERT_OK(replay(8, line, 3 * N, 3 * N, 3 * N)); /* all three at once */
  for (uint32_t k = 0; k < N; k++)
    ASSERT(at(3 * N + k) == 4.0f * (float)(k + 1));
  fill();
  ASSERT_OK(replay(8, line, 0, N / 2, N / 2 + 1)); /* shifted views */
  for (uint32_t k = 0; k < N / 2; k++)
    ASSERT(at(k) == (float)(k + 1)); /* X's half before Y */
  ASSERT(at(N / 2) == 2.0f);         /* Y's first element */
  for (uint32_t k = 0; k < N; k++)
    ASSERT(at(N / 2 + 1 + k) == 4.0f * (float)(k + 1)); /* Z over the rest */

  /* too many access pairs to look at: overlapping X and Y is refused
   * whatever the order, and the message says why */
  fill();
  ASSERT_OK(replay(6, big, 0, N, 2 * N));
  ASSERT_OK(replay(6, big, 3 * N, 4 * N, 5 * N));
  ASSERT_ERR(replay(6, big, 0, N / 2, 2 * N), HBG_E_INVAL);
  ASSERT(strstr(hbg_last_error(), "too many"));

  hbg_buffer_free(rt, buf);
  hbg_runtime_destroy(rt);
  printf("graph alias: ok\n");
  return 0;
}
