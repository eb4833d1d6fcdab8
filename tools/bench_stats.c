#include "bench_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

void bench_sort_u64(uint64_t *v, size_t n) {
  if (n > 1)
    qsort(v, n, sizeof *v, cmp_u64);
}

double bench_median_sorted(const uint64_t *v, size_t n) {
  if (!n)
    return 0.0;
  if (n & 1)
    return (double)v[n / 2];
  return ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

size_t bench_trim_count(size_t n, double frac) {
  if (!n || !(frac > 0.0))
    return 0;
  /* The epsilon keeps 0.3 * 10 from flooring to 2. */
  size_t k = (size_t)floor((double)n * frac + 1e-9);
  if (k > (n - 1) / 2)
    k = (n - 1) / 2;
  return k;
}

double bench_tmean_sorted(const uint64_t *v, size_t n, double frac) {
  if (!n)
    return 0.0;
  size_t k = bench_trim_count(n, frac);
  return bench_mean_u64(v + k, n - 2 * k);
}

double bench_mean_u64(const uint64_t *v, size_t n) {
  if (!n)
    return 0.0;
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s += (double)v[i];
  return s / (double)n;
}

int bench_summarize(const uint64_t *v, size_t n, double frac,
                    bench_summary *out) {
  if (!n || !v || !out)
    return -1;
  uint64_t *s = malloc(n * sizeof *s);
  if (!s)
    return -1;
  memcpy(s, v, n * sizeof *s);
  bench_sort_u64(s, n);
  out->median = bench_median_sorted(s, n);
  out->min = (double)s[0];
  out->tmean = bench_tmean_sorted(s, n, frac);
  free(s);
  return 0;
}

double bench_ratio(double a, double b) { return b != 0.0 ? a / b : NAN; }

size_t bench_schedule_len(uint32_t arms, uint32_t warmup, uint32_t rounds) {
  return (size_t)arms * ((size_t)warmup + rounds);
}

int bench_schedule(uint32_t arms, uint32_t warmup, uint32_t rounds, uint32_t k,
                   bench_slot *out, size_t cap) {
  size_t len = bench_schedule_len(arms, warmup, rounds);
  uint32_t per_arm = warmup + rounds;
  if (!arms || !k || cap < len || (len && !out))
    return -1;
  size_t o = 0;
  for (uint32_t base = 0; base < per_arm; base += k) {
    uint32_t end = per_arm - base < k ? per_arm : base + k;
    for (uint32_t a = 0; a < arms; a++)
      for (uint32_t i = base; i < end; i++) {
        bench_slot *s = &out[o++];
        s->arm = a;
        s->index = i;
        s->measured = i >= warmup;
        s->round = s->measured ? i - warmup : 0;
        s->block_end = i + 1 == end;
      }
  }
  return 0;
}
