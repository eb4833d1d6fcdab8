/*
 * Stand-in for libascendcl.so: exactly the AscendCL symbols the acl backend
 * resolves (device/acl/acl_api.h), over host memory, plus hbgstub_* control
 * functions for tests (hbgstub.h).
 *
 * - Device memory: malloc'd blocks handed out at non-canonical addresses
 *   (never dereferenceable, never reused), sized like aclrtMalloc
 *   (ALIGN_UP(size, 32) + 32, 64-byte aligned starts).
 * - Streams run lazily: async copies queue up and execute when the stream
 *   or an event recorded after them is synchronized, or step by step when
 *   an event is queried. A source changed, or memory freed, while a copy
 *   still reads or writes it is counted as a hazard.
 * - Copies check their kind against the addresses and count <= destMax.
 * - Every call is logged (name, arguments, result); the k-th call of a
 *   function (or of any function, "*") can be made to fail with a code,
 *   and aclGetRecentErrMsg then returns a message (settable).
 * - Built with -DHBGSTUB_OMIT_MEMCPY_ASYNC it lacks aclrtMemcpyAsync.
 * One process-wide state behind one mutex; device state is not per thread.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/acl/acl_api.h"

#define STUB_API __attribute__((visibility("default")))

/* Prototypes from the list the backend resolves: a definition below that
 * does not match its declared signature does not compile. */
#define STUB_PROTO(ret, name, params) STUB_API ret name params;
HBG__ACL_SYMBOLS(STUB_PROTO)
#undef STUB_PROTO

#define STUB_ERR_INVALID_DEVICEID 107001
#define STUB_ERR_STREAM_TASK 507011 /* a queued task failed */
#define STUB_DEV_BASE 0xA5C0000000000000ull
#define STUB_DEV_GAP 4096u
#define STUB_MAX_DEVICES 8
#define STUB_MAX_PLANS 16
#define STUB_ALIGN_UP(x, a) (((x) + ((a)-1)) / (a) * (a))

typedef struct stub_blk {
  uintptr_t addr; /* device: fake address; host: the host pointer */
  size_t size;    /* bytes usable (device: padded like aclrtMalloc) */
  uint8_t *mem;
} stub_blk;

typedef struct stub_vec {
  stub_blk *v;
  size_t n, cap;
} stub_vec;

#define STUB_OP_WAIT (-1) /* aclrtStreamWaitEvent: run wait_s to wait_to */

typedef struct stub_op {
  uintptr_t dst; /* device or host, per kind */
  const void *src;
  size_t count;
  int kind;
  int poisoned; /* memory freed under it */
  uint8_t *snap; /* source as it was at issue */
  struct stub_stream *wait_s;
  uint64_t wait_to;
  struct stub_op *next;
} stub_op;

typedef struct stub_stream {
  stub_op *head, *tail;
  uint64_t enq, done;
  aclError err;
  struct stub_stream *next;
} stub_stream;

typedef struct stub_event {
  stub_stream *s;
  uint64_t target;
  int recorded;
  struct stub_event *next;
} stub_event;

typedef struct stub_call {
  const char *name;
  uint64_t a[6];
  int rc;
} stub_call;

typedef struct stub_plan {
  char name[64];
  unsigned long k, seen;
  int code;
} stub_plan;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int inited;
static unsigned dev_refs[STUB_MAX_DEVICES];
static stub_vec dmem, hmem;
static uintptr_t next_dev = STUB_DEV_BASE;
static uint64_t dev_bytes, host_bytes, mem_limit;
static stub_stream default_stream;
static stub_stream *streams;
static stub_event *events;
static uint64_t n_streams, n_events, hazards, hazard_span, pageable_async;
static stub_call *calls;
static size_t n_calls, cap_calls;
static stub_plan plans[STUB_MAX_PLANS];
static unsigned long fired;
static char custom_msg[512], pending_msg[512], returned_msg[512];
static int has_custom, has_pending;

/* ---- log, injection, messages ---- */

static size_t log_call(const char *name, uint64_t a0, uint64_t a1, uint64_t a2,
                       uint64_t a3, uint64_t a4, uint64_t a5) {
  if (n_calls == cap_calls) {
    size_t cap = cap_calls ? cap_calls * 2 : 256;
    stub_call *c = realloc(calls, cap * sizeof *c);
    if (!c)
      abort();
    calls = c;
    cap_calls = cap;
  }
  calls[n_calls] = (stub_call){name, {a0, a1, a2, a3, a4, a5}, 0};
  return n_calls++;
}

static void set_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pending_msg, sizeof pending_msg, fmt, ap);
  va_end(ap);
  has_pending = 1;
}

static aclError injected(const char *name) {
  for (int i = 0; i < STUB_MAX_PLANS; i++) {
    stub_plan *p = &plans[i];
    if (!p->k || (strcmp(p->name, "*") != 0 && strcmp(p->name, name) != 0))
      continue;
    if (++p->seen < p->k)
      continue;
    aclError code = p->code;
    p->k = 0;
    fired++;
    if (has_custom)
      set_msg("%s", custom_msg);
    else
      set_msg("hbgstub: injected failure of %s (code %d)", name, code);
    return code;
  }
  return ACL_SUCCESS;
}

static aclError ret(size_t call, aclError rc) {
  calls[call].rc = rc;
  pthread_mutex_unlock(&mu);
  return rc;
}

#define P(x) ((uint64_t)(uintptr_t)(x))

/* Lock, log, and apply an armed failure. */
#define ENTER(name, a0, a1, a2, a3, a4, a5)                                    \
  pthread_mutex_lock(&mu);                                                     \
  size_t call_ = log_call(name, a0, a1, a2, a3, a4, a5);                       \
  do {                                                                         \
    aclError inj_ = injected(name);                                            \
    if (inj_ != ACL_SUCCESS)                                                   \
      return ret(call_, inj_);                                                 \
  } while (0)

#define FAIL(code, ...)                                                        \
  do {                                                                         \
    set_msg(__VA_ARGS__);                                                      \
    return ret(call_, (code));                                                 \
  } while (0)

/* ---- memory bookkeeping ---- */

static int vec_add(stub_vec *v, stub_blk b) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    stub_blk *p = realloc(v->v, cap * sizeof *p);
    if (!p)
      return -1;
    v->v = p;
    v->cap = cap;
  }
  v->v[v->n++] = b;
  return 0;
}

static long vec_find(const stub_vec *v, uintptr_t addr, size_t len) {
  for (size_t i = 0; i < v->n; i++) {
    const stub_blk *b = &v->v[i];
    if (addr >= b->addr && addr - b->addr <= b->size &&
        len <= b->size - (addr - b->addr))
      return (long)i;
  }
  return -1;
}

static long vec_exact(const stub_vec *v, uintptr_t addr) {
  for (size_t i = 0; i < v->n; i++)
    if (v->v[i].addr == addr)
      return (long)i;
  return -1;
}

static void vec_del(stub_vec *v, size_t i) { v->v[i] = v->v[--v->n]; }

static int is_dev(uintptr_t p) { return p >= STUB_DEV_BASE; }

static uint8_t *dev_mem(uintptr_t addr, size_t len) {
  long i = vec_find(&dmem, addr, len);
  return i < 0 ? NULL : dmem.v[i].mem + (addr - dmem.v[i].addr);
}

/* Queued copies touching [p, p + len) of freed memory. */
static void poison(uintptr_t p, size_t len, int device) {
  stub_stream *all[2] = {&default_stream, streams};
  for (int k = 0; k < 2; k++)
    for (stub_stream *s = all[k]; s; s = k ? s->next : NULL)
      for (stub_op *o = s->head; o; o = o->next) {
        uintptr_t a = device ? o->dst : (uintptr_t)o->src;
        int mine = device ? o->kind != ACL_MEMCPY_DEVICE_TO_HOST
                          : o->kind == ACL_MEMCPY_HOST_TO_DEVICE;
        if (mine && a < p + len && p < a + o->count && !o->poisoned) {
          o->poisoned = 1;
          hazards++;
        }
      }
}

/* ---- copies ---- */

static aclError check_kind(void *dst, const void *src, size_t count,
                           aclrtMemcpyKind *kind) {
  int dd = is_dev((uintptr_t)dst), sd = is_dev((uintptr_t)src);
  if (*kind == ACL_MEMCPY_DEFAULT)
    *kind = dd ? (sd ? ACL_MEMCPY_DEVICE_TO_DEVICE : ACL_MEMCPY_HOST_TO_DEVICE)
               : (sd ? ACL_MEMCPY_DEVICE_TO_HOST : ACL_MEMCPY_HOST_TO_HOST);
  switch (*kind) {
  case ACL_MEMCPY_HOST_TO_HOST:
    if (dd || sd)
      return ACL_ERROR_INVALID_PARAM;
    break;
  case ACL_MEMCPY_HOST_TO_DEVICE:
    if (!dd || sd || !dev_mem((uintptr_t)dst, count))
      return ACL_ERROR_INVALID_PARAM;
    break;
  case ACL_MEMCPY_DEVICE_TO_HOST:
    if (dd || !sd || !dev_mem((uintptr_t)src, count))
      return ACL_ERROR_INVALID_PARAM;
    break;
  case ACL_MEMCPY_DEVICE_TO_DEVICE:
    if (!dd || !sd || !dev_mem((uintptr_t)dst, count) ||
        !dev_mem((uintptr_t)src, count))
      return ACL_ERROR_INVALID_PARAM;
    break;
  default:
    return ACL_ERROR_INVALID_PARAM;
  }
  return ACL_SUCCESS;
}

static void do_copy(uintptr_t dst, const void *src, size_t count, int kind) {
  uint8_t *d = kind == ACL_MEMCPY_HOST_TO_DEVICE ||
                       kind == ACL_MEMCPY_DEVICE_TO_DEVICE
                   ? dev_mem(dst, count)
                   : (uint8_t *)dst;
  const uint8_t *s = kind == ACL_MEMCPY_DEVICE_TO_HOST ||
                             kind == ACL_MEMCPY_DEVICE_TO_DEVICE
                         ? dev_mem((uintptr_t)src, count)
                         : (const uint8_t *)src;
  if (count)
    memmove(d, s, count);
}

/* ---- streams ---- */

static int stream_live(const stub_stream *s) {
  if (s == &default_stream)
    return 1;
  for (stub_stream *x = streams; x; x = x->next)
    if (x == s)
      return 1;
  return 0;
}

static int stream_live(const stub_stream *s);

static void stream_step(stub_stream *s) {
  stub_op *o = s->head;
  if (!o)
    return;
  s->head = o->next;
  if (!s->head)
    s->tail = NULL;
  if (o->kind == STUB_OP_WAIT) {
    /* the awaited stream's tasks up to the record run first (a destroyed
     * stream was drained when it went) */
    while (stream_live(o->wait_s) && o->wait_s->done < o->wait_to &&
           o->wait_s->head)
      stream_step(o->wait_s);
  } else if (o->poisoned) {
    if (!s->err)
      s->err = STUB_ERR_STREAM_TASK;
  } else {
    if (o->snap && memcmp(o->snap, o->src, o->count) != 0) {
      const uint8_t *now = o->src;
      size_t lo = 0, hi = o->count;
      while (o->snap[lo] == now[lo])
        lo++;
      while (o->snap[hi - 1] == now[hi - 1])
        hi--;
      hazards++;
      if (hi > hazard_span)
        hazard_span = hi;
      if (getenv("HBGSTUB_VERBOSE"))
        fprintf(stderr,
                "hbgstub: hazard: the source of an async copy (%zu bytes to "
                "%#lx) changed in bytes [%zu, %zu) before the copy ran\n",
                o->count, (unsigned long)o->dst, lo, hi);
    }
    do_copy(o->dst, o->src, o->count, o->kind);
  }
  free(o->snap);
  free(o);
  s->done++;
}

static aclError stream_drain(stub_stream *s, uint64_t upto) {
  while (s->done < upto && s->head)
    stream_step(s);
  aclError e = s->err;
  s->err = ACL_SUCCESS;
  return e;
}

static int event_live(const stub_event *e) {
  for (stub_event *x = events; x; x = x->next)
    if (x == e)
      return 1;
  return 0;
}

/* ---- the AscendCL API ---- */

aclError aclInit(const char *configPath) {
  ENTER("aclInit", P(configPath), 0, 0, 0, 0, 0);
  if (inited)
    FAIL(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialized");
  inited = 1;
  return ret(call_, ACL_SUCCESS);
}

aclError aclFinalize(void) {
  ENTER("aclFinalize", 0, 0, 0, 0, 0, 0);
  if (!inited)
    FAIL(ACL_ERROR_UNINITIALIZE, "aclFinalize: not initialized");
  inited = 0;
  return ret(call_, ACL_SUCCESS);
}

#define NEED_INIT()                                                            \
  do {                                                                         \
    if (!inited)                                                               \
      FAIL(ACL_ERROR_UNINITIALIZE, "%s: aclInit was not called",               \
           calls[call_].name);                                                 \
  } while (0)

static int any_device(void) {
  for (int i = 0; i < STUB_MAX_DEVICES; i++)
    if (dev_refs[i])
      return 1;
  return 0;
}

#define NEED_DEVICE()                                                          \
  do {                                                                         \
    NEED_INIT();                                                               \
    if (!any_device())                                                         \
      FAIL(ACL_ERROR_RT_CONTEXT_NULL, "%s: no device set",                     \
           calls[call_].name);                                                 \
  } while (0)

aclError aclrtSetDevice(int32_t deviceId) {
  ENTER("aclrtSetDevice", (uint64_t)deviceId, 0, 0, 0, 0, 0);
  NEED_INIT();
  if (deviceId < 0 || deviceId >= STUB_MAX_DEVICES)
    FAIL(STUB_ERR_INVALID_DEVICEID, "aclrtSetDevice: invalid device %d",
         (int)deviceId);
  dev_refs[deviceId]++;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtResetDevice(int32_t deviceId) {
  ENTER("aclrtResetDevice", (uint64_t)deviceId, 0, 0, 0, 0, 0);
  NEED_INIT();
  if (deviceId < 0 || deviceId >= STUB_MAX_DEVICES || !dev_refs[deviceId])
    FAIL(STUB_ERR_INVALID_DEVICEID, "aclrtResetDevice: device %d not set",
         (int)deviceId);
  dev_refs[deviceId]--;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtCreateStream(aclrtStream *stream) {
  ENTER("aclrtCreateStream", P(stream), 0, 0, 0, 0, 0);
  NEED_DEVICE();
  if (!stream)
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
  stub_stream *s = calloc(1, sizeof *s);
  if (!s)
    FAIL(ACL_ERROR_BAD_ALLOC, "aclrtCreateStream: out of memory");
  s->next = streams;
  streams = s;
  n_streams++;
  *stream = s;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtDestroyStream(aclrtStream stream) {
  ENTER("aclrtDestroyStream", P(stream), 0, 0, 0, 0, 0);
  NEED_DEVICE();
  stub_stream *s = stream;
  if (!s || s == &default_stream || !stream_live(s))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: bad stream");
  if (s->head)
    hazards++; /* the documented order is synchronize, then destroy */
  stream_drain(s, UINT64_MAX);
  for (stub_event *e = events; e; e = e->next)
    if (e->s == s)
      e->s = NULL;
  stub_stream **pp = &streams;
  while (*pp != s)
    pp = &(*pp)->next;
  *pp = s->next;
  free(s);
  n_streams--;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  ENTER("aclrtSynchronizeStream", P(stream), 0, 0, 0, 0, 0);
  NEED_DEVICE();
  stub_stream *s = stream ? (stub_stream *)stream : &default_stream;
  if (!stream_live(s))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeStream: bad stream");
  aclError e = stream_drain(s, UINT64_MAX);
  if (e)
    FAIL(e, "aclrtSynchronizeStream: a task on the stream failed");
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  ENTER("aclrtMalloc", P(devPtr), size, (uint64_t)policy, 0, 0, 0);
  NEED_DEVICE();
  if (!devPtr || size == 0 || size > (SIZE_MAX >> 2))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: bad argument (size %zu)",
         size);
  if ((unsigned)policy > ACL_MEM_MALLOC_NORMAL_ONLY)
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: bad policy %d", (int)policy);
  size_t padded = STUB_ALIGN_UP(size, 32) + 32;
  if (mem_limit && dev_bytes + padded > mem_limit)
    FAIL(ACL_ERROR_RT_MEMORY_ALLOCATION,
         "aclrtMalloc: out of device memory (%zu bytes)", size);
  stub_blk b = {next_dev, padded, malloc(padded)};
  if (!b.mem || vec_add(&dmem, b) < 0) {
    free(b.mem);
    FAIL(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: out of memory");
  }
  memset(b.mem, 0xA5, padded); /* not initialised, as documented */
  next_dev += STUB_ALIGN_UP(padded, 64) + STUB_DEV_GAP;
  dev_bytes += padded;
  *devPtr = (void *)b.addr;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtFree(void *devPtr) {
  ENTER("aclrtFree", P(devPtr), 0, 0, 0, 0, 0);
  NEED_DEVICE();
  long i = devPtr ? vec_exact(&dmem, (uintptr_t)devPtr) : -1;
  if (i < 0)
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtFree: %p was not allocated", devPtr);
  poison(dmem.v[i].addr, dmem.v[i].size, 1);
  dev_bytes -= dmem.v[i].size;
  free(dmem.v[i].mem);
  vec_del(&dmem, (size_t)i);
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtMallocHost(void **hostPtr, size_t size) {
  ENTER("aclrtMallocHost", P(hostPtr), size, 0, 0, 0, 0);
  NEED_DEVICE();
  if (!hostPtr || size == 0 || size > (SIZE_MAX >> 2))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: bad argument");
  void *p = aligned_alloc(64, STUB_ALIGN_UP(size, 64));
  if (!p || vec_add(&hmem, (stub_blk){(uintptr_t)p, size, p}) < 0) {
    free(p);
    FAIL(ACL_ERROR_BAD_ALLOC, "aclrtMallocHost: out of memory");
  }
  host_bytes += size;
  *hostPtr = p;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtFreeHost(void *hostPtr) {
  ENTER("aclrtFreeHost", P(hostPtr), 0, 0, 0, 0, 0);
  NEED_DEVICE();
  long i = hostPtr ? vec_exact(&hmem, (uintptr_t)hostPtr) : -1;
  if (i < 0)
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: %p was not allocated",
         hostPtr);
  poison(hmem.v[i].addr, hmem.v[i].size, 0);
  host_bytes -= hmem.v[i].size;
  free(hmem.v[i].mem);
  vec_del(&hmem, (size_t)i);
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind) {
  ENTER("aclrtMemcpy", P(dst), destMax, P(src), count, (uint64_t)kind, 0);
  NEED_DEVICE();
  if (!dst || !src || count > destMax)
    FAIL(ACL_ERROR_INVALID_PARAM,
         "aclrtMemcpy: bad argument (count %zu, destMax %zu)", count,
         destMax);
  if (check_kind(dst, src, count, &kind) != ACL_SUCCESS)
    FAIL(ACL_ERROR_INVALID_PARAM,
         "aclrtMemcpy: kind %d does not match %p <- %p (%zu bytes)",
         (int)kind, dst, src, count);
  do_copy((uintptr_t)dst, src, count, kind);
  return ret(call_, ACL_SUCCESS);
}

#ifndef HBGSTUB_OMIT_MEMCPY_ASYNC
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src,
                          size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
  ENTER("aclrtMemcpyAsync", P(dst), destMax, P(src), count, (uint64_t)kind,
        P(stream));
  NEED_DEVICE();
  stub_stream *s = stream ? (stub_stream *)stream : &default_stream;
  if (!stream_live(s))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync: bad stream");
  if (!dst || !src || count > destMax)
    FAIL(ACL_ERROR_INVALID_PARAM,
         "aclrtMemcpyAsync: bad argument (count %zu, destMax %zu)", count,
         destMax);
  if (kind == ACL_MEMCPY_HOST_TO_HOST)
    FAIL(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
         "aclrtMemcpyAsync: host to host is not supported");
  if (check_kind(dst, src, count, &kind) != ACL_SUCCESS)
    FAIL(ACL_ERROR_INVALID_PARAM,
         "aclrtMemcpyAsync: kind %d does not match %p <- %p (%zu bytes)",
         (int)kind, dst, src, count);
  uintptr_t host = kind == ACL_MEMCPY_HOST_TO_DEVICE   ? (uintptr_t)src
                   : kind == ACL_MEMCPY_DEVICE_TO_HOST ? (uintptr_t)dst
                                                       : 0;
  if (host && vec_find(&hmem, host, count) < 0) {
    /* Pageable host memory: the copy is done before the call returns. */
    pageable_async++;
    do_copy((uintptr_t)dst, src, count, kind);
    return ret(call_, ACL_SUCCESS);
  }
  stub_op *o = calloc(1, sizeof *o);
  if (!o)
    FAIL(ACL_ERROR_BAD_ALLOC, "aclrtMemcpyAsync: out of memory");
  *o = (stub_op){(uintptr_t)dst, src, count, kind, 0, NULL, NULL};
  if (kind == ACL_MEMCPY_HOST_TO_DEVICE && count) {
    o->snap = malloc(count);
    if (!o->snap) {
      free(o);
      FAIL(ACL_ERROR_BAD_ALLOC, "aclrtMemcpyAsync: out of memory");
    }
    memcpy(o->snap, src, count);
  }
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  s->enq++;
  return ret(call_, ACL_SUCCESS);
}
#endif

aclError aclrtCreateEvent(aclrtEvent *event) {
  ENTER("aclrtCreateEvent", P(event), 0, 0, 0, 0, 0);
  NEED_DEVICE();
  if (!event)
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is NULL");
  stub_event *e = calloc(1, sizeof *e);
  if (!e)
    FAIL(ACL_ERROR_BAD_ALLOC, "aclrtCreateEvent: out of memory");
  e->next = events;
  events = e;
  n_events++;
  *event = e;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  ENTER("aclrtRecordEvent", P(event), P(stream), 0, 0, 0, 0);
  NEED_DEVICE();
  stub_event *e = event;
  stub_stream *s = stream ? (stub_stream *)stream : &default_stream;
  if (!e || !event_live(e) || !stream_live(s))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtRecordEvent: bad event or stream");
  e->s = s;
  e->target = s->enq;
  e->recorded = 1;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtQueryEventStatus(aclrtEvent event,
                               aclrtEventRecordedStatus *status) {
  ENTER("aclrtQueryEventStatus", P(event), P(status), 0, 0, 0, 0);
  NEED_DEVICE();
  stub_event *e = event;
  if (!e || !status || !event_live(e))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: bad event");
  if (e->recorded && e->s && e->s->done < e->target)
    stream_step(e->s);
  *status = e->recorded && (!e->s || e->s->done >= e->target)
                ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  ENTER("aclrtSynchronizeEvent", P(event), 0, 0, 0, 0, 0);
  NEED_DEVICE();
  stub_event *e = event;
  if (!e || !event_live(e))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeEvent: bad event");
  if (e->recorded && e->s) {
    aclError err = stream_drain(e->s, e->target);
    if (err)
      FAIL(err, "aclrtSynchronizeEvent: a task before the event failed");
  }
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  ENTER("aclrtStreamWaitEvent", P(stream), P(event), 0, 0, 0, 0);
  NEED_DEVICE();
  stub_event *e = event;
  stub_stream *s = stream ? (stub_stream *)stream : &default_stream;
  if (!e || !event_live(e) || !stream_live(s))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent: bad event or stream");
  if (!e->recorded || !e->s)
    return ret(call_, ACL_SUCCESS);
  stub_op *o = calloc(1, sizeof *o);
  if (!o)
    FAIL(ACL_ERROR_BAD_ALLOC, "aclrtStreamWaitEvent: out of memory");
  o->kind = STUB_OP_WAIT;
  o->wait_s = e->s;
  o->wait_to = e->target;
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  s->enq++;
  return ret(call_, ACL_SUCCESS);
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  ENTER("aclrtDestroyEvent", P(event), 0, 0, 0, 0, 0);
  NEED_DEVICE();
  stub_event *e = event;
  if (!e || !event_live(e))
    FAIL(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: bad event");
  stub_event **pp = &events;
  while (*pp != e)
    pp = &(*pp)->next;
  *pp = e->next;
  free(e);
  n_events--;
  return ret(call_, ACL_SUCCESS);
}

const char *aclGetRecentErrMsg(void) {
  pthread_mutex_lock(&mu);
  size_t call = log_call("aclGetRecentErrMsg", 0, 0, 0, 0, 0, 0);
  const char *r = NULL;
  if (has_pending) {
    memcpy(returned_msg, pending_msg, sizeof returned_msg);
    has_pending = 0;
    r = returned_msg;
  }
  calls[call].rc = r ? 0 : -1;
  pthread_mutex_unlock(&mu);
  return r;
}

/* ---- control functions for tests (see hbgstub.h) ---- */

STUB_API void hbgstub_reset(void) {
  pthread_mutex_lock(&mu);
  n_calls = 0;
  memset(plans, 0, sizeof plans);
  fired = 0;
  hazards = 0;
  hazard_span = 0;
  pageable_async = 0;
  has_custom = has_pending = 0;
  mem_limit = 0;
  pthread_mutex_unlock(&mu);
}

STUB_API size_t hbgstub_calls(void) {
  pthread_mutex_lock(&mu);
  size_t n = n_calls;
  pthread_mutex_unlock(&mu);
  return n;
}

STUB_API const char *hbgstub_call_name(size_t i) {
  pthread_mutex_lock(&mu);
  const char *r = i < n_calls ? calls[i].name : NULL;
  pthread_mutex_unlock(&mu);
  return r;
}

STUB_API uint64_t hbgstub_call_arg(size_t i, unsigned j) {
  pthread_mutex_lock(&mu);
  uint64_t r = i < n_calls && j < 6 ? calls[i].a[j] : 0;
  pthread_mutex_unlock(&mu);
  return r;
}

STUB_API int hbgstub_call_rc(size_t i) {
  pthread_mutex_lock(&mu);
  int r = i < n_calls ? calls[i].rc : -1;
  pthread_mutex_unlock(&mu);
  return r;
}

/* Names of the calls from `from` on, separated by one space. @return the
 * length the whole string needs (without the terminator). */
STUB_API size_t hbgstub_log(size_t from, char *buf, size_t len) {
  pthread_mutex_lock(&mu);
  size_t need = 0;
  for (size_t i = from; i < n_calls; i++) {
    size_t n = strlen(calls[i].name);
    if (buf && need + (need ? 1 : 0) + n < len) {
      if (need)
        buf[need] = ' ';
      memcpy(buf + need + (need ? 1 : 0), calls[i].name, n);
    }
    need += (need ? 1 : 0) + n;
  }
  if (buf && len)
    buf[need < len ? need : len - 1] = '\0';
  pthread_mutex_unlock(&mu);
  return need;
}

/* Fail the k-th call (1-based, counted from now) of name, or of any
 * aclError function when name is "*", with code. k == 0 disarms name.
 * @return 0, or -1 when no plan slot is free. */
STUB_API int hbgstub_fail(const char *name, unsigned long k, int code) {
  int rc = -1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < STUB_MAX_PLANS; i++) {
    stub_plan *p = &plans[i];
    if (!k) {
      if (p->k && strcmp(p->name, name) == 0)
        p->k = 0;
      rc = 0;
      continue;
    }
    if (!p->k) {
      snprintf(p->name, sizeof p->name, "%s", name);
      p->k = k;
      p->seen = 0;
      p->code = code;
      rc = 0;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

STUB_API unsigned long hbgstub_fired(void) {
  pthread_mutex_lock(&mu);
  unsigned long r = fired;
  pthread_mutex_unlock(&mu);
  return r;
}

/* The message aclGetRecentErrMsg returns after an injected failure (NULL:
 * a default one naming the function and code). */
STUB_API void hbgstub_set_errmsg(const char *msg) {
  pthread_mutex_lock(&mu);
  has_custom = msg != NULL;
  if (msg)
    snprintf(custom_msg, sizeof custom_msg, "%s", msg);
  pthread_mutex_unlock(&mu);
}

/* Device memory capacity in bytes (0: unlimited). */
STUB_API void hbgstub_set_mem_limit(uint64_t bytes) {
  pthread_mutex_lock(&mu);
  mem_limit = bytes;
  pthread_mutex_unlock(&mu);
}

/* Counters: "dev_blocks", "dev_bytes", "host_blocks", "host_bytes",
 * "streams", "events", "pending" (queued copies), "hazards",
 * "hazard_span" (the largest end, from the start of its copy, of a source
 * range changed while queued), "pageable_async", "inited", "device_refs". */
STUB_API uint64_t hbgstub_count(const char *what) {
  uint64_t r = 0;
  pthread_mutex_lock(&mu);
  if (!strcmp(what, "dev_blocks"))
    r = dmem.n;
  else if (!strcmp(what, "dev_bytes"))
    r = dev_bytes;
  else if (!strcmp(what, "host_blocks"))
    r = hmem.n;
  else if (!strcmp(what, "host_bytes"))
    r = host_bytes;
  else if (!strcmp(what, "streams"))
    r = n_streams;
  else if (!strcmp(what, "events"))
    r = n_events;
  else if (!strcmp(what, "pending")) {
    r = default_stream.enq - default_stream.done;
    for (stub_stream *s = streams; s; s = s->next)
      r += s->enq - s->done;
  } else if (!strcmp(what, "hazards"))
    r = hazards;
  else if (!strcmp(what, "pageable_async"))
    r = pageable_async;
  else if (!strcmp(what, "inited"))
    r = (uint64_t)inited;
  else if (!strcmp(what, "device_refs"))
    for (int i = 0; i < STUB_MAX_DEVICES; i++)
      r += dev_refs[i];
  pthread_mutex_unlock(&mu);
  return r;
}

/* Read or write device memory directly (not logged, no queue order).
 * @return 0, or -1 when the range is not inside one live block. */
STUB_API int hbgstub_peek(uint64_t addr, void *dst, size_t len) {
  pthread_mutex_lock(&mu);
  uint8_t *p = dev_mem((uintptr_t)addr, len);
  if (p)
    memcpy(dst, p, len);
  pthread_mutex_unlock(&mu);
  return p ? 0 : -1;
}

STUB_API int hbgstub_poke(uint64_t addr, const void *src, size_t len) {
  pthread_mutex_lock(&mu);
  uint8_t *p = dev_mem((uintptr_t)addr, len);
  if (p)
    memcpy(p, src, len);
  pthread_mutex_unlock(&mu);
  return p ? 0 : -1;
}
