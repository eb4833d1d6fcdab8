#include "bench_place.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_ordinal(const char *s, size_t len, uint32_t *out) {
  char buf[16];
  char *end;
  if (len == 0 || len >= sizeof buf || s[0] < '0' || s[0] > '9')
    return -1;
  memcpy(buf, s, len);
  buf[len] = '\0';
  errno = 0;
  unsigned long v = strtoul(buf, &end, 10);
  if (errno || *end || v > INT32_MAX)
    return -1;
  *out = (uint32_t)v;
  return 0;
}

int bench_place_parse_list(const char *s, uint32_t *out, uint32_t max) {
  uint32_t n = 0;
  for (const char *p = s; p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    uint32_t v;
    if (n >= max || parse_ordinal(p, len, &v) < 0)
      return -1;
    for (uint32_t i = 0; i < n; i++)
      if (out[i] == v)
        return -1;
    out[n++] = v;
    p = e ? e + 1 : NULL;
  }
  return (int)n;
}

int bench_place_local_rank(char *(*get)(const char *), uint32_t *rank,
                           const char **from) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
                                     "PMI_LOCAL_RANK", "MPI_LOCALRANKID",
                                     "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = get(vars[i]);
    if (!v)
      continue;
    *from = vars[i];
    return parse_ordinal(v, strlen(v), rank) < 0 ? -1 : 1;
  }
  return 0;
}

int bench_place_options(const char *backend, const char *base,
                        uint32_t ordinal, char *buf, size_t n) {
  size_t at = 0;
  if (!n)
    return -1;
  buf[0] = '\0';
  for (const char *p = base; p && *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len && !(len >= 7 && !strncmp(p, "device=", 7))) {
      if (at + (at != 0) + len >= n)
        return -1;
      if (at)
        buf[at++] = ',';
      memcpy(buf + at, p, len);
      at += len;
      buf[at] = '\0';
    }
    p = e ? e + 1 : NULL;
  }
  if (backend && !strcmp(backend, "sim"))
    return 0;
  int w = snprintf(buf + at, n - at, "%sdevice=%u", at ? "," : "", ordinal);
  return w < 0 || (size_t)w >= n - at ? -1 : 0;
}
