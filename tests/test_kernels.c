/* Every built-in kernel against a scalar reference, on contiguous and
 * strided views, and every kind of bad argument. */
#include <math.h>

#include <hbg/hbg.h>

#include "common/util.h"
#include "kernels/kernels.h"
#include "test.h"

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)(rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}
static void fill(float *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    p[i] = frand();
}

static hbg__ktensor mk(void *data, uint32_t ndim, const uint32_t *shape,
                       const uint32_t *strides, uint32_t mode) {
  hbg__ktensor k;
  memset(&k, 0, sizeof k);
  k.data = data;
  k.dtype = HBG_DTYPE_F32;
  k.ndim = ndim;
  k.mode = mode;
  uint32_t s = 1;
  for (uint32_t i = ndim; i-- > 0;) {
    k.shape[i] = shape[i];
    k.strides[i] = strides ? strides[i] : s;
    s *= shape[i];
  }
  return k;
}
#define IN HBG_ACCESS_IN
#define OUT HBG_ACCESS_OUT
#define DIMS(...) ((const uint32_t[]){__VA_ARGS__})

static void same_bits(const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], 4) != 0)
      T_FAIL("element %zu: %.9g vs %.9g", i, (double)a[i], (double)b[i]);
}

/* kernels.h's tree reduction of v[0..n) with stride st: 256 partials
 * over i = p mod 256, then s[p] += s[p + w] for w = 128 .. 1. */
static float tree(const float *v, uint32_t n, uint32_t st, int max) {
  float s[256];
  for (uint32_t p = 0; p < 256; p++) {
    s[p] = max ? -INFINITY : 0.0f;
    for (uint32_t i = p; i < n; i += 256) {
      float x = v[i * st];
      if (!max)
        s[p] += x;
      else if (i == p || x > s[p])
        s[p] = x;
    }
  }
  for (uint32_t w = 128; w >= 1; w /= 2)
    for (uint32_t p = 0; p < w; p++)
      s[p] = max ? (s[p + w] > s[p] ? s[p + w] : s[p]) : s[p] + s[p + w];
  return s[0];
}

static void t_elementwise(void) {
  float a[24], b[24], o[24], r[24];
  fill(a, 24);
  fill(b, 24);
  /* a: [4][6] transposed view as [6][4]; b contiguous [24]; out [6][4] */
  hbg__ktensor t[3] = {mk(a, 2, DIMS(6, 4), DIMS(1, 6), IN),
                       mk(b, 1, DIMS(24), NULL, IN),
                       mk(o, 2, DIMS(6, 4), NULL, OUT)};
  struct {
    uint32_t k;
    int op;
  } ks[] = {{HBG_KERNEL_ADD, 0}, {HBG_KERNEL_MUL, 1}, {HBG_KERNEL_SILU_MUL, 2}};
  for (size_t c = 0; c < HBG__ARRAY_LEN(ks); c++) {
    ASSERT_OK(hbg__kernel_run(ks[c].k, t, 3, NULL, 0));
    for (uint32_t i = 0; i < 6; i++)
      for (uint32_t j = 0; j < 4; j++) {
        float x = a[j * 6 + i], y = b[i * 4 + j];
        r[i * 4 + j] = ks[c].op == 0   ? x + y
                       : ks[c].op == 1 ? x * y
                                       : x / (1.0f + hbg__k_expf(-x)) * y;
      }
    same_bits(o, r, 24);
  }
  /* COPY: column 2 of a [4][6] matrix into a strided [4] (stride 3) */
  float dst[12];
  for (int i = 0; i < 12; i++)
    dst[i] = 99.0f;
  hbg__ktensor c2[2] = {mk(a + 2, 1, DIMS(4), DIMS(6), IN),
                        mk(dst, 1, DIMS(4), DIMS(3), OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_COPY, c2, 2, NULL, 0));
  for (int i = 0; i < 12; i++)
    ASSERT(dst[i] == (i % 3 ? 99.0f : a[(i / 3) * 6 + 2]));
  /* COPY reshapes: [2][3] -> [3][2] keeps row-major order */
  float s6[6] = {1, 2, 3, 4, 5, 6}, d6[6];
  hbg__ktensor c3[2] = {mk(s6, 2, DIMS(2, 3), NULL, IN),
                        mk(d6, 2, DIMS(3, 2), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_COPY, c3, 2, NULL, 0));
  same_bits(d6, s6, 6);
  /* SCALE and FILL on a strided output */
  uint64_t alpha = hbg__kernel_f32(-1.5f);
  hbg__ktensor sc[2] = {mk(a, 1, DIMS(8), DIMS(3), IN),
                        mk(o, 1, DIMS(8), DIMS(3), OUT)};
  for (int i = 0; i < 24; i++)
    o[i] = 7.0f;
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_SCALE, sc, 2, &alpha, 1));
  for (int i = 0; i < 24; i++)
    ASSERT(o[i] == (i % 3 ? 7.0f : a[i] * -1.5f));
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_FILL, &sc[1], 1, &alpha, 1));
  for (int i = 0; i < 24; i++)
    ASSERT(o[i] == (i % 3 ? 7.0f : -1.5f));
  /* broadcast input: a[5] against every element */
  hbg__ktensor bc[3] = {mk(b, 1, DIMS(24), NULL, IN),
                        mk(a + 5, 1, DIMS(24), DIMS(0), IN),
                        mk(r, 1, DIMS(24), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_MUL, bc, 3, NULL, 0));
  for (int i = 0; i < 24; i++)
    ASSERT(r[i] == b[i] * a[5]);
  /* in place */
  hbg__ktensor ip[3] = {mk(o, 1, DIMS(24), NULL, IN),
                        mk(o, 1, DIMS(24), NULL, IN),
                        mk(o, 1, DIMS(24), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_ADD, ip, 3, NULL, 0));
  for (int i = 0; i < 24; i++)
    ASSERT(o[i] == (i % 3 ? 14.0f : -3.0f));
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_NOP, NULL, 0, NULL, 0));
}

static void t_rows(void) {
  /* 3 rows of d = 8 inside rows of 10 floats; out contiguous */
  float in[30], w[16], o[24], r[24];
  fill(in, 30);
  fill(w, 16);
  uint64_t eps = hbg__kernel_f32(1e-5f);
  hbg__ktensor t[3] = {mk(in, 2, DIMS(3, 8), DIMS(10, 1), IN),
                       mk(w, 1, DIMS(8), DIMS(2), IN),
                       mk(o, 2, DIMS(3, 8), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_RMSNORM, t, 3, &eps, 1));
  for (int i = 0; i < 3; i++) {
    float sq[8];
    for (int j = 0; j < 8; j++)
      sq[j] = in[i * 10 + j] * in[i * 10 + j];
    float inv = 1.0f / sqrtf(tree(sq, 8, 1, 0) / 8.0f + 1e-5f);
    for (int j = 0; j < 8; j++)
      r[i * 8 + j] = in[i * 10 + j] * inv * w[j * 2];
  }
  same_bits(o, r, 24);
  double norm = 0;
  for (int j = 0; j < 8; j++)
    norm += (double)(o[j] / w[j * 2]) * (o[j] / w[j * 2]);
  ASSERT(fabs(norm / 8 - 1.0) < 1e-3);

  hbg__ktensor s[2] = {mk(in, 2, DIMS(3, 8), DIMS(10, 1), IN),
                       mk(o, 2, DIMS(3, 8), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_SOFTMAX, s, 2, NULL, 0));
  for (int i = 0; i < 3; i++) {
    float mx = tree(&in[i * 10], 8, 1, 1);
    for (int j = 0; j < 8; j++)
      r[i * 8 + j] = hbg__k_expf(in[i * 10 + j] - mx);
    float sum = tree(&r[i * 8], 8, 1, 0);
    double tot = 0;
    for (int j = 0; j < 8; j++) {
      r[i * 8 + j] *= 1.0f / sum;
      tot += o[i * 8 + j];
    }
    ASSERT(fabs(tot - 1.0) < 1e-5);
  }
  same_bits(o, r, 24);
}

static float dot_lanes(const float *w, uint32_t sw, const float *x, uint32_t sx,
                       uint32_t k) {
  float l[4] = {0, 0, 0, 0};
  uint32_t j = 0;
  for (; j + 4 <= k; j += 4)
    for (int q = 0; q < 4; q++)
      l[q] += w[(j + q) * sw] * x[(j + q) * sx];
  for (; j < k; j++)
    l[0] += w[j * sw] * x[j * sx];
  return (l[0] + l[1]) + (l[2] + l[3]);
}

static void t_gemv(void) {
  enum { N = 5, K = 7 };
  float wt[K * N], x[K * 2], y[N * 3], r[N];
  fill(wt, K * N);
  fill(x, K * 2);
  for (int i = 0; i < N * 3; i++)
    y[i] = 42.0f;
  /* W[n][k] stored transposed (column-major), x stride 2, y stride 3 */
  hbg__ktensor t[3] = {mk(wt, 2, DIMS(N, K), DIMS(1, N), IN),
                       mk(x, 1, DIMS(K), DIMS(2), IN),
                       mk(y, 1, DIMS(N), DIMS(3), OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_GEMV, t, 3, NULL, 0));
  for (int i = 0; i < N; i++)
    r[i] = dot_lanes(&wt[i], N, x, 2, K);
  for (int i = 0; i < N; i++) {
    same_bits(&y[i * 3], &r[i], 1);
    ASSERT(y[i * 3 + 1] == 42.0f && y[i * 3 + 2] == 42.0f);
  }
  /* contiguous, and y given as [1][N] */
  float w2[N * K], y2[N];
  for (int i = 0; i < N; i++)
    for (int j = 0; j < K; j++)
      w2[i * K + j] = wt[j * N + i];
  float xc[K];
  for (int j = 0; j < K; j++)
    xc[j] = x[j * 2];
  hbg__ktensor c[3] = {mk(w2, 2, DIMS(N, K), NULL, IN),
                       mk(xc, 1, DIMS(K), NULL, IN),
                       mk(y2, 2, DIMS(1, N), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_GEMV, c, 3, NULL, 0));
  same_bits(y2, r, N);
  /* alpha */
  uint64_t alpha = hbg__kernel_f32(0.375f);
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_GEMV, c, 3, &alpha, 1));
  for (int i = 0; i < N; i++)
    r[i] *= 0.375f;
  same_bits(y2, r, N);
  uint64_t two[2] = {alpha, alpha};
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_GEMV, c, 3, two, 2), HBG_E_KERNEL);
}

static void t_rope(void) {
  enum { R = 3, D = 8, P = 5 };
  float x[R * D], cs[P * D / 2], sn[P * D / 2], o[R * D], r[R * D];
  fill(x, R * D);
  for (int p = 0; p < P; p++)
    for (int i = 0; i < D / 2; i++) {
      cs[p * D / 2 + i] = cosf((float)p * (float)(i + 1) * 0.3f);
      sn[p * D / 2 + i] = sinf((float)p * (float)(i + 1) * 0.3f);
    }
  hbg__ktensor t[4] = {
      mk(x, 2, DIMS(R, D), NULL, IN), mk(cs, 2, DIMS(P, D / 2), NULL, IN),
      mk(sn, 2, DIMS(P, D / 2), NULL, IN), mk(o, 2, DIMS(R, D), NULL, OUT)};
  uint64_t pos = 3;
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_ROPE, t, 4, &pos, 1));
  for (int row = 0; row < R; row++)
    for (int i = 0; i < D / 2; i++) {
      float x0 = x[row * D + i], x1 = x[row * D + i + D / 2];
      float c = cs[3 * D / 2 + i], s = sn[3 * D / 2 + i];
      r[row * D + i] = x0 * c - x1 * s;
      r[row * D + i + D / 2] = x1 * c + x0 * s;
    }
  same_bits(o, r, R * D);
  /* in place */
  hbg__ktensor ip[4] = {t[0], t[1], t[2], mk(x, 2, DIMS(R, D), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_ROPE, ip, 4, &pos, 1));
  same_bits(x, r, R * D);
  pos = P;
  memcpy(o, r, sizeof o);
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ROPE, t, 4, &pos, 1), HBG_E_KERNEL);
  same_bits(o, r, R * D);
  hbg__ktensor odd[4] = {mk(x, 2, DIMS(3, 7), NULL, IN), t[1], t[2],
                         mk(o, 2, DIMS(3, 7), NULL, OUT)};
  pos = 0;
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ROPE, odd, 4, &pos, 1), HBG_E_KERNEL);
}

static void t_attn(void) {
  enum { HQ = 4, HK = 2, T = 6, D = 8 };
  float q[HQ * D], kv[2][T * HK * D], o[HQ * D], r[HQ * D];
  fill(q, HQ * D);
  fill(kv[0], T * HK * D);
  fill(kv[1], T * HK * D);
  /* caches stored [T][HK][D], viewed as [HK][T][D] */
  hbg__ktensor t[4] = {mk(q, 2, DIMS(HQ, D), NULL, IN),
                       mk(kv[0], 3, DIMS(HK, T, D), DIMS(D, HK * D, 1), IN),
                       mk(kv[1], 3, DIMS(HK, T, D), DIMS(D, HK * D, 1), IN),
                       mk(o, 2, DIMS(HQ, D), NULL, OUT)};
  for (uint32_t L = 1; L <= T; L++) {
    uint64_t sc[2] = {L, hbg__kernel_f32(0.25f)};
    for (uint32_t ns = 1; ns <= 2; ns++) {
      float scale = ns == 2 ? 0.25f : 1.0f / sqrtf((float)D);
      ASSERT_OK(hbg__kernel_run(HBG_KERNEL_ATTN, t, 4, sc, ns));
      for (int h = 0; h < HQ; h++) {
        int g = h / (HQ / HK);
        double s[T], mx = -1e30, sum = 0, acc[D] = {0};
        for (uint32_t p = 0; p < L; p++) {
          s[p] = 0;
          for (int j = 0; j < D; j++)
            s[p] += (double)q[h * D + j] * kv[0][(p * HK + g) * D + j];
          s[p] *= scale;
          mx = s[p] > mx ? s[p] : mx;
        }
        for (uint32_t p = 0; p < L; p++) {
          double e = exp(s[p] - mx);
          sum += e;
          for (int j = 0; j < D; j++)
            acc[j] += e * kv[1][(p * HK + g) * D + j];
        }
        for (int j = 0; j < D; j++) {
          r[h * D + j] = (float)(acc[j] / sum);
          if (fabs(r[h * D + j] - o[h * D + j]) > 1e-5)
            T_FAIL("attn L=%u h=%d j=%d: %g vs %g", L, h, j,
                   (double)o[h * D + j], (double)r[h * D + j]);
        }
      }
    }
  }
  uint64_t bad[2] = {0, T + 1};
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ATTN, t, 4, &bad[0], 1), HBG_E_KERNEL);
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ATTN, t, 4, &bad[1], 1), HBG_E_KERNEL);
  /* one head, ndim 1 / 2 */
  hbg__ktensor one[4] = {
      mk(q, 1, DIMS(D), NULL, IN), mk(kv[0], 2, DIMS(T, D), NULL, IN),
      mk(kv[1], 2, DIMS(T, D), NULL, IN), mk(o, 1, DIMS(D), NULL, OUT)};
  uint64_t L = 3;
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_ATTN, one, 4, &L, 1));
  /* Hq not a multiple of Hk */
  hbg__ktensor gq[4] = {mk(q, 2, DIMS(3, D), NULL, IN), t[1], t[2],
                        mk(o, 2, DIMS(3, D), NULL, OUT)};
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ATTN, gq, 4, &L, 1), HBG_E_KERNEL);
  /* broadcast views cannot make the work unbounded */
  float *bq = calloc(1u << 16, 4), *bo = calloc(1u << 16, 4);
  ASSERT(bq && bo);
  hbg__ktensor big[4] = {
      mk(bq, 2, DIMS(256, 256), NULL, IN),
      mk(kv[0], 3, DIMS(1, 1u << 14, 256), DIMS(0, 0, 0), IN),
      mk(kv[1], 3, DIMS(1, 1u << 14, 256), DIMS(0, 0, 0), IN),
      mk(bo, 2, DIMS(256, 256), NULL, OUT)};
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ATTN, big, 4, &L, 1), HBG_E_KERNEL);
  big[1].shape[1] = big[2].shape[1] = 1u << 10;
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_ATTN, big, 4, &L, 1));
  free(bq);
  free(bo);
}

static void t_bad_args(void) {
  float a[16], b[16], o[16];
  fill(a, 16);
  fill(b, 16);
  for (int i = 0; i < 16; i++)
    o[i] = 5.0f;
  hbg__ktensor ok[3] = {mk(a, 1, DIMS(16), NULL, IN),
                        mk(b, 1, DIMS(16), NULL, IN),
                        mk(o, 1, DIMS(16), NULL, OUT)};
  uint64_t s = 0;
  ASSERT_OK(hbg__kernel_check(HBG_KERNEL_ADD, ok, 3, 0));
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL__COUNT, ok, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_ERR(hbg__kernel_run(999, ok, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ADD, ok, 2, NULL, 0), HBG_E_KERNEL);
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ADD, ok, 3, &s, 1), HBG_E_KERNEL);
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ADD, NULL, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_SCALE, ok, 2, NULL, 1), HBG_E_KERNEL);
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_SCALE, ok, 2, NULL, 0), HBG_E_KERNEL);
  hbg__ktensor t[3];
#define BAD(kern, field_change, ns)                                            \
  do {                                                                         \
    memcpy(t, ok, sizeof t);                                                   \
    field_change;                                                              \
    ASSERT_ERR(hbg__kernel_run(kern, t, 3, &s, ns), HBG_E_KERNEL);             \
    ASSERT_ERR(hbg__kernel_check(kern, t, 3, ns), HBG_E_KERNEL);               \
  } while (0)
  BAD(HBG_KERNEL_ADD, t[0].dtype = HBG_DTYPE_I32, 0);
  BAD(HBG_KERNEL_ADD, t[1].dtype = 77, 0);
  BAD(HBG_KERNEL_ADD, t[2].mode = HBG_ACCESS_IN, 0);
  BAD(HBG_KERNEL_ADD, t[0].mode = HBG_ACCESS_OUT, 0);
  BAD(HBG_KERNEL_ADD, t[0].mode = 0, 0);
  BAD(HBG_KERNEL_ADD, t[0].mode = 9, 0);
  BAD(HBG_KERNEL_ADD, t[1].shape[0] = 15, 0);
  BAD(HBG_KERNEL_ADD, t[1].shape[0] = 0, 0);
  BAD(HBG_KERNEL_ADD, t[1].ndim = 0, 0);
  BAD(HBG_KERNEL_ADD, t[1].ndim = 5, 0);
  BAD(HBG_KERNEL_ADD, t[2].strides[0] = 0, 0); /* no broadcast output */
  BAD(HBG_KERNEL_ADD,
      (t[0].shape[0] = 0xffffffffu, t[0].strides[0] = 0xffffffffu), 0);
  BAD(HBG_KERNEL_ADD,
      (t[0].ndim = 4,
       t[0].shape[0] = t[0].shape[1] = t[0].shape[2] = t[0].shape[3] = 1u << 16,
       t[0].strides[0] = t[0].strides[1] = t[0].strides[2] = t[0].strides[3] =
           1),
      0);
  BAD(HBG_KERNEL_GEMV, (void)0, 0); /* W must be 2-D */
  BAD(HBG_KERNEL_GEMV,
      (t[0].ndim = 2, t[0].shape[0] = 4, t[0].shape[1] = 4, t[0].strides[0] = 4,
       t[0].strides[1] = 1),
      0); /* x has 16 != 4 */
  memcpy(t, ok, sizeof t);
  t[1].shape[0] = 8;
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_RMSNORM, t, 3, &s, 1), HBG_E_KERNEL);
  /* GEMV x not one stride: [2][2] with a gap */
  hbg__ktensor g[3] = {mk(a, 2, DIMS(2, 4), NULL, IN),
                       mk(b, 2, DIMS(2, 2), DIMS(4, 1), IN),
                       mk(o, 1, DIMS(2), NULL, OUT)};
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_GEMV, g, 3, NULL, 0), HBG_E_KERNEL);
  g[1] = mk(b, 2, DIMS(2, 2), NULL, IN);
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_GEMV, g, 3, NULL, 0));
  /* lanes: k = 9 covers the groups and the tail */
  float w9[2 * 9], x9[9], y9[2];
  fill(w9, 18);
  fill(x9, 9);
  hbg__ktensor g9[3] = {mk(w9, 2, DIMS(2, 9), NULL, IN),
                        mk(x9, 1, DIMS(9), NULL, IN),
                        mk(y9, 1, DIMS(2), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_GEMV, g9, 3, NULL, 0));
  for (int i = 0; i < 2; i++) {
    float want = dot_lanes(&w9[i * 9], 1, x9, 1, 9);
    same_bits(&y9[i], &want, 1);
  }
  /* NULL data */
  memcpy(t, ok, sizeof t);
  t[1].data = NULL;
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_ADD, t, 3, NULL, 0), HBG_E_KERNEL);
  ASSERT_OK(hbg__kernel_check(HBG_KERNEL_ADD, t, 3, 0));
  /* NOP takes anything well-formed, any dtype */
  memcpy(t, ok, sizeof t);
  t[0].dtype = HBG_DTYPE_U8;
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_NOP, t, 3, &s, 1));
  t[0].shape[0] = 0;
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_NOP, t, 3, &s, 1), HBG_E_KERNEL);
  for (int i = 0; i < 16; i++)
    ASSERT(o[i] == 5.0f || i < 2);
  /* names and extents */
  ASSERT_STREQ(hbg__kernel_name(HBG_KERNEL_GEMV), "gemv");
  ASSERT_STREQ(hbg__kernel_name(HBG_KERNEL_FILL), "fill");
  ASSERT(hbg__kernel_name(HBG_KERNEL__COUNT) == NULL);
  for (uint32_t k = 0; k < HBG_KERNEL__COUNT; k++)
    ASSERT(hbg__kernel_name(k) != NULL);
  hbg__ktensor e = mk(a, 2, DIMS(3, 4), DIMS(10, 2), IN);
  ASSERT_UEQ(hbg__ktensor_extent(&e), (2 * 10 + 3 * 2 + 1) * 4);
  hbg_tensor pub;
  ASSERT_OK(hbg_tensor_contig(&pub, 0, 0, HBG_DTYPE_F32, 2, DIMS(3, 4), IN));
  hbg__ktensor_from(&e, &pub, a);
  ASSERT_UEQ(hbg__ktensor_extent(&e), 48);
  ASSERT(e.data == a && e.strides[0] == 4);
  ASSERT(hbg__kernel_to_f32(hbg__kernel_f32(3.25f)) == 3.25f);
}

/* Inputs where the documented order gives other bits than a sequential
 * sum: a large first value swallows every later one added to it alone. */
static void t_order(void) {
  enum { D = 512 };
  static float in[D], w[D], o[D], sq[D];
  for (int j = 0; j < D; j++) {
    in[j] = j == 0 ? 4096.0f : 1.0f; /* squares: 2^24, then 1s */
    w[j] = 1.0f;
    sq[j] = in[j] * in[j];
  }
  uint64_t eps = hbg__kernel_f32(0.0f);
  hbg__ktensor t[3] = {mk(in, 1, DIMS(D), NULL, IN), mk(w, 1, DIMS(D), NULL, IN),
                       mk(o, 1, DIMS(D), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_RMSNORM, t, 3, &eps, 1));
  float seq = 0.0f;
  for (int j = 0; j < D; j++)
    seq += sq[j];
  float tr = tree(sq, D, 1, 0);
  ASSERT(seq == 16777216.0f && tr == 16777216.0f + 510.0f);
  float want = in[1] * (1.0f / sqrtf(tr / (float)D)) * w[1];
  float seq_o = in[1] * (1.0f / sqrtf(seq / (float)D)) * w[1];
  ASSERT(want != seq_o);
  same_bits(&o[1], &want, 1);
  /* softmax: e^0 = 1 then e^-17 each, below half an ulp of 1 */
  for (int j = 0; j < D; j++)
    in[j] = j == 0 ? 0.0f : -17.0f;
  hbg__ktensor sm[2] = {mk(in, 1, DIMS(D), NULL, IN),
                        mk(o, 1, DIMS(D), NULL, OUT)};
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_SOFTMAX, sm, 2, NULL, 0));
  float e[D], sum_seq = 0.0f;
  for (int j = 0; j < D; j++)
    sum_seq += (e[j] = hbg__k_expf(in[j]));
  float sum_tree = tree(e, D, 1, 0);
  ASSERT(sum_seq == 1.0f && sum_tree > 1.0f);
  float want0 = e[0] * (1.0f / sum_tree);
  same_bits(&o[0], &want0, 1);
  ASSERT(o[0] != e[0] * (1.0f / sum_seq));
}

/* ATTN in its documented order, the tree reductions over all 256
 * partials (kern_src.h leaves the empty ones out: same bits), for lengths
 * under and over 256. */
static void t_attn_order(void) {
  enum { HQ = 2, T = 300, D = 8 };
  static float q[HQ * D], k[T * D], v[T * D], o[HQ * D];
  fill(q, HQ * D);
  fill(k, T * D);
  fill(v, T * D);
  hbg__ktensor t[4] = {mk(q, 2, DIMS(HQ, D), NULL, IN),
                       mk(k, 3, DIMS(1, T, D), NULL, IN),
                       mk(v, 3, DIMS(1, T, D), NULL, IN),
                       mk(o, 2, DIMS(HQ, D), NULL, OUT)};
  static const uint32_t lens[] = {1, 5, 255, 256, 257, 300};
  for (size_t c = 0; c < HBG__ARRAY_LEN(lens); c++) {
    uint32_t L = lens[c];
    uint64_t sc[2] = {L, hbg__kernel_f32(0.7f)};
    ASSERT_OK(hbg__kernel_run(HBG_KERNEL_ATTN, t, 4, sc, 2));
    for (int h = 0; h < HQ; h++) {
      static float s[T], e[T];
      for (uint32_t p = 0; p < L; p++) {
        float dot = 0.0f;
        for (int j = 0; j < D; j++)
          dot += q[h * D + j] * k[p * D + j];
        s[p] = dot * 0.7f;
      }
      float mx = tree(s, L, 1, 1);
      for (uint32_t p = 0; p < L; p++)
        e[p] = hbg__k_expf(s[p] - mx);
      float inv = 1.0f / tree(e, L, 1, 0);
      for (int j = 0; j < D; j++) {
        float acc = 0.0f;
        for (uint32_t p = 0; p < L; p++)
          acc += e[p] * v[p * D + j];
        float want = acc * inv;
        if (memcmp(&want, &o[h * D + j], 4) != 0)
          T_FAIL("attn L=%u h=%d j=%d: %.9g, documented order %.9g", L, h, j,
                 (double)o[h * D + j], (double)want);
      }
    }
  }
}

/* Every kernel gives the same bits whatever the number of lanes sharing
 * it (1 is how the CPU runs it, 256 a CTA), including more lanes than
 * reduction partials and counts that divide nothing. */
static void t_lanes(void) {
  enum { R = 3, D = 600, N = 37, K = 301, HQ = 4, HK = 2, T = 300, HD = 16 };
  static float a[R * D], b[R * D], w[N * K], x[K], kc[HK * T * HD],
      vc[HK * T * HD], cs[4 * 32], sn[4 * 32], out[R * D], ref[R * D];
  fill(a, R * D);
  fill(b, R * D);
  fill(w, N * K);
  fill(x, K);
  fill(kc, HK * T * HD);
  fill(vc, HK * T * HD);
  fill(cs, 4 * 32);
  fill(sn, 4 * 32);
  for (int i = 0; i < R * D; i++)
    a[i] *= 8.0f; /* exp over a wider range */
  uint64_t f = hbg__kernel_f32(0.75f), eps = hbg__kernel_f32(1e-5f);
  uint64_t pos = 2, attn[2] = {290, hbg__kernel_f32(0.3f)};
  struct {
    uint32_t k, nt, ns;
    hbg__ktensor t[4];
    const uint64_t *sc;
  } cs_[] = {
      /* general path: a viewed transposed */
      {HBG_KERNEL_ADD, 3, 0,
       {mk(a, 2, DIMS(D, R), DIMS(1, D), IN), mk(b, 1, DIMS(R * D), NULL, IN),
        mk(out, 2, DIMS(D, R), NULL, OUT)},
       NULL},
      {HBG_KERNEL_MUL, 3, 0,
       {mk(a, 1, DIMS(R * D), NULL, IN), mk(b, 1, DIMS(R * D), NULL, IN),
        mk(out, 1, DIMS(R * D), NULL, OUT)},
       NULL},
      {HBG_KERNEL_SILU_MUL, 3, 0,
       {mk(a, 2, DIMS(D, R), DIMS(1, D), IN), mk(b, 1, DIMS(R * D), NULL, IN),
        mk(out, 1, DIMS(R * D), NULL, OUT)},
       NULL},
      {HBG_KERNEL_COPY, 2, 0,
       {mk(a, 3, DIMS(R, 20, 30), DIMS(1, 3 * 30, 3), IN),
        mk(out, 1, DIMS(R * D), NULL, OUT)},
       NULL},
      {HBG_KERNEL_SCALE, 2, 1,
       {mk(a, 1, DIMS(D), DIMS(3), IN), mk(out, 1, DIMS(D), DIMS(2), OUT)},
       &f},
      {HBG_KERNEL_FILL, 1, 1, {mk(out, 2, DIMS(R, D / 2), DIMS(D, 2), OUT)}, &f},
      {HBG_KERNEL_RMSNORM, 3, 1,
       {mk(a, 2, DIMS(R, D), NULL, IN), mk(b, 1, DIMS(D), NULL, IN),
        mk(out, 2, DIMS(R, D), NULL, OUT)},
       &eps},
      {HBG_KERNEL_SOFTMAX, 2, 0,
       {mk(a, 2, DIMS(R, D), NULL, IN), mk(out, 2, DIMS(R, D), NULL, OUT)},
       NULL},
      {HBG_KERNEL_GEMV, 3, 1,
       {mk(w, 2, DIMS(N, K), NULL, IN), mk(x, 1, DIMS(K), NULL, IN),
        mk(out, 1, DIMS(N), DIMS(3), OUT)},
       &f},
      {HBG_KERNEL_ROPE, 4, 1,
       {mk(a, 2, DIMS(5, 64), NULL, IN), mk(cs, 2, DIMS(4, 32), NULL, IN),
        mk(sn, 2, DIMS(4, 32), NULL, IN), mk(out, 2, DIMS(5, 64), NULL, OUT)},
       &pos},
      {HBG_KERNEL_ATTN, 4, 2,
       {mk(a, 2, DIMS(HQ, HD), NULL, IN),
        mk(kc, 3, DIMS(HK, T, HD), DIMS(HD, HK * HD, 1), IN),
        mk(vc, 3, DIMS(HK, T, HD), NULL, IN), mk(out, 2, DIMS(HQ, HD), NULL, OUT)},
       attn},
  };
  static const uint32_t lanes[] = {2, 7, 32, 255, 256, 300};
  for (size_t c = 0; c < HBG__ARRAY_LEN(cs_); c++) {
    for (int i = 0; i < R * D; i++)
      out[i] = 12345.0f;
    ASSERT_OK(hbg__kernel_run_lanes(cs_[c].k, cs_[c].t, cs_[c].nt, cs_[c].sc,
                                    cs_[c].ns, 1, NULL));
    memcpy(ref, out, sizeof ref);
    for (size_t l = 0; l < HBG__ARRAY_LEN(lanes); l++) {
      for (int i = 0; i < R * D; i++)
        out[i] = 12345.0f;
      ASSERT_OK(hbg__kernel_run_lanes(cs_[c].k, cs_[c].t, cs_[c].nt,
                                      cs_[c].sc, cs_[c].ns, lanes[l], NULL));
      if (memcmp(out, ref, sizeof ref) != 0)
        T_FAIL("%s with %u lanes differs from 1 lane",
               hbg__kernel_name(cs_[c].k), lanes[l]);
    }
  }
  ASSERT_ERR(hbg__kernel_run_lanes(HBG_KERNEL_ADD, cs_[1].t, 3, NULL, 0, 0, NULL),
             HBG_E_INVAL);
}

/* ---- bf16 weights ---- */

static hbg__ktensor mkb(void *data, uint32_t ndim, const uint32_t *shape,
                        const uint32_t *strides, uint32_t mode) {
  hbg__ktensor k = mk(data, ndim, shape, strides, mode);
  k.dtype = HBG_DTYPE_BF16;
  return k;
}

/* n bf16 values from random floats times scale, with a -0 and a
 * subnormal here and there; wide[i] their f32 widening. */
static void fill_bf16(uint16_t *b, float *wide, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) {
    b[i] = hbg__bf16_from_f32(frand() * scale);
    if (i % 97 == 5)
      b[i] = 0x8000; /* -0 */
    if (i % 89 == 7)
      b[i] = 0x0003; /* a subnormal */
    wide[i] = hbg__bf16_to_f32(b[i]);
  }
}

/* The kernel with tensor t[wi] bf16 gives, for 1, 3, 32 and 256 lanes, the
 * bits the same kernel gives (one lane) with t[wi] the f32 tensor of the
 * same layout over `wide` (its storage widened). out: the output's
 * storage, n_out floats (reset before each run). */
static void same_as_widened(uint32_t kernel, const hbg__ktensor *t,
                            uint32_t nt, uint32_t wi, float *wide,
                            const uint64_t *sc, uint32_t ns, float *out,
                            size_t n_out, const char *what) {
  static const uint32_t lanes[] = {1, 3, 32, 256};
  float *ref = malloc(n_out * sizeof *ref);
  ASSERT(ref);
  hbg__ktensor tw[4];
  memcpy(tw, t, nt * sizeof *t);
  ASSERT(t[wi].dtype == HBG_DTYPE_BF16);
  tw[wi].data = wide;
  tw[wi].dtype = HBG_DTYPE_F32;
  for (size_t i = 0; i < n_out; i++)
    out[i] = 12345.0f;
  ASSERT_OK(hbg__kernel_run_lanes(kernel, tw, nt, sc, ns, 1, NULL));
  memcpy(ref, out, n_out * sizeof *ref);
  for (size_t l = 0; l < HBG__ARRAY_LEN(lanes); l++) {
    for (size_t i = 0; i < n_out; i++)
      out[i] = 12345.0f;
    ASSERT_OK(hbg__kernel_run_lanes(kernel, t, nt, sc, ns, lanes[l], NULL));
    for (size_t i = 0; i < n_out; i++)
      if (memcmp(&out[i], &ref[i], 4) != 0)
        T_FAIL("%s %s, %u lanes: float %zu is %.9g, the f32 kernel on the "
               "widened weight %.9g",
               hbg__kernel_name(kernel), what, lanes[l], i, (double)out[i],
               (double)ref[i]);
  }
  free(ref);
}

static void t_bf16_gemv(void) {
  enum { WMAX = 16384, XMAX = 4096, YMAX = 256 };
  static uint16_t wb[WMAX];
  static float wf[WMAX], x[XMAX], y[YMAX];
  static const uint32_t nk[][2] = {{1, 1},   {5, 3},    {7, 9},   {4, 4},
                                   {37, 301}, {64, 128}, {3, 1027}, {9, 18}};
  fill(x, XMAX);
  for (size_t c = 0; c < HBG__ARRAY_LEN(nk); c++) {
    const uint32_t n = nk[c][0], k = nk[c][1];
    /* layouts: rows contiguous; rows padded (a row stride of k + 5);
     * W stored transposed (column-major) */
    for (int lay = 0; lay < 3; lay++) {
      const uint32_t s0 = lay == 0 ? k : lay == 1 ? k + 5 : 1;
      const uint32_t s1 = lay == 2 ? n : 1;
      const uint32_t sx = lay == 1 ? 2 : 1, sy = lay == 0 ? 1 : 3;
      const size_t wn = lay == 1 ? (size_t)n * (k + 5) : (size_t)n * k;
      ASSERT(wn <= WMAX && (size_t)k * sx <= XMAX && (size_t)n * sy <= YMAX);
      fill_bf16(wb, wf, wn, 2.0f);
      hbg__ktensor t[3] = {mkb(wb, 2, DIMS(n, k), DIMS(s0, s1), IN),
                           mk(x, 1, DIMS(k), DIMS(sx), IN),
                           mk(y, 1, DIMS(n), DIMS(sy), OUT)};
      uint64_t alpha = hbg__kernel_f32(0.0078125f * (float)(c + 1));
      char what[64];
      for (uint32_t ns = 0; ns <= 1; ns++) {
        snprintf(what, sizeof what, "n=%u k=%u layout %d%s", n, k, lay,
                 ns ? " alpha" : "");
        same_as_widened(HBG_KERNEL_GEMV, t, 3, 0, wf, &alpha, ns, y,
                        (size_t)n * sy, what);
      }
      /* and the documented order, on the widened values */
      ASSERT_OK(hbg__kernel_run(HBG_KERNEL_GEMV, t, 3, NULL, 0));
      for (uint32_t i = 0; i < n; i++) {
        float want = dot_lanes(&wf[(size_t)i * s0], s1, x, sx, k);
        same_bits(&y[i * sy], &want, 1);
      }
    }
  }
  /* y given as [1][n], x as [k][1]: flat views still */
  fill_bf16(wb, wf, 5 * 12, 1.0f);
  hbg__ktensor t[3] = {mkb(wb, 2, DIMS(5, 12), NULL, IN),
                       mk(x, 2, DIMS(12, 1), NULL, IN),
                       mk(y, 2, DIMS(1, 5), NULL, OUT)};
  same_as_widened(HBG_KERNEL_GEMV, t, 3, 0, wf, NULL, 0, y, 5, "2-D x, y");
}

static void t_bf16_rmsnorm(void) {
  enum { INMAX = 4096, WMAX = 2048, OMAX = 4096 };
  static float in[INMAX], wf[WMAX], o[OMAX];
  static uint16_t wb[WMAX];
  static const uint32_t rd[][2] = {{1, 1},   {3, 7},   {4, 128},
                                   {2, 1024}, {5, 300}, {1, 1024}};
  fill(in, INMAX);
  for (size_t i = 0; i < INMAX; i++)
    in[i] *= 4.0f;
  uint64_t eps = hbg__kernel_f32(1e-6f);
  for (size_t c = 0; c < HBG__ARRAY_LEN(rd); c++) {
    const uint32_t rows = rd[c][0], d = rd[c][1];
    for (uint32_t sw = 1; sw <= 2; sw++) {
      ASSERT((size_t)rows * (d + 3) <= INMAX && (size_t)d * sw <= WMAX &&
             (size_t)rows * d <= OMAX);
      fill_bf16(wb, wf, (size_t)d * sw, 1.5f);
      /* in's rows padded to d + 3; one row as a 1-D tensor */
      hbg__ktensor t[3] = {
          rows == 1 ? mk(in, 1, DIMS(d), NULL, IN)
                    : mk(in, 2, DIMS(rows, d), DIMS(d + 3, 1), IN),
          mkb(wb, 1, DIMS(d), DIMS(sw), IN),
          rows == 1 ? mk(o, 1, DIMS(d), NULL, OUT)
                    : mk(o, 2, DIMS(rows, d), NULL, OUT)};
      char what[64];
      snprintf(what, sizeof what, "rows=%u d=%u w stride %u", rows, d, sw);
      same_as_widened(HBG_KERNEL_RMSNORM, t, 3, 1, wf, &eps, 1, o,
                      (size_t)rows * d, what);
    }
  }
  /* per-head: [heads][128] normalised with one bf16 w[128] (q_norm) */
  fill_bf16(wb, wf, 128, 1.0f);
  hbg__ktensor h[3] = {mk(in, 3, DIMS(2, 8, 128), NULL, IN),
                       mkb(wb, 1, DIMS(128), NULL, IN),
                       mk(o, 3, DIMS(2, 8, 128), NULL, OUT)};
  same_as_widened(HBG_KERNEL_RMSNORM, h, 3, 1, wf, &eps, 1, o, 2 * 8 * 128,
                  "per head [2][8][128]");
}

static void t_bf16_copy(void) {
  enum { V = 10, D = 300 };
  static uint16_t tab[V * D];
  static float wide[V * D], o[2 * D];
  fill_bf16(tab, wide, V * D, 8.0f);
  /* an embedding row: row 7 of a [V][D] table, 1-D and as a [1][D] view */
  hbg__ktensor e[2] = {mkb(tab + 7 * D, 1, DIMS(D), NULL, IN),
                       mk(o, 1, DIMS(D), NULL, OUT)};
  same_as_widened(HBG_KERNEL_COPY, e, 2, 0, wide + 7 * D, NULL, 0, o, 2 * D,
                  "embedding row");
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_COPY, e, 2, NULL, 0));
  for (uint32_t j = 0; j < D; j++) {
    uint32_t u;
    memcpy(&u, &o[j], 4);
    ASSERT_UEQ(u, (uint32_t)tab[7 * D + j] << 16);
  }
  hbg__ktensor e2[2] = {mkb(tab, 2, DIMS(V, D), NULL, IN),
                        mk(o, 1, DIMS(D), NULL, OUT)};
  e2[0].shape[0] = 1;
  e2[0].data = tab + 3 * D;
  same_as_widened(HBG_KERNEL_COPY, e2, 2, 0, wide + 3 * D, NULL, 0, o, 2 * D,
                  "a [1][D] view");
  /* a column (stride D) into a strided output (stride 2) */
  hbg__ktensor col[2] = {mkb(tab + 5, 1, DIMS(V), DIMS(D), IN),
                         mk(o, 1, DIMS(V), DIMS(2), OUT)};
  same_as_widened(HBG_KERNEL_COPY, col, 2, 0, wide + 5, NULL, 0, o, 2 * D,
                  "strided");
  /* the general path: a transposed [D][V] view into [V * D] */
  static float big[V * D];
  hbg__ktensor tr[2] = {mkb(tab, 2, DIMS(D, V), DIMS(1, D), IN),
                        mk(big, 1, DIMS(V * D), NULL, OUT)};
  same_as_widened(HBG_KERNEL_COPY, tr, 2, 0, wide, NULL, 0, big, V * D,
                  "transposed");
  /* reshape [2][3] -> [3][2] (row-major order kept), and a broadcast */
  hbg__ktensor rs[2] = {mkb(tab, 2, DIMS(2, 3), NULL, IN),
                        mk(o, 2, DIMS(3, 2), NULL, OUT)};
  same_as_widened(HBG_KERNEL_COPY, rs, 2, 0, wide, NULL, 0, o, 6, "reshape");
  hbg__ktensor bc[2] = {mkb(tab + 11, 1, DIMS(16), DIMS(0), IN),
                        mk(o, 1, DIMS(16), NULL, OUT)};
  same_as_widened(HBG_KERNEL_COPY, bc, 2, 0, wide + 11, NULL, 0, o, 16,
                  "broadcast");
  for (int i = 0; i < 16; i++)
    ASSERT(memcmp(&o[i], &wide[11], 4) == 0);
  /* bf16 extents and addressing: 2-byte elements */
  hbg__ktensor x = mkb(tab, 2, DIMS(3, 4), DIMS(10, 2), IN);
  ASSERT_UEQ(hbg__ktensor_extent(&x), (2 * 10 + 3 * 2 + 1) * 2);
  hbg_tensor pub;
  ASSERT_OK(hbg_tensor_contig(&pub, 0, 0, HBG_DTYPE_BF16, 2, DIMS(3, 4), IN));
  hbg__ktensor_from(&x, &pub, tab);
  ASSERT_UEQ(hbg__ktensor_extent(&x), 24);
  /* scratch as for f32: RMSNORM's partials, none for GEMV */
  hbg_tensor ra[3];
  ASSERT_OK(hbg_tensor_contig(&ra[0], 0x1000, 0, HBG_DTYPE_F32, 2,
                              DIMS(3, 4), IN));
  ASSERT_OK(hbg_tensor_contig(&ra[1], 0x2000, 0, HBG_DTYPE_BF16, 1, DIMS(4),
                              IN));
  ASSERT_OK(hbg_tensor_contig(&ra[2], 0x3000, 0, HBG_DTYPE_F32, 2,
                              DIMS(3, 4), OUT));
  hbg_task tk = {.kernel = HBG_KERNEL_RMSNORM, .n_args = 3, .args = ra,
                 .n_scalars = 1};
  ASSERT_UEQ(hbg__task_scratch_floats(&tk), 256);
  ASSERT_OK(hbg_tensor_contig(&ra[0], 0x1000, 0, HBG_DTYPE_BF16, 2,
                              DIMS(3, 4), IN));
  ASSERT_OK(hbg_tensor_contig(&ra[1], 0x2000, 0, HBG_DTYPE_F32, 1, DIMS(4),
                              IN));
  ASSERT_OK(hbg_tensor_contig(&ra[2], 0x3000, 0, HBG_DTYPE_F32, 1, DIMS(3),
                              OUT));
  tk.kernel = HBG_KERNEL_GEMV;
  ASSERT_OK(hbg__task_kernel_check(&tk, "test"));
  ASSERT_UEQ(hbg__task_scratch_floats(&tk), 0);
}

/* ---- what a bf16 (or any other non-f32) argument is refused with ---- */

typedef struct ksig {
  uint32_t kernel, nt, ns;
  uint32_t ndim[4];
  uint32_t dims[4][3];
  const char *role[4];
  uint32_t bf16_ok; /* bit i: argument i may be bf16 */
} ksig;

/* Each kernel with arguments it takes, all f32. */
static const ksig ksigs[] = {
    {HBG_KERNEL_COPY, 2, 0, {1, 1}, {{16}, {16}}, {"in", "out"}, 1u << 0},
    {HBG_KERNEL_ADD, 3, 0, {1, 1, 1}, {{16}, {16}, {16}}, {"a", "b", "out"}, 0},
    {HBG_KERNEL_MUL, 3, 0, {1, 1, 1}, {{16}, {16}, {16}}, {"a", "b", "out"}, 0},
    {HBG_KERNEL_SCALE, 2, 1, {1, 1}, {{16}, {16}}, {"in", "out"}, 0},
    {HBG_KERNEL_RMSNORM, 3, 1, {2, 1, 2}, {{2, 8}, {8}, {2, 8}},
     {"in", "w", "out"}, 1u << 1},
    {HBG_KERNEL_GEMV, 3, 0, {2, 1, 1}, {{4, 8}, {8}, {4}}, {"W", "x", "out"},
     1u << 0},
    {HBG_KERNEL_ROPE, 4, 1, {2, 2, 2, 2}, {{2, 8}, {3, 4}, {3, 4}, {2, 8}},
     {"x", "cos", "sin", "out"}, 0},
    {HBG_KERNEL_SILU_MUL, 3, 0, {1, 1, 1}, {{16}, {16}, {16}},
     {"a", "b", "out"}, 0},
    {HBG_KERNEL_SOFTMAX, 2, 0, {2, 2}, {{2, 8}, {2, 8}}, {"in", "out"}, 0},
    {HBG_KERNEL_ATTN, 4, 1, {2, 3, 3, 2},
     {{2, 8}, {1, 5, 8}, {1, 5, 8}, {2, 8}}, {"q", "K", "V", "out"}, 0},
    {HBG_KERNEL_FILL, 1, 1, {1}, {{16}}, {"out"}, 0},
};

static void sig_task(const ksig *k, hbg_tensor *a, hbg_task *t,
                     hbg_scalar *sc) {
  for (uint32_t i = 0; i < k->nt; i++) {
    uint32_t out = i == k->nt - 1;
    ASSERT_OK(hbg_tensor_contig(&a[i], 0x100000ull * (i + 1), 0,
                                HBG_DTYPE_F32, k->ndim[i], k->dims[i],
                                out ? OUT : IN));
  }
  sc[0] = hbg_scalar_static(k->kernel == HBG_KERNEL_ATTN ? 5 : 0);
  memset(t, 0, sizeof *t);
  t->kernel = k->kernel;
  t->n_args = k->nt;
  t->args = a;
  t->n_scalars = k->ns;
  t->scalars = sc;
}

/* The task check and the kernel check on the task's arguments agree. */
static int both_checks(const hbg_task *t) {
  hbg__ktensor k[4];
  for (uint32_t i = 0; i < t->n_args; i++)
    hbg__ktensor_from(&k[i], &t->args[i], NULL);
  int a = hbg__kernel_check(t->kernel, k, t->n_args, t->n_scalars);
  int b = hbg__task_kernel_check(t, "test");
  ASSERT_EQ(a, b);
  return b;
}

static void t_bf16_refused(void) {
  static const struct {
    uint32_t dtype;
    const char *name;
  } dts[] = {{HBG_DTYPE_F16, "f16"}, {HBG_DTYPE_BF16, "bf16"},
             {HBG_DTYPE_I32, "i32"}, {HBG_DTYPE_I64, "i64"},
             {HBG_DTYPE_U8, "u8"},   {77, "dtype 77"}};
  for (size_t c = 0; c < HBG__ARRAY_LEN(ksigs); c++) {
    const ksig *k = &ksigs[c];
    hbg_tensor a[4];
    hbg_scalar sc[1];
    hbg_task t;
    sig_task(k, a, &t, sc);
    ASSERT_OK(both_checks(&t));
    for (uint32_t i = 0; i < k->nt; i++)
      for (size_t d = 0; d < HBG__ARRAY_LEN(dts); d++) {
        sig_task(k, a, &t, sc);
        a[i].dtype = dts[d].dtype;
        const int ok = dts[d].dtype == HBG_DTYPE_BF16 && ((k->bf16_ok >> i) & 1);
        if (ok) {
          ASSERT_OK(both_checks(&t));
          continue;
        }
        ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
        char want[160];
        snprintf(want, sizeof want, "test: %s: argument %u (%s) is %s, must be %s",
                 hbg__kernel_name(k->kernel), i, k->role[i], dts[d].name,
                 (k->bf16_ok >> i) & 1 ? "f32 or bf16" : "f32");
        ASSERT_STREQ(hbg_last_error(), want);
      }
    /* NOP takes any dtype */
    sig_task(k, a, &t, sc);
    for (uint32_t i = 0; i < k->nt; i++)
      a[i].dtype = dts[i % HBG__ARRAY_LEN(dts)].dtype == 77
                       ? HBG_DTYPE_U8
                       : dts[i % HBG__ARRAY_LEN(dts)].dtype;
    t.kernel = HBG_KERNEL_NOP;
    ASSERT_OK(both_checks(&t));
  }
  /* the brief's cases, spelled out */
  hbg_tensor a[4];
  hbg_scalar sc[1];
  hbg_task t;
  sig_task(&ksigs[5], a, &t, sc); /* gemv */
  a[0].dtype = HBG_DTYPE_BF16;
  ASSERT_OK(both_checks(&t));
  a[1].dtype = HBG_DTYPE_BF16;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(), "test: gemv: argument 1 (x) is bf16, must be f32");
  a[1].dtype = HBG_DTYPE_F32;
  a[2].dtype = HBG_DTYPE_BF16;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(),
               "test: gemv: argument 2 (out) is bf16, must be f32");
  sig_task(&ksigs[0], a, &t, sc); /* copy: bf16 -> bf16 is refused */
  a[0].dtype = a[1].dtype = HBG_DTYPE_BF16;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(),
               "test: copy: argument 1 (out) is bf16, must be f32");
  sig_task(&ksigs[4], a, &t, sc); /* rmsnorm */
  a[1].dtype = HBG_DTYPE_F16;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(),
               "test: rmsnorm: argument 1 (w) is f16, must be f32 or bf16");
  /* the other messages name the argument's role too */
  sig_task(&ksigs[5], a, &t, sc);
  a[2].mode = IN;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(), "test: gemv: argument 2 (out) needs mode OUT");
  sig_task(&ksigs[5], a, &t, sc);
  a[1].mode = OUT;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(), "test: gemv: argument 1 (x) needs mode IN");
  sig_task(&ksigs[5], a, &t, sc);
  a[2].strides[0] = 0;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(),
               "test: gemv: argument 2 (out) may not broadcast (stride 0)");
  sig_task(&ksigs[5], a, &t, sc);
  a[0].mode = 9;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(), "test: gemv: argument 0 (W) has an invalid mode");
  sig_task(&ksigs[5], a, &t, sc);
  a[0].dtype = HBG_DTYPE_BF16;
  a[0].shape[1] = 0;
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(),
               "test: gemv: argument 0 (W) has a bad shape or strides");
  sig_task(&ksigs[5], a, &t, sc);
  a[0].dtype = HBG_DTYPE_BF16;
  a[0].shape[1] = 7; /* x has 8 */
  ASSERT_ERR(both_checks(&t), HBG_E_KERNEL);
  ASSERT_STREQ(hbg_last_error(), "test: gemv: argument shapes do not fit "
                                 "together (see the kernel's rules in hbg.h)");
  /* a refused bf16 run writes nothing */
  static uint16_t wb[32];
  static float x[8], y[4] = {5, 5, 5, 5};
  hbg__ktensor k[3] = {mkb(wb, 2, DIMS(4, 8), NULL, IN),
                       mkb(x, 1, DIMS(8), NULL, IN),
                       mk(y, 1, DIMS(4), NULL, OUT)};
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_GEMV, k, 3, NULL, 0), HBG_E_KERNEL);
  for (int i = 0; i < 4; i++)
    ASSERT(y[i] == 5.0f);
  k[1].dtype = HBG_DTYPE_F32;
  ASSERT_OK(hbg__kernel_run(HBG_KERNEL_GEMV, k, 3, NULL, 0));
  hbg__ktensor cp[2] = {mk(x, 1, DIMS(8), NULL, IN),
                        mkb(wb, 1, DIMS(8), NULL, OUT)};
  ASSERT_ERR(hbg__kernel_run(HBG_KERNEL_COPY, cp, 2, NULL, 0), HBG_E_KERNEL);
}

int main(void) {
  t_elementwise();
  t_rows();
  t_gemv();
  t_rope();
  t_attn();
  t_bad_args();
  t_order();
  t_attn_order();
  t_lanes();
  t_bf16_gemv();
  t_bf16_rmsnorm();
  t_bf16_copy();
  t_bf16_refused();
  printf("kernels: ok\n");
  return 0;
}
