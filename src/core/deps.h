/*
 * Inferred dependencies between the entries of a bind (hbg_config.deps =
 * HBG_DEPS_INFERRED): each entry waits for every earlier entry whose bytes
 * overlap its own where either of the two writes (RAW, WAR, WAW).
 *
 * Per buffer (hbg_buffer_alloc range, found by its start address), two
 * interval treaps: the live writes and the live reads. A write removes
 * what it overlaps (keeping the parts outside it) from both: a later
 * access to those bytes conflicts with the write, which already waits for
 * them, so the edge is implied. Reads only append to the buffer's pending
 * list, moved into its read tree when a write to the buffer comes: reads
 * of a buffer nothing writes (weights) cost O(1). Each node is a record
 * {lo, hi, entry}; the nodes live in one array, the buffers in one map,
 * both reset per bind without freeing.
 *
 * Cost: O(log n + k) per tensor, n the live records of its buffer, k the
 * records it overlaps; every record is inserted once and removed at most
 * once, so the removals a write makes are paid for by the inserts before
 * it.
 *
 * An entry's inferred set has at most one edge per earlier entry, and only
 * to entries whose records still overlap it (not covered by a later
 * write). With its explicit deps merged, more than HBG__DEPS_MAX distinct
 * entries is HBG_E_LIMIT.
 *
 * Use per entry: hbg__deps_entry, hbg__deps_add per tensor, hbg__deps_infer
 * (may fail; changes no record), then, once the entry is published,
 * hbg__deps_commit (cannot fail: infer reserved its room).
 */
#ifndef HBG_CORE_DEPS_H
#define HBG_CORE_DEPS_H

#include <stdint.h>

#include <hbg/hbg.h>

#include "core/map.h"

/* Distinct earlier entries one entry may wait for (window entries keep a
 * u32 list; the explicit-deps check uses the same bound). */
#define HBG__DEPS_MAX 256u

typedef struct hbg__ivl {
  uint64_t lo, hi, max; /* [lo, hi); max: the largest hi in the subtree */
  uint32_t entry;
  uint32_t l, r; /* children, 0 = none (node 0 is never used) */
  uint32_t prio;
} hbg__ivl;

/* One buffer's records (an entry of hbg__deps.bufs). */
typedef struct hbg__dbuf {
  hbg__mkey k;           /* k1 = buffer start */
  uint32_t wroot, rroot; /* trees of live writes, live reads */
  uint32_t pend;         /* reads not in rroot yet (chained by .l) */
  uint32_t reserved;
} hbg__dbuf;

typedef struct hbg__dacc {
  uint64_t buf, lo, hi;
  uint32_t write;
  uint32_t h0, hits; /* its records in d->hits (infer), how many */
  uint32_t hw;       /* how many of them are writes (they come first) */
  hbg__dbuf *b;      /* set by infer, used by commit */
} hbg__dacc;

typedef struct hbg__deps {
  hbg__ivl *v;
  uint32_t n, cap, free_list; /* nodes used (node 0 included), free chain */
  uint32_t rng;
  uint32_t *hits; /* records the entry's accesses overlap (infer) */
  uint32_t n_hits, hits_cap;
  uint32_t *dead; /* commit: nodes to free once it is done */
  uint32_t n_dead, dead_cap;
  hbg__map bufs; /* buffer start -> hbg__dbuf */
  uint32_t *out; /* infer's result: sorted distinct entries */
  uint32_t n_out, out_cap;
  hbg__dacc *acc; /* the entry's accesses */
  uint32_t n_acc, acc_cap;
} hbg__deps;

/* Drop every record (start of a bind); keeps the memory. */
void hbg__deps_reset(hbg__deps *d);
void hbg__deps_free(hbg__deps *d);
/* Start the accesses of the next entry. */
void hbg__deps_entry(hbg__deps *d);
/* The entry touches [lo, lo + len) of the buffer that starts at buf,
 * writing or not. @return 0 or HBG_E_NOMEM. */
int hbg__deps_add(hbg__deps *d, uint64_t buf, uint64_t lo, uint64_t len,
                  int write);
/* The entry's dependencies into d->out[0..n_out): the earlier entries its
 * accesses conflict with, merged with the explicit ones, sorted, distinct.
 * Records stay as they were. `who` and `self` (the id the entry will get)
 * name it in hbg_last_error().
 * @return 0, HBG_E_NOMEM or HBG_E_LIMIT (more than HBG__DEPS_MAX). */
int hbg__deps_infer(hbg__deps *d, const hbg_task_id *deps, uint32_t n_deps,
                    const char *who, uint32_t self);
/* Record the entry's accesses as entry `self`'s: reads first, then writes,
 * which cover what they overlap. Never fails after hbg__deps_infer. */
void hbg__deps_commit(hbg__deps *d, uint32_t self);

#endif
