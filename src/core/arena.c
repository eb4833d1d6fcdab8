#include "common/util.h"
#include "core/core.h"

uint64_t hbg__arena_piece(const hbg_dev_caps *caps, uint64_t len) {
  uint64_t pad = caps->piece_pad_align ? caps->piece_pad_align : 1;
  return HBG__ALIGN_UP(len, pad) + caps->piece_pad_extra;
}

void *hbg__arena_alloc(const hbg_dev_caps *caps, hbg__arena *a, uint64_t len) {
  uint64_t align = caps->stage_align ? caps->stage_align : 64;
  uint64_t start = HBG__ALIGN_UP(a->used, align);
  uint64_t end = start + hbg__arena_piece(caps, len);
  if (end > a->high_water)
    a->high_water = end;
  if (!a->base || end > a->cap) {
    /* Keep counting what the bind wanted so the next bind can grow. */
    a->used = end;
    return NULL;
  }
  a->used = end;
  return a->base + start;
}

int hbg__arena_reserve(hbg_runtime *rt, hbg__slot *s, uint64_t cap) {
  void *p = NULL;
  HBG__TRY(hbg_dev_host_alloc(rt->dev, (size_t)cap, &p));
  s->arena.base = p;
  s->arena.cap = cap;
  s->arena.used = 0;
  return 0;
}

void hbg__arena_release(hbg_runtime *rt, hbg__slot *s) {
  hbg__host_release(rt, s->arena.base, "pinned staging arena");
  s->arena.base = NULL;
  s->arena.cap = 0;
  s->arena.used = 0;
}
