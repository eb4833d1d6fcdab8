/* Tensor helpers, config defaults and environment overrides. */
#include <hbg/hbg.h>

#include <stdlib.h>

#include "test.h"

int main(void) {
  hbg_tensor t;
  uint32_t d[3] = {2, 3, 4};
  ASSERT_OK(hbg_tensor_contig(&t, 0x100, 8, HBG_DTYPE_F32, 3, d, HBG_ACCESS_IN));
  ASSERT_EQ(t.strides[0], 12);
  ASSERT_EQ(t.strides[1], 4);
  ASSERT_EQ(t.strides[2], 1);
  ASSERT_EQ(t.shape[3], 0);
  ASSERT_UEQ(hbg_tensor_extent(&t), 24 * 4);
  ASSERT_ERR(hbg_tensor_contig(NULL, 0, 0, HBG_DTYPE_F32, 3, d, 1), HBG_E_INVAL);
  ASSERT_ERR(hbg_tensor_contig(&t, 0, 0, 99, 3, d, 1), HBG_E_INVAL);
  ASSERT_ERR(hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 0, d, 1), HBG_E_INVAL);
  ASSERT_ERR(hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 5, d, 1), HBG_E_INVAL);
  ASSERT_ERR(hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 3, d, 0), HBG_E_INVAL);
  uint32_t z[2] = {2, 0};
  ASSERT_ERR(hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 2, z, 1), HBG_E_INVAL);
  uint32_t big[3] = {2, 65536, 65536};
  ASSERT_ERR(hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 3, big, 1), HBG_E_INVAL);
  /* extent overflow is 0, never a wrapped small number */
  hbg_tensor h = {.addr = 1, .ndim = 4, .dtype = HBG_DTYPE_I64, .mode = 1};
  for (int i = 0; i < 4; i++) {
    h.shape[i] = UINT32_MAX;
    h.strides[i] = UINT32_MAX;
  }
  ASSERT_UEQ(hbg_tensor_extent(&h), 0);
  ASSERT_UEQ(hbg_tensor_extent(NULL), 0);
  ASSERT_EQ(hbg_dtype_size(HBG_DTYPE_BF16), 2);
  ASSERT_EQ(hbg_dtype_size(0), 0);

  int p = -1;
  ASSERT_OK(hbg_policy_parse("pinned-eager", &p));
  ASSERT_EQ(p, HBG_POLICY_PINNED_EAGER);
  ASSERT_ERR(hbg_policy_parse("eager", &p), HBG_E_INVAL);
  ASSERT_STREQ(hbg_policy_name(HBG_POLICY_COALESCED), "coalesced");
  ASSERT(hbg_policy_name(7) == NULL);

  hbg_config cfg;
  unsetenv("HBG_POLICY");
  unsetenv("HBG_ARENA_BYTES");
  hbg_config_init(&cfg);
  ASSERT_EQ(cfg.struct_size, sizeof cfg);
  ASSERT_STREQ(cfg.device, "sim");
  ASSERT_UEQ(cfg.arena_bytes, 16u << 20);
  ASSERT_EQ(cfg.pipeline_depth, 2);
  setenv("HBG_POLICY", "deferred", 1);
  setenv("HBG_ARENA_BYTES", "4M", 1);
  setenv("HBG_PIPELINE_DEPTH", "3", 1);
  hbg_config_init(&cfg);
  ASSERT_EQ(cfg.policy, HBG_POLICY_DEFERRED);
  ASSERT_UEQ(cfg.arena_bytes, 4u << 20);
  ASSERT_EQ(cfg.pipeline_depth, 3);
  setenv("HBG_ARENA_BYTES", "lots", 1); /* ignored, default kept */
  hbg_config_init(&cfg);
  ASSERT_UEQ(cfg.arena_bytes, 16u << 20);
  printf("tensor/config: ok\n");
  return 0;
}
