#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "cli.h"

#define WARMUP 32
#define BLOCK 16
#define AUTO_BUDGET_US 1.5e6 /* default: as many blocks as fit in this */
#define AUTO_MAX_ITERS 100000

enum { ARM_PINNED, ARM_PAGEABLE, ARMS };
static const char *const arm_names[ARMS] = {"pinned", "pageable"};

typedef struct arm {
  uint8_t *src;
  double *us;
  uint64_t n;
  uint64_t chunks, handshakes, direct;
} arm;

static void usage(FILE *f) {
  fprintf(f,
          "usage: hbg selfcheck [--device NAME] [--options OPTS] "
          "[--size BYTES] [--iters N]\n\n"
          "Synchronous H2D copies of --size bytes (default 130K) from pinned\n"
          "and from pageable memory, interleaved in blocks of %d on one\n"
          "device; per-copy median/min time, bandwidth, and the bounce chunks\n"
          "and handshakes each copy cost (from the device counters); then a\n"
          "D2H readback check. --iters copies per arm (default: as many as\n"
          "fit in about 1.5 s, at most %d).\n",
          BLOCK, AUTO_MAX_ITERS);
}

static int parse_size(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-')
    return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s)
    return -1;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k')
    shift = 10, end++;
  else if (*end == 'M' || *end == 'm')
    shift = 20, end++;
  else if (*end == 'G' || *end == 'g')
    shift = 30, end++;
  if (*end || (shift && v > (UINT64_MAX >> shift)))
    return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int fail(const char *what, hbg_device *d, int rc) {
  int64_t code;
  const char *msg;
  if (d && hbg_device_native_error(d, &code, &msg) == 0)
    fprintf(stderr, "hbg selfcheck: %s: %s (%s)\n", what, hbg_strerror(rc),
            msg);
  else
    fprintf(stderr, "hbg selfcheck: %s: %s\n", what, hbg_strerror(rc));
  return 1;
}

static int run_block(hbg_device *d, hbg_devptr dst, arm *a, size_t size,
                     uint64_t count, int record) {
  hbg_dev_stats s0, s1;
  int rc = hbg_dev_stats_get(d, &s0);
  for (uint64_t i = 0; rc == 0 && i < count; i++) {
    double t0 = now_us();
    rc = hbg_dev_copy_h2d(d, dst, a->src, size);
    double t1 = now_us();
    if (record)
      a->us[a->n++] = t1 - t0;
  }
  if (rc == 0)
    rc = hbg_dev_stats_get(d, &s1);
  if (rc == 0 && record) {
    a->chunks += s1.bounce_chunks - s0.bounce_chunks;
    a->handshakes += s1.handshakes - s0.handshakes;
    a->direct += s1.pinned_direct - s0.pinned_direct;
  }
  return rc;
}

static int verify(hbg_device *d, hbg_devptr dst, uint8_t *src, uint8_t *back,
                  size_t size, uint32_t seed) {
  for (size_t i = 0; i < size; i++)
    src[i] = (uint8_t)((i * 2654435761u + seed) >> 9);
  memset(back, 0, size);
  int rc = hbg_dev_copy_h2d(d, dst, src, size);
  if (rc == 0)
    rc = hbg_dev_copy_d2h(d, back, dst, size);
  if (rc == 0 && memcmp(src, back, size) != 0)
    rc = HBG_E_VERIFY;
  return rc;
}

int hbg_cmd_selfcheck(int argc, char **argv) {
  const char *device = "sim", *options = NULL;
  uint64_t size = 130 << 10, iters = 0;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(o, "--device") && v) {
      device = v, i++;
    } else if (!strcmp(o, "--options") && v) {
      options = v, i++;
    } else if (!strcmp(o, "--size") && v) {
      if (parse_size(v, &size) || size == 0 || size > (1ull << 32)) {
        fprintf(stderr, "hbg selfcheck: bad --size '%s'\n", v);
        return 2;
      }
      i++;
    } else if (!strcmp(o, "--iters") && v) {
      if (parse_size(v, &iters) || iters == 0 || iters > 10000000) {
        fprintf(stderr, "hbg selfcheck: bad --iters '%s'\n", v);
        return 2;
      }
      i++;
    } else {
      fprintf(stderr, "hbg selfcheck: unknown or incomplete option '%s'\n",
              o);
      usage(stderr);
      return 2;
    }
  }

  hbg_device *d;
  int rc = hbg_device_open(device, options, &d);
  if (rc < 0) {
    fprintf(stderr, "hbg selfcheck: cannot open device '%s': %s\n", device,
            hbg_device_open_error());
    return 1;
  }
  int ret = 1, timed = iters == 0;
  if (timed)
    iters = AUTO_MAX_ITERS;
  hbg_devptr dst = 0;
  uint8_t *pinned = NULL, *pageable = malloc(size), *back = malloc(size);
  arm arms[ARMS] = {{0}};
  for (int a = 0; a < ARMS; a++)
    arms[a].us = malloc(iters * sizeof(double));
  if (!pageable || !back || !arms[0].us || !arms[1].us) {
    fprintf(stderr, "hbg selfcheck: out of memory\n");
    goto out;
  }
  if ((rc = hbg_dev_mem_alloc(d, size, &dst)) < 0) {
    ret = fail("device alloc", d, rc);
    goto out;
  }
  if ((rc = hbg_dev_host_alloc(d, size, (void **)&pinned)) < 0) {
    ret = fail("pinned host alloc", d, rc);
    goto out;
  }
  memset(pinned, 0x5a, size);
  memset(pageable, 0xa5, size);
  arms[ARM_PINNED].src = pinned;
  arms[ARM_PAGEABLE].src = pageable;

  for (int a = 0; a < ARMS; a++)
    if ((rc = run_block(d, dst, &arms[a], size, WARMUP, 0)) < 0) {
      ret = fail("warm-up copy", d, rc);
      goto out;
    }
  double start = now_us();
  uint64_t done = 0;
  while (done < iters) {
    uint64_t k = iters - done < BLOCK ? iters - done : BLOCK;
    for (int a = 0; a < ARMS; a++)
      if ((rc = run_block(d, dst, &arms[a], size, k, 1)) < 0) {
        ret = fail("copy", d, rc);
        goto out;
      }
    done += k;
    if (timed && now_us() - start > AUTO_BUDGET_US)
      break;
  }
  iters = done;

  printf("selfcheck: device %s, %llu-byte sync H2D, %llu copies per arm in "
         "blocks of %d (after %d warm-up)\n",
         device, (unsigned long long)size, (unsigned long long)iters, BLOCK,
         WARMUP);
  printf("%-9s %10s %10s %10s %8s %14s %16s\n", "source", "median_us",
         "min_us", "trim_us", "GB/s", "chunks/copy", "handshakes/copy");
  double med[ARMS];
  for (int a = 0; a < ARMS; a++) {
    arm *m = &arms[a];
    qsort(m->us, m->n, sizeof *m->us, cmp_double);
    med[a] = m->n % 2 ? m->us[m->n / 2]
                      : (m->us[m->n / 2 - 1] + m->us[m->n / 2]) / 2;
    uint64_t lo = m->n / 5, hi = m->n - m->n / 5;
    double sum = 0;
    for (uint64_t i = lo; i < hi; i++)
      sum += m->us[i];
    double trim = hi > lo ? sum / (double)(hi - lo) : med[a];
    printf("%-9s %10.2f %10.2f %10.2f %8.2f %14.2f %16.2f\n", arm_names[a],
           med[a], m->us[0], trim, (double)size / (med[a] * 1e3),
           (double)m->chunks / (double)m->n,
           (double)m->handshakes / (double)m->n);
  }
  printf("pageable/pinned median: %.2fx\n", med[ARM_PAGEABLE] / med[ARM_PINNED]);

  /* readback: each source through the device and back through the other */
  if ((rc = verify(d, dst, pinned, back, size, 1)) < 0 ||
      (rc = verify(d, dst, pageable, pinned, size, 2)) < 0) {
    ret = fail("readback", d, rc);
    goto out;
  }
  printf("readback: ok (pinned -> device -> pageable, pageable -> device -> "
         "pinned)\n");
  ret = 0;

out:
  for (int a = 0; a < ARMS; a++)
    free(arms[a].us);
  hbg_dev_host_free(d, pinned);
  hbg_dev_mem_free(d, dst);
  free(pageable);
  free(back);
  hbg_device_close(d);
  return ret;
}
