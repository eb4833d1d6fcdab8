/*
 * Device executor (see devcode.h, hbg_dc_exec; docs/CUDA.md for the
 * design and its reasons): the window runs on the device from device
 * memory, in one source for the GPU and for the stand-in driver's host
 * build (one host thread per CTA, its lanes in turn).
 *
 * Set-up, by the whole grid in phases between grid barriers, nothing on
 * one thread that grows with the window's nodes:
 *   1. the window is copied into the block (the launch reads only that
 *      copy);
 *   2. every entry is checked in parallel: its window record (the
 *      validator's per-entry pieces); an ordinary task's kernel and every
 *      tensor against the live allocations; a graph entry's Submission
 *      (inside a live allocation, validated, its header, boundary and
 *      scalars copied into the block) and where its Definition is. Each
 *      entry's Definition joins a group keyed by (size, header hash); the
 *      lowest entry naming the group leads it, and the verdict cache is
 *      looked up for the key;
 *   3. the leader's bytes are compared with the cached copy, each other
 *      member's with the leader's (in parallel, word by word);
 *   4. only when some Definition is new, changed or differs from its
 *      group (one thread, per Definition): pool space for a private copy
 *      (the cache starts over when it is full); the copies (in parallel);
 *      then the Definition validator's units over every copy (in
 *      parallel), which also gather what a run needs (first node whose
 *      kernel is not built in, the most scratch, each boundary tensor's
 *      alignment mask and whether a node writes it). A validated copy
 *      enters the cache: later launches compare, copy nothing, validate
 *      nothing;
 *   5. every entry is checked against its Definition's verdict and copy:
 *      the validator's code, every kernel one this module runs (built-in,
 *      or a user kernel the module was linked with: user.h; a
 *      Definition's nodes from its first user kernel on are asked of the
 *      module at every launch, spread over the grid, since registrations
 *      are not the bytes'), the Submission against the Definition (counts,
 *      addresses that wrap, alignment by mask), the heap block and every
 *      boundary tensor inside a live allocation and apart, no write over
 *      an image (the window, a Submission, a Definition or the status);
 *      its dispatch state is set (dependency links, fan-in counters);
 *   6. the counters and the queue are cleared, the entries without
 *      dependencies made ready.
 * The first error of set-up is the least key of every failing check
 * (phase, entry, stage, index): the same whatever thread ran which check.
 * Nothing runs after a set-up error.
 *
 * Run: every worker (a warp, or a CTA; on a host build each CTA thread is
 * one worker) runs its continuation or waits on a ticket
 * (src/exec/sched_src.h's dispatch core), resolves the item's arguments
 * from the private copies (every tensor was placed inside a checked range
 * at set-up, so an item does no range check), runs the kernel's phases
 * with a barrier of the worker between them (a user kernel's error ends
 * the call after the phase it failed in), and counts its consumers
 * (split over its lanes). The last CTA to leave writes the status.
 */
#include "devcode.h"

#include "device/cuda/devcode/exec_layout.h"
#include "device/cuda/devcode/user.h"
#include "exec/sched_src.h"
#include "kernels/kern_src.h"

/* A kernel tensor's layout (data NULL) from an image record with dtype,
 * ndim, mode, shape and strides (a Definition's or a window task's). */
#define DX_TENSOR_META(k, r)                                                   \
  do {                                                                         \
    (k)->data = NULL;                                                          \
    (k)->dtype = (r)->dtype;                                                   \
    (k)->ndim = (r)->ndim;                                                     \
    (k)->mode = (r)->mode;                                                     \
    for (uint32_t dx__d = 0; dx__d < HBG_IMG_MAX_DIMS; dx__d++) {              \
      (k)->shape[dx__d] = (r)->shape[dx__d];                                   \
      (k)->strides[dx__d] = (r)->strides[dx__d];                               \
    }                                                                          \
  } while (0)

/* The SIMT model's spelling (devcode.h): a GPU's threads, or the host
 * build's threads standing for them one for one. */
#define DX_TID DC_TID
#define DX_NTID DC_NTID
#define DX_CTA DC_CTA
#define DX_CTAS DC_CTAS
#define DX_CTA_SYNC() DC_SYNC_CTA()
/* This thread, once: lane t of its CTA. */
#define DX_EACH_THREAD(t)                                                      \
  for (uint32_t t = DX_TID, t##_once = 1; t##_once; t##_once = 0)
/* This thread, once, as lane l of its worker. */
#define DX_EACH_LANE(l)                                                        \
  for (uint32_t l = dx_lane, l##_once = 1; l##_once; l##_once = 0)
#define DX_LANE0 if (dx_lane == 0)
#define DX_WSYNC()                                                             \
  do {                                                                         \
    if (dx_w == DC_WARP)                                                       \
      DC_SYNC_WARP();                                                          \
    else                                                                       \
      DC_SYNC_CTA();                                                           \
  } while (0)
/* The worker's barrier, with a vote: whether any of its lanes' p held. */
#define DX_WSYNC_OR(p) (dx_w == DC_WARP ? DC_ANY_WARP(p) : DC_SYNC_CTA_OR(p))

/* Workers per CTA on a GPU: 256 threads of 32-lane warps. */
#define DX_MAX_WPC 8u

/* The one place that decides what this executor runs itself: built-in
 * kernel ids. A user kernel id runs when the module was linked with its
 * registration (user.h; asked at every launch, in dx_runs: registrations
 * are the module's, not the bytes', so no verdict caches the answer);
 * anything else is HBG_E_KERNEL at its entry and node. */
HBG_DC_FN int dx_builtin(uint32_t k) { return k <= HBG__K_FILL; }

/* 0 when this module runs call c's kernel, else its error. */
HBG_DC_FN int dx_runs(const hbg__kcall *c) {
  if (hbg_img_kernel_is_user(c->kernel))
    return dcu_check(c);
  return dx_builtin(c->kernel) ? 0 : HBG_IMG_E_KERNEL;
}

/* ---- atomics the set-up needs beyond the core's ---- */

HBG_DC_FN void dx_min64(uint64_t *p, uint64_t v) {
  uint64_t o = HBG__SA_LOAD64(p);
  while (v < o && !HBG__SA_CAS64(p, o, v))
    o = HBG__SA_LOAD64(p);
}

HBG_DC_FN void dx_max64(uint64_t *p, uint64_t v) {
  uint64_t o = HBG__SA_LOAD64(p);
  while (v > o && !HBG__SA_CAS64(p, o, v))
    o = HBG__SA_LOAD64(p);
}

HBG_DC_FN void dx_min32(uint32_t *p, uint32_t v) {
  uint32_t o = HBG__SA_LOAD32(p);
  while (v < o && !HBG__SA_CAS32(p, o, v))
    o = HBG__SA_LOAD32(p);
}

HBG_DC_FN void dx_and32(uint32_t *p, uint32_t m) {
  uint32_t o = HBG__SA_LOAD32(p);
  while ((o & m) != o && !HBG__SA_CAS32(p, o, o & m))
    o = HBG__SA_LOAD32(p);
}

HBG_DC_FN void dx_or32(uint32_t *p, uint32_t m) {
  uint32_t o = HBG__SA_LOAD32(p);
  while ((o | m) != o && !HBG__SA_CAS32(p, o, o | m))
    o = HBG__SA_LOAD32(p);
}

HBG_DC_FN uint64_t dx_clock(void) {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#elif defined(HBG_DC_HOST)
  return hbg_dc_host_clock_ns();
#else
  return 0;
#endif
}

/* A waiter's back-off, growing from 32 to 512 ns on a GPU. */
HBG_DC_FN void dx_pause(uint32_t *ns) {
#if defined(__CUDA_ARCH__)
  __nanosleep(*ns);
  if (*ns < 512)
    *ns *= 2;
#else
  (void)ns;
  HBG__SA_PAUSE();
#endif
}

/* ---- set-up error keys ---- */

/* Phases of set-up, then stages within an entry, in check order. */
enum { DX_P_WIN = 0, DX_P_ENTRY = 1, DX_P_WRITE = 2, DX_P_LAYOUT = 3 };
enum {
  DX_S_NONE = 0,
  /* ordinary task */
  DX_S_KERNEL,
  DX_S_TENSOR, /* sub: tensor */
  /* graph entry */
  DX_S_LIVE,      /* its Submission and resident Definition allocated */
  DX_S_SUB_ALIGN, /* the Submission's address */
  DX_S_SUB,       /* the Submission's validator */
  DX_S_DEF_LOC,   /* where the Definition is */
  DX_S_DEFV,      /* the Definition's validator */
  DX_S_USER,      /* sub: the first node whose kernel does not run here */
  DX_S_SUBDEF,    /* Submission against Definition: counts, hash */
  DX_S_WRAP,      /* sub: a boundary tensor whose addresses wrap */
  DX_S_ALIGN,     /* a boundary tensor or a view of one misaligned */
  DX_S_HEAP_ALIGN,
  DX_S_HEAP,      /* the heap block allocated */
  DX_S_BOUND,     /* sub: a boundary tensor allocated, apart from the heap */
  DX_S_POOL       /* no room for a private copy of its Definition */
};

/* phase (3 bits), entry + 1 (32), stage (6), sub (17), -code (6) */
#define DX_KEY(phase, entry, stage, sub, code)                                 \
  ((uint64_t)(phase) << 61 | (uint64_t)((uint32_t)(entry) + 1u) << 29 |      \
   (uint64_t)(stage) << 23 | (uint64_t)((sub)&0x1ffffu) << 6 |               \
   ((uint64_t)(uint8_t)(-(code)) & 63u))
#define DX_KEY_NONE UINT64_MAX

HBG_DC_FN int dx_key_code(uint64_t k) { return -(int)(k & 63u); }
HBG_DC_FN uint32_t dx_key_entry(uint64_t k) {
  return (uint32_t)(k >> 29) - 1u;
}
HBG_DC_FN uint32_t dx_key_stage(uint64_t k) {
  return (uint32_t)(k >> 23) & 63u;
}
HBG_DC_FN uint32_t dx_key_sub(uint64_t k) {
  return (uint32_t)(k >> 6) & 0x1ffffu;
}

HBG_DC_FN void dx_err(hbg_dc_exec_ctl *ctl, uint64_t key) {
  dx_min64(&ctl->err_key, key);
}

/* ---- live allocations ---- */

/* The index of the live range holding addr (the last starting at or before
 * it, if addr lies inside it), or UINT64_MAX. */
HBG_DC_FN uint64_t dx_range_of(const uint64_t *r, uint64_t n, uint64_t addr) {
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (r[2 * mid] <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || addr >= r[2 * (lo - 1) + 1])
    return UINT64_MAX;
  return lo - 1;
}

/* [base + off, + len) inside the live allocation that holds base (the
 * sim's rule). */
HBG_DC_FN int dx_live(const uint64_t *r, uint64_t n, uint64_t base,
                      uint64_t off, uint64_t len) {
  uint64_t k = dx_range_of(r, n, base);
  if (k == UINT64_MAX || base + off < base)
    return 0;
  uint64_t a = base + off, end = r[2 * k + 1];
  return a >= base && a <= end && len <= end - a;
}

/* ---- the launch's view of its block ---- */

typedef struct dx_x {
  const hbg_dc_exec_args *a;
  hbg_dc_exec_ctl *ctl;
  uint8_t *blk;
  const uint64_t *r; /* live ranges */
  hbg_dc_exec_layout lay;
  hbg_dc_centry *cache;
  uint8_t *pool;
  hbg_dc_xent *xe;
  hbg_dc_xdef *xd;
  uint32_t *bits; /* live ranges holding an image */
  hbg__dent *dent; /* the dispatch core's entries */
  hbg__disp *d;
  uint64_t *cur;  /* each worker's current item (HBG__D_EMPTY: none) */
  uint32_t n_tasks;
  uint32_t groups;
  uint64_t gen;      /* this launch */
  uint64_t deadline; /* this CTA's: its start + the launch's deadline */
} dx_x;

enum { DX_D_NONE = 0, DX_D_HIT, DX_D_COPY, DX_D_INPLACE };

/* The alignment masks of a pooled Definition: one u32 per boundary
 * tensor, bit x set when element 0 may sit at address x mod 8; bit 8 set
 * when a node writes it. */
HBG_DC_FN uint32_t *dx_masks(const dx_x *x, uint64_t pool_off,
                             uint64_t size) {
  return (uint32_t *)(void *)(x->pool + pool_off + hbg_dc_exec_al64(size));
}

/* The dispatch plan of a pooled Definition (hbg__disp_plan), after its
 * masks. */
HBG_DC_FN hbg__dnode *dx_plan_of(const dx_x *x, uint64_t pool_off,
                                 uint64_t size) {
  return (hbg__dnode *)(void *)(x->pool + pool_off + hbg_dc_exec_al64(size) +
                                hbg_dc_exec_masks_bytes(size));
}

/* Residues mod 8 an address may have for element 0 at offset off of
 * dtype-size es to be aligned. */
HBG_DC_FN uint32_t dx_residues(uint64_t off, uint32_t es) {
  uint32_t m = 0;
  for (uint32_t r = 0; r < 8; r++)
    if (es && (r + off) % es == 0)
      m |= 1u << r;
  return m;
}

/* A Submission's boundary (addr, offset) pairs, then its scalars. */
HBG_DC_FN uint64_t *dx_bind(const dx_x *x, const hbg_dc_xent *e) {
  return (uint64_t *)(void *)(x->blk + e->bind);
}

/* ---- the deadline ---- */

/* Launch gen is over: some CTA ran past its deadline. */
HBG_DC_FN int dx_over(const dx_x *x) {
  return HBG__DA_LOAD64_RLX(&x->ctl->tmo_gen) == x->gen;
}

/* This CTA's deadline has passed. */
HBG_DC_FN int dx_late(const dx_x *x) { return dx_clock() > x->deadline; }

/* The launch ran past its deadline, waiting in `phase` (step, arrived:
 * HBG_DEV_PHASE_*'s details): the first to say so keeps where, and every
 * CTA leaves at its next wait. */
HBG_DC_FN int dx_timeout(dx_x *x, uint32_t phase, uint32_t step,
                         uint32_t arrived) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  uint64_t g = HBG__SA_LOAD64(&ctl->tmo_gen);
  if (g == x->gen || !HBG__SA_CAS64(&ctl->tmo_gen, g, x->gen))
    return 0;
  ctl->tmo_phase = phase;
  ctl->tmo_step = step;
  ctl->tmo_arrived = arrived;
  ctl->tmo_task = ctl->tmo_node = DC_NONE;
  return 1;
}

/* ---- grid barrier ---- */

/* Every CTA meets (the barrier's `step`, from 1, names it in a timeout).
 * @return 1, alike in every thread, when the launch is over instead. */
HBG_DC_FN int dx_grid_sync(dx_x *x, uint32_t step) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  int over = 0;
  DX_CTA_SYNC();
  if (DX_TID == 0) {
    const uint32_t g = HBG__DA_LOAD32_RLX(&ctl->bar_gen);
    uint32_t ns = 32;
    /* acquire-release: this CTA's writes out, the earlier arrivals' in */
    if (HBG__DA_ADD32_AR(&ctl->bar_count, 1u) + 1u == DX_CTAS) {
      HBG__SA_STORE32(&ctl->bar_count, 0u);
      HBG__DA_STORE32_REL(&ctl->bar_gen, g + 1u);
    } else {
      while (HBG__DA_LOAD32_ACQ(&ctl->bar_gen) == g) {
        if (dx_over(x))
          break;
        if (dx_late(x)) {
          dx_timeout(x, HBG_DC_PHASE_SETUP, step,
                     HBG__DA_LOAD32_RLX(&ctl->bar_count));
          break;
        }
        dx_pause(&ns);
      }
    }
    over = dx_over(x);
  }
  return DC_SYNC_CTA_OR(over);
}

/* ---- set-up, phase 2: each entry on its own ---- */

HBG_DC_FN uint32_t dx_hash2(uint64_t a, uint64_t b) {
  uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
  return (uint32_t)(h >> 32);
}

/* Entry i names a Definition of size bytes whose header hash is hash:
 * its group (found or made; the table has twice the entries' slots). */
HBG_DC_FN uint32_t dx_group(dx_x *x, uint64_t size, uint64_t hash,
                            uint32_t i) {
  const uint32_t mask = x->groups - 1;
  uint32_t h = dx_hash2(size, hash) & mask;
  for (;;) {
    hbg_dc_xdef *r = &x->xd[h];
    if (HBG__SA_LOAD32(&r->claim) == 0 && HBG__SA_CAS32(&r->claim, 0u, 1u)) {
      r->size = size;
      r->hash = hash;
      HBG__SA_FENCE();
      HBG__SA_STORE32(&r->claim, 2u);
    }
    uint32_t ns = 32;
    while (HBG__SA_LOAD32(&r->claim) == 1) {
      if (dx_late(x)) { /* its claimer stopped midway: the launch ends */
        dx_timeout(x, HBG_DC_PHASE_SETUP, 2, 0);
        return h;
      }
      dx_pause(&ns);
    }
    HBG__SA_FENCE();
    if (r->size == size && r->hash == hash) {
      dx_min32(&r->leader, i);
      return h;
    }
    h = (h + 1) & mask;
  }
}

/* The verdict cache's entry for (size, hash): the first valid one, or
 * DC_NONE. A key names one cached copy; whether its bytes are the
 * entry's own is the comparison's to say. */
HBG_DC_FN uint32_t dx_cache_find(const dx_x *x, uint64_t size,
                                 uint64_t hash) {
  for (uint32_t c = 0; c < x->ctl->cache_n; c++)
    if (x->cache[c].size == size && x->cache[c].hash == hash)
      return c;
  return DC_NONE;
}

/* Mark the live allocation holding addr as holding an image (the
 * write-over-image check looks only in those). */
HBG_DC_FN void dx_image(dx_x *x, uint64_t addr) {
  uint64_t k = dx_range_of(x->r, x->a->n_ranges, addr);
  if (k != UINT64_MAX)
    dx_or32(&x->bits[k / 32], 1u << (k % 32));
}

/* Bump-area room for `bytes` of entry i's; @return its offset from the
 * area's start, or UINT64_MAX (HBG_DC_E_DEVMEM keyed at the entry). */
HBG_DC_FN uint64_t dx_bump(dx_x *x, uint32_t i, uint64_t bytes) {
  uint64_t at = HBG__SA_ADD64(&x->ctl->bump, bytes);
  if (at > x->a->scratch_bytes - x->lay.off_bump ||
      bytes > x->a->scratch_bytes - x->lay.off_bump - at) {
    dx_err(x->ctl, DX_KEY(DX_P_ENTRY, i, DX_S_POOL, 0, HBG_DC_E_DEVMEM));
    return UINT64_MAX;
  }
  return at;
}

/* Ordinary task i: a kernel this module runs, every tensor inside a live
 * allocation; the scratch its call needs. */
HBG_DC_FN void dx_check_task(dx_x *x, uint32_t i, const hbg_win_task *wt) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  uint64_t at = dx_bump(x, i, 8ull * wt->n_deps);
  if (at == UINT64_MAX)
    return;
  x->xe[i].links = at / 8;
  x->dent[i].pending = wt->n_deps;
  const hbg_sub_tensor *ts = hbg_img_win_task_tensors(wt);
  hbg__ktensor t[HBG_IMG_MAX_ARGS_PER_NODE];
  for (uint32_t k = 0; k < wt->n_tensors; k++)
    DX_TENSOR_META(&t[k], &ts[k]);
  hbg__kcall c;
  c.kernel = wt->kernel;
  c.nt = wt->n_tensors;
  c.ns = wt->n_scalars;
  c.t = t;
  c.sc = hbg_img_win_task_scalars(wt);
  int rc = dx_runs(&c); /* a user kernel's phases may count a tensor's
                           rows: the call's shapes first */
  if (rc) {
    dx_err(ctl, DX_KEY(DX_P_ENTRY, i, DX_S_KERNEL, 0, rc));
    return;
  }
  for (uint32_t k = 0; k < wt->n_tensors; k++) {
    /* extent non-zero and element 0 aligned: the window validator's */
    uint64_t ext = hbg_img_extent(ts[k].dtype, ts[k].ndim, ts[k].mode,
                                  ts[k].shape, ts[k].strides);
    if (!dx_live(x->r, x->a->n_ranges, ts[k].addr, ts[k].offset, ext)) {
      dx_err(ctl, DX_KEY(DX_P_ENTRY, i, DX_S_TENSOR, k, HBG_IMG_E_RANGE));
      return;
    }
  }
  dx_max64(&ctl->kscr, dcu_floats(&c));
  x->xe[i].ok = 1;
}

/* Graph entry i: its Submission (validated, its header, boundary and
 * scalars copied into the block) and where its Definition is; joins the
 * Definition's group and looks the group's key up in the cache. */
HBG_DC_FN void dx_check_graph(dx_x *x, uint32_t i, const hbg_win_task *wt) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  const hbg_dc_exec_args *a = x->a;
  hbg_dc_xent *e = &x->xe[i];
#define DX_FAIL(stage, sub, code)                                              \
  do {                                                                         \
    dx_err(ctl, DX_KEY(DX_P_ENTRY, i, (stage), (sub), (code)));              \
    return;                                                                    \
  } while (0)
  if (!dx_live(x->r, a->n_ranges, wt->sub_addr, 0, wt->sub_size) ||
      (wt->def_addr &&
       !dx_live(x->r, a->n_ranges, wt->def_addr, 0, wt->def_size)))
    DX_FAIL(DX_S_LIVE, 0, HBG_IMG_E_RANGE);
  if (wt->sub_addr % HBG_IMG_ALIGN)
    DX_FAIL(DX_S_SUB_ALIGN, 0, HBG_IMG_E_ALIGN);
  const uint8_t *sp = (const uint8_t *)dc_ptr(wt->sub_addr, wt->sub_size);
  if (!sp)
    DX_FAIL(DX_S_SUB_ALIGN, 0, HBG_IMG_E_RANGE);
  hbg_img_sub_view sv;
  int rc = hbg_img_sub_validate(sp, wt->sub_size, NULL, NULL, &sv);
  if (rc)
    DX_FAIL(DX_S_SUB, 0, rc);
  e->sh = *sv.hdr;
  const hbg_sub_hdr *sh = &e->sh;
  /* the tables are read with the copied header's counts: bound them again
   * (the Submission's memory is not this launch's to trust twice) */
  if (sh->n_tensors > HBG_IMG_MAX_BOUNDARY ||
      sh->n_scalars > HBG_IMG_MAX_BOUNDARY ||
      (uint64_t)sh->off_tensors + 16ull * sh->n_tensors > wt->sub_size ||
      (uint64_t)sh->off_scalars + 8ull * sh->n_scalars > wt->sub_size ||
      sh->off_tensors % 8 || sh->off_scalars % 8 ||
      ((sh->flags & HBG_SUB_INLINE_DEF) &&
       ((uint64_t)sh->off_def + sh->def_size > wt->sub_size ||
        sh->off_def % 8)))
    DX_FAIL(DX_S_SUB, 0, HBG_IMG_E_FIELD);
  const uint64_t words = 2ull * sh->n_tensors + sh->n_scalars;
  const uint64_t at = dx_bump(x, i, words * 8 + 8ull * wt->n_deps);
  if (at == UINT64_MAX)
    return;
  e->bind = x->lay.off_bump + at;
  e->links = at / 8 + words;
  uint64_t *b = dx_bind(x, e);
  const uint64_t *st = (const uint64_t *)(const void *)(sp + sh->off_tensors);
  const uint64_t *ss = (const uint64_t *)(const void *)(sp + sh->off_scalars);
  for (uint64_t k = 0; k < 2ull * sh->n_tensors; k++)
    b[k] = st[k];
  for (uint32_t k = 0; k < sh->n_scalars; k++)
    b[2ull * sh->n_tensors + k] = ss[k];
  dx_image(x, wt->sub_addr);
  uint64_t da, dsize;
  if (sh->flags & HBG_SUB_INLINE_DEF) {
    da = wt->sub_addr + sh->off_def;
    dsize = sh->def_size;
  } else {
    da = wt->def_addr;
    dsize = wt->def_size;
    if (dsize < sizeof(hbg_def_hdr))
      DX_FAIL(DX_S_DEF_LOC, 0, HBG_IMG_E_TRUNCATED);
    if (da % HBG_IMG_ALIGN)
      DX_FAIL(DX_S_DEF_LOC, 0, HBG_IMG_E_ALIGN);
    dx_image(x, da);
  }
  const uint8_t *dp = (const uint8_t *)dc_ptr(da, dsize);
  if (!dp)
    DX_FAIL(DX_S_DEF_LOC, 0, HBG_IMG_E_RANGE);
  e->def_addr = da;
  e->def_size = dsize;
  e->def_ptr = dp;
  x->dent[i].pending = wt->n_deps;
  /* its group: by size and the header's hash field, read where a header
   * fits (a smaller one fails the validator, alone in its group) */
  uint64_t hash = 0;
  if (dsize >= sizeof(hbg_def_hdr) && da % HBG_IMG_ALIGN == 0)
    hash = ((const hbg_def_hdr *)(const void *)dp)->hash;
  e->cache = dx_cache_find(x, dsize, hash);
  e->def = dx_group(x, dsize, hash, i);
  e->ok = 1;
#undef DX_FAIL
}

/* ---- set-up, phase 4: new Definitions (one thread, then the grid) ---- */

/* Pool space for a copy of size bytes, or UINT64_MAX. */
HBG_DC_FN uint64_t dx_pool_take(dx_x *x, uint64_t size) {
  uint64_t need = hbg_dc_exec_pool_slot(size);
  hbg_dc_exec_ctl *ctl = x->ctl;
  if (need > ctl->pool_bytes - ctl->pool_used)
    return UINT64_MAX;
  uint64_t at = ctl->pool_used;
  ctl->pool_used += need;
  return at;
}

/* Every Definition needing a copy gets pool space, and a group's a cache
 * entry (valid once its validation passes); when the pool or the cache is
 * full, both start over (each Definition this launch names is then copied
 * again). One that still finds no room is validated in place and cannot
 * run (HBG_DC_E_DEVMEM at its entries). */
HBG_DC_FN void dx_allocate(dx_x *x) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  const uint32_t nd = x->groups + x->n_tasks;
  for (int pass = 0; pass < 2; pass++) {
    int full = 0;
    for (uint32_t k = 0; k < nd && !full; k++) {
      hbg_dc_xdef *r = &x->xd[k];
      if (r->state != DX_D_COPY || r->pool_off != UINT64_MAX)
        continue;
      const int cached = k < x->groups;
      uint64_t at = UINT64_MAX;
      if (!cached || ctl->cache_n < ctl->cache_slots)
        at = dx_pool_take(x, r->size);
      if (at == UINT64_MAX) {
        full = 1;
        break;
      }
      r->pool_off = at;
      r->cache = DC_NONE;
      if (cached) {
        hbg_dc_centry *c = &x->cache[ctl->cache_n];
        c->size = 0; /* no hit before its validation passes */
        c->hash = r->hash;
        c->pool_off = at;
        r->cache = ctl->cache_n++;
      }
    }
    if (!full)
      break;
    if (pass == 0) { /* start over: every Definition copied afresh */
      ctl->cache_n = 0;
      ctl->pool_used = 0;
      for (uint32_t k = 0; k < nd; k++) {
        hbg_dc_xdef *r = &x->xd[k];
        if (r->state == DX_D_HIT || r->state == DX_D_COPY) {
          r->state = DX_D_COPY;
          r->pool_off = UINT64_MAX;
          r->cache = DC_NONE;
        }
      }
    }
  }
  for (uint32_t k = 0; k < nd; k++)
    if (x->xd[k].state == DX_D_COPY && x->xd[k].pool_off == UINT64_MAX)
      x->xd[k].state = DX_D_INPLACE;
}

/* One thread: what each Definition needs (a hit keeps its cached copy; a
 * miss, or an entry whose bytes differ from its group leader's, a copy and
 * a validation), pool space. */
HBG_DC_FN void dx_plan(dx_x *x) {
  const uint32_t n = x->n_tasks;
  for (uint32_t k = 0; k < x->groups; k++) {
    hbg_dc_xdef *r = &x->xd[k];
    if (r->claim != 2)
      continue;
    const hbg_dc_xent *l = &x->xe[r->leader];
    r->src = l->def_ptr;
    r->cache = l->cache;
    r->state = r->miss ? DX_D_COPY : DX_D_HIT;
    if (r->state == DX_D_HIT)
      r->pool_off = x->cache[r->cache].pool_off;
  }
  for (uint32_t i = 0; i < n; i++)
    if (x->xe[i].ok && x->xe[i].differs) {
      hbg_dc_xdef *r = &x->xd[x->groups + i];
      r->size = x->xe[i].def_size;
      r->src = x->xe[i].def_ptr;
      r->state = DX_D_COPY;
    }
  dx_allocate(x);
  for (uint32_t k = 0; k < x->groups + n; k++)
    if (x->xd[k].state == DX_D_COPY || x->xd[k].state == DX_D_INPLACE) {
      x->ctl->defs_validated++;
#if defined(HBG_DC_HOST)
      hbg_dc_host_def_validated();
#endif
    }
}

/* Unit u of record r: its check, and what the run needs from node u and
 * boundary tensor u (a copy's masks). @return node records read (0/1). */
HBG_DC_FN uint32_t dx_validate_unit(dx_x *x, hbg_dc_xdef *r,
                                    const hbg_img_def_view *v, uint32_t u) {
  uint64_t k = hbg_img_def_check_unit(v, u);
  if (k != HBG_IMG_KEY_NONE)
    dx_min64(&r->key, k);
  const hbg_def_hdr *h = v->hdr;
  if (r->state != DX_D_COPY)
    return u < h->n_nodes;
  uint32_t *m = dx_masks(x, r->pool_off, r->size);
  const uint64_t n_masks = r->size / 40 + 1;
  if (u < h->n_btensors && u < n_masks)
    dx_and32(&m[u], dx_residues(0, hbg_img_dtype_size(v->bsig[u].dtype)));
  if (u >= h->n_nodes)
    return 0;
  const hbg_def_node *nd = &v->nodes[u];
  if (!dx_builtin(nd->kernel))
    dx_min32(&r->first_user, u);
  /* the node's tensors, where its records lie inside the table (else the
   * validator refuses it) */
  if ((uint64_t)nd->first_tensor + nd->n_tensors > h->n_tensors ||
      nd->n_tensors > HBG_IMG_MAX_ARGS_PER_NODE)
    return 1;
  hbg__ktensor t[HBG_IMG_MAX_ARGS_PER_NODE];
  for (uint32_t j = 0; j < nd->n_tensors; j++) {
    const hbg_def_tensor *dt = &v->tensors[nd->first_tensor + j];
    DX_TENSOR_META(&t[j], dt);
    if ((dt->src == HBG_SRC_BOUNDARY_EXACT ||
         dt->src == HBG_SRC_BOUNDARY_VIEW) &&
        dt->ref < h->n_btensors && dt->ref < n_masks) {
      dx_and32(&m[dt->ref],
               dx_residues(dt->offset, hbg_img_dtype_size(dt->dtype)));
      if (dt->mode & HBG_IMG_ACCESS_OUT)
        dx_or32(&m[dt->ref], 0x100u);
    }
  }
  if (dx_builtin(nd->kernel)) {
    hbg__kcall c;
    c.kernel = nd->kernel;
    c.nt = nd->n_tensors;
    c.ns = 0;
    c.t = t;
    c.sc = NULL;
    dx_max64(&r->kscr, hbg__k_scratch_floats(&c));
  }
  return 1;
}

/* ---- set-up, phase 5: each entry against its Definition ---- */

/* The first node that reads or writes boundary tensor b, or DC_NONE. */
HBG_DC_FN uint32_t dx_node_of_bound(const hbg_img_def_view *v, uint32_t b) {
  for (uint32_t j = 0; j < v->hdr->n_nodes; j++) {
    const hbg_def_node *n = &v->nodes[j];
    for (uint32_t k = 0; k < n->n_tensors; k++) {
      const hbg_def_tensor *t = &v->tensors[n->first_tensor + k];
      if ((t->src == HBG_SRC_BOUNDARY_EXACT ||
           t->src == HBG_SRC_BOUNDARY_VIEW) &&
          t->ref == b)
        return j;
    }
  }
  return DC_NONE;
}

/* [lo, lo + len), which entry i writes, over no image (the window, a
 * Submission, a Definition, the status). */
HBG_DC_FN void dx_write(dx_x *x, uint32_t i, uint64_t lo, uint64_t len) {
  if (!len)
    return;
  uint64_t k = dx_range_of(x->r, x->a->n_ranges, lo);
  if (k == UINT64_MAX || !(x->bits[k / 32] & (1u << (k % 32))))
    return;
  /* rare (an allocation holding an image and a tensor): every image */
  const uint64_t hi = lo + len, st = x->a->status;
  int hit = (x->a->window < hi && lo < x->a->window + x->a->bytes) ||
            (st < hi && lo < st + sizeof(hbg_dc_status));
  for (uint32_t e = 0; e < x->n_tasks && !hit; e++) {
    const hbg_win_task *wt = hbg_img_win_task(&x->ctl->wv, e);
    if (wt->kind != HBG_WIN_GRAPH || !x->xe[e].def_ptr)
      continue;
    hit = (wt->sub_addr < hi && lo < wt->sub_addr + wt->sub_size) ||
          (x->xe[e].def_addr < hi &&
           lo < x->xe[e].def_addr + x->xe[e].def_size);
  }
  if (hit)
    dx_err(x->ctl, DX_KEY(DX_P_WRITE, i, 0, 0, HBG_IMG_E_RANGE));
}

/* The record entry i's Definition has (its group's, or its own where its
 * bytes differ). */
HBG_DC_FN hbg_dc_xdef *dx_rec(const dx_x *x, uint32_t i) {
  const hbg_dc_xent *e = &x->xe[i];
  if (HBG__SA_LOAD32(&e->differs))
    return &x->xd[x->groups + i];
  return &x->xd[e->def];
}

/* Graph entry i (passed phase 2) against its Definition's verdict and
 * copy (go: phase 4 ran; else every group was a hit); errors keyed; when
 * it passes, its dispatch state. The group's leader publishes a new copy's
 * verdict to the cache (for later launches: this one reads the cache no
 * more). Phase 2's fields stay as they were: a CTA may still be deciding
 * from them whether phase 4 runs. @return 1 when it passes. */
HBG_DC_FN int dx_finish_graph(dx_x *x, uint32_t i, const hbg_win_task *wt,
                              int go) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  const hbg_dc_exec_args *a = x->a;
  hbg_dc_xent *e = &x->xe[i];
  hbg_dc_xdef *r = dx_rec(x, i);
  uint64_t key = HBG_IMG_KEY_NONE, pool_off, kscr, size;
  uint32_t first_user, sinks;
  if (!go || r->state == DX_D_HIT) {
    const hbg_dc_centry *c = &x->cache[go ? r->cache : e->cache];
    pool_off = c->pool_off;
    kscr = c->kscr;
    first_user = c->first_user;
    sinks = c->n_sinks;
    size = c->size;
  } else {
    key = r->key;
    pool_off = r->pool_off;
    kscr = r->kscr;
    first_user = r->first_user;
    sinks = r->sinks;
    size = r->size;
    if (r->state == DX_D_COPY && key == HBG_IMG_KEY_NONE &&
        r->leader == i && r->cache != DC_NONE && r == &x->xd[e->def]) {
      hbg_dc_centry *c = &x->cache[r->cache];
      c->kscr = kscr;
      c->first_user = first_user;
      c->n_nodes = ((const hbg_def_hdr *)(const void *)(x->pool + pool_off))
                       ->n_nodes;
      c->n_sinks = sinks;
      c->size = r->size; /* a hit for later launches */
    }
  }
#define DX_FAIL(stage, sub, code)                                              \
  do {                                                                         \
    dx_err(ctl, DX_KEY(DX_P_ENTRY, i, (stage), (sub), (code)));              \
    return 0;                                                                  \
  } while (0)
  if (key != HBG_IMG_KEY_NONE)
    DX_FAIL(DX_S_DEFV, 0, hbg_img_key_code(key));
  if (go && r->state == DX_D_INPLACE)
    DX_FAIL(DX_S_POOL, 0, HBG_DC_E_DEVMEM);
  const uint8_t *p = x->pool + pool_off;
  hbg_img_def_view_trusted(p, (const hbg_def_hdr *)(const void *)p, &e->v);
  /* nodes without a built-in kernel: against the linked module, at 5b
   * (keyed at this stage, whatever is found after it) */
  e->user_from = first_user;
  const hbg_img_def_view *v = &e->v;
  const hbg_def_hdr *dh = v->hdr;
  const hbg_sub_hdr *sh = &e->sh;
  if (sh->def_hash != dh->hash || sh->def_size != dh->total_size ||
      sh->n_tensors != dh->n_btensors || sh->n_scalars != dh->n_bscalars)
    DX_FAIL(DX_S_SUBDEF, 0, HBG_IMG_E_DEF);
  const uint64_t heap = wt->heap_addr, hs = dh->heap_size;
  e->bound_ok = 1; /* phase 5b checks each boundary tensor */
  if (heap % HBG_IMG_HEAP_ALIGN)
    DX_FAIL(DX_S_HEAP_ALIGN, 0, HBG_IMG_E_TENSOR_ALIGN);
  if (hs && !dx_live(x->r, a->n_ranges, heap, 0, hs))
    DX_FAIL(DX_S_HEAP, 0, HBG_IMG_E_RANGE);
#undef DX_FAIL
  dx_write(x, i, heap, hs); /* it writes its heap block */
  dx_max64(&ctl->kscr, kscr);
  hbg__dent *d = &x->dent[i];
  d->def = &e->v;
  d->plan = dx_plan_of(x, pool_off, size);
  d->sinks_left = sinks;
  d->node_base = HBG__SA_ADD64(&ctl->nodes, (uint64_t)dh->n_nodes);
  return 1;
}

/* Boundary tensor k of graph entry i (phase 5b, any thread): addresses
 * that do not wrap, element 0 and every view aligned (the copy's mask),
 * inside the live allocation holding its address and apart from the heap
 * block; and, a node writing it, over no image. The stages order these
 * as hbg_img_sub_check_def and the sim's executor do, whatever order the
 * threads run them in. */
HBG_DC_FN void dx_bound_unit(dx_x *x, uint32_t i, uint32_t k) {
  const hbg_dc_xent *e = &x->xe[i];
  const hbg_img_def_view *v = &e->v;
  const hbg_def_bsig *s = &v->bsig[k];
  const uint64_t *b = dx_bind(x, e);
  const uint64_t a = b[2 * k], o = b[2 * k + 1], lo = a + o;
  const uint64_t ext =
      hbg_img_extent(s->dtype, s->ndim, s->mode, s->shape, s->strides);
  if (lo < a || lo + ext < lo) {
    dx_err(x->ctl, DX_KEY(DX_P_ENTRY, i, DX_S_WRAP, k, HBG_IMG_E_RANGE));
    return;
  }
  const uint32_t m = dx_masks(x, (uint64_t)(v->base - x->pool),
                              v->hdr->total_size)[k];
  if (!(m & (1u << (lo % 8))))
    dx_err(x->ctl,
           DX_KEY(DX_P_ENTRY, i, DX_S_ALIGN, 0, HBG_IMG_E_TENSOR_ALIGN));
  const uint64_t heap = hbg_img_win_task(&x->ctl->wv, i)->heap_addr;
  const uint64_t hs = v->hdr->heap_size;
  if (!dx_live(x->r, x->a->n_ranges, a, o, ext) ||
      (hs && lo < heap + hs && heap < lo + ext)) {
    dx_err(x->ctl, DX_KEY(DX_P_ENTRY, i, DX_S_BOUND, k, HBG_IMG_E_RANGE));
    return;
  }
  if (m & 0x100u)
    dx_write(x, i, lo, ext);
}

/* Node j of graph entry i's Definition, from its first node without a
 * built-in kernel (phase 5b, any thread): a user kernel the linked module
 * runs, and the scratch its call needs (the registration's, not the
 * bytes'). */
HBG_DC_FN void dx_user_unit(dx_x *x, uint32_t i, uint32_t j) {
  const hbg_img_def_view *v = &x->xe[i].v;
  const hbg_def_node *nd = &v->nodes[j];
  if (dx_builtin(nd->kernel))
    return;
  hbg__ktensor t[HBG_IMG_MAX_ARGS_PER_NODE];
  for (uint32_t k = 0; k < nd->n_tensors; k++)
    DX_TENSOR_META(&t[k], &v->tensors[nd->first_tensor + k]);
  hbg__kcall c;
  c.kernel = nd->kernel;
  c.nt = nd->n_tensors;
  c.ns = nd->n_scalars;
  c.t = t;
  c.sc = NULL;
  int rc = dx_runs(&c);
  if (rc)
    dx_err(x->ctl, DX_KEY(DX_P_ENTRY, i, DX_S_USER, j, rc));
  else
    dx_max64(&x->ctl->kscr, dcu_floats(&c));
}

/* ---- the status ---- */

/* The node of a set-up error whose key does not hold it (one thread,
 * after set-up): a boundary tensor's first user; a misaligned boundary
 * record's node. */
HBG_DC_FN uint32_t dx_err_node(dx_x *x, uint64_t key) {
  const uint32_t st = dx_key_stage(key), i = dx_key_entry(key);
  if ((key >> 61) != DX_P_ENTRY || i >= x->n_tasks)
    return DC_NONE;
  if (st == DX_S_USER)
    return dx_key_sub(key);
  if (st != DX_S_BOUND && st != DX_S_ALIGN)
    return DC_NONE;
  const hbg_img_def_view *v = &x->xe[i].v; /* placed before the check */
  if (st == DX_S_BOUND)
    return dx_node_of_bound(v, dx_key_sub(key));
  /* the first misaligned record, as hbg_img_sub_check_align finds it */
  const uint64_t *b = dx_bind(x, &x->xe[i]);
  for (uint32_t k = 0; k < v->hdr->n_tensors; k++) {
    const hbg_def_tensor *t = &v->tensors[k];
    if ((t->src != HBG_SRC_BOUNDARY_EXACT &&
         t->src != HBG_SRC_BOUNDARY_VIEW) ||
        t->ref >= v->hdr->n_btensors)
      continue;
    uint32_t es = hbg_img_dtype_size(t->dtype);
    if (es && (b[2 * t->ref] + b[2 * t->ref + 1] + t->offset) % es) {
      for (uint32_t j = 0; j < v->hdr->n_nodes; j++)
        if (k >= v->nodes[j].first_tensor &&
            k - v->nodes[j].first_tensor < v->nodes[j].n_tensors)
          return j;
      return DC_NONE;
    }
  }
  return DC_NONE;
}

/* A counter of launch gen's CTAs in a word (gen << 32 | count) that no
 * CTA needs to reset first: the first to count for a new launch starts it
 * over. @return the count with this CTA. */
HBG_DC_FN uint32_t dx_gen_count(uint64_t *w, uint64_t gen) {
  uint64_t o = HBG__SA_LOAD64(w), n;
  do {
    n = (o >> 32) == (gen & 0xffffffffu) ? o + 1
                                         : (gen & 0xffffffffu) << 32 | 1u;
  } while (!HBG__SA_CAS64(w, o, n) && ((o = HBG__SA_LOAD64(w)), 1));
  return (uint32_t)n;
}

/* Written by the last CTA to leave: ran, the window ran; t_end, its clock
 * then. */
HBG_DC_FN void dx_status(const dx_x *x, int ran, uint32_t workers,
                         uint64_t t_end) {
  const hbg_dc_exec_ctl *ctl = x->ctl;
  const hbg__disp *d = ran ? x->d : NULL;
  hbg_dc_status st;
  st.flags = HBG_DC_STATUS_SPLIT | HBG_DC_STATUS_COUNTS;
  st.phase = st.step = st.arrived = 0;
  st.error = 0;
  st.task = st.node = DC_NONE;
  st.tasks_done = d ? d->tasks_done : 0;
  st.nodes_done = HBG__SA_LOAD64(&ctl->items_done);
  st.defs_verified = HBG__SA_LOAD64(&ctl->defs_validated);
  st.setup_nodes = HBG__SA_LOAD64(&ctl->setup_nodes);
  const uint64_t t_setup = ran ? ctl->t_setup : t_end;
  st.setup_ns = t_setup > ctl->t0 ? t_setup - ctl->t0 : 0;
  st.run_ns = t_end > t_setup ? t_end - t_setup : 0;
  st.dispatch_ops = HBG__SA_LOAD64(&ctl->ops);
  st.kernel_phases = HBG__SA_LOAD64(&ctl->phases);
  st.body_ns = HBG__SA_LOAD64(&ctl->body_ns);
  st.tail_ns = ctl->t_done && t_end > ctl->t_done ? t_end - ctl->t_done : 0;
  st.workers = workers;
  st.ctas = DX_CTAS;
  if (ctl->tmo_gen == x->gen) {
    st.error = HBG_DC_E_TIMEOUT;
    st.phase = ctl->tmo_phase;
    st.step = ctl->tmo_step;
    st.arrived = ctl->tmo_arrived;
    st.task = ctl->tmo_task;
    st.node = ctl->tmo_node;
  } else if (ctl->err_key != DX_KEY_NONE) {
    st.error = dx_key_code(ctl->err_key);
    /* the window's own errors are at no entry */
    st.task = (ctl->err_key >> 61) == DX_P_WIN ? DC_NONE
                                               : dx_key_entry(ctl->err_key);
    st.node = ctl->err_node;
  } else if (d && d->failed) {
    st.error = d->error;
    st.task = d->err_task;
    st.node = d->err_node;
  }
  hbg_dc_status *out = (hbg_dc_status *)dc_ptr(x->a->status, sizeof st);
  if (out)
    *out = st;
}

/* ---- the run ---- */

/* A worker's shared state (shared memory on a GPU). */
typedef struct dx_wk {
  hbg__ktensor t[HBG_IMG_MAX_ARGS_PER_NODE];
  uint64_t sc[HBG_IMG_MAX_SCALARS_PER_NODE];
  uint64_t pick[2]; /* lane 0's choice for the worker, by iteration
                       parity: the item, or HBG__D_EMPTY to leave */
  uint64_t cont;    /* the continuation the fan-out keeps */
  int urc;          /* a user kernel's lanes' least error (user.h) */
  int reserved;
} dx_wk;

/* A CTA's shared memory: the arguments where every thread reaches them (a
 * GPU thread's copy of a parameter is its own), the launch's view, the
 * workers' state. */
typedef struct dx_shared {
  hbg_dc_exec_args as;
  dx_x xs;
  dx_wk wks[DX_MAX_WPC];
  int go;
} dx_shared;

/* Lane l of W: item's call (every lane computes the same one from the
 * immutable images), with its share of the tensors and scalars written to
 * the worker's shared arrays. Every tensor lies where set-up checked it:
 * an ordinary task's inside a live allocation, a node's inside its
 * boundary tensor or heap block (the validated copy says so), and those
 * inside live allocations. @return 0, or HBG_IMG_E_RANGE where a host
 * build cannot map a tensor (a GPU reads what set-up checked). */
HBG_DC_FN int dx_resolve(dx_x *x, dx_wk *w, uint64_t item, hbg__kcall *c,
                         uint32_t l, uint32_t W) {
  const uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
  const hbg_win_task *wt = hbg_img_win_task(&x->ctl->wv, i);
  int rc = 0;
  c->t = w->t;
  c->sc = w->sc;
  c->attn.d = 0;
  c->scale = 0.0f;
  c->coop = 0;
  if (j == HBG__D_NONE) {
    c->kernel = wt->kernel;
    c->nt = wt->n_tensors;
    c->ns = wt->n_scalars;
    const hbg_sub_tensor *ts = hbg_img_win_task_tensors(wt);
    const uint64_t *ss = hbg_img_win_task_scalars(wt);
    for (uint32_t k = l; k < wt->n_tensors; k += W) {
      hbg__ktensor *t = &w->t[k];
      DX_TENSOR_META(t, &ts[k]);
      t->data = dc_ptr(ts[k].addr + ts[k].offset,
                       hbg_img_extent(ts[k].dtype, ts[k].ndim, ts[k].mode,
                                      ts[k].shape, ts[k].strides));
      if (!t->data)
        rc = HBG_IMG_E_RANGE;
    }
    for (uint32_t k = l; k < wt->n_scalars; k += W)
      w->sc[k] = ss[k];
    return rc;
  }
  const hbg_dc_xent *e = &x->xe[i];
  const hbg_img_def_view *v = &e->v;
  const hbg_def_node *nd = &v->nodes[j];
  const uint64_t *b = dx_bind(x, e);
  c->kernel = nd->kernel;
  c->nt = nd->n_tensors;
  c->ns = nd->n_scalars;
  for (uint32_t k = l; k < nd->n_tensors; k += W) {
    const hbg_def_tensor *dt = &v->tensors[nd->first_tensor + k];
    hbg__ktensor *t = &w->t[k];
    DX_TENSOR_META(t, dt);
    uint64_t base = dt->src >= HBG_SRC_INTERNAL
                        ? wt->heap_addr
                        : b[2 * dt->ref] + b[2 * dt->ref + 1];
    t->data = dc_ptr(base + dt->offset,
                     hbg_img_extent(dt->dtype, dt->ndim, dt->mode, dt->shape,
                                    dt->strides));
    if (!t->data)
      rc = HBG_IMG_E_RANGE;
  }
  const uint64_t *bs = b + 2ull * e->sh.n_tensors;
  for (uint32_t k = l; k < nd->n_scalars; k += W) {
    const hbg_def_scalar *s = &v->scalars[nd->first_scalar + k];
    w->sc[k] = s->kind == HBG_IMG_SCALAR_STATIC ? s->value : bs[s->index];
  }
  return rc;
}

/* ---- the kernel ---- */

/* This thread's index in the grid, and the grid's threads. */
#define DX_GTID(t) ((uint64_t)DX_CTA * DX_NTID + (t))
#define DX_GRID ((uint64_t)DX_CTAS * DX_NTID)

/* 2a: this launch's records cleared. */
HBG_DC_FN void dx_clear(dx_x *x) {
  const uint64_t G = DX_GRID, n = x->n_tasks;
  DX_EACH_THREAD(t) {
    const uint64_t g = DX_GTID(t);
    for (uint64_t k = g; k < x->groups + n; k += G) {
      hbg_dc_xdef *r = &x->xd[k];
      r->claim = 0;
      r->leader = DC_NONE;
      r->cache = DC_NONE;
      r->miss = 0;
      r->state = DX_D_NONE;
      r->first_user = DC_NONE;
      r->kscr = 0;
      r->key = HBG_IMG_KEY_NONE;
      r->sinks = 0;
      r->pool_off = UINT64_MAX;
      r->size = r->hash = 0;
      r->src = NULL;
    }
    for (uint64_t k = g; k < n; k += G) {
      x->xe[k].ok = 0;
      x->xe[k].bound_ok = 0;
      x->xe[k].user_from = DC_NONE;
      x->xe[k].differs = 0;
      x->xe[k].def = DC_NONE;
      x->xe[k].def_ptr = NULL;
      x->dent[k].out_head = HBG__D_NONE;
      x->dent[k].def = NULL;
      x->dent[k].plan = NULL;
      x->dent[k].sinks_left = 0;
      x->dent[k].done = 0;
    }
    for (uint64_t k = g; k < (x->a->n_ranges + 31) / 32; k += G)
      x->bits[k] = 0;
    if (g == 0) {
      x->d->links = (hbg__dlink *)(void *)(x->blk + x->lay.off_bump);
      x->d->ent = x->dent;
    }
  }
}

/* 2b: every entry on its own. */
HBG_DC_FN void dx_entries(dx_x *x) {
  const uint64_t G = DX_GRID, n = x->n_tasks;
  DX_EACH_THREAD(t) {
    if (DX_GTID(t) == 0) { /* the window and the status hold images */
      dx_image(x, x->a->window);
      dx_image(x, x->a->status);
    }
    for (uint64_t i = DX_GTID(t); i < n; i += G) {
      int rc = hbg_img_win_check_entry(&x->ctl->wv, (uint32_t)i);
      if (rc) {
        dx_err(x->ctl, DX_KEY(DX_P_WIN, i, 0, 0, rc));
        continue;
      }
      const hbg_win_task *wt = hbg_img_win_task(&x->ctl->wv, (uint32_t)i);
      if (wt->kind == HBG_WIN_GRAPH)
        dx_check_graph(x, (uint32_t)i, wt);
      else
        dx_check_task(x, (uint32_t)i, wt);
    }
  }
}

/* 3: each group leader's bytes against its cached copy, each other
 * member's against its leader's. */
HBG_DC_FN void dx_compare(dx_x *x) {
  const uint64_t G = DX_GRID;
  DX_EACH_THREAD(t) {
    const uint64_t g = DX_GTID(t);
    for (uint32_t i = 0; i < x->n_tasks; i++) {
      hbg_dc_xent *e = &x->xe[i];
      if (!e->ok || !e->def_ptr)
        continue;
      hbg_dc_xdef *r = &x->xd[e->def];
      const hbg_dc_xent *l = &x->xe[r->leader];
      const uint64_t *mine = (const uint64_t *)(const void *)e->def_ptr;
      const uint64_t *ref;
      uint32_t *flag;
      if (r->leader == i) {
        if (e->cache == DC_NONE) {
          if (g == 0)
            HBG__SA_STORE32(&r->miss, 1u);
          continue;
        }
        ref = (const uint64_t *)(const void *)(x->pool +
                                               x->cache[e->cache].pool_off);
        flag = &r->miss;
      } else {
        if (e->def_addr == l->def_addr)
          continue;
        ref = (const uint64_t *)(const void *)l->def_ptr;
        flag = &e->differs;
      }
      for (uint64_t k = g; k < e->def_size / 8; k += G)
        if (mine[k] != ref[k]) {
          if (!HBG__SA_LOAD32(flag))
            HBG__SA_STORE32(flag, 1u);
          break;
        }
    }
  }
}

/* Set-up's grid barriers, in order (a timeout names the one it waited
 * at). */
enum {
  DX_STEP_WINDOW = 1, /* the window's copy */
  DX_STEP_CLEAR,      /* this launch's records cleared */
  DX_STEP_ENTRIES,    /* every entry on its own */
  DX_STEP_COMPARE,    /* Definitions against the cache and their groups */
  DX_STEP_PLAN,       /* 4: pool space planned */
  DX_STEP_COPY,       /* 4: private copies made */
  DX_STEP_VALID,      /* 4: validated */
  DX_STEP_DPLAN,      /* 4: their dispatch plans */
  DX_STEP_FINISH,     /* every entry against its Definition */
  DX_STEP_BOUNDS,     /* every boundary tensor */
  DX_STEP_TAIL        /* the dispatch state laid out */
};

/* 4 (when some Definition is new, changed or differs): plan, copy,
 * validate, and for each copy that passed its dispatch plan, with the
 * grid's barriers between. @return 1 when the launch is over. */
HBG_DC_FN int dx_new_defs(dx_x *x) {
  const uint64_t G = DX_GRID, nd = x->groups + (uint64_t)x->n_tasks;
  if (DX_CTA == 0 && DX_TID == 0)
    dx_plan(x);
  if (dx_grid_sync(x, DX_STEP_PLAN))
    return 1;
  DX_EACH_THREAD(t) {
    const uint64_t g = DX_GTID(t);
    for (uint64_t k = 0; k < nd; k++) {
      hbg_dc_xdef *r = &x->xd[k];
      if (r->state != DX_D_COPY)
        continue;
      const uint64_t *src = (const uint64_t *)(const void *)r->src;
      uint64_t *dst = (uint64_t *)(void *)(x->pool + r->pool_off);
      for (uint64_t w = g; w < r->size / 8; w += G)
        dst[w] = src[w];
      uint32_t *m = dx_masks(x, r->pool_off, r->size);
      for (uint64_t w = g; w < r->size / 40 + 1; w += G)
        m[w] = 0xffu;
    }
  }
  if (dx_grid_sync(x, DX_STEP_COPY))
    return 1;
  DX_EACH_THREAD(t) {
    const uint64_t g = DX_GTID(t);
    uint64_t nodes = 0;
    for (uint64_t k = 0; k < nd; k++) {
      hbg_dc_xdef *r = &x->xd[k];
      if (r->state != DX_D_COPY && r->state != DX_D_INPLACE)
        continue;
      const uint8_t *p =
          r->state == DX_D_COPY ? x->pool + r->pool_off : r->src;
      hbg_img_def_view v;
      int hr = hbg_img_def_check_head(p, r->size, &v);
      if (hr) {
        if (g == 0)
          dx_min64(&r->key, HBG_IMG_KEY(0, 0, hr));
        continue;
      }
      for (uint64_t u = g; u < hbg_img_def_units(&v); u += G)
        nodes += dx_validate_unit(x, r, &v, (uint32_t)u);
    }
    if (nodes)
      HBG__SA_ADD64(&x->ctl->setup_nodes, nodes);
  }
  if (dx_grid_sync(x, DX_STEP_VALID))
    return 1;
  DX_EACH_THREAD(t) {
    const uint64_t g = DX_GTID(t);
    for (uint64_t k = 0; k < nd; k++) {
      hbg_dc_xdef *r = &x->xd[k];
      if (r->state != DX_D_COPY || r->key != HBG_IMG_KEY_NONE)
        continue;
      const uint8_t *p = x->pool + r->pool_off;
      hbg_img_def_view v;
      hbg_img_def_view_trusted(p, (const hbg_def_hdr *)(const void *)p, &v);
      hbg__dnode *plan = dx_plan_of(x, r->pool_off, r->size);
      uint32_t sinks = 0;
      for (uint64_t u = g; u < v.hdr->n_nodes; u += G) {
        hbg__disp_plan(&v, (uint32_t)u, &plan[u]);
        sinks += (plan[u].flags & HBG__DN_SINK) != 0;
      }
      if (sinks)
        HBG__SA_ADD32(&r->sinks, sinks);
    }
  }
  return dx_grid_sync(x, DX_STEP_DPLAN);
}

/* 5: every entry against its Definition; dependency links; the status
 * itself over no image. */
HBG_DC_FN void dx_finish(dx_x *x, int go) {
  const uint64_t G = DX_GRID, n = x->n_tasks;
  const hbg_dc_exec_args *a = x->a;
  DX_EACH_THREAD(t) {
    const uint64_t g = DX_GTID(t);
    for (uint64_t i = g; i < n; i += G) {
      if (!x->xe[i].ok)
        continue;
      const hbg_win_task *wt = hbg_img_win_task(&x->ctl->wv, (uint32_t)i);
      if (wt->kind == HBG_WIN_GRAPH) {
        if (!dx_finish_graph(x, (uint32_t)i, wt, go))
          continue;
      } else {
        const hbg_sub_tensor *ts = hbg_img_win_task_tensors(wt);
        for (uint32_t k = 0; k < wt->n_tensors; k++)
          if (ts[k].mode & HBG_IMG_ACCESS_OUT)
            dx_write(x, (uint32_t)i, ts[k].addr + ts[k].offset,
                     hbg_img_extent(ts[k].dtype, ts[k].ndim, ts[k].mode,
                                    ts[k].shape, ts[k].strides));
      }
      const uint32_t *deps = hbg_img_win_task_deps(wt);
      for (uint32_t k = 0; k < wt->n_deps; k++)
        hbg__disp_link(x->d, (uint32_t)(x->xe[i].links + k), (uint32_t)i,
                       deps[k]);
    }
    if (g == 0) { /* the status, written at the end, over no image */
      const uint64_t lo = a->status, hi = lo + sizeof(hbg_dc_status);
      int hit = a->window < hi && lo < a->window + a->bytes;
      for (uint32_t e = 0; e < n && !hit; e++) {
        const hbg_win_task *wt = hbg_img_win_task(&x->ctl->wv, e);
        if (wt->kind != HBG_WIN_GRAPH || !x->xe[e].def_ptr)
          continue;
        hit = (wt->sub_addr < hi && lo < wt->sub_addr + wt->sub_size) ||
              (x->xe[e].def_addr < hi &&
               lo < x->xe[e].def_addr + x->xe[e].def_size);
      }
      if (hit)
        dx_err(x->ctl,
               DX_KEY(DX_P_WRITE, DC_NONE, 0, 0, HBG_IMG_E_RANGE));
    }
  }
}

/* 5b: every boundary tensor of every entry that got so far, and the
 * nodes from the first without a built-in kernel of each Definition that
 * has one (its group leader's entry, or an entry whose bytes differ:
 * members share the leader's bytes, and the leader is the least of them),
 * spread over the grid (entry i's units start on thread
 * (i * 2654435761) mod grid: the entries' units start on different
 * threads). */
HBG_DC_FN void dx_bounds(dx_x *x) {
  const uint64_t G = DX_GRID;
  DX_EACH_THREAD(t) {
    const uint64_t g = DX_GTID(t);
    uint64_t nodes = 0;
    for (uint32_t i = 0; i < x->n_tasks; i++) {
      const hbg_dc_xent *e = &x->xe[i];
      const uint64_t start = ((uint64_t)i * 2654435761u) % G;
      const uint64_t first = (g + G - start) % G;
      if (e->bound_ok) {
        const uint32_t nb = e->v.hdr->n_btensors;
        for (uint64_t k = first; k < nb; k += G)
          dx_bound_unit(x, i, (uint32_t)k);
      }
      if (e->user_from != DC_NONE &&
          (e->differs || x->xd[e->def].leader == i)) {
        const uint32_t from = e->user_from, nn = e->v.hdr->n_nodes;
        for (uint64_t k = first; k < (uint64_t)(nn - from); k += G) {
          dx_user_unit(x, i, from + (uint32_t)k);
          nodes++;
        }
      }
    }
    if (nodes)
      HBG__SA_ADD64(&x->ctl->setup_nodes, nodes);
  }
}

/* 6: the block's tail (fan-in counters, the queue, the workers' current
 * items and scratch) laid out alike by every thread, cleared; the
 * dispatch core started. @return 1 when the window runs. */
HBG_DC_FN int dx_tail(dx_x *x, uint64_t n_workers) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  const uint64_t G = DX_GRID, n = x->n_tasks;
  const uint64_t nodes = ctl->nodes, kfl = ctl->kscr;
  const uint64_t off_cnt = x->lay.off_bump + hbg_dc_exec_al64(ctl->bump);
  const uint64_t n_slots = hbg__disp_slots(n + nodes);
  const uint64_t off_q = off_cnt + hbg_dc_exec_al64(nodes * 4);
  const uint64_t off_cur = off_q + hbg_dc_exec_al64(n_slots * 8);
  const uint64_t off_k = off_cur + hbg_dc_exec_al64(n_workers * 8);
  const uint64_t need = off_k + hbg_dc_exec_al64(kfl * 4) * n_workers;
  if (ctl->err_key != DX_KEY_NONE)
    return 0;
  if (need > x->a->scratch_bytes) {
    if (DX_CTA == 0 && DX_TID == 0) {
      dx_err(ctl, DX_KEY(DX_P_LAYOUT, DC_NONE, 0, 0, HBG_DC_E_DEVMEM));
      ctl->need = need;
    }
    return 0;
  }
  uint32_t *cnt = (uint32_t *)(void *)(x->blk + off_cnt);
  uint64_t *q = (uint64_t *)(void *)(x->blk + off_q);
  uint64_t *cur = (uint64_t *)(void *)(x->blk + off_cur);
  DX_EACH_THREAD(t) {
    const uint64_t g = DX_GTID(t);
    for (uint64_t k = g; k < nodes; k += G)
      cnt[k] = 0;
    for (uint64_t k = g; k < n_slots; k += G)
      q[k] = HBG__D_EMPTY;
    for (uint64_t k = g; k < n_workers; k += G)
      cur[k] = HBG__D_EMPTY;
    if (t == 0)
      x->cur = cur;
  }
  if (DX_CTA == 0 && DX_TID == 0) {
    ctl->need = need;
    ctl->kscr_off = off_k;
    ctl->kscr_floats = hbg_dc_exec_al64(kfl * 4) / 4;
    ctl->off_cur = off_cur;
    hbg__disp_init(x->d, (uint32_t)n, n_slots, x->dent, x->d->links, cnt, q);
  }
  return 1;
}

/* The run ran past the deadline (the thread whose claim won): where, the
 * least item a worker is running, else the first entry not complete. */
HBG_DC_FN void dx_timeout_run(dx_x *x, uint64_t n_workers) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  uint64_t least = HBG__D_EMPTY;
  for (uint64_t k = 0; k < n_workers; k++) {
    const uint64_t it = HBG__DA_LOAD64_RLX(&x->cur[k]);
    if (it < least)
      least = it;
  }
  if (least != HBG__D_EMPTY) {
    ctl->tmo_task = (uint32_t)(least >> 32);
    ctl->tmo_node = (uint32_t)least;
    ctl->tmo_step = 1; /* an item still running */
    return;
  }
  uint32_t i = 0;
  while (i < x->n_tasks && HBG__SA_LOAD32(&x->d->ent[i].done))
    i++;
  ctl->tmo_task = i < x->n_tasks ? i : DC_NONE;
}

/* A worker's counts, per lane (summed over the grid at the end). */
typedef struct dx_count {
  uint64_t ops;    /* dispatch operations (every lane) */
  uint64_t items;  /* lane 0: items run */
  uint64_t phases; /* lane 0: kernel phases run */
  uint64_t body_ns;
} dx_count;

/* The run, by one worker (every lane of it): its continuation, else a
 * ticket; the item's arguments, its phases, its consumers. Every decision
 * that steers the lanes is lane 0's, handed over through the worker's
 * shared memory after a barrier (a slot by iteration parity: lane 0 never
 * rewrites one another lane may still read), or a vote of the lanes. */
HBG_DC_FN void dx_run(dx_x *x, dx_wk *wk, float *kscr, uint32_t dx_w,
                      uint32_t dx_lane, uint64_t wid, uint64_t n_workers,
                      dx_count *n) {
  hbg__disp *d = x->d;
  uint32_t par = 0;
  DX_LANE0 wk->cont = HBG__D_EMPTY;
  for (;;) {
    DX_LANE0 {
      uint64_t item = wk->cont;
      wk->cont = HBG__D_EMPTY;
      wk->urc = 0;
      if (item == HBG__D_EMPTY && !hbg__disp_stopped(d)) {
        const uint64_t tk = hbg__disp_ticket(d, &n->ops);
        uint32_t ns = 32;
        while ((item = hbg__disp_poll(d, tk)) == HBG__D_EMPTY) {
          if (hbg__disp_stopped(d))
            break;
          if (dx_late(x)) {
            if (dx_timeout(x, HBG_DC_PHASE_RUN, 0, 0))
              dx_timeout_run(x, n_workers);
            hbg__disp_stop(d, &n->ops);
            break;
          }
          dx_pause(&ns);
        }
        if (item != HBG__D_EMPTY)
          n->ops++; /* the acquire load that handed it over */
      }
      if (hbg__disp_stopped(d))
        item = HBG__D_EMPTY; /* what it holds is dropped */
      wk->pick[par] = item;
      HBG__DA_STORE64_RLX(&x->cur[wid], item);
    }
    DX_WSYNC();
    const uint64_t item = wk->pick[par];
    par ^= 1;
    if (item == HBG__D_EMPTY)
      break;
    const uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
    hbg__kcall c;
    const int bad = dx_resolve(x, wk, item, &c, dx_lane, dx_w) != 0;
    int rc = DX_WSYNC_OR(bad) ? HBG_IMG_E_RANGE : 0;
    if (rc == 0)
      rc = hbg__k_values_check(&c);
    if (rc == 0 && dcu_floats(&c) > x->ctl->kscr_floats)
      rc = HBG_DC_E_DEVMEM;
    if (rc) { /* every lane computed the same rc */
      DX_LANE0 hbg__disp_fail(d, rc, i, j, &n->ops);
      continue;
    }
    /* a warp of 32 lanes runs the kernels' warp path */
    c.coop = dx_w == HBG__K_WARP && DC_WARP == HBG__K_WARP;
    hbg__k_prepare(&c);
    const uint64_t np = dcu_phases(&c);
    uint64_t t0 = 0;
    DX_LANE0 t0 = dx_clock();
    int stop = 0;
    uint64_t ph = 0;
    while (ph < np && !stop) {
      const int ur = dcu_phase(&c, ph, dx_lane, dx_w, kscr, &wk->urc);
      ph++;
#if DCU_VOTES
      stop = DX_WSYNC_OR(ur != 0);
#else
      (void)ur;
      DX_WSYNC();
#endif
    }
    DX_LANE0 {
      n->phases += ph;
      n->body_ns += dx_clock() - t0;
    }
    if (stop) { /* a lane of a user kernel failed: the call ends */
      DX_LANE0 hbg__disp_fail(d, wk->urc, i, j, &n->ops);
      continue;
    }
    if (j != HBG__D_NONE)
      hbg__disp_fanout(d, i, j, dx_lane, dx_w, &wk->cont, &n->ops);
    DX_WSYNC();
    DX_LANE0 {
      if (hbg__disp_item_done(d, item, &wk->cont, &n->ops))
        x->ctl->t_done = dx_clock();
      HBG__DA_STORE64_RLX(&x->cur[wid], HBG__D_EMPTY);
      n->items++;
    }
  }
}

/* Launch gen begins: CTA 0 resets the launch's state, the others wait for
 * it. @return 1, alike in every thread, when the launch is over instead. */
HBG_DC_FN int dx_prologue(dx_x *x, uint64_t n_workers) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  const hbg_dc_exec_args *a = x->a;
  int over = 0;
  if (DX_TID == 0) {
    (void)dx_gen_count(&ctl->start_word, x->gen);
    if (DX_CTA == 0) {
      ctl->t0 = dx_clock();
      /* A new block (zeroed), or a cache of another shape, starts empty;
       * a pool grown in place keeps its copies (its start does not move) */
      if (ctl->cache_slots != a->cache_slots ||
          a->pool_bytes < ctl->pool_used) {
        ctl->cache_slots = a->cache_slots;
        ctl->cache_n = 0;
        ctl->pool_used = 0;
      }
      ctl->pool_bytes = a->pool_bytes;
      ctl->launches++;
      ctl->bar_count = 0;
      ctl->err_key = DX_KEY_NONE;
      ctl->err_node = DC_NONE;
      ctl->n_tasks = 0;
      ctl->n_workers = (uint32_t)n_workers;
      ctl->bump = ctl->nodes = ctl->kscr = 0;
      ctl->defs_validated = ctl->setup_nodes = ctl->items_done = 0;
      ctl->ops = ctl->phases = ctl->body_ns = 0;
      ctl->t_setup = ctl->t0;
      ctl->t_done = 0;
      ctl->need = 0;
      HBG__SA_STORE64_REL(&ctl->gen, a->gen);
    } else {
      uint32_t ns = 32;
      while (HBG__SA_LOAD64_ACQ(&ctl->gen) != a->gen) {
        if (dx_over(x))
          break;
        if (dx_late(x)) {
          dx_timeout(x, HBG_DC_PHASE_START, 0,
                     (uint32_t)HBG__SA_LOAD64(&ctl->start_word));
          break;
        }
        dx_pause(&ns);
      }
    }
    over = dx_over(x);
  }
  return DC_SYNC_CTA_OR(over);
}

/* Set-up, by the whole grid (steps 1 to 6 above). @return 1 when the
 * window runs; *over 1 when the launch is over instead. */
HBG_DC_FN int dx_setup(dx_x *x, dx_shared *sh, uint64_t n_workers,
                       int *over) {
  hbg_dc_exec_ctl *ctl = x->ctl;
  const hbg_dc_exec_args *a = x->a;
  uint8_t *blk = x->blk;
  /* 1. the window's copy (the launch reads only that) */
  hbg_dc_exec_layout lay;
  hbg_dc_exec_layout_of(a->cache_slots, a->pool_bytes, a->bytes, 0, 0, 0, 0,
                        0, 0, 0, 0, &lay);
  const uint8_t *w0 = (const uint8_t *)dc_ptr(a->window, a->bytes);
  const uint64_t *r0 = (const uint64_t *)dc_ptr(a->ranges, a->n_ranges * 16);
  const int sane = w0 && r0 && lay.need != UINT64_MAX &&
                   lay.off_xent <= a->scratch_bytes;
  if (sane) {
    uint8_t *wc = blk + lay.off_win;
    DX_EACH_THREAD(t) {
      for (uint64_t k = DX_GTID(t); k < a->bytes / 8; k += DX_GRID)
        ((uint64_t *)(void *)wc)[k] = ((const uint64_t *)(const void *)w0)[k];
      if (DX_GTID(t) == 0)
        for (uint64_t k = a->bytes / 8 * 8; k < a->bytes; k++)
          wc[k] = w0[k];
    }
  } else if (DX_CTA == 0 && DX_TID == 0) {
    dx_err(ctl, DX_KEY(DX_P_WIN, DC_NONE, 0, 0,
                       w0 && r0 ? HBG_DC_E_DEVMEM : HBG_IMG_E_RANGE));
    ctl->need = lay.off_xent;
  }
  if ((*over = dx_grid_sync(x, DX_STEP_WINDOW)))
    return 0;

  /* every thread: the copy's header, then the launch's layout */
  hbg_img_win_view wv;
  int rc = sane ? hbg_img_win_check_head(blk + lay.off_win, a->bytes, &wv) : 1;
  if (rc == 0) {
    hbg_dc_exec_layout_of(a->cache_slots, a->pool_bytes, a->bytes,
                          wv.hdr->n_tasks, a->n_ranges, 0, 0, 0, 0, 0, 0,
                          &lay);
    if (lay.off_bump > a->scratch_bytes) { /* hints too small or none */
      if (DX_CTA == 0 && DX_TID == 0) {
        dx_err(ctl, DX_KEY(DX_P_WIN, DC_NONE, 0, 0, HBG_DC_E_DEVMEM));
        ctl->need = lay.off_bump;
      }
      rc = 1;
    }
  } else if (sane && DX_CTA == 0 && DX_TID == 0) {
    dx_err(ctl, DX_KEY(DX_P_WIN, DC_NONE, 0, 0, rc));
  }
  if (DX_TID == 0) {
    x->r = r0;
    x->lay = lay;
    x->cache = (hbg_dc_centry *)(void *)(blk + lay.off_cache);
    x->pool = blk + lay.off_pool;
    x->xe = (hbg_dc_xent *)(void *)(blk + lay.off_xent);
    x->xd = (hbg_dc_xdef *)(void *)(blk + lay.off_xdef);
    x->bits = (uint32_t *)(void *)(blk + lay.off_bits);
    x->d = (hbg__disp *)(void *)(blk + lay.off_disp);
    x->dent = (hbg__dent *)(void *)(blk + lay.off_dent);
    x->n_tasks = rc == 0 ? wv.hdr->n_tasks : 0;
    x->groups = (uint32_t)lay.groups;
    if (DX_CTA == 0 && rc == 0) {
      ctl->wv = wv;
      ctl->n_tasks = x->n_tasks;
    }
  }
  DX_CTA_SYNC();

  /* 2. every entry on its own (records cleared first) */
  if (rc == 0)
    dx_clear(x);
  if ((*over = dx_grid_sync(x, DX_STEP_CLEAR)))
    return 0;
  if (rc == 0)
    dx_entries(x);
  if ((*over = dx_grid_sync(x, DX_STEP_ENTRIES)))
    return 0;

  /* 3. Definitions against the cache and their group leaders */
  if (rc == 0)
    dx_compare(x);
  if ((*over = dx_grid_sync(x, DX_STEP_COMPARE)))
    return 0;

  /* 4. new, changed and differing Definitions: copied, validated, planned
   * (every CTA decides alike from the published flags) */
  if (DX_TID == 0) {
    int work = 0;
    for (uint32_t k = 0; rc == 0 && k < x->groups && !work; k++)
      work = x->xd[k].claim == 2 && x->xd[k].miss;
    for (uint32_t i = 0; rc == 0 && i < x->n_tasks && !work; i++)
      work = x->xe[i].ok && x->xe[i].differs;
    sh->go = work;
  }
  DX_CTA_SYNC();
  const int go = sh->go;
  if (go && (*over = dx_new_defs(x)))
    return 0;

  /* 5. every entry against its Definition, then its boundary tensors */
  if (rc == 0)
    dx_finish(x, go);
  if ((*over = dx_grid_sync(x, DX_STEP_FINISH)))
    return 0;
  if (rc == 0)
    dx_bounds(x);
  if ((*over = dx_grid_sync(x, DX_STEP_BOUNDS)))
    return 0;

  /* 6. the tail, the dispatch core started */
  const int run = rc == 0 && dx_tail(x, n_workers);
  if ((*over = dx_grid_sync(x, DX_STEP_TAIL)))
    return 0;
  return run;
}

HBG_DC_ENTRY(hbg_dc_exec, hbg_dc_exec_args) {
  DC_SHARED_BLOCK(dx_shared, sh);
  uint8_t *blk = (uint8_t *)dc_ptr(a.scratch, a.scratch_bytes);
  if (!blk || a.scratch_bytes < HBG_DC_EXEC_MIN_SCRATCH ||
      a.scratch % 64) { /* the host never launches so */
    if (DX_CTA == 0 && DX_TID == 0) {
      hbg_dc_status st;
      st.error = HBG_IMG_E_RANGE;
      st.task = st.node = DC_NONE;
      st.tasks_done = 0;
      st.nodes_done = st.defs_verified = 0;
      st.flags = st.phase = 0;
      st.setup_ns = st.run_ns = st.setup_nodes = 0;
      st.dispatch_ops = st.kernel_phases = st.body_ns = st.tail_ns = 0;
      st.workers = st.step = st.arrived = st.ctas = 0;
      hbg_dc_status *out = (hbg_dc_status *)dc_ptr(a.status, sizeof st);
      if (out)
        *out = st;
    }
    return;
  }
  hbg_dc_exec_ctl *ctl = (hbg_dc_exec_ctl *)(void *)blk;
  /* Workers: a warp, or the whole CTA. */
  const uint32_t dx_w = (a.worker_lanes == DC_WARP && DX_NTID % DC_WARP == 0 &&
                         DX_NTID / DC_WARP <= DX_MAX_WPC)
                            ? DC_WARP
                            : DX_NTID;
  const uint32_t dx_lane = DX_TID % dx_w;
  dx_wk *wk = &sh->wks[DX_TID / dx_w];
  const uint32_t wpc = DX_NTID / dx_w;
  const uint64_t n_workers = (uint64_t)DX_CTAS * wpc;
  const uint64_t wid = (uint64_t)DX_CTA * wpc + DX_TID / dx_w;
  if (DX_TID == 0) {
    dx_x *x = &sh->xs;
    sh->as = a;
    x->a = &sh->as;
    x->ctl = ctl;
    x->blk = blk;
    x->gen = a.gen;
    x->n_tasks = 0;
    x->cur = NULL;
    const uint64_t t = dx_clock();
    x->deadline = a.deadline_ns && a.deadline_ns < UINT64_MAX - t
                      ? t + a.deadline_ns
                      : UINT64_MAX;
  }
  DX_CTA_SYNC();
  dx_x *x = &sh->xs;
  dx_count n = {0, 0, 0, 0};
  int over = dx_prologue(x, n_workers), run = 0;
  if (!over)
    run = dx_setup(x, sh, n_workers, &over);
  if (run) {
    if (DX_CTA == 0 && DX_TID == 0)
      ctl->t_setup = dx_clock();
    DX_EACH_THREAD(t) { /* the entries without dependencies made ready */
      for (uint64_t i = DX_GTID(t); i < x->n_tasks; i += DX_GRID)
        if (hbg_img_win_task(&ctl->wv, (uint32_t)i)->n_deps == 0)
          hbg__disp_entry_ready(x->d, (uint32_t)i, NULL, &n.ops);
    }
    float *kscr = (float *)(void *)(blk + ctl->kscr_off) +
                  wid * ctl->kscr_floats;
    dx_run(x, wk, kscr, dx_w, dx_lane, wid, n_workers, &n);
  }

  /* leave: counts summed, the last CTA writes the status */
  if (n.ops)
    HBG__SA_ADD64(&ctl->ops, n.ops);
  if (n.items)
    HBG__SA_ADD64(&ctl->items_done, n.items);
  if (n.phases)
    HBG__SA_ADD64(&ctl->phases, n.phases);
  if (n.body_ns)
    HBG__SA_ADD64(&ctl->body_ns, n.body_ns);
  DX_CTA_SYNC();
  if (DX_TID == 0) {
    HBG__SA_FENCE();
    if (dx_gen_count(&ctl->exit_word, x->gen) == DX_CTAS) {
      HBG__SA_FENCE();
      if (ctl->tmo_gen != x->gen && ctl->err_key != DX_KEY_NONE)
        ctl->err_node = dx_err_node(x, ctl->err_key);
      dx_status(x, run, (uint32_t)n_workers, dx_clock());
    }
  }
}
