/*
 * One thread at a time per runtime: the public calls that change a runtime
 * or its binds take its guard (core.h) on entry and give it back on
 * return, so that a second thread entering one meanwhile gets HBG_E_BUSY
 * and a message naming the call the first is in, instead of racing it.
 */
#include <time.h>

#include "common/util.h"
#include "core/core.h"

int hbg__guard_busy(const hbg__guard *g, const char *name) {
  const char *other = atomic_load_explicit(&g->call, memory_order_relaxed);
  hbg__error_set("%s: the runtime is in use by another thread (in %s); a "
                 "runtime and its binds are used from one thread at a time",
                 name, other ? other : "a call");
  return HBG_E_BUSY;
}

void hbg__guard_enter_wait(hbg__guard *g, const char *name) {
  const struct timespec nap = {0, 20000};
  while (!hbg__guard_try(g, name))
    nanosleep(&nap, NULL);
}
