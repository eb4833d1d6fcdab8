/* Recorder: classification of every source kind, derived edges, roots,
 * determinism, boundary signatures, replay through a Submission. */
#include <hbg/hbg.h>

#include "common/util.h"
#include "graph/graph.h"
#include "graph_fixture.h"
#include "test.h"

static hbg_scalar sstatic(uint64_t v) {
  hbg_scalar s = {v, HBG_SCALAR_STATIC, 0};
  return s;
}
static hbg_scalar sbound(uint32_t i) {
  hbg_scalar s = {0, HBG_SCALAR_BOUNDARY, i};
  return s;
}

static void expect_fanin(const hbg__def_view *v, uint32_t node,
                         const uint32_t *ids, uint32_t n) {
  uint32_t a = v->fanin_ptr[node], b = v->fanin_ptr[node + 1];
  if (b - a != n)
    T_FAIL("node %u: %u fanin edges, expected %u", node, b - a, n);
  for (uint32_t k = 0; k < n; k++)
    if (v->fanin[a + k] != ids[k])
      T_FAIL("node %u fanin[%u] = %u, expected %u", node, k, v->fanin[a + k],
             ids[k]);
}

/* ---- classification ---- */

#define X_ADDR 0x1000u
#define W_ADDR 0x20000u
#define O_ADDR 0x30000u
#define C_ADDR 0x40000u

static void make_boundary(hbg_tensor bt[4], uint64_t base) {
  bt[0] = ten(base + X_ADDR, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 8);
  bt[1] = ten(base + W_ADDR, 64, HBG_DTYPE_F32, HBG_ACCESS_IN, 16, 8);
  bt[2] = ten(base + O_ADDR, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 8);
  bt[3] = ten(base + C_ADDR, 0, HBG_DTYPE_F32, HBG_ACCESS_INOUT, 2, 32);
}

/* The recording every test below replays. args_out (optional) receives the
 * tensors exactly as passed for each node (heap addresses tagged). */
#define SMALL_NODES 5
static int record_small(const hbg_tensor *bt, const uint64_t *bs, uint64_t eps,
                        hbg__def **out, hbg_tensor args_out[][4]) {
  hbg_recorder *r;
  HBG__TRY(hbg__rec_begin(bt, 4, bs, 2, &r));
  hbg_task_id id;
  int rc;
  /* n0: rmsnorm(x exact) -> h (own output) */
  hbg_tensor a0[2] = {bt[0], ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 8)};
  a0[0].mode = HBG_ACCESS_IN;
  hbg_scalar s0[1] = {sstatic(eps)};
  hbg_task t0 = task(HBG_KERNEL_RMSNORM, a0, 2, s0, 1, NULL, 0);
  if ((rc = hbg_record_task(r, &t0, &id)))
    goto err;
  /* n1: gemv(W rows 4..7 view, row 1 of h internal) -> y own */
  hbg_tensor a1[3] = {
      ten(bt[1].addr, bt[1].offset + 4 * 8 * 4, HBG_DTYPE_F32, HBG_ACCESS_IN,
          4, 8),
      ten(a0[1].addr, 32, HBG_DTYPE_F32, HBG_ACCESS_IN, 8, 0),
      ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 0)};
  hbg_task t1 = task(HBG_KERNEL_GEMV, a1, 3, NULL, 0, NULL, 0);
  if ((rc = hbg_record_task(r, &t1, &id)))
    goto err;
  /* n2: copy y into cache row 1 columns 4..7 (boundary view, write) */
  hbg_tensor a2[2] = {a1[2], ten(bt[3].addr, (32 + 4) * 4, HBG_DTYPE_F32,
                                 HBG_ACCESS_OUT, 4, 0)};
  a2[0].mode = HBG_ACCESS_IN;
  hbg_task t2 = task(HBG_KERNEL_COPY, a2, 2, NULL, 0, NULL, 0);
  if ((rc = hbg_record_task(r, &t2, &id)))
    goto err;
  /* n3: attn(h internal, cache exact) -> out exact; scalar = position */
  hbg_tensor a3[3] = {a0[1], bt[3], bt[2]};
  a3[0].mode = HBG_ACCESS_IN;
  a3[1].mode = HBG_ACCESS_IN;
  hbg_scalar s3[2] = {sbound(0), sstatic(7)};
  hbg_task t3 = task(HBG_KERNEL_ATTN, a3, 3, s3, 2, NULL, 0);
  if ((rc = hbg_record_task(r, &t3, &id)))
    goto err;
  /* n4: scale(out exact, in place) by boundary scalar 1, explicit dep 1 */
  hbg_tensor a4[1] = {bt[2]};
  a4[0].mode = HBG_ACCESS_INOUT;
  hbg_scalar s4[1] = {sbound(1)};
  hbg_task_id d4[1] = {1};
  hbg_task t4 = task(HBG_KERNEL_SCALE, a4, 1, s4, 1, d4, 1);
  if ((rc = hbg_record_task(r, &t4, &id)))
    goto err;
  if (args_out) {
    memcpy(args_out[0], a0, sizeof a0);
    memcpy(args_out[1], a1, sizeof a1);
    memcpy(args_out[2], a2, sizeof a2);
    memcpy(args_out[3], a3, sizeof a3);
    memcpy(args_out[4], a4, sizeof a4);
  }
  return hbg__rec_finish(r, out);
err:
  hbg__rec_abort(r);
  return rc;
}

static const uint32_t small_nargs[SMALL_NODES] = {2, 3, 2, 3, 1};

static void test_classify(void) {
  hbg_tensor bt[4];
  make_boundary(bt, 0);
  uint64_t bs[2] = {11, 22};
  hbg_tensor args[SMALL_NODES][4];
  hbg__def *d;
  ASSERT_OK(record_small(bt, bs, 0x3727c5ac, &d, args));
  hbg__def_view v;
  ASSERT_OK(hbg__def_validate(d->image, d->size, &v));
  ASSERT_EQ(v.hdr->n_nodes, SMALL_NODES);
  ASSERT_EQ(d->n_nodes, SMALL_NODES);
  ASSERT_EQ(d->n_btensors, 4);
  ASSERT_EQ(d->n_bscalars, 2);
  ASSERT_UEQ(d->hash, v.hdr->hash);

  /* own outputs: tagged heap addresses, 64-byte aligned, offset 0 */
  ASSERT_UEQ(args[0][1].addr, HBG__HEAP_TAG | 0);
  ASSERT_UEQ(args[0][1].offset, 0);
  ASSERT_UEQ(args[1][2].addr, HBG__HEAP_TAG | 128);
  ASSERT_UEQ(v.nodes[0].heap_off, 0);
  ASSERT_UEQ(v.nodes[0].heap_size, 128);
  ASSERT_UEQ(v.nodes[1].heap_off, 128);
  ASSERT_UEQ(v.nodes[1].heap_size, 16);
  ASSERT_UEQ(v.nodes[2].heap_size, 0);
  ASSERT_UEQ(v.hdr->heap_size, 192);

  const hbg_def_tensor *t = v.tensors;
  /* n0 */
  ASSERT_EQ(t[0].src, HBG_SRC_BOUNDARY_EXACT);
  ASSERT_EQ(t[0].ref, 0);
  ASSERT_EQ(t[0].mode, HBG_ACCESS_IN);
  ASSERT_EQ(t[1].src, HBG_SRC_OWN_OUTPUT);
  ASSERT_EQ(t[1].ref, 0);
  ASSERT_UEQ(t[1].offset, 0);
  /* n1 */
  ASSERT_EQ(t[2].src, HBG_SRC_BOUNDARY_VIEW);
  ASSERT_EQ(t[2].ref, 1);
  ASSERT_UEQ(t[2].offset, 128); /* relative to W's element 0, not its addr */
  ASSERT_EQ(t[2].shape[0], 4);
  ASSERT_EQ(t[3].src, HBG_SRC_INTERNAL);
  ASSERT_EQ(t[3].ref, 0);
  ASSERT_UEQ(t[3].offset, 32);
  ASSERT_EQ(t[3].ndim, 1);
  ASSERT_EQ(t[4].src, HBG_SRC_OWN_OUTPUT);
  ASSERT_EQ(t[4].ref, 1);
  ASSERT_UEQ(t[4].offset, 128);
  /* n2 */
  ASSERT_EQ(t[5].src, HBG_SRC_INTERNAL);
  ASSERT_EQ(t[5].ref, 1);
  ASSERT_EQ(t[6].src, HBG_SRC_BOUNDARY_VIEW);
  ASSERT_EQ(t[6].ref, 3);
  ASSERT_UEQ(t[6].offset, 144);
  ASSERT_EQ(t[6].mode, HBG_ACCESS_OUT);
  /* n3 */
  ASSERT_EQ(t[7].src, HBG_SRC_INTERNAL);
  ASSERT_EQ(t[8].src, HBG_SRC_BOUNDARY_EXACT);
  ASSERT_EQ(t[8].ref, 3);
  ASSERT_EQ(t[9].src, HBG_SRC_BOUNDARY_EXACT);
  ASSERT_EQ(t[9].ref, 2);

  /* scalars */
  const hbg_def_scalar *s = v.scalars;
  ASSERT_EQ(v.hdr->n_scalars, 4);
  ASSERT_EQ(s[0].kind, HBG_SCALAR_STATIC);
  ASSERT_UEQ(s[0].value, 0x3727c5ac);
  ASSERT_EQ(s[1].kind, HBG_SCALAR_BOUNDARY);
  ASSERT_EQ(s[1].index, 0);
  ASSERT_UEQ(s[1].value, 0);
  ASSERT_EQ(s[2].kind, HBG_SCALAR_STATIC);
  ASSERT_UEQ(s[2].value, 7);
  ASSERT_EQ(s[3].kind, HBG_SCALAR_BOUNDARY);
  ASSERT_EQ(s[3].index, 1);

  /* edges: internal (0->1, 1->2, 0->3), RAW on the cache (2->3), explicit
   * dep (1->4), WAW/RAW on out (3->4) */
  expect_fanin(&v, 0, NULL, 0);
  expect_fanin(&v, 1, (const uint32_t[]){0}, 1);
  expect_fanin(&v, 2, (const uint32_t[]){1}, 1);
  expect_fanin(&v, 3, (const uint32_t[]){0, 2}, 2);
  expect_fanin(&v, 4, (const uint32_t[]){1, 3}, 2);
  ASSERT_EQ(v.hdr->n_edges, 6);
  ASSERT_EQ(v.hdr->n_roots, 1);
  ASSERT_EQ(v.roots[0], 0);
  /* fanout mirrors fanin, ascending */
  ASSERT_EQ(v.fanout_ptr[1] - v.fanout_ptr[0], 2);
  ASSERT_EQ(v.fanout[v.fanout_ptr[0]], 1);
  ASSERT_EQ(v.fanout[v.fanout_ptr[0] + 1], 3);
  ASSERT_EQ(v.fanout_ptr[2] - v.fanout_ptr[1], 2);
  ASSERT_EQ(v.fanout[v.fanout_ptr[1]], 2);
  ASSERT_EQ(v.fanout[v.fanout_ptr[1] + 1], 4);

  /* bsig */
  for (uint32_t i = 0; i < 4; i++) {
    ASSERT_EQ(v.bsig[i].dtype, bt[i].dtype);
    ASSERT_EQ(v.bsig[i].mode, bt[i].mode);
    ASSERT_EQ(v.bsig[i].shape[0], bt[i].shape[0]);
    ASSERT_EQ(v.bsig[i].strides[0], bt[i].strides[0]);
  }
  hbg__def_free(d);
}

/* A view goes to the smallest containing boundary tensor, whatever the
 * boundary order: a slice of a cache row is relative to the row (which a
 * replay moves with the position), not to the whole cache. Equal extents:
 * the first one. */
static void test_view_smallest(void) {
  const uint64_t c = 0x50000;
  hbg_tensor bt[4];
  bt[0] = ten(c, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 8, 16);   /* the cache */
  bt[1] = ten(c, 128, HBG_DTYPE_F32, HBG_ACCESS_IN, 16, 0); /* row 2 */
  bt[2] = ten(0x60000, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 0);
  bt[3] = ten(c, 128, HBG_DTYPE_I32, HBG_ACCESS_IN, 16, 0); /* row 2 again */
  hbg_recorder *r;
  ASSERT_OK(hbg__rec_begin(bt, 4, NULL, 0, &r));
  hbg_tensor a[2] = {ten(c, 128 + 16, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 0),
                     bt[2]};
  hbg_task t = task(HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  /* a slice of row 0 only the cache contains */
  hbg_tensor a2[2] = {ten(c, 4, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 0), bt[2]};
  t = task(HBG_KERNEL_COPY, a2, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(r, &d));
  hbg__def_view v;
  ASSERT_OK(hbg__def_validate(d->image, d->size, &v));
  ASSERT_EQ(v.tensors[0].src, HBG_SRC_BOUNDARY_VIEW);
  ASSERT_EQ(v.tensors[0].ref, 1); /* the row, not the cache, not bt[3] */
  ASSERT_UEQ(v.tensors[0].offset, 16);
  ASSERT_EQ(v.tensors[2].src, HBG_SRC_BOUNDARY_VIEW);
  ASSERT_EQ(v.tensors[2].ref, 0);
  ASSERT_UEQ(v.tensors[2].offset, 4);
  hbg__def_free(d);
}

/* A strided boundary tensor (the step's row of every head of a KV cache,
 * [heads][D] with stride T*D) contains its elements only: a slice of the
 * cache that its extent spans but that lies in its holes belongs to the
 * cache, or a replay that moves the row (the next position) would move the
 * slice with it. Slices of the row's own runs still follow the row. */
static void test_view_strided(void) {
  const uint64_t c = 0x50000;
  enum { HK = 2, T = 8, D = 4 };
  hbg_tensor bt[3];
  bt[0] = ten(c, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, HK * T, D); /* the cache */
  bt[1] = ten(c, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, HK, D);    /* the row */
  bt[1].strides[0] = T * D;
  bt[2] = ten(0x60000, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, T * D, 0);
  hbg_recorder *r;
  ASSERT_OK(hbg__rec_begin(bt, 3, NULL, 0, &r));
  /* head 1's part of the row, written; then two slices of the row's first
   * run; head 0's whole cache (inside the row's extent, mostly its hole);
   * a slice crossing from the row's first run into the hole */
  hbg_tensor w[2] = {ten(0x60000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, D, 0),
                     ten(c, T * D * 4, HBG_DTYPE_F32, HBG_ACCESS_OUT, D, 0)};
  hbg_task t = task(HBG_KERNEL_COPY, w, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  const struct {
    uint64_t off;
    uint32_t n;
  } in[] = {{8, 2}, {0, D}, {0, T * D}, {8, D}};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
    hbg_tensor a[2] = {ten(c, in[i].off, HBG_DTYPE_F32, HBG_ACCESS_IN, in[i].n, 0),
                       ten(0x60000, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, in[i].n, 0)};
    t = task(HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
    ASSERT_OK(hbg_record_task(r, &t, NULL));
  }
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(r, &d));
  hbg__def_view v;
  ASSERT_OK(hbg__def_validate(d->image, d->size, &v));
  /* tensors: node 0 (in, out), then nodes 1..4 (in, out) */
  ASSERT_EQ(v.tensors[1].src, HBG_SRC_BOUNDARY_VIEW);
  ASSERT_EQ(v.tensors[1].ref, 1); /* head 1's run of the row */
  ASSERT_UEQ(v.tensors[1].offset, T * D * 4);
  ASSERT_EQ(v.tensors[2].ref, 1); /* inside the first run */
  ASSERT_UEQ(v.tensors[2].offset, 8);
  ASSERT_EQ(v.tensors[4].src, HBG_SRC_BOUNDARY_VIEW);
  ASSERT_EQ(v.tensors[4].ref, 1); /* the first run, whole */
  ASSERT_EQ(v.tensors[6].src, HBG_SRC_BOUNDARY_VIEW);
  ASSERT_EQ(v.tensors[6].ref, 0); /* head 0's cache: the cache's */
  ASSERT_UEQ(v.tensors[6].offset, 0);
  ASSERT_EQ(v.tensors[8].ref, 0); /* crosses into the hole: the cache's */
  ASSERT_UEQ(v.tensors[8].offset, 8);
  hbg__def_free(d);
}

/* ---- boundary hazards ---- */

static void test_hazards(void) {
  hbg_tensor bt[2] = {
      ten(0x1000, 0, HBG_DTYPE_F32, HBG_ACCESS_INOUT, 64, 0),
      ten(0x2000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 64, 0)};
  hbg_recorder *r;
  ASSERT_OK(hbg__rec_begin(bt, 2, NULL, 0, &r));
#define AV(lo, n, mode) ten(0x1000, (lo) * 4, HBG_DTYPE_F32, mode, n, 0)
#define OWN(n) ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, n, 0)
  hbg_task_id id;
  hbg_tensor own0[2] = {AV(0, 32, HBG_ACCESS_IN), OWN(4)};
  hbg_task t = task(HBG_KERNEL_COPY, own0, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n0 reads A[0,32) */
  ASSERT_EQ(id, 0);
  hbg_tensor a1[2] = {AV(32, 32, HBG_ACCESS_IN), OWN(4)};
  t = task(HBG_KERNEL_COPY, a1, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n1 reads A[32,64): RAR */
  hbg_tensor a2[2] = {bt[1], AV(16, 32, HBG_ACCESS_OUT)};
  t = task(HBG_KERNEL_COPY, a2, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n2 writes A[16,48): WAR 0,1 */
  hbg_tensor a3[2] = {AV(0, 8, HBG_ACCESS_IN), OWN(8)};
  t = task(HBG_KERNEL_COPY, a3, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n3 reads A[0,8): no overlap */
  hbg_tensor a4[2] = {AV(40, 4, HBG_ACCESS_IN), OWN(4)};
  t = task(HBG_KERNEL_COPY, a4, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n4 reads A[40,44): RAW 2 */
  hbg_tensor a5[1] = {bt[0]};
  t = task(HBG_KERNEL_FILL, a5, 1, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n5 writes all of A */
  hbg_tensor a6[2] = {AV(0, 4, HBG_ACCESS_IN), OWN(4)};
  t = task(HBG_KERNEL_COPY, a6, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n6 reads A[0,4): RAW 5 only */
  hbg_tensor a7[2] = {bt[1], OWN(64)};
  a7[0].mode = HBG_ACCESS_IN;
  hbg_task_id d7[3] = {3, 3, 6};
  t = task(HBG_KERNEL_COPY, a7, 2, NULL, 0, d7, 3);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n7: explicit deps, dedup */
  hbg_tensor a8[3] = {own0[1], own0[1], OWN(4)};
  a8[0].mode = a8[1].mode = HBG_ACCESS_IN;
  hbg_task_id d8[1] = {0};
  t = task(HBG_KERNEL_ADD, a8, 3, NULL, 0, d8, 1);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n8: internal twice + dep 0 */
  hbg_tensor a9[1] = {own0[1]};
  a9[0].mode = HBG_ACCESS_INOUT;
  t = task(HBG_KERNEL_SCALE, a9, 1, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* n9: in place on n0's output */
  ASSERT_EQ(id, 9);
#undef AV
#undef OWN
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(r, &d));
  hbg__def_view v;
  ASSERT_OK(hbg__def_validate(d->image, d->size, &v));
  expect_fanin(&v, 0, NULL, 0);
  expect_fanin(&v, 1, NULL, 0);
  expect_fanin(&v, 2, (const uint32_t[]){0, 1}, 2);
  expect_fanin(&v, 3, NULL, 0);
  expect_fanin(&v, 4, (const uint32_t[]){2}, 1);
  expect_fanin(&v, 5, (const uint32_t[]){0, 1, 2, 3, 4}, 5);
  expect_fanin(&v, 6, (const uint32_t[]){5}, 1);
  expect_fanin(&v, 7, (const uint32_t[]){3, 6}, 2);
  expect_fanin(&v, 8, (const uint32_t[]){0}, 1);
  /* WAR on the heap: n9 overwrites what n8 read */
  expect_fanin(&v, 9, (const uint32_t[]){0, 8}, 2);
  ASSERT_EQ(v.hdr->n_roots, 3);
  ASSERT_EQ(v.roots[0], 0);
  ASSERT_EQ(v.roots[1], 1);
  ASSERT_EQ(v.roots[2], 3);
  /* every edge goes from a lower to a higher id */
  for (uint32_t c = 0; c < v.hdr->n_nodes; c++)
    for (uint32_t k = v.fanin_ptr[c]; k < v.fanin_ptr[c + 1]; k++)
      ASSERT_LT(v.fanin[k], c);
  hbg__def_free(d);
}

/* ---- errors ---- */

static void test_errors(void) {
  hbg_tensor bt[4];
  make_boundary(bt, 0);
  uint64_t bs[2] = {1, 2};
  hbg_recorder *r = NULL;
  hbg__def *d = NULL;

  ASSERT_ERR(hbg__rec_begin(bt, 4, bs, 2, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg__rec_begin(NULL, 1, bs, 2, &r), HBG_E_INVAL);
  ASSERT_ERR(hbg__rec_begin(bt, 4, NULL, 2, &r), HBG_E_INVAL);
  ASSERT_ERR(hbg__rec_begin(bt, HBG_IMG_MAX_BOUNDARY + 1, bs, 2, &r),
             HBG_E_LIMIT);
  hbg_tensor badb[1] = {bt[0]};
  badb[0].dtype = 0;
  ASSERT_ERR(hbg__rec_begin(badb, 1, NULL, 0, &r), HBG_E_INVAL);
  badb[0] = bt[0];
  badb[0].addr = HBG__HEAP_TAG | 64;
  ASSERT_ERR(hbg__rec_begin(badb, 1, NULL, 0, &r), HBG_E_INVAL);
  ASSERT(r == NULL);

  /* empty recording */
  ASSERT_OK(hbg__rec_begin(bt, 4, bs, 2, &r));
  ASSERT_ERR(hbg__rec_finish(r, &d), HBG_E_EMPTY);
  ASSERT(d == NULL);
  ASSERT_OK(hbg__rec_begin(NULL, 0, NULL, 0, &r));
  ASSERT_ERR(hbg__rec_finish(r, &d), HBG_E_EMPTY);
  hbg__rec_abort(NULL);
  hbg__def_free(NULL);

  ASSERT_OK(hbg__rec_begin(bt, 4, bs, 2, &r));
  uint32_t n;
  ASSERT(hbg_record_tensors(r, &n) == bt);
  ASSERT_EQ(n, 4);
  ASSERT(hbg_record_scalars(r, &n) == bs);
  ASSERT_EQ(n, 2);
  ASSERT(hbg_record_tensors(NULL, &n) == NULL);
  ASSERT_EQ(n, 0);

  hbg_task_id id = 1234;
  hbg_tensor a[2] = {bt[0], ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 8)};
  hbg_task t = task(HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_record_task(NULL, &t, &id), HBG_E_INVAL);
  ASSERT_ERR(hbg_record_task(r, NULL, &id), HBG_E_INVAL);
  t.kernel = HBG_KERNEL__COUNT;
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_KERNEL);
  t.kernel = HBG_KERNEL_COPY;
  t.n_args = HBG_IMG_MAX_ARGS_PER_NODE + 1;
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  t.n_args = 2;
  t.args = NULL;
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  t.args = a;

  /* insane tensors */
  struct {
    int field;
    uint32_t val;
  } bad[] = {{0, 0}, {0, 9}, {1, 0}, {1, 5}, {2, 0}, {2, 4}, {3, 0}, {4, 1}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hbg_tensor x = a[0];
    switch (bad[i].field) {
    case 0: x.dtype = (uint8_t)bad[i].val; break;
    case 1: x.ndim = (uint8_t)bad[i].val; break;
    case 2: x.mode = (uint8_t)bad[i].val; break;
    case 3: x.shape[1] = 0; break;
    case 4: x.shape[3] = 1; break; /* dim at or above ndim must be 0 */
    }
    hbg_tensor xa[2] = {x, a[1]};
    hbg_task tx = task(HBG_KERNEL_COPY, xa, 2, NULL, 0, NULL, 0);
    ASSERT_ERR(hbg_record_task(r, &tx, &id), HBG_E_INVAL);
  }
  /* huge strides: extent overflows */
  {
    hbg_tensor x = a[0];
    x.ndim = 4;
    for (int k = 0; k < 4; k++)
      x.shape[k] = x.strides[k] = 0xFFFFFFFFu;
    hbg_tensor xa[2] = {x, a[1]};
    hbg_task tx = task(HBG_KERNEL_COPY, xa, 2, NULL, 0, NULL, 0);
    ASSERT_ERR(hbg_record_task(r, &tx, &id), HBG_E_INVAL);
  }

  /* a buffer that is not part of the boundary */
  hbg_tensor foreign[2] = {ten(0x9990000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 8, 0),
                           a[1]};
  t = task(HBG_KERNEL_COPY, foreign, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  /* same buffer as a boundary tensor, but past its end */
  hbg_tensor over[2] = {ten(X_ADDR, 31 * 4, HBG_DTYPE_F32, HBG_ACCESS_IN, 2, 0),
                        a[1]};
  t = task(HBG_KERNEL_COPY, over, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  /* before W's element 0 (W has offset 64) */
  hbg_tensor under[2] = {ten(W_ADDR, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 0),
                         a[1]};
  t = task(HBG_KERNEL_COPY, under, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  /* heap address with no producer yet */
  hbg_tensor noprod[2] = {
      ten(HBG__HEAP_TAG, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 0), a[1]};
  t = task(HBG_KERNEL_COPY, noprod, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  /* own output with an offset */
  hbg_tensor ownoff[2] = {a[0], a[1]};
  ownoff[1].offset = 8;
  t = task(HBG_KERNEL_COPY, ownoff, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  /* scalars */
  hbg_scalar sc[1] = {sbound(2)};
  t = task(HBG_KERNEL_COPY, a, 2, sc, 1, NULL, 0);
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  sc[0].kind = 7;
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  t.n_scalars = HBG_IMG_MAX_SCALARS_PER_NODE + 1;
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  /* deps must name earlier nodes */
  hbg_task_id dep[1] = {0};
  t = task(HBG_KERNEL_COPY, a, 2, NULL, 0, dep, 1);
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  dep[0] = HBG_TASK_NONE;
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);

  /* failures left no trace: output untouched, ids continue at 0 */
  ASSERT_EQ(id, 1234);
  ASSERT_UEQ(a[1].addr, 0);
  t = task(HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, &id));
  ASSERT_EQ(id, 0);
  ASSERT_UEQ(a[1].addr, HBG__HEAP_TAG);
  /* internal range past the producer's own outputs */
  hbg_tensor past[2] = {
      ten(a[1].addr, 100, HBG_DTYPE_F32, HBG_ACCESS_IN, 8, 0),
      ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 0)};
  t = task(HBG_KERNEL_COPY, past, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_record_task(r, &t, &id), HBG_E_INVAL);
  past[0].offset = 96;
  ASSERT_OK(hbg_record_task(r, &t, &id)); /* [96,128) fits exactly */
  ASSERT_EQ(id, 1);
  ASSERT_OK(hbg_record_task(r, &t, NULL)); /* out is optional */
  /* but the recording had failures: it is never built */
  d = NULL;
  ASSERT_ERR(hbg__rec_finish(r, &d), HBG_E_INVAL);
  ASSERT(d == NULL);
}

/* ---- determinism, signature, replay ---- */

static void test_deterministic(void) {
  hbg_tensor bt[4], bt2[4];
  make_boundary(bt, 0);
  make_boundary(bt2, 0x1000000); /* other buffers, same layout */
  uint64_t bs[2] = {1, 2}, bs2[2] = {99, 98};
  hbg__def *a, *b, *c, *e;
  ASSERT_OK(record_small(bt, bs, 0x3727c5ac, &a, NULL));
  ASSERT_OK(record_small(bt, bs, 0x3727c5ac, &b, NULL));
  ASSERT_OK(record_small(bt2, bs2, 0x3727c5ac, &c, NULL));
  ASSERT_OK(record_small(bt, bs, 0x3727c5ad, &e, NULL));
  ASSERT_EQ(a->size, b->size);
  ASSERT(memcmp(a->image, b->image, a->size) == 0);
  ASSERT_EQ(a->size, c->size);
  ASSERT(memcmp(a->image, c->image, a->size) == 0);
  ASSERT_UEQ(a->hash, c->hash);
  ASSERT_EQ(a->size, e->size);
  ASSERT(memcmp(a->image, e->image, a->size) != 0);
  ASSERT(a->hash != e->hash);
  ASSERT_UEQ(a->hash, hbg__hash_skip(a->image, a->size, offsetof(hbg_def_hdr, hash)));
  ASSERT_OK(hbg__def_validate(e->image, e->size, NULL));

  /* def_from_image round trip */
  hbg__def *f;
  ASSERT_OK(hbg__def_from_image(a->image, a->size, &f));
  ASSERT(memcmp(f->image, a->image, a->size) == 0);
  ASSERT_UEQ(f->hash, a->hash);
  ASSERT_UEQ(f->heap_size, a->heap_size);
  ASSERT_EQ(f->n_btensors, 4);
  ASSERT_EQ(f->n_bscalars, 2);
  ASSERT_OK(hbg__def_check_boundary(f, bt2, 4, 2));
  hbg__def_free(f);
  f = NULL;
  uint8_t junk[200] = {0};
  ASSERT_ERR(hbg__def_from_image(junk, sizeof junk, &f), HBG_E_IMG_MAGIC);
  ASSERT_ERR(hbg__def_from_image(junk, 8, &f), HBG_E_IMG_TRUNCATED);
  ASSERT(f == NULL);

  hbg__def_free(a);
  hbg__def_free(b);
  hbg__def_free(c);
  hbg__def_free(e);
}

static void test_signature(void) {
  hbg_tensor bt[4];
  make_boundary(bt, 0);
  uint64_t bs[2] = {1, 2};
  hbg__def *d;
  ASSERT_OK(record_small(bt, bs, 1, &d, NULL));
  ASSERT_OK(hbg__def_check_boundary(d, bt, 4, 2));
  hbg_tensor x[4];
  memcpy(x, bt, sizeof x);
  x[2].addr = 0x777000;
  x[2].offset = 4096; /* addresses and offsets are per replay */
  ASSERT_OK(hbg__def_check_boundary(d, x, 4, 2));
  ASSERT_ERR(hbg__def_check_boundary(d, bt, 3, 2), HBG_E_SIGNATURE);
  ASSERT_ERR(hbg__def_check_boundary(d, bt, 4, 1), HBG_E_SIGNATURE);
  ASSERT_ERR(hbg__def_check_boundary(d, NULL, 4, 2), HBG_E_SIGNATURE);
  memcpy(x, bt, sizeof x);
  x[1].shape[0] = 17;
  ASSERT_ERR(hbg__def_check_boundary(d, x, 4, 2), HBG_E_SIGNATURE);
  memcpy(x, bt, sizeof x);
  x[3].strides[1] = 2;
  ASSERT_ERR(hbg__def_check_boundary(d, x, 4, 2), HBG_E_SIGNATURE);
  memcpy(x, bt, sizeof x);
  x[0].dtype = HBG_DTYPE_F16;
  ASSERT_ERR(hbg__def_check_boundary(d, x, 4, 2), HBG_E_SIGNATURE);
  memcpy(x, bt, sizeof x);
  x[0].mode = HBG_ACCESS_INOUT;
  ASSERT_ERR(hbg__def_check_boundary(d, x, 4, 2), HBG_E_SIGNATURE);
  memcpy(x, bt, sizeof x);
  x[0].ndim = 3;
  x[0].shape[2] = 1;
  x[0].strides[2] = 1;
  ASSERT_ERR(hbg__def_check_boundary(d, x, 4, 2), HBG_E_SIGNATURE);
  ASSERT_ERR(hbg__def_check_boundary(NULL, bt, 4, 2), HBG_E_INVAL);
  hbg__def_free(d);
}

/* Resolve node i's tensor k from a Definition and a Submission, as the
 * device does: returns the absolute byte address of element 0. */
static uint64_t resolve(const hbg__def_view *dv, const hbg__sub_view *sv,
                        uint64_t heap, const hbg_def_tensor *t) {
  switch (t->src) {
  case HBG_SRC_BOUNDARY_EXACT:
    return sv->tensors[t->ref].addr + sv->tensors[t->ref].offset;
  case HBG_SRC_BOUNDARY_VIEW:
    return sv->tensors[t->ref].addr + sv->tensors[t->ref].offset + t->offset;
  default:
    (void)dv;
    return heap + t->offset;
  }
}

static void test_replay(void) {
  hbg_tensor b0[4], b1[4];
  make_boundary(b0, 0);
  make_boundary(b1, 0x5000000);
  b1[1].offset = 256; /* a different offset of W is still the same signature */
  uint64_t s0[2] = {1, 2}, s1[2] = {41, 42};
  hbg__def *d, *d1;
  hbg_tensor direct[SMALL_NODES][4];
  ASSERT_OK(record_small(b0, s0, 5, &d, NULL));
  /* what a direct recording of layer 1 passes, for comparison */
  ASSERT_OK(record_small(b1, s1, 5, &d1, direct));
  ASSERT_OK(hbg__def_check_boundary(d, b1, 4, 2));

  uint32_t sz = hbg__sub_size(d, 0);
  /* header, (addr, offset) per boundary tensor, the scalars: nothing else */
  ASSERT_EQ(sizeof(hbg_sub_bind), 16);
  ASSERT_EQ(sz, sizeof(hbg_sub_hdr) + 4 * sizeof(hbg_sub_bind) + 2 * 8);
  ASSERT_EQ(sz, 152);
  uint64_t *buf = calloc(1, sz + d->size);
  ASSERT(buf);
  ASSERT_ERR(hbg__sub_write(buf, sz - 8, d, 0xABC, 3, b1, s1, 0), HBG_E_LIMIT);
  ASSERT_EQ(hbg__sub_write(buf, sz, d, 0xABC, 3, b1, s1, 0), (int)sz);

  hbg__sub_view sv;
  hbg__def_view dv;
  ASSERT_OK(hbg__sub_validate(buf, sz, &sv));
  ASSERT_OK(hbg__def_validate(d->image, d->size, &dv));
  ASSERT_OK(hbg__sub_check_def(&sv, &dv));
  ASSERT(sv.inline_def == NULL);
  ASSERT_UEQ(sv.hdr->full_key, 0xABC);
  ASSERT_EQ(sv.hdr->occurrence, 3);
  ASSERT_UEQ(sv.hdr->def_hash, d->hash);
  ASSERT_EQ(sv.hdr->def_size, d->size);
  ASSERT_UEQ(sv.scalars[0], 41);
  ASSERT_UEQ(sv.scalars[1], 42);
  for (uint32_t i = 0; i < 4; i++) {
    ASSERT_UEQ(sv.tensors[i].addr, b1[i].addr);
    ASSERT_UEQ(sv.tensors[i].offset, b1[i].offset);
  }

  /* every node argument resolves to what layer 1 itself would pass */
  const uint64_t heap = 0x7000000;
  for (uint32_t i = 0; i < SMALL_NODES; i++) {
    const hbg_def_node *n = &dv.nodes[i];
    ASSERT_EQ(n->n_tensors, small_nargs[i]);
    for (uint32_t k = 0; k < n->n_tensors; k++) {
      const hbg_def_tensor *t = &dv.tensors[n->first_tensor + k];
      const hbg_tensor *want = &direct[i][k];
      uint64_t exp = (want->addr & HBG__HEAP_TAG_MASK) == HBG__HEAP_TAG
                         ? heap + (want->addr & ~HBG__HEAP_TAG_MASK) +
                               want->offset
                         : want->addr + want->offset;
      uint64_t got = resolve(&dv, &sv, heap, t);
      if (got != exp)
        T_FAIL("node %u arg %u: 0x%llx vs 0x%llx", i, k,
               (unsigned long long)got, (unsigned long long)exp);
      ASSERT_EQ(t->shape[0], want->shape[0]);
      ASSERT_EQ(t->mode, want->mode);
      if (t->src == HBG_SRC_BOUNDARY_EXACT) {
        /* the rest of a boundary tensor comes from the Definition */
        const hbg_def_bsig *b = &dv.bsig[t->ref];
        ASSERT_EQ(b->dtype, want->dtype);
        ASSERT_EQ(b->ndim, want->ndim);
        ASSERT(memcmp(b->shape, want->shape, sizeof b->shape) == 0);
        ASSERT(memcmp(b->strides, want->strides, sizeof b->strides) == 0);
      }
    }
    for (uint32_t k = 0; k < n->n_scalars; k++) {
      const hbg_def_scalar *s = &dv.scalars[n->first_scalar + k];
      uint64_t val = s->kind == HBG_SCALAR_BOUNDARY ? sv.scalars[s->index]
                                                    : s->value;
      if (i == 3 && k == 0)
        ASSERT_UEQ(val, 41);
      if (i == 4)
        ASSERT_UEQ(val, 42);
    }
  }

  /* inline Definition (deferred policy) */
  uint32_t szi = hbg__sub_size(d, 1);
  ASSERT_EQ(szi, sz + d->size);
  ASSERT_EQ(hbg__sub_write(buf, szi, d, 0xABC, 3, b1, s1, 1), (int)szi);
  ASSERT_OK(hbg__sub_validate(buf, szi, &sv));
  ASSERT(sv.inline_def != NULL);
  ASSERT_EQ(sv.hdr->off_def, sz);
  ASSERT(memcmp(sv.inline_def, d->image, d->size) == 0);
  ASSERT_OK(hbg__def_validate(sv.inline_def, sv.hdr->def_size, &dv));
  ASSERT_OK(hbg__sub_check_def(&sv, &dv));
  /* the Submission hash does not cover the inline copy */
  ((uint8_t *)buf)[sz + sizeof(hbg_def_hdr) + 3] ^= 1;
  ASSERT_OK(hbg__sub_validate(buf, szi, &sv));
  ASSERT(hbg__def_validate(sv.inline_def, sv.hdr->def_size, &dv) != 0);

  free(buf);
  hbg__def_free(d);
  hbg__def_free(d1);
}

int main(void) {
  test_classify();
  test_view_smallest();
  test_view_strided();
  test_hazards();
  test_errors();
  test_deterministic();
  test_signature();
  test_replay();
  printf("graph_record: ok\n");
  return 0;
}
