/* qwen3-14b end to end under every upload policy, plus a layer override. */
#include "test_workload_fixture.h"

int main(void) {
  ASSERT_EQ(hbg_workload_count(), 6);
  ASSERT_STREQ(hbg_workload_name(0), "qwen3-14b");
  ASSERT_STREQ(hbg_workload_name(1), "dsv4");
  ASSERT_STREQ(hbg_workload_name(2), "flat");
  ASSERT_STREQ(hbg_workload_name(3), "qwen3-0.6b");
  ASSERT_STREQ(hbg_workload_name(4), "qwen3-14b-real");
  ASSERT_STREQ(hbg_workload_name(5), "qwen3");
  ASSERT(hbg_workload_name(6) == NULL);
  hbg_workload_info qwen = {.layers = 40,
                            .n_defs = 1,
                            .min_nodes = 277,
                            .max_nodes = 277,
                            .max_btensors = 26,
                            .max_bscalars = 2};
  for (int p = 0; p < HBG_POLICY__COUNT; p++)
    one("qwen3-14b", 0, p, &qwen);
  hbg_workload_info q3 = qwen;
  q3.layers = 3;
  one("qwen3-14b", 3, HBG_POLICY_COALESCED, &q3);
  printf("workload_qwen: ok\n");
  return 0;
}
