/* The sim device's public user-kernel registration: the table itself is the
 * executor's (src/exec/user_kernels.c). */
#include "common/util.h"
#include "device/kernel_reg.h"
#include "device/sim/sim_internal.h"
#include "exec/user_kernels.h"

static int sim_table(struct hbg_device *dev, hbg__ukernels **out) {
  HBG__RETURN_IF(!dev, HBG_E_INVAL);
  hbg__sim *s = hbg__sim_from(dev);
  HBG__RETURN_IF(!s || !s->exec, HBG_E_UNSUPPORTED);
  *out = hbg__exec_ukernels(s->exec);
  return 0;
}

int hbg_sim_register_kernel(struct hbg_device *dev, uint32_t kernel,
                            hbg_kernel_fn fn, void *user) {
  hbg__ukernels *u;
  HBG__TRY(sim_table(dev, &u));
  return hbg__ukernels_add(u, kernel, fn, user);
}

int hbg_sim_unregister_kernel(struct hbg_device *dev, uint32_t kernel) {
  hbg__ukernels *u;
  HBG__TRY(sim_table(dev, &u));
  return hbg__ukernels_remove(u, kernel);
}

int hbg__sim_kernel_register(hbg_device *dev, const hbg_kernel_impl *k,
                             uint32_t n) {
  hbg__sim *sim = hbg__sim_from(dev);
  uint32_t bad = 0;
  hbg__ukernels *u = sim && sim->exec ? hbg__exec_ukernels(sim->exec) : NULL;
  int rc = u ? hbg__ukernels_add_lanes(u, k, n, &bad) : HBG_E_UNSUPPORTED;
  if (rc == HBG_E_BUSY)
    hbg__error_set("hbg_kernel_register: impls[%u]: kernel %#x is "
                   "registered already on this device (or twice in this "
                   "call)",
                   bad, k[bad].kernel);
  else if (rc == HBG_E_INVAL)
    hbg__error_set("hbg_kernel_register: impls[%u] (kernel %#x): the sim "
                   "runs fn, the host build, and it is NULL",
                   bad, k[bad].kernel);
  return rc;
}
