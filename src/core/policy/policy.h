/*
 * Upload policies (internal): one ops table per policy, one file per
 * policy in this folder, and the services of src/core/bind.c they use.
 *
 * bind.c owns what every policy shares: the task window (host and device),
 * ordinary tasks, heap claims and their undo, the pending-image list,
 * publication, the fatal latch and launch. A policy decides where a graph
 * submission's Submission is staged, where it lives on the device and when
 * it is copied. bind.c calls its hooks at fixed points of a bind (see
 * docs/ARCHITECTURE.md, "Upload policies"); a NULL hook does nothing.
 *
 * Contract for every hook: it runs on the thread that drives the bind, with
 * the bind's slot reclaimed (no earlier bind of that slot still reads its
 * memory). A hook that fails returns a negative HBG_E_* code and never
 * latches: bind.c decides whether a failure is undone (before publication)
 * or latched (after it).
 */
#ifndef HBG_CORE_POLICY_H
#define HBG_CORE_POLICY_H

#include "core/core.h"

/* One graph submission on its way into the window. bind.c fills the first
 * block; the policy's stage hook fills the second. */
typedef struct hbg__stage {
  hbg__graph *gr;        /* valid until the next eviction */
  const hbg__def *def;
  uint64_t full_key;
  uint32_t occurrence;
  uint32_t sub_size;     /* Submission bytes (inline Definition included) */

  uint8_t *host;         /* where the Submission is written (NULL with
                            in_window: bind.c points it into the window) */
  hbg_devptr sub_dev;    /* its device address, 0 when known at launch */
  hbg_devptr def_dev;    /* not inline: the Definition's device address */
  uint64_t blk_off;      /* offset in a bind-wide block (pinned-bulk) */
  uint32_t in_window;    /* the Submission follows its window entry */
  uint32_t heap_owned;   /* host is malloc'd; bind.c frees it on undo */
  uint32_t fallback;     /* the pinned staging was full (counted once the
                            entry is placed) */
  uint32_t pending;      /* an hbg__pending record was pushed for it */
} hbg__stage;

typedef struct hbg__policy_ops {
  const char *name;      /* hbg_policy_name() */
  uint32_t inline_def;   /* Submissions carry a copy of their Definition */
  uint32_t arena;        /* each slot keeps a pinned staging arena */

  /* The slot's last bind is done (or rolled back): free per-bind device
   * memory, resize retained blocks to the last bind's need. Cannot fail;
   * a growth that fails keeps the old block. */
  void (*reclaim)(hbg_runtime *rt, hbg__slot *s);
  /* After reclaim, before the slot advances and the window header is
   * appended. A failure leaves the slot order untouched. */
  int (*begin)(hbg_bind *b);
  /* The host window is about to hold len bytes (called by every append). */
  int (*window_grow)(hbg_bind *b, uint64_t len);
  /* The slot's device window moved from `from` to `to`. */
  void (*window_moved)(hbg_bind *b, hbg_devptr from, hbg_devptr to);
  /* Stage st before its window entry exists: host staging, device
   * placement, pending record. On failure bind.c frees a heap_owned host,
   * pops a pending record and returns the slot's heap and arena claims. */
  int (*stage)(hbg_bind *b, hbg__stage *st);
  /* A window entry was published: st is the graph submission's staging,
   * NULL for an ordinary task. A failure is latched. */
  int (*published)(hbg_bind *b, const hbg__stage *st);
  /* Orchestration is over; runs before launch's upload timing starts. */
  void (*orchestrated)(hbg_bind *b);
  /* At launch, before the window is copied: everything not uploaded yet,
   * with the window entries pointed at it. A failure is latched. */
  int (*launch)(hbg_bind *b);
  /* Teardown, after the last reclaim: release what the policy retains on
   * the slot. */
  void (*fini)(hbg_runtime *rt, hbg__slot *s);
} hbg__policy_ops;

extern const hbg__policy_ops hbg__policy_deferred;
extern const hbg__policy_ops hbg__policy_pinned_eager;
extern const hbg__policy_ops hbg__policy_coalesced;
extern const hbg__policy_ops hbg__policy_pinned_bulk;

/* Indexed by hbg_policy; every entry set (test_core_policy checks). */
extern const hbg__policy_ops *const hbg__policies[HBG_POLICY__COUNT];

/* ---- services of bind.c ---- */

/* Synchronous H2D copy counted in phase ph and in the bind's totals. */
int hbg__upload(hbg_bind *b, hbg_phase_bytes *ph, hbg_devptr dst,
                const void *src, uint64_t n, const char *what);
/* The same into the graph phase during orchestration: its time counts as
 * graph upload, not host orchestration. */
int hbg__upload_nested(hbg_bind *b, hbg_devptr dst, const void *src,
                       uint64_t n, const char *what);
/* Overwrite copied staging when HBG_CFG_POISON_STAGING is set. */
void hbg__poison(const hbg_bind *b, void *p, uint64_t n);
/* A pending image reached the device: count it, poison its staging. */
void hbg__pend_uploaded(hbg_bind *b, hbg__pending *p);
/* Inline policies: stage st->sub_size bytes at pinned, or in heap memory
 * when pinned is NULL, and push its pending record. */
int hbg__stage_pending(hbg_bind *b, hbg__stage *st, uint8_t *pinned);
/* Make the slot's device window hold need bytes (mid-bind: doubling). */
int hbg__win_dev_ensure(hbg_bind *b, uint64_t need);
/* Replace the slot's device window by one of cap bytes. */
int hbg__win_dev_grow(hbg_bind *b, uint64_t cap);

#endif
