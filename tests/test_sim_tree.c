/* The sim heap's extent treap: floor / after / first-fit against a brute
 * force reference under random inserts and removals, subtree maxima kept
 * right, depth logarithmic (the sorted arrays it replaces cost O(n) per
 * allocation and free, O(n^2) for a deferred bind of n submissions), and
 * the heap through it: a deferred-like pattern of many same-size buffers
 * freed in address order while another set stays live. */
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg_device.h>

#include "device/sim/sim_internal.h"
#include "test.h"

#define MAXN 4096

typedef struct ref {
  uint64_t start[MAXN], len[MAXN];
  uint32_t n;
} ref;

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return rnd_state;
}

static int ref_find(const ref *r, uint64_t start) {
  for (uint32_t i = 0; i < r->n; i++)
    if (r->start[i] == start)
      return (int)i;
  return -1;
}

/* Check every node: BST order, max_len, and return the depth. */
static uint32_t check(const hbg__stree *t, uint32_t x, uint64_t lo,
                      uint64_t hi, uint32_t *count) {
  if (x == 0)
    return 0;
  const hbg__snode *n = &t->v[x];
  ASSERT(n->start >= lo && n->start < hi);
  uint64_t m = n->len;
  if (n->l)
    m = t->v[n->l].max_len > m ? t->v[n->l].max_len : m;
  if (n->r)
    m = t->v[n->r].max_len > m ? t->v[n->r].max_len : m;
  ASSERT_UEQ(n->max_len, m);
  (*count)++;
  uint32_t dl = check(t, n->l, lo, n->start, count);
  uint32_t dr = check(t, n->r, n->start + 1, hi, count);
  return 1 + (dl > dr ? dl : dr);
}

static uint32_t log2_up(uint32_t n) {
  uint32_t l = 0;
  while ((1u << l) < n)
    l++;
  return l;
}

static void test_against_reference(void) {
  static ref r;
  hbg__stree t = {0};
  for (uint32_t step = 0; step < 40000; step++) {
    uint64_t op = rnd() % 8;
    if (op < 4 && r.n < MAXN) {
      uint64_t s = rnd() % 100000;
      if (ref_find(&r, s) >= 0)
        continue;
      uint64_t len = 1 + rnd() % 5000;
      ASSERT_OK(hbg__stree_reserve(&t, t.n + 1));
      hbg__stree_insert(&t, s, len, s ^ len);
      r.start[r.n] = s;
      r.len[r.n++] = len;
    } else if (op < 6 && r.n) {
      uint32_t i = (uint32_t)(rnd() % r.n);
      hbg__snode out;
      ASSERT_OK(hbg__stree_remove(&t, r.start[i], &out));
      ASSERT_UEQ(out.start, r.start[i]);
      ASSERT_UEQ(out.len, r.len[i]);
      ASSERT_UEQ(out.aux, r.start[i] ^ r.len[i]);
      r.start[i] = r.start[--r.n];
      r.len[i] = r.len[r.n];
    } else {
      uint64_t key = rnd() % 100000, want = 1 + rnd() % 6000;
      const hbg__snode *f = hbg__stree_floor(&t, key);
      const hbg__snode *a = hbg__stree_after(&t, key);
      const hbg__snode *ff = hbg__stree_first_fit(&t, want);
      int64_t bf = -1, ba = -1, bff = -1;
      for (uint32_t i = 0; i < r.n; i++) {
        int64_t s = (int64_t)r.start[i];
        if (r.start[i] <= key && s > bf)
          bf = s;
        if (r.start[i] > key && (ba < 0 || s < ba))
          ba = s;
        if (r.len[i] >= want && (bff < 0 || s < bff))
          bff = s;
      }
      ASSERT_EQ(f ? (int64_t)f->start : -1, bf);
      ASSERT_EQ(a ? (int64_t)a->start : -1, ba);
      ASSERT_EQ(ff ? (int64_t)ff->start : -1, bff);
    }
    ASSERT_UEQ(hbg__stree_remove(&t, 100000 + 7, &(hbg__snode){0}), -1);
    if (step % 997 == 0) {
      uint32_t count = 0;
      check(&t, t.root, 0, UINT64_MAX, &count);
      ASSERT_EQ(count, r.n);
      ASSERT_EQ(t.n, r.n);
    }
  }
  hbg__stree_free(&t);
}

/* Ascending inserts (a sorted array's best case, a plain BST's worst):
 * depth stays logarithmic. */
static void test_depth(void) {
  hbg__stree t = {0};
  const uint32_t n = 1u << 16;
  ASSERT_OK(hbg__stree_reserve(&t, n));
  for (uint32_t i = 0; i < n; i++)
    hbg__stree_insert(&t, (uint64_t)i * 64, 64, 0);
  uint32_t count = 0, d = check(&t, t.root, 0, UINT64_MAX, &count);
  ASSERT_EQ(count, n);
  ASSERT_LE(d, 4 * log2_up(n));
  /* remove the lower half in address order, as a slot's reclaim does */
  for (uint32_t i = 0; i < n / 2; i++) {
    hbg__snode out;
    ASSERT_OK(hbg__stree_remove(&t, (uint64_t)i * 64, &out));
  }
  count = 0;
  d = check(&t, t.root, 0, UINT64_MAX, &count);
  ASSERT_EQ(count, n / 2);
  ASSERT_LE(d, 4 * log2_up(n));
  hbg__stree_free(&t);
}

/* Two slots' worth of per-submission buffers, one freed and reallocated
 * in address order while the other stays: the free extents coalesce back
 * into one, and the heap's counters agree. */
static void test_heap_pattern(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", "mem=64M", &dev));
  hbg__sim *s = hbg_device_impl(dev);
  enum { K = 2000 };
  static hbg_devptr a[K], b[K];
  for (int i = 0; i < K; i++)
    ASSERT_OK(hbg_dev_mem_alloc(dev, 13000, &a[i]));
  for (int i = 0; i < K; i++)
    ASSERT_OK(hbg_dev_mem_alloc(dev, 13000, &b[i]));
  hbg__sim_info in;
  for (int round = 0; round < 4; round++) {
    hbg_devptr *x = round % 2 ? b : a;
    for (int i = 0; i < K; i++)
      ASSERT_OK(hbg_dev_mem_free(dev, x[i]));
    ASSERT_OK(hbg__sim_get_info(s, &in));
    ASSERT_EQ(in.live_allocs, K);
    ASSERT_LE(in.free_extents, 2); /* the freed run merged into one */
    for (int i = 0; i < K; i++)
      ASSERT_OK(hbg_dev_mem_alloc(dev, 13000, &x[i]));
    /* first fit: the freed run is reused, in the same order */
    for (int i = 1; i < K; i++)
      ASSERT(x[i] > x[i - 1]);
  }
  for (int i = 0; i < K; i++) {
    ASSERT_OK(hbg_dev_mem_free(dev, a[i]));
    ASSERT_OK(hbg_dev_mem_free(dev, b[i]));
  }
  ASSERT_OK(hbg__sim_get_info(s, &in));
  ASSERT_EQ(in.live_allocs, 0);
  ASSERT_EQ(in.free_extents, 1);
  ASSERT_UEQ(in.free_bytes, in.mem_bytes);
  ASSERT_ERR(hbg_dev_mem_free(dev, a[0]), HBG_E_RANGE); /* double free */
  hbg_device_close(dev);
}

int main(void) {
  test_against_reference();
  test_depth();
  test_heap_pattern();
  printf("sim_tree: ok\n");
  return 0;
}
