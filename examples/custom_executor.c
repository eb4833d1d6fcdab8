/*
 * A device-side executor of your own, for a kernel of your own.
 *
 * hbg records a graph that uses a user kernel (id HBG_KERNEL_USER_MIN,
 * "saxpy": out = alpha * x + y), replays it, uploads the images and
 * launches the bind. Where the launch lands is up to this file:
 *
 *   1. On the sim device, with the kernel's CPU implementation registered
 *      by hbg_sim_register_kernel: hbg's own executor runs it.
 *   2. On "mini", a device backend defined below (host memory as device
 *      memory), whose launch runs mini_execute(): an executor written
 *      against <hbg/hbg_image.h> alone -- the header a CUDA or AICPU
 *      scheduler would include. It validates the window, each Submission
 *      and Definition, expands each graph entry node by node with the
 *      header's iterator and runs the kernel.
 *
 * Both must give the same bytes. Build: cc custom_executor.c -lhbg.
 */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_image.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAXPY HBG_KERNEL_USER_MIN /* [x, y, out]; s0 = f32 alpha */
#define N 256u
#define LAYERS 3u

/* ------------------------------------------------------------------ */
/* The kernel: one implementation for both executors                  */
/* ------------------------------------------------------------------ */

/* Every tensor f32 with one dim and stride 1 (this example records only
 * such); anything else is refused. @return 0 or HBG_E_KERNEL. */
static int saxpy_run(uint32_t n_args, const uint8_t *dtype,
                     const uint32_t *const *shape,
                     const uint32_t *const *strides, void *const *data,
                     const uint64_t *scalars, uint32_t n_scalars) {
  if (n_args != 3 || n_scalars != 1)
    return HBG_E_KERNEL;
  for (uint32_t i = 0; i < 3; i++)
    if (dtype[i] != HBG_IMG_DTYPE_F32 || strides[i][0] != 1 ||
        shape[i][0] != shape[0][0] || shape[i][1] != 0)
      return HBG_E_KERNEL;
  uint32_t bits = (uint32_t)scalars[0];
  float alpha;
  memcpy(&alpha, &bits, sizeof alpha);
  const float *x = data[0], *y = data[1];
  float *out = data[2];
  for (uint32_t i = 0; i < shape[0][0]; i++)
    out[i] = alpha * x[i] + y[i];
  return 0;
}

/* The sim's calling convention (hbg_kernel_fn). */
static int saxpy_sim(void *user, const hbg_tensor *t, void *const *data,
                     uint32_t nt, const uint64_t *sc, uint32_t ns) {
  (void)user;
  uint8_t dtype[3];
  const uint32_t *shape[3], *strides[3];
  for (uint32_t i = 0; i < nt && i < 3; i++) {
    dtype[i] = t[i].dtype;
    shape[i] = t[i].shape;
    strides[i] = t[i].strides;
  }
  return nt == 3 ? saxpy_run(nt, dtype, shape, strides, data, sc, ns)
                 : HBG_E_KERNEL;
}

/* ------------------------------------------------------------------ */
/* The executor: <hbg/hbg_image.h> only                               */
/* ------------------------------------------------------------------ */

/* On "mini", a device address is the host address itself. */
static void *dev_ptr(uint64_t addr) { return (void *)(uintptr_t)addr; }

static int run_kernel(uint32_t kernel, uint32_t nt, const uint8_t *dtype,
                      const uint32_t *const *shape,
                      const uint32_t *const *strides, void *const *data,
                      const uint64_t *sc, uint32_t ns) {
  if (kernel == SAXPY)
    return saxpy_run(nt, dtype, shape, strides, data, sc, ns);
  return HBG_IMG_E_KERNEL; /* not ours */
}

static int run_graph(const hbg_win_task *t, uint32_t *bad_node) {
  hbg_img_sub_view sv;
  hbg_img_def_view dv;
  hbg_img_graph g;
  /* No XXH3 here: a real executor passes a hash callback (or trusts a
   * verdict it cached for this address). */
  int rc = hbg_img_sub_validate(dev_ptr(t->sub_addr), t->sub_size, NULL,
                                NULL, &sv);
  if (rc)
    return rc;
  uint64_t def_size;
  uint64_t def_addr = hbg_img_graph_def_addr(t, sv.hdr, &def_size);
  if ((rc = hbg_img_def_validate(dev_ptr(def_addr), def_size, NULL, NULL,
                                 &dv)) ||
      (rc = hbg_img_sub_check_def(&sv, &dv)) ||
      (rc = hbg_img_graph_init(&g, &dv, &sv, t->heap_addr)))
    return rc;
  /* Node ids are a topological order: running them in order honours every
   * fanin (a parallel executor would count hbg_img_node.n_fanin down and
   * release hbg_img_node.fanout instead). */
  for (uint32_t i = 0; i < g.hdr.n_nodes; i++) {
    hbg_img_node node;
    hbg_img_arg arg[HBG_IMG_MAX_ARGS_PER_NODE];
    uint64_t sc[HBG_IMG_MAX_SCALARS_PER_NODE];
    uint8_t dtype[HBG_IMG_MAX_ARGS_PER_NODE];
    const uint32_t *shape[HBG_IMG_MAX_ARGS_PER_NODE];
    const uint32_t *strides[HBG_IMG_MAX_ARGS_PER_NODE];
    void *data[HBG_IMG_MAX_ARGS_PER_NODE];
    *bad_node = i;
    if ((rc = hbg_img_graph_node(&g, i, &node)))
      return rc;
    for (uint32_t k = 0; k < node.n_tensors; k++) {
      if ((rc = hbg_img_graph_tensor(&g, i, k, &arg[k])))
        return rc;
      dtype[k] = arg[k].dtype;
      shape[k] = arg[k].shape;
      strides[k] = arg[k].strides;
      data[k] = dev_ptr(arg[k].addr);
    }
    for (uint32_t k = 0; k < node.n_scalars; k++)
      if ((rc = hbg_img_graph_scalar(&g, i, k, &sc[k])))
        return rc;
    if ((rc = run_kernel(node.kernel, node.n_tensors, dtype, shape, strides,
                         data, sc, node.n_scalars)))
      return rc;
  }
  *bad_node = UINT32_MAX;
  return 0;
}

static int run_task(const hbg_win_task *t) {
  const hbg_sub_tensor *ts = hbg_img_win_task_tensors(t);
  uint8_t dtype[HBG_IMG_MAX_ARGS_PER_NODE];
  const uint32_t *shape[HBG_IMG_MAX_ARGS_PER_NODE];
  const uint32_t *strides[HBG_IMG_MAX_ARGS_PER_NODE];
  void *data[HBG_IMG_MAX_ARGS_PER_NODE];
  for (uint32_t k = 0; k < t->n_tensors; k++) {
    dtype[k] = ts[k].dtype;
    shape[k] = ts[k].shape;
    strides[k] = ts[k].strides;
    data[k] = dev_ptr(ts[k].addr + ts[k].offset);
  }
  return run_kernel(t->kernel, t->n_tensors, dtype, shape, strides, data,
                    hbg_img_win_task_scalars(t), t->n_scalars);
}

/* Run a whole window; *task, *node say where an error happened. Entries run
 * in window order, which satisfies every dependency (deps point backwards). */
static int mini_execute(const void *win, uint64_t len, uint32_t *task,
                        uint32_t *node, uint32_t *done) {
  hbg_img_win_view wv;
  *task = *node = UINT32_MAX;
  *done = 0;
  int rc = hbg_img_win_validate(win, len, &wv);
  if (rc)
    return rc;
  for (uint32_t i = 0; i < wv.hdr->n_tasks; i++) {
    const hbg_win_task *t = hbg_img_win_task(&wv, i);
    *task = i;
    rc = t->kind == HBG_WIN_GRAPH ? run_graph(t, node) : run_task(t);
    if (rc)
      return rc;
    (*done)++;
  }
  *task = UINT32_MAX;
  return 0;
}

/* ------------------------------------------------------------------ */
/* "mini": the smallest device backend that runs it                    */
/* ------------------------------------------------------------------ */

struct hbg_dev_queue {
  int unused;
};
struct hbg_dev_event {
  int unused;
};

static int mini_open(hbg_device *dev, const char *options) {
  (void)dev;
  (void)options;
  return 0;
}
static void mini_close(hbg_device *dev) { (void)dev; }
static int mini_caps(hbg_device *dev, hbg_dev_caps *caps) {
  (void)dev;
  memset(caps, 0, sizeof *caps);
  caps->struct_size = sizeof *caps;
  caps->flags = HBG_DEV_CAP_EXECUTES;
  caps->stage_align = 64;
  caps->piece_pad_align = 1;
  caps->dev_align = 256;
  caps->mem_bytes = 1ull << 30;
  return 0;
}
static int mini_stats(hbg_device *dev, hbg_dev_stats *st) {
  (void)dev;
  memset(st, 0, sizeof *st);
  st->struct_size = sizeof *st;
  return 0;
}
static int mini_host_alloc(hbg_device *dev, size_t bytes, void **out) {
  (void)dev;
  *out = aligned_alloc(256, (bytes + 255) / 256 * 256);
  return *out ? 0 : HBG_E_NOMEM;
}
static int mini_host_free(hbg_device *dev, void *p) {
  (void)dev;
  free(p);
  return 0;
}
static int mini_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out) {
  void *p;
  int rc = mini_host_alloc(dev, bytes ? bytes : 1, &p);
  if (rc == 0)
    *out = (hbg_devptr)(uintptr_t)p;
  return rc;
}
static int mini_mem_free(hbg_device *dev, hbg_devptr p) {
  return mini_host_free(dev, dev_ptr(p));
}
static int mini_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                    size_t bytes) {
  (void)dev;
  memcpy(dev_ptr(dst), src, bytes);
  return 0;
}
static int mini_d2h(hbg_device *dev, void *dst, hbg_devptr src, size_t bytes) {
  (void)dev;
  memcpy(dst, dev_ptr(src), bytes);
  return 0;
}
static int mini_h2d_async(hbg_device *dev, hbg_dev_queue *q, hbg_devptr dst,
                          const void *src, size_t bytes) {
  (void)q;
  return mini_h2d(dev, dst, src, bytes); /* done at once: in queue order */
}
static int mini_queue_create(hbg_device *dev, hbg_dev_queue **out) {
  (void)dev;
  *out = calloc(1, sizeof **out);
  return *out ? 0 : HBG_E_NOMEM;
}
static int mini_queue_destroy(hbg_device *dev, hbg_dev_queue *q) {
  (void)dev;
  free(q);
  return 0;
}
static int mini_queue_sync(hbg_device *dev, hbg_dev_queue *q) {
  (void)dev;
  (void)q;
  return 0;
}
static int mini_event_create(hbg_device *dev, hbg_dev_event **out) {
  (void)dev;
  *out = calloc(1, sizeof **out);
  return *out ? 0 : HBG_E_NOMEM;
}
static int mini_event_destroy(hbg_device *dev, hbg_dev_event *ev) {
  (void)dev;
  free(ev);
  return 0;
}
static int mini_event_record(hbg_device *dev, hbg_dev_event *ev,
                             hbg_dev_queue *q) {
  (void)dev;
  (void)ev;
  (void)q;
  return 0;
}
static int mini_event_query(hbg_device *dev, hbg_dev_event *ev) {
  (void)dev;
  (void)ev;
  return 0; /* everything ran at launch */
}
static int mini_launch(hbg_device *dev, hbg_dev_queue *q,
                       const hbg_dev_launch_desc *l) {
  (void)dev;
  (void)q;
  hbg_dev_status st;
  memset(&st, 0, sizeof st);
  st.error = mini_execute(dev_ptr(l->window), l->window_bytes, &st.task,
                          &st.node, &st.tasks_done);
  memcpy(dev_ptr(l->status), &st, sizeof st);
  return 0;
}

static const hbg_dev_ops mini_ops = {
    .struct_size = sizeof(hbg_dev_ops),
    .abi_version = HBG_DEV_ABI_VERSION,
    .name = "mini",
    .summary = "host memory; launches run an hbg_image.h executor",
    .open = mini_open,
    .close = mini_close,
    .get_caps = mini_caps,
    .get_stats = mini_stats,
    .host_alloc = mini_host_alloc,
    .host_free = mini_host_free,
    .mem_alloc = mini_mem_alloc,
    .mem_free = mini_mem_free,
    .copy_h2d = mini_h2d,
    .copy_d2h = mini_d2h,
    .queue_create = mini_queue_create,
    .queue_destroy = mini_queue_destroy,
    .copy_h2d_async = mini_h2d_async,
    .queue_sync = mini_queue_sync,
    .event_create = mini_event_create,
    .event_destroy = mini_event_destroy,
    .event_record = mini_event_record,
    .event_query = mini_event_query,
    .event_wait = mini_event_query,
    .launch = mini_launch,
};

/* ------------------------------------------------------------------ */
/* The application: one graph, replayed per layer                      */
/* ------------------------------------------------------------------ */

#define CHECK(expr)                                                            \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_) {                                                                 \
      fprintf(stderr, "custom_executor: %s: %s (%s)\n", #expr,               \
              hbg_err_name(rc_), hbg_last_error());                            \
      return rc_;                                                              \
    }                                                                          \
  } while (0)

/* Boundary [h, w, out], scalar alpha: tmp = alpha * h + w (internal),
 * out = alpha * tmp + h. */
static int record_layer(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t n;
  const hbg_tensor *b = hbg_record_tensors(rec, &n);
  uint32_t dims[1] = {N};
  hbg_tensor a[3];
  hbg_scalar alpha = hbg_scalar_boundary(0);
  a[0] = b[0];
  a[1] = b[1];
  hbg_tensor_contig(&a[2], 0, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_task t = {.kernel = SAXPY, .n_args = 3, .args = a, .n_scalars = 1,
                .scalars = &alpha};
  int rc = hbg_record_task(rec, &t, NULL);
  if (rc)
    return rc;
  hbg_tensor c[3] = {a[2], b[0], b[2]};
  c[0].mode = HBG_ACCESS_IN;
  t.args = c;
  return hbg_record_task(rec, &t, NULL);
}

static int run_on(hbg_device *dev, float *result) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device_handle = dev;
  cfg.arena_bytes = 1u << 20;
  hbg_runtime *rt;
  CHECK(hbg_runtime_create(&cfg, &rt));
  uint64_t buf[LAYERS + 2];
  float host[N];
  for (uint32_t i = 0; i < LAYERS + 2; i++)
    CHECK(hbg_buffer_alloc(rt, N * sizeof(float), &buf[i]));
  for (uint32_t i = 0; i < N; i++)
    host[i] = (float)i / N;
  CHECK(hbg_buffer_write(rt, buf[0], host, sizeof host));
  for (uint32_t i = 0; i < N; i++)
    host[i] = 1.0f - (float)i / N;
  CHECK(hbg_buffer_write(rt, buf[1], host, sizeof host));

  uint32_t dims[1] = {N};
  hbg_tensor h, w, out;
  hbg_bind *b;
  CHECK(hbg_bind_begin(rt, &b));
  hbg_task_id prev = HBG_TASK_NONE;
  for (uint32_t l = 0; l < LAYERS; l++) {
    /* layer l reads buf[l] (h) and buf[1] (w), writes buf[l + 2] */
    uint64_t hb = l == 0 ? buf[0] : buf[l + 1];
    hbg_tensor_contig(&h, hb, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
    hbg_tensor_contig(&w, buf[1], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
    hbg_tensor_contig(&out, buf[l + 2], 0, HBG_DTYPE_F32, 1, dims,
                      HBG_ACCESS_OUT);
    hbg_tensor bt[3] = {h, w, out};
    uint64_t alpha = hbg_scalar_f32(0.5f + (float)l);
    hbg_graph_submit g = {.key = 1, .n_tensors = 3, .tensors = bt,
                          .scalars = &alpha, .n_scalars = 1,
                          .n_deps = prev == HBG_TASK_NONE ? 0 : 1,
                          .deps = &prev, .record = record_layer};
    CHECK(hbg_submit_graph(b, &g, &prev));
  }
  /* And one ordinary task with the same user kernel: buf[1] = 2 * last + w. */
  hbg_tensor_contig(&h, buf[LAYERS + 1], 0, HBG_DTYPE_F32, 1, dims,
                    HBG_ACCESS_IN);
  hbg_tensor_contig(&w, buf[1], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&out, buf[0], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_tensor ta[3] = {h, w, out};
  hbg_scalar two = hbg_scalar_static(hbg_scalar_f32(2.0f));
  hbg_task t = {.kernel = SAXPY, .n_args = 3, .args = ta, .n_scalars = 1,
                .scalars = &two, .n_deps = 1, .deps = &prev};
  CHECK(hbg_submit_task(b, &t, NULL));
  CHECK(hbg_bind_launch(b));
  CHECK(hbg_bind_wait(b));
  hbg_bind_end(b);
  CHECK(hbg_buffer_read(rt, result, buf[0], N * sizeof(float)));
  for (uint32_t i = 0; i < LAYERS + 2; i++)
    CHECK(hbg_buffer_free(rt, buf[i]));
  hbg_runtime_destroy(rt);
  return 0;
}

int main(void) {
  float on_sim[N], on_mini[N];
  hbg_device *sim, *mini;
  CHECK(hbg_device_open("sim", "mem=16M", &sim));
  CHECK(hbg_sim_register_kernel(sim, SAXPY, saxpy_sim, NULL));
  CHECK(run_on(sim, on_sim));
  hbg_device_close(sim);

  CHECK(hbg_device_open_ops(&mini_ops, NULL, &mini));
  CHECK(run_on(mini, on_mini));
  hbg_device_close(mini);

  /* The host's own reference for element i. */
  float ref[N];
  for (uint32_t i = 0; i < N; i++) {
    float x = (float)i / N, w = 1.0f - (float)i / N, hv = x;
    for (uint32_t l = 0; l < LAYERS; l++) {
      float a = 0.5f + (float)l;
      float tmp = a * hv + w;
      hv = a * tmp + hv;
    }
    ref[i] = 2.0f * hv + w;
  }
  if (memcmp(on_sim, on_mini, sizeof on_sim) != 0 ||
      memcmp(on_sim, ref, sizeof ref) != 0) {
    fprintf(stderr, "custom_executor: results differ (sim %g, mini %g, "
                    "host %g at 7)\n",
            on_sim[7], on_mini[7], ref[7]);
    return 1;
  }
  printf("custom_executor: %u layers of a user kernel on the sim and on an "
         "hbg_image.h executor agree (out[7] = %g)\n",
         LAYERS, on_mini[7]);
  return 0;
}
