/*
 * One kernel call per launch (see devcode.h, hbg_dc_node): the entry the
 * peer executors (src/device/cuda/cuda_peer.c) launch once per call, eager
 * or captured into a CUDA graph. The call's phases are the ones
 * hbg_dc_exec runs for an item (src/kernels/kern_src.h: lane = thread, a
 * barrier between phases), so its outputs equal the host reference bit for
 * bit. Thread 0 checks the call and resolves its tensors into shared
 * memory; every thread of the CTA then runs the phases.
 */
#include "devcode.h"

#include "kernels/kern_src.h"

#define DN_TID DC_TID
#define DN_LANES DC_NTID
#define DN_SYNC() DC_SYNC_CTA()

/* A CTA's shared memory: the call, resolved once for its threads. */
typedef struct dn_shared {
  hbg__ktensor t[HBG_DC_NODE_MAX_TENSORS];
  uint64_t sc[HBG_DC_NODE_MAX_SCALARS];
  hbg__kcall call;
  int go;
} dn_shared;

/* Thread 0: the call's hbg__kcall with resolved tensors. @return 0 or an
 * error code. */
HBG_DC_FN int dn_resolve(const hbg_dc_node_args *a, hbg__kcall *c,
                         hbg__ktensor *t, uint64_t *sc) {
  if (hbg_img_kernel_is_user(a->kernel) || a->kernel > HBG__K_FILL)
    return HBG_IMG_E_KERNEL;
  if (a->n_tensors > HBG_DC_NODE_MAX_TENSORS ||
      a->n_scalars > HBG_DC_NODE_MAX_SCALARS)
    return HBG_IMG_E_COUNT;
  c->kernel = a->kernel;
  c->nt = a->n_tensors;
  c->ns = a->n_scalars;
  c->coop = 0; /* a CTA's lanes: the kernels' general path */
  c->t = t;
  c->sc = sc;
  for (uint32_t k = 0; k < a->n_tensors; k++) {
    const hbg_dc_ntensor *r = &a->t[k];
    hbg__ktensor *x = &t[k];
    x->dtype = r->dtype;
    x->ndim = r->ndim;
    x->mode = r->mode;
    for (uint32_t d = 0; d < HBG_IMG_MAX_DIMS; d++) {
      x->shape[d] = r->shape[d];
      x->strides[d] = r->strides[d];
    }
    uint64_t ext = hbg_img_extent(r->dtype, r->ndim, r->mode, r->shape,
                                  r->strides);
    if (!ext)
      return HBG_IMG_E_FIELD;
    x->data = dc_ptr(r->addr, ext);
    if (!x->data)
      return HBG_IMG_E_RANGE;
  }
  for (uint32_t k = 0; k < a->n_scalars; k++)
    sc[k] = a->sc[k];
  if (hbg__k_scratch_floats(c) > a->scratch_floats)
    return HBG_DC_E_DEVMEM;
  if (a->scratch_floats &&
      !dc_ptr(a->scratch, a->scratch_floats * sizeof(float)))
    return HBG_IMG_E_RANGE;
  DC_TRY(hbg__k_values_check(c));
  hbg__k_prepare(c);
  return 0;
}

HBG_DC_ENTRY(hbg_dc_node, hbg_dc_node_args) {
  DC_SHARED_BLOCK(dn_shared, sh);
  if (DN_TID == 0) {
    sh->go = 0;
    uint64_t *st = (uint64_t *)dc_ptr(a.status, sizeof(uint64_t));
    /* an earlier call failed: this one does nothing (first error wins) */
    if (st && *st == 0) {
      int rc = dn_resolve(&a, &sh->call, sh->t, sh->sc);
      if (rc)
        *st = hbg_dc_node_status_pack(rc, a.index);
      else
        sh->go = 1;
    }
  }
  DN_SYNC();
  if (!sh->go)
    return;
  float *kscr = (float *)dc_ptr(a.scratch, a.scratch_floats * sizeof(float));
  uint64_t n = hbg__k_phases(&sh->call);
  for (uint64_t ph = 0; ph < n; ph++) {
    hbg__k_phase(&sh->call, ph, DN_TID, DN_LANES, kscr);
    DN_SYNC();
  }
}
