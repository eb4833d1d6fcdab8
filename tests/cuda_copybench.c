/*
 * Per-copy microbenchmark of a device backend (default cuda): synchronous
 * H2D copies from pageable and from pinned host memory at 2.5 KB, 130 KB
 * and 5 MB (the sizes of a shared-Definition Submission, a baseline
 * Submission and a whole baseline bind). Arms are interleaved in blocks;
 * warm-up copies are dropped; reports median, min and the 20%-trimmed mean
 * per copy, and GB/s at the median. Not a CTest test (it only measures);
 * scripts/gpu-check.sh builds it against libhbg. Public headers only.
 *
 * usage: cuda_copybench [DEVICE [ITERS [OPTIONS]]]
 * Lines starting with "copybench," are machine-readable:
 *   copybench,<bytes>,<pageable|pinned>,<median_us>,<min_us>,<mean_us>,<GB/s>
 */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK 10
#define WARMUP 10

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void report(size_t bytes, const char *mode, uint64_t *ns, int n) {
  qsort(ns, (size_t)n, sizeof *ns, cmp_u64);
  double med = n % 2 ? (double)ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2.0;
  int lo = n / 5, hi = n - n / 5;
  double sum = 0;
  for (int i = lo; i < hi; i++)
    sum += (double)ns[i];
  double mean = hi > lo ? sum / (hi - lo) : med;
  double gbs = med > 0 ? (double)bytes / med : 0;
  printf("%10zu  %-8s  %10.2f  %10.2f  %10.2f  %8.2f\n", bytes, mode,
         med / 1e3, ns[0] / 1e3, mean / 1e3, gbs);
  printf("copybench,%zu,%s,%.2f,%.2f,%.2f,%.2f\n", bytes, mode, med / 1e3,
         ns[0] / 1e3, mean / 1e3, gbs);
}

int main(int argc, char **argv) {
  const char *name = argc > 1 ? argv[1] : "cuda";
  int iters = argc > 2 ? atoi(argv[2]) : 200;
  const char *opts = argc > 3 ? argv[3] : NULL;
  if (iters < BLOCK)
    iters = BLOCK;
  iters = iters / BLOCK * BLOCK;
  static const size_t sizes[] = {2560, 133120, 5u << 20};
  const size_t max = 5u << 20;

  hbg_device *d = NULL;
  int rc = hbg_device_open(name, opts, &d);
  if (rc) {
    fprintf(stderr, "copybench: open %s: %s\n", name, hbg_device_open_error());
    return rc == HBG_E_UNSUPPORTED ? 77 : 1;
  }
  uint8_t *pageable = malloc(max), *pinned = NULL;
  uint64_t *t_pg = malloc(sizeof(uint64_t) * (size_t)iters);
  uint64_t *t_pin = malloc(sizeof(uint64_t) * (size_t)iters);
  hbg_devptr dst = 0;
  rc = HBG_E_NOMEM;
  if (!pageable || !t_pg || !t_pin)
    goto out;
  if ((rc = hbg_dev_host_alloc(d, max, (void **)&pinned)) ||
      (rc = hbg_dev_mem_alloc(d, max, &dst)))
    goto out;
  memset(pageable, 0x5A, max);
  memset(pinned, 0x5A, max);

  printf("device %s, %d copies per arm, blocks of %d, %d warm-up\n", name,
         iters, BLOCK, WARMUP);
  printf("%10s  %-8s  %10s  %10s  %10s  %8s\n", "bytes", "host", "median_us",
         "min_us", "mean20_us", "GB/s");
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    for (int w = 0; w < WARMUP; w++)
      if ((rc = hbg_dev_copy_h2d(d, dst, pageable, n)) ||
          (rc = hbg_dev_copy_h2d(d, dst, pinned, n)))
        goto out;
    for (int b = 0; b < iters; b += BLOCK) {
      for (int arm = 0; arm < 2; arm++) {
        const void *src = arm ? pinned : pageable;
        uint64_t *t = arm ? t_pin : t_pg;
        for (int i = b; i < b + BLOCK; i++) {
          uint64_t t0 = now_ns();
          rc = hbg_dev_copy_h2d(d, dst, src, n);
          t[i] = now_ns() - t0;
          if (rc)
            goto out;
        }
      }
    }
    report(n, "pageable", t_pg, iters);
    report(n, "pinned", t_pin, iters);
  }
  hbg_dev_stats st;
  if (hbg_dev_stats_get(d, &st) == 0)
    printf("stats: h2d %llu copies, %llu pinned direct, %llu async\n",
           (unsigned long long)st.h2d_copies,
           (unsigned long long)st.pinned_direct,
           (unsigned long long)st.async_copies);
  rc = 0;
out:
  if (rc)
    fprintf(stderr, "copybench: %s\n", hbg_strerror(rc));
  if (dst)
    hbg_dev_mem_free(d, dst);
  if (pinned)
    hbg_dev_host_free(d, pinned);
  free(pageable);
  free(t_pg);
  free(t_pin);
  hbg_device_close(d);
  return rc ? 1 : 0;
}
