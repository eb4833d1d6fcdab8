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

/* Task t (its kernel a user kernel) on dev: 0, or HBG_E_KERNEL with
 * hbg_last_error() naming `who`, the kernel and the reason, where the
 * device knows its implementations for good (cuda exec=device: a
 * registration holds until close) and t's kernel has none there, or its
 * per-row phase count names a tensor t lacks. Devices whose table changes
 * between submit and launch (the sim) or that run no user code (the
 * verifiers) accept every id: their launch decides. */
int hbg__dev_user_kernel_check(hbg_device *dev, const hbg_task *t,
                               const char *who);

#endif
