/*
 * Built-in kernels (internal). Their code is kern_src.h, one source in the
 * common subset of C11, C++17 and CUDA (the GPU compiles the same text);
 * this header is the CPU side: the sim device's workers and the workloads'
 * host reference call the very same functions, so the sim's results equal
 * the reference bit for bit. The signature table and hbg__kernel_check are
 * also the host's submit- and record-time checks (hbg__task_kernel_check),
 * so both sides agree on what a kernel takes.
 *
 * Every tensor is float32 (HBG_DTYPE_F32) except three weights that may
 * be bfloat16 (HBG_DTYPE_BF16): GEMV's W, RMSNORM's w and COPY's input
 * (COPY's output stays f32: a bf16 row read out widened). A bf16 element
 * widens to f32 exactly (its bits shifted up 16) where the kernel reads
 * it, and the kernel then runs in the order below on f32 values, so its
 * result equals, bit for bit, the f32 kernel on the weight widened
 * beforehand (on the sim, the host reference and the GPU alike). Any other
 * dtype, f16 and the integers included, is refused (NOP excepted). Each
 * tensor has 1..HBG_MAX_DIMS dims, no zero dim, strides in elements of its
 * own dtype (hbg_dtype_size: 4 for f32, 2 for bf16), at most
 * HBG__KERNEL_MAX_NUMEL elements. Inputs
 * may broadcast (stride 0); outputs may not. "Flat" means the tensor is read in
 * its own row-major logical order, so two tensors only need the same element
 * count, not the same shape. Inputs need HBG_ACCESS_IN in their mode,
 * outputs HBG_ACCESS_OUT. Outputs must not overlap inputs, except that the
 * element-wise kernels and ROPE may run in place (output == input, same
 * layout). f32 scalars travel as the IEEE bits in the low 32 bits of the
 * u64.
 *
 * Results do not depend on the number of lanes (threads of a CTA) that run
 * a kernel: every sum runs in the fixed order given below, the same for 1
 * lane and for 256. A "tree reduction" is: 256 partials, partial p the sum
 * (or maximum) of the values v_i with i = p mod 256 in ascending i (empty
 * partials 0, or -inf for a maximum); then 8 levels, w = 128, 64, ..., 1,
 * s[p] = s[p] + s[p + w] (maximum: the greater, s[p] on ties and NaN
 * compares); the result is s[0] (partials past the element count are
 * empty, +0 or -inf, and change nothing: kern_src.h skips them). exp is
 * kern_src.h's hbg__k_expf (no libm),
 * sqrt the correctly rounded IEEE one; no operation is contracted (no FMA).
 *
 *   NOP      any tensors (any dtype), any scalars; does nothing
 *   COPY     in, out                    out = in              (flat)
 *            (in f32 or bf16, out f32)
 *   ADD      a, b, out                  out = a + b           (flat)
 *   MUL      a, b, out                  out = a * b           (flat)
 *   SCALE    in, out; s0 = f32 alpha    out = in * alpha      (flat)
 *   RMSNORM  in[rows][d], w[d], out[rows][d]; s0 = f32 eps
 *            out = in * (1 / sqrt(ss / d + eps)) * w, per row (rows = the
 *            leading dims; w flat, out the same shape as in); ss = the
 *            tree reduction of in[j]^2. w f32 or bf16.
 *   GEMV     W[n][k], x[k], y[n]; optional s0 = f32 alpha
 *            y[i] = (sum_j W[i][j] * x[j]) [* alpha]  (a dequant scale)
 *            (x and y flat, each of one constant stride). One lane per
 *            row; the sum runs in four partials l = j % 4 over whole
 *            groups of four, the tail into l0, then (l0 + l1) + (l2 + l3).
 *            W f32 or bf16; x and y f32.
 *   ROPE     x[rows][d], cos[P][d/2], sin[P][d/2], out[rows][d];
 *            s0 = position p < P. Rotate-half (NeoX/Qwen) on each row:
 *            out[i] = x[i] c[i] - x[i+d/2] s[i],
 *            out[i+d/2] = x[i+d/2] c[i] + x[i] s[i]   (d even)
 *   SILU_MUL a, b, out                  out = a / (1 + exp(-a)) * b  (flat)
 *   SOFTMAX  in[rows][d], out[rows][d]  softmax over the last dim, per row:
 *            m = tree maximum of in; out = exp(in - m) * (1 / the tree sum
 *            of those exps)
 *   ATTN     q[Hq][D], K[Hk][T][D], V[Hk][T][D], out[Hq][D] (ndim 1 / 2
 *            means one head); s0 = length L (1 <= L <= T), optional s1 =
 *            f32 scale (default 1/sqrt(D)). Single-query attention of
 *            head h over K/V head h / (Hq / Hk), positions [0, L):
 *            s_p = (sum_j q[j] K[p][j], ascending j) * scale; m = tree
 *            maximum of s; e_p = exp(s_p - m); out[j] = (sum_p e_p V[p][j],
 *            ascending p) * (1 / tree sum of e). Hq * T * D at most
 *            HBG__KERNEL_MAX_WORK.
 *   FILL     out; s0 = f32 value        out = value
 */
#ifndef HBG_KERNELS_KERNELS_H
#define HBG_KERNELS_KERNELS_H

#include <stdint.h>

#include <hbg/hbg.h>

#include "kernels/kern_src.h"

/* Fill k's layout (data NULL) from metadata fields. */
void hbg__ktensor_meta(hbg__ktensor *k, uint32_t dtype, uint32_t ndim,
                       uint32_t mode, const uint32_t *shape,
                       const uint32_t *strides);
/* hbg__ktensor_meta from any record with dtype, ndim, mode, shape and
 * strides fields (the image formats' tensor, signature and window records
 * share them). */
#define HBG__KTENSOR_META(k, r)                                                \
  hbg__ktensor_meta((k), (r)->dtype, (r)->ndim, (r)->mode, (r)->shape,         \
                    (r)->strides)

/* Fill k from a tensor's metadata and element-0 pointer. */
void hbg__ktensor_from(hbg__ktensor *k, const hbg_tensor *t, void *data);

/* Bytes from element 0 to one past the last element (any dtype), with
 * overflow checks. @return 0 when the metadata breaks the rules above. */
uint64_t hbg__ktensor_extent(const hbg__ktensor *k);

/* @return "gemv" style name, or NULL for an unknown id. */
const char *hbg__kernel_name(uint32_t kernel);

/* Check argument counts, dtypes, modes and shapes (metadata only; data may
 * be NULL). Value checks that need the scalars happen in run.
 * @return 0 or HBG_E_KERNEL. */
int hbg__kernel_check(uint32_t kernel, const hbg__ktensor *t, uint32_t nt,
                      uint32_t ns);

/* hbg__kernel_check on a task's arguments as the host sees them (the
 * submit and record paths): arity, dtypes, modes and shapes. Scalars count
 * only (their values may be boundary scalars, known at run). On failure the
 * thread's hbg_last_error() message says, after "who: ", what is wrong.
 * @return 0 or HBG_E_KERNEL. */
int hbg__task_kernel_check(const hbg_task *t, const char *who);

/* The rule that outputs do not overlap inputs, on a task whose tensors and
 * signature passed their checks (the submit and record paths). Outputs and
 * inputs come from the signature table (kdescs' output positions); a user
 * kernel's outputs are its arguments with mode OUT or INOUT, its inputs
 * those with mode IN. Two tensors overlap when the byte ranges [element 0,
 * extent) intersect (a strided view counts its whole extent, holes
 * included). A kernel marked in-place capable (the element-wise ones and
 * ROPE) may have its output be the identical tensor as an input (address,
 * offset, dtype, shape and strides); a user kernel never. Arguments with
 * addr 0 (new inner outputs) are skipped; NOP is never checked. ext, when
 * not NULL, holds each argument's hbg_tensor_extent (the submit path has
 * computed them already). On failure hbg_last_error() names the call and
 * the task ("who (what id): "), the kernel, the two argument indices and
 * the overlapping byte range.
 * @return 0 or HBG_E_KERNEL. */
int hbg__task_overlap_check(const hbg_task *t, const uint64_t *ext,
                            const char *who, const char *what, uint32_t id);
/* @return non-zero for a built-in kernel whose output may be one of its
 * inputs (the identical tensor): the element-wise kernels and ROPE. */
int hbg__kernel_in_place(uint32_t kernel);

/* The scratch floats one CTA needs to run the task's call (kern_src.h's
 * hbg__k_scratch_floats, from the metadata alone): 0 for a kernel without
 * scratch, a user kernel, or arguments hbg__kernel_check rejects. The
 * host's sizing of the cuda executor's block (hbg_dev_launch_desc's
 * kernel_scratch). */
uint64_t hbg__task_scratch_floats(const hbg_task *t);

/* Check everything (as check, plus scalar values) and run the kernel on
 * the calling thread, its phases one after another and in each the lanes
 * 0..n_lanes-1 in turn (kern_src.h); the result is the same for every
 * n_lanes >= 1. *phases (when not NULL) gets the phases run. @return 0,
 * HBG_E_KERNEL (nothing written then), HBG_E_NOMEM (ATTN's scratch over
 * 4096 floats could not be allocated) or HBG_E_INVAL (n_lanes 0).
 * Thread-safe. */
int hbg__kernel_run_lanes(uint32_t kernel, const hbg__ktensor *t, uint32_t nt,
                          const uint64_t *scalars, uint32_t ns,
                          uint32_t n_lanes, uint64_t *phases);

/* hbg__kernel_run_lanes with one lane (the fastest on a CPU). */
int hbg__kernel_run(uint32_t kernel, const hbg__ktensor *t, uint32_t nt,
                    const uint64_t *scalars, uint32_t ns);

/* f32 <-> scalar bits. */
uint64_t hbg__kernel_f32(float f);
float hbg__kernel_to_f32(uint64_t v);

/* bfloat16 <-> f32 on the host (kern_src.h's hbg__k_f32_bf16 and
 * hbg__k_bf16_f32, the kernels' own widening): for the workloads and
 * checkpoint loaders that write bf16 weights and read them back.
 * from_f32 rounds to nearest, ties to even; finite values past the bf16
 * range become an infinity of their sign, infinities stay, a NaN stays a
 * quiet NaN of its sign. to_f32 is exact (the 16 bits shifted up), so
 * hbg__bf16_from_f32(hbg__bf16_to_f32(b)) == b for every b that is not a
 * NaN. Thread-safe. */
uint16_t hbg__bf16_from_f32(float f);
float hbg__bf16_to_f32(uint16_t b);

#endif
