/*
 * hbg device ABI -- for backend authors and for tests that drive a device
 * directly.
 *
 * A backend is one ops table (struct of function pointers with a leading
 * size and ABI version). The core wraps each open backend in an hbg_device,
 * which owns the backend's private state and its last native error.
 *
 * Device addresses (hbg_devptr) are opaque 64-bit values; the host never
 * dereferences them. 0 is the null device address.
 *
 * Thread safety: the dispatch functions below may be called from one thread
 * at a time per device, except hbg_dev_event_query / hbg_dev_event_wait /
 * hbg_dev_get_stats, which are safe from any thread.
 */
#ifndef HBG_HBG_DEVICE_H
#define HBG_HBG_DEVICE_H

#include <hbg/hbg.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HBG_DEV_ABI_VERSION 1

typedef uint64_t hbg_devptr;
typedef struct hbg_device hbg_device;
typedef struct hbg_dev_queue hbg_dev_queue; /* backend-defined */
typedef struct hbg_dev_event hbg_dev_event; /* backend-defined */

enum {
  HBG_DEV_CAP_ASYNC_NEEDS_PINNED = 1u << 0, /* async H2D only from pinned */
  HBG_DEV_CAP_EXECUTES = 1u << 1,           /* launch runs the task window */
  HBG_DEV_CAP_VERIFIES = 1u << 2,           /* launch validates images only */
  HBG_DEV_CAP_HOST_REGISTER = 1u << 3       /* host_register supported */
};

typedef struct hbg_dev_caps {
  uint32_t struct_size;
  uint32_t flags;           /* HBG_DEV_CAP_* */
  uint32_t stage_align;     /* start alignment of staged pieces (64) */
  uint32_t piece_pad_align; /* each piece's length rounded up to this (1) */
  uint32_t piece_pad_extra; /* plus this many bytes per piece (0) */
  uint32_t dev_align;       /* alignment of mem_alloc results */
  uint32_t max_batch;       /* most copies one batch may carry (0 = none) */
  uint32_t reserved;
  uint64_t mem_bytes;       /* device memory size */
} hbg_dev_caps;

/* hbg_dev_launch_desc.flags */
enum {
  HBG_DEV_LAUNCH_SIZED = 1u << 0,       /* the sizing fields are filled */
  HBG_DEV_LAUNCH_SIZED_IMAGES = 1u << 1, /* and the images' (def_bytes on) */
  HBG_DEV_LAUNCH_CAPTURED = 1u << 2 /* q is being captured: the launch is
                                       replayed later, any number of times,
                                       with these very arguments; a backend
                                       that keeps state across launches
                                       must make each replay start from a
                                       state it can run from, or refuse
                                       (HBG_E_CAPTURING) */
};

/* Launch descriptor: the task window the device executes (or verifies).
 * struct_size is the caller's sizeof: hbg_dev_launch accepts any size from
 * HBG_DEV_LAUNCH_DESC_SIZE_V1 (a caller built before the sizing fields) on
 * and hands the backend a whole current struct, the fields the caller did
 * not have zero (and their flags cleared). */
typedef struct hbg_dev_launch_desc {
  uint32_t struct_size;
  uint32_t flags;           /* HBG_DEV_LAUNCH_* */
  hbg_devptr window;        /* device address of the task window image */
  uint64_t window_bytes;
  hbg_devptr status;        /* device address of an hbg_dev_status the device
                               writes when the launch completes */
  /* Sizing, with HBG_DEV_LAUNCH_SIZED (the core always fills it): what the
   * window holds, counted while it was built, so that a backend keeping
   * scheduler state per queue (cuda, exec=device) sizes that state before
   * it launches. Hints, not trusted: the device checks its need again. */
  uint32_t n_tasks;         /* window entries */
  uint32_t reserved;
  uint64_t n_deps;          /* dependencies of every entry */
  uint64_t n_nodes;         /* graph nodes of every graph entry */
  uint64_t kernel_scratch;  /* the most scratch (4-byte floats) one built-in
                               kernel call of the window needs */
  /* With HBG_DEV_LAUNCH_SIZED_IMAGES (the core fills them too): for an
   * executor that keeps private copies of what it runs (cuda, exec=device:
   * each distinct Definition, each Submission's boundary and scalars). */
  uint64_t def_bytes;       /* bytes of the distinct Definitions the window
                               names (one copy per distinct content) */
  uint64_t n_defs;          /* how many distinct Definitions */
  uint64_t n_btensors;      /* boundary tensors of every graph entry */
  uint64_t n_bscalars;      /* boundary scalars of every graph entry */
} hbg_dev_launch_desc;

/* sizeof(hbg_dev_launch_desc) before the sizing fields. */
#define HBG_DEV_LAUNCH_DESC_SIZE_V1 32u
/* sizeof(hbg_dev_launch_desc) before the images' sizing fields. */
#define HBG_DEV_LAUNCH_DESC_SIZE_V2 64u

/* hbg_dev_status.flags */
enum {
  HBG_DEV_STATUS_SPLIT = 1u << 0, /* setup_ns, run_ns, setup_nodes written */
  HBG_DEV_STATUS_COUNTS = 1u << 1 /* dispatch_ops .. ctas written */
};

/* hbg_dev_status.phase: where an executor that ran past its deadline
 * (error HBG_E_TIMEOUT) was waiting. */
enum {
  HBG_DEV_PHASE_NONE = 0,
  HBG_DEV_PHASE_START = 1, /* for the launch to begin: a CTA (or worker
                              group) that starts it never did (arrived:
                              those that were waiting) */
  HBG_DEV_PHASE_SETUP = 2, /* at set-up barrier `step`: some CTAs never
                              arrived (arrived: those that did) */
  HBG_DEV_PHASE_RUN = 3    /* for items: the window did not complete (step
                              1: task and node name an item still running,
                              node UINT32_MAX for an ordinary task; step 0:
                              task the first entry not complete, node
                              UINT32_MAX) */
};

/* Written by the device at launch completion (little-endian). The struct
 * grows at its end: a backend built before the executor's split writes
 * HBG_DEV_STATUS_SIZE_V1 bytes, and the core zeroes the status word once
 * when it allocates it, so flags then reads 0. */
typedef struct hbg_dev_status {
  int32_t error;        /* 0 or a negative hbg error code */
  uint32_t task;        /* task index that failed, UINT32_MAX if none */
  uint32_t node;        /* inner node that failed, UINT32_MAX if none */
  uint32_t tasks_done;  /* tasks completed */
  uint64_t nodes_done;  /* kernels run (ordinary tasks + graph nodes) */
  uint64_t defs_verified; /* Definitions structurally validated in this
                             launch (a verdict kept from an earlier launch
                             is not counted) */
  /* An executor's own account (flags & HBG_DEV_STATUS_SPLIT): */
  uint32_t flags;        /* HBG_DEV_STATUS_* */
  uint32_t phase;        /* HBG_DEV_PHASE_*: with error HBG_E_TIMEOUT,
                            where it waited; 0 otherwise (a backend built
                            before it wrote 0 here) */
  uint64_t setup_ns;     /* the device's clock from the executor's start to
                            the end of its set-up (validation, scheduling
                            state) */
  uint64_t run_ns;       /* from the end of set-up to the end of the run */
  uint64_t setup_nodes;  /* graph node records set-up read (validation and
                            any walk of a Definition's nodes), summed over
                            the executor's threads */
  /* Its counters (flags & HBG_DEV_STATUS_COUNTS), summed over workers: */
  uint64_t dispatch_ops; /* global atomics, fences, release stores and
                            item-handing acquire loads its scheduling
                            issued (kernel bodies excluded) */
  uint64_t kernel_phases; /* kernel phases run (barriers between them) */
  uint64_t body_ns;      /* device time inside kernel bodies */
  uint64_t tail_ns;      /* from the window's completion to the end */
  uint32_t workers;      /* workers of the launch */
  uint32_t step;         /* HBG_DEV_PHASE_SETUP: the barrier, from 1;
                            HBG_DEV_PHASE_RUN: 1 when an item was running */
  uint32_t arrived;      /* HBG_DEV_PHASE_START / _SETUP: CTAs that got
                            there */
  uint32_t ctas;         /* CTAs (worker groups) of the launch */
} hbg_dev_status;

/* sizeof(hbg_dev_status) before flags. */
#define HBG_DEV_STATUS_SIZE_V1 40u
/* sizeof(hbg_dev_status) before dispatch_ops. */
#define HBG_DEV_STATUS_SIZE_V2 64u

/* Counters a backend keeps (monotonic since open). Set struct_size to
 * sizeof(hbg_dev_stats) before hbg_dev_stats_get: a caller built before the
 * scratch counters (HBG_DEV_STATS_SIZE_V1) or before free_failures
 * (HBG_DEV_STATS_SIZE_V2) gets nothing written past its struct. */
typedef struct hbg_dev_stats {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t h2d_copies, h2d_bytes;   /* sync + async */
  uint64_t d2h_copies, d2h_bytes;
  uint64_t async_copies;            /* issued as async */
  uint64_t async_degraded;          /* async from pageable, done sync */
  uint64_t pinned_direct;           /* copies read straight from pinned */
  uint64_t bounce_chunks;           /* pageable copies: bounce-buffer chunks */
  uint64_t handshakes;              /* submit/complete round trips with the
                                       copy engine */
  uint64_t mem_allocs, mem_frees;
  uint64_t mem_in_use;              /* device bytes allocated now */
  uint64_t host_allocs, host_frees;
  uint64_t host_in_use;             /* pinned host bytes allocated now */
  uint64_t launches;
  /* Device scratch the backend keeps for itself (cuda, exec=device: each
   * queue's executor block): blocks allocated (growths included), freed,
   * and bytes held now. */
  uint64_t scratch_allocs, scratch_frees;
  uint64_t scratch_in_use;
  /* Releases called through this handle that returned an error (mem_free,
   * host_free, host_unregister, queue_destroy, event_destroy,
   * mem_unimport), counted by
   * libhbg's dispatch for every backend. hbg never touches what a failed
   * release named again (docs/ARCHITECTURE.md, "Failed releases"). */
  uint64_t free_failures;
} hbg_dev_stats;

/* sizeof(hbg_dev_stats) before the scratch counters. */
#define HBG_DEV_STATS_SIZE_V1 136u
/* sizeof(hbg_dev_stats) before free_failures. */
#define HBG_DEV_STATS_SIZE_V2 160u

/* Op indices, for fault injection and call counting. */
#define HBG_DEV_OP_MAP(X)                                                      \
  X(HOST_ALLOC, host_alloc)                                                    \
  X(HOST_FREE, host_free)                                                      \
  X(HOST_REGISTER, host_register)                                              \
  X(HOST_UNREGISTER, host_unregister)                                          \
  X(MEM_ALLOC, mem_alloc)                                                      \
  X(MEM_FREE, mem_free)                                                        \
  X(COPY_H2D, copy_h2d)                                                        \
  X(COPY_D2H, copy_d2h)                                                        \
  X(QUEUE_CREATE, queue_create)                                                \
  X(QUEUE_DESTROY, queue_destroy)                                              \
  X(COPY_H2D_ASYNC, copy_h2d_async)                                            \
  X(QUEUE_SYNC, queue_sync)                                                    \
  X(EVENT_CREATE, event_create)                                                \
  X(EVENT_DESTROY, event_destroy)                                              \
  X(EVENT_RECORD, event_record)                                                \
  X(EVENT_QUERY, event_query)                                                  \
  X(EVENT_WAIT, event_wait)                                                    \
  X(LAUNCH, launch)                                                            \
  X(EVENT_ELAPSED, event_elapsed)                                              \
  X(QUEUE_WAIT_EVENT, queue_wait_event)                                        \
  X(MEM_IMPORT, mem_import)                                                    \
  X(MEM_UNIMPORT, mem_unimport)                                                \
  X(QUEUE_BORROW, queue_borrow)                                                \
  X(QUEUE_UNBORROW, queue_unborrow)                                            \
  X(QUEUE_CAPTURE, queue_capture)                                              \
  X(CAPTURE_RETAIN, capture_retain)

typedef enum hbg_dev_op {
#define HBG__DEV_OP_ENUM(up, low) HBG_DEV_OP_##up,
  HBG_DEV_OP_MAP(HBG__DEV_OP_ENUM)
#undef HBG__DEV_OP_ENUM
  HBG_DEV_OP__COUNT,
  HBG_DEV_OP_ANY = 255 /* fault injection: count every op */
} hbg_dev_op;

/* @return "mem_alloc" style name of an op, or NULL. */
HBG_API const char *hbg_dev_op_name(int op);

typedef struct hbg_dev_ops {
  uint32_t struct_size; /* sizeof(hbg_dev_ops) the backend was built with */
  uint32_t abi_version; /* HBG_DEV_ABI_VERSION */
  const char *name;
  const char *summary;

  /* Availability for `hbg devices`: 0 available, or an error with a line of
   * text in buf saying why not (a backend that loads a vendor library at
   * open, like cuda and acl, names the library or symbol it could not load:
   * HBG_E_LOAD). May be NULL (always available). */
  int (*probe)(char *buf, size_t len);
  /* Set private state with hbg_device_set_impl(). */
  int (*open)(hbg_device *dev, const char *options);
  void (*close)(hbg_device *dev);
  int (*get_caps)(hbg_device *dev, hbg_dev_caps *caps);
  int (*get_stats)(hbg_device *dev, hbg_dev_stats *st);

  int (*host_alloc)(hbg_device *dev, size_t bytes, void **out);
  int (*host_free)(hbg_device *dev, void *p);
  int (*host_register)(hbg_device *dev, void *p, size_t bytes);
  int (*host_unregister)(hbg_device *dev, void *p);
  int (*mem_alloc)(hbg_device *dev, size_t bytes, hbg_devptr *out);
  int (*mem_free)(hbg_device *dev, hbg_devptr p);
  int (*copy_h2d)(hbg_device *dev, hbg_devptr dst, const void *src,
                  size_t bytes);
  int (*copy_d2h)(hbg_device *dev, void *dst, hbg_devptr src, size_t bytes);
  int (*queue_create)(hbg_device *dev, hbg_dev_queue **out);
  int (*queue_destroy)(hbg_device *dev, hbg_dev_queue *q);
  /* Async H2D on q. src must stay valid and unchanged until an event
   * recorded after it completes. */
  int (*copy_h2d_async)(hbg_device *dev, hbg_dev_queue *q, hbg_devptr dst,
                        const void *src, size_t bytes);
  int (*queue_sync)(hbg_device *dev, hbg_dev_queue *q);
  int (*event_create)(hbg_device *dev, hbg_dev_event **out);
  int (*event_destroy)(hbg_device *dev, hbg_dev_event *ev);
  int (*event_record)(hbg_device *dev, hbg_dev_event *ev, hbg_dev_queue *q);
  /* @return 0 complete, HBG_E_AGAIN pending, or an error. */
  int (*event_query)(hbg_device *dev, hbg_dev_event *ev);
  int (*event_wait)(hbg_device *dev, hbg_dev_event *ev);
  /* Enqueue execution of a task window on q (after earlier work on q). */
  int (*launch)(hbg_device *dev, hbg_dev_queue *q, const hbg_dev_launch_desc *l);

  /* ---- added after the first version: a table whose struct_size ends
   * before a field below reads it as NULL (HBG_DEV_OPS_V1_SIZE) ---- */

  /* Device time between the completions of the latest records of start
   * and end, in *ns (0 when end completed first), measured by the device's
   * own clock. Optional (NULL: the device keeps no event timer; the core
   * then reports hbg_bind_stats.device_ns as 0).
   * @return 0, HBG_E_AGAIN (either record still pending), HBG_E_STATE
   * (either event never recorded), or an error. */
  int (*event_elapsed)(hbg_device *dev, hbg_dev_event *start,
                       hbg_dev_event *end, uint64_t *ns);
  /* The device's clock in *ns, on CLOCK_MONOTONIC's scale: a device whose
   * modelled costs are not slept (sim clock=virtual) reports the host's
   * time plus the modelled device time its callers have waited for, so
   * that the core's phase timings count modelled waits, not sleeps. Must
   * not fail. Optional (NULL: CLOCK_MONOTONIC). */
  int (*clock_ns)(hbg_device *dev, uint64_t *ns);
  /* Make the work queued on q after this call wait until ev's latest
   * record (as of this call) has completed on the device; the host does
   * not wait. An event never recorded is complete. The core orders each
   * bind's launch after the previously launched bind's completion event
   * with it (hbg_bind_launch). Optional (NULL: the core waits for the
   * event on the host before it launches instead).
   * @return 0 or an error (nothing was queued). */
  int (*queue_wait_event)(hbg_device *dev, hbg_dev_queue *q,
                          hbg_dev_event *ev);
  /* Memory the caller allocated and keeps owning, made usable as device
   * memory without a copy (hbg_buffer_import). addr names it as the
   * backend defines: on cuda a device pointer of the device's context
   * (*out is addr), on the sim a host pointer to the caller's bytes (*out
   * a sim device address whose loads and stores reach those bytes). The
   * backend validates [addr, addr + bytes) once and then resolves the
   * range wherever it resolves its own allocations (copies, launches,
   * its live-range checks); it never frees it. Optional (NULL: imports
   * are HBG_E_UNSUPPORTED).
   * @return 0, HBG_E_INVAL (bytes 0, addr 0, wraps around, overlaps a
   * live allocation or import), HBG_E_RANGE (not memory the device can
   * use as its own: the native message says why), HBG_E_NOMEM, or a
   * device error. */
  int (*mem_import)(hbg_device *dev, uint64_t addr, size_t bytes,
                    hbg_devptr *out);
  /* Forget an import (p: the start mem_import gave); the caller's memory
   * is left as it is. Work queued before that still uses the range must
   * have completed. Optional, with mem_import.
   * @return 0, or HBG_E_INVAL (p is not the start of a live import). */
  int (*mem_unimport)(hbg_device *dev, hbg_devptr p);

  /* ---- queues the caller owns, and stream capture (all optional) ---- */

  /* Wrap a queue the caller created, for launches and copies through the
   * ops above: on cuda a CUstream, on the sim one of the device's own
   * queues (hbg_dev_queue_create). The wrapper never creates,
   * synchronises or destroys the caller's queue. */
  int (*queue_borrow)(hbg_device *dev, void *native, hbg_dev_queue **out);
  /* Forget a wrapper of queue_borrow; the caller's queue is untouched.
   * Work hbg launched through it must have completed. */
  int (*queue_unborrow)(hbg_device *dev, hbg_dev_queue *q);
  /* Whether the caller is capturing q into a graph (cuStreamBeginCapture):
   * *state HBG_DEV_CAPTURE_*, *id the capture's process-unique id (0 when
   * none). Makes no call a capture forbids. NULL: queues are never
   * captured. */
  int (*queue_capture)(hbg_device *dev, hbg_dev_queue *q, uint32_t *state,
                       uint64_t *id);
  /* Tie ptr to the graph q is being captured into: destroy(ptr) runs once,
   * when that graph and every instance of it are gone, on any thread; it
   * must not call the device. */
  int (*capture_retain)(hbg_device *dev, hbg_dev_queue *q, void *ptr,
                        void (*destroy)(void *ptr));
} hbg_dev_ops;

/* queue_capture's *state. */
enum {
  HBG_DEV_CAPTURE_NONE = 0,
  HBG_DEV_CAPTURE_ACTIVE = 1,
  HBG_DEV_CAPTURE_INVALIDATED = 2
};

/* struct_size of an ops table built against the first version of this
 * header (it ends after launch); the smallest hbg_device_open_ops takes. */
#define HBG_DEV_OPS_V1_SIZE                                                    \
  (offsetof(hbg_dev_ops, launch) + sizeof(void (*)(void)))

/* ---- registry ---- */

/* @return the number of built-in backends; *out the i-th (static). */
HBG_API uint32_t hbg_device_count(void);
HBG_API const hbg_dev_ops *hbg_device_backend(uint32_t i);
/* @return the backend named name, or NULL. */
HBG_API const hbg_dev_ops *hbg_device_find(const char *name);

/* ---- open / close ---- */

/* Open a built-in backend by name with "k=v,k=v" options (may be NULL).
 * @return 0, HBG_E_INVAL, HBG_E_NOTFOUND, HBG_E_NOMEM, or the backend's error
 * (HBG_E_LOAD when cuda or acl cannot load its vendor library or one of its
 * symbols; HBG_E_UNSUPPORTED when the driver reports no usable device; a
 * failed open records its native error in the thread-local slot read by
 * hbg_device_open_error()). */
HBG_API int hbg_device_open(const char *name, const char *options,
                            hbg_device **out);
/* Same, for any ops table (a backend outside the registry). ops->struct_size
 * is at least HBG_DEV_OPS_V1_SIZE; an op the table ends before reads as
 * NULL (a backend built against an older header keeps working). */
HBG_API int hbg_device_open_ops(const hbg_dev_ops *ops, const char *options,
                                hbg_device **out);
/* Close the backend. Accepts NULL. */
HBG_API void hbg_device_close(hbg_device *dev);
/* The message of the last failed open on this thread ("" if none): the
 * same per-thread slot as hbg_last_error(), which later failing calls on
 * this thread may overwrite. */
HBG_API const char *hbg_device_open_error(void);

HBG_API const hbg_dev_ops *hbg_device_ops(const hbg_device *dev);
HBG_API const char *hbg_device_name(const hbg_device *dev);

/* ---- for backends: private state and native errors ---- */

HBG_API void hbg_device_set_impl(hbg_device *dev, void *impl);
HBG_API void *hbg_device_impl(const hbg_device *dev);
/* Record the backend-native error (code and formatted message). */
HBG_API void hbg_device_set_native(hbg_device *dev, int64_t code,
                                   const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* @return 0 and the last native error, or HBG_E_NOTFOUND if none. */
HBG_API int hbg_device_native_error(const hbg_device *dev, int64_t *code,
                                    const char **msg);

/* ---- tracing (for backends: emit COPY and DEVICE events) ---- */

/* Install or remove a trace callback on the device. Not thread-safe against
 * concurrent device activity: set it while the device is idle. */
HBG_API void hbg_device_set_trace(hbg_device *dev, hbg_trace_fn fn,
                                  void *user);
/* Emit ev to the device's trace callback, if any (any thread). */
HBG_API void hbg_device_trace(hbg_device *dev, const hbg_trace_event *ev);
/* @return non-zero when a trace callback is installed. */
HBG_API int hbg_device_tracing(const hbg_device *dev);

/* ---- dispatch: one call per op; NULL op -> HBG_E_UNSUPPORTED ---- */

HBG_API int hbg_dev_caps_get(hbg_device *dev, hbg_dev_caps *caps);
HBG_API int hbg_dev_stats_get(hbg_device *dev, hbg_dev_stats *st);
HBG_API int hbg_dev_host_alloc(hbg_device *dev, size_t bytes, void **out);
HBG_API int hbg_dev_host_free(hbg_device *dev, void *p);
HBG_API int hbg_dev_host_register(hbg_device *dev, void *p, size_t bytes);
HBG_API int hbg_dev_host_unregister(hbg_device *dev, void *p);
HBG_API int hbg_dev_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out);
HBG_API int hbg_dev_mem_free(hbg_device *dev, hbg_devptr p);
HBG_API int hbg_dev_copy_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                             size_t bytes);
HBG_API int hbg_dev_copy_d2h(hbg_device *dev, void *dst, hbg_devptr src,
                             size_t bytes);
HBG_API int hbg_dev_queue_create(hbg_device *dev, hbg_dev_queue **out);
HBG_API int hbg_dev_queue_destroy(hbg_device *dev, hbg_dev_queue *q);
HBG_API int hbg_dev_copy_h2d_async(hbg_device *dev, hbg_dev_queue *q,
                                   hbg_devptr dst, const void *src,
                                   size_t bytes);
HBG_API int hbg_dev_queue_sync(hbg_device *dev, hbg_dev_queue *q);
HBG_API int hbg_dev_event_create(hbg_device *dev, hbg_dev_event **out);
HBG_API int hbg_dev_event_destroy(hbg_device *dev, hbg_dev_event *ev);
HBG_API int hbg_dev_event_record(hbg_device *dev, hbg_dev_event *ev,
                                 hbg_dev_queue *q);
HBG_API int hbg_dev_event_query(hbg_device *dev, hbg_dev_event *ev);
HBG_API int hbg_dev_event_wait(hbg_device *dev, hbg_dev_event *ev);
HBG_API int hbg_dev_launch(hbg_device *dev, hbg_dev_queue *q,
                           const hbg_dev_launch_desc *l);
/* @return the device's clock (the clock_ns op), or CLOCK_MONOTONIC where
 * the backend has none; nanoseconds. dev NULL: CLOCK_MONOTONIC. */
HBG_API uint64_t hbg_dev_clock_ns(hbg_device *dev);
/* @return as the event_elapsed op; HBG_E_UNSUPPORTED where the backend has
 * none (also a table whose struct_size ends before it). */
HBG_API int hbg_dev_event_elapsed(hbg_device *dev, hbg_dev_event *start,
                                  hbg_dev_event *end, uint64_t *ns);
/* @return as the queue_wait_event op; HBG_E_UNSUPPORTED where the backend
 * has none (also a table whose struct_size ends before it). */
HBG_API int hbg_dev_queue_wait_event(hbg_device *dev, hbg_dev_queue *q,
                                     hbg_dev_event *ev);
/* @return as the mem_import op; HBG_E_UNSUPPORTED where the backend has
 * none (also a table whose struct_size ends before it: the device's native
 * error then says so). */
HBG_API int hbg_dev_mem_import(hbg_device *dev, uint64_t addr, size_t bytes,
                               hbg_devptr *out);
/* @return as the mem_unimport op; HBG_E_UNSUPPORTED where the backend has
 * none. A failure is counted like a failed release
 * (hbg_dev_stats.free_failures). */
HBG_API int hbg_dev_mem_unimport(hbg_device *dev, hbg_devptr p);

/* Queues the caller owns (the ops of the same names). A device keeps at
 * most HBG_DEV_BORROWED_MAX borrowed queues at once (HBG_E_LIMIT past it).
 * While the caller captures one of them, the dispatch functions of calls
 * a capture forbids (allocations, frees, synchronous copies, queue and
 * event waits and queries) return HBG_E_CAPTURING before they reach the
 * backend, so that the caller's capture stays valid.
 * @return as the op; HBG_E_UNSUPPORTED where the backend has none. */
#define HBG_DEV_BORROWED_MAX 16
HBG_API int hbg_dev_queue_borrow(hbg_device *dev, void *native,
                                 hbg_dev_queue **out);
HBG_API int hbg_dev_queue_unborrow(hbg_device *dev, hbg_dev_queue *q);
/* A device without queue_capture reports HBG_DEV_CAPTURE_NONE. */
HBG_API int hbg_dev_queue_capture(hbg_device *dev, hbg_dev_queue *q,
                                  uint32_t *state, uint64_t *id);
HBG_API int hbg_dev_capture_retain(hbg_device *dev, hbg_dev_queue *q,
                                   void *ptr, void (*destroy)(void *ptr));
/* @return 1 when a borrowed queue of dev is being captured (its state not
 * HBG_DEV_CAPTURE_NONE), else 0; *id that capture's id. */
HBG_API int hbg_dev_capturing(hbg_device *dev, uint64_t *id);

/* ---- fault injection ---- */

/* The "fault" backend wraps another: options "inner=NAME[,inner options
 * after ';']", e.g. hbg_device_open("fault", "inner=sim", &d). Every call is
 * forwarded and counted per op. */

/* Arm: the k-th call (1-based, counted from now) of op (or HBG_DEV_OP_ANY)
 * fails with err (HBG_E_INJECTED when 0) and is not forwarded.
 * k == 0 disarms. @return 0, or HBG_E_INVAL if dev is not a fault device. */
HBG_API int hbg_fault_arm(hbg_device *dev, int op, uint64_t k, int err);
/* @return calls of op (or HBG_DEV_OP_ANY: all) since open or the last
 * hbg_fault_reset(); 0 if dev is not a fault device. */
HBG_API uint64_t hbg_fault_calls(const hbg_device *dev, int op);
/* @return how many injected failures have fired since the last reset. */
HBG_API uint64_t hbg_fault_fired(const hbg_device *dev);
HBG_API void hbg_fault_reset(hbg_device *dev);
/* @return the inner device of a fault device, NULL otherwise. */
HBG_API hbg_device *hbg_fault_inner(hbg_device *dev);

#ifdef __cplusplus
}
#endif

#endif /* HBG_HBG_DEVICE_H */
