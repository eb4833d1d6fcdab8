/*
 * The embedded sim device (internal interface shared with the exec layer).
 *
 * Device memory is one host heap owned by the sim; device addresses are
 * opaque (base tag + offset), never host pointers. The exec layer (the
 * device's scheduler and workers) reaches device memory only through
 * hbg__sim_resolve(), which bounds-checks against live allocations.
 */
#ifndef HBG_DEVICE_SIM_SIM_H
#define HBG_DEVICE_SIM_SIM_H

#include <hbg/hbg_device.h>

typedef struct hbg__sim hbg__sim;

/* @return the sim state of dev, or NULL when dev is not a sim device
 * (a fault device wrapping a sim resolves to the inner sim). */
hbg__sim *hbg__sim_from(hbg_device *dev);

/* Map [addr, addr+len) of device memory to host memory of the sim heap.
 * The range must lie inside one live allocation.
 * @return 0 and *out, or HBG_E_RANGE. */
int hbg__sim_resolve(hbg__sim *s, hbg_devptr addr, uint64_t len, void **out);

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
  uint32_t workers;       /* exec worker threads (option workers=) */
  uint32_t queues;        /* live queues */
  uint32_t events;        /* live events */
  uint32_t bounce_locked; /* the bounce buffers are mlocked */
} hbg__sim_info;

/* @return 0 and *out, or HBG_E_INVAL. Thread-safe. */
int hbg__sim_get_info(hbg__sim *s, hbg__sim_info *out);

#endif
