/* Pinned host memory: page-aligned mappings and caller ranges registered
 * with the sim (locked with mlock when RLIMIT_MEMLOCK allows). The copy
 * engine reads registered memory directly; everything else is pageable and
 * goes through the bounce buffers. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"
#include "device/sim/sim_internal.h"

int hbg__sim_host_init(hbg__sim *s) {
  return pthread_mutex_init(&s->reg_mu, NULL) == 0 ? 0 : HBG_E_NOMEM;
}

static void reg_release(hbg__range *r) {
  if (r->flags & HBG__SIM_REG_LOCKED)
    munlock((void *)(uintptr_t)r->start, (size_t)r->len);
  if (r->flags & HBG__SIM_REG_OWNED)
    munmap((void *)(uintptr_t)r->start, (size_t)r->aux);
}

void hbg__sim_host_fini(hbg__sim *s) {
  for (size_t i = 0; i < s->reg.n; i++)
    reg_release(&s->reg.v[i]);
  free(s->reg.v);
  s->reg.v = NULL;
  s->reg.n = s->reg.cap = 0;
  pthread_mutex_destroy(&s->reg_mu);
}

int hbg__sim_try_lock(hbg__sim *s, void *p, size_t bytes) {
  if (mlock(p, bytes) == 0)
    return 1;
  HBG__SIM_INC(s, mlock_failed, 1);
  return 0;
}

/* Caller holds reg_mu. @return the index of the range containing
 * [a, a+len), or -1. */
static ptrdiff_t reg_find(const hbg__sim *s, uintptr_t a, uint64_t len) {
  ptrdiff_t i = hbg__rtab_floor(&s->reg, a);
  if (i < 0)
    return -1;
  const hbg__range *r = &s->reg.v[i];
  uint64_t end = r->start + r->len;
  return (a <= end && len <= end - a) ? i : -1;
}

/* Caller holds reg_mu. @return 0 or HBG_E_INVAL when [a, a+len) overlaps a
 * registered range, with *at the insertion index. */
static int reg_slot(const hbg__sim *s, uintptr_t a, uint64_t len, size_t *at) {
  ptrdiff_t i = hbg__rtab_floor(&s->reg, a);
  if (i >= 0 && s->reg.v[i].start + s->reg.v[i].len > a)
    return HBG_E_INVAL;
  size_t nx = (size_t)(i + 1);
  if (nx < s->reg.n && s->reg.v[nx].start < a + len)
    return HBG_E_INVAL;
  *at = nx;
  return 0;
}

static int reg_add(hbg__sim *s, void *p, size_t bytes, size_t map_len,
                   uint32_t flags) {
  uintptr_t a = (uintptr_t)p;
  if (a > UINTPTR_MAX - bytes)
    return HBG_E_INVAL;
  size_t at;
  pthread_mutex_lock(&s->reg_mu);
  int rc = reg_slot(s, a, bytes, &at);
  if (rc == 0)
    rc = hbg__rtab_reserve(&s->reg, s->reg.n + 1);
  if (rc == 0) {
    if (hbg__sim_try_lock(s, p, bytes))
      flags |= HBG__SIM_REG_LOCKED;
    hbg__rtab_insert_at(&s->reg, at,
                            (hbg__range){.start = a,
                                             .len = bytes,
                                             .aux = map_len,
                                             .flags = flags});
  }
  pthread_mutex_unlock(&s->reg_mu);
  return rc;
}

/* Remove the range starting exactly at p whose OWNED flag equals owned.
 * @return 0 and *out, or HBG_E_INVAL. */
static int reg_take(hbg__sim *s, void *p, uint32_t owned, hbg__range *out) {
  int rc = HBG_E_INVAL;
  pthread_mutex_lock(&s->reg_mu);
  ptrdiff_t i = hbg__rtab_floor(&s->reg, (uintptr_t)p);
  if (i >= 0 && s->reg.v[i].start == (uintptr_t)p &&
      (s->reg.v[i].flags & HBG__SIM_REG_OWNED) == owned) {
    *out = s->reg.v[i];
    hbg__rtab_remove_at(&s->reg, (size_t)i);
    rc = 0;
  }
  pthread_mutex_unlock(&s->reg_mu);
  return rc;
}

int hbg__sim_is_pinned(hbg__sim *s, const void *p, size_t bytes) {
  pthread_mutex_lock(&s->reg_mu);
  int pinned = reg_find(s, (uintptr_t)p, bytes) >= 0;
  pthread_mutex_unlock(&s->reg_mu);
  return pinned;
}

int hbg__sim_host_alloc(hbg_device *dev, size_t bytes, void **out) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!out || bytes == 0, HBG_E_INVAL);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (bytes > SIZE_MAX - page)
    return HBG_E_NOMEM;
  size_t map_len = HBG__ALIGN_UP(bytes, page);
  void *p = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    hbg_device_set_native(dev, errno, "sim: host_alloc of %zu bytes: %s",
                          bytes, strerror(errno));
    return HBG_E_NOMEM;
  }
  int rc = reg_add(s, p, bytes, map_len, HBG__SIM_REG_OWNED);
  if (rc < 0) {
    munmap(p, map_len);
    return rc == HBG_E_INVAL ? HBG_E_NOMEM : rc;
  }
  HBG__SIM_INC(s, host_allocs, 1);
  HBG__SIM_INC(s, host_in_use, bytes);
  *out = p;
  return 0;
}

int hbg__sim_host_free(hbg_device *dev, void *p) {
  hbg__sim *s = hbg_device_impl(dev);
  if (!p)
    return 0;
  hbg__range r;
  if (reg_take(s, p, HBG__SIM_REG_OWNED, &r) < 0) {
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "sim: host_free of %p: not from host_alloc", p);
    return HBG_E_INVAL;
  }
  reg_release(&r);
  HBG__SIM_INC(s, host_frees, 1);
  HBG__SIM_DEC(s, host_in_use, r.len);
  return 0;
}

int hbg__sim_host_register(hbg_device *dev, void *p, size_t bytes) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!p || bytes == 0, HBG_E_INVAL);
  int rc = reg_add(s, p, bytes, 0, 0);
  if (rc == HBG_E_INVAL)
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "sim: host_register of %p (+%zu) overlaps a "
                          "registered range",
                          p, bytes);
  return rc;
}

int hbg__sim_host_unregister(hbg_device *dev, void *p) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!p, HBG_E_INVAL);
  hbg__range r;
  if (reg_take(s, p, 0, &r) < 0) {
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "sim: host_unregister of %p: not registered", p);
    return HBG_E_INVAL;
  }
  reg_release(&r);
  return 0;
}
