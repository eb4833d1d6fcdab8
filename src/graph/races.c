/* Which boundary tensors of a Definition a replay may alias (graph.h,
 * hbg__def.races). The recorded nodes and their dependencies treat the
 * boundary tensors as distinct memory; a replay that passes two of them
 * over the same bytes is still right when every node touching one is
 * ordered with every node touching the other (a decode step writes the new
 * KV row, then attention reads the cache that holds it), and wrong, with
 * no error anywhere, when two such nodes may run at once or a node reads
 * one while it writes the other. This finds the second kind once per
 * Definition; hbg__def_check_alias refuses a replay that aliases one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "graph/graph.h"
#include "kernels/kernels.h"

/* Past these the analysis is not run: every boundary tensor a node writes
 * may alias none (alias_all). */
#define RACE_MAX_ACCESSES 4096u
#define RACE_MAX_PAIRS 65536u

typedef struct access {
  uint32_t node, b; /* node, boundary tensor */
  uint8_t mode;     /* HBG_IMG_ACCESS_* */
  uint64_t off, ext; /* bytes from the boundary tensor's element 0 */
  const hbg_def_tensor *t;
} access;

typedef struct pairs {
  hbg__race *v;
  uint32_t n, cap;
  int over;
} pairs;

static void pair_add(pairs *p, const access *x, const access *y,
                     uint32_t same_ok) {
  if (p->over)
    return;
  if (p->n == RACE_MAX_PAIRS ||
      HBG__RESERVE(p->v, p->cap, (uint64_t)p->n + 1) < 0) {
    p->over = 1;
    return;
  }
  if (x->b > y->b) {
    const access *z = x;
    x = y;
    y = z;
  }
  p->v[p->n++] = (hbg__race){.i = x->b, .j = y->b, .same_ok = same_ok,
                             .oi = x->off, .ei = x->ext, .oj = y->off,
                             .ej = y->ext};
}

static int race_cmp(const void *a, const void *b) {
  const hbg__race *x = a, *y = b;
  const uint64_t kx[7] = {x->i, x->j, x->oi, x->ei, x->oj, x->ej, x->same_ok},
                 ky[7] = {y->i, y->j, y->oi, y->ei, y->oj, y->ej, y->same_ok};
  for (int k = 0; k < 7; k++)
    if (kx[k] != ky[k])
      return kx[k] < ky[k] ? -1 : 1;
  return 0;
}

/* Two accesses of different nodes or of one: a race on aliasing when they
 * name different boundary tensors and one of them writes; one in-place
 * capable node's two accesses of one layout may be the very same bytes. */
static void consider(pairs *p, const access *x, const access *y,
                     uint32_t kernel_if_same_node) {
  if (x->b == y->b || !((x->mode | y->mode) & HBG_IMG_ACCESS_OUT))
    return;
  const hbg_def_tensor *a = x->t, *b = y->t;
  uint32_t same_ok = kernel_if_same_node != UINT32_MAX &&
                     hbg__kernel_in_place(kernel_if_same_node) &&
                     a->dtype == b->dtype && a->ndim == b->ndim &&
                     memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
                     memcmp(a->strides, b->strides, sizeof a->strides) == 0;
  pair_add(p, x, y, same_ok);
}

static int all_alias(hbg__def *d, uint32_t n) {
  d->alias_all = 1;
  d->order = malloc((size_t)n * sizeof *d->order);
  HBG__RETURN_IF(!d->order, HBG_E_NOMEM);
  for (uint32_t i = 0; i < n; i++)
    d->order[i] = i;
  return 0;
}

int hbg__def_races(hbg__def *d) {
  hbg_def_hdr h;
  memcpy(&h, d->image, sizeof h);
  const hbg_def_node *nodes = (const hbg_def_node *)(d->image + h.off_nodes);
  const hbg_def_tensor *t = (const hbg_def_tensor *)(d->image + h.off_tensors);
  const uint32_t *fptr = (const uint32_t *)(d->image + h.off_fanin_ptr);
  const uint32_t *fin = (const uint32_t *)(d->image + h.off_fanin);
  d->races = NULL;
  d->order = NULL;
  d->n_races = 0;
  d->alias_all = 0;

  uint32_t k = 0;
  for (uint32_t i = 0; i < h.n_tensors; i++)
    if ((t[i].src == HBG_SRC_BOUNDARY_EXACT ||
         t[i].src == HBG_SRC_BOUNDARY_VIEW) &&
        t[i].ref < h.n_btensors)
      k++;
  if (k < 2)
    return 0;
  if (k > RACE_MAX_ACCESSES)
    return all_alias(d, h.n_btensors);
  access *acc = malloc((size_t)k * sizeof *acc);
  uint64_t *reach = calloc(h.n_nodes, sizeof *reach);
  uint32_t *bit = calloc(h.n_nodes, sizeof *bit);
  if (!acc || !reach || !bit) {
    free(acc);
    free(reach);
    free(bit);
    return HBG_E_NOMEM;
  }
  k = 0;
  for (uint32_t n = 0; n < h.n_nodes; n++)
    for (uint32_t i = nodes[n].first_tensor;
         i < nodes[n].first_tensor + nodes[n].n_tensors; i++)
      if ((t[i].src == HBG_SRC_BOUNDARY_EXACT ||
           t[i].src == HBG_SRC_BOUNDARY_VIEW) &&
          t[i].ref < h.n_btensors)
        acc[k++] = (access){
            .node = n,
            .b = t[i].ref,
            .mode = t[i].mode,
            .off = t[i].src == HBG_SRC_BOUNDARY_VIEW ? t[i].offset : 0,
            .ext = hbg_img_extent(t[i].dtype, t[i].ndim, t[i].mode,
                                  t[i].shape, t[i].strides),
            .t = &t[i]};

  pairs p = {0};
  /* One node touching two boundary tensors. */
  for (uint32_t x = 0; x < k; x++)
    for (uint32_t y = x + 1; y < k && acc[y].node == acc[x].node; y++)
      consider(&p, &acc[x], &acc[y], nodes[acc[x].node].kernel);
  /* Two nodes a < b (a node depends on earlier ones only): ordered when a
   * reaches b through the fan-in tables. The accessing nodes are taken 64
   * at a time as sources; reach[v] has bit s set when source s reaches v.
   * A fan-in entry naming a later node (never in a validated image) only
   * loses reach: more pairs, never fewer. */
  for (uint32_t first = 0; first < k && !p.over;) {
    uint32_t n_src = 0, last = first;
    uint32_t lo = acc[first].node;
    while (last < k && n_src < 64) {
      uint32_t nd = acc[last].node;
      if (!bit[nd])
        bit[nd] = ++n_src;
      while (last < k && acc[last].node == nd)
        last++;
    }
    memset(reach + lo, 0, (size_t)(h.n_nodes - lo) * sizeof *reach);
    for (uint32_t v = lo; v < h.n_nodes; v++) {
      uint64_t r = 0;
      for (uint32_t e = fptr[v]; e < fptr[v + 1]; e++) {
        uint32_t q = fin[e];
        if (q >= v || q < lo)
          continue;
        r |= reach[q];
        if (bit[q])
          r |= UINT64_C(1) << (bit[q] - 1);
      }
      reach[v] = r;
    }
    for (uint32_t y = first; y < k; y++)
      for (uint32_t x = first; x < last && acc[x].node < acc[y].node; x++)
        if (!(reach[acc[y].node] >> (bit[acc[x].node] - 1) & 1))
          consider(&p, &acc[x], &acc[y], UINT32_MAX);
    for (uint32_t x = first; x < last; x++)
      bit[acc[x].node] = 0;
    first = last;
  }
  free(acc);
  free(reach);
  free(bit);
  if (p.over) {
    free(p.v);
    p.v = NULL;
    p.n = 0;
    d->alias_all = 1;
  }
  if (p.n) {
    qsort(p.v, p.n, sizeof *p.v, race_cmp);
    uint32_t u = 0;
    for (uint32_t i = 0; i < p.n; i++)
      if (!u || race_cmp(&p.v[i], &p.v[u - 1]) != 0)
        p.v[u++] = p.v[i];
    p.n = u;
  }
  if (p.n || d->alias_all) {
    d->order = malloc((size_t)h.n_btensors * sizeof *d->order);
    if (!d->order) {
      free(p.v);
      return HBG_E_NOMEM;
    }
    for (uint32_t i = 0; i < h.n_btensors; i++)
      d->order[i] = i;
  }
  d->races = p.v;
  d->n_races = p.n;
  return 0;
}

/* [a, a + ea) and [b, b + eb) share [*lo, *hi): @return 1 if any. */
static int shares(uint64_t a, uint64_t ea, uint64_t b, uint64_t eb,
                  uint64_t *lo, uint64_t *hi) {
  *lo = HBG__MAX(a, b);
  *hi = HBG__MIN(a + ea, b + eb);
  return *lo < *hi;
}

static uint64_t elem0(const hbg_tensor *t) { return t->addr + t->offset; }

/* Boundary tensors i < j of this replay overlap: @return 1 and the shared
 * bytes when the overlap reaches accesses of unordered nodes. */
static int pair_races(const hbg__def *d, const hbg_tensor *bt,
                      const uint64_t *ext, uint32_t i, uint32_t j,
                      uint64_t *lo, uint64_t *hi) {
  if (d->alias_all)
    return ((d->bmode[i] | d->bmode[j]) & HBG_IMG_ACCESS_OUT) &&
           shares(elem0(&bt[i]), ext[i], elem0(&bt[j]), ext[j], lo, hi);
  uint32_t a = 0, b = d->n_races; /* the first race of {i, j} */
  while (a < b) {
    uint32_t m = a + (b - a) / 2;
    const hbg__race *x = &d->races[m];
    if (x->i < i || (x->i == i && x->j < j))
      a = m + 1;
    else
      b = m;
  }
  for (; a < d->n_races && d->races[a].i == i && d->races[a].j == j; a++) {
    const hbg__race *x = &d->races[a];
    uint64_t ai = elem0(&bt[i]) + x->oi, aj = elem0(&bt[j]) + x->oj;
    if (x->same_ok && ai == aj)
      continue;
    if (shares(ai, x->ei, aj, x->ej, lo, hi))
      return 1;
  }
  return 0;
}

int hbg__def_check_alias(hbg__def *d, const hbg_tensor *bt,
                         const uint64_t *ext, uint32_t *scratch) {
  if (!d->n_races && !d->alias_all)
    return 0;
  /* The boundary tensors by start address, in the order the last replay
   * had (replays of one key usually keep it: then checking it is the
   * whole sort), then one sweep: each tensor against those still open
   * when it starts. */
  const uint32_t n = d->n_btensors;
  uint32_t *ord = d->order;
  for (uint32_t k = 1; k < n; k++) {
    uint32_t v = ord[k], m = k;
    uint64_t s = elem0(&bt[v]);
    while (m > 0 && elem0(&bt[ord[m - 1]]) > s) {
      ord[m] = ord[m - 1];
      m--;
    }
    ord[m] = v;
  }
  uint32_t *open = scratch, n_open = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t v = ord[k];
    uint64_t s = elem0(&bt[v]), lo, hi;
    uint32_t keep = 0;
    for (uint32_t o = 0; o < n_open; o++) {
      uint32_t u = open[o];
      if (elem0(&bt[u]) + ext[u] <= s)
        continue; /* closed */
      open[keep++] = u;
      uint32_t i = HBG__MIN(u, v), j = HBG__MAX(u, v);
      if (pair_races(d, bt, ext, i, j, &lo, &hi)) {
        hbg__error_set("boundary tensors %u and %u share bytes [0x%llx, "
                       "0x%llx) that %s (at least one writes them): pass "
                       "them over disjoint memory, or record the graph with "
                       "the dependency that orders those nodes",
                       i, j, (unsigned long long)lo, (unsigned long long)hi,
                       d->alias_all ? "nodes of this graph access, too many "
                                      "for hbg to tell whether its "
                                      "dependencies order them"
                                    : "two recorded nodes, not ordered by "
                                      "the graph's dependencies, access");
        return HBG_E_INVAL;
      }
    }
    n_open = keep;
    if (ext[v])
      open[n_open++] = v;
  }
  return 0;
}
