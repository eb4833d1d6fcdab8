/*
 * acl backend: Ascend CANN AscendCL runtime, loaded with dlopen at open (no
 * CANN headers or libraries at build time; see acl_api.h and docs/ACL.md).
 *
 * Device addresses are the runtime's device pointers. Launch does not
 * execute: the launch verifier (src/device/verify.c) reads the task window
 * and every referenced Submission and Definition back, checks them and
 * every device range they name, and writes an hbg_dev_status into device
 * memory. This backend reports each write and free of device memory to
 * it, so a Definition verified once is not read back again until the host
 * writes or frees it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/acl/acl_api.h"
#include "device/device_internal.h"
#include "common/ranges.h"
#include "device/verify.h"
#include "graph/graph.h"

#define HBG__ACL_DEFAULT_LIB "libascendcl.so"

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "dlsym results must fit a function pointer");

typedef struct hbg__acl_fns {
#define HBG__ACL_FN_PTR(ret, name, params) ret(*name) params;
  HBG__ACL_SYMBOLS(HBG__ACL_FN_PTR)
#undef HBG__ACL_FN_PTR
} hbg__acl_fns;

typedef struct acl_init {
  void *lib;
  unsigned refs;
  int owned;
  struct acl_init *next;
} acl_init;

typedef struct hbg__acl {
  void *lib;
  hbg__acl_fns f;
  int32_t devid;
  /* live allocations (start = address, len = bytes): sizes for the stats,
   * destMax for every copy, and the pinned-source test for async copies */
  hbg__rtab dmem, hmem;
  hbg__verifier ver; /* launch: its verdict cache sees every write */
  pthread_mutex_t mu; /* stats */
  hbg_dev_stats st;
} hbg__acl;

struct hbg_dev_queue {
  aclrtStream s;
};

struct hbg_dev_event {
  aclrtEvent e;
  atomic_int recorded;
};

/* aclInit may run once per process (aclInit restrictions), so devices that
 * share a loaded library share its initialisation; the last close
 * finalizes. When the application initialised ACL itself
 * (ACL_ERROR_REPEAT_INITIALIZE) it keeps ownership and hbg never
 * finalizes. */
static pthread_mutex_t acl_init_mu = PTHREAD_MUTEX_INITIALIZER;
static acl_init *acl_inits;

#define ACL_STATS(a, stmt)                                                     \
  do {                                                                         \
    pthread_mutex_lock(&(a)->mu);                                              \
    stmt;                                                                      \
    pthread_mutex_unlock(&(a)->mu);                                            \
  } while (0)

static hbg__acl *acl_of(hbg_device *dev) { return hbg_device_impl(dev); }

static void *acl_ptr(hbg_devptr p) { return (void *)(uintptr_t)p; }

/* ---- errors ---- */

static int acl_fail(hbg_device *dev, const hbg__acl *a, const char *fn,
                    aclError e, int oom) {
  const char *msg = a->f.aclGetRecentErrMsg();
  hbg_device_set_native(dev, e, "%s: %s", fn, msg && *msg ? msg : "failed");
  switch (e) {
  case ACL_ERROR_BAD_ALLOC:
  case ACL_ERROR_RT_MEMORY_ALLOCATION:
    return oom;
  case ACL_ERROR_INVALID_PARAM:
  case ACL_ERROR_RT_PARAM_INVALID:
    return HBG_E_INVAL;
  default:
    return HBG_E_DEVICE;
  }
}

#define ACL_CALL(dev, a, oom, fn, ...)                                         \
  do {                                                                         \
    aclError acl__e = (a)->f.fn(__VA_ARGS__);                                  \
    if (acl__e != ACL_SUCCESS)                                                 \
      return acl_fail((dev), (a), #fn, acl__e, (oom));                         \
  } while (0)

/* ---- registry ---- */

static int reg_add(hbg__rtab *r, uintptr_t base, size_t size) {
  return hbg__rtab_insert(r, (hbg__range){.start = base, .len = size});
}

/* @return the block holding all of [addr, addr + len), or NULL. */
static const hbg__range *reg_find(const hbg__rtab *r, uintptr_t addr,
                                  size_t len) {
  ptrdiff_t i = hbg__rtab_floor(r, addr);
  if (i < 0)
    return NULL;
  const hbg__range *b = &r->v[i];
  uint64_t off = addr - b->start;
  if (off > b->len || len > b->len - off)
    return NULL;
  return b;
}

/* @return index of the block starting exactly at base, or -1. */
static long reg_exact(const hbg__rtab *r, uintptr_t base) {
  ptrdiff_t i = hbg__rtab_floor(r, base);
  return i >= 0 && r->v[i].start == base ? (long)i : -1;
}

/* Bytes from addr to the end of its device allocation (destMax). */
static int dev_room(const hbg__acl *a, hbg_devptr addr, uint64_t len,
                    size_t *room) {
  if (len > SIZE_MAX)
    return HBG_E_RANGE;
  const hbg__range *b = reg_find(&a->dmem, (uintptr_t)addr, (size_t)len);
  if (!b)
    return HBG_E_RANGE;
  *room = (size_t)(b->len - ((uintptr_t)addr - b->start));
  return 0;
}

static void defs_drop(hbg__acl *a, hbg_devptr addr, uint64_t len) {
  hbg__verify_invalidate(&a->ver, addr, len);
}

/* ---- loading ---- */

static int acl_load(const char *path, void **lib, hbg__acl_fns *f, char *why,
                    size_t len) {
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, len, "%s", e ? e : path);
    return HBG_E_LOAD;
  }
  void *sym;
#define HBG__ACL_LOAD(ret, name, params)                                       \
  dlerror();                                                                   \
  sym = dlsym(h, #name);                                                       \
  if (!sym) {                                                                  \
    const char *e = dlerror();                                                 \
    snprintf(why, len, "%s", e ? e : path);                                    \
    dlclose(h);                                                                \
    return HBG_E_LOAD;                                                         \
  }                                                                            \
  memcpy(&f->name, &sym, sizeof sym);
  HBG__ACL_SYMBOLS(HBG__ACL_LOAD)
#undef HBG__ACL_LOAD
  *lib = h;
  return 0;
}

static int acl_lib_path(const char *options, char *path, size_t len) {
  int found = hbg__opt_get(options, "lib", path, len);
  if (found < 0)
    return HBG_E_INVAL;
  if (found && path[0])
    return 0;
  const char *env = getenv("HBG_ACL_LIB");
  if (!env || !*env)
    env = HBG__ACL_DEFAULT_LIB;
  if (strlen(env) >= len)
    return HBG_E_INVAL;
  strcpy(path, env);
  return 0;
}

static int acl_init_get(hbg_device *dev, hbg__acl *a) {
  int rc = 0;
  pthread_mutex_lock(&acl_init_mu);
  acl_init *it = acl_inits;
  while (it && it->lib != a->lib)
    it = it->next;
  if (!it) {
    it = calloc(1, sizeof *it);
    if (!it) {
      rc = HBG_E_NOMEM;
      goto out;
    }
    aclError e = a->f.aclInit(NULL);
    if (e != ACL_SUCCESS && e != ACL_ERROR_REPEAT_INITIALIZE) {
      free(it);
      rc = acl_fail(dev, a, "aclInit", e, HBG_E_DEVICE);
      goto out;
    }
    it->lib = a->lib;
    it->owned = e == ACL_SUCCESS;
    it->next = acl_inits;
    acl_inits = it;
  }
  it->refs++;
out:
  pthread_mutex_unlock(&acl_init_mu);
  return rc;
}

static void acl_init_put(hbg__acl *a) {
  pthread_mutex_lock(&acl_init_mu);
  acl_init **pp = &acl_inits;
  while (*pp && (*pp)->lib != a->lib)
    pp = &(*pp)->next;
  acl_init *it = *pp;
  if (it && --it->refs == 0) {
    *pp = it->next;
    if (it->owned)
      a->f.aclFinalize();
    free(it);
  }
  pthread_mutex_unlock(&acl_init_mu);
}

static int acl_probe(char *buf, size_t len) {
  char path[512];
  char why[256];
  void *lib;
  hbg__acl_fns f;
  int rc = acl_lib_path(NULL, path, sizeof path);
  if (rc == 0)
    rc = acl_load(path, &lib, &f, why, sizeof why);
  else
    snprintf(why, sizeof why, "HBG_ACL_LIB is too long");
  if (rc < 0) {
    if (buf && len)
      snprintf(buf, len, "%s", why);
    return rc;
  }
  dlclose(lib);
  if (buf && len)
    snprintf(buf, len, "%s: every AscendCL symbol resolved", path);
  return 0;
}

/* ---- open / close ---- */

static int acl_open(hbg_device *dev, const char *options) {
  char path[512];
  char why[256];
  uint64_t devid = 0;
  HBG__TRY(acl_lib_path(options, path, sizeof path));
  HBG__TRY(hbg__opt_u64(options, "device", &devid));
  HBG__RETURN_IF(devid > INT32_MAX, HBG_E_INVAL);

  hbg__acl *a = calloc(1, sizeof *a);
  if (!a)
    return HBG_E_NOMEM;
  a->devid = (int32_t)devid;
  int rc = HBG_E_NOMEM;
  if (hbg__verify_init(&a->ver) < 0)
    goto err_free;
  if (pthread_mutex_init(&a->mu, NULL) != 0)
    goto err_ver;
  rc = acl_load(path, &a->lib, &a->f, why, sizeof why);
  if (rc < 0) {
    hbg_device_set_native(dev, 0, "%s", why);
    goto err_mutex;
  }
  rc = acl_init_get(dev, a);
  if (rc < 0)
    goto err_lib;
  aclError e = a->f.aclrtSetDevice(a->devid);
  if (e != ACL_SUCCESS) {
    rc = acl_fail(dev, a, "aclrtSetDevice", e, HBG_E_DEVICE);
    goto err_init;
  }
  hbg_device_set_impl(dev, a);
  return 0;

err_init:
  acl_init_put(a);
err_lib:
  dlclose(a->lib);
err_mutex:
  pthread_mutex_destroy(&a->mu);
err_ver:
  hbg__verify_fini(&a->ver);
err_free:
  free(a);
  return rc;
}

static void acl_close(hbg_device *dev) {
  hbg__acl *a = acl_of(dev);
  if (!a)
    return;
  /* Whatever the user left behind goes before the device is reset. */
  for (size_t i = a->dmem.n; i-- > 0;)
    a->f.aclrtFree((void *)(uintptr_t)a->dmem.v[i].start);
  for (size_t i = a->hmem.n; i-- > 0;)
    a->f.aclrtFreeHost((void *)(uintptr_t)a->hmem.v[i].start);
  a->f.aclrtResetDevice(a->devid);
  acl_init_put(a);
  dlclose(a->lib);
  hbg__rtab_free(&a->dmem);
  hbg__rtab_free(&a->hmem);
  hbg__verify_fini(&a->ver);
  pthread_mutex_destroy(&a->mu);
  free(a);
  hbg_device_set_impl(dev, NULL);
}

static int acl_get_caps(hbg_device *dev, hbg_dev_caps *caps) {
  HBG__UNUSED(dev);
  memset(caps, 0, sizeof *caps);
  caps->struct_size = sizeof *caps;
  caps->flags = HBG_DEV_CAP_ASYNC_NEEDS_PINNED | HBG_DEV_CAP_VERIFIES;
  caps->stage_align = HBG__ACL_START_ALIGN;
  caps->piece_pad_align = HBG__ACL_PIECE_ALIGN;
  caps->piece_pad_extra = HBG__ACL_PIECE_EXTRA;
  caps->dev_align = HBG__ACL_START_ALIGN;
  caps->max_batch = 0;
  caps->mem_bytes = 0; /* unknown: no memory query among the symbols used */
  return 0;
}

static int acl_get_stats(hbg_device *dev, hbg_dev_stats *st) {
  hbg__acl *a = acl_of(dev);
  ACL_STATS(a, *st = a->st);
  st->struct_size = sizeof *st;
  return 0;
}

/* ---- memory ---- */

static int acl_host_alloc(hbg_device *dev, size_t bytes, void **out) {
  hbg__acl *a = acl_of(dev);
  void *p = NULL;
  ACL_CALL(dev, a, HBG_E_NOMEM, aclrtMallocHost, &p, bytes);
  if (!p) {
    hbg_device_set_native(dev, 0, "aclrtMallocHost: returned NULL");
    return HBG_E_DEVICE;
  }
  if (reg_add(&a->hmem, (uintptr_t)p, bytes) < 0) {
    a->f.aclrtFreeHost(p);
    return HBG_E_NOMEM;
  }
  ACL_STATS(a, a->st.host_allocs++; a->st.host_in_use += bytes);
  *out = p;
  return 0;
}

static int acl_host_free(hbg_device *dev, void *p) {
  hbg__acl *a = acl_of(dev);
  if (!p)
    return 0;
  long i = reg_exact(&a->hmem, (uintptr_t)p);
  HBG__RETURN_IF(i < 0, HBG_E_INVAL);
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtFreeHost, p);
  size_t size = (size_t)a->hmem.v[i].len;
  hbg__rtab_remove_at(&a->hmem, (size_t)i);
  ACL_STATS(a, a->st.host_frees++; a->st.host_in_use -= size);
  return 0;
}

static int acl_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out) {
  hbg__acl *a = acl_of(dev);
  void *p = NULL;
  ACL_CALL(dev, a, HBG_E_DEVMEM, aclrtMalloc, &p, bytes,
           ACL_MEM_MALLOC_HUGE_FIRST);
  if (!p) {
    hbg_device_set_native(dev, 0, "aclrtMalloc: returned NULL");
    return HBG_E_DEVICE;
  }
  if (reg_add(&a->dmem, (uintptr_t)p, bytes) < 0) {
    a->f.aclrtFree(p);
    return HBG_E_NOMEM;
  }
  ACL_STATS(a, a->st.mem_allocs++; a->st.mem_in_use += bytes);
  *out = (hbg_devptr)(uintptr_t)p;
  return 0;
}

static int acl_mem_free(hbg_device *dev, hbg_devptr p) {
  hbg__acl *a = acl_of(dev);
  if (!p)
    return 0;
  long i = reg_exact(&a->dmem, (uintptr_t)p);
  HBG__RETURN_IF(i < 0, HBG_E_INVAL);
  size_t size = (size_t)a->dmem.v[i].len;
  defs_drop(a, p, size);
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtFree, acl_ptr(p));
  hbg__rtab_remove_at(&a->dmem, (size_t)i);
  ACL_STATS(a, a->st.mem_frees++; a->st.mem_in_use -= size);
  return 0;
}

/* ---- copies ---- */

static uint64_t acl_t0(hbg_device *dev) {
  return hbg_device_tracing(dev) ? hbg__now_ns() : 0;
}

static void acl_trace(hbg_device *dev, uint32_t track, const char *name,
                      uint64_t t0, uint64_t bytes) {
  if (!t0)
    return;
  hbg_trace_event ev = {.track = track, .name = name, .start_ns = t0,
                        .dur_ns = hbg__now_ns() - t0, .bytes = bytes};
  hbg_device_trace(dev, &ev);
}

static int acl_copy_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                        size_t bytes) {
  hbg__acl *a = acl_of(dev);
  size_t room;
  if (!bytes)
    return 0;
  HBG__TRY(dev_room(a, dst, bytes, &room));
  int pinned = reg_find(&a->hmem, (uintptr_t)src, bytes) != NULL;
  uint64_t t0 = acl_t0(dev);
  defs_drop(a, dst, bytes);
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtMemcpy, acl_ptr(dst), room, src, bytes,
           ACL_MEMCPY_HOST_TO_DEVICE);
  ACL_STATS(a, a->st.h2d_copies++; a->st.h2d_bytes += bytes;
            a->st.pinned_direct += (uint64_t)pinned);
  acl_trace(dev, HBG_TRACK_COPY, "acl_h2d", t0, bytes);
  return 0;
}

static int acl_copy_d2h(hbg_device *dev, void *dst, hbg_devptr src,
                        size_t bytes) {
  hbg__acl *a = acl_of(dev);
  size_t room;
  if (!bytes)
    return 0;
  HBG__TRY(dev_room(a, src, bytes, &room));
  uint64_t t0 = acl_t0(dev);
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtMemcpy, dst, bytes, acl_ptr(src), bytes,
           ACL_MEMCPY_DEVICE_TO_HOST);
  ACL_STATS(a, a->st.d2h_copies++; a->st.d2h_bytes += bytes);
  acl_trace(dev, HBG_TRACK_COPY, "acl_d2h", t0, bytes);
  return 0;
}

static int acl_queue_create(hbg_device *dev, hbg_dev_queue **out) {
  hbg__acl *a = acl_of(dev);
  hbg_dev_queue *q = calloc(1, sizeof *q);
  if (!q)
    return HBG_E_NOMEM;
  aclError e = a->f.aclrtCreateStream(&q->s);
  if (e != ACL_SUCCESS) {
    free(q);
    return acl_fail(dev, a, "aclrtCreateStream", e, HBG_E_DEVICE);
  }
  *out = q;
  return 0;
}

/* aclrtDestroyStream wants the stream's work finished first. */
static int acl_queue_destroy(hbg_device *dev, hbg_dev_queue *q) {
  hbg__acl *a = acl_of(dev);
  if (!q)
    return 0;
  aclError es = a->f.aclrtSynchronizeStream(q->s);
  int rc = es ? acl_fail(dev, a, "aclrtSynchronizeStream", es, HBG_E_DEVICE)
              : 0;
  aclError ed = a->f.aclrtDestroyStream(q->s);
  if (ed && !rc)
    rc = acl_fail(dev, a, "aclrtDestroyStream", ed, HBG_E_DEVICE);
  free(q);
  return rc;
}

/* Async copies read straight from aclrtMallocHost memory. From any other
 * memory the copy waits for the stream and is done synchronously, so that
 * the caller may reuse the source at once and stream order still holds. */
static int acl_copy_h2d_async(hbg_device *dev, hbg_dev_queue *q,
                              hbg_devptr dst, const void *src, size_t bytes) {
  hbg__acl *a = acl_of(dev);
  size_t room;
  if (!bytes)
    return 0;
  HBG__TRY(dev_room(a, dst, bytes, &room));
  uint64_t t0 = acl_t0(dev);
  defs_drop(a, dst, bytes);
  if (!reg_find(&a->hmem, (uintptr_t)src, bytes)) {
    ACL_CALL(dev, a, HBG_E_DEVICE, aclrtSynchronizeStream, q->s);
    ACL_CALL(dev, a, HBG_E_DEVICE, aclrtMemcpy, acl_ptr(dst), room, src,
             bytes, ACL_MEMCPY_HOST_TO_DEVICE);
    ACL_STATS(a, a->st.h2d_copies++; a->st.h2d_bytes += bytes;
              a->st.async_copies++; a->st.async_degraded++);
    acl_trace(dev, HBG_TRACK_COPY, "acl_h2d_degraded", t0, bytes);
    return 0;
  }
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtMemcpyAsync, acl_ptr(dst), room, src,
           bytes, ACL_MEMCPY_HOST_TO_DEVICE, q->s);
  ACL_STATS(a, a->st.h2d_copies++; a->st.h2d_bytes += bytes;
            a->st.async_copies++; a->st.pinned_direct++);
  acl_trace(dev, HBG_TRACK_COPY, "acl_h2d_async_issue", t0, bytes);
  return 0;
}

static int acl_queue_sync(hbg_device *dev, hbg_dev_queue *q) {
  hbg__acl *a = acl_of(dev);
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtSynchronizeStream, q->s);
  return 0;
}

/* ---- events ---- */

static int acl_event_create(hbg_device *dev, hbg_dev_event **out) {
  hbg__acl *a = acl_of(dev);
  hbg_dev_event *ev = calloc(1, sizeof *ev);
  if (!ev)
    return HBG_E_NOMEM;
  aclError e = a->f.aclrtCreateEvent(&ev->e);
  if (e != ACL_SUCCESS) {
    free(ev);
    return acl_fail(dev, a, "aclrtCreateEvent", e, HBG_E_DEVICE);
  }
  atomic_init(&ev->recorded, 0);
  *out = ev;
  return 0;
}

static int acl_event_destroy(hbg_device *dev, hbg_dev_event *ev) {
  hbg__acl *a = acl_of(dev);
  if (!ev)
    return 0;
  aclError e = a->f.aclrtDestroyEvent(ev->e);
  free(ev);
  if (e != ACL_SUCCESS)
    return acl_fail(dev, a, "aclrtDestroyEvent", e, HBG_E_DEVICE);
  return 0;
}

static int acl_event_record(hbg_device *dev, hbg_dev_event *ev,
                            hbg_dev_queue *q) {
  hbg__acl *a = acl_of(dev);
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtRecordEvent, ev->e, q->s);
  atomic_store(&ev->recorded, 1);
  return 0;
}

/* An event never recorded counts as complete (the runtime waits on fresh
 * slots' events); ACL would report it NOT_READY forever. */
static int acl_event_query(hbg_device *dev, hbg_dev_event *ev) {
  hbg__acl *a = acl_of(dev);
  aclrtEventRecordedStatus s = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  if (!atomic_load(&ev->recorded))
    return 0;
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtQueryEventStatus, ev->e, &s);
  return s == ACL_EVENT_RECORDED_STATUS_COMPLETE ? 0 : HBG_E_AGAIN;
}

static int acl_event_wait(hbg_device *dev, hbg_dev_event *ev) {
  hbg__acl *a = acl_of(dev);
  if (!atomic_load(&ev->recorded))
    return 0;
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtSynchronizeEvent, ev->e);
  return 0;
}

/* An event never recorded is complete: nothing to wait for (ACL's own wait
 * on it would never end). */
static int acl_queue_wait_event(hbg_device *dev, hbg_dev_queue *q,
                                hbg_dev_event *ev) {
  hbg__acl *a = acl_of(dev);
  if (!atomic_load(&ev->recorded))
    return 0;
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtStreamWaitEvent, q->s, ev->e);
  return 0;
}

/* ---- launch: verify what arrived (I/O for src/device/verify.c) ---- */

typedef struct acl_io {
  hbg_device *dev;
  hbg__acl *a;
} acl_io;

static int io_live(void *ctx, hbg_devptr base, uint64_t rel, uint64_t len) {
  const acl_io *x = ctx;
  return hbg__rtab_holds(&x->a->dmem, base, rel, len);
}

/* Synchronous: the queue was drained before the verifier started. */
static int io_read(void *ctx, void *dst, hbg_devptr src, uint64_t len) {
  acl_io *x = ctx;
  ACL_CALL(x->dev, x->a, HBG_E_DEVICE, aclrtMemcpy, dst, (size_t)len,
           acl_ptr(src), (size_t)len, ACL_MEMCPY_DEVICE_TO_HOST);
  return 0;
}

static int io_flush(void *ctx) {
  HBG__UNUSED(ctx);
  return 0;
}

static int io_write_status(void *ctx, hbg_devptr dst,
                           const hbg_dev_status *st) {
  acl_io *x = ctx;
  size_t room;
  HBG__TRY(dev_room(x->a, dst, sizeof *st, &room));
  defs_drop(x->a, dst, sizeof *st);
  ACL_CALL(x->dev, x->a, HBG_E_DEVICE, aclrtMemcpy, acl_ptr(dst), room, st,
           sizeof *st, ACL_MEMCPY_HOST_TO_DEVICE);
  return 0;
}

static int acl_launch(hbg_device *dev, hbg_dev_queue *q,
                      const hbg_dev_launch_desc *l) {
  hbg__acl *a = acl_of(dev);
  size_t room;
  HBG__RETURN_IF(l->struct_size < sizeof *l, HBG_E_INVAL);
  HBG__TRY(dev_room(a, l->status, sizeof(hbg_dev_status), &room));
  uint64_t t0 = acl_t0(dev);
  ACL_CALL(dev, a, HBG_E_DEVICE, aclrtSynchronizeStream, q->s);
  acl_io x = {.dev = dev, .a = a};
  const hbg__verify_io io = {.ctx = &x,
                             .flags = HBG__VERIFY_TRACKS_WRITES,
                             .live = io_live,
                             .scratch = NULL,
                             .read = io_read,
                             .flush = io_flush,
                             .write_status = io_write_status};
  uint64_t rb_bytes = 0;
  HBG__TRY(hbg__verify_launch(&a->ver, &io, l, &rb_bytes));
  ACL_STATS(a, a->st.launches++);
  acl_trace(dev, HBG_TRACK_DEVICE, "acl_verify", t0, rb_bytes);
  return 0;
}

const hbg_dev_ops hbg__acl_ops = {
    .struct_size = sizeof(hbg_dev_ops),
    .abi_version = HBG_DEV_ABI_VERSION,
    .name = "acl",
    .summary = "Ascend CANN AscendCL runtime via dlopen (verifies, does not "
               "execute)",
    .probe = acl_probe,
    .open = acl_open,
    .close = acl_close,
    .get_caps = acl_get_caps,
    .get_stats = acl_get_stats,
    .host_alloc = acl_host_alloc,
    .host_free = acl_host_free,
    .host_register = NULL, /* HBG_E_UNSUPPORTED */
    .host_unregister = NULL,
    .mem_alloc = acl_mem_alloc,
    .mem_free = acl_mem_free,
    .copy_h2d = acl_copy_h2d,
    .copy_d2h = acl_copy_d2h,
    .queue_create = acl_queue_create,
    .queue_destroy = acl_queue_destroy,
    .copy_h2d_async = acl_copy_h2d_async,
    .queue_sync = acl_queue_sync,
    .event_create = acl_event_create,
    .event_destroy = acl_event_destroy,
    .event_record = acl_event_record,
    .event_query = acl_event_query,
    .event_wait = acl_event_wait,
    .launch = acl_launch,
    .queue_wait_event = acl_queue_wait_event,
};
