/* The small workload of the import tests: y = alpha x as an ordinary task
 * (SCALE), z = 3 y as a recorded graph (key 38) replayed after it, over
 * 1-D f32 tensors. */
#ifndef HBG_TESTS_SCALE_FIXTURE_H
#define HBG_TESTS_SCALE_FIXTURE_H

#include <hbg/hbg.h>

#include <string.h>

#include "test.h"

static inline hbg_tensor vec(uint64_t addr, uint64_t off, uint32_t n,
                             uint32_t mode) {
  hbg_tensor t;
  ASSERT_OK(hbg_tensor_contig(&t, addr, off, HBG_DTYPE_F32, 1, &n, mode));
  return t;
}

static inline int rec_scale3(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &n);
  hbg_tensor a[2] = {bt[0], bt[1]};
  hbg_scalar sc = hbg_scalar_static(hbg_scalar_f32(3.0f));
  hbg_task t = {.kernel = HBG_KERNEL_SCALE,
                .n_args = 2,
                .args = a,
                .n_scalars = 1,
                .scalars = &sc};
  return hbg_record_task(rec, &t, NULL);
}

static inline int submit_scale(hbg_bind *b, hbg_tensor in, hbg_tensor out,
                               float alpha, hbg_task_id *id) {
  hbg_tensor a[2] = {in, out};
  hbg_scalar sc = hbg_scalar_static(hbg_scalar_f32(alpha));
  hbg_task t = {.kernel = HBG_KERNEL_SCALE,
                .n_args = 2,
                .args = a,
                .n_scalars = 1,
                .scalars = &sc};
  return hbg_submit_task(b, &t, id);
}

/* out = 3 in, through the graph; after *dep when dep is not NULL. */
static inline int submit_graph(hbg_bind *b, hbg_tensor in, hbg_tensor out,
                               const hbg_task_id *dep) {
  hbg_tensor bt[2] = {in, out};
  hbg_graph_submit g = {.key = 38,
                        .n_tensors = 2,
                        .tensors = bt,
                        .n_deps = dep ? 1 : 0,
                        .deps = dep,
                        .record = rec_scale3};
  return hbg_submit_graph(b, &g, NULL);
}

/* hbg_last_error() says `says`, else fail naming what. */
static inline void expect_msg(const char *what, const char *says) {
  if (!strstr(hbg_last_error(), says))
    T_FAIL("%s: '%s' does not say '%s'", what, hbg_last_error(), says);
}

#endif
