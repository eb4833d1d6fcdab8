/*
 * The peer executors' cuda side (cuda_peer.c), which hbg_peer.h's public
 * functions (src/workload/peer.c) reach through the registry: the cuda
 * backend's hbg__backend.peers. Built only with HBG_HAVE_CUDA; needs no
 * CUDA header. Not installed.
 */
#ifndef HBG_DEVICE_CUDA_CUDA_PEER_H
#define HBG_DEVICE_CUDA_CUDA_PEER_H

#include "device/device.h"

extern const hbg__peer_ops hbg__cu_peer_ops;

#endif
