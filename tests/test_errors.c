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
  /* Values are pinned forever: this table is written out by hand, not
   * generated from HBG_ERRNO_MAP, so renumbering or renaming a code fails
   * here (a new code is appended to the map and to this table). */
  static const struct {
    int value;
    const char *name;
  } pinned[] = {
      {-1, "HBG_E_INVAL"},
      {-2, "HBG_E_NOMEM"},
      {-3, "HBG_E_DEVMEM"},
      {-4, "HBG_E_DEVICE"},
      {-5, "HBG_E_UNSUPPORTED"},
      {-6, "HBG_E_NOTFOUND"},
      {-7, "HBG_E_STATE"},
      {-8, "HBG_E_RANGE"},
      {-9, "HBG_E_AGAIN"},
      {-10, "HBG_E_FATAL"},
      {-11, "HBG_E_RECORD"},
      {-12, "HBG_E_EMPTY"},
      {-13, "HBG_E_NESTED"},
      {-14, "HBG_E_SIGNATURE"},
      {-15, "HBG_E_LIMIT"},
      {-16, "HBG_E_IO"},
      {-17, "HBG_E_LOAD"},
      {-18, "HBG_E_INJECTED"},
      {-19, "HBG_E_VERIFY"},
      {-20, "HBG_E_KERNEL"},
      {-21, "HBG_E_BUSY"},
      {-22, "HBG_E_TIMEOUT"},
      {-32, "HBG_E_IMG_TRUNCATED"},
      {-33, "HBG_E_IMG_MAGIC"},
      {-34, "HBG_E_IMG_VERSION"},
      {-35, "HBG_E_IMG_SIZE"},
      {-36, "HBG_E_IMG_OFFSET"},
      {-37, "HBG_E_IMG_ALIGN"},
      {-38, "HBG_E_IMG_COUNT"},
      {-39, "HBG_E_IMG_CSR"},
      {-40, "HBG_E_IMG_CYCLE"},
      {-41, "HBG_E_IMG_ROOTS"},
      {-42, "HBG_E_IMG_REF"},
      {-43, "HBG_E_IMG_HASH"},
      {-44, "HBG_E_IMG_KIND"},
      {-45, "HBG_E_IMG_DEF"},
      {-46, "HBG_E_IMG_FIELD"},
      {-47, "HBG_E_IMG_TENSOR_ALIGN"},
      {-48, "HBG_E_IMG_BOUNDARY_WRITE"},
      {-49, "HBG_E_IMG_VIEW_WRITE"},
  };
  for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++)
    ASSERT_STREQ(hbg_err_name(pinned[i].value), pinned[i].name);
  /* no two codes share a value, and each has its own message */
  static const int all[] = {
#define VALUE(name, val, msg) val,
      HBG_ERRNO_MAP(VALUE)
#undef VALUE
  };
  const size_t n = sizeof all / sizeof all[0];
  for (size_t i = 0; i < n; i++) {
    ASSERT_LT(all[i], 0);
    ASSERT(strcmp(hbg_strerror(all[i]), "unknown error") != 0);
    for (size_t j = i + 1; j < n; j++) {
      ASSERT_NE(all[i], all[j]);
      ASSERT(strcmp(hbg_strerror(all[i]), hbg_strerror(all[j])) != 0);
    }
  }
  ASSERT_EQ(hbg_version_number(), HBG_VERSION_NUMBER);
  ASSERT_STREQ(hbg_version_string(), HBG_VERSION_STRING);
  ASSERT_STREQ(hbg_dev_op_name(HBG_DEV_OP_MEM_ALLOC), "mem_alloc");
  ASSERT(hbg_dev_op_name(9999) == NULL);
  printf("errors: ok\n");
  return 0;
}
