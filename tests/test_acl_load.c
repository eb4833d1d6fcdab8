/* acl backend: loading the AscendCL library and resolving its symbols. */
#include <dlfcn.h>
#include <stdlib.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "hbgstub.h"
#include "test.h"

static const char *stub_path, *nosym_path;

static int probe(char *buf, size_t len) {
  return hbg_device_find("acl")->probe(buf, len);
}

static void test_missing_library(void) {
  hbg_device *d = NULL;
  char opts[128];
  snprintf(opts, sizeof opts, "lib=/nonexistent/libascendcl.so");
  ASSERT_ERR(hbg_device_open("acl", opts, &d), HBG_E_LOAD);
  ASSERT(d == NULL);
  /* the loader's own message is the native message */
  const char *e = hbg_device_open_error();
  ASSERT(strstr(e, "/nonexistent/libascendcl.so") != NULL);
  ASSERT(strstr(e, "No such file") != NULL || strstr(e, "cannot open") != NULL);

  /* the default path comes from HBG_ACL_LIB */
  setenv("HBG_ACL_LIB", "/nonexistent", 1);
  ASSERT_ERR(hbg_device_open("acl", NULL, &d), HBG_E_LOAD);
  ASSERT(strstr(hbg_device_open_error(), "/nonexistent") != NULL);
  char why[256] = "";
  ASSERT_ERR(probe(why, sizeof why), HBG_E_LOAD);
  ASSERT(strstr(why, "/nonexistent") != NULL);
  setenv("HBG_ACL_LIB", stub_path, 1);
  ASSERT_OK(probe(why, sizeof why));
}

static void test_missing_symbol(void) {
  hbg_device *d = NULL;
  char opts[1024];
  snprintf(opts, sizeof opts, "lib=%s", nosym_path);
  ASSERT_ERR(hbg_device_open("acl", opts, &d), HBG_E_LOAD);
  const char *e = hbg_device_open_error();
  ASSERT(strstr(e, "aclrtMemcpyAsync") != NULL);
  /* nothing was initialised and the library was closed again */
  ASSERT(dlopen(nosym_path, RTLD_NOW | RTLD_NOLOAD) == NULL);

  setenv("HBG_ACL_LIB", nosym_path, 1);
  char why[256] = "";
  ASSERT_ERR(probe(why, sizeof why), HBG_E_LOAD);
  ASSERT(strstr(why, "aclrtMemcpyAsync") != NULL);
  setenv("HBG_ACL_LIB", stub_path, 1);
}

static void test_load_ok(void) {
  hbgstub s;
  ASSERT_EQ(hbgstub_attach(&s, stub_path), 0);
  s.reset();
  hbg_device *d = NULL;
  ASSERT_OK(hbg_device_open("acl", NULL, &d));
  ASSERT_STREQ(hbg_device_name(d), "acl");
  ASSERT_STREQ(hbgstub_seq(&s, 0), "aclInit aclrtSetDevice");
  ASSERT_UEQ(s.call_arg(1, 0), 0); /* device 0 */
  ASSERT_UEQ(s.count("inited"), 1);
  hbg_device_close(d);
  ASSERT_STREQ(hbgstub_seq(&s, 0),
               "aclInit aclrtSetDevice aclrtResetDevice aclFinalize");
  ASSERT_UEQ(s.count("inited"), 0);
  ASSERT_UEQ(s.count("device_refs"), 0);

  /* options: lib= wins over the environment; device=N */
  char opts[1024];
  snprintf(opts, sizeof opts, "lib=%s,device=3", stub_path);
  setenv("HBG_ACL_LIB", "/nonexistent", 1);
  s.reset();
  ASSERT_OK(hbg_device_open("acl", opts, &d));
  ASSERT_STREQ(hbgstub_seq(&s, 0), "aclInit aclrtSetDevice");
  ASSERT_UEQ(s.call_arg(1, 0), 3);
  hbg_device_close(d);
  ASSERT_UEQ(s.call_arg(2, 0), 3);
  setenv("HBG_ACL_LIB", stub_path, 1);
  ASSERT_ERR(hbg_device_open("acl", "device=-1", &d), HBG_E_INVAL);
  ASSERT_ERR(hbg_device_open("acl", "device=4294967296", &d), HBG_E_INVAL);
}

int main(void) {
  stub_path = hbgstub_path("HBG_ACL_LIB", hbg_device_find("acl") != NULL);
  nosym_path = hbgstub_path("HBG_ACL_NOSYM_LIB", 1);
  test_missing_library();
  test_missing_symbol();
  test_load_ok();
  printf("acl_load: ok\n");
  return 0;
}
