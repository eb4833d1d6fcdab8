/* hbg bench statistics and the interleaving schedule (tools/bench_stats.c). */
#include <math.h>

#include "../tools/bench_stats.c"
#include "test.h"

#define ASSERT_DEQ(a, b)                                                       \
  do {                                                                         \
    double t__x = (a), t__y = (b);                                             \
    if (!(fabs(t__x - t__y) <= 1e-9 * (1.0 + fabs(t__y))))                     \
      T_FAIL("%s == %s (%.17g vs %.17g)", #a, #b, t__x, t__y);                 \
  } while (0)

static bench_summary summ(const uint64_t *v, size_t n, double f) {
  bench_summary s;
  ASSERT_EQ(bench_summarize(v, n, f, &s), 0);
  return s;
}

static void t_median_min(void) {
  const uint64_t odd[] = {5, 1, 3};
  const uint64_t even[] = {4, 1, 3, 2};
  const uint64_t one[] = {42};
  const uint64_t dup[] = {7, 7, 1, 7, 9};
  ASSERT_DEQ(summ(odd, 3, 0.2).median, 3.0);
  ASSERT_DEQ(summ(odd, 3, 0.2).min, 1.0);
  ASSERT_DEQ(summ(even, 4, 0.2).median, 2.5);
  ASSERT_DEQ(summ(even, 4, 0.2).min, 1.0);
  ASSERT_DEQ(summ(one, 1, 0.2).median, 42.0);
  ASSERT_DEQ(summ(one, 1, 0.2).min, 42.0);
  ASSERT_DEQ(summ(one, 1, 0.2).tmean, 42.0);
  ASSERT_DEQ(summ(dup, 5, 0.2).median, 7.0);
  /* large values keep their precision */
  const uint64_t big[] = {3000000001ull, 3000000003ull};
  ASSERT_DEQ(summ(big, 2, 0.0).median, 3000000002.0);
  bench_summary s;
  ASSERT_EQ(bench_summarize(odd, 0, 0.2, &s), -1);
  ASSERT_EQ(bench_summarize(NULL, 3, 0.2, &s), -1);
  /* the input is not reordered */
  uint64_t v[] = {9, 2, 7};
  summ(v, 3, 0.2);
  ASSERT_UEQ(v[0], 9);
  ASSERT_UEQ(v[1], 2);
  ASSERT_UEQ(v[2], 7);
}

static void t_trim(void) {
  ASSERT_UEQ(bench_trim_count(10, 0.2), 2);
  ASSERT_UEQ(bench_trim_count(7, 0.2), 1);  /* floor(1.4) */
  ASSERT_UEQ(bench_trim_count(4, 0.2), 0);  /* floor(0.8) */
  ASSERT_UEQ(bench_trim_count(5, 0.2), 1);  /* 5 * 0.2 == 1 exactly */
  ASSERT_UEQ(bench_trim_count(10, 0.3), 3); /* not 2 from 2.9999... */
  ASSERT_UEQ(bench_trim_count(100, 0.29), 29);
  ASSERT_UEQ(bench_trim_count(60, 0.2), 12);
  ASSERT_UEQ(bench_trim_count(10, 0.0), 0);
  ASSERT_UEQ(bench_trim_count(4, 0.49), 1);
  ASSERT_UEQ(bench_trim_count(2, 0.49), 0); /* keeps at least one value */
  ASSERT_UEQ(bench_trim_count(0, 0.2), 0);

  /* n = 10, f = 0.2: drop {1, 2} and {9, 1000}: mean(3..8) = 5.5 */
  const uint64_t a[] = {1000, 3, 1, 8, 2, 9, 5, 4, 7, 6};
  ASSERT_DEQ(summ(a, 10, 0.2).tmean, 5.5);
  ASSERT_DEQ(summ(a, 10, 0.0).tmean, 104.5);
  ASSERT_DEQ(summ(a, 10, 0.2).median, 5.5);
  ASSERT_DEQ(summ(a, 10, 0.2).min, 1.0);
  /* n = 7, f = 0.2: drop 1 each end: (20+30+40+50+60)/5 = 40 */
  const uint64_t b[] = {700, 10, 20, 30, 40, 50, 60};
  ASSERT_DEQ(summ(b, 7, 0.2).tmean, 40.0);
  /* n = 6, f = 0.25: floor(1.5) = 1: (2+3+5+8)/4 = 4.5 */
  const uint64_t c[] = {1, 2, 3, 5, 8, 13};
  ASSERT_DEQ(summ(c, 6, 0.25).tmean, 4.5);
  ASSERT_DEQ(summ(c, 6, 0.25).median, 4.0);
  /* n = 4, f = 0.2: nothing dropped: (3+5+8+13) / 4 */
  ASSERT_DEQ(summ(c + 2, 4, 0.2).tmean, 7.25);
  ASSERT_DEQ(bench_mean_u64(c, 6), 32.0 / 6.0);
}

static void t_ratio(void) {
  ASSERT_DEQ(bench_ratio(3.0, 4.0), 0.75);
  ASSERT(isnan(bench_ratio(1.0, 0.0)));
}

#define A 0
#define B 1
#define C 2

static void expect_seq(uint32_t arms, uint32_t warmup, uint32_t rounds,
                       uint32_t k, const uint32_t (*want)[2], size_t n) {
  size_t len = bench_schedule_len(arms, warmup, rounds);
  ASSERT_UEQ(len, n);
  bench_slot *s = calloc(len, sizeof *s);
  ASSERT(s);
  ASSERT_EQ(bench_schedule(arms, warmup, rounds, k, s, len), 0);
  for (size_t i = 0; i < n; i++) {
    if (s[i].arm != want[i][0] || s[i].index != want[i][1])
      T_FAIL("slot %zu: arm %u index %u, want arm %u index %u", i, s[i].arm,
             s[i].index, want[i][0], want[i][1]);
    ASSERT_EQ(s[i].measured, want[i][1] >= warmup);
    if (s[i].measured)
      ASSERT_UEQ(s[i].round, want[i][1] - warmup);
    int end = i + 1 == n || s[i + 1].arm != s[i].arm;
    ASSERT_EQ(s[i].block_end, end);
  }
  free(s);
}

static void t_schedule_exact(void) {
  /* 3 arms, K = 3, 2 warm-up + 4 measured: A0-2 B0-2 C0-2 A3-5 B3-5 C3-5 */
  static const uint32_t w1[][2] = {
      {A, 0}, {A, 1}, {A, 2}, {B, 0}, {B, 1}, {B, 2}, {C, 0}, {C, 1}, {C, 2},
      {A, 3}, {A, 4}, {A, 5}, {B, 3}, {B, 4}, {B, 5}, {C, 3}, {C, 4}, {C, 5}};
  expect_seq(3, 2, 4, 3, w1, sizeof w1 / sizeof w1[0]);
  /* K = 3, 1 + 3 binds per arm: the last block is short */
  static const uint32_t w2[][2] = {{A, 0}, {A, 1}, {A, 2}, {B, 0}, {B, 1},
                                   {B, 2}, {C, 0}, {C, 1}, {C, 2}, {A, 3},
                                   {B, 3}, {C, 3}};
  expect_seq(3, 1, 3, 3, w2, sizeof w2 / sizeof w2[0]);
  /* K = 1: strict alternation */
  static const uint32_t w3[][2] = {{A, 0}, {B, 0}, {C, 0}, {A, 1},
                                   {B, 1}, {C, 1}};
  expect_seq(3, 0, 2, 1, w3, sizeof w3 / sizeof w3[0]);
  /* K larger than the run: one block per arm */
  static const uint32_t w4[][2] = {{A, 0}, {A, 1}, {B, 0}, {B, 1}};
  expect_seq(2, 1, 1, 8, w4, sizeof w4 / sizeof w4[0]);
  /* the defaults: 5 warm-up + 60 measured, K = 5 */
  size_t n = bench_schedule_len(3, 5, 60);
  ASSERT_UEQ(n, 195);
  bench_slot *s = calloc(n, sizeof *s);
  ASSERT(s);
  ASSERT_EQ(bench_schedule(3, 5, 60, 5, s, n), 0);
  for (size_t i = 0; i < n; i++) {
    ASSERT_UEQ(s[i].arm, (i / 5) % 3);
    ASSERT_UEQ(s[i].index, (i / 15) * 5 + i % 5);
  }
  free(s);
}

static void t_schedule_props(void) {
  for (uint32_t arms = 1; arms <= 3; arms++)
    for (uint32_t warmup = 0; warmup <= 6; warmup++)
      for (uint32_t rounds = 1; rounds <= 13; rounds++)
        for (uint32_t k = 1; k <= 7; k++) {
          size_t n = bench_schedule_len(arms, warmup, rounds);
          bench_slot *s = calloc(n, sizeof *s);
          ASSERT(s);
          ASSERT_EQ(bench_schedule(arms, warmup, rounds, k, s, n), 0);
          uint32_t next[3] = {0}, measured[3] = {0}, run = 0;
          for (size_t i = 0; i < n; i++) {
            uint32_t a = s[i].arm;
            ASSERT_LT(a, arms);
            ASSERT_UEQ(s[i].index, next[a]); /* each arm in step order */
            next[a]++;
            if (s[i].index < warmup) {
              ASSERT_EQ(s[i].measured, 0);
            } else {
              ASSERT_EQ(s[i].measured, 1);
              ASSERT_UEQ(s[i].round, measured[a]);
              measured[a]++;
            }
            run = i && !s[i - 1].block_end ? run + 1 : 1;
            ASSERT_LE(run, k);
            if (s[i].block_end) {
              /* a block is k binds, except an arm's last one */
              if (next[a] != warmup + rounds)
                ASSERT_UEQ(run, k);
              if (arms > 1 && i + 1 < n)
                ASSERT_NE(s[i + 1].arm, a);
            } else {
              ASSERT(i + 1 < n && s[i + 1].arm == a);
            }
            if (arms > 1 && i && s[i - 1].arm != a)
              ASSERT_UEQ(a, (s[i - 1].arm + 1) % arms);
          }
          for (uint32_t a = 0; a < arms; a++) {
            ASSERT_UEQ(next[a], warmup + rounds);
            ASSERT_UEQ(measured[a], rounds);
          }
          free(s);
        }
}

static void t_schedule_errors(void) {
  bench_slot s[8];
  ASSERT_EQ(bench_schedule(0, 1, 1, 1, s, 8), -1);
  ASSERT_EQ(bench_schedule(2, 1, 1, 0, s, 8), -1);
  ASSERT_EQ(bench_schedule(3, 1, 2, 1, s, 8), -1); /* needs 9 */
  ASSERT_EQ(bench_schedule(2, 1, 3, 2, s, 8), 0);
  ASSERT_EQ(bench_schedule(2, 1, 3, 2, NULL, 8), -1);
}

int main(void) {
  t_median_min();
  t_trim();
  t_ratio();
  t_schedule_exact();
  t_schedule_props();
  t_schedule_errors();
  printf("test_bench_stats: ok\n");
  return 0;
}
