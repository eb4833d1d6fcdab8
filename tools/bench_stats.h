/* Pure statistics and the interleaving schedule of `hbg bench`. No hbg
 * dependency, so the tests can compile it on its own. */
#ifndef HBG_TOOLS_BENCH_STATS_H
#define HBG_TOOLS_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_summary {
  double median;
  double min;
  double tmean; /* trimmed mean */
} bench_summary;

void bench_sort_u64(uint64_t *v, size_t n);
/* v sorted ascending, n > 0. Even n: mean of the two middle values. */
double bench_median_sorted(const uint64_t *v, size_t n);
/* Values dropped at each end: floor(n * frac), at most (n - 1) / 2. */
size_t bench_trim_count(size_t n, double frac);
/* Mean of v[k .. n-k) with k = bench_trim_count(n, frac); v sorted. */
double bench_tmean_sorted(const uint64_t *v, size_t n, double frac);
double bench_mean_u64(const uint64_t *v, size_t n);
/* @return 0, or -1 (n == 0 or out of memory). v is not modified. */
int bench_summarize(const uint64_t *v, size_t n, double frac,
                    bench_summary *out);
/* a / b, NaN when b is 0. */
double bench_ratio(double a, double b);

/* One bind of the interleaved run. */
typedef struct bench_slot {
  uint32_t arm;
  uint32_t index;   /* bind index within the arm: its decode step */
  uint32_t round;   /* measured round (index - warmup), valid if measured */
  uint8_t measured; /* 0 for a warm-up bind */
  uint8_t block_end; /* last bind of its block */
} bench_slot;

/* arms * (warmup + rounds). */
size_t bench_schedule_len(uint32_t arms, uint32_t warmup, uint32_t rounds);
/* Fill out[0 .. len) with blocks of k binds: arm 0 x k, arm 1 x k, ...,
 * arm 0 x k, ... until every arm ran warmup + rounds binds (the last block
 * of an arm may be shorter). The first `warmup` binds of each arm are the
 * warm-up. @return 0, or -1 (arms or k zero, cap too small). */
int bench_schedule(uint32_t arms, uint32_t warmup, uint32_t rounds, uint32_t k,
                   bench_slot *out, size_t cap);

#endif
