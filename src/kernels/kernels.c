#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

#include "common/util.h"
#include "graph/image.h"

typedef struct kit {
  float *base;
  uint32_t nd;
  uint32_t sh[HBG_MAX_DIMS];
  uint32_t st[HBG_MAX_DIMS];
  uint32_t ix[HBG_MAX_DIMS];
  uint64_t off;
} kit;

uint64_t hbg__kernel_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

float hbg__kernel_to_f32(uint64_t v) {
  uint32_t u = (uint32_t)v;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void hbg__ktensor_from(hbg__ktensor *k, const hbg_tensor *t, void *data) {
  memset(k, 0, sizeof *k);
  k->data = data;
  k->dtype = t->dtype;
  k->ndim = t->ndim;
  k->mode = t->mode;
  for (uint32_t i = 0; i < HBG_MAX_DIMS; i++) {
    k->shape[i] = t->shape[i];
    k->strides[i] = t->strides[i];
  }
}

static uint64_t numel(const hbg__ktensor *t) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

uint64_t hbg__ktensor_extent(const hbg__ktensor *t) {
  uint64_t es = hbg_dtype_size(t->dtype);
  if (es == 0 || t->ndim == 0 || t->ndim > HBG_MAX_DIMS)
    return 0;
  uint64_t last = 0, n = 1;
  for (uint32_t i = 0; i < t->ndim; i++) {
    uint64_t span;
    if (t->shape[i] == 0)
      return 0;
    if (hbg__mul_u64(n, t->shape[i], &n) || n > HBG__KERNEL_MAX_NUMEL)
      return 0;
    if (hbg__mul_u64(t->shape[i] - 1, t->strides[i], &span) ||
        hbg__add_u64(last, span, &last))
      return 0;
  }
  if (last >= UINT64_MAX / es - 1)
    return 0;
  return (last + 1) * es;
}

static int no_bcast(const hbg__ktensor *t) {
  for (uint32_t i = 0; i < t->ndim; i++)
    if (t->strides[i] == 0 && t->shape[i] != 1)
      return 0;
  return 1;
}

static int targ(const hbg__ktensor *t, uint32_t need, int f32) {
  return hbg__ktensor_extent(t) != 0 && (t->mode & need) == need &&
         (need != HBG_ACCESS_OUT || no_bcast(t)) && t->mode >= HBG_ACCESS_IN &&
         t->mode <= HBG_ACCESS_INOUT && (!f32 || t->dtype == HBG_DTYPE_F32);
}

/* One constant stride walks the tensor in row-major order. */
static int lin_stride(const hbg__ktensor *t, uint64_t *stride) {
  uint64_t s = 0, expect = 0;
  int seen = 0;
  for (uint32_t i = t->ndim; i-- > 0;) {
    if (t->shape[i] == 1)
      continue;
    if (!seen) {
      s = t->strides[i];
      expect = s * t->shape[i];
      seen = 1;
    } else {
      if (t->strides[i] != expect)
        return 0;
      expect *= t->shape[i];
    }
  }
  *stride = seen ? s : 1;
  return 1;
}

static void kit_init(kit *it, const hbg__ktensor *t) {
  memset(it, 0, sizeof *it);
  it->base = t->data;
  it->nd = t->ndim;
  for (uint32_t i = 0; i < t->ndim; i++) {
    it->sh[i] = t->shape[i];
    it->st[i] = t->strides[i];
  }
}

static inline float *kit_ptr(const kit *it) { return it->base + it->off; }

static inline void kit_next(kit *it) {
  for (uint32_t d = it->nd; d-- > 0;) {
    if (++it->ix[d] < it->sh[d]) {
      it->off += it->st[d];
      return;
    }
    it->off -= (uint64_t)(it->sh[d] - 1) * it->st[d];
    it->ix[d] = 0;
  }
}

static int same_shape(const hbg__ktensor *a, const hbg__ktensor *b) {
  if (a->ndim != b->ndim)
    return 0;
  for (uint32_t i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i])
      return 0;
  return 1;
}

static uint32_t last_dim(const hbg__ktensor *t) {
  return t->shape[t->ndim - 1];
}

static float *row_ptr(const hbg__ktensor *t, uint64_t r) {
  uint64_t off = 0;
  for (uint32_t d = t->ndim - 1; d-- > 0;) {
    off += (r % t->shape[d]) * t->strides[d];
    r /= t->shape[d];
  }
  return (float *)t->data + off;
}

/* ---- element-wise ---- */

enum { EW_COPY, EW_ADD, EW_MUL, EW_SCALE, EW_SILU_MUL, EW_FILL };

static inline float ew_op(int op, float a, float b, float alpha) {
  switch (op) {
  case EW_COPY:
    return a;
  case EW_ADD:
    return a + b;
  case EW_MUL:
    return a * b;
  case EW_SCALE:
    return a * alpha;
  case EW_SILU_MUL:
    return a / (1.0f + expf(-a)) * b;
  default:
    return alpha;
  }
}

/* t[0..nin) inputs, t[nin] output, all of n elements. */
static void ew_run(int op, const hbg__ktensor *t, uint32_t nin, float alpha) {
  const hbg__ktensor *o = &t[nin];
  uint64_t n = numel(o), so, sa = 0, sb = 0;
  int fast = lin_stride(o, &so);
  if (nin > 0)
    fast = fast && lin_stride(&t[0], &sa);
  if (nin > 1)
    fast = fast && lin_stride(&t[1], &sb);
  float *po = o->data;
  const float *pa = nin > 0 ? t[0].data : NULL;
  const float *pb = nin > 1 ? t[1].data : NULL;
  if (fast) {
    for (uint64_t i = 0; i < n; i++) {
      float a = pa ? pa[i * sa] : 0.0f, b = pb ? pb[i * sb] : 0.0f;
      po[i * so] = ew_op(op, a, b, alpha);
    }
    return;
  }
  kit io, ia, ib;
  kit_init(&io, o);
  if (nin > 0)
    kit_init(&ia, &t[0]);
  if (nin > 1)
    kit_init(&ib, &t[1]);
  for (uint64_t i = 0; i < n; i++) {
    float a = nin > 0 ? *kit_ptr(&ia) : 0.0f;
    float b = nin > 1 ? *kit_ptr(&ib) : 0.0f;
    *kit_ptr(&io) = ew_op(op, a, b, alpha);
    kit_next(&io);
    if (nin > 0)
      kit_next(&ia);
    if (nin > 1)
      kit_next(&ib);
  }
}

/* ---- row kernels ---- */

static void rmsnorm_run(const hbg__ktensor *t, float eps) {
  const hbg__ktensor *in = &t[0], *w = &t[1], *out = &t[2];
  uint32_t d = last_dim(in);
  uint64_t rows = numel(in) / d, sw = 0;
  uint64_t si = in->strides[in->ndim - 1], so = out->strides[out->ndim - 1];
  lin_stride(w, &sw);
  const float *pw = w->data;
  for (uint64_t r = 0; r < rows; r++) {
    const float *pi = row_ptr(in, r);
    float *po = row_ptr(out, r);
    float ss = 0.0f;
    for (uint32_t j = 0; j < d; j++) {
      float v = pi[j * si];
      ss += v * v;
    }
    float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (uint32_t j = 0; j < d; j++)
      po[j * so] = pi[j * si] * inv * pw[j * sw];
  }
}

static void softmax_run(const hbg__ktensor *t) {
  const hbg__ktensor *in = &t[0], *out = &t[1];
  uint32_t d = last_dim(in);
  uint64_t rows = numel(in) / d;
  uint64_t si = in->strides[in->ndim - 1], so = out->strides[out->ndim - 1];
  for (uint64_t r = 0; r < rows; r++) {
    const float *pi = row_ptr(in, r);
    float *po = row_ptr(out, r);
    float mx = pi[0];
    for (uint32_t j = 1; j < d; j++)
      if (pi[j * si] > mx)
        mx = pi[j * si];
    float sum = 0.0f;
    for (uint32_t j = 0; j < d; j++) {
      float e = expf(pi[j * si] - mx);
      po[j * so] = e;
      sum += e;
    }
    float inv = 1.0f / sum;
    for (uint32_t j = 0; j < d; j++)
      po[j * so] *= inv;
  }
}

static void rope_run(const hbg__ktensor *t, uint64_t pos) {
  const hbg__ktensor *x = &t[0], *c = &t[1], *s = &t[2], *out = &t[3];
  uint32_t d = last_dim(x), h = d / 2;
  uint64_t rows = numel(x) / d;
  uint64_t sx = x->strides[x->ndim - 1], so = out->strides[out->ndim - 1];
  const float *pc = (const float *)c->data + pos * c->strides[0];
  const float *ps = (const float *)s->data + pos * s->strides[0];
  uint64_t sc = c->strides[1], ss = s->strides[1];
  for (uint64_t r = 0; r < rows; r++) {
    const float *pi = row_ptr(x, r);
    float *po = row_ptr(out, r);
    for (uint32_t i = 0; i < h; i++) {
      float x0 = pi[i * sx], x1 = pi[(i + h) * sx];
      float cv = pc[i * sc], sv = ps[i * ss];
      po[i * so] = x0 * cv - x1 * sv;
      po[(i + h) * so] = x1 * cv + x0 * sv;
    }
  }
}

static void gemv_run(const hbg__ktensor *t, float alpha, int scaled) {
  const hbg__ktensor *w = &t[0], *x = &t[1], *y = &t[2];
  uint32_t n = w->shape[0], k = w->shape[1];
  uint64_t sw0 = w->strides[0], sw1 = w->strides[1], sx = 0, sy = 0;
  lin_stride(x, &sx);
  lin_stride(y, &sy);
  const float *pw = w->data, *px = x->data;
  float *py = y->data;
  for (uint32_t i = 0; i < n; i++) {
    const float *row = pw + i * sw0;
    float l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f;
    uint32_t j = 0;
    if (sw1 == 1 && sx == 1) {
      for (; j + 4 <= k; j += 4) {
        l0 += row[j] * px[j];
        l1 += row[j + 1] * px[j + 1];
        l2 += row[j + 2] * px[j + 2];
        l3 += row[j + 3] * px[j + 3];
      }
    } else {
      for (; j + 4 <= k; j += 4) {
        l0 += row[j * sw1] * px[j * sx];
        l1 += row[(j + 1) * sw1] * px[(j + 1) * sx];
        l2 += row[(j + 2) * sw1] * px[(j + 2) * sx];
        l3 += row[(j + 3) * sw1] * px[(j + 3) * sx];
      }
    }
    for (; j < k; j++)
      l0 += row[j * sw1] * px[j * sx];
    float acc = (l0 + l1) + (l2 + l3);
    py[i * sy] = scaled ? acc * alpha : acc;
  }
}

typedef struct attn_dims {
  uint32_t hq, hk, t, d;
  uint64_t sq0, sq1, so0, so1;
  uint64_t sk0, sk1, sk2, sv0, sv1, sv2;
} attn_dims;

static int attn_dims_get(const hbg__ktensor *t, attn_dims *a) {
  const hbg__ktensor *q = &t[0], *k = &t[1], *v = &t[2], *o = &t[3];
  if (q->ndim < 1 || q->ndim > 2 || k->ndim < 2 || k->ndim > 3)
    return HBG_E_KERNEL;
  if (q->ndim + 1 != k->ndim || !same_shape(k, v) || !same_shape(q, o))
    return HBG_E_KERNEL;
  memset(a, 0, sizeof *a);
  int two = q->ndim == 2;
  a->hq = two ? q->shape[0] : 1;
  a->d = q->shape[q->ndim - 1];
  a->sq0 = two ? q->strides[0] : 0;
  a->sq1 = q->strides[q->ndim - 1];
  a->so0 = two ? o->strides[0] : 0;
  a->so1 = o->strides[o->ndim - 1];
  a->hk = two ? k->shape[0] : 1;
  a->t = k->shape[k->ndim - 2];
  a->sk0 = two ? k->strides[0] : 0;
  a->sk1 = k->strides[k->ndim - 2];
  a->sk2 = k->strides[k->ndim - 1];
  a->sv0 = two ? v->strides[0] : 0;
  a->sv1 = v->strides[v->ndim - 2];
  a->sv2 = v->strides[v->ndim - 1];
  if (k->shape[k->ndim - 1] != a->d || a->hq % a->hk != 0)
    return HBG_E_KERNEL;
  /* the one kernel whose work is not linear in its arguments */
  if ((uint64_t)a->hq * a->d > HBG__KERNEL_MAX_NUMEL ||
      (uint64_t)a->hq * a->d * a->t > HBG__KERNEL_MAX_WORK)
    return HBG_E_KERNEL;
  return 0;
}

static void attn_run(const hbg__ktensor *t, const attn_dims *a, uint32_t len,
                     float scale) {
  const float *pq = t[0].data, *pk = t[1].data, *pv = t[2].data;
  float *po = t[3].data;
  uint32_t group = a->hq / a->hk;
  for (uint32_t h = 0; h < a->hq; h++) {
    const float *q = pq + h * a->sq0;
    const float *kh = pk + (h / group) * a->sk0;
    const float *vh = pv + (h / group) * a->sv0;
    float *o = po + h * a->so0;
    float mx = -INFINITY;
    for (uint32_t p = 0; p < len; p++) {
      float s = 0.0f;
      for (uint32_t j = 0; j < a->d; j++)
        s += q[j * a->sq1] * kh[p * a->sk1 + j * a->sk2];
      s *= scale;
      if (s > mx)
        mx = s;
    }
    for (uint32_t j = 0; j < a->d; j++)
      o[j * a->so1] = 0.0f;
    float sum = 0.0f;
    for (uint32_t p = 0; p < len; p++) {
      float s = 0.0f;
      for (uint32_t j = 0; j < a->d; j++)
        s += q[j * a->sq1] * kh[p * a->sk1 + j * a->sk2];
      float e = expf(s * scale - mx);
      sum += e;
      for (uint32_t j = 0; j < a->d; j++)
        o[j * a->so1] += e * vh[p * a->sv1 + j * a->sv2];
    }
    float inv = 1.0f / sum;
    for (uint32_t j = 0; j < a->d; j++)
      o[j * a->so1] *= inv;
  }
}

/* ---- registry ---- */

typedef struct kdesc {
  const char *name;
  uint32_t nt; /* tensor count; UINT32_MAX = any */
  uint32_t ns_min, ns_max;
  uint32_t out_mask; /* bit i: tensor i is an output */
} kdesc;

static const kdesc kdescs[HBG_KERNEL__COUNT] = {
    [HBG_KERNEL_NOP] = {"nop", UINT32_MAX, 0, UINT32_MAX, 0},
    [HBG_KERNEL_COPY] = {"copy", 2, 0, 0, 1u << 1},
    [HBG_KERNEL_ADD] = {"add", 3, 0, 0, 1u << 2},
    [HBG_KERNEL_MUL] = {"mul", 3, 0, 0, 1u << 2},
    [HBG_KERNEL_SCALE] = {"scale", 2, 1, 1, 1u << 1},
    [HBG_KERNEL_RMSNORM] = {"rmsnorm", 3, 1, 1, 1u << 2},
    [HBG_KERNEL_GEMV] = {"gemv", 3, 0, 1, 1u << 2},
    [HBG_KERNEL_ROPE] = {"rope", 4, 1, 1, 1u << 3},
    [HBG_KERNEL_SILU_MUL] = {"silu_mul", 3, 0, 0, 1u << 2},
    [HBG_KERNEL_SOFTMAX] = {"softmax", 2, 0, 0, 1u << 1},
    [HBG_KERNEL_ATTN] = {"attn", 4, 1, 2, 1u << 3},
    [HBG_KERNEL_FILL] = {"fill", 1, 1, 1, 1u << 0},
};

const char *hbg__kernel_name(uint32_t kernel) {
  return kernel < HBG_KERNEL__COUNT ? kdescs[kernel].name : NULL;
}

static int shapes_check(uint32_t kernel, const hbg__ktensor *t) {
  uint64_t s;
  switch (kernel) {
  case HBG_KERNEL_COPY:
  case HBG_KERNEL_SCALE:
    return numel(&t[0]) == numel(&t[1]) ? 0 : HBG_E_KERNEL;
  case HBG_KERNEL_ADD:
  case HBG_KERNEL_MUL:
  case HBG_KERNEL_SILU_MUL:
    return numel(&t[0]) == numel(&t[2]) && numel(&t[1]) == numel(&t[2])
               ? 0
               : HBG_E_KERNEL;
  case HBG_KERNEL_SOFTMAX:
    return same_shape(&t[0], &t[1]) ? 0 : HBG_E_KERNEL;
  case HBG_KERNEL_RMSNORM:
    return same_shape(&t[0], &t[2]) && numel(&t[1]) == last_dim(&t[0]) &&
                   lin_stride(&t[1], &s)
               ? 0
               : HBG_E_KERNEL;
  case HBG_KERNEL_GEMV:
    return t[0].ndim == 2 && numel(&t[1]) == t[0].shape[1] &&
                   numel(&t[2]) == t[0].shape[0] && lin_stride(&t[1], &s) &&
                   lin_stride(&t[2], &s)
               ? 0
               : HBG_E_KERNEL;
  case HBG_KERNEL_ROPE: {
    uint32_t d = last_dim(&t[0]);
    return same_shape(&t[0], &t[3]) && d % 2 == 0 && t[1].ndim == 2 &&
                   same_shape(&t[1], &t[2]) && t[1].shape[1] == d / 2
               ? 0
               : HBG_E_KERNEL;
  }
  case HBG_KERNEL_ATTN: {
    attn_dims a;
    return attn_dims_get(t, &a);
  }
  default:
    return 0;
  }
}

/* A user kernel is checked for structure only: counts, and each tensor a
 * valid layout with a mode. */
static int user_check(const hbg__ktensor *t, uint32_t nt, uint32_t ns) {
  HBG__RETURN_IF(nt > HBG_IMG_MAX_ARGS_PER_NODE ||
                     ns > HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_E_KERNEL);
  for (uint32_t i = 0; i < nt; i++)
    HBG__RETURN_IF(!targ(&t[i], 0, 0), HBG_E_KERNEL);
  return 0;
}

int hbg__kernel_check(uint32_t kernel, const hbg__ktensor *t, uint32_t nt,
                      uint32_t ns) {
  HBG__RETURN_IF(nt > 0 && !t, HBG_E_KERNEL);
  if (hbg_img_kernel_is_user(kernel))
    return user_check(t, nt, ns);
  HBG__RETURN_IF(kernel >= HBG_KERNEL__COUNT, HBG_E_KERNEL);
  const kdesc *k = &kdescs[kernel];
  HBG__RETURN_IF(k->nt != UINT32_MAX && nt != k->nt, HBG_E_KERNEL);
  HBG__RETURN_IF(ns < k->ns_min || ns > k->ns_max, HBG_E_KERNEL);
  for (uint32_t i = 0; i < nt; i++) {
    uint32_t need = kernel == HBG_KERNEL_NOP ? 0
                    : (k->out_mask >> i) & 1 ? HBG_ACCESS_OUT
                                             : HBG_ACCESS_IN;
    HBG__RETURN_IF(!targ(&t[i], need, kernel != HBG_KERNEL_NOP), HBG_E_KERNEL);
  }
  return shapes_check(kernel, t);
}

int hbg__task_kernel_check(const hbg_task *t, const char *who) {
  hbg__ktensor k[HBG_IMG_MAX_ARGS_PER_NODE];
  HBG__RETURN_IF(t->n_args > HBG_IMG_MAX_ARGS_PER_NODE, HBG_E_KERNEL);
  for (uint32_t i = 0; i < t->n_args; i++)
    hbg__ktensor_from(&k[i], &t->args[i], NULL);
  int rc = hbg__kernel_check(t->kernel, k, t->n_args, t->n_scalars);
  if (rc == 0)
    return 0;
  /* Say which rule failed (the error path only). */
  if (hbg_img_kernel_is_user(t->kernel)) {
    hbg__error_set("%s: user kernel %#x: a count over 64 or an argument "
                   "with a bad layout or mode",
                   who, t->kernel);
    return rc;
  }
  if (t->kernel >= HBG_KERNEL__COUNT) {
    hbg__error_set("%s: unknown kernel %u (user kernels start at %#x)", who,
                   t->kernel, HBG_KERNEL_USER_MIN);
    return rc;
  }
  const kdesc *d = &kdescs[t->kernel];
  if (d->nt != UINT32_MAX && t->n_args != d->nt) {
    hbg__error_set("%s: %s takes %u tensors, got %u", who, d->name, d->nt,
                   t->n_args);
    return rc;
  }
  if (t->n_scalars < d->ns_min || t->n_scalars > d->ns_max) {
    hbg__error_set("%s: %s takes %u to %u scalars, got %u", who, d->name,
                   d->ns_min, d->ns_max, t->n_scalars);
    return rc;
  }
  for (uint32_t i = 0; i < t->n_args && t->kernel != HBG_KERNEL_NOP; i++) {
    int out = (d->out_mask >> i) & 1;
    uint32_t need = out ? HBG_ACCESS_OUT : HBG_ACCESS_IN;
    if (targ(&k[i], need, 1))
      continue;
    hbg__error_set("%s: %s argument %u (%s) %s", who, d->name, i,
                   out ? "output" : "input",
                   k[i].dtype != HBG_DTYPE_F32 ? "must be f32"
                   : (k[i].mode & need) != need
                       ? (out ? "needs mode OUT" : "needs mode IN")
                   : out ? "may not broadcast (stride 0)"
                         : "has bad shape or strides");
    return rc;
  }
  hbg__error_set("%s: %s: argument shapes do not fit together (see the "
                 "kernel's rules in hbg.h)",
                 who, d->name);
  return rc;
}

int hbg__kernel_run(uint32_t kernel, const hbg__ktensor *t, uint32_t nt,
                    const uint64_t *sc, uint32_t ns) {
  HBG__TRY(hbg__kernel_check(kernel, t, nt, ns));
  HBG__RETURN_IF(ns > 0 && !sc, HBG_E_KERNEL);
  for (uint32_t i = 0; i < nt; i++)
    HBG__RETURN_IF(!t[i].data, HBG_E_KERNEL);
  switch (kernel) {
  case HBG_KERNEL_NOP:
    return 0;
  case HBG_KERNEL_COPY:
    ew_run(EW_COPY, t, 1, 0.0f);
    return 0;
  case HBG_KERNEL_ADD:
    ew_run(EW_ADD, t, 2, 0.0f);
    return 0;
  case HBG_KERNEL_MUL:
    ew_run(EW_MUL, t, 2, 0.0f);
    return 0;
  case HBG_KERNEL_SILU_MUL:
    ew_run(EW_SILU_MUL, t, 2, 0.0f);
    return 0;
  case HBG_KERNEL_SCALE:
    ew_run(EW_SCALE, t, 1, hbg__kernel_to_f32(sc[0]));
    return 0;
  case HBG_KERNEL_FILL:
    ew_run(EW_FILL, t, 0, hbg__kernel_to_f32(sc[0]));
    return 0;
  case HBG_KERNEL_RMSNORM:
    rmsnorm_run(t, hbg__kernel_to_f32(sc[0]));
    return 0;
  case HBG_KERNEL_SOFTMAX:
    softmax_run(t);
    return 0;
  case HBG_KERNEL_GEMV:
    gemv_run(t, ns ? hbg__kernel_to_f32(sc[0]) : 0.0f, ns != 0);
    return 0;
  case HBG_KERNEL_ROPE:
    HBG__RETURN_IF(sc[0] >= t[1].shape[0], HBG_E_KERNEL);
    rope_run(t, sc[0]);
    return 0;
  case HBG_KERNEL_ATTN: {
    attn_dims a;
    HBG__TRY(attn_dims_get(t, &a));
    HBG__RETURN_IF(sc[0] == 0 || sc[0] > a.t, HBG_E_KERNEL);
    float scale = ns > 1 ? hbg__kernel_to_f32(sc[1]) : 1.0f / sqrtf((float)a.d);
    attn_run(t, &a, (uint32_t)sc[0], scale);
    return 0;
  }
  default:
    return HBG_E_KERNEL;
  }
}
