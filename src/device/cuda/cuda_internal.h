/*
 * cuda backend (internal): state shared by the ops (cuda.c) and the launch
 * verifier (cuda_verify.c). Built only with HBG_HAVE_CUDA. The CUDA driver
 * API is called through the table loaded at open (cuda_api.h, c->f).
 *
 * Device addresses are CUDA device pointers cast to uint64. The backend keeps
 * two address registries of its own: host ranges it pinned (host_alloc /
 * host_register; a copy whose host side lies inside one is counted as
 * pinned) and live device allocations (sizes for mem_in_use, and the bounds
 * the verifier checks untrusted image addresses against before any DMA).
 */
#ifndef HBG_DEVICE_CUDA_CUDA_INTERNAL_H
#define HBG_DEVICE_CUDA_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>


#include <hbg/hbg_device.h>

#include "device/cuda/cuda_api.h"
#include "common/ranges.h"

/* HBG__CU_DEV_IMPORT: the caller's device memory (mem_import), in the
 * device registry so the verifier and exec=device accept tensors in it,
 * never freed by the backend and not counted in mem_in_use. */
enum {
  HBG__CU_HOST_ALLOC = 1,
  HBG__CU_HOST_REGISTER = 2,
  HBG__CU_DEV_ALLOC = 3,
  HBG__CU_DEV_IMPORT = 4
};

/* A pinned host buffer the backend owns (verifier readback). */
typedef struct hbg__cu_scratch {
  uint8_t *p;
  size_t cap;
} hbg__cu_scratch;

/* exec=device: a scratch block a growth replaced, freed once `done`
 * (recorded on the queue after the block's last launch) has completed. */
typedef struct hbg__cu_xretired {
  CUdeviceptr block;
  uint64_t bytes; /* 0: a live-range table (xr), not a scratch block */
  CUevent done;
  struct hbg__cu_xretired *next;
} hbg__cu_xretired;

struct hbg_dev_queue {
  CUstream s;
  int borrowed; /* s is the caller's (queue_borrow): never destroyed or
                   synchronised here */
  /* References: the queue's owner (1) and each live captured graph whose
   * launch uses the executor block (capture_retain); the last one frees
   * the queue, from a graph's destructor through the device's dead list
   * (it may not call the driver there). While a graph holds one, the
   * block and the range table are never replaced (a replay reads them). */
  _Atomic uint32_t refs;
  struct hbg_dev_queue *dead_next;
  hbg_dev_status *status; /* pinned source of the status write, lazily */
  /* exec=device: the executor's scratch block, retained for this stream's
   * launches: made at queue creation (scratch= bytes), grown before a
   * launch whose sizing hints need more (the high-water mark, kept), freed
   * at the queue's destruction; the generation the next launch publishes
   * its set-up under; the bytes the last sized launch needed (the host's
   * figure, hbg_dc_exec_layout_of); blocks replaced by a growth; a
   * pinned zeroed control header, the source of a new block's (pinned, so
   * the copy does not wait for the stream's earlier work). */
  CUdeviceptr xblock;
  uint64_t xbytes, xgen, xneed;
  uint64_t xpool; /* the block's pool of private Definition copies: bytes
                     (the verdict cache holds HBG_DC_EXEC_CACHE_SLOTS) */
  hbg__cu_xretired *xretired;
  void *xzero;
  /* exec=device: the device's live allocations as this stream's launches
   * check tensor addresses against them ([start, end) pairs), uploaded
   * before a launch when the registry changed since (dmem_gen); room for
   * xr_cap ranges, xr_n used; xr_uploads counts the uploads. */
  CUdeviceptr xr;
  uint64_t xr_cap, xr_n, xr_gen, xr_uploads;
};

struct hbg_dev_event {
  CUevent e;
};

/* Counters readable from any thread. */
typedef struct hbg__cu_stats {
  _Atomic uint64_t h2d_copies, h2d_bytes, d2h_copies, d2h_bytes;
  _Atomic uint64_t async_copies, async_degraded, pinned_direct, handshakes;
  _Atomic uint64_t mem_allocs, mem_frees, mem_in_use;
  _Atomic uint64_t host_allocs, host_frees, host_in_use, launches;
  _Atomic uint64_t scratch_allocs, scratch_frees, scratch_in_use;
} hbg__cu_stats;

/* The device executor's function and the grid it launches with
 * (exec=device): the built-in module's, or a user-kernel link's (each link
 * sizes its own: a linked function takes other registers and stack).
 * Immutable once made. */
typedef struct hbg__cu_exec {
  CUfunction fn;
  unsigned ctas, lanes;  /* grid: one CTA per SM; threads per CTA */
  unsigned worker_lanes; /* lanes per worker: the warp, or the CTA
                            (worker=cta) */
  int per_sm;            /* CTAs of `lanes` threads an SM holds
                            (cuOccupancyMaxActiveBlocksPerMultiprocessor) */
  int regs, local_bytes; /* per thread, as the driver reports them */
} hbg__cu_exec;

typedef struct hbg__cuda {
  void *lib; /* dlopen handle of the driver library */
  int ctx_borrowed; /* ctx=current: the caller's context, never released */
  pthread_mutex_t dead_mu; /* queues whose last reference a graph's */
  struct hbg_dev_queue *dead; /* destructor dropped, freed at the next op */
  hbg__cu_fns f;
  int ordinal;
  CUdevice cudev;
  CUcontext ctx; /* the device's primary context, retained while open */
  CUstream sync; /* internal stream for the synchronous copies */
  CUmodule mod;  /* the embedded device module, loaded while open */
  CUfunction fn_check; /* its hbg_dc_check_window */
  CUfunction fn_exec;  /* its hbg_dc_exec */
  CUfunction fn_node;  /* its hbg_dc_node (the peer executors) */
  /* exec= option: 0 verify (host-side verifier, the default), 1 device
   * (hbg_dc_exec on the GPU); with 1, the grid, block and per-stream
   * scratch block (scratch= option) of each launch. */
  int exec_device;
  int worker_cta; /* worker=cta: a CTA per worker, else a warp */
  int coop;       /* the device launches cooperative grids */
  uint64_t deadline_ns; /* deadline_ms=: how long a launch may wait */
  hbg__cu_exec xbuilt;  /* the built-in module's executor */
  uint64_t xscratch;
  uint64_t mem_bytes;
  /* non-overlapping ranges, kind = HBG__CU_* */
  hbg__rtab host; /* HBG__CU_HOST_ALLOC / HBG__CU_HOST_REGISTER */
  hbg__rtab dmem; /* HBG__CU_DEV_ALLOC / HBG__CU_DEV_IMPORT */
  uint64_t dmem_gen; /* changes of dmem (exec=device's live-range tables) */
  uint64_t *xr_host; /* their pageable source ([start, end) pairs) */
  size_t xr_host_cap; /* in ranges */
  hbg__cu_scratch win, img;
  struct hbg__verifier *ver; /* the launch verifier, made at first launch */
  hbg__cu_stats st;
  /* user kernels linked into the executor (cuda_link.c), made at the
   * first hbg_kernel_register, freed at close */
  struct hbg__cu_link *_Atomic link;
} hbg__cuda;

#define HBG__CU_ADD(c, field, v)                                               \
  atomic_fetch_add_explicit(&(c)->st.field, (uint64_t)(v),                     \
                            memory_order_relaxed)

/* Record e (with the failing call's name) as the device's native error and
 * map it: CUDA_ERROR_OUT_OF_MEMORY -> oom, no device / stub library /
 * driver mismatch / not supported -> HBG_E_UNSUPPORTED,
 * CUDA_ERROR_INVALID_DEVICE -> HBG_E_NOTFOUND, anything else ->
 * HBG_E_DEVICE. */
int hbg__cu_err(hbg_device *dev, CUresult e, const char *call, int oom);
/* The same, with why appended to the native message. */
int hbg__cu_err_why(hbg_device *dev, CUresult e, const char *call, int oom,
                    const char *why);

/* Driver loading and probing (cuda_load.c). The library's path: lib=,
 * else HBG_CUDA_LIB, else libcuda.so.1. @return 0 or HBG_E_INVAL. */
int hbg__cu_lib_path(const char *options, char *path, size_t len);
/* dlopen path and resolve every symbol of cuda_api.h (optional ones may
 * stay NULL). @return 0, or HBG_E_LOAD with the reason in why. */
int hbg__cu_load(const char *path, void **lib, hbg__cu_fns *f, char *why,
                 size_t len);
/* The backend's probe op: what the driver reports, into buf; 0 when a GPU
 * can load hbg's device module, else a mapped error. */
int hbg__cu_probe(char *buf, size_t len);

/* Make the device's context current on the calling thread (CUDA contexts
 * are per thread; every op that reaches the driver calls this first).
 * @return 0 or a mapped driver error. */
int hbg__cu_enter(hbg_device *dev, const hbg__cuda *c);

/* The range containing [lo, lo + len) (len 0 counts as 1), or NULL. */
const hbg__range *hbg__cu_ranges_find(const hbg__rtab *t, uint64_t lo,
                                      uint64_t len);

/* Grow s to hold need bytes (pinned). @return 0, HBG_E_NOMEM, device error. */
int hbg__cu_scratch_reserve(hbg_device *dev, hbg__cu_scratch *s, size_t need);
void hbg__cu_scratch_free(hbg_device *dev, hbg__cu_scratch *s);

/* The launch op: see cuda_verify.c. */
int hbg__cu_launch(hbg_device *dev, hbg_dev_queue *q,
                   const hbg_dev_launch_desc *l);
/* Release c->ver (at close). */
void hbg__cu_verify_free(hbg__cuda *c);

/* The device module libhbg embeds (generated at build time from
 * src/device/cuda/devcode by nvcc and cmake/embed.cmake): a fatbin with an
 * sm_90 cubin and compute_90 PTX. */
extern const unsigned char hbg__cu_fatbin[];
extern const size_t hbg__cu_fatbin_size;

/* Load the embedded module into the device's context and resolve its
 * entry points (at open; the context is current). @return 0, or the mapped
 * error of the failing call (HBG_E_UNSUPPORTED when the device can run
 * neither the cubin nor the PTX), the native message naming the call. */
int hbg__cu_module_load(hbg_device *dev, hbg__cuda *c);
/* Unload it (at close); a failure is kept as the native error. */
void hbg__cu_module_unload(hbg_device *dev, hbg__cuda *c);

/* Launch the device-side image check (hbg_dc_check_window) on q: it
 * validates the window of `bytes` bytes at `window` and each graph entry's
 * Submission and Definition, then writes an hbg_dev_status at `status`,
 * after everything queued on q before it. Asynchronous: returns once the
 * kernel is queued; the status is there when q is synchronised (or an
 * event recorded after it completes). Not yet the backend's launch op.
 * @return 0, HBG_E_RANGE when window or status is not inside a live
 * allocation of this device, or the mapped cuLaunchKernel error. */
int hbg__cu_check_window(hbg_device *dev, hbg_dev_queue *q, hbg_devptr window,
                         uint64_t bytes, hbg_devptr status);

/* exec=device's launch: hbg_dc_exec on q's stream with q's scratch
 * block; nothing else (no synchronisation, no read-back), except that a
 * launch with sizing hints (HBG_DEV_LAUNCH_SIZED) first grows the block to
 * what they need when it is smaller (a new block, its header zeroed on the
 * stream; the old one freed once the work queued before has completed).
 * @return 0, HBG_E_RANGE (window or status outside live device memory),
 * HBG_E_DEVMEM (the growth failed: nothing launched, the block as it was),
 * or the mapped driver error. */
int hbg__cu_exec_launch(hbg_device *dev, hbg_dev_queue *q,
                        const hbg_dev_launch_desc *l);
/* exec=device: fn's grid as the device holds it (the most lanes up to
 * 256 that one SM takes, one CTA per SM), with the context's stack limit
 * raised to fn's frame where it is below. @return 0, HBG_E_LIMIT (no CTA
 * of fn fits an SM: the native message says why), or a mapped error. */
int hbg__cu_exec_shape(hbg_device *dev, hbg__cuda *c, CUfunction fn,
                       hbg__cu_exec *out);
/* Free the borrowed queues no one references any more. */
void hbg__cu_dead_reap(hbg_device *dev, hbg__cuda *c);
/* exec=device: the queue's scratch block (at queue creation). */
int hbg__cu_exec_queue_init(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q);
/* exec=device: free the queue's blocks (at its destruction, the stream
 * synchronised). @return 0 or the first mapped driver error. */
int hbg__cu_exec_queue_fini(hbg_device *dev, hbg__cuda *c, hbg_dev_queue *q);

#endif
