/* Host cost of one hbg_submit_task (an ADD of three 256-float tensors) and
 * of one hbg_submit_graph replay (a one-node graph of the same three
 * boundary tensors): a bind of N submissions, rolled back, repeated REPS
 * times; prints the median and the minimum per call. Also the cost, on
 * this machine, of the instruction pair the runtime's thread guard adds
 * to each call (a compare-and-swap, then a release store). Public API
 * only, so the same file builds against any libhbg. Built so it cannot
 * rot, not run by CTest (its numbers depend on the machine):
 *   build/tests/submit_bench [N] [REPS] */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <hbg/hbg.h>

static uint64_t now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static hbg_tensor vec(uint64_t addr, uint32_t n, uint32_t mode) {
  hbg_tensor t;
  if (hbg_tensor_contig(&t, addr, 0, HBG_DTYPE_F32, 1, &n, mode))
    exit(1);
  return t;
}

static int rec(hbg_recorder *r, void *user) {
  (void)user;
  uint32_t n;
  const hbg_tensor *bt = hbg_record_tensors(r, &n);
  hbg_tensor a[3] = {bt[0], bt[1], bt[2]};
  hbg_task t = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a};
  return hbg_record_task(r, &t, NULL);
}

static void report(const char *what, double *per, int reps) {
  qsort(per, (size_t)reps, sizeof *per, cmp);
  printf("%-18s median %6.1f ns per call, min %6.1f\n", what, per[reps / 2],
         per[0]);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int reps = argc > 2 ? atoi(argv[2]) : 300;
  if (n < 1 || reps < 1)
    return 2;
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.policy = HBG_POLICY_COALESCED;
  hbg_runtime *rt;
  uint64_t A, B, C;
  if (hbg_runtime_create(&cfg, &rt) || hbg_buffer_alloc(rt, 1024, &A) ||
      hbg_buffer_alloc(rt, 1024, &B) || hbg_buffer_alloc(rt, 1024, &C))
    return 1;
  hbg_tensor a[3] = {vec(A, 256, HBG_ACCESS_IN), vec(B, 256, HBG_ACCESS_IN),
                     vec(C, 256, HBG_ACCESS_OUT)};
  hbg_task task = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a};
  hbg_graph_submit g = {.key = 1, .n_tensors = 3, .tensors = a,
                        .record = rec};
  double *per = malloc((size_t)reps * sizeof *per);
  if (!per)
    return 1;
  for (int graph = 0; graph < 2; graph++) {
    for (int r = 0; r < reps; r++) {
      hbg_bind *b;
      if (hbg_bind_begin(rt, &b))
        return 1;
      uint64_t t0 = now();
      for (int i = 0; i < n; i++) {
        int rc = graph ? hbg_submit_graph(b, &g, NULL)
                       : hbg_submit_task(b, &task, NULL);
        if (rc) {
          fprintf(stderr, "submit: %s: %s\n", hbg_err_name(rc),
                  hbg_last_error());
          return 1;
        }
      }
      per[r] = (double)(now() - t0) / n;
      hbg_bind_end(b);
    }
    report(graph ? "hbg_submit_graph" : "hbg_submit_task", per, reps);
  }
  static _Atomic uintptr_t word;
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = now();
    for (int i = 0; i < n; i++) {
      uintptr_t cur = 0;
      atomic_compare_exchange_strong_explicit(&word, &cur, 1,
                                              memory_order_acquire,
                                              memory_order_relaxed);
      atomic_store_explicit(&word, 0, memory_order_release);
    }
    per[r] = (double)(now() - t0) / n;
  }
  report("cas + release", per, reps);
  free(per);
  hbg_runtime_destroy(rt);
  return 0;
}
