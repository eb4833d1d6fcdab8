/* Inferred dependencies between a bind's entries (hbg_config.deps):
 * - the interval structure against a brute-force O(n^2) reference over
 *   random accesses: the same transitive closure, and every edge a real
 *   conflict, at most one per producer;
 * - random DAGs of tasks and graph submissions over overlapping views of a
 *   few buffers, run on the sim with no explicit ids: the results equal
 *   serial execution on the host, bit for bit;
 * - a graph's boundary tensor counts as its inner tasks use it;
 * - explicit ids merged; too many producers is HBG_E_LIMIT, located;
 * - HBG_DEPS / hbg_config.deps / HBG_CONFIG_SIZE_V1. */
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg.h>

#include "core/core.h"
#include "graph_fixture.h"
#include "test.h"

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state % n);
}

/* ---------------- the structure against brute force ---------------- */

#define MAXE 160
#define MAXA 4

typedef struct acc {
  uint64_t lo, hi;
  int write;
} acc;

typedef struct ent {
  acc a[MAXA];
  uint32_t n;
} ent;

static uint64_t reach[MAXE][(MAXE + 63) / 64];

static int conflict(const ent *x, const ent *y) {
  for (uint32_t i = 0; i < x->n; i++)
    for (uint32_t j = 0; j < y->n; j++)
      if ((x->a[i].write || y->a[j].write) && x->a[i].lo < y->a[j].hi &&
          y->a[j].lo < x->a[i].hi)
        return 1;
  return 0;
}

/* reach[j] = entries j reaches through edges (deps of j and their reach). */
static void closure_add(uint32_t j, uint32_t dep) {
  reach[j][dep / 64] |= 1ull << (dep % 64);
  for (uint32_t w = 0; w < (MAXE + 63) / 64; w++)
    reach[j][w] |= reach[dep][w];
}

static void structure_trial(uint64_t seed) {
  static ent e[MAXE];
  static uint64_t ref[MAXE][(MAXE + 63) / 64];
  rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
  uint32_t n = 20 + rnd(MAXE - 20);
  /* three buffers far apart, ranges inside each */
  for (uint32_t i = 0; i < n; i++) {
    e[i].n = 1 + rnd(MAXA);
    for (uint32_t k = 0; k < e[i].n; k++) {
      uint64_t base = (uint64_t)(1 + rnd(3)) << 32;
      uint64_t lo = rnd(256), len = 1 + rnd(48);
      e[i].a[k] = (acc){base + lo, base + lo + len, rnd(3) == 0};
    }
  }
  hbg__deps d;
  memset(&d, 0, sizeof d);
  hbg__deps_reset(&d);
  memset(reach, 0, sizeof reach);
  memset(ref, 0, sizeof ref);
  for (uint32_t j = 0; j < n; j++) {
    hbg__deps_entry(&d);
    for (uint32_t k = 0; k < e[j].n; k++)
      ASSERT_OK(hbg__deps_add(&d, e[j].a[k].lo >> 32 << 32, e[j].a[k].lo,
                              e[j].a[k].hi - e[j].a[k].lo, e[j].a[k].write));
    ASSERT_OK(hbg__deps_infer(&d, NULL, 0, "test", j));
    for (uint32_t k = 0; k < d.n_out; k++) {
      uint32_t p = d.out[k];
      ASSERT_LT(p, j);
      if (k)
        ASSERT_LT(d.out[k - 1], p); /* sorted, one edge per producer */
      if (!conflict(&e[p], &e[j]))
        T_FAIL("seed %llu: entry %u waits for %u without a conflict",
               (unsigned long long)seed, j, p);
      closure_add(j, p);
    }
    hbg__deps_commit(&d, j);
    for (uint32_t i = 0; i < j; i++)
      if (conflict(&e[i], &e[j])) {
        ref[j][i / 64] |= 1ull << (i % 64);
        for (uint32_t w = 0; w < (MAXE + 63) / 64; w++)
          ref[j][w] |= ref[i][w];
      }
    if (memcmp(ref[j], reach[j], sizeof ref[j]) != 0)
      T_FAIL("seed %llu: entry %u: inferred closure differs from the "
             "brute-force one",
             (unsigned long long)seed, j);
  }
  hbg__deps_free(&d);
}

/* Two writes of one entry over the same earlier record: the first cuts it
 * short, the second must leave it so (not stretch it back over its own
 * range), so a later reader of those bytes waits for the entry alone. */
static void double_write(void) {
  hbg__deps d;
  memset(&d, 0, sizeof d);
  hbg__deps_reset(&d);
  hbg__deps_entry(&d);
  ASSERT_OK(hbg__deps_add(&d, 0, 0, 25, 1));
  ASSERT_OK(hbg__deps_infer(&d, NULL, 0, "test", 0));
  hbg__deps_commit(&d, 0);
  hbg__deps_entry(&d);
  ASSERT_OK(hbg__deps_add(&d, 0, 10, 20, 1));
  ASSERT_OK(hbg__deps_add(&d, 0, 20, 20, 1));
  ASSERT_OK(hbg__deps_infer(&d, NULL, 0, "test", 1));
  ASSERT_UEQ(d.n_out, 1u);
  hbg__deps_commit(&d, 1);
  hbg__deps_entry(&d);
  ASSERT_OK(hbg__deps_add(&d, 0, 12, 6, 0));
  ASSERT_OK(hbg__deps_infer(&d, NULL, 0, "test", 2));
  ASSERT_UEQ(d.n_out, 1u);
  ASSERT_UEQ(d.out[0], 1u);
  hbg__deps_commit(&d, 2);
  hbg__deps_free(&d);
}

/* ---------------- end to end on the sim ---------------- */

#define NBUF 3
#define BUF_FLOATS 512

static hbg_runtime *make_rt(int deps) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_options = "workers=4";
  cfg.deps = (uint32_t)deps;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static hbg_tensor view(uint64_t addr, uint32_t off, uint32_t len,
                       uint32_t mode) {
  hbg_tensor t;
  uint32_t dims[1] = {len};
  ASSERT_OK(hbg_tensor_contig(&t, addr, (uint64_t)off * 4, HBG_DTYPE_F32, 1,
                              dims, mode));
  return t;
}

static void add3(hbg_bind *bd, hbg_tensor a, hbg_tensor b, hbg_tensor out) {
  hbg_tensor args[3] = {a, b, out};
  hbg_task t = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = args};
  ASSERT_OK(hbg_submit_task(bd, &t, NULL));
}

static int disjoint(uint32_t a, uint32_t b, uint32_t len) {
  return a + len <= b || b + len <= a;
}

static void dag_trial(hbg_runtime *rt, uint64_t seed) {
  static float host[NBUF][BUF_FLOATS], got[BUF_FLOATS];
  uint64_t buf[NBUF];
  rng_state = seed * 0x2545F4914F6CDD1Dull + 7;
  for (int b = 0; b < NBUF; b++) {
    for (int k = 0; k < BUF_FLOATS; k++)
      host[b][k] = (float)((k * 7 + b * 13 + (int)seed) % 17) - 8.0f;
    ASSERT_OK(hbg_buffer_alloc(rt, sizeof host[b], &buf[b]));
    ASSERT_OK(hbg_buffer_write(rt, buf[b], host[b], sizeof host[b]));
  }
  hbg_bind *bd;
  ASSERT_OK(hbg_bind_begin(rt, &bd));
  uint32_t n = 40 + rnd(80);
  for (uint32_t i = 0; i < n; i++) {
    static const uint32_t lens[] = {8, 16, 24, 64};
    uint32_t len = lens[rnd(4)];
    uint32_t ba = rnd(NBUF), bb = rnd(NBUF), bo = rnd(NBUF);
    uint32_t oa = rnd(BUF_FLOATS - len + 1), ob = rnd(BUF_FLOATS - len + 1);
    uint32_t oo = rnd(BUF_FLOATS - len + 1);
    /* the output may not overlap an input: move it until it does not */
    for (int tries = 0;
         tries < 64 && ((bo == ba && !disjoint(oo, oa, len)) ||
                        (bo == bb && !disjoint(oo, ob, len)));
         tries++)
      oo = rnd(BUF_FLOATS - len + 1);
    if ((bo == ba && !disjoint(oo, oa, len)) ||
        (bo == bb && !disjoint(oo, ob, len)))
      continue;
    float *A = &host[ba][oa], *B = &host[bb][ob], *O = &host[bo][oo];
    uint32_t kind = rnd(4);
    if (kind == 3) {
      /* a graph: out = (a + b) + b */
      hbg_tensor bt[3] = {view(buf[ba], oa, len, HBG_ACCESS_INOUT),
                          view(buf[bb], ob, len, HBG_ACCESS_IN),
                          view(buf[bo], oo, len, HBG_ACCESS_OUT)};
      hbg_graph_submit g = {.key = 100 + len, .n_tensors = 3,
                            .tensors = bt, .record = add_add_body};
      ASSERT_OK(hbg_submit_graph(bd, &g, NULL));
      for (uint32_t k = 0; k < len; k++)
        O[k] = (A[k] + B[k]) + B[k];
    } else if (kind == 2) {
      /* in place: a += b */
      if (ba == bb && !disjoint(oa, ob, len))
        continue;
      add3(bd, view(buf[ba], oa, len, HBG_ACCESS_IN),
           view(buf[bb], ob, len, HBG_ACCESS_IN),
           view(buf[ba], oa, len, HBG_ACCESS_OUT));
      for (uint32_t k = 0; k < len; k++)
        A[k] = A[k] + B[k];
    } else if (kind == 1) {
      hbg_tensor args[2] = {view(buf[ba], oa, len, HBG_ACCESS_IN),
                            view(buf[bo], oo, len, HBG_ACCESS_OUT)};
      hbg_scalar s = hbg_scalar_static(hbg_scalar_f32(0.5f));
      hbg_task t = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = args,
                    .n_scalars = 1, .scalars = &s};
      ASSERT_OK(hbg_submit_task(bd, &t, NULL));
      for (uint32_t k = 0; k < len; k++)
        O[k] = A[k] * 0.5f;
    } else {
      add3(bd, view(buf[ba], oa, len, HBG_ACCESS_IN),
           view(buf[bb], ob, len, HBG_ACCESS_IN),
           view(buf[bo], oo, len, HBG_ACCESS_OUT));
      for (uint32_t k = 0; k < len; k++)
        O[k] = A[k] + B[k];
    }
  }
  ASSERT_OK(hbg_bind_launch(bd));
  ASSERT_OK(hbg_bind_wait(bd));
  hbg_bind_end(bd);
  for (int b = 0; b < NBUF; b++) {
    ASSERT_OK(hbg_buffer_read(rt, got, buf[b], sizeof got));
    if (memcmp(got, host[b], sizeof got) != 0)
      T_FAIL("seed %llu: buffer %d differs from serial execution",
             (unsigned long long)seed, b);
    ASSERT_OK(hbg_buffer_free(rt, buf[b]));
  }
}

/* ---------------- the window's deps ---------------- */

static const hbg_task_id *entry_deps(const hbg_bind *b, uint32_t id,
                                     uint32_t *n) {
  const hbg_win_task *e = (const hbg_win_task *)(b->win.p + b->index[id]);
  *n = e->n_deps;
  return (const hbg_task_id *)((const uint8_t *)e + e->off_deps);
}

static void fill(hbg_bind *b, uint64_t addr, uint32_t off, uint32_t len,
                 hbg_task_id *id) {
  hbg_tensor o = view(addr, off, len, HBG_ACCESS_OUT);
  hbg_scalar s = hbg_scalar_static(hbg_scalar_f32(1.0f));
  hbg_task t = {.kernel = HBG_KERNEL_FILL, .n_args = 1, .args = &o,
                .n_scalars = 1, .scalars = &s};
  ASSERT_OK(hbg_submit_task(b, &t, id));
}

static void window_checks(void) {
  hbg_runtime *rt = make_rt(HBG_DEPS_INFERRED);
  uint64_t x, y;
  ASSERT_OK(hbg_buffer_alloc(rt, 4096, &x));
  ASSERT_OK(hbg_buffer_alloc(rt, 4096, &y));
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task_id w0, w1, g0, g1, c;
  fill(b, x, 0, 64, &w0);  /* writes x[0..64) */
  fill(b, y, 0, 64, &w1);  /* writes y[0..64) */
  /* Two graphs whose boundary 0 (x) is INOUT but only read inside: both
   * wait for w0, not for each other. */
  hbg_tensor bt[3] = {view(x, 0, 64, HBG_ACCESS_INOUT),
                      view(x, 64, 64, HBG_ACCESS_IN),
                      view(y, 128, 64, HBG_ACCESS_OUT)};
  hbg_graph_submit g = {.key = 7, .n_tensors = 3, .tensors = bt,
                        .record = add_add_body};
  ASSERT_OK(hbg_submit_graph(b, &g, &g0));
  bt[2] = view(y, 256, 64, HBG_ACCESS_OUT);
  ASSERT_OK(hbg_submit_graph(b, &g, &g1));
  uint32_t n;
  const hbg_task_id *d = entry_deps(b, g0, &n);
  ASSERT_UEQ(n, 1u);
  ASSERT_UEQ(d[0], w0);
  d = entry_deps(b, g1, &n);
  ASSERT_UEQ(n, 1u);
  ASSERT_UEQ(d[0], w0);
  /* A write over x[0..128) waits for both readers; w0 is implied (each
   * reader waits for it) yet kept only once: one edge per producer. */
  hbg_tensor src = view(y, 128, 128, HBG_ACCESS_IN);
  hbg_tensor dst = view(x, 0, 128, HBG_ACCESS_OUT);
  hbg_tensor cargs[2] = {src, dst};
  hbg_task_id extra = w1; /* explicit, merged */
  hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = cargs,
                .n_deps = 1, .deps = &extra};
  ASSERT_OK(hbg_submit_task(b, &t, &c));
  d = entry_deps(b, c, &n);
  /* x: w0 (write), g0, g1 (reads); y[128..256): g0 and g1 wrote it;
   * explicit w1 */
  ASSERT_UEQ(n, 4u);
  ASSERT_UEQ(d[0], w0);
  ASSERT_UEQ(d[1], w1);
  ASSERT_UEQ(d[2], g0);
  ASSERT_UEQ(d[3], g1);
  /* After the covering write, a reader of x waits only for it. */
  hbg_task_id r;
  hbg_tensor rargs[2] = {view(x, 8, 16, HBG_ACCESS_IN),
                         view(y, 1000, 16, HBG_ACCESS_OUT)};
  t = (hbg_task){.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = rargs};
  ASSERT_OK(hbg_submit_task(b, &t, &r));
  d = entry_deps(b, r, &n);
  ASSERT_UEQ(n, 1u);
  ASSERT_UEQ(d[0], c);
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);

  /* Too many producers: 300 writers of distinct slices, then one reader
   * of all of them. */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  for (uint32_t i = 0; i < 300; i++)
    fill(b, x, i * 2, 2, NULL);
  hbg_tensor all[2] = {view(x, 0, 600, HBG_ACCESS_IN),
                       view(y, 0, 600, HBG_ACCESS_OUT)};
  t = (hbg_task){.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = all};
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_LIMIT);
  const char *msg = hbg_last_error();
  if (!strstr(msg, "hbg_submit_task (entry 300)") || !strstr(msg, "300") ||
      !strstr(msg, "tensor 0"))
    T_FAIL("message does not locate the entry and tensor: %s", msg);
  /* The bind is as before: a smaller reader goes through. */
  all[0] = view(x, 0, 100, HBG_ACCESS_IN);
  all[1] = view(y, 0, 100, HBG_ACCESS_OUT);
  ASSERT_OK(hbg_submit_task(b, &t, &r));
  d = entry_deps(b, r, &n);
  ASSERT_UEQ(n, 50u);
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);

  /* Records are per bind: the next bind starts with none. */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_tensor r2[2] = {view(x, 0, 16, HBG_ACCESS_IN),
                      view(y, 0, 16, HBG_ACCESS_OUT)};
  t = (hbg_task){.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = r2};
  ASSERT_OK(hbg_submit_task(b, &t, &r));
  d = entry_deps(b, r, &n);
  ASSERT_UEQ(n, 0u);
  hbg_bind_end(b);

  /* One entry over 40 buffers (the buffer map grows while it is inferred):
   * a NOP writes a slice of each, the next reads them all back. */
  {
    uint64_t many[40];
    hbg_tensor args[40];
    for (int i = 0; i < 40; i++) {
      ASSERT_OK(hbg_buffer_alloc(rt, 256, &many[i]));
      args[i] = view(many[i], 8, 16, HBG_ACCESS_OUT);
    }
    hbg_task nop = {.kernel = HBG_KERNEL_NOP, .n_args = 40, .args = args};
    ASSERT_OK(hbg_bind_begin(rt, &b));
    fill(b, x, 0, 4, &w0);
    ASSERT_OK(hbg_submit_task(b, &nop, &w1));
    for (int i = 0; i < 40; i++)
      args[i] = view(many[i], i % 2 ? 0 : 20, 8, HBG_ACCESS_IN);
    args[39] = view(x, 0, 4, HBG_ACCESS_IN);
    ASSERT_OK(hbg_submit_task(b, &nop, &r));
    d = entry_deps(b, r, &n);
    ASSERT_UEQ(n, 2u); /* odd i: [0, 8) misses [8, 24); even: [20, 28) meets */
    ASSERT_UEQ(d[0], w0);
    ASSERT_UEQ(d[1], w1);
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_end(b);
    for (int i = 0; i < 40; i++)
      ASSERT_OK(hbg_buffer_free(rt, many[i]));
  }
  hbg_runtime_destroy(rt);

  /* explicit (the default): nothing inferred */
  rt = make_rt(HBG_DEPS_EXPLICIT);
  ASSERT_OK(hbg_buffer_alloc(rt, 4096, &x));
  ASSERT_OK(hbg_bind_begin(rt, &b));
  fill(b, x, 0, 16, &w0);
  fill(b, x, 0, 16, &w1);
  d = entry_deps(b, w1, &n);
  ASSERT_UEQ(n, 0u);
  hbg_bind_end(b);
  hbg_runtime_destroy(rt);
}

/* ---------------- configuration ---------------- */

static void config_checks(void) {
  int v;
  ASSERT_STREQ(hbg_deps_name(HBG_DEPS_INFERRED), "inferred");
  ASSERT_STREQ(hbg_record_name(HBG_RECORD_PER_BIND), "per-bind");
  ASSERT(hbg_deps_name(2) == NULL && hbg_record_name(-1) == NULL);
  ASSERT_OK(hbg_deps_parse("explicit", &v));
  ASSERT_EQ(v, HBG_DEPS_EXPLICIT);
  ASSERT_ERR(hbg_deps_parse("implicit", &v), HBG_E_INVAL);
  ASSERT_ERR(hbg_record_parse("always", &v), HBG_E_INVAL);

  hbg_config cfg;
  setenv("HBG_DEPS", "inferred", 1);
  setenv("HBG_RECORD", "per-bind", 1);
  hbg_config_init(&cfg);
  ASSERT_UEQ(cfg.deps, (uint32_t)HBG_DEPS_INFERRED);
  ASSERT_UEQ(cfg.record, (uint32_t)HBG_RECORD_PER_BIND);
  ASSERT(cfg.env_invalid == NULL);
  setenv("HBG_DEPS", "sometimes", 1);
  hbg_config_init(&cfg);
  ASSERT_STREQ(cfg.env_invalid, "HBG_DEPS");
  if (!strstr(hbg_last_error(), "HBG_DEPS='sometimes'") ||
      !strstr(hbg_last_error(), "inferred"))
    T_FAIL("message: %s", hbg_last_error());
  hbg_runtime *rt = NULL;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
  if (!strstr(hbg_last_error(), "HBG_DEPS"))
    T_FAIL("message: %s", hbg_last_error());
  unsetenv("HBG_DEPS");
  setenv("HBG_RECORD", "twice", 1);
  hbg_config_init(&cfg);
  ASSERT_STREQ(cfg.env_invalid, "HBG_RECORD");
  unsetenv("HBG_RECORD");

  hbg_config_init(&cfg);
  cfg.deps = 5;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
  if (!strstr(hbg_last_error(), "hbg_config.deps=5"))
    T_FAIL("message: %s", hbg_last_error());
  hbg_config_init(&cfg);
  cfg.record = 2;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
  if (!strstr(hbg_last_error(), "hbg_config.record=2"))
    T_FAIL("message: %s", hbg_last_error());

  /* A caller built before deps and record: its struct ends at
   * HBG_CONFIG_SIZE_V1; what lies past it is not read (defaults). */
  hbg_config_init(&cfg);
  cfg.struct_size = HBG_CONFIG_SIZE_V1;
  cfg.deps = 99;
  cfg.record = 99;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_UEQ(rt->cfg.deps, (uint32_t)HBG_DEPS_EXPLICIT);
  ASSERT_UEQ(rt->cfg.record, (uint32_t)HBG_RECORD_ONCE);
  hbg_runtime_destroy(rt);
  cfg.struct_size = HBG_CONFIG_SIZE_V1 + 4;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
}

int main(void) {
  config_checks();
  for (uint64_t s = 1; s <= 300; s++)
    structure_trial(s);
  double_write();
  window_checks();
  hbg_runtime *rt = make_rt(HBG_DEPS_INFERRED);
  for (uint64_t s = 1; s <= 30; s++)
    dag_trial(rt, s);
  hbg_runtime_destroy(rt);
  return 0;
}
