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
 * warp size (a host thread runs its lanes as one worker). Stream capture records
 * kernel launches into a graph (other work on a capturing stream is
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); an instantiated graph launch
 * queues them again, in order. cuGraphGetNodes lists a captured graph's
 * kernel nodes (in capture order), cuGraphKernelNodeGetParams_v2 returns a
 * node's parameters (pointing at the node's own copy of the argument
 * struct), cuGraphExecKernelNodeSetParams_v2 replaces them in the
 * executable graph only (same function, one thread). Events keep the host
 * time at which their stream reached them; cuEventElapsedTime(_v2) is the
 * difference (CUDA_ERROR_NOT_READY before both completed,
 * CUDA_ERROR_INVALID_HANDLE for an event never recorded or created with
 * CU_EVENT_DISABLE_TIMING).
 *
 * Fault injection for the tests: hbgmock_fail(name, code, nth) makes the
 * nth next call (0 = the next one) of the entry point called name return
 * code, once; name NULL disarms. Built with HBGMOCK_OMIT_MEMCPY_HTOD_ASYNC
 * it lacks cuMemcpyHtoDAsync_v2 (the missing-symbol test); with
 * HBGMOCK_OMIT_GRAPH_UPDATE the three kernel-node calls above, with
 * HBGMOCK_OMIT_ELAPSED_V2 / _V1 either cuEventElapsedTime symbol (the
 * missing optional-symbol tests). hbgmock_poke(nth, offset, value)
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
 * Environment: HBG_MOCK_CUDA_NDEV (default 1; 0 = no device),
 * HBG_MOCK_CUDA_DELAY_US (per queued op, default 50), HBG_MOCK_CUDA_CC
 * (compute capability as major * 10 + minor, default 90).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "device/cuda/devcode/devcode.h"

#define MOCK_EXPORT __attribute__((visibility("default")))

#define MOCK_MEM (16ull << 30)
#define DEV_BASE 0x00007d0000000000ull

typedef struct dalloc {
  uint64_t addr, size;
  uint8_t *host;
  struct dalloc *next;
} dalloc;

typedef struct hreg {
  uint8_t *p;
  size_t n;
  int alloc; /* cuMemHostAlloc (1) or cuMemHostRegister (0) */
  struct hreg *next;
} hreg;

#define ARGS_MAX 1024 /* bytes of a kernel's argument struct */

/* An entry point of the device module, built for the host. */
struct CUfunc_st {
  const char *name;
  void (*run)(const void *args);
  size_t args_size;
};

/* A kernel launch: the entry, its grid and a copy of its arguments. */
typedef struct kcall {
  const struct CUfunc_st *fn;
  unsigned gx, bx; /* CTAs, threads per CTA */
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
  struct op *next;
} op;

struct CUmod_st {
  int loaded;
  struct CUmod_st *next; /* every loaded module, like the driver's table */
};

/* A captured kernel node; pp is what GetParams points kernelParams at. */
struct CUgraphNode_st {
  kcall k;
  void *pp[1];
};

/* Graphs and executable graphs are listed while alive, like the
 * driver's own tables (so one whose destroy failed is not lost). */
struct CUgraph_st {
  struct CUgraphNode_st *v;
  size_t n, cap;
  struct CUgraph_st *next;
};

struct CUgraphExec_st {
  kcall *v;
  size_t n;
  uintptr_t nodes; /* the source graph's node array: handle -> index */
  struct CUgraphExec_st *next;
};

struct CUctx_st {
  int dev;
  _Atomic int refs;
};

struct CUstream_st {
  op *head, *tail;
  int busy, stop;
  struct CUgraph_st *capture; /* the graph being captured, or NULL */
  pthread_t th;
  struct CUstream_st *next; /* every live stream */
};

struct CUevent_st {
  uint64_t rec, done;
  long waits;    /* queued cuStreamWaitEvent ops naming it */
  uint64_t t_ns; /* host time the stream reached its last record */
  int timing;    /* not CU_EVENT_DISABLE_TIMING */
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

/* The armed failure: the nth next call of fail_name returns fail_code. */
static char fail_name[64];
static CUresult fail_code;
static int fail_nth;
static long n_streams, n_events, n_modules, n_graphs, n_execs;
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
  for (struct CUgraph_st **pp = &graphs; *pp; pp = &(*pp)->next)
    if (*pp == g) {
      *pp = g->next;
      break;
    }
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

/* The CTA the calling thread runs (devcode.h). */
static _Thread_local hbg_dc_host_dim cur_dim = {0, 1, 1};

const hbg_dc_host_dim *hbg_dc_host_grid(void) { return &cur_dim; }

uint64_t hbg_dc_host_clock_ns(void) { return now_ns(); }

void hbg_dc_host_pause(void) { sched_yield(); }

typedef struct cta_run {
  const kcall *k;
  unsigned cta;
  pthread_t th;
} cta_run;

static void *cta_main(void *arg) {
  cta_run *c = arg;
  cur_dim.cta = c->cta;
  cur_dim.ctas = c->k->gx;
  cur_dim.lanes = c->k->bx;
  c->k->fn->run(c->k->args);
  return NULL;
}

/* Run a launch's grid: CTA 0 on the calling thread, the others on threads
 * of their own, all at once (a GPU keeps the executor's persistent grid
 * resident, and its CTAs wait on each other). A grid the stand-in cannot
 * give threads to is a failure of the test machine: abort. */
static void run_grid(const kcall *k) {
  cta_run *c = calloc(k->gx, sizeof *c);
  if (!c)
    abort();
  for (unsigned i = 0; i < k->gx; i++) {
    c[i].k = k;
    c[i].cta = i;
  }
  for (unsigned i = 1; i < k->gx; i++)
    if (pthread_create(&c[i].th, NULL, cta_main, &c[i]) != 0)
      abort();
  cta_main(&c[0]);
  for (unsigned i = 1; i < k->gx; i++)
    pthread_join(c[i].th, NULL);
  free(c);
}

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
    pthread_mutex_unlock(&mu);
    delay();
    if (o->n)
      memcpy(o->dst, o->src, o->n);
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
  n += n_streams + n_events + n_modules + n_graphs + n_execs;
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

#define ENTER(name)                                                            \
  do {                                                                         \
    CUresult enter__r = injected(name);                                        \
    if (enter__r != CUDA_SUCCESS)                                              \
      return enter__r;                                                         \
    if (!inited)                                                               \
      return CUDA_ERROR_NOT_INITIALIZED;                                       \
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
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int err_find(CUresult e) {
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
    if (errs[i].code == e)
      return (int)i;
  return -1;
}

MOCK_EXPORT CUresult cuGetErrorName(CUresult e, const char **str) {
  int i = err_find(e);
  if (i < 0) {
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *str = errs[i].name;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGetErrorString(CUresult e, const char **str) {
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
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
    *pi = lanes(); /* a host thread runs a CTA's lanes as one worker */
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

MOCK_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  ENTER_CTX("cuMemFree_v2");
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

MOCK_EXPORT CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags) {
  (void)flags;
  ENTER_CTX("cuMemHostAlloc");
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
  return host_drop(p, 1);
}

MOCK_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size,
                                          unsigned int flags) {
  (void)flags;
  ENTER_CTX("cuMemHostRegister_v2");
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
  if (s->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  pthread_mutex_lock(&mu);
  drain(s);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
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
  n_streams--;
  for (struct CUstream_st **pp = &streams; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  if (s->capture)
    graph_unlist(s->capture);
  pthread_mutex_unlock(&mu);
  if (s->capture)
    free(s->capture->v);
  free(s->capture);
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
  if (s->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
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
  if (!o->dst) {
    pthread_mutex_unlock(&mu);
    free(o);
    return CUDA_ERROR_INVALID_VALUE;
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
  if (!o->src) {
    pthread_mutex_unlock(&mu);
    free(o);
    return CUDA_ERROR_INVALID_VALUE;
  }
  o->dst = dst;
  int pinned = host_find(dst, n) != NULL;
  push(s, o);
  if (!pinned)
    drain(s);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
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
  for (struct CUevent_st **pp = &events; *pp; pp = &(*pp)->next)
    if (*pp == e) {
      *pp = e->next;
      break;
    }
  pthread_mutex_unlock(&mu);
  free(e);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  ENTER("cuEventRecord");
  if (!e || !s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (s->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  o->ev = e;
  o->gen = ++e->rec;
  push(s, o);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* The stream's later work waits for e's latest record as of now (none:
 * no wait), like the driver's; flags must be 0 (CU_EVENT_WAIT_DEFAULT). */
MOCK_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e,
                                       unsigned int flags) {
  ENTER("cuStreamWaitEvent");
  if (!e || !s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (flags)
    return CUDA_ERROR_INVALID_VALUE;
  if (s->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  o->wait = e;
  o->wait_gen = e->rec;
  e->waits++;
  push(s, o);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuEventQuery(CUevent e) {
  ENTER("cuEventQuery");
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  int done = e->done >= e->rec;
  pthread_mutex_unlock(&mu);
  return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

MOCK_EXPORT CUresult cuEventSynchronize(CUevent e) {
  ENTER("cuEventSynchronize");
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  uint64_t want = e->rec;
  while (e->done < want)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
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

MOCK_EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  ENTER_CTX("cuModuleLoadData");
  if (!m || !image)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fatbin_check(image);
  if (r != CUDA_SUCCESS)
    return r;
  struct CUmod_st *mod = calloc(1, sizeof *mod);
  if (!mod)
    return CUDA_ERROR_OUT_OF_MEMORY;
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
  if (!m || !m->loaded)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  n_modules--;
  for (struct CUmod_st **pp = &modules; *pp; pp = &(*pp)->next)
    if (*pp == m) {
      *pp = m->next;
      break;
    }
  pthread_mutex_unlock(&mu);
  free(m);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m,
                                         const char *name) {
  ENTER_CTX("cuModuleGetFunction");
  if (!m || !m->loaded)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!f || !name)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
    if (strcmp(funcs[i].name, name) == 0) {
      *f = (CUfunction)&funcs[i];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

static CUresult graph_add(struct CUgraph_st *g, const kcall *k) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 8;
    struct CUgraphNode_st *v = realloc(g->v, cap * sizeof *v);
    if (!v)
      return CUDA_ERROR_OUT_OF_MEMORY;
    g->v = v;
    g->cap = cap;
  }
  memset(&g->v[g->n], 0, sizeof g->v[g->n]);
  g->v[g->n++].k = *k;
  return CUDA_SUCCESS;
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

MOCK_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx,
                                    unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by,
                                    unsigned int bz, unsigned int shmem,
                                    CUstream s, void **params, void **extra) {
  ENTER_CTX("cuLaunchKernel");
  if (!f || !s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!params || extra || !params[0] || shmem)
    return CUDA_ERROR_INVALID_VALUE;
  if (gx < 1 || gx > MOCK_MAX_GRID || bx < 1 || bx > (unsigned)lanes() ||
      gy != 1 || gz != 1 || by != 1 || bz != 1)
    return CUDA_ERROR_INVALID_VALUE;
  kcall k;
  memset(&k, 0, sizeof k);
  k.fn = f;
  k.gx = gx;
  k.bx = bx;
  memcpy(k.args, params[0], f->args_size); /* parameters are copied now */
  pthread_mutex_lock(&mu);
  CUresult r = s->capture ? graph_add(s->capture, &k) : queue_kernels(s, &k, 1);
  pthread_mutex_unlock(&mu);
  return r;
}

MOCK_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s,
                                             CUstreamCaptureMode mode) {
  (void)mode;
  ENTER_CTX("cuStreamBeginCapture_v2");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  struct CUgraph_st *g = calloc(1, sizeof *g);
  if (!g)
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  if (s->capture) {
    pthread_mutex_unlock(&mu);
    free(g);
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  s->capture = g;
  n_graphs++;
  g->next = graphs;
  graphs = g;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *pg) {
  ENTER_CTX("cuStreamEndCapture");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!pg)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  struct CUgraph_st *g = s->capture;
  s->capture = NULL;
  pthread_mutex_unlock(&mu);
  if (!g)
    return CUDA_ERROR_ILLEGAL_STATE;
  *pg = g;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g,
                                                 unsigned long long flags) {
  ENTER_CTX("cuGraphInstantiateWithFlags");
  if (!g)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!pe || flags)
    return CUDA_ERROR_INVALID_VALUE;
  struct CUgraphExec_st *x = calloc(1, sizeof *x);
  kcall *v = malloc((g->n ? g->n : 1) * sizeof *v);
  if (!x || !v) {
    free(x);
    free(v);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < g->n; i++)
    v[i] = g->v[i].k;
  x->v = v;
  x->n = g->n;
  x->nodes = (uintptr_t)g->v;
  pthread_mutex_lock(&mu);
  n_execs++;
  x->next = execs;
  execs = x;
  pthread_mutex_unlock(&mu);
  *pe = x;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGraphLaunch(CUgraphExec x, CUstream s) {
  ENTER_CTX("cuGraphLaunch");
  if (!x || !s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (s->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  pthread_mutex_lock(&mu);
  CUresult r = queue_kernels(s, x->v, x->n);
  pthread_mutex_unlock(&mu);
  return r;
}

MOCK_EXPORT CUresult cuGraphExecDestroy(CUgraphExec x) {
  ENTER_CTX("cuGraphExecDestroy");
  if (!x)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  n_execs--;
  for (struct CUgraphExec_st **pp = &execs; *pp; pp = &(*pp)->next)
    if (*pp == x) {
      *pp = x->next;
      break;
    }
  pthread_mutex_unlock(&mu);
  free(x->v);
  free(x);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGraphDestroy(CUgraph g) {
  ENTER_CTX("cuGraphDestroy");
  if (!g)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  graph_unlist(g);
  pthread_mutex_unlock(&mu);
  free(g->v);
  free(g);
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
  if (!n || !p)
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
  kcall *k = &x->v[(a - x->nodes) / sizeof *n];
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
