#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/util.h"
#include "kernels/kernels.h"
#include "graph/graph.h"

typedef struct rec_node {
  uint32_t kernel;
  uint32_t first_tensor, n_tensors;
  uint32_t first_scalar, n_scalars;
  uint32_t first_fanin, n_fanin;
  uint64_t heap_off, heap_size;
} rec_node;

typedef struct rec_access {
  uint64_t lo, hi;
  uint32_t node;
  uint32_t write;
} rec_access;

/* Accesses to one buffer (one boundary device buffer, or the heap block)
 * that later tasks must be ordered after. */
typedef struct rec_buf {
  rec_access *acc;
  uint32_t n, cap;
} rec_buf;

struct hbg_recorder {
  const hbg_tensor *bt;
  const uint64_t *bs;
  uint32_t nbt, nbs;
  uint32_t *buf_of; /* boundary index -> buffer id; heap is id n_bufs */
  rec_buf *bufs;
  uint32_t n_bufs;

  rec_node *nodes;
  uint32_t n_nodes, cap_nodes;
  hbg_def_tensor *tensors;
  uint32_t n_tensors, cap_tensors;
  hbg_def_scalar *scalars;
  uint32_t n_scalars, cap_scalars;
  uint32_t *fanin;
  uint32_t n_fanin, cap_fanin;
  uint32_t *prod; /* nodes with own outputs, ascending heap_off */
  uint32_t n_prod, cap_prod;
  uint32_t *scratch;
  uint32_t cap_scratch;
  uint64_t heap_top;
  int err; /* first failed hbg_record_task: the recording is never built */
  int check_kernels; /* hbg__rec_check_kernels */
  int (*uk_hook)(void *ctx, const hbg_task *t, const char *who);
  void *uk_ctx; /* hbg__rec_kernel_hook */
  char err_msg[256]; /* hbg_last_error() of the first failure */
  uint32_t pad_to; /* hbg_record_pad: the Definition's minimum size */
  uint64_t kscr;   /* the most kernel scratch (floats) one node needs */
};

typedef struct arg_access {
  uint32_t buf;
  uint32_t write;
  uint64_t lo, hi;
} arg_access;

/* Heap offsets must stay below the tag bits. */
#define HEAP_LIMIT (~HBG__HEAP_TAG_MASK)

uint64_t hbg__shape_extent(uint32_t dtype, uint32_t ndim, uint32_t mode,
                           const uint32_t *shape, const uint32_t *strides) {
  return hbg_img_extent(dtype, ndim, mode, shape, strides);
}

static uint64_t tensor_extent(const hbg_tensor *t) {
  uint64_t ext = hbg__shape_extent(t->dtype, t->ndim, t->mode, t->shape,
                                   t->strides);
  uint64_t end;
  if (ext == 0 || hbg__add_u64(t->offset, ext, &end))
    return 0;
  return ext;
}


static void rec_free(hbg_recorder *r) {
  if (!r)
    return;
  if (r->bufs)
    for (uint32_t i = 0; i <= r->n_bufs; i++)
      free(r->bufs[i].acc);
  free(r->bufs);
  free(r->buf_of);
  free(r->nodes);
  free(r->tensors);
  free(r->scalars);
  free(r->fanin);
  free(r->prod);
  free(r->scratch);
  free(r);
}

int hbg__rec_begin(const hbg_tensor *bt, uint32_t nbt, const uint64_t *bs,
                   uint32_t nbs, hbg_recorder **out) {
  HBG__RETURN_IF(!out, HBG_E_INVAL);
  HBG__RETURN_IF(nbt > HBG_IMG_MAX_BOUNDARY || nbs > HBG_IMG_MAX_BOUNDARY,
                 HBG_E_LIMIT);
  HBG__RETURN_IF((nbt && !bt) || (nbs && !bs), HBG_E_INVAL);
  for (uint32_t i = 0; i < nbt; i++) {
    HBG__RETURN_IF(tensor_extent(&bt[i]) == 0, HBG_E_INVAL);
    HBG__RETURN_IF((bt[i].addr & HBG__HEAP_TAG_MASK) == HBG__HEAP_TAG,
                   HBG_E_INVAL);
    HBG__RETURN_IF((bt[i].addr + bt[i].offset) % hbg_dtype_size(bt[i].dtype),
                   HBG_E_INVAL);
  }

  hbg_recorder *r = calloc(1, sizeof *r);
  if (!r)
    return HBG_E_NOMEM;
  r->bt = bt;
  r->nbt = nbt;
  r->bs = bs;
  r->nbs = nbs;
  r->buf_of = calloc(nbt ? nbt : 1, sizeof *r->buf_of);
  if (!r->buf_of)
    goto err_nomem;
  for (uint32_t i = 0; i < nbt; i++) {
    uint32_t j = 0;
    while (j < i && bt[j].addr != bt[i].addr)
      j++;
    r->buf_of[i] = j < i ? r->buf_of[j] : r->n_bufs++;
  }
  r->bufs = calloc((size_t)r->n_bufs + 1, sizeof *r->bufs);
  if (!r->bufs)
    goto err_nomem;
  *out = r;
  return 0;

err_nomem:
  rec_free(r);
  return HBG_E_NOMEM;
}

void hbg__rec_abort(hbg_recorder *r) { rec_free(r); }

void hbg__rec_check_kernels(hbg_recorder *r) { r->check_kernels = 1; }

void hbg__rec_kernel_hook(hbg_recorder *r,
                          int (*fn)(void *ctx, const hbg_task *t,
                                    const char *who),
                          void *ctx) {
  r->uk_hook = fn;
  r->uk_ctx = ctx;
}

const hbg_tensor *hbg_record_tensors(hbg_recorder *rec, uint32_t *n) {
  if (n)
    *n = rec ? rec->nbt : 0;
  return rec ? rec->bt : NULL;
}

int hbg_record_pad(hbg_recorder *rec, uint32_t def_size) {
  hbg__error_clear();
  HBG__RETURN_IF(!rec, HBG_E_INVAL);
  if (def_size > HBG_IMG_MAX_DEF_PAD) {
    hbg__error_set("hbg_record_pad: %u bytes; a Definition is padded to at "
                   "most %u", def_size, HBG_IMG_MAX_DEF_PAD);
    return HBG_E_LIMIT;
  }
  rec->pad_to = def_size;
  return 0;
}

const uint64_t *hbg_record_scalars(hbg_recorder *rec, uint32_t *n) {
  if (n)
    *n = rec ? rec->nbs : 0;
  return rec ? rec->bs : NULL;
}

static int same_layout(const hbg_tensor *a, const hbg_tensor *b) {
  return a->addr == b->addr && a->offset == b->offset &&
         a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
         memcmp(a->strides, b->strides, sizeof a->strides) == 0;
}

/* Whether the bytes [off, off + ext) of b's buffer (off at or past b's
 * element 0, inside b's extent) are elements of b: always for a dense b;
 * for a strided one (a row of a cache, say) only when they lie inside one
 * contiguous innermost run of it. A view in a strided tensor's holes is
 * not part of it, and must not follow it when a replay moves it. */
static int holds_range(const hbg_tensor *b, uint64_t off, uint64_t ext) {
  const uint32_t nd = b->ndim;
  const uint64_t es = hbg_dtype_size(b->dtype);
  uint64_t dense = 1;
  int is_dense = 1;
  for (uint32_t i = nd; i-- > 0;) {
    if (b->shape[i] != 1 && b->strides[i] != dense)
      is_dense = 0;
    dense *= b->shape[i];
  }
  if (is_dense)
    return 1;
  if (b->strides[nd - 1] != 1 && b->shape[nd - 1] != 1)
    return 0;
  /* the run holding element `rel`: peel the outer dims off, largest
   * stride first (a layout whose runs do not nest is never held) */
  uint64_t rel = (off - b->offset) / es, inner = (off - b->offset) % es;
  uint8_t done[HBG_MAX_DIMS] = {0};
  for (uint32_t k = 0; k + 1 < nd; k++) {
    uint32_t d = UINT32_MAX;
    for (uint32_t i = 0; i + 1 < nd; i++)
      if (!done[i] && (d == UINT32_MAX || b->strides[i] > b->strides[d]))
        d = i;
    done[d] = 1;
    if (!b->strides[d])
      continue;
    uint64_t idx = HBG__MIN(rel / b->strides[d], (uint64_t)b->shape[d] - 1);
    rel -= idx * b->strides[d];
  }
  const uint64_t run = b->strides[nd - 1] == 1 ? b->shape[nd - 1] : 1;
  return rel < run && rel * es + inner + ext <= run * es;
}

/* The producer whose own-output range holds [lo, hi), or UINT32_MAX. */
static uint32_t find_producer(const hbg_recorder *r, uint64_t lo, uint64_t hi) {
  uint32_t a = 0, b = r->n_prod;
  while (a < b) {
    uint32_t m = a + (b - a) / 2;
    if (r->nodes[r->prod[m]].heap_off <= lo)
      a = m + 1;
    else
      b = m;
  }
  if (a == 0)
    return UINT32_MAX;
  const rec_node *n = &r->nodes[r->prod[a - 1]];
  return hi <= n->heap_off + n->heap_size ? r->prod[a - 1] : UINT32_MAX;
}

static int push_scratch(hbg_recorder *r, uint32_t *n, uint32_t v) {
  int rc = HBG__RESERVE(r->scratch, r->cap_scratch, (uint64_t)*n + 1);
  if (rc)
    return rc;
  r->scratch[(*n)++] = v;
  return 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Classify t->args[i] into *dt; fill *acc with the byte range it touches. */
#define CLASSIFY_FAIL(cond, code, msg)                                         \
  do {                                                                         \
    if (cond) {                                                                \
      *why = msg;                                                              \
      return code;                                                             \
    }                                                                          \
  } while (0)

static int classify(const hbg_recorder *r, uint32_t self, const hbg_tensor *a,
                    uint64_t *heap_cur, hbg_def_tensor *dt, arg_access *acc,
                    uint32_t *producer, const char **why) {
  uint64_t ext = tensor_extent(a);
  CLASSIFY_FAIL(ext == 0, HBG_E_INVAL, "bad dtype, ndim, mode, shape or strides");
  const uint64_t es = hbg_dtype_size(a->dtype);
  memset(dt, 0, sizeof *dt);
  dt->dtype = a->dtype;
  dt->ndim = a->ndim;
  dt->mode = a->mode;
  memcpy(dt->shape, a->shape, sizeof dt->shape);
  memcpy(dt->strides, a->strides, sizeof dt->strides);
  acc->write = (a->mode & HBG_ACCESS_OUT) != 0;
  *producer = UINT32_MAX;

  if ((a->mode & HBG_ACCESS_OUT) && a->addr == 0) {
    CLASSIFY_FAIL(a->offset != 0, HBG_E_INVAL, "a new inner output (addr 0) must have offset 0");
    uint64_t off = HBG__ALIGN_UP(*heap_cur, (uint64_t)HBG__HEAP_ALIGN);
    CLASSIFY_FAIL(off >= HEAP_LIMIT || ext > HEAP_LIMIT - off, HBG_E_LIMIT, "the graph heap is full");
    *heap_cur = off + ext;
    dt->src = HBG_SRC_OWN_OUTPUT;
    dt->ref = self;
    dt->offset = off;
    acc->buf = r->n_bufs;
    acc->lo = off;
    acc->hi = off + ext;
    return 0;
  }
  if ((a->addr & HBG__HEAP_TAG_MASK) == HBG__HEAP_TAG) {
    uint64_t lo;
    HBG__RETURN_IF(hbg__add_u64(a->addr & ~HBG__HEAP_TAG_MASK, a->offset, &lo),
                   HBG_E_INVAL);
    CLASSIFY_FAIL(lo > UINT64_MAX - ext, HBG_E_INVAL, "offset overflows");
    CLASSIFY_FAIL(lo % es, HBG_E_INVAL, "element 0 is not aligned to its dtype");
    uint32_t p = find_producer(r, lo, lo + ext);
    CLASSIFY_FAIL(p == UINT32_MAX, HBG_E_INVAL, "not inside one earlier inner output");
    dt->src = HBG_SRC_INTERNAL;
    dt->ref = p;
    dt->offset = lo;
    acc->buf = r->n_bufs;
    acc->lo = lo;
    acc->hi = lo + ext;
    *producer = p;
    return 0;
  }
  CLASSIFY_FAIL((a->addr + a->offset) % es, HBG_E_INVAL, "element 0 is not aligned to its dtype");
  /* A write goes only to a boundary tensor the submission lets the graph
   * write (mode OUT or INOUT); the validators reject anything else. */
  int read_only = 0;
  for (uint32_t i = 0; i < r->nbt; i++) {
    if (!same_layout(a, &r->bt[i]))
      continue;
    if (acc->write && !(r->bt[i].mode & HBG_ACCESS_OUT)) {
      read_only = 1;
      continue;
    }
    dt->src = HBG_SRC_BOUNDARY_EXACT;
    dt->ref = i;
    acc->buf = r->buf_of[i];
    acc->lo = a->offset;
    acc->hi = a->offset + ext;
    return 0;
  }
  /* A view belongs to the smallest boundary tensor that contains it (the
   * first of equal ones): with a cache and a row of it both at the
   * boundary, a slice of the row follows the row when a replay moves it.
   * A strided tensor contains only its elements, not the holes between
   * them (holds_range): a slice of the cache that a strided row's extent
   * spans stays with the cache. */
  uint32_t best = UINT32_MAX;
  uint64_t best_ext = 0;
  for (uint32_t i = 0; i < r->nbt; i++) {
    const hbg_tensor *b = &r->bt[i];
    if (b->addr != a->addr || a->offset < b->offset)
      continue;
    uint64_t bext = tensor_extent(b);
    if (a->offset + ext > b->offset + bext ||
        !holds_range(b, a->offset, ext))
      continue;
    if (acc->write && !(b->mode & HBG_ACCESS_OUT)) {
      read_only = 1;
      continue;
    }
    if (best == UINT32_MAX || bext < best_ext) {
      best = i;
      best_ext = bext;
    }
  }
  CLASSIFY_FAIL(best == UINT32_MAX && read_only, HBG_E_INVAL, "writes a boundary tensor the submission marks input-only (HBG_ACCESS_IN)");
  CLASSIFY_FAIL(best == UINT32_MAX, HBG_E_INVAL, "neither an inner output nor inside a boundary tensor");
  /* Relative to element 0 of its tensor, so that it stays aligned in every
   * replay whose tensor is (the Definition asks for the largest element
   * size of its views there). */
  CLASSIFY_FAIL((a->offset - r->bt[best].offset) % es, HBG_E_INVAL, "a view's offset from its boundary tensor's element 0 must be a multiple of its element size");
  dt->src = HBG_SRC_BOUNDARY_VIEW;
  dt->ref = best;
  dt->offset = a->offset - r->bt[best].offset;
  acc->buf = r->buf_of[best];
  acc->lo = a->offset;
  acc->hi = a->offset + ext;
  return 0;
}
#undef CLASSIFY_FAIL

static void add_access(rec_buf *b, const arg_access *a, uint32_t node) {
  if (a->write) {
    /* Anything this write covers is ordered before it, and whatever later
     * overlaps the covered range overlaps this write too: drop it. */
    uint32_t k = 0;
    for (uint32_t j = 0; j < b->n; j++)
      if (!(a->lo <= b->acc[j].lo && b->acc[j].hi <= a->hi))
        b->acc[k++] = b->acc[j];
    b->n = k;
  }
  rec_access *e = &b->acc[b->n++];
  e->lo = a->lo;
  e->hi = a->hi;
  e->node = node;
  e->write = a->write;
}

static int record_task(hbg_recorder *rec, hbg_task *t, hbg_task_id *out) {
  HBG__RETURN_IF(!t, HBG_E_INVAL);
  HBG__RETURN_IF(!hbg_img_kernel_valid(t->kernel), HBG_E_KERNEL);
  HBG__RETURN_IF(t->n_args > HBG_IMG_MAX_ARGS_PER_NODE ||
                     t->n_scalars > HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_E_INVAL);
  HBG__RETURN_IF((t->n_args && !t->args) || (t->n_scalars && !t->scalars) ||
                     (t->n_deps && !t->deps),
                 HBG_E_INVAL);
  HBG__RETURN_IF(rec->n_nodes >= HBG_IMG_MAX_NODES, HBG_E_LIMIT);
  if (rec->check_kernels) {
    char who[48]; /* recording is rare: a name for the message is cheap */
    snprintf(who, sizeof who, "hbg_record_task (inner task %u)", rec->n_nodes);
    HBG__TRY(hbg__task_kernel_check(t, who));
    if (rec->uk_hook && hbg_img_kernel_is_user(t->kernel))
      HBG__TRY(rec->uk_hook(rec->uk_ctx, t, who));
  }

  hbg_recorder *r = rec;
  const uint32_t self = r->n_nodes;
  int rc;
  if ((rc = HBG__RESERVE(r->nodes, r->cap_nodes, (uint64_t)self + 1)) ||
      (rc = HBG__RESERVE(r->tensors, r->cap_tensors,
                    (uint64_t)r->n_tensors + t->n_args)) ||
      (rc = HBG__RESERVE(r->scalars, r->cap_scalars,
                    (uint64_t)r->n_scalars + t->n_scalars)))
    return rc;

  arg_access acc[HBG_IMG_MAX_ARGS_PER_NODE];
  uint32_t n_cand = 0;
  uint64_t heap_cur = r->heap_top, first_out = UINT64_MAX;
  for (uint32_t i = 0; i < t->n_args; i++) {
    uint32_t p;
    hbg_def_tensor *dt = &r->tensors[r->n_tensors + i];
    const char *why = NULL;
    rc = classify(r, self, &t->args[i], &heap_cur, dt, &acc[i], &p, &why);
    if (rc < 0) {
      hbg__error_set("hbg_record_task (inner task %u): argument %u: %s", self,
                     i, why ? why : hbg_strerror(rc));
      return rc;
    }
    if (dt->src == HBG_SRC_OWN_OUTPUT && first_out == UINT64_MAX)
      first_out = dt->offset;
    if (p != UINT32_MAX)
      HBG__TRY(push_scratch(r, &n_cand, p));
  }
  /* Heap outputs carry tagged addresses, boundary tensors device ones:
   * the two never meet, so the overlap rule can compare raw bytes. */
  if (r->check_kernels)
    HBG__TRY(hbg__task_overlap_check(t, NULL, "hbg_record_task",
                                     "inner task", self));
  for (uint32_t i = 0; i < t->n_scalars; i++) {
    const hbg_scalar *s = &t->scalars[i];
    hbg_def_scalar *ds = &r->scalars[r->n_scalars + i];
    memset(ds, 0, sizeof *ds);
    if (s->kind == HBG_SCALAR_STATIC) {
      ds->kind = HBG_SCALAR_STATIC;
      ds->value = s->value;
    } else {
      if (s->kind != HBG_SCALAR_BOUNDARY || s->index >= r->nbs) {
        if (s->kind != HBG_SCALAR_BOUNDARY)
          hbg__error_set("hbg_record_task (inner task %u): scalar %u: kind "
                         "%u is neither static nor boundary",
                         self, i, s->kind);
        else
          hbg__error_set("hbg_record_task (inner task %u): scalar %u: "
                         "boundary scalar %u, but the graph has %u",
                         self, i, s->index, r->nbs);
        return HBG_E_INVAL;
      }
      ds->kind = HBG_SCALAR_BOUNDARY;
      ds->index = s->index;
    }
  }
  for (uint32_t i = 0; i < t->n_deps; i++) {
    if (t->deps[i] >= self) {
      hbg__error_set("hbg_record_task (inner task %u): dependency %u is "
                     "inner task %u, not an earlier one",
                     self, i, t->deps[i]);
      return HBG_E_INVAL;
    }
    HBG__TRY(push_scratch(r, &n_cand, t->deps[i]));
  }
  for (uint32_t i = 0; i < t->n_args; i++) {
    const rec_buf *b = &r->bufs[acc[i].buf];
    for (uint32_t j = 0; j < b->n; j++) {
      const rec_access *e = &b->acc[j];
      if ((acc[i].write || e->write) && acc[i].lo < e->hi && e->lo < acc[i].hi)
        HBG__TRY(push_scratch(r, &n_cand, e->node));
    }
  }

  if (n_cand > 1)
    qsort(r->scratch, n_cand, sizeof *r->scratch, cmp_u32);
  uint32_t n_uniq = 0;
  for (uint32_t i = 0; i < n_cand; i++)
    if (n_uniq == 0 || r->scratch[n_uniq - 1] != r->scratch[i])
      r->scratch[n_uniq++] = r->scratch[i];

  if ((rc = HBG__RESERVE(r->fanin, r->cap_fanin, (uint64_t)r->n_fanin + n_uniq)) ||
      (rc = HBG__RESERVE(r->prod, r->cap_prod, (uint64_t)r->n_prod + 1)))
    return rc;
  for (uint32_t i = 0; i < t->n_args; i++) {
    rec_buf *b = &r->bufs[acc[i].buf];
    /* Worst case: every earlier arg of this task landed on the same buffer. */
    HBG__TRY(HBG__RESERVE(b->acc, b->cap, (uint64_t)b->n + t->n_args));
  }

  /* Commit: nothing below fails. */
  uint64_t kscr = hbg__task_scratch_floats(t);
  if (kscr > r->kscr)
    r->kscr = kscr;
  rec_node *n = &r->nodes[self];
  memset(n, 0, sizeof *n);
  n->kernel = t->kernel;
  n->first_tensor = r->n_tensors;
  n->n_tensors = t->n_args;
  n->first_scalar = r->n_scalars;
  n->n_scalars = t->n_scalars;
  n->first_fanin = r->n_fanin;
  n->n_fanin = n_uniq;
  if (first_out != UINT64_MAX) {
    n->heap_off = first_out;
    n->heap_size = heap_cur - first_out;
    r->prod[r->n_prod++] = self;
    r->heap_top = heap_cur;
  }
  if (n_uniq)
    memcpy(&r->fanin[r->n_fanin], r->scratch,
           (size_t)n_uniq * sizeof *r->fanin);
  r->n_fanin += n_uniq;
  r->n_tensors += t->n_args;
  r->n_scalars += t->n_scalars;
  for (uint32_t i = 0; i < t->n_args; i++)
    add_access(&r->bufs[acc[i].buf], &acc[i], self);
  for (uint32_t i = 0; i < t->n_args; i++) {
    const hbg_def_tensor *dt = &r->tensors[n->first_tensor + i];
    if (dt->src == HBG_SRC_OWN_OUTPUT) {
      t->args[i].addr = HBG__HEAP_TAG | dt->offset;
      t->args[i].offset = 0;
    }
  }
  r->n_nodes++;
  if (out)
    *out = self;
  return 0;
}

int hbg_record_task(hbg_recorder *rec, hbg_task *t, hbg_task_id *out) {
  hbg__error_clear();
  HBG__RETURN_IF(!rec, HBG_E_INVAL);
  int rc = record_task(rec, t, out);
  if (rc < 0) {
    if (!hbg_last_error()[0])
      hbg__error_set("hbg_record_task (inner task %u): %s", rec->n_nodes,
                     hbg_strerror(rc));
    if (!rec->err) {
      rec->err = rc;
      snprintf(rec->err_msg, sizeof rec->err_msg, "%s", hbg_last_error());
    }
  }
  return rc;
}

const char *hbg__rec_error(const hbg_recorder *r) {
  return r && r->err ? r->err_msg : NULL;
}

static uint64_t pad8(uint64_t x) { return HBG__ALIGN_UP(x, (uint64_t)8); }

int hbg__rec_finish(hbg_recorder *r, hbg__def **out) {
  HBG__RETURN_IF(!r, HBG_E_INVAL);
  int rc = 0;
  uint8_t *img = NULL;
  uint32_t *cursor = NULL;
  hbg__def *d = NULL;
  if (!out) {
    rc = HBG_E_INVAL;
    goto err_rec;
  }
  if (r->err) {
    rc = r->err;
    hbg__error_set("the recording is not kept: %s", r->err_msg);
    goto err_rec;
  }
  if (r->n_nodes == 0) {
    rc = HBG_E_EMPTY;
    goto err_rec;
  }

  const uint32_t N = r->n_nodes, E = r->n_fanin;
  uint32_t R = 0;
  for (uint32_t i = 0; i < N; i++)
    R += r->nodes[i].n_fanin == 0;

  hbg_def_hdr h;
  memset(&h, 0, sizeof h);
  uint64_t off = sizeof h;
  h.off_nodes = (uint32_t)off;
  off += (uint64_t)N * sizeof(hbg_def_node);
  h.off_fanin_ptr = (uint32_t)off;
  off += pad8(((uint64_t)N + 1) * 4);
  h.off_fanin = (uint32_t)off;
  off += pad8((uint64_t)E * 4);
  if (off > HBG_IMG_MAX_BYTES) {
    rc = HBG_E_LIMIT;
    goto err_rec;
  }
  h.off_fanout_ptr = (uint32_t)off;
  off += pad8(((uint64_t)N + 1) * 4);
  h.off_fanout = (uint32_t)off;
  off += pad8((uint64_t)E * 4);
  h.off_roots = (uint32_t)off;
  off += pad8((uint64_t)R * 4);
  if (off > HBG_IMG_MAX_BYTES) {
    rc = HBG_E_LIMIT;
    goto err_rec;
  }
  h.off_tensors = (uint32_t)off;
  off += (uint64_t)r->n_tensors * sizeof(hbg_def_tensor);
  h.off_scalars = (uint32_t)off;
  off += (uint64_t)r->n_scalars * sizeof(hbg_def_scalar);
  h.off_bsig = (uint32_t)off;
  off += (uint64_t)r->nbt * sizeof(hbg_def_bsig);
  if (r->pad_to > off) {
    h.off_pad = (uint32_t)off;
    h.pad_size = (uint32_t)(pad8(r->pad_to) - off);
    off += h.pad_size;
  }
  if (off > HBG_IMG_MAX_BYTES) {
    rc = HBG_E_LIMIT;
    goto err_rec;
  }
  h.magic = HBG_DEF_MAGIC;
  h.version = HBG_IMG_VERSION;
  h.total_size = (uint32_t)off;
  h.heap_size = HBG__ALIGN_UP(r->heap_top, (uint64_t)HBG__HEAP_ALIGN);
  h.n_nodes = N;
  h.n_edges = E;
  h.n_roots = R;
  h.n_tensors = r->n_tensors;
  h.n_scalars = r->n_scalars;
  h.n_btensors = r->nbt;
  h.n_bscalars = r->nbs;

  size_t alloc = HBG__ALIGN_UP((size_t)off, (size_t)64);
  img = aligned_alloc(64, alloc);
  cursor = malloc(((size_t)N + 1) * sizeof *cursor);
  d = calloc(1, sizeof *d);
  if (!img || !cursor || !d) {
    rc = HBG_E_NOMEM;
    goto err_alloc;
  }
  memset(img, 0, alloc);

  hbg_def_node *nodes = (hbg_def_node *)(img + h.off_nodes);
  uint32_t *fin_ptr = (uint32_t *)(img + h.off_fanin_ptr);
  uint32_t *fin = (uint32_t *)(img + h.off_fanin);
  uint32_t *fout_ptr = (uint32_t *)(img + h.off_fanout_ptr);
  uint32_t *fout = (uint32_t *)(img + h.off_fanout);
  uint32_t *roots = (uint32_t *)(img + h.off_roots);
  for (uint32_t i = 0, k = 0; i < N; i++) {
    const rec_node *s = &r->nodes[i];
    nodes[i].kernel = s->kernel;
    nodes[i].first_tensor = s->first_tensor;
    nodes[i].n_tensors = s->n_tensors;
    nodes[i].first_scalar = s->first_scalar;
    nodes[i].n_scalars = s->n_scalars;
    nodes[i].heap_off = s->heap_off;
    nodes[i].heap_size = s->heap_size;
    fin_ptr[i] = s->first_fanin;
    if (s->n_fanin == 0)
      roots[k++] = i;
  }
  fin_ptr[N] = E;
  if (E)
    memcpy(fin, r->fanin, (size_t)E * 4);

  memset(cursor, 0, ((size_t)N + 1) * sizeof *cursor);
  for (uint32_t e = 0; e < E; e++)
    cursor[r->fanin[e] + 1]++;
  for (uint32_t i = 0; i < N; i++)
    cursor[i + 1] += cursor[i];
  memcpy(fout_ptr, cursor, ((size_t)N + 1) * sizeof *cursor);
  for (uint32_t c = 0; c < N; c++)
    for (uint32_t k = fin_ptr[c]; k < fin_ptr[c + 1]; k++)
      fout[cursor[fin[k]]++] = c;

  if (r->n_tensors)
    memcpy(img + h.off_tensors, r->tensors,
           (size_t)r->n_tensors * sizeof(hbg_def_tensor));
  if (r->n_scalars)
    memcpy(img + h.off_scalars, r->scalars,
           (size_t)r->n_scalars * sizeof(hbg_def_scalar));
  hbg_def_bsig *bsig = (hbg_def_bsig *)(img + h.off_bsig);
  for (uint32_t i = 0; i < r->nbt; i++) {
    bsig[i].dtype = r->bt[i].dtype;
    bsig[i].ndim = r->bt[i].ndim;
    bsig[i].mode = r->bt[i].mode;
    memcpy(bsig[i].shape, r->bt[i].shape, sizeof bsig[i].shape);
    memcpy(bsig[i].strides, r->bt[i].strides, sizeof bsig[i].strides);
  }
  memcpy(img, &h, sizeof h);
  h.hash = XXH3_64bits(img, h.total_size);
  memcpy(img + offsetof(hbg_def_hdr, hash), &h.hash, sizeof h.hash);

  d->image = img;
  d->size = h.total_size;
  d->hash = h.hash;
  d->heap_size = h.heap_size;
  d->n_nodes = N;
  d->kscr_floats = r->kscr;
  d->n_btensors = r->nbt;
  d->n_bscalars = r->nbs;
  d->bsig = (const hbg_def_bsig *)(img + h.off_bsig);
  if (hbg__def_init_align(d)) {
    rc = HBG_E_NOMEM;
    goto err_alloc;
  }
  free(cursor);
  rec_free(r);
  *out = d;
  return 0;

err_alloc:
  if (d) {
    free(d->balign);
    free(d->bmode);
    free(d->order);
  }
  free(d);
  free(cursor);
  free(img);
err_rec:
  rec_free(r);
  return rc;
}
