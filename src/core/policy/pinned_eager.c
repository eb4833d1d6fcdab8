/*
 * pinned-eager: inline Submissions bump-allocated in the slot's pinned
 * arena and copied synchronously the moment they are published, into a
 * device buffer the slot retains per {full key, occurrence} (two fields).
 * A Submission that does not fit the arena goes to heap memory and is
 * uploaded at launch (a leftover, counted).
 */
#include "common/util.h"
#include "core/policy/policy.h"

/* The {key, occurrence} buffer retained by this slot. */
static int retained_buf(hbg_bind *b, uint64_t fk, uint32_t occ, uint32_t size,
                        hbg_devptr *out) {
  hbg__slot *s = b->slot;
  HBG__TRY(hbg__retained_note(s, fk, occ));
  hbg__retained *r = hbg__map_get(&s->retained, fk, occ, 1);
  HBG__RETURN_IF(!r, HBG_E_NOMEM);
  if (r->dev && r->cap >= size) {
    *out = r->dev;
    return 0;
  }
  if (r->dev) {
    hbg__mem_release(b->rt, r->dev, "retained submission buffer");
    r->dev = 0;
    r->cap = 0;
  }
  hbg_devptr d = 0;
  HBG__TRY(hbg_dev_mem_alloc(b->rt->dev, size, &d));
  b->st.dev_allocs++;
  r->dev = d;
  r->cap = size;
  *out = d;
  return 0;
}

static int eager_stage(hbg_bind *b, hbg__stage *st) {
  uint8_t *pinned = hbg__arena_alloc(&b->rt->caps, &b->slot->arena,
                                     st->sub_size);
  st->fallback = pinned == NULL;
  HBG__TRY(hbg__stage_pending(b, st, pinned));
  hbg_devptr d = 0;
  int rc = retained_buf(b, st->full_key, st->occurrence, st->sub_size, &d);
  if (rc < 0)
    return rc;
  st->sub_dev = d;
  return 0;
}

/* A pinned Submission goes to its retained buffer now; a heap one waits for
 * the leftover scan at launch. */
static int eager_published(hbg_bind *b, const hbg__stage *st) {
  if (!st || st->heap_owned)
    return 0;
  HBG__TRY(hbg__upload_nested(b, st->sub_dev, st->host, st->sub_size,
                              "submission"));
  hbg__pend_uploaded(b, &b->pend[b->n_pend - 1]);
  return 0;
}

static void eager_orchestrated(hbg_bind *b) { hbg__retained_trim(b); }

static int eager_launch(hbg_bind *b) {
  for (uint32_t i = 0; i < b->n_pend; i++) {
    hbg__pending *p = &b->pend[i];
    if (p->uploaded)
      continue;
    const hbg_win_task *e = (const hbg_win_task *)(b->win.p + p->entry_off);
    b->st.leftover++;
    HBG__TRY(hbg__upload(b, &b->st.graph, e->sub_addr, p->host, p->size,
                         "submission"));
    hbg__pend_uploaded(b, p);
  }
  return 0;
}

static void eager_fini(hbg_runtime *rt, hbg__slot *s) {
  for (uint32_t i = 0; i < s->retained.cap; i++) {
    hbg__retained *r = hbg__map_at(&s->retained, i);
    if (r && r->dev) {
      hbg__mem_release(rt, r->dev, "retained submission buffer");
      r->dev = 0;
    }
  }
}

const hbg__policy_ops hbg__policy_pinned_eager = {
    .name = "pinned-eager",
    .inline_def = 1,
    .arena = 1,
    .stage = eager_stage,
    .published = eager_published,
    .orchestrated = eager_orchestrated,
    .launch = eager_launch,
    .fini = eager_fini,
};
