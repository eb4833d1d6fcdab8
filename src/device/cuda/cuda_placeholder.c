/* Placeholder: replaced by the cuda backend implementation. */
#include "device/device_internal.h"
#include <stdio.h>
static int ph_probe(char *buf, size_t len) { snprintf(buf, len, "not built yet"); return HBG_E_UNSUPPORTED; }
static int ph_open(hbg_device *d, const char *o) { (void)d; (void)o; return HBG_E_UNSUPPORTED; }
static void ph_close(hbg_device *d) { (void)d; }
const hbg_dev_ops hbg__cuda_ops = {.struct_size = sizeof(hbg_dev_ops), .abi_version = HBG_DEV_ABI_VERSION, .name = "cuda", .summary = "placeholder", .probe = ph_probe, .open = ph_open, .close = ph_close};
