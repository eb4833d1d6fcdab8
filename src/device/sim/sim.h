/*
 * The embedded sim device (internal interface shared with the exec layer).
 *
 * Device memory is one host heap owned by the sim; device addresses are
 * opaque (base tag + offset), never host pointers. The exec layer (the
 * device's scheduler and workers) reaches device memory only through
 * hbg__sim_resolve(), which bounds-checks against live allocations.
 */
#ifndef HBG_DEVICE_SIM_SIM_H
#define HBG_DEVICE_SIM_SIM_H

#include <hbg/hbg_device.h>

typedef struct hbg__sim hbg__sim;

/* @return the sim state of dev, or NULL when dev is not a sim device
 * (a fault device wrapping a sim resolves to the inner sim). */
hbg__sim *hbg__sim_from(hbg_device *dev);

/* Map [addr, addr+len) of device memory to host memory of the sim heap.
 * The range must lie inside one live allocation.
 * @return 0 and *out, or HBG_E_RANGE. */
int hbg__sim_resolve(hbg__sim *s, hbg_devptr addr, uint64_t len, void **out);

#endif
