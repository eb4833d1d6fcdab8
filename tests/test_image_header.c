/* The public image contract (hbg_image.h) on images the library builds:
 * the optional hash callback, kernel-id ranges, and the node iterator
 * resolving every source kind to device addresses. */
#include <hbg/hbg.h>
#include <hbg/hbg_image.h>

#include <stdio.h>
#include <stdlib.h>

#include "common/util.h"
#include "graph/graph.h"
#include "graph_fixture.h"
#include "test.h"

#define A_ADDR 0x100000ull /* boundary 0: 64 f32, element 0 at +128 */
#define B_ADDR 0x200000ull /* boundary 1: 32 f32 */
#define H_ADDR 0x300000ull /* heap block */
#define BSCALAR 0xABCDull

static uint64_t lib_hash(const void *img, uint64_t len, uint64_t off,
                         void *user) {
  ++*(int *)user;
  return hbg__hash_skip(img, len, off);
}
static uint64_t bad_hash(const void *img, uint64_t len, uint64_t off,
                         void *user) {
  (void)user;
  return hbg__hash_skip(img, len, off) + 1;
}

static hbg_tensor g_bt[2];
static hbg_tensor g_args[3][3]; /* each node's arguments as recorded */
static uint64_t g_bs[1] = {BSCALAR};

/* n0: scale(view of b0 elements 16..47; boundary scalar 0) -> t0 (own)
 * n1: add(t0 internal, the same view) -> b1 exact
 * n2: scale(b0 exact; static 7) -> t2 (own) */
static hbg__def *record(void) {
  g_bt[0] = ten(A_ADDR, 128, HBG_DTYPE_F32, HBG_ACCESS_IN, 64, 0);
  g_bt[1] = ten(B_ADDR, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 32, 0);
  hbg_recorder *r;
  ASSERT_OK(hbg__rec_begin(g_bt, 2, g_bs, 1, &r));
  hbg_scalar sb = {0, HBG_SCALAR_BOUNDARY, 0}, s7 = {7, HBG_SCALAR_STATIC, 0};
  g_args[0][0] = ten(A_ADDR, 128 + 16 * 4, HBG_DTYPE_F32, HBG_ACCESS_IN, 32, 0);
  g_args[0][1] = ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 32, 0);
  hbg_task t = task(HBG_KERNEL_SCALE, g_args[0], 2, &sb, 1, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  g_args[1][0] = g_args[0][1];
  g_args[1][0].mode = HBG_ACCESS_IN;
  g_args[1][1] = g_args[0][0];
  g_args[1][2] = g_bt[1];
  t = task(HBG_KERNEL_ADD, g_args[1], 3, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  g_args[2][0] = g_bt[0];
  g_args[2][1] = ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 64, 0);
  t = task(HBG_KERNEL_SCALE, g_args[2], 2, &s7, 1, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(r, &d));
  return d;
}

static uint8_t *copy_of(const void *p, uint32_t n) {
  uint8_t *c = aligned_alloc(64, HBG__ALIGN_UP(n, 64u));
  ASSERT(c);
  memcpy(c, p, n);
  return c;
}

static void test_hash_callback(const hbg__def *d, uint8_t *sub, uint32_t ns) {
  hbg_img_def_view dv;
  int calls = 0;
  ASSERT_OK(hbg_img_def_validate(d->image, d->size, lib_hash, &calls, &dv));
  ASSERT_EQ(calls, 1);
  ASSERT_ERR(hbg_img_def_validate(d->image, d->size, bad_hash, NULL, NULL),
             HBG_E_IMG_HASH);
  /* Without a callback the hash is the caller's business. */
  ASSERT_OK(hbg_img_def_validate(d->image, d->size, NULL, NULL, NULL));
  ASSERT_ERR(hbg_img_sub_validate(sub, ns, bad_hash, NULL, NULL),
             HBG_E_IMG_HASH);
  ASSERT_OK(hbg_img_sub_validate(sub, ns, NULL, NULL, NULL));
  calls = 0;
  ASSERT_OK(hbg_img_sub_validate(sub, ns, lib_hash, &calls, NULL));
  ASSERT_EQ(calls, 1);
}

static void test_kernel_ids(const hbg__def *d) {
  ASSERT(hbg_img_kernel_valid(HBG_KERNEL__COUNT - 1));
  ASSERT(!hbg_img_kernel_valid(HBG_KERNEL__COUNT));
  ASSERT(!hbg_img_kernel_valid(HBG_KERNEL_USER_MIN - 1));
  ASSERT(hbg_img_kernel_valid(HBG_KERNEL_USER_MIN));
  ASSERT(hbg_img_kernel_valid(UINT32_MAX));
  ASSERT(hbg_img_kernel_is_user(HBG_KERNEL_USER_MIN));
  ASSERT(!hbg_img_kernel_is_user(HBG_KERNEL_FILL));
  /* A Definition whose node runs a user kernel is valid; a reserved id
   * is not. */
  uint32_t ids[3] = {HBG_KERNEL_USER_MIN, 0xFFFFFFFFu, HBG_KERNEL__COUNT};
  int want[3] = {0, 0, HBG_E_IMG_FIELD};
  for (int i = 0; i < 3; i++) {
    uint8_t *c = copy_of(d->image, d->size);
    hbg_def_hdr h;
    memcpy(&h, c, sizeof h);
    hbg_def_node *n = (hbg_def_node *)(c + h.off_nodes);
    n[1].kernel = ids[i];
    uint64_t hash = hbg__hash_skip(c, d->size, offsetof(hbg_def_hdr, hash));
    memcpy(c + offsetof(hbg_def_hdr, hash), &hash, sizeof hash);
    ASSERT_ERR(hbg_img_def_validate(c, d->size, lib_hash, &(int){0}, NULL),
               want[i]);
    ASSERT_ERR(hbg__def_validate(c, d->size, NULL), want[i]);
    if (i == 0) { /* hbg inspect names it */
      char *text = NULL;
      size_t tlen = 0;
      FILE *f = open_memstream(&text, &tlen);
      ASSERT(f);
      ASSERT_OK(hbg_image_dump(c, d->size, 0, f));
      fclose(f);
      if (!strstr(text, "n1  user 0x1000"))
        T_FAIL("dump does not name the user kernel:\n%s", text);
      free(text);
    }
    free(c);
  }
}

static uint64_t heap_of(const hbg_tensor *t) {
  ASSERT((t->addr & HBG__HEAP_TAG_MASK) == HBG__HEAP_TAG);
  return t->addr & ~HBG__HEAP_TAG_MASK;
}

static void expect_arg(const hbg_img_graph *g, uint32_t i, uint32_t k,
                       uint32_t src, uint64_t addr, const hbg_tensor *like) {
  hbg_img_arg a;
  ASSERT_OK(hbg_img_graph_tensor(g, i, k, &a));
  ASSERT_EQ(a.src, src);
  ASSERT_UEQ(a.addr, addr);
  ASSERT_UEQ(a.extent, hbg_tensor_extent(like));
  ASSERT_EQ(a.dtype, like->dtype);
  ASSERT_EQ(a.ndim, like->ndim);
  ASSERT_EQ(a.shape[0], like->shape[0]);
  ASSERT_EQ(a.strides[0], like->strides[0]);
  ASSERT_EQ(a.mode, like->mode);
}

static void test_iterator(const hbg__def *d, const uint8_t *sub, uint32_t ns) {
  hbg_img_def_view dv;
  hbg_img_sub_view sv;
  ASSERT_OK(hbg_img_def_validate(d->image, d->size, NULL, NULL, &dv));
  ASSERT_OK(hbg_img_sub_validate(sub, ns, NULL, NULL, &sv));
  ASSERT_OK(hbg_img_sub_check_def(&sv, &dv));
  hbg_img_graph g;
  ASSERT_OK(hbg_img_graph_init(&g, &dv, &sv, H_ADDR));
  ASSERT_EQ(g.hdr.n_nodes, 3);

  hbg_img_node n;
  ASSERT_OK(hbg_img_graph_node(&g, 0, &n));
  ASSERT_EQ(n.kernel, HBG_KERNEL_SCALE);
  ASSERT_EQ(n.n_tensors, 2);
  ASSERT_EQ(n.n_scalars, 1);
  ASSERT_EQ(n.n_fanin, 0);
  ASSERT_EQ(n.n_fanout, 1);
  ASSERT_EQ(n.fanout[0], 1);
  /* view: the boundary's element 0 (A + 128) plus the view's offset */
  expect_arg(&g, 0, 0, HBG_SRC_BOUNDARY_VIEW, A_ADDR + 128 + 64,
             &g_args[0][0]);
  expect_arg(&g, 0, 1, HBG_SRC_OWN_OUTPUT, H_ADDR + heap_of(&g_args[0][1]),
             &g_args[0][1]);
  uint64_t v;
  ASSERT_OK(hbg_img_graph_scalar(&g, 0, 0, &v));
  ASSERT_UEQ(v, BSCALAR);

  ASSERT_OK(hbg_img_graph_node(&g, 1, &n));
  ASSERT_EQ(n.kernel, HBG_KERNEL_ADD);
  ASSERT_EQ(n.n_fanin, 1);
  ASSERT_EQ(n.n_fanout, 0);
  expect_arg(&g, 1, 0, HBG_SRC_INTERNAL, H_ADDR + heap_of(&g_args[0][1]),
             &g_args[1][0]);
  expect_arg(&g, 1, 2, HBG_SRC_BOUNDARY_EXACT, B_ADDR, &g_bt[1]);

  ASSERT_OK(hbg_img_graph_node(&g, 2, &n));
  ASSERT_EQ(n.n_fanin, 0);
  expect_arg(&g, 2, 0, HBG_SRC_BOUNDARY_EXACT, A_ADDR + 128, &g_bt[0]);
  expect_arg(&g, 2, 1, HBG_SRC_OWN_OUTPUT, H_ADDR + heap_of(&g_args[2][1]),
             &g_args[2][1]);
  ASSERT_OK(hbg_img_graph_scalar(&g, 2, 0, &v));
  ASSERT_UEQ(v, 7);

  /* out of range */
  hbg_img_arg a;
  ASSERT_ERR(hbg_img_graph_node(&g, 3, &n), HBG_E_INVAL);
  ASSERT_ERR(hbg_img_graph_tensor(&g, 0, 2, &a), HBG_E_INVAL);
  ASSERT_ERR(hbg_img_graph_tensor(&g, 3, 0, &a), HBG_E_INVAL);
  ASSERT_ERR(hbg_img_graph_scalar(&g, 1, 0, &v), HBG_E_INVAL);
  ASSERT_ERR(hbg_img_graph_init(NULL, &dv, &sv, H_ADDR), HBG_E_INVAL);

  /* Without a Submission: layouts only, boundary addresses and scalars 0. */
  hbg_img_graph m;
  ASSERT_OK(hbg_img_graph_init(&m, &dv, NULL, H_ADDR));
  ASSERT_OK(hbg_img_graph_tensor(&m, 0, 0, &a));
  ASSERT_UEQ(a.addr, 0);
  ASSERT_UEQ(a.base_offset, 64);
  ASSERT_OK(hbg_img_graph_scalar(&m, 0, 0, &v));
  ASSERT_UEQ(v, 0);

  /* A boundary near the top of the address space: the address would wrap. */
  uint8_t *c = copy_of(sub, ns);
  hbg_img_sub_view cv;
  ASSERT_OK(hbg_img_sub_validate(c, ns, NULL, NULL, &cv));
  hbg_sub_bind *sb = (hbg_sub_bind *)(c + cv.hdr->off_tensors);
  sb[0].addr = UINT64_MAX - 64;
  ASSERT_OK(hbg_img_graph_init(&m, &dv, &cv, H_ADDR));
  ASSERT_ERR(hbg_img_graph_tensor(&m, 2, 0, &a), HBG_E_RANGE);
  /* Boundary counts that differ from the Definition's. */
  ((hbg_sub_hdr *)c)->n_scalars = 2;
  ASSERT_ERR(hbg_img_graph_init(&m, &dv, &cv, H_ADDR), HBG_E_IMG_DEF);
  free(c);

  /* The iterator bounds every read by its copy of the validated header: a
   * Definition rewritten afterwards yields an error, not a wild read. */
  uint8_t *dc = copy_of(d->image, d->size);
  hbg_img_def_view cdv;
  ASSERT_OK(hbg_img_def_validate(dc, d->size, NULL, NULL, &cdv));
  ASSERT_OK(hbg_img_graph_init(&m, &cdv, &sv, H_ADDR));
  hbg_def_node *nodes = (hbg_def_node *)(dc + g.hdr.off_nodes);
  uint32_t first = nodes[2].first_tensor;
  ASSERT_EQ(first, 5);
  nodes[2].first_tensor = 1000000;
  ASSERT_ERR(hbg_img_graph_tensor(&m, 2, 0, &a), HBG_E_IMG_REF);
  ASSERT_ERR(hbg_img_graph_node(&m, 2, &n), HBG_E_IMG_REF);
  nodes[2].first_tensor = first;
  ASSERT_OK(hbg_img_graph_tensor(&m, 2, 0, &a));
  hbg_def_tensor *ts = (hbg_def_tensor *)(dc + g.hdr.off_tensors);
  ts[first].ref = 99; /* n2's boundary-exact argument */
  ASSERT_ERR(hbg_img_graph_tensor(&m, 2, 0, &a), HBG_E_IMG_REF);
  ts[first].ref = 0;
  ts[first].src = 9;
  ASSERT_ERR(hbg_img_graph_tensor(&m, 2, 0, &a), HBG_E_IMG_FIELD);
  free(dc);
}

static void test_extent(void) {
  hbg_tensor t = ten(1, 0, HBG_DTYPE_F16, HBG_ACCESS_IN, 3, 5);
  t.strides[0] = 7;
  ASSERT_UEQ(hbg_img_extent(t.dtype, t.ndim, t.mode, t.shape, t.strides),
             hbg_tensor_extent(&t));
  ASSERT_UEQ(hbg_img_extent(t.dtype, t.ndim, t.mode, t.shape, t.strides),
             (2 * 7 + 4 * 1 + 1) * 2);
  uint32_t big[4] = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX};
  ASSERT_UEQ(hbg_img_extent(HBG_DTYPE_I64, 4, 1, big, big), 0);
  ASSERT_UEQ(hbg_img_extent(HBG_DTYPE_F32, 1, 4, t.shape, t.strides), 0);
  ASSERT_UEQ(hbg_img_dtype_size(HBG_DTYPE_I64), 8);
  ASSERT_UEQ(hbg_img_dtype_size(99), 0);
}

int main(void) {
  hbg__def *d = record();
  uint32_t ns = hbg__sub_size(d, 0);
  uint8_t *sub = aligned_alloc(64, HBG__ALIGN_UP(ns, 64u));
  ASSERT(sub);
  ASSERT_EQ(hbg__sub_write(sub, ns, d, 1, 0, g_bt, g_bs, 0), (int)ns);
  test_hash_callback(d, sub, ns);
  test_kernel_ids(d);
  test_iterator(d, sub, ns);
  test_extent();
  free(sub);
  hbg__def_free(d);
  return 0;
}
