/* kern_src.h's own exp, sin and cos (the kernels use no libm, so the CPU
 * and the GPU compute the same bits) against libm: within 1 ulp over a
 * sweep of every 211th float of the range each is defined on, exact at the
 * special values. And the bf16 conversions (hbg__bf16_from_f32 /
 * hbg__bf16_to_f32, kern_src.h's): every bf16 pattern, and f32 narrowing
 * against a rounding computed here another way. */
#include <math.h>

#include <hbg/hbg.h>

#include "kernels/kernels.h"
#include "test.h"

/* Floats in one integer order, so |ord(a) - ord(b)| counts ulps. */
static int64_t ord(float f) {
  int32_t i;
  memcpy(&i, &f, sizeof i);
  return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static int64_t ulps(float a, float b) {
  int64_t d = ord(a) - ord(b);
  return d < 0 ? -d : d;
}

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

typedef float (*f1)(float);

/* Every step-th float with |x| <= lim: the largest ulp distance. */
static int64_t sweep(f1 mine, f1 ref, float lim, uint32_t step, float *at) {
  int64_t worst = 0;
  uint32_t u = 0;
  do {
    float x;
    memcpy(&x, &u, sizeof x);
    if (x == x && fabsf(x) <= lim) {
      int64_t d = ulps(mine(x), ref(x));
      if (d > worst) {
        worst = d;
        *at = x;
      }
    }
    u += step;
  } while (u >= step);
  return worst;
}

static void t_exp(void) {
  float at = 0;
  /* the whole domain where e^x is neither 0 nor inf, subnormals included */
  int64_t w = sweep(hbg__k_expf, expf, 104.0f, 211, &at);
  if (w > 1)
    T_FAIL("exp: %lld ulps at %a", (long long)w, (double)at);
  ASSERT(hbg__k_expf(0.0f) == 1.0f && hbg__k_expf(-0.0f) == 1.0f);
  ASSERT(hbg__k_expf(INFINITY) == INFINITY);
  ASSERT(hbg__k_expf(-INFINITY) == 0.0f);
  ASSERT(isnan(hbg__k_expf(NAN)));
  /* the overflow edge is libm's: the largest x with a finite result */
  float top = 88.72283172607422f, over = nextafterf(top, INFINITY);
  ASSERT(isfinite(expf(top)) && !isfinite(expf(over)));
  ASSERT(isfinite(hbg__k_expf(top)) && hbg__k_expf(over) == INFINITY);
  ASSERT(hbg__k_expf(1000.0f) == INFINITY && hbg__k_expf(-1000.0f) == 0.0f);
  /* the smallest subnormal and below */
  ASSERT(ulps(hbg__k_expf(-103.2789f), expf(-103.2789f)) <= 1);
  ASSERT(hbg__k_expf(-104.5f) == 0.0f);
  /* exact powers of e^0 and the int path: e^1 is libm's bits */
  ASSERT(ulps(hbg__k_expf(1.0f), expf(1.0f)) <= 1);
}

static void t_sincos(void) {
  float at = 0;
  const float lim = 1048576.0f; /* 2^20 */
  int64_t w = sweep(hbg__k_sinf, sinf, lim, 211, &at);
  if (w > 1)
    T_FAIL("sin: %lld ulps at %a", (long long)w, (double)at);
  w = sweep(hbg__k_cosf, cosf, lim, 211, &at);
  if (w > 1)
    T_FAIL("cos: %lld ulps at %a", (long long)w, (double)at);
  /* signed zero and quadrants */
  ASSERT_UEQ(bits(hbg__k_sinf(-0.0f)), bits(-0.0f));
  ASSERT_UEQ(bits(hbg__k_sinf(0.0f)), bits(0.0f));
  ASSERT(hbg__k_cosf(0.0f) == 1.0f && hbg__k_cosf(-0.0f) == 1.0f);
  for (int q = -8; q <= 8; q++) {
    float x = (float)q * 0.7853981633974483f; /* multiples of pi/4 */
    ASSERT(ulps(hbg__k_sinf(x), sinf(x)) <= 1);
    ASSERT(ulps(hbg__k_cosf(x), cosf(x)) <= 1);
  }
  ASSERT(ulps(hbg__k_sinf(lim), sinf(lim)) <= 1);
  /* outside the supported range and non-finite: NaN */
  ASSERT(isnan(hbg__k_sinf(nextafterf(lim, INFINITY))));
  ASSERT(isnan(hbg__k_cosf(-3e38f)));
  ASSERT(isnan(hbg__k_sinf(INFINITY)) && isnan(hbg__k_cosf(-INFINITY)));
  ASSERT(isnan(hbg__k_sinf(NAN)));
}

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static int bf16_nan(uint16_t b) {
  return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0;
}

/* f32 -> bf16 rounded to nearest, ties to even, by distances in double
 * (exact: both candidates are floats within 2^8 ulps of f): the candidates
 * are f's bits truncated and the next bf16 away from zero, that one taken
 * as 2^128 when it is the infinity (IEEE rounds as if the exponent went
 * on). Not for NaN. */
static uint16_t bf16_ref(float f) {
  uint32_t u = bits(f);
  uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
  double a = fabs((double)f), vlo = fabs((double)from_bits((uint32_t)lo << 16));
  double vhi = (hi & 0x7fffu) == 0x7f80u
                   ? ldexp(1.0, 128)
                   : fabs((double)from_bits((uint32_t)hi << 16));
  double dlo = a - vlo, dhi = vhi - a;
  if (dlo < dhi)
    return lo;
  if (dhi < dlo)
    return hi;
  return (lo & 1u) ? hi : lo;
}

static void t_bf16(void) {
  /* every pattern: widening is the bits shifted up; narrowing it back
   * gives the pattern again (NaNs: a quiet NaN of the same sign) */
  for (uint32_t b = 0; b < 65536; b++) {
    float f = hbg__bf16_to_f32((uint16_t)b);
    ASSERT_UEQ(bits(f), b << 16);
    ASSERT_UEQ(bits(hbg__k_bf16_f32((uint16_t)b)), b << 16);
    uint16_t r = hbg__bf16_from_f32(f);
    if (!bf16_nan((uint16_t)b)) {
      if (r != b)
        T_FAIL("bf16 0x%04x -> f32 -> 0x%04x", b, r);
    } else if (!bf16_nan(r) || (r & 0x8000u) != (b & 0x8000u) ||
               !(r & 0x0040u)) {
      T_FAIL("bf16 NaN 0x%04x -> f32 -> 0x%04x", b, r);
    }
  }
  /* every 211th f32 (all exponents, both signs) against the reference */
  uint32_t u = 0;
  do {
    float f = from_bits(u);
    if (f == f && !isinf(f)) {
      uint16_t got = hbg__bf16_from_f32(f), want = bf16_ref(f);
      if (got != want)
        T_FAIL("f32 0x%08x -> bf16 0x%04x, nearest-even 0x%04x", u, got,
               want);
    }
    u += 211;
  } while (u >= 211);
  /* ties to even: 1 + 2^-8 lies halfway between 0x3f80 and 0x3f81 */
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x3f808000u)), 0x3f80);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x3f818000u)), 0x3f82);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0xbf808000u)), 0xbf80);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0xbf818000u)), 0xbf82);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x3f808001u)), 0x3f81);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x3f807fffu)), 0x3f80);
  /* a tie that carries into the exponent: 0x3fff8000 -> 2.0 */
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x3fff8000u)), 0x4000);
  /* subnormals and zeros */
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x00000001u)), 0x0000);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x00008000u)), 0x0000);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x00018000u)), 0x0002);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x80008001u)), 0x8001);
  ASSERT_UEQ(hbg__bf16_from_f32(-0.0f), 0x8000);
  ASSERT_UEQ(hbg__bf16_from_f32(0.0f), 0x0000);
  /* overflow: past the largest bf16 (0x7f7f) by half an ulp or more ->
   * inf; infinities stay */
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x7f7f7fffu)), 0x7f7f);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x7f7f8000u)), 0x7f80);
  ASSERT_UEQ(hbg__bf16_from_f32(3.4028235e38f), 0x7f80); /* FLT_MAX */
  ASSERT_UEQ(hbg__bf16_from_f32(-3.4028235e38f), 0xff80);
  ASSERT_UEQ(hbg__bf16_from_f32(INFINITY), 0x7f80);
  ASSERT_UEQ(hbg__bf16_from_f32(-INFINITY), 0xff80);
  ASSERT(isinf(hbg__bf16_to_f32(0x7f80)) && hbg__bf16_to_f32(0xff80) < 0);
  /* NaN: quiet, sign kept, payload's top bits kept, even one whose
   * payload lies only in the low 16 bits (truncation would make it inf) */
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x7fc00000u)), 0x7fc0);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0xffc00000u)), 0xffc0);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x7f800001u)), 0x7fc0);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0xff800001u)), 0xffc0);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x7fa00000u)), 0x7fe0);
  ASSERT_UEQ(hbg__bf16_from_f32(from_bits(0x7fffffffu)), 0x7fff);
  ASSERT(isnan(hbg__bf16_to_f32(hbg__bf16_from_f32(NAN))));
  /* a few values */
  ASSERT(hbg__bf16_to_f32(hbg__bf16_from_f32(1.0f)) == 1.0f);
  ASSERT(hbg__bf16_to_f32(hbg__bf16_from_f32(-2.5f)) == -2.5f);
  ASSERT_UEQ(hbg__bf16_from_f32(3.14159265f), 0x4049); /* 3.140625 */
}

int main(void) {
  t_exp();
  t_sincos();
  t_bf16();
  printf("kmath: ok\n");
  return 0;
}
