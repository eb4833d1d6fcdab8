/*
 * The device layer's internal interface for the layers above it (core,
 * workload): what they may ask of a device beyond the public ABI of
 * hbg_device.h, so that none of them includes a backend's headers or the
 * device object's layout (device_internal.h, private to src/device/).
 * Each built-in backend describes itself to the registry (device.c) with
 * one hbg__backend: its ops table and the optional hooks below.
 */
#ifndef HBG_DEVICE_DEVICE_H
#define HBG_DEVICE_DEVICE_H

#include <stddef.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_peer.h>

/* What a peer executor runs: a workload's kernel calls, as the workload
 * layer (src/workload/peer.c) hands them down, so that no backend calls
 * up into it. */
typedef struct hbg__peer_src {
  hbg_workload *w;
  /* hbg_workload_nodes: the calls of a step */
  int (*nodes)(hbg_workload *w, uint32_t step, uint64_t heap,
               hbg_workload_node *out, uint32_t cap, uint32_t *n);
  uint64_t node_heap_bytes; /* hbg_workload_info.node_heap_bytes */
  const char *name;         /* the kind's hbg_peer_name, for messages */
} hbg__peer_src;

/* The peer executors a backend runs (hbg_peer.h), on its own peer object;
 * create copies *src. */
typedef struct hbg__peer_ops {
  int (*create)(hbg_device *dev, const hbg__peer_src *src, int kind,
                void **out);
  int (*launch)(void *p, uint32_t step);
  int (*wait)(void *p, hbg_peer_stats *st);
  void (*destroy)(void *p);
} hbg__peer_ops;

typedef struct hbg__backend {
  const hbg_dev_ops *ops;
  /* hbg_kernel_register's backend half: k[0..n) already checked for what
   * every device needs (kernel_reg.c); dev is the backend's own device.
   * Names what is wrong in hbg_last_error(). NULL: no user kernels. */
  int (*kernel_register)(hbg_device *dev, const hbg_kernel_impl *k,
                         uint32_t n);
  /* Task t (a user kernel) at submit or record: 0, or HBG_E_KERNEL with
   * why, where the device knows its implementations for good. NULL:
   * every id is accepted (the launch decides). */
  int (*user_kernel_check)(hbg_device *dev, const hbg_task *t, char *why,
                           size_t len);
  const hbg__peer_ops *peers; /* NULL: no peer executors */
  /* The host address of device range [addr, addr + len), which must lie
   * inside one live allocation or import, where the device's memory is
   * host-addressable (the sim). NULL: it is not (device memory). */
  int (*host_ptr)(hbg_device *dev, hbg_devptr addr, uint64_t len,
                  void **out);
} hbg__backend;

/* The built-in backend doing dev's work (through fault wrappers: the
 * wrapped device's), and in *impl (optional) that device; NULL for a
 * backend outside the registry. */
const hbg__backend *hbg__backend_of(hbg_device *dev, hbg_device **impl);

/* @return non-zero when dev (through a fault wrapper: its inner device)
 * implements event_elapsed, so a start event is worth recording. */
int hbg__dev_times_events(hbg_device *dev);

/* The host address of [addr, addr + bytes) on dev (through fault
 * wrappers: the wrapped device's), where its memory is host-addressable.
 * @return 0 and *out, HBG_E_UNSUPPORTED (device memory the host cannot
 * address: cuda, acl, a backend outside the registry), HBG_E_RANGE (not
 * inside one live allocation or import), or HBG_E_INVAL. */
int hbg__dev_host_ptr(hbg_device *dev, hbg_devptr addr, uint64_t bytes,
                      void **out);

/* Task t on dev, at submit or record (`who` names the call): 0, or
 * HBG_E_KERNEL with hbg_last_error() naming `who`, the kernel and the
 * reason, where t's user kernel has no implementation on a device that
 * knows its implementations for good (user_kernel_check). */
int hbg__dev_user_kernel_check(hbg_device *dev, const hbg_task *t,
                               const char *who);

#endif
