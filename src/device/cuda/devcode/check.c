/*
 * Device-side image check (see devcode.h): the window, then each graph
 * entry's Submission and Definition, in entry order, the first failure
 * being the verdict. Each distinct Definition is validated once per
 * launch (dc_seen); entries naming it again reuse the verdict. Nothing is
 * kept across launches. The content hashes are not checked (the validators'
 * hash callback is NULL: there is no XXH3 on the device yet), nor are
 * kernel signatures or device ranges against live allocations: the host
 * launch verifier (src/device/verify.c) still does those, and the
 * single-source executor that replaces this kernel will.
 */
#include "devcode.h"

#define DC_NONE 0xffffffffu
#define DC_SEEN 16 /* Definitions a launch remembers (dc_seen) */
#define DC_TRY(expr)                                                           \
  do {                                                                         \
    int dc__rc = (expr);                                                       \
    if (dc__rc)                                                                \
      return dc__rc;                                                           \
  } while (0)

HBG_DC_FN void *dc_ptr(uint64_t addr, uint64_t len) {
  if (addr == 0 || len > UINT64_MAX - addr)
    return NULL;
#if defined(HBG_DC_HOST)
  return hbg_dc_host_ptr(addr, len);
#else
  return (void *)(uintptr_t)addr;
#endif
}

/* The node whose tensor records hold record t, or DC_NONE. */
HBG_DC_FN uint32_t dc_node_of_tensor(const hbg_img_def_view *d, uint32_t t) {
  if (t == DC_NONE)
    return DC_NONE;
  for (uint32_t i = 0; i < d->hdr->n_nodes; i++)
    if (t >= d->nodes[i].first_tensor &&
        t - d->nodes[i].first_tensor < d->nodes[i].n_tensors)
      return i;
  return DC_NONE;
}

/* The Definitions this launch validated, keyed by device address, size
 * and header hash: a later entry naming one rebuilds its view
 * (hbg_img_def_view_trusted over the image's own header, unchanged while
 * a launch checks) instead of validating again. Keys only, no views, to
 * keep the set-up thread's stack small. Bounded: past DC_SEEN the oldest
 * is forgotten, and an entry naming it is validated again (never
 * skipped). */
typedef struct dc_seen {
  uint64_t addr[DC_SEEN], size[DC_SEEN], hash[DC_SEEN];
  uint32_t n;
} dc_seen;

HBG_DC_FN int dc_seen_find(const dc_seen *s, uint64_t addr, uint64_t size,
                           uint64_t hash) {
  uint32_t n = s->n < DC_SEEN ? s->n : DC_SEEN;
  for (uint32_t i = 0; i < n; i++)
    if (s->addr[i] == addr && s->size[i] == size && s->hash[i] == hash)
      return 1;
  return 0;
}

HBG_DC_FN void dc_seen_add(dc_seen *s, uint64_t addr, uint64_t size,
                           uint64_t hash) {
  uint32_t i = s->n % DC_SEEN;
  s->addr[i] = addr;
  s->size[i] = size;
  s->hash[i] = hash;
  s->n++;
}

/* Graph entry t: its Submission and Definition (views in *svp, *dvp). */
HBG_DC_FN int dc_check_graph(const hbg_win_task *t, hbg_dc_status *st,
                             dc_seen *seen, uint32_t *node,
                             hbg_img_sub_view *svp, hbg_img_def_view *dvp) {
  if (t->sub_addr % HBG_IMG_ALIGN)
    return HBG_IMG_E_ALIGN;
  const void *sp = dc_ptr(t->sub_addr, t->sub_size);
  if (!sp)
    return HBG_IMG_E_RANGE;
  hbg_img_sub_view sv;
  DC_TRY(hbg_img_sub_validate(sp, t->sub_size, NULL, NULL, &sv));
  const void *dp;
  uint64_t da, dsize;
  if (sv.inline_def) {
    dp = sv.inline_def;
    da = t->sub_addr + sv.hdr->off_def;
    dsize = sv.hdr->def_size;
  } else {
    da = t->def_addr;
    dsize = t->def_size;
    if (dsize < sizeof(hbg_def_hdr))
      return HBG_IMG_E_TRUNCATED;
    if (da % HBG_IMG_ALIGN)
      return HBG_IMG_E_ALIGN;
    dp = dc_ptr(da, dsize);
    if (!dp)
      return HBG_IMG_E_RANGE;
  }
  hbg_img_def_view dv;
  /* The key's hash: the header's field as it is now (read only where a
   * header fits, aligned; anything else goes to the validator). */
  const hbg_def_hdr *dh = (const hbg_def_hdr *)dp;
  int keyed = dsize >= sizeof(hbg_def_hdr) && da % HBG_IMG_ALIGN == 0;
  if (keyed && dc_seen_find(seen, da, dsize, dh->hash)) {
    hbg_img_def_view_trusted(dp, dh, &dv);
  } else {
#if defined(HBG_DC_HOST)
    hbg_dc_host_def_validated();
#endif
    DC_TRY(hbg_img_def_validate(dp, dsize, NULL, NULL, &dv));
    st->defs_verified++;
    if (keyed)
      dc_seen_add(seen, da, dsize, dh->hash);
  }
  int rc = hbg_img_sub_check_def(&sv, &dv);
  if (rc == HBG_IMG_E_TENSOR_ALIGN) {
    uint32_t bad = DC_NONE;
    hbg_img_sub_check_align(&sv, &dv, &bad);
    *node = dc_node_of_tensor(&dv, bad);
  }
  if (rc)
    return rc;
  if (t->heap_addr % HBG_IMG_HEAP_ALIGN)
    return HBG_IMG_E_TENSOR_ALIGN;
  *svp = sv;
  *dvp = dv;
  return 0;
}

HBG_DC_ENTRY(hbg_dc_check_window, hbg_dc_check_args) {
  hbg_dc_status st;
  st.flags = st.phase = 0;
  st.setup_ns = st.run_ns = st.setup_nodes = 0;
  st.dispatch_ops = st.kernel_phases = st.body_ns = st.tail_ns = 0;
  st.workers = st.step = st.arrived = st.ctas = 0;
  st.error = 0;
  st.task = DC_NONE;
  st.node = DC_NONE;
  st.tasks_done = 0;
  st.nodes_done = 0;
  st.defs_verified = 0;
  dc_seen seen;
  seen.n = 0;
  const void *w = dc_ptr(a.window, a.bytes);
  hbg_img_win_view wv;
  int rc = w ? hbg_img_win_validate(w, a.bytes, &wv) : HBG_IMG_E_RANGE;
  if (rc) {
    st.error = rc;
  } else {
    for (uint32_t i = 0; i < wv.hdr->n_tasks; i++) {
      const hbg_win_task *t = hbg_img_win_task(&wv, i);
      uint32_t node = DC_NONE;
      hbg_img_sub_view sv;
      hbg_img_def_view dv;
      rc = t->kind == HBG_WIN_GRAPH
               ? dc_check_graph(t, &st, &seen, &node, &sv, &dv)
               : 0;
      if (rc) {
        st.error = rc;
        st.task = i;
        st.node = node;
        break;
      }
      st.tasks_done = i + 1;
    }
  }
  hbg_dc_status *out = (hbg_dc_status *)dc_ptr(a.status, sizeof st);
  if (out)
    *out = st;
}
