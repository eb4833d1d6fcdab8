/*
 * dsv4 decode shape: 43 layers, three graph submissions per layer (129 per
 * bind), 7 Definitions of 32 to 50 nodes:
 *   attention   mla (dense layers), mla + output gate (odd MoE layers),
 *               sliding window (even MoE layers)
 *   ffn         dense up, dense down (first 3 layers)
 *   moe         router + shared expert, 8 routed experts
 * Routed experts are picked per (layer, step) on the host and reach the
 * Definition as boundary tensors (their weights, router rows, biases) and
 * boundary scalars (their dequant scales), so MoE layers carry 92 to 99
 * boundary tensors and 30 boundary scalars.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "workload/wl.h"

#define H 64u
#define NH 4u
#define D 16u
#define QD (NH * D)
#define QR 32u
#define KVR 32u
#define T 64u
#define WIN 16u
#define E 16u
#define K 8u
#define FE 16u
#define FS 32u
#define F 128u
#define V 256u
#define NDENSE 3u
#define MAX_SETS 48u
#define KEY(i) (0x6473763400000000ull | (i)) /* "dsv4" */

enum { K_MLA, K_MLA_GATED, K_SWA, K_DUP, K_DDOWN, K_ROUTER, K_EXPERTS };

/* boundary enumerations, one per Definition */
enum {
  M_XIN,
  M_XOUT,
  M_ANORM,
  M_WQA,
  M_QANORM,
  M_WQB,
  M_WKVA,
  M_KVNORM,
  M_WKM,
  M_WVM,
  M_COS,
  M_SIN,
  M_KROW,
  M_VROW,
  M_KC,
  M_VC,
  M_WO,
  M_QA,
  M_KVA,
  M_AACT,
  M_WGATE,
  M_GACT,
  M_NB_GATED,
  M_NB = M_WGATE
};
enum {
  S_XIN,
  S_XOUT,
  S_ANORM,
  S_WQ,
  S_WKS,
  S_WVS,
  S_COS,
  S_SIN,
  S_KROW,
  S_VROW,
  S_KW,
  S_VW,
  S_WO,
  S_QLIN,
  S_AACT,
  S_NB
};
enum { U_X, U_FNORM, U_WG, U_WU, U_FACT, U_NB };
enum { DD_HMID, DD_FACT, DD_WD, DD_XOUT, DD_NB };
enum {
  R_HMID,
  R_FNORM,
  R_HN,
  R_RL,
  R_RLB,
  R_PK,
  R_W13S,
  R_WDS,
  R_SACT,
  R_MOUT,
  R_WR0,
  R_RB0 = R_WR0 + K,
  R_NB = R_RB0 + K
};
enum { X_HN, X_MOUT, X_XOUT, X_E0, X_PER = 6, X_NB = X_E0 + X_PER * K };
enum { XE_W1, XE_W3, XE_W2, XE_A, XE_Y, XE_P };

/* per weight set (floats) */
enum {
  W_ANORM = 0,
  W_WQA = W_ANORM + H,
  W_QANORM = W_WQA + QR * H,
  W_WQB = W_QANORM + QR,
  W_WKVA = W_WQB + QD * QR,
  W_KVNORM = W_WKVA + KVR * H,
  W_WKM = W_KVNORM + KVR,
  W_WVM = W_WKM + D * KVR,
  W_WGATE = W_WVM + D * KVR,
  W_WQ = W_WGATE + QD * H,
  W_WKS = W_WQ + QD * H,
  W_WVS = W_WKS + D * H,
  W_WO = W_WVS + D * H,
  W_FNORM = W_WO + H * QD,
  W_WG = W_FNORM + H,
  W_WU = W_WG + F * H,
  W_WD = W_WU + F * H,
  W_WR = W_WD + H * F,
  W_RBIAS = W_WR + E * H,
  W_W13S = W_RBIAS + E,
  W_WDS = W_W13S + 2 * FS * H,
  W_W1 = W_WDS + H * FS,
  W_W3 = W_W1 + E * FE * H,
  W_W2 = W_W3 + E * FE * H,
  W_SET = W_W2 + E * H * FE
};

enum {
  G_EMB = 0,
  G_LM = G_EMB + V * H,
  G_FNORM = G_LM + V * H,
  G_COS = G_FNORM + H,
  G_SIN = G_COS + T * D / 2,
  G_SIZE = G_SIN + T * D / 2
};

/* per-layer caches (floats) */
enum {
  KV_KC = 0,
  KV_VC = KV_KC + T * D,
  KV_KW = KV_VC + T * D,
  KV_VW = KV_KW + WIN * D,
  KV_LAYER = KV_VW + WIN * D
};

/* per-layer activations: only what the layer's blocks write */
typedef struct act {
  uint64_t hmid, qa, kva, aact, gact, qlin, fact;
  uint64_t hn, rl, rlb, pk, sact, mout, a, y;
} act;

typedef struct scales {
  float s1[E], s3[E], s2[E], s13s, sds;
} scales;

typedef struct dsv4 {
  uint32_t sets;
  scales *sc;
  uint64_t a_resid, a_xf, a_logits, a_probs;
  uint64_t *a_layer; /* ACT offset of each layer */
} dsv4;

enum { L_DENSE, L_GATED, L_SWA };

static int ltype(uint32_t l) {
  return l < NDENSE ? L_DENSE : (l % 2 ? L_GATED : L_SWA);
}

static uint64_t act_layout(int type, uint64_t base, act *a) {
  uint64_t p = base;
#define TAKE(field, n)                                                         \
  do {                                                                         \
    a->field = p;                                                              \
    p += (n);                                                                  \
  } while (0)
  memset(a, 0, sizeof *a);
  TAKE(hmid, H);
  if (type == L_SWA) {
    TAKE(qlin, QD);
  } else {
    TAKE(qa, QR);
    TAKE(kva, KVR);
  }
  TAKE(aact, QD);
  if (type == L_GATED)
    TAKE(gact, QD);
  if (type == L_DENSE) {
    TAKE(fact, F);
  } else {
    TAKE(hn, H);
    TAKE(rl, K);
    TAKE(rlb, K);
    TAKE(pk, K);
    TAKE(sact, FS);
    TAKE(mout, H);
    TAKE(a, K * FE);
    TAKE(y, K * H);
  }
#undef TAKE
  return p;
}

static void dsv4_free(void *p) {
  dsv4 *m = p;
  free(m->sc);
  free(m->a_layer);
}

static int layout(hbg_workload *w) {
  dsv4 *m = calloc(1, sizeof *m);
  if (!m)
    return HBG_E_NOMEM;
  w->m = m;
  uint64_t L = w->layers;
  m->sets = (uint32_t)HBG__MIN(L, (uint64_t)MAX_SETS);
  m->sc = calloc(m->sets, sizeof *m->sc);
  m->a_layer = calloc(L, sizeof *m->a_layer);
  if (!m->sc || !m->a_layer)
    return HBG_E_NOMEM;
  m->a_resid = H;
  uint64_t p = m->a_resid + (L + 1) * H;
  for (uint32_t l = 0; l < L; l++) {
    act a;
    m->a_layer[l] = p;
    p = act_layout(ltype(l), p, &a);
  }
  m->a_xf = p;
  m->a_logits = p + H;
  m->a_probs = m->a_logits + V;
  w->buf[WL_BUF_W].floats = (uint64_t)m->sets * W_SET;
  w->buf[WL_BUF_G].floats = G_SIZE;
  w->buf[WL_BUF_KV].floats = L * KV_LAYER;
  w->buf[WL_BUF_ACT].floats = m->a_probs + V;
  uint32_t bt = M_NB + U_NB + DD_NB, bs = 3;
  if (L > NDENSE) { /* layer 3 is a gated MoE layer */
    bt = M_NB_GATED + R_NB + X_NB;
    bs = 3 + 2 + 3 * K + 1;
  }
  w->info.max_btensors = bt;
  w->info.max_bscalars = bs;
  w->info.tasks_before = 2;
  w->info.tasks_after = 3;
  return 0;
}

static void init(hbg_workload *w) {
  dsv4 *m = w->m;
  float *Wt = w->buf[WL_BUF_W].host, *G = w->buf[WL_BUF_G].host;
  static const struct {
    uint32_t off, n, fan;
    int norm;
  } fields[] = {
      {W_ANORM, H, 0, 1},       {W_WQA, QR * H, H, 0},
      {W_QANORM, QR, 0, 1},     {W_WQB, QD * QR, QR, 0},
      {W_WKVA, KVR * H, H, 0},  {W_KVNORM, KVR, 0, 1},
      {W_WKM, D * KVR, KVR, 0}, {W_WVM, D * KVR, KVR, 0},
      {W_WGATE, QD * H, H, 0},  {W_WQ, QD * H, H, 0},
      {W_WKS, D * H, H, 0},     {W_WVS, D * H, H, 0},
      {W_WO, H * QD, QD, 0},    {W_FNORM, H, 0, 1},
      {W_WG, F * H, H, 0},      {W_WU, F * H, H, 0},
      {W_WD, H * F, F, 0},      {W_WR, E * H, H, 0},
      {W_RBIAS, E, 4, 0},       {W_W13S, 2 * FS * H, H, 0},
      {W_WDS, H * FS, FS, 0},   {W_W1, E * FE * H, H, 0},
      {W_W3, E * FE * H, H, 0}, {W_W2, E * H * FE, FE, 0},
  };
  for (uint32_t s = 0; s < m->sets; s++) {
    float *p = Wt + (uint64_t)s * W_SET;
    uint64_t sd = w->seed * 1000033u + s * 64u;
    for (size_t i = 0; i < HBG__ARRAY_LEN(fields); i++) {
      if (fields[i].norm) {
        hbg__wl_fill(p + fields[i].off, fields[i].n, sd + i, 0.8f, 1.2f);
      } else {
        float k = 1.0f / sqrtf((float)fields[i].fan);
        hbg__wl_fill(p + fields[i].off, fields[i].n, sd + i, -k, k);
      }
    }
    scales *c = &m->sc[s];
    hbg__wl_fill(c->s1, E, sd + 40, 0.5f, 1.5f);
    hbg__wl_fill(c->s3, E, sd + 41, 0.5f, 1.5f);
    hbg__wl_fill(c->s2, E, sd + 42, 0.5f, 1.5f);
    hbg__wl_fill(&c->s13s, 1, sd + 43, 0.5f, 1.5f);
    hbg__wl_fill(&c->sds, 1, sd + 44, 0.5f, 1.5f);
  }
  hbg__wl_fill(G + G_EMB, V * H, w->seed + 201, -1.0f, 1.0f);
  hbg__wl_fill(G + G_LM, V * H, w->seed + 202, -0.125f, 0.125f);
  hbg__wl_fill(G + G_FNORM, H, w->seed + 203, 0.8f, 1.2f);
  for (uint32_t p = 0; p < T; p++)
    for (uint32_t i = 0; i < D / 2; i++) {
      double th = (double)p * pow(10000.0, -2.0 * i / (double)D);
      G[G_COS + p * D / 2 + i] = (float)cos(th);
      G[G_SIN + p * D / 2 + i] = (float)sin(th);
    }
}

/* ---- bodies ---- */

#define IN HBG_ACCESS_IN
#define OUT HBG_ACCESS_OUT

static int body_check(hbg__wl_em *em, uint32_t nbt, uint32_t nbs) {
  if (!em->bt || em->nbt != nbt || em->nbs != nbs) {
    em->rc = HBG_E_INVAL;
    return -1;
  }
  return 0;
}

/* o projection in 8-row tiles, then the residual into XOUT. */
static void out_proj(hbg__wl_em *em, const hbg_tensor *wo, hbg_tensor src,
                     const hbg_tensor *xin, const hbg_tensor *xout) {
  hbg_tensor o[H / 8];
  for (uint32_t t = 0; t < H / 8; t++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(wo, t * 8 * QD, IN, 2, WL_D(8, QD), NULL), src,
               hbg__wl_new(1, WL_D(8)), NULL, 0, &o[t]);
  for (uint32_t t = 0; t < H / 8; t++)
    hbg__wl_k3(em, HBG_KERNEL_ADD,
               hbg__wl_view(xin, t * 8, IN, 1, WL_D(8), NULL), o[t],
               hbg__wl_view(xout, t * 8, OUT, 1, WL_D(8), NULL), NULL, 0, NULL);
}

static void rope(hbg__wl_em *em, hbg_tensor x, const hbg_tensor *b,
                 uint32_t cos_i, hbg_tensor out, hbg_tensor *got) {
  hbg_scalar pos = hbg__wl_bscalar(0);
  hbg_tensor a[4] = {hbg__wl_in(x), hbg__wl_in(b[cos_i]),
                     hbg__wl_in(b[cos_i + 1]), out};
  hbg__wl_task(em, HBG_KERNEL_ROPE, a, 4, &pos, 1, NULL, 0);
  if (got)
    *got = hbg__wl_in(a[3]);
}

static void attn(hbg__wl_em *em, hbg_tensor q, const hbg_tensor *kc,
                 const hbg_tensor *vc, hbg_tensor out) {
  hbg_scalar sc[2] = {hbg__wl_bscalar(1), hbg__wl_bscalar(2)};
  hbg_tensor a[4] = {q, hbg__wl_in(*kc), hbg__wl_in(*vc), out};
  hbg__wl_task(em, HBG_KERNEL_ATTN, a, 4, sc, 2, NULL, 0);
}

static void body_mla(hbg__wl_em *em, const void *cfg) {
  const int gated = cfg != NULL;
  if (body_check(em, gated ? M_NB_GATED : M_NB, 3))
    return;
  const hbg_tensor *b = em->bt;
  hbg_scalar eps = hbg__wl_static_f32(1e-6f);
  hbg_tensor xn, qan, kvn, k, qr[NH];
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[M_XIN], b[M_ANORM],
             hbg__wl_new(1, WL_D(H)), &eps, 1, &xn);
  for (uint32_t t = 0; t < QR / 8; t++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[M_WQA], t * 8 * H, IN, 2, WL_D(8, H), NULL), xn,
               hbg__wl_view(&b[M_QA], t * 8, OUT, 1, WL_D(8), NULL), NULL, 0,
               NULL);
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[M_QA], b[M_QANORM],
             hbg__wl_new(1, WL_D(QR)), &eps, 1, &qan);
  for (uint32_t h = 0; h < NH; h++) {
    hbg_tensor qh;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[M_WQB], h * D * QR, IN, 2, WL_D(D, QR), NULL),
               qan, hbg__wl_new(1, WL_D(D)), NULL, 0, &qh);
    rope(em, qh, b, M_COS, hbg__wl_new(1, WL_D(D)), &qr[h]);
  }
  for (uint32_t t = 0; t < KVR / 8; t++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[M_WKVA], t * 8 * H, IN, 2, WL_D(8, H), NULL), xn,
               hbg__wl_view(&b[M_KVA], t * 8, OUT, 1, WL_D(8), NULL), NULL, 0,
               NULL);
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[M_KVA], b[M_KVNORM],
             hbg__wl_new(1, WL_D(KVR)), &eps, 1, &kvn);
  hbg__wl_k3(em, HBG_KERNEL_GEMV, b[M_WKM], kvn, hbg__wl_new(1, WL_D(D)), NULL,
             0, &k);
  hbg_tensor krow = b[M_KROW], vrow = b[M_VROW];
  krow.mode = vrow.mode = (uint8_t)OUT;
  rope(em, k, b, M_COS, krow, NULL);
  hbg__wl_k3(em, HBG_KERNEL_GEMV, b[M_WVM], kvn, vrow, NULL, 0, NULL);
  for (uint32_t h = 0; h < NH; h++)
    attn(em, qr[h], &b[M_KC], &b[M_VC],
         hbg__wl_view(&b[M_AACT], h * D, OUT, 1, WL_D(D), NULL));
  hbg_tensor src = b[M_AACT];
  if (gated) {
    for (uint32_t h = 0; h < NH; h++) {
      hbg_tensor g;
      hbg__wl_k3(em, HBG_KERNEL_GEMV,
                 hbg__wl_view(&b[M_WGATE], h * D * H, IN, 2, WL_D(D, H), NULL),
                 xn, hbg__wl_new(1, WL_D(D)), NULL, 0, &g);
      hbg__wl_k3(em, HBG_KERNEL_SILU_MUL, g,
                 hbg__wl_view(&b[M_AACT], h * D, IN, 1, WL_D(D), NULL),
                 hbg__wl_view(&b[M_GACT], h * D, OUT, 1, WL_D(D), NULL), NULL,
                 0, NULL);
    }
    src = b[M_GACT];
  }
  out_proj(em, &b[M_WO], hbg__wl_in(src), &b[M_XIN], &b[M_XOUT]);
}

static void body_swa(hbg__wl_em *em, const void *cfg) {
  (void)cfg;
  if (body_check(em, S_NB, 3))
    return;
  const hbg_tensor *b = em->bt;
  hbg_scalar eps = hbg__wl_static_f32(1e-6f);
  hbg_tensor xn, k, qr[NH];
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[S_XIN], b[S_ANORM],
             hbg__wl_new(1, WL_D(H)), &eps, 1, &xn);
  for (uint32_t t = 0; t < QD / 8; t++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[S_WQ], t * 8 * H, IN, 2, WL_D(8, H), NULL), xn,
               hbg__wl_view(&b[S_QLIN], t * 8, OUT, 1, WL_D(8), NULL), NULL, 0,
               NULL);
  for (uint32_t h = 0; h < NH; h++)
    rope(em, hbg__wl_view(&b[S_QLIN], h * D, IN, 1, WL_D(D), NULL), b, S_COS,
         hbg__wl_new(1, WL_D(D)), &qr[h]);
  hbg__wl_k3(em, HBG_KERNEL_GEMV, b[S_WKS], xn, hbg__wl_new(1, WL_D(D)), NULL,
             0, &k);
  hbg_tensor krow = b[S_KROW], vrow = b[S_VROW];
  krow.mode = vrow.mode = (uint8_t)OUT;
  rope(em, k, b, S_COS, krow, NULL);
  hbg__wl_k3(em, HBG_KERNEL_GEMV, b[S_WVS], xn, vrow, NULL, 0, NULL);
  for (uint32_t h = 0; h < NH; h++)
    attn(em, qr[h], &b[S_KW], &b[S_VW],
         hbg__wl_view(&b[S_AACT], h * D, OUT, 1, WL_D(D), NULL));
  out_proj(em, &b[S_WO], hbg__wl_in(b[S_AACT]), &b[S_XIN], &b[S_XOUT]);
}

static void body_dense_up(hbg__wl_em *em, const void *cfg) {
  (void)cfg;
  if (body_check(em, U_NB, 0))
    return;
  const hbg_tensor *b = em->bt;
  hbg_scalar eps = hbg__wl_static_f32(1e-6f);
  hbg_tensor hn;
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[U_X], b[U_FNORM],
             hbg__wl_new(1, WL_D(H)), &eps, 1, &hn);
  for (uint32_t t = 0; t < F / 8; t++) {
    hbg_tensor g, u;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[U_WG], t * 8 * H, IN, 2, WL_D(8, H), NULL), hn,
               hbg__wl_new(1, WL_D(8)), NULL, 0, &g);
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[U_WU], t * 8 * H, IN, 2, WL_D(8, H), NULL), hn,
               hbg__wl_new(1, WL_D(8)), NULL, 0, &u);
    hbg__wl_k3(em, HBG_KERNEL_SILU_MUL, g, u,
               hbg__wl_view(&b[U_FACT], t * 8, OUT, 1, WL_D(8), NULL), NULL, 0,
               NULL);
  }
}

static void body_dense_down(hbg__wl_em *em, const void *cfg) {
  (void)cfg;
  if (body_check(em, DD_NB, 0))
    return;
  const hbg_tensor *b = em->bt;
  for (uint32_t t = 0; t < H / 4; t++) {
    hbg_tensor d;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[DD_WD], t * 4 * F, IN, 2, WL_D(4, F), NULL),
               b[DD_FACT], hbg__wl_new(1, WL_D(4)), NULL, 0, &d);
    hbg__wl_k3(em, HBG_KERNEL_ADD,
               hbg__wl_view(&b[DD_HMID], t * 4, IN, 1, WL_D(4), NULL), d,
               hbg__wl_view(&b[DD_XOUT], t * 4, OUT, 1, WL_D(4), NULL), NULL, 0,
               NULL);
  }
}

static void body_router(hbg__wl_em *em, const void *cfg) {
  (void)cfg;
  if (body_check(em, R_NB, 2))
    return;
  const hbg_tensor *b = em->bt;
  hbg_scalar eps = hbg__wl_static_f32(1e-6f), s13 = hbg__wl_bscalar(0),
             sd = hbg__wl_bscalar(1);
  hbg_tensor hn = b[R_HN];
  hn.mode = (uint8_t)OUT;
  hbg__wl_k3(em, HBG_KERNEL_RMSNORM, b[R_HMID], b[R_FNORM], hn, &eps, 1, &hn);
  for (uint32_t e = 0; e < K; e++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV, b[R_WR0 + e], hn,
               hbg__wl_view(&b[R_RL], e, OUT, 1, WL_D(1), NULL), NULL, 0, NULL);
  for (uint32_t e = 0; e < K; e++)
    hbg__wl_k3(em, HBG_KERNEL_ADD,
               hbg__wl_view(&b[R_RL], e, IN, 1, WL_D(1), NULL), b[R_RB0 + e],
               hbg__wl_view(&b[R_RLB], e, OUT, 1, WL_D(1), NULL), NULL, 0,
               NULL);
  hbg_tensor pk = b[R_PK];
  pk.mode = (uint8_t)OUT;
  hbg__wl_k2(em, HBG_KERNEL_SOFTMAX, b[R_RLB], pk, NULL, 0, NULL);
  for (uint32_t t = 0; t < FS / 8; t++) {
    hbg_tensor gu;
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[R_W13S], t * 16 * H, IN, 2, WL_D(16, H), NULL),
               hn, hbg__wl_new(1, WL_D(16)), &s13, 1, &gu);
    hbg__wl_k3(
        em, HBG_KERNEL_SILU_MUL, hbg__wl_view(&gu, 0, IN, 1, WL_D(8), NULL),
        hbg__wl_view(&gu, 8, IN, 1, WL_D(8), NULL),
        hbg__wl_view(&b[R_SACT], t * 8, OUT, 1, WL_D(8), NULL), NULL, 0, NULL);
  }
  hbg_tensor o[H / 8];
  for (uint32_t t = 0; t < H / 8; t++)
    hbg__wl_k3(em, HBG_KERNEL_GEMV,
               hbg__wl_view(&b[R_WDS], t * 8 * FS, IN, 2, WL_D(8, FS), NULL),
               b[R_SACT], hbg__wl_new(1, WL_D(8)), &sd, 1, &o[t]);
  for (uint32_t t = 0; t < H / 8; t++)
    hbg__wl_k3(em, HBG_KERNEL_ADD,
               hbg__wl_view(&b[R_HMID], t * 8, IN, 1, WL_D(8), NULL), o[t],
               hbg__wl_view(&b[R_MOUT], t * 8, OUT, 1, WL_D(8), NULL), NULL, 0,
               NULL);
}

static void body_experts(hbg__wl_em *em, const void *cfg) {
  (void)cfg;
  if (body_check(em, X_NB, 3 * K + 1))
    return;
  const hbg_tensor *b = em->bt;
  hbg_tensor yw[K], sum;
  for (uint32_t e = 0; e < K; e++) {
    const hbg_tensor *x = &b[X_E0 + e * X_PER];
    hbg_scalar s1 = hbg__wl_bscalar(3 * e), s3 = hbg__wl_bscalar(3 * e + 1),
               s2 = hbg__wl_bscalar(3 * e + 2);
    hbg_tensor g, u, a = x[XE_A], y = x[XE_Y];
    a.mode = y.mode = (uint8_t)OUT;
    hbg__wl_k3(em, HBG_KERNEL_GEMV, x[XE_W1], b[X_HN], hbg__wl_new(1, WL_D(FE)),
               &s1, 1, &g);
    hbg__wl_k3(em, HBG_KERNEL_GEMV, x[XE_W3], b[X_HN], hbg__wl_new(1, WL_D(FE)),
               &s3, 1, &u);
    hbg__wl_k3(em, HBG_KERNEL_SILU_MUL, g, u, a, NULL, 0, &a);
    hbg__wl_k3(em, HBG_KERNEL_GEMV, x[XE_W2], a, y, &s2, 1, &y);
    hbg__wl_k3(em, HBG_KERNEL_MUL, y,
               hbg__wl_view(&x[XE_P], 0, IN, 1, WL_D(H), WL_D(0)),
               hbg__wl_new(1, WL_D(H)), NULL, 0, &yw[e]);
  }
  sum = yw[0];
  for (uint32_t e = 1; e < K; e++)
    hbg__wl_k3(em, HBG_KERNEL_ADD, sum, yw[e], hbg__wl_new(1, WL_D(H)), NULL, 0,
               &sum);
  hbg_scalar rs = hbg__wl_bscalar(3 * K);
  hbg__wl_k2(em, HBG_KERNEL_SCALE, sum, hbg__wl_new(1, WL_D(H)), &rs, 1, &sum);
  hbg_tensor xo = b[X_XOUT];
  xo.mode = (uint8_t)OUT;
  hbg__wl_k3(em, HBG_KERNEL_ADD, b[X_MOUT], sum, xo, NULL, 0, NULL);
}

/* ---- one step ---- */

static void pick_experts(uint64_t seed, uint32_t l, uint32_t step,
                         uint32_t *out) {
  uint32_t perm[E];
  for (uint32_t i = 0; i < E; i++)
    perm[i] = i;
  uint64_t s = hbg__wl_mix(seed ^ ((uint64_t)l << 32) ^ step);
  for (uint32_t i = 0; i < K; i++) {
    s = hbg__wl_mix(s);
    uint32_t j = i + (uint32_t)(s % (E - i));
    uint32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
    out[i] = perm[i];
  }
}

static void step(hbg_workload *w, hbg__wl_em *em, uint32_t st) {
  const dsv4 *m = w->m;
  const uint32_t IO = HBG_ACCESS_INOUT;
  const uint32_t pos = st % T, len = HBG__MIN(st + 1, T);
  const uint32_t wpos = st % WIN, wlen = HBG__MIN(st + 1, WIN);
  const uint32_t tok = (uint32_t)(hbg__wl_mix(w->seed ^ 0xd5 ^ st) % V);
  const uint64_t scale = hbg__wl_f32(1.0f / sqrtf((float)D));

  hbg_tensor a[3];
  a[0] = hbg__wl_t(w, WL_BUF_G, G_EMB + (uint64_t)tok * H, IN, 1, WL_D(H));
  a[1] = hbg__wl_t(w, WL_BUF_ACT, 0, OUT, 1, WL_D(H));
  hbg_task_id prev = hbg__wl_task(em, HBG_KERNEL_COPY, a, 2, NULL, 0, NULL, 0);
  a[0] = hbg__wl_in(a[1]);
  a[1] = hbg__wl_t(w, WL_BUF_ACT, m->a_resid, OUT, 1, WL_D(H));
  hbg_scalar sc = hbg__wl_static_f32(0.5f);
  prev = hbg__wl_task(em, HBG_KERNEL_SCALE, a, 2, &sc, 1, &prev, 1);

  for (uint32_t l = 0; l < w->layers && !em->rc; l++) {
    const int type = ltype(l);
    const uint32_t set = l % m->sets;
    const uint64_t wb = (uint64_t)set * W_SET, kv = (uint64_t)l * KV_LAYER;
    act ac;
    act_layout(type, m->a_layer[l], &ac);
    hbg_tensor xin =
        hbg__wl_t(w, WL_BUF_ACT, m->a_resid + (uint64_t)l * H, IN, 1, WL_D(H));
    hbg_tensor xout = hbg__wl_t(
        w, WL_BUF_ACT, m->a_resid + (uint64_t)(l + 1) * H, OUT, 1, WL_D(H));
    hbg_tensor hmid = hbg__wl_t(w, WL_BUF_ACT, ac.hmid, IO, 1, WL_D(H));
    hbg_tensor bt[X_NB];

    /* attention */
    if (type == L_SWA) {
      uint64_t bs[3] = {pos, wlen, scale};
      bt[S_XIN] = xin;
      bt[S_XOUT] = hmid;
      bt[S_ANORM] = hbg__wl_t(w, WL_BUF_W, wb + W_ANORM, IN, 1, WL_D(H));
      bt[S_WQ] = hbg__wl_t(w, WL_BUF_W, wb + W_WQ, IN, 2, WL_D(QD, H));
      bt[S_WKS] = hbg__wl_t(w, WL_BUF_W, wb + W_WKS, IN, 2, WL_D(D, H));
      bt[S_WVS] = hbg__wl_t(w, WL_BUF_W, wb + W_WVS, IN, 2, WL_D(D, H));
      bt[S_COS] = hbg__wl_t(w, WL_BUF_G, G_COS, IN, 2, WL_D(T, D / 2));
      bt[S_SIN] = hbg__wl_t(w, WL_BUF_G, G_SIN, IN, 2, WL_D(T, D / 2));
      bt[S_KROW] =
          hbg__wl_t(w, WL_BUF_KV, kv + KV_KW + wpos * D, OUT, 1, WL_D(D));
      bt[S_VROW] =
          hbg__wl_t(w, WL_BUF_KV, kv + KV_VW + wpos * D, OUT, 1, WL_D(D));
      bt[S_KW] = hbg__wl_t(w, WL_BUF_KV, kv + KV_KW, IN, 2, WL_D(WIN, D));
      bt[S_VW] = hbg__wl_t(w, WL_BUF_KV, kv + KV_VW, IN, 2, WL_D(WIN, D));
      bt[S_WO] = hbg__wl_t(w, WL_BUF_W, wb + W_WO, IN, 2, WL_D(H, QD));
      bt[S_QLIN] = hbg__wl_t(w, WL_BUF_ACT, ac.qlin, IO, 1, WL_D(QD));
      bt[S_AACT] = hbg__wl_t(w, WL_BUF_ACT, ac.aact, IO, 1, WL_D(QD));
      prev = hbg__wl_graph(em, KEY(K_SWA), bt, S_NB, bs, 3, &prev, 1, body_swa,
                           NULL);
    } else {
      uint64_t bs[3] = {pos, len, scale};
      int gated = type == L_GATED;
      bt[M_XIN] = xin;
      bt[M_XOUT] = hmid;
      bt[M_ANORM] = hbg__wl_t(w, WL_BUF_W, wb + W_ANORM, IN, 1, WL_D(H));
      bt[M_WQA] = hbg__wl_t(w, WL_BUF_W, wb + W_WQA, IN, 2, WL_D(QR, H));
      bt[M_QANORM] = hbg__wl_t(w, WL_BUF_W, wb + W_QANORM, IN, 1, WL_D(QR));
      bt[M_WQB] = hbg__wl_t(w, WL_BUF_W, wb + W_WQB, IN, 2, WL_D(QD, QR));
      bt[M_WKVA] = hbg__wl_t(w, WL_BUF_W, wb + W_WKVA, IN, 2, WL_D(KVR, H));
      bt[M_KVNORM] = hbg__wl_t(w, WL_BUF_W, wb + W_KVNORM, IN, 1, WL_D(KVR));
      bt[M_WKM] = hbg__wl_t(w, WL_BUF_W, wb + W_WKM, IN, 2, WL_D(D, KVR));
      bt[M_WVM] = hbg__wl_t(w, WL_BUF_W, wb + W_WVM, IN, 2, WL_D(D, KVR));
      bt[M_COS] = hbg__wl_t(w, WL_BUF_G, G_COS, IN, 2, WL_D(T, D / 2));
      bt[M_SIN] = hbg__wl_t(w, WL_BUF_G, G_SIN, IN, 2, WL_D(T, D / 2));
      bt[M_KROW] =
          hbg__wl_t(w, WL_BUF_KV, kv + KV_KC + pos * D, OUT, 1, WL_D(D));
      bt[M_VROW] =
          hbg__wl_t(w, WL_BUF_KV, kv + KV_VC + pos * D, OUT, 1, WL_D(D));
      bt[M_KC] = hbg__wl_t(w, WL_BUF_KV, kv + KV_KC, IN, 2, WL_D(T, D));
      bt[M_VC] = hbg__wl_t(w, WL_BUF_KV, kv + KV_VC, IN, 2, WL_D(T, D));
      bt[M_WO] = hbg__wl_t(w, WL_BUF_W, wb + W_WO, IN, 2, WL_D(H, QD));
      bt[M_QA] = hbg__wl_t(w, WL_BUF_ACT, ac.qa, IO, 1, WL_D(QR));
      bt[M_KVA] = hbg__wl_t(w, WL_BUF_ACT, ac.kva, IO, 1, WL_D(KVR));
      bt[M_AACT] = hbg__wl_t(w, WL_BUF_ACT, ac.aact, IO, 1, WL_D(QD));
      if (gated) {
        bt[M_WGATE] = hbg__wl_t(w, WL_BUF_W, wb + W_WGATE, IN, 2, WL_D(QD, H));
        bt[M_GACT] = hbg__wl_t(w, WL_BUF_ACT, ac.gact, IO, 1, WL_D(QD));
      }
      prev = hbg__wl_graph(em, KEY(gated ? K_MLA_GATED : K_MLA), bt,
                           gated ? M_NB_GATED : M_NB, bs, 3, &prev, 1, body_mla,
                           gated ? (const void *)m : NULL);
    }

    if (type == L_DENSE) {
      hbg_tensor fact = hbg__wl_t(w, WL_BUF_ACT, ac.fact, IO, 1, WL_D(F));
      bt[U_X] = hbg__wl_in(hmid);
      bt[U_FNORM] = hbg__wl_t(w, WL_BUF_W, wb + W_FNORM, IN, 1, WL_D(H));
      bt[U_WG] = hbg__wl_t(w, WL_BUF_W, wb + W_WG, IN, 2, WL_D(F, H));
      bt[U_WU] = hbg__wl_t(w, WL_BUF_W, wb + W_WU, IN, 2, WL_D(F, H));
      bt[U_FACT] = fact;
      prev = hbg__wl_graph(em, KEY(K_DUP), bt, U_NB, NULL, 0, &prev, 1,
                           body_dense_up, NULL);
      bt[DD_HMID] = hbg__wl_in(hmid);
      bt[DD_FACT] = hbg__wl_in(fact);
      bt[DD_WD] = hbg__wl_t(w, WL_BUF_W, wb + W_WD, IN, 2, WL_D(H, F));
      bt[DD_XOUT] = xout;
      prev = hbg__wl_graph(em, KEY(K_DDOWN), bt, DD_NB, NULL, 0, &prev, 1,
                           body_dense_down, NULL);
      continue;
    }

    uint32_t ex[K];
    pick_experts(w->seed, l, st, ex);
    const scales *c = &m->sc[set];
    hbg_tensor hn = hbg__wl_t(w, WL_BUF_ACT, ac.hn, IO, 1, WL_D(H));
    hbg_tensor mout = hbg__wl_t(w, WL_BUF_ACT, ac.mout, IO, 1, WL_D(H));
    uint64_t rbs[2] = {hbg__wl_f32(c->s13s), hbg__wl_f32(c->sds)};
    bt[R_HMID] = hbg__wl_in(hmid);
    bt[R_FNORM] = hbg__wl_t(w, WL_BUF_W, wb + W_FNORM, IN, 1, WL_D(H));
    bt[R_HN] = hn;
    bt[R_RL] = hbg__wl_t(w, WL_BUF_ACT, ac.rl, IO, 1, WL_D(K));
    bt[R_RLB] = hbg__wl_t(w, WL_BUF_ACT, ac.rlb, IO, 1, WL_D(K));
    bt[R_PK] = hbg__wl_t(w, WL_BUF_ACT, ac.pk, IO, 1, WL_D(K));
    bt[R_W13S] = hbg__wl_t(w, WL_BUF_W, wb + W_W13S, IN, 2, WL_D(2 * FS, H));
    bt[R_WDS] = hbg__wl_t(w, WL_BUF_W, wb + W_WDS, IN, 2, WL_D(H, FS));
    bt[R_SACT] = hbg__wl_t(w, WL_BUF_ACT, ac.sact, IO, 1, WL_D(FS));
    bt[R_MOUT] = mout;
    for (uint32_t e = 0; e < K; e++) {
      bt[R_WR0 + e] = hbg__wl_t(w, WL_BUF_W, wb + W_WR + (uint64_t)ex[e] * H,
                                IN, 2, WL_D(1, H));
      bt[R_RB0 + e] =
          hbg__wl_t(w, WL_BUF_W, wb + W_RBIAS + ex[e], IN, 1, WL_D(1));
    }
    prev = hbg__wl_graph(em, KEY(K_ROUTER), bt, R_NB, rbs, 2, &prev, 1,
                         body_router, NULL);

    uint64_t xbs[3 * K + 1];
    bt[X_HN] = hbg__wl_in(hn);
    bt[X_MOUT] = hbg__wl_in(mout);
    bt[X_XOUT] = xout;
    for (uint32_t e = 0; e < K; e++) {
      hbg_tensor *x = &bt[X_E0 + e * X_PER];
      uint64_t i = ex[e];
      x[XE_W1] =
          hbg__wl_t(w, WL_BUF_W, wb + W_W1 + i * FE * H, IN, 2, WL_D(FE, H));
      x[XE_W3] =
          hbg__wl_t(w, WL_BUF_W, wb + W_W3 + i * FE * H, IN, 2, WL_D(FE, H));
      x[XE_W2] =
          hbg__wl_t(w, WL_BUF_W, wb + W_W2 + i * H * FE, IN, 2, WL_D(H, FE));
      x[XE_A] = hbg__wl_t(w, WL_BUF_ACT, ac.a + e * FE, IO, 1, WL_D(FE));
      x[XE_Y] = hbg__wl_t(w, WL_BUF_ACT, ac.y + e * H, IO, 1, WL_D(H));
      x[XE_P] = hbg__wl_t(w, WL_BUF_ACT, ac.pk + e, IN, 1, WL_D(1));
      xbs[3 * e] = hbg__wl_f32(c->s1[i]);
      xbs[3 * e + 1] = hbg__wl_f32(c->s3[i]);
      xbs[3 * e + 2] = hbg__wl_f32(c->s2[i]);
    }
    xbs[3 * K] = hbg__wl_f32(2.5f);
    prev = hbg__wl_graph(em, KEY(K_EXPERTS), bt, X_NB, xbs, 3 * K + 1, &prev, 1,
                         body_experts, NULL);
  }

  hbg__wl_head head = {.resid = m->a_resid + (uint64_t)w->layers * H,
                       .xf = m->a_xf,
                       .logits = m->a_logits,
                       .probs = m->a_probs,
                       .fnorm = G_FNORM,
                       .lm = G_LM,
                       .hidden = H,
                       .vocab = V};
  hbg__wl_emit_head(w, em, prev, &head);
}

const hbg__wl_model hbg__wl_dsv4 = {
    .name = "dsv4",
    .default_layers = 43,
    .layout = layout,
    .init = init,
    .step = step,
    .free = dsv4_free,
};
