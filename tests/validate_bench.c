/* The serial Definition validator after its split into pieces
 * (hbg_img_def_validate: the head, then every unit) against the validator
 * as it was (validate_ref.h), side by side in one run: qwen3-14b's and
 * dsv4's Definitions, each validated REPS times per round by each, the
 * two interleaved over ROUNDS rounds; medians of ns per validation. Built,
 * not run by CTest (docs/BENCHMARKS.md). usage: validate_bench [rounds] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <hbg/hbg.h>
#include <hbg/hbg_workload.h>

#include "core/core.h"
#include "validate_ref.h"

#define REPS 200
#define MAX_DEFS 16

static uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static volatile int sink;

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 21;
  if (rounds < 1 || rounds > 1000)
    rounds = 21;
  const char *names[] = {"qwen3-14b", "dsv4"};
  for (int w = 0; w < 2; w++) {
    hbg_config cfg;
    hbg_config_init(&cfg);
    cfg.device = "sim";
    hbg_runtime *rt = NULL;
    hbg_workload *wl = NULL;
    hbg_bind *b = NULL;
    hbg_workload_config wc;
    hbg_workload_config_init(&wc);
    wc.name = names[w];
    wc.layers = 2;
    if (hbg_runtime_create(&cfg, &rt) || hbg_workload_create(rt, &wc, &wl) ||
        hbg_bind_begin(rt, &b) || hbg_workload_submit(wl, b, 1)) {
      fprintf(stderr, "validate_bench: %s: %s\n", names[w], hbg_last_error());
      return 1;
    }
    hbg_bind_end(b);
    const hbg__def *defs[MAX_DEFS];
    int n = 0;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < rt->graphs.cap && n < MAX_DEFS; i++) {
      const hbg__graph *g = hbg__map_at(&rt->graphs, i);
      if (g) {
        defs[n++] = g->def;
        bytes += g->def->size;
      }
    }
    double *t_new = malloc(sizeof(double) * (size_t)rounds);
    double *t_ref = malloc(sizeof(double) * (size_t)rounds);
    if (!t_new || !t_ref)
      return 1;
    for (int r = 0; r < rounds; r++) {
      for (int which = 0; which < 2; which++) {
        uint64_t t0 = now();
        int acc = 0;
        for (int k = 0; k < REPS; k++)
          for (int d = 0; d < n; d++)
            acc |= which ? ref_def_validate(defs[d]->image, defs[d]->size)
                         : hbg_img_def_validate(defs[d]->image,
                                                defs[d]->size, NULL, NULL,
                                                NULL);
        double ns = (double)(now() - t0) / ((double)REPS * n);
        sink = acc;
        if (acc) {
          fprintf(stderr, "validate_bench: a Definition did not validate\n");
          return 1;
        }
        (which ? t_ref : t_new)[r] = ns;
      }
    }
    double mn = median(t_new, rounds), mr = median(t_ref, rounds);
    printf("%-10s %d Definitions, %llu bytes: split %.0f ns, before the "
           "split %.0f ns per validation (ratio %.3f; medians of %d "
           "rounds)\n",
           names[w], n, (unsigned long long)bytes, mn, mr, mn / mr, rounds);
    free(t_new);
    free(t_ref);
    hbg_workload_destroy(wl);
    hbg_runtime_destroy(rt);
  }
  return 0;
}
