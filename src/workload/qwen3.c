/*
 * qwen3-14b decode shape: 40 layers, one Definition of 277 nodes replayed
 * per layer, 26 boundary tensors and 2 boundary scalars (position, attention
 * length) per layer. Dims are small (hidden 64); the node count comes from
 * tiling: q/k/v/o projections in 4-row tiles, gate/up/SiLU in 8-row tiles,
 * the down projection in 4-row tiles split three ways along K.
 */
#include <math.h>
#include <stdlib.h>

#include "common/util.h"
#include "workload/wl.h"

#define H 64u
#define NH 4u
#define NKV 2u
#define D 16u
#define QD (NH * D)
#define KD (NKV * D)
#define F 264u
#define T 64u
#define V 256u
#define RQ 4u /* attention projection tile rows */
#define RF 8u /* gate/up tile rows */
#define RD 4u /* down tile rows */
#define KS 3u /* down split-K chunks */
#define FC (F / KS)
#define MAX_SETS 64u
#define KEY 0x7177656e33000001ull /* "qwen3" */

_Static_assert(D % RQ == 0 && QD % RQ == 0 && KD % RQ == 0 && H % RQ == 0,
               "attention tiles");
_Static_assert(F % RF == 0 && H % RD == 0 && F % KS == 0, "ffn tiles");
_Static_assert(NKV == 2, "boundary enumeration has two kv heads");

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
  KROW0,
  KROW1,
  VROW0,
  VROW1, /* a view resolves to the smallest boundary tensor holding it */
  KC,
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

/* per weight set (floats) */
enum {
  W_ANORM = 0,
  W_WQ = W_ANORM + H,
  W_WK = W_WQ + QD * H,
  W_WV = W_WK + KD * H,
  W_QNORM = W_WV + KD * H,
  W_KNORM = W_QNORM + D,
  W_WO = W_KNORM + D,
  W_FNORM = W_WO + H * QD,
  W_WG = W_FNORM + H,
  W_WU = W_WG + F * H,
  W_WD = W_WU + F * H,
  W_SET = W_WD + H * F
};

/* globals */
enum {
  G_EMB = 0,
  G_LM = G_EMB + V * H,
  G_FNORM = G_LM + V * H,
  G_COS = G_FNORM + H,
  G_SIN = G_COS + T * D / 2,
  G_SIZE = G_SIN + T * D / 2
};

/* activations: emb, resid[L+1], per layer, then the head */
enum {
  A_QLIN = 0,
  A_KLIN = A_QLIN + QD,
  A_AACT = A_KLIN + KD,
  A_HMID = A_AACT + QD,
  A_FACT = A_HMID + H,
  A_LAYER = A_FACT + F
};

typedef struct qwen {
  uint32_t sets;
  uint64_t a_resid, a_layers, a_xf, a_logits, a_probs;
} qwen;

#define KV_LAYER (NKV * T * D)

static int layout(hbg_workload *w) {
  qwen *q = calloc(1, sizeof *q);
  if (!q)
    return HBG_E_NOMEM;
  uint64_t L = w->layers;
  q->sets = (uint32_t)HBG__MIN(L, (uint64_t)MAX_SETS);
  q->a_resid = H;
  q->a_layers = q->a_resid + (L + 1) * H;
  q->a_xf = q->a_layers + L * A_LAYER;
  q->a_logits = q->a_xf + H;
  q->a_probs = q->a_logits + V;
  w->m = q;
  w->buf[WL_BUF_W].floats = (uint64_t)q->sets * W_SET;
  w->buf[WL_BUF_G].floats = G_SIZE;
  w->buf[WL_BUF_KV].floats = 2 * L * KV_LAYER;
  w->buf[WL_BUF_ACT].floats = q->a_probs + V;
  w->info.max_btensors = NB;
  w->info.max_bscalars = 2;
  w->info.tasks_before = 2;
  w->info.tasks_after = 3;
  return 0;
}

static void init(hbg_workload *w) {
  const qwen *q = w->m;
  float *W = w->buf[WL_BUF_W].host, *G = w->buf[WL_BUF_G].host;
  for (uint32_t s = 0; s < q->sets; s++) {
    float *p = W + (uint64_t)s * W_SET;
    uint64_t sd = w->seed * 1000003u + s * 64u;
    float kh = 1.0f / sqrtf((float)H), kq = 1.0f / sqrtf((float)QD),
          kf = 1.0f / sqrtf((float)F);
    hbg__wl_fill(p + W_ANORM, H, sd + 1, 0.8f, 1.2f);
    hbg__wl_fill(p + W_WQ, QD * H, sd + 2, -kh, kh);
    hbg__wl_fill(p + W_WK, KD * H, sd + 3, -kh, kh);
    hbg__wl_fill(p + W_WV, KD * H, sd + 4, -kh, kh);
    hbg__wl_fill(p + W_QNORM, D, sd + 5, 0.8f, 1.2f);
    hbg__wl_fill(p + W_KNORM, D, sd + 6, 0.8f, 1.2f);
    hbg__wl_fill(p + W_WO, H * QD, sd + 7, -kq, kq);
    hbg__wl_fill(p + W_FNORM, H, sd + 8, 0.8f, 1.2f);
    hbg__wl_fill(p + W_WG, F * H, sd + 9, -kh, kh);
    hbg__wl_fill(p + W_WU, F * H, sd + 10, -kh, kh);
    hbg__wl_fill(p + W_WD, H * F, sd + 11, -kf, kf);
  }
  hbg__wl_fill(G + G_EMB, V * H, w->seed + 101, -1.0f, 1.0f);
  hbg__wl_fill(G + G_LM, V * H, w->seed + 102, -0.125f, 0.125f);
  hbg__wl_fill(G + G_FNORM, H, w->seed + 103, 0.8f, 1.2f);
  for (uint32_t p = 0; p < T; p++)
    for (uint32_t i = 0; i < D / 2; i++) {
      double th = (double)p * pow(10000.0, -2.0 * i / (double)D);
      G[G_COS + p * D / 2 + i] = (float)cos(th);
      G[G_SIN + p * D / 2 + i] = (float)sin(th);
    }
}

static void body(hbg__wl_em *em, const void *cfg) {
  (void)cfg;
  const hbg_tensor *b = em->bt;
  if (!b || em->nbt != NB || em->nbs != 2) {
    em->rc = HBG_E_INVAL;
    return;
  }
  const uint32_t IN = HBG_ACCESS_IN, OUT = HBG_ACCESS_OUT;
  hbg_scalar eps = hbg__wl_static_f32(1e-6f), pos = hbg__wl_bscalar(0),
             len = hbg__wl_bscalar(1);
  hbg_tensor xn, qn[NH], kn[NKV], qr[NH], o[H / RQ];

  /* attention */
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[XIN], b[ANORM], hbg__wl_new(1, WL_D(H)),
             &eps, 1, &xn);
  for (uint32_t t = 0; t < QD / RQ; t++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WQ], t * RQ * H, IN, 2, WL_D(RQ, H), NULL), xn,
               hbg__wl_view(&b[QLIN], t * RQ, OUT, 1, WL_D(RQ), NULL), NULL, 0,
               NULL);
  for (uint32_t t = 0; t < KD / RQ; t++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WK], t * RQ * H, IN, 2, WL_D(RQ, H), NULL), xn,
               hbg__wl_view(&b[KLIN], t * RQ, OUT, 1, WL_D(RQ), NULL), NULL, 0,
               NULL);
  for (uint32_t t = 0; t < KD / RQ; t++) {
    uint32_t row = t * RQ;
    hbg__wl_k3(
        em, HBG_KERNEL_GEMV,
        hbg__wl_view(&b[WV], row * H, IN, 2, WL_D(RQ, H), NULL), xn,
        hbg__wl_view(&b[VROW0 + row / D], row % D, OUT, 1, WL_D(RQ), NULL),
        NULL, 0, NULL);
  }
  for (uint32_t h = 0; h < NH; h++)
    hbg__wl_k3(em, HBG_KERNEL_RMSNORM,
               hbg__wl_view(&b[QLIN], h * D, IN, 1, WL_D(D), NULL), b[QNORM],
               hbg__wl_new(1, WL_D(D)), &eps, 1, &qn[h]);
  for (uint32_t g = 0; g < NKV; g++)
    hbg__wl_k3(em, HBG_KERNEL_RMSNORM,
               hbg__wl_view(&b[KLIN], g * D, IN, 1, WL_D(D), NULL), b[KNORM],
               hbg__wl_new(1, WL_D(D)), &eps, 1, &kn[g]);
  for (uint32_t h = 0; h < NH; h++) {
    hbg_tensor a[4] = {qn[h], hbg__wl_in(b[COS]), hbg__wl_in(b[SIN]),
                       hbg__wl_new(1, WL_D(D))};
    hbg__wl_task(em, HBG_KERNEL_ROPE, a, 4, &pos, 1, NULL, 0);
    qr[h] = hbg__wl_in(a[3]);
  }
  for (uint32_t g = 0; g < NKV; g++) {
    hbg_tensor a[4] = {kn[g], hbg__wl_in(b[COS]), hbg__wl_in(b[SIN]),
                       b[KROW0 + g]};
    a[3].mode = (uint8_t)OUT;
    hbg__wl_task(em, HBG_KERNEL_ROPE, a, 4, &pos, 1, NULL, 0);
  }
  for (uint32_t h = 0; h < NH; h++) {
    uint32_t g = h / (NH / NKV);
    hbg_tensor a[4] = {qr[h],
                       hbg__wl_view(&b[KC], g * T * D, IN, 2, WL_D(T, D), NULL),
                       hbg__wl_view(&b[VC], g * T * D, IN, 2, WL_D(T, D), NULL),
                       hbg__wl_view(&b[AACT], h * D, OUT, 1, WL_D(D), NULL)};
    hbg__wl_task(em, HBG_KERNEL_ATTN, a, 4, &len, 1, NULL, 0);
  }
  for (uint32_t t = 0; t < H / RQ; t++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WO], t * RQ * QD, IN, 2, WL_D(RQ, QD), NULL),
               b[AACT], hbg__wl_new(1, WL_D(RQ)), NULL, 0, &o[t]);
  for (uint32_t t = 0; t < H / RQ; t++)
    hbg__wl_k3(em, HBG_KERNEL_ADD,
               hbg__wl_view(&b[XIN], t * RQ, IN, 1, WL_D(RQ), NULL), o[t],
               hbg__wl_view(&b[HMID], t * RQ, OUT, 1, WL_D(RQ), NULL), NULL, 0,
               NULL);

  /* feed-forward */
  hbg_tensor hn;
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[HMID], b[FNORM], hbg__wl_new(1, WL_D(H)),
             &eps, 1, &hn);
  for (uint32_t t = 0; t < F / RF; t++) {
    hbg_tensor g, u;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WG], t * RF * H, IN, 2, WL_D(RF, H), NULL), hn,
               hbg__wl_new(1, WL_D(RF)), NULL, 0, &g);
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[WU], t * RF * H, IN, 2, WL_D(RF, H), NULL), hn,
               hbg__wl_new(1, WL_D(RF)), NULL, 0, &u);
    hbg__wl_k3(em, HBG_KERNEL_SILU_MUL, g, u,
               hbg__wl_view(&b[FACT], t * RF, OUT, 1, WL_D(RF), NULL), NULL, 0,
               NULL);
  }
  for (uint32_t t = 0; t < H / RD; t++) {
    hbg_tensor p[KS], s;
    for (uint32_t c = 0; c < KS; c++)
      hbg__wl_k3(em, HBG_KERNEL_GEMV,
                 hbg__wl_view(&b[WD], t * RD * F + c * FC, IN, 2, WL_D(RD, FC),
                              WL_D(F, 1)),
                 hbg__wl_view(&b[FACT], c * FC, IN, 1, WL_D(FC), NULL),
                 hbg__wl_new(1, WL_D(RD)), NULL, 0, &p[c]);
    s = p[0];
    for (uint32_t c = 1; c < KS; c++)
      hbg__wl_k3(em, HBG_KERNEL_ADD, s, p[c], hbg__wl_new(1, WL_D(RD)), NULL, 0,
                 &s);
    hbg__wl_k3(em, HBG_KERNEL_ADD,
               hbg__wl_view(&b[HMID], t * RD, IN, 1, WL_D(RD), NULL), s,
               hbg__wl_view(&b[XOUT], t * RD, OUT, 1, WL_D(RD), NULL), NULL, 0,
               NULL);
  }
}

static void step(hbg_workload *w, hbg__wl_em *em, uint32_t st) {
  const qwen *q = w->m;
  const uint32_t IN = HBG_ACCESS_IN, OUT = HBG_ACCESS_OUT,
                 IO = HBG_ACCESS_INOUT;
  const uint32_t pos = st % T, len = HBG__MIN(st + 1, T);
  const uint32_t tok = (uint32_t)(hbg__wl_mix(w->seed ^ st) % V);
  uint64_t bs[2] = {pos, len};

  hbg_tensor a[3];
  a[0] = hbg__wl_t(w, WL_BUF_G, G_EMB + (uint64_t)tok * H, IN, 1, WL_D(H));
  a[1] = hbg__wl_t(w, WL_BUF_ACT, 0, OUT, 1, WL_D(H));
  hbg_task_id prev = hbg__wl_task(em, HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
  a[0] = hbg__wl_in(a[1]);
  a[1] = hbg__wl_t(w, WL_BUF_ACT, q->a_resid, OUT, 1, WL_D(H));
  hbg_scalar sc = hbg__wl_static_f32(0.5f);
  prev = hbg__wl_task(em, HBG_KERNEL_SCALE, a, 2, &sc, 1, &prev, 1);

  for (uint32_t l = 0; l < w->layers && !em->rc; l++) {
    uint64_t wb = (uint64_t)(l % q->sets) * W_SET;
    uint64_t ab = q->a_layers + (uint64_t)l * A_LAYER;
    uint64_t kc = (uint64_t)l * KV_LAYER,
             vc = (uint64_t)(w->layers + l) * KV_LAYER;
    hbg_tensor bt[NB];
    bt[XIN] =
        hbg__wl_t(w, WL_BUF_ACT, q->a_resid + (uint64_t)l * H, IN, 1, WL_D(H));
    bt[XOUT] = hbg__wl_t(w, WL_BUF_ACT, q->a_resid + (uint64_t)(l + 1) * H, OUT,
                         1, WL_D(H));
    bt[ANORM] = hbg__wl_t(w, WL_BUF_W, wb + W_ANORM, IN, 1, WL_D(H));
    bt[WQ] = hbg__wl_t(w, WL_BUF_W, wb + W_WQ, IN, 2, WL_D(QD, H));
    bt[WK] = hbg__wl_t(w, WL_BUF_W, wb + W_WK, IN, 2, WL_D(KD, H));
    bt[WV] = hbg__wl_t(w, WL_BUF_W, wb + W_WV, IN, 2, WL_D(KD, H));
    bt[QNORM] = hbg__wl_t(w, WL_BUF_W, wb + W_QNORM, IN, 1, WL_D(D));
    bt[KNORM] = hbg__wl_t(w, WL_BUF_W, wb + W_KNORM, IN, 1, WL_D(D));
    bt[COS] = hbg__wl_t(w, WL_BUF_G, G_COS, IN, 2, WL_D(T, D / 2));
    bt[SIN] = hbg__wl_t(w, WL_BUF_G, G_SIN, IN, 2, WL_D(T, D / 2));
    for (uint32_t g = 0; g < NKV; g++) {
      bt[KROW0 + g] = hbg__wl_t(w, WL_BUF_KV, kc + ((uint64_t)g * T + pos) * D,
                                OUT, 1, WL_D(D));
      bt[VROW0 + g] = hbg__wl_t(w, WL_BUF_KV, vc + ((uint64_t)g * T + pos) * D,
                                OUT, 1, WL_D(D));
    }
    bt[KC] = hbg__wl_t(w, WL_BUF_KV, kc, IN, 3, WL_D(NKV, T, D));
    bt[VC] = hbg__wl_t(w, WL_BUF_KV, vc, IN, 3, WL_D(NKV, T, D));
    bt[WO] = hbg__wl_t(w, WL_BUF_W, wb + W_WO, IN, 2, WL_D(H, QD));
    bt[FNORM] = hbg__wl_t(w, WL_BUF_W, wb + W_FNORM, IN, 1, WL_D(H));
    bt[WG] = hbg__wl_t(w, WL_BUF_W, wb + W_WG, IN, 2, WL_D(F, H));
    bt[WU] = hbg__wl_t(w, WL_BUF_W, wb + W_WU, IN, 2, WL_D(F, H));
    bt[WD] = hbg__wl_t(w, WL_BUF_W, wb + W_WD, IN, 2, WL_D(H, F));
    bt[QLIN] = hbg__wl_t(w, WL_BUF_ACT, ab + A_QLIN, IO, 1, WL_D(QD));
    bt[KLIN] = hbg__wl_t(w, WL_BUF_ACT, ab + A_KLIN, IO, 1, WL_D(KD));
    bt[AACT] = hbg__wl_t(w, WL_BUF_ACT, ab + A_AACT, IO, 1, WL_D(QD));
    bt[HMID] = hbg__wl_t(w, WL_BUF_ACT, ab + A_HMID, IO, 1, WL_D(H));
    bt[FACT] = hbg__wl_t(w, WL_BUF_ACT, ab + A_FACT, IO, 1, WL_D(F));
    prev = hbg__wl_graph(em, KEY, bt, NB, bs, 2, &prev, 1, body, NULL);
  }

  hbg__wl_head head = {.resid = q->a_resid + (uint64_t)w->layers * H,
                       .xf = q->a_xf,
                       .logits = q->a_logits,
                       .probs = q->a_probs,
                       .fnorm = G_FNORM,
                       .lm = G_LM,
                       .hidden = H,
                       .vocab = V};
  hbg__wl_emit_head(w, em, prev, &head);
}

const hbg__wl_model hbg__wl_qwen3 = {
    .name = "qwen3-14b",
    .default_layers = 40,
    .layout = layout,
    .init = init,
    .step = step,
};
