/*
 * Peer executors (hbg_peer.h): names, argument checks, and the executor of
 * the workload's device, found through the registry (device/device.h: a
 * backend's hbg__backend.peers; the cuda backend's are
 * src/device/cuda/cuda_peer.c). A peer is that backend's object behind
 * the ops that made it.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg_device.h>
#include <hbg/hbg_peer.h>

#include "common/util.h"
#include "device/device.h"
#include "workload/wl.h"

struct hbg_peer {
  const hbg__peer_ops *ops;
  void *impl;
};

const char *hbg_peer_name(int kind) {
  switch (kind) {
  case HBG_PEER_EAGER:
    return "eager";
  case HBG_PEER_CUDA_GRAPH:
    return "cuda-graph";
  default:
    return NULL;
  }
}

int hbg_peer_parse(const char *name, int *kind) {
  HBG__RETURN_IF(!name || !kind, HBG_E_INVAL);
  for (int k = HBG_PEER_EAGER; k <= HBG_PEER_CUDA_GRAPH; k++)
    if (strcmp(name, hbg_peer_name(k)) == 0) {
      *kind = k;
      return 0;
    }
  return HBG_E_INVAL;
}

int hbg_peer_create(hbg_workload *w, int kind, hbg_peer **out) {
  hbg__error_clear();
  HBG__RETURN_IF(!w || !out || !hbg_peer_name(kind), HBG_E_INVAL);
  hbg_device *dev = hbg_runtime_device(w->rt), *impl = NULL;
  const hbg__backend *be = dev ? hbg__backend_of(dev, &impl) : NULL;
  if (!be || !be->peers) {
    const char *name = dev ? hbg_device_name(dev) : NULL;
    hbg__error_set("peer %s: needs the cuda device; this workload's runtime "
                   "uses %s",
                   hbg_peer_name(kind), name ? name : "no device");
    return HBG_E_UNSUPPORTED;
  }
  hbg_workload_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  HBG__TRY(hbg_workload_get_info(w, &info));
  const hbg__peer_src src = {.w = w,
                             .nodes = hbg_workload_nodes,
                             .node_heap_bytes = info.node_heap_bytes,
                             .name = hbg_peer_name(kind)};
  hbg_peer *p = calloc(1, sizeof *p);
  HBG__RETURN_IF(!p, HBG_E_NOMEM);
  p->ops = be->peers;
  int rc = p->ops->create(impl, &src, kind, &p->impl);
  if (rc < 0) {
    free(p);
    return rc;
  }
  *out = p;
  return 0;
}

int hbg_peer_launch(hbg_peer *p, uint32_t step) {
  hbg__error_clear();
  HBG__RETURN_IF(!p, HBG_E_INVAL);
  return p->ops->launch(p->impl, step);
}

int hbg_peer_wait(hbg_peer *p, hbg_peer_stats *st) {
  hbg__error_clear();
  HBG__RETURN_IF(!p, HBG_E_INVAL);
  HBG__RETURN_IF(st && st->struct_size < offsetof(hbg_peer_stats,
                                                  control_plane_ns),
                 HBG_E_INVAL);
  return p->ops->wait(p->impl, st);
}

void hbg_peer_destroy(hbg_peer *p) {
  if (!p)
    return;
  p->ops->destroy(p->impl);
  free(p);
}
