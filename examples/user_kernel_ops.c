/*
 * Two user kernels, one source for the CPU and the GPU (hbg_kernel.h's
 * lane model). The same text builds three ways:
 *
 *   cc     into the program that registers it on the sim (fn), or into a
 *          shared object;
 *   nvcc   -x cu -rdc=true -ptx -arch=sm_90 -fmad=false into PTX that
 *          hbg_kernel_register links with hbg's executor on a GPU
 *          (symbol "uk_rms_scale", "uk_axpby"; docs/USER_KERNELS.md).
 *
 * Both give the same bits: every float operation is rounded on its own
 * (cc -ffp-contract=off, nvcc -fmad=false), and no result depends on how
 * many lanes run a phase or in which order.
 */
#include "user_kernel_ops.h"

#if defined(__CUDA_ARCH__)
#define UK_SQRTF(x) __fsqrt_rn(x) /* correctly rounded, like the CPU's */
#else
#define UK_SQRTF(x) __builtin_sqrtf(x)
#endif

/* Element j of row r of t. */
#define UK_AT(t, r, j)                                                         \
  ((float *)(t)->data + hbg_kernel_row_offset((t), (r)) +                      \
   (uint64_t)(j) * (t)->strides[(t)->ndim - 1])

/* RMS scale, per row of x (d = x's last dim): out = x / sqrt(mean(x^2) +
 * eps) * w. Per row UK_RMS_PHASES phases: 0, partial p of UK_PARTS = the
 * sum of x[j]^2 over j = p mod UK_PARTS, ascending j; 1..UK_LEVELS, the
 * tree s[i] += s[i + width] for width = UK_PARTS / 2, ..., 1; last, the
 * output. Unit of work: a partial, a tree node, an element. */
HBG_KERNEL_FN int uk_rms_scale(const hbg_kernel_call *call, uint64_t phase,
                               uint32_t lane, uint32_t n_lanes,
                               float *scratch) {
  if (call->n_tensors != 3 || call->n_scalars != 1 || !scratch)
    return -20; /* HBG_E_KERNEL */
  const hbg_kernel_tensor *x = &call->t[0], *w = &call->t[1],
                          *out = &call->t[2];
  uint32_t d = x->shape[x->ndim - 1];
  uint64_t row = phase / UK_RMS_PHASES;
  uint32_t sub = (uint32_t)(phase % UK_RMS_PHASES);
  if (sub == 0) {
    for (uint32_t p = lane; p < UK_PARTS; p += n_lanes) {
      float acc = 0.0f;
      for (uint32_t j = p; j < d; j += UK_PARTS) {
        float v = *UK_AT(x, row, j);
        acc = acc + v * v;
      }
      scratch[p] = acc;
    }
  } else if (sub <= UK_LEVELS) {
    uint32_t width = UK_PARTS >> sub;
    for (uint32_t i = lane; i < width; i += n_lanes)
      scratch[i] = scratch[i] + scratch[i + width];
  } else {
    float eps = hbg_kernel_scalar_f32(call->scalars[0]);
    float inv = 1.0f / UK_SQRTF(scratch[0] / (float)d + eps);
    const float *pw = (const float *)w->data;
    for (uint32_t j = lane; j < d; j += n_lanes)
      *UK_AT(out, row, j) = *UK_AT(x, row, j) * inv * pw[j * w->strides[0]];
  }
  return 0;
}

/* out = alpha * a + beta * b, element-wise in row-major order (the three
 * of one element count, any layout); one phase, unit an element. */
HBG_KERNEL_FN int uk_axpby(const hbg_kernel_call *call, uint64_t phase,
                           uint32_t lane, uint32_t n_lanes, float *scratch) {
  (void)phase;
  (void)scratch;
  if (call->n_tensors != 3 || call->n_scalars != 2)
    return -20; /* HBG_E_KERNEL */
  const hbg_kernel_tensor *a = &call->t[0], *b = &call->t[1],
                          *out = &call->t[2];
  float alpha = hbg_kernel_scalar_f32(call->scalars[0]);
  float beta = hbg_kernel_scalar_f32(call->scalars[1]);
  const float *pa = (const float *)a->data, *pb = (const float *)b->data;
  float *po = (float *)out->data;
  uint64_t n = hbg_kernel_numel(out);
  for (uint64_t i = lane; i < n; i += n_lanes)
    po[hbg_kernel_offset(out, i)] = alpha * pa[hbg_kernel_offset(a, i)] +
                                    beta * pb[hbg_kernel_offset(b, i)];
  return 0;
}
