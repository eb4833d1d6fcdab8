/* Core-side device object and the built-in backend list. Not installed. */
#ifndef HBG_DEVICE_INTERNAL_H
#define HBG_DEVICE_INTERNAL_H

#include <hbg/hbg_device.h>

#include <stdatomic.h>

struct hbg_device {
  const hbg_dev_ops *ops;
  /* ops added after the first version, NULL where ops ends before them */
  int (*event_elapsed)(hbg_device *dev, hbg_dev_event *start,
                       hbg_dev_event *end, uint64_t *ns);
  int (*clock_ns)(hbg_device *dev, uint64_t *ns);
  int (*queue_wait_event)(hbg_device *dev, hbg_dev_queue *q,
                          hbg_dev_event *ev);
  void *impl;
  int has_native;
  int64_t native_code;
  char native_msg[256];
  hbg_trace_fn trace_fn;
  void *trace_user;
  _Atomic uint64_t free_failures; /* failed releases through this handle */
};

/* @return non-zero when dev (through a fault wrapper: its inner device)
 * implements event_elapsed, so a start event is worth recording. */
int hbg__dev_times_events(hbg_device *dev);

extern const hbg_dev_ops hbg__sim_ops;
extern const hbg_dev_ops hbg__fault_ops;
#ifdef HBG_HAVE_CUDA
extern const hbg_dev_ops hbg__cuda_ops;
#endif
#ifdef HBG_HAVE_ACL
extern const hbg_dev_ops hbg__acl_ops;
#endif

#endif
