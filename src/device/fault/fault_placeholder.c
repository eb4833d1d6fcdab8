/* Placeholder: replaced by the fault wrapper implementation. */
#include "device/device_internal.h"
static int ph_open(hbg_device *d, const char *o) { (void)d; (void)o; return HBG_E_UNSUPPORTED; }
static void ph_close(hbg_device *d) { (void)d; }
const hbg_dev_ops hbg__fault_ops = {.struct_size = sizeof(hbg_dev_ops), .abi_version = HBG_DEV_ABI_VERSION, .name = "fault", .summary = "placeholder", .open = ph_open, .close = ph_close};
int hbg_fault_arm(hbg_device *dev, int op, uint64_t k, int err) { (void)dev; (void)op; (void)k; (void)err; return HBG_E_INVAL; }
uint64_t hbg_fault_calls(const hbg_device *dev, int op) { (void)dev; (void)op; return 0; }
uint64_t hbg_fault_fired(const hbg_device *dev) { (void)dev; return 0; }
void hbg_fault_reset(hbg_device *dev) { (void)dev; }
hbg_device *hbg_fault_inner(hbg_device *dev) { (void)dev; return NULL; }
