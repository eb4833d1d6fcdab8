/* The sim heap's extent index: a treap keyed by start offset, each node
 * also knowing the longest extent in its subtree, so lookup, insertion,
 * removal and first-fit are O(log n) expected. (Sorted arrays made every
 * allocation and free move the whole table: a bind of n per-submission
 * buffers cost O(n^2).) Nodes live in one pool addressed by index; 0 is
 * the empty tree. */
#include <stdlib.h>

#include "common/util.h"
#include "device/sim/sim_internal.h"

#define NIL 0u

static uint64_t max_len(const hbg__stree *t, uint32_t x) {
  return x == NIL ? 0 : t->v[x].max_len;
}

static void pull(hbg__stree *t, uint32_t x) {
  hbg__snode *n = &t->v[x];
  uint64_t m = n->len;
  m = HBG__MAX(m, max_len(t, n->l));
  n->max_len = HBG__MAX(m, max_len(t, n->r));
}

/* Split x into starts < key (*a) and starts >= key (*b). */
static void split(hbg__stree *t, uint32_t x, uint64_t key, uint32_t *a,
                  uint32_t *b) {
  if (x == NIL) {
    *a = *b = NIL;
    return;
  }
  if (t->v[x].start < key) {
    split(t, t->v[x].r, key, &t->v[x].r, b);
    *a = x;
  } else {
    split(t, t->v[x].l, key, a, &t->v[x].l);
    *b = x;
  }
  pull(t, x);
}

/* Every start in a is below every start in b. */
static uint32_t merge(hbg__stree *t, uint32_t a, uint32_t b) {
  if (a == NIL)
    return b;
  if (b == NIL)
    return a;
  if (t->v[a].prio > t->v[b].prio) {
    t->v[a].r = merge(t, t->v[a].r, b);
    pull(t, a);
    return a;
  }
  t->v[b].l = merge(t, a, t->v[b].l);
  pull(t, b);
  return b;
}

int hbg__stree_reserve(hbg__stree *t, uint32_t n) {
  if (n < UINT32_MAX && n + 1 <= t->cap)
    return 0;
  HBG__RETURN_IF(n >= UINT32_MAX / 2, HBG_E_NOMEM);
  uint32_t cap = t->cap ? t->cap : 16;
  while (cap < n + 1)
    cap *= 2;
  hbg__snode *v = realloc(t->v, (size_t)cap * sizeof *v);
  if (!v)
    return HBG_E_NOMEM;
  if (t->cap == 0) {
    v[0] = (hbg__snode){0};
    t->used = 1;
  }
  t->v = v;
  t->cap = cap;
  return 0;
}

void hbg__stree_free(hbg__stree *t) {
  free(t->v);
  *t = (hbg__stree){0};
}

void hbg__stree_insert(hbg__stree *t, uint64_t start, uint64_t len,
                       uint64_t aux) {
  uint32_t x;
  if (t->free_head != NIL) {
    x = t->free_head;
    t->free_head = t->v[x].l;
  } else {
    x = t->used++;
  }
  /* xorshift64: priorities only need to look random */
  uint64_t r = t->seed ? t->seed : UINT64_C(0x9E3779B97F4A7C15);
  r ^= r << 13;
  r ^= r >> 7;
  r ^= r << 17;
  t->seed = r;
  t->v[x] = (hbg__snode){.start = start, .len = len, .aux = aux,
                         .max_len = len, .prio = (uint32_t)(r >> 32)};
  uint32_t a, b;
  split(t, t->root, start, &a, &b);
  t->root = merge(t, merge(t, a, x), b);
  t->n++;
}

int hbg__stree_remove(hbg__stree *t, uint64_t start, hbg__snode *out) {
  uint32_t a, m, b;
  split(t, t->root, start, &a, &b);
  split(t, b, start + 1, &m, &b);
  if (m != NIL) {
    *out = t->v[m];
    t->v[m].l = t->free_head;
    t->free_head = m;
    t->n--;
  }
  t->root = merge(t, a, b);
  return m != NIL ? 0 : -1;
}

const hbg__snode *hbg__stree_floor(const hbg__stree *t, uint64_t key) {
  const hbg__snode *best = NULL;
  for (uint32_t x = t->root; x != NIL;) {
    if (t->v[x].start <= key) {
      best = &t->v[x];
      x = t->v[x].r;
    } else {
      x = t->v[x].l;
    }
  }
  return best;
}

const hbg__snode *hbg__stree_after(const hbg__stree *t, uint64_t key) {
  const hbg__snode *best = NULL;
  for (uint32_t x = t->root; x != NIL;) {
    if (t->v[x].start > key) {
      best = &t->v[x];
      x = t->v[x].l;
    } else {
      x = t->v[x].r;
    }
  }
  return best;
}

const hbg__snode *hbg__stree_first_fit(const hbg__stree *t, uint64_t len) {
  uint32_t x = t->root;
  if (max_len(t, x) < len)
    return NULL;
  for (;;) {
    const hbg__snode *n = &t->v[x];
    if (max_len(t, n->l) >= len)
      x = n->l;
    else if (n->len >= len)
      return n;
    else
      x = n->r;
  }
}
