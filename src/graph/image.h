/*
 * On-device image formats: Graph Definition, Submission, task window.
 *
 * The layouts, constants, validator and node iterator are the public,
 * freestanding include/hbg/hbg_image.h (specified byte by byte in
 * docs/FORMAT.md); this internal wrapper adds only hbg.h, so the library's
 * files see the public API and the image contract together.
 * src/graph/image_abi.c checks that the two agree.
 */
#ifndef HBG_GRAPH_IMAGE_H
#define HBG_GRAPH_IMAGE_H

#include <stdint.h>

#include <hbg/hbg.h>
#include <hbg/hbg_image.h>

/* hbg_img_hash_fn for the validators: XXH3-64 with the hash field read as
 * zero (hbg__hash_skip; src/graph/image_abi.c). */
uint64_t hbg__img_hash(const void *img, uint64_t len, uint64_t hash_off,
                       void *user);

#endif
