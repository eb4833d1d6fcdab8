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
 *   - user kernels (no device implementation) are HBG_E_KERNEL at their
 *     entry, and node: in a hand-built window, and through hbg_bind_wait;
 *   - a scratch block too small for the bind is HBG_E_DEVMEM through
 *     hbg_bind_wait;
 *   - qwen3-14b and dsv4 (2 layers) under every policy match the host
 *     reference bit for bit (hbg_workload_verify), one kernel launch per
 *     bind.
 * Skips (77) where the cuda backend cannot open. */
#ifdef HBG_HAVE_CUDA
#include <dlfcn.h>

#include <hbg/hbg_workload.h>

#include "device/cuda/cuda_internal.h"
#include "device/cuda/devcode/devcode.h"
#include "test_exec_fixture.h"

#define N XG_N
#define NONE UINT32_MAX
#define UK HBG_KERNEL_USER_MIN

static long (*mock_kernels_run)(void);
static void (*mock_hold)(int on);
static int mocked;

static void load_mock(void) {
  const char *lib = getenv("HBG_CUDA_LIB");
  if (!lib || !*lib)
    return;
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  void *k = h ? dlsym(h, "hbgmock_kernels_run") : NULL;
  void *o = h ? dlsym(h, "hbgmock_hold") : NULL;
  if (!k || !o)
    return;
  memcpy(&mock_kernels_run, &k, sizeof k);
  memcpy(&mock_hold, &o, sizeof o);
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
}

typedef struct scene {
  xf f;
  hbg__def *d;
  uint64_t def, udef, sub, heap, x, b, y, z;
  uint32_t sub_size;
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

/* COPY x -> z (kernel k), then `graphs` graph entries after it. */
static uint64_t build(scene *s, uint32_t k, uint64_t def, uint32_t graphs,
                      uint64_t *bytes) {
  hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->z, 0, N, HBG_ACCESS_OUT)};
  wb b;
  wb_init(&b);
  uint32_t t0 = wb_task(&b, k, cp, 2, NULL, 0, NULL, 0);
  for (uint32_t g = 0; g < graphs; g++)
    wb_graph(&b, s->sub, s->sub_size, def, s->d->size, s->heap, &t0, 1);
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

static void run_window(scene *s, uint64_t W, uint64_t bytes,
                       hbg_dev_status *st) {
  (void)xf_launch(&s->f, W, bytes, st);
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
  hbg_dev_event *ev = NULL;
  ASSERT_OK(hbg_dev_event_create(s->f.dev, &ev));
  hbg_dev_stats d0, d1;
  ASSERT_OK(hbg_dev_stats_get(s->f.dev, &d0));
  long k0 = mock_kernels_run();
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = W,
                           .window_bytes = bytes,
                           .status = s->f.status};
  mock_hold(1);
  ASSERT_OK(hbg_dev_launch(s->f.dev, s->f.q, &l));
  ASSERT_OK(hbg_dev_event_record(s->f.dev, ev, s->f.q));
  ASSERT_EQ(mock_kernels_run(), k0); /* returned, not run */
  ASSERT_ERR(hbg_dev_event_query(s->f.dev, ev), HBG_E_AGAIN);
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
                           .window = s->x + 4096,
                           .window_bytes = 64,
                           .status = s->f.status};
  ASSERT_ERR(hbg_dev_launch(s->f.dev, s->f.q, &l), HBG_E_RANGE);
  l.window = s->x;
  l.status = s->y + N * 4 - 8;
  ASSERT_ERR(hbg_dev_launch(s->f.dev, s->f.q, &l), HBG_E_RANGE);
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

static void run_workload(const char *name, int policy) {
  hbg_runtime *rt = rt_open(policy, "exec=device");
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

typedef struct ug {
  uint64_t x, y;
} ug;

/* n0 t = x + x; n1 y = user(t). */
static int ug_record(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_tensor a0[3] = {bt[0], bt[0], xg_vec(0, 0, N, HBG_ACCESS_OUT)};
  hbg_task k0 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a0};
  HBG__TRY(hbg_record_task(rec, &k0, NULL));
  hbg_tensor a1[2] = {a0[2], bt[1]};
  a1[0].mode = HBG_ACCESS_IN;
  hbg_task k1 = {.kernel = UK, .n_args = 2, .args = a1};
  return hbg_record_task(rec, &k1, NULL);
}

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
  hbg_graph_submit g = {.key = 77, .n_tensors = 2, .tensors = bt,
                        .record = ug_record, .n_deps = 1, .deps = &id};
  hbg_task_id gid;
  ASSERT_OK(hbg_submit_graph(b, &g, &gid));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_KERNEL);
  printf("  user kernel node: %s\n", hbg_last_error());
  uint32_t entry, node;
  ASSERT_OK(hbg_bind_error_location(b, &entry, &node));
  ASSERT_EQ(entry, gid);
  ASSERT_EQ(node, 1);
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_free(rt, x));
  ASSERT_OK(hbg_buffer_free(rt, y));
  hbg_runtime_destroy(rt);

  /* A block too small for qwen3-14b's bind. */
  rt = rt_open(HBG_POLICY_DEFERRED, "exec=device,scratch=4K");
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = "qwen3-14b";
  wc.layers = 1;
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_workload_submit(w, b, 1));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_DEVMEM);
  hbg_bind_end(b);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

int main(void) {
  load_mock();
  hbg_device *probe = NULL;
  if (hbg_device_open("cuda", "exec=device", &probe) < 0) {
    printf("SKIP: cannot open cuda: %s\n", hbg_last_error());
    return T_EXIT_SKIP;
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
  scene_close(&s);
  test_bind_errors();
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    run_workload("qwen3-14b", p);
    run_workload("dsv4", p);
  }
  (void)xf_open;
  printf("cuda exec: ok\n");
  return 0;
}

#else

#include <hbg/hbg.h>

#include "test.h"

int main(void) {
  printf("SKIP: cuda backend not built\n");
  return T_EXIT_SKIP;
}

#endif
