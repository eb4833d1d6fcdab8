/*
 * Inferred dependencies between a bind's entries: interval treaps of the
 * live reads and writes (deps.h says what is kept and why).
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/deps.h"

/* ---------------- treap over [lo, hi), keyed by (lo, node) ---------------- */

static int before(const hbg__ivl *v, uint32_t a, uint32_t b) {
  return v[a].lo < v[b].lo || (v[a].lo == v[b].lo && a < b);
}

static void update(hbg__ivl *v, uint32_t t) {
  uint64_t m = v[t].hi;
  if (v[t].l && v[v[t].l].max > m)
    m = v[v[t].l].max;
  if (v[t].r && v[v[t].r].max > m)
    m = v[v[t].r].max;
  v[t].max = m;
}

static uint32_t merge(hbg__ivl *v, uint32_t a, uint32_t b) {
  if (!a || !b)
    return a ? a : b;
  if (v[a].prio >= v[b].prio) {
    v[a].r = merge(v, v[a].r, b);
    update(v, a);
    return a;
  }
  v[b].l = merge(v, a, v[b].l);
  update(v, b);
  return b;
}

/* Split t into the nodes before x and the rest. */
static void split(hbg__ivl *v, uint32_t t, uint32_t x, uint32_t *l,
                  uint32_t *r) {
  if (!t) {
    *l = *r = 0;
    return;
  }
  if (before(v, t, x)) {
    split(v, v[t].r, x, &v[t].r, r);
    update(v, t);
    *l = t;
  } else {
    split(v, v[t].l, x, l, &v[t].l);
    update(v, t);
    *r = t;
  }
}

static uint32_t insert(hbg__ivl *v, uint32_t t, uint32_t x) {
  if (!t)
    return x;
  if (v[x].prio > v[t].prio) {
    split(v, t, x, &v[x].l, &v[x].r);
    update(v, x);
    return x;
  }
  if (before(v, x, t))
    v[t].l = insert(v, v[t].l, x);
  else
    v[t].r = insert(v, v[t].r, x);
  update(v, t);
  return t;
}

/* x is in t. */
static uint32_t erase(hbg__ivl *v, uint32_t t, uint32_t x) {
  if (t == x)
    return merge(v, v[t].l, v[t].r);
  if (before(v, x, t))
    v[t].l = erase(v, v[t].l, x);
  else
    v[t].r = erase(v, v[t].r, x);
  update(v, t);
  return t;
}

static int hit(hbg__deps *d, uint32_t node) {
  HBG__TRY(HBG__RESERVE(d->hits, d->hits_cap, (uint64_t)d->n_hits + 1));
  d->hits[d->n_hits++] = node;
  return 0;
}

/* Every node of t overlapping [lo, hi) into d->hits. */
static int query(hbg__deps *d, uint32_t t, uint64_t lo, uint64_t hi) {
  const hbg__ivl *v = d->v;
  while (t && v[t].max > lo) {
    if (v[t].l)
      HBG__TRY(query(d, v[t].l, lo, hi));
    if (v[t].lo >= hi)
      return 0;
    if (v[t].hi > lo)
      HBG__TRY(hit(d, t));
    t = v[t].r;
  }
  return 0;
}

/* A node from the free chain or the array's end; room was reserved. */
static uint32_t node_new(hbg__deps *d, uint64_t lo, uint64_t hi,
                         uint32_t entry) {
  uint32_t x = d->free_list;
  if (x)
    d->free_list = d->v[x].l;
  else
    x = d->n++;
  d->rng ^= d->rng << 13;
  d->rng ^= d->rng >> 17;
  d->rng ^= d->rng << 5;
  d->v[x] = (hbg__ivl){.lo = lo, .hi = hi, .max = hi, .entry = entry,
                       .prio = d->rng};
  return x;
}

static void node_drop(hbg__deps *d, uint32_t x) {
  d->v[x].l = d->free_list;
  d->free_list = x;
}

/* ---------------- per bind ---------------- */

void hbg__deps_reset(hbg__deps *d) {
  d->n = 1;
  d->free_list = 0;
  d->wroot = d->rroot = 0;
  d->rng = 0x9E3779B9u;
  d->n_hits = d->n_out = d->n_acc = 0;
}

void hbg__deps_free(hbg__deps *d) {
  free(d->v);
  free(d->hits);
  free(d->out);
  free(d->acc);
  memset(d, 0, sizeof *d);
}

void hbg__deps_entry(hbg__deps *d) { d->n_acc = 0; }

int hbg__deps_add(hbg__deps *d, uint64_t lo, uint64_t len, int write) {
  if (len == 0)
    return 0;
  HBG__TRY(HBG__RESERVE(d->acc, d->acc_cap, (uint64_t)d->n_acc + 1));
  uint64_t hi = lo + len < lo ? UINT64_MAX : lo + len;
  d->acc[d->n_acc++] = (hbg__dacc){.lo = lo, .hi = hi, .write = write != 0};
  return 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static void sort_u32(uint32_t *p, uint32_t n) {
  if (n > 16) {
    qsort(p, n, sizeof *p, cmp_u32);
    return;
  }
  for (uint32_t i = 1; i < n; i++) {
    uint32_t x = p[i], j = i;
    for (; j && p[j - 1] > x; j--)
      p[j] = p[j - 1];
    p[j] = x;
  }
}

int hbg__deps_infer(hbg__deps *d, const hbg_task_id *deps, uint32_t n_deps,
                    const char *who, uint32_t self) {
  if (!d->n) { /* never reset: node 0 is the empty tree */
    d->n = 1;
    d->rng = 0x9E3779B9u;
  }
  d->n_out = 0;
  uint64_t split_room = 0, most_hits = 0;
  for (uint32_t i = 0; i < d->n_acc; i++) {
    hbg__dacc *a = &d->acc[i];
    d->n_hits = 0;
    HBG__TRY(query(d, d->wroot, a->lo, a->hi));
    if (a->write)
      HBG__TRY(query(d, d->rroot, a->lo, a->hi));
    a->hits = d->n_hits;
    if (a->write)
      split_room += d->n_hits + d->n_acc;
    most_hits = HBG__MAX(most_hits, d->n_hits);
    HBG__TRY(HBG__RESERVE(d->out, d->out_cap, (uint64_t)d->n_out + d->n_hits));
    for (uint32_t j = 0; j < d->n_hits; j++)
      d->out[d->n_out++] = d->v[d->hits[j]].entry;
  }
  HBG__TRY(HBG__RESERVE(d->out, d->out_cap, (uint64_t)d->n_out + n_deps));
  for (uint32_t i = 0; i < n_deps; i++)
    d->out[d->n_out++] = deps[i];
  sort_u32(d->out, d->n_out);
  uint32_t k = 0;
  for (uint32_t i = 0; i < d->n_out; i++)
    if (!k || d->out[k - 1] != d->out[i])
      d->out[k++] = d->out[i];
  d->n_out = k;
  if (k > HBG__DEPS_MAX) {
    uint32_t worst = 0;
    for (uint32_t i = 1; i < d->n_acc; i++)
      if (d->acc[i].hits > d->acc[worst].hits)
        worst = i;
    hbg__error_set("%s (entry %u): waits for %u earlier entries (inferred "
                   "and explicit), at most %u; its tensor %u (bytes "
                   "0x%llx..0x%llx, %s) overlaps %u live records",
                   who, self, k, HBG__DEPS_MAX, worst,
                   (unsigned long long)d->acc[worst].lo,
                   (unsigned long long)d->acc[worst].hi,
                   d->acc[worst].write ? "written" : "read",
                   d->acc[worst].hits);
    return HBG_E_LIMIT;
  }
  /* Room for commit: a node per access, one more per record a write
   * splits in two (records it overlaps, this entry's own included). */
  HBG__TRY(HBG__RESERVE(d->v, d->cap, (uint64_t)d->n + d->n_acc + split_room));
  HBG__TRY(HBG__RESERVE(d->hits, d->hits_cap, most_hits + d->n_acc + 1));
  return 0;
}

/* Remove from *root what [lo, hi) covers; keep the parts outside it. */
static void cover(hbg__deps *d, uint32_t *root, uint64_t lo, uint64_t hi) {
  d->n_hits = 0;
  query(d, *root, lo, hi); /* cannot fail: room reserved by infer */
  for (uint32_t i = 0; i < d->n_hits; i++) {
    uint32_t x = d->hits[i];
    hbg__ivl old = d->v[x];
    *root = erase(d->v, *root, x);
    node_drop(d, x);
    if (old.lo < lo)
      *root = insert(d->v, *root, node_new(d, old.lo, lo, old.entry));
    if (hi < old.hi)
      *root = insert(d->v, *root, node_new(d, hi, old.hi, old.entry));
  }
}

void hbg__deps_commit(hbg__deps *d, uint32_t self) {
  for (uint32_t i = 0; i < d->n_acc; i++) {
    const hbg__dacc *a = &d->acc[i];
    if (!a->write)
      d->rroot = insert(d->v, d->rroot, node_new(d, a->lo, a->hi, self));
  }
  for (uint32_t i = 0; i < d->n_acc; i++) {
    const hbg__dacc *a = &d->acc[i];
    if (!a->write)
      continue;
    cover(d, &d->wroot, a->lo, a->hi);
    cover(d, &d->rroot, a->lo, a->hi);
    d->wroot = insert(d->v, d->wroot, node_new(d, a->lo, a->hi, self));
  }
  d->n_acc = 0;
}
