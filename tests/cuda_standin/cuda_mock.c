/*
 * A stand-in CUDA driver API (libcuda) for checking the cuda backend on
 * machines without a GPU. Not part of the library: tests/CMakeLists.txt
 * builds it as a shared object, and the backend loads it by path instead of
 * libcuda.so.1 (HBG_CUDA_LIB=PATH or the device option lib=PATH; see
 * scripts/gpu-check.sh --mock).
 *
 * It exports every entry point the backend resolves (cuda_api.h), the
 * optional ones and cuEventElapsedTime's v1 symbol included, with the
 * driver's documented
 * semantics where they matter: cuInit before anything else; a context must
 * be current on the calling thread for memory, copy, stream and event calls
 * (CUDA_ERROR_INVALID_CONTEXT otherwise; contexts are per thread); device
 * memory lives at fake addresses that are never host pointers (never
 * reused, so a freed pointer stays invalid; a free waits for the queued
 * copies that use the allocation); copies check device ranges
 * (CUDA_ERROR_INVALID_VALUE); each stream is a worker thread that runs its
 * queue in order with a small delay per op, so events really are pending
 * for a while; an async H2D copy from pageable memory stages the source
 * before returning; D2H into pageable memory is synchronous.
 *
 * Device code: cuModuleLoadData accepts a fatbin (its magic checked) and,
 * like the driver, needs in it an ELF for the device's compute capability
 * or PTX for it or an older one (CUDA_ERROR_NO_BINARY_FOR_GPU otherwise);
 * cuModuleGetFunction finds the entry points of hbg's device module
 * (src/device/cuda/devcode), which this library compiles as host C: a
 * launch queues the entry's host build on the stream, where it runs after
 * the work queued before it: a grid of G CTAs of L threads runs as G host
 * threads (the stream's thread is CTA 0), each running its CTA's L lanes
 * one after another between barriers (devcode.h, hbg_dc_host_grid); the
 * device reports HBG_MOCK_CUDA_SMS multiprocessors (default 4) and blocks
 * of at most HBG_MOCK_CUDA_LANES threads (default 4), which is also its
 * warp size (a host thread runs its lanes as one worker).
 *
 * Stream capture (cuStreamBeginCapture_v2 .. cuStreamEndCapture), as the
 * driver has it; nothing runs at capture time. Work on a capturing stream
 * becomes a node of its capture's graph: cuLaunchKernel /
 * cuLaunchCooperativeKernel a kernel node (parameter values copied now);
 * cuMemcpyHtoDAsync_v2 a copy node keeping the source pointer (each replay
 * reads whatever is there then), cuMemcpyDtoHAsync_v2 one keeping the
 * destination pointer; cuMemsetD32Async / cuMemsetD8Async a memset node;
 * cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL) an event-record node,
 * cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL) on an event recorded outside
 * any capture an external-wait node (a replay waits for the event's record
 * as of its launch). cuEventRecord on a capturing stream makes the event a
 * captured event of that capture (no node; cuEventQuery/Synchronize on it
 * are CUDA_ERROR_CAPTURED_EVENT in every mode until it is recorded outside
 * a capture). cuStreamWaitEvent of a stream that is not capturing on an
 * event captured in an active capture forks it into that capture; the
 * capture ends only when every forked stream has joined back (another
 * member waited on an event recorded on it after its last work), else
 * cuStreamEndCapture is CUDA_ERROR_STREAM_CAPTURE_UNJOINED. A wait on an
 * event recorded outside any capture without CU_EVENT_WAIT_EXTERNAL is
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900), as is cuGraphLaunch into a
 * capturing stream, and synchronising with or querying a capturing stream
 * (cuStreamSynchronize / cuStreamQuery), in every mode. Potentially unsafe
 * calls (cuMemAlloc_v2, cuMemFree_v2, cuMemHostAlloc, cuMemFreeHost,
 * cuMemHostRegister_v2, cuMemHostUnregister, cuModuleLoadData,
 * cuModuleUnload, cuLink*, cuStreamSynchronize, cuStreamQuery,
 * cuCtxSynchronize, cuEventSynchronize, cuEventQuery) are 900 when the
 * calling thread's mode (cuThreadExchangeStreamCaptureMode, default
 * GLOBAL) is not RELAXED and a GLOBAL capture is active in any thread or
 * one the thread began is active and not RELAXED. A 900 invalidates the
 * captures it conflicts with: later work on their streams is
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901), and so is
 * cuStreamEndCapture, which ends the capture with *graph NULL. Ending from
 * a thread other than the one that began it (mode not RELAXED) is
 * CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD and the capture goes on; on a
 * forked stream it is CUDA_ERROR_STREAM_CAPTURE_UNMATCHED.
 * cuStreamIsCapturing and cuStreamGetCaptureInfo_v2 / _v3 report the
 * status, the capture's id (process-unique, from 1), its graph and the
 * stream's last node as its one dependency. cuGraphLaunch queues every
 * node in capture order; a replayed copy whose host side was pinned when
 * captured and no longer is aborts the process saying so (ASan reports a
 * freed pageable one), as does one whose device memory was freed.
 * cuGraphGetNodes lists a captured graph's nodes (in capture order),
 * cuGraphKernelNodeGetParams_v2 returns a kernel node's parameters
 * (pointing at the node's own copy of the argument struct),
 * cuGraphExecKernelNodeSetParams_v2 replaces them in the executable graph
 * only (same function, one thread). User objects (cuUserObjectCreate with
 * CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, Retain/Release,
 * cuGraphRetainUserObject, CU_GRAPH_USER_OBJECT_MOVE included, and
 * cuGraphReleaseUserObject): an executable graph holds references of its
 * own, dropped once it is destroyed and its last queued replay completed;
 * at count 0 the destructor runs on a stand-in thread, where every driver
 * call is CUDA_ERROR_NOT_PERMITTED. hbgmock_user_objects() counts the
 * objects whose destructor has not returned; hbgmock_calls_begin() /
 * hbgmock_calls_end(names, max) record the names of the entry points the
 * calling thread calls, in order; hbgmock_fill_function() is a kernel of
 * the stand-in's own (no module) setting n words to a value. Events keep the host
 * time at which their stream reached them; cuEventElapsedTime(_v2) is the
 * difference (CUDA_ERROR_NOT_READY before both completed,
 * CUDA_ERROR_INVALID_HANDLE for an event never recorded or created with
 * CU_EVENT_DISABLE_TIMING).
 *
 * Linking (cuLinkCreate_v2 / cuLinkAddData_v2 / cuLinkComplete /
 * cuLinkDestroy, the JIT log and wall-time options): each input's symbols
 * are read (PTX text, a CUDA ELF's symbol table, a fatbin's entry for the
 * device, zstd-compressed ones through libzstd.so.1); a symbol defined twice
 * or referenced and never defined fails cuLinkComplete with nvlink's wording
 * in the error log; hbg's generated dispatch is parsed into id -> (phases,
 * rows_of, scratch, function). The linked image is this library's own text
 * format, which cuModuleLoadData turns into a module whose entry points are
 * the device module's HBG_DC_USER host build (devcode_user.c) and whose
 * dispatch calls the host build of each user function, found by name in the
 * shared objects HBG_MOCK_USER_LIB lists (':'-separated): a test-only
 * convention standing for the device code itself.
 *
 * Fault injection for the tests: hbgmock_fail(name, code, nth) makes the
 * nth next call (0 = the next one) of the entry point called name return
 * code, once; name NULL disarms. Built with HBGMOCK_OMIT_MEMCPY_HTOD_ASYNC
 * it lacks cuMemcpyHtoDAsync_v2 (the missing-symbol test); with
 * HBGMOCK_OMIT_GRAPH_UPDATE the three kernel-node calls above, with
 * HBGMOCK_OMIT_ELAPSED_V2 / _V1 either cuEventElapsedTime symbol, with
 * HBGMOCK_OMIT_LINK the four cuLink* calls, with HBGMOCK_OMIT_POINTER_ATTRS
 * cuPointerGetAttributes (the missing optional-symbol tests). hbgmock_poke(nth, offset, value)
 * overwrites 4 bytes of the argument struct of the nth next kernel a
 * stream is handed (cuLaunchKernel or cuGraphLaunch; 0 = the next one):
 * a kernel call the device code rejects, for the device-error tests.
 *
 * hbgmock_hold(1) keeps every stream from starting queued work until
 * hbgmock_hold(0) (the asynchrony tests); hbgmock_gate(n) closes a gate
 * in front of the next n kernels queued (cuLaunchKernel or cuGraphLaunch):
 * a stream reaching one of them waits there until hbgmock_gate(0) opens
 * the gate, while other streams go on (the launch-order tests).
 * cuStreamWaitEvent holds a stream's later work until the event's record
 * as of the call has completed; hbgmock_kernels_run() counts the
 * kernels that have run, hbgmock_modules() the modules loaded now,
 * hbgmock_defs_validated() the Definitions the device code has validated.
 *
 * Environment: HBG_MOCK_USER_LIB (above), HBG_MOCK_CUDA_NDEV (default 1;
 * 0 = no device),
 * HBG_MOCK_CUDA_DELAY_US (per queued op, default 50), HBG_MOCK_CUDA_CC
 * (compute capability as major * 10 + minor, default 90).
 */
#include <dlfcn.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "common/list.h"
#include "device/cuda/devcode/devcode.h"
#include "device/cuda/devcode/user.h"

#define MOCK_EXPORT __attribute__((visibility("default")))

#define MOCK_MEM (16ull << 30)
#define DEV_BASE 0x00007d0000000000ull

typedef struct dalloc {
  uint64_t addr, size;
  uint8_t *host;
  struct CUctx_st *ctx; /* the context current when it was allocated */
  struct dalloc *next;
} dalloc;

typedef struct hreg {
  uint8_t *p;
  size_t n;
  int alloc; /* cuMemHostAlloc (1) or cuMemHostRegister (0) */
  struct hreg *next;
} hreg;

#define ARGS_MAX 1024 /* bytes of a kernel's argument struct */

/* An entry point of the device module, built for the host; mod is the
 * linked module an entry of the user-kernel build belongs to (its
 * dispatch), NULL for the plain build's. */
struct CUfunc_st {
  const char *name;
  void (*run)(const void *args);
  size_t args_size;
  struct CUmod_st *mod;
};

/* A kernel launch: the entry, its grid and a copy of its arguments. */
typedef struct kcall {
  const struct CUfunc_st *fn;
  unsigned gx, bx; /* CTAs, threads per CTA */
  int coop;        /* a cooperative launch: the whole grid resident */
  uint64_t args[ARGS_MAX / 8];
} kcall;

typedef struct op {
  void *dst;
  const void *src;
  size_t n;
  void *owned; /* staging to free after the copy */
  struct CUevent_st *ev;
  uint64_t gen;
  struct CUevent_st *wait; /* cuStreamWaitEvent: hold the stream until */
  uint64_t wait_gen;       /* wait->done reaches this */
  int gated;               /* waits while the hbgmock_gate gate is closed */
  kcall k; /* k.fn set: a kernel */
  /* memset: n bytes at dst, each fill_elem (1 or 4) bytes fill_val */
  int fill;
  unsigned fill_elem;
  uint32_t fill_val;
  /* a replayed copy's host side, pinned when captured: still pinned */
  const void *check_host;
  struct CUgraphExec_st *xdone; /* the last op of a replay of it */
  struct op *next;
} op;

/* A user kernel of a linked module: what the dispatch said, and the host
 * build of its function. */
typedef struct mock_uk {
  uint32_t kernel, phases, rows_of;
  uint64_t scratch_floats;
  hbg_kernel_lane_fn fn;
} mock_uk;

#define MOCK_N_ENTRIES 3 /* HBG_DC_ENTRIES */

struct CUmod_st {
  int loaded;
  /* from cuLinkComplete's image: the user-kernel build of the device
   * module's entries (ufn[0..n_ufn)), its dispatch (uk, ascending ids) and
   * the host libraries holding the users' functions */
  int linked;
  struct CUfunc_st ufn[MOCK_N_ENTRIES];
  size_t n_ufn;
  mock_uk *uk;
  size_t n_uk;
  void **libs;
  size_t n_libs;
  struct CUmod_st *next; /* every loaded module, like the driver's table */
};

/* What a graph node does (stream capture, below). */
enum {
  NODE_KERNEL,  /* k */
  NODE_H2D,     /* n bytes from host to daddr */
  NODE_D2H,     /* n bytes from daddr to host */
  NODE_MEMSET,  /* n bytes at daddr, each elem bytes val */
  NODE_EVREC,   /* record ev (CU_EVENT_RECORD_EXTERNAL) */
  NODE_EVWAIT   /* wait for ev's latest record (CU_EVENT_WAIT_EXTERNAL) */
};

/* A captured node; pp is what GetParams points kernelParams at. */
struct CUgraphNode_st {
  kcall k;
  void *pp[1];
  int kind;
  uint64_t daddr;
  void *host;
  size_t n;
  uint32_t val;
  unsigned elem;
  int pinned; /* host side pinned when captured */
  struct CUevent_st *ev;
};

/* References a graph or an executable graph holds to a user object. */
typedef struct uref {
  struct CUuserObject_st *o;
  unsigned count;
} uref;

/* Graphs and executable graphs are listed while alive, like the
 * driver's own tables (so one whose destroy failed is not lost). */
struct CUgraph_st {
  struct CUgraphNode_st *v;
  size_t n, cap;
  uref *uo;
  size_t n_uo;
  struct CUgraph_st *next;
};

struct CUgraphExec_st {
  struct CUgraphNode_st *v; /* its own copy of the graph's nodes */
  size_t n;
  uintptr_t nodes; /* the source graph's node array: handle -> index */
  uref *uo;        /* its own references to the graph's user objects */
  size_t n_uo;
  long inflight;   /* replays queued and not completed */
  int dead;        /* destroyed: freed once inflight is 0 */
  struct CUgraphExec_st *next;
};

struct CUuserObject_st {
  void *ptr;
  CUhostFn destroy;
  long refs;
  struct CUuserObject_st *next; /* the destructor queue */
};

/* A stream capture sequence: its graph, mode, the thread that began it
 * and the stream it began on; every stream with cap pointing at it is a
 * member (the origin and the streams forked into it). */
typedef struct mcapture {
  uint64_t id;
  struct CUgraph_st *g;
  CUstreamCaptureMode mode;
  pthread_t owner;
  int invalid;
  struct CUstream_st *origin;
  long seq; /* nodes added so far */
  struct mcapture *next;
} mcapture;

struct CUctx_st {
  int dev;
  _Atomic int refs;
  size_t stack; /* CU_LIMIT_STACK_SIZE (0: the driver's default) */
};

struct CUstream_st {
  op *head, *tail;
  int busy, stop;
  mcapture *cap; /* the capture it is a member of, or NULL */
  long last;     /* index of its last node in cap's graph (-1: none) */
  long work;     /* cap->seq at its last node (0: none since it joined) */
  long joined_at; /* the latest of its work another member waited on */
  CUgraphNode dep; /* cuStreamGetCaptureInfo's dependency array */
  pthread_t th;
  struct CUstream_st *next; /* every live stream */
};

struct CUevent_st {
  uint64_t rec, done;
  long waits;    /* queued cuStreamWaitEvent ops naming it */
  uint64_t t_ns; /* host time the stream reached its last record */
  int timing;    /* not CU_EVENT_DISABLE_TIMING */
  /* last recorded inside a capture (cap_id != 0): by stream cap_s at its
   * work cap_work, after its node cap_last */
  uint64_t cap_id;
  struct CUstream_st *cap_s;
  long cap_work, cap_last;
  struct CUevent_st *next; /* every live event, like the driver's own table */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static dalloc *dallocs;
static hreg *hregs;
static uint64_t next_addr = DEV_BASE, in_use;
static _Atomic int inited;
static struct CUctx_st primary[8];
static _Thread_local CUcontext cur_ctx;
/* The module of the kernel the calling grid thread runs (its dispatch). */
static _Thread_local const struct CUmod_st *cur_mod;

/* The armed failure: the nth next call of fail_name returns fail_code. */
static char fail_name[64];
static CUresult fail_code;
static int fail_nth;
static long n_streams, n_events, n_modules, n_graphs, n_execs, n_links;
static long kernels_run;
static int held;
static int gate_pending, gate_closed; /* hbgmock_gate */
static int poke_nth = -1; /* hbgmock_poke: armed while >= 0 */
static uint32_t poke_off, poke_val;
static struct CUevent_st *events;
static struct CUstream_st *streams;
static struct CUgraph_st *graphs;
static struct CUgraphExec_st *execs;
static struct CUmod_st *modules;

/* mu held */
static void graph_unlist(struct CUgraph_st *g) {
  n_graphs--;
  HBG__SLIST_UNLINK(struct CUgraph_st, graphs, g);
}

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

static int ndev(void) { return env_int("HBG_MOCK_CUDA_NDEV", 1); }

static int cc(void) { return env_int("HBG_MOCK_CUDA_CC", 90); }

/* A launch's grid runs as that many host threads: keep it small. */
#define MOCK_MAX_GRID 64

static int sms(void) {
  int n = env_int("HBG_MOCK_CUDA_SMS", 4);
  return n < 1 ? 1 : n > MOCK_MAX_GRID ? MOCK_MAX_GRID : n;
}

/* The device takes cooperative launches (HBG_MOCK_CUDA_COOP=0: not). */
static int coop_ok(void) { return env_int("HBG_MOCK_CUDA_COOP", 1) != 0; }

static int lanes(void) {
  int n = env_int("HBG_MOCK_CUDA_LANES", 4);
  return n < 1 ? 1 : n > 1024 ? 1024 : n;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void delay(void) {
  int us = env_int("HBG_MOCK_CUDA_DELAY_US", 50);
  if (us > 0) {
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
  }
}

/* The live allocations by address (new ones have higher addresses: they
 * append), for lookups from the kernels' threads: written with mu and
 * map_lock (write) held, read with either held. */
static pthread_rwlock_t map_lock = PTHREAD_RWLOCK_INITIALIZER;
static dalloc **dindex;
static size_t dindex_n, dindex_cap;

/* Host memory behind device range [a, a + n), or NULL. mu or map_lock
 * held. */
static uint8_t *dev_ptr(const void *a, size_t n) {
  uint64_t x = (uint64_t)(uintptr_t)a;
  size_t lo = 0, hi = dindex_n;
  while (lo < hi) { /* the last allocation starting at or before x */
    size_t m = lo + (hi - lo) / 2;
    if (dindex[m]->addr <= x)
      lo = m + 1;
    else
      hi = m;
  }
  if (lo == 0)
    return NULL;
  const dalloc *d = dindex[lo - 1];
  if (x - d->addr < d->size && n <= d->size - (x - d->addr))
    return d->host + (x - d->addr);
  return NULL;
}

static hreg *host_find(const void *p, size_t n) {
  const uint8_t *b = p;
  for (hreg *h = hregs; h; h = h->next)
    if (b >= h->p && (size_t)(b - h->p) < h->n && n <= h->n - (size_t)(b - h->p))
      return h;
  return NULL;
}

/* The device module's entry points, compiled into this library. */
#define MOCK_RUNNER(name, args)                                                \
  static void run_##name(const void *p) {                                      \
    args a;                                                                    \
    memcpy(&a, p, sizeof a);                                                   \
    name(a);                                                                   \
  }
HBG_DC_ENTRIES(MOCK_RUNNER)
#undef MOCK_RUNNER

static const struct CUfunc_st funcs[] = {
#define MOCK_FUNC(name, args) {#name, run_##name, sizeof(args)},
    HBG_DC_ENTRIES(MOCK_FUNC)
#undef MOCK_FUNC
};

#define MOCK_ARGS_FIT(name, args)                                              \
  _Static_assert(sizeof(args) <= ARGS_MAX, #args " fits a kcall");
HBG_DC_ENTRIES(MOCK_ARGS_FIT)
#undef MOCK_ARGS_FIT

/* ---- the grid: GPU threads as fibers, warps as host threads ---- */

/* A launch runs every warp of every CTA on a host thread of its own (the
 * warps of a CTA, and the CTAs, really run at once), and every GPU thread
 * of a warp (a lane) as a fiber of that host thread, with its own stack.
 * A lane runs until it reaches a point where a GPU's lanes meet or wait: a
 * barrier of its warp or CTA, a vote, a shuffle, or a waiter's back-off
 * (hbg_dc_host_pause); the warp's scheduler then runs another lane. After
 * every barrier the lanes resume in an order that changes from one barrier
 * to the next, so code that assumes an order of lanes between two meeting
 * points meets other orders. Under ThreadSanitizer with
 * HBG_MOCK_TSAN_FIBERS=1 every lane is a fiber of its own, synchronised
 * only at those meeting points, so a race between two lanes of a warp is
 * reported like one between threads (otherwise a warp's lanes count as
 * its thread's, and races between warps and CTAs are reported). */

#define MOCK_SHARED_BYTES (48u << 10) /* a CTA's shared memory */
#define MOCK_MAX_THREADS 4096u        /* GPU threads of one grid */
#define MOCK_FIBER_STACK (512u << 10)

#if defined(__SANITIZE_ADDRESS__)
#define MOCK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOCK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define MOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MOCK_TSAN 1
#endif
#endif
#if defined(MOCK_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(MOCK_TSAN)
#include <sanitizer/tsan_interface.h>
/* Each lane a ThreadSanitizer fiber of its own (HBG_MOCK_TSAN_FIBERS=1):
 * races between two lanes of a warp are then reported like races between
 * threads. Off by default: ThreadSanitizer's fibers grow its memory with
 * every switch (gigabytes within a minute of a peer executor's thousands
 * of launches), so the long tests run each warp's lanes as its thread's,
 * and the short ones that matter most (the failure paths, the launch
 * order) turn it on. */
static int tsan_fibers(void) {
  static _Atomic int on = -1;
  int v = atomic_load_explicit(&on, memory_order_relaxed);
  if (v < 0) {
    const char *e = getenv("HBG_MOCK_TSAN_FIBERS");
    v = e && *e == '1';
    atomic_store_explicit(&on, v, memory_order_relaxed);
  }
  return v;
}
#endif

#if !defined(__x86_64__)
#error "the cuda stand-in's fibers switch stacks with x86-64 code"
#endif

/* Save the callee-saved registers and the floating-point control words on
 * the current stack, store its pointer at *from, continue on stack `to`
 * (one saved the same way, or a new fiber's, which starts in
 * mock_fiber_start with its argument in r12). */
void mock_ctx_swap(void **from, void *to);
void mock_fiber_start(void);
__asm__(".text\n"
        ".globl mock_ctx_swap\n"
        ".hidden mock_ctx_swap\n"
        ".type mock_ctx_swap,@function\n"
        "mock_ctx_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n"
        "  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n"
        "  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size mock_ctx_swap,.-mock_ctx_swap\n"
        ".globl mock_fiber_start\n"
        ".hidden mock_fiber_start\n"
        ".type mock_fiber_start,@function\n"
        "mock_fiber_start:\n"
        "  movq %r12, %rdi\n"
        "  callq mock_fiber_main\n"
        "  ud2\n"
        ".size mock_fiber_start,.-mock_fiber_start\n");

/* A CTA-wide barrier across its warps' host threads. */
typedef struct mock_bar {
  _Atomic uint32_t count, gen;
  _Atomic uint32_t vote[2]; /* by generation parity */
  uint32_t n;
} mock_bar;

enum { F_RUN = 0, F_WAIT = 1, F_DONE = 2 };

struct mock_warp;

typedef struct mock_fiber {
  void *sp;
  unsigned char *map; /* its stack, after a guard page */
  struct mock_warp *w;
  hbg_dc_host_dim dim;
  _Atomic int state;
  _Atomic int paused; /* backed off since the warp last moved on */
  uint32_t round;     /* its next shuffle's half of the slots */
  int started;        /* the scheduler has run it once */
  void *tsan;
} mock_fiber;

typedef struct mock_cta mock_cta;

typedef struct mock_warp {
  const kcall *k;
  mock_cta *cta;
  mock_fiber *f; /* [n] */
  uint32_t n;
  /* Under ThreadSanitizer each lane is a fiber of its own that meets the
   * others only at barriers, so what the lanes and the scheduler share
   * here is atomic (relaxed), and the switches into a lane's first run and
   * out of its last synchronise with the scheduler. */
  _Atomic(mock_fiber *) cur;
  void *sched_sp;
  void *tsan_sched;
  const void *sched_bottom; /* the host thread's own stack (ASan) */
  size_t sched_size;
  /* the warp's barrier (its lanes are fibers of one host thread) */
  _Atomic uint32_t arrived, done, gen;
  _Atomic int vote, vote_out;
  char sync[2];      /* ThreadSanitizer's sync objects, by gen parity */
  uint32_t *xchg;    /* [2][n]: shuffle slots */
  _Atomic uint64_t order; /* picks where each round of lanes starts */
  _Atomic uint32_t backoff;
  pthread_t th;
} mock_warp;

struct mock_cta {
  mock_bar bar; /* its warps */
  _Atomic int vote_out;
  _Atomic uint32_t live; /* warps not yet done */
  int sm;                /* where it is resident */
  const struct CUfunc_st *fn;
  mock_warp *warps;
  uint32_t n_warps;
  _Alignas(64) unsigned char shared[MOCK_SHARED_BYTES];
};

/* The lane running on the calling host thread (NULL outside a grid). */
static _Thread_local _Atomic(mock_fiber *) cur_fiber;
static const hbg_dc_host_dim no_dim = {0, 1, 1, 0, 1};

const hbg_dc_host_dim *hbg_dc_host_grid(void) {
  mock_fiber *me = atomic_load_explicit(&cur_fiber, memory_order_relaxed);
  return me ? &me->dim : &no_dim;
}

uint64_t hbg_dc_host_clock_ns(void) { return now_ns(); }

static void futex_wait(_Atomic uint32_t *a, uint32_t v) {
  syscall(SYS_futex, (uint32_t *)a, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *a) {
  syscall(SYS_futex, (uint32_t *)a, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL,
          NULL, 0);
}

/* Host threads of one CTA meet (the last arrival of each warp's lanes
 * stands for its warp); @return whether any voted. */
static int bar_wait(mock_bar *b, int pred) {
  uint32_t g = atomic_load_explicit(&b->gen, memory_order_acquire);
  if (pred)
    atomic_fetch_or_explicit(&b->vote[g & 1], 1u, memory_order_relaxed);
  if (atomic_fetch_add_explicit(&b->count, 1u, memory_order_acq_rel) + 1u ==
      b->n) {
    atomic_store_explicit(&b->count, 0u, memory_order_relaxed);
    atomic_store_explicit(&b->vote[(g + 1) & 1], 0u, memory_order_relaxed);
    atomic_store_explicit(&b->gen, g + 1, memory_order_release);
    futex_wake(&b->gen);
  } else {
    while (atomic_load_explicit(&b->gen, memory_order_acquire) == g)
      futex_wait(&b->gen, g);
  }
  return atomic_load_explicit(&b->vote[g & 1], memory_order_relaxed) != 0;
}

/* From the running lane (or from the scheduler: cur NULL) to `to` (NULL:
 * the scheduler). A lane that has finished never comes back. sync: the
 * switch orders what ran before it before what runs after (a lane's first
 * entry and its last exit); other switches leave the lanes unordered. */
static void fiber_switch(mock_warp *w, mock_fiber *to, int sync) {
  mock_fiber *from = atomic_load_explicit(&w->cur, memory_order_relaxed);
  void **save = from ? &from->sp : &w->sched_sp;
  void *sp = to ? to->sp : w->sched_sp;
#if defined(MOCK_ASAN)
  void *fake = NULL;
  const int leaving = from && atomic_load_explicit(&from->state,
                                                   memory_order_relaxed) ==
                                  F_DONE;
  if (to)
    __sanitizer_start_switch_fiber(leaving ? NULL : &fake,
                                   to->map + 4096, MOCK_FIBER_STACK);
  else
    __sanitizer_start_switch_fiber(leaving ? NULL : &fake, w->sched_bottom,
                                   w->sched_size);
#endif
  atomic_store_explicit(&w->cur, to, memory_order_relaxed);
  atomic_store_explicit(&cur_fiber, to, memory_order_relaxed);
#if defined(MOCK_TSAN)
  /* the last call before the stacks change: whatever runs between them
   * would count as the next lane's */
  if (tsan_fibers())
    __tsan_switch_to_fiber(to ? to->tsan : w->tsan_sched,
                           sync ? 0 : __tsan_switch_to_fiber_no_sync);
#else
  (void)sync;
#endif
  mock_ctx_swap(save, sp);
#if defined(MOCK_ASAN)
  __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* The running lane waits: back to its warp's scheduler. */
static void fiber_yield(mock_warp *w) { fiber_switch(w, NULL, 0); }

/* Every live lane of w has arrived: the next generation; the lanes resume
 * (through the scheduler, in a new order). */
static void warp_release(mock_warp *w) {
  atomic_store_explicit(&w->arrived, 0u, memory_order_relaxed);
  atomic_store_explicit(&w->vote_out,
                        atomic_exchange_explicit(&w->vote, 0,
                                                 memory_order_relaxed),
                        memory_order_relaxed);
  atomic_fetch_add_explicit(&w->gen, 1u, memory_order_relaxed);
  for (uint32_t i = 0; i < w->n; i++)
    if (atomic_load_explicit(&w->f[i].state, memory_order_relaxed) == F_WAIT)
      atomic_store_explicit(&w->f[i].state, F_RUN, memory_order_relaxed);
  atomic_store_explicit(
      &w->order,
      atomic_load_explicit(&w->order, memory_order_relaxed) *
              6364136223846793005ull +
          1442695040888963407ull,
      memory_order_relaxed);
  atomic_store_explicit(&w->backoff, 0u, memory_order_relaxed);
}

/* The running lane arrives at its warp's barrier (cta: at its CTA's, whose
 * other warps the last lane to arrive meets). @return whether any lane
 * (any thread of the CTA) voted. */
static int lane_barrier(int pred, int cta) {
  mock_fiber *me = atomic_load_explicit(&cur_fiber, memory_order_relaxed);
  mock_warp *w = me->w;
  const uint32_t g = atomic_load_explicit(&w->gen, memory_order_relaxed);
  (void)g; /* names this generation's sync object */
#if defined(MOCK_TSAN)
  __tsan_release(&w->sync[g & 1]);
#endif
  if (pred)
    atomic_store_explicit(&w->vote, 1, memory_order_relaxed);
  const uint32_t live =
      w->n - atomic_load_explicit(&w->done, memory_order_relaxed);
  if (atomic_fetch_add_explicit(&w->arrived, 1u, memory_order_relaxed) + 1u <
      live) {
    atomic_store_explicit(&me->state, F_WAIT, memory_order_relaxed);
    fiber_yield(w);
  } else {
    if (cta) {
#if defined(MOCK_TSAN)
      __tsan_acquire(&w->sync[g & 1]);
#endif
      int any = bar_wait(&w->cta->bar,
                         atomic_load_explicit(&w->vote, memory_order_relaxed));
      atomic_store_explicit(&w->vote, any, memory_order_relaxed);
#if defined(MOCK_TSAN)
      __tsan_release(&w->sync[g & 1]);
#endif
    }
    warp_release(w);
    fiber_yield(w); /* the scheduler picks who goes first */
  }
#if defined(MOCK_TSAN)
  __tsan_acquire(&w->sync[g & 1]);
#endif
  return atomic_load_explicit(&w->vote_out, memory_order_relaxed) != 0;
}

void hbg_dc_host_sync_cta(void) { (void)lane_barrier(0, 1); }

int hbg_dc_host_sync_cta_or(int pred) { return lane_barrier(pred, 1); }

void hbg_dc_host_sync_warp(void) { (void)lane_barrier(0, 0); }

int hbg_dc_host_any_warp(int pred) { return lane_barrier(pred, 0); }

uint32_t hbg_dc_host_shfl_xor(uint32_t v, uint32_t lane_mask) {
  mock_fiber *me = atomic_load_explicit(&cur_fiber, memory_order_relaxed);
  mock_warp *w = me->w;
  const uint32_t l = me->dim.tid % w->n, o = l ^ lane_mask;
  uint32_t *slot = w->xchg + (size_t)me->round * w->n;
  me->round ^= 1; /* the next round writes the other half */
  slot[l] = v;
  (void)lane_barrier(0, 0);
  return o < w->n ? slot[o] : v;
}

void *hbg_dc_host_shared(uint64_t bytes) {
  if (bytes > MOCK_SHARED_BYTES) {
    fprintf(stderr, "cuda stand-in: %llu bytes of shared memory wanted, "
                    "%u per CTA\n",
            (unsigned long long)bytes, MOCK_SHARED_BYTES);
    abort();
  }
  return atomic_load_explicit(&cur_fiber, memory_order_relaxed)
      ->w->cta->shared;
}

/* A waiting lane backs off: the warp's other lanes run; when every lane
 * that can run is waiting, the host thread leaves the CPU a while (the
 * threads it waits for may need it). */
void hbg_dc_host_pause(void) {
  mock_fiber *me = atomic_load_explicit(&cur_fiber, memory_order_relaxed);
  if (!me) {
    sched_yield();
    return;
  }
  atomic_store_explicit(&me->paused, 1, memory_order_relaxed);
  fiber_yield(me->w);
}

void mock_fiber_main(mock_fiber *f);
void mock_fiber_main(mock_fiber *f) {
  mock_warp *w = f->w;
#if defined(MOCK_ASAN)
  __sanitizer_finish_switch_fiber(NULL, &w->sched_bottom, &w->sched_size);
#endif
  w->k->fn->run(w->k->args);
  atomic_store_explicit(&f->state, F_DONE, memory_order_relaxed);
  atomic_fetch_add_explicit(&w->done, 1u, memory_order_relaxed);
  /* lanes that left count as arrived: a barrier the rest wait at ends */
  uint32_t live = w->n - atomic_load_explicit(&w->done, memory_order_relaxed);
  if (live && atomic_load_explicit(&w->arrived, memory_order_relaxed) == live)
    warp_release(w);
  fiber_switch(w, NULL, 1); /* all it did, before its stack is reused */
  abort();                  /* a finished lane is never resumed */
}

/* Lanes' stacks (a guard page, then MOCK_FIBER_STACK bytes), each with its
 * ThreadSanitizer fiber, kept for the next launch: a peer executor
 * launches a kernel per call. */
typedef struct mock_stack {
  unsigned char *map;
  void *tsan;
} mock_stack;

static pthread_mutex_t stacks_mu = PTHREAD_MUTEX_INITIALIZER;
static mock_stack *stacks;
static size_t n_stacks, cap_stacks;

static mock_stack stack_get(void) {
  const size_t page = 4096, len = page + MOCK_FIBER_STACK;
  mock_stack st = {NULL, NULL};
  pthread_mutex_lock(&stacks_mu);
  if (n_stacks)
    st = stacks[--n_stacks];
  pthread_mutex_unlock(&stacks_mu);
  if (st.map) {
#if defined(MOCK_ASAN)
    /* a lane that ran on it left its frames' poison behind */
    __asan_unpoison_memory_region(st.map + page, MOCK_FIBER_STACK);
#endif
    return st;
  }
  st.map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (st.map == MAP_FAILED || mprotect(st.map, page, PROT_NONE) != 0)
    abort();
#if defined(MOCK_TSAN)
  if (tsan_fibers())
    st.tsan = __tsan_create_fiber(0);
#endif
  return st;
}

static void stack_put(mock_stack st) {
  pthread_mutex_lock(&stacks_mu);
  if (n_stacks == cap_stacks) {
    size_t cap = cap_stacks ? 2 * cap_stacks : 64;
    mock_stack *v = realloc(stacks, cap * sizeof *v);
    if (!v)
      abort();
    stacks = v;
    cap_stacks = cap;
  }
  stacks[n_stacks++] = st;
  pthread_mutex_unlock(&stacks_mu);
}

/* The warp's host thread: its lanes, each on a stack of its own, run until
 * every one has finished. */
static void warp_run(mock_warp *w) {
  const size_t page = 4096, len = page + MOCK_FIBER_STACK;
#if defined(MOCK_TSAN)
  if (tsan_fibers())
    w->tsan_sched = __tsan_get_current_fiber();
#endif
  for (uint32_t i = 0; i < w->n; i++) {
    mock_fiber *f = &w->f[i];
    const mock_stack st = stack_get();
    f->map = st.map;
    f->tsan = st.tsan;
    uint64_t *top = (uint64_t *)(void *)(f->map + len);
    uint64_t *sp = top - 10; /* 16-aligned after the start's ret */
    uint32_t csr[2];
    __asm__ volatile("stmxcsr %0\n fnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
    memcpy(&sp[0], csr, 8);
    sp[1] = sp[2] = sp[3] = 0;      /* r15 r14 r13 */
    sp[4] = (uint64_t)(uintptr_t)f; /* r12: the argument */
    sp[5] = sp[6] = 0;              /* rbx rbp */
    sp[7] = (uint64_t)(uintptr_t)mock_fiber_start;
    f->sp = sp;
  }
  uint32_t left = w->n;
  while (left) {
    const uint32_t start =
        (uint32_t)(atomic_load_explicit(&w->order, memory_order_relaxed) >>
                   33) %
        w->n;
    int ran = 0, moved = 0;
    const uint32_t g0 = atomic_load_explicit(&w->gen, memory_order_relaxed);
    for (uint32_t k = 0; k < w->n; k++) {
      mock_fiber *f = &w->f[(start + k) % w->n];
      if (atomic_load_explicit(&f->state, memory_order_relaxed) != F_RUN)
        continue;
      atomic_store_explicit(&f->paused, 0, memory_order_relaxed);
      fiber_switch(w, f, !f->started); /* its first run: in order */
      f->started = 1;
      ran = 1;
      if (atomic_load_explicit(&f->state, memory_order_relaxed) == F_DONE)
        left--;
      if (!atomic_load_explicit(&f->paused, memory_order_relaxed) ||
          atomic_load_explicit(&w->gen, memory_order_relaxed) != g0)
        moved = 1;
      if (atomic_load_explicit(&w->gen, memory_order_relaxed) != g0)
        break; /* a new round: start where its order says */
    }
    if (!ran && left) {
      fprintf(stderr, "cuda stand-in: every lane of a warp waits at a "
                      "barrier no lane can reach\n");
      abort();
    }
    if (!moved) { /* every runnable lane is waiting on someone else */
      if (atomic_load_explicit(&w->backoff, memory_order_relaxed) < 8) {
        atomic_fetch_add_explicit(&w->backoff, 1u, memory_order_relaxed);
        sched_yield();
      } else {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
      }
    }
  }
  for (uint32_t i = 0; i < w->n; i++)
    stack_put((mock_stack){w->f[i].map, w->f[i].tsan});
}

/* ---- residency: SMs' threads and registers, CTAs placed on them ---- */

#define MOCK_SM_THREADS 2048
#define MOCK_SM_REGS 65536

/* CTAs one SM holds at most (HBG_MOCK_CUDA_SM_BLOCKS, default 32; 1 makes
 * every SM hold one executor CTA, as an H100's registers do). */
static int sm_blocks_max(void) {
  int n = env_int("HBG_MOCK_CUDA_SM_BLOCKS", 32);
  return n < 1 ? 1 : n > 32 ? 32 : n;
}

static pthread_mutex_t res_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t res_cv = PTHREAD_COND_INITIALIZER;
static int sm_threads[MOCK_MAX_GRID], sm_regs[MOCK_MAX_GRID],
    sm_blocks[MOCK_MAX_GRID]; /* in use */
static int occupied;             /* hbgmock_occupy: SMs held whole */
static uint64_t occupied_until;  /* 0: until released */
static int stall_cta = -1;       /* hbgmock_stall_cta */

/* Registers per thread of an entry point (what ptxas reported for the
 * GPU build, rounded), and its local memory per thread. A linked module's
 * executor takes HBG_MOCK_CUDA_LINKED_REGS / _LOCAL when set. */
static int fn_regs(const struct CUfunc_st *f) {
  if (f->mod)
    return env_int("HBG_MOCK_CUDA_LINKED_REGS", 128);
  return strcmp(f->name, "hbg_dc_exec") == 0 ? 128 : 64;
}

static int fn_local(const struct CUfunc_st *f) {
  int base = strcmp(f->name, "hbg_dc_exec") == 0 ? 4048 : 512;
  return f->mod ? env_int("HBG_MOCK_CUDA_LINKED_LOCAL", base) : base;
}

/* CTAs of bx threads of f one SM holds. */
static int occupancy(const struct CUfunc_st *f, int bx) {
  int by_threads = MOCK_SM_THREADS / bx;
  int by_regs = MOCK_SM_REGS / (fn_regs(f) * bx);
  int n = by_threads < by_regs ? by_threads : by_regs;
  return n < sm_blocks_max() ? n : sm_blocks_max();
}

/* res_mu held: an SM with room for a CTA of bx threads of f, or -1. */
static int sm_fit(const struct CUfunc_st *f, int bx) {
  for (int i = occupied; i < sms(); i++)
    if (sm_threads[i] + bx <= MOCK_SM_THREADS &&
        sm_regs[i] + fn_regs(f) * bx <= MOCK_SM_REGS &&
        sm_blocks[i] < sm_blocks_max())
      return i;
  return -1;
}

static void sm_take(int i, const struct CUfunc_st *f, int bx, int sign) {
  sm_threads[i] += sign * bx;
  sm_regs[i] += sign * fn_regs(f) * bx;
  sm_blocks[i] += sign;
}

/* res_mu held: wait until the occupying blocker is gone when it has a
 * time limit (one without runs until hbgmock_occupy(0, 0)). */
static void res_wait(void) {
  if (occupied && occupied_until) {
    uint64_t now = now_ns();
    if (now >= occupied_until) {
      occupied = 0;
      pthread_cond_broadcast(&res_cv);
      return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t left = occupied_until - now;
    ts.tv_sec += (time_t)(left / 1000000000u);
    ts.tv_nsec += (long)(left % 1000000000u);
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&res_cv, &res_mu, &ts);
    return;
  }
  pthread_cond_wait(&res_cv, &res_mu);
}

/* Place CTAs [0, n) of a grid (all at once for a cooperative launch, one
 * after another otherwise, each waiting for room as a GPU's block
 * scheduler does). */
static void place(mock_cta *c, unsigned n, int bx, int coop) {
  pthread_mutex_lock(&res_mu);
  if (coop) {
    for (;;) {
      unsigned k = 0;
      for (; k < n; k++) {
        int i = sm_fit(c[k].fn, bx);
        if (i < 0)
          break;
        c[k].sm = i;
        sm_take(i, c[k].fn, bx, 1);
      }
      if (k == n)
        break;
      while (k-- > 0)
        sm_take(c[k].sm, c[k].fn, bx, -1);
      res_wait();
    }
  } else {
    for (unsigned k = 0; k < n; k++) {
      int i;
      while ((i = sm_fit(c[k].fn, bx)) < 0)
        res_wait();
      c[k].sm = i;
      sm_take(i, c[k].fn, bx, 1);
    }
  }
  pthread_mutex_unlock(&res_mu);
}

static void unplace(mock_cta *c, int bx) {
  pthread_mutex_lock(&res_mu);
  sm_take(c->sm, c->fn, bx, -1);
  pthread_cond_broadcast(&res_cv);
  pthread_mutex_unlock(&res_mu);
}

/* Tests: the next n SMs are held whole by a foreign kernel for ms
 * milliseconds (ms < 0: until hbgmock_occupy(0, 0)), as a persistent
 * kernel on another stream would; CTAs wait for room. */
MOCK_EXPORT void hbgmock_occupy(int n, int ms) {
  pthread_mutex_lock(&res_mu);
  occupied = n < 0 ? 0 : n > sms() ? sms() : n;
  occupied_until = ms < 0 ? 0 : now_ns() + (uint64_t)ms * 1000000u;
  pthread_cond_broadcast(&res_cv);
  pthread_mutex_unlock(&res_mu);
}

/* Tests: in the next grid launched, CTA `cta` becomes resident only once
 * every other CTA of that grid has left (a CTA the block scheduler holds
 * back: what a grid that does not fit meets). -1 disarms. */
MOCK_EXPORT void hbgmock_stall_cta(int cta) {
  pthread_mutex_lock(&res_mu);
  stall_cta = cta;
  pthread_mutex_unlock(&res_mu);
}

static void *warp_main(void *arg) {
  mock_warp *w = arg;
  /* back-off sleeps of microseconds, not the default 50 us of slack */
  (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  cur_mod = w->k->fn->mod; /* the module hbg_dcu_* resolve in */
  warp_run(w);
  cur_mod = NULL;
  atomic_store_explicit(&cur_fiber, NULL, memory_order_relaxed);
  if (atomic_fetch_sub_explicit(&w->cta->live, 1u, memory_order_acq_rel) ==
      1u)
    unplace(w->cta, (int)w->k->bx);
  return NULL;
}

static unsigned warp_of(unsigned lanes) {
  unsigned w = (unsigned)env_int("HBG_MOCK_CUDA_WARP", 32);
  if (w < 1)
    w = 1;
  if (w > lanes)
    w = lanes;
  while (lanes % w)
    w--; /* warps tile the CTA */
  return w;
}

/* CTA i's warps' threads started. */
/* CTA c's warps' threads started; with `own`, warp 0 is left for the
 * stream's thread to run itself (warp_main, after the others start). */
static void cta_start(mock_cta *c, int own) {
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, 1u << 20);
  for (unsigned j = own ? 1 : 0; j < c->n_warps; j++)
    if (pthread_create(&c->warps[j].th, &at, warp_main, &c->warps[j]) != 0)
      abort();
  pthread_attr_destroy(&at);
}

/* CTAs [from, to) of the grid placed and started: a cooperative launch's
 * all at once when they all fit, a plain launch's each as soon as it fits
 * (the ones placed run while the rest wait for room, as on a GPU). With
 * own, the first CTA's warp 0 is the calling thread's, run last. */
static void grid_start(const kcall *k, mock_cta *c, unsigned from,
                       unsigned to, int own) {
  if (k->coop) {
    place(c + from, to - from, (int)k->bx, 1);
    for (unsigned i = from; i < to; i++)
      cta_start(&c[i], own && i == from);
  } else {
    for (unsigned i = from; i < to; i++) {
      place(c + i, 1, (int)k->bx, 0);
      cta_start(&c[i], own && i == from);
    }
  }
  if (own && to > from)
    (void)warp_main(&c[from].warps[0]);
}

static void grid_join(mock_cta *c, unsigned from, unsigned to, int own) {
  for (unsigned i = from; i < to; i++)
    for (unsigned j = own && i == from ? 1 : 0; j < c[i].n_warps; j++)
      pthread_join(c[i].warps[j].th, NULL);
}

/* Run a launch's grid: every warp a host thread, every lane a fiber, all
 * CTAs at once as far as the SMs hold them (a cooperative launch waits
 * until the whole grid fits). A grid the stand-in cannot give threads or
 * stacks to is a failure of the test machine: abort. */
static void run_grid(const kcall *k) {
  const unsigned G = k->gx, L = k->bx, W = warp_of(L), NW = L / W;
  mock_cta *c = calloc(G, sizeof *c);
  if (!c)
    abort();
  for (unsigned i = 0; i < G; i++) {
    c[i].fn = k->fn;
    c[i].bar.n = NW;
    c[i].n_warps = NW;
    atomic_init(&c[i].live, NW);
    c[i].warps = calloc(NW, sizeof *c[i].warps);
    if (!c[i].warps)
      abort();
    for (unsigned j = 0; j < NW; j++) {
      mock_warp *w = &c[i].warps[j];
      w->k = k;
      w->cta = &c[i];
      w->n = W;
      atomic_init(&w->order, (uint64_t)(i * NW + j) * 0x9e3779b97f4a7c15ull + 1);
      w->f = calloc(W, sizeof *w->f);
      w->xchg = calloc(2 * (size_t)W, sizeof *w->xchg);
      if (!w->f || !w->xchg)
        abort();
      for (unsigned l = 0; l < W; l++) {
        w->f[l].w = w;
        w->f[l].dim = (hbg_dc_host_dim){i, G, L, j * W + l, W};
      }
    }
  }
  pthread_mutex_lock(&res_mu);
  int stall = stall_cta >= 0 && (unsigned)stall_cta < G ? stall_cta : -1;
  stall_cta = -1;
  pthread_mutex_unlock(&res_mu);
  /* the stream's thread runs a warp itself (a one-warp grid, such as a
   * peer executor's call, starts no thread), where every CTA is placed
   * before any runs (a plain launch of several places each as it fits,
   * and one placed must run meanwhile) */
  const int own = k->coop || G == 1;
  if (stall < 0) {
    grid_start(k, c, 0, G, own);
    grid_join(c, 0, G, own);
  } else { /* the others first, then the held-back one */
    unsigned s = (unsigned)stall;
    grid_start(k, c, 0, s, 0);
    grid_start(k, c, s + 1, G, 0);
    grid_join(c, 0, s, 0);
    grid_join(c, s + 1, G, 0);
    grid_start(k, c, s, s + 1, 1);
    grid_join(c, s, s + 1, 1);
  }
  for (unsigned i = 0; i < G; i++) {
    for (unsigned j = 0; j < c[i].n_warps; j++) {
      free(c[i].warps[j].f);
      free(c[i].warps[j].xchg);
    }
    free(c[i].warps);
  }
  free(c);
}

/* The same entry points built with HBG_DC_USER (devcode_user.c, names
 * prefixed hbgmock_u_): the executor a link with user kernels produces,
 * calling hbg_dcu_info / hbg_dcu_call below for the module it runs in. */
#define MOCK_U_RUNNER(name, args)                                              \
  void hbgmock_u_##name(args a);                                               \
  static void run_u_##name(const void *p) {                                    \
    args a;                                                                    \
    memcpy(&a, p, sizeof a);                                                   \
    hbgmock_u_##name(a);                                                       \
  }
HBG_DC_ENTRIES(MOCK_U_RUNNER)
#undef MOCK_U_RUNNER

static const struct CUfunc_st ufuncs[] = {
#define MOCK_U_FUNC(name, args) {#name, run_u_##name, sizeof(args), NULL},
    HBG_DC_ENTRIES(MOCK_U_FUNC)
#undef MOCK_U_FUNC
};
_Static_assert(sizeof ufuncs / sizeof ufuncs[0] == MOCK_N_ENTRIES,
               "every entry point has a user-kernel build");

/* A linked module's user kernel, or NULL. */
static const mock_uk *uk_find(const struct CUmod_st *m, uint32_t kernel) {
  size_t lo = 0, hi = m ? m->n_uk : 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->uk[mid].kernel < kernel)
      lo = mid + 1;
    else
      hi = mid;
  }
  return m && lo < m->n_uk && m->uk[lo].kernel == kernel ? &m->uk[lo] : NULL;
}

/* The generated dispatch (devcode/user.h), as the linked module in which
 * the calling stream thread runs a kernel resolved it. */
int hbg_dcu_info(uint32_t kernel, hbg_dcu_kinfo *out) {
  const mock_uk *u = uk_find(cur_mod, kernel);
  if (!u)
    return HBG_IMG_E_KERNEL;
  out->phases = u->phases;
  out->rows_of = u->rows_of;
  out->scratch_floats = u->scratch_floats;
  return 0;
}

int hbg_dcu_call(uint32_t kernel, const hbg_kernel_call *call, uint64_t phase,
                 uint32_t lane, uint32_t n_lanes, float *scratch) {
  const mock_uk *u = uk_find(cur_mod, kernel);
  if (!u)
    return HBG_IMG_E_KERNEL;
  return u->fn(call, phase, lane, n_lanes, scratch);
}

static void replay_done(struct CUgraphExec_st *x);

static void *worker(void *arg) {
  struct CUstream_st *s = arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while ((!s->head || held ||
            (s->head->wait && s->head->wait->done < s->head->wait_gen) ||
            (s->head->gated && gate_closed)) &&
           !s->stop)
      pthread_cond_wait(&cv, &mu);
    if (!s->head)
      break;
    op *o = s->head;
    s->busy = 1;
    if (o->check_host && !host_find(o->check_host, o->n)) {
      fprintf(stderr, "cuda stand-in: a graph replay copies %zu bytes "
                      "at %p, pinned host memory when the copy was captured "
                      "and no longer pinned (freed or unregistered)\n",
              o->n, o->check_host);
      abort();
    }
    pthread_mutex_unlock(&mu);
    delay();
    if (o->fill) {
      uint8_t *d = o->dst;
      for (size_t i = 0; i < o->n; i += o->fill_elem)
        memcpy(d + i, &o->fill_val, o->fill_elem);
    } else if (o->n) {
      memcpy(o->dst, o->src, o->n); /* a freed source: ASan reports it */
    }
    if (o->k.fn)
      run_grid(&o->k);
    free(o->owned);
    pthread_mutex_lock(&mu);
    if (o->k.fn)
      kernels_run++;
    s->head = o->next;
    if (!s->head)
      s->tail = NULL;
    if (o->ev && o->ev->done < o->gen) {
      o->ev->done = o->gen;
      o->ev->t_ns = now_ns();
    }
    if (o->wait)
      o->wait->waits--;
    if (o->xdone)
      replay_done(o->xdone);
    free(o);
    s->busy = 0;
    pthread_cond_broadcast(&cv);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void push(struct CUstream_st *s, op *o) {
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  pthread_cond_broadcast(&cv);
}

static void drain(struct CUstream_st *s) {
  while (s->head || s->busy)
    pthread_cond_wait(&cv, &mu);
}


/* Host memory behind device range [addr, addr + len) for the device
 * module's host build (devcode.h), or NULL. */
void *hbg_dc_host_ptr(uint64_t addr, uint64_t len) {
  pthread_rwlock_rdlock(&map_lock);
  uint8_t *p = dev_ptr((const void *)(uintptr_t)addr, len);
  pthread_rwlock_unlock(&map_lock);
  return p;
}

static long defs_validated;

/* check.c ran hbg_img_def_validate (devcode.h). */
void hbg_dc_host_def_validated(void) {
  pthread_mutex_lock(&mu);
  defs_validated++;
  pthread_mutex_unlock(&mu);
}

/* Definitions the device module has validated so far (every launch). */
MOCK_EXPORT long hbgmock_defs_validated(void) {
  pthread_mutex_lock(&mu);
  long n = defs_validated;
  pthread_mutex_unlock(&mu);
  return n;
}

/* ---- stream capture: state and rules (the entry points are at the end)
 * ---- */

static mcapture *captures; /* active (ended ones are freed) */
static uint64_t capture_ids;
/* The calling thread's capture state, kept under a pthread key rather
 * than in _Thread_local variables: more thread-local storage in this
 * dlopened library moves it out of glibc's static surplus into dynamic
 * TLS, which LeakSanitizer (gcc 12) crashes scanning at exit. */
typedef struct mthread {
  CUstreamCaptureMode mode; /* cuThreadExchangeStreamCaptureMode's */
  int in_destructor;        /* runs a user object's destructor */
  const char **calls_v;     /* hbgmock_calls_begin's record, or NULL */
  size_t calls_n;
} mthread;

static pthread_key_t mthread_key;
static pthread_once_t mthread_once = PTHREAD_ONCE_INIT;

static void mthread_free(void *p) {
  mthread *t = p;
  free(t->calls_v);
  free(t);
}

static void mthread_init(void) {
  if (pthread_key_create(&mthread_key, mthread_free))
    abort();
}

/* The calling thread's state; NULL where it has none and create is 0. */
static mthread *mthread_get(int create) {
  pthread_once(&mthread_once, mthread_init);
  mthread *t = pthread_getspecific(mthread_key);
  if (!t && create) {
    t = calloc(1, sizeof *t);
    if (!t || pthread_setspecific(mthread_key, t))
      abort();
    t->mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  }
  return t;
}

static CUstreamCaptureMode thread_mode(void) {
  mthread *t = mthread_get(0);
  return t ? t->mode : CU_STREAM_CAPTURE_MODE_GLOBAL;
}

static int in_destructor(void) {
  mthread *t = mthread_get(0);
  return t && t->in_destructor;
}

/* hbgmock_calls_begin / _end: the calling thread's record of entry points */
#define CALLS_MAX 65536

static void calls_note(const char *name) {
  mthread *t = mthread_get(0);
  if (!t || !t->calls_v)
    return;
  if (t->calls_n < CALLS_MAX)
    t->calls_v[t->calls_n] = name;
  t->calls_n++;
}

/* Start recording, for the calling thread only, the name of every driver
 * entry point it calls (a new record: an earlier one is dropped). */
MOCK_EXPORT void hbgmock_calls_begin(void) {
  mthread *t = mthread_get(1);
  if (!t->calls_v)
    t->calls_v = malloc(CALLS_MAX * sizeof *t->calls_v);
  if (!t->calls_v)
    abort();
  t->calls_n = 0;
}

/* Stop recording: @return how many calls were recorded since
 * hbgmock_calls_begin (0 without one); names[0..min(max, that)) get their
 * names (static strings) in call order. */
MOCK_EXPORT size_t hbgmock_calls_end(const char **names, size_t max) {
  mthread *t = mthread_get(0);
  if (!t || !t->calls_v)
    return 0;
  size_t n = t->calls_n;
  for (size_t i = 0; i < n && i < max && i < CALLS_MAX; i++)
    names[i] = t->calls_v[i];
  free(t->calls_v);
  t->calls_v = NULL;
  t->calls_n = 0;
  return n;
}

static void cap_invalidate(mcapture *c) { c->invalid = 1; }

/* A "potentially unsafe" call (cuMemAlloc, a synchronisation, a module
 * load, ...) from the calling thread: prohibited, unless the thread's mode
 * is RELAXED, while a GLOBAL-mode capture is active in any thread or one
 * the thread began is active and not RELAXED. @return
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating every capture it
 * conflicts with, or CUDA_SUCCESS. mu held. */
static CUresult unsafe_locked(void) {
  if (thread_mode() == CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  for (mcapture *c = captures; c; c = c->next)
    if (c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
        (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
         pthread_equal(c->owner, pthread_self()))) {
      cap_invalidate(c);
      r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  return r;
}

static CUresult unsafe(void) {
  pthread_mutex_lock(&mu);
  CUresult r = unsafe_locked();
  pthread_mutex_unlock(&mu);
  return r;
}

#define UNSAFE()                                                               \
  do {                                                                         \
    CUresult unsafe__r = unsafe();                                             \
    if (unsafe__r != CUDA_SUCCESS)                                             \
      return unsafe__r;                                                        \
  } while (0)

/* Synchronising with or querying a stream that is capturing: prohibited
 * in every mode (the capture is invalidated). mu held. */
static CUresult on_capturing(struct CUstream_st *s) {
  if (!s->cap)
    return CUDA_SUCCESS;
  cap_invalidate(s->cap);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Work queued on s while it captures: 901 on an invalidated capture. mu
 * held. */
static CUresult cap_check(const struct CUstream_st *s) {
  return s->cap && s->cap->invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                   : CUDA_SUCCESS;
}

static mcapture *cap_find(uint64_t id) {
  for (mcapture *c = captures; c; c = c->next)
    if (c->id == id)
      return c;
  return NULL;
}

/* Add node nd to the capture s is a member of, after s's work. mu held. */
static CUresult cap_add(struct CUstream_st *s,
                        const struct CUgraphNode_st *nd) {
  struct CUgraph_st *g = s->cap->g;
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 8;
    struct CUgraphNode_st *v = realloc(g->v, cap * sizeof *v);
    if (!v)
      return CUDA_ERROR_OUT_OF_MEMORY;
    g->v = v;
    g->cap = cap;
  }
  g->v[g->n] = *nd;
  s->last = (long)g->n++;
  s->work = ++s->cap->seq;
  return CUDA_SUCCESS;
}

/* The capture c ends: its streams capture no more. mu held. */
static void cap_end(mcapture *c) {
  for (struct CUstream_st *s = streams; s; s = s->next)
    if (s->cap == c)
      s->cap = NULL;
  HBG__SLIST_UNLINK(mcapture, captures, c);
  free(c);
}

/* ---- user objects ---- */

static long n_uobjs; /* created, destructor not yet returned */
static struct CUuserObject_st *dtor_head, *dtor_tail;
static int dtor_started;
static pthread_t dtor_th;

/* The stand-in's destructor thread: runs the destructors of the user
 * objects whose last reference went, in order, outside mu, with every
 * driver call from them NOT_PERMITTED. */
static void *dtor_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!dtor_head)
      pthread_cond_wait(&cv, &mu);
    struct CUuserObject_st *o = dtor_head;
    dtor_head = o->next;
    if (!dtor_head)
      dtor_tail = NULL;
    pthread_mutex_unlock(&mu);
    mthread *t = mthread_get(1);
    t->in_destructor = 1;
    o->destroy(o->ptr);
    t->in_destructor = 0;
    free(o);
    pthread_mutex_lock(&mu);
    n_uobjs--;
    pthread_cond_broadcast(&cv);
  }
  return NULL;
}

/* Drop count references to o; the last one queues its destructor. mu
 * held. */
static void uo_release(struct CUuserObject_st *o, unsigned count) {
  o->refs -= (long)count;
  if (o->refs > 0)
    return;
  o->next = NULL;
  if (dtor_tail)
    dtor_tail->next = o;
  else
    dtor_head = o;
  dtor_tail = o;
  if (!dtor_started) {
    if (pthread_create(&dtor_th, NULL, dtor_main, NULL)) {
      fprintf(stderr, "cuda stand-in: no destructor thread\n");
      abort();
    }
    pthread_detach(dtor_th);
    dtor_started = 1;
  }
  pthread_cond_broadcast(&cv);
}

static void urefs_release(uref *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    uo_release(v[i].o, v[i].count);
  free(v);
}

/* mu held */
static void graph_free(struct CUgraph_st *g) {
  graph_unlist(g);
  urefs_release(g->uo, g->n_uo);
  free(g->v);
  free(g);
}

/* An executable graph destroyed and with no replay queued: its references
 * go. mu held. */
static void exec_free(struct CUgraphExec_st *x) {
  urefs_release(x->uo, x->n_uo);
  free(x->v);
  free(x);
}

/* A replay of x completed (the worker, mu held). */
static void replay_done(struct CUgraphExec_st *x) {
  if (--x->inflight == 0 && x->dead)
    exec_free(x);
}

/* Live user objects: created and their destructor not yet returned. */
MOCK_EXPORT long hbgmock_user_objects(void) {
  pthread_mutex_lock(&mu);
  long n = n_uobjs;
  pthread_mutex_unlock(&mu);
  return n;
}

/* A test kernel of the stand-in's own (hbgmock_fill_function): its
 * threads together set n 32-bit words at dst to val. */
typedef struct hbgmock_fill_args {
  uint64_t dst;
  uint32_t val, n;
} hbgmock_fill_args;

static void run_fill(const void *p) {
  hbgmock_fill_args a;
  memcpy(&a, p, sizeof a);
  const hbg_dc_host_dim *d = hbg_dc_host_grid();
  uint32_t *w = hbg_dc_host_ptr(a.dst, (uint64_t)a.n * 4);
  if (!w) {
    fprintf(stderr, "cuda stand-in: hbgmock_fill on unallocated memory\n");
    abort();
  }
  const uint32_t me = d->cta * d->lanes + d->tid, all = d->ctas * d->lanes;
  for (uint32_t i = me; i < a.n; i += all)
    w[i] = a.val;
}

static const struct CUfunc_st fill_fn = {"hbgmock_fill", run_fill,
                                         sizeof(hbgmock_fill_args), NULL};

/* Tests: a function to launch without a module, whose one parameter is
 * struct {uint64_t dst; uint32_t val, n;}: sets n 32-bit words at device
 * address dst to val. */
MOCK_EXPORT CUfunction hbgmock_fill_function(void) {
  return (CUfunction)&fill_fn;
}

/* ---- fault injection ---- */

MOCK_EXPORT void hbgmock_fail(const char *name, int code, int nth) {
  pthread_mutex_lock(&mu);
  snprintf(fail_name, sizeof fail_name, "%s", name ? name : "");
  fail_code = (CUresult)code;
  fail_nth = nth;
  pthread_mutex_unlock(&mu);
}

/* 1 while the armed failure has not fired yet. */
MOCK_EXPORT int hbgmock_armed(void) {
  pthread_mutex_lock(&mu);
  int r = fail_name[0] != '\0';
  pthread_mutex_unlock(&mu);
  return r;
}

/* Device and pinned allocations, registrations, streams and events alive,
 * plus primary-context references held: 0 once every user is done. */
MOCK_EXPORT long hbgmock_live(void) {
  long n = 0;
  pthread_mutex_lock(&mu);
  for (dalloc *d = dallocs; d; d = d->next)
    n++;
  for (hreg *h = hregs; h; h = h->next)
    n++;
  n += n_streams + n_events + n_modules + n_graphs + n_execs + n_links;
  for (int i = 0; i < 8; i++)
    n += primary[i].refs;
  pthread_mutex_unlock(&mu);
  return n;
}

MOCK_EXPORT void hbgmock_hold(int on) {
  pthread_mutex_lock(&mu);
  held = on;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

MOCK_EXPORT void hbgmock_gate(int n) {
  pthread_mutex_lock(&mu);
  gate_pending = n > 0 ? n : 0;
  gate_closed = n > 0;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

MOCK_EXPORT long hbgmock_kernels_run(void) {
  pthread_mutex_lock(&mu);
  long n = kernels_run;
  pthread_mutex_unlock(&mu);
  return n;
}

MOCK_EXPORT void hbgmock_poke(int nth, uint32_t offset, uint32_t value) {
  pthread_mutex_lock(&mu);
  poke_nth = nth;
  poke_off = offset;
  poke_val = value;
  pthread_mutex_unlock(&mu);
}

MOCK_EXPORT long hbgmock_modules(void) {
  pthread_mutex_lock(&mu);
  long n = n_modules;
  pthread_mutex_unlock(&mu);
  return n;
}

static CUresult injected(const char *name) {
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  if (fail_name[0] && strcmp(fail_name, name) == 0 && fail_nth-- == 0) {
    r = fail_code;
    fail_name[0] = '\0';
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* Every entry point starts here: the call is recorded
 * (hbgmock_calls_begin), refused in a user object's destructor, failed
 * when armed (hbgmock_fail), refused before cuInit. */
static CUresult enter(const char *name) {
  calls_note(name);
  if (in_destructor())
    return CUDA_ERROR_NOT_PERMITTED;
  CUresult r = injected(name);
  if (r != CUDA_SUCCESS)
    return r;
  return inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

#define ENTER(name)                                                            \
  do {                                                                         \
    CUresult enter__r = enter(name);                                           \
    if (enter__r != CUDA_SUCCESS)                                              \
      return enter__r;                                                         \
  } while (0)

/* Calls that act in the calling thread's current context. */
#define ENTER_CTX(name)                                                        \
  do {                                                                         \
    ENTER(name);                                                               \
    if (!cur_ctx || cur_ctx->refs <= 0)                                        \
      return CUDA_ERROR_INVALID_CONTEXT;                                       \
  } while (0)

/* ---- errors ---- */

static const struct {
  CUresult code;
  const char *name, *str;
} errs[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
     "initialization error"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
     "CUDA driver is a stub library"},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
     "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
     "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT",
     "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
     "invalid resource handle"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
     "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
     "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
     "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
     "operation not supported"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
     "device kernel image is invalid"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
     "a PTX JIT compilation failed"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation is not permitted in the current state"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
     "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED",
     "operation not permitted"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
     "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not initiated in this stream"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capturing stream has unjoined work"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
     "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing "
     "stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
     "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another "
     "thread"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int err_find(CUresult e) {
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
    if (errs[i].code == e)
      return (int)i;
  return -1;
}

MOCK_EXPORT CUresult cuGetErrorName(CUresult e, const char **str) {
  calls_note("cuGetErrorName");
  int i = err_find(e);
  if (i < 0) {
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *str = errs[i].name;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGetErrorString(CUresult e, const char **str) {
  calls_note("cuGetErrorString");
  int i = err_find(e);
  if (i < 0) {
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *str = errs[i].str;
  return CUDA_SUCCESS;
}

/* ---- init, devices, contexts ---- */

MOCK_EXPORT CUresult cuInit(unsigned int flags) {
  calls_note("cuInit");
  if (in_destructor())
    return CUDA_ERROR_NOT_PERMITTED;
  CUresult r = injected("cuInit");
  if (r != CUDA_SUCCESS)
    return r;
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (ndev() <= 0)
    return CUDA_ERROR_NO_DEVICE;
  inited = 1;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuDriverGetVersion(int *v) {
  calls_note("cuDriverGetVersion");
  if (in_destructor())
    return CUDA_ERROR_NOT_PERMITTED;
  CUresult r = injected("cuDriverGetVersion");
  if (r != CUDA_SUCCESS)
    return r;
  *v = CUDA_VERSION;
  return CUDA_SUCCESS;
}

static int ndev_capped(void) {
  int n = ndev();
  return n > 8 ? 8 : n;
}

MOCK_EXPORT CUresult cuDeviceGetCount(int *count) {
  ENTER("cuDeviceGetCount");
  *count = ndev_capped();
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  ENTER("cuDeviceGet");
  if (ordinal < 0 || ordinal >= ndev_capped())
    return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  ENTER("cuDeviceGetName");
  if (d < 0 || d >= ndev_capped())
    return CUDA_ERROR_INVALID_DEVICE;
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "hbg stand-in GPU (CPU)");
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute a,
                                          CUdevice d) {
  ENTER("cuDeviceGetAttribute");
  if (d < 0 || d >= ndev_capped())
    return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *pi = cc() / 10;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *pi = cc() % 10;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *pi = sms();
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
    *pi = MOCK_MAX_GRID;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    *pi = lanes();
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
    *pi = (int)warp_of((unsigned)lanes());
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    *pi = coop_ok();
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

MOCK_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  ENTER("cuDeviceTotalMem_v2");
  if (d < 0 || d >= ndev_capped())
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = (size_t)MOCK_MEM;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice d) {
  ENTER("cuDevicePrimaryCtxRetain");
  if (d < 0 || d >= ndev_capped())
    return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&mu);
  primary[d].dev = d;
  if (!primary[d].stack)
    primary[d].stack = 1024; /* the driver's default per thread */
  primary[d].refs++;
  pthread_mutex_unlock(&mu);
  *pctx = &primary[d];
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  ENTER("cuDevicePrimaryCtxRelease_v2");
  if (d < 0 || d >= ndev_capped())
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  if (primary[d].refs <= 0)
    r = CUDA_ERROR_INVALID_CONTEXT;
  else
    primary[d].refs--;
  pthread_mutex_unlock(&mu);
  return r;
}

MOCK_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
  ENTER("cuCtxGetCurrent");
  *pctx = cur_ctx;
  return CUDA_SUCCESS;
}

/* The device of the calling thread's context (hbg's ctx=current). */
MOCK_EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
  ENTER_CTX("cuCtxGetDevice");
  if (!d)
    return CUDA_ERROR_INVALID_VALUE;
  *d = cur_ctx->dev;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  ENTER("cuCtxSetCurrent");
  if (ctx && (ctx < &primary[0] || ctx >= &primary[8]))
    return CUDA_ERROR_INVALID_CONTEXT;
  cur_ctx = ctx;
  return CUDA_SUCCESS;
}

/* ---- memory ---- */

MOCK_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size) {
  ENTER_CTX("cuMemAlloc_v2");
  UNSAFE();
  if (size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (size > MOCK_MEM)
    return CUDA_ERROR_OUT_OF_MEMORY;
  dalloc *d = calloc(1, sizeof *d);
  uint8_t *h = malloc(size);
  if (!d || !h) {
    free(d);
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memset(h, 0xCD, size);
  pthread_mutex_lock(&mu);
  if (in_use + size > MOCK_MEM) {
    pthread_mutex_unlock(&mu);
    free(d);
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d->addr = next_addr;
  next_addr += (size + 4095) / 4096 * 4096 + 4096; /* guard gap */
  d->size = size;
  d->host = h;
  d->ctx = cur_ctx;
  if (dindex_n == dindex_cap) {
    size_t cap = dindex_cap ? 2 * dindex_cap : 256;
    dalloc **v = realloc(dindex, cap * sizeof *v);
    if (!v) {
      pthread_mutex_unlock(&mu);
      free(d);
      free(h);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_rwlock_wrlock(&map_lock);
    dindex = v;
    dindex_cap = cap;
    pthread_rwlock_unlock(&map_lock);
  }
  d->next = dallocs;
  dallocs = d;
  pthread_rwlock_wrlock(&map_lock);
  dindex[dindex_n++] = d; /* the highest address yet */
  pthread_rwlock_unlock(&map_lock);
  in_use += size;
  *p = (CUdeviceptr)d->addr;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* A queued copy reads or writes d's memory. mu held. */
static int copy_pending(const dalloc *d) {
  for (struct CUstream_st *s = streams; s; s = s->next)
    for (const op *o = s->head; o; o = o->next) {
      uintptr_t h = (uintptr_t)d->host, a = (uintptr_t)o->dst,
                b = (uintptr_t)o->src;
      if (o->n && ((a >= h && a - h < d->size) || (b >= h && b - h < d->size)))
        return 1;
    }
  return 0;
}

static void import_note_free(CUdeviceptr p);

MOCK_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  import_note_free(p);
  ENTER_CTX("cuMemFree_v2");
  UNSAFE();
  pthread_mutex_lock(&mu);
  for (dalloc **pp = &dallocs; *pp; pp = &(*pp)->next) {
    dalloc *d = *pp;
    if (d->addr == (uint64_t)p) {
      /* like the driver's, the free waits for the copies using it */
      while (copy_pending(d)) {
        pthread_cond_wait(&cv, &mu);
        pp = &dallocs; /* the list may have changed meanwhile */
        while (*pp && *pp != d)
          pp = &(*pp)->next;
        if (!*pp) { /* freed by another thread meanwhile */
          pthread_mutex_unlock(&mu);
          return CUDA_ERROR_INVALID_VALUE;
        }
      }
      *pp = d->next;
      pthread_rwlock_wrlock(&map_lock);
      for (size_t i = 0; i < dindex_n; i++)
        if (dindex[i] == d) {
          memmove(&dindex[i], &dindex[i + 1],
                  (dindex_n - i - 1) * sizeof *dindex);
          dindex_n--;
          break;
        }
      pthread_rwlock_unlock(&map_lock);
      in_use -= d->size;
      pthread_mutex_unlock(&mu);
      free(d->host);
      free(d);
      return CUDA_SUCCESS;
    }
  }
  pthread_mutex_unlock(&mu);
  return CUDA_ERROR_INVALID_VALUE;
}

/* ---- pointer attributes (the backend's imports: hbg_buffer_import) ----
 *
 * cuPointerGetAttributes reports CONTEXT, MEMORY_TYPE, DEVICE_ORDINAL,
 * RANGE_START_ADDR and RANGE_SIZE from the allocation table: a device
 * allocation's context (the one current at cuMemAlloc_v2) and range, a
 * pinned or registered host range as host memory; a pointer the stand-in
 * knows nothing of gets CUDA_SUCCESS with NULL / 0 attributes, as the
 * driver's does. Test hooks: hbgmock_vmm(before, after) makes every device
 * allocation's range a reservation reaching `before` bytes below it and
 * `after` above it (PyTorch's expandable segments map memory into a larger
 * reserved range; 0, 0 ends it); hbgmock_alloc_foreign(&p, size) allocates
 * in a context of no device the backend opens; hbgmock_watch_free(p)
 * starts counting the cuMemFree_v2 calls naming p, hbgmock_watched_frees()
 * reads the count. Built with HBGMOCK_OMIT_POINTER_ATTRS it lacks
 * cuPointerGetAttributes (the _noopt variant). */

static struct CUctx_st foreign_ctx = {.dev = 0, .refs = 1};
static uint64_t vmm_before, vmm_after;          /* mu */
static uint64_t watch_addr;                     /* mu */
static long watch_frees;                        /* mu */

static void import_note_free(CUdeviceptr p) {
  pthread_mutex_lock(&mu);
  if (watch_addr && (uint64_t)p == watch_addr)
    watch_frees++;
  pthread_mutex_unlock(&mu);
}

MOCK_EXPORT void hbgmock_vmm(uint64_t before, uint64_t after) {
  pthread_mutex_lock(&mu);
  vmm_before = before;
  vmm_after = after;
  pthread_mutex_unlock(&mu);
}

MOCK_EXPORT CUresult hbgmock_alloc_foreign(CUdeviceptr *p, size_t size) {
  CUcontext was = cur_ctx;
  cur_ctx = &foreign_ctx;
  CUresult r = cuMemAlloc_v2(p, size);
  cur_ctx = was;
  return r;
}

MOCK_EXPORT void hbgmock_watch_free(CUdeviceptr p) {
  pthread_mutex_lock(&mu);
  watch_addr = (uint64_t)p;
  watch_frees = 0;
  pthread_mutex_unlock(&mu);
}

MOCK_EXPORT long hbgmock_watched_frees(void) {
  pthread_mutex_lock(&mu);
  long n = watch_frees;
  pthread_mutex_unlock(&mu);
  return n;
}

#ifndef HBGMOCK_OMIT_POINTER_ATTRS
/* The device allocation holding x, or NULL. mu held. */
static const dalloc *dalloc_at(uint64_t x) {
  size_t lo = 0, hi = dindex_n;
  while (lo < hi) {
    size_t m = lo + (hi - lo) / 2;
    if (dindex[m]->addr <= x)
      lo = m + 1;
    else
      hi = m;
  }
  if (lo == 0 || x - dindex[lo - 1]->addr >= dindex[lo - 1]->size)
    return NULL;
  return dindex[lo - 1];
}

MOCK_EXPORT CUresult cuPointerGetAttributes(unsigned int n,
                                            CUpointer_attribute *attrs,
                                            void **data, CUdeviceptr ptr) {
  ENTER("cuPointerGetAttributes");
  if (n && (!attrs || !data))
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; i++)
    if (!data[i])
      return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = NULL;
  unsigned type = 0;
  int ordinal = 0;
  uint64_t start = 0, size = 0;
  pthread_mutex_lock(&mu);
  const dalloc *d = dalloc_at((uint64_t)ptr);
  const hreg *h = d ? NULL : host_find((const void *)(uintptr_t)ptr, 1);
  if (d) {
    ctx = d->ctx;
    type = CU_MEMORYTYPE_DEVICE;
    ordinal = d->ctx ? d->ctx->dev : 0;
    start = d->addr - vmm_before;
    size = d->size + vmm_before + vmm_after;
  } else if (h) {
    ctx = cur_ctx;
    type = CU_MEMORYTYPE_HOST;
    start = (uint64_t)(uintptr_t)h->p;
    size = h->n;
  }
  pthread_mutex_unlock(&mu);
  for (unsigned i = 0; i < n; i++) {
    switch (attrs[i]) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *(CUcontext *)data[i] = ctx;
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned *)data[i] = type;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *(int *)data[i] = ordinal;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *(CUdeviceptr *)data[i] = (CUdeviceptr)start;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *(size_t *)data[i] = (size_t)size;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}
#endif

MOCK_EXPORT CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags) {
  (void)flags;
  ENTER_CTX("cuMemHostAlloc");
  UNSAFE();
  if (size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (size > MOCK_MEM)
    return CUDA_ERROR_OUT_OF_MEMORY;
  hreg *h = calloc(1, sizeof *h);
  void *m = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (!h || !m) {
    free(h);
    free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&mu);
  h->p = m;
  h->n = size;
  h->alloc = 1;
  h->next = hregs;
  hregs = h;
  pthread_mutex_unlock(&mu);
  *p = m;
  return CUDA_SUCCESS;
}

static CUresult host_drop(void *p, int alloc) {
  pthread_mutex_lock(&mu);
  for (hreg **pp = &hregs; *pp; pp = &(*pp)->next) {
    hreg *h = *pp;
    if (h->p == p && h->alloc == alloc) {
      *pp = h->next;
      pthread_mutex_unlock(&mu);
      if (alloc)
        free(h->p);
      free(h);
      return CUDA_SUCCESS;
    }
  }
  pthread_mutex_unlock(&mu);
  return alloc ? CUDA_ERROR_INVALID_VALUE
               : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

MOCK_EXPORT CUresult cuMemFreeHost(void *p) {
  ENTER_CTX("cuMemFreeHost");
  UNSAFE();
  return host_drop(p, 1);
}

MOCK_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size,
                                          unsigned int flags) {
  (void)flags;
  ENTER_CTX("cuMemHostRegister_v2");
  UNSAFE();
  if (!p || !size)
    return CUDA_ERROR_INVALID_VALUE;
  hreg *h = calloc(1, sizeof *h);
  if (!h)
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  for (hreg *o = hregs; o; o = o->next)
    if ((uint8_t *)p < o->p + o->n && o->p < (uint8_t *)p + size) {
      pthread_mutex_unlock(&mu);
      free(h);
      return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
  h->p = p;
  h->n = size;
  h->next = hregs;
  hregs = h;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuMemHostUnregister(void *p) {
  ENTER_CTX("cuMemHostUnregister");
  UNSAFE();
  return host_drop(p, 0);
}

/* ---- streams and copies ---- */

MOCK_EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned int flags) {
  (void)flags;
  ENTER_CTX("cuStreamCreate");
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (pthread_create(&s->th, NULL, worker, s)) {
    free(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&mu);
  n_streams++;
  s->next = streams;
  streams = s;
  pthread_mutex_unlock(&mu);
  *ps = s;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  ENTER_CTX("cuStreamSynchronize");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  CUresult r = on_capturing(s);
  if (r == CUDA_SUCCESS)
    r = unsafe_locked();
  if (r == CUDA_SUCCESS)
    drain(s);
  pthread_mutex_unlock(&mu);
  return r;
}

/* CUDA_SUCCESS once s has run everything queued, else NOT_READY. */
MOCK_EXPORT CUresult cuStreamQuery(CUstream s) {
  ENTER_CTX("cuStreamQuery");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  CUresult r = on_capturing(s);
  if (r == CUDA_SUCCESS)
    r = unsafe_locked();
  if (r == CUDA_SUCCESS && (s->head || s->busy))
    r = CUDA_ERROR_NOT_READY;
  pthread_mutex_unlock(&mu);
  return r;
}

/* Waits for every stream (the stand-in's contexts share them). */
MOCK_EXPORT CUresult cuCtxSynchronize(void) {
  ENTER_CTX("cuCtxSynchronize");
  pthread_mutex_lock(&mu);
  CUresult r = unsafe_locked();
  if (r == CUDA_SUCCESS)
    for (struct CUstream_st *s = streams; s; s = s->next)
      drain(s);
  pthread_mutex_unlock(&mu);
  return r;
}

MOCK_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  ENTER_CTX("cuStreamDestroy_v2");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  drain(s);
  s->stop = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(s->th, NULL);
  pthread_mutex_lock(&mu);
  /* a capture it began is discarded; one it was forked into is
   * invalidated */
  if (s->cap && s->cap->origin == s) {
    struct CUgraph_st *g = s->cap->g;
    cap_end(s->cap);
    graph_free(g);
  } else if (s->cap) {
    cap_invalidate(s->cap);
    s->cap = NULL;
  }
  for (struct CUevent_st *e = events; e; e = e->next)
    if (e->cap_s == s) /* a later join through it joins nothing */
      e->cap_s = NULL;
  n_streams--;
  HBG__SLIST_UNLINK(struct CUstream_st, streams, s);
  pthread_mutex_unlock(&mu);
  free(s);
  return CUDA_SUCCESS;
}

/* The checks every async copy starts with, then its op (n bytes).
 * @return CUDA_SUCCESS with *out, or with *out NULL: nothing to queue (n 0)
 * or the error returned. */
static CUresult copy_op(CUstream s, size_t n, const void *host, op **out) {
  *out = NULL;
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (n == 0)
    return CUDA_SUCCESS;
  if (!host)
    return CUDA_ERROR_INVALID_VALUE;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  o->n = n;
  *out = o;
  return CUDA_SUCCESS;
}

#ifndef HBGMOCK_OMIT_MEMCPY_HTOD_ASYNC
MOCK_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                          size_t n, CUstream s) {
  ENTER_CTX("cuMemcpyHtoDAsync_v2");
  op *o;
  CUresult r = copy_op(s, n, src, &o);
  if (!o)
    return r;
  pthread_mutex_lock(&mu);
  o->dst = dev_ptr((const void *)(uintptr_t)dst, n);
  if (!o->dst || s->cap) {
    /* captured: a node keeping the source pointer (copied at each replay) */
    struct CUgraphNode_st nd = {.kind = NODE_H2D, .daddr = dst,
                                .host = (void *)(uintptr_t)src, .n = n,
                                .pinned = host_find(src, n) != NULL};
    r = !o->dst ? CUDA_ERROR_INVALID_VALUE : cap_check(s);
    if (r == CUDA_SUCCESS)
      r = cap_add(s, &nd);
    pthread_mutex_unlock(&mu);
    free(o);
    return r;
  }
  if (host_find(src, n)) {
    o->src = src;
  } else {
    o->owned = malloc(n);
    if (!o->owned) {
      pthread_mutex_unlock(&mu);
      free(o);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(o->owned, src, n);
    o->src = o->owned;
  }
  push(s, o);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}
#endif

MOCK_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n,
                                          CUstream s) {
  ENTER_CTX("cuMemcpyDtoHAsync_v2");
  op *o;
  CUresult r = copy_op(s, n, dst, &o);
  if (!o)
    return r;
  pthread_mutex_lock(&mu);
  o->src = dev_ptr((const void *)(uintptr_t)src, n);
  if (!o->src || s->cap) {
    /* captured: a node keeping the destination pointer */
    struct CUgraphNode_st nd = {.kind = NODE_D2H, .daddr = src, .host = dst,
                                .n = n, .pinned = host_find(dst, n) != NULL};
    r = !o->src ? CUDA_ERROR_INVALID_VALUE : cap_check(s);
    if (r == CUDA_SUCCESS)
      r = cap_add(s, &nd);
    pthread_mutex_unlock(&mu);
    free(o);
    return r;
  }
  o->dst = dst;
  int pinned = host_find(dst, n) != NULL;
  push(s, o);
  if (!pinned)
    drain(s);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* Set n elements of elem bytes (1 or 4) at device address dst to val,
 * queued on s or captured as a memset node. */
static CUresult memset_async(CUdeviceptr dst, uint32_t val, unsigned elem,
                             size_t n, CUstream s) {
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (dst % elem)
    return CUDA_ERROR_INVALID_VALUE;
  if (n == 0)
    return CUDA_SUCCESS;
  if (n > MOCK_MEM / elem)
    return CUDA_ERROR_INVALID_VALUE;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  o->dst = dev_ptr((const void *)(uintptr_t)dst, n * elem);
  if (!o->dst || s->cap) {
    struct CUgraphNode_st nd = {.kind = NODE_MEMSET, .daddr = dst,
                                .n = n * elem, .val = val, .elem = elem};
    r = !o->dst ? CUDA_ERROR_INVALID_VALUE : cap_check(s);
    if (r == CUDA_SUCCESS)
      r = cap_add(s, &nd);
    pthread_mutex_unlock(&mu);
    free(o);
    return r;
  }
  o->n = n * elem;
  o->fill = 1;
  o->fill_elem = elem;
  o->fill_val = val;
  push(s, o);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui,
                                      size_t n, CUstream s) {
  ENTER_CTX("cuMemsetD32Async");
  return memset_async(dst, ui, 4, n, s);
}

MOCK_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc,
                                     size_t n, CUstream s) {
  ENTER_CTX("cuMemsetD8Async");
  return memset_async(dst, uc, 1, n, s);
}

/* ---- events ---- */

MOCK_EXPORT CUresult cuEventCreate(CUevent *pe, unsigned int flags) {
  ENTER_CTX("cuEventCreate");
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e)
    return CUDA_ERROR_OUT_OF_MEMORY;
  e->timing = !(flags & CU_EVENT_DISABLE_TIMING);
  pthread_mutex_lock(&mu);
  n_events++;
  e->next = events;
  events = e;
  pthread_mutex_unlock(&mu);
  *pe = e;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  ENTER("cuEventDestroy_v2");
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  /* Ops still queued may point at it: wait for every stream to drop it. */
  pthread_mutex_lock(&mu);
  while (e->done < e->rec || e->waits)
    pthread_cond_wait(&cv, &mu);
  n_events--;
  HBG__SLIST_UNLINK(struct CUevent_st, events, e);
  pthread_mutex_unlock(&mu);
  free(e);
  return CUDA_SUCCESS;
}

/* Record e on s; on a capturing stream e becomes a captured event of
 * that capture (no node), unless external: an event-record node. */
static CUresult event_record(CUevent e, CUstream s, int external) {
  if (!e || !s)
    return CUDA_ERROR_INVALID_HANDLE;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  if (s->cap) {
    CUresult r = cap_check(s);
    if (r == CUDA_SUCCESS && external) {
      struct CUgraphNode_st nd = {.kind = NODE_EVREC, .ev = e};
      r = cap_add(s, &nd);
    } else if (r == CUDA_SUCCESS) {
      e->cap_id = s->cap->id;
      e->cap_s = s;
      e->cap_work = s->work;
      e->cap_last = s->last;
    }
    pthread_mutex_unlock(&mu);
    free(o);
    return r;
  }
  e->cap_id = 0;
  o->ev = e;
  o->gen = ++e->rec;
  push(s, o);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  ENTER("cuEventRecord");
  return event_record(e, s, 0);
}

/* flags: 0 or CU_EVENT_RECORD_EXTERNAL (an event-record node in a
 * capture, a plain record outside one). */
MOCK_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s,
                                            unsigned int flags) {
  ENTER("cuEventRecordWithFlags");
  if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  return event_record(e, s, (flags & CU_EVENT_RECORD_EXTERNAL) != 0);
}

/* The stream's later work waits for e's latest record as of now (none:
 * no wait), like the driver's; flags 0 (CU_EVENT_WAIT_DEFAULT) or
 * CU_EVENT_WAIT_EXTERNAL. Stream capture: an event captured in s's capture
 * orders s after its record (a join); one captured in an active capture
 * forks a stream that is not capturing into it; an event recorded outside
 * any capture needs CU_EVENT_WAIT_EXTERNAL on a capturing stream (an
 * external-wait node), else 900 and the capture is invalidated. */
MOCK_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e,
                                       unsigned int flags) {
  ENTER("cuStreamWaitEvent");
  if (!e || !s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  mcapture *ec = e->cap_id ? cap_find(e->cap_id) : NULL;
  if (s->cap) {
    mcapture *c = s->cap;
    r = cap_check(s);
    if (r != CUDA_SUCCESS) {
    } else if (ec == c) { /* a dependency inside the capture: a join */
      struct CUstream_st *from = e->cap_s;
      if (from && from != s && from->cap == c &&
          e->cap_work > from->joined_at)
        from->joined_at = e->cap_work;
      if (e->cap_last > s->last)
        s->last = e->cap_last;
    } else if (e->cap_id) { /* captured elsewhere */
      cap_invalidate(c);
      r = ec ? CUDA_ERROR_STREAM_CAPTURE_ISOLATION : CUDA_ERROR_CAPTURED_EVENT;
    } else if (flags & CU_EVENT_WAIT_EXTERNAL) {
      struct CUgraphNode_st nd = {.kind = NODE_EVWAIT, .ev = e};
      r = cap_add(s, &nd);
    } else {
      cap_invalidate(c);
      r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&mu);
    free(o);
    return r;
  }
  if (ec) { /* a fork: s joins e's capture */
    s->cap = ec;
    s->last = e->cap_last;
    s->work = 0;
    s->joined_at = -1;
    pthread_mutex_unlock(&mu);
    free(o);
    return CUDA_SUCCESS;
  }
  if (e->cap_id) { /* last recorded in a capture that has ended */
    pthread_mutex_unlock(&mu);
    free(o);
    return CUDA_ERROR_CAPTURED_EVENT;
  }
  o->wait = e;
  o->wait_gen = e->rec;
  e->waits++;
  push(s, o);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* An event last recorded in a capture: CAPTURED_EVENT (every mode); then
 * the capture rules for an unsafe call. mu held. */
static CUresult event_check(CUevent e) {
  if (e->cap_id)
    return CUDA_ERROR_CAPTURED_EVENT;
  return unsafe_locked();
}

MOCK_EXPORT CUresult cuEventQuery(CUevent e) {
  ENTER("cuEventQuery");
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  CUresult r = event_check(e);
  int done = e->done >= e->rec;
  pthread_mutex_unlock(&mu);
  if (r != CUDA_SUCCESS)
    return r;
  return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

MOCK_EXPORT CUresult cuEventSynchronize(CUevent e) {
  ENTER("cuEventSynchronize");
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  CUresult r = event_check(e);
  uint64_t want = e->rec;
  while (r == CUDA_SUCCESS && e->done < want)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return r;
}

#if !defined(HBGMOCK_OMIT_ELAPSED_V2) || !defined(HBGMOCK_OMIT_ELAPSED_V1)
static CUresult elapsed(const char *name, float *ms, CUevent a, CUevent b) {
  ENTER_CTX(name);
  if (!ms)
    return CUDA_ERROR_INVALID_VALUE;
  if (!a || !b)
    return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  if (!a->rec || !b->rec || !a->timing || !b->timing)
    r = CUDA_ERROR_INVALID_HANDLE;
  else if (a->done < a->rec || b->done < b->rec)
    r = CUDA_ERROR_NOT_READY;
  else
    *ms = (float)((double)((int64_t)(b->t_ns - a->t_ns)) / 1e6);
  pthread_mutex_unlock(&mu);
  return r;
}
#endif

#ifndef HBGMOCK_OMIT_ELAPSED_V2
MOCK_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  return elapsed("cuEventElapsedTime_v2", ms, a, b);
}
#endif

#ifndef HBGMOCK_OMIT_ELAPSED_V1
/* cuda.h names the _v2 symbol cuEventElapsedTime: export the v1 one by its
 * own name. */
#undef cuEventElapsedTime
MOCK_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  return elapsed("cuEventElapsedTime", ms, a, b);
}
#endif

/* ---- device code ---- */

#define FATBIN_MAGIC 0xBA55ED50u

static uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* The fatbin's entries (16-byte header: magic, version, header size, body
 * size; each entry: u16 kind (1 PTX, 2 ELF) at 0, u32 header size at 4,
 * u64 payload size at 8, u32 arch at 28): an ELF for cc, or PTX for cc or
 * an older one. */
static CUresult fatbin_check(const uint8_t *b) {
  if (rd32(b) != FATBIN_MAGIC)
    return CUDA_ERROR_INVALID_IMAGE;
  uint64_t hs = (uint16_t)(b[6] | b[7] << 8), body = rd64(b + 8);
  if (hs < 16 || body > (1ull << 30))
    return CUDA_ERROR_INVALID_IMAGE;
  int ok = 0;
  for (uint64_t off = hs; off < hs + body;) {
    const uint8_t *e = b + off;
    uint32_t kind = (uint32_t)(e[0] | e[1] << 8), ehs = rd32(e + 4);
    uint64_t size = rd64(e + 8);
    if (ehs < 32 || size > body || off + ehs + size > hs + body)
      return CUDA_ERROR_INVALID_IMAGE;
    uint32_t arch = rd32(e + 28);
    if ((kind == 2 && (int)arch == cc()) || (kind == 1 && (int)arch <= cc()))
      ok = 1;
    off += ehs + size;
  }
  return ok ? CUDA_SUCCESS : CUDA_ERROR_NO_BINARY_FOR_GPU;
}

/* ---- the linker: cuLinkCreate_v2 / cuLinkAddData_v2 / cuLinkComplete /
 * cuLinkDestroy ----
 *
 * Each input's symbols are read as the real linker sees them: PTX text
 * (.visible/.weak .func and .entry are definitions, .extern .func
 * references), a CUDA ELF's symbol table (defined and undefined
 * functions), a fatbin's PTX entry or else its ELF for this device
 * (compressed entries through libzstd.so.1, loaded on first need). The
 * link fails as nvlink does on a symbol defined twice or referenced and
 * never defined, with nvlink's wording in the error log. The input that
 * defines hbg_dcu_call is hbg's generated dispatch: its PTX is parsed into
 * id -> (phases, rows_of, scratch, symbol). The output is this stand-in's
 * own image (LINKED_MAGIC, then text lines), which cuModuleLoadData turns
 * into a module whose entry points are the HBG_DC_USER build and whose
 * dispatch calls the host builds of the users' functions, found by name
 * in the shared objects HBG_MOCK_USER_LIB lists (colon-separated; the
 * test-only convention that stands for the device code's own bytes). */

#define LINKED_MAGIC "HBGMOCK-LINKED 1\n"
#define ZSTD_MAGIC 0xFD2FB528u

static void *grow(void *v, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return v;
  size_t c = *cap ? *cap * 2 : 16;
  while (c < need)
    c *= 2;
  void *n = realloc(v, c * elem);
  if (n)
    *cap = c;
  return n;
}

#ifndef HBGMOCK_OMIT_LINK
typedef struct msym {
  char *name;
  int entry; /* a kernel (.entry / STO_CUDA_ENTRY) */
} msym;

typedef struct minput {
  char *name;
  msym *defs;
  size_t n_defs, cap_defs;
  char **refs;
  size_t n_refs, cap_refs;
  char *dispatch; /* the PTX text of hbg's dispatch, when this input is it */
} minput;

struct CUlinkState_st {
  char *elog, *ilog;
  size_t elog_cap, ilog_cap;
  void **elog_n, **ilog_n, **wall; /* the caller's option slots */
  uint64_t t0;
  minput *in;
  size_t n_in, cap_in;
  char *out;
  size_t out_n;
  struct CUlinkState_st *next;
};

static struct CUlinkState_st *links;


/* Append to a log the caller gave (and say how many bytes it holds). */
static void lg(char *buf, size_t cap, void **n_slot, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void lg(char *buf, size_t cap, void **n_slot, const char *fmt, ...) {
  if (!buf || cap == 0)
    return;
  size_t n = strnlen(buf, cap - 1);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, cap - n, fmt, ap);
  va_end(ap);
  if (n_slot)
    *n_slot = (void *)(uintptr_t)strnlen(buf, cap - 1);
}
#define ELOG(st, ...) lg((st)->elog, (st)->elog_cap, (st)->elog_n, __VA_ARGS__)
#define ILOG(st, ...) lg((st)->ilog, (st)->ilog_cap, (st)->ilog_n, __VA_ARGS__)

static int add_def(minput *in, const char *s, size_t n, int entry) {
  for (size_t i = 0; i < in->n_defs; i++)
    if (strlen(in->defs[i].name) == n && !memcmp(in->defs[i].name, s, n))
      return 0; /* the same input listing it twice (PTX and ELF entries) */
  msym *v = grow(in->defs, &in->cap_defs, in->n_defs + 1, sizeof *v);
  char *name = strndup(s, n);
  if (!v || !name) {
    free(name);
    in->defs = v ? v : in->defs;
    return -1;
  }
  in->defs = v;
  in->defs[in->n_defs++] = (msym){name, entry};
  return 0;
}

static int add_ref(minput *in, const char *s, size_t n) {
  for (size_t i = 0; i < in->n_refs; i++)
    if (strlen(in->refs[i]) == n && !memcmp(in->refs[i], s, n))
      return 0;
  char **v = grow(in->refs, &in->cap_refs, in->n_refs + 1, sizeof *v);
  char *name = strndup(s, n);
  if (!v || !name) {
    free(name);
    in->refs = v ? v : in->refs;
    return -1;
  }
  in->refs = v;
  in->refs[in->n_refs++] = name;
  return 0;
}

static void input_free(minput *in) {
  for (size_t i = 0; i < in->n_defs; i++)
    free(in->defs[i].name);
  for (size_t i = 0; i < in->n_refs; i++)
    free(in->refs[i]);
  free(in->defs);
  free(in->refs);
  free(in->dispatch);
  free(in->name);
}

/* PTX tokens: words (letters, digits, _ $ % .), string literals, single
 * punctuation; comments skipped. */
typedef struct ptok {
  const char *p, *end;
} ptok;

static int pword(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%' ||
         c == '.';
}

static int ptok_next(ptok *x, const char **s, size_t *n) {
  for (;;) {
    while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' ||
                             *x->p == '\r'))
      x->p++;
    if (x->end - x->p >= 2 && x->p[0] == '/' && x->p[1] == '/') {
      while (x->p < x->end && *x->p != '\n')
        x->p++;
    } else if (x->end - x->p >= 2 && x->p[0] == '/' && x->p[1] == '*') {
      const char *e = x->p + 2;
      while (x->end - e >= 2 && !(e[0] == '*' && e[1] == '/'))
        e++;
      x->p = x->end - e >= 2 ? e + 2 : x->end;
    } else {
      break;
    }
  }
  if (x->p >= x->end)
    return 0;
  *s = x->p;
  if (*x->p == '"') {
    for (x->p++; x->p < x->end && *x->p != '"'; x->p++) {
    }
    x->p += x->p < x->end;
  } else if (pword(*x->p)) {
    while (x->p < x->end && pword(*x->p))
      x->p++;
  } else {
    x->p++;
  }
  *n = (size_t)(x->p - *s);
  return 1;
}

static int is_tok(const char *s, size_t n, const char *w) {
  return n == strlen(w) && memcmp(s, w, n) == 0;
}

/* PTX well enough formed for this stand-in: .version first, a .target
 * this device can run (sm_N with N <= its compute capability). @return 0,
 * or -1 with the reason logged the way ptxas words it. */
static int ptx_check(struct CUlinkState_st *st, const char *name,
                     const char *p, size_t n) {
  ptok x = {p, p + n};
  const char *s;
  size_t len;
  if (!ptok_next(&x, &s, &len) || !is_tok(s, len, ".version")) {
    ELOG(st, "ptxas application ptx input, line 1; fatal   : Parsing error "
             "near '%.*s': syntax error (%s)\n",
         (int)(len < 32 ? len : 32), s, name);
    return -1;
  }
  while (ptok_next(&x, &s, &len))
    if (is_tok(s, len, ".target")) {
      if (!ptok_next(&x, &s, &len) || len < 4 || memcmp(s, "sm_", 3) != 0)
        break;
      if (atoi(s + 3) > cc()) {
        ELOG(st, "ptxas fatal   : SM version specified by .target (%.*s) "
                 "is higher than this device's (sm_%d) (%s)\n",
             (int)len, s, cc(), name);
        return -1;
      }
      return 0;
    }
  ELOG(st, "ptxas application ptx input; fatal   : no .target directive "
           "(%s)\n",
       name);
  return -1;
}

/* Definitions and references of PTX text. @return 0 or -1 (memory). */
static int ptx_symbols(minput *in, const char *p, size_t n) {
  ptok x = {p, p + n};
  const char *s, *prev = "";
  size_t len, prev_n = 0;
  while (ptok_next(&x, &s, &len)) {
    int func = is_tok(s, len, ".func"), entry = is_tok(s, len, ".entry");
    int def = is_tok(prev, prev_n, ".visible") || is_tok(prev, prev_n, ".weak");
    int ext = is_tok(prev, prev_n, ".extern");
    prev = s;
    prev_n = len;
    if (!(func || entry) || !(def || ext))
      continue;
    if (!ptok_next(&x, &s, &len))
      break;
    if (func && is_tok(s, len, "(")) {
      while (ptok_next(&x, &s, &len) && !is_tok(s, len, ")")) {
      }
      if (!ptok_next(&x, &s, &len))
        break;
    }
    if ((def ? add_def(in, s, len, entry) : add_ref(in, s, len)) < 0)
      return -1;
    prev = s;
    prev_n = len;
  }
  return 0;
}

static uint64_t rdn(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n; i-- > 0;)
    v = v << 8 | p[i];
  return v;
}

/* A CUDA ELF's functions: defined ones, and undefined ones referenced.
 * @return 0, -1 (memory) or -2 (not a well-formed CUDA ELF). */
static int elf_symbols(minput *in, const uint8_t *p, size_t n) {
  if (n < 64 || memcmp(p, "\x7f" "ELF", 4) || p[4] != 2 ||
      rdn(p + 18, 2) != 190)
    return -2;
  uint64_t shoff = rdn(p + 0x28, 8), shent = rdn(p + 0x3a, 2),
           shnum = rdn(p + 0x3c, 2);
  if (shent < 64 || shoff > n || shnum > (n - shoff) / shent)
    return -2;
  for (uint64_t i = 0; i < shnum; i++) {
    const uint8_t *sh = p + shoff + i * shent;
    if (rdn(sh + 4, 4) != 2) /* SHT_SYMTAB */
      continue;
    uint64_t off = rdn(sh + 0x18, 8), size = rdn(sh + 0x20, 8),
             link = rdn(sh + 0x28, 4), ent = rdn(sh + 0x38, 8);
    if (ent < 24 || off > n || size > n - off || link >= shnum)
      return -2;
    const uint8_t *str = p + shoff + link * shent;
    uint64_t soff = rdn(str + 0x18, 8), ssize = rdn(str + 0x20, 8);
    if (soff > n || ssize > n - soff)
      return -2;
    for (uint64_t k = 0; k < size / ent; k++) {
      const uint8_t *y = p + off + k * ent;
      uint64_t name = rdn(y, 4), shndx = rdn(y + 6, 2);
      if ((y[4] & 0xf) != 2 || (y[4] >> 4) == 0 || name >= ssize)
        continue; /* functions with global or weak binding only */
      const char *nm = (const char *)p + soff + name;
      size_t len = strnlen(nm, ssize - name);
      if (len == ssize - name)
        return -2;
      int rc = shndx ? add_def(in, nm, len, (y[5] & 0x10) != 0)
                     : add_ref(in, nm, len);
      if (rc < 0)
        return -1;
    }
  }
  return 0;
}

/* libzstd, for compressed fatbin entries. */
static struct {
  pthread_once_t once;
  size_t (*dec)(void *, size_t, const void *, size_t);
  unsigned (*is_err)(size_t);
  unsigned long long (*content)(const void *, size_t);
  size_t (*csize)(const void *, size_t);
} zs = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL};

static void zs_load(void) {
  void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  void *d = dlsym(h, "ZSTD_decompress"), *e = dlsym(h, "ZSTD_isError"),
       *c = dlsym(h, "ZSTD_getFrameContentSize"),
       *f = dlsym(h, "ZSTD_findFrameCompressedSize");
  if (!d || !e || !c || !f)
    return;
  memcpy(&zs.dec, &d, sizeof d);
  memcpy(&zs.is_err, &e, sizeof e);
  memcpy(&zs.content, &c, sizeof c);
  memcpy(&zs.csize, &f, sizeof f);
}

/* An entry's payload, decompressed when it is a zstd frame. *own says
 * whether the result was allocated. NULL: not readable here. */
static const uint8_t *entry_payload(const uint8_t *p, uint64_t n, size_t *out,
                                    int *own) {
  *own = 0;
  if (n < 4 || rdn(p, 4) != ZSTD_MAGIC) {
    *out = (size_t)n;
    return p;
  }
  pthread_once(&zs.once, zs_load);
  if (!zs.dec)
    return NULL;
  size_t cs = zs.csize(p, (size_t)n);
  unsigned long long full = zs.content(p, (size_t)n);
  if (zs.is_err(cs) || full == 0 || full > (1ull << 30))
    return NULL;
  uint8_t *d = malloc((size_t)full + 1);
  if (!d)
    return NULL;
  size_t got = zs.dec(d, (size_t)full, p, cs);
  if (zs.is_err(got)) {
    free(d);
    return NULL;
  }
  d[got] = '\0';
  *out = got;
  *own = 1;
  return d;
}

/* A fatbin's symbols, from its PTX entry for this device (or, without
 * one, its ELF). @return 0, -1 (memory), -2 (nothing readable). */
static int fatbin_symbols(minput *in, const uint8_t *b) {
  uint64_t hs = (uint16_t)(b[6] | b[7] << 8), body = rd64(b + 8);
  const uint8_t *ptx = NULL, *elf = NULL;
  uint64_t ptx_n = 0, elf_n = 0;
  for (uint64_t off = hs; off < hs + body;) {
    const uint8_t *e = b + off;
    uint32_t kind = (uint32_t)(e[0] | e[1] << 8), ehs = rd32(e + 4);
    uint64_t size = rd64(e + 8);
    uint32_t arch = rd32(e + 28);
    if (kind == 1 && (int)arch <= cc() && !ptx) {
      ptx = e + ehs;
      ptx_n = size;
    } else if (kind == 2 && (int)arch == cc() && !elf) {
      elf = e + ehs;
      elf_n = size;
    }
    off += ehs + size;
  }
  size_t n = 0;
  int own = 0, rc = -2;
  const uint8_t *p = ptx ? entry_payload(ptx, ptx_n, &n, &own) : NULL;
  if (p) {
    rc = ptx_symbols(in, (const char *)p, strnlen((const char *)p, n));
  } else if (elf && (p = entry_payload(elf, elf_n, &n, &own)) != NULL) {
    rc = elf_symbols(in, p, n);
  }
  if (own)
    free((void *)(uintptr_t)p);
  return rc;
}

MOCK_EXPORT CUresult cuLinkCreate_v2(unsigned int n, CUjit_option *opt,
                                     void **val, CUlinkState *out) {
  ENTER_CTX("cuLinkCreate_v2");
  UNSAFE();
  if (!out || (n && (!opt || !val)))
    return CUDA_ERROR_INVALID_VALUE;
  struct CUlinkState_st *st = calloc(1, sizeof *st);
  if (!st)
    return CUDA_ERROR_OUT_OF_MEMORY;
  for (unsigned i = 0; i < n; i++) {
    switch (opt[i]) {
    case CU_JIT_ERROR_LOG_BUFFER:
      st->elog = val[i];
      break;
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
      st->elog_cap = (size_t)(uintptr_t)val[i];
      st->elog_n = &val[i];
      break;
    case CU_JIT_INFO_LOG_BUFFER:
      st->ilog = val[i];
      break;
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
      st->ilog_cap = (size_t)(uintptr_t)val[i];
      st->ilog_n = &val[i];
      break;
    case CU_JIT_WALL_TIME:
      st->wall = &val[i];
      break;
    case CU_JIT_LOG_VERBOSE:
    case CU_JIT_OPTIMIZATION_LEVEL:
    case CU_JIT_TARGET_FROM_CUCONTEXT:
      break;
    default:
      free(st);
      return CUDA_ERROR_INVALID_VALUE; /* one this stand-in does not know */
    }
  }
  if ((st->elog && !st->elog_cap) || (st->ilog && !st->ilog_cap)) {
    free(st);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (st->elog)
    st->elog[0] = '\0';
  if (st->ilog)
    st->ilog[0] = '\0';
  st->t0 = now_ns();
  pthread_mutex_lock(&mu);
  n_links++;
  st->next = links;
  links = st;
  pthread_mutex_unlock(&mu);
  *out = st;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuLinkAddData_v2(CUlinkState st, CUjitInputType type,
                                      void *data, size_t size,
                                      const char *name, unsigned int nopt,
                                      CUjit_option *opt, void **val) {
  ENTER_CTX("cuLinkAddData_v2");
  UNSAFE();
  (void)opt;
  (void)val;
  if (!st)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!data || !size || nopt)
    return CUDA_ERROR_INVALID_VALUE;
  char shown[80];
  snprintf(shown, sizeof shown, "%s", name ? name : "(unnamed)");
  minput in;
  memset(&in, 0, sizeof in);
  const uint8_t *p = data;
  CUresult r = CUDA_SUCCESS;
  int rc = 0;
  switch (type) {
  case CU_JIT_INPUT_PTX:
    if (p[size - 1] != '\0') /* the driver wants it NUL-terminated */
      return CUDA_ERROR_INVALID_VALUE;
    if (ptx_check(st, shown, data, size - 1) < 0)
      return CUDA_ERROR_INVALID_PTX;
    rc = ptx_symbols(&in, data, size - 1);
    break;
  case CU_JIT_INPUT_CUBIN:
    rc = elf_symbols(&in, p, size);
    if (rc == -2 || rdn(p + 16, 2) != 1) {
      ELOG(st, "nvlink error   : '%s' is not a relocatable CUDA ELF\n",
           shown);
      r = CUDA_ERROR_INVALID_IMAGE;
    }
    break;
  case CU_JIT_INPUT_FATBINARY:
    r = fatbin_check(p);
    if (r == CUDA_SUCCESS) {
      rc = fatbin_symbols(&in, p);
      if (rc == -2) {
        ELOG(st, "stand-in: no readable PTX or ELF entry in fatbin '%s' "
                 "(a compressed one needs libzstd.so.1)\n",
             shown);
        r = CUDA_ERROR_NOT_SUPPORTED;
      }
    } else {
      ELOG(st, "nvlink error   : fatbin '%s' holds no code for sm_%d\n",
           shown, cc());
    }
    break;
  default:
    ELOG(st, "stand-in: input type %d of '%s' not supported\n", (int)type,
         shown);
    r = CUDA_ERROR_NOT_SUPPORTED;
  }
  if (rc == -1)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    in.name = strdup(shown);
    for (size_t i = 0; i < in.n_defs && in.name; i++)
      if (strcmp(in.defs[i].name, "hbg_dcu_call") == 0 &&
          type == CU_JIT_INPUT_PTX && !(in.dispatch = strdup(data)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    minput *v = grow(st->in, &st->cap_in, st->n_in + 1, sizeof *v);
    if (!in.name || !v)
      r = CUDA_ERROR_OUT_OF_MEMORY;
    if (v)
      st->in = v;
  }
  if (r != CUDA_SUCCESS) {
    input_free(&in);
    return r;
  }
  st->in[st->n_in++] = in;
  return CUDA_SUCCESS;
}

/* The dispatch's PTX as kernels: hbg_dcu_info's compare chain and label
 * blocks (phases, rows_of, scratch floats, in that order) and
 * hbg_dcu_call's (the function each label calls). @return the count, or
 * -1 with the reason logged. */
typedef struct dlabel {
  char fn; /* 'i' hbg_dcu_info, 'c' hbg_dcu_call */
  char label[48];
  uint32_t kernel;
  uint64_t vals[4];
  int n_vals;
  char sym[256];
} dlabel;

static int tok_u64(const char *s, size_t n, uint64_t *v) {
  if (n == 0 || n > 20)
    return -1;
  char b[24];
  memcpy(b, s, n);
  b[n] = '\0';
  char *end;
  *v = strtoull(b, &end, 10);
  return *end ? -1 : 0;
}

static dlabel *dl_find(dlabel *v, size_t n, char fn, const char *s,
                       size_t len) {
  for (size_t i = 0; i < n; i++)
    if (v[i].fn == fn && strlen(v[i].label) == len &&
        !memcmp(v[i].label, s, len))
      return &v[i];
  return NULL;
}

static long dispatch_parse(struct CUlinkState_st *st, const char *ptx,
                           mock_uk **out, char ***syms) {
  dlabel *v = NULL;
  size_t n = 0, cap = 0;
  ptok x = {ptx, ptx + strlen(ptx)};
  const char *s, *t[12];
  size_t len, tl[12];
  char fn = 0;
  dlabel *cur = NULL;
  long rc = -1;
  while (ptok_next(&x, &s, &len)) {
    if (is_tok(s, len, "hbg_dcu_info") || is_tok(s, len, "hbg_dcu_call")) {
      fn = s[8] == 'i' ? 'i' : 'c';
      cur = NULL;
    } else if (is_tok(s, len, "setp.eq.u32")) {
      /* setp.eq.u32 %p1, %r1, ID; @%p1 bra LABEL; */
      int k = 0;
      while (k < 11 && ptok_next(&x, &t[k], &tl[k]))
        k++;
      uint64_t id;
      if (k < 11 || !is_tok(t[5], tl[5], ";") || !is_tok(t[6], tl[6], "@") ||
          !is_tok(t[8], tl[8], "bra") || tl[9] >= 48 ||
          tok_u64(t[4], tl[4], &id) < 0 || id > UINT32_MAX || !fn)
        goto bad;
      dlabel *d = grow(v, &cap, n + 1, sizeof *v);
      if (!d)
        goto bad;
      v = d;
      memset(&v[n], 0, sizeof v[n]);
      v[n].fn = fn;
      memcpy(v[n].label, t[9], tl[9]);
      v[n++].kernel = (uint32_t)id;
    } else if (len > 0 && s[0] == '$' && fn) {
      const char *c;
      size_t cl;
      const char *save = x.p;
      if (ptok_next(&x, &c, &cl) && is_tok(c, cl, ":"))
        cur = dl_find(v, n, fn, s, len);
      else
        x.p = save;
    } else if (cur && (is_tok(s, len, "mov.u32") || is_tok(s, len, "mov.u64"))) {
      int k = 0;
      while (k < 4 && ptok_next(&x, &t[k], &tl[k]))
        k++;
      uint64_t val;
      if (k == 4 && tok_u64(t[2], tl[2], &val) == 0 && cur->n_vals < 4)
        cur->vals[cur->n_vals++] = val;
    } else if (cur && is_tok(s, len, "call.uni")) {
      /* call.uni (ret), SYMBOL, (args); */
      int k = 0;
      while (k < 5 && ptok_next(&x, &t[k], &tl[k]))
        k++;
      if (k < 5 || !is_tok(t[3], tl[3], ",") || tl[4] >= sizeof cur->sym)
        goto bad;
      memcpy(cur->sym, t[4], tl[4]);
    }
  }
  size_t nk = 0;
  for (size_t i = 0; i < n; i++)
    nk += v[i].fn == 'c';
  mock_uk *uk = calloc(nk ? nk : 1, sizeof *uk);
  char **sy = calloc(nk ? nk : 1, sizeof *sy);
  if (!uk || !sy) {
    free(uk);
    free(sy);
    goto bad;
  }
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i].fn != 'c')
      continue;
    const dlabel *in = NULL;
    for (size_t k = 0; k < n && !in; k++)
      if (v[k].fn == 'i' && v[k].kernel == v[i].kernel)
        in = &v[k];
    if (!in || in->n_vals < 3 || !v[i].sym[0] ||
        (j && uk[j - 1].kernel >= v[i].kernel)) {
      ELOG(st, "stand-in: the dispatch's kernel %u has no info block, no "
               "call or is out of order\n",
           v[i].kernel);
      for (size_t k = 0; k < j; k++)
        free(sy[k]);
      free(uk);
      free(sy);
      free(v);
      return -1;
    }
    uk[j] = (mock_uk){.kernel = v[i].kernel,
                      .phases = (uint32_t)in->vals[0],
                      .rows_of = (uint32_t)in->vals[1],
                      .scratch_floats = in->vals[2]};
    sy[j++] = strdup(v[i].sym);
  }
  *out = uk;
  *syms = sy;
  free(v);
  return (long)j;
bad:
  ELOG(st, "stand-in: cannot read hbg's dispatch PTX\n");
  free(v);
  return rc;
}

/* Host library paths (HBG_MOCK_USER_LIB, ':'-separated) as a list. */
static size_t user_libs(char ***out) {
  const char *env = getenv("HBG_MOCK_USER_LIB");
  *out = NULL;
  if (!env || !*env)
    return 0;
  size_t n = 0, cap = 0;
  char **v = NULL;
  for (const char *p = env; *p;) {
    const char *e = strchr(p, ':');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len) {
      char **g = grow(v, &cap, n + 1, sizeof *v);
      if (!g)
        break;
      v = g;
      if (!(v[n] = strndup(p, len)))
        break;
      n++;
    }
    p += len + (e != NULL);
  }
  *out = v;
  return n;
}

MOCK_EXPORT CUresult cuLinkComplete(CUlinkState st, void **cubin,
                                    size_t *size) {
  ENTER_CTX("cuLinkComplete");
  UNSAFE();
  if (!st)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!cubin)
    return CUDA_ERROR_INVALID_VALUE;
  int bad = 0;
  /* nvlink: each symbol defined once, each reference defined somewhere */
  for (size_t i = 0; i < st->n_in; i++)
    for (size_t d = 0; d < st->in[i].n_defs; d++)
      for (size_t j = 0; j < i; j++)
        for (size_t e = 0; e < st->in[j].n_defs; e++)
          if (!strcmp(st->in[i].defs[d].name, st->in[j].defs[e].name)) {
            ELOG(st, "nvlink error   : Multiple definition of '%s' in '%s', "
                     "first defined in '%s'\n",
                 st->in[i].defs[d].name, st->in[i].name, st->in[j].name);
            bad = 1;
          }
  for (size_t i = 0; i < st->n_in; i++)
    for (size_t r = 0; r < st->in[i].n_refs; r++) {
      int found = 0;
      for (size_t j = 0; j < st->n_in && !found; j++)
        for (size_t e = 0; e < st->in[j].n_defs && !found; e++)
          found = !strcmp(st->in[i].refs[r], st->in[j].defs[e].name);
      if (!found) {
        ELOG(st, "nvlink error   : Undefined reference to '%s' in '%s'\n",
             st->in[i].refs[r], st->in[i].name);
        bad = 1;
      }
    }
  if (bad)
    return CUDA_ERROR_INVALID_IMAGE;
  /* The image: hbg's entries the link defines, the host libraries, the
   * dispatch; each user function must have a host build. */
  char *text = NULL;
  size_t tn = 0;
  FILE *f = open_memstream(&text, &tn);
  if (!f)
    return CUDA_ERROR_OUT_OF_MEMORY;
  fputs(LINKED_MAGIC, f);
  for (size_t i = 0; i < st->n_in; i++)
    for (size_t d = 0; d < st->in[i].n_defs; d++)
      for (size_t k = 0; k < MOCK_N_ENTRIES; k++)
        if (st->in[i].defs[d].entry &&
            !strcmp(st->in[i].defs[d].name, ufuncs[k].name))
          fprintf(f, "entry %s\n", ufuncs[k].name);
  char **libs = NULL;
  size_t n_libs = user_libs(&libs);
  void **h = calloc(n_libs ? n_libs : 1, sizeof *h);
  for (size_t i = 0; i < n_libs && h; i++) {
    h[i] = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!h[i]) {
      const char *why = dlerror();
      ELOG(st, "stand-in: HBG_MOCK_USER_LIB: %s\n", why ? why : libs[i]);
      bad = 1;
    }
    fprintf(f, "lib %s\n", libs[i]);
  }
  for (size_t i = 0; i < st->n_in && !bad; i++) {
    if (!st->in[i].dispatch)
      continue;
    mock_uk *uk = NULL;
    char **sy = NULL;
    long nk = dispatch_parse(st, st->in[i].dispatch, &uk, &sy);
    if (nk < 0) {
      bad = 1;
      break;
    }
    for (long k = 0; k < nk; k++) {
      void *fnp = NULL;
      for (size_t l = 0; l < n_libs && h && !fnp; l++)
        fnp = h[l] ? dlsym(h[l], sy[k]) : NULL;
      if (!fnp) {
        ELOG(st, "stand-in: no host build of '%s' in HBG_MOCK_USER_LIB "
                 "(the test-only stand-in for its device code)\n",
             sy[k]);
        bad = 1;
      }
      fprintf(f, "k %u %u %u %llu %s\n", uk[k].kernel, uk[k].phases,
              uk[k].rows_of, (unsigned long long)uk[k].scratch_floats, sy[k]);
      free(sy[k]);
    }
    free(uk);
    free(sy);
  }
  for (size_t i = 0; i < n_libs; i++) {
    if (h && h[i])
      dlclose(h[i]);
    free(libs[i]);
  }
  free(h);
  free(libs);
  int ferr = fclose(f) != 0;
  if (bad || ferr) {
    free(text);
    return ferr ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_IMAGE;
  }
  free(st->out);
  st->out = text;
  st->out_n = tn + 1; /* with its NUL */
  ILOG(st, "stand-in: linked %zu input(s) into %zu bytes\n", st->n_in,
       st->out_n);
  if (st->wall) {
    float ms = (float)(now_ns() - st->t0) / 1e6f;
    memcpy(st->wall, &ms, sizeof ms);
  }
  *cubin = st->out;
  if (size)
    *size = st->out_n;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuLinkDestroy(CUlinkState st) {
  ENTER("cuLinkDestroy");
  UNSAFE();
  if (!st)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  int found = 0;
  for (struct CUlinkState_st **pp = &links; *pp; pp = &(*pp)->next)
    if (*pp == st) {
      *pp = st->next;
      found = 1;
      n_links--;
      break;
    }
  pthread_mutex_unlock(&mu);
  if (!found)
    return CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; i < st->n_in; i++)
    input_free(&st->in[i]);
  free(st->in);
  free(st->out);
  free(st);
  return CUDA_SUCCESS;
}
#endif

/* Make m the module of a linked image (LINKED_MAGIC text). */
static CUresult linked_load(struct CUmod_st *m, const char *img) {
  const char *p = img + strlen(LINKED_MAGIC);
  size_t cap_uk = 0, cap_libs = 0;
  char line[512];
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len >= sizeof line)
      return CUDA_ERROR_INVALID_IMAGE;
    memcpy(line, p, len);
    line[len] = '\0';
    p += len + (e != NULL);
    char name[256];
    unsigned kernel, phases, rows;
    unsigned long long scr;
    if (sscanf(line, "entry %255s", name) == 1) {
      for (size_t k = 0; k < MOCK_N_ENTRIES; k++)
        if (!strcmp(name, ufuncs[k].name) && m->n_ufn < MOCK_N_ENTRIES) {
          m->ufn[m->n_ufn] = ufuncs[k];
          m->ufn[m->n_ufn++].mod = m;
        }
    } else if (!strncmp(line, "lib ", 4)) {
      void **v = grow(m->libs, &cap_libs, m->n_libs + 1, sizeof *v);
      if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
      m->libs = v;
      if (!(m->libs[m->n_libs] = dlopen(line + 4, RTLD_NOW | RTLD_LOCAL)))
        return CUDA_ERROR_INVALID_IMAGE;
      m->n_libs++;
    } else if (sscanf(line, "k %u %u %u %llu %255s", &kernel, &phases, &rows,
                      &scr, name) == 5) {
      mock_uk *v = grow(m->uk, &cap_uk, m->n_uk + 1, sizeof *v);
      if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
      m->uk = v;
      void *fnp = NULL;
      for (size_t l = 0; l < m->n_libs && !fnp; l++)
        fnp = dlsym(m->libs[l], name);
      if (!fnp)
        return CUDA_ERROR_INVALID_IMAGE;
      mock_uk u = {kernel, phases, rows, scr, NULL};
      memcpy(&u.fn, &fnp, sizeof fnp);
      m->uk[m->n_uk++] = u;
    } else if (line[0]) {
      return CUDA_ERROR_INVALID_IMAGE;
    }
  }
  m->linked = 1;
  return CUDA_SUCCESS;
}

static void mod_free(struct CUmod_st *m) {
  for (size_t i = 0; i < m->n_libs; i++)
    dlclose(m->libs[i]);
  free(m->libs);
  free(m->uk);
  free(m);
}

MOCK_EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  ENTER_CTX("cuModuleLoadData");
  UNSAFE();
  if (!m || !image)
    return CUDA_ERROR_INVALID_VALUE;
  struct CUmod_st *mod = calloc(1, sizeof *mod);
  if (!mod)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = strncmp(image, LINKED_MAGIC, strlen(LINKED_MAGIC)) == 0
                   ? linked_load(mod, image)
                   : fatbin_check(image);
  if (r != CUDA_SUCCESS) {
    mod_free(mod);
    return r;
  }
  mod->loaded = 1;
  pthread_mutex_lock(&mu);
  n_modules++;
  mod->next = modules;
  modules = mod;
  pthread_mutex_unlock(&mu);
  *m = mod;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuModuleUnload(CUmodule m) {
  ENTER_CTX("cuModuleUnload");
  UNSAFE();
  if (!m || !m->loaded)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  n_modules--;
  HBG__SLIST_UNLINK(struct CUmod_st, modules, m);
  pthread_mutex_unlock(&mu);
  mod_free(m);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m,
                                         const char *name) {
  ENTER_CTX("cuModuleGetFunction");
  if (!m || !m->loaded)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!f || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (m->linked) {
    for (size_t i = 0; i < m->n_ufn; i++)
      if (strcmp(m->ufn[i].name, name) == 0) {
        *f = &m->ufn[i];
        return CUDA_SUCCESS;
      }
    return CUDA_ERROR_NOT_FOUND;
  }
  for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
    if (strcmp(funcs[i].name, name) == 0) {
      *f = (CUfunction)&funcs[i];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

/* Queue the kernels k[0..n) on s, in order (hbgmock_poke applied). mu
 * held. */
static CUresult queue_kernels(struct CUstream_st *s, const kcall *k, size_t n) {
  for (size_t i = 0; i < n; i++) {
    op *o = calloc(1, sizeof *o);
    if (!o)
      return CUDA_ERROR_OUT_OF_MEMORY;
    o->k = k[i];
    if (gate_pending > 0) {
      o->gated = 1;
      gate_pending--;
    }
    if (poke_nth >= 0 && poke_nth-- == 0 &&
        poke_off + 4 <= o->k.fn->args_size)
      memcpy((uint8_t *)o->k.args + poke_off, &poke_val, 4);
    push(s, o);
  }
  return CUDA_SUCCESS;
}

/* Queue (or capture) a launch of f; coop: cooperative. */
static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                       unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                       CUstream s, void **params, void **extra, int coop) {
  if (!f || !s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!params || extra || !params[0] || shmem)
    return CUDA_ERROR_INVALID_VALUE;
  if (gx < 1 || gx > MOCK_MAX_GRID || bx < 1 || bx > (unsigned)lanes() ||
      gx * bx > MOCK_MAX_THREADS || gy != 1 || gz != 1 || by != 1 || bz != 1)
    return CUDA_ERROR_INVALID_VALUE;
  if (coop && (!coop_ok() || gx > (unsigned)(occupancy(f, (int)bx) * sms())))
    return coop_ok() ? CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
                     : CUDA_ERROR_NOT_SUPPORTED;
  kcall k;
  memset(&k, 0, sizeof k);
  k.fn = f;
  k.gx = gx;
  k.bx = bx;
  k.coop = coop;
  memcpy(k.args, params[0], f->args_size); /* parameters are copied now */
  pthread_mutex_lock(&mu);
  CUresult r;
  if (s->cap) {
    r = cap_check(s);
    if (r == CUDA_SUCCESS) {
      struct CUgraphNode_st *nd = calloc(1, sizeof *nd);
      if (!nd) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
      } else {
        nd->kind = NODE_KERNEL;
        nd->k = k;
        r = cap_add(s, nd);
        free(nd);
      }
    }
  } else {
    r = queue_kernels(s, &k, 1);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

MOCK_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx,
                                    unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by,
                                    unsigned int bz, unsigned int shmem,
                                    CUstream s, void **params, void **extra) {
  ENTER_CTX("cuLaunchKernel");
  return launch(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra, 0);
}

/* Like the driver: every CTA resident at once (the launch waits for room),
 * a grid past what the SMs hold is COOPERATIVE_LAUNCH_TOO_LARGE. */
MOCK_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx,
                                               unsigned int gy,
                                               unsigned int gz,
                                               unsigned int bx,
                                               unsigned int by,
                                               unsigned int bz,
                                               unsigned int shmem, CUstream s,
                                               void **params) {
  ENTER_CTX("cuLaunchCooperativeKernel");
  return launch(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL, 1);
}

MOCK_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int *n, CUfunction f, int bs, size_t smem) {
  ENTER_CTX("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  if (!n || !f)
    return CUDA_ERROR_INVALID_VALUE;
  if (bs < 1 || bs > lanes() || smem)
    return CUDA_ERROR_INVALID_VALUE;
  *n = occupancy(f, bs);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute a,
                                        CUfunction f) {
  ENTER_CTX("cuFuncGetAttribute");
  if (!pi || !f)
    return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
  case CU_FUNC_ATTRIBUTE_NUM_REGS:
    *pi = fn_regs(f);
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
    *pi = fn_local(f);
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    *pi = lanes();
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    *pi = (int)MOCK_SHARED_BYTES;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

MOCK_EXPORT CUresult cuCtxGetLimit(size_t *v, CUlimit l) {
  ENTER_CTX("cuCtxGetLimit");
  if (!v || l != CU_LIMIT_STACK_SIZE)
    return CUDA_ERROR_UNSUPPORTED_LIMIT;
  pthread_mutex_lock(&mu);
  *v = cur_ctx->stack;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuCtxSetLimit(CUlimit l, size_t v) {
  ENTER_CTX("cuCtxSetLimit");
  if (l != CU_LIMIT_STACK_SIZE)
    return CUDA_ERROR_UNSUPPORTED_LIMIT;
  pthread_mutex_lock(&mu);
  cur_ctx->stack = v;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* Tests: the calling thread's context's stack limit (0 without one). */
MOCK_EXPORT size_t hbgmock_stack_limit(void) {
  return cur_ctx ? cur_ctx->stack : 0;
}

/* ---- stream capture, graphs, user objects: the entry points ---- */

MOCK_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s,
                                             CUstreamCaptureMode mode) {
  ENTER_CTX("cuStreamBeginCapture_v2");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
      mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  struct CUgraph_st *g = calloc(1, sizeof *g);
  mcapture *c = calloc(1, sizeof *c);
  if (!g || !c) {
    free(g);
    free(c);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&mu);
  if (s->cap) {
    pthread_mutex_unlock(&mu);
    free(g);
    free(c);
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  c->id = ++capture_ids;
  c->g = g;
  c->mode = mode;
  c->owner = pthread_self();
  c->origin = s;
  c->next = captures;
  captures = c;
  s->cap = c;
  s->last = -1;
  s->work = 0;
  s->joined_at = -1;
  n_graphs++;
  g->next = graphs;
  graphs = g;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* Ends the capture s began: the graph, or NULL with INVALIDATED (an
 * invalidated capture) or UNJOINED (a stream forked into it and not
 * joined back); either way the capture is over. From a thread other than
 * the one that began it (mode not RELAXED): WRONG_THREAD, the capture
 * goes on; on a stream forked into a capture: UNMATCHED. */
MOCK_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *pg) {
  ENTER_CTX("cuStreamEndCapture");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!pg)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  mcapture *c = s->cap;
  CUresult r = CUDA_SUCCESS;
  if (!c)
    r = CUDA_ERROR_ILLEGAL_STATE;
  else if (c->origin != s)
    r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  else if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
           !pthread_equal(c->owner, pthread_self()))
    r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  if (r != CUDA_SUCCESS) {
    pthread_mutex_unlock(&mu);
    return r;
  }
  if (c->invalid)
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  else
    for (struct CUstream_st *o = streams; o; o = o->next)
      if (o != s && o->cap == c && o->joined_at < o->work)
        r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  struct CUgraph_st *g = c->g;
  cap_end(c);
  if (r != CUDA_SUCCESS) {
    graph_free(g);
    g = NULL;
  }
  pthread_mutex_unlock(&mu);
  *pg = g;
  return r;
}

MOCK_EXPORT CUresult cuThreadExchangeStreamCaptureMode(
    CUstreamCaptureMode *mode) {
  ENTER("cuThreadExchangeStreamCaptureMode");
  if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
                *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
    return CUDA_ERROR_INVALID_VALUE;
  mthread *t = mthread_get(1);
  CUstreamCaptureMode old = t->mode;
  t->mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}

/* s's capture status (NULL: the default stream, never capturing here);
 * mu held. */
static CUstreamCaptureStatus cap_status(CUstream s) {
  if (!s || !s->cap)
    return CU_STREAM_CAPTURE_STATUS_NONE;
  return s->cap->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                         : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

MOCK_EXPORT CUresult cuStreamIsCapturing(CUstream s,
                                         CUstreamCaptureStatus *st) {
  ENTER_CTX("cuStreamIsCapturing");
  if (!st)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  *st = cap_status(s);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* cuStreamGetCaptureInfo_v2 / _v3: the status; while capturing (active
 * or invalidated) the capture's id (process-unique, from 1); while active
 * its graph and s's dependencies: its last captured node (or the node its
 * fork came after), none at the start (valid until the next call on s). */
static CUresult capture_info(CUstream s, CUstreamCaptureStatus *st,
                             cuuint64_t *id, CUgraph *graph,
                             const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *n) {
  if (!st)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  *st = cap_status(s);
  if (*st != CU_STREAM_CAPTURE_STATUS_NONE && id)
    *id = s->cap->id;
  if (*st == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    if (graph)
      *graph = s->cap->g;
    size_t k = s->last >= 0 ? 1 : 0;
    if (k)
      s->dep = &s->cap->g->v[s->last];
    if (deps)
      *deps = k ? (const CUgraphNode *)&s->dep : NULL;
    if (edges)
      *edges = NULL;
    if (n)
      *n = k;
  }
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* cuda.h names the _v3 entry point cuStreamGetCaptureInfo; _v2 (no edge
 * data) is exported by its own name with its own prototype. */
CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *st,
                                   cuuint64_t *id, CUgraph *graph,
                                   const CUgraphNode **deps, size_t *n);
MOCK_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream s,
                                               CUstreamCaptureStatus *st,
                                               cuuint64_t *id, CUgraph *graph,
                                               const CUgraphNode **deps,
                                               size_t *n) {
  ENTER_CTX("cuStreamGetCaptureInfo_v2");
  return capture_info(s, st, id, graph, deps, NULL, n);
}

MOCK_EXPORT CUresult cuStreamGetCaptureInfo(CUstream s,
                                            CUstreamCaptureStatus *st,
                                            cuuint64_t *id, CUgraph *graph,
                                            const CUgraphNode **deps,
                                            const CUgraphEdgeData **edges,
                                            size_t *n) {
  ENTER_CTX("cuStreamGetCaptureInfo_v3");
  return capture_info(s, st, id, graph, deps, edges, n);
}

MOCK_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g,
                                                 unsigned long long flags) {
  ENTER_CTX("cuGraphInstantiateWithFlags");
  if (!g)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!pe || flags)
    return CUDA_ERROR_INVALID_VALUE;
  struct CUgraphExec_st *x = calloc(1, sizeof *x);
  struct CUgraphNode_st *v = malloc((g->n ? g->n : 1) * sizeof *v);
  uref *uo = malloc((g->n_uo ? g->n_uo : 1) * sizeof *uo);
  if (!x || !v || !uo) {
    free(x);
    free(v);
    free(uo);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (g->n)
    memcpy(v, g->v, g->n * sizeof *v);
  x->v = v;
  x->n = g->n;
  x->nodes = (uintptr_t)g->v;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < g->n_uo; i++) { /* references of its own */
    uo[i] = g->uo[i];
    uo[i].o->refs += (long)uo[i].count;
  }
  x->uo = uo;
  x->n_uo = g->n_uo;
  n_execs++;
  x->next = execs;
  execs = x;
  pthread_mutex_unlock(&mu);
  *pe = x;
  return CUDA_SUCCESS;
}

/* Device memory behind a replayed node's range: gone is a stand-in
 * abort (on a GPU, a fault). mu held. */
static void *replay_dev(const struct CUgraphNode_st *nd) {
  void *p = dev_ptr((const void *)(uintptr_t)nd->daddr, nd->n);
  if (!p) {
    fprintf(stderr, "cuda stand-in: a graph replay's copy or memset "
                    "names device range 0x%llx+%zu, which is not "
                    "allocated (freed since the capture?)\n",
            (unsigned long long)nd->daddr, nd->n);
    abort();
  }
  return p;
}

/* Queue a replay of x on s: each node an op, in capture order. mu held. */
static CUresult replay(struct CUgraphExec_st *x, struct CUstream_st *s) {
  op *last = NULL;
  for (size_t i = 0; i < x->n; i++) {
    const struct CUgraphNode_st *nd = &x->v[i];
    if (nd->kind == NODE_KERNEL) {
      CUresult r = queue_kernels(s, &nd->k, 1);
      if (r != CUDA_SUCCESS)
        return r;
      last = s->tail;
      continue;
    }
    if (nd->pinned && !host_find(nd->host, nd->n)) {
      fprintf(stderr, "cuda stand-in: a graph replay copies %zu bytes at "
                      "%p, pinned host memory when the copy was captured "
                      "and no longer pinned (freed or unregistered)\n",
              nd->n, nd->host);
      abort();
    }
    op *o = calloc(1, sizeof *o);
    if (!o)
      return CUDA_ERROR_OUT_OF_MEMORY;
    switch (nd->kind) {
    case NODE_H2D:
      o->dst = replay_dev(nd);
      o->src = nd->host;
      o->n = nd->n;
      o->check_host = nd->pinned ? nd->host : NULL;
      break;
    case NODE_D2H:
      o->src = replay_dev(nd);
      o->dst = nd->host;
      o->n = nd->n;
      o->check_host = nd->pinned ? nd->host : NULL;
      break;
    case NODE_MEMSET:
      o->dst = replay_dev(nd);
      o->n = nd->n;
      o->fill = 1;
      o->fill_elem = nd->elem;
      o->fill_val = nd->val;
      break;
    case NODE_EVREC:
      o->ev = nd->ev;
      o->gen = ++nd->ev->rec;
      nd->ev->cap_id = 0;
      break;
    case NODE_EVWAIT:
      o->wait = nd->ev;
      o->wait_gen = nd->ev->rec;
      nd->ev->waits++;
      break;
    }
    push(s, o);
    last = o;
  }
  if (!last) { /* an empty graph: a replay still completes */
    last = calloc(1, sizeof *last);
    if (!last)
      return CUDA_ERROR_OUT_OF_MEMORY;
    push(s, last);
  }
  last->xdone = x;
  x->inflight++;
  return CUDA_SUCCESS;
}

/* A replay of every node, in capture order (a valid order of the
 * graph). Into a capturing stream: 900, the capture invalidated. */
MOCK_EXPORT CUresult cuGraphLaunch(CUgraphExec x, CUstream s) {
  ENTER_CTX("cuGraphLaunch");
  if (!x || !s)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  CUresult r = cap_check(s);
  if (r == CUDA_SUCCESS && s->cap) {
    cap_invalidate(s->cap);
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (r == CUDA_SUCCESS)
    r = replay(x, s);
  pthread_mutex_unlock(&mu);
  return r;
}

/* Its replays queued still run; its user-object references go when the
 * last has completed. */
MOCK_EXPORT CUresult cuGraphExecDestroy(CUgraphExec x) {
  ENTER_CTX("cuGraphExecDestroy");
  if (!x)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  n_execs--;
  HBG__SLIST_UNLINK(struct CUgraphExec_st, execs, x);
  x->dead = 1;
  if (!x->inflight)
    exec_free(x);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGraphDestroy(CUgraph g) {
  ENTER_CTX("cuGraphDestroy");
  if (!g)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  for (mcapture *c = captures; c; c = c->next)
    if (c->g == g) { /* still being captured */
      pthread_mutex_unlock(&mu);
      return CUDA_ERROR_ILLEGAL_STATE;
    }
  graph_free(g);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* flags must be CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, as the driver has it;
 * destroy(ptr) runs on a stand-in thread once the count reaches 0. */
MOCK_EXPORT CUresult cuUserObjectCreate(CUuserObject *out, void *ptr,
                                        CUhostFn destroy,
                                        unsigned int initial,
                                        unsigned int flags) {
  ENTER_CTX("cuUserObjectCreate");
  if (!out || !destroy || !initial ||
      flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
    return CUDA_ERROR_INVALID_VALUE;
  struct CUuserObject_st *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  o->ptr = ptr;
  o->destroy = destroy;
  o->refs = initial;
  pthread_mutex_lock(&mu);
  n_uobjs++;
  pthread_mutex_unlock(&mu);
  *out = o;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuUserObjectRetain(CUuserObject o, unsigned int count) {
  ENTER("cuUserObjectRetain");
  if (!o)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  o->refs += count;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuUserObjectRelease(CUuserObject o, unsigned int count) {
  ENTER("cuUserObjectRelease");
  if (!o)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  if (o->refs < (long)count)
    r = CUDA_ERROR_INVALID_VALUE;
  else
    uo_release(o, count);
  pthread_mutex_unlock(&mu);
  return r;
}

/* The graph takes count references (CU_GRAPH_USER_OBJECT_MOVE: the
 * caller's own, moved); an executable graph instantiated from it takes
 * references of its own. */
MOCK_EXPORT CUresult cuGraphRetainUserObject(CUgraph g, CUuserObject o,
                                             unsigned int count,
                                             unsigned int flags) {
  ENTER("cuGraphRetainUserObject");
  if (!g || !o)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!count || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  if ((flags & CU_GRAPH_USER_OBJECT_MOVE) && o->refs < (long)count) {
    pthread_mutex_unlock(&mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t i = 0;
  while (i < g->n_uo && g->uo[i].o != o)
    i++;
  if (i == g->n_uo) {
    uref *v = realloc(g->uo, (g->n_uo + 1) * sizeof *v);
    if (!v) {
      pthread_mutex_unlock(&mu);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->uo = v;
    g->uo[g->n_uo++] = (uref){o, 0};
  }
  g->uo[i].count += count;
  if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
    o->refs += count;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGraphReleaseUserObject(CUgraph g, CUuserObject o,
                                              unsigned int count) {
  ENTER("cuGraphReleaseUserObject");
  if (!g || !o)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  size_t i = 0;
  while (i < g->n_uo && g->uo[i].o != o)
    i++;
  if (i == g->n_uo || g->uo[i].count < count) {
    pthread_mutex_unlock(&mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  g->uo[i].count -= count;
  if (!g->uo[i].count)
    g->uo[i] = g->uo[--g->n_uo];
  uo_release(o, count);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

#ifndef HBGMOCK_OMIT_GRAPH_UPDATE
MOCK_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes,
                                     size_t *num) {
  ENTER("cuGraphGetNodes");
  if (!g)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!num)
    return CUDA_ERROR_INVALID_VALUE;
  if (!nodes) {
    *num = g->n;
    return CUDA_SUCCESS;
  }
  size_t i;
  for (i = 0; i < *num; i++)
    nodes[i] = i < g->n ? &g->v[i] : NULL;
  if (*num > g->n)
    *num = g->n;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode n,
                                                   CUDA_KERNEL_NODE_PARAMS *p) {
  ENTER("cuGraphKernelNodeGetParams_v2");
  if (!n || !p || n->kind != NODE_KERNEL)
    return CUDA_ERROR_INVALID_VALUE;
  memset(p, 0, sizeof *p);
  n->pp[0] = n->k.args;
  p->func = (CUfunction)n->k.fn;
  p->gridDimX = n->k.gx;
  p->blockDimX = n->k.bx;
  p->gridDimY = p->gridDimZ = p->blockDimY = p->blockDimZ = 1;
  p->kernelParams = n->pp;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(
    CUgraphExec x, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p) {
  ENTER_CTX("cuGraphExecKernelNodeSetParams_v2");
  if (!x)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!n || !p || !p->kernelParams || !p->kernelParams[0] || p->extra ||
      p->sharedMemBytes)
    return CUDA_ERROR_INVALID_VALUE;
  uintptr_t a = (uintptr_t)n;
  if (a < x->nodes || (a - x->nodes) % sizeof *n ||
      (a - x->nodes) / sizeof *n >= x->n)
    return CUDA_ERROR_INVALID_VALUE; /* not a node of x's graph */
  kcall *k = &x->v[(a - x->nodes) / sizeof *n].k;
  if (x->v[(a - x->nodes) / sizeof *n].kind != NODE_KERNEL)
    return CUDA_ERROR_INVALID_VALUE;
  if ((const struct CUfunc_st *)p->func != k->fn)
    return CUDA_ERROR_INVALID_VALUE; /* the function cannot change */
  if (p->gridDimX != k->gx || p->blockDimX != k->bx || p->gridDimY != 1 ||
      p->gridDimZ != 1 || p->blockDimY != 1 || p->blockDimZ != 1)
    return CUDA_ERROR_INVALID_VALUE; /* the grid cannot change here */
  pthread_mutex_lock(&mu);
  memcpy(k->args, p->kernelParams[0], k->fn->args_size);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}
#endif
