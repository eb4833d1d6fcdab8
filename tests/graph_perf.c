/* Recording and replay cost of a plausible decoder layer (qwen3-14b shapes:
 * 277 nodes, 26 boundary tensors): a benchmark that prints numbers
 * (docs/BENCHMARKS.md), built with the tests but not one of them: its
 * figures depend on the machine. */
#include <stdio.h>
#include <stdlib.h>

#include <hbg/hbg.h>

#include "common/util.h"
#include "graph/graph.h"
#include "test.h"

enum { HID = 5120, HEADS = 40, KVH = 8, HD = 128, INTER = 17408, SEQ = 4096 };
enum { NBT = 26, NBS = 2 };

typedef struct layer {
  hbg_recorder *r;
  const hbg_tensor *bt;
  int rc;
} layer;

static hbg_tensor tn(uint64_t addr, uint64_t off, uint32_t dtype,
                     uint32_t mode, uint32_t ndim, uint32_t d0, uint32_t d1,
                     uint32_t d2) {
  hbg_tensor t;
  uint32_t dims[3] = {d0, d1, d2};
  ASSERT_OK(hbg_tensor_contig(&t, addr, off, dtype, ndim, dims, mode));
  return t;
}

/* bf16 vector of n elements inside tensor b, starting at element e. */
static hbg_tensor vec(const hbg_tensor *b, uint64_t e, uint32_t n,
                      uint32_t mode) {
  return tn(b->addr, b->offset + e * 2, HBG_DTYPE_BF16, mode, 1, n, 0, 0);
}

/* rows [r0, r0+n) of a bf16 matrix b with k columns. */
static hbg_tensor rows(const hbg_tensor *b, uint32_t r0, uint32_t n,
                       uint32_t k) {
  return tn(b->addr, b->offset + (uint64_t)r0 * k * 2, HBG_DTYPE_BF16,
            HBG_ACCESS_IN, 2, n, k, 0);
}

static hbg_tensor own(uint32_t n) {
  return tn(0, 0, HBG_DTYPE_BF16, HBG_ACCESS_OUT, 1, n, 0, 0);
}

static hbg_tensor in(hbg_tensor t) {
  t.mode = HBG_ACCESS_IN;
  return t;
}

/* Record one node; the last argument is its output, returned as recorded. */
static hbg_tensor node(layer *l, uint32_t kernel, hbg_tensor *a, uint32_t n,
                       const hbg_scalar *s, uint32_t ns) {
  hbg_task t = {kernel, n, a, ns, 0, s, NULL};
  if (l->rc == 0)
    l->rc = hbg_record_task(l->r, &t, NULL);
  return a[n - 1];
}

static void make_boundary(hbg_tensor *bt, uint64_t base) {
  const uint32_t B = HBG_DTYPE_BF16, IN = HBG_ACCESS_IN;
  uint64_t a = base;
#define NEXT (a += 0x10000000ull)
  bt[0] = tn(NEXT, 0, B, IN, 1, HID, 0, 0);                /* x_in */
  bt[1] = tn(NEXT, 0, B, HBG_ACCESS_OUT, 1, HID, 0, 0);    /* x_out */
  bt[2] = tn(NEXT, 0, B, IN, 1, HID, 0, 0);                /* w_in_norm */
  bt[3] = tn(NEXT, 0, B, IN, 2, HID, HID, 0);              /* w_q */
  bt[4] = tn(NEXT, 0, B, IN, 2, KVH * HD, HID, 0);         /* w_k */
  bt[5] = tn(NEXT, 0, B, IN, 2, KVH * HD, HID, 0);         /* w_v */
  bt[6] = tn(NEXT, 0, B, IN, 1, HD, 0, 0);                 /* w_q_norm */
  bt[7] = tn(NEXT, 0, B, IN, 1, HD, 0, 0);                 /* w_k_norm */
  bt[8] = tn(NEXT, 0, B, IN, 2, HID, HID, 0);              /* w_o */
  bt[9] = tn(NEXT, 0, B, IN, 1, HID, 0, 0);                /* w_post_norm */
  bt[10] = tn(NEXT, 0, B, IN, 2, INTER, HID, 0);           /* w_gate */
  bt[11] = tn(NEXT, 0, B, IN, 2, INTER, HID, 0);           /* w_up */
  bt[12] = tn(NEXT, 0, B, IN, 2, HID, INTER, 0);           /* w_down */
  bt[13] = tn(NEXT, 0, B, HBG_ACCESS_INOUT, 3, KVH, SEQ, HD); /* k_cache */
  bt[14] = tn(NEXT, 0, B, HBG_ACCESS_INOUT, 3, KVH, SEQ, HD); /* v_cache */
  bt[15] = tn(NEXT, 0, B, IN, 1, HD, 0, 0);                /* cos */
  bt[16] = tn(NEXT, 0, B, IN, 1, HD, 0, 0);                /* sin */
  bt[17] = tn(NEXT, 0, HBG_DTYPE_F32, IN, 1, SEQ, 0, 0);   /* attn_mask */
  bt[18] = tn(NEXT, 0, B, HBG_ACCESS_INOUT, 1, HID, 0, 0); /* residual */
  bt[19] = tn(NEXT, 0, HBG_DTYPE_I32, IN, 1, 256, 0, 0);   /* block_table */
  bt[20] = tn(NEXT, 0, HBG_DTYPE_I32, IN, 1, 1, 0, 0);     /* seq_lens */
  bt[21] = tn(NEXT, 0, HBG_DTYPE_I64, IN, 1, 1, 0, 0);     /* slot_mapping */
  bt[22] = tn(NEXT, 0, HBG_DTYPE_I64, IN, 1, 1, 0, 0);     /* positions */
  bt[23] = tn(NEXT, 0, HBG_DTYPE_F32, IN, 1, 1, 0, 0);     /* layer_scale */
  bt[24] = tn(NEXT, 0, HBG_DTYPE_U8, HBG_ACCESS_INOUT, 1, 65536, 0, 0);
  bt[25] = tn(NEXT, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 1, HID, 0, 0);
#undef NEXT
}

static int record_layer(const hbg_tensor *bt, const uint64_t *bs,
                        hbg__def **out) {
  layer L = {NULL, bt, 0};
  HBG__TRY(hbg__rec_begin(bt, NBT, bs, NBS, &L.r));
  const hbg_scalar eps = {0x358637bd, HBG_SCALAR_STATIC, 0};
  const hbg_scalar pos = {0, HBG_SCALAR_BOUNDARY, 0};
  const hbg_scalar kvlen = {0, HBG_SCALAR_BOUNDARY, 1};
  const hbg_scalar inv_sqrt = {0x3db504f3, HBG_SCALAR_STATIC, 0};
  const hbg_scalar zero = {0, HBG_SCALAR_STATIC, 0};

  hbg_tensor a[5];
  a[0] = in(bt[0]), a[1] = bt[2], a[2] = own(HID);
  hbg_tensor h = node(&L, HBG_KERNEL_RMSNORM, a, 3, &eps, 1);

  hbg_tensor q[8], k[2], v;
  for (uint32_t c = 0; c < 8; c++) {
    a[0] = rows(&bt[3], c * 640, 640, HID), a[1] = in(h), a[2] = own(640);
    q[c] = node(&L, HBG_KERNEL_GEMV, a, 3, NULL, 0);
  }
  for (uint32_t c = 0; c < 2; c++) {
    a[0] = rows(&bt[4], c * 512, 512, HID), a[1] = in(h), a[2] = own(512);
    k[c] = node(&L, HBG_KERNEL_GEMV, a, 3, NULL, 0);
  }
  a[0] = bt[5], a[1] = in(h), a[2] = own(KVH * HD);
  v = node(&L, HBG_KERNEL_GEMV, a, 3, NULL, 0);

  hbg_tensor qn[HEADS], kn[KVH], qr[HEADS], kr[KVH], qs[HEADS];
  for (uint32_t i = 0; i < HEADS; i++) {
    a[0] = vec(&q[i / 5], (i % 5) * HD, HD, HBG_ACCESS_IN);
    a[1] = bt[6], a[2] = own(HD);
    qn[i] = node(&L, HBG_KERNEL_RMSNORM, a, 3, &eps, 1);
  }
  for (uint32_t i = 0; i < KVH; i++) {
    a[0] = vec(&k[i / 4], (i % 4) * HD, HD, HBG_ACCESS_IN);
    a[1] = bt[7], a[2] = own(HD);
    kn[i] = node(&L, HBG_KERNEL_RMSNORM, a, 3, &eps, 1);
  }
  for (uint32_t i = 0; i < HEADS; i++) {
    a[0] = in(qn[i]), a[1] = bt[15], a[2] = bt[16], a[3] = own(HD);
    qr[i] = node(&L, HBG_KERNEL_ROPE, a, 4, &pos, 1);
  }
  for (uint32_t i = 0; i < KVH; i++) {
    a[0] = in(kn[i]), a[1] = bt[15], a[2] = bt[16], a[3] = own(HD);
    kr[i] = node(&L, HBG_KERNEL_ROPE, a, 4, &pos, 1);
  }
  for (uint32_t i = 0; i < HEADS; i++) {
    a[0] = in(qr[i]), a[1] = own(HD);
    qs[i] = node(&L, HBG_KERNEL_SCALE, a, 2, &inv_sqrt, 1);
  }
  for (uint32_t i = 0; i < KVH; i++) {
    a[0] = in(kr[i]);
    a[1] = vec(&bt[13], (uint64_t)i * SEQ * HD, HD, HBG_ACCESS_OUT);
    node(&L, HBG_KERNEL_COPY, a, 2, NULL, 0);
    a[0] = vec(&v, i * HD, HD, HBG_ACCESS_IN);
    a[1] = vec(&bt[14], (uint64_t)i * SEQ * HD, HD, HBG_ACCESS_OUT);
    node(&L, HBG_KERNEL_COPY, a, 2, NULL, 0);
  }

  a[0] = own(HID);
  hbg_tensor att = node(&L, HBG_KERNEL_FILL, a, 1, &zero, 1);
  for (uint32_t i = 0; i < HEADS; i++) {
    uint32_t g = i / (HEADS / KVH);
    a[0] = in(qs[i]);
    a[1] = tn(bt[13].addr, (uint64_t)g * SEQ * HD * 2, HBG_DTYPE_BF16,
              HBG_ACCESS_IN, 2, SEQ, HD, 0);
    a[2] = tn(bt[14].addr, (uint64_t)g * SEQ * HD * 2, HBG_DTYPE_BF16,
              HBG_ACCESS_IN, 2, SEQ, HD, 0);
    a[3] = bt[17];
    a[4] = vec(&att, i * HD, HD, HBG_ACCESS_OUT);
    node(&L, HBG_KERNEL_ATTN, a, 5, &kvlen, 1);
  }

  a[0] = own(HID);
  hbg_tensor o = node(&L, HBG_KERNEL_FILL, a, 1, &zero, 1);
  for (uint32_t c = 0; c < 8; c++) {
    a[0] = rows(&bt[8], c * 640, 640, HID), a[1] = in(att);
    a[2] = vec(&o, c * 640, 640, HBG_ACCESS_OUT);
    node(&L, HBG_KERNEL_GEMV, a, 3, NULL, 0);
  }
  a[0] = in(bt[0]), a[1] = in(o), a[2] = bt[18];
  node(&L, HBG_KERNEL_ADD, a, 3, NULL, 0);
  a[0] = in(bt[18]), a[1] = bt[9], a[2] = own(HID);
  hbg_tensor h2 = node(&L, HBG_KERNEL_RMSNORM, a, 3, &eps, 1);

  a[0] = tn(0, 0, HBG_DTYPE_BF16, HBG_ACCESS_OUT, 1, INTER, 0, 0);
  hbg_tensor gate = node(&L, HBG_KERNEL_FILL, a, 1, &zero, 1);
  a[0] = tn(0, 0, HBG_DTYPE_BF16, HBG_ACCESS_OUT, 1, INTER, 0, 0);
  hbg_tensor up = node(&L, HBG_KERNEL_FILL, a, 1, &zero, 1);
  for (uint32_t c = 0; c < 16; c++) {
    a[0] = rows(&bt[10], c * 1088, 1088, HID), a[1] = in(h2);
    a[2] = vec(&gate, c * 1088, 1088, HBG_ACCESS_OUT);
    node(&L, HBG_KERNEL_GEMV, a, 3, NULL, 0);
    a[0] = rows(&bt[11], c * 1088, 1088, HID), a[1] = in(h2);
    a[2] = vec(&up, c * 1088, 1088, HBG_ACCESS_OUT);
    node(&L, HBG_KERNEL_GEMV, a, 3, NULL, 0);
  }
  a[0] = tn(0, 0, HBG_DTYPE_BF16, HBG_ACCESS_OUT, 1, INTER, 0, 0);
  hbg_tensor act = node(&L, HBG_KERNEL_FILL, a, 1, &zero, 1);
  for (uint32_t c = 0; c < 16; c++) {
    a[0] = vec(&gate, c * 1088, 1088, HBG_ACCESS_IN);
    a[1] = vec(&up, c * 1088, 1088, HBG_ACCESS_IN);
    a[2] = vec(&act, c * 1088, 1088, HBG_ACCESS_OUT);
    node(&L, HBG_KERNEL_SILU_MUL, a, 3, NULL, 0);
  }
  a[0] = own(HID);
  hbg_tensor dn = node(&L, HBG_KERNEL_FILL, a, 1, &zero, 1);
  for (uint32_t c = 0; c < 8; c++) {
    a[0] = rows(&bt[12], c * 640, 640, INTER), a[1] = in(act);
    a[2] = vec(&dn, c * 640, 640, HBG_ACCESS_OUT);
    node(&L, HBG_KERNEL_GEMV, a, 3, NULL, 0);
  }
  a[0] = in(bt[18]), a[1] = in(dn), a[2] = bt[1];
  node(&L, HBG_KERNEL_ADD, a, 3, NULL, 0);

  if (L.rc) {
    hbg__rec_abort(L.r);
    return L.rc;
  }
  return hbg__rec_finish(L.r, out);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static uint64_t median(uint64_t *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_u64);
  return v[n / 2];
}

enum { REC_RUNS = 21, REPLAYS = 10000 };

int main(void) {
  hbg_tensor bt0[NBT], bt1[NBT];
  make_boundary(bt0, 0);
  make_boundary(bt1, 0x700000000ull);
  uint64_t bs0[NBS] = {17, 18}, bs1[NBS] = {29, 30};

  static uint64_t t[REPLAYS];
  hbg__def *d = NULL;
  for (int i = 0; i < REC_RUNS; i++) {
    hbg__def *x;
    uint64_t t0 = hbg__now_ns();
    ASSERT_OK(record_layer(bt0, bs0, &x));
    t[i] = hbg__now_ns() - t0;
    if (d) {
      ASSERT_EQ(x->size, d->size);
      ASSERT(memcmp(x->image, d->image, d->size) == 0);
      hbg__def_free(x);
    } else {
      d = x;
    }
  }
  uint64_t rec_ns = median(t, REC_RUNS);

  hbg__def_view dv;
  ASSERT_OK(hbg__def_validate(d->image, d->size, &dv));
  ASSERT_EQ(d->n_nodes, 277);
  ASSERT_EQ(d->n_btensors, NBT);
  ASSERT_EQ(d->n_bscalars, NBS);
  ASSERT_OK(hbg__def_check_boundary(d, bt1, NBT, NBS));
  uint64_t args = dv.hdr->n_tensors, n_int = 0, n_view = 0, n_exact = 0;
  for (uint32_t i = 0; i < dv.hdr->n_tensors; i++) {
    n_int += dv.tensors[i].src == HBG_SRC_INTERNAL;
    n_view += dv.tensors[i].src == HBG_SRC_BOUNDARY_VIEW;
    n_exact += dv.tensors[i].src == HBG_SRC_BOUNDARY_EXACT;
  }

  uint32_t sub_sz = hbg__sub_size(d, 0), inl_sz = hbg__sub_size(d, 1);
  uint8_t *buf = aligned_alloc(64, HBG__ALIGN_UP(inl_sz, 64));
  uint8_t *dst = aligned_alloc(64, HBG__ALIGN_UP(d->size, 64));
  ASSERT(buf && dst);
  memset(buf, 0, HBG__ALIGN_UP(inl_sz, 64));
  memset(dst, 0, HBG__ALIGN_UP(d->size, 64));

  for (int i = 0; i < 1000; i++) /* warm-up */
    ASSERT_EQ(hbg__sub_write(buf, sub_sz, d, 1, (uint32_t)i, bt1, bs1, 0),
              (int)sub_sz);
  for (int i = 0; i < REPLAYS; i++) {
    uint64_t t0 = hbg__now_ns();
    hbg__sub_write(buf, sub_sz, d, 1, (uint32_t)i, bt1, bs1, 0);
    t[i] = hbg__now_ns() - t0;
  }
  uint64_t write_ns = median(t, REPLAYS), write_min = t[0],
           write_p90 = t[REPLAYS * 9 / 10];
  for (int i = 0; i < REPLAYS; i++) {
    uint64_t t0 = hbg__now_ns();
    int rc = hbg__def_check_boundary(d, bt1, NBT, NBS);
    rc |= hbg__sub_write(buf, sub_sz, d, 1, (uint32_t)i, bt1, bs1, 0) < 0;
    t[i] = hbg__now_ns() - t0;
    ASSERT_EQ(rc, 0);
  }
  uint64_t check_write_ns = median(t, REPLAYS);
  for (int i = 0; i < REPLAYS; i++) {
    uint64_t t0 = hbg__now_ns();
    t[i] = hbg__now_ns() - t0;
  }
  uint64_t clock_ns = median(t, REPLAYS);
  hbg__sub_view sv;
  ASSERT_OK(hbg__sub_validate(buf, sub_sz, &sv));
  ASSERT_OK(hbg__sub_check_def(&sv, &dv));
  ASSERT_UEQ(sv.tensors[25].addr, bt1[25].addr);
  ASSERT_UEQ(sv.tensors[25].offset, bt1[25].offset);

  for (int i = 0; i < REPLAYS; i++) {
    uint64_t t0 = hbg__now_ns();
    memcpy(dst, d->image, d->size);
    __asm__ volatile("" : : "r"(dst) : "memory");
    t[i] = hbg__now_ns() - t0;
  }
  uint64_t memcpy_ns = median(t, REPLAYS);
  for (int i = 0; i < 1000; i++) {
    uint64_t t0 = hbg__now_ns();
    hbg__sub_write(buf, inl_sz, d, 1, (uint32_t)i, bt1, bs1, 1);
    t[i] = hbg__now_ns() - t0;
  }
  uint64_t inline_ns = median(t, 1000);
  ASSERT_OK(hbg__sub_validate(buf, inl_sz, &sv));
  ASSERT_OK(hbg__def_validate(sv.inline_def, sv.hdr->def_size, NULL));
  for (int i = 0; i < 1000; i++) {
    uint64_t t0 = hbg__now_ns();
    int rc = hbg__def_validate(d->image, d->size, NULL);
    t[i] = hbg__now_ns() - t0;
    ASSERT_EQ(rc, 0);
  }
  uint64_t validate_ns = median(t, 1000);

  printf("graph_perf: layer of %u nodes, %u edges, %u roots, %" PRIu64
         " tensor args (%" PRIu64 " internal, %" PRIu64 " view, %" PRIu64
         " exact), %u boundary tensors, %u boundary scalars\n",
         d->n_nodes, dv.hdr->n_edges, dv.hdr->n_roots, args, n_int, n_view,
         n_exact, d->n_btensors, d->n_bscalars);
  printf("  recording (median of %d)          %10.1f us\n", REC_RUNS,
         rec_ns / 1e3);
  printf("  Definition size                    %10u B (heap %" PRIu64 " B)\n",
         d->size, d->heap_size);
  printf("  Submission size                    %10u B (inline: %u B)\n",
         sub_sz, inl_sz);
  printf("  hbg__sub_write, median of %d    %10" PRIu64
         " ns (min %" PRIu64 ", p90 %" PRIu64 ", timer overhead %" PRIu64
         " ns)\n",
         REPLAYS, write_ns, write_min, write_p90, clock_ns);
  printf("  check_boundary + sub_write         %10" PRIu64 " ns\n",
         check_write_ns);
  printf("  memcpy of the Definition image     %10" PRIu64 " ns\n", memcpy_ns);
  printf("  hbg__sub_write with inline copy    %10" PRIu64 " ns\n", inline_ns);
  printf("  hbg__def_validate (full, hash)     %10" PRIu64 " ns\n",
         validate_ns);
  free(buf);
  free(dst);
  hbg__def_free(d);
  return 0;
}
