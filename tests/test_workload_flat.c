/* The flat workload (N three-tensor tasks over overlapping views, no
 * graph) under every policy, with explicit and with inferred dependencies,
 * verified bit-exact; its task count; and qwen3-14b and dsv4 on runtimes
 * that infer their dependencies, so the workloads name none: they still
 * match the host reference bit for bit. */
#include <string.h>

#include "test_workload_fixture.h"

static void flat_tasks(uint32_t tasks, int want) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = "flat";
  wc.tasks = tasks;
  hbg_workload *w = NULL;
  ASSERT_ERR(hbg_workload_create(rt, &wc, &w), want);
  if (!want) {
    hbg_workload_info info;
    ASSERT_OK(hbg_workload_get_info(w, &info));
    ASSERT_UEQ(info.tasks_before, tasks + 1);
    static const uint32_t steps[2] = {0, 9};
    hbg_bind_stats st;
    ASSERT_OK(run_binds(rt, w, steps, 2, &st));
    ASSERT_UEQ(st.n_tasks, tasks + 1);
  }
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

int main(void) {
  const hbg_workload_info flat = {.tasks_before = 1001};
  for (int deps = 0; deps < HBG_DEPS__COUNT; deps++) {
    setenv("HBG_DEPS", hbg_deps_name(deps), 1);
    for (int p = 0; p < HBG_POLICY__COUNT; p++)
      one("flat", 0, p, &flat);
  }
  setenv("HBG_DEPS", "inferred", 1);
  one("qwen3-14b", 0, HBG_POLICY_COALESCED, NULL);
  one("qwen3-14b", 4, HBG_POLICY_PINNED_EAGER, NULL);
  one("dsv4", 0, HBG_POLICY_COALESCED, NULL);
  one("dsv4", 5, HBG_POLICY_DEFERRED, NULL);
  unsetenv("HBG_DEPS");
  flat_tasks(10, 0);
  flat_tasks(HBG_WORKLOAD_MAX_TASKS + 1, HBG_E_LIMIT);
  printf("workload_flat: ok\n");
  return 0;
}
