/* The serial Definition and window validators as they were before
 * hbg_image.h split them into pieces (the header's head checks, which the
 * split did not touch, shared): the reference test_validate_units checks
 * the pieces against, and validate_bench times the serial validator
 * against. */
#ifndef HBG_TESTS_VALIDATE_REF_H
#define HBG_TESTS_VALIDATE_REF_H

#include <hbg/hbg_image.h>

static inline int ref_csr(const uint32_t *ptr, const uint32_t *ids, uint32_t n,
                   uint32_t n_edges, int fanin) {
  if (ptr[0] != 0 || ptr[n] != n_edges)
    return HBG_IMG_E_CSR;
  for (uint32_t i = 0; i < n; i++)
    if (ptr[i] > ptr[i + 1])
      return HBG_IMG_E_CSR;
  for (uint32_t i = 0; i < n; i++) {
    for (uint32_t k = ptr[i]; k < ptr[i + 1]; k++) {
      uint32_t v = ids[k];
      if (v >= n)
        return HBG_IMG_E_CSR;
      if (fanin ? v >= i : v <= i)
        return HBG_IMG_E_CYCLE;
      if (k > ptr[i] && v <= ids[k - 1])
        return HBG_IMG_E_CSR;
    }
  }
  return 0;
}

static inline int ref_def_validate(const void *img, uint64_t len) {
  hbg_img_def_view v;
  int rc = hbg_img_def_check_head(img, len, &v); /* unchanged by the split */
  if (rc)
    return rc;
  const hbg_def_hdr *h = v.hdr;
  const uint32_t n = h->n_nodes;
  for (uint32_t i = 0; i < h->n_btensors; i++) {
    const hbg_def_bsig *s = &v.bsig[i];
    if (s->reserved || s->reserved2 ||
        !hbg_img_extent(s->dtype, s->ndim, s->mode, s->shape, s->strides))
      return HBG_IMG_E_FIELD;
  }
  if ((rc = ref_csr(v.fanin_ptr, v.fanin, n, h->n_edges, 1)) ||
      (rc = ref_csr(v.fanout_ptr, v.fanout, n, h->n_edges, 0)))
    return rc;
  for (uint32_t c = 0; c < n; c++)
    for (uint32_t k = v.fanin_ptr[c]; k < v.fanin_ptr[c + 1]; k++)
      if (!hbg_img__row_has(v.fanout_ptr, v.fanout, h->n_edges, v.fanin[k],
                            c))
        return HBG_IMG_E_CSR;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (v.fanin_ptr[i] != v.fanin_ptr[i + 1])
      continue;
    if (k >= h->n_roots || v.roots[k] != i)
      return HBG_IMG_E_ROOTS;
    k++;
  }
  if (k != h->n_roots)
    return HBG_IMG_E_ROOTS;
  uint64_t tsum = 0, ssum = 0;
  for (uint32_t i = 0; i < n; i++) {
    const hbg_def_node *nd = &v.nodes[i];
    if (!hbg_img_kernel_valid(nd->kernel) || nd->reserved)
      return HBG_IMG_E_FIELD;
    if (nd->n_tensors > HBG_IMG_MAX_ARGS_PER_NODE ||
        nd->n_scalars > HBG_IMG_MAX_SCALARS_PER_NODE)
      return HBG_IMG_E_COUNT;
    if (nd->first_tensor != tsum || nd->first_scalar != ssum)
      return HBG_IMG_E_REF;
    tsum += nd->n_tensors;
    ssum += nd->n_scalars;
    if (tsum > h->n_tensors || ssum > h->n_scalars)
      return HBG_IMG_E_REF;
    if (nd->heap_off % HBG_IMG_HEAP_ALIGN)
      return HBG_IMG_E_ALIGN;
    if (nd->heap_off > h->heap_size ||
        nd->heap_size > h->heap_size - nd->heap_off)
      return HBG_IMG_E_REF;
    for (uint32_t j = 0; j < nd->n_tensors; j++)
      if ((rc = hbg_img__tensor(&v, i, &v.tensors[nd->first_tensor + j])))
        return rc;
    for (uint32_t j = 0; j < nd->n_scalars; j++) {
      const hbg_def_scalar *s = &v.scalars[nd->first_scalar + j];
      if (s->kind == HBG_IMG_SCALAR_STATIC) {
        if (s->index != 0)
          return HBG_IMG_E_FIELD;
      } else if (s->kind == HBG_IMG_SCALAR_BOUNDARY) {
        if (s->index >= h->n_bscalars)
          return HBG_IMG_E_REF;
      } else {
        return HBG_IMG_E_FIELD;
      }
    }
  }
  if (tsum != h->n_tensors || ssum != h->n_scalars)
    return HBG_IMG_E_REF;
  return 0;
}

static inline int ref_win_validate(const void *img, uint64_t len) {
  hbg_img_win_view w;
  int rc = hbg_img_win_check_head(img, len, &w); /* unchanged by the split */
  if (rc)
    return rc;
  const uint32_t total = w.hdr->total_size;
  uint64_t prev_end = sizeof(hbg_win_hdr);
  for (uint32_t i = 0; i < w.hdr->n_tasks; i++) {
    uint32_t off = w.index[i];
    if (off % HBG_IMG_ALIGN)
      return HBG_IMG_E_ALIGN;
    if (off < prev_end || off > total || total - off < sizeof(hbg_win_task))
      return HBG_IMG_E_OFFSET;
    const hbg_win_task *t = (const hbg_win_task *)(const void *)(w.base + off);
    if (t->size < sizeof *t)
      return HBG_IMG_E_SIZE;
    if (t->size % HBG_IMG_ALIGN)
      return HBG_IMG_E_ALIGN;
    if (t->size > total - off)
      return HBG_IMG_E_OFFSET;
    if ((rc = hbg_img__win_entry(w.base + off, i, w.hdr->n_tasks)))
      return rc;
    prev_end = (uint64_t)off + t->size;
  }
  return 0;
}

#endif
