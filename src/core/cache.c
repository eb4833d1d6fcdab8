/*
 * The bounded graph cache: least-recently-used order over the recorded
 * graphs, eviction of a graph with everything kept for it (host
 * Definition, resident device copy, retained {key, occurrence} buffers),
 * and the retired list that holds device memory until no bind in flight
 * may read it.
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/core.h"

/* ---------------- LRU order ---------------- */

static void lru_unlink(hbg_runtime *rt, hbg__lru *n) {
  if (n->prev)
    n->prev->next = n->next;
  else
    rt->lru_head = n->next;
  if (n->next)
    n->next->prev = n->prev;
  else
    rt->lru_tail = n->prev;
  n->prev = n->next = NULL;
}

static void lru_push_head(hbg_runtime *rt, hbg__lru *n) {
  n->prev = NULL;
  n->next = rt->lru_head;
  if (rt->lru_head)
    rt->lru_head->prev = n;
  rt->lru_head = n;
  if (!rt->lru_tail)
    rt->lru_tail = n;
}

void hbg__lru_touch(hbg_runtime *rt, hbg__lru *n) {
  if (rt->lru_head == n)
    return;
  lru_unlink(rt, n);
  lru_push_head(rt, n);
}

int hbg__graph_insert(hbg_runtime *rt, uint64_t fk, hbg__def *def,
                      hbg__graph **out) {
  hbg__lru *n = calloc(1, sizeof *n);
  HBG__RETURN_IF(!n, HBG_E_NOMEM);
  hbg__graph *gr = hbg__map_get(&rt->graphs, fk, 0, 1);
  if (!gr || gr->def) {
    free(n);
    return gr ? HBG_E_STATE : HBG_E_NOMEM;
  }
  n->full_key = fk;
  gr->def = def;
  gr->lru = n;
  lru_push_head(rt, n);
  *out = gr;
  return 0;
}

/* ---------------- retired device memory ---------------- */

/* Slots whose bind may still read device memory: open (its window entries
 * point at it) or launched and not yet seen complete. */
static uint64_t busy_slots(const hbg_runtime *rt) {
  uint64_t m = 0;
  for (uint32_t i = 0; i < rt->depth; i++) {
    const hbg__slot *s = &rt->slots[i];
    if (s->in_flight || s->bind.state == HBG__BIND_OPEN)
      m |= UINT64_C(1) << i;
  }
  return m;
}

/* Free every retired buffer no slot may read any more. A buffer whose free
 * fails is dropped too: it may be gone, so it is never freed again. */
static void retired_sweep(hbg_runtime *rt) {
  /* A captured graph's window may name any of them (a resident
   * Definition): kept while one lives. */
  if (hbg__captures_live(rt))
    return;
  for (uint32_t i = 0; i < rt->n_retired;) {
    hbg__retired *r = &rt->retired[i];
    if (!r->slots) {
      hbg__mem_release(rt, r->dev, "retired buffer");
      *r = rt->retired[--rt->n_retired];
      continue;
    }
    i++;
  }
}

void hbg__retired_release(hbg_runtime *rt, hbg__slot *s) {
  if (!rt->n_retired)
    return;
  for (uint32_t i = 0; i < rt->n_retired; i++)
    rt->retired[i].slots &= ~(UINT64_C(1) << s->index);
  retired_sweep(rt);
}

/* Capacity was reserved by the caller, so retiring cannot fail. */
static void retire(hbg_runtime *rt, hbg_devptr d, uint64_t slots) {
  rt->retired[rt->n_retired++] = (hbg__retired){.dev = d, .slots = slots};
}

/* ---------------- eviction ---------------- */

static void drop_retained(hbg_runtime *rt, hbg__slot *s, uint64_t fk,
                          uint32_t from, uint32_t to, uint64_t busy) {
  for (uint32_t o = from; o < to; o++) {
    hbg__retained *r = hbg__map_get(&s->retained, fk, o, 0);
    if (!r)
      continue;
    if (r->dev)
      retire(rt, r->dev, busy & (UINT64_C(1) << s->index));
    hbg__map_del(&s->retained, fk, o);
  }
}

/* Evict the least recently used graph. @return 0, or HBG_E_NOMEM (nothing
 * evicted: the cache stays over its limit until the next attempt). */
static int evict_lru(hbg_runtime *rt) {
  hbg__lru *n = rt->lru_tail;
  const uint64_t fk = n->full_key;
  hbg__graph *gr = hbg__map_get(&rt->graphs, fk, 0, 0);
  hbg__def *def = gr ? gr->def : NULL;

  uint64_t need = n->resident;
  for (uint32_t i = 0; i < rt->depth; i++) {
    hbg__rkey *rk = hbg__map_get(&rt->slots[i].rkeys, fk, 0, 0);
    need += rk ? rk->n_occ : 0;
  }
  HBG__TRY(HBG__RESERVE(rt->retired, rt->retired_cap,
                        (uint64_t)rt->n_retired + need));

  const uint64_t busy = busy_slots(rt);
  if (n->resident && def) {
    hbg__resident *r = hbg__map_get(&rt->resident, def->hash, def->size, 0);
    if (r && --r->refs == 0) {
      retire(rt, r->dev, busy);
      hbg__map_del(&rt->resident, def->hash, def->size);
    }
  }
  for (uint32_t i = 0; i < rt->depth; i++) {
    hbg__slot *s = &rt->slots[i];
    hbg__rkey *rk = hbg__map_get(&s->rkeys, fk, 0, 0);
    if (!rk)
      continue;
    drop_retained(rt, s, fk, 0, rk->n_occ, busy);
    hbg__map_del(&s->rkeys, fk, 0);
  }
  lru_unlink(rt, n);
  free(n);
  hbg__def_free(def);
  hbg__map_del(&rt->graphs, fk, 0);
  retired_sweep(rt);
  return 0;
}

uint32_t hbg__graph_make_room(hbg_runtime *rt) {
  uint32_t evicted = 0;
  while (rt->graphs.count >= rt->graph_max && rt->lru_tail &&
         evict_lru(rt) == 0)
    evicted++;
  return evicted;
}

int hbg__graph_redefine(hbg_runtime *rt, hbg__graph *gr, hbg__def *def) {
  hbg__def *old = gr->def;
  if (gr->lru->resident &&
      (old->hash != def->hash || old->size != def->size)) {
    hbg__resident *r = hbg__map_get(&rt->resident, old->hash, old->size, 0);
    /* Room to retire it first: the reference goes only where it can. */
    if (r && r->refs == 1)
      HBG__TRY(HBG__RESERVE(rt->retired, rt->retired_cap,
                            (uint64_t)rt->n_retired + 1));
    if (r && --r->refs == 0) {
      retire(rt, r->dev, busy_slots(rt));
      hbg__map_del(&rt->resident, old->hash, old->size);
      retired_sweep(rt);
    }
    gr->lru->resident = 0;
  }
  gr->def = def;
  hbg__def_free(old);
  return 0;
}

int hbg__resident_ref(hbg_runtime *rt, hbg__graph *gr) {
  if (gr->lru->resident)
    return 0;
  hbg__resident *r =
      hbg__map_get(&rt->resident, gr->def->hash, gr->def->size, 0);
  HBG__RETURN_IF(!r, HBG_E_STATE);
  r->refs++;
  gr->lru->resident = 1;
  return 0;
}

/* ---------------- retained occurrences ---------------- */

int hbg__retained_note(hbg__slot *s, uint64_t fk, uint32_t occ) {
  hbg__rkey *rk = hbg__map_get(&s->rkeys, fk, 0, 1);
  HBG__RETURN_IF(!rk, HBG_E_NOMEM);
  if (rk->n_occ < occ + 1)
    rk->n_occ = occ + 1;
  return 0;
}

void hbg__retained_trim(hbg_bind *b) {
  hbg__slot *s = b->slot;
  for (uint32_t i = 0; i < b->occ.cap; i++) {
    const hbg__occ *oc = hbg__map_at(&b->occ, i);
    if (!oc)
      continue;
    hbg__rkey *rk = hbg__map_get(&s->rkeys, oc->k.k1, 0, 0);
    if (!rk || rk->n_occ <= oc->count)
      continue;
    /* This slot's previous bind completed before this one began, and this
     * bind uses occurrences below count only: free them now. A buffer
     * whose free fails is forgotten all the same, never reused. */
    for (uint32_t o = oc->count; o < rk->n_occ; o++) {
      hbg__retained *r = hbg__map_get(&s->retained, oc->k.k1, o, 0);
      if (!r)
        continue;
      hbg__mem_release(b->rt, r->dev, "retained submission buffer");
      hbg__map_del(&s->retained, oc->k.k1, o);
    }
    rk->n_occ = oc->count;
  }
}

void hbg__graphs_clear(hbg_runtime *rt) {
  for (uint32_t i = 0; i < rt->graphs.cap; i++) {
    hbg__graph *g = hbg__map_at(&rt->graphs, i);
    if (g) {
      hbg__def_free(g->def);
      free(g->lru);
    }
  }
  hbg__map_clear(&rt->graphs);
  rt->lru_head = rt->lru_tail = NULL;
}
