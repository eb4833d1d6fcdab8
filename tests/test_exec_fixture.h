/* Shared by the exec tests: a sim device, device buffers, hand-built task
 * windows, and a small recorded graph with internal tensors and views. */
#ifndef HBG_TEST_EXEC_FIXTURE_H
#define HBG_TEST_EXEC_FIXTURE_H

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "common/util.h"
#include "kernels/kernels.h"
#include "graph/graph.h"
#include "test.h"

typedef struct xf {
  hbg_device *dev;
  hbg_dev_queue *q;
  uint64_t status;
} xf;

static void xf_open(xf *f, const char *opts) {
  memset(f, 0, sizeof *f);
  ASSERT_OK(hbg_device_open("sim", opts, &f->dev)); /* always built */
  ASSERT_OK(hbg_dev_queue_create(f->dev, &f->q));
  ASSERT_OK(hbg_dev_mem_alloc(f->dev, sizeof(hbg_dev_status), &f->status));
}

static void xf_close(xf *f) {
  ASSERT_OK(hbg_dev_mem_free(f->dev, f->status));
  ASSERT_OK(hbg_dev_queue_destroy(f->dev, f->q));
  hbg_device_close(f->dev);
}

static uint64_t xf_alloc(xf *f, size_t n) {
  uint64_t a;
  ASSERT_OK(hbg_dev_mem_alloc(f->dev, n, &a));
  return a;
}

static void xf_write(xf *f, uint64_t dst, const void *src, size_t n) {
  ASSERT_OK(hbg_dev_copy_h2d(f->dev, dst, src, n));
}

static void xf_read(xf *f, void *dst, uint64_t src, size_t n) {
  ASSERT_OK(hbg_dev_copy_d2h(f->dev, dst, src, n));
}

static uint64_t xf_upload(xf *f, const void *p, size_t n) {
  uint64_t a = xf_alloc(f, n);
  xf_write(f, a, p, n);
  return a;
}

static uint64_t xf_floats(xf *f, const float *v, uint32_t n) {
  return xf_upload(f, v, (size_t)n * 4);
}

/* Launch a window already in device memory; @return the status error. */
static int xf_launch(xf *f, uint64_t win, uint64_t bytes, hbg_dev_status *st) {
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = win,
                           .window_bytes = bytes,
                           .status = f->status};
  memset(st, 0xab, sizeof *st);
  xf_write(f, f->status, st, sizeof *st);
  ASSERT_OK(hbg_dev_launch(f->dev, f->q, &l));
  ASSERT_OK(hbg_dev_queue_sync(f->dev, f->q));
  xf_read(f, st, f->status, sizeof *st);
  return st->error;
}

/* ---- task windows ---- */

#define WB_MAX 4096

typedef struct wb {
  uint8_t *buf;
  size_t len, cap;
  uint32_t n;
  uint32_t off[WB_MAX];
} wb;

static void wb_init(wb *w) {
  memset(w, 0, sizeof *w);
  w->cap = 1 << 16;
  w->buf = calloc(1, w->cap);
  ASSERT(w->buf);
  w->len = sizeof(hbg_win_hdr);
}

static uint8_t *wb_room(wb *w, size_t n) {
  while (w->len + n + 8 * WB_MAX > w->cap) {
    w->buf = realloc(w->buf, w->cap * 2);
    ASSERT(w->buf);
    memset(w->buf + w->cap, 0, w->cap);
    w->cap *= 2;
  }
  ASSERT(w->n < WB_MAX);
  w->off[w->n++] = (uint32_t)w->len;
  uint8_t *p = w->buf + w->len;
  w->len += n;
  return p;
}

static hbg_sub_tensor wb_tensor(const hbg_tensor *t) {
  hbg_sub_tensor s;
  memset(&s, 0, sizeof s);
  s.addr = t->addr;
  s.offset = t->offset;
  memcpy(s.shape, t->shape, sizeof s.shape);
  memcpy(s.strides, t->strides, sizeof s.strides);
  s.dtype = t->dtype;
  s.ndim = t->ndim;
  s.mode = t->mode;
  return s;
}

static uint32_t wb_task(wb *w, uint32_t kernel, const hbg_tensor *t,
                        uint32_t nt, const uint64_t *sc, uint32_t ns,
                        const uint32_t *deps, uint32_t nd) {
  size_t size = sizeof(hbg_win_task) + nt * sizeof(hbg_sub_tensor) + ns * 8 +
                HBG__ALIGN_UP((size_t)nd * 4, 8);
  uint8_t *p = wb_room(w, size);
  hbg_win_task *e = (hbg_win_task *)p;
  memset(e, 0, sizeof *e);
  e->kind = HBG_WIN_TASK;
  e->size = (uint32_t)size;
  e->kernel = kernel;
  e->n_deps = nd;
  e->n_tensors = nt;
  e->n_scalars = ns;
  e->off_tensors = sizeof *e;
  e->off_scalars = (uint32_t)(sizeof *e + nt * sizeof(hbg_sub_tensor));
  e->off_deps = e->off_scalars + ns * 8;
  for (uint32_t i = 0; i < nt; i++) {
    hbg_sub_tensor s = wb_tensor(&t[i]);
    memcpy(p + e->off_tensors + i * sizeof s, &s, sizeof s);
  }
  if (ns)
    memcpy(p + e->off_scalars, sc, ns * 8);
  if (nd)
    memcpy(p + e->off_deps, deps, nd * 4);
  return w->n - 1;
}

static uint32_t wb_graph(wb *w, uint64_t sub, uint32_t sub_size, uint64_t def,
                         uint32_t def_size, uint64_t heap, const uint32_t *deps,
                         uint32_t nd) {
  size_t size = sizeof(hbg_win_task) + HBG__ALIGN_UP((size_t)nd * 4, 8);
  uint8_t *p = wb_room(w, size);
  hbg_win_task *e = (hbg_win_task *)p;
  memset(e, 0, sizeof *e);
  e->kind = HBG_WIN_GRAPH;
  e->size = (uint32_t)size;
  e->n_deps = nd;
  e->off_deps = sizeof *e;
  e->sub_addr = sub;
  e->sub_size = sub_size;
  e->def_addr = def;
  e->def_size = def_size;
  e->heap_addr = heap;
  if (nd)
    memcpy(p + e->off_deps, deps, nd * 4);
  return w->n - 1;
}

/* Append the entry index and write the window header: w->buf[0, w->len)
 * is then the finished window. */
static void wb_finish(wb *w) {
  hbg_win_hdr h;
  memset(&h, 0, sizeof h);
  h.magic = HBG_WIN_MAGIC;
  h.version = HBG_IMG_VERSION;
  h.n_tasks = w->n;
  h.off_index = (uint32_t)w->len;
  memcpy(w->buf + w->len, w->off, w->n * 4);
  w->len = HBG__ALIGN_UP(w->len + w->n * 4, 8);
  h.total_size = (uint32_t)w->len;
  memcpy(w->buf, &h, sizeof h);
}

/* Finish, upload, free the host copy. */
static uint64_t wb_upload(wb *w, xf *f, uint64_t *bytes) {
  wb_finish(w);
  uint64_t a = xf_upload(f, w->buf, w->len);
  *bytes = w->len;
  free(w->buf);
  w->buf = NULL;
  return a;
}

/* ---- a small graph: boundary x[N] in, bias[N] in, y[N] out; scalar s.
 *   n0 t0 = x + bias            (own output)
 *   n1 t1 = t0 * s              (internal in, own output)
 *   n2 y[:N/2] = t1[:N/2] * t0[N/2:]   (internal views, boundary view out)
 *   n3 y[N/2:] = t1[N/2:]              (copy into a boundary view)        */

#define XG_N 64u

static hbg_tensor xg_vec(uint64_t addr, uint64_t off, uint32_t n,
                         uint32_t mode) {
  hbg_tensor t;
  ASSERT_OK(hbg_tensor_contig(&t, addr, off, HBG_DTYPE_F32, 1, &n, mode));
  return t;
}

/* The graph's nodes; n1 scales by s (the boundary scalar in xg_def). */
static inline int xg_record_with(hbg_recorder *rec, hbg_scalar s) {
  uint32_t nt, ns;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_record_scalars(rec, &ns);
  ASSERT(nt == 3 && ns == 1);
  const uint32_t h = XG_N / 2;
  hbg_tensor a0[3] = {bt[0], bt[1], xg_vec(0, 0, XG_N, HBG_ACCESS_OUT)};
  hbg_task k0 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a0};
  HBG__TRY(hbg_record_task(rec, &k0, NULL));
  hbg_tensor t0 = a0[2];
  t0.mode = HBG_ACCESS_IN;
  hbg_tensor a1[2] = {t0, xg_vec(0, 0, XG_N, HBG_ACCESS_OUT)};
  hbg_task k1 = {.kernel = HBG_KERNEL_SCALE,
                 .n_args = 2,
                 .args = a1,
                 .n_scalars = 1,
                 .scalars = &s};
  HBG__TRY(hbg_record_task(rec, &k1, NULL));
  hbg_tensor t1 = a1[1];
  hbg_tensor a2[3] = {xg_vec(t1.addr, 0, h, HBG_ACCESS_IN),
                      xg_vec(t0.addr, h * 4, h, HBG_ACCESS_IN),
                      xg_vec(bt[2].addr, bt[2].offset, h, HBG_ACCESS_OUT)};
  hbg_task k2 = {.kernel = HBG_KERNEL_MUL, .n_args = 3, .args = a2};
  HBG__TRY(hbg_record_task(rec, &k2, NULL));
  hbg_tensor a3[2] = {
      xg_vec(t1.addr, h * 4, h, HBG_ACCESS_IN),
      xg_vec(bt[2].addr, bt[2].offset + h * 4, h, HBG_ACCESS_OUT)};
  hbg_task k3 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a3};
  return hbg_record_task(rec, &k3, NULL);
}

static int xg_record(hbg_recorder *rec) {
  hbg_scalar s = {.kind = HBG_SCALAR_BOUNDARY, .index = 0};
  return xg_record_with(rec, s);
}

static hbg__def *xg_def(void) {
  hbg_tensor bt[3] = {xg_vec(0x1000, 0, XG_N, HBG_ACCESS_IN),
                      xg_vec(0x2000, 0, XG_N, HBG_ACCESS_IN),
                      xg_vec(0x3000, 0, XG_N, HBG_ACCESS_OUT)};
  uint64_t bs = 0;
  hbg_recorder *rec;
  ASSERT_OK(hbg__rec_begin(bt, 3, &bs, 1, &rec));
  int rc = xg_record(rec);
  if (rc) {
    hbg__rec_abort(rec);
    ASSERT_OK(rc);
  }
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(rec, &d));
  ASSERT_EQ(d->n_nodes, 4);
  return d;
}

/* A two-tensor graph whose node 1 is SCALE without its scalar: every
 * device-side checker must reject it at node 1 (HBG_E_KERNEL). */
static inline hbg__def *xg_bad_def(void) {
  hbg_tensor bt[2] = {xg_vec(0x1000, 0, XG_N, HBG_ACCESS_IN),
                      xg_vec(0x2000, 0, XG_N, HBG_ACCESS_OUT)};
  hbg_recorder *rec;
  ASSERT_OK(hbg__rec_begin(bt, 2, NULL, 0, &rec));
  hbg_tensor a0[2] = {bt[0], xg_vec(0, 0, XG_N, HBG_ACCESS_OUT)};
  hbg_task k0 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a0};
  ASSERT_OK(hbg_record_task(rec, &k0, NULL));
  hbg_tensor a1[2] = {a0[1], bt[1]};
  a1[0].mode = HBG_ACCESS_IN;
  hbg_task k1 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a1};
  ASSERT_OK(hbg_record_task(rec, &k1, NULL));
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(rec, &d));
  return d;
}

static void xg_ref(const float *x, const float *b, float s, float *y) {
  float t0[XG_N], t1[XG_N];
  const uint32_t h = XG_N / 2;
  for (uint32_t i = 0; i < XG_N; i++) {
    t0[i] = x[i] + b[i];
    t1[i] = t0[i] * s;
  }
  for (uint32_t i = 0; i < h; i++) {
    y[i] = t1[i] * t0[h + i];
    y[h + i] = t1[h + i];
  }
}

/* A Submission for one replay, uploaded; *size its bytes. */
static uint64_t xg_sub(xf *f, const hbg__def *d, uint64_t x, uint64_t b,
                       uint64_t y, float s, uint32_t occ, int inline_def,
                       uint32_t *size) {
  hbg_tensor bt[3] = {xg_vec(x, 0, XG_N, HBG_ACCESS_IN),
                      xg_vec(b, 0, XG_N, HBG_ACCESS_IN),
                      xg_vec(y, 0, XG_N, HBG_ACCESS_OUT)};
  uint64_t bs = hbg__kernel_f32(s);
  ASSERT_OK(hbg__def_check_boundary(d, bt, 3, 1));
  uint32_t n = hbg__sub_size(d, inline_def);
  uint8_t *img = aligned_alloc(8, HBG__ALIGN_UP(n, 8));
  ASSERT(img);
  ASSERT_EQ(hbg__sub_write(img, n, d, 42, occ, bt, &bs, inline_def), (int)n);
  uint64_t a = xf_upload(f, img, n);
  free(img);
  *size = n;
  return a;
}

static uint32_t xrand_state = 7;
static float xrandf(void) {
  xrand_state = xrand_state * 1664525u + 1013904223u;
  return (float)(xrand_state >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

#endif
