/* Compiled (not run) by nvcc when CMake finds it (test kern_src_nvcc): the
 * built-in kernels' one source is device code. One CTA runs one call with
 * its scratch in shared memory, as the device executor will. */
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
