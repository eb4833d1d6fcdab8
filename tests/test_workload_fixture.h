/* Shared by the workload end-to-end tests: a runtime under one policy, a
 * workload, three consecutive binds with different steps, each verified
 * bit-exact against the host reference. */
#ifndef HBG_TEST_WORKLOAD_FIXTURE_H
#define HBG_TEST_WORKLOAD_FIXTURE_H

#include <stdlib.h>

#include <hbg/hbg.h>
#include <hbg/hbg_workload.h>

#include "test.h"

static int run_binds(hbg_runtime *rt, hbg_workload *w, const uint32_t *steps,
                     uint32_t n, hbg_bind_stats *last) {
  for (uint32_t i = 0; i < n; i++) {
    hbg_bind *b;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    int rc = hbg_workload_submit(w, b, steps[i]);
    if (rc) {
      hbg_bind_end(b);
      return rc;
    }
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    if (last)
      ASSERT_OK(hbg_bind_stats_get(b, last));
    hbg_bind_end(b);
    double err = -1.0;
    rc = hbg_workload_verify(w, steps[i], &err);
    if (rc)
      T_FAIL("step %u: verify %s, max_abs_err %g", steps[i], hbg_err_name(rc),
             err);
    ASSERT(err == 0.0);
  }
  return 0;
}

static void one(const char *name, uint32_t layers, int policy,
                const hbg_workload_info *want) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device = "sim";
  cfg.device_options = NULL;
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = name;
  wc.layers = layers;
  hbg_workload *w;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  hbg_workload_info info;
  ASSERT_OK(hbg_workload_get_info(w, &info));
  if (want) {
    ASSERT_EQ(info.layers, want->layers);
    ASSERT_EQ(info.n_defs, want->n_defs);
    ASSERT_EQ(info.min_nodes, want->min_nodes);
    ASSERT_EQ(info.max_nodes, want->max_nodes);
    ASSERT_EQ(info.max_btensors, want->max_btensors);
    ASSERT_EQ(info.max_bscalars, want->max_bscalars);
  }
  /* the first bind records; step 0 puts the cache rows at the start of
   * the caches, later steps move them (and wrap the ring) */
  static const uint32_t step_sets[3][3] = {{0, 1, 2}, {5, 6, 7}, {63, 64, 65}};
  const uint32_t *steps = step_sets[policy % 3];
  hbg_bind_stats st;
  ASSERT_OK(run_binds(rt, w, steps, 3, &st));
  uint32_t per_layer = strcmp(name, "dsv4") == 0 ? 3 : 1;
  ASSERT_EQ(st.n_graphs, info.layers * per_layer);
  ASSERT_EQ(st.n_tasks,
            info.layers * per_layer + info.tasks_before + info.tasks_after);
  ASSERT_EQ(st.device_status, 0);
  printf("%-10s layers %4u %-12s: defs %u nodes %u..%u btensors %u "
         "bscalars %u, bind: %u tasks, graph %llu B / %llu copies, "
         "window %llu B, h2d %llu B\n",
         name, info.layers, hbg_policy_name(policy), info.n_defs,
         info.min_nodes, info.max_nodes, info.max_btensors, info.max_bscalars,
         st.n_tasks, (unsigned long long)st.graph.bytes,
         (unsigned long long)st.graph.copies,
         (unsigned long long)st.window.bytes, (unsigned long long)st.h2d_bytes);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

#endif
