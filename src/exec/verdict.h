/*
 * The Definition verdict cache (internal): Definitions found valid at a
 * device address, so that a resident Definition is validated once, not
 * once per launch. One implementation serves every device-side checker:
 * the sim's executor (src/exec/exec.c) and the launch verifier of the
 * backends that verify rather than execute (src/device/verify.c).
 *
 * An entry is keyed by device address and size and remembers the header
 * as validated (hash included). It is pending while its check runs, valid
 * after, and dead once memory overlapping it is written or freed
 * (hbg__vcache_invalidate). A checker that can read the bytes in place
 * needs nothing more; one that keeps no copy of them may store one in the
 * entry (`blob`), freed with it. Bounded: at HBG__VCACHE_MAX entries the
 * table starts over. Every call is thread-safe.
 */
#ifndef HBG_EXEC_VERDICT_H
#define HBG_EXEC_VERDICT_H

#include <pthread.h>
#include <stdint.h>

#include <hbg/hbg_device.h>

#include "graph/graph.h"

#define HBG__VCACHE_MAX 8192u

typedef struct hbg__verdict hbg__verdict;

typedef struct hbg__vcache {
  pthread_mutex_t mu;
  hbg__verdict *v; /* sorted by address */
  uint32_t n, cap, n_dead;
  uint64_t max_size;
} hbg__vcache;

/* @return 0 or HBG_E_NOMEM. */
int hbg__vcache_init(hbg__vcache *c);
void hbg__vcache_fini(hbg__vcache *c);

/* Look up the Definition of `size` bytes at a, whose header now reads
 * *cur. @return 1 when a valid entry with that very header exists (*hdr
 * is then the validated header), else 0: the caller checks the bytes and
 * reports with hbg__vcache_end (an entry now waits, pending). Entries at
 * a that do not match die. */
int hbg__vcache_begin(hbg__vcache *c, hbg_devptr a, uint64_t size,
                      const hbg_def_hdr *cur, hbg_def_hdr *hdr);

/* The check begun at (a, size, hash) is over: ok makes the entry valid,
 * else it dies. A valid entry takes ownership of blob (malloc'd; NULL for
 * none); otherwise blob is freed here. */
void hbg__vcache_end(hbg__vcache *c, hbg_devptr a, uint64_t size,
                     uint64_t hash, int ok, void *blob);

/* For a checker whose backend reports every write and free: a valid entry
 * at exactly (a, size) that holds a blob. @return 1 with the blob's size
 * bytes copied to dst and *hdr filled, else 0. */
int hbg__vcache_copy(hbg__vcache *c, hbg_devptr a, uint64_t size, void *dst,
                     hbg_def_hdr *hdr);

/* Device memory [a, a + len) was written or freed. */
void hbg__vcache_invalidate(hbg__vcache *c, hbg_devptr a, uint64_t len);

/* The same for n ranges [lo[i], hi[i]) (hi saturated), read from `stride`
 * bytes apart, under one lock. */
void hbg__vcache_invalidate_n(hbg__vcache *c, const hbg_devptr *lo,
                              const hbg_devptr *hi, uint32_t n, size_t stride);

#endif
