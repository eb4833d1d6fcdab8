/* dsv4 end to end under every upload policy, plus layer overrides (all
 * seven Definitions need five layers; two layers use three). */
#include "test_workload_fixture.h"

int main(void) {
  hbg_workload_info dsv4 = {.layers = 43,
                            .n_defs = 7,
                            .min_nodes = 32,
                            .max_nodes = 50,
                            .max_btensors = 99,
                            .max_bscalars = 30};
  for (int p = 0; p < HBG_POLICY__COUNT; p++)
    one("dsv4", 0, p, &dsv4);
  hbg_workload_info d5 = dsv4;
  d5.layers = 5;
  one("dsv4", 5, HBG_POLICY_DEFERRED, &d5);
  hbg_workload_info d2 = {.layers = 2,
                          .n_defs = 3,
                          .min_nodes = 32,
                          .max_nodes = 49,
                          .max_btensors = 29,
                          .max_bscalars = 3};
  one("dsv4", 2, HBG_POLICY_PINNED_EAGER, &d2);
  printf("workload_dsv4: ok\n");
  return 0;
}
