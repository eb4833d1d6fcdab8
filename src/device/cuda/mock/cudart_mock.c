/*
 * A stand-in CUDA runtime for checking the cuda backend on machines without
 * a GPU. Not part of the library: build it as a shared object and preload
 * it in front of libcudart (scripts/gpu-check.sh --mock does both):
 *
 *   cc -shared -fPIC -O1 -I/usr/local/cuda/include cudart_mock.c \
 *      -o libcudart_mock.so -lpthread
 *   LD_PRELOAD=$PWD/libcudart_mock.so ctest -R cuda
 *
 * It implements only the calls the backend makes, with CUDA's documented
 * semantics where they matter: device memory lives at fake addresses that
 * are never host pointers (never reused, so a freed pointer stays invalid);
 * copies check device ranges (cudaErrorInvalidValue); each stream is a
 * worker thread that runs its queue in order with a small delay per op, so
 * events really are pending for a while; an async H2D copy from pageable
 * memory stages the source before returning; D2H into pageable memory is
 * synchronous. cudaGetErrorName/String come from the real libcudart.
 *
 * Environment: HBG_MOCK_CUDA_NDEV (default 1; 0 = no device),
 * HBG_MOCK_CUDA_DELAY_US (per queued op, default 50).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

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
  int alloc; /* cudaHostAlloc (1) or cudaHostRegister (0) */
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

struct CUstream_st {
  op *head, *tail;
  int busy, stop;
  pthread_t th;
};

struct CUevent_st {
  uint64_t rec, done;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static dalloc *dallocs;
static hreg *hregs;
static uint64_t next_addr = DEV_BASE, in_use;
static int cur_dev;

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

cudaError_t cudaGetDeviceCount(int *count) {
  int n = ndev();
  if (n <= 0)
    return cudaErrorNoDevice;
  *count = n;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  if (device < 0 || device >= ndev())
    return cudaErrorInvalidDevice;
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "hbg mock GPU (CPU)");
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= ndev())
    return cudaErrorInvalidDevice;
  cur_dev = device;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) {
  pthread_mutex_lock(&mu);
  *free_b = (size_t)(MOCK_MEM - in_use);
  *total = (size_t)MOCK_MEM;
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t size) {
  if (size == 0 || size > MOCK_MEM)
    return size ? cudaErrorMemoryAllocation : cudaErrorInvalidValue;
  dalloc *d = calloc(1, sizeof *d);
  uint8_t *h = malloc(size);
  if (!d || !h) {
    free(d);
    free(h);
    return cudaErrorMemoryAllocation;
  }
  memset(h, 0xCD, size);
  pthread_mutex_lock(&mu);
  if (in_use + size > MOCK_MEM) {
    pthread_mutex_unlock(&mu);
    free(d);
    free(h);
    return cudaErrorMemoryAllocation;
  }
  d->addr = next_addr;
  next_addr += (size + 4095) / 4096 * 4096 + 4096; /* guard gap */
  d->size = size;
  d->host = h;
  d->next = dallocs;
  dallocs = d;
  in_use += size;
  *p = (void *)(uintptr_t)d->addr;
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  if (!p)
    return cudaSuccess;
  pthread_mutex_lock(&mu);
  for (dalloc **pp = &dallocs; *pp; pp = &(*pp)->next) {
    dalloc *d = *pp;
    if (d->addr == (uint64_t)(uintptr_t)p) {
      *pp = d->next;
      in_use -= d->size;
      pthread_mutex_unlock(&mu);
      free(d->host);
      free(d);
      return cudaSuccess;
    }
  }
  pthread_mutex_unlock(&mu);
  return cudaErrorInvalidValue;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
  (void)flags;
  if (ndev() <= 0)
    return cudaErrorNoDevice;
  if (size == 0 || size > MOCK_MEM)
    return size ? cudaErrorMemoryAllocation : cudaErrorInvalidValue;
  hreg *h = calloc(1, sizeof *h);
  void *m = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (!h || !m) {
    free(h);
    free(m);
    return cudaErrorMemoryAllocation;
  }
  pthread_mutex_lock(&mu);
  h->p = m;
  h->n = size;
  h->alloc = 1;
  h->next = hregs;
  hregs = h;
  pthread_mutex_unlock(&mu);
  *p = m;
  return cudaSuccess;
}

static cudaError_t host_drop(void *p, int alloc) {
  pthread_mutex_lock(&mu);
  for (hreg **pp = &hregs; *pp; pp = &(*pp)->next) {
    hreg *h = *pp;
    if (h->p == p && h->alloc == alloc) {
      *pp = h->next;
      pthread_mutex_unlock(&mu);
      if (alloc)
        free(h->p);
      free(h);
      return cudaSuccess;
    }
  }
  pthread_mutex_unlock(&mu);
  return alloc ? cudaErrorInvalidValue : cudaErrorHostMemoryNotRegistered;
}

cudaError_t cudaFreeHost(void *p) { return p ? host_drop(p, 1) : cudaSuccess; }

cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags) {
  (void)flags;
  if (!p || !size)
    return cudaErrorInvalidValue;
  hreg *h = calloc(1, sizeof *h);
  if (!h)
    return cudaErrorMemoryAllocation;
  pthread_mutex_lock(&mu);
  for (hreg *o = hregs; o; o = o->next)
    if ((uint8_t *)p < o->p + o->n && o->p < (uint8_t *)p + size) {
      pthread_mutex_unlock(&mu);
      free(h);
      return cudaErrorHostMemoryAlreadyRegistered;
    }
  h->p = p;
  h->n = size;
  h->next = hregs;
  hregs = h;
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p) { return host_drop(p, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *ps, unsigned int flags) {
  (void)flags;
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s)
    return cudaErrorMemoryAllocation;
  if (pthread_create(&s->th, NULL, worker, s)) {
    free(s);
    return cudaErrorMemoryAllocation;
  }
  *ps = s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (!s)
    return cudaErrorInvalidResourceHandle;
  pthread_mutex_lock(&mu);
  drain(s);
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s)
    return cudaErrorInvalidResourceHandle;
  pthread_mutex_lock(&mu);
  drain(s);
  s->stop = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(s->th, NULL);
  free(s);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                            enum cudaMemcpyKind kind, cudaStream_t s) {
  if (!s)
    return cudaErrorInvalidResourceHandle;
  if (n == 0)
    return cudaSuccess;
  if (!dst || !src)
    return cudaErrorInvalidValue;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return cudaErrorMemoryAllocation;
  o->n = n;
  pthread_mutex_lock(&mu);
  if (kind == cudaMemcpyHostToDevice) {
    o->dst = dev_ptr(dst, n);
    if (!o->dst)
      goto inval;
    if (host_find(src, n)) {
      o->src = src;
    } else {
      o->owned = malloc(n);
      if (!o->owned) {
        pthread_mutex_unlock(&mu);
        free(o);
        return cudaErrorMemoryAllocation;
      }
      memcpy(o->owned, src, n);
      o->src = o->owned;
    }
    push(s, o);
  } else if (kind == cudaMemcpyDeviceToHost) {
    o->src = dev_ptr(src, n);
    if (!o->src)
      goto inval;
    o->dst = dst;
    int pinned = host_find(dst, n) != NULL;
    push(s, o);
    if (!pinned)
      drain(s);
  } else {
    goto inval;
  }
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
inval:
  pthread_mutex_unlock(&mu);
  free(o);
  return cudaErrorInvalidValue;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *pe, unsigned int flags) {
  (void)flags;
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e)
    return cudaErrorMemoryAllocation;
  *pe = e;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (!e)
    return cudaErrorInvalidResourceHandle;
  /* Ops still queued may point at it: wait for every stream to drop it. */
  pthread_mutex_lock(&mu);
  while (e->done < e->rec)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  free(e);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e || !s)
    return cudaErrorInvalidResourceHandle;
  op *o = calloc(1, sizeof *o);
  if (!o)
    return cudaErrorMemoryAllocation;
  pthread_mutex_lock(&mu);
  o->ev = e;
  o->gen = ++e->rec;
  push(s, o);
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!e)
    return cudaErrorInvalidResourceHandle;
  pthread_mutex_lock(&mu);
  int done = e->done >= e->rec;
  pthread_mutex_unlock(&mu);
  return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e)
    return cudaErrorInvalidResourceHandle;
  pthread_mutex_lock(&mu);
  uint64_t want = e->rec;
  while (e->done < want)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}
