/* cuda backend under the runtime, exec=device: every upload policy binds a
 * 40-layer chain and the two reference workloads (qwen3-14b, dsv4) on the
 * GPU, and every output is compared with the host reference bit for bit;
 * 50 pipelined pairs of binds in flight (depth 2) per policy, each pair
 * writing the same buffers, so that binds run out of launch order or at
 * the same time corrupt them; coalesced keeps its Definitions resident.
 * And the ping-pong of the launch-order issue: 100 binds, two in flight,
 * each reading what the one before wrote (P[(k+1) % 2] = P[k % 2] + 24),
 * must end at P0 + 2400 exactly.
 * Skips (77) without a GPU; runs on the stand-in as test_cuda_runtime_mock. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_workload.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chain_fixture.h"
#include "cuda_skip.h"
#include "pingpong_fixture.h"
#include "test.h"

#define LAYERS 40u
#define ELEMS 256u
#define PINGPONG_BINDS 100u

#define PIPELINED_PAIRS 50u

static void one_bind(chain *c, uint32_t step, hbg_bind_stats *st) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(c->rt, &b));
  ASSERT_OK(chain_submit(c, b, step));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  ASSERT_OK(hbg_bind_stats_get(b, st));
  hbg_bind_end(b);
  ASSERT_OK(chain_verify(c, step));
  ASSERT_EQ(st->device_status, 0);
  ASSERT_EQ(st->fatal, 0);
  ASSERT(st->device_ns > 0); /* timed events around the launch */
  ASSERT_UEQ(st->n_graphs, LAYERS);
  ASSERT_UEQ(st->n_tasks, LAYERS + 2);
}

static void run_policy(int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = "exec=device";
  cfg.policy = (uint32_t)policy;
  cfg.flags |= HBG_CFG_POISON_STAGING;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  hbg_device *dev = hbg_runtime_device(rt);
  ASSERT_STREQ(hbg_device_name(dev), "cuda");
  hbg_dev_stats d0;
  ASSERT_OK(hbg_dev_stats_get(dev, &d0));
  chain c;
  ASSERT_OK(chain_create(&c, rt, LAYERS, ELEMS));

  hbg_bind_stats st;
  for (uint32_t step = 0; step < 4; step++) {
    one_bind(&c, step, &st);
    if (policy == HBG_POLICY_COALESCED && step > 0)
      ASSERT_UEQ(st.def_bytes, 0);
  }
  printf("%-12s h2d %llu copies, %llu bytes; control plane %.1f us\n",
         hbg_policy_name(policy), (unsigned long long)st.h2d_copies,
         (unsigned long long)st.h2d_bytes, st.control_plane_ns / 1e3);
  ASSERT_EQ(c.record_calls, 1);

  /* Pipeline depth 2: the second bind orchestrates and launches while the
   * first one is still in flight; both write every layer's buffer, and the
   * output must be the second's. */
  for (uint32_t k = 0; k < PIPELINED_PAIRS; k++) {
    uint32_t s1 = 10 + 2 * k, s2 = s1 + 1;
    hbg_bind *b1 = NULL, *b2 = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b1));
    ASSERT_OK(chain_submit(&c, b1, s1));
    ASSERT_OK(hbg_bind_launch(b1));
    ASSERT_OK(hbg_bind_begin(rt, &b2));
    ASSERT_OK(chain_submit(&c, b2, s2));
    ASSERT_OK(hbg_bind_launch(b2));
    ASSERT_OK(hbg_bind_wait(b1));
    ASSERT_OK(hbg_bind_wait(b2));
    hbg_bind_end(b1);
    hbg_bind_end(b2);
    ASSERT_OK(chain_verify(&c, s2));
  }

  hbg_dev_stats d1;
  ASSERT_OK(hbg_dev_stats_get(dev, &d1));
  ASSERT_UEQ(d1.launches, d0.launches + 4 + 2 * PIPELINED_PAIRS);
  if (policy != HBG_POLICY_DEFERRED)
    ASSERT(d1.pinned_direct > d0.pinned_direct);
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
}

/* Depth 2: bind k is launched while bind k - 1 may still run, and reads
 * its output. */
static void run_pingpong(int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = "exec=device";
  cfg.policy = (uint32_t)policy;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  pp w;
  pp_create(&w, rt, 0);
  hbg_bind *prev = pp_launch(&w, 0, 0);
  for (uint32_t k = 1; k < PINGPONG_BINDS; k++) {
    hbg_bind *b = pp_launch(&w, k, 0);
    pp_wait(prev);
    prev = b;
  }
  pp_wait(prev);
  pp_check(&w, PINGPONG_BINDS);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
}

static void run_workload(const char *name, int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = "exec=device";
  cfg.policy = (uint32_t)policy;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = name;
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  hbg_workload_info info;
  ASSERT_OK(hbg_workload_get_info(w, &info));
  hbg_bind_stats st;
  for (uint32_t step = 0; step < 3; step++) {
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, step));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    hbg_bind_end(b);
    ASSERT_EQ(st.device_status, 0);
    ASSERT_OK(hbg_workload_verify(w, step, NULL));
    ASSERT_UGE(st.n_graphs, info.layers);
    if (policy == HBG_POLICY_COALESCED && step > 0)
      ASSERT_UEQ(st.def_bytes, 0);
  }
  printf("%-9s %-12s %u layers, %u defs: h2d %llu copies, %llu bytes; "
         "control plane %.1f us\n",
         name, hbg_policy_name(policy), info.layers, info.n_defs,
         (unsigned long long)st.h2d_copies, (unsigned long long)st.h2d_bytes,
         st.control_plane_ns / 1e3);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

int main(void) {
  skip_without_gpu();
  (void)chain_bind;
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    run_policy(p);
    run_pingpong(p);
  }
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    run_workload("qwen3-14b", p);
    run_workload("dsv4", p);
  }
  printf("cuda runtime: ok\n");
  return 0;
}
