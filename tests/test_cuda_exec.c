/* The cuda backend's device executor (exec=device: hbg_dc_exec in the
 * embedded module), on a GPU or on the stand-in driver library
 * (HBG_CUDA_LIB), which runs the same device source as one CTA of one
 * lane:
 *   - a bad exec= or scratch= value fails the open naming it;
 *   - a window of an ordinary task and graph entries runs: outputs equal
 *     the host reference, status counts every node;
 *   - launch returns before the kernel ran (stand-in hold), with no
 *     synchronisation of the queue;
 *   - a corrupt window, Definition or misaligned boundary tensor is the
 *     validator's code at its entry (and node);
 *   - each distinct Definition is validated once per launch (defs_verified
 *     and the stand-in's count of validator runs): graph entries naming it
 *     again (a resident one or one inline in a Submission) reuse its view
 *     and run bit-exact; an entry naming a second, corrupt one still fails
 *     at that entry; verdicts are kept across launches until the queue's
 *     pool of private copies is full: then the cache starts over, and a
 *     forgotten Definition is validated again (17 distinct ones, counts
 *     exact, each launch's output checked);
 *   - user kernels (no device implementation) are HBG_E_KERNEL at their
 *     entry and node in a hand-built window, and refused when submitted
 *     or recorded through a runtime;
 *   - the scratch block: a launch with sizing hints grows the queue's
 *     block before it launches (once; then retained), to exactly the bytes
 *     the kernel computes it needs; a hint-less or lying launch leaves it
 *     and the kernel reports HBG_E_DEVMEM itself; a failed growth is
 *     HBG_E_DEVMEM from launch with nothing launched, and the next bind
 *     runs; qwen3-14b and dsv4 at their full layer counts run from a 4K
 *     block;
 *   - qwen3-14b and dsv4 (2 layers) under every policy match the host
 *     reference bit for bit (hbg_workload_verify), one kernel launch per
 *     bind.
 * Skips (77) where the cuda backend cannot open, unless HBG_CUDA_LIB names
 * the stand-in (cuda_skip.h): then that is a failure. */
#ifdef HBG_HAVE_CUDA
#include <dlfcn.h>

#include <hbg/hbg_workload.h>

#include "core/core.h"
#include "cuda_skip.h"
#include "device/cuda/cuda_internal.h"
#include "device/cuda/devcode/devcode.h"
#include "device/cuda/devcode/exec_layout.h"
#include "test_exec_fixture.h"

#define N XG_N
#define NONE UINT32_MAX
#define UK HBG_KERNEL_USER_MIN

static long (*mock_kernels_run)(void);
static void (*mock_hold)(int on);
static void (*mock_fail)(const char *name, int code, int nth);
static int (*mock_armed)(void);
static long (*mock_defs_validated)(void);
static int mocked;

/* The stand-in's hooks, where HBG_CUDA_LIB names it: every one must be
 * there (a lost export fails; the stand-in's checks are never skipped). */
static void *mock_sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    T_FAIL("HBG_CUDA_LIB=%s is not the stand-in this test was built with "
           "(no %s)",
           getenv("HBG_CUDA_LIB"), name);
  return p;
}

static void load_mock(void) {
  void *h = cuda_standin();
  if (!h)
    return;
  void *k = mock_sym(h, "hbgmock_kernels_run");
  void *o = mock_sym(h, "hbgmock_hold");
  void *f = mock_sym(h, "hbgmock_fail");
  void *a = mock_sym(h, "hbgmock_armed");
  void *v = mock_sym(h, "hbgmock_defs_validated");
  memcpy(&mock_kernels_run, &k, sizeof k);
  memcpy(&mock_hold, &o, sizeof o);
  memcpy(&mock_fail, &f, sizeof f);
  memcpy(&mock_armed, &a, sizeof a);
  memcpy(&mock_defs_validated, &v, sizeof v);
  mocked = 1;
}

static void test_options(void) {
  hbg_device *d = NULL;
  ASSERT_ERR(hbg_device_open("cuda", "exec=bogus", &d), HBG_E_INVAL);
  printf("  exec=bogus: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "exec=bogus") != NULL);
  ASSERT_ERR(hbg_device_open("cuda", "exec=device,scratch=16", &d),
             HBG_E_INVAL);
  printf("  scratch=16: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "scratch=") != NULL);
  ASSERT_OK(hbg_device_open("cuda", "exec=verify", &d));
  hbg_device_close(d);
  ASSERT_ERR(hbg_device_open("cuda", "exec=device,worker=lane", &d),
             HBG_E_INVAL);
  printf("  worker=lane: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "worker=") != NULL);
  ASSERT_OK(hbg_device_open("cuda", "exec=device,worker=cta", &d));
  hbg_device_close(d);
}

typedef struct scene {
  xf f;
  hbg__def *d;
  uint64_t def, udef, sub, heap, x, b, y, z;
  uint32_t sub_size;
  uint32_t graphs; /* graph entries of the last window built */
  float hx[N], hb[N];
} scene;

static void scene_open(scene *s) {
  memset(s, 0, sizeof *s);
  xf *f = &s->f;
  ASSERT_OK(hbg_device_open("cuda", "exec=device", &f->dev));
  ASSERT_OK(hbg_dev_queue_create(f->dev, &f->q));
  ASSERT_OK(hbg_dev_mem_alloc(f->dev, sizeof(hbg_dev_status), &f->status));
  s->d = xg_def();
  for (uint32_t i = 0; i < N; i++) {
    s->hx[i] = xrandf();
    s->hb[i] = xrandf();
  }
  s->def = xf_upload(f, s->d->image, s->d->size);
  /* The same Definition with node 2 a user kernel (no device code). The
   * device checks no content hash, so the header stays as it was. */
  uint8_t *u = malloc(s->d->size);
  ASSERT(u);
  memcpy(u, s->d->image, s->d->size);
  hbg_def_hdr h;
  memcpy(&h, u, sizeof h);
  hbg_def_node nd;
  memcpy(&nd, u + h.off_nodes + 2 * sizeof nd, sizeof nd);
  nd.kernel = UK;
  memcpy(u + h.off_nodes + 2 * sizeof nd, &nd, sizeof nd);
  s->udef = xf_upload(f, u, s->d->size);
  free(u);
  s->x = xf_floats(f, s->hx, N);
  s->b = xf_floats(f, s->hb, N);
  s->y = xf_alloc(f, N * 4);
  s->z = xf_alloc(f, N * 4);
  s->heap = xf_alloc(f, s->d->heap_size + 64);
  s->sub = xg_sub(f, s->d, s->x, s->b, s->y, 1.5f, 0, 0, &s->sub_size);
}

static void scene_close(scene *s) {
  uint64_t fr[] = {s->def, s->udef, s->x, s->b, s->y, s->z, s->heap, s->sub};
  for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++)
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, fr[i]));
  hbg__def_free(s->d);
  xf_close(&s->f);
}

/* The true sizing of a window of a COPY and `graphs` graph entries over
 * the scene's graph (or a variant of it of def_size bytes) naming `defs`
 * distinct Definitions. */
static hbg_dev_launch_desc hints_sized(scene *s, uint64_t W, uint64_t bytes,
                                       uint32_t graphs, uint32_t defs,
                                       uint64_t def_size) {
  hbg_dev_launch_desc l = {
      .struct_size = sizeof l,
      .flags = HBG_DEV_LAUNCH_SIZED | HBG_DEV_LAUNCH_SIZED_IMAGES,
      .window = W,
      .window_bytes = bytes,
      .status = s->f.status,
      .n_tasks = graphs + 1,
      .n_deps = graphs,
      .n_nodes = (uint64_t)graphs * s->d->n_nodes,
      .kernel_scratch = s->d->kscr_floats,
      .def_bytes = (uint64_t)defs * def_size,
      .n_defs = defs,
      .n_btensors = (uint64_t)graphs * s->d->n_btensors,
      .n_bscalars = (uint64_t)graphs * s->d->n_bscalars};
  return l;
}

static hbg_dev_launch_desc hints(scene *s, uint64_t W, uint64_t bytes,
                                 uint32_t graphs, uint32_t defs) {
  return hints_sized(s, W, bytes, graphs, defs, s->d->size);
}

/* COPY x -> z (kernel k), then `graphs` graph entries after it, each
 * after the one before (they share their heap block and output). */
static uint64_t build(scene *s, uint32_t k, uint64_t def, uint32_t graphs,
                      uint64_t *bytes) {
  s->graphs = graphs;
  hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->z, 0, N, HBG_ACCESS_OUT)};
  wb b;
  wb_init(&b);
  uint32_t prev = wb_task(&b, k, cp, 2, NULL, 0, NULL, 0);
  for (uint32_t g = 0; g < graphs; g++)
    prev = wb_graph(&b, s->sub, s->sub_size, def, s->d->size, s->heap, &prev,
                    1);
  return wb_upload(&b, &s->f, bytes);
}

static void expect(const char *what, const hbg_dev_status *st, int err,
                   uint32_t task, uint32_t node) {
  printf("  %-36s error %d (%s), task %d, node %d, tasks %u, nodes %llu\n",
         what, st->error, hbg_err_name(st->error), (int)st->task,
         (int)st->node, st->tasks_done, (unsigned long long)st->nodes_done);
  if (st->error != err || st->task != task || st->node != node)
    T_FAIL("%s: got (%d, %d, %d), want (%d, %d, %d)", what, st->error,
           (int)st->task, (int)st->node, err, (int)task, (int)node);
}

static hbg_dev_status launch_on(scene *s, hbg_dev_queue *q,
                                const hbg_dev_launch_desc *l);

/* The window the scene built last, with its true sizing. */
static void run_window(scene *s, uint64_t W, uint64_t bytes,
                       hbg_dev_status *st) {
  hbg_dev_launch_desc l = hints(s, W, bytes, s->graphs, s->graphs ? 1 : 0);
  *st = launch_on(s, s->f.q, &l);
}

static void test_runs(scene *s) {
  float zero[N] = {0}, y[N], z[N], ref[N];
  xf_write(&s->f, s->y, zero, sizeof zero);
  xf_write(&s->f, s->z, zero, sizeof zero);
  uint64_t bytes, W = build(s, HBG_KERNEL_COPY, s->def, 3, &bytes);
  hbg_dev_status st;
  run_window(s, W, bytes, &st);
  expect("COPY + three graph entries", &st, 0, NONE, NONE);
  ASSERT_EQ(st.tasks_done, 4);
  ASSERT_EQ(st.nodes_done, 1 + 3 * 4);
  ASSERT_EQ(st.defs_verified, 1);
  xf_read(&s->f, y, s->y, sizeof y);
  xf_read(&s->f, z, s->z, sizeof z);
  xg_ref(s->hx, s->hb, 1.5f, ref);
  /* Per node: which one wrote a wrong element (entry 0 writes z; each
   * graph entry's node 2 writes y[:N/2], node 3 y[N/2:]). */
  unsigned bad = 0;
  for (uint32_t i = 0; i < N; i++) {
    if (memcmp(&z[i], &s->hx[i], 4))
      printf("  differs: entry 0 (COPY) z[%u] = %a, want %a\n", i, z[i],
             s->hx[i]), bad++;
    if (memcmp(&y[i], &ref[i], 4))
      printf("  differs: graph entries' node %u (%s) y[%u] = %a, want %a\n",
             i < N / 2 ? 2u : 3u, i < N / 2 ? "MUL" : "COPY", i, y[i], ref[i]),
          bad++;
  }
  if (bad)
    T_FAIL("%u output elements differ from the host reference", bad);
  /* The block's header keeps what the launch needed. */
  hbg_dc_exec_ctl ctl;
  xf_read(&s->f, &ctl, (uint64_t)s->f.q->xblock, sizeof ctl);
  printf("  scratch needed: %llu of %llu bytes\n",
         (unsigned long long)ctl.need, (unsigned long long)s->f.q->xbytes);
  ASSERT(ctl.need > sizeof ctl && ctl.need <= s->f.q->xbytes);
  ASSERT_UEQ(ctl.gen, s->f.q->xgen);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
}

/* Launch returns with the kernel queued; nothing waited for it. */
static void test_async(scene *s) {
  if (!mocked)
    return;
  uint64_t bytes, W = build(s, HBG_KERNEL_COPY, s->def, 1, &bytes);
  hbg_dev_status st;
  memset(&st, 0xab, sizeof st);
  xf_write(&s->f, s->f.status, &st, sizeof st);
  hbg_dev_event *ev = NULL, *start = NULL;
  ASSERT_OK(hbg_dev_event_create(s->f.dev, &ev));
  ASSERT_OK(hbg_dev_event_create(s->f.dev, &start));
  hbg_dev_stats d0, d1;
  ASSERT_OK(hbg_dev_stats_get(s->f.dev, &d0));
  long k0 = mock_kernels_run();
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = W,
                           .window_bytes = bytes,
                           .status = s->f.status};
  mock_hold(1);
  ASSERT_OK(hbg_dev_event_record(s->f.dev, start, s->f.q));
  ASSERT_OK(hbg_dev_launch(s->f.dev, s->f.q, &l));
  ASSERT_OK(hbg_dev_event_record(s->f.dev, ev, s->f.q));
  ASSERT_EQ(mock_kernels_run(), k0); /* returned, not run */
  ASSERT_ERR(hbg_dev_event_query(s->f.dev, ev), HBG_E_AGAIN);
  uint64_t dns = 1;
  ASSERT_ERR(hbg_dev_event_elapsed(s->f.dev, start, ev, &dns), HBG_E_AGAIN);
  ASSERT_UEQ(dns, 1); /* untouched on error */
  ASSERT_OK(hbg_dev_stats_get(s->f.dev, &d1));
  ASSERT_UEQ(d1.handshakes, d0.handshakes); /* no wait, */
  ASSERT_UEQ(d1.d2h_copies, d0.d2h_copies); /* no read-back */
  ASSERT_UEQ(d1.launches, d0.launches + 1);
  mock_hold(0);
  ASSERT_OK(hbg_dev_event_wait(s->f.dev, ev));
  ASSERT_EQ(mock_kernels_run(), k0 + 1);
  xf_read(&s->f, &st, s->f.status, sizeof st);
  expect("async: after release", &st, 0, NONE, NONE);
  ASSERT_EQ(st.nodes_done, 5);
  /* timed events (cuEventElapsedTime refuses DISABLE_TIMING ones) */
  ASSERT_OK(hbg_dev_event_elapsed(s->f.dev, start, ev, &dns));
  ASSERT(dns > 0);
  ASSERT_OK(hbg_dev_event_destroy(s->f.dev, start));
  ASSERT_OK(hbg_dev_event_destroy(s->f.dev, ev));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
}

static void test_errors(scene *s) {
  hbg_dev_status st;
  uint64_t bytes, W = build(s, HBG_KERNEL_COPY, s->def, 1, &bytes);
  uint32_t junk = 0x12345678, magic;
  xf_read(&s->f, &magic, W, 4);
  xf_write(&s->f, W, &junk, 4);
  run_window(s, W, bytes, &st);
  expect("window: bad magic", &st, HBG_E_IMG_MAGIC, NONE, NONE);
  xf_write(&s->f, W, &magic, 4);
  run_window(s, W, 16, &st);
  expect("window: truncated", &st, HBG_E_IMG_TRUNCATED, NONE, NONE);
  /* Definition's last node record: a bad field. */
  uint8_t v, nv;
  uint64_t a = s->def + s->d->size - 8;
  xf_read(&s->f, &v, a, 1);
  nv = (uint8_t)(v ^ 0x10);
  xf_write(&s->f, a, &nv, 1);
  run_window(s, W, bytes, &st);
  expect("Definition: body changed", &st, HBG_E_IMG_FIELD, 1, NONE);
  xf_write(&s->f, a, &v, 1);
  run_window(s, W, bytes, &st);
  expect("restored", &st, 0, NONE, NONE);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));

  /* A user kernel as an ordinary task, then as graph node 2. */
  W = build(s, UK, s->def, 1, &bytes);
  run_window(s, W, bytes, &st);
  expect("user kernel task", &st, HBG_E_KERNEL, 0, NONE);
  ASSERT_EQ(st.nodes_done, 0);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  W = build(s, HBG_KERNEL_COPY, s->udef, 1, &bytes);
  run_window(s, W, bytes, &st);
  expect("user kernel node", &st, HBG_E_KERNEL, 1, 2);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));

  /* Host side: window and status must be live device memory. */
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = s->x + ((uint64_t)1 << 40), /* none */
                           .window_bytes = 64,
                           .status = s->f.status};
  ASSERT_ERR(hbg_dev_launch(s->f.dev, s->f.q, &l), HBG_E_RANGE);
  l.window = s->x;
  l.status = s->y + N * 4 - 8;
  ASSERT_ERR(hbg_dev_launch(s->f.dev, s->f.q, &l), HBG_E_RANGE);
}

/* ---- addresses outside every live allocation ---- */

/* Patch the u64 at device address a with v; @return the old value. */
static uint64_t poke64(scene *s, uint64_t a, uint64_t v) {
  uint64_t old;
  xf_read(&s->f, &old, a, 8);
  xf_write(&s->f, a, &v, 8);
  return old;
}

/* A Submission's boundary tensor or an ordinary task's tensor pointing
 * outside every live allocation (wild, or straddling the end of its
 * buffer) fails its item with HBG_E_RANGE at its entry and node
 * before it touches memory; on a GPU, a located error instead of a device
 * fault, and the device stays usable. The images carry no content hash
 * the device checks, so the bytes are patched in place. */
static void test_bad_addresses(scene *s) {
  hbg_dev_status st;
  uint64_t bytes, W = build(s, HBG_KERNEL_COPY, s->def, 1, &bytes);
  hbg_sub_hdr h;
  xf_read(&s->f, &h, s->sub, sizeof h);
  /* boundary tensor 0 (x): read by node 0 only */
  uint64_t b0 = s->sub + h.off_tensors;
  const uint64_t wild = s->x + ((uint64_t)1 << 40);
  uint64_t old = poke64(s, b0, wild);
  run_window(s, W, bytes, &st);
  expect("Submission: wild tensor address", &st, HBG_E_RANGE, 1, 0);
  ASSERT_UEQ(st.nodes_done, 0); /* found at set-up: nothing ran */
  poke64(s, b0 + 8, N * 4 - 8); /* x's offset: straddles its end */
  (void)poke64(s, b0, old);
  run_window(s, W, bytes, &st);
  expect("Submission: tensor past its buffer", &st, HBG_E_RANGE, 1, 0);
  (void)poke64(s, b0 + 8, 0);
  run_window(s, W, bytes, &st);
  expect("Submission restored", &st, 0, NONE, NONE);

  /* The ordinary task's first tensor (x) in the window. */
  uint8_t *img = malloc(bytes);
  ASSERT(img);
  xf_read(&s->f, img, W, bytes);
  hbg_img_win_view wv;
  ASSERT_OK(hbg_img_win_validate(img, bytes, &wv));
  const hbg_sub_tensor *ts =
      hbg_img_win_task_tensors(hbg_img_win_task(&wv, 0));
  uint64_t t0 = W + (uint64_t)((const uint8_t *)ts - img);
  free(img);
  old = poke64(s, t0, wild);
  run_window(s, W, bytes, &st);
  expect("task: wild tensor address", &st, HBG_E_RANGE, 0, NONE);
  ASSERT_UEQ(st.nodes_done, 0);
  (void)poke64(s, t0, old);
  run_window(s, W, bytes, &st);
  expect("task restored", &st, 0, NONE, NONE);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
}

/* The live-range table a launch checks against is uploaded once per
 * change of the device's allocations, not per launch. */
static void test_range_uploads(scene *s) {
  hbg_dev_status st;
  uint64_t bytes, W = build(s, HBG_KERNEL_COPY, s->def, 1, &bytes);
  const hbg_dev_queue *q = s->f.q;
  run_window(s, W, bytes, &st);
  uint64_t u0 = q->xr_uploads;
  run_window(s, W, bytes, &st);
  expect("no allocation since", &st, 0, NONE, NONE);
  ASSERT_UEQ(q->xr_uploads, u0);
  /* 200 more allocations: the table grows; x moved into the newest runs,
   * which it could not if the table were the old one. */
  uint64_t more[200];
  for (int i = 0; i < 200; i++)
    ASSERT_OK(hbg_dev_mem_alloc(s->f.dev, N * 4, &more[i]));
  xf_write(&s->f, more[199], s->hx, N * 4);
  hbg_sub_hdr h;
  xf_read(&s->f, &h, s->sub, sizeof h);
  uint64_t b0 = s->sub + h.off_tensors;
  uint64_t old = poke64(s, b0, more[199]);
  run_window(s, W, bytes, &st);
  expect("x in a buffer allocated since", &st, 0, NONE, NONE);
  ASSERT_UEQ(q->xr_uploads, u0 + 1);
  ASSERT(q->xr_cap >= q->xr_n && q->xr_n >= 200);
  (void)poke64(s, b0, old);
  for (int i = 0; i < 200; i++)
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, more[i]));
  run_window(s, W, bytes, &st);
  expect("after the frees", &st, 0, NONE, NONE);
  ASSERT_UEQ(q->xr_uploads, u0 + 2);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
}

/* ---- under the runtime ---- */

static hbg_runtime *rt_open(int policy, const char *opts) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = opts;
  cfg.policy = (uint32_t)policy;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static void run_workload_opts(const char *name, int policy,
                              const char *opts) {
  hbg_runtime *rt = rt_open(policy, opts);
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = name;
  wc.layers = 2;
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  for (uint32_t step = 3; step < 5; step++) {
    long k0 = mocked ? mock_kernels_run() : 0;
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, step));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_stats st;
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    hbg_bind_end(b);
    if (mocked)
      ASSERT_EQ(mock_kernels_run(), k0 + 1); /* one launch per bind */
    ASSERT(st.device_ns > 0); /* cuEventElapsedTime around the launch */
    double err = -1;
    int rc = hbg_workload_verify(w, step, &err);
    printf("  %-10s %-12s step %u: %u tasks, exec %.1f ms, verify %s\n",
           name, hbg_policy_name(policy), step, st.n_tasks, st.exec_ns / 1e6,
           hbg_err_name(rc));
    if (rc)
      T_FAIL("%s %s step %u: %s (max_abs_err %g)", name,
             hbg_policy_name(policy), step, hbg_err_name(rc), err);
  }
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

static void run_workload(const char *name, int policy) {
  run_workload_opts(name, policy, "exec=device");
}

/* n0 t = x + x; n1 y = user(t); *(int *)user gets n1's record result. */
static int ug_record(hbg_recorder *rec, void *user) {
  uint32_t nt;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_tensor a0[3] = {bt[0], bt[0], xg_vec(0, 0, N, HBG_ACCESS_OUT)};
  hbg_task k0 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a0};
  HBG__TRY(hbg_record_task(rec, &k0, NULL));
  hbg_tensor a1[2] = {a0[2], bt[1]};
  a1[0].mode = HBG_ACCESS_IN;
  hbg_task k1 = {.kernel = UK, .n_args = 2, .args = a1};
  *(int *)user = hbg_record_task(rec, &k1, NULL);
  return *(int *)user;
}

/* A user kernel with no implementation on the device never reaches it:
 * exec=device refuses it when it is submitted or recorded (the device's
 * own located HBG_E_KERNEL is the hand-built window's case above), and
 * the bind goes on without it. */
static void test_bind_errors(void) {
  hbg_runtime *rt = rt_open(HBG_POLICY_DEFERRED, "exec=device");
  uint64_t x, y;
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &x));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &y));
  hbg_tensor bt[2] = {xg_vec(x, 0, N, HBG_ACCESS_IN),
                      xg_vec(y, 0, N, HBG_ACCESS_OUT)};
  hbg_tensor cp[2] = {bt[0], bt[1]};
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = cp};
  hbg_task_id id;
  ASSERT_OK(hbg_submit_task(b, &t, &id));
  int inner = 0;
  hbg_graph_submit g = {.key = 77, .n_tensors = 2, .tensors = bt,
                        .record = ug_record, .user = &inner, .n_deps = 1,
                        .deps = &id};
  ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_RECORD);
  ASSERT_ERR(inner, HBG_E_KERNEL);
  hbg_task u = {.kernel = UK, .n_args = 2, .args = cp};
  ASSERT_ERR(hbg_submit_task(b, &u, NULL), HBG_E_KERNEL);
  printf("  user kernel task: %s\n", hbg_last_error());
  ASSERT(strstr(hbg_last_error(), "hbg_submit_task") &&
         strstr(hbg_last_error(), "0x1000") &&
         strstr(hbg_last_error(), "hbg_kernel_register"));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_free(rt, x));
  ASSERT_OK(hbg_buffer_free(rt, y));
  hbg_runtime_destroy(rt);
}

/* ---- the scratch block: sized before launch ---- */

static hbg_dev_stats dstats(hbg_device *d) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(d, &st));
  return st;
}

static hbg_dc_exec_ctl read_ctl(hbg_device *d, const hbg_dev_queue *q) {
  hbg_dc_exec_ctl ctl;
  ASSERT_OK(hbg_dev_copy_d2h(d, &ctl, (uint64_t)q->xblock, sizeof ctl));
  return ctl;
}

/* Launch l on q, wait, @return the status. */
static hbg_dev_status launch_on(scene *s, hbg_dev_queue *q,
                                const hbg_dev_launch_desc *l) {
  hbg_dev_status st;
  memset(&st, 0xab, sizeof st);
  xf_write(&s->f, s->f.status, &st, sizeof st);
  ASSERT_OK(hbg_dev_launch(s->f.dev, q, l));
  ASSERT_OK(hbg_dev_queue_sync(s->f.dev, q));
  xf_read(&s->f, &st, s->f.status, sizeof st);
  return st;
}

/* On a fresh queue (a 4K block): a window that needs more, launched
 * without hints, with hints that lie, and with the true ones. */
static void test_hints(scene *s) {
  hbg_device *d = s->f.dev;
  const uint32_t G = 40; /* COPY, then G graph entries after it */
  uint64_t bytes, W = build(s, HBG_KERNEL_COPY, s->def, G, &bytes);
  hbg_dev_queue *q = NULL;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_UEQ(q->xbytes, HBG_DC_EXEC_MIN_SCRATCH);
  hbg_dev_launch_desc truth = hints(s, W, bytes, G, 1);
  hbg_dev_stats d0 = dstats(d);

  /* A caller built before the sizing fields: whatever follows its struct
   * is not read (no growth); the kernel finds the block too small. */
  hbg_dev_launch_desc old = truth;
  old.struct_size = HBG_DEV_LAUNCH_DESC_SIZE_V1;
  hbg_dev_status st = launch_on(s, q, &old);
  expect("first-version descriptor, 4K block", &st, HBG_E_DEVMEM, NONE, NONE);
  hbg_dc_exec_ctl ctl = read_ctl(d, q);
  printf("  the window needs more than %llu bytes (device)\n",
         (unsigned long long)ctl.need);
  ASSERT(ctl.need > HBG_DC_EXEC_MIN_SCRATCH);
  ASSERT_UEQ(q->xbytes, HBG_DC_EXEC_MIN_SCRATCH);
  old.struct_size = HBG_DEV_LAUNCH_DESC_SIZE_V1 - 8;
  ASSERT_ERR(hbg_dev_launch(d, q, &old), HBG_E_INVAL);
  /* A caller built before the images' sizing: its sizing grows the block
   * but gives no pool for private Definition copies; the kernel refuses
   * the first graph entry whose Definition finds no room. */
  old = truth;
  old.struct_size = HBG_DEV_LAUNCH_DESC_SIZE_V2;
  st = launch_on(s, q, &old);
  expect("second-version descriptor", &st, HBG_E_DEVMEM, 1, NONE);
  ASSERT_EQ(st.nodes_done, 0);
  ASSERT_UEQ(q->xpool, 0);
  ASSERT_UEQ(dstats(d).scratch_allocs, d0.scratch_allocs + 1); /* grown */
  ASSERT(q->xbytes >= q->xneed && q->xneed > HBG_DC_EXEC_MIN_SCRATCH);
  const uint64_t v2_bytes = q->xbytes;

  /* Hints too small (no node, dependency or Definition): they need less
   * than the block already holds, so nothing grows, and they ask for no
   * pool: as with the second-version descriptor, the first graph entry's
   * Definition finds no room for its private copy, and nothing runs; the
   * kernel's own checks hold (it writes nothing past the block: ASan
   * watches the stand-in's memory). */
  hbg_dev_launch_desc lie = truth;
  lie.n_deps = lie.n_nodes = lie.n_btensors = lie.n_bscalars = 0;
  lie.def_bytes = lie.n_defs = 0;
  lie.n_tasks = 1;
  st = launch_on(s, q, &lie);
  expect("hints too small", &st, HBG_E_DEVMEM, 1, NONE);
  ASSERT_EQ(st.nodes_done, 0);
  ASSERT_UEQ(q->xpool, 0);
  ASSERT(q->xneed < v2_bytes);
  const uint64_t lie_bytes = q->xbytes;
  const hbg_dev_stats dl = dstats(d);
  ASSERT_UEQ(lie_bytes, v2_bytes);
  ASSERT_UEQ(dl.scratch_allocs, d0.scratch_allocs + 1);

  /* Hints too large: the growth fails before anything is queued. */
  uint64_t launches = dstats(d).launches;
  lie = truth;
  lie.n_nodes = 1ull << 39; /* terabytes: the driver says no */
  ASSERT_ERR(hbg_dev_launch(d, q, &lie), HBG_E_DEVMEM);
  const char *m = "";
  ASSERT_OK(hbg_device_native_error(d, NULL, &m));
  printf("  hints too large: %s\n", m);
  ASSERT(strstr(m, "scratch block") != NULL);
  lie.n_nodes = 1ull << 41; /* past the layout's limits */
  ASSERT_ERR(hbg_dev_launch(d, q, &lie), HBG_E_DEVMEM);
  lie.n_nodes = 1;
  lie.kernel_scratch = UINT64_MAX;
  ASSERT_ERR(hbg_dev_launch(d, q, &lie), HBG_E_DEVMEM);
  lie = truth;
  lie.def_bytes = 1ull << 41; /* a pool past the limits */
  ASSERT_ERR(hbg_dev_launch(d, q, &lie), HBG_E_DEVMEM);
  ASSERT_UEQ(dstats(d).launches, launches);
  ASSERT_UEQ(q->xbytes, lie_bytes);
  ASSERT_UEQ(dstats(d).scratch_allocs, dl.scratch_allocs);

  /* The truth: grown once more exactly when it needs more than the block
   * holds, to what the kernel computes it needs, and runs. */
  st = launch_on(s, q, &truth);
  expect("true hints: runs", &st, 0, NONE, NONE);
  ASSERT_EQ(st.nodes_done, 1 + (uint64_t)G * s->d->n_nodes);
  ctl = read_ctl(d, q);
  const int grown = ctl.need > lie_bytes;
  printf("  host figure %llu, device need %llu, block %llu bytes (%s)\n",
         (unsigned long long)q->xneed, (unsigned long long)ctl.need,
         (unsigned long long)q->xbytes, grown ? "grown" : "as it was");
  ASSERT_UEQ(q->xneed, ctl.need);
  ASSERT(q->xbytes >= ctl.need);
  ASSERT(grown ? q->xbytes > lie_bytes : q->xbytes == lie_bytes);
  hbg_dev_stats d1 = dstats(d);
  ASSERT_UEQ(d1.scratch_allocs, dl.scratch_allocs + (uint64_t)grown);
  /* Again: retained, and every replaced block is freed now that the work
   * queued before its replacement has completed. */
  uint64_t xb = q->xblock;
  st = launch_on(s, q, &truth);
  expect("true hints again", &st, 0, NONE, NONE);
  hbg_dev_stats d2 = dstats(d);
  ASSERT_UEQ(q->xblock, xb);
  ASSERT_UEQ(d2.scratch_allocs, d1.scratch_allocs);
  ASSERT_UEQ(d2.scratch_in_use,
             d0.scratch_in_use - HBG_DC_EXEC_MIN_SCRATCH + q->xbytes);
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  hbg_dev_stats d3 = dstats(d);
  ASSERT_UEQ(d3.scratch_in_use, d0.scratch_in_use - HBG_DC_EXEC_MIN_SCRATCH);
  ASSERT_UEQ(d3.scratch_frees, d3.scratch_allocs - d0.scratch_allocs +
                                   d0.scratch_frees + 1);
  ASSERT_OK(hbg_dev_mem_free(d, W));
}

static hbg_runtime *rt_open1(int policy, const char *opts) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = opts;
  cfg.policy = (uint32_t)policy;
  cfg.pipeline_depth = 1; /* one slot: every bind on one queue */
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

/* One bind of w at step on rt: @return hbg_bind_wait's code. */
static int one_bind(hbg_runtime *rt, hbg_workload *w, uint32_t step) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_workload_submit(w, b, step));
  ASSERT_OK(hbg_bind_launch(b));
  int rc = hbg_bind_wait(b);
  hbg_bind_end(b);
  return rc;
}

/* ---- teardown with a bind in flight ---- */

/* A bind launched and ended unwaited, then the workload (its buffers) and
 * the runtime destroyed at once: the buffers are freed only after the
 * kernel ran (on the stand-in the kernel, about a millisecond, must have
 * run when the workload's destroy returns), every device byte the runtime
 * took is given back, and the device runs the next runtime's bind
 * bit-exact. */
static void test_teardown_in_flight(int policy) {
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("cuda", "exec=device", &d));
  hbg_dev_stats s0 = dstats(d);
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device_handle = d;
  cfg.policy = (uint32_t)policy;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = "qwen3-14b";
  wc.layers = mocked ? 2 : 0; /* its 40 on a GPU */
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_workload_submit(w, b, 3));
  long k0 = mocked ? mock_kernels_run() : 0;
  ASSERT_OK(hbg_bind_launch(b));
  hbg_bind_end(b);
  hbg_workload_destroy(w);
  if (mocked) /* ran (about a millisecond) before the first free */
    ASSERT_EQ(mock_kernels_run(), k0 + 1);
  hbg_runtime_destroy(rt);
  hbg_dev_stats s1 = dstats(d);
  printf("  teardown in flight (%s): device bytes %llu -> %llu, pinned "
         "%llu -> %llu\n",
         hbg_policy_name(policy), (unsigned long long)s0.mem_in_use,
         (unsigned long long)s1.mem_in_use,
         (unsigned long long)s0.host_in_use,
         (unsigned long long)s1.host_in_use);
  ASSERT_UEQ(s1.mem_in_use, s0.mem_in_use);
  ASSERT_UEQ(s1.host_in_use, s0.host_in_use);
  /* the device is still good */
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  wc.layers = 2;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  ASSERT_OK(one_bind(rt, w, 4));
  double err = -1;
  ASSERT_OK(hbg_workload_verify(w, 4, &err));
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
  hbg_device_close(d);
}

/* A full-size workload from a 4K block: the first bind grows it to what
 * the kernel computes (the host's figure equals it), later binds keep it. */
static void test_grow(const char *name, int policy) {
  hbg_runtime *rt = rt_open1(policy, "exec=device,scratch=4K");
  hbg_device *d = hbg_runtime_device(rt);
  const hbg_dev_queue *q = rt->slots[0].q;
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = name; /* its default layer count */
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  hbg_dev_stats d0 = dstats(d);
  for (uint32_t step = 3; step < 6; step++) {
    ASSERT_OK(one_bind(rt, w, step));
    double err = -1;
    int rc = hbg_workload_verify(w, step, &err);
    hbg_dc_exec_ctl ctl = read_ctl(d, q);
    hbg_dev_stats d1 = dstats(d);
    printf("  %-10s %-12s step %u: need %llu (host %llu), block %llu, "
           "growths %llu, verify %s\n",
           name, hbg_policy_name(policy), step, (unsigned long long)ctl.need,
           (unsigned long long)q->xneed, (unsigned long long)q->xbytes,
           (unsigned long long)(d1.scratch_allocs - d0.scratch_allocs),
           hbg_err_name(rc));
    if (rc)
      T_FAIL("%s step %u: %s (max_abs_err %g)", name, step, hbg_err_name(rc),
             err);
    ASSERT_UEQ(q->xneed, ctl.need);
    ASSERT(ctl.need > (64u << 10)); /* the old default block was too small */
    ASSERT_UEQ(d1.scratch_allocs, d0.scratch_allocs + 1); /* once */
    /* The 4K block is freed at the launch after the one that replaced
     * it (its event has completed by then). */
    ASSERT_UEQ(d1.scratch_in_use,
               q->xbytes + (step == 3 ? HBG_DC_EXEC_MIN_SCRATCH : 0));
    ASSERT_UEQ(d1.scratch_frees, d0.scratch_frees + (step == 3 ? 0 : 1));
  }
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* The growth's allocation fails: HBG_E_DEVMEM from hbg_bind_launch,
 * nothing launched, the block as it was; the next bind runs. Which
 * cuMemAlloc_v2 of the launch is the growth's depends on the policy's
 * staging, so each is failed in turn until the growth's is found. */
static void test_grow_fails(void) {
  if (!mocked)
    return;
  int found = 0;
  for (int nth = 0; nth < 8 && !found; nth++) {
    hbg_runtime *rt = rt_open1(HBG_POLICY_COALESCED, "exec=device,scratch=4K");
    hbg_device *d = hbg_runtime_device(rt);
    hbg_dev_queue *q = rt->slots[0].q;
    hbg_workload_config wc;
    hbg_workload_config_init(&wc);
    wc.name = "qwen3-14b";
    wc.layers = 2;
    hbg_workload *w = NULL;
    ASSERT_OK(hbg_workload_create(rt, &wc, &w));
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, 1));
    hbg_dev_stats d0 = dstats(d);
    long k0 = mock_kernels_run();
    mock_fail("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, nth);
    int rc = hbg_bind_launch(b);
    int fired = !mock_armed();
    mock_fail(NULL, 0, 0);
    const char *m = "";
    (void)hbg_device_native_error(d, NULL, &m);
    if (rc == HBG_E_DEVMEM && fired && strstr(m, "scratch block")) {
      found = 1;
      printf("  growth fails (cuMemAlloc_v2 #%d of the launch): %s\n", nth, m);
      hbg_bind_end(b);
      ASSERT_OK(hbg_dev_queue_sync(d, q));
      hbg_dev_stats d1 = dstats(d);
      ASSERT_EQ(mock_kernels_run(), k0); /* nothing launched */
      ASSERT_UEQ(d1.launches, d0.launches);
      ASSERT_UEQ(d1.scratch_allocs, d0.scratch_allocs);
      ASSERT_UEQ(q->xbytes, HBG_DC_EXEC_MIN_SCRATCH);
      ASSERT_OK(one_bind(rt, w, 2));
      double err = -1;
      ASSERT_OK(hbg_workload_verify(w, 2, &err));
      ASSERT_UEQ(dstats(d).scratch_allocs, d0.scratch_allocs + 1);
      ASSERT_UEQ(read_ctl(d, q).need, q->xneed);
    } else {
      ASSERT(fired || rc == 0); /* ran out of the launch's allocations */
      hbg_bind_end(b);
    }
    hbg_workload_destroy(w);
    hbg_runtime_destroy(rt);
    if (!fired)
      break;
  }
  ASSERT(found);
}

/* ---- each distinct Definition validated once, its verdict kept ---- */

/* COPY x -> z, then `graphs` graph entries after it (each after the one
 * before: they share their heap block and output), each naming Submission
 * sub, graph entry g (window entry g + 1) naming defs[g] (0: the
 * Submission's inline one). */
static uint64_t build_defs(scene *s, uint64_t sub, uint32_t sub_size,
                           const uint64_t *defs, uint32_t graphs,
                           uint64_t *bytes) {
  hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->z, 0, N, HBG_ACCESS_OUT)};
  wb b;
  wb_init(&b);
  uint32_t prev = wb_task(&b, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
  for (uint32_t g = 0; g < graphs; g++)
    prev = wb_graph(&b, sub, sub_size, defs[g], s->d->size, s->heap, &prev,
                    1);
  return wb_upload(&b, &s->f, bytes);
}

/* Launch it on q with true sizing hints (`distinct` Definitions); @return
 * the status. The stand-in's validator runs during it in *validated (0 on
 * a GPU). */
static hbg_dev_status run_defs_on(scene *s, hbg_dev_queue *q, uint64_t sub,
                                  uint32_t sub_size, const uint64_t *defs,
                                  uint32_t graphs, uint32_t distinct,
                                  long *validated) {
  float zero[N] = {0};
  xf_write(&s->f, s->y, zero, sizeof zero);
  xf_write(&s->f, s->z, zero, sizeof zero);
  uint64_t bytes, W = build_defs(s, sub, sub_size, defs, graphs, &bytes);
  hbg_dev_launch_desc l = hints(s, W, bytes, graphs, distinct);
  long v0 = mocked ? mock_defs_validated() : 0;
  hbg_dev_status st = launch_on(s, q, &l);
  *validated = mocked ? mock_defs_validated() - v0 : 0;
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  return st;
}

/* z == x and y == the host reference (or, with alt, the reference of the
 * graph whose node 2 adds instead of multiplying), bit for bit. */
static void expect_outputs_of(scene *s, const char *what, int alt) {
  float y[N], z[N], ref[N];
  xf_read(&s->f, y, s->y, sizeof y);
  xf_read(&s->f, z, s->z, sizeof z);
  xg_ref(s->hx, s->hb, 1.5f, ref);
  if (alt) /* y[:N/2] = t1[:N/2] + t0[N/2:] */
    for (uint32_t i = 0; i < N / 2; i++) {
      float t0 = s->hx[N / 2 + i] + s->hb[N / 2 + i];
      float t1 = (s->hx[i] + s->hb[i]) * 1.5f;
      ref[i] = t1 + t0;
    }
  if (memcmp(z, s->hx, sizeof z) || memcmp(y, ref, sizeof y))
    T_FAIL("%s: outputs differ from the host reference", what);
}

static void expect_outputs(scene *s, const char *what) {
  expect_outputs_of(s, what, 0);
}

/* Byte offset of node j's kernel field in the scene's Definition. */
static uint64_t kernel_field(const scene *s, uint32_t j) {
  hbg_def_hdr h;
  memcpy(&h, s->d->image, sizeof h);
  return h.off_nodes + (uint64_t)j * sizeof(hbg_def_node) +
         offsetof(hbg_def_node, kernel);
}

static void test_defs_once(scene *s) {
  enum { G = 8, M = 17 };
  uint64_t defs[M + 2];
  long validated;
  char what[96];
  hbg_dev_queue *q = NULL; /* a fresh block: an empty verdict cache */
  ASSERT_OK(hbg_dev_queue_create(s->f.dev, &q));

  /* G entries over one resident Definition: validated once by the whole
   * grid; the next launch keeps the verdict and validates nothing. */
  for (uint32_t g = 0; g < G; g++)
    defs[g] = s->def;
  for (int again = 0; again < 2; again++) {
    hbg_dev_status st =
        run_defs_on(s, q, s->sub, s->sub_size, defs, G, 1, &validated);
    snprintf(what, sizeof what, "%u entries, one Definition%s", (unsigned)G,
             again ? ", again" : "");
    expect(what, &st, 0, NONE, NONE);
    printf("  defs_verified %llu, validator runs %ld, set-up nodes %llu, "
           "set-up %.1f us\n",
           (unsigned long long)st.defs_verified, validated,
           (unsigned long long)st.setup_nodes, st.setup_ns / 1e3);
    ASSERT_UEQ(st.flags & HBG_DEV_STATUS_SPLIT, HBG_DEV_STATUS_SPLIT);
    ASSERT_UEQ(st.defs_verified, again ? 0 : 1);
    ASSERT_UEQ(st.setup_nodes, again ? 0 : s->d->n_nodes);
    ASSERT_EQ(st.nodes_done, 1 + (uint64_t)G * s->d->n_nodes);
    if (mocked)
      ASSERT_EQ(validated, again ? 0 : 1);
    expect_outputs(s, what);
  }

  /* Entry 4 (graph entry 3) names a second copy, corrupt (same header):
   * its bytes differ from its group's, so it alone is validated, and
   * fails there; the others keep the cached verdict. */
  uint8_t *img = malloc(s->d->size);
  ASSERT(img);
  memcpy(img, s->d->image, s->d->size);
  img[s->d->size - 8] ^= 0x10; /* the last node record: a bad field */
  uint64_t bad = xf_upload(&s->f, img, s->d->size);
  defs[3] = bad;
  hbg_dev_status st = /* two distinct Definitions: the pool holds both */
      run_defs_on(s, q, s->sub, s->sub_size, defs, G, 2, &validated);
  expect("entry 4 names a corrupt copy", &st, HBG_E_IMG_FIELD, 4, NONE);
  ASSERT_EQ(st.nodes_done, 0); /* nothing ran */
  ASSERT_UEQ(st.defs_verified, 1);
  if (mocked)
    ASSERT_EQ(validated, 1);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, bad));
  defs[3] = s->def;

  /* The resident Definition changed between launches (its header, hash
   * included, left as it was): the cached copy no longer matches, so the
   * new bytes are validated before anything runs. Broken: refused at the
   * first entry, nothing ran. Valid but different (node 2 adds instead of
   * multiplying): validated, and the outputs are the new graph's, not the
   * cached one's. Restored: the cached verdict again. (The hints claim
   * room for four distinct Definitions: the pool keeps every copy.) */
  uint8_t v0b, v1b;
  const uint64_t at = s->def + s->d->size - 8;
  xf_read(&s->f, &v0b, at, 1);
  v1b = (uint8_t)(v0b ^ 0x10);
  xf_write(&s->f, at, &v1b, 1);
  st = run_defs_on(s, q, s->sub, s->sub_size, defs, G, 4, &validated);
  expect("resident Definition broken", &st, HBG_E_IMG_FIELD, 1, NONE);
  ASSERT_EQ(st.nodes_done, 0);
  ASSERT_UEQ(st.defs_verified, 1);
  float zero_y[N], y[N];
  memset(zero_y, 0, sizeof zero_y);
  xf_read(&s->f, y, s->y, sizeof y);
  ASSERT(memcmp(y, zero_y, sizeof y) == 0); /* never ran */
  xf_write(&s->f, at, &v0b, 1);
  uint32_t k_mul = HBG_KERNEL_MUL, k_add = HBG_KERNEL_ADD, k_now;
  xf_read(&s->f, &k_now, s->def + kernel_field(s, 2), 4);
  ASSERT_EQ(k_now, k_mul);
  xf_write(&s->f, s->def + kernel_field(s, 2), &k_add, 4);
  st = run_defs_on(s, q, s->sub, s->sub_size, defs, G, 4, &validated);
  expect("resident Definition changed, valid", &st, 0, NONE, NONE);
  ASSERT_UEQ(st.defs_verified, 1);
  expect_outputs_of(s, "resident Definition changed, valid", 1);
  xf_write(&s->f, s->def + kernel_field(s, 2), &k_mul, 4);
  st = run_defs_on(s, q, s->sub, s->sub_size, defs, G, 4, &validated);
  expect("resident Definition restored", &st, 0, NONE, NONE);
  ASSERT_UEQ(st.defs_verified, 0);
  expect_outputs(s, "resident Definition restored");

  /* M copies at M addresses, the same bytes, then two of them again: one
   * content, one verdict (kept), nothing validated. */
  for (uint32_t g = 0; g < M; g++)
    defs[g] = xf_upload(&s->f, s->d->image, s->d->size);
  defs[M] = defs[0];
  defs[M + 1] = defs[2];
  st = run_defs_on(s, q, s->sub, s->sub_size, defs, M + 2, 1, &validated);
  expect("17 copies, then two again", &st, 0, NONE, NONE);
  ASSERT_UEQ(st.defs_verified, 0);
  if (mocked)
    ASSERT_EQ(validated, 0);
  expect_outputs(s, "17 copies, then two again");
  for (uint32_t g = 0; g < M; g++)
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, defs[g]));

  /* G entries naming one Submission with its Definition inline: the same
   * content again, nothing validated. */
  uint32_t isize;
  uint64_t isub = xg_sub(&s->f, s->d, s->x, s->b, s->y, 1.5f, 0, 1, &isize);
  for (uint32_t g = 0; g < G; g++)
    defs[g] = 0;
  st = run_defs_on(s, q, isub, isize, defs, G, 1, &validated);
  expect("inline Definition, 8 entries", &st, 0, NONE, NONE);
  ASSERT_UEQ(st.defs_verified, 0);
  if (mocked)
    ASSERT_EQ(validated, 0);
  expect_outputs(s, "inline Definition, 8 entries");

  /* A fresh block: its cache starts empty, one validation for all. */
  hbg_dev_queue *q2 = NULL;
  ASSERT_OK(hbg_dev_queue_create(s->f.dev, &q2));
  st = run_defs_on(s, q2, isub, isize, defs, G, 1, &validated);
  expect("inline Definition, a fresh queue", &st, 0, NONE, NONE);
  ASSERT_UEQ(st.defs_verified, 1);
  ASSERT_OK(hbg_dev_queue_destroy(s->f.dev, q2));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, isub));
  ASSERT_OK(hbg_dev_queue_destroy(s->f.dev, q));
  free(img);
}

/* ---- a full verdict cache starts over ---- */

/* The scene's graph with node 1 scaling by the static `scale` instead of
 * the boundary scalar (left unread), padded to `size` bytes: one content,
 * and one output, per scale. */
static hbg__def *xg_def_scaled(float scale, uint32_t size) {
  hbg_tensor bt[3] = {xg_vec(0x1000, 0, XG_N, HBG_ACCESS_IN),
                      xg_vec(0x2000, 0, XG_N, HBG_ACCESS_IN),
                      xg_vec(0x3000, 0, XG_N, HBG_ACCESS_OUT)};
  uint64_t bs = 0;
  hbg_recorder *rec;
  ASSERT_OK(hbg__rec_begin(bt, 3, &bs, 1, &rec));
  int rc = xg_record_with(rec, hbg_scalar_static(hbg_scalar_f32(scale)));
  if (rc == 0)
    rc = hbg_record_pad(rec, size);
  if (rc) {
    hbg__rec_abort(rec);
    ASSERT_OK(rc);
  }
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(rec, &d));
  ASSERT_EQ(d->size, size);
  ASSERT_EQ(d->n_nodes, 4);
  return d;
}

/* The entries naming Definitions k[0..n) of the set (each through its own
 * Submission), on q with true sizing; checks the outcome: no error, every
 * node run, `validated` Definitions validated (the status and the
 * stand-in's count), the verdict cache holding `cached` of them after it,
 * and y the output of the last entry's graph. */
static void run_set_on(scene *s, hbg_dev_queue *q, const char *what,
                       hbg__def *const *set, const uint64_t *defs,
                       const uint64_t *subs, const uint32_t *sub_sizes,
                       const uint32_t *k, uint32_t n, uint32_t validated,
                       uint32_t cached, const float *scales) {
  float zero[N] = {0};
  xf_write(&s->f, s->y, zero, sizeof zero);
  xf_write(&s->f, s->z, zero, sizeof zero);
  hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->z, 0, N, HBG_ACCESS_OUT)};
  wb b;
  wb_init(&b);
  uint32_t prev = wb_task(&b, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
  for (uint32_t g = 0; g < n; g++)
    prev = wb_graph(&b, subs[k[g]], sub_sizes[k[g]], defs[k[g]],
                    set[k[g]]->size, s->heap, &prev, 1);
  uint64_t bytes, W = wb_upload(&b, &s->f, &bytes);
  /* the entries name n distinct Definitions */
  hbg_dev_launch_desc l = hints_sized(s, W, bytes, n, n, set[0]->size);
  long v0 = mocked ? mock_defs_validated() : 0;
  hbg_dev_status st = launch_on(s, q, &l);
  long v = mocked ? mock_defs_validated() - v0 : 0;
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  hbg_dc_exec_ctl ctl = read_ctl(s->f.dev, q);
  expect(what, &st, 0, NONE, NONE);
  printf("  %-36s validated %llu (stand-in %ld), cache %u entries, pool "
         "%llu of %llu bytes\n",
         "", (unsigned long long)st.defs_verified, v, ctl.cache_n,
         (unsigned long long)ctl.pool_used, (unsigned long long)ctl.pool_bytes);
  ASSERT_EQ(st.nodes_done, 1 + (uint64_t)n * s->d->n_nodes);
  ASSERT_UEQ(st.defs_verified, validated);
  if (mocked)
    ASSERT_EQ(v, validated);
  ASSERT_UEQ(ctl.cache_n, cached);
  ASSERT_UEQ(ctl.pool_used,
             (uint64_t)cached * hbg_dc_exec_pool_slot(set[0]->size));
  float y[N], z[N], ref[N];
  xf_read(&s->f, y, s->y, sizeof y);
  xf_read(&s->f, z, s->z, sizeof z);
  xg_ref(s->hx, s->hb, scales[k[n - 1]], ref);
  if (memcmp(z, s->hx, sizeof z) || memcmp(y, ref, sizeof y))
    T_FAIL("%s: outputs differ from the host reference of Definition %u",
           what, k[n - 1]);
}

/* M distinct Definitions (node 1 scales by its own static factor: other
 * bytes, another hash, another output), each through its own Submission,
 * all padded to one size at which the pool of a launch naming 16 holds
 * exactly 16 private copies. On a fresh queue:
 *   - the first 16 are each validated once and fill the cache; named
 *     again, none is validated;
 *   - the 17th and the 2nd: no room for the 17th's copy, so the cache and
 *     the pool start over, and the 2nd, a cached verdict until then, is
 *     copied and validated again with it (the cache holds those two);
 *   - the 17th, the 2nd and the 1st: the 1st was forgotten and is
 *     validated again, alone;
 * each launch's y is the output of its last entry's Definition, so a
 * verdict or copy of another one would show. */
static void test_defs_full(scene *s) {
  enum { CAP = 16, M = CAP + 1 };
  /* the least padded size at which the pool sized for CAP holds CAP */
  uint32_t size = 0;
  for (uint32_t z = (s->d->size + 127u) & ~63u; z < (1u << 16) && !size;
       z += 64)
    if (hbg_dc_exec_pool_bytes((uint64_t)CAP * z, CAP) /
            hbg_dc_exec_pool_slot(z) ==
        CAP)
      size = z;
  ASSERT(size != 0);
  hbg__def *set[M];
  uint64_t defs[M], subs[M];
  uint32_t sub_sizes[M];
  float scales[M];
  for (uint32_t g = 0; g < M; g++) {
    scales[g] = 1.0f + 0.0625f * (float)(g + 1);
    set[g] = xg_def_scaled(scales[g], size);
    defs[g] = xf_upload(&s->f, set[g]->image, set[g]->size);
    subs[g] = xg_sub(&s->f, set[g], s->x, s->b, s->y, 1.5f, 0, 0,
                     &sub_sizes[g]);
    for (uint32_t h = 0; h < g; h++)
      ASSERT(set[h]->hash != set[g]->hash);
  }
  printf("  %u distinct Definitions of %u bytes\n", (unsigned)M,
         (unsigned)size);
  hbg_dev_queue *q = NULL; /* a fresh block: an empty verdict cache */
  ASSERT_OK(hbg_dev_queue_create(s->f.dev, &q));
  uint32_t k[M];
  for (uint32_t g = 0; g < CAP; g++)
    k[g] = g;
  run_set_on(s, q, "16 distinct Definitions", set, defs, subs, sub_sizes, k,
             CAP, CAP, CAP, scales);
  hbg_dc_exec_ctl ctl = read_ctl(s->f.dev, q);
  ASSERT(ctl.pool_bytes - ctl.pool_used < hbg_dc_exec_pool_slot(size));
  run_set_on(s, q, "the same 16 again", set, defs, subs, sub_sizes, k, CAP,
             0, CAP, scales);
  const uint32_t k17_2[2] = {M - 1, 1};
  run_set_on(s, q, "the 17th and the 2nd: starts over", set, defs, subs,
             sub_sizes, k17_2, 2, 2, 2, scales);
  const uint32_t k17_2_1[3] = {M - 1, 1, 0};
  run_set_on(s, q, "then the 1st: forgotten", set, defs, subs, sub_sizes,
             k17_2_1, 3, 1, 3, scales);
  ASSERT_OK(hbg_dev_queue_destroy(s->f.dev, q));
  for (uint32_t g = 0; g < M; g++) {
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, defs[g]));
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, subs[g]));
    hbg__def_free(set[g]);
  }
}

/* ---- the executor's own account, in steady state ---- */

/* qwen3-14b at its 40 layers (45 entries per bind) under each policy:
 * once every pipeline slot has run its first bind, a bind validates no
 * Definition (a resident one, or the 40 identical inline copies, keep
 * their verdict), its set-up reads no more node records than the bind has
 * entries, and it reports its set-up time; outputs bit-exact. */
static void test_steady(int policy) {
  hbg_runtime *rt = rt_open(policy, "exec=device");
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = "qwen3-14b";
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  const uint32_t warm = rt->cfg.pipeline_depth; /* each slot's first bind */
  for (uint32_t step = 1; step <= warm + 3; step++) {
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, step));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_stats st;
    st.struct_size = sizeof st;
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    hbg_bind_end(b);
    double err = -1;
    int rc = hbg_workload_verify(w, step, &err);
    printf("  %-12s step %u: %u entries, set-up %.1f us (nodes %llu, "
           "Definitions validated %llu), run %.1f us, verify %s\n",
           hbg_policy_name(policy), step, st.n_tasks,
           st.device_setup_ns / 1e3,
           (unsigned long long)st.exec_setup_nodes,
           (unsigned long long)st.exec_defs_validated,
           st.device_run_ns / 1e3, hbg_err_name(rc));
    ASSERT_OK(rc);
    ASSERT_UEQ(st.exec_split, 1);
    ASSERT(st.device_setup_ns > 0 && st.device_run_ns > 0);
    ASSERT_UEQ(st.n_tasks, 45);
    if (step <= warm) {
      ASSERT_UEQ(st.exec_defs_validated, 1); /* one content, this slot */
      continue;
    }
    ASSERT_UEQ(st.exec_defs_validated, 0);
    ASSERT_ULE(st.exec_setup_nodes, st.n_tasks);
  }
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* ---- user kernels: asked of the module at every launch ---- */

/* The Definition whose node 2 is user kernel 0x1000, on a queue of its
 * own: refused at set-up (the built-in module runs no user kernel), and
 * again from the cached verdict (validated once; nodes 2 and 3, from the
 * first user kernel on, asked of the module each time). Then the device
 * links the example's uk_axpby under that id, and the same bytes, still
 * cached, pass set-up and run up to node 2, whose kernel fails the item
 * itself (uk_axpby is given no scalars): a verdict keeps what the bytes
 * say, never what a module runs. Needs the example's PTX
 * (HBG_TEST_UK_PTX) and, on the stand-in, its host build
 * (HBG_MOCK_USER_LIB); the registration lasts as long as the device. */
static void test_user_asked(scene *s) {
  /* the stand-in's host build of the example, where the test names it
   * (as test_cuda_user does) */
  if (mocked && !getenv("HBG_MOCK_USER_LIB") && getenv("HBG_TEST_HOST_OBJECT"))
    setenv("HBG_MOCK_USER_LIB", getenv("HBG_TEST_HOST_OBJECT"), 1);
  const char *path = getenv("HBG_TEST_UK_PTX");
  FILE *fp = path && *path && (!mocked || getenv("HBG_MOCK_USER_LIB"))
                 ? fopen(path, "rb")
                 : NULL;
  if (!fp) {
    printf("  user kernels: skipped (no HBG_TEST_UK_PTX, or on the "
           "stand-in no HBG_MOCK_USER_LIB)\n");
    return;
  }
  static char ptx[1 << 20];
  size_t ptx_n = fread(ptx, 1, sizeof ptx - 1, fp);
  fclose(fp);
  ASSERT(ptx_n > 0 && ptx_n < sizeof ptx - 1);
  hbg_device *d = s->f.dev;
  uint64_t bytes, W = build(s, HBG_KERNEL_COPY, s->udef, 1, &bytes);
  hbg_dev_queue *q = NULL;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  hbg_dev_launch_desc l = hints(s, W, bytes, 1, 1);
  hbg_dev_status st = launch_on(s, q, &l);
  expect("user node, built-in module", &st, HBG_E_KERNEL, 1, 2);
  ASSERT_UEQ(st.nodes_done, 0);
  ASSERT_UEQ(st.defs_verified, 1);
  st = launch_on(s, q, &l);
  expect("user node, cached verdict", &st, HBG_E_KERNEL, 1, 2);
  ASSERT_UEQ(st.nodes_done, 0);
  ASSERT_UEQ(st.defs_verified, 0);
  ASSERT_UEQ(st.setup_nodes, 2); /* nodes 2 and 3 asked of the module */

  hbg_kernel_impl k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.kernel = UK;
  k.phases = 1;
  k.symbol = "uk_axpby";
  k.image = ptx;
  k.image_size = ptx_n;
  ASSERT_OK(hbg_kernel_register(d, &k, 1));
  st = launch_on(s, q, &l);
  expect("user node, linked module", &st, HBG_E_KERNEL, 1, 2);
  ASSERT_UEQ(st.defs_verified, 0);
  ASSERT_UEQ(st.setup_nodes, 2);
  /* the COPY task and nodes 0 and 1 ran before node 2 failed */
  ASSERT(st.nodes_done >= 3);
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, W));
}

/* ---- two launches at once ---- */

/* Two queues, each a window of G graph entries writing its own output;
 * both launched while the stand-in holds its streams, then released: the
 * two executors run at once, and each gives the host reference. That
 * they ran at once is read from the executors themselves, by the device's
 * clock: each one's run starts where its block's header says (t0, stamped
 * by its first thread) and lasts what its status says (setup_ns + run_ns,
 * to its status write); the two intervals must overlap. Every try checks
 * both statuses (no error, every node run), both outputs, and that each
 * run fits between its stream's events recorded before and after the
 * launch. Overlap is up to the test machine's scheduler (a stream thread
 * may not run until the other has finished): the windows are long (G
 * entries: a few ms on the one-lane grid, where 120 often ran one after
 * the other on a loaded 2-vCPU machine, each within one time slice), and
 * up to 8 tries; executors that exclude each other never overlap, so a
 * few tries tell the two apart. */
static void test_two_at_once(scene *s) {
  if (!mocked)
    return;
  enum { G = 4000 };
  xf *f = &s->f;
  uint64_t y2 = xf_alloc(f, N * 4), heap2 = xf_alloc(f, s->d->heap_size + 64);
  uint32_t sub2_size;
  uint64_t sub2 = xg_sub(f, s->d, s->x, s->b, y2, 1.5f, 0, 0, &sub2_size);
  hbg_dev_queue *q[2] = {NULL, NULL};
  hbg_dev_event *ev[2][2];
  uint64_t st_dev[2] = {f->status, xf_alloc(f, sizeof(hbg_dev_status))};
  uint64_t out[2] = {s->y, y2};
  hbg_dev_launch_desc l[2];
  uint64_t W[2];
  for (int k = 0; k < 2; k++) {
    ASSERT_OK(hbg_dev_queue_create(f->dev, &q[k]));
    ASSERT_OK(hbg_dev_event_create(f->dev, &ev[k][0]));
    ASSERT_OK(hbg_dev_event_create(f->dev, &ev[k][1]));
    hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                        xg_vec(k ? y2 : s->z, 0, N, HBG_ACCESS_OUT)};
    wb b;
    wb_init(&b);
    uint32_t prev = wb_task(&b, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
    for (uint32_t g = 0; g < G; g++) /* a chain: each after the last */
      prev = wb_graph(&b, k ? sub2 : s->sub, k ? sub2_size : s->sub_size,
                      s->def, s->d->size, k ? heap2 : s->heap, &prev, 1);
    uint64_t bytes;
    W[k] = wb_upload(&b, f, &bytes);
    l[k] = hints(s, W[k], bytes, G, 1);
    l[k].status = st_dev[k];
  }
  float ref[N];
  xg_ref(s->hx, s->hb, 1.5f, ref);
  int overlapped = 0, tries = 0;
  while (tries < 8 && !overlapped) {
    tries++;
    float zero[N] = {0};
    hbg_dev_status st[2];
    memset(st, 0xab, sizeof st);
    for (int k = 0; k < 2; k++) {
      xf_write(f, out[k], zero, sizeof zero);
      xf_write(f, st_dev[k], &st[k], sizeof st[k]);
    }
    mock_hold(1);
    for (int k = 0; k < 2; k++) {
      ASSERT_OK(hbg_dev_event_record(f->dev, ev[k][0], q[k]));
      ASSERT_OK(hbg_dev_launch(f->dev, q[k], &l[k]));
      ASSERT_OK(hbg_dev_event_record(f->dev, ev[k][1], q[k]));
    }
    mock_hold(0);
    uint64_t run[2], win[2], t0[2];
    for (int k = 0; k < 2; k++) {
      ASSERT_OK(hbg_dev_event_wait(f->dev, ev[k][1]));
      xf_read(f, &st[k], st_dev[k], sizeof st[k]);
      char what[64];
      snprintf(what, sizeof what, "try %d, %s queue", tries,
               k ? "second" : "first");
      expect(what, &st[k], 0, NONE, NONE);
      ASSERT_EQ(st[k].nodes_done, 1 + (uint64_t)G * s->d->n_nodes);
      ASSERT_UEQ(st[k].flags & HBG_DEV_STATUS_SPLIT, HBG_DEV_STATUS_SPLIT);
      float y[N];
      xf_read(f, y, out[k], sizeof y);
      if (memcmp(y, ref, sizeof y))
        T_FAIL("%s: output differs from the host reference", what);
      run[k] = st[k].setup_ns + st[k].run_ns;
      hbg_dc_exec_ctl ctl = read_ctl(f->dev, q[k]);
      t0[k] = ctl.t0;
      ASSERT_UEQ(ctl.t_setup, ctl.t0 + st[k].setup_ns);
      ASSERT_OK(hbg_dev_event_elapsed(f->dev, ev[k][0], ev[k][1], &win[k]));
      ASSERT(run[k] > 0);
      if (run[k] > win[k])
        T_FAIL("%s: the executor ran %llu ns, more than the %llu ns between "
               "its stream's events",
               what, (unsigned long long)run[k], (unsigned long long)win[k]);
    }
    /* [t0, t0 + run) of each, by the device's clock */
    overlapped = t0[0] < t0[1] + run[1] && t0[1] < t0[0] + run[0];
    const int64_t gap = (int64_t)(t0[1] - t0[0]);
    printf("  two at once, try %d: executors ran %.2f and %.2f ms (windows "
           "of %.2f and %.2f ms), the second starting %.2f ms after the "
           "first: %s\n",
           tries, run[0] / 1e6, run[1] / 1e6, win[0] / 1e6, win[1] / 1e6,
           gap / 1e6, overlapped ? "at once" : "one after the other");
  }
  if (!overlapped)
    T_FAIL("the two executors never provably ran at once in %d tries", tries);
  for (int k = 0; k < 2; k++) {
    ASSERT_OK(hbg_dev_event_destroy(f->dev, ev[k][0]));
    ASSERT_OK(hbg_dev_event_destroy(f->dev, ev[k][1]));
    ASSERT_OK(hbg_dev_queue_destroy(f->dev, q[k]));
    ASSERT_OK(hbg_dev_mem_free(f->dev, W[k]));
  }
  uint64_t fr[] = {y2, heap2, sub2, st_dev[1]};
  for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++)
    ASSERT_OK(hbg_dev_mem_free(f->dev, fr[i]));
}

int main(void) {
  load_mock();
  hbg_device *probe = NULL;
  if (hbg_device_open("cuda", "exec=device", &probe) < 0) {
    char why[600];
    snprintf(why, sizeof why, "cannot open cuda: %s", hbg_last_error());
    cuda_skip(why);
  }
  hbg_device_close(probe);
  printf("cuda device executor on %s\n",
         mocked ? "the stand-in driver library" : "the GPU");
  test_options();
  scene s;
  scene_open(&s);
  test_runs(&s);
  test_async(&s);
  test_errors(&s);
  test_hints(&s);
  test_defs_once(&s);
  test_defs_full(&s);
  test_two_at_once(&s);
  test_user_asked(&s); /* last on this device: it links a module */
  scene_close(&s);
  test_bind_errors();
  test_grow_fails();
  test_grow("qwen3-14b", HBG_POLICY_DEFERRED);
  test_grow("dsv4", HBG_POLICY_COALESCED);
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    run_workload("qwen3-14b", p);
    run_workload("dsv4", p);
  }
  /* a whole CTA per worker (on a GPU; the stand-in's CTA is one worker
   * either way) */
  run_workload_opts("dsv4", HBG_POLICY_COALESCED, "exec=device,worker=cta");
  for (int p = 0; p < HBG_POLICY__COUNT; p++)
    test_steady(p);
  test_teardown_in_flight(HBG_POLICY_DEFERRED);
  test_teardown_in_flight(HBG_POLICY_COALESCED);
  /* Last: on a GPU without the device's range check, a wild address is a
   * device fault that leaves the context unusable. */
  scene_open(&s);
  test_range_uploads(&s);
  test_bad_addresses(&s);
  scene_close(&s);
  (void)xf_open;
  (void)xf_launch;
  printf("cuda exec: ok\n");
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
