/* Upload policies: exact bytes and copies, retention, re-upload of a changed
 * Definition, arena overflow, pipelining, the pinned-bulk block, misuse. */
#include "chain_fixture.h"
#include "common/util.h"
#include "core/core.h"
#include "test.h"

#define L 8
#define N 64

static hbg_runtime *mk(hbg_device *dev, int policy, uint64_t arena,
                       uint32_t flags) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device_handle = dev;
  cfg.arena_bytes = arena;
  cfg.flags = flags;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static const hbg__def *only_def(hbg_runtime *rt) {
  for (uint32_t i = 0; i < rt->graphs.cap; i++) {
    hbg__graph *g = hbg__map_at(&rt->graphs, i);
    if (g)
      return g->def;
  }
  T_FAIL("no definition recorded");
}

/* chain_bind, also returning the wall time from before hbg_bind_begin to
 * after hbg_bind_launch (the same clock as the bind's phases). */
static uint64_t timed_bind(chain *c, uint32_t step, hbg_bind_stats *st) {
  hbg_bind *b = NULL;
  uint64_t t0 = hbg__now_ns();
  ASSERT_OK(hbg_bind_begin(c->rt, &b));
  ASSERT_OK(chain_submit(c, b, step));
  ASSERT_OK(hbg_bind_launch(b));
  uint64_t wall = hbg__now_ns() - t0;
  ASSERT_OK(hbg_bind_wait(b));
  ASSERT_OK(hbg_bind_stats_get(b, st));
  hbg_bind_end(b);
  ASSERT_OK(chain_verify(c, step));
  return wall;
}

/* The phases are disjoint parts of [begin, launch]: upload time nested in
 * orchestration is not also host orchestration, so they fit in its wall
 * time whatever the machine's speed. */
static void expect_phases_fit(const hbg_bind_stats *st, uint64_t wall) {
  ASSERT_ULE(st->host_orch_ns + st->graph_upload_ns + st->window_upload_ns,
             wall);
  ASSERT_ULE(st->control_plane_ns, wall);
}

static void test_bytes(hbg_device *dev, int policy) {
  hbg_runtime *rt = mk(dev, policy, 0, 0);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  hbg_bind_stats st[4];
  uint64_t wall[4];
  for (uint32_t s = 0; s < 4; s++)
    wall[s] = timed_bind(&c, s, &st[s]);
  ASSERT_EQ(c.record_calls, 1);
  const hbg__def *def = only_def(rt);
  uint64_t inl = hbg__sub_size(def, 1), sub = hbg__sub_size(def, 0);
  for (uint32_t s = 0; s < 4; s++) {
    ASSERT_EQ(st[s].n_graphs, L);
    ASSERT_EQ(st[s].n_tasks, L + 2);
    ASSERT_EQ(st[s].n_recorded, s == 0);
    ASSERT_EQ(st[s].fatal, 0);
    ASSERT_EQ(st[s].leftover, 0);
    ASSERT_EQ(st[s].fallback, 0);
    expect_phases_fit(&st[s], wall[s]);
    ASSERT_EQ(st[s].h2d_copies, st[s].graph.copies + st[s].window.copies);
    ASSERT_EQ(st[s].h2d_bytes, st[s].graph.bytes + st[s].window.bytes);
  }
  hbg_bind_stats *ss = &st[3]; /* steady state */
  switch (policy) {
  case HBG_POLICY_DEFERRED:
    ASSERT_UEQ(ss->graph.bytes, L * inl);
    ASSERT_UEQ(ss->def_bytes, L * def->size); /* an inline copy per layer */
    ASSERT_EQ(ss->graph.copies, L);
    ASSERT_EQ(ss->dev_allocs, L); /* alloc per submission, every bind */
    ASSERT_EQ(ss->window.copies, 1);
    break;
  case HBG_POLICY_PINNED_EAGER:
    ASSERT_UEQ(ss->graph.bytes, L * inl);
    ASSERT_UEQ(ss->def_bytes, L * def->size);
    ASSERT_EQ(ss->graph.copies, L);
    ASSERT_GE(st[0].dev_allocs, L); /* slot 0: retained + heap + window */
    ASSERT_GE(st[1].dev_allocs, L); /* slot 1 */
    ASSERT_EQ(ss->dev_allocs, 0);   /* retained per {key, occurrence} */
    ASSERT(ss->arena_high_water >= L * inl);
    break;
  case HBG_POLICY_COALESCED:
    ASSERT_UEQ(st[0].def_bytes, def->size);
    ASSERT_EQ(st[0].graph.copies, 1);
    /* Submissions ride in the window copy; their bytes count as graph. */
    ASSERT_UEQ(ss->graph.bytes, L * sub);
    ASSERT_EQ(ss->graph.copies, 0);
    ASSERT_UEQ(ss->def_bytes, 0);
    ASSERT_EQ(ss->h2d_copies, 1);
    ASSERT_EQ(ss->window.copies, 1);
    ASSERT(ss->window.bytes < 4096);
    ASSERT_EQ(ss->dev_allocs, 0);
    break;
  case HBG_POLICY_PINNED_BULK:
    /* The same inline images as pinned-eager, packed back to back: one copy
     * of exactly their bytes, then the window. */
    ASSERT_UEQ(inl % 8, 0);
    ASSERT_UEQ(ss->graph.bytes, L * inl);
    ASSERT_UEQ(ss->def_bytes, L * def->size);
    ASSERT_EQ(ss->graph.copies, 1);
    ASSERT_EQ(ss->window.copies, 1);
    ASSERT_EQ(ss->h2d_copies, 2);
    ASSERT_GE(st[0].dev_allocs, 1); /* each slot's block, grown at launch */
    ASSERT_GE(st[1].dev_allocs, 1);
    ASSERT_EQ(ss->dev_allocs, 0);   /* retained per slot */
    ASSERT_UEQ(ss->arena_high_water, L * inl);
    for (uint32_t s = 0; s < 3; s++) /* cold binds too: one graph copy */
      ASSERT_EQ(st[s].graph.copies, 1);
    break;
  }
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
}

static void test_teardown_releases(hbg_device *dev) {
  hbg_dev_stats before = {.struct_size = sizeof before}, after = before;
  ASSERT_OK(hbg_dev_stats_get(dev, &before));
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_runtime *rt = mk(dev, p, 1 << 20, 0);
    chain c;
    ASSERT_OK(chain_create(&c, rt, L, N));
    for (uint32_t s = 0; s < 3; s++)
      ASSERT_OK(chain_bind(&c, s, NULL));
    chain_destroy(&c);
    hbg_runtime_destroy(rt);
  }
  ASSERT_OK(hbg_dev_stats_get(dev, &after));
  ASSERT_UEQ(after.mem_in_use, before.mem_in_use);
  ASSERT_UEQ(after.host_in_use, before.host_in_use);
  ASSERT_UEQ(after.mem_allocs - before.mem_allocs,
             after.mem_frees - before.mem_frees);
}

static void test_changed_definition(hbg_device *dev) {
  hbg_runtime *rt = mk(dev, HBG_POLICY_COALESCED, 0, 0);
  chain c, d;
  ASSERT_OK(chain_create(&c, rt, 3, N));
  ASSERT_OK(chain_create(&d, rt, 3, N));
  hbg_bind_stats st;
  ASSERT_OK(chain_bind(&c, 1, &st));
  uint64_t size1 = st.def_bytes;
  ASSERT(size1 > 0);
  ASSERT_OK(chain_bind(&c, 2, &st));
  ASSERT_UEQ(st.def_bytes, 0);
  /* A variant with a different static scalar: a new Definition, uploaded,
   * and the device must use it (the outputs depend on it). */
  c.variant = 3;
  ASSERT_OK(chain_bind(&c, 3, &st));
  ASSERT_EQ(c.record_calls, 2);
  ASSERT_EQ(st.n_recorded, 1);
  ASSERT_UEQ(st.def_bytes, size1);
  /* Another key with byte-identical content shares the resident copy. */
  d.key = 0xD0D0;
  ASSERT_OK(chain_bind(&d, 4, &st));
  ASSERT_EQ(st.n_recorded, 1);
  ASSERT_UEQ(st.def_bytes, 0);
  /* Back to the first variant: still resident, still right. */
  c.variant = 1;
  ASSERT_OK(chain_bind(&c, 5, &st));
  ASSERT_UEQ(st.def_bytes, 0);
  chain_destroy(&c);
  chain_destroy(&d);
  hbg_runtime_destroy(rt);
}

static void test_overflow(hbg_device *dev, int policy) {
  hbg_runtime *rt = mk(dev, policy, 4096, HBG_CFG_POISON_STAGING);
  chain c;
  /* 32 layers: their Submissions alone (128 B each) fill the 4 KiB arena */
  ASSERT_OK(chain_create(&c, rt, 32, N));
  hbg_bind_stats st[4];
  for (uint32_t s = 0; s < 4; s++)
    ASSERT_OK(chain_bind(&c, s, &st[s]));
  ASSERT(st[0].fallback > 0);
  if (policy == HBG_POLICY_PINNED_EAGER)
    ASSERT_EQ(st[0].leftover, st[0].fallback);
  if (policy == HBG_POLICY_PINNED_BULK) {
    /* overflowed images are gathered into the same single copy */
    const hbg__def *def = only_def(rt);
    ASSERT_EQ(st[0].leftover, 0);
    ASSERT_EQ(st[0].graph.copies, 1);
    ASSERT_UEQ(st[0].graph.bytes, 32 * hbg__sub_size(def, 1));
    ASSERT_EQ(st[2].graph.copies, 1);
  }
  ASSERT_EQ(st[2].fallback, 0); /* the slot's arena grew at bind start */
  ASSERT_EQ(st[2].leftover, 0);
  ASSERT_EQ(st[3].fallback, 0);
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
}

static void test_pipeline(hbg_device *dev, int policy) {
  hbg_runtime *rt = mk(dev, policy, 0, HBG_CFG_POISON_STAGING);
  chain c1, c2;
  ASSERT_OK(chain_create(&c1, rt, L, N));
  ASSERT_OK(chain_create(&c2, rt, L, N));
  for (uint32_t round = 0; round < 3; round++) {
    hbg_bind *a = NULL, *b = NULL, *x = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &a));
    ASSERT_OK(chain_submit(&c1, a, 10 + round));
    ASSERT_OK(hbg_bind_launch(a));
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT(a->slot != b->slot);
    if (policy == HBG_POLICY_DEFERRED)
      ASSERT(!a->slot->arena.base && !b->slot->arena.base);
    else
      ASSERT(a->slot->arena.base != b->slot->arena.base);
    ASSERT(a->slot->win_dev != b->slot->win_dev);
    ASSERT_ERR(hbg_bind_begin(rt, &x), HBG_E_STATE); /* both slots held */
    ASSERT_OK(chain_submit(&c2, b, 20 + round));
    ASSERT_OK(hbg_bind_wait(a));
    /* The device is done with a's slot: trash its staging; b must not care. */
    if (a->slot->arena.base)
      memset(a->slot->arena.base, 0x5A, (size_t)a->slot->arena.cap);
    ASSERT_OK(hbg_bind_launch(b));
    hbg_bind_end(a);
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_end(b);
    ASSERT_OK(chain_verify(&c1, 10 + round));
    ASSERT_OK(chain_verify(&c2, 20 + round));
  }
  chain_destroy(&c1);
  chain_destroy(&c2);
  hbg_runtime_destroy(rt);
}

/* Pinned-bulk, two binds in flight: each slot has its own block, the
 * second bind's copy never lands in the first one's, and every graph entry
 * of a window points into its own slot's block. */
static void expect_window_in_block(hbg_runtime *rt, const hbg__slot *s,
                                   uint64_t bulk_len) {
  hbg_win_hdr h;
  ASSERT_OK(hbg_buffer_read(rt, &h, s->win_dev, sizeof h));
  ASSERT_UEQ(h.magic, HBG_WIN_MAGIC);
  uint8_t *w = malloc(h.total_size);
  ASSERT(w);
  ASSERT_OK(hbg_buffer_read(rt, w, s->win_dev, h.total_size));
  const uint32_t *index = (const uint32_t *)(w + h.off_index);
  uint32_t graphs = 0;
  for (uint32_t i = 0; i < h.n_tasks; i++) {
    const hbg_win_task *e = (const hbg_win_task *)(w + index[i]);
    if (e->kind != HBG_WIN_GRAPH)
      continue;
    graphs++;
    ASSERT_UGE(e->sub_addr, s->bulk_dev);
    ASSERT_ULE(e->sub_addr + e->sub_size, s->bulk_dev + bulk_len);
    ASSERT(e->def_addr > e->sub_addr);
    ASSERT_ULE(e->def_addr + e->def_size, e->sub_addr + e->sub_size);
  }
  ASSERT_EQ(graphs, L);
  free(w);
}

static void test_bulk_in_flight(hbg_device *dev) {
  hbg_runtime *rt = mk(dev, HBG_POLICY_PINNED_BULK, 0, 0);
  chain c1, c2;
  ASSERT_OK(chain_create(&c1, rt, L, N));
  ASSERT_OK(chain_create(&c2, rt, L, N));
  for (uint32_t round = 0; round < 3; round++) {
    hbg_bind *a = NULL, *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &a));
    ASSERT_OK(chain_submit(&c1, a, 10 + round));
    ASSERT_OK(hbg_bind_launch(a));
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(chain_submit(&c2, b, 20 + round));
    ASSERT_OK(hbg_bind_launch(b));
    const hbg__slot *sa = a->slot, *sb = b->slot;
    ASSERT(sa->bulk_dev && sb->bulk_dev);
    ASSERT(sa->bulk_dev + sa->bulk_cap <= sb->bulk_dev ||
           sb->bulk_dev + sb->bulk_cap <= sa->bulk_dev);
    ASSERT_OK(hbg_bind_wait(a));
    ASSERT_OK(hbg_bind_wait(b));
    /* The chains use different buffers, so their Submissions differ; each
     * block still holds exactly what its own bind staged. */
    ASSERT_UEQ(a->bulk_len, b->bulk_len);
    ASSERT(memcmp(sa->arena.base, sb->arena.base, (size_t)a->bulk_len) != 0);
    uint8_t *got = malloc((size_t)a->bulk_len);
    ASSERT(got);
    ASSERT_OK(hbg_buffer_read(rt, got, sa->bulk_dev, a->bulk_len));
    ASSERT(memcmp(got, sa->arena.base, (size_t)a->bulk_len) == 0);
    ASSERT_OK(hbg_buffer_read(rt, got, sb->bulk_dev, b->bulk_len));
    ASSERT(memcmp(got, sb->arena.base, (size_t)b->bulk_len) == 0);
    free(got);
    expect_window_in_block(rt, sa, a->bulk_len);
    expect_window_in_block(rt, sb, b->bulk_len);
    hbg_bind_end(a);
    hbg_bind_end(b);
    ASSERT_OK(chain_verify(&c1, 10 + round));
    ASSERT_OK(chain_verify(&c2, 20 + round));
  }
  chain_destroy(&c1);
  chain_destroy(&c2);
  hbg_runtime_destroy(rt);
}

/* Trace events with one name: count. */
typedef struct name_log {
  const char *name;
  uint32_t n;
} name_log;

static void name_trace(void *user, const hbg_trace_event *ev) {
  name_log *g = user;
  if (ev->track == HBG_TRACK_UPLOAD && strcmp(ev->name, g->name) == 0)
    g->n++;
}

/* Pinned-bulk: a bind whose images outgrow its slot's block grows it at
 * launch (counted; nothing was copied yet), the next bind on that slot
 * does not; a bind rolled back before launch grows it at the next start. */
static void test_bulk_growth(hbg_device *dev) {
  hbg_runtime *rt = mk(dev, HBG_POLICY_PINNED_BULK, 0, HBG_CFG_POISON_STAGING);
  name_log g = {"bulk_grow", 0};
  ASSERT_OK(hbg_runtime_set_trace(rt, name_trace, &g));
  chain small, big;
  ASSERT_OK(chain_create(&small, rt, 2, N));
  ASSERT_OK(chain_create(&big, rt, 300, 16));
  big.key = 0xB16;
  hbg_bind_stats st;
  ASSERT_OK(chain_bind(&small, 0, &st)); /* slot 0 */
  ASSERT_OK(chain_bind(&small, 1, &st)); /* slot 1 */
  ASSERT_EQ(g.n, 2);
  const uint64_t cap0 = rt->slots[0].bulk_cap;
  g.n = 0;
  ASSERT_OK(chain_bind(&big, 2, &st)); /* slot 0: outgrows its block */
  ASSERT_EQ(g.n, 1);
  ASSERT_GE(st.dev_allocs, 1);
  ASSERT(st.graph.bytes > cap0);
  ASSERT_UGE(rt->slots[0].bulk_cap, st.graph.bytes);
  ASSERT_EQ(st.graph.copies, 1);
  const uint64_t big_bytes = st.graph.bytes;
  ASSERT_OK(chain_bind(&big, 3, &st)); /* slot 1 grows too */
  ASSERT_EQ(g.n, 2);
  g.n = 0;
  ASSERT_OK(chain_bind(&big, 4, &st)); /* slot 0 again: fits */
  ASSERT_EQ(g.n, 0);
  ASSERT_EQ(st.dev_allocs, 0);
  ASSERT_OK(chain_bind(&small, 5, &st)); /* slot 1: keeps the big block */
  ASSERT_EQ(st.dev_allocs, 0);

  /* A fresh runtime: a rolled-back bind's need sizes the block at the
   * slot's next start, so the following bind copies without growing. */
  ASSERT_OK(hbg_runtime_set_trace(rt, NULL, NULL));
  chain_destroy(&big);
  chain_destroy(&small);
  hbg_runtime_destroy(rt);
  rt = mk(dev, HBG_POLICY_PINNED_BULK, 0, 0);
  ASSERT_OK(hbg_runtime_set_trace(rt, name_trace, &g));
  ASSERT_OK(chain_create(&big, rt, 300, 16));
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b)); /* slot 0 */
  ASSERT_OK(chain_submit(&big, b, 0));
  ASSERT_UEQ(b->slot->bulk_cap, 0);
  hbg_bind_end(b); /* never launched */
  ASSERT_OK(chain_bind(&big, 1, NULL)); /* slot 1, grows at launch */
  g.n = 0;
  ASSERT_OK(hbg_bind_begin(rt, &b)); /* slot 0: grown here */
  ASSERT_UGE(b->slot->bulk_cap, big_bytes);
  ASSERT_OK(chain_submit(&big, b, 2));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  hbg_bind_end(b);
  ASSERT_OK(chain_verify(&big, 2));
  ASSERT_EQ(g.n, 0);
  ASSERT_UEQ(st.graph.bytes, big_bytes);
  chain_destroy(&big);
  hbg_runtime_destroy(rt);
}

/* A coalesced runtime that ships the window in async chunks. */
static hbg_runtime *mk_chunked(hbg_device *dev, uint64_t chunk, uint64_t arena,
                               uint32_t flags) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = HBG_POLICY_COALESCED;
  cfg.device_handle = dev;
  cfg.coalesce_chunk_bytes = chunk;
  if (arena)
    cfg.arena_bytes = arena;
  cfg.flags = flags;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static void test_chunks(hbg_device *dev) {
  hbg_runtime *rt = mk_chunked(dev, 2048, 0, HBG_CFG_POISON_STAGING);
  chain c;
  /* 32 layers: a window of several 2 KiB chunks (Submissions are 128 B) */
  ASSERT_OK(chain_create(&c, rt, 32, N));
  hbg_bind_stats st;
  for (uint32_t s = 0; s < 4; s++) {
    ASSERT_OK(chain_bind(&c, s, &st));
    /* chunks started during orchestration, then the tail and the header */
    ASSERT_GT(st.window.copies, 3);
    ASSERT_EQ(st.h2d_copies, st.window.copies + st.graph.copies);
  }
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
}

/* Trace events named "window_grow": count and total duration. */
typedef struct grow_log {
  uint32_t n;
  uint64_t ns;
} grow_log;

static void grow_trace(void *user, const hbg_trace_event *ev) {
  grow_log *g = user;
  if (ev->track == HBG_TRACK_UPLOAD && strcmp(ev->name, "window_grow") == 0) {
    g->n++;
    g->ns += ev->dur_ns;
  }
}

/* A coalesced window that outgrows its device buffer mid-bind, with chunks
 * in flight: the new buffer waits for them to land, and that wait is window
 * upload time (nested in orchestration), not host orchestration. A 4 KiB
 * arena sends the window to heap memory early; 400 layers pass the 64 KiB
 * device window. The next bind starts with both grown. */
static void test_window_growth(hbg_device *dev) {
  hbg_runtime *rt = mk_chunked(dev, 1024, 4096, 0);
  grow_log g = {0, 0};
  ASSERT_OK(hbg_runtime_set_trace(rt, grow_trace, &g));
  chain c;
  ASSERT_OK(chain_create(&c, rt, 400, 16));
  hbg_bind_stats st;
  uint64_t wall = timed_bind(&c, 0, &st);
  ASSERT_EQ(g.n, 1);
  ASSERT_GE(st.window_upload_ns, g.ns);
  ASSERT_GT(st.fallback, 0); /* the window left the arena */
  expect_phases_fit(&st, wall);
  /* bind 1 runs on the other pipeline slot, which grows once too; bind 2
   * is back on the first, already grown */
  g.n = 0;
  ASSERT_OK(chain_bind(&c, 1, &st));
  ASSERT_EQ(g.n, 1);
  ASSERT_OK(chain_bind(&c, 2, &st));
  ASSERT_EQ(g.n, 1);
  ASSERT_OK(chain_bind(&c, 3, &st));
  ASSERT_EQ(g.n, 1); /* steady state: no growth, no fallback */
  ASSERT_EQ(st.fallback, 0);
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
}

static hbg_bind *nest_bind;
static int nest_rc;
static int nested_record(hbg_recorder *rec, void *user) {
  (void)rec;
  chain *c = user;
  nest_rc = chain_submit(c, nest_bind, 0);
  return -1;
}
/* Everything that would touch a bind from inside a record callback. */
static int meddling_record(hbg_recorder *rec, void *user) {
  chain *c = user;
  hbg_bind *other = NULL;
  nest_rc = hbg_bind_begin(c->rt, &other);
  if (nest_rc == HBG_E_NESTED)
    nest_rc = hbg_bind_launch(nest_bind);
  hbg_bind_end(nest_bind); /* ignored while recording */
  return chain_record(rec, user);
}

static int empty_record(hbg_recorder *rec, void *user) {
  (void)rec;
  (void)user;
  return 0;
}

/* A callback passing on a failed hbg_record_task, after a second failed
 * call of its own replaced hbg_last_error(). */
static int bad_dep_record(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_tensor a[3] = {bt[0], bt[1], bt[2]};
  a[0].mode = HBG_ACCESS_IN;
  a[1].mode = HBG_ACCESS_IN;
  uint32_t dep = 5;
  hbg_task k = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a,
                .n_deps = 1, .deps = &dep};
  hbg_task_id id;
  int rc = hbg_record_task(rec, &k, &id);
  dep = 7;
  (void)hbg_record_task(rec, &k, &id);
  return rc;
}

static void test_misuse(hbg_device *dev) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  hbg_runtime *rt = NULL;
  ASSERT_ERR(hbg_runtime_create(&cfg, NULL), HBG_E_INVAL);
  cfg.policy = 99;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
  hbg_config_init(&cfg);
  cfg.device = "no-such-device";
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_NOTFOUND);
  cfg.struct_size = 4;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
  ASSERT(rt == NULL);
  hbg_runtime_destroy(NULL);
  hbg_bind_end(NULL);

  rt = mk(dev, HBG_POLICY_COALESCED, 0, 0);
  chain c;
  ASSERT_OK(chain_create(&c, rt, 2, N));
  hbg_bind *b = NULL;
  ASSERT_ERR(hbg_bind_begin(NULL, &b), HBG_E_INVAL);
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_STATE);
  ASSERT_ERR(hbg_submit_task(b, NULL, NULL), HBG_E_INVAL);
  hbg_task bad = {.kernel = 999};
  ASSERT_ERR(hbg_submit_task(b, &bad, NULL), HBG_E_KERNEL);
  hbg_task_id dep = 5;
  hbg_task nodep = {.kernel = HBG_KERNEL_NOP, .n_deps = 1, .deps = &dep};
  ASSERT_ERR(hbg_submit_task(b, &nodep, NULL), HBG_E_INVAL);
  hbg_tensor zero = {0};
  hbg_task badt = {.kernel = HBG_KERNEL_COPY, .n_args = 1, .args = &zero};
  ASSERT_ERR(hbg_submit_task(b, &badt, NULL), HBG_E_INVAL);

  uint32_t dims[1] = {N};
  hbg_tensor bt[3];
  hbg_tensor_contig(&bt[0], c.b[0], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&bt[1], c.bias[0], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&bt[2], c.b[1], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  uint64_t s = 0;
  hbg_graph_submit g = {.key = 77, .n_tensors = 3, .tensors = bt, .scalars = &s,
                        .n_scalars = 1, .record = nested_record, .user = &c};
  nest_bind = b;
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_RECORD);
  ASSERT_EQ(nest_rc, HBG_E_NESTED);
  /* A failed hbg_record_task the callback passed on is named in the
   * error, not only the callback's return value. */
  g.record = bad_dep_record;
  g.key = 78;
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_RECORD);
  ASSERT(strstr(hbg_last_error(), "key 78: the record callback returned -"));
  ASSERT(strstr(hbg_last_error(), "its first failed hbg_record_task: "
                                  "hbg_record_task (inner task 0): "
                                  "dependency 0 is inner task 5, not an "
                                  "earlier one"));
  g.key = 77;
  g.record = empty_record;
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_EMPTY);
  /* Neither another bind nor this bind's launch/end from a callback. */
  g.record = meddling_record;
  g.key = 79;
  nest_rc = 0;
  ASSERT_OK(hbg_submit_graph(b, &g, NULL));
  ASSERT_EQ(nest_rc, HBG_E_NESTED);
  g.record = NULL;
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_INVAL);
  g.record = chain_record;
  g.key = 78;
  ASSERT_OK(hbg_submit_graph(b, &g, NULL));
  /* Replay with a different boundary signature: an error, not a re-record. */
  uint32_t dims2[1] = {N / 2};
  hbg_tensor_contig(&bt[1], c.bias[0], 0, HBG_DTYPE_F32, 1, dims2, HBG_ACCESS_IN);
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_SIGNATURE);
  g.n_scalars = 0;
  hbg_tensor_contig(&bt[1], c.bias[0], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_SIGNATURE);
  ASSERT_EQ(c.record_calls, 2); /* keys 79 and 78, once each */
  ASSERT_EQ(hbg_bind_fatal(b), 0); /* nothing was published by the failures */
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_ERR(hbg_bind_launch(b), HBG_E_STATE);
  ASSERT_ERR(hbg_submit_task(b, &nodep, NULL), HBG_E_STATE);
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  hbg_bind_end(b); /* idempotent */
  /* A bind ended without launch rolls back; the next one works. */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit(&c, b, 1));
  hbg_bind_end(b);
  ASSERT_OK(chain_bind(&c, 2, NULL));
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
}

int main(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", NULL, &dev));
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    test_bytes(dev, p);
    test_pipeline(dev, p);
    if (p != HBG_POLICY_DEFERRED)
      test_overflow(dev, p);
  }
  test_bulk_in_flight(dev);
  test_bulk_growth(dev);
  test_changed_definition(dev);
  test_chunks(dev);
  test_window_growth(dev);
  test_misuse(dev);
  test_teardown_releases(dev);
  hbg_device_close(dev);
  printf("core upload: ok\n");
  return 0;
}
