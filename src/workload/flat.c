/*
 * flat: N ordinary three-tensor tasks per bind over overlapping views of
 * one activation buffer, no graph, so that what a bind costs per task
 * (dependency inference above all) is measured where it dominates.
 *
 * A step copies a step-dependent window of the global buffer G over the
 * whole activation buffer A, a ring of SLOTS slots of L floats, then runs
 * N tasks, alternately
 *   ADD      [A view, A view, A slot]
 *   RMSNORM  [A view, G view (weights), A slot]; eps 1e-6
 * Task i writes slot i mod SLOTS; each A view is L floats starting at a
 * random 16-float offset inside one of the slots 2 to BACK before it, so
 * it straddles two earlier outputs (partial overlaps), and a write meets
 * the reads of its slot since the last write (WAR) and that write (WAW).
 * The views are the same in every step; the RMSNORMs keep the values
 * bounded. With explicit dependencies each task
 * names the one before it (a chain: right for any overlap); with
 * HBG_DEPS_INFERRED the emitter names none and the runtime finds them.
 */
#include <stdlib.h>

#include "common/util.h"
#include "workload/wl.h"

#define L 256u           /* floats per view and per slot */
#define SLOTS 16u        /* slots of A */
#define S (SLOTS * L)    /* floats of A */
#define BACK 4u          /* views start in one of the slots 2..BACK back */
#define GRID 16u         /* view offsets are multiples of this */
#define SHIFTS 8u        /* steps copy G[(step % SHIFTS) * L, + S) into A */

typedef struct flat_task {
  uint32_t a, b, out; /* float offsets: b in G for RMSNORM, else in A */
} flat_task;

typedef struct flat {
  uint32_t n;
  flat_task *t;
} flat;

static uint32_t next(uint64_t *s, uint32_t n) {
  *s = hbg__wl_mix(*s);
  return (uint32_t)(*s % n);
}

/* An A view for task i: it ends before slot i mod SLOTS starts (or lies in
 * the ring's last slot, which i's slot then is not). */
static uint32_t view_of(uint64_t *s, uint32_t i) {
  uint32_t back = 2 + next(s, BACK - 1);
  uint32_t slot = (i + SLOTS - back) % SLOTS;
  uint32_t at = slot * L + next(s, L / GRID) * GRID;
  return at + L > S ? S - L : at;
}

static int layout(hbg_workload *w) {
  flat *f = calloc(1, sizeof *f);
  if (!f)
    return HBG_E_NOMEM;
  w->m = f;
  f->n = w->tasks;
  f->t = calloc(f->n, sizeof *f->t);
  if (!f->t)
    return HBG_E_NOMEM;
  uint64_t s = w->seed;
  for (uint32_t i = 0; i < f->n; i++) {
    flat_task *t = &f->t[i];
    t->a = view_of(&s, i);
    t->b = i % 2 ? next(&s, SHIFTS * L / GRID) * GRID : view_of(&s, i);
    t->out = i % SLOTS * L;
  }
  w->buf[WL_BUF_G].floats = S + SHIFTS * L;
  w->buf[WL_BUF_ACT].floats = S;
  w->info.tasks_before = 1 + f->n;
  return 0;
}

static void init(hbg_workload *w) {
  hbg__wl_fill(w->buf[WL_BUF_G].host, w->buf[WL_BUF_G].floats, w->seed,
               0.5f, 1.5f);
}

static void step(hbg_workload *w, hbg__wl_em *em, uint32_t st) {
  const flat *f = w->m;
  const uint32_t IN = HBG_ACCESS_IN, OUT = HBG_ACCESS_OUT;
  hbg_tensor a[3];
  a[0] = hbg__wl_t(w, WL_BUF_G, (uint64_t)(st % SHIFTS) * L, IN, 1, WL_D(S));
  a[1] = hbg__wl_t(w, WL_BUF_ACT, 0, OUT, 1, WL_D(S));
  hbg_task_id prev = hbg__wl_task(em, HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
  hbg_scalar eps = hbg__wl_static_f32(1e-6f);
  for (uint32_t i = 0; i < f->n; i++) {
    const flat_task *t = &f->t[i];
    int norm = i % 2;
    a[0] = hbg__wl_t(w, WL_BUF_ACT, t->a, IN, 1, WL_D(L));
    a[1] = hbg__wl_t(w, norm ? WL_BUF_G : WL_BUF_ACT, t->b, IN, 1, WL_D(L));
    a[2] = hbg__wl_t(w, WL_BUF_ACT, t->out, OUT, 1, WL_D(L));
    prev = hbg__wl_task(em, norm ? HBG_KERNEL_RMSNORM : HBG_KERNEL_ADD, a, 3,
                        norm ? &eps : NULL, norm, &prev, 1);
  }
}

static void flat_free(void *m) { free(((flat *)m)->t); }

const hbg__wl_model hbg__wl_flat = {
    .name = "flat",
    .default_layers = 0,
    .layout = layout,
    .init = init,
    .step = step,
    .free = flat_free,
};
