/* The scheduling core (src/exec/sched_src.h) without any lock, as GPU CTAs
 * drive it: four threads pop and complete the items of a window of 20000
 * entries (every third a graph of a real Definition, random dependencies on
 * earlier entries), twelve times over. Every item runs exactly once, after
 * every item of the entries it depends on and after its node's producers; the
 * block's size is the one hbg__sched_bytes computed. Run under TSan by `make
 * tsan`. */
#include <pthread.h>
#include <sched.h>

#include <hbg/hbg.h>

#include "exec/sched_src.h"
#include "graph/graph.h"
/* Only the recorded graph of the fixture is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_exec_fixture.h"

#define N_TASKS 20000u
#define THREADS 4
#define ROUNDS 12

typedef struct world {
  hbg__sched *s;
  const hbg_img_graph *g;
  uint32_t deps[N_TASKS][3];
  uint32_t n_deps[N_TASKS];
  uint32_t items[N_TASKS];   /* items of entry i */
  uint32_t ran[N_TASKS];     /* items of entry i that ran (atomic) */
  uint32_t once[N_TASKS][8]; /* runs per item (atomic) */
  uint32_t bad;              /* ordering violations (atomic) */
} world;

static uint32_t ld(const uint32_t *p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void run(world *w, uint64_t item) {
  uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
  for (uint32_t k = 0; k < w->n_deps[i]; k++) {
    uint32_t d = w->deps[i][k];
    if (ld(&w->ran[d]) != w->items[d])
      __atomic_fetch_add(&w->bad, 1, __ATOMIC_RELAXED);
  }
  uint32_t slot = j == HBG__SCHED_NONE ? 0 : j;
  if (j != HBG__SCHED_NONE) {
    const hbg_img_def_view *v = &w->g->def;
    for (uint32_t e = v->fanin_ptr[j]; e < v->fanin_ptr[j + 1]; e++)
      if (ld(&w->once[i][v->fanin[e]]) != 1)
        __atomic_fetch_add(&w->bad, 1, __ATOMIC_RELAXED);
  }
  __atomic_fetch_add(&w->once[i][slot], 1, __ATOMIC_ACQ_REL);
  __atomic_fetch_add(&w->ran[i], 1, __ATOMIC_ACQ_REL);
}

static void *worker(void *arg) {
  world *w = arg;
  while (!hbg__sched_complete(w->s) && !ld(&w->s->failed)) {
    uint64_t item;
    if (!hbg__sched_pop(w->s, &item)) {
      sched_yield(); /* 2-core machines: let the thread with work run */
      continue;
    }
    run(w, item);
    hbg__sched_done(w->s, item);
  }
  return NULL;
}

int main(void) {
  hbg__def *d = xg_def();
  hbg_img_def_view v;
  ASSERT_OK(hbg_img_def_validate(d->image, d->size, NULL, NULL, &v));
  hbg_img_graph g;
  ASSERT_OK(hbg_img_graph_init(&g, &v, NULL, 0));
  ASSERT(g.hdr.n_nodes <= 8);

  static world w;
  w.g = &g;
  uint32_t rng = 99;
  uint64_t n_deps = 0, n_nodes = 0, n_items = 0;
  for (uint32_t i = 0; i < N_TASKS; i++) {
    rng = rng * 1664525u + 1013904223u;
    w.n_deps[i] = i ? (rng >> 8) % 4 : 0;
    if (w.n_deps[i] > 3)
      w.n_deps[i] = 3;
    for (uint32_t k = 0; k < w.n_deps[i]; k++) {
      rng = rng * 1664525u + 1013904223u;
      /* mostly recent entries: long chains and wide fronts both */
      uint32_t back = 1 + (rng >> 8) % (i < 8 ? i : 8);
      w.deps[i][k] = i - back;
    }
    n_deps += w.n_deps[i];
    w.items[i] = i % 3 == 0 ? g.hdr.n_nodes : 1;
    n_nodes += i % 3 == 0 ? g.hdr.n_nodes : 0;
    n_items += w.items[i];
  }
  uint64_t bytes = hbg__sched_bytes(N_TASKS, n_deps, n_nodes);
  uint8_t *block = NULL;
  /* races show up in some runs only: several rounds */
  for (int round = 0; round < ROUNDS; round++) {
    memset(w.ran, 0, sizeof w.ran);
    memset(w.once, 0, sizeof w.once);
    w.bad = 0;
    /* a canary past the end: the core stays inside what it asked for */
    block = aligned_alloc(8, (size_t)bytes + 64);
    ASSERT(block);
    memset(block + bytes, 0xA5, 64);
    w.s = hbg__sched_init(block, N_TASKS, n_deps, n_nodes);
    for (uint32_t i = 0; i < N_TASKS; i++) {
      uint32_t bad = 0;
      ASSERT_OK(hbg__sched_task_set(w.s, i, i % 3 == 0 ? &g : NULL, w.deps[i],
                                    w.n_deps[i], &bad));
    }
    hbg__sched_start(w.s);
    ASSERT(hbg__sched_ready(w.s) >= 1);

    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
      ASSERT_EQ(pthread_create(&th[t], NULL, worker, &w), 0);
    for (int t = 0; t < THREADS; t++)
      pthread_join(th[t], NULL);

    ASSERT_EQ(w.s->failed, 0);
    ASSERT(hbg__sched_complete(w.s));
    ASSERT_UEQ(w.s->items_done, n_items);
    ASSERT_UEQ(w.s->q_tail, w.s->n_items);
    ASSERT_UEQ(hbg__sched_ready(w.s), 0);
    ASSERT_EQ(w.bad, 0);
    for (uint32_t i = 0; i < N_TASKS; i++) {
      ASSERT_EQ(w.ran[i], w.items[i]);
      for (uint32_t j = 0; j < (i % 3 == 0 ? g.hdr.n_nodes : 1); j++)
        ASSERT_EQ(w.once[i][j], 1);
    }
    for (int k = 0; k < 64; k++)
      ASSERT_EQ(block[bytes + k], 0xA5);
    if (round + 1 < ROUNDS)
      free(block);
  }

  /* the first failure is kept, later ones dropped */
  hbg__sched_fail(w.s, HBG_E_IMG_CSR, 5, 2);
  hbg__sched_fail(w.s, HBG_E_KERNEL, 7, 1);
  ASSERT_EQ(w.s->error, HBG_E_IMG_CSR);
  ASSERT_EQ(w.s->err_task, 5);
  ASSERT_EQ(w.s->err_node, 2);

  /* a dependency on a later entry is refused */
  hbg__sched *s2 = hbg__sched_init(block, 2, 1, 0);
  uint32_t fwd = 1, bad = 0;
  ASSERT_ERR(hbg__sched_task_set(s2, 0, NULL, &fwd, 1, &bad), HBG_E_IMG_CYCLE);

  free(block);
  hbg__def_free(d);
  printf("sched_core: ok\n");
  return 0;
}
