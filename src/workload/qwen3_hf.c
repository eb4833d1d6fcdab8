/*
 * The Qwen3 decoder at real dims: the presets qwen3-0.6b and
 * qwen3-14b-real, and "qwen3", whose dims come from a Hugging Face
 * config.json and whose weights, when the model is a checkpoint folder,
 * come from its safetensors files (hf.h). One decode step per bind:
 *
 *   the token's embedding row (COPY, bf16 or f32 table -> f32)
 *   per layer, one submission of one Definition (the layer's shape):
 *     input RMSNorm; q, k, v projections (a GEMV node per head); q_norm,
 *     k_norm per head; rotate-half RoPE at the step's position, k straight
 *     into the KV cache's row, v's GEMV too; attention per query head over
 *     its KV head's positions [0, len); o projection in row tiles plus the
 *     residual; post-attention RMSNorm; gate and up in row tiles, SiLU-mul;
 *     down in row tiles plus the residual
 *   the final RMSNorm, the LM head in row tiles, a softmax
 *
 * Row tiles hold about TILE_WEIGHTS weights, so that the device's workers
 * share a layer (0.6B: 245 nodes per layer). Weights (every matrix and norm
 * weight, the embedding and the LM head) are w->wdtype; activations, the
 * RoPE tables and the KV cache are f32.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "kernels/kernels.h"
#include "workload/hf.h"
#include "workload/wl.h"

#define TILE_WEIGHTS (1u << 17) /* weights per row tile of a layer */
#define HEAD_WEIGHTS (1u << 22) /* weights per LM-head tile, at least */
#define HEAD_TILES 64u          /* LM-head tiles, at most */
#define MAX_HEAD_DIM 4096u
#define KEY 0x7177656e33000002ull /* "qwen3", real dims */

enum {
  XIN,
  XOUT,
  ANORM,
  WQ,
  WK,
  WV,
  QNORM,
  KNORM,
  COS,
  SIN,
  KROW, /* the step's row of every KV head: [Hk][D], strides [T*D, 1] */
  VROW,
  KC, /* the layer's cache: [Hk][T][D] */
  VC,
  WO,
  FNORM,
  WG,
  WU,
  WD,
  QLIN,
  KLIN,
  AACT,
  HMID,
  FACT,
  NB
};

/* a layer's weights, in order (their byte offsets in o[]) */
enum { L_ANORM, L_WQ, L_WK, L_WV, L_QNORM, L_KNORM, L_WO, L_FNORM, L_WG, L_WU,
       L_WD, L__COUNT };

typedef struct q3 {
  hbg__hf_qwen3 c;
  uint32_t T, wdt, es;
  uint32_t qd, kd;                   /* heads * head_dim, kv_heads * head_dim */
  uint64_t lo[L__COUNT], l_bytes;    /* per layer, bytes in WL_BUF_W */
  uint64_t g_emb, g_lm, g_fnorm;     /* bytes in WL_BUF_G */
  uint64_t g_cos, g_sin;             /* floats in WL_BUF_G */
  uint64_t a_resid, a_layers, a_layer, a_xf, a_logits, a_probs; /* floats */
  uint32_t r_o, r_f, r_d, r_lm;      /* tile rows */
  uint64_t key;
  int from_ckpt;                     /* model_path is a checkpoint folder */
} q3;

/* per layer activations (floats) */
enum { A_QLIN, A_KLIN, A_AACT, A_HMID, A_FACT, A__COUNT };

static uint64_t a_off(const q3 *q, int which) {
  const uint64_t n[A__COUNT] = {q->qd, q->kd, q->qd, q->c.hidden,
                                q->c.intermediate};
  uint64_t o = 0;
  for (int i = 0; i < which; i++)
    o += n[i];
  return o;
}

static uint32_t tile_rows(uint64_t rows, uint64_t k, uint64_t weights) {
  uint64_t r = weights / k;
  return (uint32_t)HBG__MAX(1u, HBG__MIN(r, rows));
}

static const hbg__hf_qwen3 preset_06b = {
    .hidden = 1024,
    .intermediate = 3072,
    .heads = 16,
    .kv_heads = 8,
    .head_dim = 128,
    .layers = 28,
    .vocab = 151936,
    .max_pos = 40960,
    .eps = 1e-6f,
    .rope_theta = 1000000.0,
    .tie_embeddings = 1};

static const hbg__hf_qwen3 preset_14b = {
    .hidden = 5120,
    .intermediate = 17408,
    .heads = 40,
    .kv_heads = 8,
    .head_dim = 128,
    .layers = 40,
    .vocab = 151936,
    .max_pos = 40960,
    .eps = 1e-6f,
    .rope_theta = 1000000.0,
    .tie_embeddings = 0};

/* The dims: a preset's, or the model's config.json. */
static int dims(hbg_workload *w, hbg__hf_qwen3 *c, int *from_ckpt) {
  *from_ckpt = 0;
  if (w->model == &hbg__wl_qwen3_06b) {
    *c = preset_06b;
    return 0;
  }
  if (w->model == &hbg__wl_qwen3_14b_real) {
    *c = preset_14b;
    return 0;
  }
  struct stat st;
  if (stat(w->model_path, &st) != 0) {
    hbg__error_set("hbg_workload_create: model '%s': no such file or folder",
                   w->model_path);
    return HBG_E_NOTFOUND;
  }
  if (!S_ISDIR(st.st_mode))
    return hbg__hf_config_read(w->model_path, c);
  *from_ckpt = 1;
  size_t n = strlen(w->model_path) + sizeof "/config.json";
  char *path = malloc(n);
  if (!path)
    return HBG_E_NOMEM;
  snprintf(path, n, "%s/config.json", w->model_path);
  int rc = hbg__hf_config_read(path, c);
  free(path);
  return rc;
}

static int layout(hbg_workload *w) {
  q3 *q = calloc(1, sizeof *q);
  if (!q)
    return HBG_E_NOMEM;
  w->m = q;
  HBG__TRY(dims(w, &q->c, &q->from_ckpt));
  const hbg__hf_qwen3 *c = &q->c;
  const char *who = w->model->name;
  if (!w->layers)
    w->layers = c->layers;
  if (w->layers > c->layers) {
    hbg__error_set("hbg_workload_create: %s has %u layers, %u asked for",
                   who, c->layers, w->layers);
    return HBG_E_INVAL;
  }
  if (c->head_dim > MAX_HEAD_DIM || c->head_dim % 2) {
    hbg__error_set("hbg_workload_create: %s: head_dim %u (even, at most %u)",
                   who, c->head_dim, MAX_HEAD_DIM);
    return HBG_E_LIMIT;
  }
  q->T = w->kv_len;
  q->wdt = w->wdtype;
  q->es = hbg_dtype_size(q->wdt);
  q->qd = c->heads * c->head_dim;
  q->kd = c->kv_heads * c->head_dim;
  const uint64_t H = c->hidden, F = c->intermediate, D = c->head_dim,
                 V = c->vocab, L = w->layers, T = q->T;
  /* every tensor a kernel sees stays within the kernels' limits: a head's
   * cache (the weight tiles are far below them; a boundary tensor is not a
   * kernel's) */
  if (T * D > HBG__KERNEL_MAX_NUMEL ||
      (uint64_t)c->heads * T * D > HBG__KERNEL_MAX_WORK) {
    hbg__error_set("hbg_workload_create: %s: kv_len %u x head_dim %u "
                   "exceeds the attention kernel's %llu elements",
                   who, q->T, c->head_dim,
                   (unsigned long long)HBG__KERNEL_MAX_NUMEL);
    return HBG_E_LIMIT;
  }

  const uint64_t n[L__COUNT] = {H,     q->qd * H, q->kd * H, q->kd * H,
                                D,     D,         H * q->qd, H,
                                F * H, F * H,     H * F};
  uint64_t o = 0;
  for (int i = 0; i < L__COUNT; i++) {
    q->lo[i] = o;
    o = HBG__ALIGN_UP(o + n[i] * q->es, (uint64_t)64);
  }
  q->l_bytes = o;
  q->g_emb = 0;
  o = HBG__ALIGN_UP(V * H * q->es, (uint64_t)64);
  q->g_lm = c->tie_embeddings ? q->g_emb : o;
  if (!c->tie_embeddings)
    o = HBG__ALIGN_UP(o + V * H * q->es, (uint64_t)64);
  q->g_fnorm = o;
  o = HBG__ALIGN_UP(o + H * q->es, (uint64_t)64);
  q->g_cos = o / 4;
  q->g_sin = q->g_cos + T * D / 2;

  q->a_layer = a_off(q, A__COUNT);
  q->a_resid = 0;
  q->a_layers = q->a_resid + (L + 1) * H;
  q->a_xf = q->a_layers + L * q->a_layer;
  q->a_logits = q->a_xf + H;
  q->a_probs = q->a_logits + V;

  q->r_o = tile_rows(H, q->qd, TILE_WEIGHTS);
  q->r_f = tile_rows(F, H, TILE_WEIGHTS);
  q->r_d = tile_rows(H, F, TILE_WEIGHTS);
  q->r_lm = tile_rows(V, H, HEAD_WEIGHTS);
  q->r_lm = (uint32_t)HBG__MAX(q->r_lm, (V + HEAD_TILES - 1) / HEAD_TILES);

  uint64_t k = KEY;
  const uint64_t parts[] = {H, F, c->heads, c->kv_heads, D, T, q->wdt,
                            (uint64_t)hbg__wl_f32(c->eps)};
  for (size_t i = 0; i < HBG__ARRAY_LEN(parts); i++)
    k = hbg__wl_mix(k ^ parts[i]);
  q->key = k;

  w->buf[WL_BUF_W].floats = (L * q->l_bytes + 3) / 4;
  w->buf[WL_BUF_G].floats = q->g_sin + T * D / 2;
  w->buf[WL_BUF_KV].floats = 2 * L * c->kv_heads * T * D;
  w->buf[WL_BUF_ACT].floats = q->a_probs + V;
  w->info.max_btensors = NB;
  w->info.max_bscalars = 2;
  w->info.tasks_before = 1;
  w->info.tasks_after = 2 + (uint32_t)((V + q->r_lm - 1) / q->r_lm);
  w->info.hidden = c->hidden;
  w->info.vocab = c->vocab;
  return 0;
}

/* n weights in wdt at p, uniform in [lo, hi) from seed. */
static void fill_w(const q3 *q, void *p, uint64_t n, uint64_t seed, float lo,
                   float hi) {
  if (q->wdt == HBG_DTYPE_F32) {
    hbg__wl_fill(p, n, seed, lo, hi);
    return;
  }
  float chunk[4096];
  uint16_t *b = p;
  for (uint64_t i = 0; i < n; i += HBG__ARRAY_LEN(chunk)) {
    uint64_t m = HBG__MIN(n - i, (uint64_t)HBG__ARRAY_LEN(chunk));
    hbg__wl_fill(chunk, m, seed ^ (i * 0x9E3779B97F4A7C15ull), lo, hi);
    for (uint64_t j = 0; j < m; j++)
      b[i + j] = hbg__bf16_from_f32(chunk[j]);
  }
}

static void init(hbg_workload *w) {
  const q3 *q = w->m;
  const hbg__hf_qwen3 *c = &q->c;
  uint8_t *W = (uint8_t *)w->buf[WL_BUF_W].host,
          *Gb = (uint8_t *)w->buf[WL_BUF_G].host;
  float *G = w->buf[WL_BUF_G].host;
  const uint64_t H = c->hidden, F = c->intermediate, D = c->head_dim,
                 V = c->vocab, T = q->T;
  for (uint64_t p = 0; p < T; p++)
    for (uint64_t i = 0; i < D / 2; i++) {
      double th = (double)p * pow(c->rope_theta, -2.0 * (double)i / (double)D);
      G[q->g_cos + p * D / 2 + i] = (float)cos(th);
      G[q->g_sin + p * D / 2 + i] = (float)sin(th);
    }
  if (q->from_ckpt)
    return; /* load reads the weights */
  const float kh = 1.0f / sqrtf((float)H), kq = 1.0f / sqrtf((float)q->qd),
              kf = 1.0f / sqrtf((float)F);
  for (uint32_t l = 0; l < w->layers; l++) {
    uint8_t *p = W + l * q->l_bytes;
    uint64_t sd = w->seed * 1000003u + l * 64u;
    const struct {
      uint64_t n;
      float lo, hi;
    } r[L__COUNT] = {{H, 0.8f, 1.2f},          {q->qd * H, -kh, kh},
                     {q->kd * H, -kh, kh},     {q->kd * H, -kh, kh},
                     {D, 0.8f, 1.2f},          {D, 0.8f, 1.2f},
                     {H * q->qd, -kq, kq},     {H, 0.8f, 1.2f},
                     {F * H, -kh, kh},         {F * H, -kh, kh},
                     {H * F, -kf, kf}};
    for (int i = 0; i < L__COUNT; i++)
      fill_w(q, p + q->lo[i], r[i].n, sd + 1 + (uint64_t)i, r[i].lo, r[i].hi);
  }
  fill_w(q, Gb + q->g_emb, V * H, w->seed + 101, -0.1f, 0.1f);
  if (!c->tie_embeddings)
    fill_w(q, Gb + q->g_lm, V * H, w->seed + 102, -kh, kh);
  fill_w(q, Gb + q->g_fnorm, H, w->seed + 103, 0.8f, 1.2f);
}

/* The weights from the checkpoint folder, each checked against the config's
 * shape (hf.h names the file and the tensor of a refusal). */
static int load(hbg_workload *w) {
  const q3 *q = w->m;
  if (!q->from_ckpt)
    return 0;
  const hbg__hf_qwen3 *c = &q->c;
  const uint64_t H = c->hidden, F = c->intermediate, D = c->head_dim,
                 V = c->vocab;
  hbg__hf_ckpt *ck;
  HBG__TRY(hbg__hf_open(w->model_path, &ck));
  uint8_t *W = (uint8_t *)w->buf[WL_BUF_W].host,
          *G = (uint8_t *)w->buf[WL_BUF_G].host;
  static const char *const names[L__COUNT] = {
      "input_layernorm",        "self_attn.q_proj", "self_attn.k_proj",
      "self_attn.v_proj",       "self_attn.q_norm", "self_attn.k_norm",
      "self_attn.o_proj",       "post_attention_layernorm",
      "mlp.gate_proj",          "mlp.up_proj",      "mlp.down_proj"};
  const uint64_t shp[L__COUNT][2] = {{H, 0},     {q->qd, H}, {q->kd, H},
                                     {q->kd, H}, {D, 0},     {D, 0},
                                     {H, q->qd}, {H, 0},     {F, H},
                                     {F, H},     {H, F}};
  char name[160];
  int rc = 0;
  for (uint32_t l = 0; l < w->layers && !rc; l++)
    for (int i = 0; i < L__COUNT && !rc; i++) {
      snprintf(name, sizeof name, "model.layers.%u.%s.weight", l, names[i]);
      rc = hbg__hf_read(ck, name, q->wdt, shp[i], shp[i][1] ? 2 : 1,
                        W + l * q->l_bytes + q->lo[i]);
    }
  const uint64_t emb[2] = {V, H}, nrm[1] = {H};
  if (!rc)
    rc = hbg__hf_read(ck, "model.embed_tokens.weight", q->wdt, emb, 2,
                      G + q->g_emb);
  if (!rc && !c->tie_embeddings)
    rc = hbg__hf_read(ck, "lm_head.weight", q->wdt, emb, 2, G + q->g_lm);
  if (!rc)
    rc = hbg__hf_read(ck, "model.norm.weight", q->wdt, nrm, 1, G + q->g_fnorm);
  hbg__hf_close(ck);
  return rc;
}

static void body(hbg__wl_em *em, const void *cfg) {
  const q3 *q = cfg;
  const hbg__hf_qwen3 *c = &q->c;
  const hbg_tensor *b = em->bt;
  if (!b || em->nbt != NB || em->nbs != 2) {
    em->rc = HBG_E_INVAL;
    return;
  }
  const uint32_t IN = HBG_ACCESS_IN, OUT = HBG_ACCESS_OUT;
  const uint32_t H = c->hidden, F = c->intermediate, D = c->head_dim,
                 T = q->T, QD = q->qd, group = c->heads / c->kv_heads;
  hbg_scalar eps = hbg__wl_static_f32(c->eps), pos = hbg__wl_bscalar(0),
             len = hbg__wl_bscalar(1);
  hbg_tensor xn;
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[XIN], b[ANORM], hbg__wl_new(1, WL_D(H)),
             &eps, 1, &xn);

  /* k and v first: a query head's attention reads its KV head's new row */
  for (uint32_t g = 0; g < c->kv_heads; g++) {
    hbg_tensor kn;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WK], (uint64_t)g * D * H, IN, 2, WL_D(D, H),
                            NULL),
               xn, hbg__wl_view(&b[KLIN], (uint64_t)g * D, OUT, 1, WL_D(D), NULL),
               NULL, 0, NULL);
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WV], (uint64_t)g * D * H, IN, 2, WL_D(D, H),
                            NULL),
               xn,
               hbg__wl_view(&b[VROW], (uint64_t)g * T * D, OUT, 1, WL_D(D), NULL),
               NULL, 0, NULL);
    hbg__wl_k3(em, HBG_KERNEL_RMSNORM,
               hbg__wl_view(&b[KLIN], (uint64_t)g * D, IN, 1, WL_D(D), NULL),
               b[KNORM], hbg__wl_new(1, WL_D(D)), &eps, 1, &kn);
    hbg_tensor a[4] = {
        kn, hbg__wl_in(b[COS]), hbg__wl_in(b[SIN]),
        hbg__wl_view(&b[KROW], (uint64_t)g * T * D, OUT, 1, WL_D(D), NULL)};
    hbg__wl_task(em, HBG_KERNEL_ROPE, a, 4, &pos, 1, NULL, 0);
  }
  for (uint32_t h = 0; h < c->heads; h++) {
    uint32_t g = h / group;
    hbg_tensor qn, qr;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WQ], (uint64_t)h * D * H, IN, 2, WL_D(D, H),
                            NULL),
               xn, hbg__wl_view(&b[QLIN], (uint64_t)h * D, OUT, 1, WL_D(D), NULL),
               NULL, 0, NULL);
    hbg__wl_k3(em, HBG_KERNEL_RMSNORM,
               hbg__wl_view(&b[QLIN], (uint64_t)h * D, IN, 1, WL_D(D), NULL),
               b[QNORM], hbg__wl_new(1, WL_D(D)), &eps, 1, &qn);
    hbg_tensor r[4] = {qn, hbg__wl_in(b[COS]), hbg__wl_in(b[SIN]),
                       hbg__wl_new(1, WL_D(D))};
    hbg__wl_task(em, HBG_KERNEL_ROPE, r, 4, &pos, 1, NULL, 0);
    qr = hbg__wl_in(r[3]);
    hbg_tensor a[4] = {
        qr,
        hbg__wl_view(&b[KC], (uint64_t)g * T * D, IN, 2, WL_D(T, D), NULL),
        hbg__wl_view(&b[VC], (uint64_t)g * T * D, IN, 2, WL_D(T, D), NULL),
        hbg__wl_view(&b[AACT], (uint64_t)h * D, OUT, 1, WL_D(D), NULL)};
    hbg__wl_task(em, HBG_KERNEL_ATTN, a, 4, &len, 1, NULL, 0);
  }
  for (uint32_t r0 = 0; r0 < H; r0 += q->r_o) {
    uint32_t n = HBG__MIN(q->r_o, H - r0);
    hbg_tensor o;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WO], (uint64_t)r0 * QD, IN, 2, WL_D(n, QD), NULL),
               b[AACT], hbg__wl_new(1, WL_D(n)), NULL, 0, &o);
    hbg__wl_k3(em, HBG_KERNEL_ADD,
               hbg__wl_view(&b[XIN], r0, IN, 1, WL_D(n), NULL), o,
               hbg__wl_view(&b[HMID], r0, OUT, 1, WL_D(n), NULL), NULL, 0, NULL);
  }

  hbg_tensor hn;
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[HMID], b[FNORM], hbg__wl_new(1, WL_D(H)),
             &eps, 1, &hn);
  for (uint32_t r0 = 0; r0 < F; r0 += q->r_f) {
    uint32_t n = HBG__MIN(q->r_f, F - r0);
    hbg_tensor g, u;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WG], (uint64_t)r0 * H, IN, 2, WL_D(n, H), NULL),
               hn, hbg__wl_new(1, WL_D(n)), NULL, 0, &g);
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WU], (uint64_t)r0 * H, IN, 2, WL_D(n, H), NULL),
               hn, hbg__wl_new(1, WL_D(n)), NULL, 0, &u);
    hbg__wl_k3(em, HBG_KERNEL_SILU_MUL, g, u,
               hbg__wl_view(&b[FACT], r0, OUT, 1, WL_D(n), NULL), NULL, 0,
               NULL);
  }
  for (uint32_t r0 = 0; r0 < H; r0 += q->r_d) {
    uint32_t n = HBG__MIN(q->r_d, H - r0);
    hbg_tensor d;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WD], (uint64_t)r0 * F, IN, 2, WL_D(n, F), NULL),
               b[FACT], hbg__wl_new(1, WL_D(n)), NULL, 0, &d);
    hbg__wl_k3(em, HBG_KERNEL_ADD,
               hbg__wl_view(&b[HMID], r0, IN, 1, WL_D(n), NULL), d,
               hbg__wl_view(&b[XOUT], r0, OUT, 1, WL_D(n), NULL), NULL, 0,
               NULL);
  }
}

static uint32_t token(const hbg_workload *w, uint32_t st) {
  const q3 *q = w->m;
  return (uint32_t)(hbg__wl_mix(w->seed ^ st) % q->c.vocab);
}

static void step(hbg_workload *w, hbg__wl_em *em, uint32_t st) {
  const q3 *q = w->m;
  const hbg__hf_qwen3 *c = &q->c;
  const uint32_t IN = HBG_ACCESS_IN, OUT = HBG_ACCESS_OUT,
                 IO = HBG_ACCESS_INOUT;
  const uint32_t H = c->hidden, D = c->head_dim, T = q->T, NKV = c->kv_heads,
                 V = c->vocab;
  const uint32_t pos = st % T, len = HBG__MIN(st + 1, T);
  const uint64_t es = q->es, L = w->layers;
  uint64_t bs[2] = {pos, len};

  hbg_tensor a[3];
  a[0] = hbg__wl_tb(w, WL_BUF_G, q->g_emb + (uint64_t)token(w, st) * H * es,
                    q->wdt, IN, 1, WL_D(H), NULL);
  a[1] = hbg__wl_t(w, WL_BUF_ACT, q->a_resid, OUT, 1, WL_D(H));
  hbg_task_id prev = hbg__wl_task(em, HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);

  for (uint32_t l = 0; l < L && !em->rc; l++) {
    const uint64_t wb = l * q->l_bytes;
    const uint64_t ab = q->a_layers + (uint64_t)l * q->a_layer;
    const uint64_t kc = (uint64_t)l * NKV * T * D,
                   vc = (L + l) * NKV * T * D;
    hbg_tensor bt[NB];
#define WT(i, lw, ...)                                                         \
  bt[i] = hbg__wl_tb(w, WL_BUF_W, wb + q->lo[lw], q->wdt, IN, WL_ND(__VA_ARGS__), \
                     WL_D(__VA_ARGS__), NULL)
    bt[XIN] = hbg__wl_t(w, WL_BUF_ACT, q->a_resid + l * H, IN, 1, WL_D(H));
    bt[XOUT] =
        hbg__wl_t(w, WL_BUF_ACT, q->a_resid + (l + 1) * H, OUT, 1, WL_D(H));
    WT(ANORM, L_ANORM, H);
    WT(WQ, L_WQ, q->qd, H);
    WT(WK, L_WK, q->kd, H);
    WT(WV, L_WV, q->kd, H);
    WT(QNORM, L_QNORM, D);
    WT(KNORM, L_KNORM, D);
    WT(WO, L_WO, H, q->qd);
    WT(FNORM, L_FNORM, H);
    WT(WG, L_WG, c->intermediate, H);
    WT(WU, L_WU, c->intermediate, H);
    WT(WD, L_WD, H, c->intermediate);
#undef WT
    bt[COS] = hbg__wl_t(w, WL_BUF_G, q->g_cos, IN, 2, WL_D(T, D / 2));
    bt[SIN] = hbg__wl_t(w, WL_BUF_G, q->g_sin, IN, 2, WL_D(T, D / 2));
    bt[KROW] = hbg__wl_tb(w, WL_BUF_KV, (kc + (uint64_t)pos * D) * 4,
                          HBG_DTYPE_F32, OUT, 2, WL_D(NKV, D), WL_D(T * D, 1));
    bt[VROW] = hbg__wl_tb(w, WL_BUF_KV, (vc + (uint64_t)pos * D) * 4,
                          HBG_DTYPE_F32, OUT, 2, WL_D(NKV, D), WL_D(T * D, 1));
    bt[KC] = hbg__wl_t(w, WL_BUF_KV, kc, IN, 3, WL_D(NKV, T, D));
    bt[VC] = hbg__wl_t(w, WL_BUF_KV, vc, IN, 3, WL_D(NKV, T, D));
    bt[QLIN] = hbg__wl_t(w, WL_BUF_ACT, ab + a_off(q, A_QLIN), IO, 1,
                         WL_D(q->qd));
    bt[KLIN] = hbg__wl_t(w, WL_BUF_ACT, ab + a_off(q, A_KLIN), IO, 1,
                         WL_D(q->kd));
    bt[AACT] = hbg__wl_t(w, WL_BUF_ACT, ab + a_off(q, A_AACT), IO, 1,
                         WL_D(q->qd));
    bt[HMID] = hbg__wl_t(w, WL_BUF_ACT, ab + a_off(q, A_HMID), IO, 1, WL_D(H));
    bt[FACT] = hbg__wl_t(w, WL_BUF_ACT, ab + a_off(q, A_FACT), IO, 1,
                         WL_D(c->intermediate));
    prev = hbg__wl_graph(em, q->key, bt, NB, bs, 2, &prev, 1, body, q);
  }

  /* the head: final norm, the LM head in row tiles, softmax */
  hbg_scalar eps = hbg__wl_static_f32(c->eps);
  a[0] = hbg__wl_t(w, WL_BUF_ACT, q->a_resid + L * H, IN, 1, WL_D(H));
  a[1] = hbg__wl_tb(w, WL_BUF_G, q->g_fnorm, q->wdt, IN, 1, WL_D(H), NULL);
  a[2] = hbg__wl_t(w, WL_BUF_ACT, q->a_xf, OUT, 1, WL_D(H));
  hbg_task_id norm = hbg__wl_task(em, HBG_KERNEL_RMSNORM, a, 3, &eps, 1, &prev, 1);
  hbg_task_id tiles[HEAD_TILES + 1];
  uint32_t nt = 0;
  for (uint32_t r0 = 0; r0 < V && nt < HBG__ARRAY_LEN(tiles); r0 += q->r_lm) {
    uint32_t n = HBG__MIN(q->r_lm, V - r0);
    a[0] = hbg__wl_tb(w, WL_BUF_G, q->g_lm + (uint64_t)r0 * H * es, q->wdt, IN,
                      2, WL_D(n, H), NULL);
    a[1] = hbg__wl_t(w, WL_BUF_ACT, q->a_xf, IN, 1, WL_D(H));
    a[2] = hbg__wl_t(w, WL_BUF_ACT, q->a_logits + r0, OUT, 1, WL_D(n));
    tiles[nt++] = hbg__wl_task(em, HBG_KERNEL_GEMV, a, 3, NULL, 0, &norm, 1);
  }
  a[0] = hbg__wl_t(w, WL_BUF_ACT, q->a_logits, IN, 1, WL_D(V));
  a[1] = hbg__wl_t(w, WL_BUF_ACT, q->a_probs, OUT, 1, WL_D(V));
  hbg__wl_task(em, HBG_KERNEL_SOFTMAX, a, 2, NULL, 0, tiles, nt);
}

static int hidden(const hbg_workload *w, uint32_t index, uint64_t *off,
                  uint32_t *n) {
  const q3 *q = w->m;
  *off = q->a_resid + (uint64_t)index * q->c.hidden;
  *n = q->c.hidden;
  return 0;
}

#define QWEN3_MODEL(sym, nm, def_layers)                                       \
  const hbg__wl_model sym = {.name = nm,                                       \
                             .default_layers = def_layers,                     \
                             .layout = layout,                                 \
                             .init = init,                                     \
                             .load = load,                                     \
                             .step = step,                                     \
                             .hidden = hidden,                                 \
                             .token = token}

QWEN3_MODEL(hbg__wl_qwen3_06b, "qwen3-0.6b", 28);
QWEN3_MODEL(hbg__wl_qwen3_14b_real, "qwen3-14b-real", 40);
QWEN3_MODEL(hbg__wl_qwen3_hf, "qwen3", 0);
