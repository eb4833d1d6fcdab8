/*
 * The public helpers over hbg.h's tensors (hbg_dtype_size,
 * hbg_tensor_contig, hbg_tensor_extent): here, at the bottom of the
 * layers, because every layer sizes tensors (graph's recorder and
 * Definitions, the kernels' argument checks, core's binds, the
 * workloads).
 */
#include <string.h>

#include <hbg/hbg.h>

#include "common/util.h"

uint32_t hbg_dtype_size(uint32_t dtype) {
  switch (dtype) {
  case HBG_DTYPE_F32:
  case HBG_DTYPE_I32:
    return 4;
  case HBG_DTYPE_F16:
  case HBG_DTYPE_BF16:
    return 2;
  case HBG_DTYPE_I64:
    return 8;
  case HBG_DTYPE_U8:
    return 1;
  default:
    return 0;
  }
}

int hbg_tensor_contig(hbg_tensor *t, uint64_t addr, uint64_t offset,
                      uint32_t dtype, uint32_t ndim, const uint32_t *dims,
                      uint32_t mode) {
  HBG__RETURN_IF(!t || !dims || ndim == 0 || ndim > HBG_MAX_DIMS,
                 HBG_E_INVAL);
  HBG__RETURN_IF(hbg_dtype_size(dtype) == 0, HBG_E_INVAL);
  HBG__RETURN_IF(mode < HBG_ACCESS_IN || mode > HBG_ACCESS_INOUT, HBG_E_INVAL);
  hbg_tensor r;
  memset(&r, 0, sizeof r);
  uint64_t stride = 1;
  for (uint32_t i = ndim; i-- > 0;) {
    HBG__RETURN_IF(dims[i] == 0 || stride > UINT32_MAX, HBG_E_INVAL);
    r.shape[i] = dims[i];
    r.strides[i] = (uint32_t)stride;
    stride *= dims[i];
  }
  r.addr = addr;
  r.offset = offset;
  r.dtype = (uint8_t)dtype;
  r.ndim = (uint8_t)ndim;
  r.mode = (uint8_t)mode;
  *t = r;
  return 0;
}

uint64_t hbg_tensor_extent(const hbg_tensor *t) {
  if (!t || t->ndim == 0 || t->ndim > HBG_MAX_DIMS)
    return 0;
  uint64_t es = hbg_dtype_size(t->dtype);
  if (!es)
    return 0;
  uint64_t last = 0, span, bytes;
  for (uint32_t i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0)
      return 0;
    if (hbg__mul_u64(t->shape[i] - 1, t->strides[i], &span) ||
        hbg__add_u64(last, span, &last))
      return 0;
  }
  if (hbg__add_u64(last, 1, &last) || hbg__mul_u64(last, es, &bytes))
    return 0;
  return bytes;
}
