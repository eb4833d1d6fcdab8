/*
 * Device-side execution (internal): the executor the sim device runs.
 *
 * The device's scheduler thread calls hbg__exec_run() for each launch, in
 * queue order. The exec layer knows no device: it reaches device memory
 * only through the hbg__exec_mem interface it is given at creation, reads
 * images only through hbg_image.h, validates the task window, each
 * Submission and each
 * Definition (once per Definition; hbg__exec_invalidate() drops cached
 * verdicts for memory the host rewrites or frees), expands graph nodes,
 * tracks dependencies and runs kernels on its worker threads.
 */
#ifndef HBG_EXEC_EXEC_H
#define HBG_EXEC_EXEC_H

#include <hbg/hbg_device.h>

#include "graph/image.h"

typedef struct hbg__exec hbg__exec;

/* How the executor reaches device memory (given by the device at creation;
 * the sim: its heap). */
typedef struct hbg__exec_mem {
  /* Map [base + off, base + off + len) to host memory the executor may
   * read and write; the range must lie inside the live allocation that
   * holds base. Called from the executor's threads.
   * @return 0 and *out, or HBG_E_RANGE. */
  int (*resolve)(void *ctx, hbg_devptr base, uint64_t off, uint64_t len,
                 void **out);
  void *ctx;
} hbg__exec_mem;

/* A pool of `workers` threads (0 picks 1) runs kernels next to the thread
 * that calls hbg__exec_run. Kernels are short, so a sleeping worker is
 * woken only when at least 64 items are ready (env HBG_EXEC_WAKE_MIN,
 * 1..2^32-1). Each built-in kernel runs as `lanes` (0 picks 1) cooperating
 * lanes, one after another on its thread, as a CTA of that many threads
 * would run it (kern_src.h); the bits are the same for every count.
 * @return 0, HBG_E_INVAL (bad arguments, or HBG_EXEC_WAKE_MIN invalid:
 * the thread's hbg_last_error() names it), HBG_E_NOMEM, HBG_E_DEVICE. */
int hbg__exec_create(const hbg__exec_mem *mem, uint32_t workers,
                     uint32_t lanes, hbg__exec **out);
void hbg__exec_destroy(hbg__exec *e); /* accepts NULL */

/* Run one launch to completion on the calling thread (plus workers) and
 * fill *st. Several threads may run launches at once: the workers serve
 * all of them, and nothing orders one launch after another here (the
 * device's queue waits do). Everything is validated before the first kernel runs: the
 * window (copied first), each Submission, each Definition (or its cached
 * verdict), kernel arguments, device ranges (each inside the allocation
 * that holds its base address; a graph's heap block clear of its boundary
 * tensors); a launch whose kernels or status would write over its window or
 * one of its own images is refused (HBG_E_RANGE), and whatever its kernels
 * write loses its cached verdict. A kernel error
 * stops dispatching; running kernels drain.
 * @return st->error (0 or a negative code; st->task / st->node say where).
 * Never crashes or hangs on bad device data. */
int hbg__exec_run(hbg__exec *e, const hbg_dev_launch_desc *l, hbg_dev_status *st);

/* The executor's table of user kernels (src/exec/user_kernels.h), owned by
 * the executor. */
struct hbg__ukernels *hbg__exec_ukernels(hbg__exec *e);

/* Device memory [addr, addr+len) was written or freed. Thread-safe. */
void hbg__exec_invalidate(hbg__exec *e, hbg_devptr addr, uint64_t len);

/* The executor's Definition checks, shared with the launch verifier
 * (src/device/verify.c) so both judge a Definition alike. For a Definition
 * whose header h was validated: its view over the bytes at p; every node's
 * arguments against its kernel's signature (@return 0 or the first error,
 * *bad = that node); the node whose arguments hold tensor record i
 * (UINT32_MAX if none). */
void hbg__exec_def_view(const void *p, const hbg_def_hdr *h,
                        hbg_img_def_view *v);
int hbg__exec_def_kernels(const hbg_img_def_view *v, const hbg_def_hdr *h,
                          uint32_t *bad);
uint32_t hbg__exec_node_of_tensor(const hbg_img_def_view *v,
                                  const hbg_def_hdr *h, uint32_t i);

#endif
