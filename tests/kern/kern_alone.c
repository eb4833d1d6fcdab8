/* src/kernels/kern_src.h compiled on its own (tests kern_src_c11 and
 * kern_src_cxx17): it needs nothing but the compiler's stdint.h / stddef.h
 * and hbg_image.h. Calls every entry point as a CPU would. */
#include "kernels/kern_src.h"

#ifdef __cplusplus
extern "C" {
#endif
void hbg_kern_alone_run(const hbg__kcall *c, uint32_t n_lanes, float *scratch);
float hbg_kern_alone_math(float x);
#ifdef __cplusplus
}
#endif

void hbg_kern_alone_run(const hbg__kcall *c, uint32_t n_lanes, float *scratch) {
  if (hbg__k_values_check(c) != 0 || hbg__k_scratch_floats(c) > 4096)
    return;
  uint64_t n = hbg__k_phases(c);
  for (uint64_t ph = 0; ph < n; ph++)
    for (uint32_t l = 0; l < n_lanes; l++)
      hbg__k_phase(c, ph, l, n_lanes, scratch);
}

float hbg_kern_alone_math(float x) {
  return hbg__k_expf(x) + hbg__k_sinf(x) * hbg__k_cosf(x);
}
