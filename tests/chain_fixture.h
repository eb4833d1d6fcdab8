/* A small chained-layer workload for core tests: layer i reads b[i] and
 * bias[i] and writes b[i+1] = (b[i] + bias[i]) * s, where s is a boundary
 * scalar that changes every step. Ordinary tasks copy the input in and the
 * result out. Host reference with the same float operations: bit-exact. */
#ifndef HBG_TEST_CHAIN_FIXTURE_H
#define HBG_TEST_CHAIN_FIXTURE_H

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stdlib.h>
#include <string.h>

typedef struct chain {
  hbg_runtime *rt;
  uint32_t layers, n;
  uint64_t key;
  uint64_t variant; /* static scale multiplier baked into the Definition */
  uint64_t input, out, *b, *bias;
  float *h_input, *h_bias;
  int record_calls;
} chain;

static float chain_scale(uint32_t step) { return 1.0f + 0.125f * (float)(step % 7); }

static uint64_t chain_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static int chain_record(hbg_recorder *rec, void *user) {
  chain *c = user;
  c->record_calls++;
  uint32_t nt = 0, ns = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_record_scalars(rec, &ns);
  if (!bt || nt != 3 || ns != 1)
    return -1;
  hbg_tensor x = bt[0], bias = bt[1], y = bt[2];
  uint32_t dims[1] = {c->n};
  hbg_tensor t, u;
  hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_tensor a0[3] = {x, bias, t};
  a0[0].mode = HBG_ACCESS_IN;
  a0[1].mode = HBG_ACCESS_IN;
  hbg_task k0 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a0};
  hbg_task_id n0;
  int rc = hbg_record_task(rec, &k0, &n0);
  if (rc)
    return rc;
  t = a0[2];
  t.mode = HBG_ACCESS_IN;
  hbg_tensor_contig(&u, 0, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_tensor a1[2] = {t, u};
  hbg_scalar s1 = {.kind = HBG_SCALAR_BOUNDARY, .index = 0};
  hbg_task k1 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a1,
                 .n_scalars = 1, .scalars = &s1};
  rc = hbg_record_task(rec, &k1, NULL);
  if (rc)
    return rc;
  u = a1[1];
  u.mode = HBG_ACCESS_IN;
  hbg_tensor w;
  hbg_tensor_contig(&w, 0, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_tensor a2[2] = {u, w};
  hbg_scalar s2 = {.kind = HBG_SCALAR_STATIC,
                   .value = chain_f32((float)c->variant)};
  hbg_task k2 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a2,
                 .n_scalars = 1, .scalars = &s2};
  rc = hbg_record_task(rec, &k2, NULL);
  if (rc)
    return rc;
  w = a2[1];
  w.mode = HBG_ACCESS_IN;
  hbg_tensor a3[2] = {w, y};
  a3[1].mode = HBG_ACCESS_OUT;
  hbg_task k3 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a3};
  return hbg_record_task(rec, &k3, NULL);
}

static int chain_create(chain *c, hbg_runtime *rt, uint32_t layers, uint32_t n) {
  memset(c, 0, sizeof *c);
  c->rt = rt;
  c->layers = layers;
  c->n = n;
  c->key = 0x4c41594552ull;
  c->variant = 1;
  c->b = calloc(layers + 1, sizeof *c->b);
  c->bias = calloc(layers, sizeof *c->bias);
  c->h_input = malloc(n * sizeof(float));
  c->h_bias = malloc((size_t)layers * n * sizeof(float));
  if (!c->b || !c->bias || !c->h_input || !c->h_bias)
    return HBG_E_NOMEM;
  uint64_t bytes = (uint64_t)n * 4;
  int rc;
  if ((rc = hbg_buffer_alloc(rt, bytes, &c->input)) ||
      (rc = hbg_buffer_alloc(rt, bytes, &c->out)))
    return rc;
  for (uint32_t i = 0; i <= layers; i++)
    if ((rc = hbg_buffer_alloc(rt, bytes, &c->b[i])))
      return rc;
  for (uint32_t i = 0; i < n; i++)
    c->h_input[i] = (float)(i % 13) * 0.25f - 1.0f;
  for (uint32_t l = 0; l < layers; l++) {
    for (uint32_t i = 0; i < n; i++)
      c->h_bias[(size_t)l * n + i] = (float)((i + l) % 5) * 0.5f;
    if ((rc = hbg_buffer_alloc(rt, bytes, &c->bias[l])) ||
        (rc = hbg_buffer_write(rt, c->bias[l], c->h_bias + (size_t)l * n, bytes)))
      return rc;
  }
  return hbg_buffer_write(rt, c->input, c->h_input, bytes);
}

static void chain_destroy(chain *c) {
  if (c->rt) {
    if (c->input) hbg_buffer_free(c->rt, c->input);
    if (c->out) hbg_buffer_free(c->rt, c->out);
    for (uint32_t i = 0; c->b && i <= c->layers; i++)
      if (c->b[i]) hbg_buffer_free(c->rt, c->b[i]);
    for (uint32_t i = 0; c->bias && i < c->layers; i++)
      if (c->bias[i]) hbg_buffer_free(c->rt, c->bias[i]);
  }
  free(c->b);
  free(c->bias);
  free(c->h_input);
  free(c->h_bias);
  memset(c, 0, sizeof *c);
}

/* After hbg_runtime_destroy, which freed the chain's buffers with the
 * runtime: release the host side only. */
static inline void chain_forget(chain *c) {
  c->rt = NULL;
  chain_destroy(c);
}

/* The head task: input -> b[0]. */
static int chain_submit_head(chain *c, hbg_bind *b, hbg_task_id *prev) {
  uint32_t dims[1] = {c->n};
  hbg_tensor a[2];
  hbg_tensor_contig(&a[0], c->input, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&a[1], c->b[0], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_task t0 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a};
  return hbg_submit_task(b, &t0, prev);
}

/* Layer l of the step as a graph submission after *prev; *prev becomes it. */
static int chain_submit_layer(chain *c, hbg_bind *b, uint32_t step, uint32_t l,
                              hbg_task_id *prev) {
  uint32_t dims[1] = {c->n};
  uint64_t s = chain_f32(chain_scale(step));
  hbg_tensor bt[3];
  hbg_tensor_contig(&bt[0], c->b[l], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&bt[1], c->bias[l], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&bt[2], c->b[l + 1], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_task_id dep = *prev;
  hbg_graph_submit g = {.key = c->key, .variant = &c->variant, .n_variant = 1,
                        .n_tensors = 3, .tensors = bt, .scalars = &s,
                        .n_scalars = 1, .n_deps = 1, .deps = &dep,
                        .record = chain_record, .user = c};
  return hbg_submit_graph(b, &g, prev);
}

/* The tail task: b[layers] -> out; *out (optional) its task id. */
static inline int chain_submit_tail_id(chain *c, hbg_bind *b, hbg_task_id prev,
                                hbg_task_id *out) {
  uint32_t dims[1] = {c->n};
  hbg_tensor a[2];
  hbg_tensor_contig(&a[0], c->b[c->layers], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&a[1], c->out, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_task t1 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a,
                 .n_deps = 1, .deps = &prev};
  return hbg_submit_task(b, &t1, out);
}

static int chain_submit_tail(chain *c, hbg_bind *b, hbg_task_id prev) {
  return chain_submit_tail_id(c, b, prev, NULL);
}

static int chain_submit(chain *c, hbg_bind *b, uint32_t step) {
  hbg_task_id prev;
  int rc = chain_submit_head(c, b, &prev);
  for (uint32_t l = 0; rc == 0 && l < c->layers; l++)
    rc = chain_submit_layer(c, b, step, l, &prev);
  return rc ? rc : chain_submit_tail(c, b, prev);
}

/* The host reference of the step's output: n floats into ref. */
static inline void chain_ref(const chain *c, uint32_t step, float *ref) {
  float s = chain_scale(step), v = (float)c->variant;
  memcpy(ref, c->h_input, c->n * sizeof(float));
  for (uint32_t l = 0; l < c->layers; l++)
    for (uint32_t i = 0; i < c->n; i++) {
      float t = ref[i] + c->h_bias[(size_t)l * c->n + i];
      float u = t * s;
      ref[i] = u * v;
    }
}

/* 0 when the device output equals the host reference bit for bit. */
static int chain_verify(chain *c, uint32_t step) {
  float *got = malloc(c->n * sizeof(float)), *ref = malloc(c->n * sizeof(float));
  int rc = HBG_E_NOMEM;
  if (!got || !ref)
    goto out;
  rc = hbg_buffer_read(c->rt, got, c->out, (uint64_t)c->n * 4);
  if (rc)
    goto out;
  chain_ref(c, step, ref);
  rc = memcmp(got, ref, c->n * sizeof(float)) ? HBG_E_VERIFY : 0;
out:
  free(got);
  free(ref);
  return rc;
}

/* One full bind: begin, submit, launch, wait, verify, stats, end. */
static int chain_bind(chain *c, uint32_t step, hbg_bind_stats *st) {
  hbg_bind *b = NULL;
  int rc = hbg_bind_begin(c->rt, &b);
  if (rc)
    return rc;
  rc = chain_submit(c, b, step);
  if (!rc)
    rc = hbg_bind_launch(b);
  if (!rc)
    rc = hbg_bind_wait(b);
  if (st)
    hbg_bind_stats_get(b, st);
  hbg_bind_end(b);
  if (!rc)
    rc = chain_verify(c, step);
  return rc;
}

#endif
