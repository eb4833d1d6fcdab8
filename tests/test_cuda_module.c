/* The cuda backend's device module (src/device/cuda/devcode), on a GPU or
 * on the stand-in driver library (HBG_CUDA_LIB): it is loaded at open and
 * unloaded at close; the device-side image check writes status 0 for good
 * windows and the validator's code, failing entry and node for corrupt
 * ones; its launch returns before the kernel runs and the kernel runs
 * after the work queued before it; kernel launches captured into a CUDA
 * graph replay; a device that can run neither the cubin nor the PTX, or a
 * module without the entry point, fails the open naming the call. Skips
 * (77) where the cuda backend cannot open, unless HBG_CUDA_LIB names the
 * stand-in (cuda_skip.h): then that is a failure. */
#ifdef HBG_HAVE_CUDA
#include <dlfcn.h>

#include "cuda_skip.h"
#include "device/cuda/cuda_internal.h"
#include "test_exec_fixture.h"

#define N XG_N
#define NONE UINT32_MAX

static long (*mock_kernels_run)(void);
static long (*mock_modules)(void);
static long (*mock_live)(void);
static void (*mock_hold)(int on);
static void (*mock_fail)(const char *name, int code, int nth);
static CUresult (*mock_load)(CUmodule *m, const void *image);
static int mocked;

/* The stand-in's hooks, where HBG_CUDA_LIB names it: every one must be
 * there (a lost export fails; the stand-in's checks are never skipped). */
static void *msym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    T_FAIL("HBG_CUDA_LIB=%s is not the stand-in this test was built with "
           "(no %s)",
           getenv("HBG_CUDA_LIB"), name);
  return p;
}

#define MSYM(var, h, name)                                                     \
  do {                                                                         \
    void *p__ = msym(h, name);                                                 \
    memcpy(&(var), &p__, sizeof p__);                                          \
  } while (0)

static void load_mock(void) {
  void *h = cuda_standin();
  if (!h)
    return;
  mocked = 1;
  MSYM(mock_kernels_run, h, "hbgmock_kernels_run");
  MSYM(mock_modules, h, "hbgmock_modules");
  MSYM(mock_live, h, "hbgmock_live");
  MSYM(mock_hold, h, "hbgmock_hold");
  MSYM(mock_fail, h, "hbgmock_fail");
  MSYM(mock_load, h, "cuModuleLoadData");
}

typedef struct scene {
  xf f;
  hbg__def *d;
  uint64_t def, sub, isub, heap, x, b, y, z, X, st2;
  uint32_t sub_size, isub_size;
} scene;

static int scene_open(scene *s) {
  memset(s, 0, sizeof *s);
  xf *f = &s->f;
  int rc = hbg_device_open("cuda", NULL, &f->dev);
  if (rc < 0)
    return rc;
  ASSERT_OK(hbg_dev_queue_create(f->dev, &f->q));
  ASSERT_OK(hbg_dev_mem_alloc(f->dev, sizeof(hbg_dev_status), &f->status));
  s->d = xg_def();
  float x[N], b[N];
  for (uint32_t i = 0; i < N; i++) {
    x[i] = xrandf();
    b[i] = xrandf();
  }
  s->def = xf_upload(f, s->d->image, s->d->size);
  s->x = xf_floats(f, x, N);
  s->b = xf_floats(f, b, N);
  s->y = xf_alloc(f, N * 4);
  s->z = xf_alloc(f, N * 4);
  s->X = xf_alloc(f, N * 4 + 64);
  s->st2 = xf_alloc(f, sizeof(hbg_dev_status));
  s->heap = xf_alloc(f, s->d->heap_size + 64);
  s->sub = xg_sub(f, s->d, s->x, s->b, s->y, 1.5f, 0, 0, &s->sub_size);
  s->isub = xg_sub(f, s->d, s->x, s->b, s->y, 1.5f, 0, 1, &s->isub_size);
  return 0;
}

static void scene_close(scene *s) {
  uint64_t fr[] = {s->def, s->x,    s->b,   s->y,    s->z,
                   s->X,   s->st2,  s->heap, s->sub, s->isub};
  for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++)
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, fr[i]));
  hbg__def_free(s->d);
  xf_close(&s->f);
}

/* A window: a COPY x -> z, then `graphs` graph entries after it. */
typedef struct wspec {
  uint64_t sub, def, heap;
  uint32_t sub_size, def_size, kernel, graphs;
  uint64_t sub2; /* the last entry's Submission (when graphs > 1) */
  uint32_t sub2_size;
} wspec;

static wspec base(const scene *s, int inl) {
  wspec w = {.sub = inl ? s->isub : s->sub,
             .sub_size = inl ? s->isub_size : s->sub_size,
             .def = inl ? 0 : s->def,
             .def_size = s->d->size,
             .heap = s->heap,
             .kernel = HBG_KERNEL_COPY,
             .graphs = 1};
  w.sub2 = w.sub;
  w.sub2_size = w.sub_size;
  return w;
}

static uint64_t build(scene *s, const wspec *w, uint64_t *bytes) {
  hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->z, 0, N, HBG_ACCESS_OUT)};
  wb b;
  wb_init(&b);
  uint32_t t0 = wb_task(&b, w->kernel, cp, 2, NULL, 0, NULL, 0);
  for (uint32_t g = 0; g < w->graphs; g++) {
    int last = g + 1 == w->graphs && g > 0;
    wb_graph(&b, last ? w->sub2 : w->sub, last ? w->sub2_size : w->sub_size,
             w->def, w->def_size, w->heap, &t0, 1);
  }
  return wb_upload(&b, &s->f, bytes);
}

static hbg_dev_status check_at(scene *s, uint64_t W, uint64_t bytes) {
  hbg_dev_status st;
  memset(&st, 0xab, sizeof st);
  xf_write(&s->f, s->f.status, &st, sizeof st);
  ASSERT_OK(hbg__cu_check_window(s->f.dev, s->f.q, W, bytes, s->f.status));
  ASSERT_OK(hbg_dev_queue_sync(s->f.dev, s->f.q));
  xf_read(&s->f, &st, s->f.status, sizeof st);
  return st;
}

static hbg_dev_status check(scene *s, const wspec *w) {
  uint64_t bytes, W = build(s, w, &bytes);
  hbg_dev_status st = check_at(s, W, bytes);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  return st;
}

/* Flip one byte of device memory, check, put it back. */
static hbg_dev_status check_flipped(scene *s, const wspec *w, uint64_t a) {
  uint8_t v, nv;
  xf_read(&s->f, &v, a, 1);
  nv = (uint8_t)(v ^ 0x10);
  xf_write(&s->f, a, &nv, 1);
  hbg_dev_status st = check(s, w);
  xf_write(&s->f, a, &v, 1);
  return st;
}

static void expect(const char *what, hbg_dev_status st, int err, uint32_t task,
                   uint32_t node) {
  printf("  %-40s error %d (%s), task %d, node %d, done %u, defs %llu\n", what,
         st.error, hbg_err_name(st.error), (int)st.task, (int)st.node,
         st.tasks_done, (unsigned long long)st.defs_verified);
  if (st.error != err || st.task != task || st.node != node)
    T_FAIL("%s: got (%d, %d, %d), want (%d, %d, %d)", what, st.error,
           (int)st.task, (int)st.node, err, (int)task, (int)node);
}

static void test_verdicts(scene *s) {
  wspec w = base(s, 0);
  hbg_dev_status st = check(s, &w);
  expect("good", st, 0, NONE, NONE);
  ASSERT_EQ(st.tasks_done, 2);
  ASSERT_EQ(st.defs_verified, 1);

  w = base(s, 1);
  st = check(s, &w);
  expect("good, inline Definition", st, 0, NONE, NONE);
  ASSERT_EQ(st.defs_verified, 1);

  /* Three graph entries sharing one Definition: validated once each
   * launch, counted once. */
  w = base(s, 0);
  w.graphs = 3;
  st = check(s, &w);
  expect("good, three entries, one Definition", st, 0, NONE, NONE);
  ASSERT_EQ(st.tasks_done, 4);
  ASSERT_EQ(st.defs_verified, 1);

  w = base(s, 0);
  uint64_t bytes, W = build(s, &w, &bytes);
  uint32_t junk = 0x12345678;
  xf_write(&s->f, W, &junk, 4);
  expect("window: bad magic", check_at(s, W, bytes), HBG_E_IMG_MAGIC, NONE,
         NONE);
  expect("window: truncated", check_at(s, W, 16), HBG_E_IMG_TRUNCATED, NONE,
         NONE);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));

  w = base(s, 0);
  w.kernel = HBG_KERNEL__COUNT;
  expect("window: bad kernel id", check(s, &w), HBG_E_IMG_FIELD, NONE, NONE);

  w = base(s, 0);
  expect("Definition: bad magic", check_flipped(s, &w, s->def),
         HBG_E_IMG_MAGIC, 1, NONE);
  expect("Definition: body changed",
         check_flipped(s, &w, s->def + s->d->size - 8), HBG_E_IMG_FIELD, 1,
         NONE);
  w.def_size = 64;
  expect("Definition: truncated", check(s, &w), HBG_E_IMG_TRUNCATED, 1, NONE);

  w = base(s, 1);
  expect("inline Definition: bad magic",
         check_flipped(s, &w, s->isub + s->isub_size - s->d->size),
         HBG_E_IMG_MAGIC, 1, NONE);

  w = base(s, 0);
  w.sub_size -= 8;
  expect("Submission: truncated", check(s, &w), HBG_E_IMG_TRUNCATED, 1, NONE);
  w = base(s, 0);
  w.sub += 4;
  expect("Submission: misaligned", check(s, &w), HBG_E_IMG_ALIGN, 1, NONE);
  w = base(s, 0);
  expect("Submission: bad magic", check_flipped(s, &w, s->sub),
         HBG_E_IMG_MAGIC, 1, NONE);
  /* The Definition's hash field is not the one the Submission names. */
  expect("Submission: another Definition",
         check_flipped(s, &w, s->sub + offsetof(hbg_sub_hdr, def_hash)),
         HBG_E_IMG_DEF, 1, NONE);

  /* x at a 2-byte offset: node 0 reads it. */
  hbg_tensor bt[3] = {xg_vec(s->X, 2, N, HBG_ACCESS_IN),
                      xg_vec(s->b, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->y, 0, N, HBG_ACCESS_OUT)};
  uint64_t bs = hbg__kernel_f32(1.0f);
  uint32_t n = hbg__sub_size(s->d, 0);
  uint8_t *img = aligned_alloc(8, HBG__ALIGN_UP(n, 8));
  ASSERT(img);
  ASSERT_EQ(hbg__sub_write(img, n, s->d, 42, 0, bt, &bs, 0), (int)n);
  uint64_t msub = xf_upload(&s->f, img, n);
  free(img);
  w = base(s, 0);
  w.sub = msub;
  w.sub_size = n;
  expect("boundary: misaligned", check(s, &w), HBG_E_IMG_TENSOR_ALIGN, 1, 0);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, msub));

  w = base(s, 0);
  w.heap += 8;
  expect("heap: misaligned", check(s, &w), HBG_E_IMG_TENSOR_ALIGN, 1, NONE);

  /* The failing entry is the first bad one, after good ones. */
  w = base(s, 0);
  w.graphs = 3;
  w.sub2_size -= 8;
  st = check(s, &w);
  expect("third graph entry: truncated", st, HBG_E_IMG_TRUNCATED, 3, NONE);
  ASSERT_EQ(st.tasks_done, 3);

  /* A Definition's hash is also the name its Submissions give it. */
  w = base(s, 0);
  expect("Definition: bad hash",
         check_flipped(s, &w, s->def + offsetof(hbg_def_hdr, hash)),
         HBG_E_IMG_DEF, 1, NONE);
  /* Content hashes are not checked on the device yet (no XXH3 there): the
   * host verifier rejects this one (test_verify_corpus). */
  expect("Submission: bad hash (not checked here)",
         check_flipped(s, &w, s->sub + offsetof(hbg_sub_hdr, hash)), 0, NONE,
         NONE);

  /* Host side: window and status must be live device memory. */
  const uint64_t nowhere = s->x + ((uint64_t)1 << 40); /* no allocation */
  ASSERT_ERR(hbg__cu_check_window(s->f.dev, s->f.q, nowhere, 64, s->f.status),
             HBG_E_RANGE);
  ASSERT_ERR(hbg__cu_check_window(s->f.dev, s->f.q, s->x, N * 4 + 8,
                                  s->f.status),
             HBG_E_RANGE);
  ASSERT_ERR(hbg__cu_check_window(s->f.dev, s->f.q, s->x, N * 4, s->y + N * 4 - 8),
             HBG_E_RANGE);
}

/* Launch returns with the kernel still queued behind an upload of the
 * window on the same queue; once released, the kernel sees the upload. */
static void test_async(scene *s) {
  wspec w = base(s, 0);
  uint64_t bytes, W = build(s, &w, &bytes);
  uint8_t *pin = NULL, zero[256] = {0};
  ASSERT_OK(hbg_dev_host_alloc(s->f.dev, bytes, (void **)&pin));
  xf_read(&s->f, pin, W, bytes);
  xf_write(&s->f, W, zero, sizeof zero); /* the device copy: no window */
  hbg_dev_status st;
  memset(&st, 0xab, sizeof st);
  xf_write(&s->f, s->f.status, &st, sizeof st);
  hbg_dev_event *ev = NULL;
  ASSERT_OK(hbg_dev_event_create(s->f.dev, &ev));
  long k0 = mock_kernels_run();

  mock_hold(1);
  ASSERT_OK(hbg_dev_copy_h2d_async(s->f.dev, s->f.q, W, pin, bytes));
  ASSERT_OK(hbg__cu_check_window(s->f.dev, s->f.q, W, bytes, s->f.status));
  ASSERT_OK(hbg_dev_event_record(s->f.dev, ev, s->f.q));
  ASSERT_EQ(mock_kernels_run(), k0); /* returned, not run */
  ASSERT_ERR(hbg_dev_event_query(s->f.dev, ev), HBG_E_AGAIN);
  mock_hold(0);

  ASSERT_OK(hbg_dev_event_wait(s->f.dev, ev));
  ASSERT_EQ(mock_kernels_run(), k0 + 1);
  xf_read(&s->f, &st, s->f.status, sizeof st);
  expect("async: after the window's upload", st, 0, NONE, NONE);
  ASSERT_OK(hbg_dev_event_destroy(s->f.dev, ev));
  ASSERT_OK(hbg_dev_host_free(s->f.dev, pin));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
}

/* Two check launches captured into a CUDA graph, replayed twice. */
static void test_graph(scene *s) {
  hbg__cuda *c = hbg_device_impl(s->f.dev);
  CUstream q = s->f.q->s;
  wspec w = base(s, 0);
  uint64_t bytes, W = build(s, &w, &bytes);
  hbg_dev_status st, junk;
  memset(&junk, 0xab, sizeof junk);
  xf_write(&s->f, s->f.status, &junk, sizeof junk);
  xf_write(&s->f, s->st2, &junk, sizeof junk);
  long k0 = mocked ? mock_kernels_run() : 0;

  ASSERT_EQ(c->f.cuStreamBeginCapture_v2(q, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  ASSERT_OK(hbg__cu_check_window(s->f.dev, s->f.q, W, bytes, s->f.status));
  ASSERT_OK(hbg__cu_check_window(s->f.dev, s->f.q, W, 16, s->st2));
  CUgraph g = NULL;
  ASSERT_EQ(c->f.cuStreamEndCapture(q, &g), CUDA_SUCCESS);
  CUgraphExec x = NULL;
  ASSERT_EQ(c->f.cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
  if (mocked)
    ASSERT_EQ(mock_kernels_run(), k0); /* captured, not run */
  for (int rep = 0; rep < 2; rep++) {
    ASSERT_EQ(c->f.cuGraphLaunch(x, q), CUDA_SUCCESS);
    ASSERT_OK(hbg_dev_queue_sync(s->f.dev, s->f.q));
    xf_read(&s->f, &st, s->f.status, sizeof st);
    expect("graph replay: good window", st, 0, NONE, NONE);
    xf_read(&s->f, &st, s->st2, sizeof st);
    expect("graph replay: truncated window", st, HBG_E_IMG_TRUNCATED, NONE,
           NONE);
    xf_write(&s->f, s->f.status, &junk, sizeof junk);
    xf_write(&s->f, s->st2, &junk, sizeof junk);
  }
  if (mocked)
    ASSERT_EQ(mock_kernels_run(), k0 + 4);
  ASSERT_EQ(c->f.cuGraphExecDestroy(x), CUDA_SUCCESS);
  ASSERT_EQ(c->f.cuGraphDestroy(g), CUDA_SUCCESS);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
}

/* Stand-in only: module counts, and the ways loading it fails. */
static void test_module_load(void) {
  ASSERT_EQ(mock_live(), 0);
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("cuda", NULL, &d));
  ASSERT_EQ(mock_modules(), 1);
  hbg_device_close(d);
  ASSERT_EQ(mock_modules(), 0);
  ASSERT_EQ(mock_live(), 0);

  /* Neither the sm_90 cubin nor compute_90 PTX runs on a CC 8.0 device. */
  setenv("HBG_MOCK_CUDA_CC", "80", 1);
  ASSERT_ERR(hbg_device_open("cuda", NULL, &d), HBG_E_UNSUPPORTED);
  printf("  CC 8.0: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(),
                "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU") != NULL);
  ASSERT(strstr(hbg_last_error(), "compute capability 8.0") != NULL);
  ASSERT_EQ(mock_live(), 0);
  char why[512];
  ASSERT_ERR(hbg_device_find("cuda")->probe(why, sizeof why),
             HBG_E_UNSUPPORTED); /* hbg devices says why */
  printf("  CC 8.0, probe: %s\n", why);
  ASSERT(strstr(why, "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU"));
  ASSERT(strstr(why, "CC 8.0"));
  ASSERT_EQ(mock_live(), 0);
  /* A newer device JIT-compiles the PTX. */
  setenv("HBG_MOCK_CUDA_CC", "100", 1);
  ASSERT_OK(hbg_device_open("cuda", NULL, &d));
  hbg_device_close(d);
  unsetenv("HBG_MOCK_CUDA_CC");
  ASSERT_OK(hbg_device_find("cuda")->probe(why, sizeof why));
  ASSERT_EQ(mock_live(), 0);

  mock_fail("cuModuleLoadData", CUDA_ERROR_INVALID_PTX, 0);
  ASSERT_ERR(hbg_device_open("cuda", NULL, &d), HBG_E_UNSUPPORTED);
  printf("  PTX JIT failure: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "cuModuleLoadData: CUDA_ERROR_INVALID_PTX"));
  mock_fail("cuModuleGetFunction", CUDA_ERROR_NOT_FOUND, 0);
  ASSERT_ERR(hbg_device_open("cuda", NULL, &d), HBG_E_DEVICE);
  printf("  entry point missing: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "cuModuleGetFunction: CUDA_ERROR_NOT_FOUND"));
  ASSERT(strstr(hbg_last_error(), "hbg_dc_check_window"));
  ASSERT_EQ(mock_live(), 0);

  /* The stand-in takes fatbins only (the backend always passes one). */
  ASSERT_OK(hbg_device_open("cuda", NULL, &d)); /* context current here */
  static const uint64_t notfat[4] = {0x7f454c46u, 0, 0, 0};
  CUmodule m = NULL;
  ASSERT_EQ(mock_load(&m, notfat), CUDA_ERROR_INVALID_IMAGE);
  hbg_device_close(d);
  ASSERT_EQ(mock_live(), 0);
}

int main(void) {
  load_mock();
  scene s;
  int rc = scene_open(&s);
  if (rc < 0) {
    char why[600];
    snprintf(why, sizeof why, "cannot open cuda: %s", hbg_last_error());
    cuda_skip(why);
  }
  printf("cuda device module on %s\n",
         mocked ? "the stand-in driver library" : "the GPU");
  test_verdicts(&s);
  if (mocked)
    test_async(&s);
  else
    printf("  async: checked on the stand-in only (it can hold a stream)\n");
  test_graph(&s);
  scene_close(&s);
  if (mocked)
    test_module_load();
  (void)xf_open; /* the fixture's sim-only opener, launcher, reference */
  (void)xf_launch;
  (void)xg_ref;
  printf("cuda module: ok\n");
  return 0;
}

#else

#include <hbg/hbg.h>

#include "cuda_skip.h"

int main(void) {
  cuda_skip("cuda backend not built");
  return T_EXIT_SKIP;
}

#endif
