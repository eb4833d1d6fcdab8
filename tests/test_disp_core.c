/* The dispatch core (src/exec/sched_src.h, hbg__disp_*) as the device
 * executor drives it, with CPU threads as its workers, each a worker of
 * LANES lanes run in turn: set-up by all threads (entries, then the
 * dependents' links by atomic exchange, counters zeroed, the entries
 * without dependencies seeded), then each thread runs its continuation or
 * waits on a ticket. A window of 20000 entries (every third a graph of a
 * real Definition, random dependencies on earlier entries), twelve times:
 * every item runs exactly once, after every item of the entries it depends
 * on and after its node's producers; every worker leaves once the window
 * is complete (the stop word, nothing pushed for it); the queue never
 * needs more than hbg__disp_slots(items) slots; continuations carry most
 * items; the dispatch operations counted are the ones the plan implies.
 * Then a failure: the first error is kept, nothing that depends on it
 * runs, every worker leaves. And the node plan itself: nodes with the same
 * fan-in row share their least one's count. Run under TSan by
 * `make tsan`. */
#include <pthread.h>
#include <sched.h>

#include <hbg/hbg.h>

#include "exec/sched_src.h"
#include "graph/graph.h"
/* Only the recorded graph of the fixture is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_exec_fixture.h"

#define N_TASKS 20000u
#define THREADS 4u
#define LANES 3u
#define ROUNDS 12

typedef struct world {
  hbg__disp d;
  const hbg_img_def_view *v;
  const hbg__dnode *plan;
  uint32_t sinks;
  uint32_t deps[N_TASKS][3];
  uint32_t n_deps[N_TASKS];
  uint32_t first_link[N_TASKS];
  uint32_t items[N_TASKS];   /* items of entry i */
  uint32_t ran[N_TASKS];     /* items of entry i that ran (atomic) */
  uint32_t once[N_TASKS][8]; /* runs per item (atomic) */
  uint32_t bad;              /* ordering violations (atomic) */
  uint64_t conts, pops;      /* items run as continuations, from tickets */
  uint64_t ops;              /* dispatch operations counted (atomic) */
  uint32_t leaves;           /* workers that left (atomic) */
  uint64_t fail_at;          /* an item that fails, or HBG__D_NONE */
  uint32_t after_fail;       /* items run after the failure (atomic) */
  pthread_barrier_t bar;
} world;

static uint32_t ld(const uint32_t *p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void add(uint32_t *p) { __atomic_fetch_add(p, 1, __ATOMIC_ACQ_REL); }

static void run(world *w, uint64_t item) {
  uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
  for (uint32_t k = 0; k < w->n_deps[i]; k++) {
    uint32_t d = w->deps[i][k];
    if (ld(&w->ran[d]) != w->items[d])
      add(&w->bad);
  }
  if (j != HBG__D_NONE) {
    const hbg_img_def_view *v = w->v;
    for (uint32_t e = v->fanin_ptr[j]; e < v->fanin_ptr[j + 1]; e++)
      if (ld(&w->once[i][v->fanin[e]]) != 1)
        add(&w->bad);
  }
  add(&w->once[i][j == HBG__D_NONE ? 0 : j]);
  add(&w->ran[i]);
}

typedef struct thr {
  world *w;
  uint32_t id;
} thr;

static void *worker(void *arg) {
  thr *t = arg;
  world *w = t->w;
  hbg__disp *d = &w->d;
  const uint32_t G = THREADS * LANES;
  /* set-up, grid-stride over every lane of every thread */
  for (uint32_t lane = 0; lane < LANES; lane++)
    for (uint32_t i = t->id * LANES + lane; i < N_TASKS; i += G) {
      hbg__dent *e = &d->ent[i];
      e->pending = w->n_deps[i];
      e->out_head = HBG__D_NONE;
      e->def = i % 3 == 0 ? w->v : NULL;
      e->plan = e->def ? w->plan : NULL;
      e->sinks_left = e->def ? w->sinks : 0;
      e->done = 0;
      e->node_base = (uint64_t)(i / 3) * w->v->hdr->n_nodes;
    }
  pthread_barrier_wait(&w->bar);
  for (uint32_t lane = 0; lane < LANES; lane++)
    for (uint32_t i = t->id * LANES + lane; i < N_TASKS; i += G) {
      for (uint32_t k = 0; k < w->n_deps[i]; k++)
        hbg__disp_link(d, w->first_link[i] + k, i, w->deps[i][k]);
      if (i % 3 == 0)
        for (uint32_t j = 0; j < w->v->hdr->n_nodes; j++)
          d->cnt[(uint64_t)(i / 3) * w->v->hdr->n_nodes + j] = 0;
    }
  for (uint64_t s = t->id; s < d->n_slots; s += THREADS)
    d->q[s] = HBG__D_EMPTY;
  pthread_barrier_wait(&w->bar);
  uint64_t ops = 0;
  for (uint32_t i = t->id; i < N_TASKS; i += THREADS)
    if (w->n_deps[i] == 0)
      hbg__disp_entry_ready(d, i, NULL, &ops);
  /* run: the continuation first, else a ticket; leave on the stop */
  uint64_t cont = HBG__D_EMPTY, conts = 0, pops = 0;
  for (;;) {
    uint64_t item = cont;
    cont = HBG__D_EMPTY;
    if (item == HBG__D_EMPTY && !hbg__disp_stopped(d)) {
      uint64_t tk = hbg__disp_ticket(d, &ops);
      while ((item = hbg__disp_poll(d, tk)) == HBG__D_EMPTY &&
             !hbg__disp_stopped(d))
        sched_yield(); /* 2-core machines: let the pusher run */
      if (item != HBG__D_EMPTY) {
        pops++;
        ops++; /* the load that handed it over, as the executor counts */
      }
    } else if (item != HBG__D_EMPTY) {
      conts++;
    }
    if (item != HBG__D_EMPTY && hbg__disp_stopped(d)) {
      add(&w->after_fail); /* dropped: nothing starts after the stop */
      item = HBG__D_EMPTY;
    }
    if (item == HBG__D_EMPTY) {
      add(&w->leaves);
      break;
    }
    if (item == w->fail_at) {
      hbg__disp_fail(d, HBG_E_KERNEL, (uint32_t)(item >> 32), (uint32_t)item,
                     &ops);
      continue;
    }
    run(w, item);
    uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
    if (j != HBG__D_NONE)
      for (uint32_t lane = 0; lane < LANES; lane++)
        hbg__disp_fanout(d, i, j, lane, LANES, &cont, &ops);
    (void)hbg__disp_item_done(d, item, &cont, &ops);
  }
  __atomic_fetch_add(&w->conts, conts, __ATOMIC_RELAXED);
  __atomic_fetch_add(&w->pops, pops, __ATOMIC_RELAXED);
  __atomic_fetch_add(&w->ops, ops, __ATOMIC_RELAXED);
  return NULL;
}

/* The dispatch operations a complete round issues, but for the queue
 * reservations (between one and one per pushed item: a batch shares
 * one): each pushed item (q_tail of them) its store, each ticket an add
 * and each served one its load; per graph entry a count per group with
 * more than one producer, per producer; per sink an add; per dependency
 * and per entry an add; one stop. */
static uint64_t expect_ops(const world *w, uint64_t n_deps, uint64_t tickets) {
  const hbg_img_def_view *v = w->v;
  uint64_t per_graph = 0;
  for (uint32_t j = 0; j < v->hdr->n_nodes; j++)
    for (uint32_t k = v->fanout_ptr[j]; k < v->fanout_ptr[j + 1]; k++) {
      uint32_t c = v->fanout[k];
      per_graph += w->plan[c].leader == c && w->plan[c].nf > 1;
    }
  per_graph += w->sinks;
  const uint64_t graphs = (N_TASKS + 2) / 3;
  return w->d.q_tail + tickets + w->pops + graphs * per_graph + n_deps +
         N_TASKS + 1;
}

/* A Definition made by hand: nodes 0 and 1 feed 2, 3 and 4 alike (one
 * group, counted at 2), 5 reads 0 alone, 6 reads 2 and 3 (a group of its
 * own), 7 reads 5 (one producer: no count). Its plan, and a worker taking
 * the items of one replay: every node once, the counts as planned. */
static void test_plan(void) {
  enum { N = 8 };
  static const uint32_t rows[N][3] = {{0}, {0}, {0, 1}, {0, 1}, {0, 1},
                                      {0}, {2, 3}, {5}};
  static const uint32_t widths[N] = {0, 0, 2, 2, 2, 1, 2, 1};
  uint32_t fip[N + 1], fi[16], fop[N + 1], fo[16], roots[2] = {0, 1};
  uint32_t e = 0;
  for (uint32_t c = 0; c < N; c++) {
    fip[c] = e;
    for (uint32_t k = 0; k < widths[c]; k++)
      fi[e++] = rows[c][k];
  }
  fip[N] = e;
  uint32_t o = 0;
  for (uint32_t p = 0; p < N; p++) {
    fop[p] = o;
    for (uint32_t c = 0; c < N; c++)
      for (uint32_t k = 0; k < widths[c]; k++)
        if (rows[c][k] == p)
          fo[o++] = c;
  }
  fop[N] = o;
  hbg_def_hdr h;
  memset(&h, 0, sizeof h);
  h.n_nodes = N;
  h.n_edges = e;
  h.n_roots = 2;
  hbg_img_def_view v;
  memset(&v, 0, sizeof v);
  v.hdr = &h;
  v.fanin_ptr = fip;
  v.fanin = fi;
  v.fanout_ptr = fop;
  v.fanout = fo;
  v.roots = roots;
  hbg__dnode pl[N];
  for (uint32_t u = 0; u < N; u++)
    hbg__disp_plan(&v, u, &pl[u]);
  static const uint32_t leader[N] = {0, 1, 2, 2, 2, 5, 6, 7};
  static const uint32_t members[N] = {1, 1, 3, 1, 1, 1, 1, 1};
  for (uint32_t u = 0; u < N; u++) {
    ASSERT_UEQ(pl[u].leader, leader[u]);
    ASSERT_UEQ(pl[u].nf, widths[u]);
    ASSERT_UEQ(pl[u].members, members[u]);
    ASSERT_UEQ(pl[u].flags, u >= 6 || u == 4 ? HBG__DN_SINK : 0u);
  }
  /* one worker, one entry: every node once, in dependency order */
  hbg__dent ent = {0};
  ent.def = &v;
  ent.plan = pl;
  ent.sinks_left = 3;
  ent.out_head = HBG__D_NONE;
  uint32_t cnt[N] = {0};
  uint64_t q[N];
  hbg__disp d;
  hbg__disp_init(&d, 1, N, &ent, NULL, cnt, q);
  for (uint32_t k = 0; k < N; k++)
    q[k] = HBG__D_EMPTY;
  uint64_t ops = 0, cont = HBG__D_EMPTY;
  hbg__disp_entry_ready(&d, 0, &cont, &ops);
  uint32_t ran[N] = {0}, order = 0, at[N];
  int done = 0;
  while (!done) {
    uint64_t item = cont;
    cont = HBG__D_EMPTY;
    if (item == HBG__D_EMPTY) {
      uint64_t tk = hbg__disp_ticket(&d, &ops);
      item = hbg__disp_poll(&d, tk);
      ASSERT(item != HBG__D_EMPTY); /* one worker: never waits */
    }
    uint32_t j = (uint32_t)item;
    ran[j]++;
    at[j] = order++;
    for (uint32_t k = 0; k < widths[j]; k++)
      ASSERT(ran[rows[j][k]] == 1 && at[rows[j][k]] < at[j]);
    hbg__disp_fanout(&d, 0, j, 0, 1, &cont, &ops);
    done = hbg__disp_item_done(&d, item, &cont, &ops);
  }
  for (uint32_t u = 0; u < N; u++)
    ASSERT_EQ(ran[u], 1);
  ASSERT_EQ(d.stop, 1);
  ASSERT_EQ(ent.done, 1);
  /* counts: group 2 by 0 and 1, 6 by 2 and 3 (3 is in group 2: 2 and 3
   * count 6 each), nothing for 5 and 7 */
  ASSERT_UEQ(cnt[2], 2);
  ASSERT_UEQ(cnt[6], 2);
  ASSERT_UEQ(cnt[3] + cnt[4] + cnt[5] + cnt[7], 0);
  printf("  plan: 8 nodes, a group of 3 counted once per producer, %llu "
         "dispatch operations for one replay\n",
         (unsigned long long)ops);
}

static void round_run(world *w, uint8_t *block, uint64_t bytes,
                      uint64_t n_deps, uint64_t n_nodes, uint64_t n_items) {
  memset(w->ran, 0, sizeof w->ran);
  memset(w->once, 0, sizeof w->once);
  w->bad = w->leaves = w->after_fail = 0;
  w->conts = w->pops = w->ops = 0;
  memset(block, 0xA5, (size_t)bytes + 64); /* garbage, and a canary */
  uint8_t *p = block;
  hbg__dent *ent = (hbg__dent *)(void *)p;
  p += N_TASKS * sizeof *ent;
  hbg__dlink *links = (hbg__dlink *)(void *)p;
  p += HBG__ALIGN_UP(n_deps * sizeof *links, 8);
  uint32_t *cnt = (uint32_t *)(void *)p;
  p += HBG__ALIGN_UP(n_nodes * 4, 8);
  uint64_t *q = (uint64_t *)(void *)p;
  hbg__disp_init(&w->d, N_TASKS, hbg__disp_slots(n_items), ent, links, cnt,
                 q);
  ASSERT_UEQ((size_t)(p - block) + w->d.n_slots * 8, bytes);
  thr t[THREADS];
  pthread_t th[THREADS];
  for (uint32_t k = 0; k < THREADS; k++) {
    t[k] = (thr){w, k};
    ASSERT_EQ(pthread_create(&th[k], NULL, worker, &t[k]), 0);
  }
  for (uint32_t k = 0; k < THREADS; k++)
    pthread_join(th[k], NULL);
  ASSERT_EQ(w->leaves, THREADS); /* every worker left */
  /* every ticket served but the ones held when the stop came */
  ASSERT_ULE(w->pops, w->d.q_head);
  ASSERT_ULE(w->d.q_head, w->pops + THREADS);
  ASSERT_ULE(w->d.q_tail, w->d.n_slots);
  for (int k = 0; k < 64; k++)
    ASSERT_EQ(block[bytes + k], 0xA5);
}

int main(void) {
  test_plan();
  hbg__def *dd = xg_def();
  hbg_img_def_view v;
  ASSERT_OK(hbg_img_def_validate(dd->image, dd->size, NULL, NULL, &v));
  ASSERT(v.hdr->n_nodes <= 8);

  static world w;
  static hbg__dnode plan[8];
  w.v = &v;
  for (uint32_t j = 0; j < v.hdr->n_nodes; j++) {
    hbg__disp_plan(&v, j, &plan[j]);
    w.sinks += (plan[j].flags & HBG__DN_SINK) != 0;
  }
  w.plan = plan;
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
    w.first_link[i] = (uint32_t)n_deps;
    n_deps += w.n_deps[i];
    w.items[i] = i % 3 == 0 ? v.hdr->n_nodes : 1;
    n_nodes += i % 3 == 0 ? v.hdr->n_nodes : 0;
    n_items += w.items[i];
  }
  uint64_t bytes = N_TASKS * sizeof(hbg__dent) +
                   HBG__ALIGN_UP(n_deps * sizeof(hbg__dlink), 8) +
                   HBG__ALIGN_UP(n_nodes * 4, 8) +
                   hbg__disp_slots(n_items) * 8;
  uint8_t *block = aligned_alloc(64, HBG__ALIGN_UP((size_t)bytes + 64, 64));
  ASSERT(block);
  ASSERT_EQ(pthread_barrier_init(&w.bar, NULL, THREADS), 0);
  /* races show up in some runs only: several rounds */
  w.fail_at = HBG__D_NONE;
  for (int round = 0; round < ROUNDS; round++) {
    round_run(&w, block, bytes, n_deps, n_nodes, n_items);
    ASSERT_EQ(w.d.failed, 0);
    ASSERT_UEQ(w.d.tasks_done, N_TASKS);
    ASSERT_UEQ(w.conts + w.pops, n_items);
    ASSERT_UEQ(w.pops, w.d.q_tail); /* every push was taken */
    ASSERT_EQ(w.after_fail, 0);
    ASSERT_EQ(w.bad, 0);
    /* what the plan implies: per pushed item a reservation and a store,
     * per ticket served an add and the load, per group count an add, per
     * sink and per dependency and per entry an add, one stop */
    const uint64_t base = expect_ops(&w, n_deps, w.d.q_head);
    ASSERT_UGE(w.ops, base + 1);
    ASSERT_ULE(w.ops, base + w.d.q_tail);
    for (uint32_t i = 0; i < N_TASKS; i++) {
      ASSERT_EQ(w.ran[i], w.items[i]);
      for (uint32_t j = 0; j < w.items[i]; j++)
        ASSERT_EQ(w.once[i][j], 1);
    }
    if (round == 0)
      printf("  %u threads x %u lanes: %llu items, %llu as continuations, "
             "%llu from tickets (%u workers)\n",
             THREADS, LANES, (unsigned long long)n_items,
             (unsigned long long)w.conts, (unsigned long long)w.pops,
             THREADS);
    ASSERT(w.conts > n_items / 4); /* chains stay on their worker */
  }

  /* An item fails halfway: its error is kept, a later failure dropped,
   * no item that depends on it runs, every worker leaves. */
  w.fail_at = (uint64_t)(N_TASKS / 2) << 32 | HBG__D_NONE; /* a task */
  ASSERT((N_TASKS / 2) % 3 != 0);
  round_run(&w, block, bytes, n_deps, n_nodes, n_items);
  ASSERT_EQ(w.d.failed, 1);
  ASSERT_EQ(w.d.error, HBG_E_KERNEL);
  ASSERT_UEQ(w.d.err_task, N_TASKS / 2);
  ASSERT_UEQ(w.d.err_node, HBG__D_NONE);
  ASSERT_EQ(w.ran[N_TASKS / 2], 0);
  ASSERT_EQ(w.bad, 0);
  ASSERT(w.d.tasks_done < N_TASKS);
  uint64_t tail = w.d.q_tail, ops = 0;
  hbg__disp_fail(&w.d, HBG_E_IMG_CSR, 7, 1, &ops);
  ASSERT_EQ(w.d.error, HBG_E_KERNEL);
  ASSERT_UEQ(w.d.q_tail, tail); /* a stop pushes nothing */
  ASSERT_UEQ(ops, 1);
  printf("  failure at entry %u: %u entries complete, %u items dropped\n",
         N_TASKS / 2, w.d.tasks_done, w.after_fail);

  pthread_barrier_destroy(&w.bar);
  free(block);
  hbg__def_free(dd);
  printf("disp_core: ok\n");
  return 0;
}
