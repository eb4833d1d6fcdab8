#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg_device.h>

#include "common/util.h"
#include "core/policy/policy.h"

const char *hbg_policy_name(int policy) {
  if (policy < 0 || policy >= HBG_POLICY__COUNT)
    return NULL;
  return hbg__policies[policy]->name;
}

int hbg_policy_parse(const char *name, int *out) {
  HBG__RETURN_IF(!name || !out, HBG_E_INVAL);
  for (int i = 0; i < HBG_POLICY__COUNT; i++)
    if (strcmp(name, hbg__policies[i]->name) == 0) {
      *out = i;
      return 0;
    }
  return HBG_E_INVAL;
}

static const char *const deps_names[HBG_DEPS__COUNT] = {"explicit",
                                                        "inferred"};
static const char *const record_names[HBG_RECORD__COUNT] = {"once",
                                                            "per-bind"};

static int name_parse(const char *const *names, int n, const char *name,
                      int *out) {
  HBG__RETURN_IF(!name || !out, HBG_E_INVAL);
  for (int i = 0; i < n; i++)
    if (strcmp(name, names[i]) == 0) {
      *out = i;
      return 0;
    }
  return HBG_E_INVAL;
}

const char *hbg_deps_name(int deps) {
  return deps >= 0 && deps < HBG_DEPS__COUNT ? deps_names[deps] : NULL;
}

int hbg_deps_parse(const char *name, int *out) {
  return name_parse(deps_names, HBG_DEPS__COUNT, name, out);
}

const char *hbg_record_name(int record) {
  return record >= 0 && record < HBG_RECORD__COUNT ? record_names[record]
                                                   : NULL;
}

int hbg_record_parse(const char *name, int *out) {
  return name_parse(record_names, HBG_RECORD__COUNT, name, out);
}

/* "not a policy (a, b, c)": every policy's name, from the table. */
static void policy_list(char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "not a policy ");
  for (int i = 0; i < HBG_POLICY__COUNT && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "(",
                          hbg__policies[i]->name);
  if (k < n)
    snprintf(buf + k, n - k, ")");
}

/* ---- configuration: one row per HBG_* variable ---- */

typedef enum cfg_kind {
  CFG_POLICY,
  CFG_DEVICE,
  CFG_STRING,
  CFG_UINT,
  CFG_NAMES /* a u32 field holding an index into names[0..hi) */
} cfg_kind;

typedef struct cfg_var {
  const char *env;   /* HBG_* variable */
  const char *field; /* hbg_config field it sets */
  cfg_kind kind;
  size_t off, size;  /* where the field is and its size */
  uint64_t lo, hi;   /* CFG_UINT (a u32 or u64 field): the variable's range;
                        an explicit field may also be 0 (= default);
                        CFG_NAMES: hi is the number of names */
  const char *const *names; /* CFG_NAMES */
} cfg_var;

#define CFG_VAR(env, field, kind, lo, hi)                                      \
  {env, #field, kind, offsetof(hbg_config, field),                            \
   sizeof(((hbg_config *)0)->field), lo, hi, NULL}
#define CFG_NAMED(env, field, names)                                           \
  {env, #field, CFG_NAMES, offsetof(hbg_config, field),                       \
   sizeof(((hbg_config *)0)->field), 0, HBG__ARRAY_LEN(names), names}

static const cfg_var cfg_vars[] = {
    CFG_VAR("HBG_POLICY", policy, CFG_POLICY, 0, 0),
    CFG_VAR("HBG_DEVICE", device, CFG_DEVICE, 0, 0),
    CFG_VAR("HBG_DEVICE_OPTIONS", device_options, CFG_STRING, 0, 0),
    CFG_VAR("HBG_ARENA_BYTES", arena_bytes, CFG_UINT, 1, HBG_ARENA_BYTES_MAX),
    CFG_VAR("HBG_PIPELINE_DEPTH", pipeline_depth, CFG_UINT, 1,
            HBG_PIPELINE_DEPTH_MAX),
    CFG_VAR("HBG_GRAPH_CACHE_MAX", graph_cache_max, CFG_UINT, 1, UINT32_MAX),
    CFG_NAMED("HBG_DEPS", deps, deps_names),
    CFG_NAMED("HBG_RECORD", record, record_names),
};

static void cfg_put_uint(hbg_config *cfg, const cfg_var *v, uint64_t u) {
  unsigned char *f = (unsigned char *)cfg + v->off;
  uint32_t u32 = (uint32_t)u;
  if (v->size == sizeof u)
    memcpy(f, &u, sizeof u);
  else
    memcpy(f, &u32, sizeof u32);
}

static uint64_t cfg_get_uint(const hbg_config *cfg, const cfg_var *v) {
  const unsigned char *f = (const unsigned char *)cfg + v->off;
  uint64_t u;
  uint32_t u32;
  if (v->size == sizeof u) {
    memcpy(&u, f, sizeof u);
    return u;
  }
  memcpy(&u32, f, sizeof u32);
  return u32;
}

/* Parse s for v into cfg. @return 0, or HBG_E_INVAL with why filled. */
static int cfg_parse(const cfg_var *v, const char *s, hbg_config *cfg,
                     char *why, size_t n) {
  int p;
  uint64_t u;
  switch (v->kind) {
  case CFG_POLICY:
    if (hbg_policy_parse(s, &p) < 0) {
      policy_list(why, n);
      return HBG_E_INVAL;
    }
    cfg_put_uint(cfg, v, (uint32_t)p);
    return 0;
  case CFG_DEVICE:
    if (!hbg_device_find(s)) {
      size_t k = (size_t)snprintf(why, n, "unknown device (built in:");
      for (uint32_t i = 0; i < hbg_device_count() && k < n; i++)
        k += (size_t)snprintf(why + k, n - k, " %s",
                              hbg_device_backend(i)->name);
      if (k < n)
        snprintf(why + k, n - k, ")");
      return HBG_E_INVAL;
    }
    /* fall through */
  case CFG_STRING:
    memcpy((unsigned char *)cfg + v->off, &s, sizeof s);
    return 0;
  case CFG_UINT:
    if (hbg__parse_u64(s, &u) < 0) {
      snprintf(why, n, "want an unsigned integer below 2^64 with an "
                       "optional K, M or G suffix");
      return HBG_E_INVAL;
    }
    if (u < v->lo || u > v->hi) {
      snprintf(why, n, "out of range %llu..%llu", (unsigned long long)v->lo,
               (unsigned long long)v->hi);
      return HBG_E_INVAL;
    }
    cfg_put_uint(cfg, v, u);
    return 0;
  case CFG_NAMES:
    if (name_parse(v->names, (int)v->hi, s, &p) < 0) {
      size_t k = (size_t)snprintf(why, n, "want one of");
      for (uint64_t i = 0; i < v->hi && k < n; i++)
        k += (size_t)snprintf(why + k, n - k, "%s %s", i ? "," : "",
                              v->names[i]);
      return HBG_E_INVAL;
    }
    cfg_put_uint(cfg, v, (uint32_t)p);
    return 0;
  }
  return HBG_E_INVAL;
}

static const cfg_var *cfg_var_by_env(const char *env) {
  for (size_t i = 0; i < HBG__ARRAY_LEN(cfg_vars); i++)
    if (env && strcmp(cfg_vars[i].env, env) == 0)
      return &cfg_vars[i];
  return NULL;
}

void hbg_config_init(hbg_config *cfg) {
  hbg__error_clear();
  if (!cfg)
    return;
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->policy = HBG_POLICY_COALESCED;
  cfg->device = "sim";
  cfg->arena_bytes = 16u << 20;
  cfg->pipeline_depth = 2;
  cfg->graph_cache_max = HBG__GRAPH_CACHE_DEFAULT;

  for (size_t i = 0; i < HBG__ARRAY_LEN(cfg_vars); i++) {
    const cfg_var *v = &cfg_vars[i];
    const char *s = getenv(v->env);
    char why[160];
    if (!s || !*s || cfg_parse(v, s, cfg, why, sizeof why) == 0)
      continue;
    if (!cfg->env_invalid) {
      cfg->env_invalid = v->env;
      hbg__error_set("%s='%s': %s", v->env, s, why);
    }
  }
}

int hbg__config_check(const hbg_config *cfg) {
  _Static_assert(offsetof(hbg_config, deps) == HBG_CONFIG_SIZE_V1,
                 "the first version ends where deps starts");
  if (cfg->struct_size != sizeof(hbg_config) &&
      cfg->struct_size != HBG_CONFIG_SIZE_V1) {
    hbg__error_set("hbg_config.struct_size=%u, expected %zu (fill the "
                   "config with hbg_config_init)",
                   cfg->struct_size, sizeof(hbg_config));
    return HBG_E_INVAL;
  }
  if (cfg->env_invalid) {
    const cfg_var *v = cfg_var_by_env(cfg->env_invalid);
    const char *s = v ? getenv(v->env) : NULL;
    hbg_config scratch = *cfg;
    char why[160];
    if (v && s && *s && cfg_parse(v, s, &scratch, why, sizeof why) < 0)
      hbg__error_set("%s='%s': %s", v->env, s, why);
    else
      hbg__error_set("%s had an invalid value when hbg_config_init read it",
                     cfg->env_invalid);
    return HBG_E_INVAL;
  }
  for (size_t i = 0; i < HBG__ARRAY_LEN(cfg_vars); i++) {
    const cfg_var *v = &cfg_vars[i];
    uint64_t u;
    if (v->off + v->size > cfg->struct_size)
      continue; /* a field the caller's struct does not have */
    switch (v->kind) {
    case CFG_POLICY:
      if (cfg->policy >= HBG_POLICY__COUNT) {
        char why[160];
        policy_list(why, sizeof why);
        hbg__error_set("hbg_config.%s=%u: %s", v->field, cfg->policy, why);
        return HBG_E_INVAL;
      }
      break;
    case CFG_UINT:
      u = cfg_get_uint(cfg, v);
      if (u > v->hi) {
        hbg__error_set("hbg_config.%s=%llu: above the maximum %llu", v->field,
                       (unsigned long long)u, (unsigned long long)v->hi);
        return HBG_E_INVAL;
      }
      break;
    case CFG_NAMES:
      u = cfg_get_uint(cfg, v);
      if (u >= v->hi) {
        hbg__error_set("hbg_config.%s=%llu: not one of the %llu values "
                       "(%s, ...)",
                       v->field, (unsigned long long)u,
                       (unsigned long long)v->hi, v->names[0]);
        return HBG_E_INVAL;
      }
      break;
    default:
      break;
    }
  }
  if (!cfg->device_handle && !cfg->device) {
    hbg__error_set("hbg_config.device is NULL and no device_handle is set");
    return HBG_E_INVAL;
  }
  return 0;
}

uint64_t hbg_scalar_f32(float value) {
  uint32_t u;
  memcpy(&u, &value, sizeof u);
  return u;
}

float hbg_scalar_to_f32(uint64_t scalar) {
  uint32_t u = (uint32_t)scalar;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint64_t hbg_scalar_u32(uint32_t value) { return value; }

uint64_t hbg_scalar_i64(int64_t value) { return (uint64_t)value; }

hbg_scalar hbg_scalar_static(uint64_t value) {
  hbg_scalar s = {.value = value, .kind = HBG_SCALAR_STATIC};
  return s;
}

hbg_scalar hbg_scalar_boundary(uint32_t index) {
  hbg_scalar s = {.kind = HBG_SCALAR_BOUNDARY, .index = index};
  return s;
}
