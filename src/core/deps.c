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
  if (v[x].hi > v[t].max) /* only x joined the subtree */
    v[t].max = v[x].hi;
  return t;
}

/* Cut x (in t) short to end at hi: its key is unchanged, the maxima on the
 * path down to it are recomputed. @return 0, or -1 (a path deeper than a
 * treap of these sizes ever gets: nothing changed). */
static int shrink(hbg__ivl *v, uint32_t t, uint32_t x, uint64_t hi) {
  uint32_t path[128], n = 0;
  while (t != x) {
    if (n == HBG__ARRAY_LEN(path))
      return -1;
    path[n++] = t;
    t = before(v, x, t) ? v[t].l : v[t].r;
  }
  v[x].hi = hi;
  update(v, x);
  while (n)
    update(v, path[--n]);
  return 0;
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

#define DEAD UINT32_MAX /* entry of a node commit removed */

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
  d->rng = 0x9E3779B9u;
  d->n_hits = d->n_out = d->n_acc = d->n_dead = 0;
  hbg__map_clear(&d->bufs);
}

void hbg__deps_free(hbg__deps *d) {
  free(d->v);
  free(d->hits);
  free(d->dead);
  free(d->out);
  free(d->acc);
  hbg__map_free(&d->bufs);
  memset(d, 0, sizeof *d);
}

void hbg__deps_entry(hbg__deps *d) { d->n_acc = 0; }

int hbg__deps_add(hbg__deps *d, uint64_t buf, uint64_t lo, uint64_t len,
                  int write) {
  if (len == 0)
    return 0;
  HBG__TRY(HBG__RESERVE(d->acc, d->acc_cap, (uint64_t)d->n_acc + 1));
  uint64_t hi = lo + len < lo ? UINT64_MAX : lo + len;
  d->acc[d->n_acc++] = (hbg__dacc){.buf = buf, .lo = lo, .hi = hi,
                                   .write = write != 0};
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

/* Move the buffer's pending reads into its read tree (nodes are reused:
 * nothing is allocated). */
static void flush_reads(hbg__deps *d, hbg__dbuf *b) {
  while (b->pend) {
    uint32_t x = b->pend;
    b->pend = d->v[x].l;
    d->v[x].l = d->v[x].r = 0;
    d->v[x].max = d->v[x].hi;
    b->rroot = insert(d->v, b->rroot, x);
  }
}

int hbg__deps_infer(hbg__deps *d, const hbg_task_id *deps, uint32_t n_deps,
                    const char *who, uint32_t self) {
  if (!d->n) { /* never reset: node 0 is the empty tree */
    d->n = 1;
    d->rng = 0x9E3779B9u;
  }
  if (!d->bufs.slots)
    HBG__TRY(hbg__map_init(&d->bufs, sizeof(hbg__dbuf), 16));
  /* Each access's buffer; an access on the buffer of the one before it
   * (most do) reuses its entry. Creating an entry may grow the map and move
   * the others: those found before are then looked up again. */
  for (uint32_t i = 0; i < d->n_acc; i++) {
    hbg__dacc *a = &d->acc[i];
    if (i && a->buf == a[-1].buf) {
      a->b = a[-1].b;
      continue;
    }
    uint32_t cap = d->bufs.cap;
    a->b = hbg__map_get(&d->bufs, a->buf, 0, 1);
    HBG__RETURN_IF(!a->b, HBG_E_NOMEM);
    for (uint32_t j = 0; j < i && d->bufs.cap != cap; j++)
      d->acc[j].b = hbg__map_get(&d->bufs, d->acc[j].buf, 0, 0);
  }
  d->n_out = d->n_hits = 0;
  for (uint32_t i = 0; i < d->n_acc; i++) {
    hbg__dacc *a = &d->acc[i];
    hbg__dbuf *b = a->b;
    a->h0 = d->n_hits;
    HBG__TRY(query(d, b->wroot, a->lo, a->hi));
    a->hw = d->n_hits - a->h0;
    if (a->write) {
      flush_reads(d, b);
      HBG__TRY(query(d, b->rroot, a->lo, a->hi));
    }
    a->hits = d->n_hits - a->h0;
  }
  HBG__TRY(HBG__RESERVE(d->out, d->out_cap, (uint64_t)d->n_hits + n_deps));
  for (uint32_t j = 0; j < d->n_hits; j++)
    d->out[d->n_out++] = d->v[d->hits[j]].entry;
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
  /* Room for commit: a node per access, two per record a write overlaps
   * (the parts of it outside the write; its own node is freed after). */
  HBG__TRY(HBG__RESERVE(d->v, d->cap,
                        (uint64_t)d->n + d->n_acc + 2ull * d->n_hits));
  HBG__TRY(HBG__RESERVE(d->dead, d->dead_cap, (uint64_t)d->n_hits));
  return 0;
}

/* The records write a overlaps (found by infer) leave the buffer's trees;
 * what lies outside [lo, hi) goes back. A record two writes of the entry
 * overlap is handled once; a part put back that a later write of the entry
 * overlaps stays: its edge is redundant, never wrong. */
static void cover(hbg__deps *d, const hbg__dacc *a) {
  hbg__dbuf *b = a->b;
  for (uint32_t i = a->h0; i < a->h0 + a->hits; i++) {
    uint32_t x = d->hits[i];
    hbg__ivl old = d->v[x];
    /* handled by an earlier write of the entry: gone, or cut to outside */
    if (old.entry == DEAD || old.hi <= a->lo || a->hi <= old.lo)
      continue;
    uint32_t *root = i < a->h0 + a->hw ? &b->wroot : &b->rroot;
    /* only its start stays: cut it short where it is */
    if (old.lo < a->lo && old.hi <= a->hi && shrink(d->v, *root, x, a->lo) == 0)
      continue;
    *root = erase(d->v, *root, x);
    d->v[x].entry = DEAD;
    d->dead[d->n_dead++] = x;
    if (old.lo < a->lo)
      *root = insert(d->v, *root, node_new(d, old.lo, a->lo, old.entry));
    if (a->hi < old.hi)
      *root = insert(d->v, *root, node_new(d, a->hi, old.hi, old.entry));
  }
}

void hbg__deps_commit(hbg__deps *d, uint32_t self) {
  d->n_dead = 0;
  for (uint32_t i = 0; i < d->n_acc; i++) {
    hbg__dacc *a = &d->acc[i];
    if (a->write) {
      cover(d, a);
      a->b->wroot = insert(d->v, a->b->wroot, node_new(d, a->lo, a->hi, self));
    } else {
      uint32_t x = node_new(d, a->lo, a->hi, self);
      d->v[x].l = a->b->pend;
      a->b->pend = x;
    }
  }
  for (uint32_t i = 0; i < d->n_dead; i++)
    node_drop(d, d->dead[i]);
  d->n_acc = 0;
}
