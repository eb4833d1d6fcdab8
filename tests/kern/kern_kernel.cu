/* Compiled (not run) by nvcc when CMake finds it (test kern_src_nvcc): the
 * built-in kernels' one source and the scheduling core are device code. One
 * CTA runs one call with its scratch in shared memory, as the device
 * executor will; CTAs take ready items from the core until all are done. */
#include "exec/sched_src.h"
#include "kernels/kern_src.h"

__global__ void run_call(const hbg__kcall *calls, uint32_t n, int *status) {
  __shared__ float scratch[2 * HBG__K_PARTS + 1024];
  const hbg__kcall *c = &calls[blockIdx.x % n];
  int rc = hbg__k_values_check(c);
  if (rc == 0 && hbg__k_scratch_floats(c) > 2 * HBG__K_PARTS + 1024)
    rc = HBG_IMG_E_KERNEL;
  if (rc == 0)
    hbg__k_run_cta(c, scratch);
  if (threadIdx.x == 0)
    status[blockIdx.x] = rc;
}

__global__ void math(const float *x, float *y) {
  float v = x[threadIdx.x];
  y[threadIdx.x] = hbg__k_expf(v) + hbg__k_sinf(v) * hbg__k_cosf(v);
}

/* Persistent CTAs: thread 0 pops and completes items, the CTA runs each
 * (here an ordinary task's call from calls[task]). */
__global__ void drain(hbg__sched *s, const hbg__kcall *calls, int *status) {
  __shared__ float scratch[2 * HBG__K_PARTS + 1024];
  __shared__ uint64_t item;
  __shared__ int state; /* 0 none ready, 1 an item, 2 finished */
  for (;;) {
    if (threadIdx.x == 0) {
      state = hbg__sched_pop(s, &item) ? 1
              : (hbg__sched_complete(s) || s->failed) ? 2
                                                      : 0;
    }
    __syncthreads();
    if (state == 2)
      break;
    if (state == 1) {
      const hbg__kcall *c = &calls[item >> 32];
      if (hbg__k_values_check(c) == 0 &&
          hbg__k_scratch_floats(c) <= 2 * HBG__K_PARTS + 1024)
        hbg__k_run_cta(c, scratch);
      __threadfence(); /* outputs visible before the completion */
      __syncthreads();
      if (threadIdx.x == 0)
        hbg__sched_done(s, item);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    status[blockIdx.x] = s->error;
}
