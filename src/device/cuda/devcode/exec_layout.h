/*
 * hbg device code (internal): the layout of hbg_dc_exec's scratch block,
 * one pure function compiled for the device (exec.c's set-up lays the
 * block out with it) and for the host (the cuda backend sizes the queue's
 * block with it before it launches), so the two cannot disagree.
 *
 * The block: the control header (hbg_dc_exec_ctl), one hbg_img_graph per
 * window entry, the scheduling core's state (src/exec/sched_src.h,
 * hbg__sched_bytes), one kernel scratch area per CTA; each part starts
 * 64-byte aligned.
 */
#ifndef HBG_DEVICE_CUDA_DEVCODE_EXEC_LAYOUT_H
#define HBG_DEVICE_CUDA_DEVCODE_EXEC_LAYOUT_H

#include "device/cuda/devcode/devcode.h"
#include "exec/sched_src.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbg_dc_exec_layout {
  uint64_t off_graphs;  /* hbg_img_graph[n_tasks] */
  uint64_t off_sched;   /* the scheduling core's block */
  uint64_t off_kscr;    /* CTA k's kernel scratch: off_kscr + k * kscr_stride */
  uint64_t kscr_stride; /* bytes per CTA, a multiple of 64 */
  uint64_t need;        /* bytes in all; UINT64_MAX: past the limits below */
} hbg_dc_exec_layout;

/* Inputs past these limits (far beyond what a window may hold) need
 * UINT64_MAX bytes: no block is that large. */
#define HBG_DC_EXEC_MAX_COUNT (1ull << 40) /* dependencies, nodes, floats */
#define HBG_DC_EXEC_MAX_CTAS (1ull << 31)

static inline HBG_IMAGE_FN uint64_t hbg_dc_exec_al64(uint64_t n) {
  return (n + 63u) & ~(uint64_t)63u;
}

/* The block for a window of n_tasks entries, n_deps dependencies and
 * n_nodes graph nodes in all, whose largest built-in kernel call needs
 * kscr_floats scratch floats, run by n_ctas CTAs. */
static inline HBG_IMAGE_FN void
hbg_dc_exec_layout_of(uint64_t n_tasks, uint64_t n_deps, uint64_t n_nodes,
                      uint64_t kscr_floats, uint64_t n_ctas,
                      hbg_dc_exec_layout *l) {
  l->off_graphs = hbg_dc_exec_al64(sizeof(hbg_dc_exec_ctl));
  l->off_sched = 0;
  l->off_kscr = 0;
  l->kscr_stride = 0;
  l->need = UINT64_MAX;
  if (n_tasks > 0xffffffffull)
    return;
  l->off_sched =
      l->off_graphs + hbg_dc_exec_al64(n_tasks * sizeof(hbg_img_graph));
  if (n_deps > HBG_DC_EXEC_MAX_COUNT || n_nodes > HBG_DC_EXEC_MAX_COUNT ||
      kscr_floats > HBG_DC_EXEC_MAX_COUNT || n_ctas > HBG_DC_EXEC_MAX_CTAS)
    return;
  l->off_kscr = l->off_sched + hbg_dc_exec_al64(hbg__sched_bytes(
                                   (uint32_t)n_tasks, n_deps, n_nodes));
  l->kscr_stride = hbg_dc_exec_al64(kscr_floats * 4);
  /* off_kscr < 2^46, kscr_stride <= 2^42 + 64 */
  if (l->kscr_stride && n_ctas > (UINT64_MAX - l->off_kscr) / l->kscr_stride)
    return;
  l->need = l->off_kscr + l->kscr_stride * n_ctas;
}

#ifdef __cplusplus
}
#endif

#endif
