/*
 * hbg device code (internal): the layout of hbg_dc_exec's scratch block,
 * pure functions compiled for the device (exec.c lays the block out with
 * them) and for the host (the cuda backend sizes the queue's block with
 * them before it launches), so the two cannot disagree.
 *
 * The block, each part 64-byte aligned:
 *   kept across launches (the queue's block keeps them until it is
 *   replaced):
 *     the control header (hbg_dc_exec_ctl, zeroed by the host when it
 *     makes the block);
 *     the dispatch core's state (hbg__disp: its hot words on lines of
 *     their own);
 *     the verdict cache: `cache_slots` entries (hbg_dc_centry);
 *     the pool: `pool_bytes` of private Definition copies, each with its
 *     boundary tensors' alignment masks and its nodes' dispatch plan
 *     (hbg_dc_exec_pool_slot);
 *   this launch's:
 *     the window's private copy;
 *     one hbg_dc_xent per entry;
 *     the Definition records (hbg_dc_xdef): a table keyed by content of
 *     hbg_dc_exec_groups(n_tasks) slots, then one per entry;
 *     a bitmap of the live allocations that hold an image;
 *     the dispatch core's entries (hbg__dent);
 *     the bump area: per graph entry its Submission's boundary and
 *     scalars, per entry its dependency links;
 *     the fan-in counters, the ticket queue, each worker's current item,
 *     one kernel scratch area per worker.
 */
#ifndef HBG_DEVICE_CUDA_DEVCODE_EXEC_LAYOUT_H
#define HBG_DEVICE_CUDA_DEVCODE_EXEC_LAYOUT_H

#include "device/cuda/devcode/devcode.h"
#include "exec/sched_src.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One entry of the verdict cache: a Definition validated by an earlier
 * launch on this block, its private copy in the pool. */
typedef struct hbg_dc_centry {
  uint64_t size;      /* 0: an empty entry */
  uint64_t hash;      /* the header's hash field (a lookup key only) */
  uint64_t pool_off;  /* the copy, from the pool's start */
  uint64_t kscr;      /* scratch floats its largest node needs */
  uint32_t first_user; /* first node whose kernel is not built in, or
                          UINT32_MAX (a user kernel's: asked of the
                          linked module at each launch) */
  uint32_t n_nodes;
  uint32_t n_sinks;    /* nodes nothing consumes */
  uint32_t reserved;
} hbg_dc_centry;

/* Per window entry, this launch. */
typedef struct hbg_dc_xent {
  uint32_t ok;       /* passed every check so far */
  uint32_t def;      /* its Definition's group */
  uint32_t differs;  /* atomic: its bytes differ from its group leader's */
  uint32_t cache;    /* the cache entry with its Definition's key, or
                        UINT32_MAX */
  uint32_t bound_ok; /* graph: its boundary may be checked tensor by
                        tensor (its copy's counts match the Submission) */
  uint32_t user_from; /* graph: its Definition's first node without a
                         built-in kernel (checked against the linked
                         module at every launch), or UINT32_MAX */
  uint64_t def_addr; /* graph: where its Definition is (inline or not) */
  uint64_t def_size;
  const uint8_t *def_ptr; /* the executor's pointer to those bytes */
  uint64_t bind;     /* graph: its boundary (addr, offset) pairs, then
                        scalars, at this offset from the block's start */
  uint64_t links;    /* its first dependency link (index) */
  hbg_sub_hdr sh;    /* graph: its Submission's header, as validated */
  hbg_img_def_view v; /* graph: the private copy it runs */
} hbg_dc_xent;

/* A Definition this launch names: a group of entries whose Definitions
 * share (size, header hash) (slots [0, groups), keyed), or one entry's
 * whose bytes differ from its group leader's (slot groups + entry). */
typedef struct hbg_dc_xdef {
  uint64_t size, hash; /* the key */
  uint32_t claim;      /* atomic: 0 free, 1 being keyed, 2 keyed */
  uint32_t leader;     /* atomic minimum: lowest entry naming it */
  uint32_t cache;      /* the cache entry it uses or fills, UINT32_MAX */
  uint32_t miss;       /* atomic: the leader's bytes differ from that
                          cache entry's copy, or there is none */
  uint32_t state;      /* DX_D_* (exec.c) */
  uint32_t first_user; /* atomic minimum (validation) */
  uint64_t kscr;       /* atomic maximum (validation) */
  uint64_t key;        /* atomic minimum: the validator's least key */
  uint32_t sinks;      /* atomic: nodes nothing consumes (the plan's) */
  uint32_t reserved;
  uint64_t pool_off;   /* its copy (state COPY) */
  const uint8_t *src;  /* the bytes it is copied or validated from */
} hbg_dc_xdef;

typedef struct hbg_dc_exec_layout {
  uint64_t off_disp;    /* hbg__disp */
  uint64_t off_cache;   /* hbg_dc_centry[cache_slots] */
  uint64_t off_pool;    /* pool_bytes */
  uint64_t off_win;     /* the window's copy */
  uint64_t off_xent;    /* hbg_dc_xent[n_tasks] */
  uint64_t off_xdef;    /* hbg_dc_xdef[groups + n_tasks] */
  uint64_t off_bits;    /* u32[(n_ranges + 31) / 32] */
  uint64_t off_dent;    /* hbg__dent[n_tasks] */
  uint64_t off_bump;    /* boundary snapshots and links, bump-allocated */
  uint64_t groups;      /* Definition groups' table size, a power of 2 */
  uint64_t need;        /* bytes in all (with the bump area and tail as the
                           sizing says); UINT64_MAX: past the limits */
} hbg_dc_exec_layout;

/* Inputs past these limits (far beyond what a window may hold) need
 * UINT64_MAX bytes: no block is that large. */
#define HBG_DC_EXEC_MAX_COUNT (1ull << 40) /* dependencies, nodes, floats */
#define HBG_DC_EXEC_MAX_CTAS (1ull << 31)
/* The verdict cache's entries per block. */
#define HBG_DC_EXEC_CACHE_SLOTS 256u

static inline HBG_IMAGE_FN uint64_t hbg_dc_exec_al64(uint64_t n) {
  return (n + 63u) & ~(uint64_t)63u;
}

/* Pool bytes of one Definition of `size` bytes: its copy, then one u32
 * alignment mask per boundary tensor (a boundary signature takes 40 bytes
 * of the image, so there are at most size / 40), then one hbg__dnode per
 * node (a node takes at least 48 bytes: its record and two CSR row
 * starts). */
static inline HBG_IMAGE_FN uint64_t hbg_dc_exec_masks_bytes(uint64_t size) {
  return hbg_dc_exec_al64((size / 40 + 1) * 4);
}
static inline HBG_IMAGE_FN uint64_t hbg_dc_exec_plan_nodes(uint64_t size) {
  return size / 48 + 1;
}
static inline HBG_IMAGE_FN uint64_t hbg_dc_exec_pool_slot(uint64_t size) {
  return hbg_dc_exec_al64(size) + hbg_dc_exec_masks_bytes(size) +
         hbg_dc_exec_al64(hbg_dc_exec_plan_nodes(size) * sizeof(hbg__dnode));
}

/* Pool bytes that hold any `n_defs` Definitions of `def_bytes` bytes in
 * all (each slot rounds up by less than 64 + (size / 10 + 68) +
 * (size / 3 + 80)). */
static inline HBG_IMAGE_FN uint64_t hbg_dc_exec_pool_bytes(uint64_t def_bytes,
                                                          uint64_t n_defs) {
  if (def_bytes > HBG_DC_EXEC_MAX_COUNT || n_defs > HBG_DC_EXEC_MAX_COUNT)
    return UINT64_MAX;
  return hbg_dc_exec_al64(def_bytes + def_bytes / 10 + def_bytes / 3 +
                          n_defs * 212);
}

/* The Definition groups' table size for n_tasks entries. */
static inline HBG_IMAGE_FN uint64_t hbg_dc_exec_groups(uint64_t n_tasks) {
  uint64_t g = 16;
  while (g < 2 * n_tasks)
    g *= 2;
  return g;
}

/* The layout of this launch's parts (the fixed ones from cache_slots and
 * pool_bytes), and with the window's sizing (n_deps, n_nodes, kscr_floats,
 * n_btensors, n_bscalars; the sizing fields of hbg_dev_launch_desc) and
 * the grid's workers the whole need. */
static inline HBG_IMAGE_FN void
hbg_dc_exec_layout_of(uint64_t cache_slots, uint64_t pool_bytes,
                      uint64_t window_bytes, uint64_t n_tasks,
                      uint64_t n_ranges, uint64_t n_deps, uint64_t n_nodes,
                      uint64_t n_btensors, uint64_t n_bscalars,
                      uint64_t kscr_floats, uint64_t n_workers,
                      hbg_dc_exec_layout *l) {
  l->off_disp = hbg_dc_exec_al64(sizeof(hbg_dc_exec_ctl));
  l->off_cache = l->off_disp + hbg_dc_exec_al64(sizeof(hbg__disp));
  l->off_pool = l->off_win = l->off_xent = l->off_xdef = 0;
  l->off_bits = l->off_dent = l->off_bump = 0;
  l->groups = 16;
  l->need = UINT64_MAX;
  if (cache_slots > 0xffffffffull || pool_bytes > HBG_DC_EXEC_MAX_COUNT ||
      window_bytes > HBG_DC_EXEC_MAX_COUNT || n_tasks > 0xffffffffull ||
      n_ranges > HBG_DC_EXEC_MAX_COUNT || n_deps > HBG_DC_EXEC_MAX_COUNT ||
      n_nodes > HBG_DC_EXEC_MAX_COUNT || n_btensors > HBG_DC_EXEC_MAX_COUNT ||
      n_bscalars > HBG_DC_EXEC_MAX_COUNT ||
      kscr_floats > HBG_DC_EXEC_MAX_COUNT ||
      n_workers > HBG_DC_EXEC_MAX_CTAS)
    return;
  l->groups = hbg_dc_exec_groups(n_tasks);
  l->off_pool = l->off_cache +
                hbg_dc_exec_al64(cache_slots * sizeof(hbg_dc_centry));
  l->off_win = l->off_pool + hbg_dc_exec_al64(pool_bytes);
  l->off_xent = l->off_win + hbg_dc_exec_al64(window_bytes);
  l->off_xdef = l->off_xent + hbg_dc_exec_al64(n_tasks * sizeof(hbg_dc_xent));
  l->off_bits = l->off_xdef + hbg_dc_exec_al64((l->groups + n_tasks) *
                                               sizeof(hbg_dc_xdef));
  l->off_dent = l->off_bits + hbg_dc_exec_al64((n_ranges + 31) / 32 * 4);
  l->off_bump = l->off_dent + hbg_dc_exec_al64(n_tasks * sizeof(hbg__dent));
  /* every quantity below 2^40: no sum overflows */
  uint64_t bump = (n_btensors * 2 + n_bscalars) * 8 +
                  n_deps * sizeof(hbg__dlink);
  uint64_t tail = hbg_dc_exec_al64(n_nodes * 4) +
                  hbg_dc_exec_al64(hbg__disp_slots(n_tasks + n_nodes) * 8) +
                  hbg_dc_exec_al64(n_workers * 8);
  uint64_t stride = hbg_dc_exec_al64(kscr_floats * 4);
  if (stride && n_workers > (UINT64_MAX >> 2) / stride)
    return;
  l->need = l->off_bump + hbg_dc_exec_al64(bump) + tail + stride * n_workers;
}

#ifdef __cplusplus
}
#endif

#endif
