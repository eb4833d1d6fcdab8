/*
 * Device executor (see devcode.h, hbg_dc_exec): the window runs on the
 * device from device memory. The scheduling core (src/exec/sched_src.h)
 * and the built-in kernels (src/kernels/kern_src.h) are the sources the
 * sim's executor runs; here they run as device code under nvcc and as the
 * stand-in driver's host build (one CTA of one lane) elsewhere.
 *
 * Set-up (CTA 0, thread 0): the window, each graph entry's Submission and
 * Definition through check.c's validators; user kernels (no device
 * implementation) and unknown ids are HBG_E_KERNEL at their entry and
 * node; then the block is laid out: control header, one hbg_img_graph per
 * entry, the core's state, one kernel scratch area per CTA. Kernel
 * argument signatures are not checked here (hbg__kernel_check is host C):
 * the host checks them when a task is submitted or a graph recorded.
 * What the device does check per item is that every tensor lies where the
 * validated images put it (hbg_img_graph_tensor's bounds) and inside one of
 * the live allocations the host listed for this launch (dx_live), and the
 * scalar-dependent kernel checks (hbg__k_values_check).
 *
 * Run (every CTA): thread 0 pops a ready item, resolves its arguments into
 * shared memory, the CTA runs its phases (lane = thread), fences, and
 * thread 0 counts it done. A CTA that finds nothing ready while every
 * item pushed so far has completed, and the window not complete, reports
 * HBG_E_IMG_CSR (the graph cannot finish). The last CTA to leave writes
 * the status.
 */
#include "devcode.h"

#include "device/cuda/devcode/exec_layout.h"
#include "exec/sched_src.h"
#include "kernels/kern_src.h"

#if defined(__CUDA_ARCH__)
#define DX_TID threadIdx.x
#define DX_LANES blockDim.x
#define DX_CTA blockIdx.x
#define DX_CTAS gridDim.x
#define DX_SYNC() __syncthreads()
#define DX_FENCE() __threadfence()
#define DX_SHARED __shared__
#else
#define DX_TID 0u
#define DX_LANES 1u
#define DX_CTA 0u
#define DX_CTAS 1u
#define DX_SYNC() ((void)0)
/* one lane of one CTA; the core's CPU atomics are acq_rel already */
#define DX_FENCE() ((void)0)
#define DX_SHARED
#endif

HBG_DC_FN int dx_builtin(uint32_t k) { return k <= HBG__K_FILL; }

/* Tensor metadata (and, with data, element 0's memory) of a record. */
HBG_DC_FN void dx_meta(hbg__ktensor *k, uint32_t dtype, uint32_t ndim,
                       uint32_t mode, const uint32_t *shape,
                       const uint32_t *strides) {
  k->data = NULL;
  k->dtype = dtype;
  k->ndim = ndim;
  k->mode = mode;
  for (uint32_t d = 0; d < HBG_IMG_MAX_DIMS; d++) {
    k->shape[d] = shape[d];
    k->strides[d] = strides[d];
  }
}

/* [addr, addr + len) inside one of the n live ranges at r ([start, end)
 * pairs, ascending; addr itself inside even when len is 0): the last range
 * starting at or before addr holds it. */
HBG_DC_FN int dx_live(const uint64_t *r, uint64_t n, uint64_t addr,
                      uint64_t len) {
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (r[2 * mid] <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return 0;
  uint64_t end = r[2 * (lo - 1) + 1];
  return addr < end && len <= end - addr;
}

/* The device pointer of a tensor's [addr, addr + len), or NULL when it is
 * not inside a live allocation (ranges) or not addressable (dc_ptr). */
HBG_DC_FN void *dx_tensor_ptr(const hbg_dc_exec_args *a, uint64_t addr,
                              uint64_t len) {
  const uint64_t *r = (const uint64_t *)dc_ptr(a->ranges, a->n_ranges * 16);
  if (!r || !dx_live(r, a->n_ranges, addr, len))
    return NULL;
  return dc_ptr(addr, len);
}

/* Item (task i, node j)'s call: kernel, tensors (data resolved, against
 * a's live ranges, when a is not NULL), scalars. @return 0 or an
 * HBG_IMG_E_* code. */
HBG_DC_FN int dx_args(const hbg_img_win_view *wv, const hbg_img_graph *g,
                      uint32_t i, uint32_t j, const hbg_dc_exec_args *a,
                      hbg__kcall *c, hbg__ktensor *t, uint64_t *sc) {
  const int resolve = a != NULL;
  c->t = t;
  c->sc = sc;
  if (j == HBG__SCHED_NONE) {
    const hbg_win_task *wt = hbg_img_win_task(wv, i);
    if (!wt)
      return HBG_IMG_E_REF;
    const hbg_sub_tensor *ts = hbg_img_win_task_tensors(wt);
    const uint64_t *ss = hbg_img_win_task_scalars(wt);
    c->kernel = wt->kernel;
    c->nt = wt->n_tensors; /* bounded by the window validator */
    c->ns = wt->n_scalars;
    for (uint32_t k = 0; k < c->nt; k++) {
      dx_meta(&t[k], ts[k].dtype, ts[k].ndim, ts[k].mode, ts[k].shape,
              ts[k].strides);
      if (!resolve)
        continue;
      uint64_t p = ts[k].addr + ts[k].offset;
      if (p < ts[k].addr)
        return HBG_IMG_E_RANGE;
      t[k].data = dx_tensor_ptr(a, p,
                                hbg_img_extent(ts[k].dtype, ts[k].ndim,
                                               ts[k].mode, ts[k].shape,
                                               ts[k].strides));
      if (!t[k].data)
        return HBG_IMG_E_RANGE;
    }
    for (uint32_t k = 0; k < c->ns; k++)
      sc[k] = ss[k];
    return 0;
  }
  hbg_img_node n;
  DC_TRY(hbg_img_graph_node(g, j, &n));
  c->kernel = n.kernel;
  c->nt = n.n_tensors;
  c->ns = n.n_scalars;
  for (uint32_t k = 0; k < n.n_tensors; k++) {
    hbg_img_arg x;
    DC_TRY(hbg_img_graph_tensor(g, j, k, &x));
    dx_meta(&t[k], x.dtype, x.ndim, x.mode, x.shape, x.strides);
    if (!resolve)
      continue;
    t[k].data = dx_tensor_ptr(a, x.addr, x.extent);
    if (!t[k].data)
      return HBG_IMG_E_RANGE;
  }
  for (uint32_t k = 0; k < n.n_scalars; k++)
    DC_TRY(hbg_img_graph_scalar(g, j, k, &sc[k]));
  return 0;
}

/* A kernel this executor runs, and the scratch floats its call needs. */
HBG_DC_FN int dx_runnable(const hbg__kcall *c, uint64_t *floats) {
  if (hbg_img_kernel_is_user(c->kernel) || !dx_builtin(c->kernel))
    return HBG_IMG_E_KERNEL;
  uint64_t f = hbg__k_scratch_floats(c);
  if (f > *floats)
    *floats = f;
  return 0;
}

/* Set-up into block blk of cap bytes. @return 0 or an error code with
 * *task and *node where known. */
HBG_DC_FN int dx_setup(const hbg_dc_exec_args *a, hbg_dc_exec_ctl *ctl,
                       uint8_t *blk, uint32_t n_ctas, uint32_t *task,
                       uint32_t *node) {
  const void *w = dc_ptr(a->window, a->bytes);
  const uint64_t *r = (const uint64_t *)dc_ptr(a->ranges, a->n_ranges * 16);
  if (!w || !r)
    return HBG_IMG_E_RANGE;
  DC_TRY(hbg_img_win_validate(w, a->bytes, &ctl->wv));
  const hbg_img_win_view *wv = &ctl->wv;
  uint32_t n = wv->hdr->n_tasks;
  /* The graphs' room first (the counts below are in the Definitions). */
  hbg_dc_exec_layout lay;
  hbg_dc_exec_layout_of(n, 0, 0, 0, n_ctas, &lay);
  ctl->need = lay.off_sched;
  if (lay.off_sched > a->scratch_bytes)
    return HBG_DC_E_DEVMEM;
  hbg_img_graph *gs = (hbg_img_graph *)(void *)(blk + lay.off_graphs);
  hbg_dc_status st; /* check.c's counters */
  st.defs_verified = 0;
  dc_seen seen;
  seen.n = 0;
  uint64_t n_deps = 0, n_nodes = 0, floats = 0;
  hbg__ktensor t[HBG_IMG_MAX_ARGS_PER_NODE];
  uint64_t sc[HBG_IMG_MAX_SCALARS_PER_NODE];
  hbg__kcall c;
  for (uint32_t i = 0; i < n; i++) {
    const hbg_win_task *wt = hbg_img_win_task(wv, i);
    *task = i;
    if (!wt)
      return HBG_IMG_E_REF;
    n_deps += wt->n_deps;
    if (wt->kind != HBG_WIN_GRAPH) {
      DC_TRY(dx_args(wv, NULL, i, HBG__SCHED_NONE, NULL, &c, t, sc));
      DC_TRY(dx_runnable(&c, &floats));
      ctl->tasks_checked = i + 1;
      continue;
    }
    /* Its Submission and resident Definition inside live allocations
     * before anything reads them (the heap's tensors are checked per
     * item, like every tensor). */
    if (!dx_live(r, a->n_ranges, wt->sub_addr, wt->sub_size) ||
        (wt->def_addr && !dx_live(r, a->n_ranges, wt->def_addr, wt->def_size)))
      return HBG_IMG_E_RANGE;
    hbg_img_sub_view sv;
    hbg_img_def_view dv;
    DC_TRY(dc_check_graph(wt, &st, &seen, node, &sv, &dv));
    DC_TRY(hbg_img_graph_init(&gs[i], &dv, &sv, wt->heap_addr));
    for (uint32_t j = 0; j < gs[i].hdr.n_nodes; j++) {
      *node = j;
      DC_TRY(dx_args(wv, &gs[i], i, j, NULL, &c, t, sc));
      DC_TRY(dx_runnable(&c, &floats));
    }
    *node = DC_NONE;
    n_nodes += gs[i].hdr.n_nodes;
    ctl->tasks_checked = i + 1;
  }
  *task = DC_NONE;
  ctl->defs_verified = st.defs_verified;
  /* The host sized the block with the same function from its own counts
   * (untrusted here): this is the check that holds. */
  hbg_dc_exec_layout_of(n, n_deps, n_nodes, floats, n_ctas, &lay);
  ctl->need = lay.need;
  if (lay.need > a->scratch_bytes)
    return HBG_DC_E_DEVMEM;
  ctl->kscr_off = lay.off_kscr;
  ctl->kscr_floats = lay.kscr_stride / 4;
  hbg__sched *s = hbg__sched_init(blk + lay.off_sched, n, n_deps, n_nodes);
  for (uint32_t i = 0; i < n; i++) {
    const hbg_win_task *wt = hbg_img_win_task(wv, i);
    uint32_t bad = DC_NONE;
    int rc = hbg__sched_task_set(s, i, wt->kind == HBG_WIN_GRAPH ? &gs[i]
                                                                 : NULL,
                                 hbg_img_win_task_deps(wt), wt->n_deps, &bad);
    if (rc) {
      *task = i;
      *node = bad;
      return rc;
    }
  }
  hbg__sched_start(s);
  ctl->sched = s;
  return 0;
}

/* The status from the block's state, written by the last CTA to leave. */
HBG_DC_FN void dx_status(const hbg_dc_exec_args *a,
                         const hbg_dc_exec_ctl *ctl) {
  hbg_dc_status st;
  st.flags = st.reserved = 0;
  st.setup_ns = st.run_ns = st.setup_nodes = 0;
  st.error = ctl->error;
  st.task = ctl->task;
  st.node = ctl->node;
  st.tasks_done = ctl->tasks_checked;
  st.nodes_done = 0;
  st.defs_verified = ctl->defs_verified;
  const hbg__sched *s = (const hbg__sched *)ctl->sched;
  if (!ctl->error && s) {
    st.tasks_done = s->tasks_done;
    st.nodes_done = s->items_done;
    if (s->failed) {
      st.error = s->error;
      st.task = s->err_task;
      st.node = s->err_node;
    }
  }
  hbg_dc_status *out = (hbg_dc_status *)dc_ptr(a->status, sizeof st);
  if (out)
    *out = st;
}

/* Thread 0: the next thing for this CTA. 0 nothing ready now, 1 an item,
 * 2 leave. */
HBG_DC_FN int dx_next(hbg_dc_exec_ctl *ctl, hbg__sched *s, uint64_t *item) {
  if (HBG__SA_LOAD32(&s->failed) || hbg__sched_complete(s))
    return 2;
  /* finished before the tail: every item pushed by then has completed. */
  uint64_t fin = HBG__SA_LOAD64_ACQ(&ctl->finished);
  if (hbg__sched_pop(s, item))
    return 1;
  uint64_t tail = HBG__SA_LOAD64(&s->q_tail);
  if (tail > s->n_items)
    tail = s->n_items;
  if (fin == tail && !hbg__sched_complete(s)) {
    hbg__sched_fail(s, HBG_IMG_E_CSR, HBG__SCHED_NONE, HBG__SCHED_NONE);
    return 2;
  }
  return 0;
}

HBG_DC_ENTRY(hbg_dc_exec, hbg_dc_exec_args) {
  DX_SHARED hbg__ktensor t[HBG_IMG_MAX_ARGS_PER_NODE];
  DX_SHARED uint64_t sc[HBG_IMG_MAX_SCALARS_PER_NODE];
  DX_SHARED hbg__kcall call;
  DX_SHARED uint64_t item;
  DX_SHARED int state, rc;
  DX_SHARED hbg_dc_exec_ctl *ctl;
  DX_SHARED hbg__sched *s;
  uint8_t *blk = (uint8_t *)dc_ptr(a.scratch, a.scratch_bytes);
  if (!blk || a.scratch_bytes < HBG_DC_EXEC_MIN_SCRATCH ||
      a.scratch % 8) { /* the host never launches so */
    if (DX_CTA == 0 && DX_TID == 0) {
      hbg_dc_exec_ctl bad;
      bad.error = HBG_IMG_E_RANGE;
      bad.task = bad.node = DC_NONE;
      bad.tasks_checked = 0;
      bad.defs_verified = 0;
      bad.sched = NULL;
      dx_status(&a, &bad);
    }
    return;
  }
  if (DX_TID == 0) {
    ctl = (hbg_dc_exec_ctl *)(void *)blk;
    if (DX_CTA == 0) {
      ctl->exited = 0;
      ctl->finished = 0;
      ctl->need = 0;
      ctl->sched = NULL;
      ctl->tasks_checked = 0;
      ctl->defs_verified = 0;
      ctl->kscr_floats = 0;
      ctl->task = DC_NONE;
      ctl->node = DC_NONE;
      uint32_t task = DC_NONE, node = DC_NONE;
      ctl->error = dx_setup(&a, ctl, blk, DX_CTAS, &task, &node);
      if (ctl->error) {
        ctl->task = task;
        ctl->node = node;
        ctl->sched = NULL;
      }
      HBG__SA_STORE64_REL(&ctl->gen, a.gen);
    } else {
      while (HBG__SA_LOAD64_ACQ(&ctl->gen) != a.gen) {
      }
    }
    s = (hbg__sched *)ctl->sched;
  }
  DX_SYNC();
  float *kscr = s ? (float *)(void *)(blk + ctl->kscr_off) +
                        (uint64_t)DX_CTA * ctl->kscr_floats
                  : NULL;
  while (s) {
    if (DX_TID == 0) {
      state = dx_next(ctl, s, &item);
      if (state == 1) {
        uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
        const hbg__sched_task *st = &s->task[i];
        rc = dx_args(&ctl->wv, st->g, i, j, &a, &call, t, sc);
        if (rc == 0)
          rc = hbg__k_values_check(&call);
        if (rc == 0 && hbg__k_scratch_floats(&call) > ctl->kscr_floats)
          rc = HBG_DC_E_DEVMEM;
        if (rc == 0)
          hbg__k_prepare(&call);
      }
    }
    DX_SYNC();
    if (state == 2)
      break;
    if (state == 1) {
      if (rc == 0) {
        uint64_t n = hbg__k_phases(&call);
        for (uint64_t ph = 0; ph < n; ph++) {
          hbg__k_phase(&call, ph, DX_TID, DX_LANES, kscr);
          DX_SYNC();
        }
      }
      DX_FENCE(); /* the item's outputs before its completion */
      DX_SYNC();
      if (DX_TID == 0) {
        if (rc)
          hbg__sched_fail(s, rc, (uint32_t)(item >> 32), (uint32_t)item);
        else
          hbg__sched_done(s, item);
        DX_FENCE(); /* its pushes before it counts as finished */
        HBG__SA_ADD64(&ctl->finished, (uint64_t)1);
      }
    }
    DX_SYNC();
  }
  if (DX_TID == 0) {
    DX_FENCE();
    if (HBG__SA_ADD32(&ctl->exited, 1u) + 1u == DX_CTAS) {
      DX_FENCE();
      dx_status(&a, ctl);
    }
  }
}
