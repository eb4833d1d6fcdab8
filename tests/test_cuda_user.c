/* User kernels on cuda (exec=device): hbg_kernel_register links the
 * example's device code (examples/user_kernel_ops.c built by nvcc -rdc:
 * HBG_TEST_UK_PTX, HBG_TEST_UK_FATBIN) with hbg's executor. On a GPU, or
 * on the stand-in driver, whose linker resolves the generated dispatch and
 * runs the host build of the same source (HBG_MOCK_USER_LIB).
 *   - refusals before anything is linked, each named: exec=verify, bytes
 *     that are not device code (random, a host shared object), a symbol
 *     the PTX lacks or defines as a __global__ kernel, a symbol that is no
 *     C identifier or is hbg's, a missing image;
 *   - the linker's own refusals with its log in hbg_last_error(): a symbol
 *     only a compressed fatbin could define (Undefined reference), PTX for
 *     a newer GPU;
 *   - a registration runs: ordinary tasks and a recorded graph bit-exact
 *     with the host, a kernel's own error located at its entry and node, a
 *     large registered scratch sized before the launch, an id registered
 *     twice refused, a second registration from the same image linked
 *     again with it once (one more link, still one image);
 *   - submission: an id without an implementation, and a per-row count
 *     naming a tensor the task lacks, refused at hbg_submit_task and
 *     hbg_record_task;
 *   - the on-disk cache (HBG_CUDA_LINK_CACHE): written by the first link,
 *     loaded by the next device instead of linking, a corrupt entry
 *     rejected and rewritten; an unwritable folder costs nothing but the
 *     write;
 *   - a registration from another thread while binds launch: every bind
 *     completes;
 *   - qwen3-14b's built-in kernels bit-exact from the built-in module and
 *     from the executor linked with user kernels, device times reported;
 *   - the stand-in only: a driver without cuLink* is HBG_E_UNSUPPORTED
 *     naming it; a failure injected at each link and load call leaves
 *     nothing registered and nothing alive.
 * Prints the link and load times. Skips (77) where the cuda backend cannot
 * open or the example's device code was not built, unless HBG_CUDA_LIB
 * names the stand-in (cuda_skip.h): then that is a failure. */
#ifdef HBG_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_workload.h>

#include "../examples/user_kernel_ops.h"
#include "device/cuda/cuda_link.h"
#include "cuda_skip.h"
#include "graph_fixture.h"
#include "test.h"

#define ROWS 4u
#define D 80u

static void (*mock_fail)(const char *name, int code, int nth);
static long (*mock_live)(void);
static int mocked;
static void *ptx, *fatbin;
static size_t ptx_n, fatbin_n;

/* The stand-in's hooks, where HBG_CUDA_LIB names it: both must be there
 * (a lost export fails; the stand-in's checks are never skipped). */
static void load_mock(void) {
  void *h = cuda_standin();
  if (!h)
    return;
  void *f = dlsym(h, "hbgmock_fail");
  void *l = dlsym(h, "hbgmock_live");
  if (!f || !l)
    T_FAIL("HBG_CUDA_LIB=%s is not the stand-in this test was built with "
           "(no hbgmock_fail or hbgmock_live)",
           getenv("HBG_CUDA_LIB"));
  memcpy(&mock_fail, &f, sizeof f);
  memcpy(&mock_live, &l, sizeof l);
  mocked = 1;
}

static void *slurp(const char *path, size_t *n) {
  FILE *f = path ? fopen(path, "rb") : NULL;
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc((size_t)len + 1);
  ASSERT(p && fread(p, 1, (size_t)len, f) == (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return p;
}

static hbg_kernel_impl uk(uint32_t kernel, const char *sym, const void *img,
                          size_t n) {
  hbg_kernel_impl k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.kernel = kernel;
  k.phases = kernel == UK_RMS_SCALE ? UK_RMS_PHASES : 1;
  k.rows_of = kernel == UK_RMS_SCALE ? 1 : 0;
  k.scratch_floats = kernel == UK_RMS_SCALE ? UK_PARTS : 0;
  k.symbol = sym;
  k.image = img;
  k.image_size = n;
  return k;
}

#define EXPECT_MSG(code, expr, text)                                           \
  do {                                                                         \
    ASSERT_ERR(expr, code);                                                    \
    printf("  %-40s %s\n", text, hbg_last_error());                          \
    if (!strstr(hbg_last_error(), text))                                       \
      T_FAIL("message lacks '%s'", text);                                     \
  } while (0)

static hbg_runtime *rt_open(const char *options) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = options;
  cfg.policy = HBG_POLICY_COALESCED;
  cfg.deps = HBG_DEPS_INFERRED;
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static hbg__cu_link_stats lstats(hbg_runtime *rt) {
  hbg__cu_link_stats st;
  ASSERT_OK(hbg__cu_link_stats_get(hbg_runtime_device(rt), &st));
  return st;
}

/* A task of user kernel k over [x, w, out] (2-D x and out, 1-D w). */
static hbg_task rms_task(hbg_tensor *a, uint64_t x, uint64_t w, uint64_t out,
                         hbg_scalar *eps) {
  a[0] = ten(x, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, ROWS, D);
  a[1] = ten(w, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, D, 0);
  a[2] = ten(out, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, ROWS, D);
  *eps = hbg_scalar_static(hbg_scalar_f32(1e-5f));
  return task(UK_RMS_SCALE, a, 3, eps, 1, NULL, 0);
}

static void test_refusals(void) {
  hbg_device *dev;
  ASSERT_OK(hbg_device_open("cuda", "exec=verify", &dev));
  hbg_kernel_impl k = uk(UK_AXPBY, "uk_axpby", ptx, ptx_n);
  EXPECT_MSG(HBG_E_UNSUPPORTED, hbg_kernel_register(dev, &k, 1),
             "exec=verify");
  hbg_device_close(dev);
  ASSERT_OK(hbg_device_open("cuda", "exec=device", &dev));
  long live = mocked ? mock_live() : 0;
  uint8_t junk[300];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (uint8_t)(i * 131 + 7);
  k = uk(UK_AXPBY, "uk_axpby", junk, sizeof junk);
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(dev, &k, 1), "not device code");
  size_t so_n = 0;
  void *so = slurp(getenv("HBG_TEST_HOST_OBJECT"), &so_n);
  if (so) {
    k = uk(UK_AXPBY, "uk_axpby", so, so_n);
    EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(dev, &k, 1), "machine 62");
    free(so);
  }
  k = uk(UK_AXPBY, "uk_nope", ptx, ptx_n);
  EXPECT_MSG(HBG_E_NOTFOUND, hbg_kernel_register(dev, &k, 1), "'uk_nope'");
  static const char entry_ptx[] = ".version 7.8\n.target sm_90\n"
                                  ".address_size 64\n"
                                  ".visible .entry uk_kernel()\n{\n\tret;\n}\n";
  k = uk(UK_AXPBY, "uk_kernel", entry_ptx, sizeof entry_ptx);
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(dev, &k, 1), "__global__");
  k = uk(UK_AXPBY, "uk-axpby", ptx, ptx_n);
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(dev, &k, 1), "C identifier");
  k = uk(UK_AXPBY, "hbg_dcu_call", ptx, ptx_n);
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(dev, &k, 1), "hbg's");
  k = uk(UK_AXPBY, "uk_axpby", NULL, 0);
  EXPECT_MSG(HBG_E_INVAL, hbg_kernel_register(dev, &k, 1), "needs image");
  /* The linker's refusals, its log in the message. */
  if (fatbin) {
    k = uk(UK_AXPBY, "uk_nope", fatbin, fatbin_n);
    EXPECT_MSG(HBG_E_KERNEL, hbg_kernel_register(dev, &k, 1), "uk_nope");
    ASSERT(strstr(hbg_last_error(), "linker log:"));
  }
  static const char newer[] = ".version 9.0\n.target sm_120\n"
                              ".address_size 64\n"
                              ".visible .func uk_axpby()\n{\n\tret;\n}\n";
  k = uk(UK_AXPBY, "uk_axpby", newer, sizeof newer);
  EXPECT_MSG(HBG_E_KERNEL, hbg_kernel_register(dev, &k, 1), "user image 0");
  ASSERT(strstr(hbg_last_error(), "linker log:"));
  hbg__cu_link_stats st;
  ASSERT_OK(hbg__cu_link_stats_get(dev, &st));
  ASSERT_EQ(st.registered, 0);
  if (mocked) /* every failed link destroyed its state, nothing loaded */
    ASSERT_EQ(mock_live(), live);
  hbg_device_close(dev);
}

/* Each link and load call failing in turn: the error, nothing registered
 * and nothing alive afterwards; then the same registration works. */
static void test_faults(void) {
  if (!mocked)
    return;
  hbg_device *dev;
  ASSERT_OK(hbg_device_open("cuda", "exec=device", &dev));
  hbg_kernel_impl k = uk(UK_AXPBY, "uk_axpby", ptx, ptx_n);
  struct {
    const char *call;
    int nth, code, want;
  } cases[] = {
      {"cuLinkCreate_v2", 0, CUDA_ERROR_OUT_OF_MEMORY, HBG_E_NOMEM},
      {"cuLinkAddData_v2", 0, CUDA_ERROR_NO_BINARY_FOR_GPU,
       HBG_E_UNSUPPORTED}, /* hbg's own executor */
      {"cuLinkAddData_v2", 1, CUDA_ERROR_INVALID_PTX, HBG_E_KERNEL},
      {"cuLinkAddData_v2", 2, CUDA_ERROR_INVALID_PTX, HBG_E_UNSUPPORTED},
      {"cuLinkComplete", 0, CUDA_ERROR_INVALID_IMAGE, HBG_E_KERNEL},
      {"cuModuleLoadData", 0, CUDA_ERROR_OUT_OF_MEMORY, HBG_E_DEVMEM},
      {"cuModuleGetFunction", 0, CUDA_ERROR_NOT_FOUND, HBG_E_DEVICE},
  };
  long live = mock_live();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mock_fail(cases[i].call, cases[i].code, cases[i].nth);
    EXPECT_MSG(cases[i].want, hbg_kernel_register(dev, &k, 1),
               cases[i].call);
    ASSERT_EQ(mock_live(), live);
  }
  mock_fail(NULL, 0, 0);
  ASSERT_OK(hbg_kernel_register(dev, &k, 1));
  hbg_device_close(dev);
  /* A driver without the cuLink* calls. */
  const char *noopt = getenv("HBG_CUDA_NOOPT_LIB");
  if (noopt) {
    char opt[600];
    snprintf(opt, sizeof opt, "exec=device,lib=%s", noopt);
    ASSERT_OK(hbg_device_open("cuda", opt, &dev));
    EXPECT_MSG(HBG_E_UNSUPPORTED, hbg_kernel_register(dev, &k, 1),
               "cuLinkCreate_v2");
    hbg_device_close(dev);
  }
}

/* The host's arithmetic for the example's kernels (their documented
 * order). */
static void ref_rms(const float *x, const float *w, float *out) {
  for (uint32_t r = 0; r < ROWS; r++) {
    float s[UK_PARTS];
    for (uint32_t p = 0; p < UK_PARTS; p++) {
      s[p] = 0.0f;
      for (uint32_t j = p; j < D; j += UK_PARTS)
        s[p] = s[p] + x[r * D + j] * x[r * D + j];
    }
    for (uint32_t h = UK_PARTS / 2; h; h /= 2)
      for (uint32_t i = 0; i < h; i++)
        s[i] = s[i] + s[i + h];
    float inv = 1.0f / __builtin_sqrtf(s[0] / (float)D + 1e-5f);
    for (uint32_t j = 0; j < D; j++)
      out[r * D + j] = x[r * D + j] * inv * w[j];
  }
}

/* One layer: h = rms(x, w), out = 2 h - x. */
static int layer(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *b = hbg_record_tensors(rec, &nt);
  hbg_tensor a[3] = {b[0], b[1],
                     ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, ROWS, D)};
  hbg_scalar eps = hbg_scalar_static(hbg_scalar_f32(1e-5f));
  hbg_task t = task(UK_RMS_SCALE, a, 3, &eps, 1, NULL, 0);
  int rc = hbg_record_task(rec, &t, NULL);
  if (rc)
    return rc;
  hbg_tensor c[3] = {a[2], b[0], b[2]};
  c[0].mode = HBG_ACCESS_IN;
  hbg_scalar ab[2] = {hbg_scalar_static(hbg_scalar_f32(2.0f)),
                      hbg_scalar_static(hbg_scalar_f32(-1.0f))};
  t = task(UK_AXPBY, c, 3, ab, 2, NULL, 0);
  return hbg_record_task(rec, &t, NULL);
}

static int record_one(hbg_recorder *rec, void *user) {
  uint32_t nt;
  const hbg_tensor *b = hbg_record_tensors(rec, &nt);
  hbg_tensor a[3] = {b[0], b[1], b[2]};
  hbg_scalar eps = hbg_scalar_static(hbg_scalar_f32(1e-5f));
  hbg_task t = task(*(uint32_t *)user, a, 3, &eps, 1, NULL, 0);
  return hbg_record_task(rec, &t, NULL);
}

static void test_run(void) {
  hbg_runtime *rt = rt_open("exec=device");
  hbg_device *dev = hbg_runtime_device(rt);
  uint64_t x, w, y, z;
  static float hx[ROWS * D], hw[D], got[ROWS * D], ref[ROWS * D];
  for (uint32_t i = 0; i < ROWS * D; i++)
    hx[i] = (float)((int)(i * 53 % 97) - 48) / 9.0f;
  for (uint32_t j = 0; j < D; j++)
    hw[j] = 0.25f + (float)(j % 7) / 4.0f;
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof hx, &x));
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof hw, &w));
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof hx, &y));
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof hx, &z));
  ASSERT_OK(hbg_buffer_write(rt, x, hx, sizeof hx));
  ASSERT_OK(hbg_buffer_write(rt, w, hw, sizeof hw));

  /* Nothing registered: refused at submit and at record. */
  hbg_bind *b;
  hbg_tensor a[3];
  hbg_scalar eps;
  hbg_task t = rms_task(a, x, w, y, &eps);
  ASSERT_OK(hbg_bind_begin(rt, &b));
  EXPECT_MSG(HBG_E_KERNEL, hbg_submit_task(b, &t, NULL),
             "no implementation on this cuda device");
  hbg_tensor bt[3] = {a[0], a[1], a[2]};
  uint32_t kid = UK_RMS_SCALE;
  hbg_graph_submit g1 = {.key = 5, .n_tensors = 3, .tensors = bt,
                         .record = record_one, .user = &kid};
  ASSERT_ERR(hbg_submit_graph(b, &g1, NULL), HBG_E_RECORD);
  hbg_bind_end(b);

  /* One kernel; the second from the same PTX later: linked again with
   * the one image (no second definition of anything). */
  hbg_kernel_impl k[2] = {uk(UK_RMS_SCALE, "uk_rms_scale", ptx, ptx_n),
                          uk(UK_AXPBY, "uk_axpby", ptx, ptx_n)};
  ASSERT_OK(hbg_kernel_register(dev, &k[0], 1));
  hbg__cu_link_stats st = lstats(rt);
  ASSERT_EQ(st.registered, 1);
  ASSERT_EQ(st.links, 1);
  EXPECT_MSG(HBG_E_BUSY, hbg_kernel_register(dev, k, 2), "registered already");
  ASSERT_OK(hbg_kernel_register(dev, &k[1], 1));
  st = lstats(rt);
  ASSERT_EQ(st.registered, 2);
  ASSERT_EQ(st.images, 1);
  ASSERT_EQ(st.links, 2);
  printf("  link %.2f ms (driver: %.2f ms), load %.2f ms, %llu bytes\n",
         (double)st.link_ns / 1e6, (double)st.link_wall_ms,
         (double)st.load_ns / 1e6, (unsigned long long)st.linked_bytes);

  /* A per-row count naming tensor 2 of a task with 2 tensors. */
  hbg_kernel_impl r3 = uk(0x1002, "uk_rms_scale", ptx, ptx_n);
  r3.rows_of = 3;
  ASSERT_OK(hbg_kernel_register(dev, &r3, 1));

  /* An ordinary task, then two layers of a graph. */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  t = rms_task(a, x, w, y, &eps);
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  hbg_tensor lt[3] = {ten(y, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, ROWS, D),
                      ten(w, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, D, 0),
                      ten(z, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, ROWS, D)};
  hbg_graph_submit g = {.key = 9, .n_tensors = 3, .tensors = lt,
                        .record = layer};
  ASSERT_OK(hbg_submit_graph(b, &g, NULL));
  hbg_tensor two[2] = {a[0], a[2]};
  hbg_task r3t = task(0x1002, two, 2, &eps, 1, NULL, 0);
  EXPECT_MSG(HBG_E_KERNEL, hbg_submit_task(b, &r3t, NULL),
             "per row of tensor 2");
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  static float h1[ROWS * D];
  ref_rms(hx, hw, h1);
  ASSERT_OK(hbg_buffer_read(rt, got, y, sizeof got));
  ASSERT(memcmp(got, h1, sizeof got) == 0);
  ref_rms(h1, hw, ref);
  for (uint32_t i = 0; i < ROWS * D; i++)
    ref[i] = 2.0f * ref[i] + -1.0f * h1[i];
  ASSERT_OK(hbg_buffer_read(rt, got, z, sizeof got));
  ASSERT(memcmp(got, ref, sizeof got) == 0);

  /* The kernel's own error (axpby given one scalar): at its node. */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_tensor c3[3] = {lt[0], lt[0], lt[2]};
  t = task(UK_AXPBY, c3, 3, &eps, 1, NULL, 0);
  hbg_task_id id;
  ASSERT_OK(hbg_submit_task(b, &t, &id));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_KERNEL);
  uint32_t entry, node;
  ASSERT_OK(hbg_bind_error_location(b, &entry, &node));
  ASSERT_EQ(entry, id);
  ASSERT_EQ(node, HBG_TASK_NONE);
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_free(rt, x));
  ASSERT_OK(hbg_buffer_free(rt, w));
  ASSERT_OK(hbg_buffer_free(rt, y));
  ASSERT_OK(hbg_buffer_free(rt, z));
  hbg_runtime_destroy(rt);
}

/* A registered scratch larger than any built-in call's: the launch sizes
 * the executor's block for it (else the device would refuse the window,
 * HBG_E_DEVMEM). */
static void test_scratch(void) {
  hbg_runtime *rt = rt_open("exec=device");
  hbg_kernel_impl k = uk(UK_RMS_SCALE, "uk_rms_scale", ptx, ptx_n);
  k.scratch_floats = 300000;
  ASSERT_OK(hbg_kernel_register(hbg_runtime_device(rt), &k, 1));
  uint64_t x, w, y;
  ASSERT_OK(hbg_buffer_alloc(rt, ROWS * D * 4, &x));
  ASSERT_OK(hbg_buffer_alloc(rt, D * 4, &w));
  ASSERT_OK(hbg_buffer_alloc(rt, ROWS * D * 4, &y));
  hbg_bind *b;
  hbg_tensor a[3];
  hbg_scalar eps;
  hbg_task t = rms_task(a, x, w, y, &eps);
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_free(rt, x));
  ASSERT_OK(hbg_buffer_free(rt, w));
  ASSERT_OK(hbg_buffer_free(rt, y));
  hbg_runtime_destroy(rt);
}

/* Median device time of `steps` qwen3-14b binds, each verified bit-exact
 * against the host reference. */
static double workload_device_us(hbg_runtime *rt, hbg_workload *w,
                                 uint32_t first, uint32_t steps) {
  double t[16];
  for (uint32_t i = 0; i < steps && i < 16; i++) {
    hbg_bind *b;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, first + i));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_stats st;
    st.struct_size = sizeof st;
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    hbg_bind_end(b);
    double err = -1;
    int rc = hbg_workload_verify(w, first + i, &err);
    if (rc)
      T_FAIL("step %u: %s (max_abs_err %g)", first + i, hbg_err_name(rc), err);
    t[i] = (double)st.device_ns / 1e3;
  }
  for (uint32_t i = 1; i < steps; i++) /* insertion sort, steps <= 16 */
    for (uint32_t j = i; j > 0 && t[j] < t[j - 1]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  return t[steps / 2];
}

/* The built-in kernels from the whole-program module, then from the
 * executor linked with user kernels: both bit-exact; the device times are
 * reported (the cost of the relocatable build for the built-ins, measured
 * on a GPU; on the stand-in they say nothing). */
static void test_builtins_linked(void) {
  hbg_runtime *rt = rt_open("exec=device");
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = "qwen3-14b";
  wc.layers = mocked ? 2 : 40;
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  uint32_t steps = mocked ? 3 : 9;
  (void)workload_device_us(rt, w, 0, 2); /* warm-up */
  double plain = workload_device_us(rt, w, 2, steps);
  hbg_kernel_impl k[2] = {uk(UK_RMS_SCALE, "uk_rms_scale", ptx, ptx_n),
                          uk(UK_AXPBY, "uk_axpby", ptx, ptx_n)};
  ASSERT_OK(hbg_kernel_register(hbg_runtime_device(rt), k, 2));
  (void)workload_device_us(rt, w, 2 + steps, 2);
  double linked = workload_device_us(rt, w, 4 + steps, steps);
  printf("  built-ins, qwen3-14b %u layers, median of %u binds: device "
         "%.1f us from the built-in module, %.1f us linked with user "
         "kernels (%.3fx)\n",
         wc.layers, steps, plain, linked, plain > 0 ? linked / plain : 0.0);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

typedef struct spinner {
  hbg_runtime *rt;
  uint64_t x, y;
  int binds, rc;
} spinner;

/* Binds of a built-in COPY, one after another, on the runtime's thread. */
static void *spin_binds(void *arg) {
  spinner *sp = arg;
  hbg_tensor a[2] = {ten(sp->x, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, D, 0),
                     ten(sp->y, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, D, 0)};
  hbg_task t = task(HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
  for (int i = 0; i < sp->binds && sp->rc == 0; i++) {
    hbg_bind *b;
    sp->rc = hbg_bind_begin(sp->rt, &b);
    if (sp->rc)
      break;
    sp->rc = hbg_submit_task(b, &t, NULL);
    if (sp->rc == 0)
      sp->rc = hbg_bind_launch(b);
    if (sp->rc == 0)
      sp->rc = hbg_bind_wait(b);
    hbg_bind_end(b);
  }
  return NULL;
}

/* A registration from another thread while the runtime launches: the
 * launches switch to the linked module whenever it is published, and
 * every bind completes (TSan checks the hand-over). */
static void test_register_while_launching(void) {
  hbg_runtime *rt = rt_open("exec=device");
  spinner sp = {.rt = rt, .binds = 12};
  ASSERT_OK(hbg_buffer_alloc(rt, D * 4, &sp.x));
  ASSERT_OK(hbg_buffer_alloc(rt, D * 4, &sp.y));
  hbg_device *dev = hbg_runtime_device(rt); /* the runtime is the thread's */
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, spin_binds, &sp), 0);
  hbg_kernel_impl k[2] = {uk(UK_RMS_SCALE, "uk_rms_scale", ptx, ptx_n),
                          uk(UK_AXPBY, "uk_axpby", ptx, ptx_n)};
  ASSERT_OK(hbg_kernel_register(dev, &k[0], 1));
  ASSERT_OK(hbg_kernel_register(dev, &k[1], 1));
  ASSERT_EQ(pthread_join(th, NULL), 0);
  ASSERT_OK(sp.rc);
  ASSERT_EQ(lstats(rt).links, 2);
  ASSERT_OK(hbg_buffer_free(rt, sp.x));
  ASSERT_OK(hbg_buffer_free(rt, sp.y));
  hbg_runtime_destroy(rt);
}

static hbg__cu_link_stats register_in(const char *dir) {
  setenv("HBG_CUDA_LINK_CACHE", dir, 1);
  hbg_device *dev;
  ASSERT_OK(hbg_device_open("cuda", "exec=device", &dev));
  hbg_kernel_impl k[2] = {uk(UK_RMS_SCALE, "uk_rms_scale", ptx, ptx_n),
                          uk(UK_AXPBY, "uk_axpby", ptx, ptx_n)};
  ASSERT_OK(hbg_kernel_register(dev, k, 2));
  hbg__cu_link_stats st;
  ASSERT_OK(hbg__cu_link_stats_get(dev, &st));
  hbg_device_close(dev);
  unsetenv("HBG_CUDA_LINK_CACHE");
  return st;
}

static void test_cache(void) {
  char dir[] = "/tmp/hbg-link-cache-XXXXXX";
  ASSERT(mkdtemp(dir));
  hbg__cu_link_stats st = register_in(dir);
  ASSERT_EQ(st.links, 1);
  ASSERT_EQ(st.cache_hits, 0);
  ASSERT_EQ(st.cache_writes, 1);
  st = register_in(dir);
  ASSERT_EQ(st.links, 0);
  ASSERT_EQ(st.cache_hits, 1);
  printf("  from the cache: load %.2f ms\n", (double)st.load_ns / 1e6);
  /* Corrupt the one file: rejected, linked again, rewritten. */
  char cmd[256];
  snprintf(cmd, sizeof cmd,
           "f=$(ls %s/hbg-link-*.cubin) && printf x | dd of=\"$f\" bs=1 "
           "seek=60 conv=notrunc status=none",
           dir);
  ASSERT_EQ(system(cmd), 0);
  st = register_in(dir);
  ASSERT_EQ(st.cache_rejects, 1);
  ASSERT_EQ(st.links, 1);
  ASSERT_EQ(st.cache_writes, 1);
  st = register_in(dir);
  ASSERT_EQ(st.cache_hits, 1);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ASSERT_EQ(system(cmd), 0);
  /* A folder that cannot be written: the registration still works. */
  st = register_in("/proc/hbg-no-such-folder");
  ASSERT_EQ(st.links, 1);
  ASSERT_EQ(st.cache_writes, 0);
}

int main(void) {
  load_mock();
  /* The stand-in runs the host build of the kernels' source. */
  if (mocked && !getenv("HBG_MOCK_USER_LIB") && getenv("HBG_TEST_HOST_OBJECT"))
    setenv("HBG_MOCK_USER_LIB", getenv("HBG_TEST_HOST_OBJECT"), 1);
  hbg_device *probe = NULL;
  if (hbg_device_open("cuda", "exec=device", &probe) < 0) {
    char why[600];
    snprintf(why, sizeof why, "cuda: %s", hbg_last_error());
    cuda_skip(why);
  }
  hbg_device_close(probe);
  ptx = slurp(getenv("HBG_TEST_UK_PTX"), &ptx_n);
  fatbin = slurp(getenv("HBG_TEST_UK_FATBIN"), &fatbin_n);
  if (!ptx)
    cuda_skip("HBG_TEST_UK_PTX names no PTX of the example's kernels");
  test_refusals();
  test_faults();
  test_run();
  test_scratch();
  test_cache();
  test_register_while_launching();
  test_builtins_linked();
  free(ptx);
  free(fatbin);
  printf("cuda user kernels: ok\n");
  return 0;
}
#else
#include <stdio.h>

#include "cuda_skip.h"

int main(void) {
  cuda_skip("cuda backend not built");
  return T_EXIT_SKIP;
}
#endif
