#include "common/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hbg__opt_get(const char *opts, const char *key, char *buf, size_t len) {
  if (!opts || !key)
    return 0;
  size_t klen = strlen(key);
  const char *p = opts;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
      size_t vlen = n - klen - 1;
      if (vlen + 1 > len)
        return -1;
      memcpy(buf, p + klen + 1, vlen);
      buf[vlen] = '\0';
      return 1;
    }
    if (!end)
      break;
    p = end + 1;
  }
  return 0;
}

int hbg__parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-')
    return HBG_E_INVAL;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s)
    return HBG_E_INVAL;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k')
    mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm')
    mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g')
    mul = 1ull << 30, end++;
  if (*end != '\0')
    return HBG_E_INVAL;
  uint64_t r;
  if (hbg__mul_u64((uint64_t)v, mul, &r))
    return HBG_E_INVAL;
  *out = r;
  return 0;
}

int hbg__opt_u64(const char *opts, const char *key, uint64_t *out) {
  char buf[64];
  int f = hbg__opt_get(opts, key, buf, sizeof buf);
  if (f < 0)
    return HBG_E_INVAL;
  if (f == 0)
    return 0;
  return hbg__parse_u64(buf, out);
}

int hbg__env_u64(const char *name, uint64_t *out) {
  const char *v = getenv(name);
  if (!v || !*v)
    return 0;
  return hbg__parse_u64(v, out);
}

/* Copies through memcpy: *pp may be any object pointer type. */
int hbg__reserve(void *pp, uint32_t *cap, uint64_t need, size_t elem) {
  if (need <= *cap)
    return 0;
  if (need > UINT32_MAX)
    return HBG_E_LIMIT;
  uint64_t nc = *cap ? *cap : 16;
  while (nc < need)
    nc *= 2;
  if (nc > UINT32_MAX)
    nc = UINT32_MAX;
  void *p;
  memcpy(&p, pp, sizeof p);
  void *np = realloc(p, (size_t)nc * elem);
  if (!np)
    return HBG_E_NOMEM;
  memcpy(pp, &np, sizeof np);
  *cap = (uint32_t)nc;
  return 0;
}

int hbg__span_add(hbg__span **v, uint32_t *n, uint32_t *cap, uint64_t a,
                  uint64_t len, uint32_t tag) {
  if (len == 0)
    return 0;
  HBG__TRY(hbg__reserve(v, cap, (uint64_t)*n + 1, sizeof **v));
  (*v)[(*n)++] = (hbg__span){a, a + len < a ? UINT64_MAX : a + len, tag};
  return 0;
}

static int span_cmp(const void *a, const void *b) {
  const hbg__span *x = a, *y = b;
  return (x->lo > y->lo) - (x->lo < y->lo);
}

uint32_t hbg__span_first_overlap(hbg__span *rd, uint32_t n_rd,
                                 const hbg__span *wr, uint32_t n_wr) {
  if (n_rd == 0)
    return UINT32_MAX;
  qsort(rd, n_rd, sizeof *rd, span_cmp);
  /* A span of rd that overlaps w starts at most `width` below w->lo. */
  uint64_t width = 0;
  for (uint32_t i = 0; i < n_rd; i++)
    width = HBG__MAX(width, rd[i].hi - rd[i].lo);
  for (uint32_t k = 0; k < n_wr; k++) {
    const hbg__span *w = &wr[k];
    uint64_t from = w->lo > width ? w->lo - width : 0;
    uint32_t lo = 0, hi = n_rd;
    while (lo < hi) {
      uint32_t m = lo + (hi - lo) / 2;
      if (rd[m].lo < from)
        lo = m + 1;
      else
        hi = m;
    }
    for (uint32_t i = lo; i < n_rd && rd[i].lo < w->hi; i++)
      if (rd[i].hi > w->lo)
        return k;
  }
  return UINT32_MAX;
}
