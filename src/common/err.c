#include <hbg/hbg.h>

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
