/*
 * hbg_image.h keeps its own copies of hbg.h's constants so that it can stand
 * alone (device compilers, no libc). This file pins the two together: a
 * change to either that breaks the agreement fails the build. It also holds
 * the content-hash callback the library's validators pass to the header.
 */
#include <hbg/hbg.h>
#include <hbg/hbg_image.h>

#include "graph/graph.h"

#define PIN(a, b) HBG_IMAGE_STATIC_ASSERT((long)(a) == (long)(b), #a " == " #b)

PIN(HBG_IMG_MAX_DIMS, HBG_MAX_DIMS);
PIN(HBG_IMG_KERNEL_BUILTIN_COUNT, HBG_KERNEL__COUNT);
PIN(HBG_IMG_KERNEL_USER_MIN, HBG_KERNEL_USER_MIN);
PIN(HBG_IMG_DTYPE_F32, HBG_DTYPE_F32);
PIN(HBG_IMG_DTYPE_F16, HBG_DTYPE_F16);
PIN(HBG_IMG_DTYPE_BF16, HBG_DTYPE_BF16);
PIN(HBG_IMG_DTYPE_I32, HBG_DTYPE_I32);
PIN(HBG_IMG_DTYPE_I64, HBG_DTYPE_I64);
PIN(HBG_IMG_DTYPE_U8, HBG_DTYPE_U8);
PIN(HBG_IMG_ACCESS_IN, HBG_ACCESS_IN);
PIN(HBG_IMG_ACCESS_OUT, HBG_ACCESS_OUT);
PIN(HBG_IMG_ACCESS_INOUT, HBG_ACCESS_INOUT);
PIN(HBG_IMG_SCALAR_STATIC, HBG_SCALAR_STATIC);
PIN(HBG_IMG_SCALAR_BOUNDARY, HBG_SCALAR_BOUNDARY);
PIN(HBG_IMG_OK, HBG_OK);
PIN(HBG_IMG_E_INVAL, HBG_E_INVAL);
PIN(HBG_IMG_E_RANGE, HBG_E_RANGE);
PIN(HBG_IMG_E_KERNEL, HBG_E_KERNEL);
PIN(HBG_IMG_E_TRUNCATED, HBG_E_IMG_TRUNCATED);
PIN(HBG_IMG_E_MAGIC, HBG_E_IMG_MAGIC);
PIN(HBG_IMG_E_VERSION, HBG_E_IMG_VERSION);
PIN(HBG_IMG_E_SIZE, HBG_E_IMG_SIZE);
PIN(HBG_IMG_E_OFFSET, HBG_E_IMG_OFFSET);
PIN(HBG_IMG_E_ALIGN, HBG_E_IMG_ALIGN);
PIN(HBG_IMG_E_COUNT, HBG_E_IMG_COUNT);
PIN(HBG_IMG_E_CSR, HBG_E_IMG_CSR);
PIN(HBG_IMG_E_CYCLE, HBG_E_IMG_CYCLE);
PIN(HBG_IMG_E_ROOTS, HBG_E_IMG_ROOTS);
PIN(HBG_IMG_E_REF, HBG_E_IMG_REF);
PIN(HBG_IMG_E_HASH, HBG_E_IMG_HASH);
PIN(HBG_IMG_E_KIND, HBG_E_IMG_KIND);
PIN(HBG_IMG_E_DEF, HBG_E_IMG_DEF);
PIN(HBG_IMG_E_FIELD, HBG_E_IMG_FIELD);
PIN(HBG_IMG_E_TENSOR_ALIGN, HBG_E_IMG_TENSOR_ALIGN);
PIN(HBG_IMG_E_BOUNDARY_WRITE, HBG_E_IMG_BOUNDARY_WRITE);
PIN(HBG_IMG_E_VIEW_WRITE, HBG_E_IMG_VIEW_WRITE);
/* The library itself is little-endian only (the header lets a compiler
 * that does not say pass). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hbg images are little-endian; big-endian hosts need byte swapping"
#endif

uint64_t hbg__img_hash(const void *img, uint64_t len, uint64_t hash_off,
                       void *user) {
  (void)user;
  return hbg__hash_skip(img, len, hash_off);
}
