/*
 * Releasing what the runtime holds on its device. A failed release is
 * final: whether the device let go of the memory or object before it
 * failed is unknown, so the runtime forgets it. It is never reused (a bind
 * could share it with whatever the device hands out there next) and never
 * released again (that could release someone else's allocation). The
 * device handle counts the failure (hbg_dev_stats.free_failures); the first
 * one since hbg_runtime_destroy began is reported through
 * hbg_last_error().
 */
#include <stdio.h>

#include "common/util.h"
#include "core/core.h"

const char *hbg__native_why(hbg_runtime *rt, int rc) {
  int64_t code = 0;
  const char *why = NULL;
  if (hbg_device_native_error(rt->dev, &code, &why) < 0 || !why || !*why)
    why = hbg_strerror(rc);
  return why;
}

void hbg__release_failed(hbg_runtime *rt, int rc, const char *call,
                         const char *what, uint64_t addr) {
  if (rc >= 0)
    return;
  if (rt->rel_failed++)
    return;
  const char *why = hbg__native_why(rt, rc);
  snprintf(rt->rel_first, sizeof rt->rel_first, "%s of the %s (0x%llx): %s: %s",
           call, what, (unsigned long long)addr, hbg_err_name(rc), why);
}

void hbg__mem_release(hbg_runtime *rt, hbg_devptr d, const char *what) {
  if (d)
    hbg__release_failed(rt, hbg_dev_mem_free(rt->dev, d), "mem_free", what, d);
}

void hbg__host_release(hbg_runtime *rt, void *p, const char *what) {
  if (p)
    hbg__release_failed(rt, hbg_dev_host_free(rt->dev, p), "host_free", what,
                        (uint64_t)(uintptr_t)p);
}
