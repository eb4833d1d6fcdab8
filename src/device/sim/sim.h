/*
 * The embedded sim device (internal interface shared with the exec layer).
 *
 * Device memory is one host heap owned by the sim, plus the host ranges a
 * caller imported (mem_import: its own pages, mapped zero-copy at offsets
 * above the heap); device addresses are opaque (base tag + offset), never
 * host pointers. The exec layer (the
 * device's scheduler and workers) reaches device memory only through
 * hbg__sim_resolve(), which bounds-checks against live allocations.
 */
#ifndef HBG_DEVICE_SIM_SIM_H
#define HBG_DEVICE_SIM_SIM_H

#include <stdint.h>

#include <hbg/hbg_device.h>

typedef struct hbg__sim hbg__sim;

/* @return the sim state of dev, or NULL when dev is not a sim device
 * (a fault device wrapping a sim resolves to the inner sim). */
hbg__sim *hbg__sim_from(hbg_device *dev);

/* Map [addr, addr+len) of device memory to host memory: the sim heap's,
 * or the caller's pages of an import (mem_import). The range must lie
 * inside one live allocation or import.
 * @return 0 and *out, or HBG_E_RANGE. */
int hbg__sim_resolve(hbg__sim *s, hbg_devptr addr, uint64_t len, void **out);

/* Map [base + off, base + off + len) to host memory, where the range must
 * lie inside the live allocation that holds base (an offset may not carry
 * an address into a neighbouring allocation).
 * @return 0 and *out, or HBG_E_RANGE. */
int hbg__sim_resolve_in(hbg__sim *s, hbg_devptr base, uint64_t off,
                        uint64_t len, void **out);

/* The opt-in cost model (option profile= and one key per parameter, see
 * docs/DEVICE_PROFILES.md). All zero (profile "none", the default) models
 * nothing: copies complete as soon as the engine has performed them. The
 * engine still performs every copy; the model only delays completion to an
 * absolute deadline (start of service + modelled duration), asleep. */
typedef struct hbg__sim_model {
  uint64_t copy_ns;       /* fixed cost of one copy, submission to completion */
  uint64_t h2d_mbps;      /* pinned bandwidth, 10^6 B/s; 0 = no bandwidth term */
  uint64_t pageable_mbps; /* bandwidth of a pageable (staged) copy; 0 = h2d's */
  uint64_t chunk_ns;      /* extra cost per staging chunk of a pageable copy */
  uint64_t alloc_ns;      /* one device allocation */
  uint64_t free_ns;       /* one device free */
  uint64_t launch_ns;     /* one launch, in the submitting thread */
  uint32_t free_sync;     /* a free first waits for every queue to drain */
} hbg__sim_model;

/* Introspection of the sim's own state, for tests and tools. */
typedef struct hbg__sim_info {
  uint64_t mem_bytes;     /* device heap size (option mem=) */
  uint64_t chunk_bytes;   /* bounce chunk (option chunk=) */
  uint64_t tag;           /* high bits shared by this sim's addresses */
  uint64_t free_bytes;    /* heap bytes not allocated (256-byte spans) */
  uint64_t free_extents;  /* free-list length: 1 when the heap is empty */
  uint64_t live_allocs;   /* live device allocations */
  uint64_t registrations; /* registered host ranges, host_alloc included */
  uint64_t locked;        /* of those, how many mlock actually locked */
  uint64_t mlock_failed;  /* mlock failures (the range is registered anyway) */
  uint64_t spin_us;       /* bounded polling before sleeping (option spin=) */
  uint64_t spin_hits;     /* copy waits (per pinned copy or bounce chunk)
                             that ended while polling */
  uint64_t sleeps;        /* copy waits that slept on the condvar */
  uint64_t modelled;      /* engine commands and calls the model delayed */
  uint64_t modelled_ns;   /* sum of their modelled durations */
  hbg__sim_model model;   /* the active cost model */
  const char *profile;    /* its preset's name (static string) */
  uint32_t workers;       /* exec worker threads (option workers=) */
  uint32_t queues;        /* live queues */
  uint32_t events;        /* live events */
  uint32_t bounce_locked; /* the bounce buffers are mlocked */
  uint64_t imports;       /* live imported host ranges (mem_import) */
  uint64_t import_bytes;  /* their bytes */
} hbg__sim_info;

/* @return 0 and *out, or HBG_E_INVAL. Thread-safe. */
int hbg__sim_get_info(hbg__sim *s, hbg__sim_info *out);

#endif
