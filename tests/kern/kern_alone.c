/* src/kernels/kern_src.h and src/exec/sched_src.h compiled on their own
 * (tests kern_src_c11 and kern_src_cxx17): they need nothing but the
 * compiler's stdint.h / stddef.h and hbg_image.h. Calls every entry point
 * as a CPU would. */
#include "exec/sched_src.h"
#include "kernels/kern_src.h"

#ifdef __cplusplus
extern "C" {
#endif
void hbg_kern_alone_run(const hbg__kcall *call, uint32_t n_lanes,
                        float *scratch);
float hbg_kern_alone_math(float x);
uint64_t hbg_sched_alone(void *block, const hbg_img_graph *g,
                         const uint32_t *deps);
#ifdef __cplusplus
}
#endif

void hbg_kern_alone_run(const hbg__kcall *call, uint32_t n_lanes,
                        float *scratch) {
  hbg__kcall c = *call;
  if (hbg__k_values_check(&c) != 0 || hbg__k_scratch_floats(&c) > 4096)
    return;
  hbg__k_prepare(&c);
  uint64_t n = hbg__k_phases(&c);
  for (uint64_t ph = 0; ph < n; ph++)
    for (uint32_t l = 0; l < n_lanes; l++)
      hbg__k_phase(&c, ph, l, n_lanes, scratch);
}

float hbg_kern_alone_math(float x) {
  return hbg__k_expf(x) + hbg__k_sinf(x) * hbg__k_cosf(x);
}

/* Two entries, the second a graph after the first; then drained. */
uint64_t hbg_sched_alone(void *block, const hbg_img_graph *g,
                         const uint32_t *deps) {
  hbg__sched *s = hbg__sched_init(block, 2, 1, g->hdr.n_nodes);
  uint32_t bad = 0;
  if (hbg__sched_task_set(s, 0, NULL, NULL, 0, &bad) != 0 ||
      hbg__sched_task_set(s, 1, g, deps, 1, &bad) != 0)
    return 0;
  hbg__sched_start(s);
  uint64_t item, n = 0;
  while (hbg__sched_pop(s, &item)) {
    hbg__sched_done(s, item);
    n++;
  }
  if (!hbg__sched_complete(s))
    hbg__sched_fail(s, HBG_IMG_E_CSR, HBG__SCHED_NONE, HBG__SCHED_NONE);
  return n + hbg__sched_ready(s);
}
