/* The bounded graph cache: LRU eviction of host Definitions, resident
 * device copies and retained {key, occurrence} buffers; nothing freed that
 * a bind in flight may still read; retained occurrences a key stops using
 * released; memory flat under graph-key churn under every policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/core.h"
#include "graph_fixture.h"
#include "late_device.h"
#include "test.h"

#define N 64     /* elements per tensor */
#define KEYS 20  /* new keys per bind in the churn */
#define OUTS 24  /* output buffers per slot */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* ---- a one-node graph per key: y = x * scale(key), scale static ---- */

/* Distinct per key (distinct Definitions, distinct resident copies), except
 * keys SHARE apart, whose Definitions are byte-identical. */
#define SHARE 1000003u
static float scale_of(uint64_t key) {
  return 1.0f + (float)(key % SHARE) / 65536.0f;
}

static int records;

static int scale_record(hbg_recorder *rec, void *user) {
  uint64_t key = *(const uint64_t *)user;
  records++;
  uint32_t nt = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  if (!bt || nt != 2)
    return -1;
  hbg_tensor a[2] = {bt[0], bt[1]};
  float f = scale_of(key);
  uint32_t u;
  memcpy(&u, &f, 4);
  hbg_scalar s = {.kind = HBG_SCALAR_STATIC, .value = u};
  hbg_task t = task(HBG_KERNEL_SCALE, a, 2, &s, 1, NULL, 0);
  return hbg_record_task(rec, &t, NULL);
}

typedef struct rig {
  hbg_device *dev;
  hbg_runtime *rt;
  uint64_t x, y[64][OUTS]; /* y per slot */
  float hx[N];
  uint64_t keys[64][OUTS]; /* key written into y[slot][i] by the last bind */
} rig;

static void rig_open(rig *r, int policy, uint32_t depth, uint32_t cache_max,
                     int late, const char *opts) {
  memset(r, 0, sizeof *r);
  if (late)
    ASSERT_OK(hbg_device_open_ops(&late_ops, opts, &r->dev));
  else
    ASSERT_OK(hbg_device_open("sim", opts, &r->dev));
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device_handle = r->dev;
  cfg.pipeline_depth = depth;
  cfg.graph_cache_max = cache_max;
  cfg.arena_bytes = 256u << 10;
  ASSERT_OK(hbg_runtime_create(&cfg, &r->rt));
  ASSERT_OK(hbg_buffer_alloc(r->rt, N * 4, &r->x));
  for (uint32_t i = 0; i < N; i++)
    r->hx[i] = (float)(i % 9) - 4.0f;
  ASSERT_OK(hbg_buffer_write(r->rt, r->x, r->hx, N * 4));
  for (uint32_t s = 0; s < r->rt->depth; s++)
    for (uint32_t i = 0; i < OUTS; i++)
      ASSERT_OK(hbg_buffer_alloc(r->rt, N * 4, &r->y[s][i]));
}

static void rig_close(rig *r) {
  for (uint32_t s = 0; s < r->rt->depth; s++)
    for (uint32_t i = 0; i < OUTS; i++)
      ASSERT_OK(hbg_buffer_free(r->rt, r->y[s][i]));
  ASSERT_OK(hbg_buffer_free(r->rt, r->x));
  hbg_runtime_destroy(r->rt);
  hbg_device_close(r->dev);
}

/* Submit key into output i of the bind's slot. */
static int submit_key(rig *r, hbg_bind *b, uint64_t key, uint32_t i) {
  hbg_tensor bt[2] = {ten(r->x, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, N, 0),
                      ten(r->y[b->slot->index][i], 0, HBG_DTYPE_F32,
                          HBG_ACCESS_OUT, N, 0)};
  static uint64_t keybuf[64 * OUTS];
  uint64_t *kp = &keybuf[b->slot->index * OUTS + i];
  *kp = key;
  hbg_graph_submit g = {.key = key, .n_tensors = 2, .tensors = bt,
                        .record = scale_record, .user = kp};
  r->keys[b->slot->index][i] = key;
  return hbg_submit_graph(b, &g, NULL);
}

static void verify_slot(rig *r, uint32_t slot, uint32_t n_outs) {
  float got[N];
  for (uint32_t i = 0; i < n_outs; i++) {
    ASSERT_OK(hbg_buffer_read(r->rt, got, r->y[slot][i], N * 4));
    float s = scale_of(r->keys[slot][i]);
    for (uint32_t j = 0; j < N; j++)
      if (got[j] != r->hx[j] * s)
        T_FAIL("slot %u out %u key %llu [%u]: %g != %g", slot, i,
               (unsigned long long)r->keys[slot][i], j, (double)got[j],
               (double)(r->hx[j] * s));
  }
}

static uint64_t dev_in_use(hbg_device *dev) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  return st.mem_in_use;
}

static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (!f)
    return 0;
  if (fscanf(f, "%lu %lu", &size, &res) != 2)
    res = 0;
  fclose(f);
  return (uint64_t)res * 4096;
}

/* ---- churn: KEYS new keys per bind, depth binds in flight ---- */

typedef struct pend {
  hbg_bind *b;
  uint32_t outs;
} pend;

static void finish(rig *r, pend *p, uint64_t *evicted) {
  ASSERT_OK(hbg_bind_wait(p->b));
  hbg_bind_stats st;
  ASSERT_OK(hbg_bind_stats_get(p->b, &st));
  ASSERT_EQ(st.device_status, 0);
  *evicted += st.n_evicted;
  uint32_t slot = p->b->slot->index;
  hbg_bind_end(p->b);
  verify_slot(r, slot, p->outs);
  p->b = NULL;
}

static void churn(int policy, uint32_t depth, uint32_t binds, int late) {
  const uint32_t cache_max = 64;
  rig r;
  rig_open(&r, policy, depth, cache_max, late, "mem=32M");
  pend inflight[64];
  memset(inflight, 0, sizeof inflight);
  uint64_t next_key = 1, evicted = 0;
  /* warm-up: the cache fills after cache_max / KEYS binds; a few more for
   * the pipeline slots and the allocator to settle */
  const uint32_t warm = cache_max / KEYS + 2 * depth + 4;
  uint64_t mem_warm = 0, rss_warm = 0, mem_max = 0, rss_max = 0;
  for (uint32_t i = 0; i < binds; i++) {
    pend *p = &inflight[i % depth];
    if (p->b)
      finish(&r, p, &evicted); /* the slot's previous bind */
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(r.rt, &b));
    /* KEYS new keys, some of them twice (a second occurrence) */
    uint32_t o = 0;
    for (uint32_t k = 0; k < KEYS; k++) {
      uint64_t key = next_key++;
      ASSERT_OK(submit_key(&r, b, key, o++));
      if (k % 5 == 0 && o < OUTS)
        ASSERT_OK(submit_key(&r, b, key, o++));
    }
    ASSERT_OK(hbg_bind_launch(b));
    p->b = b;
    p->outs = o;
    ASSERT_ULE(r.rt->graphs.count, cache_max);
    if (i == warm) {
      mem_warm = dev_in_use(r.dev);
      rss_warm = rss_bytes();
    } else if (i > warm) {
      mem_max = HBG__MAX(mem_max, dev_in_use(r.dev));
      rss_max = HBG__MAX(rss_max, rss_bytes());
    }
  }
  for (uint32_t i = 0; i < depth; i++)
    if (inflight[i].b)
      finish(&r, &inflight[i], &evicted);
  if (late)
    ASSERT_UEQ(late_state.held_total, binds);
  /* every key past the first cache_max evicted one */
  ASSERT_UEQ(evicted, next_key - 1 - cache_max);
  ASSERT_ULE(mem_max, mem_warm + (64u << 10));
  if (!SANITIZED)
    ASSERT_ULE(rss_max, rss_warm + (2u << 20));
  printf("churn %-12s depth %u%s: %u binds, %llu keys, %llu evicted, device "
         "%llu -> max %llu B, rss %llu -> max %llu KiB\n",
         hbg_policy_name(policy), depth, late ? " late" : "", binds,
         (unsigned long long)(next_key - 1), (unsigned long long)evicted,
         (unsigned long long)mem_warm, (unsigned long long)mem_max,
         (unsigned long long)rss_warm >> 10,
         (unsigned long long)rss_max >> 10);
  rig_close(&r);
}

/* ---- LRU order ---- */

static void one_bind(rig *r, const uint64_t *keys, uint32_t n,
                     hbg_bind_stats *st) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(r->rt, &b));
  for (uint32_t i = 0; i < n; i++)
    ASSERT_OK(submit_key(r, b, keys[i], i));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  ASSERT_OK(hbg_bind_stats_get(b, st));
  uint32_t slot = b->slot->index;
  hbg_bind_end(b);
  verify_slot(r, slot, n);
}

static void test_lru(int policy) {
  rig r;
  rig_open(&r, policy, 2, 4, 0, NULL);
  hbg_bind_stats st;
  const uint64_t abcd[4] = {1, 2, 3, 4};
  records = 0;
  one_bind(&r, abcd, 4, &st);
  ASSERT_EQ(records, 4);
  ASSERT_EQ(st.n_evicted, 0);
  const uint64_t a[1] = {1};
  one_bind(&r, a, 1, &st); /* 1 is now the most recent; 2 the least */
  ASSERT_EQ(records, 4);
  const uint64_t e[1] = {5};
  one_bind(&r, e, 1, &st);
  ASSERT_EQ(records, 5);
  ASSERT_EQ(st.n_evicted, 1);
  ASSERT_EQ(r.rt->graphs.count, 4);
  one_bind(&r, a, 1, &st); /* still cached */
  ASSERT_EQ(records, 5);
  ASSERT_EQ(st.n_evicted, 0);
  const uint64_t b2[1] = {2};
  one_bind(&r, b2, 1, &st); /* evicted: recorded again, evicting 3 */
  ASSERT_EQ(records, 6);
  ASSERT_EQ(st.n_evicted, 1);
  /* more keys in one bind than the cache holds: still right */
  const uint64_t many[10] = {10, 11, 12, 13, 14, 15, 16, 17, 10, 11};
  records = 0;
  one_bind(&r, many, 10, &st);
  ASSERT_EQ(records, 10); /* 10 and 11 were evicted before their reuse */
  ASSERT_EQ(st.n_evicted, 10);
  rig_close(&r);
}

/* ---- coalesced: a resident copy shared by two keys goes with the last ---- */

static void test_resident_shared(void) {
  rig r;
  rig_open(&r, HBG_POLICY_COALESCED, 2, 2, 0, NULL);
  hbg_bind_stats st;
  /* keys 1 and 1 + SHARE (called 62 below) have byte-identical
   * Definitions */
  const uint64_t k[2] = {1, 1 + SHARE}, k62[1] = {1 + SHARE}, k3[1] = {3},
                 k45[2] = {4, 5};
  one_bind(&r, k, 2, &st); /* slot 0 */
  ASSERT_EQ(r.rt->resident.count, 1);
  ASSERT_GT(st.def_bytes, 0);
  one_bind(&r, k62, 1, &st); /* slot 1 */
  uint64_t with = dev_in_use(r.dev);
  uint64_t def_size = 0;
  for (uint32_t i = 0; i < r.rt->graphs.cap; i++) {
    hbg__graph *g = hbg__map_at(&r.rt->graphs, i);
    if (g)
      def_size = g->def->size;
  }
  one_bind(&r, k3, 1, &st); /* evicts 1: 62 still holds the copy */
  ASSERT_EQ(st.n_evicted, 1);
  ASSERT_EQ(r.rt->resident.count, 2);
  one_bind(&r, k62, 1, &st);
  ASSERT_UEQ(st.def_bytes, 0); /* nothing uploaded: still resident */
  one_bind(&r, k45, 2, &st); /* evicts 3 and 62: both copies go */
  ASSERT_EQ(st.n_evicted, 2);
  ASSERT_EQ(r.rt->resident.count, 2);
  /* retired until that bind's slot is reclaimed */
  ASSERT_EQ(r.rt->n_retired, 2);
  hbg_bind *b = NULL;
  for (uint32_t i = 0; i < 2; i++) {
    ASSERT_OK(hbg_bind_begin(r.rt, &b));
    hbg_bind_end(b);
  }
  ASSERT_EQ(r.rt->n_retired, 0);
  /* resident now: 4 and 5, against the shared one before */
  ASSERT_UEQ(dev_in_use(r.dev), with + def_size);
  rig_close(&r);
}

/* ---- pinned-eager: occurrences a key stops using are released ---- */

static uint32_t retained_of(const hbg__slot *s) { return s->retained.count; }

static void test_occurrences_trimmed(void) {
  rig r;
  rig_open(&r, HBG_POLICY_PINNED_EAGER, 2, 8, 0, NULL);
  hbg_bind_stats st;
  const uint64_t five[5] = {7, 7, 7, 7, 7};
  one_bind(&r, five, 5, &st); /* slot 0 */
  one_bind(&r, five, 5, &st); /* slot 1 */
  ASSERT_EQ(retained_of(&r.rt->slots[0]), 5);
  ASSERT_EQ(retained_of(&r.rt->slots[1]), 5);
  uint64_t mem5 = dev_in_use(r.dev);
  one_bind(&r, five, 2, &st); /* slot 0: two occurrences */
  ASSERT_EQ(retained_of(&r.rt->slots[0]), 2);
  one_bind(&r, five, 1, &st); /* slot 1: one */
  ASSERT_EQ(retained_of(&r.rt->slots[1]), 1);
  ASSERT_UEQ(st.dev_allocs, 0); /* the kept one is reused */
  ASSERT(dev_in_use(r.dev) < mem5);
  one_bind(&r, five, 5, &st); /* slot 0: back to five */
  ASSERT_EQ(retained_of(&r.rt->slots[0]), 5);
  rig_close(&r);
}

/* ---- eviction while the evicted graph's bind is in flight ---- */

/* Bind A uses keys 1..4 and is launched, but the late device has not run
 * it yet; bind B (other slot) evicts all four. Their device memory must
 * outlive A: the late launch finds it intact and A computes right. */
static void test_evict_in_flight(int policy) {
  rig r;
  rig_open(&r, policy, 2, 4, 1, "mem=8M");
  hbg_bind *a = NULL, *b = NULL;
  ASSERT_OK(hbg_bind_begin(r.rt, &a));
  for (uint32_t i = 0; i < 4; i++)
    ASSERT_OK(submit_key(&r, a, 1 + i, i));
  ASSERT_OK(hbg_bind_launch(a));
  uint64_t held = dev_in_use(r.dev);
  ASSERT_OK(hbg_bind_begin(r.rt, &b));
  /* new keys, and reuse the memory the evicted graphs had, if freed */
  for (uint32_t i = 0; i < 8; i++)
    ASSERT_OK(submit_key(&r, b, 100 + i, i));
  hbg_bind_stats st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  ASSERT_EQ(st.n_evicted, 8); /* 1..4, then 100..103 */
  /* per-key device memory (pinned-bulk and deferred have none) is held for
   * a (and for b itself) */
  if (policy == HBG_POLICY_PINNED_EAGER || policy == HBG_POLICY_COALESCED)
    ASSERT_GT(r.rt->n_retired, 0);
  ASSERT(dev_in_use(r.dev) >= held);
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(a));
  hbg_bind_end(a);
  verify_slot(&r, 0, 4);
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  verify_slot(&r, 1, 8);
  /* both slots reclaimed: everything retired is freed */
  hbg_bind *c = NULL;
  ASSERT_OK(hbg_bind_begin(r.rt, &c));
  hbg_bind_end(c);
  ASSERT_OK(hbg_bind_begin(r.rt, &c));
  hbg_bind_end(c);
  ASSERT_EQ(r.rt->n_retired, 0);
  rig_close(&r);
}

static void test_config(void) {
  hbg_config cfg;
  unsetenv("HBG_GRAPH_CACHE_MAX");
  hbg_config_init(&cfg);
  ASSERT_EQ(cfg.graph_cache_max, 256);
  setenv("HBG_GRAPH_CACHE_MAX", "12", 1);
  hbg_config_init(&cfg);
  ASSERT_EQ(cfg.graph_cache_max, 12);
  ASSERT(cfg.env_invalid == NULL);
  /* 0 and non-numbers are errors, not the default */
  static const char *const bad[] = {"0", "-1", "many", "4294967296"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("HBG_GRAPH_CACHE_MAX", bad[i], 1);
    hbg_config_init(&cfg);
    ASSERT_STREQ(cfg.env_invalid, "HBG_GRAPH_CACHE_MAX");
    ASSERT(strstr(hbg_last_error(), "HBG_GRAPH_CACHE_MAX") != NULL);
  }
  unsetenv("HBG_GRAPH_CACHE_MAX");
  hbg_config_init(&cfg);
  cfg.graph_cache_max = 0; /* 0 = the default */
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_EQ(rt->graph_max, 256);
  hbg_runtime_destroy(rt);
}

int main(void) {
  test_config();
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    test_lru(p);
    test_evict_in_flight(p);
  }
  test_resident_shared();
  test_occurrences_trimmed();
  const char *e = getenv("HBG_TEST_CHURN_BINDS");
  /* 2,000 binds; fewer under the sanitizers (TSan is ~30x slower) */
  uint32_t binds = e ? (uint32_t)atoi(e) : SANITIZED ? 300 : 2000;
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    churn(p, 1, binds, 0);
    churn(p, 2, binds, 0);
    churn(p, 2, binds / 3, 1);
  }
  printf("core_cache: ok\n");
  return 0;
}
