/*
 * The built-in kernels, written once for the CPU and the GPU (internal).
 *
 * This file is the kernels' only implementation. It is plain C in the
 * common subset of C11, C++17 and CUDA: kernels.c includes it for the sim's
 * workers and the workloads' host reference, and nvcc compiles the same
 * text as device code (tests/kern/ checks all three). Freestanding: it
 * includes <stdint.h>, <stddef.h>, hbg_image.h and hbg_kernel.h only and
 * calls no C library function (sqrt is the one hardware operation it
 * names, through HBG__K_SQRTF; exp, sin and cos are its own, below).
 *
 * Bit-exact on both sides requires IEEE binary32/64 arithmetic with every
 * operation rounded on its own: host compilers build it with
 * -ffp-contract=off (no fused multiply-add) and FLT_EVAL_METHOD 0 (SSE, not
 * x87); nvcc needs -fmad=false and its IEEE defaults (-prec-div=true,
 * -prec-sqrt=true, -ftz=false, no --use_fast_math). CMake keeps these flags
 * in HBG_KERNEL_C_FLAGS and HBG_KERNEL_NVCC_FLAGS.
 *
 * Execution model: a kernel call is a sequence of phases; every phase is
 * run by n_lanes cooperating lanes (the threads of one CTA), with a barrier
 * between phases, and all lanes see the same scratch memory
 * (hbg__k_scratch_floats floats). A lane's share of a phase is
 * hbg__k_phase(call, phase, lane, n_lanes, scratch). Each phase's result
 * does not depend on n_lanes or on the order the lanes run in: work is
 * split into units whose arithmetic is fixed (an output element, a GEMV
 * row, one of HBG__K_PARTS reduction partials, one node of a reduction
 * tree), and lanes only choose which units they compute. So the CPU may
 * run the lanes of a phase one after another (hbg__kernel_run_lanes), and a
 * CTA runs them at once (hbg__k_run_cta), with the same bits.
 *
 * The warp path: where an executor runs a call on exactly 32 lanes that
 * are one warp running at once (hbg__kcall.coop 1; its includer defines
 * HBG__K_SHFL_XOR and HBG__K_WARP_SYNC), the reductions stay in the
 * lanes' registers and meet through shuffles, and a row of RMSNORM or
 * SOFTMAX, or a head of ATTN, is one phase; GEMV splits a row over four
 * lanes. Every addition and comparison is the same one on the same
 * operands in the same order as on the other path, so the bits are too.
 *
 * Data types: every tensor is f32 (HBG_IMG_DTYPE_F32) but GEMV's W,
 * RMSNORM's w and COPY's input, which may be bf16 (2-byte elements,
 * addressed in their own elements like the rest). A bf16 element is
 * widened to f32 exactly where it is read (hbg__k_bf16_f32) and everything
 * after runs as on f32 data, so the result is the f32 kernel's on the
 * widened tensor, bit for bit.
 */
#ifndef HBG_KERNELS_KERN_SRC_H
#define HBG_KERNELS_KERN_SRC_H

#include <stddef.h>
#include <stdint.h>

#include <hbg/hbg_image.h>
#include <hbg/hbg_kernel.h>

/* __host__ __device__ under nvcc, like the image helpers it calls. */
#define HBG__KFN HBG_IMAGE_FN

#if defined(__FLT_EVAL_METHOD__) && __FLT_EVAL_METHOD__ != 0 &&               \
    !defined(__CUDA_ARCH__)
#error "the kernels need FLT_EVAL_METHOD 0 (build with SSE math, not x87)"
#endif

/* Bit casts and the correctly rounded square root of each side. */
#if defined(__CUDA_ARCH__)
#define HBG__K_F2U(f) __float_as_uint(f)
#define HBG__K_U2F(u) __uint_as_float(u)
#define HBG__K_SQRTF(x) __fsqrt_rn(x)
#else
static inline uint32_t hbg__k_f2u(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}
static inline float hbg__k_u2f(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}
#define HBG__K_F2U(f) hbg__k_f2u(f)
#define HBG__K_U2F(u) hbg__k_u2f(u)
#define HBG__K_SQRTF(x) __builtin_sqrtf(x)
#endif

/* Kernel ids: equal to hbg.h's HBG_KERNEL_* (kernels.c checks). */
enum {
  HBG__K_NOP = 0,
  HBG__K_COPY = 1,
  HBG__K_ADD = 2,
  HBG__K_MUL = 3,
  HBG__K_SCALE = 4,
  HBG__K_RMSNORM = 5,
  HBG__K_GEMV = 6,
  HBG__K_ROPE = 7,
  HBG__K_SILU_MUL = 8,
  HBG__K_SOFTMAX = 9,
  HBG__K_ATTN = 10,
  HBG__K_FILL = 11
};

#define HBG__K_PARTS 256u /* partials of every reduction */
#define HBG__K_LEVELS 8u  /* log2(HBG__K_PARTS): levels of its tree */
/* Phases per row (RMSNORM), per row (SOFTMAX), per query head (ATTN),
 * lanes one after another; the warp path takes one each. */
#define HBG__K_RMS_PHASES 2u
#define HBG__K_SM_PHASES 3u
/* The warp path's width, and the partials each of its lanes holds. */
#define HBG__K_WARP 32u
#define HBG__K_WPARTS (HBG__K_PARTS / HBG__K_WARP)

/* A kernel argument: tensor metadata plus the address of element 0; the
 * public struct user kernels get (hbg_kernel.h), so an executor hands its
 * arguments to a user kernel as they are. */
typedef hbg_kernel_tensor hbg__ktensor;
HBG_IMAGE_STATIC_ASSERT(HBG_KERNEL_MAX_DIMS == HBG_IMG_MAX_DIMS,
                        "one tensor rank for images and kernels");

/* ------------------------------------------------------------------ */
/* exp, sin, cos                                                       */
/* ------------------------------------------------------------------ */

/* 2^k for -126 <= k <= 127. */
static inline HBG__KFN float hbg__k_pow2(int k) {
  return HBG__K_U2F((uint32_t)(k + 127) << 23);
}

/* e^x in binary32 arithmetic: k = round(x / ln 2); r = x - k ln2 with ln 2
 * in two parts (the first of 15 bits, so k * hi is exact); the degree-7
 * Taylor polynomial of e^r (|r| <= 0.35, truncation below 6e-9
 * relative); then 2^k in two exact steps, so a subnormal result is rounded
 * once. Within 1 ulp of the true value for normal results (tests/test_kmath.c
 * measures it against libm). */
static inline HBG__KFN float hbg__k_expf(float x) {
  if (!(x == x))
    return x + x;
  if (x > 100.0f)
    return HBG__K_U2F(0x7f800000u);
  if (x < -110.0f)
    return 0.0f;
  float kf = x * 1.44269502f;
  int k = (int)(kf + (kf >= 0.0f ? 0.5f : -0.5f));
  float r = x - (float)k * 0.693145751953125f;
  r = r - (float)k * 1.42860677e-06f;
  float q = 1.98412698e-04f;
  q = q * r + 1.38888889e-03f;
  q = q * r + 8.33333377e-03f;
  q = q * r + 4.16666679e-02f;
  q = q * r + 1.66666672e-01f;
  q = q * r + 0.5f;
  float p = 1.0f + (r + (r * r) * q);
  int k1 = k / 2, k2 = k - k1;
  return p * hbg__k_pow2(k1) * hbg__k_pow2(k2);
}

/* sin (cos when want_cos) in binary64 arithmetic, rounded once to float:
 * k = round(x / (pi/2)); r = x - k pi/2 with pi/2 in three parts (33, 33
 * and 53 bits: exact products for |k| < 2^20); Taylor polynomials of sin
 * and cos on |r| <= pi/4 through r^15 and r^16. Within 1 ulp for
 * |x| <= 2^20; NaN for larger |x| (no long reduction: no kernel needs it),
 * for infinities and NaN. */
static inline HBG__KFN float hbg__k_sincosf(float x, int want_cos) {
  double dx = (double)x;
  if (!(dx == dx) || dx > 1048576.0 || dx < -1048576.0)
    return HBG__K_U2F(0x7fc00000u);
  if (dx == 0.0) /* keeps the sign of a zero */
    return want_cos ? 1.0f : x;
  double kd = dx * 0.63661977236758138;
  int64_t k = (int64_t)(kd + (kd >= 0.0 ? 0.5 : -0.5));
  double fk = (double)k;
  double r = dx - fk * 1.5707963267341256;
  r = r - fk * 6.077100506303966e-11;
  r = r - fk * 2.0222662487959506e-21;
  double r2 = r * r;
  double s = 7.647163731819816e-13;
  s = s * r2 - 1.6059043836821613e-10;
  s = s * r2 + 2.505210838544172e-08;
  s = s * r2 - 2.755731922398589e-06;
  s = s * r2 + 1.984126984126984e-04;
  s = s * r2 - 8.333333333333333e-03;
  s = s * r2 + 1.6666666666666666e-01;
  double sn = r - r * r2 * s;
  double c = 4.779477332387385e-14;
  c = c * r2 - 1.1470745597729725e-11;
  c = c * r2 + 2.08767569878681e-09;
  c = c * r2 - 2.755731922398589e-07;
  c = c * r2 + 2.48015873015873e-05;
  c = c * r2 - 1.388888888888889e-03;
  c = c * r2 + 4.1666666666666664e-02;
  c = c * r2 - 0.5;
  double cs = 1.0 + r2 * c;
  uint32_t quad = (uint32_t)(k & 3) + (want_cos ? 1u : 0u);
  double v = (quad & 1u) ? cs : sn;
  return (float)((quad & 2u) ? -v : v);
}

static inline HBG__KFN float hbg__k_sinf(float x) {
  return hbg__k_sincosf(x, 0);
}
static inline HBG__KFN float hbg__k_cosf(float x) {
  return hbg__k_sincosf(x, 1);
}

/* ------------------------------------------------------------------ */
/* Tensor helpers                                                      */
/* ------------------------------------------------------------------ */

static inline HBG__KFN float hbg__k_f32(uint64_t v) {
  return HBG__K_U2F((uint32_t)v);
}

/* bfloat16: the high 16 bits of a binary32. Widening is exact (the bits
 * shifted up, whatever they are: zeros, subnormals, infinities and NaNs
 * keep their value and sign), so a kernel that reads a bf16 element as
 * this f32 and then computes as on f32 data gives the bits of the same
 * kernel on the weight widened beforehand. */
static inline HBG__KFN float hbg__k_bf16_f32(uint16_t b) {
  return HBG__K_U2F((uint32_t)b << 16);
}

/* Narrowing, round to nearest, ties to even: finite values too large
 * round to an infinity of their sign, infinities stay; a NaN stays a NaN
 * with its sign, made quiet (its top payload bits kept). Not used by the
 * kernels (they never write bf16); the hosts' converter. */
static inline HBG__KFN uint16_t hbg__k_f32_bf16(float f) {
  uint32_t u = HBG__K_F2U(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline HBG__KFN uint64_t hbg__k_numel(const hbg__ktensor *t) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

static inline HBG__KFN uint32_t hbg__k_last_dim(const hbg__ktensor *t) {
  return t->shape[t->ndim - 1];
}

static inline HBG__KFN int hbg__k_same_shape(const hbg__ktensor *a,
                                             const hbg__ktensor *b) {
  if (a->ndim != b->ndim)
    return 0;
  for (uint32_t i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i])
      return 0;
  return 1;
}

/* One constant stride walks the tensor in row-major order. */
static inline HBG__KFN int hbg__k_lin_stride(const hbg__ktensor *t,
                                             uint64_t *stride) {
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

/* Element 0 of row r (rows: the leading dims, in row-major order). */
static inline HBG__KFN float *hbg__k_row(const hbg__ktensor *t, uint64_t r) {
  uint64_t off = 0;
  for (uint32_t d = t->ndim - 1; d-- > 0;) {
    off += (r % t->shape[d]) * t->strides[d];
    r /= t->shape[d];
  }
  return (float *)t->data + off;
}

static inline HBG__KFN uint64_t hbg__k_rows(const hbg__ktensor *t) {
  return hbg__k_numel(t) / hbg__k_last_dim(t);
}

/* A position in a tensor's row-major order. */
typedef struct hbg__kit {
  uint64_t off;
  uint32_t ix[HBG_IMG_MAX_DIMS];
} hbg__kit;

static inline HBG__KFN void hbg__kit_seek(const hbg__ktensor *t, hbg__kit *it,
                                          uint64_t i) {
  it->off = 0;
  for (uint32_t d = t->ndim; d-- > 0;) {
    it->ix[d] = (uint32_t)(i % t->shape[d]);
    it->off += (uint64_t)it->ix[d] * t->strides[d];
    i /= t->shape[d];
  }
}

/* Advance by n elements (past the end it wraps; callers stop by count). */
static inline HBG__KFN void hbg__kit_step(const hbg__ktensor *t, hbg__kit *it,
                                          uint32_t n) {
  uint64_t carry = n;
  for (uint32_t d = t->ndim; d-- > 0 && carry;) {
    uint64_t v = it->ix[d] + carry;
    if (v < t->shape[d]) {
      it->ix[d] = (uint32_t)v;
      carry = 0;
    } else {
      it->ix[d] = (uint32_t)(v % t->shape[d]);
      carry = v / t->shape[d];
    }
  }
  it->off = 0;
  for (uint32_t d = 0; d < t->ndim; d++)
    it->off += (uint64_t)it->ix[d] * t->strides[d];
}

/* ATTN's dimensions; the one kernel whose work is not linear in its
 * arguments. @return 0 or HBG_IMG_E_KERNEL. */
typedef struct hbg__kattn {
  uint32_t hq, hk, t, d;
  uint64_t sq0, sq1, so0, so1;
  uint64_t sk0, sk1, sk2, sv0, sv1, sv2;
} hbg__kattn;

#define HBG__KERNEL_MAX_NUMEL (1ull << 26) /* elements per tensor */
#define HBG__KERNEL_MAX_WORK (1ull << 28)  /* ATTN: heads * positions * dim */

static inline HBG__KFN int hbg__k_attn_dims(const hbg__ktensor *t,
                                            hbg__kattn *a) {
  const hbg__ktensor *q = &t[0], *k = &t[1], *v = &t[2], *o = &t[3];
  if (q->ndim < 1 || q->ndim > 2 || k->ndim < 2 || k->ndim > 3)
    return HBG_IMG_E_KERNEL;
  if (q->ndim + 1 != k->ndim || !hbg__k_same_shape(k, v) ||
      !hbg__k_same_shape(q, o))
    return HBG_IMG_E_KERNEL;
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
    return HBG_IMG_E_KERNEL;
  if ((uint64_t)a->hq * a->d > HBG__KERNEL_MAX_NUMEL ||
      (uint64_t)a->hq * a->d * a->t > HBG__KERNEL_MAX_WORK)
    return HBG_IMG_E_KERNEL;
  return 0;
}

/* One built-in kernel call whose arguments passed hbg__kernel_check and
 * hbg__k_values_check; hbg__k_prepare fills the rest once per call (every
 * lane's phases read it). */
typedef struct hbg__kcall {
  uint32_t kernel;
  uint32_t nt, ns;
  const hbg__ktensor *t;
  const uint64_t *sc;
  hbg__kattn attn; /* ATTN: its dimensions */
  float scale;     /* ATTN: s1, or 1 / sqrt(D) */
  uint32_t coop;   /* 1: its lanes are one warp of HBG__K_WARP running at
                      once (the warp path; needs HBG__K_SHFL_XOR), 0: they
                      may run one after another */
} hbg__kcall;

/* The checks that need scalar values (known at run): ROPE's position,
 * ATTN's length. @return 0 or HBG_IMG_E_KERNEL. */
static inline HBG__KFN int hbg__k_values_check(const hbg__kcall *c) {
  hbg__kattn a;
  switch (c->kernel) {
  case HBG__K_ROPE:
    return c->sc[0] < c->t[1].shape[0] ? 0 : HBG_IMG_E_KERNEL;
  case HBG__K_ATTN:
    if (hbg__k_attn_dims(c->t, &a) != 0)
      return HBG_IMG_E_KERNEL;
    return c->sc[0] >= 1 && c->sc[0] <= a.t ? 0 : HBG_IMG_E_KERNEL;
  default:
    return 0;
  }
}

/* ------------------------------------------------------------------ */
/* Reductions: HBG__K_PARTS partials, then a fixed tree                */
/* ------------------------------------------------------------------ */

/* The tree over partials s[0, HBG__K_PARTS): level L (1..HBG__K_LEVELS)
 * has nodes i < w = HBG__K_PARTS >> L, node(L, i) = node(L - 1, i) op
 * node(L - 1, i + w), node(0, i) = s[i]; its root node(8, 0) is ((p0 op
 * p128) op (p64 op p192)) op ... . op is a + b, or max: b > a ? b : a
 * (left operand a, always the lower index).
 *
 * Only the first `used` partials hold values (n elements fill min(n,
 * HBG__K_PARTS)): a node whose least partial i is past them is empty, and
 * a node whose right child is empty is its left child unchanged (adding
 * +0, or the maximum with -inf, for a sum of values >= 0 or a maximum: the
 * same bits). Empty partials are never read. */
static inline HBG__KFN float hbg__k_op(float a, float b, int is_max) {
  return is_max ? (b > a ? b : a) : a + b;
}

static inline HBG__KFN uint32_t hbg__k_bitrev8(uint32_t t) {
  uint32_t r = 0;
  for (uint32_t k = 0; k < HBG__K_LEVELS; k++)
    r |= ((t >> k) & 1u) << (HBG__K_LEVELS - 1u - k);
  return r;
}

/* The root of the tree over s[0, used), by one lane: the partials in the
 * order the tree's leaves lie (index bit-reversed), each pair of equal
 * levels joined as it completes (a stack of at most HBG__K_LEVELS + 1). */
static inline HBG__KFN float hbg__k_tree_root(const float *s, uint32_t used,
                                              int is_max) {
  float val[HBG__K_LEVELS + 1];
  uint32_t lo[HBG__K_LEVELS + 1], lvl[HBG__K_LEVELS + 1];
  uint32_t n = 0;
  for (uint32_t t = 0; t < HBG__K_PARTS; t++) {
    uint32_t i = hbg__k_bitrev8(t), l = 0;
    float v = i < used ? s[i] : 0.0f;
    while (n && lvl[n - 1] == l) { /* the stack's top is v's left sibling */
      n--;
      v = i < used ? hbg__k_op(val[n], v, is_max) : val[n];
      i = lo[n];
      l++;
    }
    val[n] = v;
    lo[n] = i;
    lvl[n] = l;
    n++;
  }
  return val[0];
}

static inline HBG__KFN uint32_t hbg__k_used(uint64_t n) {
  return n < HBG__K_PARTS ? (uint32_t)n : HBG__K_PARTS;
}

#if defined(HBG__K_SHFL_XOR)
/* The same root on the warp path: lane l holds the partials l + 32 k (k <
 * 8), which are the leaves of node(3, l); it joins them in its registers,
 * then levels 4..8 join across lanes (node(L - 1, i) and node(L - 1, i +
 * w) of lanes l and l ^ w, left the lower index). Every lane gets the
 * root. All 32 lanes call it. */
static inline HBG__KFN float hbg__k_warp_root(const float leaf[HBG__K_WPARTS],
                                              uint32_t lane, uint32_t used,
                                              int is_max) {
  float n1[4], n2[2];
  for (uint32_t k = 0; k < 4; k++)
    n1[k] = lane + 32u * k + 128u < used
                ? hbg__k_op(leaf[k], leaf[k + 4], is_max)
                : leaf[k];
  for (uint32_t k = 0; k < 2; k++)
    n2[k] = lane + 32u * k + 64u < used ? hbg__k_op(n1[k], n1[k + 2], is_max)
                                        : n1[k];
  float v = lane + 32u < used ? hbg__k_op(n2[0], n2[1], is_max) : n2[0];
  for (uint32_t w = 16; w >= 1; w >>= 1) {
    const float o = HBG__K_SHFL_XOR(v, w);
    const float left = (lane & w) ? o : v, right = (lane & w) ? v : o;
    v = (lane & (w - 1u)) + w < used ? hbg__k_op(left, right, is_max) : left;
  }
  return v;
}
#endif

/* ------------------------------------------------------------------ */
/* Kernels                                                             */
/* ------------------------------------------------------------------ */

/* Element-wise (COPY, ADD, MUL, SCALE, SILU_MUL, FILL): t[0..nin) inputs,
 * t[nin] the output; unit: one output element. */
static inline HBG__KFN float hbg__k_ew_op(uint32_t k, float a, float b,
                                          float alpha) {
  switch (k) {
  case HBG__K_COPY:
    return a;
  case HBG__K_ADD:
    return a + b;
  case HBG__K_MUL:
    return a * b;
  case HBG__K_SCALE:
    return a * alpha;
  case HBG__K_SILU_MUL:
    return a / (1.0f + hbg__k_expf(-a)) * b;
  default:
    return alpha;
  }
}

/* COPY of a bf16 input into an f32 output: each element widened exactly
 * (unit: one output element, as every element-wise kernel). */
static inline HBG__KFN void hbg__k_copy_bf16(const hbg__kcall *c,
                                             uint32_t lane, uint32_t n_lanes) {
  const hbg__ktensor *in = &c->t[0], *o = &c->t[1];
  const uint16_t *pa = (const uint16_t *)in->data;
  float *po = (float *)o->data;
  uint64_t n = hbg__k_numel(o), so = 0, sa = 0;
  if (hbg__k_lin_stride(o, &so) && hbg__k_lin_stride(in, &sa)) {
    for (uint64_t i = lane; i < n; i += n_lanes)
      po[i * so] = hbg__k_bf16_f32(pa[i * sa]);
    return;
  }
  hbg__kit io, ia;
  hbg__kit_seek(o, &io, lane);
  hbg__kit_seek(in, &ia, lane);
  for (uint64_t i = lane; i < n; i += n_lanes) {
    po[io.off] = hbg__k_bf16_f32(pa[ia.off]);
    hbg__kit_step(o, &io, n_lanes);
    hbg__kit_step(in, &ia, n_lanes);
  }
}

static inline HBG__KFN void hbg__k_ew(const hbg__kcall *c, uint32_t lane,
                                      uint32_t n_lanes) {
  uint32_t k = c->kernel;
  if (k == HBG__K_COPY && c->t[0].dtype == HBG_IMG_DTYPE_BF16) {
    hbg__k_copy_bf16(c, lane, n_lanes);
    return;
  }
  uint32_t nin = c->nt - 1;
  const hbg__ktensor *t = c->t, *o = &c->t[nin];
  float alpha = c->ns ? hbg__k_f32(c->sc[0]) : 0.0f;
  uint64_t n = hbg__k_numel(o), so = 0, sa = 0, sb = 0;
  int fast = hbg__k_lin_stride(o, &so);
  if (nin > 0)
    fast = fast && hbg__k_lin_stride(&t[0], &sa);
  if (nin > 1)
    fast = fast && hbg__k_lin_stride(&t[1], &sb);
  float *po = (float *)o->data;
  const float *pa = nin > 0 ? (const float *)t[0].data : NULL;
  const float *pb = nin > 1 ? (const float *)t[1].data : NULL;
  if (fast) {
    /* one loop per op: the operation is not decided per element */
#define HBG__K_EW_LOOP(expr)                                                   \
  for (uint64_t i = lane; i < n; i += n_lanes) {                               \
    po[i * so] = (expr);                                                       \
  }                                                                            \
  return
    switch (k) {
    case HBG__K_COPY:
      HBG__K_EW_LOOP(pa[i * sa]);
    case HBG__K_ADD:
      HBG__K_EW_LOOP(pa[i * sa] + pb[i * sb]);
    case HBG__K_MUL:
      HBG__K_EW_LOOP(pa[i * sa] * pb[i * sb]);
    case HBG__K_SCALE:
      HBG__K_EW_LOOP(pa[i * sa] * alpha);
    case HBG__K_SILU_MUL:
      HBG__K_EW_LOOP(hbg__k_ew_op(HBG__K_SILU_MUL, pa[i * sa], pb[i * sb],
                                  alpha));
    default:
      HBG__K_EW_LOOP(alpha);
    }
#undef HBG__K_EW_LOOP
  }
  hbg__kit io, ia = {0, {0, 0, 0, 0}}, ib = {0, {0, 0, 0, 0}};
  hbg__kit_seek(o, &io, lane);
  if (nin > 0)
    hbg__kit_seek(&t[0], &ia, lane);
  if (nin > 1)
    hbg__kit_seek(&t[1], &ib, lane);
  for (uint64_t i = lane; i < n; i += n_lanes) {
    float a = nin > 0 ? pa[ia.off] : 0.0f;
    float b = nin > 1 ? pb[ib.off] : 0.0f;
    po[io.off] = hbg__k_ew_op(k, a, b, alpha);
    hbg__kit_step(o, &io, n_lanes);
    if (nin > 0)
      hbg__kit_step(&t[0], &ia, n_lanes);
    if (nin > 1)
      hbg__kit_step(&t[1], &ib, n_lanes);
  }
}

/* RMSNORM, per row: phase 0, partial p = sum of x[j]^2 over j = p mod 256
 * in ascending j; phase 1, the sum tree's root s, then out[j] = x[j] * inv
 * * w[j] with inv = 1 / sqrt(s / d + eps) (unit: an element; every lane
 * evaluates the root; a bf16 w[j] widened to f32 as read). The warp path: both in one phase. */
static inline HBG__KFN float hbg__k_sumsq(const float *pi, uint64_t si,
                                          uint32_t p, uint32_t d) {
  float acc = 0.0f;
  for (uint32_t j = p; j < d; j += HBG__K_PARTS) {
    float v = pi[j * si];
    acc = acc + v * v;
  }
  return acc;
}

static inline HBG__KFN void hbg__k_rmsnorm(const hbg__kcall *c, uint64_t ph,
                                           uint32_t lane, uint32_t n_lanes,
                                           float *s) {
  const hbg__ktensor *in = &c->t[0], *w = &c->t[1], *out = &c->t[2];
  uint32_t d = hbg__k_last_dim(in), used = hbg__k_used(d);
  uint64_t r = c->coop ? ph : ph / HBG__K_RMS_PHASES;
  uint32_t sub = c->coop ? 1u : (uint32_t)(ph - r * HBG__K_RMS_PHASES);
  uint64_t si = in->strides[in->ndim - 1];
  const float *pi = hbg__k_row(in, r);
  if (sub == 0) {
    for (uint32_t p = lane; p < used; p += n_lanes)
      s[p] = hbg__k_sumsq(pi, si, p, d);
    return;
  }
  float sum;
#if defined(HBG__K_SHFL_XOR)
  if (c->coop) {
    float leaf[HBG__K_WPARTS];
    for (uint32_t k = 0; k < HBG__K_WPARTS; k++) {
      uint32_t p = lane + HBG__K_WARP * k;
      leaf[k] = p < used ? hbg__k_sumsq(pi, si, p, d) : 0.0f;
    }
    sum = hbg__k_warp_root(leaf, lane, used, 0);
  } else
#endif
    sum = hbg__k_tree_root(s, used, 0);
  uint64_t so = out->strides[out->ndim - 1], sw = 0;
  hbg__k_lin_stride(w, &sw);
  float *po = hbg__k_row(out, r);
  float inv = 1.0f / HBG__K_SQRTF(sum / (float)d + hbg__k_f32(c->sc[0]));
  if (w->dtype == HBG_IMG_DTYPE_BF16) { /* w[j] widened, the same product */
    const uint16_t *pw = (const uint16_t *)w->data;
    for (uint32_t j = lane; j < d; j += n_lanes)
      po[j * so] = pi[j * si] * inv * hbg__k_bf16_f32(pw[j * sw]);
    return;
  }
  const float *pw = (const float *)w->data;
  for (uint32_t j = lane; j < d; j += n_lanes)
    po[j * so] = pi[j * si] * inv * pw[j * sw];
}

#define HBG__K_NEG_INF HBG__K_U2F(0xff800000u)

/* SOFTMAX's partial p: the maximum of x[j] over j = p mod 256 (the first
 * element, then each greater one); its sum partial: out[j] = e^(x[j] -
 * m) and their sum, ascending j. */
static inline HBG__KFN float hbg__k_max_part(const float *pi, uint64_t si,
                                             uint32_t p, uint32_t d) {
  float m = pi[p * si];
  for (uint32_t j = p + HBG__K_PARTS; j < d; j += HBG__K_PARTS)
    if (pi[j * si] > m)
      m = pi[j * si];
  return m;
}

static inline HBG__KFN float hbg__k_exp_part(const float *pi, uint64_t si,
                                             float *po, uint64_t so,
                                             uint32_t p, uint32_t d,
                                             float mx) {
  float acc = 0.0f;
  for (uint32_t j = p; j < d; j += HBG__K_PARTS) {
    float e = hbg__k_expf(pi[j * si] - mx);
    po[j * so] = e;
    acc = acc + e;
  }
  return acc;
}

/* SOFTMAX, per row: phase 0, the max partials into s[p]; phase 1, the max
 * tree's root m (every lane), then the sum partials into s[256 + p];
 * phase 2, the sum tree's root, out[j] *= 1 / sum (unit: an element). The
 * warp path: one phase, each lane's elements (j = p mod 256 for its
 * partials p) its own throughout. */
static inline HBG__KFN void hbg__k_softmax(const hbg__kcall *c, uint64_t ph,
                                           uint32_t lane, uint32_t n_lanes,
                                           float *s) {
  const hbg__ktensor *in = &c->t[0], *out = &c->t[1];
  uint32_t d = hbg__k_last_dim(in), used = hbg__k_used(d);
  uint64_t si = in->strides[in->ndim - 1], so = out->strides[out->ndim - 1];
#if defined(HBG__K_SHFL_XOR)
  if (c->coop) {
    const float *pi = hbg__k_row(in, ph);
    float *po = hbg__k_row(out, ph);
    float leaf[HBG__K_WPARTS];
    for (uint32_t k = 0; k < HBG__K_WPARTS; k++) {
      uint32_t p = lane + HBG__K_WARP * k;
      leaf[k] = p < used ? hbg__k_max_part(pi, si, p, d) : 0.0f;
    }
    const float mx = hbg__k_warp_root(leaf, lane, used, 1);
    for (uint32_t k = 0; k < HBG__K_WPARTS; k++) {
      uint32_t p = lane + HBG__K_WARP * k;
      leaf[k] = p < used ? hbg__k_exp_part(pi, si, po, so, p, d, mx) : 0.0f;
    }
    const float inv = 1.0f / hbg__k_warp_root(leaf, lane, used, 0);
    for (uint32_t k = 0; k < HBG__K_WPARTS; k++)
      for (uint32_t j = lane + HBG__K_WARP * k; j < d; j += HBG__K_PARTS)
        po[j * so] = po[j * so] * inv;
    return;
  }
#endif
  uint64_t r = ph / HBG__K_SM_PHASES;
  uint32_t sub = (uint32_t)(ph - r * HBG__K_SM_PHASES);
  const float *pi = hbg__k_row(in, r);
  float *po = hbg__k_row(out, r);
  if (sub == 0) {
    for (uint32_t p = lane; p < used; p += n_lanes)
      s[p] = hbg__k_max_part(pi, si, p, d);
  } else if (sub == 1) {
    const float mx = hbg__k_tree_root(s, used, 1);
    for (uint32_t p = lane; p < used; p += n_lanes)
      s[HBG__K_PARTS + p] = hbg__k_exp_part(pi, si, po, so, p, d, mx);
  } else {
    const float inv = 1.0f / hbg__k_tree_root(s + HBG__K_PARTS, used, 0);
    for (uint32_t j = lane; j < d; j += n_lanes)
      po[j * so] = po[j * so] * inv;
  }
}

/* ROPE: unit, one pair (row, i < d/2). */
static inline HBG__KFN void hbg__k_rope(const hbg__kcall *c, uint32_t lane,
                                        uint32_t n_lanes) {
  const hbg__ktensor *x = &c->t[0], *ct = &c->t[1], *st = &c->t[2],
                     *out = &c->t[3];
  uint32_t d = hbg__k_last_dim(x), h = d / 2;
  uint64_t n = hbg__k_rows(x) * h, pos = c->sc[0];
  uint64_t sx = x->strides[x->ndim - 1], so = out->strides[out->ndim - 1];
  const float *pc = (const float *)ct->data + pos * ct->strides[0];
  const float *ps = (const float *)st->data + pos * st->strides[0];
  uint64_t sc = ct->strides[1], ss = st->strides[1], row = UINT64_MAX;
  const float *pi = NULL;
  float *po = NULL;
  for (uint64_t u = lane; u < n; u += n_lanes) {
    uint64_t r = u / h;
    uint32_t i = (uint32_t)(u - r * h);
    if (r != row) {
      row = r;
      pi = hbg__k_row(x, r);
      po = hbg__k_row(out, r);
    }
    float x0 = pi[i * sx], x1 = pi[(i + h) * sx];
    float cv = pc[i * sc], sv = ps[i * ss];
    po[i * so] = x0 * cv - x1 * sv;
    po[(i + h) * so] = x1 * cv + x0 * sv;
  }
}

/* GEMV: unit, one output row; its dot product in four partials
 * l = j mod 4 over whole groups of four, the tail into l0, then
 * (l0 + l1) + (l2 + l3); a bf16 W's elements widened to f32 as read. The warp path: a row on four lanes, lane q of
 * them partial l_q, joined through two shuffles (eight rows at a time). */
static inline HBG__KFN float hbg__k_gemv_part(const float *row, uint64_t sw1,
                                              const float *px, uint64_t sx,
                                              uint32_t k, uint32_t q) {
  float l = 0.0f;
  uint32_t j = 0;
  if (sw1 == 1 && sx == 1) {
    for (; j + 4 <= k; j += 4)
      l = l + row[j + q] * px[j + q];
  } else {
    for (; j + 4 <= k; j += 4)
      l = l + row[(j + q) * sw1] * px[(j + q) * sx];
  }
  if (q == 0)
    for (; j < k; j++)
      l = l + row[j * sw1] * px[j * sx];
  return l;
}

/* The same partial on a bf16 row: each W element widened, then the same
 * products and sums in the same order. */
static inline HBG__KFN float hbg__k_gemv_part_bf16(const uint16_t *row,
                                                   uint64_t sw1,
                                                   const float *px,
                                                   uint64_t sx, uint32_t k,
                                                   uint32_t q) {
  float l = 0.0f;
  uint32_t j = 0;
  if (sw1 == 1 && sx == 1) {
    for (; j + 4 <= k; j += 4)
      l = l + hbg__k_bf16_f32(row[j + q]) * px[j + q];
  } else {
    for (; j + 4 <= k; j += 4)
      l = l + hbg__k_bf16_f32(row[(j + q) * sw1]) * px[(j + q) * sx];
  }
  if (q == 0)
    for (; j < k; j++)
      l = l + hbg__k_bf16_f32(row[j * sw1]) * px[j * sx];
  return l;
}

/* Partial q of row i of W, f32 or bf16 (addressed in its own elements). */
static inline HBG__KFN float hbg__k_gemv_row(const hbg__ktensor *w,
                                             uint32_t i, const float *px,
                                             uint64_t sx, uint32_t q) {
  const uint64_t off = i * (uint64_t)w->strides[0], sw1 = w->strides[1];
  const uint32_t k = w->shape[1];
  if (w->dtype == HBG_IMG_DTYPE_BF16)
    return hbg__k_gemv_part_bf16((const uint16_t *)w->data + off, sw1, px, sx,
                                 k, q);
  return hbg__k_gemv_part((const float *)w->data + off, sw1, px, sx, k, q);
}

/* All four partials of row i in one pass over it (a lane that owns the
 * whole row): each partial gets exactly the products and sums, in the
 * same order, as hbg__k_gemv_row gives it, so the result is the same bits;
 * one pass reads the row once, and the four independent sums are what a
 * CPU's 4-wide vector add does (no reassociation, no contraction). */
#define HBG__K_GEMV_ROW4(T, WID)                                               \
  do {                                                                         \
    const T *row = (const T *)w->data + off;                                   \
    if (sw1 == 1 && sx == 1) {                                                 \
      for (; j + 4 <= k; j += 4) {                                             \
        l0 = l0 + WID(row[j]) * px[j];                                         \
        l1 = l1 + WID(row[j + 1]) * px[j + 1];                                 \
        l2 = l2 + WID(row[j + 2]) * px[j + 2];                                 \
        l3 = l3 + WID(row[j + 3]) * px[j + 3];                                 \
      }                                                                        \
    } else {                                                                   \
      for (; j + 4 <= k; j += 4) {                                             \
        l0 = l0 + WID(row[j * sw1]) * px[j * sx];                              \
        l1 = l1 + WID(row[(j + 1) * sw1]) * px[(j + 1) * sx];                  \
        l2 = l2 + WID(row[(j + 2) * sw1]) * px[(j + 2) * sx];                  \
        l3 = l3 + WID(row[(j + 3) * sw1]) * px[(j + 3) * sx];                  \
      }                                                                        \
    }                                                                          \
    for (; j < k; j++)                                                         \
      l0 = l0 + WID(row[j * sw1]) * px[j * sx];                                \
  } while (0)
#define HBG__K_F32_ID(v) (v)

static inline HBG__KFN float hbg__k_gemv_row4(const hbg__ktensor *w,
                                              uint32_t i, const float *px,
                                              uint64_t sx) {
  const uint64_t off = i * (uint64_t)w->strides[0], sw1 = w->strides[1];
  const uint32_t k = w->shape[1];
  float l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f;
  uint32_t j = 0;
  if (w->dtype == HBG_IMG_DTYPE_BF16)
    HBG__K_GEMV_ROW4(uint16_t, hbg__k_bf16_f32);
  else
    HBG__K_GEMV_ROW4(float, HBG__K_F32_ID);
  return (l0 + l1) + (l2 + l3);
}
#undef HBG__K_GEMV_ROW4
#undef HBG__K_F32_ID

static inline HBG__KFN void hbg__k_gemv(const hbg__kcall *c, uint32_t lane,
                                        uint32_t n_lanes) {
  const hbg__ktensor *w = &c->t[0], *x = &c->t[1], *y = &c->t[2];
  uint32_t n = w->shape[0];
  uint64_t sx = 0, sy = 0;
  hbg__k_lin_stride(x, &sx);
  hbg__k_lin_stride(y, &sy);
  const float *px = (const float *)x->data;
  float *py = (float *)y->data;
  int scaled = c->ns != 0;
  float alpha = scaled ? hbg__k_f32(c->sc[0]) : 0.0f;
#if defined(HBG__K_SHFL_XOR)
  if (c->coop) {
    const uint32_t q = lane % 4u;
    for (uint32_t r0 = 0; r0 < n; r0 += HBG__K_WARP / 4u) {
      const uint32_t i = r0 + lane / 4u; /* every lane shuffles */
      float l = i < n ? hbg__k_gemv_row(w, i, px, sx, q) : 0.0f;
      float o = HBG__K_SHFL_XOR(l, 1u);
      const float l01 = (q & 1u) ? o + l : l + o; /* l0 + l1, l2 + l3 */
      o = HBG__K_SHFL_XOR(l01, 2u);
      const float acc = (q & 2u) ? o + l01 : l01 + o;
      if (q == 0 && i < n)
        py[i * sy] = scaled ? acc * alpha : acc;
    }
    return;
  }
#endif
  for (uint32_t i = lane; i < n; i += n_lanes) {
    const float acc = hbg__k_gemv_row4(w, i, px, sx);
    py[i * sy] = scaled ? acc * alpha : acc;
  }
}

/* ATTN's partials over one head's positions p = q mod 256: the scores
 * s_p = (sum_j q[j] k_p[j], ascending j) * scale into sc[p] and their
 * maximum; then e_p = e^(s_p - m) into sc[p] and their sum, ascending p. */
static inline HBG__KFN float hbg__k_attn_scores(const hbg__kcall *c,
                                                uint32_t h, uint32_t p0,
                                                uint32_t len, float *sc) {
  const hbg__kattn *a = &c->attn;
  const float *q = (const float *)c->t[0].data + h * a->sq0;
  const float *kh =
      (const float *)c->t[1].data + (h / (a->hq / a->hk)) * a->sk0;
  float m = HBG__K_NEG_INF;
  for (uint32_t p = p0; p < len; p += HBG__K_PARTS) {
    float dot = 0.0f;
    for (uint32_t j = 0; j < a->d; j++)
      dot = dot + q[j * a->sq1] * kh[p * a->sk1 + j * a->sk2];
    float v = dot * c->scale;
    sc[p] = v;
    if (v > m)
      m = v;
  }
  return m;
}

static inline HBG__KFN float hbg__k_attn_exp(uint32_t p0, uint32_t len,
                                             float *sc, float mx) {
  float acc = 0.0f;
  for (uint32_t p = p0; p < len; p += HBG__K_PARTS) {
    float e = hbg__k_expf(sc[p] - mx);
    sc[p] = e;
    acc = acc + e;
  }
  return acc;
}

/* out[j] = (sum_p e_p v_p[j], ascending p) * inv, unit: one j. */
static inline HBG__KFN void hbg__k_attn_out(const hbg__kcall *c, uint32_t h,
                                            uint32_t len, const float *sc,
                                            float inv, uint32_t lane,
                                            uint32_t n_lanes) {
  const hbg__kattn *a = &c->attn;
  const float *vh =
      (const float *)c->t[2].data + (h / (a->hq / a->hk)) * a->sv0;
  float *o = (float *)c->t[3].data + h * a->so0;
  for (uint32_t j = lane; j < a->d; j += n_lanes) {
    float acc = 0.0f;
    for (uint32_t p = 0; p < len; p++)
      acc = acc + sc[p] * vh[p * a->sv1 + j * a->sv2];
    o[j * a->so1] = acc * inv;
  }
}

/* ATTN, per query head h (kv head h / (Hq / Hk)), length L: phase 0, the
 * scores into s[512 + p] and partial maxima over p = q mod 256 into s[q];
 * phase 1, the max tree's root m (every lane), e_p into s[512 + p] and
 * partial sums into s[256 + q]; phase 2, the sum tree's root, the output.
 * The warp path: one phase (the lanes meet once, before the output reads
 * every lane's e_p). */
static inline HBG__KFN void hbg__k_attn(const hbg__kcall *c, uint64_t ph,
                                        uint32_t lane, uint32_t n_lanes,
                                        float *s) {
  uint32_t len = (uint32_t)c->sc[0], used = hbg__k_used(len);
  float *sc = s + 2 * HBG__K_PARTS;
#if defined(HBG__K_SHFL_XOR)
  if (c->coop) {
    const uint32_t h = (uint32_t)ph;
    float leaf[HBG__K_WPARTS];
    for (uint32_t k = 0; k < HBG__K_WPARTS; k++) {
      uint32_t q = lane + HBG__K_WARP * k;
      leaf[k] = q < used ? hbg__k_attn_scores(c, h, q, len, sc) : 0.0f;
    }
    const float mx = hbg__k_warp_root(leaf, lane, used, 1);
    for (uint32_t k = 0; k < HBG__K_WPARTS; k++) {
      uint32_t q = lane + HBG__K_WARP * k;
      leaf[k] = q < used ? hbg__k_attn_exp(q, len, sc, mx) : 0.0f;
    }
    const float inv = 1.0f / hbg__k_warp_root(leaf, lane, used, 0);
    HBG__K_WARP_SYNC(); /* every lane's e_p before the output reads them */
    hbg__k_attn_out(c, h, len, sc, inv, lane, n_lanes);
    return;
  }
#endif
  uint32_t h = (uint32_t)(ph / HBG__K_SM_PHASES);
  uint32_t sub = (uint32_t)(ph - (uint64_t)h * HBG__K_SM_PHASES);
  if (sub == 0) {
    for (uint32_t q = lane; q < used; q += n_lanes)
      s[q] = hbg__k_attn_scores(c, h, q, len, sc);
  } else if (sub == 1) {
    const float mx = hbg__k_tree_root(s, used, 1);
    for (uint32_t q = lane; q < used; q += n_lanes)
      s[HBG__K_PARTS + q] = hbg__k_attn_exp(q, len, sc, mx);
  } else {
    const float inv = 1.0f / hbg__k_tree_root(s + HBG__K_PARTS, used, 0);
    hbg__k_attn_out(c, h, len, sc, inv, lane, n_lanes);
  }
}

/* ------------------------------------------------------------------ */
/* Entry points                                                        */
/* ------------------------------------------------------------------ */

/* Once per call, before its phases (by every lane, or once for all). */
static inline HBG__KFN void hbg__k_prepare(hbg__kcall *c) {
  if (c->kernel != HBG__K_ATTN || hbg__k_attn_dims(c->t, &c->attn) != 0)
    return;
  c->scale = c->ns > 1 ? hbg__k_f32(c->sc[1])
                       : 1.0f / HBG__K_SQRTF((float)c->attn.d);
}

/* Phases of a call (0 for NOP). */
static inline HBG__KFN uint64_t hbg__k_phases(const hbg__kcall *c) {
  switch (c->kernel) {
  case HBG__K_NOP:
    return 0;
  case HBG__K_RMSNORM:
    return hbg__k_rows(&c->t[0]) * (c->coop ? 1u : HBG__K_RMS_PHASES);
  case HBG__K_SOFTMAX:
    return hbg__k_rows(&c->t[0]) * (c->coop ? 1u : HBG__K_SM_PHASES);
  case HBG__K_ATTN:
    return (uint64_t)c->attn.hq * (c->coop ? 1u : HBG__K_SM_PHASES);
  default:
    return 1;
  }
}

/* Floats of scratch a call needs (shared by its lanes; from the tensor
 * shapes alone, so an executor can size it before any scalar is known). */
static inline HBG__KFN uint64_t hbg__k_scratch_floats(const hbg__kcall *c) {
  hbg__kattn a;
  switch (c->kernel) {
  case HBG__K_RMSNORM:
    return HBG__K_PARTS;
  case HBG__K_SOFTMAX:
    return 2 * HBG__K_PARTS;
  case HBG__K_ATTN:
    return hbg__k_attn_dims(c->t, &a) == 0 ? 2 * HBG__K_PARTS + a.t : 0;
  default:
    return 0;
  }
}

/* Lane `lane` of n_lanes (>= 1) does its share of phase ph. */
static inline HBG__KFN void hbg__k_phase(const hbg__kcall *c, uint64_t ph,
                                         uint32_t lane, uint32_t n_lanes,
                                         float *scratch) {
  switch (c->kernel) {
  case HBG__K_COPY:
  case HBG__K_ADD:
  case HBG__K_MUL:
  case HBG__K_SCALE:
  case HBG__K_SILU_MUL:
  case HBG__K_FILL:
    hbg__k_ew(c, lane, n_lanes);
    return;
  case HBG__K_RMSNORM:
    hbg__k_rmsnorm(c, ph, lane, n_lanes, scratch);
    return;
  case HBG__K_SOFTMAX:
    hbg__k_softmax(c, ph, lane, n_lanes, scratch);
    return;
  case HBG__K_ROPE:
    hbg__k_rope(c, lane, n_lanes);
    return;
  case HBG__K_GEMV:
    hbg__k_gemv(c, lane, n_lanes);
    return;
  case HBG__K_ATTN:
    hbg__k_attn(c, ph, lane, n_lanes, scratch);
    return;
  default:
    return;
  }
}

#if defined(__CUDACC__)
/* One call run by the calling CTA (every thread of it calls this). */
static inline __device__ void hbg__k_run_cta(const hbg__kcall *call,
                                             float *scratch) {
  hbg__kcall c = *call;
  hbg__k_prepare(&c);
  uint64_t n = hbg__k_phases(&c);
  for (uint64_t ph = 0; ph < n; ph++) {
    hbg__k_phase(&c, ph, threadIdx.x, blockDim.x, scratch);
    __syncthreads();
  }
}
#endif

#endif
