#include <stdarg.h>
#include <stdio.h>

#include "common/util.h"

unsigned hbg_version_number(void) { return HBG_VERSION_NUMBER; }
const char *hbg_version_string(void) { return HBG_VERSION_STRING; }

const char *hbg_err_name(int err) {
  switch (err) {
  case HBG_OK:
    return "HBG_OK";
#define HBG__ERR_NAME(name, val, msg)                                          \
  case HBG_E_##name:                                                           \
    return "HBG_E_" #name;
    HBG_ERRNO_MAP(HBG__ERR_NAME)
#undef HBG__ERR_NAME
  default:
    return "HBG_E_UNKNOWN";
  }
}

const char *hbg_strerror(int err) {
  switch (err) {
  case HBG_OK:
    return "success";
#define HBG__ERR_MSG(name, val, msg)                                           \
  case HBG_E_##name:                                                           \
    return msg;
    HBG_ERRNO_MAP(HBG__ERR_MSG)
#undef HBG__ERR_MSG
  default:
    return "unknown error";
  }
}

/* The one per-thread message slot: configuration errors, device open
 * failures (hbg_device_open_error() reads the same slot). */
static _Thread_local char last_error[2048]; /* room for a linker log */

const char *hbg_last_error(void) { return last_error; }

void hbg__error_clear(void) { last_error[0] = '\0'; }

void hbg__error_set(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
}
