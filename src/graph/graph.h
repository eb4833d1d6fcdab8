/*
 * Graph layer (internal): recording, Definition and Submission images, and
 * the validator the device side runs on untrusted bytes.
 *
 * Ownership: a recorder is owned by the bind that opened it; a finished
 * Definition (hbg__def) is owned by the runtime's graph cache; views point
 * into caller memory and own nothing.
 */
#ifndef HBG_GRAPH_GRAPH_H
#define HBG_GRAPH_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include <hbg/hbg.h>

#include "graph/image.h"

/* Inside a recording, an own output's address is HBG__HEAP_TAG | heap byte
 * offset; later inner tasks pass it back to read it (internal source). */
#define HBG__HEAP_TAG 0xFEED000000000000ull
#define HBG__HEAP_TAG_MASK 0xFFFF000000000000ull
#define HBG__HEAP_ALIGN HBG_IMG_HEAP_ALIGN

/* Bytes from element 0 to one past the last element of a tensor described
 * by these fields; 0 when any field is invalid (dtype, ndim, mode, a zero dim
 * below ndim, a non-zero dim or stride at or above ndim) or on overflow. */
uint64_t hbg__shape_extent(uint32_t dtype, uint32_t ndim, uint32_t mode,
                           const uint32_t *shape, const uint32_t *strides);

/* ---- host side: a finished Definition ---- */

typedef struct hbg__def {
  uint8_t *image;      /* HBG_IMG_ALIGN-aligned, size bytes, owned */
  uint32_t size;
  uint64_t hash;       /* == header hash */
  uint64_t heap_size;
  uint32_t n_nodes;
  uint64_t kscr_floats; /* the most built-in kernel scratch (floats) one
                           node's call needs (hbg__task_scratch_floats;
                           0 from hbg__def_from_image) */
  uint32_t n_btensors;
  uint32_t n_bscalars;
  const hbg_def_bsig *bsig; /* into image */
  uint8_t *balign; /* per boundary tensor: the alignment of element 0 that
                      it and its views need (max element size), owned */
  uint8_t *bmode;  /* per boundary tensor: how the inner tasks use it (the
                      HBG_ACCESS_* bits of every inner tensor on it or on a
                      view of it); its signature's mode when none does;
                      owned */
  /* Replays over aliasing boundary tensors (races.c): bwritten, some node
   * writes a boundary tensor; order, the boundary tensors by start
   * address at the last replay (a sorting hint); alias, per-boundary
   * access lists and the closure of the dependencies, built by the first
   * replay with two overlapping boundary tensors, one written. */
  int bwritten;
  uint32_t *order;
  struct hbg__def_alias *alias;
} hbg__def;

typedef struct hbg__def_alias hbg__def_alias;
void hbg__def_alias_free(hbg__def_alias *a); /* accepts NULL */

void hbg__def_free(hbg__def *d); /* accepts NULL */
/* Fill d->balign, d->bmode, d->bwritten and d->order from the image
 * (tensors and bsig tables). @return 0 or HBG_E_NOMEM. */
int hbg__def_init_align(hbg__def *d);

/* Check a replay's boundary tensors (bt[i] of extent ext[i]): no bytes
 * that two nodes the recorded dependencies do not order access (one
 * writing), or that one node reads and writes under two names (unless it
 * runs in place on the identical tensor), may be shared by two of them.
 * scratch: room for 2 * n_btensors u64. Costs one pass over the tensors
 * in address order when their order is the last replay's (d->order), and
 * per overlapping pair, one written, a look at their accesses (past 4096
 * nodes, or 65536 access pairs, such an overlap is refused).
 * @return 0, HBG_E_NOMEM, or HBG_E_INVAL with hbg_last_error() naming both
 * tensors and the shared bytes. */
int hbg__def_check_alias(hbg__def *d, const hbg_tensor *bt,
                         const uint64_t *ext, uint64_t *scratch);

/* ---- recording ---- */

/* Start recording a graph whose boundary is (bt, nbt) tensors and
 * (bs, nbs) scalars. The arrays are borrowed until finish/abort. */
int hbg__rec_begin(const hbg_tensor *bt, uint32_t nbt, const uint64_t *bs,
                   uint32_t nbs, hbg_recorder **out);
/* From now on, hbg_record_task also checks each task's kernel signature
 * (hbg__task_kernel_check). The runtime always asks for it; the graph
 * layer's own tests record structures with placeholder kernels. */
void hbg__rec_check_kernels(hbg_recorder *r);
/* With kernel checks on, hbg_record_task also calls fn(ctx, task, who) for
 * each inner task whose kernel is a user kernel; a negative result fails
 * the task (the runtime asks its device whether it can run the kernel). */
void hbg__rec_kernel_hook(hbg_recorder *r,
                          int (*fn)(void *ctx, const hbg_task *t,
                                    const char *who),
                          void *ctx);
/* Build the Definition from the recorded inner tasks.
 * @return 0, the first error an hbg_record_task call returned (the recording
 * is incomplete), HBG_E_EMPTY (no task), HBG_E_NOMEM, HBG_E_LIMIT. The
 * recorder is freed in every case. */
int hbg__rec_finish(hbg_recorder *r, hbg__def **out);
/* Free a recorder without building (callback failed). Accepts NULL. */
void hbg__rec_abort(hbg_recorder *r);
/* hbg_last_error() of the first hbg_record_task call that failed on r, or
 * NULL when none did (valid until r is freed). */
const char *hbg__rec_error(const hbg_recorder *r);
/* Build a Definition directly from an image (copies it; validates it).
 * Used by tests and `hbg inspect`. */
int hbg__def_from_image(const void *img, uint64_t len, hbg__def **out);

/* Check a replay's boundary against the recorded signature (dtype, ndim,
 * mode, shape, strides of each tensor; tensor and scalar counts), then each
 * tensor's element 0 against d->balign. On failure hbg_last_error() says
 * what differs ("boundary tensor 2: shape [4, 8], recorded [4, 16]").
 * @return 0, HBG_E_SIGNATURE, or HBG_E_INVAL (misaligned). */
int hbg__def_check_boundary(const hbg__def *d, const hbg_tensor *bt,
                            uint32_t nbt, uint32_t nbs);

/* ---- Submission images ---- */

/* @return bytes of a Submission for d (with the Definition inline when
 * inline_def), a multiple of HBG_IMG_ALIGN. */
uint32_t hbg__sub_size(const hbg__def *d, int inline_def);
/* Write a Submission into dst (cap bytes, 8-byte aligned). The boundary must
 * already have passed hbg__def_check_boundary: only each tensor's addr and
 * offset are written (the rest is the Definition's signature).
 * @return bytes written (> 0) or HBG_E_LIMIT when cap is too small. */
int hbg__sub_write(void *dst, uint32_t cap, const hbg__def *d,
                   uint64_t full_key, uint32_t occurrence,
                   const hbg_tensor *bt, const uint64_t *bs, int inline_def);

/* ---- validator (untrusted bytes; never reads out of [img, img+len)) ---- */

/* Views of validated images (hbg_image.h's). */
typedef hbg_img_def_view hbg__def_view;
typedef hbg_img_sub_view hbg__sub_view;
typedef hbg_img_win_view hbg__win_view;

/* Full Definition check: magic, version, sizes, offsets, alignment, counts,
 * CSR consistency (indices, fanin/fanout mirror, acyclic, roots), tensor and
 * scalar source references, heap ranges, hash.
 * @return 0 (and *out) or a specific HBG_E_IMG_* code. */
int hbg__def_validate(const void *img, uint64_t len, hbg__def_view *out);
/* Same checks without the hash (for callers that verified it already). */
int hbg__def_validate_nohash(const void *img, uint64_t len,
                             hbg__def_view *out);
/* Submission structure, its boundary records (addr != 0) and its own hash
 * (not the inline Definition's contents; validate that with
 * hbg__def_validate on sub->inline_def). */
int hbg__sub_validate(const void *img, uint64_t len, hbg__sub_view *out);
/* Submission against its Definition: def_hash, def_size and counts. The
 * boundary signature lives only in the Definition (a Submission cannot
 * express a different one). Then element 0 of each boundary tensor and of
 * each view of one must be aligned to its dtype's size.
 * @return 0, HBG_E_IMG_DEF or HBG_E_IMG_TENSOR_ALIGN. */
int hbg__sub_check_def(const hbg__sub_view *s, const hbg__def_view *d);
/* The alignment part of hbg__sub_check_def (counts already matched); on
 * failure *bad (optional) is the Definition tensor record whose element 0
 * is misaligned, UINT32_MAX for a boundary tensor no node uses.
 * @return 0 or HBG_E_IMG_TENSOR_ALIGN. */
int hbg__sub_check_align(const hbg__sub_view *s, const hbg__def_view *d,
                         uint32_t *bad);
/* Task window structure: header, index, each entry's bounds and counts,
 * deps pointing at earlier tasks. */
int hbg__win_validate(const void *img, uint64_t len, hbg__win_view *out);
/* Entry i of a validated window. */
const hbg_win_task *hbg__win_task(const hbg__win_view *w, uint32_t i);

/* ---- content hash ---- */
uint64_t hbg__hash(const void *p, uint64_t len);
/* Hash of an image whose 8-byte hash field sits at hash_off, as if zero. */
uint64_t hbg__hash_skip(const void *p, uint64_t len, uint64_t hash_off);

/* ---- readable dump (hbg inspect) ---- */
int hbg__image_dump(const void *img, uint64_t len, int json, FILE *out);

#endif
