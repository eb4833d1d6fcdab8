/*
 * The peer executors' cuda side (cuda_peer.c), behind hbg_peer.h's public
 * functions (src/core/peer.c). Built only with HBG_HAVE_CUDA; needs no
 * CUDA header. Not installed.
 */
#ifndef HBG_DEVICE_CUDA_CUDA_PEER_H
#define HBG_DEVICE_CUDA_CUDA_PEER_H

#include <hbg/hbg_device.h>
#include <hbg/hbg_peer.h>

/* A peer of `kind` for w on dev (a cuda device). @return as
 * hbg_peer_create. */
int hbg__cu_peer_create(hbg_device *dev, hbg_workload *w, int kind,
                        hbg_peer **out);
int hbg__cu_peer_launch(hbg_peer *p, uint32_t step);
int hbg__cu_peer_wait(hbg_peer *p, hbg_peer_stats *st);
void hbg__cu_peer_destroy(hbg_peer *p);

#endif
