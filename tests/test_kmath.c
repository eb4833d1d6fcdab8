/* kern_src.h's own exp, sin and cos (the kernels use no libm, so the CPU
 * and the GPU compute the same bits) against libm: within 1 ulp over a
 * sweep of every 211th float of the range each is defined on, exact at the
 * special values. */
#include <math.h>

#include <hbg/hbg.h>

#include "kernels/kern_src.h"
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

int main(void) {
  t_exp();
  t_sincos();
  printf("kmath: ok\n");
  return 0;
}
