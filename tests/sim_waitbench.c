/*
 * The sim's copy waits, measured (not a CTest test: the numbers depend on
 * the scheduler and the machine's load). For spin=0, the default and
 * spin=5000: how many of a burst of back-to-back 4 KiB pinned copies ended
 * their wait while polling, and the median copy time; then how long
 * hbg_device_close takes while the engine is inside a 100 ms polling
 * window (it should stop at once, not at the window's end).
 *
 * usage: sim_waitbench [COPIES [CLOSES]]
 * Lines starting with "waitbench," are machine-readable:
 *   waitbench,spin,<spin_us>,<copies>,<spin_hits>,<sleeps>,<median_us>
 *   waitbench,close,<trials>,<median_ms>,<max_ms>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "common/util.h"
#include "device/sim/sim.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, uint32_t n) {
  qsort(v, n, sizeof *v, cmp_u64);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int spin_arm(const char *opts, uint32_t copies) {
  hbg_device *d = NULL;
  uint8_t *pinned = NULL;
  hbg_devptr dst = 0;
  uint64_t *ns = malloc(copies * sizeof *ns);
  int rc = ns ? hbg_device_open("sim", opts, &d) : HBG_E_NOMEM;
  if (rc == 0)
    rc = hbg_dev_host_alloc(d, 4096, (void **)&pinned);
  if (rc == 0)
    rc = hbg_dev_mem_alloc(d, 4096, &dst);
  for (uint32_t i = 0; rc == 0 && i < copies; i++) {
    memset(pinned, (int)i, 4096);
    uint64_t t0 = hbg__now_ns();
    rc = hbg_dev_copy_h2d(d, dst, pinned, 4096);
    ns[i] = hbg__now_ns() - t0;
  }
  hbg__sim_info in;
  if (rc == 0)
    rc = hbg__sim_get_info(hbg__sim_from(d), &in);
  if (rc == 0)
    printf("waitbench,spin,%llu,%u,%llu,%llu,%.2f\n",
           (unsigned long long)in.spin_us, copies,
           (unsigned long long)in.spin_hits, (unsigned long long)in.sleeps,
           (double)median(ns, copies) / 1e3);
  if (dst)
    hbg_dev_mem_free(d, dst);
  if (pinned)
    hbg_dev_host_free(d, pinned);
  hbg_device_close(d);
  free(ns);
  return rc;
}

static int close_arm(uint32_t trials) {
  uint64_t *ns = malloc(trials * sizeof *ns);
  if (!ns)
    return HBG_E_NOMEM;
  uint64_t max = 0;
  for (uint32_t i = 0; i < trials; i++) {
    hbg_device *d = NULL;
    uint8_t *pinned = NULL;
    hbg_devptr dst = 0;
    int rc = hbg_device_open("sim", "spin=100000", &d);
    if (rc == 0)
      rc = hbg_dev_host_alloc(d, 4096, (void **)&pinned);
    if (rc == 0)
      rc = hbg_dev_mem_alloc(d, 4096, &dst);
    if (rc == 0)
      rc = hbg_dev_copy_h2d(d, dst, pinned, 4096); /* the engine polls */
    if (rc < 0) {
      hbg_device_close(d);
      free(ns);
      return rc;
    }
    uint64_t t0 = hbg__now_ns();
    hbg_device_close(d);
    ns[i] = hbg__now_ns() - t0;
    max = HBG__MAX(max, ns[i]);
  }
  printf("waitbench,close,%u,%.3f,%.3f\n", trials,
         (double)median(ns, trials) / 1e6, (double)max / 1e6);
  free(ns);
  return 0;
}

int main(int argc, char **argv) {
  uint32_t copies = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 2000;
  uint32_t closes = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 20;
  if (!copies || !closes) {
    fprintf(stderr, "usage: sim_waitbench [COPIES [CLOSES]]\n");
    return 2;
  }
  static const char *const arms[] = {"spin=0", "", "spin=5000"};
  for (size_t i = 0; i < HBG__ARRAY_LEN(arms); i++) {
    int rc = spin_arm(arms[i], copies);
    if (rc < 0) {
      fprintf(stderr, "spin arm '%s': %s\n", arms[i], hbg_err_name(rc));
      return 1;
    }
  }
  int rc = close_arm(closes);
  if (rc < 0) {
    fprintf(stderr, "close arm: %s\n", hbg_err_name(rc));
    return 1;
  }
  return 0;
}
