/* The policy ops table and its contract with bind.c: every hbg_policy has
 * an entry with a stage hook and its name; a runtime uses its policy's
 * entry; bind.c calls the hooks in the documented order; a stage that
 * fails is undone (pending record, heap staging, heap and arena claims)
 * without a latch; a failing published hook latches. The contract is
 * checked with a probe policy that wraps each real policy: a policy is an
 * ops table, so a test can write one. */
#include "chain_fixture.h"
#include "core/policy/policy.h"
#include "test.h"

#define L 3
#define N 32

static const hbg__policy_ops *base;
static char trail[256];
static size_t n_trail;
static int fail_stage, fail_published;

static void mark(char c) {
  if (n_trail + 1 < sizeof trail) {
    trail[n_trail++] = c;
    trail[n_trail] = 0;
  }
}

static void trail_clear(void) {
  n_trail = 0;
  trail[0] = 0;
}

static void p_reclaim(hbg_runtime *rt, hbg__slot *s) {
  mark('R');
  if (base->reclaim)
    base->reclaim(rt, s);
}

static int p_begin(hbg_bind *b) {
  mark('B');
  return base->begin ? base->begin(b) : 0;
}

static int p_window_grow(hbg_bind *b, uint64_t len) {
  return base->window_grow ? base->window_grow(b, len) : 0;
}

static void p_window_moved(hbg_bind *b, hbg_devptr from, hbg_devptr to) {
  if (base->window_moved)
    base->window_moved(b, from, to);
}

static int p_stage(hbg_bind *b, hbg__stage *st) {
  mark('S');
  int rc = base->stage(b, st);
  if (rc == 0 && fail_stage)
    return HBG_E_NOMEM; /* after the real policy staged everything */
  return rc;
}

static int p_published(hbg_bind *b, const hbg__stage *st) {
  mark(st ? 'g' : 't');
  int rc = base->published ? base->published(b, st) : 0;
  if (rc == 0 && st && fail_published)
    return HBG_E_DEVICE;
  return rc;
}

static void p_orchestrated(hbg_bind *b) {
  mark('O');
  if (base->orchestrated)
    base->orchestrated(b);
}

static int p_launch(hbg_bind *b) {
  mark('L');
  return base->launch ? base->launch(b) : 0;
}

static void p_fini(hbg_runtime *rt, hbg__slot *s) {
  mark('F');
  if (base->fini)
    base->fini(rt, s);
}

static hbg__policy_ops probe_of(const hbg__policy_ops *b) {
  hbg__policy_ops p = {.name = b->name,
                       .inline_def = b->inline_def,
                       .arena = b->arena,
                       .reclaim = p_reclaim,
                       .begin = p_begin,
                       .window_grow = p_window_grow,
                       .window_moved = p_window_moved,
                       .stage = p_stage,
                       .published = p_published,
                       .orchestrated = p_orchestrated,
                       .launch = p_launch,
                       .fini = p_fini};
  return p;
}

static void test_table(void) {
  for (int i = 0; i < HBG_POLICY__COUNT; i++) {
    const hbg__policy_ops *ops = hbg__policies[i];
    ASSERT(ops != NULL);
    ASSERT(ops->stage != NULL); /* the one required hook */
    ASSERT(strcmp(hbg_policy_name(i), ops->name) == 0);
    int back = -1;
    ASSERT_OK(hbg_policy_parse(ops->name, &back));
    ASSERT_EQ(back, i);
  }
}

static hbg_runtime *mk(int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device = "sim";
  cfg.arena_bytes = 64 << 10;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT(rt->ops == hbg__policies[policy]);
  return rt;
}

static void test_contract(int policy) {
  base = hbg__policies[policy];
  const hbg__policy_ops probe = probe_of(base);
  hbg_runtime *rt = mk(policy);
  rt->ops = &probe;
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));

  /* Hook order of a bind: head task, L layers, tail task. */
  for (uint32_t step = 0; step < 3; step++) {
    trail_clear();
    ASSERT_OK(chain_bind(&c, step, NULL));
    if (strcmp(trail, "RBtSgSgSgtOL") != 0)
      T_FAIL("%s step %u: hooks %s", base->name, step, trail);
  }

  /* A stage that fails after the policy staged: nothing of it stays. */
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task_id prev;
  ASSERT_OK(chain_submit_head(&c, b, &prev));
  ASSERT_OK(chain_submit_layer(&c, b, 3, 0, &prev));
  const uint64_t heap0 = b->heap_used, arena0 = b->slot->arena.used;
  const uint64_t bulk0 = b->bulk_len, win0 = b->win.len;
  const uint32_t pend0 = b->n_pend, tasks0 = b->n_tasks;
  const uint64_t fallback0 = b->st.fallback;
  fail_stage = 1;
  hbg_task_id p = prev;
  ASSERT_ERR(chain_submit_layer(&c, b, 3, 1, &p), HBG_E_NOMEM);
  fail_stage = 0;
  ASSERT_EQ(hbg_bind_fatal(b), 0);
  ASSERT_UEQ(b->heap_used, heap0);
  ASSERT_UEQ(b->slot->arena.used, arena0);
  ASSERT_UEQ(b->bulk_len, bulk0);
  ASSERT_UEQ(b->win.len, win0);
  ASSERT_UEQ(b->n_pend, pend0);
  ASSERT_UEQ(b->n_tasks, tasks0);
  ASSERT_UEQ(b->st.fallback, fallback0);
  for (uint32_t l = 1; l < L; l++)
    ASSERT_OK(chain_submit_layer(&c, b, 3, l, &prev));
  ASSERT_OK(chain_submit_tail(&c, b, prev));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(chain_verify(&c, 3));

  /* A published hook that fails: the entry is in the window, so the bind
   * is latched and never launched. */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit_head(&c, b, &prev));
  fail_published = 1;
  ASSERT_ERR(chain_submit_layer(&c, b, 4, 0, &prev), HBG_E_DEVICE);
  fail_published = 0;
  ASSERT_UEQ(b->n_tasks, 2);
  ASSERT_EQ(hbg_bind_fatal(b), HBG_E_DEVICE);
  ASSERT_ERR(hbg_bind_launch(b), HBG_E_FATAL);
  hbg_bind_end(b);
  ASSERT_OK(chain_bind(&c, 5, NULL));

  chain_destroy(&c);
  trail_clear();
  hbg_runtime_destroy(rt);
  /* teardown: per slot, the final reclaim then the policy's fini */
  if (strcmp(trail, "RFRF") != 0)
    T_FAIL("%s teardown: hooks %s", base->name, trail);
}

int main(void) {
  test_table();
  for (int p = 0; p < HBG_POLICY__COUNT; p++)
    test_contract(p);
  printf("core_policy: ok\n");
  return 0;
}
