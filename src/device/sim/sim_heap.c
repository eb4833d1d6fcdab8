/* The sim's device memory: one lazily committed host mapping, first-fit
 * allocation over an address-ordered set of free extents with coalescing,
 * and an index of live allocations for address resolution, both treaps
 * (sim_tree.c): every operation O(log n). Imported host ranges (mem_import:
 * the caller's pages, never copied, never freed here) take offsets above
 * every heap, in a sorted range table resolved by binary search. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "common/util.h"
#include "device/sim/sim_internal.h"

int hbg__sim_heap_init(hbg__sim *s, uint64_t bytes) {
  void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    hbg_device_set_native(s->dev, errno,
                          "cannot map %llu bytes of device memory: %s",
                          (unsigned long long)bytes, strerror(errno));
    return HBG_E_NOMEM;
  }
  int rc = pthread_rwlock_init(&s->heap_lock, NULL);
  if (rc != 0)
    goto err_map;
  rc = hbg__stree_reserve(&s->free_ext, 2);
  if (rc < 0)
    goto err_lock;
  hbg__stree_insert(&s->free_ext, 0, bytes, 0);
  s->heap = p;
  s->heap_bytes = bytes;
  s->heap_free = bytes;
  return 0;

err_lock:
  pthread_rwlock_destroy(&s->heap_lock);
err_map:
  munmap(p, (size_t)bytes);
  return HBG_E_NOMEM;
}

void hbg__sim_heap_fini(hbg__sim *s) {
  if (!s->heap)
    return;
  munmap(s->heap, (size_t)s->heap_bytes);
  pthread_rwlock_destroy(&s->heap_lock);
  hbg__stree_free(&s->live);
  hbg__stree_free(&s->free_ext);
  hbg__rtab_free(&s->imports); /* the caller's pages stay as they are */
  s->heap = NULL;
}

static int sim_off(const hbg__sim *s, hbg_devptr addr, uint64_t *off) {
  if ((addr & ~HBG__SIM_OFF_MASK) != s->tag)
    return HBG_E_RANGE;
  *off = addr & HBG__SIM_OFF_MASK;
  return *off < s->heap_bytes ? 0 : HBG_E_RANGE;
}

/* An import's device offset, base (heap_lock held). */
static int resolve_import(hbg__sim *s, uint64_t off, uint64_t rel,
                          uint64_t len, void **out) {
  ptrdiff_t i = hbg__rtab_floor(&s->imports, off);
  if (i < 0)
    return HBG_E_RANGE;
  const hbg__range *r = &s->imports.v[i];
  uint64_t at = off - r->start;
  if (at > r->len || rel > r->len - at || len > r->len - at - rel)
    return HBG_E_RANGE;
  *out = (uint8_t *)(uintptr_t)r->aux + at + rel;
  return 0;
}

int hbg__sim_resolve_in(hbg__sim *s, hbg_devptr base, uint64_t rel,
                        uint64_t len, void **out) {
  HBG__RETURN_IF(!s || !out, HBG_E_INVAL);
  uint64_t off;
  if ((base & ~HBG__SIM_OFF_MASK) == s->tag &&
      (base & HBG__SIM_OFF_MASK) >= HBG__SIM_IMP_BASE) {
    pthread_rwlock_rdlock(&s->heap_lock);
    int rc = resolve_import(s, base & HBG__SIM_OFF_MASK, rel, len, out);
    pthread_rwlock_unlock(&s->heap_lock);
    return rc;
  }
  HBG__TRY(sim_off(s, base, &off));
  int rc = HBG_E_RANGE;
  pthread_rwlock_rdlock(&s->heap_lock);
  const hbg__snode *r = hbg__stree_floor(&s->live, off);
  if (r) {
    uint64_t end = r->start + r->len;
    if (off <= end && rel <= end - off && len <= end - off - rel) {
      *out = s->heap + off + rel;
      rc = 0;
    }
  }
  pthread_rwlock_unlock(&s->heap_lock);
  return rc;
}

int hbg__sim_resolve(hbg__sim *s, hbg_devptr addr, uint64_t len, void **out) {
  return hbg__sim_resolve_in(s, addr, 0, len, out);
}

int hbg__sim_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!out || bytes == 0, HBG_E_INVAL);
  uint64_t t0 = s->model.alloc_ns ? hbg__now_ns() : 0;
  if ((uint64_t)bytes > s->heap_bytes) {
    hbg_device_set_native(dev, HBG_E_DEVMEM,
                          "sim: %zu bytes requested, the device has %llu "
                          "(option mem=)",
                          bytes, (unsigned long long)s->heap_bytes);
    return HBG_E_DEVMEM;
  }
  uint64_t span = HBG__ALIGN_UP((uint64_t)bytes, HBG__SIM_DEV_ALIGN);

  int rc = HBG_E_DEVMEM;
  uint64_t heap_free;
  pthread_rwlock_wrlock(&s->heap_lock);
  /* Freeing must never need memory: keep room for one more extent than
   * there can be (live + 1). */
  if (s->live.n >= UINT32_MAX / 4 ||
      hbg__stree_reserve(&s->live, s->live.n + 1) < 0 ||
      hbg__stree_reserve(&s->free_ext, s->live.n + 2) < 0) {
    rc = HBG_E_NOMEM;
    goto out;
  }
  const hbg__snode *f = hbg__stree_first_fit(&s->free_ext, span);
  if (f) {
    hbg__snode e;
    hbg__stree_remove(&s->free_ext, f->start, &e);
    if (e.len > span)
      hbg__stree_insert(&s->free_ext, e.start + span, e.len - span, 0);
    hbg__stree_insert(&s->live, e.start, bytes, span);
    s->heap_free -= span;
    *out = s->tag | e.start;
    rc = 0;
  }
out:
  heap_free = s->heap_free;
  pthread_rwlock_unlock(&s->heap_lock);
  if (rc == 0) {
    HBG__SIM_INC(s, mem_allocs, 1);
    HBG__SIM_INC(s, mem_in_use, bytes);
    hbg__sim_model_delay(s, t0, s->model.alloc_ns);
  } else if (rc == HBG_E_DEVMEM) {
    hbg_device_set_native(s->dev, HBG_E_DEVMEM,
                          "sim: no free extent of %llu bytes (%llu free)",
                          (unsigned long long)span,
                          (unsigned long long)heap_free);
  }
  return rc;
}

/* Removals come before the insertion, so it never needs a new node. */
static void free_extent(hbg__sim *s, uint64_t off, uint64_t span) {
  hbg__stree *t = &s->free_ext;
  uint64_t start = off, len = span;
  hbg__snode e;
  const hbg__snode *p = hbg__stree_floor(t, off);
  if (p && p->start + p->len == off) {
    hbg__stree_remove(t, p->start, &e);
    start = e.start;
    len += e.len;
  }
  const hbg__snode *nx = hbg__stree_after(t, off);
  if (nx && off + span == nx->start) {
    hbg__stree_remove(t, nx->start, &e);
    len += e.len;
  }
  hbg__stree_insert(t, start, len, 0);
  s->heap_free += span;
}

int hbg__sim_mem_free(hbg_device *dev, hbg_devptr p) {
  hbg__sim *s = hbg_device_impl(dev);
  if (p == 0)
    return 0;
  uint64_t off;
  if (sim_off(s, p, &off) < 0)
    return HBG_E_RANGE;
  if (s->model.free_sync)
    hbg__sim_drain_all(s); /* as cudaFree synchronises the device */
  uint64_t t0 = s->model.free_ns ? hbg__now_ns() : 0;

  hbg__snode r = {0};
  pthread_rwlock_wrlock(&s->heap_lock);
  int rc = hbg__stree_remove(&s->live, off, &r) == 0 ? 0 : HBG_E_RANGE;
  pthread_rwlock_unlock(&s->heap_lock);
  if (rc < 0) {
    hbg_device_set_native(s->dev, HBG_E_RANGE,
                          "sim: mem_free of 0x%llx: not a live allocation",
                          (unsigned long long)p);
    return rc;
  }

  /* The range is unreachable now but not reusable yet: drop cached
   * verdicts before another allocation can land on it. */
  if (s->exec)
    hbg__exec_invalidate(s->exec, p, r.len);

  pthread_rwlock_wrlock(&s->heap_lock);
  free_extent(s, r.start, r.aux);
  pthread_rwlock_unlock(&s->heap_lock);
  HBG__SIM_INC(s, mem_frees, 1);
  HBG__SIM_DEC(s, mem_in_use, r.len);
  hbg__sim_model_delay(s, t0, s->model.free_ns);
  return 0;
}

/* ---------------- imported host ranges ---------------- */

/* The 256-byte aligned span an import keeps, with the gap after it. */
static uint64_t imp_lo(const hbg__range *r) {
  return r->start & ~(uint64_t)(HBG__SIM_DEV_ALIGN - 1);
}
static uint64_t imp_hi(const hbg__range *r) {
  return HBG__ALIGN_UP(r->start + r->len, (uint64_t)HBG__SIM_DEV_ALIGN) +
         HBG__SIM_DEV_ALIGN;
}

/* A device offset for `bytes` whose low 8 bits are `low` (the host
 * address's: an element aligned in the caller's memory is aligned on the
 * device), first after the last import, else in the first gap that holds
 * it. heap_lock held (write). @return 0 and *off, or HBG_E_LIMIT. */
static int imp_place(const hbg__sim *s, uint64_t low, uint64_t bytes,
                     uint64_t *off) {
  const hbg__rtab *t = &s->imports;
  uint64_t need = HBG__ALIGN_UP(low + bytes, (uint64_t)HBG__SIM_DEV_ALIGN) +
                  HBG__SIM_DEV_ALIGN;
  uint64_t room = HBG__SIM_IMP_END - HBG__SIM_IMP_BASE;
  if (low + bytes < bytes || need > room)
    return HBG_E_LIMIT;
  uint64_t at = t->n ? imp_hi(&t->v[t->n - 1]) : HBG__SIM_IMP_BASE;
  if (at <= HBG__SIM_IMP_END - need) {
    *off = at + low;
    return 0;
  }
  at = HBG__SIM_IMP_BASE;
  for (size_t i = 0; i < t->n; i++) {
    if (imp_lo(&t->v[i]) - at >= need) {
      *off = at + low;
      return 0;
    }
    at = imp_hi(&t->v[i]);
  }
  return HBG_E_LIMIT;
}

int hbg__sim_mem_import(hbg_device *dev, uint64_t addr, size_t bytes,
                        hbg_devptr *out) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!out || !addr || bytes == 0, HBG_E_INVAL);
  uint64_t n = (uint64_t)bytes;
  if (n > UINT64_MAX - addr) {
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "sim: import of host 0x%llx, %llu bytes: the "
                          "range wraps around the address space",
                          (unsigned long long)addr, (unsigned long long)n);
    return HBG_E_INVAL;
  }
  uint64_t heap = (uint64_t)(uintptr_t)s->heap;
  if (addr < heap + s->heap_bytes && heap < addr + n) {
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "sim: import of host 0x%llx, %llu bytes: it "
                          "overlaps the sim's own device memory (its heap "
                          "at 0x%llx, %llu bytes)",
                          (unsigned long long)addr, (unsigned long long)n,
                          (unsigned long long)heap,
                          (unsigned long long)s->heap_bytes);
    return HBG_E_INVAL;
  }
  int rc = 0;
  char why[200] = "";
  uint64_t off = 0;
  pthread_rwlock_wrlock(&s->heap_lock);
  for (size_t i = 0; i < s->imports.n; i++) {
    const hbg__range *r = &s->imports.v[i];
    if (addr < r->aux + r->len && r->aux < addr + n) {
      snprintf(why, sizeof why,
               "it overlaps the import of host 0x%llx, %llu bytes (device "
               "0x%llx)",
               (unsigned long long)r->aux, (unsigned long long)r->len,
               (unsigned long long)(s->tag | r->start));
      rc = HBG_E_INVAL;
      break;
    }
  }
  if (rc == 0) {
    rc = imp_place(s, addr & (HBG__SIM_DEV_ALIGN - 1), n, &off);
    if (rc < 0)
      snprintf(why, sizeof why,
               "no room in the sim's import space (%llu bytes at device "
               "offsets 0x%llx..0x%llx)",
               (unsigned long long)(HBG__SIM_IMP_END - HBG__SIM_IMP_BASE),
               (unsigned long long)HBG__SIM_IMP_BASE,
               (unsigned long long)HBG__SIM_IMP_END);
  }
  if (rc == 0)
    rc = hbg__rtab_insert(&s->imports, (hbg__range){.start = off,
                                                    .len = n,
                                                    .aux = addr});
  pthread_rwlock_unlock(&s->heap_lock);
  if (rc < 0) {
    if (why[0])
      hbg_device_set_native(dev, rc,
                            "sim: import of host 0x%llx, %llu bytes: %s",
                            (unsigned long long)addr, (unsigned long long)n,
                            why);
    else
      hbg_device_set_native(dev, rc, "sim: import of host 0x%llx: %s",
                            (unsigned long long)addr, hbg_strerror(rc));
    return rc;
  }
  *out = s->tag | off;
  return 0;
}

int hbg__sim_mem_unimport(hbg_device *dev, hbg_devptr p) {
  hbg__sim *s = hbg_device_impl(dev);
  int rc = HBG_E_INVAL;
  uint64_t len = 0;
  pthread_rwlock_wrlock(&s->heap_lock);
  if ((p & ~HBG__SIM_OFF_MASK) == s->tag) {
    ptrdiff_t i = hbg__rtab_floor(&s->imports, p & HBG__SIM_OFF_MASK);
    if (i >= 0 && s->imports.v[i].start == (p & HBG__SIM_OFF_MASK)) {
      len = s->imports.v[i].len;
      hbg__rtab_remove_at(&s->imports, (size_t)i);
      rc = 0;
    }
  }
  pthread_rwlock_unlock(&s->heap_lock);
  if (rc < 0) {
    hbg_device_set_native(dev, rc,
                          "sim: mem_unimport of 0x%llx: not the start of a "
                          "live import",
                          (unsigned long long)p);
    return rc;
  }
  /* Verdicts about these bytes must not outlive the mapping: the offsets
   * may name another import next. */
  if (s->exec)
    hbg__exec_invalidate(s->exec, p, len);
  return 0;
}
