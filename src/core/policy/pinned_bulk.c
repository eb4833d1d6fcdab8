/*
 * pinned-bulk: inline Submissions packed back to back (8-byte offsets) in
 * the slot's pinned arena; nothing is copied during orchestration. At
 * launch the window entries point into the slot's retained device block at
 * the same offsets, and all of the bind's images go there in ONE copy.
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/policy/policy.h"

/* Replace the slot's bulk block by one of at least need bytes. Only when
 * the device cannot read the old one: at a bind's start (the slot's last
 * bind completed), or at launch before this bind copied anything. */
static int bulk_grow(hbg_runtime *rt, hbg__slot *s, uint64_t need) {
  uint64_t cap = HBG__ALIGN_UP(need, 65536);
  hbg_devptr d = 0;
  HBG__TRY(hbg_dev_mem_alloc(rt->dev, (size_t)cap, &d));
  hbg__mem_release(rt, s->bulk_dev, "bulk block");
  s->bulk_dev = d;
  s->bulk_cap = cap;
  return 0;
}

static void bulk_reclaim(hbg_runtime *rt, hbg__slot *s) {
  if (s->bulk_high_water > s->bulk_cap)
    bulk_grow(rt, s, s->bulk_high_water); /* on failure launch grows it */
  s->bulk_high_water = 0;
}

/* Stage size bytes of the bind's image stream: packed at 8-byte offsets,
 * which are also the offsets in the device block, so the pinned part is one
 * contiguous range for one copy. @return the pinned staging, or NULL when
 * the arena is full (the image then goes to heap memory; the need is still
 * counted so that the next bind's arena and block fit). */
static uint8_t *bulk_place(hbg_bind *b, uint32_t size, uint64_t *off) {
  hbg__slot *s = b->slot;
  uint64_t start = HBG__ALIGN_UP(b->bulk_len, (uint64_t)8);
  uint64_t end = start + size;
  /* The whole stream is one piece of the arena for the device's rules. */
  uint64_t piece = hbg__arena_piece(&b->rt->caps, end);
  uint64_t from = b->bulk_len;
  b->bulk_len = end;
  *off = start;
  if (end > s->bulk_high_water)
    s->bulk_high_water = end;
  if (piece > s->arena.high_water)
    s->arena.high_water = piece;
  if (!s->arena.base || piece > s->arena.cap)
    return NULL;
  memset(s->arena.base + from, 0, (size_t)(start - from));
  s->arena.used = piece;
  return s->arena.base + start;
}

/* Its device address is known at launch (the block may grow). */
static int bulk_stage(hbg_bind *b, hbg__stage *st) {
  uint8_t *pinned = bulk_place(b, st->sub_size, &st->blk_off);
  st->fallback = pinned == NULL;
  return hbg__stage_pending(b, st, pinned);
}

/* Every image of the bind in one copy into the slot's block, and the
 * window entries pointed into it. */
static int bulk_launch(hbg_bind *b) {
  hbg_runtime *rt = b->rt;
  hbg__slot *s = b->slot;
  if (!b->n_pend)
    return 0;
  if (b->bulk_len > s->bulk_cap) {
    /* More than the last bind's high-water mark (or the slot's first
     * bind). The slot's last bind has completed and nothing of this one was
     * copied yet, so the block is replaced here, counted as an allocation. */
    uint64_t t0 = hbg__rt_now(rt);
    HBG__TRY(bulk_grow(rt, s, b->bulk_len));
    b->st.dev_allocs++;
    hbg__trace(rt, HBG_TRACK_UPLOAD, "bulk_grow", t0, hbg__rt_now(rt), 0,
               b->seq);
  }
  /* Images that overflowed the arena are gathered with the pinned ones into
   * one heap buffer: still one copy, from pageable memory (the fallback
   * count says so), and the next bind's arena fits them all. */
  const uint8_t *src = s->arena.base;
  uint8_t *gather = NULL;
  int overflow = 0;
  for (uint32_t i = 0; i < b->n_pend; i++)
    overflow |= (int)b->pend[i].heap_owned;
  if (overflow) {
    gather = aligned_alloc(64, (size_t)HBG__ALIGN_UP(b->bulk_len, 64));
    HBG__RETURN_IF(!gather, HBG_E_NOMEM);
    memset(gather, 0, (size_t)b->bulk_len);
    for (uint32_t i = 0; i < b->n_pend; i++)
      memcpy(gather + b->pend[i].blk_off, b->pend[i].host, b->pend[i].size);
    src = gather;
  }
  for (uint32_t i = 0; i < b->n_pend; i++) {
    const hbg__pending *p = &b->pend[i];
    hbg_win_task *e = (hbg_win_task *)(b->win.p + p->entry_off);
    e->sub_addr = s->bulk_dev + p->blk_off;
    e->def_addr = e->sub_addr + p->def_off;
  }
  int rc = hbg__upload(b, &b->st.graph, s->bulk_dev, src, b->bulk_len,
                       "bulk");
  free(gather);
  if (rc < 0)
    return rc;
  for (uint32_t i = 0; i < b->n_pend; i++)
    hbg__pend_uploaded(b, &b->pend[i]);
  return 0;
}

static void bulk_fini(hbg_runtime *rt, hbg__slot *s) {
  hbg__mem_release(rt, s->bulk_dev, "bulk block");
  s->bulk_dev = 0;
  s->bulk_cap = 0;
}

const hbg__policy_ops hbg__policy_pinned_bulk = {
    .name = "pinned-bulk",
    .inline_def = 1,
    .arena = 1,
    .reclaim = bulk_reclaim,
    .stage = bulk_stage,
    .launch = bulk_launch,
    .fini = bulk_fini,
};
