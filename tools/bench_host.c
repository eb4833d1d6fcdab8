#include "bench_host.h"

#include <limits.h>
#include <string.h>
#include <sys/resource.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

static const char *const alloc_names[BENCH_ALLOC__COUNT] = {"retain", "trim"};

const char *bench_host_alloc_name(int arm) {
  return arm >= 0 && arm < BENCH_ALLOC__COUNT ? alloc_names[arm] : "?";
}

int bench_host_alloc_parse(const char *s, int *arm) {
  for (int i = 0; s && i < BENCH_ALLOC__COUNT; i++)
    if (!strcmp(s, alloc_names[i])) {
      *arm = i;
      return 0;
    }
  return -1;
}

/* glibc caps M_MMAP_THRESHOLD at HEAP_MAX_SIZE / 2: 32 MiB on 64-bit, 512 KiB
 * on 32-bit; mallopt refuses more. */
#define MMAP_MAX_64 (32 * 1024 * 1024)
#define MMAP_MAX_32 (512 * 1024)

int bench_host_alloc_apply(int arm) {
  if (arm == BENCH_ALLOC_TRIM)
    return 0;
  if (arm != BENCH_ALLOC_RETAIN)
    return -1;
#if defined(__GLIBC__)
  int mmap_max = sizeof(void *) >= 8 ? MMAP_MAX_64 : MMAP_MAX_32;
  /* a replacement allocator (a sanitizer's, a preloaded one) may refuse */
  if (mallopt(M_TRIM_THRESHOLD, INT_MAX) != 1 ||
      mallopt(M_MMAP_THRESHOLD, mmap_max) != 1)
    return 1;
  return 0;
#else
  return 1;
#endif
}

int bench_opt_get(const char *opts, const char *key, char *buf, size_t n) {
  size_t klen = strlen(key);
  int found = 0;
  for (const char *p = opts; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > klen && p[klen] == '=' && !strncmp(p, key, klen)) {
      size_t vlen = len - klen - 1;
      if (vlen >= n)
        return -1;
      memcpy(buf, p + klen + 1, vlen);
      buf[vlen] = '\0';
      found = 1;
    }
    p += len + (end != NULL);
  }
  return found;
}

uint64_t bench_thread_minflt(void) {
#if defined(RUSAGE_THREAD)
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0)
    return (uint64_t)ru.ru_minflt;
#endif
  return UINT64_MAX;
}
