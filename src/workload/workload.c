#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kernels/kernels.h"
#include "graph/graph.h"
#include "workload/wl.h"

#define WL_MAX_LAYERS HBG_WORKLOAD_MAX_LAYERS
#define WL_DEFAULT_SEED 0x5eed2024u

static const hbg__wl_model *const models[] = {
    &hbg__wl_qwen3,     &hbg__wl_dsv4,           &hbg__wl_flat,
    &hbg__wl_qwen3_06b, &hbg__wl_qwen3_14b_real, &hbg__wl_qwen3_hf};

/* A runtime that infers dependencies gets no explicit ids from the
 * workloads: what it runs must come out right from the data alone. */
static int names_deps(const hbg__wl_em *em) {
  return hbg_runtime_deps(em->w->rt) != HBG_DEPS_INFERRED;
}

void hbg_workload_config_init(hbg_workload_config *cfg) {
  if (!cfg)
    return;
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->name = "qwen3-14b";
}

uint32_t hbg_workload_count(void) { return (uint32_t)HBG__ARRAY_LEN(models); }

const char *hbg_workload_name(uint32_t i) {
  return i < HBG__ARRAY_LEN(models) ? models[i]->name : NULL;
}

/* ---- generator ---- */

uint64_t hbg__wl_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void hbg__wl_fill(float *p, uint64_t n, uint64_t seed, float lo, float hi) {
  uint64_t s = hbg__wl_mix(seed);
  for (uint64_t i = 0; i < n; i++) {
    s = hbg__wl_mix(s);
    float u = (float)(s >> 40) / (float)(1u << 24);
    p[i] = lo + (hi - lo) * u;
  }
}

uint64_t hbg__wl_f32(float f) { return hbg__kernel_f32(f); }

void hbg__wl_emit_head(hbg_workload *w, hbg__wl_em *em, hbg_task_id prev,
                       const hbg__wl_head *h) {
  const uint32_t IN = HBG_ACCESS_IN, OUT = HBG_ACCESS_OUT;
  const uint32_t H = h->hidden, V = h->vocab;
  hbg_tensor a[3];
  hbg_tensor xf = hbg__wl_t(w, WL_BUF_ACT, h->xf, OUT, 1, WL_D(H));
  hbg_tensor lg = hbg__wl_t(w, WL_BUF_ACT, h->logits, OUT, 1, WL_D(V));
  hbg_scalar eps = hbg__wl_static_f32(1e-6f);
  a[0] = hbg__wl_t(w, WL_BUF_ACT, h->resid, IN, 1, WL_D(H));
  a[1] = hbg__wl_t(w, WL_BUF_G, h->fnorm, IN, 1, WL_D(H));
  a[2] = xf;
  prev = hbg__wl_task(em, HBG_KERNEL_RMSNORM, a, 3, &eps, 1, &prev, 1);
  a[0] = hbg__wl_t(w, WL_BUF_G, h->lm, IN, 2, WL_D(V, H));
  a[1] = hbg__wl_in(xf);
  a[2] = lg;
  prev = hbg__wl_task(em, HBG_KERNEL_GEMV, a, 3, NULL, 0, &prev, 1);
  a[0] = hbg__wl_in(lg);
  a[1] = hbg__wl_t(w, WL_BUF_ACT, h->probs, OUT, 1, WL_D(V));
  hbg__wl_task(em, HBG_KERNEL_SOFTMAX, a, 2, NULL, 0, &prev, 1);
}

hbg_scalar hbg__wl_static_f32(float f) {
  hbg_scalar s = {.value = hbg__wl_f32(f), .kind = HBG_SCALAR_STATIC};
  return s;
}

hbg_scalar hbg__wl_bscalar(uint32_t index) {
  hbg_scalar s = {.kind = HBG_SCALAR_BOUNDARY, .index = index};
  return s;
}

/* ---- tensors ---- */

static hbg_tensor mk(uint64_t addr, uint64_t off, uint32_t dtype,
                     uint32_t mode, uint32_t ndim, const uint32_t *dims,
                     const uint32_t *strides) {
  hbg_tensor t;
  memset(&t, 0, sizeof t);
  t.addr = addr;
  t.offset = off;
  t.dtype = (uint8_t)dtype;
  t.ndim = (uint8_t)ndim;
  t.mode = (uint8_t)mode;
  uint32_t s = 1;
  for (uint32_t i = ndim; i-- > 0;) {
    t.shape[i] = dims[i];
    t.strides[i] = strides ? strides[i] : s;
    s *= dims[i];
  }
  return t;
}

hbg_tensor hbg__wl_t(const hbg_workload *w, int b, uint64_t off, uint32_t mode,
                     uint32_t ndim, const uint32_t *dims) {
  return mk(w->buf[b].dev, off * 4, HBG_DTYPE_F32, mode, ndim, dims, NULL);
}

hbg_tensor hbg__wl_tb(const hbg_workload *w, int b, uint64_t boff,
                      uint32_t dtype, uint32_t mode, uint32_t ndim,
                      const uint32_t *dims, const uint32_t *strides) {
  return mk(w->buf[b].dev, boff, dtype, mode, ndim, dims, strides);
}

hbg_tensor hbg__wl_view(const hbg_tensor *base, uint64_t eoff, uint32_t mode,
                        uint32_t ndim, const uint32_t *dims,
                        const uint32_t *strides) {
  return mk(base->addr, base->offset + eoff * hbg_dtype_size(base->dtype),
            base->dtype, mode, ndim, dims, strides);
}

hbg_tensor hbg__wl_new(uint32_t ndim, const uint32_t *dims) {
  return mk(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, ndim, dims, NULL);
}

hbg_tensor hbg__wl_in(hbg_tensor t) {
  t.mode = HBG_ACCESS_IN;
  return t;
}

/* ---- host reference ---- */

static int ref_ptr(hbg_workload *w, const hbg_tensor *t, void **out) {
  uint64_t ext = hbg_tensor_extent(t);
  HBG__RETURN_IF(ext == 0, HBG_E_KERNEL);
  if ((t->addr & HBG__HEAP_TAG_MASK) == HBG__HEAP_TAG) {
    uint64_t off = (t->addr & ~HBG__HEAP_TAG_MASK) + t->offset;
    HBG__RETURN_IF(off > w->scratch_cap * 4 || ext > w->scratch_cap * 4 - off,
                   HBG_E_RANGE);
    *out = (uint8_t *)w->scratch + off;
    return 0;
  }
  for (int b = 0; b < WL_BUF__COUNT; b++) {
    const hbg__wl_buf *wb = &w->buf[b];
    if (wb->dev != t->addr || !wb->floats)
      continue;
    HBG__RETURN_IF(t->offset > wb->floats * 4 ||
                       ext > wb->floats * 4 - t->offset,
                   HBG_E_RANGE);
    *out = (uint8_t *)wb->host + t->offset;
    return 0;
  }
  return HBG_E_RANGE;
}

/* Give each new graph-internal output (addr 0) of a body task its place in
 * the graph's heap, as the recorder places it in the device's heap block:
 * at the next HBG__HEAP_ALIGN boundary, offset 0. REF tags the address as
 * scratch; NODES gives it the caller's heap. */
static int heap_place(hbg__wl_em *em, hbg_tensor *args, uint32_t n) {
  hbg_workload *w = em->w;
  for (uint32_t i = 0; i < n; i++) {
    if (!(args[i].mode & HBG_ACCESS_OUT) || args[i].addr != 0)
      continue;
    uint64_t ext = hbg_tensor_extent(&args[i]);
    HBG__RETURN_IF(ext == 0, HBG_E_KERNEL);
    uint64_t at = HBG__ALIGN_UP(em->heap_top, (uint64_t)HBG__HEAP_ALIGN);
    em->heap_top = at + ext;
    if (em->mode == WL_EM_NODES) {
      args[i].addr = em->heap;
      args[i].offset = at;
      continue;
    }
    uint64_t need = (em->heap_top + 3) / 4;
    if (need > w->scratch_cap) {
      uint64_t cap = HBG__MAX(need, w->scratch_cap * 2);
      float *p = realloc(w->scratch, cap * 4);
      HBG__RETURN_IF(!p, HBG_E_NOMEM);
      w->scratch = p;
      w->scratch_cap = cap;
    }
    args[i].addr = HBG__HEAP_TAG | at;
    args[i].offset = 0;
  }
  return 0;
}

static int resolve_scalars(const hbg__wl_em *em, const hbg_scalar *sc,
                           uint32_t ns, uint64_t *sv) {
  for (uint32_t i = 0; i < ns; i++) {
    if (sc[i].kind == HBG_SCALAR_BOUNDARY) {
      HBG__RETURN_IF(sc[i].index >= em->nbs, HBG_E_INVAL);
      sv[i] = em->bs[sc[i].index];
    } else {
      sv[i] = sc[i].value;
    }
  }
  return 0;
}

static int ref_run(hbg__wl_em *em, uint32_t kernel, hbg_tensor *args,
                   uint32_t n, const hbg_scalar *sc, uint32_t ns) {
  hbg_workload *w = em->w;
  HBG__RETURN_IF(n > HBG_IMG_MAX_ARGS_PER_NODE ||
                     ns > HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_E_LIMIT);
  HBG__TRY(heap_place(em, args, n));
  hbg__ktensor kt[HBG_IMG_MAX_ARGS_PER_NODE];
  uint64_t sv[HBG_IMG_MAX_SCALARS_PER_NODE];
  for (uint32_t i = 0; i < n; i++) {
    void *p;
    HBG__TRY(ref_ptr(w, &args[i], &p));
    hbg__ktensor_from(&kt[i], &args[i], p);
  }
  HBG__TRY(resolve_scalars(em, sc, ns, sv));
  return hbg__kernel_run(kernel, kt, n, sv, ns);
}

/* One resolved kernel call; past em->cap (or with no out) only counted. */
static int nodes_emit(hbg__wl_em *em, uint32_t kernel, hbg_tensor *args,
                      uint32_t n, const hbg_scalar *sc, uint32_t ns) {
  HBG__RETURN_IF(n > HBG_WORKLOAD_NODE_MAX_TENSORS ||
                     ns > HBG_WORKLOAD_NODE_MAX_SCALARS,
                 HBG_E_LIMIT);
  HBG__TRY(heap_place(em, args, n));
  uint64_t sv[HBG_WORKLOAD_NODE_MAX_SCALARS];
  HBG__TRY(resolve_scalars(em, sc, ns, sv));
  if (em->out && em->count < em->cap) {
    hbg_workload_node *o = &em->out[em->count];
    memset(o, 0, sizeof *o);
    o->kernel = kernel;
    o->n_tensors = n;
    o->n_scalars = ns;
    o->task = em->body ? em->task : em->next_id;
    memcpy(o->tensors, args, (size_t)n * sizeof *args);
    memcpy(o->scalars, sv, (size_t)ns * sizeof *sv);
  }
  em->count++;
  return 0;
}

/* ---- emitter ---- */

hbg_task_id hbg__wl_task(hbg__wl_em *em, uint32_t kernel, hbg_tensor *args,
                         uint32_t n, const hbg_scalar *sc, uint32_t ns,
                         const hbg_task_id *deps, uint32_t nd) {
  if (em->rc)
    return HBG_TASK_NONE;
  hbg_task t = {.kernel = kernel,
                .n_args = n,
                .args = args,
                .n_scalars = ns,
                .scalars = sc,
                .n_deps = nd,
                .deps = deps};
  hbg_task_id id = 0;
  int rc;
  switch (em->mode) {
  case WL_EM_SUBMIT:
    if (!names_deps(em))
      t.n_deps = 0;
    rc = hbg_submit_task(em->bind, &t, &id);
    break;
  case WL_EM_RECORD:
    t.n_deps = 0;
    t.deps = NULL;
    rc = hbg_record_task(em->rec, &t, NULL);
    break;
  case WL_EM_NODES:
    rc = nodes_emit(em, kernel, args, n, sc, ns);
    id = em->next_id++;
    break;
  default:
    rc = ref_run(em, kernel, args, n, sc, ns);
    id = em->next_id++;
    break;
  }
  if (rc) {
    em->rc = rc;
    return HBG_TASK_NONE;
  }
  em->nodes++;
  return em->mode == WL_EM_RECORD ? 0 : id;
}

typedef struct rec_ctx {
  hbg_workload *w;
  hbg__wl_body_fn body;
  const void *cfg;
} rec_ctx;

static int record_cb(hbg_recorder *rec, void *user) {
  rec_ctx *c = user;
  hbg__wl_em em;
  memset(&em, 0, sizeof em);
  em.mode = WL_EM_RECORD;
  em.w = c->w;
  em.rec = rec;
  em.bt = hbg_record_tensors(rec, &em.nbt);
  em.bs = hbg_record_scalars(rec, &em.nbs);
  if (c->w->def_size && (em.rc = hbg_record_pad(rec, c->w->def_size)))
    return em.rc;
  c->body(&em, c->cfg);
  return em.rc;
}

hbg_task_id hbg__wl_graph(hbg__wl_em *em, uint64_t key, const hbg_tensor *bt,
                          uint32_t nbt, const uint64_t *bs, uint32_t nbs,
                          const hbg_task_id *deps, uint32_t nd,
                          hbg__wl_body_fn body, const void *cfg) {
  if (em->rc)
    return HBG_TASK_NONE;
  if (em->mode == WL_EM_SUBMIT) {
    rec_ctx c = {em->w, body, cfg};
    /* The pad is part of what the recording produces, so it is part of the
     * cache key: two workloads with different def_size on one runtime must
     * not replay each other's Definitions. */
    if (em->w->def_size)
      key ^= ((uint64_t)em->w->def_size << 32 | em->w->def_size) *
             0x9E3779B97F4A7C15ull;
    hbg_graph_submit g = {.key = key,
                          .n_tensors = nbt,
                          .tensors = bt,
                          .scalars = bs,
                          .n_scalars = nbs,
                          .n_deps = names_deps(em) ? nd : 0,
                          .deps = deps,
                          .record = record_cb,
                          .user = &c};
    hbg_task_id id;
    int rc = hbg_submit_graph(em->bind, &g, &id);
    if (rc) {
      em->rc = rc;
      return HBG_TASK_NONE;
    }
    return id;
  }
  /* REF and NODES: the body on the real boundary, with a fresh heap */
  hbg__wl_em in;
  memset(&in, 0, sizeof in);
  in.mode = em->mode;
  in.w = em->w;
  in.bt = bt;
  in.nbt = nbt;
  in.bs = bs;
  in.nbs = nbs;
  in.body = 1;
  in.heap = em->heap;
  in.task = em->next_id;
  in.out = em->out;
  in.cap = em->cap;
  in.count = em->count;
  body(&in, cfg);
  em->count = in.count;
  em->heap_max = HBG__MAX(em->heap_max, in.heap_top);
  if (in.rc) {
    em->rc = in.rc;
    return HBG_TASK_NONE;
  }
  hbg_workload *w = em->w;
  uint32_t k = em->mode == WL_EM_REF ? 0 : UINT32_MAX;
  while (k < w->n_def_keys && w->def_keys[k] != key)
    k++;
  if (k == w->n_def_keys && k < HBG__ARRAY_LEN(w->def_keys)) {
    w->def_keys[k] = key;
    w->def_nodes[k] = in.nodes;
    w->n_def_keys++;
  }
  return em->next_id++;
}

void hbg__wl_k2(hbg__wl_em *em, uint32_t kernel, hbg_tensor a, hbg_tensor out,
                const hbg_scalar *sc, uint32_t ns, hbg_tensor *got) {
  hbg_tensor args[2] = {hbg__wl_in(a), out};
  hbg__wl_task(em, kernel, args, 2, sc, ns, NULL, 0);
  if (got)
    *got = hbg__wl_in(args[1]);
}

void hbg__wl_k3(hbg__wl_em *em, uint32_t kernel, hbg_tensor a, hbg_tensor b,
                hbg_tensor out, const hbg_scalar *sc, uint32_t ns,
                hbg_tensor *got) {
  hbg_tensor args[3] = {hbg__wl_in(a), hbg__wl_in(b), out};
  hbg__wl_task(em, kernel, args, 3, sc, ns, NULL, 0);
  if (got)
    *got = hbg__wl_in(args[2]);
}

/* ---- public API ---- */

static void free_buffers(hbg_workload *w) {
  for (int b = WL_BUF__COUNT; b-- > 0;) {
    if (w->buf[b].dev)
      hbg_buffer_free(w->rt, w->buf[b].dev);
    free(w->buf[b].host);
    w->buf[b].dev = 0;
    w->buf[b].host = NULL;
  }
}

static void free_workload(hbg_workload *w) {
  if (!w)
    return;
  free_buffers(w);
  free(w->scratch);
  if (w->m && w->model->free)
    w->model->free(w->m);
  free(w->m);
  free(w->model_path);
  free(w);
}

/* cfg's field f when struct_size covers it, else 0. */
#define CFG_FIELD(cfg, f)                                                      \
  ((cfg)->struct_size >= offsetof(hbg_workload_config, f) + sizeof (cfg)->f    \
       ? (cfg)->f                                                              \
       : 0)

/* A workload with cfg's settings and its model's layout (buffer sizes, w->m),
 * nothing allocated on the device. */
static int plan(const hbg_workload_config *cfg, hbg_workload **out) {
  HBG__RETURN_IF(!cfg || !out || !cfg->name, HBG_E_INVAL);
  HBG__RETURN_IF(cfg->struct_size < offsetof(hbg_workload_config, def_size),
                 HBG_E_INVAL);
  const uint32_t def_size = CFG_FIELD(cfg, def_size);
  const uint32_t tasks = CFG_FIELD(cfg, tasks);
  const char *model = CFG_FIELD(cfg, model);
  const uint32_t wdtype = CFG_FIELD(cfg, weight_dtype);
  const uint32_t kv_len = CFG_FIELD(cfg, kv_len);
  HBG__RETURN_IF(cfg->layers > WL_MAX_LAYERS, HBG_E_LIMIT);
  HBG__RETURN_IF(def_size > HBG_WORKLOAD_MAX_DEF_SIZE, HBG_E_LIMIT);
  HBG__RETURN_IF(tasks > HBG_WORKLOAD_MAX_TASKS, HBG_E_LIMIT);
  const hbg__wl_model *m = NULL;
  for (size_t i = 0; i < HBG__ARRAY_LEN(models); i++)
    if (strcmp(models[i]->name, cfg->name) == 0)
      m = models[i];
  if (!m) {
    hbg__error_set("hbg_workload_create: no built-in workload '%s'",
                   cfg->name);
    return HBG_E_NOTFOUND;
  }
  const int takes_model = m == &hbg__wl_qwen3_hf;
  const int qwen_real = takes_model || m == &hbg__wl_qwen3_06b ||
                        m == &hbg__wl_qwen3_14b_real;
  if (takes_model != (model != NULL)) {
    hbg__error_set(takes_model
                       ? "hbg_workload_create: workload '%s' reads its dims "
                         "from hbg_workload_config.model, which is NULL"
                       : "hbg_workload_create: workload '%s' takes no model "
                         "(only 'qwen3' does)",
                   cfg->name);
    return HBG_E_INVAL;
  }
  if ((wdtype && !qwen_real) ||
      (wdtype && wdtype != HBG_DTYPE_F32 && wdtype != HBG_DTYPE_BF16)) {
    hbg__error_set("hbg_workload_create: weight_dtype %u: '%s' takes %s",
                   wdtype, cfg->name,
                   qwen_real ? "HBG_DTYPE_F32 or HBG_DTYPE_BF16" : "only 0");
    return HBG_E_INVAL;
  }
  if (kv_len && !qwen_real) {
    hbg__error_set("hbg_workload_create: kv_len: '%s' takes only 0",
                   cfg->name);
    return HBG_E_INVAL;
  }
  if (kv_len > HBG_WORKLOAD_MAX_KV_LEN) {
    hbg__error_set("hbg_workload_create: kv_len %u is past %u", kv_len,
                   HBG_WORKLOAD_MAX_KV_LEN);
    return HBG_E_LIMIT;
  }
  hbg_workload *w = calloc(1, sizeof *w);
  if (!w)
    return HBG_E_NOMEM;
  w->model = m;
  /* 0 layers: the model's default; one read from a config.json sets its
   * own in layout */
  w->layers = cfg->layers || takes_model ? cfg->layers : m->default_layers;
  w->seed = cfg->seed ? cfg->seed : WL_DEFAULT_SEED;
  w->def_size = def_size;
  w->tasks = tasks ? tasks : HBG_WORKLOAD_DEFAULT_TASKS;
  w->wdtype = wdtype ? wdtype : HBG_DTYPE_BF16;
  w->kv_len = kv_len ? kv_len : HBG_WORKLOAD_DEFAULT_KV_LEN;
  w->info.struct_size = sizeof w->info;
  if (model && !(w->model_path = strdup(model))) {
    free(w);
    return HBG_E_NOMEM;
  }
  int rc = m->layout(w);
  if (rc) {
    free_workload(w);
    return rc;
  }
  w->info.layers = w->layers;
  *out = w;
  return 0;
}

static uint64_t buf_bytes(const hbg_workload *w, int b) {
  return w->buf[b].floats * 4;
}

int hbg_workload_bytes(const hbg_workload_config *cfg, uint64_t *bytes) {
  hbg__error_clear();
  HBG__RETURN_IF(!bytes, HBG_E_INVAL);
  hbg_workload *w;
  HBG__TRY(plan(cfg, &w));
  uint64_t n = 0;
  for (int b = 0; b < WL_BUF__COUNT; b++)
    n += buf_bytes(w, b);
  free_workload(w);
  *bytes = n;
  return 0;
}

/* "1.23 GB" style, for messages. */
static const char *gb(uint64_t n, char *buf, size_t cap) {
  snprintf(buf, cap, "%.2f GB", (double)n / 1e9);
  return buf;
}

/* The device buffers, before any host memory: a device short of memory is
 * named with what the workload needs. */
static int alloc_device(hbg_workload *w, const char *name) {
  uint64_t need = 0;
  for (int b = 0; b < WL_BUF__COUNT; b++)
    need += buf_bytes(w, b);
  for (int b = 0; b < WL_BUF__COUNT; b++) {
    hbg__wl_buf *wb = &w->buf[b];
    if (!wb->floats)
      continue;
    int rc = hbg_buffer_alloc(w->rt, buf_bytes(w, b), &wb->dev);
    if (rc == HBG_E_DEVMEM || rc == HBG_E_NOMEM) {
      char t[32], a[32], k[32];
      hbg__error_set(
          "hbg_workload_create: '%s' needs %llu bytes (%s) of device memory "
          "(weights and tables %s, KV cache %s); the device refused a buffer "
          "of %llu bytes",
          name, (unsigned long long)need, gb(need, t, sizeof t),
          gb(buf_bytes(w, WL_BUF_W) + buf_bytes(w, WL_BUF_G), a, sizeof a),
          gb(buf_bytes(w, WL_BUF_KV), k, sizeof k),
          (unsigned long long)buf_bytes(w, b));
      return rc;
    }
    HBG__TRY(rc);
  }
  for (int b = 0; b < WL_BUF__COUNT; b++) {
    hbg__wl_buf *wb = &w->buf[b];
    if (!wb->floats)
      continue;
    wb->host = calloc(wb->floats, 4);
    if (!wb->host) {
      char t[32];
      hbg__error_set("hbg_workload_create: '%s' needs %llu bytes (%s) of "
                     "host memory for its host-reference mirrors",
                     name, (unsigned long long)need, gb(need, t, sizeof t));
      return HBG_E_NOMEM;
    }
  }
  return 0;
}

int hbg_workload_create(hbg_runtime *rt, const hbg_workload_config *cfg,
                        hbg_workload **out) {
  hbg__error_clear();
  HBG__RETURN_IF(!rt || !out, HBG_E_INVAL);
  hbg_workload *w;
  HBG__TRY(plan(cfg, &w));
  const hbg__wl_model *m = w->model;
  w->rt = rt;
  int rc = alloc_device(w, cfg->name);
  if (rc)
    goto err;
  m->init(w);
  if (m->load && (rc = m->load(w)))
    goto err;
  for (int b = 0; b < WL_BUF__COUNT; b++) {
    hbg__wl_buf *wb = &w->buf[b];
    if (!wb->floats)
      continue;
    if ((rc = hbg_buffer_write(rt, wb->dev, wb->host, buf_bytes(w, b))))
      goto err;
    w->info.device_bytes += buf_bytes(w, b);
  }
  w->info.weight_bytes = buf_bytes(w, WL_BUF_W) + buf_bytes(w, WL_BUF_G);
  w->info.kv_bytes = buf_bytes(w, WL_BUF_KV);
  /* One reference run: proves the description and counts the Definitions
   * (the mirrors are re-synchronised by every verify). */
  hbg__wl_em em;
  memset(&em, 0, sizeof em);
  em.mode = WL_EM_REF;
  em.w = w;
  m->step(w, &em, 0);
  if ((rc = em.rc))
    goto err;
  w->info.n_defs = w->n_def_keys;
  w->info.node_heap_bytes =
      HBG__ALIGN_UP(em.heap_max, (uint64_t)HBG__HEAP_ALIGN);
  w->info.min_nodes = UINT32_MAX;
  for (uint32_t k = 0; k < w->n_def_keys; k++) {
    w->info.min_nodes = HBG__MIN(w->info.min_nodes, w->def_nodes[k]);
    w->info.max_nodes = HBG__MAX(w->info.max_nodes, w->def_nodes[k]);
  }
  if (!w->n_def_keys)
    w->info.min_nodes = 0;
  *out = w;
  return 0;

err:;
  /* freeing the buffers goes through public calls, which clear the
   * thread's message: keep the one that says why */
  char why[1024];
  snprintf(why, sizeof why, "%s", hbg_last_error());
  free_workload(w);
  if (why[0])
    hbg__error_set("%s", why);
  return rc;
}

void hbg_workload_destroy(hbg_workload *w) { free_workload(w); }

int hbg_workload_get_info(const hbg_workload *w, hbg_workload_info *out) {
  HBG__RETURN_IF(!w || !out, HBG_E_INVAL);
  /* A caller built before a field says so with its struct_size: its struct
   * ends there, so nothing past it is written. Each size a released build
   * had is served; any other is refused. */
  static const size_t sizes[] = {offsetof(hbg_workload_info, node_heap_bytes),
                                 offsetof(hbg_workload_info, weight_bytes),
                                 sizeof(hbg_workload_info)};
  size_t n = 0;
  for (size_t i = 0; i < HBG__ARRAY_LEN(sizes); i++)
    if (out->struct_size == sizes[i])
      n = sizes[i];
  if (!n)
    n = sizeof *out; /* as before: an unknown size gets the whole struct */
  hbg_workload_info info = w->info;
  info.struct_size = (uint32_t)n;
  memcpy(out, &info, n);
  return 0;
}

int hbg_workload_hidden(hbg_workload *w, uint32_t index, float *out,
                        uint32_t n) {
  HBG__RETURN_IF(!w || !out, HBG_E_INVAL);
  HBG__RETURN_IF(!w->model->hidden, HBG_E_UNSUPPORTED);
  HBG__RETURN_IF(index > w->layers, HBG_E_RANGE);
  uint64_t off;
  uint32_t h;
  HBG__TRY(w->model->hidden(w, index, &off, &h));
  HBG__RETURN_IF(n < h, HBG_E_INVAL);
  return hbg_buffer_read(w->rt, out, w->buf[WL_BUF_ACT].dev + off * 4,
                         (uint64_t)h * 4);
}

uint32_t hbg_workload_token(const hbg_workload *w, uint32_t step) {
  return w && w->model->token ? w->model->token(w, step) : UINT32_MAX;
}

int hbg_workload_submit(hbg_workload *w, hbg_bind *b, uint32_t step) {
  HBG__RETURN_IF(!w || !b, HBG_E_INVAL);
  hbg__wl_em em;
  memset(&em, 0, sizeof em);
  em.mode = WL_EM_SUBMIT;
  em.w = w;
  em.bind = b;
  w->model->step(w, &em, step);
  return em.rc;
}

int hbg_workload_nodes(hbg_workload *w, uint32_t step, uint64_t heap,
                       hbg_workload_node *out, uint32_t cap, uint32_t *n) {
  HBG__RETURN_IF(!w || !n || !heap || heap % HBG__HEAP_ALIGN, HBG_E_INVAL);
  hbg__wl_em em;
  memset(&em, 0, sizeof em);
  em.mode = WL_EM_NODES;
  em.w = w;
  em.heap = heap;
  /* count first, so that out is written only when all of it fits */
  w->model->step(w, &em, step);
  HBG__TRY(em.rc);
  const uint32_t count = em.count;
  if (out) {
    if (count > cap) {
      *n = count;
      return HBG_E_LIMIT;
    }
    memset(&em, 0, sizeof em);
    em.mode = WL_EM_NODES;
    em.w = w;
    em.heap = heap;
    em.out = out;
    em.cap = cap;
    w->model->step(w, &em, step);
    HBG__TRY(em.rc);
  }
  *n = count;
  return 0;
}

static int compare(const float *dev, const float *ref, uint64_t n,
                   double *max_err) {
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (memcmp(&dev[i], &ref[i], 4) == 0)
      continue;
    bad = 1;
    double d = fabs((double)dev[i] - (double)ref[i]);
    if (d != d)
      d = INFINITY;
    if (d > *max_err)
      *max_err = d;
  }
  return bad;
}

int hbg_workload_verify(hbg_workload *w, uint32_t step, double *max_abs_err) {
  HBG__RETURN_IF(!w, HBG_E_INVAL);
  hbg__wl_buf *kv = &w->buf[WL_BUF_KV], *act = &w->buf[WL_BUF_ACT];
  /* a workload without caches (flat) has kv->floats == 0 */
  float *dkv = malloc(kv->floats * 4 + 4), *dact = malloc(act->floats * 4);
  int rc = HBG_E_NOMEM;
  if (!dkv || !dact)
    goto out;
  if ((kv->floats &&
       (rc = hbg_buffer_read(w->rt, dkv, kv->dev, kv->floats * 4))) ||
      (rc = hbg_buffer_read(w->rt, dact, act->dev, act->floats * 4)))
    goto out;
  /* The step rewrites every activation and, in the caches, only the rows of
   * its position (before reading them): start from the device's caches and
   * from poisoned activations. */
  if (kv->floats)
    memcpy(kv->host, dkv, kv->floats * 4);
  memset(act->host, 0xff, act->floats * 4);
  hbg__wl_em em;
  memset(&em, 0, sizeof em);
  em.mode = WL_EM_REF;
  em.w = w;
  w->model->step(w, &em, step);
  if ((rc = em.rc))
    goto out;
  double err = 0.0;
  int bad = compare(dkv, kv->host, kv->floats, &err);
  bad |= compare(dact, act->host, act->floats, &err);
  if (max_abs_err)
    *max_abs_err = err;
  rc = bad ? HBG_E_VERIFY : 0;
out:
  free(dkv);
  free(dact);
  return rc;
}
