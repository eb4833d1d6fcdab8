/* Placeholder: replaced by the sim device implementation. */
#include "device/device_internal.h"
#include "device/sim/sim.h"
static int ph_open(hbg_device *d, const char *o) { (void)d; (void)o; return HBG_E_UNSUPPORTED; }
static void ph_close(hbg_device *d) { (void)d; }
const hbg_dev_ops hbg__sim_ops = {.struct_size = sizeof(hbg_dev_ops), .abi_version = HBG_DEV_ABI_VERSION, .name = "sim", .summary = "placeholder", .open = ph_open, .close = ph_close};
hbg__sim *hbg__sim_from(hbg_device *dev) { (void)dev; return NULL; }
int hbg__sim_resolve(hbg__sim *s, hbg_devptr a, uint64_t l, void **o) { (void)s; (void)a; (void)l; (void)o; return HBG_E_RANGE; }
