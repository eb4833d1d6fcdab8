/*
 * cuda backend, launch: the device does not run graphs (no kernels are
 * shipped); a launch verifies on the device what arrived, in queue order.
 *
 *   1. D2H of the task window into a pinned scratch buffer, queued on q after
 *      everything the host queued there before (the uploads), then a
 *      synchronize of q: the readback sees exactly what the device holds at
 *      the launch point, and nothing later is queued on q meanwhile (device
 *      calls come from one thread at a time).
 *   2. The window is validated; every Submission and every distinct
 *      Definition (by device address and size: verified once per launch) it
 *      references is read back in one batch of D2H copies on q (images that
 *      lie inside the window block are sliced from the window's copy), then
 *      validated and matched; every device address an image carries (images,
 *      graph heaps, tensors) must lie inside a live allocation of this
 *      device, checked before any DMA touches it.
 *   3. The verdict (hbg_dev_status) is written to desc->status by an H2D
 *      copy queued on q, so an event recorded on q after the launch
 *      completes after the status is in device memory, as on the sim device.
 *
 * Launch therefore blocks until q has drained and the check is done; an
 * image error is a verdict in the status (launch returns 0), a CUDA error
 * fails the launch and writes no status.
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/cuda/cuda_internal.h"
#include "graph/graph.h"

#define RB_ALIGN 64u
#define RB_MAX ((uint64_t)HBG_IMG_MAX_BYTES) /* readback per launch */
#define NONE UINT32_MAX

enum { SRC_WIN = 1, SRC_IMG = 2 };

typedef struct vdef {
  uint64_t addr;
  uint32_t size;
  uint32_t src; /* SRC_* */
  uint64_t off; /* byte offset of its copy in that scratch */
  int verdict;  /* 1 not yet checked, 0 valid, else the validator's code */
  hbg__def_view view;
} vdef;

typedef struct vtask {
  uint64_t sub_off;
  uint32_t sub_src;
  uint32_t def; /* index into plan.defs */
} vtask;

typedef struct rbitem {
  uint64_t dev, len, off; /* device range -> img scratch offset */
} rbitem;

typedef struct plan {
  vtask *tasks;
  vdef *defs;
  uint32_t n_defs;
  uint32_t *slots; /* open addressing: (addr, size) -> defs index */
  uint32_t mask;
  rbitem *rb;
  uint32_t n_rb;
  uint64_t img_total;
  uint32_t stop; /* first task the plan rejected (n_tasks if none) */
  int stop_err;
} plan;

static void plan_free(plan *p) {
  free(p->tasks);
  free(p->defs);
  free(p->slots);
  free(p->rb);
}

static int plan_init(plan *p, uint32_t n) {
  memset(p, 0, sizeof *p);
  uint32_t cap = 16;
  while (cap < 2ull * n)
    cap *= 2;
  p->tasks = calloc(n ? n : 1, sizeof *p->tasks);
  p->defs = calloc(n ? n : 1, sizeof *p->defs);
  p->slots = malloc((size_t)cap * sizeof *p->slots);
  p->rb = calloc(2 * (size_t)(n ? n : 1), sizeof *p->rb);
  if (!p->tasks || !p->defs || !p->slots || !p->rb) {
    plan_free(p);
    return HBG_E_NOMEM;
  }
  memset(p->slots, 0xff, (size_t)cap * sizeof *p->slots);
  p->mask = cap - 1;
  p->stop = n;
  return 0;
}

/* [a, a + n) inside [lo, lo + len): 1, and *off = a - lo. */
static int inside(uint64_t a, uint64_t n, uint64_t lo, uint64_t len,
                  uint64_t *off) {
  if (a < lo || a - lo > len || n > len - (a - lo))
    return 0;
  *off = a - lo;
  return 1;
}

static int live(const hbg__cuda *c, uint64_t a, uint64_t n) {
  return a != 0 && hbg__cu_ranges_find(&c->dmem, a, n) != NULL;
}

static int rb_push(plan *p, uint64_t dev, uint64_t len, uint64_t *off) {
  uint64_t start = p->img_total;
  uint64_t end = start + HBG__ALIGN_UP(len, (uint64_t)RB_ALIGN);
  if (end > RB_MAX)
    return HBG_E_LIMIT;
  p->rb[p->n_rb++] = (rbitem){.dev = dev, .len = len, .off = start};
  p->img_total = end;
  *off = start;
  return 0;
}

static uint32_t *def_slot(plan *p, uint64_t addr, uint32_t size) {
  uint64_t h = (addr ^ ((uint64_t)size << 40)) * 0x9E3779B97F4A7C15ull;
  uint32_t i = (uint32_t)(h >> 32) & p->mask;
  while (p->slots[i] != NONE) {
    const vdef *d = &p->defs[p->slots[i]];
    if (d->addr == addr && d->size == size)
      break;
    i = (i + 1) & p->mask;
  }
  return &p->slots[i];
}

/* Where task t's Submission and Definition bytes will come from. */
static int plan_graph(const hbg__cuda *c, const hbg_dev_launch_desc *l,
                      plan *p, uint32_t i, const hbg_win_task *t) {
  vtask *vt = &p->tasks[i];
  uint64_t off;
  HBG__RETURN_IF(t->sub_size == 0 || t->sub_size > HBG_IMG_MAX_BYTES ||
                     t->def_size == 0 || t->def_size > HBG_IMG_MAX_BYTES,
                 HBG_E_IMG_SIZE);
  HBG__RETURN_IF(t->sub_addr == 0 || t->def_addr == 0, HBG_E_IMG_REF);
  if (inside(t->sub_addr, t->sub_size, l->window, l->window_bytes, &off)) {
    HBG__RETURN_IF(off % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
    vt->sub_src = SRC_WIN;
    vt->sub_off = off;
  } else {
    HBG__RETURN_IF(!live(c, t->sub_addr, t->sub_size), HBG_E_RANGE);
    vt->sub_src = SRC_IMG;
    HBG__TRY(rb_push(p, t->sub_addr, t->sub_size, &vt->sub_off));
  }

  uint32_t *slot = def_slot(p, t->def_addr, t->def_size);
  if (*slot != NONE) {
    vt->def = *slot;
    return 0;
  }
  vdef d = {.addr = t->def_addr, .size = t->def_size, .verdict = 1};
  if (inside(t->def_addr, t->def_size, t->sub_addr, t->sub_size, &off)) {
    d.src = vt->sub_src; /* inline Definition: a slice of the Submission */
    d.off = vt->sub_off + off;
  } else if (inside(t->def_addr, t->def_size, l->window, l->window_bytes,
                    &off)) {
    d.src = SRC_WIN;
    d.off = off;
  } else {
    HBG__RETURN_IF(!live(c, t->def_addr, t->def_size), HBG_E_RANGE);
    d.src = SRC_IMG;
    HBG__TRY(rb_push(p, t->def_addr, t->def_size, &d.off));
  }
  HBG__RETURN_IF(d.off % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
  vt->def = p->n_defs;
  *slot = p->n_defs;
  p->defs[p->n_defs++] = d;
  return 0;
}

/* ext bytes from addr + offset lie in live device memory. */
static int range_check(const hbg__cuda *c, uint64_t addr, uint64_t offset,
                       uint64_t ext) {
  HBG__RETURN_IF(ext == 0, HBG_E_IMG_FIELD);
  uint64_t lo;
  HBG__RETURN_IF(hbg__add_u64(addr, offset, &lo), HBG_E_RANGE);
  HBG__RETURN_IF(!live(c, lo, ext), HBG_E_RANGE);
  return 0;
}

static int tensor_check(const hbg__cuda *c, const hbg_sub_tensor *t) {
  return range_check(c, t->addr, t->offset,
                     hbg__shape_extent(t->dtype, t->ndim, t->mode, t->shape,
                                       t->strides));
}

/* A Submission's boundary tensor: where it lives from the Submission, its
 * extent from the Definition's signature. */
static int bind_check(const hbg__cuda *c, const hbg_sub_bind *b,
                      const hbg_def_bsig *s) {
  return range_check(c, b->addr, b->offset,
                     hbg__shape_extent(s->dtype, s->ndim, s->mode, s->shape,
                                       s->strides));
}

static int check_task(const hbg__cuda *c, const hbg__win_view *wv,
                      uint64_t wlen, const hbg_win_task *t) {
  const uint8_t *e = (const uint8_t *)t;
  uint64_t eoff = (uint64_t)(e - wv->base);
  HBG__RETURN_IF(eoff > wlen || t->size > wlen - eoff, HBG_E_IMG_OFFSET);
  if (t->n_tensors == 0)
    return 0;
  HBG__RETURN_IF(t->off_tensors % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
  HBG__RETURN_IF((uint64_t)t->off_tensors +
                         (uint64_t)t->n_tensors * sizeof(hbg_sub_tensor) >
                     t->size,
                 HBG_E_IMG_OFFSET);
  const hbg_sub_tensor *ts = (const hbg_sub_tensor *)(e + t->off_tensors);
  for (uint32_t k = 0; k < t->n_tensors; k++)
    HBG__TRY(tensor_check(c, &ts[k]));
  return 0;
}

static int check_graph(const hbg__cuda *c, plan *p, const uint8_t *win,
                       const uint8_t *img, uint32_t i, const hbg_win_task *t,
                       hbg_dev_status *st) {
  const vtask *vt = &p->tasks[i];
  const uint8_t *sub = (vt->sub_src == SRC_WIN ? win : img) + vt->sub_off;
  hbg__sub_view sv;
  HBG__TRY(hbg__sub_validate(sub, t->sub_size, &sv));
  vdef *d = &p->defs[vt->def];
  if (d->verdict == 1) {
    const uint8_t *b = (d->src == SRC_WIN ? win : img) + d->off;
    d->verdict = hbg__def_validate(b, d->size, &d->view);
    if (d->verdict == 0)
      st->defs_verified++;
  }
  HBG__TRY(d->verdict);
  HBG__TRY(hbg__sub_check_def(&sv, &d->view));
  uint64_t heap = d->view.hdr->heap_size;
  HBG__RETURN_IF(heap && !live(c, t->heap_addr, heap), HBG_E_RANGE);
  /* sub_check_def: n_tensors == the Definition's n_btensors */
  for (uint32_t k = 0; k < sv.hdr->n_tensors; k++)
    HBG__TRY(bind_check(c, &sv.tensors[k], &d->view.bsig[k]));
  return 0;
}

/* After the window is validated: plan, read back, check every task. */
static int verify_tasks(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q,
                        const hbg_dev_launch_desc *l, const hbg__win_view *wv,
                        hbg_dev_status *st, uint64_t *rb_bytes) {
  const uint32_t n = wv->hdr->n_tasks;
  plan p;
  HBG__TRY(plan_init(&p, n));
  int rc = 0;
  for (uint32_t i = 0; i < n; i++) {
    const hbg_win_task *t = hbg__win_task(wv, i);
    int r = t ? 0 : HBG_E_IMG_OFFSET;
    if (r == 0 && t->kind == HBG_WIN_GRAPH)
      r = plan_graph(c, l, &p, i, t);
    if (r < 0) {
      p.stop = i;
      p.stop_err = r;
      break;
    }
  }

  if (p.n_rb) {
    rc = hbg__cu_scratch_reserve(dev, &c->img, (size_t)p.img_total);
    if (rc < 0)
      goto out;
    for (uint32_t k = 0; k < p.n_rb; k++) {
      const rbitem *r = &p.rb[k];
      CUresult e = c->f.cuMemcpyDtoHAsync_v2(c->img.p + r->off,
                                             (CUdeviceptr)r->dev,
                                             (size_t)r->len, q->s);
      if (e != CUDA_SUCCESS) {
        rc = hbg__cu_err(dev, e, "cuMemcpyDtoHAsync_v2", HBG_E_DEVICE);
        break;
      }
      *rb_bytes += r->len;
    }
    /* Drain even after a failed enqueue: nothing may still write scratch. */
    CUresult e = c->f.cuStreamSynchronize(q->s);
    if (e != CUDA_SUCCESS && rc == 0)
      rc = hbg__cu_err(dev, e, "cuStreamSynchronize", HBG_E_DEVICE);
    if (rc < 0)
      goto out;
  }

  for (uint32_t i = 0; i < p.stop; i++) {
    const hbg_win_task *t = hbg__win_task(wv, i);
    int r;
    if (t->kind == HBG_WIN_GRAPH)
      r = check_graph(c, &p, c->win.p, c->img.p, i, t, st);
    else if (t->kind == HBG_WIN_TASK)
      r = check_task(c, wv, l->window_bytes, t);
    else
      r = HBG_E_IMG_FIELD;
    if (r < 0) {
      st->error = r;
      st->task = i;
      goto out;
    }
    st->tasks_done = i + 1;
  }
  if (p.stop < n) {
    st->error = p.stop_err;
    st->task = p.stop;
  }
out:
  plan_free(&p);
  return rc;
}

/* @return 0 with *st filled (st->error is the verdict; q drained), or a
 * device error. */
static int verify(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q,
                  const hbg_dev_launch_desc *l, hbg_dev_status *st,
                  uint64_t *rb_bytes) {
  const uint64_t wlen = l->window_bytes;
  int bad = 0;
  if (wlen < sizeof(hbg_win_hdr))
    bad = HBG_E_IMG_TRUNCATED;
  else if (wlen > HBG_IMG_MAX_BYTES)
    bad = HBG_E_IMG_SIZE;
  else if (!live(c, l->window, wlen))
    bad = HBG_E_RANGE;
  if (!bad) {
    HBG__TRY(hbg__cu_scratch_reserve(dev, &c->win, (size_t)wlen));
    CUresult e = c->f.cuMemcpyDtoHAsync_v2(c->win.p, (CUdeviceptr)l->window,
                                           (size_t)wlen, q->s);
    if (e != CUDA_SUCCESS)
      return hbg__cu_err(dev, e, "cuMemcpyDtoHAsync_v2", HBG_E_DEVICE);
    *rb_bytes += wlen;
  }
  /* Also orders the status slot: the last launch's status copy is done. */
  CUresult e = c->f.cuStreamSynchronize(q->s);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(dev, e, "cuStreamSynchronize", HBG_E_DEVICE);
  HBG__CU_ADD(c, handshakes, 1);
  if (bad) {
    st->error = bad;
    return 0;
  }
  hbg__win_view wv;
  int rc = hbg__win_validate(c->win.p, wlen, &wv);
  if (rc) {
    st->error = rc;
    return 0;
  }
  return verify_tasks(dev, c, q, l, &wv, st, rb_bytes);
}

int hbg__cu_launch(hbg_device *dev, hbg_dev_queue *q,
                   const hbg_dev_launch_desc *l) {
  hbg__cuda *c = hbg_device_impl(dev);
  HBG__RETURN_IF(l->struct_size < sizeof *l, HBG_E_INVAL);
  HBG__RETURN_IF(!live(c, l->status, sizeof(hbg_dev_status)), HBG_E_RANGE);
  const int tracing = hbg_device_tracing(dev);
  uint64_t t0 = tracing ? hbg__now_ns() : 0;
  HBG__TRY(hbg__cu_enter(dev, c));
  CUresult e;
  if (!q->status) {
    void *p = NULL;
    e = c->f.cuMemHostAlloc(&p, sizeof(hbg_dev_status),
                            CU_MEMHOSTALLOC_PORTABLE);
    if (e != CUDA_SUCCESS)
      return hbg__cu_err(dev, e, "cuMemHostAlloc", HBG_E_NOMEM);
    q->status = p;
  }
  hbg_dev_status st;
  memset(&st, 0, sizeof st);
  st.task = UINT32_MAX;
  st.node = UINT32_MAX;
  uint64_t rb_bytes = 0;
  HBG__TRY(verify(dev, c, q, l, &st, &rb_bytes));
  *q->status = st;
  e = c->f.cuMemcpyHtoDAsync_v2((CUdeviceptr)l->status, q->status, sizeof st,
                                q->s);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(dev, e, "cuMemcpyHtoDAsync_v2", HBG_E_DEVICE);
  HBG__CU_ADD(c, launches, 1);
  if (tracing) {
    hbg_trace_event ev = {.track = HBG_TRACK_DEVICE,
                          .name = "verify",
                          .start_ns = t0,
                          .dur_ns = hbg__now_ns() - t0,
                          .bytes = rb_bytes};
    hbg_device_trace(dev, &ev);
  }
  return 0;
}
