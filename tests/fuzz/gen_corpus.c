/* Seed corpus for fuzz_validate: records real graphs and writes their
 * Definition, Submission (plain and with the Definition inline) and a task
 * window as files into the directory given as argv[1]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

#define DIE_IF(c)                                                              \
  do {                                                                         \
    if (c) {                                                                   \
      fprintf(stderr, "fuzz_corpus_gen: %s failed (line %d)\n", #c, __LINE__); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static const char *g_dir;

static void put(const char *name, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  DIE_IF(!f);
  DIE_IF(fwrite(p, 1, n, f) != n);
  DIE_IF(fclose(f) != 0);
}

static hbg_tensor tn(uint64_t addr, uint64_t off, uint32_t dtype,
                     uint32_t mode, uint32_t d0, uint32_t d1) {
  hbg_tensor t;
  uint32_t dims[2] = {d0, d1};
  DIE_IF(hbg_tensor_contig(&t, addr, off, dtype, d1 ? 2 : 1, dims, mode));
  return t;
}

static hbg_tensor own(uint32_t n) {
  return tn(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, n, 0);
}

static hbg_tensor in(hbg_tensor t) {
  t.mode = HBG_ACCESS_IN;
  return t;
}

static hbg_tensor part(hbg_tensor t, uint32_t e, uint32_t n, uint32_t mode) {
  return tn(t.addr, t.offset + 4ull * e, HBG_DTYPE_F32, mode, n, 0);
}

static void rec(hbg_recorder *r, uint32_t kernel, hbg_tensor *a, uint32_t n,
                const hbg_scalar *s, uint32_t ns) {
  hbg_task t = {kernel, n, a, ns, 0, s, NULL};
  DIE_IF(hbg_record_task(r, &t, NULL));
}

/* A miniature decoder layer: hidden h, `heads` heads of size hd. */
static hbg__def *layer(const hbg_tensor *bt, const uint64_t *bs, uint32_t h,
                       uint32_t heads, uint32_t hd) {
  hbg_recorder *r;
  DIE_IF(hbg__rec_begin(bt, 8, bs, 2, &r));
  const hbg_scalar eps = {0x358637bd, HBG_SCALAR_STATIC, 0};
  const hbg_scalar pos = {0, HBG_SCALAR_BOUNDARY, 0};
  const hbg_scalar len = {0, HBG_SCALAR_BOUNDARY, 1};
  hbg_tensor a[5];
  a[0] = in(bt[0]), a[1] = bt[2], a[2] = own(h);
  rec(r, HBG_KERNEL_RMSNORM, a, 3, &eps, 1);
  hbg_tensor x = a[2];
  a[0] = bt[3], a[1] = in(x), a[2] = own(h);
  rec(r, HBG_KERNEL_GEMV, a, 3, NULL, 0);
  hbg_tensor q = a[2];
  a[0] = own(h);
  rec(r, HBG_KERNEL_FILL, a, 1, NULL, 0);
  hbg_tensor att = a[0];
  for (uint32_t i = 0; i < heads; i++) {
    a[0] = part(q, i * hd, hd, HBG_ACCESS_IN), a[1] = own(hd);
    rec(r, HBG_KERNEL_ROPE, a, 2, &pos, 1);
    hbg_tensor qr = a[1];
    a[0] = in(qr);
    a[1] = part(bt[5], i * hd, hd, HBG_ACCESS_OUT); /* cache slot */
    rec(r, HBG_KERNEL_COPY, a, 2, NULL, 0);
    a[0] = in(qr), a[1] = in(bt[5]), a[2] = part(att, i * hd, hd,
                                                  HBG_ACCESS_OUT);
    rec(r, HBG_KERNEL_ATTN, a, 3, &len, 1);
  }
  a[0] = bt[4], a[1] = in(att), a[2] = own(h);
  rec(r, HBG_KERNEL_GEMV, a, 3, NULL, 0);
  hbg_tensor o = a[2];
  a[0] = in(bt[0]), a[1] = in(o), a[2] = bt[6];
  rec(r, HBG_KERNEL_ADD, a, 3, NULL, 0);
  a[0] = in(bt[6]), a[1] = own(h);
  rec(r, HBG_KERNEL_SILU_MUL, a, 2, NULL, 0);
  a[0] = in(a[1]), a[1] = in(bt[6]), a[2] = bt[1];
  rec(r, HBG_KERNEL_ADD, a, 3, NULL, 0);
  a[0] = bt[7];
  rec(r, HBG_KERNEL_SOFTMAX, a, 1, NULL, 0);
  hbg__def *d;
  DIE_IF(hbg__rec_finish(r, &d));
  return d;
}

static void boundary(hbg_tensor *bt, uint32_t h, uint64_t base) {
  bt[0] = tn(base + 0x1000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, h, 0);
  bt[1] = tn(base + 0x2000, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, h, 0);
  bt[2] = tn(base + 0x3000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, h, 0);
  bt[3] = tn(base + 0x4000, 64, HBG_DTYPE_F32, HBG_ACCESS_IN, h, h);
  bt[4] = tn(base + 0x8000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, h, h);
  bt[5] = tn(base + 0xC000, 0, HBG_DTYPE_F32, HBG_ACCESS_INOUT, h, 0);
  bt[6] = tn(base + 0xD000, 0, HBG_DTYPE_F32, HBG_ACCESS_INOUT, h, 0);
  bt[7] = tn(base + 0xE000, 0, HBG_DTYPE_F32, HBG_ACCESS_INOUT, 4, h);
}

static void write_set(const char *tag, uint32_t h, uint32_t heads,
                      uint32_t hd) {
  hbg_tensor bt[8], bt2[8];
  uint64_t bs[2] = {3, 4}, bs2[2] = {5, 6};
  boundary(bt, h, 0);
  boundary(bt2, h, 0x100000);
  hbg__def *d = layer(bt, bs, h, heads, hd);
  char name[64];
  snprintf(name, sizeof name, "def_%s.bin", tag);
  put(name, d->image, d->size);
  for (int inl = 0; inl < 2; inl++) {
    uint32_t sz = hbg__sub_size(d, inl);
    uint8_t *buf = aligned_alloc(8, sz);
    DIE_IF(!buf);
    DIE_IF(hbg__sub_write(buf, sz, d, 0xC0FFEE, 1, bt2, bs2, inl) != (int)sz);
    DIE_IF(hbg__sub_validate(buf, sz, NULL));
    snprintf(name, sizeof name, "sub_%s%s.bin", tag, inl ? "_inline" : "");
    put(name, buf, sz);
    free(buf);
  }
  hbg__def_free(d);
}

/* Seeds just past the rules (bad_*.bin: the CLI test expects every other
 * image to be valid): a Definition whose record writes an
 * input-only boundary tensor (exact, then through a view), hashes made
 * right; a Submission whose boundary tensor ends past 2^64. */
static void write_broken(void) {
  hbg_tensor bt[8], bt2[8];
  uint64_t bs[2] = {3, 4};
  boundary(bt, 16, 0);
  boundary(bt2, 16, 0x100000);
  hbg__def *d = layer(bt, bs, 16, 2, 8);
  for (int view = 0; view < 2; view++) {
    uint8_t *p = aligned_alloc(8, d->size);
    DIE_IF(!p);
    memcpy(p, d->image, d->size);
    hbg_def_hdr *h = (hbg_def_hdr *)p;
    hbg_def_tensor *t = (hbg_def_tensor *)(p + h->off_tensors);
    const hbg_def_bsig *s = (const hbg_def_bsig *)(p + h->off_bsig);
    /* exact: a read of x (bt[0], input-only) made a write; view: a cache
     * slot write (into bt[5]) retargeted to x, which is as long */
    uint32_t i = 0;
    while (i < h->n_tensors &&
           !(view ? t[i].src == HBG_SRC_BOUNDARY_VIEW && t[i].ref == 5 &&
                        (t[i].mode & HBG_ACCESS_OUT)
                  : t[i].src == HBG_SRC_BOUNDARY_EXACT && t[i].ref == 0))
      i++;
    DIE_IF(i == h->n_tensors || s[0].mode != HBG_ACCESS_IN);
    if (view)
      t[i].ref = 0;
    else
      t[i].mode = HBG_ACCESS_INOUT;
    h->hash = hbg__hash_skip(p, d->size, 16);
    DIE_IF(hbg__def_validate(p, d->size, NULL) !=
           (view ? HBG_E_IMG_VIEW_WRITE : HBG_E_IMG_BOUNDARY_WRITE));
    put(view ? "bad_def_view_write.bin" : "bad_def_boundary_write.bin", p,
        d->size);
    free(p);
  }
  uint32_t sz = hbg__sub_size(d, 1);
  uint8_t *buf = aligned_alloc(8, sz);
  DIE_IF(!buf);
  DIE_IF(hbg__sub_write(buf, sz, d, 0xC0FFEE, 1, bt2, bs, 1) != (int)sz);
  hbg_sub_hdr *sh = (hbg_sub_hdr *)buf;
  hbg_sub_bind *b = (hbg_sub_bind *)(buf + sh->off_tensors);
  b[0].offset = 0ull - 64 - b[0].addr; /* element 0 64 bytes below 2^64 */
  sh->hash = hbg__hash_skip(buf, sh->off_def, 16);
  hbg__sub_view sv;
  hbg__def_view dv;
  DIE_IF(hbg__sub_validate(buf, sz, &sv));
  DIE_IF(hbg__def_validate(sv.inline_def, sh->def_size, &dv));
  DIE_IF(hbg__sub_check_def(&sv, &dv) != HBG_E_RANGE);
  put("bad_sub_wrap_inline.bin", buf, sz);
  free(buf);
  hbg__def_free(d);
}

static uint32_t win_entry(uint8_t *e, uint32_t kind, uint32_t kernel,
                          const hbg_tensor *ts, uint32_t nt,
                          const uint32_t *deps, uint32_t nd) {
  hbg_win_task t;
  memset(&t, 0, sizeof t);
  uint32_t off = sizeof t;
  t.kind = kind;
  t.kernel = kernel;
  t.n_tensors = nt;
  t.off_tensors = nt ? off : 0;
  for (uint32_t i = 0; i < nt; i++, off += sizeof(hbg_sub_tensor)) {
    hbg_sub_tensor s;
    memset(&s, 0, sizeof s);
    s.addr = ts[i].addr;
    s.offset = ts[i].offset;
    memcpy(s.shape, ts[i].shape, sizeof s.shape);
    memcpy(s.strides, ts[i].strides, sizeof s.strides);
    s.dtype = ts[i].dtype;
    s.ndim = ts[i].ndim;
    s.mode = ts[i].mode;
    memcpy(e + off, &s, sizeof s);
  }
  if (kind == HBG_WIN_TASK) {
    uint64_t v = 0x3f800000;
    t.n_scalars = 1;
    t.off_scalars = off;
    memcpy(e + off, &v, 8);
    off += 8;
  }
  t.n_deps = nd;
  t.off_deps = nd ? off : 0;
  if (nd)
    memcpy(e + off, deps, 4ull * nd);
  off += (4 * nd + 7) / 8 * 8;
  if (kind == HBG_WIN_GRAPH) {
    t.sub_addr = 0x50000;
    t.sub_size = 216; /* 72 + 8 (addr, offset) records + 2 scalars */
    t.def_addr = 0x60000;
    t.def_size = 8192;
    t.heap_addr = 0x70000;
  }
  t.size = off;
  memcpy(e, &t, sizeof t);
  return off;
}

static void write_window(void) {
  static uint64_t w[512];
  uint8_t *p = (uint8_t *)w;
  hbg_tensor bt[8];
  boundary(bt, 16, 0);
  uint32_t idx[4], off = sizeof(hbg_win_hdr);
  uint32_t d1[1] = {0}, d2[2] = {0, 1}, d3[1] = {2};
  idx[0] = off;
  off += win_entry(p + off, HBG_WIN_TASK, HBG_KERNEL_FILL, bt, 1, NULL, 0);
  idx[1] = off;
  off += win_entry(p + off, HBG_WIN_GRAPH, 0, NULL, 0, d1, 1);
  idx[2] = off;
  off += win_entry(p + off, HBG_WIN_GRAPH, 0, NULL, 0, d2, 2);
  idx[3] = off;
  off += win_entry(p + off, HBG_WIN_TASK, HBG_KERNEL_COPY, bt + 1, 2, d3, 1);
  hbg_win_hdr h;
  memset(&h, 0, sizeof h);
  h.magic = HBG_WIN_MAGIC;
  h.version = HBG_IMG_VERSION;
  h.n_tasks = 4;
  h.off_index = off;
  memcpy(p + off, idx, sizeof idx);
  off += sizeof idx;
  h.total_size = off;
  h.bind_seq = 1;
  memcpy(p, &h, sizeof h);
  DIE_IF(hbg__win_validate(p, off, NULL));
  put("win_small.bin", p, off);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_corpus_gen DIR\n");
    return 2;
  }
  g_dir = argv[1];
  write_set("tiny", 8, 1, 8);
  write_set("small", 16, 2, 8);
  write_set("layer", 64, 8, 8);
  write_window();
  write_broken();
  return 0;
}
