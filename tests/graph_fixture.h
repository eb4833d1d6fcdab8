/* Building blocks of the graph-layer tests: a contiguous 1-D or 2-D tensor
 * and a task record. */
#ifndef HBG_TESTS_GRAPH_FIXTURE_H
#define HBG_TESTS_GRAPH_FIXTURE_H

#include <string.h>

#include <hbg/hbg.h>

#include "test.h"

/* d1 == 0: a 1-D tensor of d0 elements; else d0 x d1. */
static inline hbg_tensor ten(uint64_t addr, uint64_t off, uint32_t dtype,
                             uint32_t mode, uint32_t d0, uint32_t d1) {
  hbg_tensor t;
  uint32_t dims[2] = {d0, d1};
  ASSERT_OK(hbg_tensor_contig(&t, addr, off, dtype, d1 ? 2 : 1, dims, mode));
  return t;
}

static inline hbg_task task(uint32_t kernel, hbg_tensor *args, uint32_t n_args,
                            const hbg_scalar *sc, uint32_t n_sc,
                            const hbg_task_id *deps, uint32_t n_deps) {
  hbg_task t;
  memset(&t, 0, sizeof t);
  t.kernel = kernel;
  t.args = args;
  t.n_args = n_args;
  t.scalars = sc;
  t.n_scalars = n_sc;
  t.deps = deps;
  t.n_deps = n_deps;
  return t;
}

/* A record callback: out = (a + b) + b through an inner tensor, for a
 * boundary {a, b, out} of 1-D f32 tensors; a is only read inside, whatever
 * its mode at the boundary. */
static inline int add_add_body(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt, dims[1];
  const hbg_tensor *io = hbg_record_tensors(rec, &nt);
  dims[0] = io[0].shape[0];
  hbg_tensor t;
  ASSERT_OK(hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_OUT));
  hbg_tensor a1[3] = {io[0], io[1], t};
  a1[0].mode = HBG_ACCESS_IN;
  hbg_task add = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a1};
  int rc = hbg_record_task(rec, &add, NULL);
  if (rc)
    return rc;
  a1[2].mode = HBG_ACCESS_IN;
  hbg_tensor a2[3] = {a1[2], io[1], io[2]};
  add.args = a2;
  return hbg_record_task(rec, &add, NULL);
}

#endif
