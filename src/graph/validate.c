/*
 * The library's validator entry points: thin wrappers over the one
 * implementation in include/hbg/hbg_image.h (which executors outside the
 * library use too), adding the XXH3 content-hash check the freestanding
 * header leaves to its caller.
 */
#include "graph/graph.h"

int hbg__def_validate(const void *img, uint64_t len, hbg__def_view *out) {
  return hbg_img_def_validate(img, len, hbg__img_hash, NULL, out);
}

int hbg__def_validate_nohash(const void *img, uint64_t len,
                             hbg__def_view *out) {
  return hbg_img_def_validate(img, len, NULL, NULL, out);
}

int hbg__sub_validate(const void *img, uint64_t len, hbg__sub_view *out) {
  return hbg_img_sub_validate(img, len, hbg__img_hash, NULL, out);
}

int hbg__sub_check_def(const hbg__sub_view *s, const hbg__def_view *d) {
  return hbg_img_sub_check_def(s, d);
}

int hbg__sub_check_align(const hbg__sub_view *s, const hbg__def_view *d,
                         uint32_t *bad) {
  return hbg_img_sub_check_align(s, d, bad);
}

int hbg__win_validate(const void *img, uint64_t len, hbg__win_view *out) {
  return hbg_img_win_validate(img, len, out);
}

const hbg_win_task *hbg__win_task(const hbg__win_view *w, uint32_t i) {
  return hbg_img_win_task(w, i);
}
