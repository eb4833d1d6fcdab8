/*
 * hbg user kernels -- the function contract, for kernel authors.
 *
 * A user kernel (id >= HBG_KERNEL_USER_MIN, hbg.h) written to this contract
 * runs on the sim's CPU workers and inside hbg's device executor on a GPU
 * from ONE source: cc builds it for the sim (registered with
 * hbg_kernel_register's `fn`), nvcc -rdc builds the same text into
 * relocatable device code that hbg links with its executor at run time
 * (`image` and `symbol`). docs/USER_KERNELS.md has the build commands.
 *
 * Freestanding: includes only <stdint.h> and <stddef.h>; compiles as C11,
 * C++ and CUDA device code.
 *
 * The lane model (the built-in kernels' own, src/kernels/kern_src.h):
 *   - A call is a sequence of phases. The executor runs every phase with
 *     n_lanes cooperating lanes and puts a barrier between phases: what a
 *     lane wrote in phase p (outputs or scratch) is seen by every lane of
 *     the call in phase p + 1. There is no barrier inside a phase.
 *   - A lane does its share of phase `phase`: the function is called once
 *     per (phase, lane). On the GPU the lanes are one executor worker's
 *     threads: a warp (32) by default, a CTA's (blockDim.x, 256 on an
 *     H200) with the device option worker=cta; on the stand-in driver a
 *     CTA thread's HBG_MOCK_CUDA_LANES (4 by default) and on the sim the
 *     device's `lanes=` (1 by default), run one after another.
 *   - Results must not depend on n_lanes or on the order lanes run in:
 *     split the work into units whose arithmetic is fixed (an output
 *     element, a row, one of a fixed number of reduction partials, one node
 *     of a fixed reduction tree) and let lanes choose only which units they
 *     compute (unit u by lane u % n_lanes, say). Then the CPU and the GPU
 *     give the same bits, provided floating point is rounded per operation
 *     on both: cc -ffp-contract=off (SSE math), nvcc -fmad=false, no fast
 *     math.
 *   - The number of phases is fixed at registration: `phases` per call, or
 *     `phases` per row of one tensor argument (rows = elements / last dim),
 *     the phase index then running over rows * phases (row = phase /
 *     phases).
 *   - `scratch` is scratch_floats floats (registration) shared by the
 *     call's lanes, NULL when 0. Its contents are undefined when the first
 *     phase starts: write before reading.
 *   - Return 0, or a negative hbg error code (HBG_E_*) that fails the item:
 *     the bind's device status names the entry and node, and no later phase
 *     of the call runs. A positive value counts as HBG_E_KERNEL. When lanes
 *     of a phase return different errors, the call fails with the most
 *     negative of them (the same on the CPU and the GPU).
 *   - Do not synchronise lanes yourself (no __syncthreads, no shared
 *     memory): the executor owns the worker's barriers.
 */
#ifndef HBG_HBG_KERNEL_H
#define HBG_HBG_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HBG_KERNEL_MAX_DIMS 4

/* One tensor argument of a call: element 0's address (device memory on
 * a GPU, host memory on the sim) and its layout. Strides are in elements;
 * shape[i] and strides[i] for i >= ndim are 0. Only the tensor's extent
 * from data belongs to the call. */
typedef struct hbg_kernel_tensor {
  void *data;
  uint32_t dtype; /* hbg_dtype */
  uint32_t ndim;  /* 1..HBG_KERNEL_MAX_DIMS */
  uint32_t mode;  /* HBG_ACCESS_IN / _OUT / _INOUT */
  uint32_t shape[HBG_KERNEL_MAX_DIMS];
  uint32_t strides[HBG_KERNEL_MAX_DIMS];
} hbg_kernel_tensor;

/* One call, as the task or graph node that made it: the kernel id, the
 * tensors in argument order and the scalars (u64 each, hbg.h's encoding:
 * integers as themselves, f32 as its bits in the low 32 bits). Read-only
 * for the kernel, and the same for every phase and lane of the call. */
typedef struct hbg_kernel_call {
  uint32_t kernel;
  uint32_t n_tensors;
  uint32_t n_scalars;
  uint32_t reserved;
  const hbg_kernel_tensor *t;
  const uint64_t *scalars;
} hbg_kernel_call;

/* The one signature of a lane-model kernel. */
typedef int (*hbg_kernel_lane_fn)(const hbg_kernel_call *call, uint64_t phase,
                                  uint32_t lane, uint32_t n_lanes,
                                  float *scratch);

/* Declares a kernel function so that hbg can find it by name: an
 * `extern "C" __device__` function under nvcc, an exported C function for
 * the host build (cc). Write the kernel as
 *
 *   HBG_KERNEL_FN int my_kernel(const hbg_kernel_call *call, uint64_t phase,
 *                               uint32_t lane, uint32_t n_lanes,
 *                               float *scratch) { ... }
 */
#if defined(__CUDACC__)
#define HBG_KERNEL_FN extern "C" __device__
#define HBG_KERNEL_INLINE static inline __host__ __device__
#elif defined(__cplusplus)
#define HBG_KERNEL_FN extern "C" __attribute__((visibility("default")))
#define HBG_KERNEL_INLINE static inline
#else
#define HBG_KERNEL_FN __attribute__((visibility("default")))
#define HBG_KERNEL_INLINE static inline
#endif

/* The f32 a scalar carries in its low 32 bits. */
HBG_KERNEL_INLINE float hbg_kernel_scalar_f32(uint64_t s) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float((uint32_t)s);
#else
  uint32_t u = (uint32_t)s;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* Elements of t. */
HBG_KERNEL_INLINE uint64_t hbg_kernel_numel(const hbg_kernel_tensor *t) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

/* Rows of t: its elements over its last dimension (the rows a per-row
 * phase count counts). */
HBG_KERNEL_INLINE uint64_t hbg_kernel_rows(const hbg_kernel_tensor *t) {
  return t->ndim ? hbg_kernel_numel(t) / t->shape[t->ndim - 1] : 0;
}

/* Offset in elements of element i, counting in row-major order. */
HBG_KERNEL_INLINE uint64_t hbg_kernel_offset(const hbg_kernel_tensor *t,
                                             uint64_t i) {
  uint64_t off = 0;
  for (uint32_t d = t->ndim; d-- > 0;) {
    off += (i % t->shape[d]) * t->strides[d];
    i /= t->shape[d];
  }
  return off;
}

/* Offset in elements of row r's element 0 (rows in row-major order of the
 * leading dimensions). */
HBG_KERNEL_INLINE uint64_t hbg_kernel_row_offset(const hbg_kernel_tensor *t,
                                                 uint64_t r) {
  uint64_t off = 0;
  for (uint32_t d = t->ndim ? t->ndim - 1 : 0; d-- > 0;) {
    off += (r % t->shape[d]) * t->strides[d];
    r /= t->shape[d];
  }
  return off;
}

#ifdef __cplusplus
}
#endif

#endif
