/*
 * User kernels (internal): the executor's table of CPU implementations
 * registered for user kernel ids (>= HBG_KERNEL_USER_MIN), and the
 * structural checks hbg applies to tasks that use such ids.
 *
 * Ownership: one table per executor, created and destroyed with it. All
 * functions are thread-safe (one mutex; lookups copy the entry out).
 */
#ifndef HBG_EXEC_USER_KERNELS_H
#define HBG_EXEC_USER_KERNELS_H

#include <stdint.h>

#include <hbg/hbg.h>

#include "kernels/kernels.h"

typedef struct hbg__ukernels hbg__ukernels;

int hbg__ukernels_create(hbg__ukernels **out);
void hbg__ukernels_destroy(hbg__ukernels *u); /* accepts NULL */

/* @return 0, HBG_E_INVAL (NULL fn, id below HBG_KERNEL_USER_MIN),
 * HBG_E_BUSY (already registered), HBG_E_NOMEM. */
int hbg__ukernels_add(hbg__ukernels *u, uint32_t kernel, hbg_kernel_fn fn,
                      void *user);
/* Add the lane-model kernels k[0..n) (hbg_kernel_register's sim half:
 * each needs fn; its fields are checked by the caller), all or none.
 * @return 0, or HBG_E_BUSY / HBG_E_INVAL (no fn) / HBG_E_NOMEM with
 * *failed the index of the one that failed (none is added then). */
int hbg__ukernels_add_lanes(hbg__ukernels *u, const hbg_kernel_impl *k,
                            uint32_t n, uint32_t *failed);
/* @return 0 or HBG_E_NOTFOUND. */
int hbg__ukernels_remove(hbg__ukernels *u, uint32_t kernel);
/* @return 0 and *fn, *user, or HBG_E_KERNEL (no implementation, or a
 * lane-model one). */
int hbg__ukernels_get(hbg__ukernels *u, uint32_t kernel, hbg_kernel_fn *fn,
                      void **user);
/* @return 1 when kernel has an implementation now. */
int hbg__ukernels_has(hbg__ukernels *u, uint32_t kernel);

/* Run user kernel `kernel` on t[0..nt) (data set) and the scalars; a
 * lane-model kernel as n_lanes lanes per phase; *phases (when not NULL)
 * gets its phases (a plain function counts one). @return the
 * implementation's result (0 or negative; a positive result is
 * HBG_E_KERNEL), HBG_E_KERNEL when none is registered (or a per-row
 * phase count names a tensor the call lacks), HBG_E_NOMEM. */
int hbg__ukernels_run(hbg__ukernels *u, uint32_t kernel, const hbg__ktensor *t,
                      uint32_t nt, const uint64_t *sc, uint32_t ns,
                      uint32_t n_lanes, uint64_t *phases);

#endif
