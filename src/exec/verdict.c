#include "exec/verdict.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* Dropped entries are only marked dead and swept when they are half the
 * table, so freeing many buffers costs O(1) each. */

enum { VC_PENDING = 1, VC_VALID = 2, VC_DEAD = 3 };

struct hbg__verdict {
  hbg_devptr addr;
  uint64_t size;
  uint64_t hash;
  uint32_t state;  /* VC_* */
  hbg_def_hdr hdr; /* the header as validated */
  void *blob;      /* the checker's copy of the bytes, or NULL */
};

int hbg__vcache_init(hbg__vcache *c) {
  memset(c, 0, sizeof *c);
  return pthread_mutex_init(&c->mu, NULL) ? HBG_E_NOMEM : 0;
}

static void vc_clear(hbg__vcache *c) {
  for (uint32_t i = 0; i < c->n; i++)
    free(c->v[i].blob);
  c->n = 0;
  c->n_dead = 0;
  c->max_size = 0;
}

void hbg__vcache_fini(hbg__vcache *c) {
  vc_clear(c);
  free(c->v);
  pthread_mutex_destroy(&c->mu);
}

static uint32_t vc_lower(const hbg__vcache *c, hbg_devptr a) {
  uint32_t lo = 0, hi = c->n;
  while (lo < hi) {
    uint32_t m = lo + (hi - lo) / 2;
    if (c->v[m].addr < a)
      lo = m + 1;
    else
      hi = m;
  }
  return lo;
}

static void vc_kill(hbg__vcache *c, hbg__verdict *v) {
  if (v->state != VC_DEAD) {
    v->state = VC_DEAD;
    c->n_dead++;
  }
  free(v->blob);
  v->blob = NULL;
}

static void vc_sweep(hbg__vcache *c) {
  uint32_t w = 0;
  c->max_size = 0;
  for (uint32_t i = 0; i < c->n; i++) {
    if (c->v[i].state == VC_DEAD)
      continue;
    c->v[w++] = c->v[i];
    c->max_size = HBG__MAX(c->max_size, c->v[i].size);
  }
  c->n = w;
  c->n_dead = 0;
}

int hbg__vcache_begin(hbg__vcache *c, hbg_devptr a, uint64_t size,
                      const hbg_def_hdr *cur, hbg_def_hdr *hdr) {
  int hit = 0;
  pthread_mutex_lock(&c->mu);
  if (c->n_dead > 32 && c->n_dead * 2 > c->n)
    vc_sweep(c);
  uint32_t i = vc_lower(c, a);
  for (uint32_t j = i; j < c->n && c->v[j].addr == a; j++) {
    hbg__verdict *v = &c->v[j];
    if (v->state == VC_VALID && v->size == size && v->hash == cur->hash &&
        memcmp(&v->hdr, cur, sizeof *cur) == 0) {
      *hdr = v->hdr;
      hit = 1;
    } else {
      vc_kill(c, v);
    }
  }
  if (!hit) {
    if (c->n == HBG__VCACHE_MAX) {
      vc_clear(c);
      i = 0;
    }
    if (HBG__RESERVE(c->v, c->cap, (uint64_t)c->n + 1) < 0)
      goto out;
    memmove(&c->v[i + 1], &c->v[i], (size_t)(c->n - i) * sizeof *c->v);
    c->n++;
    hbg__verdict *v = &c->v[i];
    memset(v, 0, sizeof *v);
    v->addr = a;
    v->size = size;
    v->hash = cur->hash;
    v->state = VC_PENDING;
    v->hdr = *cur;
    c->max_size = HBG__MAX(c->max_size, size);
  }
out:
  pthread_mutex_unlock(&c->mu);
  return hit;
}

void hbg__vcache_end(hbg__vcache *c, hbg_devptr a, uint64_t size,
                     uint64_t hash, int ok, void *blob) {
  pthread_mutex_lock(&c->mu);
  for (uint32_t j = vc_lower(c, a); j < c->n && c->v[j].addr == a; j++) {
    hbg__verdict *v = &c->v[j];
    if (v->state == VC_PENDING && v->size == size && v->hash == hash) {
      if (ok) {
        v->state = VC_VALID;
        v->blob = blob;
        blob = NULL;
      } else {
        vc_kill(c, v);
      }
    }
  }
  pthread_mutex_unlock(&c->mu);
  free(blob);
}

int hbg__vcache_copy(hbg__vcache *c, hbg_devptr a, uint64_t size, void *dst,
                     hbg_def_hdr *hdr) {
  int hit = 0;
  pthread_mutex_lock(&c->mu);
  for (uint32_t j = vc_lower(c, a); j < c->n && c->v[j].addr == a; j++) {
    const hbg__verdict *v = &c->v[j];
    if (v->state == VC_VALID && v->size == size && v->blob) {
      memcpy(dst, v->blob, (size_t)size);
      *hdr = v->hdr;
      hit = 1;
      break;
    }
  }
  pthread_mutex_unlock(&c->mu);
  return hit;
}

static void vc_kill_range(hbg__vcache *c, hbg_devptr a, hbg_devptr hi) {
  if (c->n == c->n_dead)
    return;
  hbg_devptr from = a > c->max_size ? a - c->max_size : 0;
  for (uint32_t i = vc_lower(c, from); i < c->n && c->v[i].addr < hi; i++)
    if (c->v[i].addr + c->v[i].size > a)
      vc_kill(c, &c->v[i]);
}

void hbg__vcache_invalidate(hbg__vcache *c, hbg_devptr a, uint64_t len) {
  if (len == 0)
    return;
  pthread_mutex_lock(&c->mu);
  vc_kill_range(c, a, a + len < a ? UINT64_MAX : a + len);
  pthread_mutex_unlock(&c->mu);
}

void hbg__vcache_invalidate_n(hbg__vcache *c, const hbg_devptr *lo,
                              const hbg_devptr *hi, uint32_t n, size_t stride) {
  pthread_mutex_lock(&c->mu);
  for (uint32_t k = 0; k < n; k++) {
    const hbg_devptr l = *(const hbg_devptr *)((const char *)lo + k * stride);
    const hbg_devptr h = *(const hbg_devptr *)((const char *)hi + k * stride);
    if (h > l)
      vc_kill_range(c, l, h);
  }
  pthread_mutex_unlock(&c->mu);
}
