#include <stddef.h>
#include <string.h>

#include "common/util.h"
#include "graph/graph.h"

/*
 * Every check below works on untrusted bytes: offsets and counts are u32, so
 * products with element sizes are computed in u64 and cannot wrap; a table
 * is dereferenced only after it was shown to lie inside [0, total_size).
 */

static int check_table(uint64_t total, uint32_t hdr_size, uint32_t off,
                       uint64_t count, uint64_t elem, uint32_t align) {
  HBG__RETURN_IF(off % align, HBG_E_IMG_ALIGN);
  if (count == 0)
    return off <= total ? 0 : HBG_E_IMG_OFFSET;
  HBG__RETURN_IF(off < hdr_size, HBG_E_IMG_COUNT);
  HBG__RETURN_IF(off > total || count * elem > total - off, HBG_E_IMG_OFFSET);
  return 0;
}

/* Common header checks; *total receives the image size. */
static int check_hdr(const void *img, uint64_t len, uint32_t hdr_size,
                     uint32_t magic, uint32_t *total) {
  HBG__RETURN_IF(!img, HBG_E_INVAL);
  HBG__RETURN_IF((uintptr_t)img % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
  HBG__RETURN_IF(len < hdr_size, HBG_E_IMG_TRUNCATED);
  const uint32_t *w = img; /* magic, version, total_size lead every header */
  if (w[0] != magic) {
    HBG__RETURN_IF(w[0] == HBG_DEF_MAGIC || w[0] == HBG_SUB_MAGIC ||
                       w[0] == HBG_WIN_MAGIC,
                   HBG_E_IMG_KIND);
    return HBG_E_IMG_MAGIC;
  }
  HBG__RETURN_IF(w[1] != HBG_IMG_VERSION, HBG_E_IMG_VERSION);
  HBG__RETURN_IF(w[2] > HBG_IMG_MAX_BYTES || w[2] < hdr_size ||
                     w[2] % HBG_IMG_ALIGN,
                 HBG_E_IMG_SIZE);
  HBG__RETURN_IF(len < w[2], HBG_E_IMG_TRUNCATED);
  HBG__RETURN_IF(len != w[2], HBG_E_IMG_SIZE);
  *total = w[2];
  return 0;
}

/* Row [ptr[i], ptr[i+1]) of a CSR table holds v? Rows are strictly
 * increasing once validated. */
static int row_has(const uint32_t *ptr, const uint32_t *ids, uint32_t i,
                   uint32_t v) {
  uint32_t a = ptr[i], b = ptr[i + 1];
  while (a < b) {
    uint32_t m = a + (b - a) / 2;
    if (ids[m] == v)
      return 1;
    if (ids[m] < v)
      a = m + 1;
    else
      b = m;
  }
  return 0;
}

static int check_csr(const uint32_t *ptr, const uint32_t *ids, uint32_t n,
                     uint32_t n_edges, int fanin) {
  HBG__RETURN_IF(ptr[0] != 0 || ptr[n] != n_edges, HBG_E_IMG_CSR);
  for (uint32_t i = 0; i < n; i++)
    HBG__RETURN_IF(ptr[i] > ptr[i + 1], HBG_E_IMG_CSR);
  for (uint32_t i = 0; i < n; i++) {
    for (uint32_t k = ptr[i]; k < ptr[i + 1]; k++) {
      uint32_t v = ids[k];
      HBG__RETURN_IF(v >= n, HBG_E_IMG_CSR);
      HBG__RETURN_IF(fanin ? v >= i : v <= i, HBG_E_IMG_CYCLE);
      HBG__RETURN_IF(k > ptr[i] && v <= ids[k - 1], HBG_E_IMG_CSR);
    }
  }
  return 0;
}

static int check_range(uint64_t off, uint64_t ext, const hbg_def_node *n) {
  return off >= n->heap_off && off - n->heap_off <= n->heap_size &&
         ext <= n->heap_size - (off - n->heap_off);
}

static int check_tensor_ref(const hbg__def_view *v, uint32_t node,
                            const hbg_def_tensor *t, uint64_t ext);

static int check_tensor(const hbg__def_view *v, uint32_t node,
                        const hbg_def_tensor *t) {
  uint64_t ext = hbg__shape_extent(t->dtype, t->ndim, t->mode, t->shape,
                                   t->strides);
  HBG__RETURN_IF(ext == 0, HBG_E_IMG_FIELD);
  HBG__TRY(check_tensor_ref(v, node, t, ext));
  /* Heap blocks and boundary element 0s are aligned to at least the
   * element size, so an offset that is not breaks element 0's alignment. */
  HBG__RETURN_IF(t->offset % hbg_dtype_size(t->dtype), HBG_E_IMG_TENSOR_ALIGN);
  return 0;
}

static int check_tensor_ref(const hbg__def_view *v, uint32_t node,
                            const hbg_def_tensor *t, uint64_t ext) {
  const hbg_def_hdr *h = v->hdr;
  switch (t->src) {
  case HBG_SRC_BOUNDARY_EXACT: {
    HBG__RETURN_IF(t->ref >= h->n_btensors, HBG_E_IMG_REF);
    const hbg_def_bsig *s = &v->bsig[t->ref];
    HBG__RETURN_IF(t->offset != 0 || t->dtype != s->dtype ||
                       t->ndim != s->ndim ||
                       memcmp(t->shape, s->shape, sizeof s->shape) ||
                       memcmp(t->strides, s->strides, sizeof s->strides),
                   HBG_E_IMG_REF);
    return 0;
  }
  case HBG_SRC_BOUNDARY_VIEW: {
    HBG__RETURN_IF(t->ref >= h->n_btensors, HBG_E_IMG_REF);
    const hbg_def_bsig *s = &v->bsig[t->ref];
    uint64_t bext = hbg__shape_extent(s->dtype, s->ndim, s->mode, s->shape,
                                      s->strides);
    HBG__RETURN_IF(t->offset > bext || ext > bext - t->offset, HBG_E_IMG_REF);
    return 0;
  }
  case HBG_SRC_INTERNAL:
    HBG__RETURN_IF(t->ref >= node, HBG_E_IMG_REF);
    HBG__RETURN_IF(!row_has(v->fanin_ptr, v->fanin, node, t->ref),
                   HBG_E_IMG_REF);
    HBG__RETURN_IF(!check_range(t->offset, ext, &v->nodes[t->ref]),
                   HBG_E_IMG_REF);
    return 0;
  case HBG_SRC_OWN_OUTPUT:
    HBG__RETURN_IF(!(t->mode & HBG_ACCESS_OUT), HBG_E_IMG_FIELD);
    HBG__RETURN_IF(t->ref != node, HBG_E_IMG_REF);
    HBG__RETURN_IF(!check_range(t->offset, ext, &v->nodes[node]),
                   HBG_E_IMG_REF);
    return 0;
  default:
    return HBG_E_IMG_FIELD;
  }
}

static uint64_t table_end(uint32_t off, uint64_t count, uint64_t elem) {
  return count ? off + count * elem : 0;
}

/* The pad is the image's tail and overlaps no table (all tables already
 * shown to lie inside the image). */
static int check_pad(const hbg_def_hdr *h, uint32_t total) {
  if (h->pad_size == 0)
    return h->off_pad ? HBG_E_IMG_FIELD : 0;
  HBG__RETURN_IF(h->off_pad % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
  HBG__RETURN_IF(h->pad_size > HBG_IMG_MAX_DEF_PAD, HBG_E_IMG_SIZE);
  HBG__RETURN_IF(h->off_pad > total || h->pad_size != total - h->off_pad,
                 HBG_E_IMG_OFFSET);
  const uint64_t N = h->n_nodes;
  const uint64_t ends[] = {
      sizeof *h,
      table_end(h->off_nodes, N, sizeof(hbg_def_node)),
      table_end(h->off_fanin_ptr, N + 1, 4),
      table_end(h->off_fanin, h->n_edges, 4),
      table_end(h->off_fanout_ptr, N + 1, 4),
      table_end(h->off_fanout, h->n_edges, 4),
      table_end(h->off_roots, h->n_roots, 4),
      table_end(h->off_tensors, h->n_tensors, sizeof(hbg_def_tensor)),
      table_end(h->off_scalars, h->n_scalars, sizeof(hbg_def_scalar)),
      table_end(h->off_bsig, h->n_btensors, sizeof(hbg_def_bsig))};
  for (size_t i = 0; i < HBG__ARRAY_LEN(ends); i++)
    HBG__RETURN_IF(h->off_pad < ends[i], HBG_E_IMG_OFFSET);
  return 0;
}

static int def_check(const void *img, uint64_t len, int with_hash,
                     hbg__def_view *out) {
  uint32_t total;
  HBG__TRY(check_hdr(img, len, sizeof(hbg_def_hdr), HBG_DEF_MAGIC, &total));
  const uint8_t *p = img;
  const hbg_def_hdr *h = img;
  HBG__RETURN_IF(h->flags, HBG_E_IMG_FIELD);

  const uint64_t N = h->n_nodes;
  HBG__RETURN_IF(N == 0 || N > HBG_IMG_MAX_NODES, HBG_E_IMG_COUNT);
  HBG__RETURN_IF(h->n_btensors > HBG_IMG_MAX_BOUNDARY ||
                     h->n_bscalars > HBG_IMG_MAX_BOUNDARY,
                 HBG_E_IMG_COUNT);
  HBG__RETURN_IF(h->n_roots > N || h->n_edges > N * (N - 1) / 2,
                 HBG_E_IMG_COUNT);
  HBG__RETURN_IF(h->n_tensors > N * HBG_IMG_MAX_ARGS_PER_NODE ||
                     h->n_scalars > N * HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_E_IMG_COUNT);

  const uint32_t hs = sizeof *h;
  HBG__TRY(check_table(total, hs, h->off_nodes, N, sizeof(hbg_def_node), 8));
  HBG__TRY(check_table(total, hs, h->off_fanin_ptr, N + 1, 4, 8));
  HBG__TRY(check_table(total, hs, h->off_fanin, h->n_edges, 4, 8));
  HBG__TRY(check_table(total, hs, h->off_fanout_ptr, N + 1, 4, 8));
  HBG__TRY(check_table(total, hs, h->off_fanout, h->n_edges, 4, 8));
  HBG__TRY(check_table(total, hs, h->off_roots, h->n_roots, 4, 8));
  HBG__TRY(check_table(total, hs, h->off_tensors, h->n_tensors,
                       sizeof(hbg_def_tensor), 8));
  HBG__TRY(check_table(total, hs, h->off_scalars, h->n_scalars,
                       sizeof(hbg_def_scalar), 8));
  HBG__TRY(check_table(total, hs, h->off_bsig, h->n_btensors,
                       sizeof(hbg_def_bsig), 8));

  HBG__TRY(check_pad(h, total));

  hbg__def_view v;
  v.base = p;
  v.hdr = h;
  v.nodes = (const hbg_def_node *)(p + h->off_nodes);
  v.fanin_ptr = (const uint32_t *)(p + h->off_fanin_ptr);
  v.fanin = (const uint32_t *)(p + h->off_fanin);
  v.fanout_ptr = (const uint32_t *)(p + h->off_fanout_ptr);
  v.fanout = (const uint32_t *)(p + h->off_fanout);
  v.roots = (const uint32_t *)(p + h->off_roots);
  v.tensors = (const hbg_def_tensor *)(p + h->off_tensors);
  v.scalars = (const hbg_def_scalar *)(p + h->off_scalars);
  v.bsig = (const hbg_def_bsig *)(p + h->off_bsig);
  const uint32_t n = (uint32_t)N;

  for (uint32_t i = 0; i < h->n_btensors; i++) {
    const hbg_def_bsig *s = &v.bsig[i];
    HBG__RETURN_IF(s->reserved || s->reserved2 ||
                       !hbg__shape_extent(s->dtype, s->ndim, s->mode, s->shape,
                                          s->strides),
                   HBG_E_IMG_FIELD);
  }

  HBG__TRY(check_csr(v.fanin_ptr, v.fanin, n, h->n_edges, 1));
  HBG__TRY(check_csr(v.fanout_ptr, v.fanout, n, h->n_edges, 0));
  /* Same edge count, no duplicates on either side, every fanin edge present
   * in fanout: the two tables describe the same edge set. */
  for (uint32_t c = 0; c < n; c++)
    for (uint32_t k = v.fanin_ptr[c]; k < v.fanin_ptr[c + 1]; k++)
      HBG__RETURN_IF(!row_has(v.fanout_ptr, v.fanout, v.fanin[k], c),
                     HBG_E_IMG_CSR);

  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (v.fanin_ptr[i] != v.fanin_ptr[i + 1])
      continue;
    HBG__RETURN_IF(k >= h->n_roots || v.roots[k] != i, HBG_E_IMG_ROOTS);
    k++;
  }
  HBG__RETURN_IF(k != h->n_roots, HBG_E_IMG_ROOTS);

  uint64_t tsum = 0, ssum = 0;
  for (uint32_t i = 0; i < n; i++) {
    const hbg_def_node *nd = &v.nodes[i];
    HBG__RETURN_IF(nd->kernel >= HBG_KERNEL__COUNT || nd->reserved,
                   HBG_E_IMG_FIELD);
    HBG__RETURN_IF(nd->n_tensors > HBG_IMG_MAX_ARGS_PER_NODE ||
                       nd->n_scalars > HBG_IMG_MAX_SCALARS_PER_NODE,
                   HBG_E_IMG_COUNT);
    HBG__RETURN_IF(nd->first_tensor != tsum || nd->first_scalar != ssum,
                   HBG_E_IMG_REF);
    tsum += nd->n_tensors;
    ssum += nd->n_scalars;
    HBG__RETURN_IF(tsum > h->n_tensors || ssum > h->n_scalars, HBG_E_IMG_REF);
    HBG__RETURN_IF(nd->heap_off % HBG__HEAP_ALIGN, HBG_E_IMG_ALIGN);
    HBG__RETURN_IF(nd->heap_off > h->heap_size ||
                       nd->heap_size > h->heap_size - nd->heap_off,
                   HBG_E_IMG_REF);
    for (uint32_t j = 0; j < nd->n_tensors; j++)
      HBG__TRY(check_tensor(&v, i, &v.tensors[nd->first_tensor + j]));
    for (uint32_t j = 0; j < nd->n_scalars; j++) {
      const hbg_def_scalar *s = &v.scalars[nd->first_scalar + j];
      if (s->kind == HBG_SCALAR_STATIC)
        HBG__RETURN_IF(s->index != 0, HBG_E_IMG_FIELD);
      else if (s->kind == HBG_SCALAR_BOUNDARY)
        HBG__RETURN_IF(s->index >= h->n_bscalars, HBG_E_IMG_REF);
      else
        return HBG_E_IMG_FIELD;
    }
  }
  HBG__RETURN_IF(tsum != h->n_tensors || ssum != h->n_scalars, HBG_E_IMG_REF);

  if (with_hash)
    HBG__RETURN_IF(hbg__hash_skip(p, total, offsetof(hbg_def_hdr, hash)) !=
                       h->hash,
                   HBG_E_IMG_HASH);
  if (out)
    *out = v;
  return 0;
}

int hbg__def_validate(const void *img, uint64_t len, hbg__def_view *out) {
  return def_check(img, len, 1, out);
}

int hbg__def_validate_nohash(const void *img, uint64_t len,
                             hbg__def_view *out) {
  return def_check(img, len, 0, out);
}

static int check_sub_tensor(const hbg_sub_tensor *t) {
  HBG__RETURN_IF(t->reserved || t->reserved2 ||
                     !hbg__shape_extent(t->dtype, t->ndim, t->mode, t->shape,
                                        t->strides),
                 HBG_E_IMG_FIELD);
  HBG__RETURN_IF((t->addr + t->offset) % hbg_dtype_size(t->dtype),
                 HBG_E_IMG_TENSOR_ALIGN);
  return 0;
}

int hbg__sub_validate(const void *img, uint64_t len, hbg__sub_view *out) {
  uint32_t total;
  HBG__TRY(check_hdr(img, len, sizeof(hbg_sub_hdr), HBG_SUB_MAGIC, &total));
  const uint8_t *p = img;
  const hbg_sub_hdr *h = img;
  HBG__RETURN_IF((h->flags & ~(uint32_t)HBG_SUB_INLINE_DEF) || h->reserved,
                 HBG_E_IMG_FIELD);
  HBG__RETURN_IF(h->n_tensors > HBG_IMG_MAX_BOUNDARY ||
                     h->n_scalars > HBG_IMG_MAX_BOUNDARY,
                 HBG_E_IMG_COUNT);
  const uint32_t hs = sizeof *h;
  HBG__TRY(check_table(total, hs, h->off_tensors, h->n_tensors,
                       sizeof(hbg_sub_bind), 8));
  HBG__TRY(check_table(total, hs, h->off_scalars, h->n_scalars, 8, 8));
  HBG__RETURN_IF(h->def_size == 0, HBG_E_IMG_FIELD);

  uint64_t hashed = total;
  const uint8_t *inl = NULL;
  if (h->flags & HBG_SUB_INLINE_DEF) {
    HBG__RETURN_IF(h->off_def % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
    HBG__RETURN_IF(h->off_def < hs, HBG_E_IMG_COUNT);
    HBG__RETURN_IF(h->off_def > total || h->def_size > total - h->off_def,
                   HBG_E_IMG_OFFSET);
    HBG__RETURN_IF(h->off_def + h->def_size != total, HBG_E_IMG_SIZE);
    /* The hashed part must not reach into the Definition copy. */
    HBG__RETURN_IF((uint64_t)h->off_tensors +
                           (uint64_t)h->n_tensors * sizeof(hbg_sub_bind) >
                       h->off_def ||
                       (uint64_t)h->off_scalars + (uint64_t)h->n_scalars * 8 >
                           h->off_def,
                   HBG_E_IMG_OFFSET);
    hashed = h->off_def;
    inl = p + h->off_def;
  } else {
    HBG__RETURN_IF(h->off_def != 0, HBG_E_IMG_FIELD);
  }

  /* The rest of each boundary tensor is the Definition's signature. */
  const hbg_sub_bind *ts = (const hbg_sub_bind *)(p + h->off_tensors);
  for (uint32_t i = 0; i < h->n_tensors; i++)
    HBG__RETURN_IF(ts[i].addr == 0, HBG_E_IMG_FIELD);
  HBG__RETURN_IF(hbg__hash_skip(p, hashed, offsetof(hbg_sub_hdr, hash)) !=
                     h->hash,
                 HBG_E_IMG_HASH);
  if (out) {
    out->base = p;
    out->hdr = h;
    out->tensors = ts;
    out->scalars = (const uint64_t *)(p + h->off_scalars);
    out->inline_def = inl;
  }
  return 0;
}

int hbg__sub_check_def(const hbg__sub_view *s, const hbg__def_view *d) {
  HBG__RETURN_IF(!s || !d || !s->hdr || !d->hdr, HBG_E_INVAL);
  const hbg_sub_hdr *sh = s->hdr;
  const hbg_def_hdr *dh = d->hdr;
  /* The hash names the Definition, and with it every boundary signature. */
  HBG__RETURN_IF(sh->def_hash != dh->hash || sh->def_size != dh->total_size ||
                     sh->n_tensors != dh->n_btensors ||
                     sh->n_scalars != dh->n_bscalars,
                 HBG_E_IMG_DEF);
  return hbg__sub_check_align(s, d, NULL);
}

int hbg__sub_check_align(const hbg__sub_view *s, const hbg__def_view *d,
                         uint32_t *bad) {
  const hbg_sub_hdr *sh = s->hdr;
  const hbg_def_hdr *dh = d->hdr;
  /* Element 0 of every boundary tensor, and of every view of one, aligned
   * to its dtype (a view's offset is relative to its tensor's element 0). */
  const hbg_sub_bind *sb = s->tensors;
  for (uint32_t i = 0; i < dh->n_tensors; i++) {
    const hbg_def_tensor *t = &d->tensors[i];
    if ((t->src != HBG_SRC_BOUNDARY_EXACT &&
         t->src != HBG_SRC_BOUNDARY_VIEW) ||
        t->ref >= sh->n_tensors)
      continue;
    uint64_t es = hbg_dtype_size(t->dtype);
    if (es && (sb[t->ref].addr + sb[t->ref].offset + t->offset) % es) {
      if (bad)
        *bad = i;
      return HBG_E_IMG_TENSOR_ALIGN;
    }
  }
  for (uint32_t i = 0; i < dh->n_btensors && i < sh->n_tensors; i++) {
    uint64_t es = hbg_dtype_size(d->bsig[i].dtype);
    if (es && (sb[i].addr + sb[i].offset) % es) {
      if (bad)
        *bad = UINT32_MAX;
      return HBG_E_IMG_TENSOR_ALIGN;
    }
  }
  return 0;
}

static int check_sub_table(uint32_t size, uint32_t off, uint64_t count,
                           uint64_t elem, uint32_t align) {
  if (count == 0)
    return 0;
  HBG__RETURN_IF(off % align, HBG_E_IMG_ALIGN);
  HBG__RETURN_IF(off < sizeof(hbg_win_task) || off > size ||
                     count * elem > size - off,
                 HBG_E_IMG_OFFSET);
  return 0;
}

static int check_win_task(const uint8_t *e, uint32_t i, uint32_t n_tasks) {
  const hbg_win_task *t = (const hbg_win_task *)e;
  HBG__RETURN_IF(t->kind != HBG_WIN_TASK && t->kind != HBG_WIN_GRAPH,
                 HBG_E_IMG_FIELD);
  HBG__RETURN_IF(t->reserved, HBG_E_IMG_FIELD);
  HBG__RETURN_IF(t->n_tensors > HBG_IMG_MAX_ARGS_PER_NODE ||
                     t->n_scalars > HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_E_IMG_COUNT);
  HBG__TRY(check_sub_table(t->size, t->off_tensors, t->n_tensors,
                           sizeof(hbg_sub_tensor), 8));
  HBG__TRY(check_sub_table(t->size, t->off_scalars, t->n_scalars, 8, 8));
  HBG__TRY(check_sub_table(t->size, t->off_deps, t->n_deps, 4, 4));
  if (t->kind == HBG_WIN_GRAPH) {
    HBG__RETURN_IF(t->kernel != 0 || t->n_tensors || t->n_scalars ||
                       t->sub_size == 0 || t->def_size == 0,
                   HBG_E_IMG_FIELD);
  } else {
    HBG__RETURN_IF(t->kernel >= HBG_KERNEL__COUNT, HBG_E_IMG_FIELD);
    const hbg_sub_tensor *ts = (const hbg_sub_tensor *)(e + t->off_tensors);
    for (uint32_t j = 0; j < t->n_tensors; j++)
      HBG__TRY(check_sub_tensor(&ts[j]));
  }
  const uint32_t *deps = (const uint32_t *)(e + t->off_deps);
  for (uint32_t j = 0; j < t->n_deps; j++) {
    HBG__RETURN_IF(deps[j] >= n_tasks, HBG_E_IMG_REF);
    HBG__RETURN_IF(deps[j] >= i, HBG_E_IMG_CYCLE);
  }
  return 0;
}

int hbg__win_validate(const void *img, uint64_t len, hbg__win_view *out) {
  uint32_t total;
  HBG__TRY(check_hdr(img, len, sizeof(hbg_win_hdr), HBG_WIN_MAGIC, &total));
  const uint8_t *p = img;
  const hbg_win_hdr *h = img;
  for (size_t i = 0; i < HBG__ARRAY_LEN(h->reserved); i++)
    HBG__RETURN_IF(h->reserved[i], HBG_E_IMG_FIELD);
  const uint32_t hs = sizeof *h;
  HBG__RETURN_IF(h->n_tasks > (total - hs) / (sizeof(hbg_win_task) + 4),
                 HBG_E_IMG_COUNT);
  HBG__TRY(check_table(total, hs, h->off_index, h->n_tasks, 4, 8));
  const uint32_t *index = (const uint32_t *)(p + h->off_index);

  uint64_t prev_end = hs;
  for (uint32_t i = 0; i < h->n_tasks; i++) {
    uint32_t off = index[i];
    HBG__RETURN_IF(off % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
    HBG__RETURN_IF(off < prev_end || off > total ||
                       total - off < sizeof(hbg_win_task),
                   HBG_E_IMG_OFFSET);
    const hbg_win_task *t = (const hbg_win_task *)(p + off);
    HBG__RETURN_IF(t->size < sizeof *t, HBG_E_IMG_SIZE);
    HBG__RETURN_IF(t->size % HBG_IMG_ALIGN, HBG_E_IMG_ALIGN);
    HBG__RETURN_IF(t->size > total - off, HBG_E_IMG_OFFSET);
    HBG__TRY(check_win_task(p + off, i, h->n_tasks));
    prev_end = (uint64_t)off + t->size;
  }
  if (out) {
    out->base = p;
    out->hdr = h;
    out->index = index;
  }
  return 0;
}

const hbg_win_task *hbg__win_task(const hbg__win_view *w, uint32_t i) {
  if (!w || !w->hdr || i >= w->hdr->n_tasks)
    return NULL;
  return (const hbg_win_task *)(w->base + w->index[i]);
}
