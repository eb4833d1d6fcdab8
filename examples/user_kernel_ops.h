/*
 * The example's user kernels (user_kernel_ops.c): their ids, phase counts
 * and scratch, as the host program registers them.
 */
#ifndef HBG_EXAMPLES_USER_KERNEL_OPS_H
#define HBG_EXAMPLES_USER_KERNEL_OPS_H

#include <hbg/hbg_kernel.h>

#define UK_RMS_SCALE 0x1000u /* [x, w, out]; s0 = f32 eps */
#define UK_AXPBY 0x1001u     /* [a, b, out]; s0 = f32 alpha, s1 = f32 beta */

#define UK_PARTS 64u /* partials of the RMS reduction */
#define UK_LEVELS 6u /* log2(UK_PARTS) */
#define UK_RMS_PHASES (UK_LEVELS + 2u) /* per row */

HBG_KERNEL_FN int uk_rms_scale(const hbg_kernel_call *call, uint64_t phase,
                               uint32_t lane, uint32_t n_lanes,
                               float *scratch);
HBG_KERNEL_FN int uk_axpby(const hbg_kernel_call *call, uint64_t phase,
                           uint32_t lane, uint32_t n_lanes, float *scratch);

#endif
