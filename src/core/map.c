#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/core.h"

static uint32_t mix(uint64_t k1, uint32_t k2) {
  uint64_t h = k1 ^ ((uint64_t)k2 * 0x9E3779B97F4A7C15ull);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return (uint32_t)h;
}

int hbg__map_init(hbg__map *m, uint32_t esize, uint32_t cap) {
  uint32_t c = 16;
  while (c < cap)
    c <<= 1;
  m->slots = calloc(c, esize);
  if (!m->slots)
    return HBG_E_NOMEM;
  m->cap = c;
  m->count = 0;
  m->esize = esize;
  return 0;
}

void hbg__map_free(hbg__map *m) {
  free(m->slots);
  memset(m, 0, sizeof *m);
}

void hbg__map_clear(hbg__map *m) {
  if (m->slots && m->count)
    memset(m->slots, 0, (size_t)m->cap * m->esize);
  m->count = 0;
}

void *hbg__map_at(hbg__map *m, uint32_t i) {
  hbg__mkey *e = (hbg__mkey *)((uint8_t *)m->slots + (size_t)i * m->esize);
  return e->used ? e : NULL;
}

static int grow(hbg__map *m) {
  hbg__map n;
  HBG__TRY(hbg__map_init(&n, m->esize, m->cap * 2));
  for (uint32_t i = 0; i < m->cap; i++) {
    hbg__mkey *e = hbg__map_at(m, i);
    if (!e)
      continue;
    uint32_t j = mix(e->k1, e->k2) & (n.cap - 1);
    while (((hbg__mkey *)((uint8_t *)n.slots + (size_t)j * n.esize))->used)
      j = (j + 1) & (n.cap - 1);
    memcpy((uint8_t *)n.slots + (size_t)j * n.esize, e, m->esize);
    n.count++;
  }
  free(m->slots);
  *m = n;
  return 0;
}

void *hbg__map_get(hbg__map *m, uint64_t k1, uint32_t k2, int create) {
  if (!m->slots)
    return NULL;
  if (create && (m->count + 1) * 4 > m->cap * 3 && grow(m) < 0)
    return NULL;
  uint32_t j = mix(k1, k2) & (m->cap - 1);
  for (;;) {
    hbg__mkey *e = (hbg__mkey *)((uint8_t *)m->slots + (size_t)j * m->esize);
    if (!e->used) {
      if (!create)
        return NULL;
      memset(e, 0, m->esize);
      e->k1 = k1;
      e->k2 = k2;
      e->used = 1;
      m->count++;
      return e;
    }
    if (e->k1 == k1 && e->k2 == k2)
      return e;
    j = (j + 1) & (m->cap - 1);
  }
}

/* Linear probing without tombstones: after removing an entry, shift back
 * every later entry of the run whose probe start lies at or before the
 * hole, so lookups never stop early. */
void hbg__map_del(hbg__map *m, uint64_t k1, uint32_t k2) {
  if (!m->slots)
    return;
  uint32_t mask = m->cap - 1;
  uint32_t j = mix(k1, k2) & mask;
  hbg__mkey *e;
  for (;;) {
    e = (hbg__mkey *)((uint8_t *)m->slots + (size_t)j * m->esize);
    if (!e->used)
      return;
    if (e->k1 == k1 && e->k2 == k2)
      break;
    j = (j + 1) & mask;
  }
  uint32_t hole = j;
  for (uint32_t i = (hole + 1) & mask;; i = (i + 1) & mask) {
    hbg__mkey *f = (hbg__mkey *)((uint8_t *)m->slots + (size_t)i * m->esize);
    if (!f->used)
      break;
    uint32_t home = mix(f->k1, f->k2) & mask;
    /* f may move to the hole when its home is not in (hole, i]. */
    if (((i - home) & mask) >= ((i - hole) & mask)) {
      memcpy((uint8_t *)m->slots + (size_t)hole * m->esize, f, m->esize);
      hole = i;
    }
  }
  memset((uint8_t *)m->slots + (size_t)hole * m->esize, 0, m->esize);
  m->count--;
}
