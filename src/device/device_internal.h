/* Core-side device object and the built-in backend list. Not installed. */
#ifndef HBG_DEVICE_INTERNAL_H
#define HBG_DEVICE_INTERNAL_H

#include <hbg/hbg_device.h>

struct hbg_device {
  const hbg_dev_ops *ops;
  void *impl;
  int has_native;
  int64_t native_code;
  char native_msg[256];
  hbg_trace_fn trace_fn;
  void *trace_user;
};

extern const hbg_dev_ops hbg__sim_ops;
extern const hbg_dev_ops hbg__fault_ops;
#ifdef HBG_HAVE_CUDA
extern const hbg_dev_ops hbg__cuda_ops;
#endif
#ifdef HBG_HAVE_ACL
extern const hbg_dev_ops hbg__acl_ops;
#endif

#endif
