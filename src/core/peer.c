/*
 * Peer executors (hbg_peer.h): names, argument checks and the device
 * check; the executors themselves are the cuda backend's
 * (src/device/cuda/cuda_peer.c), absent from a build without it.
 */
#include <stddef.h>
#include <string.h>

#include <hbg/hbg_device.h>
#include <hbg/hbg_peer.h>

#include "common/util.h"
#include "workload/wl.h"
#ifdef HBG_HAVE_CUDA
#include "device/cuda/cuda_peer.h"
#endif

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
  hbg_device *dev = hbg_runtime_device(w->rt);
  const char *name = dev ? hbg_device_name(dev) : NULL;
  if (!name || strcmp(name, "cuda") != 0) {
    hbg__error_set("peer %s: needs the cuda device; this workload's runtime "
                   "uses %s",
                   hbg_peer_name(kind), name ? name : "no device");
    return HBG_E_UNSUPPORTED;
  }
#ifdef HBG_HAVE_CUDA
  return hbg__cu_peer_create(dev, w, kind, out);
#else
  return HBG_E_UNSUPPORTED; /* no cuda device without the backend */
#endif
}

int hbg_peer_launch(hbg_peer *p, uint32_t step) {
  hbg__error_clear();
  HBG__RETURN_IF(!p, HBG_E_INVAL);
#ifdef HBG_HAVE_CUDA
  return hbg__cu_peer_launch(p, step);
#else
  (void)step;
  return HBG_E_INVAL;
#endif
}

int hbg_peer_wait(hbg_peer *p, hbg_peer_stats *st) {
  hbg__error_clear();
  HBG__RETURN_IF(!p, HBG_E_INVAL);
  HBG__RETURN_IF(st && st->struct_size < offsetof(hbg_peer_stats,
                                                  control_plane_ns),
                 HBG_E_INVAL);
#ifdef HBG_HAVE_CUDA
  return hbg__cu_peer_wait(p, st);
#else
  return HBG_E_INVAL;
#endif
}

void hbg_peer_destroy(hbg_peer *p) {
#ifdef HBG_HAVE_CUDA
  hbg__cu_peer_destroy(p);
#else
  (void)p;
#endif
}
