/* The sim's opt-in cost model: named presets, the cost keys that override
 * them, the modelled duration of a copy, and the absolute-deadline sleep
 * every modelled delay ends in. Sources for every preset value are in
 * docs/DEVICE_PROFILES.md. */
#include <errno.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "common/util.h"
#include "device/sim/sim_internal.h"

#define US(x) ((uint64_t)((x) * 1000.0 + 0.5))   /* µs -> ns */
#define GBPS(x) ((uint64_t)((x) * 1000.0 + 0.5)) /* GB/s -> MB/s */

/* Keep in step with docs/DEVICE_PROFILES.md. */
static const struct {
  const char *name;
  hbg__sim_model m;
} profiles[] = {
    {"none", {0}},
    {"ascend-a2",
     {.copy_ns = US(8.5),
      .h2d_mbps = GBPS(3.85),
      .pageable_mbps = 0,
      .chunk_ns = 0,
      .alloc_ns = US(8.5),
      .free_ns = 0,
      .launch_ns = 0,
      .free_sync = 0}},
    {"h200-pcie5",
     {.copy_ns = US(10),
      .h2d_mbps = GBPS(53),
      .pageable_mbps = GBPS(41),
      .chunk_ns = US(0.5),
      .alloc_ns = US(50),
      .free_ns = US(14),
      .launch_ns = US(2),
      .free_sync = 1}},
};

int hbg__sim_profile(const char *p, size_t n, hbg__sim_model *model,
                     const char **name) {
  for (size_t i = 0; i < HBG__ARRAY_LEN(profiles); i++)
    if (strlen(profiles[i].name) == n && !memcmp(profiles[i].name, p, n)) {
      *model = profiles[i].m;
      *name = profiles[i].name;
      return 0;
    }
  return HBG_E_NOTFOUND;
}

/* Microseconds and GB/s with up to three decimals, stored as thousandths
 * (ns and MB/s). @return 0 and *out, or -1. */
static int parse_milli(const char *s, size_t n, uint64_t max,
                       uint64_t *out) {
  uint64_t v = 0;
  size_t i = 0, frac = 0;
  int dot = 0, digits = 0;
  for (; i < n; i++) {
    char c = s[i];
    if (c == '.' && !dot) {
      dot = 1;
      continue;
    }
    if (c < '0' || c > '9' || (dot && ++frac > 3))
      return -1;
    if (hbg__mul_u64(v, 10, &v) < 0 || hbg__add_u64(v, (uint64_t)(c - '0'),
                                                    &v) < 0)
      return -1;
    digits++;
  }
  for (; frac < 3; frac++)
    if (hbg__mul_u64(v, 10, &v) < 0)
      return -1;
  if (!digits || v > max)
    return -1;
  *out = v;
  return 0;
}

#define MAX_US UINT64_C(1000000000)  /* 1 s, in ns */
#define MAX_MBPS UINT64_C(100000000) /* 100 TB/s */

static const struct {
  const char *key;
  size_t off;
  uint64_t max; /* in stored units; 0 = a 0|1 flag */
} model_keys[] = {
    {"copy_us", offsetof(hbg__sim_model, copy_ns), MAX_US},
    {"h2d_gbps", offsetof(hbg__sim_model, h2d_mbps), MAX_MBPS},
    {"pageable_gbps", offsetof(hbg__sim_model, pageable_mbps), MAX_MBPS},
    {"chunk_us", offsetof(hbg__sim_model, chunk_ns), MAX_US},
    {"alloc_us", offsetof(hbg__sim_model, alloc_ns), MAX_US},
    {"free_us", offsetof(hbg__sim_model, free_ns), MAX_US},
    {"launch_us", offsetof(hbg__sim_model, launch_ns), MAX_US},
    {"free_sync", offsetof(hbg__sim_model, free_sync), 0},
};

int hbg__sim_model_key(const char *key, size_t klen, const char *val,
                       size_t vlen, hbg__sim_model *m, uint32_t *bit) {
  for (size_t k = 0; k < HBG__ARRAY_LEN(model_keys); k++) {
    if (strlen(model_keys[k].key) != klen ||
        memcmp(model_keys[k].key, key, klen))
      continue;
    char *field = (char *)m + model_keys[k].off;
    if (model_keys[k].max == 0) {
      if (vlen != 1 || (val[0] != '0' && val[0] != '1'))
        return HBG_E_INVAL;
      uint32_t f = (uint32_t)(val[0] - '0');
      memcpy(field, &f, sizeof f);
    } else {
      uint64_t v;
      if (parse_milli(val, vlen, model_keys[k].max, &v) < 0)
        return HBG_E_INVAL;
      memcpy(field, &v, sizeof v);
    }
    *bit = 1u << k;
    return 1;
  }
  return 0;
}

void hbg__sim_model_apply(hbg__sim_model *m, const hbg__sim_model *over,
                          uint32_t mask) {
  for (size_t k = 0; k < HBG__ARRAY_LEN(model_keys); k++) {
    if (!(mask & (1u << k)))
      continue;
    size_t sz = model_keys[k].max ? sizeof(uint64_t) : sizeof(uint32_t);
    memcpy((char *)m + model_keys[k].off,
           (const char *)over + model_keys[k].off, sz);
  }
}

/* bytes at mbps (10^6 B/s), in ns, rounded up; 0 when mbps is 0. */
static uint64_t xfer_ns(uint64_t bytes, uint64_t mbps) {
  if (!mbps)
    return 0;
  uint64_t num;
  if (hbg__mul_u64(bytes, 1000, &num) < 0)
    return UINT64_MAX / 2;
  return num / mbps + (num % mbps != 0);
}

uint64_t hbg__sim_model_copy(const hbg__sim_model *m, uint64_t bytes,
                             int pageable, int first) {
  if (!pageable)
    return m->copy_ns + xfer_ns(bytes, m->h2d_mbps);
  uint64_t bw = m->pageable_mbps ? m->pageable_mbps : m->h2d_mbps;
  return (first ? m->copy_ns : 0) + m->chunk_ns + xfer_ns(bytes, bw);
}

void hbg__sim_sleep_until(uint64_t deadline_ns) {
  struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                        .tv_nsec = (long)(deadline_ns % 1000000000u)};
#ifdef __linux__
  /* The default 50 µs slack would dwarf microsecond costs; the caller's
   * own setting is put back afterwards. */
  int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (old > 1)
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
#endif
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
#ifdef __linux__
  if (old > 1)
    prctl(PR_SET_TIMERSLACK, (unsigned long)old, 0, 0, 0);
#endif
}

void hbg__sim_model_delay(hbg__sim *s, uint64_t t0, uint64_t ns) {
  if (!ns)
    return;
  HBG__SIM_INC(s, modelled, 1);
  HBG__SIM_INC(s, modelled_ns, ns);
  if (s->vclock)
    atomic_fetch_add_explicit(&s->v_off, (int64_t)ns, memory_order_relaxed);
  else
    hbg__sim_sleep_until(t0 + ns);
}

uint64_t hbg__sim_vnow(hbg__sim *s) {
  uint64_t now = hbg__now_ns();
  if (!s->vclock)
    return now;
  return now + (uint64_t)atomic_load_explicit(&s->v_off, memory_order_relaxed);
}

void hbg__sim_vreach(hbg__sim *s, uint64_t v0, uint64_t target) {
  if (!s->vclock)
    return;
  uint64_t v = target > v0 ? target : v0;
  atomic_store_explicit(&s->v_off, (int64_t)(v - hbg__now_ns()),
                        memory_order_relaxed);
}
