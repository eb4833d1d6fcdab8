/* hbg_image.h's validators in pieces (hbg_img_def_check_head / _unit,
 * hbg_img_win_check_head / _entry), as a parallel executor runs them: units
 * in a random order, split among a random number of "threads" each keeping
 * its least key, the least of those taken at the end. Over the real
 * Definitions of qwen3-14b and dsv4, the exec fixture's small graph, hand-
 * built task windows, and many random corruptions of each (bit flips, table
 * words set to edge values, words swapped, truncations), three verdicts
 * must agree: the pieces in any order, hbg_img_def_validate (serial), and
 * the validator as it was before it was split (a copy kept below as the
 * reference: the serial results may not change). Run under ASan, every
 * unit reads inside the image whatever its bytes. */
#include <hbg/hbg_workload.h>

#include "core/core.h"
/* Only the fixture's graphs and window builder are used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_exec_fixture.h"

#include "validate_ref.h"

/* ---- the pieces, in a random order on a random number of "threads" ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return n ? (uint32_t)(rng % n) : 0;
}

static void shuffle(uint32_t *v, uint32_t n) {
  for (uint32_t i = n; i > 1; i--) {
    uint32_t j = rnd(i), t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

static int par_def_validate(const void *img, uint64_t len) {
  hbg_img_def_view v;
  int rc = hbg_img_def_check_head(img, len, &v);
  if (rc)
    return rc;
  uint32_t units = hbg_img_def_units(&v);
  uint32_t *order = malloc(units * sizeof *order);
  ASSERT(order);
  for (uint32_t u = 0; u < units; u++)
    order[u] = u;
  shuffle(order, units);
  /* thread t takes every threads-th unit of the shuffled order */
  uint32_t threads = 1 + rnd(8);
  uint64_t least = HBG_IMG_KEY_NONE;
  for (uint32_t t = 0; t < threads; t++) {
    uint64_t mine = HBG_IMG_KEY_NONE;
    for (uint32_t i = t; i < units; i += threads) {
      uint64_t k = hbg_img_def_check_unit(&v, order[i]);
      mine = k < mine ? k : mine;
    }
    least = mine < least ? mine : least;
  }
  free(order);
  return hbg_img_key_code(least);
}

static int par_win_validate(const void *img, uint64_t len) {
  hbg_img_win_view w;
  int rc = hbg_img_win_check_head(img, len, &w);
  if (rc)
    return rc;
  uint32_t n = w.hdr->n_tasks, first = UINT32_MAX;
  int code = 0;
  uint32_t *order = malloc((n ? n : 1) * sizeof *order);
  ASSERT(order);
  for (uint32_t i = 0; i < n; i++)
    order[i] = i;
  shuffle(order, n);
  for (uint32_t i = 0; i < n; i++) {
    rc = hbg_img_win_check_entry(&w, order[i]);
    if (rc && order[i] < first) {
      first = order[i];
      code = rc;
    }
  }
  free(order);
  return code;
}

/* ---- corruptions ---- */

static uint64_t n_cases, n_bad, hist[64];

static void agree_def(const uint8_t *img, uint64_t len, const char *what) {
  int a = ref_def_validate(img, len);
  int b = hbg_img_def_validate(img, len, NULL, NULL, NULL);
  int c = par_def_validate(img, len);
  if (a != b || a != c)
    T_FAIL("%s: reference %s, serial %s, pieces %s", what, hbg_err_name(a),
           hbg_err_name(b), hbg_err_name(c));
  n_cases++;
  n_bad += a != 0;
  hist[-a & 63]++;
}

static void agree_win(const uint8_t *img, uint64_t len, const char *what) {
  int a = ref_win_validate(img, len);
  int b = hbg_img_win_validate(img, len, NULL);
  int c = par_win_validate(img, len);
  if (a != b || a != c)
    T_FAIL("%s: reference %s, serial %s, pieces %s", what, hbg_err_name(a),
           hbg_err_name(b), hbg_err_name(c));
  n_cases++;
  n_bad += a != 0;
  hist[-a & 63]++;
}

/* A value likely to sit on an edge of what the word means. */
static uint32_t edge_value(uint32_t old, uint32_t n) {
  switch (rnd(9)) {
  case 0:
    return 0;
  case 1:
    return old + 1;
  case 2:
    return old - 1;
  case 3:
    return n;
  case 4:
    return n - 1;
  case 5:
    return n + 1;
  case 6:
    return UINT32_MAX;
  case 7:
    return rnd(n + 2);
  default:
    return (uint32_t)rng;
  }
}

/* A [start, end) byte range of one of the Definition's tables. */
static void def_table(const uint8_t *img, uint32_t size, uint32_t *lo,
                      uint32_t *hi) {
  hbg_def_hdr h;
  memcpy(&h, img, sizeof h);
  uint64_t n = h.n_nodes;
  const struct {
    uint32_t off;
    uint64_t bytes;
  } t[] = {{0, sizeof h},
           {h.off_nodes, n * sizeof(hbg_def_node)},
           {h.off_fanin_ptr, (n + 1) * 4},
           {h.off_fanin, (uint64_t)h.n_edges * 4},
           {h.off_fanout_ptr, (n + 1) * 4},
           {h.off_fanout, (uint64_t)h.n_edges * 4},
           {h.off_roots, (uint64_t)h.n_roots * 4},
           {h.off_tensors, (uint64_t)h.n_tensors * sizeof(hbg_def_tensor)},
           {h.off_scalars, (uint64_t)h.n_scalars * sizeof(hbg_def_scalar)},
           {h.off_bsig, (uint64_t)h.n_btensors * sizeof(hbg_def_bsig)}};
  uint32_t k = rnd(sizeof t / sizeof t[0]);
  /* an earlier mutation may have moved the header's own fields */
  if (t[k].off < size && t[k].bytes && t[k].bytes <= size - t[k].off) {
    *lo = t[k].off;
    *hi = (uint32_t)(t[k].off + t[k].bytes);
  } else {
    *lo = 0;
    *hi = size;
  }
}

static void mutate(uint8_t *img, uint32_t size, int def, uint32_t n) {
  uint32_t lo = 0, hi = size;
  if (def)
    def_table(img, size, &lo, &hi);
  lo &= ~3u; /* a corrupted header may place a table anywhere */
  uint32_t words = (hi - lo) / 4;
  if (!words)
    return;
  uint32_t *w = (uint32_t *)(void *)(img + lo);
  switch (rnd(4)) {
  case 0: /* a few bits */
    for (uint32_t k = 0, m = 1 + rnd(4); k < m; k++)
      img[lo + rnd(hi - lo)] ^= (uint8_t)(1u << rnd(8));
    break;
  case 1:
  case 2: { /* a word at an edge value */
    uint32_t i = rnd(words);
    w[i] = edge_value(w[i], n);
    break;
  }
  default: { /* two words of one table swapped */
    uint32_t i = rnd(words), j = rnd(words), t = w[i];
    w[i] = w[j];
    w[j] = t;
    break;
  }
  }
}

static void corrupt_def(const uint8_t *img, uint32_t size, uint32_t trials,
                        const char *name) {
  agree_def(img, size, name);
  uint8_t *c = aligned_alloc(8, HBG__ALIGN_UP(size, 8));
  ASSERT(c);
  hbg_def_hdr h;
  memcpy(&h, img, sizeof h);
  for (uint32_t t = 0; t < trials; t++) {
    memcpy(c, img, size);
    for (uint32_t m = 0, k = 1 + rnd(3); m < k; m++)
      mutate(c, size, 1, h.n_nodes);
    agree_def(c, size, name);
  }
  /* every 8-byte truncation of the first 512 bytes, and some of the rest */
  for (uint32_t len = 0; len < size; len += len < 512 ? 8 : 8 * (1 + rnd(64)))
    agree_def(img, len, name);
  free(c);
}

static void corrupt_win(const uint8_t *img, uint32_t size, uint32_t trials,
                        uint32_t n_tasks) {
  agree_win(img, size, "window");
  uint8_t *c = aligned_alloc(8, HBG__ALIGN_UP(size, 8));
  ASSERT(c);
  for (uint32_t t = 0; t < trials; t++) {
    memcpy(c, img, size);
    for (uint32_t m = 0, k = 1 + rnd(3); m < k; m++)
      mutate(c, size, 0, n_tasks);
    agree_win(c, size, "window");
  }
  for (uint32_t len = 0; len < size; len += 8)
    agree_win(img, len, "window");
  free(c);
}

/* The Definitions a workload records, from its runtime's graph cache. */
static void workload_defs(const char *name, uint32_t trials) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = name;
  wc.layers = 2;
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_workload_submit(w, b, 1));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  uint32_t found = 0;
  for (uint32_t i = 0; i < rt->graphs.cap; i++) {
    const hbg__graph *g = hbg__map_at(&rt->graphs, i);
    if (!g)
      continue;
    corrupt_def(g->def->image, g->def->size, trials, name);
    found++;
  }
  printf("  %s: %u Definitions\n", name, found);
  ASSERT(found > 0);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

static void windows(uint32_t trials) {
  for (uint32_t r = 0; r < 4; r++) {
    wb w;
    wb_init(&w);
    hbg_tensor t[2] = {xg_vec(0x1000, 0, XG_N, HBG_ACCESS_IN),
                       xg_vec(0x2000, 0, XG_N, HBG_ACCESS_OUT)};
    uint64_t sc[2] = {1, 2};
    uint32_t n = 3 + rnd(20);
    for (uint32_t i = 0; i < n; i++) {
      uint32_t deps[3] = {rnd(i + 1), rnd(i + 1), rnd(i + 1)};
      uint32_t nd = i ? rnd(4) : 0;
      if (rnd(2))
        (void)wb_task(&w, HBG_KERNEL_ADD, t, 2, sc, rnd(3), deps, nd);
      else
        (void)wb_graph(&w, 0x10000 + 512 * i, 512, 0x90000, 4096, 0x100000,
                       deps, nd);
    }
    wb_finish(&w);
    /* deps were drawn at or below each entry: some point at themselves */
    corrupt_win(w.buf, (uint32_t)w.len, trials, n);
    free(w.buf);
  }
}

int main(void) {
  uint32_t trials = getenv("HBG_TEST_TRIALS") ? (uint32_t)atoi(getenv(
                                                    "HBG_TEST_TRIALS"))
                                              : 20000;
  hbg__def *d = xg_def();
  corrupt_def(d->image, d->size, trials, "exec fixture");
  hbg__def_free(d);
  d = xg_bad_def(); /* valid structure, bad signature: the validator's ok */
  corrupt_def(d->image, d->size, trials / 4, "exec fixture (bad kernel)");
  hbg__def_free(d);
  workload_defs("qwen3-14b", trials / 10);
  workload_defs("dsv4", trials / 10);
  windows(trials);
  printf("%llu images, %llu refused; codes:", (unsigned long long)n_cases,
         (unsigned long long)n_bad);
  for (int c = 0; c < 64; c++)
    if (hist[c])
      printf(" %s %llu", hbg_err_name(-c), (unsigned long long)hist[c]);
  printf("\n");
  /* the corruptions reach every stage of the Definition's checks */
  const int want[] = {HBG_E_IMG_CSR,   HBG_E_IMG_CYCLE, HBG_E_IMG_ROOTS,
                      HBG_E_IMG_REF,   HBG_E_IMG_FIELD, HBG_E_IMG_COUNT,
                      HBG_E_IMG_ALIGN, HBG_E_IMG_OFFSET};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!hist[-want[i] & 63])
      T_FAIL("no corruption gave %s", hbg_err_name(want[i]));
  printf("validate units: ok\n");
  return 0;
}
