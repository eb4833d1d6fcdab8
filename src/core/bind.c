/*
 * Binds: orchestration into the task window, heap claims, publication,
 * launch, completion, the fatal latch and the per-bind phase records. What
 * differs between upload policies lives in src/core/policy/, one file per
 * policy, reached through rt->ops.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/policy/policy.h"
#include "device/device.h"
#include "kernels/kernels.h"

#define WIN_ALIGN 8u
#define POISON 0xA5

/* ---------------- helpers ---------------- */

int hbg__latch(hbg_bind *b, int rc) {
  if (!b->fatal)
    b->fatal = rc;
  b->st.fatal = b->fatal;
  return rc;
}

void hbg__poison(const hbg_bind *b, void *p, uint64_t n) {
  if (b->rt->cfg.flags & HBG_CFG_POISON_STAGING)
    memset(p, POISON, (size_t)n);
}

int hbg__upload(hbg_bind *b, hbg_phase_bytes *ph, hbg_devptr dst,
                const void *src, uint64_t n, const char *what) {
  uint64_t t0 = hbg__rt_now(b->rt);
  int rc = hbg_dev_copy_h2d(b->rt->dev, dst, src, (size_t)n);
  uint64_t t1 = hbg__rt_now(b->rt);
  hbg__trace(b->rt, HBG_TRACK_UPLOAD, what, t0, t1, n, b->seq);
  if (rc < 0)
    return rc;
  ph->bytes += n;
  ph->copies++;
  b->st.h2d_bytes += n;
  b->st.h2d_copies++;
  return 0;
}

int hbg__upload_nested(hbg_bind *b, hbg_devptr dst, const void *src,
                       uint64_t n, const char *what) {
  uint64_t t0 = hbg__rt_now(b->rt);
  int rc = hbg__upload(b, &b->st.graph, dst, src, n, what);
  uint64_t dt = hbg__rt_now(b->rt) - t0;
  b->nested_upload_ns += dt;
  b->st.graph_upload_ns += dt;
  return rc;
}

static uint64_t full_key_of(const hbg_runtime *rt, const hbg_graph_submit *g) {
  uint64_t head[3] = {g->key, rt->cfg.orch_id, g->n_variant};
  uint64_t h = hbg__hash(head, sizeof head);
  if (g->n_variant)
    h ^= hbg__hash(g->variant, (uint64_t)g->n_variant * 8) *
         0x9E3779B97F4A7C15ull;
  return h;
}

/* The live buffer (hbg_buffer_alloc range) holding addr, or NULL. Argument
 * pos of one layer's graph lives in the same buffer as argument pos of the
 * layer before (its weights, its activations): the buffer found last for
 * this position is tried before searching. */
static const hbg__range *find_buf(hbg_runtime *rt, uint64_t addr,
                                  uint32_t pos) {
  uint32_t *hint = &rt->buf_hint[pos % HBG__ARRAY_LEN(rt->buf_hint)];
  if (*hint < rt->bufs.n) {
    const hbg__range *r = &rt->bufs.v[*hint];
    if (addr - r->start < r->len)
      return r;
  }
  ptrdiff_t i = hbg__rtab_floor(&rt->bufs, addr);
  if (i < 0 || addr - rt->bufs.v[i].start >= rt->bufs.v[i].len)
    return NULL;
  *hint = (uint32_t)i;
  return &rt->bufs.v[i];
}

/* A tensor argument from the caller: valid metadata, element 0 aligned to
 * its dtype, and [element 0, extent) inside the one live buffer (from
 * hbg_buffer_alloc) that holds addr; *ext_out (optional) its extent. On
 * failure hbg_last_error() names `who` pos and what is wrong. */
static int check_tensor(hbg_runtime *rt, const hbg_tensor *t, uint32_t pos,
                        const char *who, uint64_t *ext_out) {
  const char *why = NULL;
  uint64_t ext = hbg_tensor_extent(t);
  if (t->addr == 0)
    why = "addr is 0";
  else if (t->mode < HBG_ACCESS_IN || t->mode > HBG_ACCESS_INOUT)
    why = "mode is not IN, OUT or INOUT";
  else if (ext == 0)
    why = "bad dtype, ndim, shape or strides";
  for (uint32_t i = t->ndim; !why && i < HBG_MAX_DIMS; i++)
    if (t->shape[i] || t->strides[i])
      why = "shape or strides set past ndim";
  if (why) {
    hbg__error_set("%s %u: %s", who, pos, why);
    return HBG_E_INVAL;
  }
  /* element sizes are powers of two; ext != 0 means the dtype is known */
  uint32_t es = hbg_dtype_size(t->dtype);
  if ((t->addr + t->offset) & (es - 1u)) {
    hbg__error_set("%s %u: element 0 (offset %llu) is not aligned to its "
                   "dtype's %u bytes",
                   who, pos, (unsigned long long)t->offset, es);
    return HBG_E_INVAL;
  }
  const hbg__range *r = find_buf(rt, t->addr, pos);
  if (!r) {
    hbg__error_set("%s %u: addr 0x%llx is in no live hbg_buffer_alloc buffer",
                   who, pos, (unsigned long long)t->addr);
    return HBG_E_RANGE;
  }
  uint64_t room = r->start + r->len - t->addr; /* > 0: addr is inside */
  if (t->offset > room || ext > room - t->offset) {
    hbg__error_set("%s %u: offset %llu + %llu bytes leave the %llu-byte "
                   "buffer at 0x%llx",
                   who, pos, (unsigned long long)t->offset,
                   (unsigned long long)ext, (unsigned long long)r->len,
                   (unsigned long long)r->start);
    return HBG_E_RANGE;
  }
  if (ext_out)
    *ext_out = ext;
  return 0;
}

static int check_deps(const hbg_bind *b, const hbg_task_id *deps,
                      uint32_t n, const char *who) {
  HBG__RETURN_IF(n && !deps, HBG_E_INVAL);
  if (n > HBG_IMG_MAX_ARGS_PER_NODE * 4) {
    hbg__error_set("%s: %u dependencies; at most %u", who, n,
                   HBG_IMG_MAX_ARGS_PER_NODE * 4);
    return HBG_E_LIMIT;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (deps[i] >= b->n_tasks) {
      if (b->n_tasks)
        hbg__error_set("%s: dependency %u is task id %u, but the bind's "
                       "tasks so far are 0..%u",
                       who, i, deps[i], b->n_tasks - 1);
      else
        hbg__error_set("%s: dependency %u is task id %u, but the bind has "
                       "no task yet",
                       who, i, deps[i]);
      return HBG_E_INVAL;
    }
  }
  return 0;
}

/* HBG_DEPS_INFERRED: the entry's dependencies from its n tensors (mode
 * from modes[i] when given) merged with its explicit ones; *deps and *n_deps
 * then point at the merged list. Changes no record: hbg__deps_commit does,
 * once the entry is published. */
static int infer_deps(hbg_bind *b, const hbg_tensor *t, uint32_t n,
                      const uint8_t *modes, const char *who,
                      const hbg_task_id **deps, uint32_t *n_deps) {
  if (b->rt->cfg.deps != HBG_DEPS_INFERRED)
    return 0;
  hbg__deps *d = &b->deps;
  hbg__deps_entry(d);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t mode = modes ? modes[i] : t[i].mode;
    /* check_tensor found it: never NULL */
    const hbg__range *r = find_buf(b->rt, t[i].addr, i);
    HBG__TRY(hbg__deps_add(d, r->start, t[i].addr + t[i].offset,
                           hbg_tensor_extent(&t[i]),
                           (mode & HBG_ACCESS_OUT) != 0));
  }
  HBG__TRY(hbg__deps_infer(d, *deps, *n_deps, who, b->n_tasks));
  *deps = d->out;
  *n_deps = d->n_out;
  return 0;
}

static void commit_deps(hbg_bind *b, uint32_t self) {
  if (b->rt->cfg.deps == HBG_DEPS_INFERRED)
    hbg__deps_commit(&b->deps, self);
}

static void to_sub_tensor(hbg_sub_tensor *d, const hbg_tensor *t) {
  memset(d, 0, sizeof *d);
  d->addr = t->addr;
  d->offset = t->offset;
  memcpy(d->shape, t->shape, sizeof d->shape);
  memcpy(d->strides, t->strides, sizeof d->strides);
  d->dtype = t->dtype;
  d->ndim = t->ndim;
  d->mode = t->mode;
}

/* ---------------- device window buffer ---------------- */

int hbg__win_dev_grow(hbg_bind *b, uint64_t cap) {
  hbg_runtime *rt = b->rt;
  hbg__slot *s = b->slot;
  hbg_devptr nd = 0;
  HBG__TRY(hbg_dev_mem_alloc(rt->dev, (size_t)cap, &nd));
  b->st.dev_allocs++;
  if (b->win_flushed) {
    /* Chunks in flight target the old buffer; let them land, resend all. */
    int rc = hbg_dev_queue_sync(rt->dev, s->q);
    if (rc < 0) {
      hbg__mem_release(rt, nd, "window buffer");
      return rc;
    }
    b->win_flushed = 0;
  }
  hbg_devptr old = s->win_dev;
  if (old && rt->ops->window_moved)
    rt->ops->window_moved(b, old, nd);
  hbg__mem_release(rt, old, "window buffer");
  s->win_dev = nd;
  s->win_cap = cap;
  return 0;
}

int hbg__win_dev_ensure(hbg_bind *b, uint64_t need) {
  hbg__slot *s = b->slot;
  if (s->win_cap >= need)
    return 0;
  return hbg__win_dev_grow(
      b, HBG__ALIGN_UP(HBG__MAX(need, s->win_cap * 2), 65536));
}

/* ---------------- host window buffer ---------------- */

/* Reserve n bytes at the end of the window; @return offset or < 0. A
 * window in the pinned arena (the policy's begin put it there) falls back
 * to heap memory past its end (counted) and the next bind grows the arena. */
static int64_t win_append(hbg_bind *b, uint64_t n) {
  hbg__buf *w = &b->win;
  uint64_t need = w->len + n;
  HBG__RETURN_IF(need > HBG_IMG_MAX_BYTES, HBG_E_LIMIT);
  if (need > w->cap) {
    uint64_t cap = HBG__MAX(need, w->cap ? w->cap * 2 : 65536);
    cap = HBG__ALIGN_UP(cap, 4096);
    uint8_t *p = aligned_alloc(64, (size_t)cap);
    if (!p)
      return HBG_E_NOMEM;
    if (w->len)
      memcpy(p, w->p, (size_t)w->len);
    if (w->pinned) {
      b->st.fallback++;
      w->pinned = 0;
    } else {
      free(w->p);
    }
    w->p = p;
    w->cap = cap;
  }
  if (b->rt->ops->window_grow) {
    int rc = b->rt->ops->window_grow(b, need);
    if (rc < 0)
      return rc;
  }
  uint64_t off = w->len;
  memset(w->p + off, 0, (size_t)n);
  w->len = need;
  return (int64_t)off;
}

/* Room for one more index entry, reserved before the entry is written so
 * that publishing it cannot fail. */
static int index_reserve(hbg_bind *b) {
  return HBG__RESERVE(b->index, b->index_cap, (uint64_t)b->n_tasks + 1);
}

static void index_push(hbg_bind *b, uint32_t off) {
  b->index[b->n_tasks++] = off;
}

/* ---------------- pending images ---------------- */

int hbg__stage_pending(hbg_bind *b, hbg__stage *st, uint8_t *pinned) {
  HBG__TRY(HBG__RESERVE(b->pend, b->pend_cap, (uint64_t)b->n_pend + 1));
  uint8_t *host = pinned;
  if (!host) {
    host = aligned_alloc(64, HBG__ALIGN_UP(st->sub_size, 64));
    HBG__RETURN_IF(!host, HBG_E_NOMEM);
    st->heap_owned = 1;
  }
  st->host = host;
  st->pending = 1;
  b->pend[b->n_pend++] = (hbg__pending){.host = host,
                                         .size = st->sub_size,
                                         .heap_owned = st->heap_owned,
                                         .full_key = st->full_key,
                                         .occurrence = st->occurrence,
                                         .blk_off = st->blk_off};
  return 0;
}

void hbg__pend_uploaded(hbg_bind *b, hbg__pending *p) {
  b->st.def_bytes += p->def_size;
  p->uploaded = 1;
  hbg__poison(b, p->host, p->size);
}

/* Undo a stage that did not reach publication. */
static void stage_undo(hbg_bind *b, const hbg__stage *st) {
  if (st->pending)
    b->n_pend--;
  if (st->heap_owned)
    free(st->host);
}

/* ---------------- slot lifecycle ---------------- */

void hbg__bind_reset(hbg_bind *b) {
  for (uint32_t i = 0; i < b->n_pend; i++)
    if (b->pend[i].heap_owned)
      free(b->pend[i].host);
  b->n_pend = 0;
  if (b->win.p && !b->win.pinned)
    free(b->win.p);
  memset(&b->win, 0, sizeof b->win);
  b->n_tasks = 0;
  b->win_flushed = 0;
  b->heap_used = 0;
  b->sub_bytes = 0;
  b->sz_deps = b->sz_nodes = b->sz_kscr = 0;
  b->sz_def_bytes = b->sz_defs = b->sz_btensors = b->sz_bscalars = 0;
  b->bulk_len = 0;
  b->fatal = 0;
  b->captured = 0;
  b->err_entry = HBG_TASK_NONE;
  b->err_node = HBG_TASK_NONE;
  b->nested_upload_ns = 0;
  hbg__map_clear(&b->occ);
  hbg__deps_reset(&b->deps);
  memset(&b->st, 0, sizeof b->st);
  b->state = HBG__BIND_IDLE;
}

/* The device is done with the slot: release per-bind device memory and
 * resize the retained staging for the next bind. */
int hbg__slot_reclaim(hbg_runtime *rt, hbg__slot *s) {
  hbg__retired_release(rt, s);
  if (!rt->dev || !s->q)
    return 0;
  /* The policy's per-bind memory first: frees before the growths below. */
  if (rt->ops->reclaim)
    rt->ops->reclaim(rt, s);
  /* Growth is optional: when an allocation fails the slot keeps what it
   * had, and the next bind falls back to heap memory / extra heap blocks
   * where it overflows. */
  uint64_t hw = s->arena.high_water;
  if (hw > s->arena.cap) {
    uint64_t cap = HBG__ALIGN_UP(hw, 65536);
    void *p = NULL;
    if (hbg_dev_host_alloc(rt->dev, (size_t)cap, &p) == 0) {
      hbg__arena_release(rt, s);
      s->arena.base = p;
      s->arena.cap = cap;
    }
  }
  s->arena.used = 0;
  s->arena.high_water = 0;
  if (s->heap_high_water > s->heap_cap) {
    uint64_t cap = HBG__ALIGN_UP(s->heap_high_water, 65536);
    hbg_devptr d = 0;
    if (hbg_dev_mem_alloc(rt->dev, (size_t)cap, &d) == 0) {
      hbg__mem_release(rt, s->heap_dev, "heap block");
      s->heap_dev = d;
      s->heap_cap = cap;
    }
  }
  for (uint32_t i = 0; i < s->n_heap_extra; i++)
    hbg__mem_release(rt, s->heap_extra[i], "extra heap block");
  s->n_heap_extra = 0;
  s->heap_high_water = 0;
  return 0;
}

int hbg_bind_begin(hbg_runtime *rt, hbg_bind **out) {
  HBG__RETURN_IF(!rt || !out, HBG_E_INVAL);
  HBG__GUARD(rt, "hbg_bind_begin");
  HBG__RETURN_IF(rt->recording, HBG_E_NESTED);
  hbg__slot *s = &rt->slots[rt->next_slot];
  HBG__RETURN_IF(s->bind.state != HBG__BIND_IDLE, HBG_E_STATE);
  /* While the caller captures a queue hbg launched on, nothing may wait,
   * allocate or free: a slot must be idle and keep what it has. */
  int capturing = hbg__capture_begin_check(rt, s);
  if (capturing < 0)
    return capturing;
  if (!capturing && !s->status_dev) {
    /* The slot's staging went to a captured bind: make it anew. */
    HBG__TRY(hbg__status_word_new(rt, s));
    if (rt->ops->arena && !s->arena.base)
      s->arena.high_water = HBG__MAX(s->arena.high_water,
                                     rt->cfg.arena_bytes);
  }
  if (!capturing)
    hbg__captures_reap(rt);
  if (s->in_flight) {
    /* Reuse waits on that bind's completion event. */
    HBG__TRY(hbg_dev_event_wait(rt->dev, s->done));
    s->in_flight = 0;
  }
  if (s->undrained) {
    HBG__TRY(hbg__slot_drain(rt, s));
    s->undrained = 0;
  }
  hbg_bind *b = &s->bind;
  hbg__bind_reset(b);
  if (capturing) {
    s->arena.used = 0;
    s->arena.high_water = 0;
  } else {
    HBG__TRY(hbg__slot_reclaim(rt, s));
  }
  if (rt->ops->begin)
    HBG__TRY(rt->ops->begin(b));
  rt->next_slot = (rt->next_slot + 1) % rt->depth;
  b->seq = ++rt->bind_seq;
  b->state = HBG__BIND_OPEN;
  b->st.struct_size = sizeof b->st;
  b->st.policy = rt->cfg.policy;
  int64_t off = win_append(b, sizeof(hbg_win_hdr));
  if (off < 0) {
    hbg__bind_reset(b);
    return (int)off;
  }
  b->t_begin = hbg__rt_now(rt);
  *out = b;
  return 0;
}

/* ---------------- ordinary tasks ---------------- */

static int open_check(const hbg_bind *b) {
  HBG__RETURN_IF(!b, HBG_E_INVAL);
  HBG__RETURN_IF(b->rt->recording, HBG_E_NESTED);
  HBG__RETURN_IF(b->state != HBG__BIND_OPEN, HBG_E_STATE);
  HBG__RETURN_IF(b->fatal, HBG_E_FATAL);
  return 0;
}

int hbg_submit_task(hbg_bind *b, const hbg_task *t, hbg_task_id *out) {
  hbg__error_clear();
  HBG__RETURN_IF(!b, HBG_E_INVAL);
  HBG__GUARD(b->rt, "hbg_submit_task");
  HBG__TRY(open_check(b));
  HBG__RETURN_IF(!t, HBG_E_INVAL);
  HBG__RETURN_IF(!hbg_img_kernel_valid(t->kernel), HBG_E_KERNEL);
  HBG__RETURN_IF(t->n_args > HBG_IMG_MAX_ARGS_PER_NODE ||
                     t->n_scalars > HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_E_LIMIT);
  HBG__RETURN_IF((t->n_args && !t->args) || (t->n_scalars && !t->scalars),
                 HBG_E_INVAL);
  uint64_t ext[HBG_IMG_MAX_ARGS_PER_NODE];
  for (uint32_t i = 0; i < t->n_args; i++)
    HBG__TRY(check_tensor(b->rt, &t->args[i], i, "hbg_submit_task: argument",
                          &ext[i]));
  for (uint32_t i = 0; i < t->n_scalars; i++) {
    if (t->scalars[i].kind != HBG_SCALAR_STATIC) {
      hbg__error_set("hbg_submit_task: scalar %u: an ordinary task's scalars "
                     "are static (boundary scalars exist only in a record "
                     "callback)",
                     i);
      return HBG_E_INVAL;
    }
  }
  HBG__TRY(check_deps(b, t->deps, t->n_deps, "hbg_submit_task"));
  HBG__TRY(hbg__task_kernel_check(t, "hbg_submit_task"));
  HBG__TRY(hbg__dev_user_kernel_check(b->rt->dev, t, "hbg_submit_task"));
  HBG__TRY(hbg__task_overlap_check(t, ext, "hbg_submit_task", "task",
                                   b->n_tasks));
  const hbg_task_id *deps = t->deps;
  uint32_t n_deps = t->n_deps;
  HBG__TRY(infer_deps(b, t->args, t->n_args, NULL, "hbg_submit_task", &deps,
                      &n_deps));

  uint32_t off_t = sizeof(hbg_win_task);
  uint32_t off_s = off_t + t->n_args * (uint32_t)sizeof(hbg_sub_tensor);
  uint32_t off_d = off_s + t->n_scalars * 8u;
  uint32_t size = HBG__ALIGN_UP(off_d + n_deps * 4u, WIN_ALIGN);
  HBG__TRY(index_reserve(b));
  int64_t off = win_append(b, size);
  if (off < 0)
    return (int)off;
  hbg_win_task *e = (hbg_win_task *)(b->win.p + off);
  e->kind = HBG_WIN_TASK;
  e->size = size;
  e->kernel = t->kernel;
  e->n_deps = n_deps;
  e->n_tensors = t->n_args;
  e->n_scalars = t->n_scalars;
  e->off_tensors = off_t;
  e->off_scalars = off_s;
  e->off_deps = off_d;
  hbg_sub_tensor *st = (hbg_sub_tensor *)((uint8_t *)e + off_t);
  for (uint32_t i = 0; i < t->n_args; i++)
    to_sub_tensor(&st[i], &t->args[i]);
  uint64_t *sc = (uint64_t *)((uint8_t *)e + off_s);
  for (uint32_t i = 0; i < t->n_scalars; i++)
    sc[i] = t->scalars[i].value;
  if (n_deps)
    memcpy((uint8_t *)e + off_d, deps, (size_t)n_deps * 4);
  index_push(b, (uint32_t)off);
  commit_deps(b, b->n_tasks - 1);
  b->sz_deps += n_deps;
  b->sz_kscr = HBG__MAX(b->sz_kscr, hbg__task_scratch_floats(t));
  if (out)
    *out = b->n_tasks - 1;
  int rc = b->rt->ops->published ? b->rt->ops->published(b, NULL) : 0;
  return rc < 0 ? hbg__latch(b, rc) : 0;
}

/* ---------------- graph submissions ---------------- */

/* hbg_record_task's check that the device can run an inner task's user
 * kernel (hbg__rec_kernel_hook). */
static int user_kernel_hook(void *dev, const hbg_task *t, const char *who) {
  return hbg__dev_user_kernel_check(dev, t, who);
}

/* hbg_last_error() prefixed with the call and g's key. @return rc. */
static int key_error(const hbg_graph_submit *g, int rc) {
  char why[400];
  snprintf(why, sizeof why, "%s", hbg_last_error());
  hbg__error_set("hbg_submit_graph: key %llu: %s", (unsigned long long)g->key,
                 why);
  return rc;
}

/* Run g's record callback into a new Definition. */
static int record_def(hbg_bind *b, const hbg_graph_submit *g, hbg__def **out) {
  hbg_runtime *rt = b->rt;
  hbg_recorder *rec = NULL;
  HBG__TRY(hbg__rec_begin(g->tensors, g->n_tensors, g->scalars, g->n_scalars,
                          &rec));
  hbg__rec_check_kernels(rec);
  hbg__rec_kernel_hook(rec, user_kernel_hook, rt->dev);
  rt->recording = 1;
  int urc = g->record(rec, g->user);
  rt->recording = 0;
  if (urc != 0) {
    /* The callback most often passes on a failed hbg_record_task: keep
     * what that call said (the callback's own later calls may have
     * replaced hbg_last_error()). */
    const char *inner = hbg__rec_error(rec);
    char why[320] = "";
    if (inner)
      snprintf(why, sizeof why, "; its first failed hbg_record_task: %s",
               inner);
    hbg__error_set("hbg_submit_graph: key %llu: the record callback returned "
                   "%d%s",
                   (unsigned long long)g->key, urc, why);
    hbg__rec_abort(rec);
    return HBG_E_RECORD;
  }
  return hbg__rec_finish(rec, out);
}

/* *out points into the graph cache: valid until the next eviction. With
 * HBG_RECORD_PER_BIND a graph recorded before this bind is recorded again
 * (its device-side state is kept: hbg__graph_redefine). */
static int graph_lookup(hbg_bind *b, const hbg_graph_submit *g, uint64_t fk,
                        hbg__graph **out) {
  hbg_runtime *rt = b->rt;
  hbg__graph *gr = hbg__map_get(&rt->graphs, fk, 0, 0);
  if (gr && (rt->cfg.record != HBG_RECORD_PER_BIND || gr->rec_seq == b->seq)) {
    int rc = hbg__def_check_boundary(gr->def, g->tensors, g->n_tensors,
                                     g->n_scalars);
    if (rc < 0)
      return key_error(g, rc);
    hbg__lru_touch(rt, gr->lru);
    *out = gr;
    return 0;
  }
  uint64_t t0 = hbg__rt_now(rt);
  hbg__def *def = NULL;
  HBG__TRY(record_def(b, g, &def));
  int rc;
  if (gr) {
    rc = hbg__graph_redefine(rt, gr, def);
    if (rc < 0) {
      hbg__error_set("hbg_submit_graph: key %llu recorded again: out of "
                     "host memory retiring its old resident Definition",
                     (unsigned long long)g->key);
      hbg__def_free(def);
      return rc;
    }
    hbg__lru_touch(rt, gr->lru);
  } else {
    b->st.n_evicted += hbg__graph_make_room(rt);
    rc = hbg__graph_insert(rt, fk, def, &gr);
    if (rc < 0) {
      hbg__def_free(def);
      return rc;
    }
  }
  gr->rec_seq = b->seq;
  b->st.n_recorded++;
  hbg__trace(rt, HBG_TRACK_ORCH, "record", t0, hbg__rt_now(rt), 0, b->seq);
  *out = gr;
  return 0;
}

/* Claim def->heap_size bytes of the slot's device heap. */
static int heap_claim(hbg_bind *b, uint64_t size, hbg_devptr *out) {
  hbg__slot *s = b->slot;
  if (size == 0) {
    *out = 0;
    return 0;
  }
  uint64_t start = HBG__ALIGN_UP(b->heap_used, 256);
  uint64_t end = start + size;
  if (end > s->heap_high_water)
    s->heap_high_water = end;
  if (end <= s->heap_cap) {
    b->heap_used = end;
    *out = s->heap_dev + start;
    return 0;
  }
  /* Past the retained block: an extra block, merged at the next bind. */
  HBG__TRY(HBG__RESERVE(s->heap_extra, s->heap_extra_cap,
                        (uint64_t)s->n_heap_extra + 1));
  hbg_devptr d = 0;
  HBG__TRY(hbg_dev_mem_alloc(b->rt->dev, (size_t)size, &d));
  b->st.dev_allocs++;
  s->heap_extra[s->n_heap_extra++] = d;
  b->heap_used = end;
  *out = d;
  return 0;
}

/* What a graph submission claims from its slot before publication. */
typedef struct claim_mark {
  uint64_t heap_used, arena_used, bulk_len;
  uint32_t n_heap_extra;
} claim_mark;

static claim_mark claim_save(const hbg_bind *b) {
  claim_mark m = {b->heap_used, b->slot->arena.used, b->bulk_len,
                  b->slot->n_heap_extra};
  return m;
}

/* Return the claims of a submission that failed before publication: heap
 * bytes, extra heap blocks (nothing refers to them yet) and arena bytes.
 * High-water marks stay: they only size the next bind's blocks. */
static void claim_undo(hbg_bind *b, const claim_mark *m) {
  hbg__slot *s = b->slot;
  while (s->n_heap_extra > m->n_heap_extra)
    hbg__mem_release(b->rt, s->heap_extra[--s->n_heap_extra],
                     "extra heap block");
  b->heap_used = m->heap_used;
  s->arena.used = m->arena_used;
  b->bulk_len = m->bulk_len;
}

int hbg_submit_graph(hbg_bind *b, const hbg_graph_submit *g,
                     hbg_task_id *out) {
  hbg__error_clear();
  HBG__RETURN_IF(!b, HBG_E_INVAL);
  HBG__GUARD(b->rt, "hbg_submit_graph");
  HBG__TRY(open_check(b));
  HBG__RETURN_IF(!g || !g->record, HBG_E_INVAL);
  HBG__RETURN_IF((g->n_tensors && !g->tensors) ||
                     (g->n_scalars && !g->scalars) ||
                     (g->n_variant && !g->variant),
                 HBG_E_INVAL);
  HBG__RETURN_IF(g->n_tensors > HBG_IMG_MAX_BOUNDARY ||
                     g->n_scalars > HBG_IMG_MAX_BOUNDARY,
                 HBG_E_LIMIT);
  HBG__TRY(HBG__RESERVE(b->bext, b->bext_cap, 3ull * g->n_tensors));
  for (uint32_t i = 0; i < g->n_tensors; i++)
    HBG__TRY(check_tensor(b->rt, &g->tensors[i], i,
                          "hbg_submit_graph: boundary tensor", &b->bext[i]));
  HBG__TRY(check_deps(b, g->deps, g->n_deps, "hbg_submit_graph"));

  hbg_runtime *rt = b->rt;
  const hbg__policy_ops *ops = rt->ops;
  uint64_t fk = full_key_of(rt, g);
  hbg__graph *gr = NULL;
  HBG__TRY(graph_lookup(b, g, fk, &gr));
  const hbg__def *def = gr->def;
  /* The same Definition may be replayed over any addresses: two boundary
   * tensors its nodes do not order may not alias. */
  int arc = hbg__def_check_alias(gr->def, g->tensors, b->bext,
                                 b->bext + g->n_tensors);
  if (arc < 0)
    return key_error(g, arc);
  const hbg_task_id *deps = g->deps;
  uint32_t n_deps = g->n_deps;
  HBG__TRY(infer_deps(b, g->tensors, g->n_tensors, def->bmode,
                      "hbg_submit_graph", &deps, &n_deps));

  hbg__occ *oc = hbg__map_get(&b->occ, fk, 0, 1);
  HBG__RETURN_IF(!oc, HBG_E_NOMEM);

  hbg__stage st = {.gr = gr,
                   .def = def,
                   .full_key = fk,
                   .occurrence = oc->count,
                   .sub_size = hbg__sub_size(def, (int)ops->inline_def)};
  uint32_t deps_bytes = HBG__ALIGN_UP(n_deps * 4u, WIN_ALIGN);
  uint32_t entry_size = (uint32_t)sizeof(hbg_win_task) + deps_bytes;

  /* Stage: claims, the policy's staging, the window entry. Every failure
   * up to the entry leaves the bind as it was. */
  HBG__TRY(index_reserve(b));
  const claim_mark mark = claim_save(b);
  hbg_devptr heap = 0;
  int rc = heap_claim(b, def->heap_size, &heap);
  if (rc < 0)
    goto err_claim;
  rc = ops->stage(b, &st);
  if (rc < 0)
    goto err_stage;
  int64_t off = win_append(b, (uint64_t)entry_size +
                                  (st.in_window ? st.sub_size : 0));
  if (off < 0) {
    rc = (int)off;
    goto err_stage;
  }
  if (st.in_window) {
    st.host = b->win.p + off + entry_size;
    st.sub_dev = b->slot->win_dev + (uint64_t)off + entry_size;
    b->sub_bytes += st.sub_size;
  }
  if (st.fallback)
    b->st.fallback++;
  hbg__pending *pend = st.pending ? &b->pend[b->n_pend - 1] : NULL;
  if (pend)
    pend->entry_off = (uint32_t)off;

  /* The entry exists: from here a failure latches a fatal error. */
  rc = hbg__sub_write(st.host, st.sub_size, def, fk, st.occurrence,
                      g->tensors, g->scalars, (int)ops->inline_def);
  if (rc < 0)
    return hbg__latch(b, rc);
  if (ops->inline_def) {
    uint32_t def_off = ((const hbg_sub_hdr *)st.host)->off_def;
    if (pend) {
      pend->def_off = def_off;
      pend->def_size = def->size;
    }
    if (st.sub_dev)
      st.def_dev = st.sub_dev + def_off;
  }

  hbg_win_task *e = (hbg_win_task *)(b->win.p + off);
  e->kind = HBG_WIN_GRAPH;
  e->size = entry_size;
  e->n_deps = n_deps;
  e->off_deps = sizeof(hbg_win_task);
  e->sub_size = st.sub_size;
  e->sub_addr = st.sub_dev;
  e->def_addr = st.def_dev;
  e->heap_addr = heap;
  e->def_size = def->size;
  if (n_deps)
    memcpy((uint8_t *)e + e->off_deps, deps, (size_t)n_deps * 4);

  /* Publish: the slot is claimed and the dependencies registered. */
  index_push(b, (uint32_t)off);
  commit_deps(b, b->n_tasks - 1);
  b->sz_deps += n_deps;
  b->sz_nodes += def->n_nodes;
  b->sz_kscr = HBG__MAX(b->sz_kscr, def->kscr_floats);
  b->sz_btensors += def->n_btensors;
  b->sz_bscalars += def->n_bscalars;
  if (oc->count == 0) { /* each key's Definition once per bind */
    b->sz_def_bytes += def->size;
    b->sz_defs++;
  }
  oc->count++;
  b->st.n_graphs++;
  if (out)
    *out = b->n_tasks - 1;
  rc = ops->published ? ops->published(b, &st) : 0;
  return rc < 0 ? hbg__latch(b, rc) : 0;

err_stage:
  stage_undo(b, &st);
err_claim:
  claim_undo(b, &mark);
  return rc;
}

/* ---------------- launch / wait / end ---------------- */

/* The window's index and header, and a device window that holds it. */
int hbg__finish_window(hbg_bind *b) {
  uint64_t idx_bytes = HBG__ALIGN_UP((uint64_t)b->n_tasks * 4, WIN_ALIGN);
  int64_t off = win_append(b, idx_bytes ? idx_bytes : WIN_ALIGN);
  if (off < 0)
    return (int)off;
  if (b->n_tasks)
    memcpy(b->win.p + off, b->index, (size_t)b->n_tasks * 4);
  hbg_win_hdr *h = (hbg_win_hdr *)b->win.p;
  h->magic = HBG_WIN_MAGIC;
  h->version = HBG_IMG_VERSION;
  h->total_size = (uint32_t)b->win.len;
  h->n_tasks = b->n_tasks;
  h->off_index = (uint32_t)off;
  h->bind_seq = b->seq;
  return hbg__win_dev_ensure(b, b->win.len);
}

/* Upload the finished window. On a queue the caller lent (lq non-NULL), a
 * window in the pinned arena with nothing of it copied yet goes in one
 * async copy on that queue, ahead of the launch: no synchronisation. */
static int upload_window(hbg_bind *b, hbg_dev_queue *lq) {
  hbg_runtime *rt = b->rt;
  hbg__slot *s = b->slot;
  HBG__TRY(hbg__finish_window(b));
  if (lq && b->win.pinned && !b->win_flushed) {
    uint64_t t0 = hbg__rt_now(rt);
    HBG__TRY(hbg_dev_copy_h2d_async(rt->dev, lq, s->win_dev, b->win.p,
                                    (size_t)b->win.len));
    hbg__trace(rt, HBG_TRACK_UPLOAD, "window", t0, hbg__rt_now(rt),
               b->win.len, b->seq);
    b->st.window.bytes += b->win.len;
    b->st.window.copies++;
    b->st.h2d_bytes += b->win.len;
    b->st.h2d_copies++;
    /* The arena is read by the copy until the bind completes: it is
     * reclaimed only after the completion event (hbg_bind_begin). */
    return 0;
  }
  if (b->win_flushed) {
    /* The tail, then the header, after the chunks already on the queue. */
    uint64_t t0 = hbg__rt_now(rt);
    uint64_t n = b->win.len - b->win_flushed;
    HBG__TRY(hbg_dev_copy_h2d_async(rt->dev, s->q, s->win_dev + b->win_flushed,
                                    b->win.p + b->win_flushed, (size_t)n));
    HBG__TRY(hbg_dev_copy_h2d_async(rt->dev, s->q, s->win_dev, b->win.p,
                                    sizeof(hbg_win_hdr)));
    HBG__TRY(hbg_dev_queue_sync(rt->dev, s->q));
    hbg__trace(rt, HBG_TRACK_UPLOAD, "window_tail", t0, hbg__rt_now(rt),
               n + sizeof(hbg_win_hdr), b->seq);
    b->st.window.bytes += n + sizeof(hbg_win_hdr);
    b->st.window.copies += 2;
    b->st.h2d_bytes += n + sizeof(hbg_win_hdr);
    b->st.h2d_copies += 2;
  } else {
    HBG__TRY(hbg__upload(b, &b->st.window, s->win_dev, b->win.p, b->win.len,
                         "window"));
  }
  hbg__poison(b, b->win.p, b->win.len);
  return 0;
}

/* The device ran past its deadline: where it waited, for hbg_last_error
 * (kept in the bind: hbg_bind_wait sets it after collecting). */
static void timeout_message(hbg_bind *b, const hbg_dev_status *st) {
  char *m = b->timeout_msg;
  const size_t n = sizeof b->timeout_msg;
  switch (st->phase) {
  case HBG_DEV_PHASE_START:
    snprintf(m, n, "the device executor ran past its deadline waiting for "
                   "its launch to begin: %u of %u CTAs started (the others "
                   "were not resident: another kernel holding the device's "
                   "SMs?)",
             st->arrived, st->ctas);
    break;
  case HBG_DEV_PHASE_SETUP:
    snprintf(m, n, "the device executor ran past its deadline in set-up, "
                   "at grid barrier %u: %u of %u CTAs arrived (the others "
                   "were not resident, another kernel holding the device's "
                   "SMs, or slower than the deadline allows)",
             st->step, st->arrived, st->ctas);
    break;
  case HBG_DEV_PHASE_RUN:
    if (st->step == 1 && st->node != HBG_TASK_NONE)
      snprintf(m, n, "the device executor ran past its deadline in the run: "
                     "window entry %u, graph node %u was still running",
               st->task, st->node);
    else if (st->step == 1)
      snprintf(m, n, "the device executor ran past its deadline in the run: "
                     "window entry %u (an ordinary task) was still running",
               st->task);
    else if (st->task != HBG_TASK_NONE)
      snprintf(m, n, "the device executor ran past its deadline in the run: "
                     "window entry %u was the first not complete",
               st->task);
    else
      snprintf(m, n, "the device executor ran past its deadline in the run");
    break;
  default:
    snprintf(m, n, "the device executor ran past its deadline");
  }
}

/* The device has finished the launched bind: read its status. An
 * unreadable status is the bind's outcome, for later calls too. */
static void collect(hbg_bind *b) {
  hbg__slot *s = b->slot;
  s->in_flight = 0;
  b->st.exec_ns = hbg__rt_now(b->rt) - b->t_launch_start;
  /* Device time is a measurement: a timer that cannot be read leaves 0,
   * and the bind's outcome stands. */
  uint64_t dns = 0;
  if (s->timed && hbg_dev_event_elapsed(b->rt->dev, s->start, s->done,
                                        &dns) == 0)
    b->st.device_ns = dns;
  s->timed = 0;
  hbg_dev_status st;
  memset(&st, 0, sizeof st);
  int rc = hbg_dev_copy_d2h(b->rt->dev, &st, s->status_dev, sizeof st);
  b->st.device_status = rc < 0 ? rc : st.error;
  if (rc == 0 && st.error) {
    b->err_entry = st.task;
    b->err_node = st.node;
  }
  if (rc == 0) {
    b->st.exec_defs_validated = st.defs_verified;
    if (st.flags & HBG_DEV_STATUS_SPLIT) {
      b->st.exec_split = 1;
      b->st.device_setup_ns = st.setup_ns;
      b->st.device_run_ns = st.run_ns;
      b->st.exec_setup_nodes = st.setup_nodes;
    }
    if (st.flags & HBG_DEV_STATUS_COUNTS) {
      b->st.exec_counts = 1;
      b->st.exec_items = st.nodes_done;
      b->st.exec_dispatch_ops = st.dispatch_ops;
      b->st.exec_kernel_phases = st.kernel_phases;
      b->st.device_body_ns = st.body_ns;
      b->st.device_tail_ns = st.tail_ns;
      b->st.exec_workers = st.workers;
    }
    if (st.error == HBG_E_TIMEOUT)
      timeout_message(b, &st);
  }
}

/* Binds of one runtime run on the device in launch order: b's queue lq
 * waits for the previously launched bind's completion event, on the
 * device (queue_wait_event), or on the host where the backend has no such
 * op. That bind was itself ordered after the one before, so one wait
 * orders b after all of them. @return 0, or the error (nothing launched). */
static int order_after_previous(hbg_bind *b, hbg_dev_queue *lq) {
  hbg_runtime *rt = b->rt;
  hbg__slot *p = rt->last_launched;
  if (!p || !p->in_flight || p->last_q == lq)
    return 0; /* same queue (in order already), or known complete */
  const char *how = "queue_wait_event";
  int rc = hbg_dev_queue_wait_event(rt->dev, lq, p->done);
  if (rc == HBG_E_UNSUPPORTED) {
    how = "event_wait (the device has no queue_wait_event)";
    rc = hbg_dev_event_wait(rt->dev, p->done);
  }
  if (rc < 0)
    hbg__error_set("hbg_bind_launch: ordering bind %llu after bind %llu "
                   "(pipeline slot %u) failed in %s: %s; nothing was "
                   "launched",
                   (unsigned long long)b->seq,
                   (unsigned long long)p->bind.seq, p->index, how,
                   hbg_err_name(rc));
  return rc;
}

void hbg__launch_desc(const hbg_bind *b, hbg_devptr window, hbg_devptr status,
                      hbg_dev_launch_desc *d) {
  *d = (hbg_dev_launch_desc){.struct_size = sizeof *d,
                             .flags = HBG_DEV_LAUNCH_SIZED |
                                      HBG_DEV_LAUNCH_SIZED_IMAGES,
                             .window = window,
                             .window_bytes = b->win.len,
                             .status = status,
                             .n_tasks = b->n_tasks,
                             .n_deps = b->sz_deps,
                             .n_nodes = b->sz_nodes,
                             .kernel_scratch = b->sz_kscr,
                             .def_bytes = b->sz_def_bytes,
                             .n_defs = b->sz_defs,
                             .n_btensors = b->sz_btensors,
                             .n_bscalars = b->sz_bscalars};
}

/* Orchestration is over: time it, and give the policy its launch hook. */
int hbg__launch_begin(hbg_bind *b) {
  hbg_runtime *rt = b->rt;
  if (rt->ops->orchestrated)
    rt->ops->orchestrated(b);
  uint64_t t0 = hbg__rt_now(rt);
  b->t_launch_start = t0;
  uint64_t orch = t0 - b->t_begin;
  b->st.host_orch_ns = orch > b->nested_upload_ns ? orch - b->nested_upload_ns
                                                  : 0;
  hbg__trace(rt, HBG_TRACK_ORCH, "orchestrate", b->t_begin, t0, 0, b->seq);
  int rc = rt->ops->launch ? rt->ops->launch(b) : 0;
  b->st.graph_upload_ns += hbg__rt_now(rt) - t0;
  return rc;
}

void hbg__launch_counted(hbg_bind *b) {
  /* Submissions inside the window travel in its copy; count their bytes as
   * graph bytes so the policies compare like for like. */
  b->st.window.bytes -= b->sub_bytes;
  b->st.graph.bytes += b->sub_bytes;
  b->st.control_plane_ns =
      b->st.host_orch_ns + b->st.graph_upload_ns + b->st.window_upload_ns;
  b->st.n_tasks = b->n_tasks;
  b->st.arena_high_water = b->slot->arena.high_water;
}

/* Launch b on lq: the slot's own queue, or one the caller lent
 * (hbg_bind_launch_on: lent set). */
static int launch_on(hbg_bind *b, hbg_dev_queue *lq, int lent) {
  hbg_runtime *rt = b->rt;
  hbg__slot *s = b->slot;
  int rc = hbg__launch_begin(b);
  if (rc < 0)
    return hbg__latch(b, rc);
  uint64_t t1 = hbg__rt_now(rt);
  rc = upload_window(b, lent ? lq : NULL);
  b->st.window_upload_ns += hbg__rt_now(rt) - t1;
  if (rc < 0)
    return hbg__latch(b, rc);
  hbg__launch_counted(b);
  if (rt->cfg.flags & HBG_CFG_NO_LAUNCH) {
    b->state = HBG__BIND_LAUNCHED;
    b->t_launch_start = hbg__rt_now(rt);
    return 0;
  }
  hbg_dev_launch_desc d;
  hbg__launch_desc(b, s->win_dev, s->status_dev, &d);
  b->t_launch_start = hbg__rt_now(rt);
  rc = order_after_previous(b, lq);
  if (rc < 0)
    return hbg__latch(b, rc);
  /* The start event, taken after t_launch_start so that device_ns never
   * exceeds exec_ns on a device whose clock is the host's, and after the
   * wait so that it times this bind alone. A start event that cannot be
   * recorded only leaves this bind untimed. */
  int timed = s->start && hbg_dev_event_record(rt->dev, s->start, lq) == 0;
  rc = hbg_dev_launch(rt->dev, lq, &d);
  if (rc < 0) {
    hbg__error_set("%s: the device did not launch bind %llu: %s: %s",
                   lent ? "hbg_bind_launch_on" : "hbg_bind_launch",
                   (unsigned long long)b->seq, hbg_err_name(rc),
                   hbg__native_why(rt, rc));
    return hbg__latch(b, rc);
  }
  b->state = HBG__BIND_LAUNCHED;
  s->in_flight = 1;
  s->last_q = lq;
  rt->last_launched = s;
  rc = hbg_dev_event_record(rt->dev, s->done, lq);
  s->timed = timed && rc == 0;
  if (rc < 0) {
    /* Launched but untracked. The bind runs whatever we return, so it is
     * not reported as failed (a caller retrying it would run it twice):
     * drain the queue instead and collect it now. Only when the drain
     * fails too is its outcome unknown, and latched. */
    rc = hbg_dev_queue_sync(rt->dev, lq);
    if (rc < 0) {
      s->in_flight = 0;
      return hbg__latch(b, rc);
    }
    collect(b);
  }
  return 0;
}

static int launch_check(const hbg_bind *b) {
  HBG__RETURN_IF(b->rt->recording, HBG_E_NESTED);
  HBG__RETURN_IF(b->state != HBG__BIND_OPEN, HBG_E_STATE);
  return b->fatal ? HBG_E_FATAL : 0;
}

int hbg_bind_launch(hbg_bind *b) {
  hbg__error_clear();
  HBG__RETURN_IF(!b, HBG_E_INVAL);
  HBG__GUARD(b->rt, "hbg_bind_launch");
  HBG__TRY(launch_check(b));
  return launch_on(b, b->slot->q, 0);
}

int hbg_bind_launch_on(hbg_bind *b, void *stream) {
  hbg__error_clear();
  HBG__RETURN_IF(!b, HBG_E_INVAL);
  HBG__GUARD(b->rt, "hbg_bind_launch_on");
  HBG__TRY(launch_check(b));
  if (!stream) {
    hbg__error_set("hbg_bind_launch_on: stream is NULL (hbg_bind_launch "
                   "launches on the runtime's own queue)");
    return HBG_E_INVAL;
  }
  hbg_dev_queue *lq = NULL;
  HBG__TRY(hbg__borrowed_queue(b->rt, stream, &lq));
  uint32_t state = HBG_DEV_CAPTURE_NONE;
  uint64_t id = 0;
  HBG__TRY(hbg_dev_queue_capture(b->rt->dev, lq, &state, &id));
  if (state == HBG_DEV_CAPTURE_INVALIDATED) {
    hbg__error_set("hbg_bind_launch_on: the caller's capture on stream %p "
                   "(capture %llu) was invalidated by an earlier call; "
                   "nothing was launched",
                   stream, (unsigned long long)id);
    return HBG_E_CAPTURING;
  }
  if (state == HBG_DEV_CAPTURE_ACTIVE)
    return hbg__capture_launch(b, lq, id);
  return launch_on(b, lq, 1);
}

int hbg_bind_wait(hbg_bind *b) {
  hbg__error_clear();
  HBG__RETURN_IF(!b, HBG_E_INVAL);
  HBG__GUARD(b->rt, "hbg_bind_wait");
  HBG__RETURN_IF(b->state != HBG__BIND_LAUNCHED, HBG_E_STATE);
  if (b->fatal)
    return b->fatal;
  hbg_runtime *rt = b->rt;
  hbg__slot *s = b->slot;
  if (rt->cfg.flags & HBG_CFG_NO_LAUNCH)
    return 0;
  if (s->in_flight) {
    int rc = hbg_dev_event_wait(rt->dev, s->done);
    if (rc < 0)
      return rc;
    collect(b);
    if (b->st.device_status == HBG_E_TIMEOUT)
      hbg__error_set("device: HBG_E_TIMEOUT: %s; the runtime stays usable",
                     b->timeout_msg);
    else if (b->err_entry != HBG_TASK_NONE && b->err_node != HBG_TASK_NONE)
      hbg__error_set("device: %s at window entry %u, graph node %u",
                     hbg_err_name(b->st.device_status), b->err_entry,
                     b->err_node);
    else if (b->err_entry != HBG_TASK_NONE)
      hbg__error_set("device: %s at window entry %u",
                     hbg_err_name(b->st.device_status), b->err_entry);
  }
  return b->st.device_status;
}

int hbg_bind_stats_get(const hbg_bind *b, hbg_bind_stats *out) {
  HBG__RETURN_IF(!b || !out, HBG_E_INVAL);
  _Static_assert(offsetof(hbg_bind_stats, device_ns) ==
                     HBG_BIND_STATS_SIZE_V1,
                 "the first version ends where device_ns starts");
  _Static_assert(offsetof(hbg_bind_stats, device_setup_ns) ==
                     HBG_BIND_STATS_SIZE_V2,
                 "the second version ends where device_setup_ns starts");
  _Static_assert(offsetof(hbg_bind_stats, exec_items) ==
                     HBG_BIND_STATS_SIZE_V3,
                 "the third version ends where exec_items starts");
  size_t n = out->struct_size == HBG_BIND_STATS_SIZE_V1 ||
                     out->struct_size == HBG_BIND_STATS_SIZE_V2 ||
                     out->struct_size == HBG_BIND_STATS_SIZE_V3
                 ? out->struct_size
                 : sizeof *out;
  hbg_bind_stats st = b->st;
  st.struct_size = (uint32_t)n;
  memcpy(out, &st, n);
  return 0;
}

int hbg_bind_error_location(const hbg_bind *b, uint32_t *entry,
                            uint32_t *node) {
  HBG__RETURN_IF(!b || !entry || !node, HBG_E_INVAL);
  HBG__RETURN_IF(b->err_entry == HBG_TASK_NONE, HBG_E_NOTFOUND);
  *entry = b->err_entry;
  *node = b->err_node;
  return 0;
}

int hbg_bind_fatal(const hbg_bind *b) { return b ? b->fatal : HBG_E_INVAL; }

void hbg_bind_end(hbg_bind *b) {
  /* Inside a record callback the bind is mid-submission: ending it would
   * pull the window out from under hbg_submit_graph. */
  if (!b)
    return;
  HBG__GUARD_WAIT(b->rt, "hbg_bind_end");
  if (b->state == HBG__BIND_IDLE || b->rt->recording)
    return;
  hbg_runtime *rt = b->rt;
  hbg__slot *s = b->slot;
  if (b->state == HBG__BIND_OPEN) {
    /* Never launched: roll back. Async chunks may still read the arena:
     * while the device cannot say they are done, the arena and the
     * per-bind device memory stay as they are (the next begin drains
     * again before it reclaims). */
    if (b->win_flushed && hbg__slot_drain(rt, s) < 0)
      s->undrained = 1;
    else if (!hbg_dev_capturing(rt->dev, NULL))
      hbg__slot_reclaim(rt, s); /* else the next begin reclaims */
  }
  /* Host staging of a launched bind was fully copied before launch (sync
   * copies, or a queue sync after the async chunks), so it can go now;
   * device-side buffers wait for the completion event in hbg_bind_begin. */
  hbg__bind_reset(b);
}
