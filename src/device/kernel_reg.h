/*
 * User-kernel registration across backends (internal): hbg_kernel_register
 * (kernel_reg.c) hands each backend its half of an hbg_kernel_impl.
 */
#ifndef HBG_DEVICE_KERNEL_REG_H
#define HBG_DEVICE_KERNEL_REG_H

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

/* Limits hbg_kernel_register checks. */
#define HBG__UK_MAX_PHASES (1u << 20)
#define HBG__UK_MAX_SCRATCH (1ull << 24)

#endif
