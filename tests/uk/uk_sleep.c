/*
 * A user kernel for the deadline tests: it takes its time. One source for
 * the stand-in's host build (a shared object HBG_MOCK_USER_LIB names) and
 * for the GPU (nvcc -rdc -ptx, registered with hbg_kernel_register), like
 * examples/user_kernel_ops.c.
 *
 * uk_sleep [x, out]; s0 = milliseconds: lane 0 waits that long (the
 * device's clock on a GPU, a sleep on the host), then every lane copies x
 * to out. One phase.
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
