/*
 * The launch verifier (internal): what `launch` does on a backend that
 * verifies rather than executes (cuda, acl). It reads the task window and
 * every Submission and Definition it references back from device memory,
 * runs the graph layer's validators and the executor's Definition checks
 * over them, checks every device range an image names against the live
 * allocations, and writes an hbg_dev_status: the same verdicts, in the
 * same order and at the same entry / node, as the sim's executor
 * (src/exec/exec.c), except that nothing runs.
 *
 * A backend gives it a small I/O interface and one hbg__verifier per open
 * device, which holds the Definition verdict cache (src/exec/verdict.h)
 * across launches.
 */
#ifndef HBG_DEVICE_VERIFY_H
#define HBG_DEVICE_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include <hbg/hbg_device.h>

#include "exec/verdict.h"

/* The backend calls hbg__verify_invalidate for every write and free of
 * device memory: a valid cached Definition is then trusted without being
 * read back (its bytes are kept in the cache). Without the flag every
 * Definition is read back each launch and a cached verdict holds only
 * while those bytes still hash to the validated hash. */
#define HBG__VERIFY_TRACKS_WRITES 1u

typedef struct hbg__verify_io {
  void *ctx;
  uint32_t flags; /* HBG__VERIFY_* */
  /* The live allocation that holds base also holds [base + rel, + len)
   * (as the sim's executor resolves a range). @return 1 or 0. */
  int (*live)(void *ctx, hbg_devptr base, uint64_t rel, uint64_t len);
  /* Host memory for `bytes` of readback, slot 0 the window, 1 the images;
   * valid until the next call for that slot. NULL: the verifier's own. */
  int (*scratch)(void *ctx, int slot, size_t bytes, uint8_t **out);
  /* Start reading [src, src + len) into dst, after everything the host
   * queued before the launch; done at the next flush. */
  int (*read)(void *ctx, void *dst, hbg_devptr src, uint64_t len);
  /* Wait for every read started so far. */
  int (*flush)(void *ctx);
  /* Write the verdict to device memory at dst. */
  int (*write_status)(void *ctx, hbg_devptr dst, const hbg_dev_status *st);
} hbg__verify_io;

typedef struct hbg__verifier {
  hbg__vcache vc;
  uint8_t *buf[2]; /* default scratch */
  size_t cap[2];
} hbg__verifier;

/* @return 0 or HBG_E_NOMEM. */
int hbg__verify_init(hbg__verifier *v);
void hbg__verify_fini(hbg__verifier *v);

/* Device memory [a, a + len) was written or freed. */
void hbg__verify_invalidate(hbg__verifier *v, hbg_devptr a, uint64_t len);

/* Verify the launch l and write its status. *rb_bytes grows by the bytes
 * read back. @return 0 once the status is written (its error is the
 * verdict), HBG_E_RANGE when l->status is not live device memory,
 * HBG_E_INVAL for a short descriptor, HBG_E_NOMEM, or the I/O interface's
 * error (then no status is written). */
int hbg__verify_launch(hbg__verifier *v, const hbg__verify_io *io,
                       const hbg_dev_launch_desc *l, uint64_t *rb_bytes);

#endif
