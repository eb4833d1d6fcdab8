#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "test.h"

int main(void) {
  ASSERT_STREQ(hbg_err_name(0), "HBG_OK");
  ASSERT_STREQ(hbg_err_name(HBG_E_INVAL), "HBG_E_INVAL");
  ASSERT_STREQ(hbg_err_name(HBG_E_IMG_HASH), "HBG_E_IMG_HASH");
  ASSERT_STREQ(hbg_err_name(12345), "HBG_E_UNKNOWN");
  ASSERT_STREQ(hbg_strerror(HBG_E_NOMEM), "out of host memory");
  ASSERT_STREQ(hbg_strerror(-9999), "unknown error");
  /* pinned values */
  ASSERT_EQ(HBG_E_INVAL, -1);
  ASSERT_EQ(HBG_E_FATAL, -10);
  ASSERT_EQ(HBG_E_IMG_TRUNCATED, -32);
  ASSERT_EQ(HBG_E_IMG_TENSOR_ALIGN, -47);
  ASSERT_EQ(HBG_E_IMG_BOUNDARY_WRITE, -48);
  ASSERT_EQ(HBG_E_IMG_VIEW_WRITE, -49);
  /* every code has a distinct name and a message */
#define CHECK(name, val, msg)                                                  \
  ASSERT(strcmp(hbg_err_name(val), "HBG_E_" #name) == 0);                      \
  ASSERT(strcmp(hbg_strerror(val), msg) == 0);                                 \
  ASSERT(val < 0);
  HBG_ERRNO_MAP(CHECK)
#undef CHECK
  ASSERT_EQ(hbg_version_number(), HBG_VERSION_NUMBER);
  ASSERT_STREQ(hbg_version_string(), HBG_VERSION_STRING);
  ASSERT_STREQ(hbg_dev_op_name(HBG_DEV_OP_MEM_ALLOC), "mem_alloc");
  ASSERT(hbg_dev_op_name(9999) == NULL);
  printf("errors: ok\n");
  return 0;
}
