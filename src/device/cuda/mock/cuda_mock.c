/*
 * A stand-in CUDA driver API (libcuda) for checking the cuda backend on
 * machines without a GPU. Not part of the library: tests/CMakeLists.txt
 * builds it as a shared object, and the backend loads it by path instead of
 * libcuda.so.1 (HBG_CUDA_LIB=PATH or the device option lib=PATH; see
 * scripts/gpu-check.sh --mock).
 *
 * It exports every entry point the backend resolves as required
 * (cuda_api.h) and none of the optional ones, with the driver's documented
 * semantics where they matter: cuInit before anything else; a context must
 * be current on the calling thread for memory, copy, stream and event calls
 * (CUDA_ERROR_INVALID_CONTEXT otherwise; contexts are per thread); device
 * memory lives at fake addresses that are never host pointers (never
 * reused, so a freed pointer stays invalid); copies check device ranges
 * (CUDA_ERROR_INVALID_VALUE); each stream is a worker thread that runs its
 * queue in order with a small delay per op, so events really are pending
 * for a while; an async H2D copy from pageable memory stages the source
 * before returning; D2H into pageable memory is synchronous.
 *
 * Fault injection for the tests: hbgmock_fail(name, code, nth) makes the
 * nth next call (0 = the next one) of the entry point called name return
 * code, once; name NULL disarms. Built with HBGMOCK_OMIT_MEMCPY_HTOD_ASYNC
 * it lacks cuMemcpyHtoDAsync_v2 (the missing-symbol test).
 *
 * Environment: HBG_MOCK_CUDA_NDEV (default 1; 0 = no device),
 * HBG_MOCK_CUDA_DELAY_US (per queued op, default 50).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

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

typedef struct op {
  void *dst;
  const void *src;
  size_t n;
  void *owned; /* staging to free after the copy */
  struct CUevent_st *ev;
  uint64_t gen;
  struct op *next;
} op;

struct CUctx_st {
  int dev;
  _Atomic int refs;
};

struct CUstream_st {
  op *head, *tail;
  int busy, stop;
  pthread_t th;
};

struct CUevent_st {
  uint64_t rec, done;
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
static long n_streams, n_events;
static struct CUevent_st *events;

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

static int ndev(void) { return env_int("HBG_MOCK_CUDA_NDEV", 1); }

static void delay(void) {
  int us = env_int("HBG_MOCK_CUDA_DELAY_US", 50);
  if (us > 0) {
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Host memory behind device range [a, a + n), or NULL. mu held. */
static uint8_t *dev_ptr(const void *a, size_t n) {
  uint64_t x = (uint64_t)(uintptr_t)a;
  for (dalloc *d = dallocs; d; d = d->next)
    if (x >= d->addr && x - d->addr < d->size && n <= d->size - (x - d->addr))
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

static void *worker(void *arg) {
  struct CUstream_st *s = arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!s->head && !s->stop)
      pthread_cond_wait(&cv, &mu);
    if (!s->head)
      break;
    op *o = s->head;
    s->busy = 1;
    pthread_mutex_unlock(&mu);
    delay();
    if (o->n)
      memcpy(o->dst, o->src, o->n);
    free(o->owned);
    pthread_mutex_lock(&mu);
    s->head = o->next;
    if (!s->head)
      s->tail = NULL;
    if (o->ev && o->ev->done < o->gen)
      o->ev->done = o->gen;
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
  n += n_streams + n_events;
  for (int i = 0; i < 8; i++)
    n += primary[i].refs;
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
    *pi = 9;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *pi = 0;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *pi = 4;
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
  d->next = dallocs;
  dallocs = d;
  in_use += size;
  *p = (CUdeviceptr)d->addr;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  ENTER_CTX("cuMemFree_v2");
  pthread_mutex_lock(&mu);
  for (dalloc **pp = &dallocs; *pp; pp = &(*pp)->next) {
    dalloc *d = *pp;
    if (d->addr == (uint64_t)p) {
      *pp = d->next;
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
  pthread_mutex_unlock(&mu);
  *ps = s;
  return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  ENTER_CTX("cuStreamSynchronize");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
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
  pthread_mutex_unlock(&mu);
  free(s);
  return CUDA_SUCCESS;
}

#ifndef HBGMOCK_OMIT_MEMCPY_HTOD_ASYNC
MOCK_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                          size_t n, CUstream s) {
  ENTER_CTX("cuMemcpyHtoDAsync_v2");
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (n == 0)
    return CUDA_SUCCESS;
  if (!src)
    return CUDA_ERROR_INVALID_VALUE;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  o->n = n;
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
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (n == 0)
    return CUDA_SUCCESS;
  if (!dst)
    return CUDA_ERROR_INVALID_VALUE;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  o->n = n;
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
  (void)flags;
  ENTER_CTX("cuEventCreate");
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e)
    return CUDA_ERROR_OUT_OF_MEMORY;
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
  while (e->done < e->rec)
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
