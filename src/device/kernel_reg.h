/*
 * User-kernel registration across backends (internal): hbg_kernel_register
 * (kernel_reg.c) hands each backend its half of an hbg_kernel_impl, and
 * the core asks here, when a task is submitted or recorded, whether the
 * runtime's device can run its user kernel.
 */
#ifndef HBG_DEVICE_KERNEL_REG_H
#define HBG_DEVICE_KERNEL_REG_H

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

/* Limits hbg_kernel_register checks. */
#define HBG__UK_MAX_PHASES (1u << 20)
#define HBG__UK_MAX_SCRATCH (1ull << 24)

/* The sim's half of hbg_kernel_register (sim_kernels.c): the lane-model
 * kernels into the executor's user-kernel table. */
int hbg__sim_kernel_register(hbg_device *dev, const hbg_kernel_impl *k,
                             uint32_t n);

/* The core's check at submit and record is hbg__dev_user_kernel_check
 * (device/device.h): cuda exec=device knows its implementations for good
 * (a registration holds until close); devices whose table changes between
 * submit and launch (the sim) or that run no user code (the verifiers)
 * accept every id, and their launch decides. */

#endif
