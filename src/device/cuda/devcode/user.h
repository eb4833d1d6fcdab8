/*
 * hbg device code (internal): user kernels inside the device executor.
 *
 * libhbg carries the executor twice. The whole-program module (the
 * default) runs built-in kernels only: a user kernel id is HBG_E_KERNEL
 * there, and nothing below costs anything (every helper is the built-in
 * call it wraps). The relocatable build (nvcc -rdc=true, HBG_DC_USER)
 * calls two functions it does not define; the cuda backend generates them
 * as PTX from the registrations (src/device/cuda/cuda_link.c) and the
 * driver's linker joins executor, dispatch and the users' device code:
 *
 *   hbg_dcu_info(kernel, &info)   0 and info for a registered kernel,
 *                                 HBG_IMG_E_KERNEL otherwise;
 *   hbg_dcu_call(kernel, call, phase, lane, n_lanes, scratch)
 *                                 the registered function's result.
 *
 * The stand-in driver's host build defines both (tests/cuda_standin).
 */
#ifndef HBG_DEVICE_CUDA_DEVCODE_USER_H
#define HBG_DEVICE_CUDA_DEVCODE_USER_H

#include <hbg/hbg_kernel.h>

#include "devcode.h"
#include "kernels/kern_src.h"

/* What the registration said about a kernel (the generated dispatch
 * writes it; the layout is part of that contract). */
typedef struct hbg_dcu_info {
  uint32_t phases;  /* per call, or per row of tensor rows_of - 1 */
  uint32_t rows_of; /* 0 or tensor index + 1 */
  uint64_t scratch_floats;
} hbg_dcu_kinfo;

#if defined(__CUDACC__)
#define HBG_DCU_EXTERN extern "C" __device__
#else
#define HBG_DCU_EXTERN
#endif
HBG_DCU_EXTERN int hbg_dcu_info(uint32_t kernel, hbg_dcu_kinfo *out);
HBG_DCU_EXTERN int hbg_dcu_call(uint32_t kernel, const hbg_kernel_call *call,
                                uint64_t phase, uint32_t lane,
                                uint32_t n_lanes, float *scratch);

#if defined(HBG_DC_USER)

/* A user call's phases and scratch; 0, or HBG_IMG_E_KERNEL when the
 * kernel has no registration or its per-row count names a missing
 * tensor. */
HBG_DC_FN int dcu_plan(const hbg__kcall *c, uint64_t *phases,
                       uint64_t *floats) {
  hbg_dcu_kinfo in;
  if (hbg_dcu_info(c->kernel, &in) != 0 || in.rows_of > c->nt)
    return HBG_IMG_E_KERNEL;
  *phases = in.phases;
  if (in.rows_of)
    *phases *= hbg_kernel_rows(&c->t[in.rows_of - 1]);
  *floats = in.scratch_floats;
  return 0;
}

/* A user kernel this executor can run (set-up). */
HBG_DC_FN int dcu_check(const hbg__kcall *c) {
  uint64_t ph, f;
  return dcu_plan(c, &ph, &f);
}

/* Scratch floats of a call, user or built-in. */
HBG_DC_FN uint64_t dcu_floats(const hbg__kcall *c) {
  uint64_t ph = 0, f = 0;
  if (!hbg_img_kernel_is_user(c->kernel))
    return hbg__k_scratch_floats(c);
  return dcu_plan(c, &ph, &f) == 0 ? f : 0;
}

/* Phases of a call, user or built-in. */
HBG_DC_FN uint64_t dcu_phases(const hbg__kcall *c) {
  uint64_t ph = 0, f = 0;
  if (!hbg_img_kernel_is_user(c->kernel))
    return hbg__k_phases(c);
  return dcu_plan(c, &ph, &f) == 0 ? ph : 0;
}

/* Lane `lane`'s share of phase ph; a user kernel's error goes to *urc,
 * which keeps the most negative (a positive result is HBG_E_KERNEL).
 * @return this lane's error, 0 if none (the lanes vote on it after the
 * phase's barrier: DCU_VOTES). */
HBG_DC_FN int dcu_phase(const hbg__kcall *c, uint64_t ph, uint32_t lane,
                        uint32_t n_lanes, float *scratch, int *urc) {
  if (!hbg_img_kernel_is_user(c->kernel)) {
    hbg__k_phase(c, ph, lane, n_lanes, scratch);
    return 0;
  }
  hbg_kernel_call k;
  k.kernel = c->kernel;
  k.n_tensors = c->nt;
  k.n_scalars = c->ns;
  k.reserved = 0;
  k.t = c->t;
  k.scalars = c->sc;
  int r = hbg_dcu_call(c->kernel, &k, ph, lane, n_lanes, scratch);
  if (r > 0)
    r = HBG_IMG_E_KERNEL;
  if (r < 0) {
#if defined(__CUDA_ARCH__)
    atomicMin_block(urc, r);
#else
    int o = __atomic_load_n(urc, __ATOMIC_RELAXED);
    while (r < o && !__atomic_compare_exchange_n(urc, &o, r, 0,
                                                 __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
    }
#endif
  }
  return r;
}

/* A phase's lanes may fail: the executor votes after each phase. */
#define DCU_VOTES 1

#else /* the whole-program module: built-in kernels only */

#define dcu_check(c) ((void)(c), HBG_IMG_E_KERNEL)
#define dcu_floats(c) hbg__k_scratch_floats(c)
#define dcu_phases(c) hbg__k_phases(c)
#define dcu_phase(c, ph, lane, n, s, urc)                                      \
  ((void)(urc), hbg__k_phase(c, ph, lane, n, s), 0)
#define DCU_VOTES 0

#endif

#endif
