/*
 * cuda backend, user kernels (internal; cuda_link.c): registrations of
 * lane-model kernels (hbg_kernel.h), the dispatch PTX generated from them,
 * the executor linked with the users' device code by the driver's linker,
 * and the module that runs every launch once something is registered.
 *
 * Ownership: one hbg__cu_link per open device (hbg__cuda.link), made at
 * the first registration and freed at close with every module it loaded
 * (a launch queued from an older module may still run until then). One
 * mutex orders registrations; launches and submit checks read what the
 * last registration published (the exec function, the largest scratch)
 * through atomics, and the registration table under the mutex.
 */
#ifndef HBG_DEVICE_CUDA_CUDA_LINK_H
#define HBG_DEVICE_CUDA_CUDA_LINK_H

#include <hbg/hbg.h>

#include "device/cuda/cuda_internal.h"

typedef struct hbg__cu_link hbg__cu_link;

/* One registered kernel: what the dispatch needs (hbg_dcu_kinfo's fields
 * and the function's name). */
typedef struct hbg__cu_ureg {
  uint32_t kernel, phases, rows_of;
  uint64_t scratch_floats;
  char *symbol;
  uint32_t img; /* its image in the link's list */
} hbg__cu_ureg;

/* The dispatch (devcode/user.h's hbg_dcu_info and hbg_dcu_call) for
 * r[0..n), ascending ids, as NUL-terminated PTX text (malloc'ed), or NULL
 * when out of memory. */
char *hbg__cu_dispatch_ptx(const hbg__cu_ureg *r, uint32_t n);

/* The cuda device behind dev (through fault wrappers), or NULL. */
hbg__cuda *hbg__cu_from(hbg_device *dev);

/* hbg_kernel_register's cuda half: k[0..n) checked for the generic rules
 * (ids, phases, rows_of, scratch) by the caller. dev is the cuda device
 * itself. */
int hbg__cu_kernel_register(hbg_device *dev, const hbg_kernel_impl *k,
                            uint32_t n);

/* 0 when task t's user kernel is registered on c and its per-row phase
 * count names one of t's tensors, else HBG_E_KERNEL with why. */
int hbg__cu_link_check(hbg__cuda *c, const hbg_task *t, char *why,
                       size_t len);

/* The launch's view: the linked executor and its grid (the built-in
 * module's, c->xbuilt, while nothing is registered), and a kernel scratch
 * need raised to the largest registered user kernel's. */
const hbg__cu_exec *hbg__cu_link_exec(hbg__cuda *c);
uint64_t hbg__cu_link_floats(hbg__cuda *c, uint64_t floats);

/* At close, the context current: unload every module, free the rest. */
void hbg__cu_link_free(hbg_device *dev, hbg__cuda *c);

/* What linking cost and how the cache did, since open. */
typedef struct hbg__cu_link_stats {
  uint64_t registered; /* kernels */
  uint64_t images;     /* distinct images linked */
  uint64_t links;      /* cuLinkComplete runs */
  uint64_t cache_hits, cache_writes, cache_rejects;
  uint64_t link_ns;  /* the last link: cuLinkCreate to cuLinkComplete */
  uint64_t load_ns;  /* the last cuModuleLoadData + cuModuleGetFunction */
  uint64_t linked_bytes; /* the last linked image */
  float link_wall_ms;    /* the driver's own CU_JIT_WALL_TIME, last link */
} hbg__cu_link_stats;
/* @return 0, HBG_E_UNSUPPORTED (not a cuda device). */
int hbg__cu_link_stats_get(hbg_device *dev, hbg__cu_link_stats *out);

#endif
