/* The device object and the built-in backend list, private to
 * src/device/ (the layers above use device/device.h). Not installed. */
#ifndef HBG_DEVICE_INTERNAL_H
#define HBG_DEVICE_INTERNAL_H

#include <hbg/hbg_device.h>

#include "device/device.h"

#include <stdatomic.h>

struct hbg_device {
  const hbg_dev_ops *ops;
  /* ops added after the first version, NULL where ops ends before them */
  int (*event_elapsed)(hbg_device *dev, hbg_dev_event *start,
                       hbg_dev_event *end, uint64_t *ns);
  int (*clock_ns)(hbg_device *dev, uint64_t *ns);
  int (*queue_wait_event)(hbg_device *dev, hbg_dev_queue *q,
                          hbg_dev_event *ev);
  int (*mem_import)(hbg_device *dev, uint64_t addr, size_t bytes,
                    hbg_devptr *out);
  int (*mem_unimport)(hbg_device *dev, hbg_devptr p);
  int (*queue_borrow)(hbg_device *dev, void *native, hbg_dev_queue **out);
  int (*queue_unborrow)(hbg_device *dev, hbg_dev_queue *q);
  int (*queue_capture)(hbg_device *dev, hbg_dev_queue *q, uint32_t *state,
                       uint64_t *id);
  int (*capture_retain)(hbg_device *dev, hbg_dev_queue *q, void *ptr,
                        void (*destroy)(void *ptr));
  /* The queues borrowed through this handle (hbg_dev_queue_borrow), which
   * the capture guard asks about before a call a capture forbids. */
  hbg_dev_queue *borrowed[HBG_DEV_BORROWED_MAX];
  uint32_t n_borrowed;
  void *impl;
  int has_native;
  int64_t native_code;
  char native_msg[256];
  hbg_trace_fn trace_fn;
  void *trace_user;
  _Atomic uint64_t free_failures; /* failed releases through this handle */
};

extern const hbg_dev_ops hbg__sim_ops;
extern const hbg_dev_ops hbg__fault_ops;
extern const hbg__backend hbg__sim_backend;
#ifdef HBG_HAVE_CUDA
extern const hbg_dev_ops hbg__cuda_ops;
extern const hbg__backend hbg__cuda_backend;
#endif
#ifdef HBG_HAVE_ACL
extern const hbg_dev_ops hbg__acl_ops;
#endif

/* The device doing dev's work: dev itself, or under fault wrappers the
 * wrapped one (NULL for NULL). The registry knows the wrappers; a backend
 * finds its own device through this, never through another backend's
 * calls. */
hbg_device *hbg__dev_base(hbg_device *dev);

#endif
