/* Lane-model user kernels (hbg_kernel.h) on the sim, registered with
 * hbg_kernel_register:
 *   - every bad argument is HBG_E_INVAL naming the element; an id taken
 *     (by either registration call, or twice in one call) is HBG_E_BUSY
 *     and registers none of the call; a device that runs no user code is
 *     HBG_E_UNSUPPORTED; through the fault wrapper the inner sim's table;
 *     an array of a newer, larger struct is read at its own stride;
 *   - a per-row kernel with a scratch reduction gives the host's bits with
 *     1 and 4 lanes, each phase run by every lane (rows * phases * lanes
 *     calls);
 *   - errors: the most negative of a phase's lanes' results fails the
 *     launch at its entry and node, a positive one is HBG_E_KERNEL, no
 *     later phase runs; a per-row count naming a tensor the call lacks is
 *     HBG_E_KERNEL; hbg_sim_unregister_kernel removes one. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stdatomic.h>
#include <string.h>

#include "graph_fixture.h"
#include "test.h"

#define K_ROWSUM (HBG_KERNEL_USER_MIN + 0x10) /* [x R x D, out R] */
#define K_ERR (HBG_KERNEL_USER_MIN + 0x11)    /* [x]; s0 s1 s2 below */
#define PARTS 8u
#define R 5u
#define D 37u

static atomic_uint g_calls, g_late;

/* out[r] = sum of row r of x: phase 0, partial p = sum over j = p mod 8
 * (ascending j); 1..3, the tree; 4, out[r] = s[0]. */
static int rowsum(const hbg_kernel_call *c, uint64_t phase, uint32_t lane,
                  uint32_t n_lanes, float *s) {
  atomic_fetch_add(&g_calls, 1);
  const hbg_kernel_tensor *x = &c->t[0], *out = &c->t[1];
  uint64_t row = phase / 5;
  uint32_t sub = (uint32_t)(phase % 5), d = x->shape[x->ndim - 1];
  const float *px = (const float *)x->data + hbg_kernel_row_offset(x, row);
  if (sub == 0) {
    for (uint32_t p = lane; p < PARTS; p += n_lanes) {
      float acc = 0.0f;
      for (uint32_t j = p; j < d; j += PARTS)
        acc = acc + px[j];
      s[p] = acc;
    }
  } else if (sub < 4) {
    uint32_t w = PARTS >> sub;
    for (uint32_t i = lane; i < w; i += n_lanes)
      s[i] = s[i] + s[i + w];
  } else if (lane == 0) {
    ((float *)out->data)[row * out->strides[0]] = s[0];
  }
  return 0;
}

/* Phase s2 fails: lane 0 with s0, the other lanes with s1; a call into
 * a later phase is counted in g_late. */
static int fails(const hbg_kernel_call *c, uint64_t phase, uint32_t lane,
                 uint32_t n_lanes, float *s) {
  (void)n_lanes;
  (void)s;
  if (phase > c->scalars[2])
    atomic_fetch_add(&g_late, 1);
  if (phase != c->scalars[2])
    return 0;
  return (int)(int64_t)c->scalars[lane == 0 ? 0 : 1];
}

static hbg_kernel_impl impl(uint32_t kernel, uint32_t phases,
                            uint32_t rows_of, uint64_t scratch,
                            hbg_kernel_lane_fn fn) {
  hbg_kernel_impl k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.kernel = kernel;
  k.phases = phases;
  k.rows_of = rows_of;
  k.scratch_floats = scratch;
  k.fn = fn;
  return k;
}

static int dummy_open(hbg_device *dev, const char *options) {
  (void)dev;
  (void)options;
  return 0;
}
static void dummy_close(hbg_device *dev) { (void)dev; }

static int never(void *user, const hbg_tensor *t, void *const *data,
                 uint32_t nt, const uint64_t *sc, uint32_t ns) {
  (void)user;
  (void)t;
  (void)data;
  (void)nt;
  (void)sc;
  (void)ns;
  return 0;
}

#define EXPECT_MSG(code, expr, text)                                           \
  do {                                                                         \
    ASSERT_ERR(expr, code);                                                    \
    if (!strstr(hbg_last_error(), text))                                       \
      T_FAIL("message '%s' lacks '%s'", hbg_last_error(), text);              \
  } while (0)

static void test_register(void) {
  hbg_device *sim;
  ASSERT_OK(hbg_device_open("sim", "mem=8M", &sim));
  hbg_kernel_impl k[2] = {impl(K_ROWSUM, 5, 1, PARTS, rowsum),
                          impl(K_ERR, 3, 0, 0, fails)};
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(NULL, k, 2), "NULL device");
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(sim, NULL, 2), "NULL impls");
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(sim, k, 0), "n 0");
  hbg_kernel_impl bad[2] = {k[0], k[1]};
  bad[0].struct_size = 8;
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(sim, bad, 2), "struct_size 8");
  bad[0] = k[0];
  bad[1].struct_size = sizeof bad[1] + 8;
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(sim, bad, 2), "impls[1]");
  struct {
    uint32_t *field;
    uint64_t value;
    int code;
    const char *text;
  } cases[] = {
      {&bad[1].kernel, HBG_KERNEL_FILL, HBG_E_INVAL, "not a user kernel"},
      {&bad[1].kernel, HBG_KERNEL_USER_MIN - 1, HBG_E_INVAL,
       "not a user kernel"},
      {&bad[1].phases, 0, HBG_E_INVAL, "phases 0"},
      {&bad[1].phases, (1u << 20) + 1, HBG_E_INVAL, "phases 1048577"},
      {&bad[1].rows_of, 65, HBG_E_INVAL, "rows_of 65"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bad[1] = k[1];
    *cases[i].field = (uint32_t)cases[i].value;
    EXPECT_MSG(cases[i].code, hbg_kernel_register(sim, bad, 2),
               cases[i].text);
  }
  bad[1] = k[1];
  bad[1].scratch_floats = (1ull << 24) + 1;
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(sim, bad, 2), "scratch_floats");
  bad[1] = k[1];
  bad[1].fn = NULL;
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(sim, bad, 2), "NULL");
  /* Nothing of the failed calls stuck: both register now. */
  ASSERT_OK(hbg_kernel_register(sim, k, 2));
  EXPECT_MSG(HBG_E_BUSY, hbg_kernel_register(sim, &k[1], 1), "0x1011");
  ASSERT_ERR(hbg_sim_register_kernel(sim, K_ERR, never, NULL), HBG_E_BUSY);
  ASSERT_OK(hbg_sim_unregister_kernel(sim, K_ROWSUM));
  ASSERT_OK(hbg_sim_unregister_kernel(sim, K_ERR));
  /* Twice in one call, or one taken by hbg_sim_register_kernel: none of
   * the call is registered. */
  hbg_kernel_impl twice[3] = {k[0], k[1], k[0]};
  EXPECT_MSG(HBG_E_BUSY, hbg_kernel_register(sim, twice, 3), "impls[2]");
  ASSERT_OK(hbg_sim_register_kernel(sim, K_ERR, never, NULL));
  EXPECT_MSG(HBG_E_BUSY, hbg_kernel_register(sim, k, 2), "impls[1]");
  ASSERT_ERR(hbg_sim_unregister_kernel(sim, K_ROWSUM), HBG_E_NOTFOUND);
  hbg_device_close(sim);

  /* A newer caller's larger struct: read at its stride. */
  struct newer {
    hbg_kernel_impl k;
    uint64_t later_field;
  } nv[2] = {{k[0], 7}, {k[1], 7}};
  nv[0].k.struct_size = nv[1].k.struct_size = sizeof nv[0];
  ASSERT_OK(hbg_device_open("fault", "inner=sim;mem=8M", &sim));
  ASSERT_OK(hbg_kernel_register(sim, &nv[0].k, 2));
  ASSERT_ERR(hbg_kernel_register(hbg_fault_inner(sim), &k[1], 1), HBG_E_BUSY);
  ASSERT_OK(hbg_sim_unregister_kernel(sim, K_ERR));
  hbg_device_close(sim);

  static const hbg_dev_ops dummy = {.struct_size = sizeof(hbg_dev_ops),
                                    .abi_version = HBG_DEV_ABI_VERSION,
                                    .name = "dummy",
                                    .open = dummy_open,
                                    .close = dummy_close};
  hbg_device *other;
  ASSERT_OK(hbg_device_open_ops(&dummy, NULL, &other));
  EXPECT_MSG(HBG_E_UNSUPPORTED, hbg_kernel_register(other, k, 2), "dummy");
  hbg_device_close(other);
}

typedef struct env {
  hbg_runtime *rt;
  uint64_t x, out;
} env;

static void env_open(env *v, const char *options) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_options = options;
  ASSERT_OK(hbg_runtime_create(&cfg, &v->rt));
  ASSERT_OK(hbg_buffer_alloc(v->rt, R * D * 4, &v->x));
  ASSERT_OK(hbg_buffer_alloc(v->rt, R * 4, &v->out));
  float h[R * D];
  for (uint32_t i = 0; i < R * D; i++)
    h[i] = (float)((int)(i * 29 % 83) - 41) / 7.0f;
  ASSERT_OK(hbg_buffer_write(v->rt, v->x, h, sizeof h));
}

static void env_close(env *v) {
  ASSERT_OK(hbg_buffer_free(v->rt, v->x));
  ASSERT_OK(hbg_buffer_free(v->rt, v->out));
  hbg_runtime_destroy(v->rt);
}

/* Launch one task; @return the bind's result, with its location. */
static int run(env *v, hbg_task *t, uint32_t *entry, uint32_t *node) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(v->rt, &b));
  ASSERT_OK(hbg_submit_task(b, t, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  int rc = hbg_bind_wait(b);
  if (rc)
    ASSERT_OK(hbg_bind_error_location(b, entry, node));
  hbg_bind_end(b);
  return rc;
}

static void rowsums(uint32_t lanes, float *got) {
  char opt[64];
  snprintf(opt, sizeof opt, "mem=8M,workers=2,lanes=%u", lanes);
  env v;
  env_open(&v, opt);
  hbg_kernel_impl k = impl(K_ROWSUM, 5, 1, PARTS, rowsum);
  ASSERT_OK(hbg_kernel_register(hbg_runtime_device(v.rt), &k, 1));
  hbg_tensor a[2] = {ten(v.x, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, R, D),
                     ten(v.out, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, R, 0)};
  hbg_task t = task(K_ROWSUM, a, 2, NULL, 0, NULL, 0);
  atomic_store(&g_calls, 0);
  uint32_t e, n;
  ASSERT_OK(run(&v, &t, &e, &n));
  ASSERT_EQ(atomic_load(&g_calls), R * 5 * lanes);
  ASSERT_OK(hbg_buffer_read(v.rt, got, v.out, R * 4));
  env_close(&v);
}

static void test_lanes(void) {
  float one[R], four[R], ref[R], x[R * D];
  rowsums(1, one);
  rowsums(4, four);
  for (uint32_t i = 0; i < R * D; i++)
    x[i] = (float)((int)(i * 29 % 83) - 41) / 7.0f;
  for (uint32_t r = 0; r < R; r++) {
    float s[PARTS];
    for (uint32_t p = 0; p < PARTS; p++) {
      s[p] = 0.0f;
      for (uint32_t j = p; j < D; j += PARTS)
        s[p] = s[p] + x[r * D + j];
    }
    for (uint32_t w = PARTS / 2; w; w /= 2)
      for (uint32_t i = 0; i < w; i++)
        s[i] = s[i] + s[i + w];
    ref[r] = s[0];
  }
  ASSERT(memcmp(one, ref, sizeof ref) == 0);
  ASSERT(memcmp(four, ref, sizeof ref) == 0);
}

static void test_errors(void) {
  env v;
  env_open(&v, "mem=8M,workers=2,lanes=3");
  hbg_device *dev = hbg_runtime_device(v.rt);
  hbg_kernel_impl k[2] = {impl(K_ERR, 4, 0, 0, fails),
                          impl(K_ROWSUM, 5, 3, PARTS, rowsum)};
  ASSERT_OK(hbg_kernel_register(dev, k, 2));
  hbg_tensor x = ten(v.x, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, R * D, 0);
  struct {
    int64_t lane0, others;
    uint64_t phase;
    int want;
  } cases[] = {
      {HBG_E_RANGE, HBG_E_IO, 1, HBG_E_IO},   /* the most negative */
      {HBG_E_IO, HBG_E_RANGE, 0, HBG_E_IO},   /* whichever lane has it */
      {0, HBG_E_RANGE, 2, HBG_E_RANGE},       /* the other lanes alone */
      {5, 0, 3, HBG_E_KERNEL},                /* positive */
      {0, 0, 9, 0},                           /* no phase fails */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hbg_scalar sc[3] = {hbg_scalar_static((uint64_t)cases[i].lane0),
                        hbg_scalar_static((uint64_t)cases[i].others),
                        hbg_scalar_static(cases[i].phase)};
    hbg_task t = task(K_ERR, &x, 1, sc, 3, NULL, 0);
    atomic_store(&g_late, 0);
    uint32_t entry = 9, node = 9;
    ASSERT_ERR(run(&v, &t, &entry, &node), cases[i].want);
    if (cases[i].want) {
      ASSERT_EQ(entry, 0);
      ASSERT_EQ(node, HBG_TASK_NONE);
      ASSERT_EQ(atomic_load(&g_late), 0); /* no later phase ran */
    }
  }
  /* A per-row count of tensor 2, and the call has two. */
  hbg_tensor a[2] = {ten(v.x, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, R, D),
                     ten(v.out, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, R, 0)};
  hbg_task t = task(K_ROWSUM, a, 2, NULL, 0, NULL, 0);
  uint32_t entry, node;
  ASSERT_ERR(run(&v, &t, &entry, &node), HBG_E_KERNEL);
  /* Unregistered, a lane kernel is gone like any other. */
  ASSERT_OK(hbg_sim_unregister_kernel(dev, K_ERR));
  hbg_scalar sc[3] = {hbg_scalar_static(0), hbg_scalar_static(0),
                      hbg_scalar_static(0)};
  t = task(K_ERR, &x, 1, sc, 3, NULL, 0);
  ASSERT_ERR(run(&v, &t, &entry, &node), HBG_E_KERNEL);
  env_close(&v);
}

int main(void) {
  test_register();
  test_lanes();
  test_errors();
  return 0;
}
