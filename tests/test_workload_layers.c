/* Layer-count overrides up to 1000 layers: one Definition (or seven) still
 * covers every layer, and the bind verifies bit-exact. */
#include <hbg/hbg.h>
#include <hbg/hbg_workload.h>

#include "common/util.h"
#include "test.h"

static void run(const char *name, uint32_t layers, int policy,
                uint32_t nbinds) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device = "sim";
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
  ASSERT_EQ(info.layers, layers);
  for (uint32_t step = 9; step < 9 + nbinds; step++) {
    uint64_t t0 = hbg__now_ns();
    hbg_bind *b;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, step));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_stats st;
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    hbg_bind_end(b);
    uint64_t t1 = hbg__now_ns();
    double err = -1;
    int rc = hbg_workload_verify(w, step, &err);
    if (rc)
      T_FAIL("%s %u layers step %u: %s (max_abs_err %g)", name, layers, step,
             hbg_err_name(rc), err);
    uint64_t t2 = hbg__now_ns();
    printf("%-10s %5u layers %-12s step %u: bind %.1f ms (exec %.1f ms), "
           "verify %.1f ms, %u tasks, h2d %llu B, device %llu B\n",
           name, layers, hbg_policy_name(policy), step, (t1 - t0) / 1e6,
           st.exec_ns / 1e6, (t2 - t1) / 1e6, st.n_tasks,
           (unsigned long long)st.h2d_bytes,
           (unsigned long long)info.device_bytes);
  }
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define BIG 250u /* sanitizers: fewer layers, same paths */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define BIG 250u
#endif
#endif
#ifndef BIG
#define BIG 1000u
#endif

int main(void) {
  run("qwen3-14b", 1, HBG_POLICY_DEFERRED, 2);
  run("dsv4", 1, HBG_POLICY_COALESCED, 2);
  run("dsv4", 4, HBG_POLICY_PINNED_EAGER, 2);
  run("qwen3-14b", BIG, HBG_POLICY_COALESCED, 1);
  run("dsv4", BIG, HBG_POLICY_PINNED_EAGER, 1);
  printf("workload_layers: ok\n");
  return 0;
}
