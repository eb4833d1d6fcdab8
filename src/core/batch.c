/*
 * Batched graph submission: n replays of one graph key in one call, so that
 * bindings with a costly call boundary (Python's ctypes) pay it once per
 * layer group instead of once per layer.
 */
#include <stdlib.h>

#include "common/util.h"
#include "core/core.h"

int hbg_submit_graph_n(hbg_bind *b, const hbg_graph_submit *g, uint32_t n,
                       uint32_t flags, hbg_task_id *out) {
  HBG__RETURN_IF(!b || !g || n == 0 || (flags & ~HBG_GRAPH_N_CHAIN),
                 HBG_E_INVAL);
  HBG__RETURN_IF((g->n_tensors && !g->tensors) ||
                     (g->n_scalars && !g->scalars),
                 HBG_E_INVAL);
  HBG__GUARD(b->rt, "hbg_submit_graph_n");
  hbg_task_id *ids = NULL;
  if (out) {
    ids = malloc((size_t)n * sizeof *ids);
    HBG__RETURN_IF(!ids, HBG_E_NOMEM);
  }
  hbg_graph_submit one = *g;
  hbg_task_id id = HBG_TASK_NONE;
  int rc = 0;
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    one.tensors = g->n_tensors ? g->tensors + (size_t)i * g->n_tensors : NULL;
    one.scalars = g->n_scalars ? g->scalars + (size_t)i * g->n_scalars : NULL;
    if (i && (flags & HBG_GRAPH_N_CHAIN)) {
      one.deps = &id; /* the previous replay's id */
      one.n_deps = 1;
    }
    rc = hbg_submit_graph(b, &one, &id);
    if (rc == 0 && ids)
      ids[i] = id;
  }
  if (rc == 0 && ids)
    for (uint32_t i = 0; i < n; i++)
      out[i] = ids[i];
  free(ids);
  return rc;
}
