/*
 * The launch verifier: see verify.h. One launch, in three passes:
 *
 *   1. Plan: the window is read back (after everything queued before the
 *      launch) and validated; for each entry, in order, where its
 *      Submission and Definition bytes will come from: a slice of the
 *      window's copy, a slice of a Submission's, a readback, or (a backend
 *      that reports writes) the verdict cache. A Submission outside live
 *      memory stops the plan there; a Definition outside it is an error
 *      only if the Submission turns out not to carry its own.
 *   2. Fetch: every readback started, then one flush.
 *   3. Check, entry by entry, in the executor's order (prepare in
 *      src/exec/exec.c), then no entry may write over an image the launch
 *      reads; the first failure is the verdict.
 */
#include "device/verify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "exec/exec.h"
#include "kernels/kernels.h"
#include "graph/graph.h"

#define RB_ALIGN 64u
#define RB_MAX ((uint64_t)HBG_IMG_MAX_BYTES) /* readback per launch */
#define NONE UINT32_MAX

enum { SRC_WIN = 1, SRC_IMG = 2 };

/* Where a Definition named by a window entry comes from, per (addr, size). */
typedef struct vdef {
  hbg_devptr addr;
  uint64_t size;
  uint32_t src; /* SRC_* */
  uint64_t off;
  int err;         /* planning verdict: not live (HBG_E_RANGE) */
  int read, cached; /* to be read back; copied from the verdict cache */
  hbg_def_hdr hdr; /* cached: the validated header */
} vdef;

typedef struct vtask {
  uint32_t sub_src;
  uint64_t sub_off;
  uint32_t def; /* index into defs */
} vtask;

/* A Definition checked in this launch (inline ones included). */
typedef struct vchk {
  hbg_devptr addr;
  uint64_t size;
  int rc;
  uint32_t node;
  hbg_def_hdr hdr;
  hbg__def_view view;
  uint8_t *bw; /* per boundary tensor: some node writes it */
} vchk;

typedef struct rbitem {
  hbg_devptr dev;
  uint64_t len, off;
  uint32_t def; /* NONE: a Submission */
} rbitem;

typedef struct vrun {
  hbg__verifier *v;
  const hbg__verify_io *io;
  const hbg_dev_launch_desc *l;
  hbg_dev_status *st;
  const uint8_t *win;
  uint8_t *img;
  vtask *tasks;
  vdef *defs;
  uint32_t n_defs;
  uint32_t *slots; /* open addressing: (addr, size) -> defs index */
  uint32_t mask;
  rbitem *rb;
  uint32_t n_rb;
  uint64_t img_total;
  uint32_t stop; /* first entry the plan rejected (n_tasks if none) */
  int stop_err;
  vchk *chk;
  uint32_t n_chk, cap_chk;
  hbg__span *rd, *wr; /* images the launch reads, ranges its entries write */
  uint32_t n_rd, cap_rd, n_wr, cap_wr;
  uint32_t err_node;
} vrun;

int hbg__verify_init(hbg__verifier *v) {
  memset(v, 0, sizeof *v);
  return hbg__vcache_init(&v->vc);
}

void hbg__verify_fini(hbg__verifier *v) {
  hbg__vcache_fini(&v->vc);
  free(v->buf[0]);
  free(v->buf[1]);
}

void hbg__verify_invalidate(hbg__verifier *v, hbg_devptr a, uint64_t len) {
  hbg__vcache_invalidate(&v->vc, a, len);
}

static int tracks(const vrun *r) {
  return (r->io->flags & HBG__VERIFY_TRACKS_WRITES) != 0;
}

static int live(const vrun *r, hbg_devptr base, uint64_t rel, uint64_t len) {
  uint64_t end;
  if (base == 0 || hbg__add_u64(base, rel, &end))
    return 0;
  return r->io->live(r->io->ctx, base, rel, len);
}

static int scratch(vrun *r, int slot, size_t bytes, uint8_t **out) {
  if (r->io->scratch)
    return r->io->scratch(r->io->ctx, slot, bytes, out);
  hbg__verifier *v = r->v;
  if (bytes > v->cap[slot]) {
    size_t cap = HBG__MAX(bytes, v->cap[slot] * 2);
    uint8_t *p = malloc(cap);
    if (!p)
      return HBG_E_NOMEM;
    free(v->buf[slot]);
    v->buf[slot] = p;
    v->cap[slot] = cap;
  }
  *out = v->buf[slot];
  return 0;
}

/* ---- plan ---- */

static void run_free(vrun *r) {
  for (uint32_t i = 0; i < r->n_chk; i++)
    free(r->chk[i].bw);
  free(r->chk);
  free(r->tasks);
  free(r->defs);
  free(r->slots);
  free(r->rb);
  free(r->rd);
  free(r->wr);
}

static int run_init(vrun *r, uint32_t n) {
  uint32_t cap = 16;
  while (cap < 2ull * n)
    cap *= 2;
  r->tasks = calloc(n ? n : 1, sizeof *r->tasks);
  r->defs = calloc(n ? n : 1, sizeof *r->defs);
  r->slots = malloc((size_t)cap * sizeof *r->slots);
  r->rb = calloc(2 * (size_t)(n ? n : 1), sizeof *r->rb);
  if (!r->tasks || !r->defs || !r->slots || !r->rb)
    return HBG_E_NOMEM;
  memset(r->slots, 0xff, (size_t)cap * sizeof *r->slots);
  r->mask = cap - 1;
  r->stop = n;
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

static int rb_push(vrun *r, hbg_devptr dev, uint64_t len, uint32_t def,
                   uint64_t *off) {
  uint64_t start = r->img_total;
  uint64_t end = start + HBG__ALIGN_UP(len, (uint64_t)RB_ALIGN);
  if (end > RB_MAX)
    return HBG_E_LIMIT;
  r->rb[r->n_rb++] = (rbitem){.dev = dev, .len = len, .off = start, .def = def};
  r->img_total = end;
  *off = start;
  return 0;
}

static uint32_t *def_slot(vrun *r, hbg_devptr addr, uint64_t size) {
  uint64_t h = (addr ^ (size << 40)) * 0x9E3779B97F4A7C15ull;
  uint32_t i = (uint32_t)(h >> 32) & r->mask;
  while (r->slots[i] != NONE) {
    const vdef *d = &r->defs[r->slots[i]];
    if (d->addr == addr && d->size == size)
      break;
    i = (i + 1) & r->mask;
  }
  return &r->slots[i];
}

static int plan_graph(vrun *r, uint32_t i, const hbg_win_task *t) {
  const hbg_dev_launch_desc *l = r->l;
  vtask *vt = &r->tasks[i];
  uint64_t off;
  if (inside(t->sub_addr, t->sub_size, l->window, l->window_bytes, &off)) {
    vt->sub_src = SRC_WIN;
    vt->sub_off = off;
  } else {
    HBG__RETURN_IF(!live(r, t->sub_addr, 0, t->sub_size), HBG_E_RANGE);
    vt->sub_src = SRC_IMG;
    HBG__TRY(rb_push(r, t->sub_addr, t->sub_size, NONE, &vt->sub_off));
  }

  uint32_t *slot = def_slot(r, t->def_addr, t->def_size);
  if (*slot != NONE) {
    vt->def = *slot;
    return 0;
  }
  vdef d = {.addr = t->def_addr, .size = t->def_size};
  if (inside(t->def_addr, t->def_size, t->sub_addr, t->sub_size, &off)) {
    d.src = vt->sub_src; /* inline Definition: a slice of the Submission */
    d.off = vt->sub_off + off;
  } else if (inside(t->def_addr, t->def_size, l->window, l->window_bytes,
                    &off)) {
    d.src = SRC_WIN;
    d.off = off;
  } else if (!live(r, t->def_addr, 0, t->def_size)) {
    d.err = HBG_E_RANGE;
  } else {
    d.src = SRC_IMG;
    d.read = 1;
    HBG__TRY(rb_push(r, t->def_addr, t->def_size, r->n_defs, &d.off));
  }
  vt->def = r->n_defs;
  *slot = r->n_defs;
  r->defs[r->n_defs++] = d;
  return 0;
}

static void plan(vrun *r, const hbg__win_view *wv) {
  for (uint32_t i = 0; i < wv->hdr->n_tasks; i++) {
    const hbg_win_task *t = hbg__win_task(wv, i);
    int rc = t ? 0 : HBG_E_IMG_REF;
    if (rc == 0 && t->kind == HBG_WIN_GRAPH)
      rc = plan_graph(r, i, t);
    if (rc < 0) {
      r->stop = i;
      r->stop_err = rc;
      return;
    }
  }
}

/* ---- fetch ---- */

static int fetch(vrun *r, uint64_t *rb_bytes) {
  if (r->n_rb == 0)
    return 0;
  HBG__TRY(scratch(r, 1, (size_t)r->img_total, &r->img));
  int rc = 0;
  for (uint32_t k = 0; k < r->n_rb && rc == 0; k++) {
    const rbitem *it = &r->rb[k];
    if (it->def != NONE && tracks(r)) {
      vdef *d = &r->defs[it->def];
      if (hbg__vcache_copy(&r->v->vc, d->addr, d->size, r->img + it->off,
                           &d->hdr)) {
        d->cached = 1;
        continue;
      }
    }
    rc = r->io->read(r->io->ctx, r->img + it->off, it->dev, it->len);
    if (rc == 0)
      *rb_bytes += it->len;
  }
  /* Flush even after a failed start: nothing may still write scratch. */
  int fr = r->io->flush(r->io->ctx);
  return rc < 0 ? rc : fr;
}

/* ---- check ---- */

static void *memdup(const void *p, uint64_t n) {
  void *q = malloc((size_t)n);
  if (q)
    memcpy(q, p, (size_t)n);
  return q;
}

/* The Definition of dsize bytes at device address da, its bytes at dp:
 * checked once per launch, and validated only when the verdict cache has
 * no valid entry for it. cached: the header a tracked cache entry holds. */
static int get_def(vrun *r, hbg_devptr da, const uint8_t *dp, uint64_t dsize,
                   const hbg_def_hdr *cached, const vchk **out) {
  for (uint32_t i = r->n_chk; i-- > 0;)
    if (r->chk[i].addr == da && r->chk[i].size == dsize) {
      r->err_node = r->chk[i].node;
      *out = &r->chk[i];
      return r->chk[i].rc;
    }
  HBG__TRY(HBG__RESERVE(r->chk, r->cap_chk, (uint64_t)r->n_chk + 1));
  vchk *c = &r->chk[r->n_chk++];
  memset(c, 0, sizeof *c);
  c->addr = da;
  c->size = dsize;
  c->node = NONE;
  *out = c;
  if (dsize < sizeof(hbg_def_hdr)) {
    c->rc = HBG_E_IMG_TRUNCATED;
  } else if (da % HBG_IMG_ALIGN) {
    c->rc = HBG_E_IMG_ALIGN; /* as the validator finds it in place */
  } else if (cached) {
    c->hdr = *cached;
    hbg__exec_def_view(dp, &c->hdr, &c->view);
  } else {
    hbg_def_hdr cur;
    memcpy(&cur, dp, sizeof cur);
    int hit = hbg__vcache_begin(&r->v->vc, da, dsize, &cur, &c->hdr);
    if (hit && !tracks(r) && (c->hdr.total_size > dsize ||
                              hbg__hash_skip(dp, c->hdr.total_size,
                                             offsetof(hbg_def_hdr, hash)) !=
                                  c->hdr.hash)) {
      /* the bytes changed behind the cache's back: check them again */
      hbg__vcache_invalidate(&r->v->vc, da, dsize);
      hit = hbg__vcache_begin(&r->v->vc, da, dsize, &cur, &c->hdr);
    }
    if (hit) {
      hbg__exec_def_view(dp, &c->hdr, &c->view);
    } else {
      c->rc = hbg__def_validate(dp, dsize, &c->view);
      if (c->rc == 0) {
        c->hdr = cur;
        c->rc = hbg__exec_def_kernels(&c->view, &c->hdr, &c->node);
      }
      void *blob = c->rc == 0 && tracks(r) ? memdup(dp, dsize) : NULL;
      hbg__vcache_end(&r->v->vc, da, dsize, cur.hash, c->rc == 0, blob);
      if (c->rc == 0)
        r->st->defs_verified++;
    }
  }
  if (c->rc == 0) {
    c->bw = calloc(c->hdr.n_btensors ? c->hdr.n_btensors : 1, 1);
    HBG__RETURN_IF(!c->bw, HBG_E_NOMEM);
    for (uint32_t i = 0; i < c->hdr.n_tensors; i++) {
      const hbg_def_tensor *t = &c->view.tensors[i];
      if ((t->src == HBG_SRC_BOUNDARY_EXACT ||
           t->src == HBG_SRC_BOUNDARY_VIEW) &&
          t->ref < c->hdr.n_btensors && (t->mode & HBG_ACCESS_OUT))
        c->bw[t->ref] = 1;
    }
  }
  r->err_node = c->node;
  return c->rc;
}

static int check_graph(vrun *r, uint32_t i, const hbg_win_task *t) {
  const vtask *vt = &r->tasks[i];
  const uint8_t *sub = (vt->sub_src == SRC_WIN ? r->win : r->img) + vt->sub_off;
  hbg__sub_view sv;
  HBG__RETURN_IF(t->sub_addr % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
  HBG__TRY(hbg__sub_validate(sub, t->sub_size, &sv));
  const uint8_t *dp;
  hbg_devptr da;
  uint64_t dsize;
  const hbg_def_hdr *cached = NULL;
  if (sv.inline_def) {
    HBG__RETURN_IF((uint64_t)sv.hdr->off_def + sv.hdr->def_size > t->sub_size,
                   HBG_E_IMG_OFFSET);
    dp = sub + sv.hdr->off_def;
    da = t->sub_addr + sv.hdr->off_def;
    dsize = sv.hdr->def_size;
  } else {
    const vdef *d = &r->defs[vt->def];
    HBG__TRY(d->err);
    dp = (d->src == SRC_WIN ? r->win : r->img) + d->off;
    da = d->addr;
    dsize = d->size;
    cached = d->cached ? &d->hdr : NULL;
  }
  const vchk *c;
  HBG__TRY(get_def(r, da, dp, dsize, cached, &c));
  int rc = hbg__sub_check_def(&sv, &c->view);
  if (rc == HBG_E_IMG_TENSOR_ALIGN) {
    uint32_t bad = NONE;
    hbg__sub_check_align(&sv, &c->view, &bad);
    r->err_node = hbg__exec_node_of_tensor(&c->view, &c->hdr, bad);
  }
  HBG__TRY(rc);
  r->err_node = NONE;
  const uint64_t heap = c->hdr.heap_size;
  HBG__RETURN_IF(t->heap_addr % HBG__HEAP_ALIGN, HBG_E_IMG_TENSOR_ALIGN);
  HBG__RETURN_IF(heap && !live(r, t->heap_addr, 0, heap), HBG_E_RANGE);
  HBG__TRY(
      hbg__span_add(&r->rd, &r->n_rd, &r->cap_rd, t->sub_addr, t->sub_size, i));
  HBG__TRY(hbg__span_add(&r->rd, &r->n_rd, &r->cap_rd, da, dsize, i));
  HBG__TRY(hbg__span_add(&r->wr, &r->n_wr, &r->cap_wr, t->heap_addr, heap, i));
  const uint32_t nb = c->hdr.n_btensors, nsc = c->hdr.n_bscalars;
  uint64_t toff = (uint64_t)((const uint8_t *)sv.tensors - sv.base),
           soff = (uint64_t)((const uint8_t *)sv.scalars - sv.base);
  HBG__RETURN_IF(toff + (uint64_t)nb * sizeof(hbg_sub_bind) > t->sub_size ||
                     soff + (uint64_t)nsc * 8 > t->sub_size,
                 HBG_E_IMG_OFFSET);
  for (uint32_t k = 0; k < nb; k++) {
    hbg_sub_bind sb;
    memcpy(&sb, &sv.tensors[k], sizeof sb);
    HBG__RETURN_IF(sb.addr == 0, HBG_E_IMG_FIELD);
    hbg__ktensor kt;
    HBG__KTENSOR_META(&kt, &c->view.bsig[k]);
    uint64_t ext = hbg__ktensor_extent(&kt);
    HBG__RETURN_IF(ext == 0, HBG_E_KERNEL);
    HBG__RETURN_IF(!live(r, sb.addr, sb.offset, ext), HBG_E_RANGE);
    /* The heap block is written by the nodes: it may not hold a boundary
     * tensor they read or write. */
    HBG__RETURN_IF(heap && sb.addr + sb.offset < t->heap_addr + heap &&
                       t->heap_addr < sb.addr + sb.offset + ext,
                   HBG_E_RANGE);
    if (c->bw[k])
      HBG__TRY(hbg__span_add(&r->wr, &r->n_wr, &r->cap_wr, sb.addr + sb.offset,
                             ext, i));
  }
  return 0;
}

static int check_task(vrun *r, uint32_t i, const hbg_win_task *t) {
  const hbg_sub_tensor *ts =
      (const hbg_sub_tensor *)((const uint8_t *)t + t->off_tensors);
  hbg__ktensor k[HBG_IMG_MAX_ARGS_PER_NODE];
  uint64_t ext[HBG_IMG_MAX_ARGS_PER_NODE];
  for (uint32_t a = 0; a < t->n_tensors; a++) {
    HBG__KTENSOR_META(&k[a], &ts[a]);
    ext[a] = hbg__ktensor_extent(&k[a]);
    HBG__RETURN_IF(ext[a] == 0, HBG_E_KERNEL);
  }
  HBG__TRY(hbg__kernel_check(t->kernel, k, t->n_tensors, t->n_scalars));
  for (uint32_t a = 0; a < t->n_tensors; a++) {
    HBG__RETURN_IF(!live(r, ts[a].addr, ts[a].offset, ext[a]), HBG_E_RANGE);
    if (ts[a].mode & HBG_ACCESS_OUT)
      HBG__TRY(hbg__span_add(&r->wr, &r->n_wr, &r->cap_wr,
                             ts[a].addr + ts[a].offset, ext[a], i));
  }
  return 0;
}

/* No entry may write over an image the launch reads (the window, a
 * Submission, a Definition) and nothing over the status: the executor
 * refuses such a launch, so the verifier does too. *task: the writer. */
static int check_writes(vrun *r, uint32_t *task) {
  const hbg_dev_launch_desc *l = r->l;
  HBG__TRY(hbg__span_add(&r->rd, &r->n_rd, &r->cap_rd, l->window,
                         l->window_bytes, NONE));
  HBG__TRY(hbg__span_add(&r->wr, &r->n_wr, &r->cap_wr, l->status,
                         sizeof(hbg_dev_status), NONE));
  uint32_t k = hbg__span_first_overlap(r->rd, r->n_rd, r->wr, r->n_wr);
  if (k != UINT32_MAX) {
    *task = r->wr[k].tag;
    return HBG_E_RANGE;
  }
  return 0;
}

/* @return < 0 for a host or device failure; else the verdict is in st. */
static int check(vrun *r, const hbg__win_view *wv) {
  hbg_dev_status *st = r->st;
  const uint32_t n = wv->hdr->n_tasks;
  for (uint32_t i = 0; i < r->stop; i++) {
    const hbg_win_task *t = hbg__win_task(wv, i);
    r->err_node = NONE;
    int rc = t->kind == HBG_WIN_GRAPH  ? check_graph(r, i, t)
             : t->kind == HBG_WIN_TASK ? check_task(r, i, t)
                                       : HBG_E_IMG_FIELD;
    if (rc == HBG_E_NOMEM)
      return rc;
    if (rc < 0) {
      st->error = rc;
      st->task = i;
      st->node = r->err_node;
      return 0;
    }
    st->tasks_done = i + 1;
  }
  if (r->stop < n) {
    st->error = r->stop_err;
    st->task = r->stop;
    return 0;
  }
  uint32_t task = NONE;
  int rc = check_writes(r, &task);
  if (rc == HBG_E_NOMEM)
    return rc;
  if (rc < 0) {
    st->error = rc;
    st->task = task;
    st->tasks_done = task == NONE ? n : task;
  }
  return 0;
}

/* @return 0 with *st filled (st->error is the verdict), or an error. */
static int verify(hbg__verifier *v, const hbg__verify_io *io,
                  const hbg_dev_launch_desc *l, hbg_dev_status *st,
                  uint64_t *rb_bytes) {
  vrun r;
  memset(&r, 0, sizeof r);
  r.v = v;
  r.io = io;
  r.l = l;
  r.st = st;
  const uint64_t wlen = l->window_bytes;
  int bad = 0;
  if (!live(&r, l->window, 0, wlen))
    bad = HBG_E_RANGE;
  else if (wlen > HBG_IMG_MAX_BYTES)
    bad = HBG_E_IMG_SIZE;
  else if (wlen < sizeof(hbg_win_hdr))
    bad = HBG_E_IMG_TRUNCATED;
  if (!bad) {
    uint8_t *w;
    HBG__TRY(scratch(&r, 0, (size_t)wlen, &w));
    int rc = io->read(io->ctx, w, l->window, wlen);
    if (rc < 0) {
      io->flush(io->ctx);
      return rc;
    }
    *rb_bytes += wlen;
    r.win = w;
  }
  /* Always: it also orders the status slot after the last launch's. */
  HBG__TRY(io->flush(io->ctx));
  if (bad) {
    st->error = bad;
    return 0;
  }
  hbg__win_view wv;
  int rc = hbg__win_validate(r.win, wlen, &wv);
  if (rc) {
    st->error = rc;
    return 0;
  }
  rc = run_init(&r, wv.hdr->n_tasks);
  if (rc == 0) {
    plan(&r, &wv);
    rc = fetch(&r, rb_bytes);
  }
  if (rc == 0)
    rc = check(&r, &wv);
  run_free(&r);
  return rc;
}

int hbg__verify_launch(hbg__verifier *v, const hbg__verify_io *io,
                       const hbg_dev_launch_desc *l, uint64_t *rb_bytes) {
  HBG__RETURN_IF(l->struct_size < sizeof *l, HBG_E_INVAL);
  HBG__RETURN_IF(!l->status || !io->live(io->ctx, l->status, 0,
                                         sizeof(hbg_dev_status)),
                 HBG_E_RANGE);
  hbg_dev_status st;
  memset(&st, 0, sizeof st);
  st.task = NONE;
  st.node = NONE;
  HBG__TRY(verify(v, io, l, &st, rb_bytes));
  return io->write_status(io->ctx, l->status, &st);
}
