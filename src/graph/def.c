#include <stdio.h>
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
  free(d->order);
  hbg__def_alias_free(d->alias);
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
  d->order = malloc((size_t)(h.n_btensors ? h.n_btensors : 1) *
                    sizeof *d->order);
  HBG__RETURN_IF(!d->order, HBG_E_NOMEM);
  d->bwritten = 0;
  for (uint32_t i = 0; i < h.n_btensors; i++) {
    if (!d->bmode[i])
      d->bmode[i] = bs[i].mode;
    d->bwritten |= (d->bmode[i] & HBG_ACCESS_OUT) != 0;
    d->order[i] = i;
  }
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
  if (d) {
    free(d->balign);
    free(d->bmode);
    free(d->order);
  }
  free(d);
  free(copy);
  return rc;
}

static const char *dtype_name(uint32_t d) {
  static const char *const names[] = {"?", "f32", "f16", "bf16", "i32",
                                      "i64", "u8"};
  return d < HBG__ARRAY_LEN(names) ? names[d] : "?";
}

static const char *mode_name(uint32_t m) {
  return m == HBG_ACCESS_IN      ? "IN"
         : m == HBG_ACCESS_OUT   ? "OUT"
         : m == HBG_ACCESS_INOUT ? "INOUT"
                                 : "?";
}

/* "[a, b, c]" of the first n values (n <= HBG_MAX_DIMS). */
static const char *dims_str(char *buf, size_t cap, const uint32_t *v,
                            uint32_t n) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (uint32_t i = 0; i < n && i < HBG_MAX_DIMS && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ", %u" : "%u", v[i]);
  if (k < cap)
    snprintf(buf + k, cap - k, "]");
  return buf;
}

/* The first field of tensor i that differs from its recorded signature, in
 * hbg_last_error() (the error path only). */
static void signature_diff(uint32_t i, const hbg_tensor *t,
                           const hbg_def_bsig *s) {
  char a[64], b[64];
  if (t->dtype != s->dtype)
    hbg__error_set("boundary tensor %u: dtype %s, recorded %s", i,
                   dtype_name(t->dtype), dtype_name(s->dtype));
  else if (t->ndim != s->ndim)
    hbg__error_set("boundary tensor %u: %u dims %s, recorded %u dims %s", i,
                   t->ndim, dims_str(a, sizeof a, t->shape, t->ndim), s->ndim,
                   dims_str(b, sizeof b, s->shape, s->ndim));
  else if (t->mode != s->mode)
    hbg__error_set("boundary tensor %u: mode %s, recorded %s", i,
                   mode_name(t->mode), mode_name(s->mode));
  else if (memcmp(t->shape, s->shape, sizeof s->shape) != 0)
    hbg__error_set("boundary tensor %u: shape %s, recorded %s", i,
                   dims_str(a, sizeof a, t->shape, t->ndim),
                   dims_str(b, sizeof b, s->shape, s->ndim));
  else
    hbg__error_set("boundary tensor %u: strides %s, recorded %s", i,
                   dims_str(a, sizeof a, t->strides, t->ndim),
                   dims_str(b, sizeof b, s->strides, s->ndim));
}

int hbg__def_check_boundary(const hbg__def *d, const hbg_tensor *bt,
                            uint32_t nbt, uint32_t nbs) {
  HBG__RETURN_IF(!d, HBG_E_INVAL);
  if (nbt != d->n_btensors || nbs != d->n_bscalars) {
    hbg__error_set("%u boundary tensors and %u scalars, recorded %u and %u",
                   nbt, nbs, d->n_btensors, d->n_bscalars);
    return HBG_E_SIGNATURE;
  }
  HBG__RETURN_IF(nbt && !bt, HBG_E_SIGNATURE);
  for (uint32_t i = 0; i < nbt; i++) {
    const hbg_def_bsig *s = &d->bsig[i];
    const hbg_tensor *t = &bt[i];
    if (t->dtype != s->dtype || t->ndim != s->ndim || t->mode != s->mode ||
        memcmp(t->shape, s->shape, sizeof s->shape) != 0 ||
        memcmp(t->strides, s->strides, sizeof s->strides) != 0) {
      signature_diff(i, t, s);
      return HBG_E_SIGNATURE;
    }
  }
  /* balign is a power of two (an element size) */
  for (uint32_t i = 0; i < nbt && d->balign; i++) {
    if ((bt[i].addr + bt[i].offset) & (d->balign[i] - 1u)) {
      hbg__error_set("boundary tensor %u: element 0 at 0x%llx is not "
                     "aligned to the %u bytes of the views recorded on it",
                     i, (unsigned long long)(bt[i].addr + bt[i].offset),
                     (unsigned)d->balign[i]);
      return HBG_E_INVAL;
    }
  }
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
