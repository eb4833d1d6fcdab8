/* Which boundary tensors of a Definition a replay may alias (graph.h,
 * hbg__def_check_alias). The recorded nodes and their dependencies treat
 * the boundary tensors as distinct memory; a replay that passes two of
 * them over the same bytes is still right when the nodes touching those
 * bytes are ordered (a decode step writes the new KV row, then attention
 * reads the cache that holds it), and wrong, with no error anywhere, when
 * two of them may run at once, one writing, or one node reads the bytes
 * it writes under another name. Nothing is done at record time: a replay
 * sweeps its boundary tensors in address order, and only a pair that
 * overlaps, one of them written, is looked at access by access, against
 * the Definition's per-boundary access lists and the transitive closure
 * of its dependencies, both built the first time a replay needs them. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "graph/graph.h"
#include "kernels/kernels.h"

/* Past these the accesses are not told apart: an overlap of two boundary
 * tensors, one of them written, is refused (a conservative answer). */
#define ALIAS_MAX_NODES 4096u           /* closure: nodes^2 / 8 bytes */
#define ALIAS_MAX_PAIRS (1u << 16)      /* access pairs of one overlap */

typedef struct alias_acc {
  uint32_t node;
  uint32_t mode;     /* HBG_IMG_ACCESS_* */
  uint64_t off, ext; /* bytes from the boundary tensor's element 0 */
  const hbg_def_tensor *t;
} alias_acc;

/* Overlapping pairs found safe lately: boundary tensors i < j with j's
 * element 0 delta bytes after i's. */
#define HBG__ALIAS_SAFE 8u
struct hbg__alias_safe {
  uint32_t i, j;
  uint64_t delta;
};

struct hbg__def_alias {
  struct hbg__alias_safe safe[HBG__ALIAS_SAFE];
  uint32_t next_safe;
  uint32_t *first;   /* per boundary tensor: its accesses [first[b],
                        first[b + 1]) in acc */
  alias_acc *acc;
  uint64_t *anc;     /* per node, words bits: the nodes it depends on,
                        directly or not; NULL past ALIAS_MAX_NODES */
  uint32_t words;
};

void hbg__def_alias_free(hbg__def_alias *a) {
  if (!a)
    return;
  free(a->first);
  free(a->acc);
  free(a->anc);
  free(a);
}

static int is_boundary(const hbg_def_tensor *t, uint32_t nbt) {
  return (t->src == HBG_SRC_BOUNDARY_EXACT ||
          t->src == HBG_SRC_BOUNDARY_VIEW) &&
         t->ref < nbt;
}

static int alias_build(const hbg__def *d, hbg__def_alias **out) {
  hbg_def_hdr h;
  memcpy(&h, d->image, sizeof h);
  const hbg_def_node *nodes = (const hbg_def_node *)(d->image + h.off_nodes);
  const hbg_def_tensor *t = (const hbg_def_tensor *)(d->image + h.off_tensors);
  const uint32_t *fptr = (const uint32_t *)(d->image + h.off_fanin_ptr);
  const uint32_t *fin = (const uint32_t *)(d->image + h.off_fanin);
  hbg__def_alias *a = calloc(1, sizeof *a);
  HBG__RETURN_IF(!a, HBG_E_NOMEM);
  uint32_t k = 0;
  for (uint32_t i = 0; i < h.n_tensors; i++)
    k += is_boundary(&t[i], h.n_btensors);
  a->first = calloc((size_t)h.n_btensors + 1, sizeof *a->first);
  a->acc = malloc((size_t)(k ? k : 1) * sizeof *a->acc);
  if (!a->first || !a->acc)
    goto err;
  for (uint32_t i = 0; i < h.n_tensors; i++)
    if (is_boundary(&t[i], h.n_btensors))
      a->first[t[i].ref + 1]++;
  for (uint32_t b = 0; b < h.n_btensors; b++)
    a->first[b + 1] += a->first[b];
  uint32_t *fill = malloc((size_t)(h.n_btensors ? h.n_btensors : 1) *
                          sizeof *fill);
  if (!fill)
    goto err;
  memcpy(fill, a->first, (size_t)h.n_btensors * sizeof *fill);
  for (uint32_t n = 0; n < h.n_nodes; n++)
    for (uint32_t i = nodes[n].first_tensor;
         i < nodes[n].first_tensor + nodes[n].n_tensors; i++)
      if (is_boundary(&t[i], h.n_btensors))
        a->acc[fill[t[i].ref]++] = (alias_acc){
            .node = n,
            .mode = t[i].mode,
            .off = t[i].src == HBG_SRC_BOUNDARY_VIEW ? t[i].offset : 0,
            .ext = hbg_img_extent(t[i].dtype, t[i].ndim, t[i].mode,
                                  t[i].shape, t[i].strides),
            .t = &t[i]};
  free(fill);
  if (h.n_nodes <= ALIAS_MAX_NODES) {
    /* A node depends on earlier ones only (a validated image's fan-in
     * names earlier nodes; one that does not only loses order here: more
     * refusals, never fewer). */
    a->words = (h.n_nodes + 63) / 64;
    a->anc = calloc((size_t)h.n_nodes * a->words, sizeof *a->anc);
    if (!a->anc)
      goto err;
    for (uint32_t v = 0; v < h.n_nodes; v++) {
      uint64_t *av = a->anc + (size_t)v * a->words;
      for (uint32_t e = fptr[v]; e < fptr[v + 1]; e++) {
        uint32_t p = fin[e];
        if (p >= v)
          continue;
        const uint64_t *ap = a->anc + (size_t)p * a->words;
        for (uint32_t w = 0; w < a->words; w++)
          av[w] |= ap[w];
        av[p / 64] |= UINT64_C(1) << (p % 64);
      }
    }
  }
  *out = a;
  return 0;
err:
  hbg__def_alias_free(a);
  return HBG_E_NOMEM;
}

/* [a, a + ea) and [b, b + eb) share [*lo, *hi): @return 1 if any. */
static int shares(uint64_t a, uint64_t ea, uint64_t b, uint64_t eb,
                  uint64_t *lo, uint64_t *hi) {
  *lo = HBG__MAX(a, b);
  *hi = HBG__MIN(a + ea, b + eb);
  return *lo < *hi;
}

static int before(const hbg__def_alias *a, uint32_t x, uint32_t y) {
  return (a->anc[(size_t)y * a->words + x / 64] >> (x % 64)) & 1;
}

/* One node's two accesses of one layout, the node in-place capable: the
 * very same bytes are fine. */
static int same_ok(const hbg_def_node *nodes, const alias_acc *x,
                   const alias_acc *y, uint64_t ax, uint64_t ay) {
  const hbg_def_tensor *s = x->t, *t = y->t;
  return ax == ay && hbg__kernel_in_place(nodes[x->node].kernel) &&
         s->dtype == t->dtype && s->ndim == t->ndim &&
         memcmp(s->shape, t->shape, sizeof s->shape) == 0 &&
         memcmp(s->strides, t->strides, sizeof s->strides) == 0;
}

/* Boundary tensors i and j overlap at this replay (their elements 0 at ei0
 * and ej0), one of them written: @return 1 with the shared bytes when
 * accesses of theirs that the recorded order does not separate meet. */
static int pair_races(const hbg__def *d, const hbg__def_alias *a,
                      uint32_t i, uint64_t ei0, uint32_t j, uint64_t ej0,
                      int *unsure, uint64_t *lo, uint64_t *hi) {
  const hbg_def_node *nodes =
      (const hbg_def_node *)(d->image +
                             ((const hbg_def_hdr *)(const void *)d->image)
                                 ->off_nodes);
  uint32_t ni = a->first[i + 1] - a->first[i];
  uint32_t nj = a->first[j + 1] - a->first[j];
  if (!a->anc || (uint64_t)ni * nj > ALIAS_MAX_PAIRS) {
    *unsure = 1;
    return 1;
  }
  for (uint32_t p = a->first[i]; p < a->first[i + 1]; p++) {
    const alias_acc *x = &a->acc[p];
    uint64_t ax = ei0 + x->off;
    for (uint32_t q = a->first[j]; q < a->first[j + 1]; q++) {
      const alias_acc *y = &a->acc[q];
      uint64_t ay = ej0 + y->off;
      if (!((x->mode | y->mode) & HBG_IMG_ACCESS_OUT) ||
          !shares(ax, x->ext, ay, y->ext, lo, hi))
        continue;
      if (x->node == y->node ? !same_ok(nodes, x, y, ax, ay)
                             : !before(a, x->node, y->node) &&
                                   !before(a, y->node, x->node))
        return 1;
    }
  }
  return 0;
}

/* One overlapping pair, one of them written: refused when accesses that
 * the recorded order does not separate meet (HBG_E_INVAL, named). The
 * last pair found safe is remembered with its relative placement, so the
 * replays of one key that place it alike (a step's layers) look once. */
static int overlap(hbg__def *d, const uint64_t *st, const uint64_t *ext,
                   uint32_t u, uint32_t v) {
  if (!((d->bmode[u] | d->bmode[v]) & HBG_IMG_ACCESS_OUT))
    return 0;
  uint32_t i = HBG__MIN(u, v), j = HBG__MAX(u, v);
  uint64_t delta = st[j] - st[i];
  if (d->alias) {
    const hbg__def_alias *a = d->alias;
    for (uint32_t c = 0; c < HBG__ALIAS_SAFE; c++)
      if (a->safe[c].i == i && a->safe[c].j == j && a->safe[c].delta == delta)
        return 0;
  } else {
    HBG__TRY(alias_build(d, &d->alias));
  }
  uint64_t lo, hi;
  int unsure = 0;
  if (pair_races(d, d->alias, i, st[i], j, st[j], &unsure, &lo, &hi)) {
    if (unsure)
      shares(st[i], ext[i], st[j], ext[j], &lo, &hi);
    hbg__error_set("boundary tensors %u and %u share bytes [0x%llx, 0x%llx) "
                   "that %s (at least one writes them): pass them over "
                   "disjoint memory, or record the graph with the "
                   "dependency that orders those nodes",
                   i, j, (unsigned long long)lo, (unsigned long long)hi,
                   unsure ? "nodes of this graph access, too many for hbg "
                            "to tell whether its dependencies order them"
                          : "two recorded nodes, not ordered by the graph's "
                            "dependencies, access (or one node reads and "
                            "writes under two names)");
    return HBG_E_INVAL;
  }
  hbg__def_alias *a = d->alias;
  a->safe[a->next_safe] = (struct hbg__alias_safe){i, j, delta};
  a->next_safe = (a->next_safe + 1) % HBG__ALIAS_SAFE;
  return 0;
}

int hbg__def_check_alias(hbg__def *d, const hbg_tensor *bt,
                         const uint64_t *ext, uint64_t *scratch) {
  const uint32_t n = d->n_btensors;
  if (n < 2 || !d->bwritten)
    return 0;
  /* One pass in address order, the last replay's (replays of one key
   * keep it: then this is the whole sort; else an insertion sort and a
   * second pass). A tensor starting before the furthest end so far
   * overlaps an earlier one: only then are the earlier ones looked at. */
  uint64_t *st = scratch, *far = scratch + n; /* far[k]: the furthest end
                                                   of ord[0..k] */
  uint32_t *ord = d->order;
  for (int sorted = 0;; sorted = 1) {
    uint64_t prev = 0, f = 0;
    uint32_t k = 0;
    for (; k < n; k++) {
      uint32_t v = ord[k];
      uint64_t s = bt[v].addr + bt[v].offset;
      st[v] = s;
      if (s < prev)
        break;
      prev = s;
      /* back from k - 1 while an earlier tensor can still reach s */
      for (uint32_t m = k; s < f && m-- > 0 && far[m] > s;) {
        uint32_t u = ord[m];
        if (st[u] + ext[u] > s)
          HBG__TRY(overlap(d, st, ext, u, v));
      }
      if (s + ext[v] > f)
        f = s + ext[v];
      far[k] = f;
    }
    if (k == n)
      return 0;
    if (sorted)
      return HBG_E_INVAL; /* cannot happen: sorted by st */
    for (uint32_t q = k; q < n; q++)
      st[ord[q]] = bt[ord[q]].addr + bt[ord[q]].offset;
    for (uint32_t q = 1; q < n; q++) {
      uint32_t v = ord[q], m = q;
      while (m > 0 && st[ord[m - 1]] > st[v]) {
        ord[m] = ord[m - 1];
        m--;
      }
      ord[m] = v;
    }
  }
}
