/*
 * coalesced: Definitions uploaded once and kept resident on the device by
 * content hash; the small Submissions ride in the task window right after
 * their entries, and the window lives in the slot's pinned arena, so a
 * bind is one copy at launch (or a few async chunks during orchestration,
 * coalesce_chunk_bytes). Submission addresses point into the device
 * window, which therefore exists, at least as large as the host window,
 * throughout orchestration.
 */
#include "common/util.h"
#include "core/policy/policy.h"

/* The device window, like the arena: the last bind's need. */
static void coal_reclaim(hbg_runtime *rt, hbg__slot *s) {
  (void)rt;
  if (s->win_high_water > s->win_cap)
    hbg__win_dev_grow(&s->bind, HBG__ALIGN_UP(s->win_high_water, 65536));
  s->win_high_water = 0;
}

static int coal_begin(hbg_bind *b) {
  hbg__slot *s = b->slot;
  /* A first bind's window buffer (64 KiB; later ones start at the last
   * bind's need): failing here leaves the slot order untouched. */
  HBG__TRY(hbg__win_dev_ensure(b, sizeof(hbg_win_hdr)));
  if (s->arena.base) {
    b->win.p = s->arena.base;
    b->win.cap = s->arena.cap;
    b->win.pinned = 1;
  }
  return 0;
}

static int coal_window_grow(hbg_bind *b, uint64_t len) {
  hbg__slot *s = b->slot;
  if (len > s->arena.high_water)
    s->arena.high_water = len;
  if (len > s->win_high_water)
    s->win_high_water = len;
  if (len <= s->win_cap)
    return 0;
  /* Growing the device window (after the chunks in flight land) is window
   * upload time nested in orchestration. */
  uint64_t t0 = hbg__rt_now(b->rt);
  int had = s->win_cap != 0;
  int rc = hbg__win_dev_ensure(b, len);
  uint64_t t1 = hbg__rt_now(b->rt);
  b->nested_upload_ns += t1 - t0;
  b->st.window_upload_ns += t1 - t0;
  if (rc < 0)
    return rc;
  if (had)
    hbg__trace(b->rt, HBG_TRACK_UPLOAD, "window_grow", t0, t1, 0, b->seq);
  return 0;
}

/* The window's Submissions carry absolute device addresses: move them. */
static void coal_window_moved(hbg_bind *b, hbg_devptr from, hbg_devptr to) {
  for (uint32_t i = 0; i < b->n_tasks; i++) {
    hbg_win_task *e = (hbg_win_task *)(b->win.p + b->index[i]);
    if (e->kind == HBG_WIN_GRAPH)
      e->sub_addr = e->sub_addr - from + to;
  }
}

/* The Definition resident on the device, uploaded on first use and keyed
 * by content hash (a changed Definition has a new hash). */
static int resident_def(hbg_bind *b, hbg__graph *gr, hbg_devptr *out) {
  hbg_runtime *rt = b->rt;
  const hbg__def *def = gr->def;
  hbg__resident *r = hbg__map_get(&rt->resident, def->hash, def->size, 0);
  if (r) {
    HBG__TRY(hbg__resident_ref(rt, gr));
    *out = r->dev;
    return 0;
  }
  hbg_devptr d = 0;
  HBG__TRY(hbg_dev_mem_alloc(rt->dev, def->size, &d));
  b->st.dev_allocs++;
  int rc = hbg__upload_nested(b, d, def->image, def->size, "definition");
  if (rc == 0) {
    r = hbg__map_get(&rt->resident, def->hash, def->size, 1);
    rc = r ? 0 : HBG_E_NOMEM;
  }
  if (rc < 0) {
    hbg__mem_release(rt, d, "resident definition");
    return rc;
  }
  r->dev = d;
  HBG__TRY(hbg__resident_ref(rt, gr));
  b->st.def_bytes += def->size;
  *out = d;
  return 0;
}

static int coal_stage(hbg_bind *b, hbg__stage *st) {
  st->in_window = 1;
  return resident_def(b, st->gr, &st->def_dev);
}

/* Start an async chunk once enough of the window is staged. */
static int coal_published(hbg_bind *b, const hbg__stage *st) {
  (void)st;
  hbg_runtime *rt = b->rt;
  uint64_t chunk = rt->cfg.coalesce_chunk_bytes;
  if (!chunk || !b->win.pinned ||
      b->win.len - HBG__MAX(b->win_flushed, sizeof(hbg_win_hdr)) < chunk)
    return 0;
  /* The header is written at launch, so chunks start after it: the copy
   * engine never reads bytes the host is still writing. */
  uint64_t from = b->win_flushed ? b->win_flushed : sizeof(hbg_win_hdr);
  uint64_t t0 = hbg__rt_now(rt);
  uint64_t n = b->win.len - from;
  int rc = hbg_dev_copy_h2d_async(rt->dev, b->slot->q,
                                  b->slot->win_dev + from, b->win.p + from,
                                  (size_t)n);
  uint64_t t1 = hbg__rt_now(rt);
  hbg__trace(rt, HBG_TRACK_UPLOAD, "window_chunk", t0, t1, n, b->seq);
  b->nested_upload_ns += t1 - t0;
  b->st.window_upload_ns += t1 - t0;
  if (rc < 0)
    return rc;
  b->win_flushed = b->win.len;
  b->st.window.bytes += n;
  b->st.window.copies++;
  b->st.h2d_bytes += n;
  b->st.h2d_copies++;
  return 0;
}

const hbg__policy_ops hbg__policy_coalesced = {
    .name = "coalesced",
    .inline_def = 0,
    .arena = 1, /* holds the window */
    .reclaim = coal_reclaim,
    .begin = coal_begin,
    .window_grow = coal_window_grow,
    .window_moved = coal_window_moved,
    .stage = coal_stage,
    .published = coal_published,
};
