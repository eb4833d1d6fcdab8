/* libFuzzer entry point for every parser of untrusted image bytes: the
 * Definition, Submission and task-window validators and the dump. Each input
 * is also tried with its content hash fixed up, so that mutations reach the
 * code behind the hash check. Properties checked (abort on violation):
 *   - a valid Definition also passes the no-hash validator, loads with
 *     hbg__def_from_image, and a Submission written from its own signature
 *     validates and matches it (plain and inline), its compact records
 *     holding exactly the boundary's (addr, offset);
 *   - a valid Submission has no boundary record at address 0, and its
 *     record table and scalars lie inside its hashed part;
 *   - validate ok implies iterate ok: hbg_image.h's node iterator expands
 *     every node of a valid Definition (alone, and replayed by a valid
 *     Submission carrying it inline that matches it) without an error, and
 *     no argument writes a boundary tensor its signature marks input-only;
 *   - the validators' pieces (hbg_img_def_check_unit, hbg_img_win_check_
 *     entry) run backwards, as a parallel executor may run them, give the
 *     serial verdict (the least key, the lowest failing entry);
 *   - the dump returns the validator's verdict. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

static FILE *devnull;

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "fuzz_validate: property failed: %s (line %d)\n", #c,   \
              __LINE__);                                                       \
      abort();                                                                 \
    }                                                                          \
  } while (0)

static volatile uint64_t sink;

/* Every node, argument and scalar of a validated replay (sub optional). */
static void iterate(const hbg__def_view *dv, const hbg__sub_view *sv) {
  const uint64_t heap = 0x40000000ull;
  hbg_img_graph g;
  CHECK(hbg_img_graph_init(&g, dv, sv, heap) == 0);
  uint64_t s = 0;
  for (uint32_t j = 0; j < dv->hdr->n_nodes; j++) {
    hbg_img_node nd;
    CHECK(hbg_img_graph_node(&g, j, &nd) == 0);
    for (uint32_t k = 0; k < nd.n_tensors; k++) {
      hbg_img_arg a;
      CHECK(hbg_img_graph_tensor(&g, j, k, &a) == 0);
      if (a.src < HBG_SRC_INTERNAL && (a.mode & HBG_ACCESS_OUT))
        CHECK(dv->bsig[a.ref].mode & HBG_ACCESS_OUT);
      s += a.addr;
    }
    for (uint32_t k = 0; k < nd.n_scalars; k++) {
      uint64_t v;
      CHECK(hbg_img_graph_scalar(&g, j, k, &v) == 0);
      s += v;
    }
  }
  sink = s;
}

static void walk_def(const hbg__def_view *v) {
  uint64_t s = 0;
  for (uint32_t i = 0; i < v->hdr->n_nodes; i++) {
    const hbg_def_node *n = &v->nodes[i];
    for (uint32_t k = 0; k < n->n_tensors; k++)
      s += v->tensors[n->first_tensor + k].offset;
    for (uint32_t k = 0; k < n->n_scalars; k++)
      s += v->scalars[n->first_scalar + k].value;
    for (uint32_t k = v->fanout_ptr[i]; k < v->fanout_ptr[i + 1]; k++)
      s += v->fanout[k];
  }
  for (uint32_t k = 0; k < v->hdr->n_roots; k++)
    s += v->roots[k];
  sink = s;
}

/* Replay a valid Definition with a boundary made from its signature. */
static void replay(const uint8_t *img, uint64_t len) {
  hbg__def *d;
  CHECK(hbg__def_from_image(img, len, &d) == 0);
  uint32_t n = d->n_btensors;
  hbg_tensor *bt = calloc(n ? n : 1, sizeof *bt);
  uint64_t *bs = calloc(d->n_bscalars ? d->n_bscalars : 1, sizeof *bs);
  uint32_t cap = hbg__sub_size(d, 1);
  uint8_t *buf = malloc(cap);
  CHECK(bt && bs && buf);
  for (uint32_t i = 0; i < n; i++) {
    const hbg_def_bsig *s = &d->bsig[i];
    bt[i].addr = 0x10000000ull * (i + 1);
    bt[i].offset = 8ull * i;
    bt[i].dtype = s->dtype;
    bt[i].ndim = s->ndim;
    bt[i].mode = s->mode;
    memcpy(bt[i].shape, s->shape, sizeof s->shape);
    memcpy(bt[i].strides, s->strides, sizeof s->strides);
  }
  CHECK(hbg__def_check_boundary(d, bt, n, d->n_bscalars) == 0);
  hbg__def_view dv;
  CHECK(hbg__def_validate(d->image, d->size, &dv) == 0);
  for (int inl = 0; inl < 2; inl++) {
    uint32_t sz = hbg__sub_size(d, inl);
    CHECK(hbg__sub_write(buf, cap, d, 7, 3, bt, bs, inl) == (int)sz);
    hbg__sub_view sv;
    CHECK(hbg__sub_validate(buf, sz, &sv) == 0);
    CHECK(hbg__sub_check_def(&sv, &dv) == 0);
    /* hbg_image.h's iterator expands every node of a valid replay, each
     * argument at its boundary's or the heap block's address. */
    const uint64_t heap = 0x40000000ull;
    hbg_img_graph g;
    CHECK(hbg_img_graph_init(&g, &dv, &sv, heap) == 0);
    for (uint32_t j = 0; j < dv.hdr->n_nodes; j++) {
      hbg_img_node nd;
      CHECK(hbg_img_graph_node(&g, j, &nd) == 0);
      for (uint32_t k = 0; k < nd.n_tensors; k++) {
        hbg_img_arg a;
        CHECK(hbg_img_graph_tensor(&g, j, k, &a) == 0);
        CHECK(a.src >= HBG_SRC_INTERNAL
                  ? a.addr == heap + a.base_offset
                  : a.addr == bt[a.ref].addr + bt[a.ref].offset +
                                  a.base_offset);
      }
      for (uint32_t k = 0; k < nd.n_scalars; k++) {
        uint64_t v;
        CHECK(hbg_img_graph_scalar(&g, j, k, &v) == 0);
      }
    }
    CHECK(sv.hdr->n_tensors == n);
    CHECK(sv.hdr->off_tensors == sizeof(hbg_sub_hdr));
    CHECK(sv.hdr->off_scalars ==
          sizeof(hbg_sub_hdr) + n * sizeof(hbg_sub_bind));
    for (uint32_t i = 0; i < n; i++)
      CHECK(sv.tensors[i].addr == bt[i].addr &&
            sv.tensors[i].offset == bt[i].offset);
    if (inl)
      CHECK(hbg__def_validate(sv.inline_def, sv.hdr->def_size, NULL) == 0);
  }
  /* One boundary moved off its alignment: the host refuses the replay and
   * the device refuses the Submission, whatever the Definition holds. */
  for (uint32_t i = 0; i < n; i++) {
    if (d->balign[i] < 2)
      continue;
    bt[i].offset += 1;
    CHECK(hbg__def_check_boundary(d, bt, n, d->n_bscalars) == HBG_E_INVAL);
    uint32_t sz = hbg__sub_size(d, 0);
    CHECK(hbg__sub_write(buf, cap, d, 7, 3, bt, bs, 0) == (int)sz);
    hbg__sub_view sv;
    CHECK(hbg__sub_validate(buf, sz, &sv) == 0);
    CHECK(hbg__sub_check_def(&sv, &dv) == HBG_E_IMG_TENSOR_ALIGN);
    bt[i].offset -= 1;
    break;
  }
  free(buf);
  free(bs);
  free(bt);
  hbg__def_free(d);
}

/* The validators' pieces, last unit first: the serial verdicts. */
static void pieces(const uint8_t *p, size_t size, int nrc, int wrc) {
  hbg_img_def_view v;
  int rc = hbg_img_def_check_head(p, size, &v);
  if (rc == 0) {
    uint64_t least = HBG_IMG_KEY_NONE;
    for (uint32_t u = hbg_img_def_units(&v); u-- > 0;) {
      uint64_t k = hbg_img_def_check_unit(&v, u);
      least = k < least ? k : least;
    }
    rc = hbg_img_key_code(least);
  }
  CHECK(rc == nrc);
  hbg_img_win_view w;
  rc = hbg_img_win_check_head(p, size, &w);
  if (rc == 0) {
    for (uint32_t i = w.hdr->n_tasks; i-- > 0;) {
      int e = hbg_img_win_check_entry(&w, i);
      rc = e ? e : rc;
    }
  }
  CHECK(rc == wrc);
}

static void run(uint8_t *p, size_t size) {
  hbg__def_view dv;
  hbg__sub_view sv;
  hbg__win_view wv;

  int drc = hbg__def_validate(p, size, &dv);
  int nrc = hbg__def_validate_nohash(p, size, &dv);
  if (drc == 0)
    CHECK(nrc == 0);
  if (nrc == 0)
    walk_def(&dv);
  if (drc == 0) {
    iterate(&dv, NULL);
    replay(p, size);
  }

  int src = hbg__sub_validate(p, size, &sv);
  if (src == 0) {
    const hbg_sub_hdr *h = sv.hdr;
    uint64_t hashed = sv.inline_def ? h->off_def : h->total_size;
    CHECK((uint64_t)h->off_tensors + (uint64_t)h->n_tensors * 16 <= hashed);
    CHECK((uint64_t)h->off_scalars + (uint64_t)h->n_scalars * 8 <= hashed);
    uint64_t s = 0;
    for (uint32_t i = 0; i < h->n_tensors; i++) {
      CHECK(sv.tensors[i].addr != 0);
      s += sv.tensors[i].offset;
    }
    for (uint32_t i = 0; i < h->n_scalars; i++)
      s += sv.scalars[i];
    sink = s;
    if (sv.inline_def &&
        hbg__def_validate(sv.inline_def, sv.hdr->def_size, &dv) == 0 &&
        hbg__sub_check_def(&sv, &dv) == 0)
      iterate(&dv, &sv);
  }

  int wrc = hbg__win_validate(p, size, &wv);
  if (wrc == 0) {
    uint64_t s = 0;
    for (uint32_t i = 0; i < wv.hdr->n_tasks; i++) {
      const hbg_win_task *t = hbg__win_task(&wv, i);
      CHECK(t != NULL);
      const uint32_t *deps = (const uint32_t *)((const uint8_t *)t + t->off_deps);
      for (uint32_t k = 0; k < t->n_deps; k++)
        s += deps[k];
    }
    CHECK(hbg__win_task(&wv, wv.hdr->n_tasks) == NULL);
    sink = s;
  }

  pieces(p, size, nrc, wrc);

  uint32_t magic = 0;
  if (size >= 4)
    memcpy(&magic, p, 4);
  int expect = magic == HBG_DEF_MAGIC   ? drc
               : magic == HBG_SUB_MAGIC ? src
               : magic == HBG_WIN_MAGIC ? wrc
                                        : 1;
  int rc = hbg__image_dump(p, size, 0, devnull);
  if (magic == HBG_SUB_MAGIC) {
    if (src || !sv.inline_def)
      CHECK(rc == src);
  } else if (expect != 1) {
    CHECK(rc == expect);
  }
  if (size <= 16384)
    (void)hbg__image_dump(p, size, 1, devnull);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!devnull)
    devnull = fopen("/dev/null", "w");
  /* An exactly sized malloc block: 8-aligned, and ASan sees any overread. */
  uint8_t *p = malloc(size ? size : 1);
  if (!p)
    return 0;
  memcpy(p, data, size);
  run(p, size);

  /* Same bytes with the hash made right for the kind they claim to be; a
   * Submission's inline Definition too, and the Submission's def_hash
   * with it, so that mutations inside it reach the iterator. */
  uint32_t magic = 0;
  if (size >= sizeof(hbg_sub_hdr))
    memcpy(&magic, p, 4);
  uint64_t hashed = 0;
  if (magic == HBG_DEF_MAGIC && size >= sizeof(hbg_def_hdr)) {
    hashed = size;
  } else if (magic == HBG_SUB_MAGIC) {
    const hbg_sub_hdr *h = (const hbg_sub_hdr *)p;
    const uint32_t od = h->off_def;
    const int inl = (h->flags & HBG_SUB_INLINE_DEF) && od <= size;
    hashed = inl ? od : size;
    if (inl && od % 8 == 0 && od >= sizeof *h &&
        size - od >= sizeof(hbg_def_hdr)) {
      uint64_t dh = hbg__hash_skip(p + od, size - od, 16);
      memcpy(p + od + 16, &dh, 8);
      memcpy(p + offsetof(hbg_sub_hdr, def_hash), &dh, 8);
    }
  }
  if (hashed >= 24) {
    uint64_t hv = hbg__hash_skip(p, hashed, 16);
    uint64_t old;
    memcpy(&old, p + 16, 8);
    if (hv != old) {
      memcpy(p + 16, &hv, 8);
      run(p, size);
    }
  }
  free(p);
  return 0;
}
