/* User kernels (ids >= HBG_KERNEL_USER_MIN): registration on the sim
 * (register, unregister, duplicate, wrong id, wrong device), end-to-end
 * runs as ordinary tasks and inside recorded graphs, structural checks at
 * submit and record time, and launch-time errors (no implementation, an
 * implementation that fails) with their location. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stdatomic.h>
#include <string.h>

#include "graph_fixture.h"
#include "test.h"

#define K_SCALE HBG_KERNEL_USER_MIN        /* [x, out]; s0 = f32 a: out = a x */
#define K_FAIL (HBG_KERNEL_USER_MIN + 1)   /* returns its s0 as the result */
#define K_NONE (HBG_KERNEL_USER_MIN + 2)   /* never registered */
#define N 64u

static atomic_uint g_calls;

static int uscale(void *user, const hbg_tensor *t, void *const *data,
                  uint32_t nt, const uint64_t *sc, uint32_t ns) {
  atomic_fetch_add(&g_calls, 1);
  if (user != &g_calls || nt != 2 || ns != 1 || t[0].ndim != 1 ||
      t[0].dtype != HBG_DTYPE_F32 || !(t[1].mode & HBG_ACCESS_OUT) ||
      t[0].shape[0] != t[1].shape[0] || t[0].addr != 0)
    return HBG_E_INVAL;
  float a = hbg_scalar_to_f32(sc[0]);
  const float *x = data[0];
  float *out = data[1];
  for (uint32_t i = 0; i < t[0].shape[0]; i++)
    out[i * t[1].strides[0]] = a * x[i * t[0].strides[0]];
  return 0;
}

static int fail_with(void *user, const hbg_tensor *t, void *const *data,
                     uint32_t nt, const uint64_t *sc, uint32_t ns) {
  (void)user;
  (void)t;
  (void)data;
  (void)nt;
  return ns ? (int)(int64_t)sc[0] : 0;
}

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

static int dummy_open(hbg_device *dev, const char *options) {
  (void)dev;
  (void)options;
  return 0;
}
static void dummy_close(hbg_device *dev) { (void)dev; }

static void test_registration(void) {
  hbg_device *sim, *fault, *other;
  ASSERT_OK(hbg_device_open("sim", "mem=8M", &sim));
  ASSERT_ERR(hbg_sim_register_kernel(NULL, K_SCALE, uscale, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_sim_register_kernel(sim, K_SCALE, NULL, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_sim_register_kernel(sim, HBG_KERNEL_FILL, uscale, NULL),
             HBG_E_INVAL);
  ASSERT_ERR(hbg_sim_register_kernel(sim, HBG_KERNEL_USER_MIN - 1, uscale, NULL),
             HBG_E_INVAL);
  ASSERT_OK(hbg_sim_register_kernel(sim, K_SCALE, uscale, NULL));
  ASSERT_ERR(hbg_sim_register_kernel(sim, K_SCALE, never, NULL), HBG_E_BUSY);
  ASSERT_OK(hbg_sim_register_kernel(sim, UINT32_MAX, never, NULL));
  ASSERT_ERR(hbg_sim_unregister_kernel(sim, K_NONE), HBG_E_NOTFOUND);
  ASSERT_OK(hbg_sim_unregister_kernel(sim, K_SCALE));
  ASSERT_ERR(hbg_sim_unregister_kernel(sim, K_SCALE), HBG_E_NOTFOUND);
  ASSERT_OK(hbg_sim_register_kernel(sim, K_SCALE, uscale, NULL));
  ASSERT_ERR(hbg_sim_unregister_kernel(NULL, K_SCALE), HBG_E_INVAL);
  hbg_device_close(sim); /* frees the table with its registrations */

  /* Through the fault wrapper: the inner sim's table. */
  ASSERT_OK(hbg_device_open("fault", "inner=sim;mem=8M", &fault));
  ASSERT_OK(hbg_sim_register_kernel(fault, K_SCALE, uscale, NULL));
  ASSERT_ERR(hbg_sim_register_kernel(hbg_fault_inner(fault), K_SCALE, uscale,
                                     NULL),
             HBG_E_BUSY);
  hbg_device_close(fault);

  static const hbg_dev_ops dummy = {.struct_size = sizeof(hbg_dev_ops),
                                    .abi_version = HBG_DEV_ABI_VERSION,
                                    .name = "dummy",
                                    .open = dummy_open,
                                    .close = dummy_close};
  ASSERT_OK(hbg_device_open_ops(&dummy, NULL, &other));
  ASSERT_ERR(hbg_sim_register_kernel(other, K_SCALE, uscale, NULL),
             HBG_E_UNSUPPORTED);
  ASSERT_ERR(hbg_sim_unregister_kernel(other, K_SCALE), HBG_E_UNSUPPORTED);
  hbg_device_close(other);
}

typedef struct env {
  hbg_runtime *rt;
  uint64_t x, y, z, w;
} env;

static void env_open(env *v) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_options = "mem=16M,workers=2";
  cfg.arena_bytes = 1u << 20;
  ASSERT_OK(hbg_runtime_create(&cfg, &v->rt));
  uint64_t *bufs[4] = {&v->x, &v->y, &v->z, &v->w};
  float h[N];
  for (uint32_t k = 0; k < 4; k++) {
    ASSERT_OK(hbg_buffer_alloc(v->rt, N * 4, bufs[k]));
    for (uint32_t i = 0; i < N; i++)
      h[i] = k == 0 ? (float)i : -1.0f;
    ASSERT_OK(hbg_buffer_write(v->rt, *bufs[k], h, sizeof h));
  }
}

static hbg_tensor vec(uint64_t addr, uint32_t mode) {
  return ten(addr, 0, HBG_DTYPE_F32, mode, N, 0);
}

static void expect_scaled(env *v, uint64_t buf, float a) {
  float h[N];
  ASSERT_OK(hbg_buffer_read(v->rt, h, buf, sizeof h));
  for (uint32_t i = 0; i < N; i++)
    if (h[i] != a * (float)i)
      T_FAIL("element %u: %g, expected %g", i, (double)h[i],
             (double)(a * (float)i));
}

/* Boundary [x, out], scalar a: tmp = a x (user kernel, heap output), then
 * out = tmp (built-in copy reading the user kernel's output). */
static int record_scale(hbg_recorder *rec, void *user) {
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  hbg_tensor a[2] = {b[0], vec(0, HBG_ACCESS_OUT)};
  hbg_scalar s = hbg_scalar_boundary(0);
  hbg_task t = task(*(uint32_t *)user, a, 2, &s, 1, NULL, 0);
  int rc = hbg_record_task(rec, &t, NULL);
  if (rc)
    return rc;
  hbg_tensor c[2] = {a[1], b[1]};
  c[0].mode = HBG_ACCESS_IN;
  t = task(HBG_KERNEL_COPY, c, 2, NULL, 0, NULL, 0);
  return hbg_record_task(rec, &t, NULL);
}

static int submit_scale(hbg_bind *b, uint32_t *kernel, uint64_t key,
                        uint64_t x, uint64_t out, float a, hbg_task_id *id) {
  hbg_tensor bt[2] = {vec(x, HBG_ACCESS_IN), vec(out, HBG_ACCESS_OUT)};
  uint64_t alpha = hbg_scalar_f32(a);
  hbg_graph_submit g = {.key = key, .n_tensors = 2, .tensors = bt,
                        .scalars = &alpha, .n_scalars = 1,
                        .record = record_scale, .user = kernel};
  return hbg_submit_graph(b, &g, id);
}

static void test_end_to_end(void) {
  env v;
  env_open(&v);
  hbg_device *dev = hbg_runtime_device(v.rt);
  ASSERT_OK(hbg_sim_register_kernel(dev, K_SCALE, uscale, &g_calls));
  atomic_store(&g_calls, 0);
  uint32_t k = K_SCALE;
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(v.rt, &b));
  hbg_tensor a[2] = {vec(v.x, HBG_ACCESS_IN), vec(v.y, HBG_ACCESS_OUT)};
  hbg_scalar two = hbg_scalar_static(hbg_scalar_f32(2.0f));
  hbg_task t = task(K_SCALE, a, 2, &two, 1, NULL, 0);
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  ASSERT_OK(submit_scale(b, &k, 7, v.x, v.z, 3.0f, NULL)); /* recorded */
  ASSERT_OK(submit_scale(b, &k, 7, v.x, v.w, 4.0f, NULL)); /* replayed */
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  expect_scaled(&v, v.y, 2.0f);
  expect_scaled(&v, v.z, 3.0f);
  expect_scaled(&v, v.w, 4.0f);
  ASSERT_EQ(atomic_load(&g_calls), 3);

  /* Unregistered now: the next launch fails before any kernel runs, and
   * says where. */
  ASSERT_OK(hbg_sim_unregister_kernel(dev, K_SCALE));
  hbg_tensor f = vec(v.y, HBG_ACCESS_OUT);
  hbg_scalar zero = hbg_scalar_static(hbg_scalar_f32(0.0f));
  hbg_task fill = task(HBG_KERNEL_FILL, &f, 1, &zero, 1, NULL, 0);
  ASSERT_OK(hbg_bind_begin(v.rt, &b));
  ASSERT_OK(hbg_submit_task(b, &fill, NULL));
  ASSERT_OK(submit_scale(b, &k, 7, v.x, v.z, 5.0f, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_KERNEL);
  uint32_t entry, node;
  ASSERT_OK(hbg_bind_error_location(b, &entry, &node));
  ASSERT_EQ(entry, 1);
  ASSERT_EQ(node, 0);
  hbg_bind_end(b);
  expect_scaled(&v, v.y, 2.0f); /* the fill did not run */
  expect_scaled(&v, v.z, 3.0f);

  /* The same for an ordinary task. */
  ASSERT_OK(hbg_bind_begin(v.rt, &b));
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_KERNEL);
  ASSERT_OK(hbg_bind_error_location(b, &entry, &node));
  ASSERT_EQ(entry, 0);
  ASSERT_EQ(node, HBG_TASK_NONE);
  hbg_bind_end(b);
  ASSERT_EQ(atomic_load(&g_calls), 3);

  /* An implementation's error fails the launch at its node; a positive
   * result counts as HBG_E_KERNEL. */
  ASSERT_OK(hbg_sim_register_kernel(dev, K_FAIL, fail_with, NULL));
  uint32_t kf = K_FAIL;
  int64_t codes[2] = {HBG_E_RANGE, 5};
  int want[2] = {HBG_E_RANGE, HBG_E_KERNEL};
  for (int i = 0; i < 2; i++) {
    hbg_tensor fa[2] = {vec(v.x, HBG_ACCESS_IN), vec(v.y, HBG_ACCESS_OUT)};
    hbg_scalar s = hbg_scalar_static((uint64_t)codes[i]);
    hbg_task ft = task(K_FAIL, fa, 2, &s, 1, NULL, 0);
    ASSERT_OK(hbg_bind_begin(v.rt, &b));
    ASSERT_OK(hbg_submit_task(b, &ft, NULL));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_ERR(hbg_bind_wait(b), want[i]);
    hbg_bind_end(b);
  }
  /* ... and inside a graph (boundary scalar = the code) at node 0. */
  ASSERT_OK(hbg_bind_begin(v.rt, &b));
  hbg_tensor bt[2] = {vec(v.x, HBG_ACCESS_IN), vec(v.w, HBG_ACCESS_OUT)};
  uint64_t code = (uint64_t)(int64_t)HBG_E_IO;
  hbg_graph_submit g = {.key = 8, .n_tensors = 2, .tensors = bt,
                        .scalars = &code, .n_scalars = 1,
                        .record = record_scale, .user = &kf};
  ASSERT_OK(hbg_submit_graph(b, &g, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_IO);
  ASSERT_OK(hbg_bind_error_location(b, &entry, &node));
  ASSERT_EQ(entry, 0);
  ASSERT_EQ(node, 0);
  hbg_bind_end(b);
  hbg_runtime_destroy(v.rt);
}

/* Only the structure of a user task is checked, at submit and record time;
 * reserved ids are refused. */
static int record_reserved(hbg_recorder *rec, void *user) {
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  hbg_tensor a[2] = {b[0], vec(0, HBG_ACCESS_OUT)};
  hbg_task t = task(HBG_KERNEL_USER_MIN - 1, a, 2, NULL, 0, NULL, 0);
  *(int *)user = hbg_record_task(rec, &t, NULL);
  return 0; /* the failed record_task alone keeps the recording out */
}

static void test_structure(void) {
  env v;
  env_open(&v);
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(v.rt, &b));
  hbg_tensor a[2] = {vec(v.x, HBG_ACCESS_IN), vec(v.y, HBG_ACCESS_OUT)};
  /* any count, dtype and mode combination the built-ins would refuse */
  hbg_tensor odd[3] = {a[0], a[1], ten(v.z, 0, HBG_DTYPE_I32, HBG_ACCESS_IN,
                                       4, 4)};
  hbg_task t = task(K_NONE, odd, 3, NULL, 0, NULL, 0);
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  t = task(HBG_KERNEL__COUNT, a, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  t = task(HBG_KERNEL_USER_MIN - 1, a, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  hbg_tensor bad = a[1];
  bad.mode = 0;
  hbg_tensor b2[2] = {a[0], bad};
  t = task(K_NONE, b2, 2, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_INVAL);
  hbg_tensor many[65];
  for (int i = 0; i < 65; i++)
    many[i] = a[0];
  t = task(K_NONE, many, 65, NULL, 0, NULL, 0);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_LIMIT);
  hbg_tensor bt[2] = {a[0], a[1]};
  int inner = 0;
  hbg_graph_submit g = {.key = 9, .n_tensors = 2, .tensors = bt,
                        .record = record_reserved, .user = &inner};
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_KERNEL);
  ASSERT_ERR(inner, HBG_E_KERNEL);
  hbg_bind_end(b);
  hbg_runtime_destroy(v.rt);
}

int main(void) {
  test_registration();
  test_end_to_end();
  test_structure();
  return 0;
}
