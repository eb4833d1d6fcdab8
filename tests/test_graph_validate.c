/* Validator: one crafted bad image per error code, kind confusion,
 * Submission/Definition mismatch, task windows, and every truncation length
 * of real images (run under ASan: the validator never reads out of bounds). */
#include <stddef.h>

#include <hbg/hbg.h>

#include "common/util.h"
#include "graph/graph.h"
#include "graph_fixture.h"
#include "test.h"

static hbg_tensor g_bt[4];
static uint64_t g_bs[2] = {5, 6};

/* Nodes: n0 rmsnorm(x exact)->own; n1 gemv(W view, n0 internal)->own;
 * n2 copy(n1)->cache view; n3 attn(n0, cache exact)->out exact;
 * n4 scale(out) dep 1. Fanin rows: {} {0} {1} {0,2} {1,3}. */
static hbg__def *small_def_pad(uint64_t eps, uint32_t pad_to) {
  hbg_tensor *bt = g_bt;
  bt[0] = ten(0x1000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 8);
  bt[1] = ten(0x20000, 64, HBG_DTYPE_F32, HBG_ACCESS_IN, 16, 8);
  bt[2] = ten(0x30000, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 8);
  bt[3] = ten(0x40000, 0, HBG_DTYPE_F32, HBG_ACCESS_INOUT, 2, 32);
  hbg_recorder *r;
  ASSERT_OK(hbg__rec_begin(bt, 4, g_bs, 2, &r));
  hbg_tensor a0[2] = {bt[0], ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 8)};
  hbg_scalar s0[1] = {{eps, HBG_SCALAR_STATIC, 0}};
  hbg_task t = task(HBG_KERNEL_RMSNORM, a0, 2, s0, 1, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  hbg_tensor a1[3] = {ten(0x20000, 64 + 128, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 8),
                      ten(a0[1].addr, 32, HBG_DTYPE_F32, HBG_ACCESS_IN, 8, 0),
                      ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 0)};
  t = task(HBG_KERNEL_GEMV, a1, 3, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  hbg_tensor a2[2] = {a1[2], ten(0x40000, 144, HBG_DTYPE_F32, HBG_ACCESS_OUT,
                                 4, 0)};
  a2[0].mode = HBG_ACCESS_IN;
  t = task(HBG_KERNEL_COPY, a2, 2, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  hbg_tensor a3[3] = {a0[1], bt[3], bt[2]};
  a3[0].mode = a3[1].mode = HBG_ACCESS_IN;
  hbg_scalar s3[2] = {{0, HBG_SCALAR_BOUNDARY, 0}, {7, HBG_SCALAR_STATIC, 0}};
  t = task(HBG_KERNEL_ATTN, a3, 3, s3, 2, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  hbg_tensor a4[1] = {bt[2]};
  hbg_scalar s4[1] = {{0, HBG_SCALAR_BOUNDARY, 1}};
  hbg_task_id d4[1] = {1};
  t = task(HBG_KERNEL_SCALE, a4, 1, s4, 1, d4, 1);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  if (pad_to)
    ASSERT_OK(hbg_record_pad(r, pad_to));
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(r, &d));
  return d;
}

static hbg__def *small_def(uint64_t eps) { return small_def_pad(eps, 0); }

/* A larger recording: chains of views, internals and hazards. */
static hbg__def *big_def(void) {
  hbg_tensor bt[6];
  for (uint32_t i = 0; i < 6; i++)
    bt[i] = ten(0x100000 * (i + 1), 64 * i, HBG_DTYPE_F16,
                i < 3 ? HBG_ACCESS_IN : HBG_ACCESS_INOUT, 32, 64);
  uint64_t bs[3] = {1, 2, 3};
  hbg_recorder *r;
  ASSERT_OK(hbg__rec_begin(bt, 6, bs, 3, &r));
  hbg_tensor prev = ten(0, 0, HBG_DTYPE_F16, HBG_ACCESS_OUT, 64, 0);
  hbg_tensor first = prev;
  hbg_task t = task(HBG_KERNEL_FILL, &first, 1, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  prev = first;
  for (uint32_t i = 0; i < 120; i++) {
    uint32_t b = i % 6, row = (i * 7) % 32;
    hbg_tensor a[4];
    a[0] = ten(bt[b].addr, bt[b].offset + row * 128,
               HBG_DTYPE_F16, b < 3 ? HBG_ACCESS_IN : HBG_ACCESS_INOUT, 64, 0);
    a[1] = prev;
    a[1].mode = HBG_ACCESS_IN;
    a[2] = ten(0, 0, HBG_DTYPE_F16, HBG_ACCESS_OUT, 64, 0);
    a[3] = bt[(i + 3) % 6];
    a[3].mode = HBG_ACCESS_IN;
    hbg_scalar s[2] = {{i, HBG_SCALAR_STATIC, 0},
                       {0, HBG_SCALAR_BOUNDARY, i % 3}};
    t = task(1 + i % (HBG_KERNEL__COUNT - 1), a, 4, s, 2, NULL, 0);
    ASSERT_OK(hbg_record_task(r, &t, NULL));
    prev = a[2];
  }
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(r, &d));
  return d;
}

static uint8_t *dup_img(const void *src, uint64_t len, uint64_t extra) {
  uint8_t *p = aligned_alloc(8, HBG__ALIGN_UP(len + extra, 8) + 8);
  ASSERT(p);
  memset(p, 0, HBG__ALIGN_UP(len + extra, 8) + 8);
  memcpy(p, src, len);
  return p;
}

static void rehash(uint8_t *p, uint64_t len) {
  uint64_t z = 0, h;
  memcpy(p + 16, &z, 8); /* hash sits at byte 16 in both headers */
  h = hbg__hash(p, len);
  memcpy(p + 16, &h, 8);
}

static void rehash_sub(uint8_t *p) {
  hbg_sub_hdr *h = (hbg_sub_hdr *)p;
  rehash(p, h->flags & HBG_SUB_INLINE_DEF ? h->off_def : h->total_size);
}

/* ---- Definition ---- */

static hbg__def *D;

#define H ((hbg_def_hdr *)p)
#define NODES ((hbg_def_node *)(p + H->off_nodes))
#define FIN_PTR ((uint32_t *)(p + H->off_fanin_ptr))
#define FIN ((uint32_t *)(p + H->off_fanin))
#define FOUT_PTR ((uint32_t *)(p + H->off_fanout_ptr))
#define FOUT ((uint32_t *)(p + H->off_fanout))
#define ROOTS ((uint32_t *)(p + H->off_roots))
#define TENS ((hbg_def_tensor *)(p + H->off_tensors))
#define SCAL ((hbg_def_scalar *)(p + H->off_scalars))
#define BSIG ((hbg_def_bsig *)(p + H->off_bsig))

/* Apply stmt to a copy of D's image, fix the hash, expect code. */
#define DEF_BAD(code, stmt)                                                    \
  do {                                                                         \
    uint8_t *p = dup_img(D->image, D->size, 0);                                \
    stmt;                                                                      \
    rehash(p, D->size);                                                        \
    int rc__ = hbg__def_validate(p, D->size, NULL);                            \
    if (rc__ != (code))                                                        \
      T_FAIL("%s: got %s, expected %s", #stmt, hbg_err_name(rc__),             \
             hbg_err_name(code));                                              \
    free(p);                                                                   \
  } while (0)

static void test_def_errors(void) {
  const uint32_t len = D->size;
  ASSERT_OK(hbg__def_validate(D->image, len, NULL));
  ASSERT_ERR(hbg__def_validate(NULL, len, NULL), HBG_E_INVAL);

  /* truncation */
  ASSERT_ERR(hbg__def_validate(D->image, sizeof(hbg_def_hdr) - 1, NULL),
             HBG_E_IMG_TRUNCATED);
  ASSERT_ERR(hbg__def_validate(D->image, len - 8, NULL), HBG_E_IMG_TRUNCATED);
  ASSERT_ERR(hbg__def_validate(D->image, 0, NULL), HBG_E_IMG_TRUNCATED);
  /* size: buffer longer than the image says, or absurd sizes */
  {
    uint8_t *p = dup_img(D->image, len, 8);
    ASSERT_ERR(hbg__def_validate(p, len + 8, NULL), HBG_E_IMG_SIZE);
    free(p);
  }
  DEF_BAD(HBG_E_IMG_SIZE, H->total_size = HBG_IMG_MAX_BYTES + 8);
  DEF_BAD(HBG_E_IMG_SIZE, H->total_size = 40);
  DEF_BAD(HBG_E_IMG_SIZE, H->total_size -= 4);
  DEF_BAD(HBG_E_IMG_TRUNCATED, H->total_size += 8);
  /* magic, kind, version */
  DEF_BAD(HBG_E_IMG_MAGIC, H->magic = 0x12345678);
  DEF_BAD(HBG_E_IMG_KIND, H->magic = HBG_SUB_MAGIC);
  DEF_BAD(HBG_E_IMG_KIND, H->magic = HBG_WIN_MAGIC);
  DEF_BAD(HBG_E_IMG_VERSION, H->version = 1);
  DEF_BAD(HBG_E_IMG_VERSION, H->version = HBG_IMG_VERSION + 1);
  /* offsets and alignment */
  DEF_BAD(HBG_E_IMG_OFFSET, H->off_tensors = len - 8);
  DEF_BAD(HBG_E_IMG_OFFSET, H->off_bsig = 0xFFFFFFF8u);
  DEF_BAD(HBG_E_IMG_OFFSET, H->off_fanin = len + 64);
  DEF_BAD(HBG_E_IMG_ALIGN, H->off_nodes += 4);
  DEF_BAD(HBG_E_IMG_ALIGN, H->off_scalars += 1);
  DEF_BAD(HBG_E_IMG_ALIGN, NODES[1].heap_off += 8);
  {
    uint8_t *p = dup_img(D->image, len, 8);
    memmove(p + 4, p, len);
    ASSERT_ERR(hbg__def_validate(p + 4, len, NULL), HBG_E_IMG_ALIGN);
    free(p);
  }
  /* counts */
  DEF_BAD(HBG_E_IMG_COUNT, H->n_nodes = HBG_IMG_MAX_NODES + 1);
  DEF_BAD(HBG_E_IMG_COUNT, H->n_nodes = 0);
  DEF_BAD(HBG_E_IMG_COUNT, H->n_tensors = 0xFFFFFFFFu);
  DEF_BAD(HBG_E_IMG_COUNT, H->n_scalars = 0xFFFFFFFFu);
  DEF_BAD(HBG_E_IMG_COUNT, H->n_edges = 0xFFFFFFFFu);
  DEF_BAD(HBG_E_IMG_COUNT, H->n_btensors = HBG_IMG_MAX_BOUNDARY + 1);
  DEF_BAD(HBG_E_IMG_COUNT, H->n_bscalars = 0x80000000u);
  DEF_BAD(HBG_E_IMG_COUNT, H->n_roots = 6);
  DEF_BAD(HBG_E_IMG_COUNT, H->off_roots = 8); /* table inside the header */
  DEF_BAD(HBG_E_IMG_COUNT, NODES[2].n_tensors = HBG_IMG_MAX_ARGS_PER_NODE + 1);
  /* CSR */
  DEF_BAD(HBG_E_IMG_CSR, FIN_PTR[0] = 1);
  DEF_BAD(HBG_E_IMG_CSR, FIN_PTR[5] = 5);
  DEF_BAD(HBG_E_IMG_CSR, FIN_PTR[2] = FIN_PTR[3] + 1);
  DEF_BAD(HBG_E_IMG_CSR, FIN[FIN_PTR[1]] = 7);           /* id out of range */
  DEF_BAD(HBG_E_IMG_CSR, FIN[FIN_PTR[3] + 1] = 0);       /* duplicate edge */
  DEF_BAD(HBG_E_IMG_CSR, FOUT[FOUT_PTR[2]] = 4);         /* mirror broken */
  DEF_BAD(HBG_E_IMG_CSR, FOUT[FOUT_PTR[2]] = 9);
  DEF_BAD(HBG_E_IMG_CSR, FOUT_PTR[1] += 1);
  /* cycles: self-loop, back edge (fanin and fanout side) */
  DEF_BAD(HBG_E_IMG_CYCLE, FIN[FIN_PTR[1]] = 1);
  DEF_BAD(HBG_E_IMG_CYCLE, FIN[FIN_PTR[2]] = 3);
  DEF_BAD(HBG_E_IMG_CYCLE, FOUT[FOUT_PTR[2]] = 1);
  /* roots */
  DEF_BAD(HBG_E_IMG_ROOTS, ROOTS[0] = 1);
  DEF_BAD(HBG_E_IMG_ROOTS, H->n_roots = 0);
  /* references */
  DEF_BAD(HBG_E_IMG_REF, TENS[3].ref = 1);         /* internal: not earlier */
  DEF_BAD(HBG_E_IMG_REF, TENS[7].ref = 1);         /* internal: no edge */
  DEF_BAD(HBG_E_IMG_REF, TENS[3].offset = 1000);   /* outside producer */
  DEF_BAD(HBG_E_IMG_REF, TENS[3].offset = ~0ull - 8);
  DEF_BAD(HBG_E_IMG_REF, TENS[1].ref = 1);         /* own output of another */
  DEF_BAD(HBG_E_IMG_REF, TENS[0].ref = 4);         /* boundary index */
  DEF_BAD(HBG_E_IMG_REF, TENS[0].offset = 4);      /* exact with offset */
  DEF_BAD(HBG_E_IMG_REF, TENS[0].shape[0] = 3);    /* exact != signature */
  DEF_BAD(HBG_E_IMG_REF, TENS[6].offset = 250);    /* view past boundary */
  DEF_BAD(HBG_E_IMG_REF, TENS[6].ref = 9);
  /* element 0 misaligned for f32: an internal read, a boundary view */
  DEF_BAD(HBG_E_IMG_TENSOR_ALIGN, TENS[3].offset += 2);
  DEF_BAD(HBG_E_IMG_TENSOR_ALIGN, TENS[6].offset += 2);
  DEF_BAD(HBG_E_IMG_REF, SCAL[1].index = 2);       /* boundary scalar */
  DEF_BAD(HBG_E_IMG_REF, NODES[1].first_tensor = 3);
  DEF_BAD(HBG_E_IMG_REF, NODES[4].n_tensors = 2);  /* slice past the table */
  DEF_BAD(HBG_E_IMG_REF, NODES[4].n_scalars = 0);  /* record owned by none */
  DEF_BAD(HBG_E_IMG_REF, NODES[0].heap_size = 1ull << 40);
  DEF_BAD(HBG_E_IMG_REF, H->heap_size = 64);
  /* fields */
  DEF_BAD(HBG_E_IMG_FIELD, H->flags = 1);
  DEF_BAD(HBG_E_IMG_FIELD, H->off_pad = H->off_bsig);   /* pad offset, no pad */
  DEF_BAD(HBG_E_IMG_OFFSET, H->pad_size = 8);            /* pad, no offset */
  DEF_BAD(HBG_E_IMG_FIELD, NODES[2].kernel = 99);
  DEF_BAD(HBG_E_IMG_FIELD, NODES[2].reserved = 1);
  DEF_BAD(HBG_E_IMG_FIELD, TENS[2].dtype = 9);
  DEF_BAD(HBG_E_IMG_FIELD, TENS[2].ndim = 5);
  DEF_BAD(HBG_E_IMG_FIELD, TENS[2].mode = 0);
  DEF_BAD(HBG_E_IMG_FIELD, TENS[2].shape[3] = 1);
  DEF_BAD(HBG_E_IMG_FIELD, TENS[2].src = 0);
  DEF_BAD(HBG_E_IMG_FIELD, TENS[2].src = 5);
  DEF_BAD(HBG_E_IMG_FIELD, TENS[1].mode = HBG_ACCESS_IN); /* own output */
  DEF_BAD(HBG_E_IMG_FIELD, SCAL[0].kind = 2);
  DEF_BAD(HBG_E_IMG_FIELD, SCAL[0].index = 1);
  DEF_BAD(HBG_E_IMG_FIELD, BSIG[1].reserved2 = 1);
  DEF_BAD(HBG_E_IMG_FIELD, BSIG[1].dtype = 0);
  /* writes into input-only boundary tensors (x and W are HBG_ACCESS_IN):
   * a read turned into a write, and a write retargeted */
  DEF_BAD(HBG_E_IMG_BOUNDARY_WRITE, TENS[0].mode = HBG_ACCESS_INOUT);
  DEF_BAD(HBG_E_IMG_BOUNDARY_WRITE, TENS[9].ref = 0); /* out exact -> x */
  DEF_BAD(HBG_E_IMG_VIEW_WRITE, TENS[2].mode = HBG_ACCESS_OUT);
  DEF_BAD(HBG_E_IMG_VIEW_WRITE, TENS[6].ref = 1); /* cache view -> W */
  /* the same with the signature narrowed instead */
  DEF_BAD(HBG_E_IMG_BOUNDARY_WRITE, BSIG[2].mode = HBG_ACCESS_IN);
  DEF_BAD(HBG_E_IMG_VIEW_WRITE, BSIG[3].mode = HBG_ACCESS_IN);

  /* hash: flip a static value and do not fix it */
  {
    uint8_t *p = dup_img(D->image, len, 0);
    SCAL[0].value ^= 1;
    ASSERT_ERR(hbg__def_validate(p, len, NULL), HBG_E_IMG_HASH);
    hbg__def_view v;
    ASSERT_OK(hbg__def_validate_nohash(p, len, &v));
    ASSERT(v.hdr == (const hbg_def_hdr *)p);
    H->hash ^= 1;
    SCAL[0].value ^= 1;
    ASSERT_ERR(hbg__def_validate(p, len, NULL), HBG_E_IMG_HASH);
    free(p);
  }
}

/* Flip every byte of the image (fixing the hash): whatever the verdict, no
 * out-of-bounds read, and the verdict does not depend on the hash. */
static void test_def_bytes(const hbg__def *d, uint32_t step) {
  for (uint32_t i = 0; i < d->size; i += step) {
    if (i >= 16 && i < 24)
      continue;
    uint8_t *p = dup_img(d->image, d->size, 0);
    p[i] ^= 0xA5;
    int a = hbg__def_validate_nohash(p, d->size, NULL);
    rehash(p, d->size);
    int b = hbg__def_validate(p, d->size, NULL);
    ASSERT_EQ(a, b);
    free(p);
  }
}

static void sweep(const uint8_t *img, uint32_t len, int kind);

/* The pad section: hbg_record_pad sizes the image, the pad is its hashed
 * tail after every table, and each way of getting it wrong is rejected. */
static void test_def_pad(void) {
  hbg_recorder *r;
  ASSERT_OK(hbg__rec_begin(g_bt, 4, g_bs, 2, &r));
  ASSERT_ERR(hbg_record_pad(NULL, 4096), HBG_E_INVAL);
  ASSERT_ERR(hbg_record_pad(r, HBG_IMG_MAX_DEF_PAD + 1), HBG_E_LIMIT);
  ASSERT(strstr(hbg_last_error(), "hbg_record_pad: 16777217 bytes"));
  hbg__rec_abort(r);

  const uint32_t natural = D->size;
  const hbg_def_hdr *nh = (const hbg_def_hdr *)D->image;
  ASSERT_EQ(nh->off_pad, 0);
  ASSERT_EQ(nh->pad_size, 0);
  /* at or below the natural size: no pad, the very same image */
  hbg__def *same = small_def_pad(0x3727c5ac, natural);
  ASSERT_EQ(same->size, natural);
  ASSERT_EQ(same->hash, D->hash);
  hbg__def_free(same);

  hbg__def *P = small_def_pad(0x3727c5ac, natural + 1001); /* rounds to 8 */
  const hbg_def_hdr *ph = (const hbg_def_hdr *)P->image;
  ASSERT_EQ(P->size, HBG__ALIGN_UP(natural + 1001, 8u));
  ASSERT_EQ(ph->off_pad, natural);
  ASSERT_EQ(ph->pad_size, P->size - natural);
  ASSERT_NE(P->hash, D->hash);
  /* the tables are untouched: same bytes up to the hash-free header */
  ASSERT_EQ(memcmp(P->image + sizeof(hbg_def_hdr), D->image + sizeof(hbg_def_hdr),
                   natural - sizeof(hbg_def_hdr)),
            0);
  ASSERT_OK(hbg__def_validate(P->image, P->size, NULL));
  hbg__def *copy;
  ASSERT_OK(hbg__def_from_image(P->image, P->size, &copy));
  ASSERT_EQ(copy->size, P->size);
  hbg__def_free(copy);

  const uint32_t len = P->size;
#define PAD_BAD(code, stmt)                                                    \
  do {                                                                         \
    uint8_t *p = dup_img(P->image, len, 0);                                    \
    stmt;                                                                      \
    rehash(p, len);                                                            \
    int rc__ = hbg__def_validate(p, len, NULL);                                \
    if (rc__ != (code))                                                        \
      T_FAIL("%s: got %s, expected %s", #stmt, hbg_err_name(rc__),             \
             hbg_err_name(code));                                              \
    free(p);                                                                   \
  } while (0)
  PAD_BAD(0, p[len - 1] ^= 0xFF); /* opaque: any content */
  PAD_BAD(HBG_E_IMG_ALIGN, H->off_pad += 4; H->pad_size -= 4);
  PAD_BAD(HBG_E_IMG_OFFSET, H->off_pad -= 8; H->pad_size += 8); /* on bsig */
  PAD_BAD(HBG_E_IMG_OFFSET, H->off_pad = 0; H->pad_size = len);
  PAD_BAD(HBG_E_IMG_OFFSET, H->pad_size -= 8);    /* not the tail */
  PAD_BAD(HBG_E_IMG_OFFSET, H->pad_size += 8);    /* past the end */
  PAD_BAD(HBG_E_IMG_OFFSET, H->off_pad = len + 8);
  PAD_BAD(HBG_E_IMG_SIZE, H->pad_size = HBG_IMG_MAX_DEF_PAD + 8);
  PAD_BAD(HBG_E_IMG_FIELD, H->pad_size = 0);       /* offset left behind */
  /* hashed: a pad byte changed without a new hash */
  {
    uint8_t *p = dup_img(P->image, len, 0);
    p[len - 8] ^= 1;
    ASSERT_ERR(hbg__def_validate(p, len, NULL), HBG_E_IMG_HASH);
    ASSERT_OK(hbg__def_validate_nohash(p, len, NULL));
    free(p);
  }
#undef PAD_BAD
  sweep(P->image, P->size, 0);
  test_def_bytes(P, 7);
  hbg__def_free(P);
}

/* Every truncation length, in an exactly sized heap block, with the size
 * field left alone and with it patched to the cut (so the tables are
 * walked). */
static void sweep(const uint8_t *img, uint32_t len, int kind) {
  for (uint32_t n = 0; n < len; n++) {
    uint8_t *p = malloc(n ? n : 1);
    ASSERT(p);
    memcpy(p, img, n);
    int rc = kind == 0   ? hbg__def_validate(p, n, NULL)
             : kind == 1 ? hbg__sub_validate(p, n, NULL)
                         : hbg__win_validate(p, n, NULL);
    ASSERT_NE(rc, 0);
    if (n >= 16 && n % 8 == 0) {
      uint32_t cut = n;
      memcpy(p + 8, &cut, 4);
      if (kind == 0)
        rc = hbg__def_validate(p, n, NULL);
      else if (kind == 1)
        rc = hbg__sub_validate(p, n, NULL);
      else
        rc = hbg__win_validate(p, n, NULL);
      ASSERT_NE(rc, 0);
    }
    free(p);
  }
}

/* ---- Submission ---- */

#define SH ((hbg_sub_hdr *)p)
#define SH_OF(b) ((const hbg_sub_hdr *)(b))

static uint8_t *g_sub;
static uint32_t g_sub_len;

#define SUB_BAD(code, stmt)                                                    \
  do {                                                                         \
    uint8_t *p = dup_img(g_sub, g_sub_len, 0);                                 \
    stmt;                                                                      \
    rehash_sub(p);                                                             \
    int rc__ = hbg__sub_validate(p, g_sub_len, NULL);                          \
    if (rc__ != (code))                                                        \
      T_FAIL("%s: got %s, expected %s", #stmt, hbg_err_name(rc__),             \
             hbg_err_name(code));                                              \
    free(p);                                                                   \
  } while (0)

static void test_sub(void) {
  hbg__sub_view sv;
  hbg__def_view dv;
  uint32_t plain = hbg__sub_size(D, 0), full = hbg__sub_size(D, 1);
  uint8_t *buf = aligned_alloc(8, full);
  ASSERT(buf);
  ASSERT_EQ(hbg__sub_write(buf, full, D, 1, 0, g_bt, g_bs, 0), (int)plain);
  ASSERT_OK(hbg__sub_validate(buf, plain, &sv));
  ASSERT_OK(hbg__def_validate(D->image, D->size, &dv));
  ASSERT_OK(hbg__sub_check_def(&sv, &dv));

  /* kind confusion */
  ASSERT_ERR(hbg__def_validate(buf, plain, NULL), HBG_E_IMG_KIND);
  ASSERT_ERR(hbg__sub_validate(D->image, D->size, NULL), HBG_E_IMG_KIND);
  ASSERT_ERR(hbg__win_validate(buf, plain, NULL), HBG_E_IMG_KIND);

  g_sub = buf;
  g_sub_len = plain;
  ASSERT_ERR(hbg__sub_validate(buf, sizeof(hbg_sub_hdr) - 1, NULL),
             HBG_E_IMG_TRUNCATED);
  ASSERT_ERR(hbg__sub_validate(buf, plain - 8, NULL), HBG_E_IMG_TRUNCATED);
  ASSERT_ERR(hbg__sub_validate(buf + 4, plain - 8, NULL), HBG_E_IMG_ALIGN);
  SUB_BAD(HBG_E_IMG_MAGIC, SH->magic = 1);
  SUB_BAD(HBG_E_IMG_VERSION, SH->version = 0);
  SUB_BAD(HBG_E_IMG_SIZE, SH->total_size = 16);
  SUB_BAD(HBG_E_IMG_FIELD, SH->flags = 2);
  SUB_BAD(HBG_E_IMG_FIELD, SH->reserved = 2);
  SUB_BAD(HBG_E_IMG_FIELD, SH->off_def = 8);
  SUB_BAD(HBG_E_IMG_FIELD, SH->def_size = 0);
  SUB_BAD(HBG_E_IMG_VERSION, SH->version = 1); /* the 56-byte-record format */
  SUB_BAD(HBG_E_IMG_VERSION, SH->version = HBG_IMG_VERSION + 1);
  /* the compact table: header, 16 bytes per boundary tensor, scalars */
  ASSERT_EQ(sizeof(hbg_sub_bind), 16);
  ASSERT_EQ(SH_OF(buf)->off_tensors, sizeof(hbg_sub_hdr));
  ASSERT_EQ(SH_OF(buf)->off_scalars, sizeof(hbg_sub_hdr) + 4 * 16);
  ASSERT_EQ(plain, sizeof(hbg_sub_hdr) + 4 * 16 + 2 * 8);
  for (uint32_t i = 0; i < 4; i++) {
    ASSERT_UEQ(sv.tensors[i].addr, g_bt[i].addr);
    ASSERT_UEQ(sv.tensors[i].offset, g_bt[i].offset);
  }
  /* a boundary tensor at address 0 */
  SUB_BAD(HBG_E_IMG_FIELD, ((hbg_sub_bind *)(p + SH->off_tensors))[0].addr = 0);
  SUB_BAD(HBG_E_IMG_FIELD, ((hbg_sub_bind *)(p + SH->off_tensors))[3].addr = 0);
  /* ...but any offset is the Submission's to give (ranges: device side) */
  SUB_BAD(0, ((hbg_sub_bind *)(p + SH->off_tensors))[2].offset = ~0ull);
  SUB_BAD(HBG_E_IMG_COUNT, SH->n_tensors = HBG_IMG_MAX_BOUNDARY + 1);
  SUB_BAD(HBG_E_IMG_COUNT, SH->off_scalars = 0);
  SUB_BAD(HBG_E_IMG_OFFSET, SH->off_scalars = plain);
  SUB_BAD(HBG_E_IMG_OFFSET,
          SH->n_tensors = (plain - SH->off_tensors) / 16 + 1);
  SUB_BAD(HBG_E_IMG_OFFSET, SH->off_tensors = plain - 8);
  SUB_BAD(HBG_E_IMG_COUNT, SH->off_tensors = 64);
  SUB_BAD(HBG_E_IMG_ALIGN, SH->off_tensors = 76);
  {
    uint8_t *p = dup_img(buf, plain, 0);
    ((uint64_t *)(p + SH->off_scalars))[1] ^= 1;
    ASSERT_ERR(hbg__sub_validate(p, plain, NULL), HBG_E_IMG_HASH);
    free(p);
  }
  sweep(buf, plain, 1);

  /* Submission vs Definition */
  {
    hbg__def *other = small_def(99);
    hbg__def_view ov;
    ASSERT_OK(hbg__def_validate(other->image, other->size, &ov));
    ASSERT_ERR(hbg__sub_check_def(&sv, &ov), HBG_E_IMG_DEF); /* def_hash */
    hbg__def_free(other);

    hbg_sub_hdr h2 = *sv.hdr;
    hbg__sub_view s2 = sv;
    s2.hdr = &h2;
    h2.n_scalars = 1;
    ASSERT_ERR(hbg__sub_check_def(&s2, &dv), HBG_E_IMG_DEF);
    h2 = *sv.hdr;
    h2.n_tensors = 3;
    ASSERT_ERR(hbg__sub_check_def(&s2, &dv), HBG_E_IMG_DEF);
    h2 = *sv.hdr;
    h2.def_size += 8;
    ASSERT_ERR(hbg__sub_check_def(&s2, &dv), HBG_E_IMG_DEF);

    /* The signature lives only in the Definition: a caller that skipped
     * hbg__def_check_boundary cannot put another one into the Submission.
     * Its bytes are those of the matching boundary. */
    hbg_tensor bt[4];
    memcpy(bt, g_bt, sizeof bt);
    bt[3].shape[1] = 16;
    bt[0].mode = HBG_ACCESS_INOUT;
    bt[1].dtype = HBG_DTYPE_I32;
    uint8_t *b2 = aligned_alloc(8, plain);
    ASSERT(b2);
    ASSERT_EQ(hbg__sub_write(b2, plain, D, 1, 0, bt, g_bs, 0), (int)plain);
    ASSERT(memcmp(b2, buf, plain) == 0);
    /* Another signature is another Definition: its hash is what differs. */
    hbg__sub_view sv2;
    uint64_t dh = SH_OF(b2)->def_hash ^ 1;
    memcpy(b2 + offsetof(hbg_sub_hdr, def_hash), &dh, 8);
    rehash_sub(b2);
    ASSERT_OK(hbg__sub_validate(b2, plain, &sv2));
    ASSERT_ERR(hbg__sub_check_def(&sv2, &dv), HBG_E_IMG_DEF);
    /* where the tensors live is not part of the match */
    memcpy(b2, buf, plain);
    ((hbg_sub_bind *)(b2 + SH_OF(b2)->off_tensors))[1].addr = 0x123450;
    ((hbg_sub_bind *)(b2 + SH_OF(b2)->off_tensors))[1].offset = 8;
    rehash_sub(b2);
    ASSERT_OK(hbg__sub_validate(b2, plain, &sv2));
    ASSERT_OK(hbg__sub_check_def(&sv2, &dv));
    /* but element 0 must stay aligned to its dtype: f32 at byte offset 2
     * (boundary 1 itself), or a base that misaligns the view of it */
    ((hbg_sub_bind *)(b2 + SH_OF(b2)->off_tensors))[1].offset = 2;
    rehash_sub(b2);
    ASSERT_OK(hbg__sub_validate(b2, plain, &sv2));
    ASSERT_ERR(hbg__sub_check_def(&sv2, &dv), HBG_E_IMG_TENSOR_ALIGN);
    ((hbg_sub_bind *)(b2 + SH_OF(b2)->off_tensors))[1].offset = 0;
    ((hbg_sub_bind *)(b2 + SH_OF(b2)->off_tensors))[3].addr = 0x40001;
    rehash_sub(b2);
    ASSERT_OK(hbg__sub_validate(b2, plain, &sv2));
    ASSERT_ERR(hbg__sub_check_def(&sv2, &dv), HBG_E_IMG_TENSOR_ALIGN);
    free(b2);
  }

  /* inline Definition */
  ASSERT_EQ(hbg__sub_write(buf, full, D, 1, 0, g_bt, g_bs, 1), (int)full);
  ASSERT_OK(hbg__sub_validate(buf, full, &sv));
  ASSERT(sv.inline_def == buf + plain);
  ASSERT_OK(hbg__def_validate(sv.inline_def, sv.hdr->def_size, &dv));
  ASSERT_OK(hbg__sub_check_def(&sv, &dv));
  g_sub_len = full;
  SUB_BAD(HBG_E_IMG_ALIGN, SH->off_def += 4);
  SUB_BAD(HBG_E_IMG_COUNT, SH->off_def = 8);
  SUB_BAD(HBG_E_IMG_OFFSET, SH->def_size += 8);
  SUB_BAD(HBG_E_IMG_SIZE, SH->def_size -= 8);
  SUB_BAD(HBG_E_IMG_OFFSET,
          (SH->off_def = SH->off_scalars, SH->def_size = full - SH->off_def));
  SUB_BAD(HBG_E_IMG_FIELD, SH->flags = 0);
  sweep(buf, full, 1);
  free(buf);
}

/* ---- task window ---- */

static uint8_t g_win[1024] __attribute__((aligned(8)));
static uint32_t g_win_len;

static uint32_t put_task(uint8_t *e, uint32_t kind, uint32_t kernel,
                         const hbg_tensor *ts, uint32_t nt, const uint64_t *sc,
                         uint32_t ns, const uint32_t *deps, uint32_t nd) {
  hbg_win_task t;
  memset(&t, 0, sizeof t);
  t.kind = kind;
  t.kernel = kernel;
  uint32_t off = sizeof t;
  t.n_tensors = nt;
  t.off_tensors = nt ? off : 0;
  for (uint32_t i = 0; i < nt; i++, off += sizeof(hbg_sub_tensor)) {
    hbg_sub_tensor st;
    memset(&st, 0, sizeof st);
    st.addr = ts[i].addr;
    st.offset = ts[i].offset;
    memcpy(st.shape, ts[i].shape, sizeof st.shape);
    memcpy(st.strides, ts[i].strides, sizeof st.strides);
    st.dtype = ts[i].dtype;
    st.ndim = ts[i].ndim;
    st.mode = ts[i].mode;
    memcpy(e + off, &st, sizeof st);
  }
  t.n_scalars = ns;
  t.off_scalars = ns ? off : 0;
  if (ns)
    memcpy(e + off, sc, ns * 8);
  off += ns * 8;
  t.n_deps = nd;
  t.off_deps = nd ? off : 0;
  if (nd)
    memcpy(e + off, deps, nd * 4);
  off += HBG__ALIGN_UP(nd * 4, 8);
  t.size = off;
  if (kind == HBG_WIN_GRAPH) {
    t.sub_addr = 0x900000;
    t.sub_size = 1024;
    t.def_addr = 0xA00000;
    t.def_size = 4096;
    t.heap_addr = 0xB00000;
  }
  memcpy(e, &t, sizeof t);
  return off;
}

static uint32_t g_idx[3];

static void build_window(void) {
  memset(g_win, 0, sizeof g_win);
  hbg_win_hdr h;
  memset(&h, 0, sizeof h);
  uint32_t off = sizeof h;
  uint64_t sc[1] = {42};
  uint32_t d1[1] = {0}, d2[2] = {0, 1};
  g_idx[0] = off;
  off += put_task(g_win + off, HBG_WIN_TASK, HBG_KERNEL_SCALE, g_bt, 2, sc, 1,
                  NULL, 0);
  g_idx[1] = off;
  off += put_task(g_win + off, HBG_WIN_GRAPH, 0, NULL, 0, NULL, 0, d1, 1);
  g_idx[2] = off;
  off += put_task(g_win + off, HBG_WIN_TASK, HBG_KERNEL_COPY, g_bt + 2, 2,
                  NULL, 0, d2, 2);
  h.off_index = off;
  memcpy(g_win + off, g_idx, sizeof g_idx);
  off += HBG__ALIGN_UP(sizeof g_idx, 8);
  h.magic = HBG_WIN_MAGIC;
  h.version = HBG_IMG_VERSION;
  h.total_size = off;
  h.n_tasks = 3;
  h.bind_seq = 7;
  memcpy(g_win, &h, sizeof h);
  g_win_len = off;
}

#define WH ((hbg_win_hdr *)p)
#define WT(i) ((hbg_win_task *)(p + g_idx[i]))
#define WIDX ((uint32_t *)(p + WH->off_index))

#define WIN_BAD(code, stmt)                                                    \
  do {                                                                         \
    uint8_t *p = dup_img(g_win, g_win_len, 0);                                 \
    stmt;                                                                      \
    int rc__ = hbg__win_validate(p, g_win_len, NULL);                          \
    if (rc__ != (code))                                                        \
      T_FAIL("%s: got %s, expected %s", #stmt, hbg_err_name(rc__),             \
             hbg_err_name(code));                                              \
    free(p);                                                                   \
  } while (0)

static void test_window(void) {
  build_window();
  hbg__win_view w;
  ASSERT_OK(hbg__win_validate(g_win, g_win_len, &w));
  ASSERT_EQ(w.hdr->n_tasks, 3);
  ASSERT(hbg__win_task(&w, 0) == (const hbg_win_task *)(g_win + g_idx[0]));
  ASSERT_EQ(hbg__win_task(&w, 1)->kind, HBG_WIN_GRAPH);
  ASSERT_EQ(hbg__win_task(&w, 2)->kernel, HBG_KERNEL_COPY);
  ASSERT(hbg__win_task(&w, 3) == NULL);
  ASSERT(hbg__win_task(NULL, 0) == NULL);

  ASSERT_ERR(hbg__def_validate(g_win, g_win_len, NULL), HBG_E_IMG_KIND);
  ASSERT_ERR(hbg__win_validate(D->image, D->size, NULL), HBG_E_IMG_KIND);
  ASSERT_ERR(hbg__win_validate(g_win, 63, NULL), HBG_E_IMG_TRUNCATED);
  ASSERT_ERR(hbg__win_validate(g_win, g_win_len - 8, NULL),
             HBG_E_IMG_TRUNCATED);
  ASSERT_ERR(hbg__win_validate(g_win, g_win_len + 8, NULL), HBG_E_IMG_SIZE);
  ASSERT_ERR(hbg__win_validate(g_win + 4, g_win_len, NULL), HBG_E_IMG_ALIGN);
  WIN_BAD(HBG_E_IMG_MAGIC, WH->magic = 0);
  WIN_BAD(HBG_E_IMG_VERSION, WH->version = 9);
  WIN_BAD(HBG_E_IMG_VERSION, WH->version = 1);
  WIN_BAD(HBG_E_IMG_FIELD, WH->reserved[2] = 1);
  WIN_BAD(HBG_E_IMG_COUNT, WH->n_tasks = 1000);
  WIN_BAD(HBG_E_IMG_COUNT, WH->off_index = 8);
  WIN_BAD(HBG_E_IMG_OFFSET, WH->off_index = g_win_len - 8);
  WIN_BAD(HBG_E_IMG_ALIGN, WH->off_index += 4);
  /* index */
  WIN_BAD(HBG_E_IMG_OFFSET, WIDX[0] = g_win_len - 8);
  WIN_BAD(HBG_E_IMG_OFFSET, WIDX[0] = 0xFFFFFFF8u);
  WIN_BAD(HBG_E_IMG_OFFSET, WIDX[1] = g_idx[0]); /* not ascending */
  WIN_BAD(HBG_E_IMG_OFFSET, WIDX[1] = g_idx[1] - 8); /* overlaps entry 0 */
  WIN_BAD(HBG_E_IMG_ALIGN, WIDX[1] += 4);
  /* entries */
  WIN_BAD(HBG_E_IMG_SIZE, WT(0)->size = 64);
  WIN_BAD(HBG_E_IMG_ALIGN, WT(0)->size += 4);
  WIN_BAD(HBG_E_IMG_OFFSET, WT(2)->size += 64);
  WIN_BAD(HBG_E_IMG_OFFSET, WT(0)->size -= 16); /* tables outside entry */
  WIN_BAD(HBG_E_IMG_FIELD, WT(1)->kind = 3);
  WIN_BAD(HBG_E_IMG_FIELD, WT(1)->reserved = 3);
  WIN_BAD(HBG_E_IMG_FIELD, WT(1)->kernel = 1);
  WIN_BAD(HBG_E_IMG_FIELD, WT(1)->sub_size = 0);
  WIN_BAD(HBG_E_IMG_FIELD, WT(1)->def_size = 0);
  WIN_BAD(HBG_E_IMG_FIELD, WT(0)->kernel = HBG_KERNEL__COUNT);
  WIN_BAD(HBG_E_IMG_FIELD,
          ((hbg_sub_tensor *)((uint8_t *)WT(0) + WT(0)->off_tensors))->ndim = 0);
  WIN_BAD(HBG_E_IMG_COUNT, WT(0)->n_tensors = HBG_IMG_MAX_ARGS_PER_NODE + 1);
  WIN_BAD(HBG_E_IMG_COUNT, WT(0)->n_scalars = HBG_IMG_MAX_SCALARS_PER_NODE + 1);
  WIN_BAD(HBG_E_IMG_OFFSET, WT(0)->off_tensors = 8);
  WIN_BAD(HBG_E_IMG_OFFSET, WT(0)->n_tensors = 3);
  WIN_BAD(HBG_E_IMG_OFFSET, WT(2)->n_deps = 0x40000000u);
  WIN_BAD(HBG_E_IMG_ALIGN, WT(0)->off_tensors += 4);
  /* an f32 argument whose element 0 sits at byte offset 2 */
  WIN_BAD(HBG_E_IMG_TENSOR_ALIGN,
          ((hbg_sub_tensor *)((uint8_t *)WT(0) + WT(0)->off_tensors))->offset =
              2);
  /* deps */
  WIN_BAD(HBG_E_IMG_CYCLE,
          ((uint32_t *)((uint8_t *)WT(1) + WT(1)->off_deps))[0] = 1);
  WIN_BAD(HBG_E_IMG_CYCLE,
          ((uint32_t *)((uint8_t *)WT(2) + WT(2)->off_deps))[1] = 2);
  WIN_BAD(HBG_E_IMG_REF,
          ((uint32_t *)((uint8_t *)WT(2) + WT(2)->off_deps))[0] = 3);
  sweep(g_win, g_win_len, 2);
}

/* The recorder never writes such an image: a task writing into a boundary
 * tensor the submission marks input-only is refused, exactly or through a
 * view. */
static void test_record_input_only(void) {
  for (int view = 0; view < 2; view++) {
    hbg_tensor bt[2] = {ten(0x1000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 8),
                        ten(0x2000, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 4, 8)};
    hbg_recorder *r;
    ASSERT_OK(hbg__rec_begin(bt, 2, NULL, 0, &r));
    hbg_tensor a[2] = {bt[1], view ? ten(0x1000, 16, HBG_DTYPE_F32,
                                          HBG_ACCESS_OUT, 4, 0)
                                    : bt[0]};
    a[0].mode = HBG_ACCESS_IN;
    a[1].mode = HBG_ACCESS_OUT;
    hbg_task t = task(HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
    if (view)
      t.args[0] = ten(0x2000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 0);
    ASSERT_ERR(hbg_record_task(r, &t, NULL), HBG_E_INVAL);
    ASSERT(strstr(hbg_last_error(), "input-only") != NULL);
    hbg__rec_abort(r);
  }
}

/* Images the validators accept iterate without an error (hbg_image.h's
 * node iterator). Found by mutating real Submissions: a boundary record
 * whose addr + offset (+ the tensor's extent) passes 2^64 was accepted and
 * then failed in hbg_img_graph_tensor; now hbg_img_sub_check_def refuses
 * it. A heap block that wraps is refused by hbg_img_graph_init. */
static void test_wrap(void) {
  const uint32_t plain = hbg__sub_size(D, 0);
  hbg__def_view dv;
  ASSERT_OK(hbg__def_validate(D->image, D->size, &dv));
  static const struct {
    uint64_t addr, offset;
  } bad[] = {
      {0xFFFFFFFFFFFFFF80ull, 0},          /* the tensor's end wraps */
      {0x20000, 0xFFFFFFFFFFFFF1FCull},    /* as found: addr + offset wraps */
      {0xFFFFFFFFFFFFFF00ull, 0x100},      /* element 0 at 2^64 */
  };
  for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
    uint8_t *p = aligned_alloc(8, plain);
    ASSERT(p);
    ASSERT_EQ(hbg__sub_write(p, plain, D, 1, 0, g_bt, g_bs, 0), (int)plain);
    hbg_sub_bind *b = (hbg_sub_bind *)(p + SH_OF(p)->off_tensors);
    b[1].addr = bad[c].addr;
    b[1].offset = bad[c].offset;
    rehash_sub(p);
    hbg__sub_view sv;
    ASSERT_OK(hbg__sub_validate(p, plain, &sv));
    ASSERT_ERR(hbg__sub_check_def(&sv, &dv), HBG_E_RANGE);
    free(p);
  }
  /* The last byte of the address space is usable. */
  {
    uint8_t *p = aligned_alloc(8, plain);
    ASSERT(p);
    ASSERT_EQ(hbg__sub_write(p, plain, D, 1, 0, g_bt, g_bs, 0), (int)plain);
    hbg_sub_bind *b = (hbg_sub_bind *)(p + SH_OF(p)->off_tensors);
    const hbg_def_bsig *s = &dv.bsig[1];
    b[1].addr = 0 - hbg_img_extent(s->dtype, s->ndim, s->mode, s->shape,
                                   s->strides) - 64; /* ends 64 B below 2^64 */
    b[1].offset = 0;
    rehash_sub(p);
    hbg__sub_view sv;
    ASSERT_OK(hbg__sub_validate(p, plain, &sv));
    ASSERT_OK(hbg__sub_check_def(&sv, &dv));
    hbg_img_graph g;
    ASSERT_OK(hbg_img_graph_init(&g, &dv, &sv, 0x40000000));
    for (uint32_t i = 0; i < dv.hdr->n_nodes; i++) {
      hbg_img_node nd;
      ASSERT_OK(hbg_img_graph_node(&g, i, &nd));
      for (uint32_t k = 0; k < nd.n_tensors; k++) {
        hbg_img_arg a;
        ASSERT_OK(hbg_img_graph_tensor(&g, i, k, &a));
      }
    }
    free(p);
  }
  hbg_img_graph g;
  ASSERT_ERR(hbg_img_graph_init(&g, &dv, NULL, 0 - dv.hdr->heap_size),
             HBG_IMG_E_RANGE);
  ASSERT_OK(hbg_img_graph_init(&g, &dv, NULL, 0 - dv.hdr->heap_size - 64));
}

int main(void) {
  D = small_def(0x3727c5ac);
  test_record_input_only();
  test_def_errors();
  test_def_pad();
  test_def_bytes(D, 1);
  sweep(D->image, D->size, 0);
  test_sub();
  test_wrap();
  test_window();

  hbg__def *big = big_def();
  ASSERT_OK(hbg__def_validate(big->image, big->size, NULL));
  ASSERT_EQ(big->n_nodes, 121);
  sweep(big->image, big->size, 0);
  test_def_bytes(big, 5);
  hbg__def_free(big);
  hbg__def_free(D);
  printf("graph_validate: ok\n");
  return 0;
}
