/*
 * hbg device code (internal): the kernels the cuda backend embeds, written
 * once in the common subset of C11, C++ and CUDA. nvcc compiles the .c
 * files in this folder as CUDA (-x cu) into the fatbin libhbg embeds
 * (sm_90 cubin + compute_90 PTX, see CMakeLists.txt); the stand-in driver
 * library (tests/cuda_standin) compiles the same files as plain C and
 * runs them on its stream threads, so every line that runs on the GPU also
 * runs in the tests here.
 *
 * Every entry point takes one argument struct by value (one kernel
 * parameter), so a host runner needs only its size: HBG_DC_ENTRIES lists
 * them. Includes only hbg_image.h (freestanding).
 *
 * Device addresses: on the GPU an address in an image is a pointer. A host
 * build has no such memory; it defines HBG_DC_HOST and provides
 * hbg_dc_host_ptr(), which maps a device range to host memory or returns
 * NULL (the kernel then reports HBG_IMG_E_RANGE where a GPU would fault).
 */
#ifndef HBG_DEVICE_CUDA_DEVCODE_DEVCODE_H
#define HBG_DEVICE_CUDA_DEVCODE_DEVCODE_H

#include <hbg/hbg_image.h>

#if defined(__CUDACC__)
#define HBG_DC_FN static __device__
#define HBG_DC_ENTRY(name, args) extern "C" __global__ void name(args a)
#else
#define HBG_DC_FN static
#define HBG_DC_ENTRY(name, args) void name(args a)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Same layout as hbg_device.h's hbg_dev_status (checked in cuda_module.c). */
typedef struct hbg_dc_status {
  int32_t error;
  uint32_t task;
  uint32_t node;
  uint32_t tasks_done;
  uint64_t nodes_done;
  uint64_t defs_verified;
  uint32_t flags; /* HBG_DEV_STATUS_SPLIT (1): the three below written;
                     HBG_DEV_STATUS_COUNTS (2): the counters after them */
  uint32_t phase; /* HBG_DEV_PHASE_*: where a launch past its deadline
                     waited */
  uint64_t setup_ns, run_ns;
  uint64_t setup_nodes;
  uint64_t dispatch_ops, kernel_phases;
  uint64_t body_ns, tail_ns;
  uint32_t workers;
  uint32_t step;     /* HBG_DEV_PHASE_SETUP: the grid barrier (1-based) */
  uint32_t arrived;  /* HBG_DEV_PHASE_START / SETUP: CTAs that got there */
  uint32_t ctas;
} hbg_dc_status;

/* hbg_dc_check_window: validate the task window of `bytes` bytes at
 * `window` and, for each graph entry, its Submission and Definition with
 * hbg_image.h's validators (content hashes not checked: no hash function
 * on the device yet); write the verdict to the hbg_dc_status at `status`:
 * error 0 or an HBG_IMG_E_* code, task the failing entry (UINT32_MAX for
 * the window itself), node the failing node when known, tasks_done the
 * entries checked before the failure, defs_verified the Definitions
 * validated (each distinct one once per launch while at most 16 are in
 * play; check.c's dc_seen). One thread (grid 1 x 1, block 1 x 1). */
typedef struct hbg_dc_check_args {
  uint64_t window;
  uint64_t bytes;
  uint64_t status;
} hbg_dc_check_args;

/* hbg_dc_exec: the device executor (exec.c). Checks the window, each
 * graph entry's Submission and Definition (validated once per distinct
 * content by the whole grid, the verdict kept across launches with a
 * private copy of the bytes), every tensor against the live allocations,
 * then runs the window: entries and their nodes counted down with device
 * atomics (src/exec/sched_src.h's dispatch core), ready items run by
 * workers (a warp each on the GPU, `worker_lanes` 32; or a whole CTA,
 * `worker_lanes` = the block's threads) as the built-in kernels' phases
 * (src/kernels/kern_src.h).
 *
 * Its state lives in the block of `scratch_bytes` bytes at `scratch`
 * (8-aligned, retained by the host between launches of one stream and
 * grown by it before a launch to what exec_layout.h says the window
 * needs; never allocated here); `gen` differs from the previous launch's
 * on that block (the CTAs wait for CTA 0's prologue to publish it).
 * `cache_slots` and `pool_bytes` give the verdict cache's shape: the same
 * for every launch on one block (a block whose header was zeroed starts
 * with an empty cache). A block too small for the window is
 * HBG_DC_E_DEVMEM (task and node UINT32_MAX) with the bytes needed kept in
 * the block's control header; nothing past what fits is written. Writes
 * the hbg_dc_status at `status` when every CTA is done. Any grid; all its
 * CTAs must be resident at once (set-up waits at grid barriers).
 *
 * Every tensor an item reads or writes must lie inside one of the
 * `n_ranges` live allocations listed at `ranges` ([start, end) pairs of
 * u64, ascending, not overlapping: the backend's registry as of the
 * launch), and so must each image it reads: a wild address in the window
 * or a Submission is a located error (HBG_IMG_E_RANGE at its entry) found
 * at set-up, before any kernel runs, not a device fault. */
typedef struct hbg_dc_exec_args {
  uint64_t window;
  uint64_t bytes;
  uint64_t status;
  uint64_t scratch;
  uint64_t scratch_bytes;
  uint64_t gen;
  uint64_t ranges;
  uint64_t n_ranges;
  uint64_t cache_slots; /* verdict cache entries in the block */
  uint64_t pool_bytes;  /* bytes of private Definition copies */
  uint32_t worker_lanes; /* lanes per worker: the warp's (32 on a GPU) or
                            the block's threads */
  uint32_t reserved;
  uint64_t deadline_ns; /* a CTA waits at most this long from its start
                           (device clock) before the launch fails with
                           HBG_DC_E_TIMEOUT */
} hbg_dc_exec_args;

/* The block's control header (its first bytes; a zeroed one is a fresh
 * block: generation 0, empty cache). */
typedef struct hbg_dc_exec_ctl {
  uint64_t gen;         /* the launch whose prologue is published */
  uint64_t need;        /* bytes the last launch needed (0: unknown yet) */
  uint64_t cache_slots; /* the verdict cache's shape when it was started */
  uint64_t pool_bytes;
  uint64_t pool_used;   /* pool bytes in use */
  uint64_t launches;    /* launches run on this block */
  uint64_t exit_word;   /* atomic: gen << 32 | CTAs of launch gen that
                           have left (a launch counts without waiting for
                           CTA 0's prologue) */
  uint64_t start_word;  /* atomic: gen << 32 | CTAs of launch gen that
                           have started */
  uint64_t tmo_gen;     /* atomic: the last launch past its deadline */
  uint32_t tmo_phase, tmo_step, tmo_arrived; /* where it waited */
  uint32_t tmo_task, tmo_node;
  uint32_t cache_n;     /* cache entries in use */
  uint32_t bar_count;   /* grid barrier: CTAs arrived (atomic) */
  uint32_t bar_gen;     /* grid barrier: passes (atomic) */
  uint64_t err_key;     /* the least set-up error key (atomic minimum) */
  uint32_t err_node;    /* its node, found once set-up is over */
  uint32_t n_tasks;
  uint32_t n_workers;
  uint64_t bump;        /* bump area bytes used (atomic) */
  uint64_t nodes;       /* fan-in counters handed out (atomic) */
  uint64_t kscr;        /* scratch floats the window needs (atomic max) */
  uint64_t kscr_off;    /* the workers' scratch areas, from the block */
  uint64_t kscr_floats; /* floats per worker */
  uint64_t defs_validated; /* this launch's counters (atomic) */
  uint64_t setup_nodes;
  uint64_t items_done;
  uint64_t ops, phases, body_ns;
  uint64_t t0, t_setup; /* the device's clock: start, end of set-up */
  uint64_t t_done;      /* the window's completion (0: not seen) */
  uint64_t off_cur;     /* the workers' current items, from the block */
  hbg_img_win_view wv;  /* the window's copy, validated */
} hbg_dc_exec_ctl;

/* hbg_dc_status.flags: HBG_DEV_STATUS_SPLIT (checked in cuda_module.c). */
#define HBG_DC_STATUS_SPLIT 1u

/* hbg_dev_status.error when the scratch block is too small
 * (HBG_E_DEVMEM), and when a launch ran past its deadline
 * (HBG_E_TIMEOUT). */
#define HBG_DC_E_DEVMEM (-3)
#define HBG_DC_E_TIMEOUT (-22)
/* hbg_dc_status.flags and .phase: hbg_device.h's HBG_DEV_STATUS_* and
 * HBG_DEV_PHASE_* (checked in cuda_module.c). */
#define HBG_DC_STATUS_COUNTS 2u
#define HBG_DC_PHASE_START 1u
#define HBG_DC_PHASE_SETUP 2u
#define HBG_DC_PHASE_RUN 3u
/* The least block the host provides. */
#define HBG_DC_EXEC_MIN_SCRATCH 4096u

/* hbg_dc_node: one kernel call, run by one CTA (the peer executors of
 * hbg_peer.h launch it once per call). Its arguments are the call itself,
 * by value: every tensor by a compact record (element 0's device address,
 * metadata), the scalars' raw bits. The CTA runs the built-in kernel's
 * phases (src/kernels/kern_src.h) like hbg_dc_exec runs an item: lane =
 * thread, a barrier between phases, the call's scratch at `scratch`
 * (`scratch_floats` floats, shared by the CTA's threads). Checks: a
 * built-in kernel id, counts within the record, the scratch the call
 * needs, the scalar-dependent limits (hbg__k_values_check) and, on the
 * host build, every tensor inside live device memory. A failure writes
 * the status word at `status` (hbg_dc_node_status_pack: the error and
 * `index`) unless an earlier call already wrote one: the first error wins
 * and a call that finds the word set does nothing. Kernel argument
 * signatures (arity, dtypes, shapes) are the host's: not checked here. */
#define HBG_DC_NODE_MAX_TENSORS 16u
#define HBG_DC_NODE_MAX_SCALARS 8u

typedef struct hbg_dc_ntensor {
  uint64_t addr; /* element 0 */
  uint32_t shape[HBG_IMG_MAX_DIMS];
  uint32_t strides[HBG_IMG_MAX_DIMS]; /* in elements */
  uint8_t dtype, ndim, mode, reserved;
  uint32_t pad;
} hbg_dc_ntensor;

typedef struct hbg_dc_node_args {
  uint64_t status;         /* the status word (8 bytes, 8-aligned) */
  uint64_t scratch;        /* kernel scratch, 4-aligned */
  uint64_t scratch_floats; /* its size */
  uint32_t kernel;         /* HBG_KERNEL_* */
  uint32_t n_tensors, n_scalars;
  uint32_t index; /* the call's position in its step (reported) */
  hbg_dc_ntensor t[HBG_DC_NODE_MAX_TENSORS];
  uint64_t sc[HBG_DC_NODE_MAX_SCALARS];
} hbg_dc_node_args;

/* A kernel's parameters are at most 4096 bytes (CUDA's limit for
 * cuLaunchKernel and graph kernel nodes). */
#define HBG_DC_PARAM_MAX 4096u
#if defined(__cplusplus)
static_assert(sizeof(hbg_dc_node_args) <= HBG_DC_PARAM_MAX,
              "hbg_dc_node's arguments fit CUDA's parameter limit");
#else
_Static_assert(sizeof(hbg_dc_node_args) <= HBG_DC_PARAM_MAX,
               "hbg_dc_node's arguments fit CUDA's parameter limit");
#endif

/* The status word: 0, or the first failing call's error (a negative
 * HBG_IMG_E_* / HBG_DC_E_DEVMEM code) in the low 32 bits and its index in
 * the high 32. */
#define hbg_dc_node_status_pack(err, index)                                    \
  ((uint64_t)(uint32_t)(int32_t)(err) | (uint64_t)(uint32_t)(index) << 32)
#define hbg_dc_node_status_error(w) ((int32_t)(uint32_t)((w)&0xffffffffu))
#define hbg_dc_node_status_index(w) ((uint32_t)((w) >> 32))

/* X(name, argument struct): every entry point of the module. */
#define HBG_DC_ENTRIES(X)                                                      \
  X(hbg_dc_check_window, hbg_dc_check_args)                                    \
  X(hbg_dc_exec, hbg_dc_exec_args)                                             \
  X(hbg_dc_node, hbg_dc_node_args)

#if !defined(__CUDACC__)
#define HBG_DC_DECLARE(name, args) void name(args a);
HBG_DC_ENTRIES(HBG_DC_DECLARE)
#undef HBG_DC_DECLARE
#endif

#if defined(HBG_DC_HOST)
/* Host memory behind device range [addr, addr + len), or NULL. */
void *hbg_dc_host_ptr(uint64_t addr, uint64_t len);
/* Called each time the device code validates a Definition (the stand-in
 * counts them, so tests see validation skipped where a verdict is kept). */
void hbg_dc_host_def_validated(void);
/* A host build runs a launch of G CTAs of L threads as G x L host threads,
 * each one GPU thread: threads of a CTA and of a warp really run at once,
 * and meet only where the GPU's would (the barriers, votes and shuffles
 * below). The runner tells each thread where it is. */
typedef struct hbg_dc_host_dim {
  uint32_t cta, ctas; /* this CTA, CTAs of the grid */
  uint32_t lanes;     /* threads per CTA (blockDim) */
  uint32_t tid;       /* this thread in its CTA (threadIdx) */
  uint32_t warp;      /* threads per warp (a divisor of lanes) */
} hbg_dc_host_dim;
const hbg_dc_host_dim *hbg_dc_host_grid(void);
/* The host's monotonic clock (the device clock of a host build). */
uint64_t hbg_dc_host_clock_ns(void);
/* A waiting thread's back-off: yield the CPU. */
void hbg_dc_host_pause(void);
#define HBG__SA_PAUSE() hbg_dc_host_pause()
/* __syncthreads, __syncthreads_or, __syncwarp, __any_sync and
 * __shfl_xor_sync over the calling thread's CTA or warp (every thread of
 * it calls; each a barrier with release/acquire order). */
void hbg_dc_host_sync_cta(void);
int hbg_dc_host_sync_cta_or(int pred);
void hbg_dc_host_sync_warp(void);
int hbg_dc_host_any_warp(int pred);
uint32_t hbg_dc_host_shfl_xor(uint32_t v, uint32_t lane_mask);
/* The calling CTA's shared memory (the same block for every thread of it,
 * at least `bytes` long, uninitialised like a GPU's). */
void *hbg_dc_host_shared(uint64_t bytes);
#endif

/* The SIMT model, one spelling for both builds: thread and CTA indices,
 * barriers of a CTA and of a warp, a warp's vote and shuffle, a CTA's
 * shared block (one per entry point: `DC_SHARED_BLOCK(T, p)` makes p
 * point at the CTA's T). */
#if defined(__CUDA_ARCH__)
#define DC_TID threadIdx.x
#define DC_NTID blockDim.x
#define DC_CTA blockIdx.x
#define DC_CTAS gridDim.x
#define DC_WARP 32u
#define DC_SYNC_CTA() __syncthreads()
#define DC_SYNC_CTA_OR(p) __syncthreads_or(p)
#define DC_SYNC_WARP() __syncwarp()
#define DC_ANY_WARP(p) (__syncwarp(), __any_sync(0xffffffffu, (p)))
#define DC_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define DC_SHARED_BLOCK(T, p)                                                  \
  __shared__ T p##_store;                                                      \
  T *const p = &p##_store
#else /* the host build (nvcc's host pass parses these bodies too) */
#define DC_TID (hbg_dc_host_grid()->tid)
#define DC_NTID (hbg_dc_host_grid()->lanes)
#define DC_CTA (hbg_dc_host_grid()->cta)
#define DC_CTAS (hbg_dc_host_grid()->ctas)
#define DC_WARP (hbg_dc_host_grid()->warp)
#define DC_SYNC_CTA() hbg_dc_host_sync_cta()
#define DC_SYNC_CTA_OR(p) hbg_dc_host_sync_cta_or(p)
#define DC_SYNC_WARP() hbg_dc_host_sync_warp()
#define DC_ANY_WARP(p) hbg_dc_host_any_warp(p)
#define DC_SHFL_XOR(v, m) hbg_dc_host_shfl_xor((v), (m))
#define DC_SHARED_BLOCK(T, p)                                                  \
  T *const p = (T *)hbg_dc_host_shared(sizeof(T))
#endif

/* The built-in kernels' warp path (kern_src.h): a shuffle of a float
 * across the calling warp's 32 lanes, and the warp's barrier (where the
 * device code runs: a GPU, or the stand-in's host build). */
#if defined(__CUDA_ARCH__) || defined(HBG_DC_HOST)
#define HBG__K_SHFL_XOR(v, m) HBG__K_U2F(DC_SHFL_XOR(HBG__K_F2U(v), (m)))
#define HBG__K_WARP_SYNC() DC_SYNC_WARP()
#endif

#ifdef __cplusplus
}
#endif

#endif
