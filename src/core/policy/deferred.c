/*
 * deferred: each Submission carries its Definition and is staged in heap
 * memory; after orchestration, per Submission one device allocation and
 * one synchronous copy; the buffers are freed when the slot is reclaimed,
 * after the bind's completion. The baseline the others are measured
 * against.
 */
#include <stdlib.h>

#include "common/util.h"
#include "core/policy/policy.h"

static void deferred_reclaim(hbg_runtime *rt, hbg__slot *s) {
  for (uint32_t i = 0; i < s->n_deferred; i++)
    hbg__mem_release(rt, s->deferred[i], "deferred submission buffer");
  s->n_deferred = 0;
}

static int deferred_stage(hbg_bind *b, hbg__stage *st) {
  return hbg__stage_pending(b, st, NULL);
}

static int deferred_launch(hbg_bind *b) {
  hbg_runtime *rt = b->rt;
  hbg__slot *s = b->slot;
  for (uint32_t i = 0; i < b->n_pend; i++) {
    hbg__pending *p = &b->pend[i];
    hbg_win_task *e = (hbg_win_task *)(b->win.p + p->entry_off);
    HBG__TRY(HBG__RESERVE(s->deferred, s->deferred_cap,
                          (uint64_t)s->n_deferred + 1));
    hbg_devptr d = 0;
    HBG__TRY(hbg_dev_mem_alloc(rt->dev, p->size, &d));
    b->st.dev_allocs++;
    s->deferred[s->n_deferred++] = d;
    e->sub_addr = d;
    e->def_addr = d + p->def_off;
    HBG__TRY(hbg__upload(b, &b->st.graph, d, p->host, p->size, "submission"));
    hbg__pend_uploaded(b, p);
  }
  return 0;
}

static void deferred_fini(hbg_runtime *rt, hbg__slot *s) {
  (void)rt;
  free(s->deferred);
  s->deferred = NULL;
  s->deferred_cap = 0;
}

const hbg__policy_ops hbg__policy_deferred = {
    .name = "deferred",
    .inline_def = 1,
    .arena = 0, /* heap staging only */
    .reclaim = deferred_reclaim,
    .stage = deferred_stage,
    .launch = deferred_launch,
    .fini = deferred_fini,
};
