/* Small open-addressing hash maps keyed by (u64, u32) (internal; map.c). */
#ifndef HBG_CORE_MAP_H
#define HBG_CORE_MAP_H

#include <stdint.h>

/* Every map entry starts with this key header. */
typedef struct hbg__mkey {
  uint64_t k1;
  uint32_t k2;
  uint32_t used;
} hbg__mkey;

typedef struct hbg__map {
  void *slots;     /* array of entries, power-of-two count */
  uint32_t cap;    /* number of entries */
  uint32_t count;  /* entries in use */
  uint32_t esize;  /* entry size */
} hbg__map;

/* maps */
int hbg__map_init(hbg__map *m, uint32_t esize, uint32_t cap);
void hbg__map_free(hbg__map *m);
void hbg__map_clear(hbg__map *m);
/* Find the entry for (k1, k2); with create, insert a zeroed one (whose
 * first fields the caller fills). @return entry or NULL (absent / no mem). */
void *hbg__map_get(hbg__map *m, uint64_t k1, uint32_t k2, int create);
/* Iterate: i from 0 while < cap; returns NULL for empty slots. */
void *hbg__map_at(hbg__map *m, uint32_t i);
/* Remove the entry for (k1, k2) if present. Entries may move: pointers into
 * the map are invalid afterwards. */
void hbg__map_del(hbg__map *m, uint64_t k1, uint32_t k2);

#endif
