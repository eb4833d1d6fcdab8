#include "exec/exec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/list.h"
#include "common/util.h"
/* The core runs only under e->mu here (step_locked, hbg__exec_run), so it
 * needs no atomics of its own (sched_src.h). */
#define HBG__SCHED_SERIAL 1
#include "exec/sched_src.h"
#include "exec/user_kernels.h"
#include "exec/verdict.h"
#include "graph/image.h"
#include "kernels/kernels.h"

#define NONE UINT32_MAX
#define DEFAULT_WORKERS 1u
#define ARENA_BLOCK (256u << 10)
/* Ready items worth waking a sleeping worker for: kernels here take about
 * a microsecond, a wake-up several (env HBG_EXEC_WAKE_MIN). */
#define WAKE_MIN 64u
#define WAKE_MIN_ENV "HBG_EXEC_WAKE_MIN"
#define BATCH_MAX 32u

typedef struct ablock {
  struct ablock *next;
  size_t used, cap;
  _Alignas(16) unsigned char mem[];
} ablock;

typedef struct xdef {
  hbg_devptr addr;
  uint64_t size;
  hbg_img_def_view v;
  hbg_def_hdr hdr;    /* counts used at run time, copied once */
  hbg_img_graph meta; /* node expansion without a replay (layouts only) */
  uint8_t *bw;        /* per boundary tensor: some node writes it */
} xdef;

typedef struct xtask {
  uint32_t kind;
  uint32_t kernel;
  uint32_t nt, ns;
  hbg__ktensor *t; /* ordinary: args; graph: boundary tensors */
  uint64_t *sc;    /* ordinary: scalars; graph: boundary scalars */
  uint64_t *bext;  /* graph: boundary extents */
  const xdef *def;
  hbg_img_graph g; /* graph: node expansion of this replay */
  uint8_t *heap;
  uint64_t heap_size;
} xtask;

typedef struct xrun {
  hbg__exec *e;
  uint32_t n_tasks;
  xtask *tasks;
  hbg__sched *s; /* the scheduling core's state (sched_src.h) */
  xdef **defs;
  uint32_t n_defs, cap_defs;
  uint32_t running;
  uint64_t defs_verified;
  uint64_t setup_nodes; /* node records the set-up read */
  uint64_t phases;      /* kernel phases run (under mu) */
  int error;
  uint32_t err_task, err_node;
  int finished;
  ablock *arena;
  hbg__span *img, *wr; /* images this launch reads, ranges its kernels write */
  uint32_t n_img, cap_img, n_wr, cap_wr;
  struct xrun *next; /* the executor's running launches (under mu) */
} xrun;

struct hbg__exec {
  hbg__exec_mem mem; /* the device's memory */
  uint32_t n_threads;
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint32_t idle;
  int shutdown;
  /* Launches being run, each by the thread that called hbg__exec_run and
   * by the workers: several at once (the device's queues run concurrently;
   * the core orders binds with queue waits, not the executor). */
  xrun *runs;
  hbg__vcache vc;
  ablock *spare; /* arena block kept between launches (under mu) */
  hbg__ukernels *uk; /* registered user kernels */
  uint64_t wake_min;
  uint32_t lanes; /* lanes each built-in kernel runs as */
};

/* ---- per-launch arena ---- */

static void *ar_alloc(xrun *r, size_t bytes) {
  bytes = HBG__ALIGN_UP(bytes, (size_t)16);
  ablock *b = r->arena;
  if (!b || b->cap - b->used < bytes) {
    size_t cap = HBG__MAX((size_t)ARENA_BLOCK, bytes);
    b = malloc(sizeof *b + cap);
    if (!b)
      return NULL;
    b->next = r->arena;
    b->used = 0;
    b->cap = cap;
    r->arena = b;
  }
  void *p = b->mem + b->used;
  b->used += bytes;
  memset(p, 0, bytes);
  return p;
}

/* Keep the largest block for the next launch (fresh pages cost faults). */
static void ar_free(xrun *r, ablock **spare) {
  ablock *keep = *spare;
  while (r->arena) {
    ablock *n = r->arena->next;
    if (!keep || r->arena->cap > keep->cap) {
      free(keep);
      keep = r->arena;
    } else {
      free(r->arena);
    }
    r->arena = n;
  }
  if (keep) {
    keep->next = NULL;
    keep->used = 0;
  }
  *spare = keep;
}

void hbg__exec_invalidate(hbg__exec *e, hbg_devptr addr, uint64_t len) {
  if (e)
    hbg__vcache_invalidate(&e->vc, addr, len);
}

/* ---- tensor building ---- */

/* [a + off, +len) inside the live allocation that holds a. */
static int resolve(hbg__exec *e, hbg_devptr a, uint64_t off, uint64_t len,
                   void **out) {
  HBG__RETURN_IF(a + off < a, HBG_E_RANGE);
  return e->mem.resolve(e->mem.ctx, a, off, len, out);
}

/* Arguments of node j through hbg_image.h's iterator g. With x == NULL
 * (verification) only metadata; else each tensor's host memory from the
 * replay's resolved boundary tensors and heap block. The iterator bounds
 * every index by the validated header, so a Definition rewritten behind
 * the cache's back yields an error, never a wild read. */
static int node_args(const hbg_img_graph *g, const xtask *x, uint32_t j,
                     hbg__ktensor *t, uint64_t *sc, uint32_t *kernel,
                     uint32_t *nt, uint32_t *ns) {
  hbg_img_node n;
  HBG__TRY(hbg_img_graph_node(g, j, &n));
  for (uint32_t i = 0; i < n.n_tensors; i++) {
    hbg_img_arg a;
    HBG__TRY(hbg_img_graph_tensor(g, j, i, &a));
    hbg__ktensor_meta(&t[i], a.dtype, a.ndim, a.mode, a.shape, a.strides);
    if (!x)
      continue;
    if (a.src == HBG_SRC_BOUNDARY_EXACT || a.src == HBG_SRC_BOUNDARY_VIEW) {
      /* validated: inside the boundary tensor resolved for this replay */
      HBG__RETURN_IF(a.base_offset > x->bext[a.ref] ||
                         a.extent > x->bext[a.ref] - a.base_offset,
                     HBG_E_IMG_REF);
      t[i].data = (uint8_t *)x->t[a.ref].data + a.base_offset;
    } else {
      t[i].data = x->heap + a.base_offset;
    }
  }
  for (uint32_t i = 0; i < n.n_scalars; i++)
    HBG__TRY(hbg_img_graph_scalar(g, j, i, &sc[i]));
  *kernel = n.kernel;
  *nt = n.n_tensors;
  *ns = n.n_scalars;
  return 0;
}

/* Once per Definition: every node's arguments pass the kernel checks.
 * *bad names the node that does not. */
static int def_kernels_check(const xdef *d, uint32_t *bad) {
  hbg__ktensor t[HBG_IMG_MAX_ARGS_PER_NODE];
  uint64_t sc[HBG_IMG_MAX_SCALARS_PER_NODE];
  for (uint32_t j = 0; j < d->hdr.n_nodes; j++) {
    uint32_t k, nt, ns;
    int rc = node_args(&d->meta, NULL, j, t, sc, &k, &nt, &ns);
    if (rc == 0)
      rc = hbg__kernel_check(k, t, nt, ns);
    if (rc < 0) {
      *bad = j;
      return rc;
    }
  }
  return 0;
}

/* A user kernel runs from the registry, a built-in from kernels.c. */
static int run_kernel(hbg__exec *e, uint32_t kernel, const hbg__ktensor *t,
                      uint32_t nt, const uint64_t *sc, uint32_t ns,
                      uint64_t *phases) {
  if (hbg_img_kernel_is_user(kernel)) {
    HBG__TRY(hbg__kernel_check(kernel, t, nt, ns));
    return hbg__ukernels_run(e->uk, kernel, t, nt, sc, ns, e->lanes, phases);
  }
  return hbg__kernel_run_lanes(kernel, t, nt, sc, ns, e->lanes, phases);
}

/* No kernel of this launch may write over an image it reads; whatever it
 * writes over loses its cached verdict, so a Definition is never trusted
 * after a kernel wrote it. */
static int check_writes(xrun *r, const hbg_dev_launch_desc *l) {
  HBG__TRY(hbg__span_add(&r->wr, &r->n_wr, &r->cap_wr, l->status,
                         sizeof(hbg_dev_status), NONE));
  if (r->n_wr)
    hbg__vcache_invalidate_n(&r->e->vc, &r->wr[0].lo, &r->wr[0].hi, r->n_wr,
                             sizeof *r->wr);
  uint32_t k = hbg__span_first_overlap(r->img, r->n_img, r->wr, r->n_wr);
  if (k != UINT32_MAX) {
    r->err_task = r->wr[k].tag;
    return HBG_E_RANGE;
  }
  return 0;
}

static int get_def(xrun *r, hbg_devptr a, const uint8_t *p, uint64_t size,
                   const xdef **out) {
  for (uint32_t i = r->n_defs; i-- > 0;)
    if (r->defs[i]->addr == a && r->defs[i]->size == size) {
      *out = r->defs[i];
      return 0;
    }
  HBG__RETURN_IF(size < sizeof(hbg_def_hdr), HBG_E_IMG_TRUNCATED);
  HBG__TRY(HBG__RESERVE(r->defs, r->cap_defs, (uint64_t)r->n_defs + 1));
  xdef *d = ar_alloc(r, sizeof *d);
  HBG__RETURN_IF(!d, HBG_E_NOMEM);
  d->addr = a;
  d->size = size;
  hbg_def_hdr cur;
  memcpy(&cur, p, sizeof cur);
  /* d->v.hdr is d->hdr, the header as validated, for the whole launch. */
  if (hbg__vcache_begin(&r->e->vc, a, size, &cur, &d->hdr)) {
    hbg_img_def_view_trusted(p, &d->hdr, &d->v);
    HBG__TRY(hbg_img_graph_init(&d->meta, &d->v, NULL, 0));
  } else {
    int rc = hbg_img_def_validate(p, size, hbg__img_hash, NULL, &d->v);
    if (rc == 0) {
      d->hdr = cur;
      d->v.hdr = &d->hdr;
      rc = hbg_img_graph_init(&d->meta, &d->v, NULL, 0);
    }
    if (rc == 0)
      rc = def_kernels_check(d, &r->err_node);
    hbg__vcache_end(&r->e->vc, a, size, cur.hash, rc == 0, NULL);
    HBG__TRY(rc);
    r->defs_verified++;
    r->setup_nodes += 2ull * d->hdr.n_nodes; /* validator, kernel checks */
  }
  /* Registrations change between launches: not part of the verdict. */
  for (uint32_t j = 0; j < d->hdr.n_nodes; j++) {
    uint32_t k = d->v.nodes[j].kernel;
    if (hbg_img_kernel_is_user(k) && !hbg__ukernels_has(r->e->uk, k)) {
      r->err_node = j;
      return HBG_E_KERNEL;
    }
  }
  d->bw = ar_alloc(r, d->hdr.n_btensors ? d->hdr.n_btensors : 1);
  HBG__RETURN_IF(!d->bw, HBG_E_NOMEM);
  for (uint32_t i = 0; i < d->hdr.n_tensors; i++) {
    const hbg_def_tensor *t = &d->v.tensors[i];
    if ((t->src == HBG_SRC_BOUNDARY_EXACT || t->src == HBG_SRC_BOUNDARY_VIEW) &&
        t->ref < d->hdr.n_btensors && (t->mode & HBG_ACCESS_OUT))
      d->bw[t->ref] = 1;
  }
  r->defs[r->n_defs++] = d;
  *out = d;
  return 0;
}

/* The node whose arguments include tensor record i, NONE if none. */
static uint32_t node_of_tensor(const xdef *d, uint32_t i) {
  uint32_t lo = 0, hi = d->hdr.n_nodes;
  while (lo < hi) { /* first_tensor ascends (validated) */
    uint32_t m = lo + (hi - lo) / 2;
    if (d->v.nodes[m].first_tensor <= i)
      lo = m + 1;
    else
      hi = m;
  }
  if (lo == 0)
    return NONE;
  const hbg_def_node *n = &d->v.nodes[lo - 1];
  return i - n->first_tensor < n->n_tensors ? lo - 1 : NONE;
}

static int prep_graph(xrun *r, const hbg_win_task *wt, xtask *x) {
  hbg__exec *e = r->e;
  void *p;
  hbg_img_sub_view sv;
  HBG__TRY(resolve(e, wt->sub_addr, 0, wt->sub_size, &p));
  HBG__TRY(hbg_img_sub_validate(p, wt->sub_size, hbg__img_hash, NULL, &sv));
  /* Later reads of the Submission are bounded by its size, whatever the
   * memory holds by then. */
  hbg_sub_hdr sh;
  memcpy(&sh, sv.hdr, sizeof sh);
  const uint8_t *dp;
  hbg_devptr da;
  uint64_t dsize;
  if (sv.inline_def) {
    HBG__RETURN_IF((uint64_t)sh.off_def + sh.def_size > wt->sub_size,
                   HBG_E_IMG_OFFSET);
    dp = (const uint8_t *)p + sh.off_def;
    da = wt->sub_addr + sh.off_def;
    dsize = sh.def_size;
  } else {
    HBG__TRY(resolve(e, wt->def_addr, 0, wt->def_size, &p));
    dp = p;
    da = wt->def_addr;
    dsize = wt->def_size;
  }
  const xdef *d;
  HBG__TRY(get_def(r, da, dp, dsize, &d));
  int rc = hbg_img_sub_check_def(&sv, &d->v);
  if (rc == HBG_E_IMG_TENSOR_ALIGN) {
    uint32_t bad = NONE;
    hbg_img_sub_check_align(&sv, &d->v, &bad);
    r->err_node = node_of_tensor(d, bad);
  }
  HBG__TRY(rc);
  x->def = d;
  x->heap_size = d->hdr.heap_size;
  /* Internal tensors are aligned relative to the block (validated). */
  HBG__RETURN_IF(wt->heap_addr % HBG_IMG_HEAP_ALIGN, HBG_E_IMG_TENSOR_ALIGN);
  if (x->heap_size) {
    HBG__TRY(resolve(e, wt->heap_addr, 0, x->heap_size, &p));
    x->heap = p;
  }
  HBG__TRY(hbg__span_add(&r->img, &r->n_img, &r->cap_img, wt->sub_addr,
                         wt->sub_size, r->err_task));
  HBG__TRY(
      hbg__span_add(&r->img, &r->n_img, &r->cap_img, da, dsize, r->err_task));
  HBG__TRY(hbg__span_add(&r->wr, &r->n_wr, &r->cap_wr, wt->heap_addr,
                         x->heap_size, r->err_task));
  uint32_t nb = d->hdr.n_btensors, nsc = d->hdr.n_bscalars;
  uint64_t toff = (uint64_t)((const uint8_t *)sv.tensors - sv.base),
           soff = (uint64_t)((const uint8_t *)sv.scalars - sv.base);
  HBG__RETURN_IF(toff + (uint64_t)nb * sizeof(hbg_sub_bind) > wt->sub_size ||
                     soff + (uint64_t)nsc * 8 > wt->sub_size,
                 HBG_E_IMG_OFFSET);
  x->nt = nb;
  x->ns = nsc;
  x->t = ar_alloc(r, (size_t)nb * sizeof *x->t);
  x->bext = ar_alloc(r, (size_t)nb * sizeof *x->bext);
  x->sc = ar_alloc(r, (size_t)nsc * sizeof *x->sc);
  HBG__RETURN_IF((nb && (!x->t || !x->bext)) || (nsc && !x->sc),
                 HBG_E_NOMEM);
  /* Boundary tensor i: the Definition's signature i at the Submission's
   * (addr, offset) i, each read once. */
  for (uint32_t i = 0; i < nb; i++) {
    hbg_sub_bind sb;
    memcpy(&sb, &sv.tensors[i], sizeof sb);
    HBG__RETURN_IF(sb.addr == 0, HBG_E_IMG_FIELD);
    HBG__KTENSOR_META(&x->t[i], &d->v.bsig[i]);
    uint64_t ext = hbg__ktensor_extent(&x->t[i]);
    HBG__RETURN_IF(ext == 0, HBG_E_KERNEL);
    HBG__TRY(resolve(e, sb.addr, sb.offset, ext, &p));
    x->t[i].data = p;
    x->bext[i] = ext;
    /* The heap block is written by the nodes: it may not hold a boundary
     * tensor they read or write. */
    HBG__RETURN_IF(x->heap_size && sb.addr + sb.offset < wt->heap_addr +
                                                            x->heap_size &&
                       wt->heap_addr < sb.addr + sb.offset + ext,
                   HBG_E_RANGE);
    if (d->bw[i])
      HBG__TRY(hbg__span_add(&r->wr, &r->n_wr, &r->cap_wr, sb.addr + sb.offset,
                             ext, r->err_task));
  }
  if (nsc)
    memcpy(x->sc, sv.scalars, (size_t)nsc * sizeof *x->sc);
  /* Nodes expand with the boundary scalars as copied here; tensors get
   * their memory from x->t and x->heap (node_args). */
  x->g = d->meta;
  x->g.bscalars = x->sc;
  x->g.heap_addr = wt->heap_addr;
  return 0; /* validate ok implies iterate ok: no node is walked here */
}

static int prep_task(xrun *r, const hbg_win_task *wt, xtask *x) {
  x->kernel = wt->kernel;
  HBG__RETURN_IF(hbg_img_kernel_is_user(x->kernel) &&
                     !hbg__ukernels_has(r->e->uk, x->kernel),
                 HBG_E_KERNEL);
  x->nt = wt->n_tensors;
  x->ns = wt->n_scalars;
  x->t = ar_alloc(r, (size_t)x->nt * sizeof *x->t);
  x->sc = ar_alloc(r, (size_t)x->ns * sizeof *x->sc);
  HBG__RETURN_IF((x->nt && !x->t) || (x->ns && !x->sc), HBG_E_NOMEM);
  const hbg_sub_tensor *ts = hbg_img_win_task_tensors(wt);
  for (uint32_t i = 0; i < x->nt; i++) {
    HBG__KTENSOR_META(&x->t[i], &ts[i]);
    uint64_t ext = hbg__ktensor_extent(&x->t[i]);
    HBG__RETURN_IF(ext == 0, HBG_E_KERNEL);
  }
  HBG__TRY(hbg__kernel_check(x->kernel, x->t, x->nt, x->ns));
  for (uint32_t i = 0; i < x->nt; i++) {
    void *p;
    uint64_t ext = hbg__ktensor_extent(&x->t[i]);
    HBG__TRY(resolve(r->e, ts[i].addr, ts[i].offset, ext, &p));
    x->t[i].data = p;
    if (ts[i].mode & HBG_ACCESS_OUT)
      HBG__TRY(hbg__span_add(&r->wr, &r->n_wr, &r->cap_wr,
                             ts[i].addr + ts[i].offset, ext, r->err_task));
  }
  if (x->ns)
    memcpy(x->sc, hbg_img_win_task_scalars(wt),
           (size_t)x->ns * sizeof *x->sc);
  return 0;
}

static int prepare(xrun *r, const hbg_dev_launch_desc *l) {
  hbg__exec *e = r->e;
  void *p;
  hbg_img_win_view wv;
  HBG__TRY(resolve(e, l->window, 0, l->window_bytes, &p));
  /* A private copy: nothing the host or a kernel writes later changes what
   * was validated. */
  HBG__RETURN_IF(l->window_bytes > HBG_IMG_MAX_BYTES, HBG_E_IMG_SIZE);
  void *win = ar_alloc(r, l->window_bytes);
  HBG__RETURN_IF(!win, HBG_E_NOMEM);
  memcpy(win, p, l->window_bytes);
  HBG__TRY(hbg_img_win_validate(win, l->window_bytes, &wv));
  /* Executed from the private copy, but a kernel writing over the bind's own
   * window is a task aimed at the wrong memory all the same. */
  HBG__TRY(hbg__span_add(&r->img, &r->n_img, &r->cap_img, l->window,
                         l->window_bytes, NONE));
  uint32_t n = wv.hdr->n_tasks;
  r->n_tasks = n;
  r->tasks = ar_alloc(r, (size_t)n * sizeof *r->tasks);
  HBG__RETURN_IF(n && !r->tasks, HBG_E_NOMEM);
  uint64_t n_deps = 0, n_nodes = 0;
  for (uint32_t i = 0; i < n; i++) {
    const hbg_win_task *wt = hbg_img_win_task(&wv, i);
    xtask *x = &r->tasks[i];
    r->err_task = i;
    HBG__RETURN_IF(!wt, HBG_E_IMG_REF);
    x->kind = wt->kind;
    const uint32_t *deps = hbg_img_win_task_deps(wt);
    for (uint32_t k = 0; k < wt->n_deps; k++)
      HBG__RETURN_IF(deps[k] >= i, HBG_E_IMG_CYCLE);
    n_deps += wt->n_deps;
    if (wt->kind == HBG_WIN_GRAPH) {
      HBG__TRY(prep_graph(r, wt, x));
      n_nodes += x->def->hdr.n_nodes;
    } else {
      HBG__RETURN_IF(wt->kind != HBG_WIN_TASK, HBG_E_IMG_FIELD);
      HBG__TRY(prep_task(r, wt, x));
    }
  }
  /* The scheduling core's block, sized from the validated images. */
  uint64_t bytes = hbg__sched_bytes(n, n_deps, n_nodes);
  HBG__RETURN_IF(bytes > SIZE_MAX, HBG_E_NOMEM);
  void *block = ar_alloc(r, (size_t)bytes);
  HBG__RETURN_IF(!block, HBG_E_NOMEM);
  r->s = hbg__sched_init(block, n, n_deps, n_nodes);
  for (uint32_t i = 0; i < n; i++) {
    const hbg_win_task *wt = hbg_img_win_task(&wv, i);
    const xtask *x = &r->tasks[i];
    uint32_t bad;
    r->err_task = i;
    HBG__TRY(hbg__sched_task_set(r->s, i, x->kind == HBG_WIN_GRAPH ? &x->g
                                                                   : NULL,
                                 hbg_img_win_task_deps(wt), wt->n_deps, &bad));
  }
  r->err_task = NONE;
  return check_writes(r, l);
}

/* ---- scheduling: the core (sched_src.h), driven under e->mu ---- */

static void fail(xrun *r, int err, uint32_t task, uint32_t node) {
  if (r->error == 0) {
    r->error = err;
    r->err_task = task;
    r->err_node = node;
  }
}

static void check_finished(xrun *r) {
  hbg__sched *s = r->s;
  if (r->finished)
    return;
  if (hbg__sched_complete(s) && r->running == 0) {
    r->finished = 1;
  } else if (r->running == 0 && (s->failed || hbg__sched_ready(s) == 0)) {
    hbg__sched_fail(s, HBG_E_IMG_CSR, NONE, NONE);
    r->finished = 1;
  }
}

/* Run one item; *phases += the kernel phases it ran. */
static int run_item(xrun *r, uint64_t item, uint64_t *phases) {
  uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
  const xtask *x = &r->tasks[i];
  uint64_t ph = 0;
  int rc;
  if (j == NONE) {
    rc = run_kernel(r->e, x->kernel, x->t, x->nt, x->sc, x->ns, &ph);
  } else {
    hbg__ktensor t[HBG_IMG_MAX_ARGS_PER_NODE];
    uint64_t sc[HBG_IMG_MAX_SCALARS_PER_NODE];
    uint32_t k, nt, ns;
    HBG__TRY(node_args(&x->g, x, j, t, sc, &k, &nt, &ns));
    rc = run_kernel(r->e, k, t, nt, sc, ns, &ph);
  }
  *phases += ph;
  return rc;
}

static void wake(hbg__exec *e, const xrun *r) {
  if (e->idle && !r->s->failed && hbg__sched_ready(r->s) >= e->wake_min)
    pthread_cond_signal(&e->cv);
}

/* Pop a share of the ready items (several per lock round trip: kernels
 * are short) and run them; caller holds mu. @return 1 if it ran any. */
static int step_locked(hbg__exec *e, xrun *r) {
  hbg__sched *s = r->s;
  uint64_t avail = hbg__sched_ready(s);
  if (s->failed || avail == 0)
    return 0;
  uint64_t share = (avail + e->n_threads) / (e->n_threads + 1);
  uint64_t take = HBG__MAX(HBG__MIN(share, (uint64_t)BATCH_MAX), (uint64_t)1);
  uint64_t items[BATCH_MAX];
  uint64_t got = 0;
  while (got < take && hbg__sched_pop(s, &items[got]))
    got++;
  take = got;
  r->running++;
  wake(e, r);
  pthread_mutex_unlock(&e->mu);
  uint64_t ran = 0, phases = 0;
  int rc = 0;
  while (ran < take && (rc = run_item(r, items[ran], &phases)) == 0)
    ran++;
  pthread_mutex_lock(&e->mu);
  r->running--;
  r->phases += phases;
  for (uint64_t k = 0; k < ran && !s->failed; k++)
    hbg__sched_done(s, items[k]);
  if (rc < 0)
    hbg__sched_fail(s, rc, (uint32_t)(items[ran] >> 32), (uint32_t)items[ran]);
  wake(e, r);
  check_finished(r);
  if (r->finished)
    pthread_cond_broadcast(&e->cv);
  return 1;
}

/* Step own (when not NULL) or else any running launch; caller holds mu.
 * @return 1 if it ran items (mu was dropped meanwhile: look again). */
static int step_any(hbg__exec *e, xrun *own) {
  if (own && step_locked(e, own))
    return 1;
  for (xrun *r = e->runs; r; r = r->next)
    if (r != own && !r->finished && step_locked(e, r))
      return 1;
  return 0;
}

static void *worker_main(void *arg) {
  hbg__exec *e = arg;
  pthread_mutex_lock(&e->mu);
  while (!e->shutdown) {
    if (step_any(e, NULL))
      continue;
    e->idle++;
    pthread_cond_wait(&e->cv, &e->mu);
    e->idle--;
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

int hbg__exec_run(hbg__exec *e, const hbg_dev_launch_desc *l,
                  hbg_dev_status *st) {
  if (!st)
    return HBG_E_INVAL;
  memset(st, 0, sizeof *st);
  st->task = NONE;
  st->node = NONE;
  if (!e || !l || l->struct_size < sizeof *l) {
    st->error = HBG_E_INVAL;
    return st->error;
  }
  const uint64_t t0 = hbg__now_ns();
  uint64_t t1 = 0;
  xrun r;
  memset(&r, 0, sizeof r);
  r.e = e;
  pthread_mutex_lock(&e->mu);
  r.arena = e->spare;
  e->spare = NULL;
  pthread_mutex_unlock(&e->mu);
  r.err_task = NONE;
  r.err_node = NONE;
  int rc = prepare(&r, l);
  if (rc < 0) {
    fail(&r, rc, r.err_task, r.err_node);
  } else if (r.n_tasks) {
    pthread_mutex_lock(&e->mu);
    hbg__sched_start(r.s);
    t1 = hbg__now_ns();
    r.next = e->runs;
    e->runs = &r;
    wake(e, &r);
    check_finished(&r);
    while (!r.finished) {
      if (step_any(e, &r))
        continue;
      e->idle++;
      pthread_cond_wait(&e->cv, &e->mu);
      e->idle--;
    }
    HBG__SLIST_UNLINK(xrun, e->runs, &r);
    pthread_mutex_unlock(&e->mu);
  }
  if (rc == 0 && r.s && r.s->failed)
    fail(&r, r.s->error, r.s->err_task, r.s->err_node);
  st->error = r.error;
  st->task = r.error ? r.err_task : NONE;
  st->node = r.error ? r.err_node : NONE;
  st->tasks_done = r.s ? r.s->tasks_done : 0;
  st->nodes_done = r.s ? r.s->items_done : 0;
  st->defs_verified = r.defs_verified;
  /* The host clock is the sim's device clock (its virtual clock only adds
   * modelled waits, none of which fall inside a launch). */
  const uint64_t t2 = hbg__now_ns();
  if (!t1)
    t1 = t2;
  st->flags = HBG_DEV_STATUS_SPLIT | HBG_DEV_STATUS_COUNTS;
  st->setup_ns = t1 - t0;
  st->run_ns = t2 - t1;
  st->setup_nodes = r.setup_nodes;
  st->dispatch_ops = r.s ? r.s->ops : 0;
  st->kernel_phases = r.phases;
  st->workers = e->n_threads + 1; /* its threads and the launching one */
  free(r.defs);
  free(r.img);
  free(r.wr);
  pthread_mutex_lock(&e->mu);
  ar_free(&r, &e->spare);
  pthread_mutex_unlock(&e->mu);
  /* the device writes the status after this: no verdict may survive it */
  hbg__exec_invalidate(e, l->status, sizeof *st);
  return st->error;
}

/* HBG_EXEC_WAKE_MIN, or WAKE_MIN when unset or empty.
 * @return 0, or HBG_E_INVAL with the thread's message naming it. */
static int wake_min_env(uint64_t *out) {
  const char *s = getenv(WAKE_MIN_ENV);
  uint64_t v = WAKE_MIN;
  if (s && *s && (hbg__parse_u64(s, &v) < 0 || v == 0 || v > UINT32_MAX)) {
    hbg__error_set("%s='%s': want an unsigned integer 1..%u with an "
                   "optional K, M or G suffix (ready items that wake a "
                   "sleeping executor worker)",
                   WAKE_MIN_ENV, s, UINT32_MAX);
    return HBG_E_INVAL;
  }
  *out = v;
  return 0;
}

int hbg__exec_create(const hbg__exec_mem *mem, uint32_t workers,
                     uint32_t lanes, hbg__exec **out) {
  HBG__RETURN_IF(!mem || !mem->resolve || !out, HBG_E_INVAL);
  if (workers == 0)
    workers = DEFAULT_WORKERS;
  hbg__exec *e = calloc(1, sizeof *e);
  if (!e)
    return HBG_E_NOMEM;
  e->mem = *mem;
  e->lanes = lanes ? lanes : 1;
  int rc = wake_min_env(&e->wake_min);
  if (rc < 0) {
    free(e);
    return rc;
  }
  rc = HBG_E_NOMEM;
  e->threads = calloc(workers, sizeof *e->threads);
  if (!e->threads)
    goto err_threads;
  if (pthread_mutex_init(&e->mu, NULL))
    goto err_mu;
  if (pthread_cond_init(&e->cv, NULL))
    goto err_cv;
  if (hbg__vcache_init(&e->vc))
    goto err_cache_mu;
  if (hbg__ukernels_create(&e->uk))
    goto err_uk;
  for (; e->n_threads < workers; e->n_threads++)
    if (pthread_create(&e->threads[e->n_threads], NULL, worker_main, e)) {
      rc = HBG_E_DEVICE;
      goto err_workers;
    }
  *out = e;
  return 0;

err_workers:
  pthread_mutex_lock(&e->mu);
  e->shutdown = 1;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  for (uint32_t i = 0; i < e->n_threads; i++)
    pthread_join(e->threads[i], NULL);
  hbg__ukernels_destroy(e->uk);
err_uk:
  hbg__vcache_fini(&e->vc);
err_cache_mu:
  pthread_cond_destroy(&e->cv);
err_cv:
  pthread_mutex_destroy(&e->mu);
err_mu:
  free(e->threads);
err_threads:
  free(e);
  return rc;
}

void hbg__exec_destroy(hbg__exec *e) {
  if (!e)
    return;
  pthread_mutex_lock(&e->mu);
  e->shutdown = 1;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  for (uint32_t i = 0; i < e->n_threads; i++)
    pthread_join(e->threads[i], NULL);
  hbg__vcache_fini(&e->vc);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  hbg__ukernels_destroy(e->uk);
  free(e->spare);
  free(e->threads);
  free(e);
}

hbg__ukernels *hbg__exec_ukernels(hbg__exec *e) { return e ? e->uk : NULL; }

/* ---- shared with the launch verifier (src/device/verify.c) ---- */

void hbg__exec_def_view(const void *p, const hbg_def_hdr *h,
                        hbg_img_def_view *v) {
  hbg_img_def_view_trusted(p, h, v);
}

int hbg__exec_def_kernels(const hbg_img_def_view *v, const hbg_def_hdr *h,
                          uint32_t *bad) {
  xdef d;
  memset(&d, 0, sizeof d);
  d.v = *v;
  d.hdr = *h;
  d.v.hdr = &d.hdr;
  HBG__TRY(hbg_img_graph_init(&d.meta, &d.v, NULL, 0));
  return def_kernels_check(&d, bad);
}

uint32_t hbg__exec_node_of_tensor(const hbg_img_def_view *v,
                                  const hbg_def_hdr *h, uint32_t i) {
  xdef d;
  memset(&d, 0, sizeof d);
  d.v = *v;
  d.hdr = *h;
  d.v.hdr = &d.hdr;
  return node_of_tensor(&d, i);
}
