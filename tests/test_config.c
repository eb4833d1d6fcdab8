/* Configuration errors are errors: every invalid HBG_* value and every
 * explicit field out of its documented range fails hbg_runtime_create with
 * HBG_E_INVAL and a per-thread message naming the variable and the value. */
#include <pthread.h>
#include <stdlib.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "test.h"

static const char *const vars[] = {"HBG_POLICY", "HBG_DEVICE",
                                   "HBG_DEVICE_OPTIONS", "HBG_ARENA_BYTES",
                                   "HBG_PIPELINE_DEPTH"};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
}

static void contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle))
    T_FAIL("'%s' does not contain '%s'", hay, needle);
}

/* var=value is rejected: named in env_invalid and by create's message. */
static void bad_env(const char *var, const char *value) {
  clear_env();
  setenv(var, value, 1);
  hbg_config cfg;
  hbg_config_init(&cfg);
  ASSERT_STREQ(cfg.env_invalid, var);
  contains(hbg_last_error(), var);
  hbg_runtime *rt = NULL;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
  ASSERT(rt == NULL);
  char want[128];
  snprintf(want, sizeof want, "%s='%s'", var, value);
  contains(hbg_last_error(), want);
  printf("  %s\n", hbg_last_error());
  /* a NULL config reads the environment too */
  ASSERT_ERR(hbg_runtime_create(NULL, &rt), HBG_E_INVAL);
  contains(hbg_last_error(), want);
  unsetenv(var);
}

static void good_env(void) {
  clear_env();
  setenv("HBG_POLICY", "deferred", 1);
  setenv("HBG_ARENA_BYTES", "64K", 1);
  setenv("HBG_PIPELINE_DEPTH", "3", 1);
  setenv("HBG_DEVICE", "sim", 1);
  setenv("HBG_DEVICE_OPTIONS", "mem=8M", 1);
  hbg_config cfg;
  hbg_config_init(&cfg);
  ASSERT(cfg.env_invalid == NULL);
  ASSERT_STREQ(hbg_last_error(), "");
  ASSERT_EQ(cfg.policy, HBG_POLICY_DEFERRED);
  ASSERT_UEQ(cfg.arena_bytes, 64u << 10);
  ASSERT_EQ(cfg.pipeline_depth, 3);
  ASSERT_STREQ(cfg.device_options, "mem=8M");
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_EQ(hbg_runtime_policy(rt), HBG_POLICY_DEFERRED);
  ASSERT_EQ(hbg_runtime_deps(rt), HBG_DEPS_EXPLICIT);
  hbg_runtime_destroy(rt);
  /* the dependency mode as created, which the workloads read back */
  cfg.deps = HBG_DEPS_INFERRED;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_EQ(hbg_runtime_deps(rt), HBG_DEPS_INFERRED);
  hbg_runtime_destroy(rt);
  ASSERT_ERR(hbg_runtime_deps(NULL), HBG_E_INVAL);

  /* the documented maxima are accepted; an empty value counts as unset */
  char max[32];
  snprintf(max, sizeof max, "%llu", (unsigned long long)HBG_ARENA_BYTES_MAX);
  setenv("HBG_ARENA_BYTES", max, 1);
  setenv("HBG_PIPELINE_DEPTH", "64", 1);
  setenv("HBG_POLICY", "", 1);
  hbg_config_init(&cfg);
  ASSERT(cfg.env_invalid == NULL);
  ASSERT_UEQ(cfg.arena_bytes, HBG_ARENA_BYTES_MAX);
  ASSERT_EQ(cfg.pipeline_depth, HBG_PIPELINE_DEPTH_MAX);
  ASSERT_EQ(cfg.policy, HBG_POLICY_COALESCED);
  clear_env();
}

/* Explicit fields beyond the documented limits. */
static void bad_field(hbg_config *cfg, const char *field) {
  hbg_runtime *rt = NULL;
  ASSERT_ERR(hbg_runtime_create(cfg, &rt), HBG_E_INVAL);
  ASSERT(rt == NULL);
  contains(hbg_last_error(), field);
  printf("  %s\n", hbg_last_error());
}

/* The last error, a bad policy's, lists every policy. */
static void names_every_policy(void) {
  for (int i = 0; i < HBG_POLICY__COUNT; i++)
    contains(hbg_last_error(), hbg_policy_name(i));
}

static void fields(void) {
  clear_env();
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.arena_bytes = HBG_ARENA_BYTES_MAX + 1;
  bad_field(&cfg, "arena_bytes=4294967297");
  hbg_config_init(&cfg);
  cfg.pipeline_depth = HBG_PIPELINE_DEPTH_MAX + 1;
  bad_field(&cfg, "pipeline_depth=65");
  hbg_config_init(&cfg);
  cfg.policy = HBG_POLICY__COUNT;
  bad_field(&cfg, "policy");
  names_every_policy();
  hbg_config_init(&cfg);
  cfg.device = NULL;
  bad_field(&cfg, "device");
  hbg_config_init(&cfg);
  cfg.struct_size = 8;
  bad_field(&cfg, "struct_size=8");
  /* an explicit unknown device names itself too */
  hbg_config_init(&cfg);
  cfg.device = "no-such-device";
  hbg_runtime *rt = NULL;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_NOTFOUND);
  contains(hbg_last_error(), "no-such-device");
  /* 0 still means the default, and a success leaves no message */
  hbg_config_init(&cfg);
  cfg.arena_bytes = 0;
  cfg.pipeline_depth = 0;
  cfg.device_options = "mem=8M";
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_STREQ(hbg_last_error(), "");
  hbg_runtime_destroy(rt);
}

/* The device's own message, with the variable it came from. */
static void device_options_env(void) {
  clear_env();
  setenv("HBG_DEVICE_OPTIONS", "mem=1", 1);
  hbg_config cfg;
  hbg_config_init(&cfg);
  hbg_runtime *rt = NULL;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
  contains(hbg_last_error(), "HBG_DEVICE_OPTIONS='mem=1'");
  contains(hbg_last_error(), "sim: bad or out-of-range value in 'mem=1'");
  /* hbg_device_open_error() reads the same slot */
  ASSERT(hbg_device_open_error() == hbg_last_error());
  clear_env();
}

static void *other_thread(void *arg) {
  (void)arg;
  /* the main thread's message is not visible here */
  return (void *)(strcmp(hbg_last_error(), "") == 0 ? "ok" : NULL);
}

static void per_thread(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.pipeline_depth = 1000;
  hbg_runtime *rt;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_INVAL);
  ASSERT(hbg_last_error()[0] != '\0');
  pthread_t t;
  void *res = NULL;
  ASSERT_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
  ASSERT_EQ(pthread_join(t, &res), 0);
  ASSERT(res != NULL);
  contains(hbg_last_error(), "pipeline_depth=1000");
}

int main(void) {
  bad_env("HBG_ARENA_BYTES", "-1");
  bad_env("HBG_ARENA_BYTES", "1T");
  bad_env("HBG_ARENA_BYTES", "99999999999999999999");
  bad_env("HBG_ARENA_BYTES", "16G");
  bad_env("HBG_ARENA_BYTES", "0");
  bad_env("HBG_ARENA_BYTES", "12abc");
  bad_env("HBG_PIPELINE_DEPTH", "0");
  bad_env("HBG_PIPELINE_DEPTH", "1000");
  bad_env("HBG_PIPELINE_DEPTH", "-3");
  bad_env("HBG_POLICY", "bogus");
  names_every_policy();
  bad_env("HBG_DEVICE", "no-such-device");
  good_env();
  fields();
  device_options_env();
  per_thread();
  printf("config: ok\n");
  return 0;
}
