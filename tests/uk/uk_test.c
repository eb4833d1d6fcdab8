/*
 * User kernels for the executor's tests. One source for the stand-in's
 * host build (a shared object HBG_MOCK_USER_LIB names) and for the GPU
 * (nvcc -rdc -ptx, registered with hbg_kernel_register), like
 * examples/user_kernel_ops.c.
 *
 * uk_sleep [x, out]; s0 = milliseconds: lane 0 waits that long (the
 * device's clock on a GPU, a sleep on the host), then every lane copies x
 * to out. One phase.
 *
 * uk_fail [x, out]; s0 = a lane, s1 = a phase: in phase p every lane
 * writes out[i] = x[i] + p for its elements i (lane, lane + n_lanes, ...),
 * except that lane s0 fails in phase s1 (HBG_E_KERNEL) before writing:
 * one lane of many fails, the others go on to the phase's barrier.
 * UK_FAIL_PHASES phases.
 *
 * Their ids and registration: uk_test.h.
 */
#include <hbg/hbg_kernel.h>

#if !defined(__CUDA_ARCH__)
#include <time.h>
#endif

HBG_KERNEL_FN int uk_sleep(const hbg_kernel_call *call, uint64_t phase,
                           uint32_t lane, uint32_t n_lanes, float *scratch);

HBG_KERNEL_FN int uk_sleep(const hbg_kernel_call *call, uint64_t phase,
                           uint32_t lane, uint32_t n_lanes, float *scratch) {
  (void)phase;
  (void)scratch;
  if (call->n_tensors != 2 || call->n_scalars != 1)
    return -20; /* HBG_E_KERNEL */
  const uint64_t ms = call->scalars[0];
  if (lane == 0) {
#if defined(__CUDA_ARCH__)
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
      __nanosleep(1000);
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ms * 1000000u);
#else
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
#endif
  }
  const hbg_kernel_tensor *x = &call->t[0], *out = &call->t[1];
  const uint64_t n = hbg_kernel_numel(x);
  for (uint64_t i = lane; i < n; i += n_lanes)
    ((float *)out->data)[i] = ((const float *)x->data)[i];
  return 0;
}

HBG_KERNEL_FN int uk_fail(const hbg_kernel_call *call, uint64_t phase,
                          uint32_t lane, uint32_t n_lanes, float *scratch);

HBG_KERNEL_FN int uk_fail(const hbg_kernel_call *call, uint64_t phase,
                          uint32_t lane, uint32_t n_lanes, float *scratch) {
  (void)scratch;
  if (call->n_tensors != 2 || call->n_scalars != 2)
    return -20; /* HBG_E_KERNEL */
  if (lane == call->scalars[0] && phase == call->scalars[1])
    return -20;
  const hbg_kernel_tensor *x = &call->t[0], *out = &call->t[1];
  const uint64_t n = hbg_kernel_numel(x);
  for (uint64_t i = lane; i < n; i += n_lanes)
    ((float *)out->data)[i] = ((const float *)x->data)[i] + (float)phase;
  return 0;
}
