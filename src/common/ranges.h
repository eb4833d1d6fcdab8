/* A sorted table of [start, start + len) ranges with binary search: the
 * backends' registries of device allocations and pinned host memory, the
 * core's table of live user buffers. Ranges are kept in ascending start
 * order; the callers decide whether they may overlap. Not installed. */
#ifndef HBG_COMMON_RANGES_H
#define HBG_COMMON_RANGES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg.h>

typedef struct hbg__range {
  uint64_t start;
  uint64_t len;
  uint64_t aux;   /* the owner's (the sim: reserved span, mapped length) */
  uint32_t flags; /* the owner's */
  uint32_t kind;  /* the owner's */
} hbg__range;

typedef struct hbg__rtab {
  hbg__range *v;
  size_t n, cap;
} hbg__rtab;

/* @return the index of the first range with start > key (t->n if none). */
static inline size_t hbg__rtab_upper(const hbg__rtab *t, uint64_t key) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->v[mid].start <= key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* @return the index of the last range with start <= key, or -1. */
static inline ptrdiff_t hbg__rtab_floor(const hbg__rtab *t, uint64_t key) {
  return (ptrdiff_t)hbg__rtab_upper(t, key) - 1;
}

/* Room for n ranges. @return 0 or HBG_E_NOMEM. */
static inline int hbg__rtab_reserve(hbg__rtab *t, size_t n) {
  if (n <= t->cap)
    return 0;
  size_t cap = t->cap ? t->cap : 16;
  while (cap < n)
    cap *= 2;
  hbg__range *v = realloc(t->v, cap * sizeof *v);
  if (!v)
    return HBG_E_NOMEM;
  t->v = v;
  t->cap = cap;
  return 0;
}

/* Capacity must have been reserved. */
static inline void hbg__rtab_insert_at(hbg__rtab *t, size_t i, hbg__range r) {
  memmove(t->v + i + 1, t->v + i, (t->n - i) * sizeof *t->v);
  t->v[i] = r;
  t->n++;
}

/* Insert r after every range starting at or before it.
 * @return 0 or HBG_E_NOMEM (the table is unchanged). */
static inline int hbg__rtab_insert(hbg__rtab *t, hbg__range r) {
  int rc = hbg__rtab_reserve(t, t->n + 1);
  if (rc == 0)
    hbg__rtab_insert_at(t, hbg__rtab_upper(t, r.start), r);
  return rc;
}

static inline void hbg__rtab_remove_at(hbg__rtab *t, size_t i) {
  memmove(t->v + i, t->v + i + 1, (t->n - i - 1) * sizeof *t->v);
  t->n--;
}

/* @return non-zero when [base + rel, base + rel + len) lies inside the one
 * range that holds base (a table of ranges that do not overlap), with no
 * wrap-around. */
static inline int hbg__rtab_holds(const hbg__rtab *t, uint64_t base,
                                  uint64_t rel, uint64_t len) {
  ptrdiff_t i = hbg__rtab_floor(t, base);
  if (i < 0)
    return 0;
  const hbg__range *r = &t->v[i];
  uint64_t off = base - r->start;
  return off < r->len && rel <= r->len - off && len <= r->len - off - rel;
}

static inline void hbg__rtab_free(hbg__rtab *t) {
  free(t->v);
  memset(t, 0, sizeof *t);
}

#endif
