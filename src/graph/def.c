#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: no allocation */
#include <xxhash.h>

#include "common/util.h"
#include "graph/graph.h"

uint64_t hbg__hash(const void *p, uint64_t len) {
  return XXH3_64bits(p, (size_t)len);
}

uint64_t hbg__hash_skip(const void *p, uint64_t len, uint64_t hash_off) {
  static const uint8_t zero[8];
  if (hash_off > len || len - hash_off < sizeof zero)
    return hbg__hash(p, len);
  const uint8_t *b = p;
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, b, (size_t)hash_off);
  XXH3_64bits_update(&st, zero, sizeof zero);
  XXH3_64bits_update(&st, b + hash_off + sizeof zero,
                     (size_t)(len - hash_off - sizeof zero));
  return XXH3_64bits_digest(&st);
}

void hbg__def_free(hbg__def *d) {
  if (!d)
    return;
  free(d->image);
  free(d->balign);
  free(d->bmode);
  free(d);
}

int hbg__def_init_align(hbg__def *d) {
  hbg_def_hdr h;
  memcpy(&h, d->image, sizeof h);
  d->balign = calloc(h.n_btensors ? h.n_btensors : 1, 1);
  d->bmode = calloc(h.n_btensors ? h.n_btensors : 1, 1);
  HBG__RETURN_IF(!d->balign || !d->bmode, HBG_E_NOMEM);
  const hbg_def_bsig *bs = (const hbg_def_bsig *)(d->image + h.off_bsig);
  const hbg_def_tensor *t = (const hbg_def_tensor *)(d->image + h.off_tensors);
  for (uint32_t i = 0; i < h.n_btensors; i++)
    d->balign[i] = (uint8_t)hbg_dtype_size(bs[i].dtype);
  for (uint32_t i = 0; i < h.n_tensors; i++) {
    uint8_t es = (uint8_t)hbg_dtype_size(t[i].dtype);
    if ((t[i].src == HBG_SRC_BOUNDARY_EXACT ||
         t[i].src == HBG_SRC_BOUNDARY_VIEW) &&
        t[i].ref < h.n_btensors) {
      if (es > d->balign[t[i].ref])
        d->balign[t[i].ref] = es;
      d->bmode[t[i].ref] |= t[i].mode;
    }
  }
  for (uint32_t i = 0; i < h.n_btensors; i++)
    if (!d->bmode[i])
      d->bmode[i] = bs[i].mode;
  return 0;
}

int hbg__def_from_image(const void *img, uint64_t len, hbg__def **out) {
  HBG__RETURN_IF(!out || (!img && len), HBG_E_INVAL);
  HBG__RETURN_IF(len < sizeof(hbg_def_hdr), HBG_E_IMG_TRUNCATED);
  HBG__RETURN_IF(len > HBG_IMG_MAX_BYTES, HBG_E_IMG_SIZE);
  size_t alloc = HBG__ALIGN_UP((size_t)len, (size_t)64);
  uint8_t *copy = aligned_alloc(64, alloc);
  hbg__def *d = calloc(1, sizeof *d);
  int rc = HBG_E_NOMEM;
  if (!copy || !d)
    goto err;
  memcpy(copy, img, (size_t)len);
  hbg__def_view v;
  rc = hbg__def_validate(copy, len, &v);
  if (rc)
    goto err;
  d->image = copy;
  d->size = v.hdr->total_size;
  d->hash = v.hdr->hash;
  d->heap_size = v.hdr->heap_size;
  d->n_nodes = v.hdr->n_nodes;
  d->n_btensors = v.hdr->n_btensors;
  d->n_bscalars = v.hdr->n_bscalars;
  d->bsig = v.bsig;
  rc = hbg__def_init_align(d);
  if (rc)
    goto err;
  *out = d;
  return 0;

err:
  if (d)
    free(d->balign);
  free(d->bmode);
  free(d);
  free(copy);
  return rc;
}

int hbg__def_check_boundary(const hbg__def *d, const hbg_tensor *bt,
                            uint32_t nbt, uint32_t nbs) {
  HBG__RETURN_IF(!d, HBG_E_INVAL);
  HBG__RETURN_IF(nbt != d->n_btensors || nbs != d->n_bscalars,
                 HBG_E_SIGNATURE);
  HBG__RETURN_IF(nbt && !bt, HBG_E_SIGNATURE);
  for (uint32_t i = 0; i < nbt; i++) {
    const hbg_def_bsig *s = &d->bsig[i];
    const hbg_tensor *t = &bt[i];
    if (t->dtype != s->dtype || t->ndim != s->ndim || t->mode != s->mode ||
        memcmp(t->shape, s->shape, sizeof s->shape) != 0 ||
        memcmp(t->strides, s->strides, sizeof s->strides) != 0)
      return HBG_E_SIGNATURE;
  }
  /* balign is a power of two (an element size) */
  for (uint32_t i = 0; i < nbt && d->balign; i++)
    HBG__RETURN_IF((bt[i].addr + bt[i].offset) & (d->balign[i] - 1u),
                   HBG_E_INVAL);
  return 0;
}

static uint32_t sub_body(const hbg__def *d) {
  return (uint32_t)(sizeof(hbg_sub_hdr) +
                    (uint64_t)d->n_btensors * sizeof(hbg_sub_bind) +
                    (uint64_t)d->n_bscalars * sizeof(uint64_t));
}

uint32_t hbg__sub_size(const hbg__def *d, int inline_def) {
  if (!d)
    return 0;
  return sub_body(d) + (inline_def ? d->size : 0);
}

int hbg__sub_write(void *dst, uint32_t cap, const hbg__def *d,
                   uint64_t full_key, uint32_t occurrence,
                   const hbg_tensor *bt, const uint64_t *bs, int inline_def) {
  HBG__RETURN_IF(!dst || !d, HBG_E_INVAL);
  const uint32_t body = sub_body(d);
  const uint32_t total = body + (inline_def ? d->size : 0);
  HBG__RETURN_IF(cap < total, HBG_E_LIMIT);
  uint8_t *p = dst;

  hbg_sub_hdr h;
  memset(&h, 0, sizeof h);
  h.magic = HBG_SUB_MAGIC;
  h.version = HBG_IMG_VERSION;
  h.total_size = total;
  h.flags = inline_def ? HBG_SUB_INLINE_DEF : 0;
  h.def_hash = d->hash;
  h.full_key = full_key;
  h.occurrence = occurrence;
  h.n_tensors = d->n_btensors;
  h.n_scalars = d->n_bscalars;
  h.off_tensors = sizeof h;
  h.off_scalars = (uint32_t)(sizeof h + d->n_btensors * sizeof(hbg_sub_bind));
  h.off_def = inline_def ? body : 0;
  h.def_size = d->size;
  memcpy(p, &h, sizeof h);

  /* Only where each tensor lives: the signature is the Definition's. */
  uint8_t *tp = p + h.off_tensors;
  for (uint32_t i = 0; i < d->n_btensors; i++) {
    const hbg_sub_bind b = {bt[i].addr, bt[i].offset};
    memcpy(tp + (size_t)i * sizeof b, &b, sizeof b);
  }
  if (d->n_bscalars)
    memcpy(p + h.off_scalars, bs, (size_t)d->n_bscalars * sizeof *bs);
  if (inline_def)
    memcpy(p + body, d->image, d->size);
  uint64_t hash = XXH3_64bits(p, body);
  memcpy(p + offsetof(hbg_sub_hdr, hash), &hash, sizeof hash);
  return (int)total;
}
