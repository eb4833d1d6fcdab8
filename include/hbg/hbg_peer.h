/*
 * Peer executors: the same decode step run the way a runtime without hbg
 * runs it on the same device, for measurement side by side with hbg's
 * upload policies (`hbg bench --arm`).
 *
 *   eager       one kernel launch per kernel call, every step.
 *   cuda-graph  the step's launches captured once into a CUDA graph and
 *               instantiated; every step replays it with one graph launch,
 *               after updating the kernel nodes whose parameters differ
 *               from the last step's (cuGraphExecKernelNodeSetParams).
 *
 * Both run the workload's kernel calls (hbg_workload_nodes) with the same
 * device kernels hbg's device executor runs, one call per launch, in the
 * calls' order on one stream, so their outputs equal the host reference
 * bit for bit (hbg_workload_verify). They need the cuda backend; another
 * device gives HBG_E_UNSUPPORTED. Each call is one CTA of 256 threads
 * (fewer where the device allows fewer per block) running the device
 * module's hbg_dc_node; docs/CUDA.md says what is counted where.
 *
 * Thread safety: one thread per peer; a peer uses its workload's runtime's
 * device, which the runtime shares.
 */
#ifndef HBG_HBG_PEER_H
#define HBG_HBG_PEER_H

#include <hbg/hbg.h>
#include <hbg/hbg_workload.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hbg_peer_kind {
  HBG_PEER_EAGER = 1,
  HBG_PEER_CUDA_GRAPH = 2
} hbg_peer_kind;

/* @return "eager" / "cuda-graph", or NULL for an unknown kind. */
HBG_API const char *hbg_peer_name(int kind);
/* @return 0 and *kind, or HBG_E_INVAL (unknown name). */
HBG_API int hbg_peer_parse(const char *name, int *kind);

typedef struct hbg_peer hbg_peer;

typedef struct hbg_peer_stats {
  uint32_t struct_size;
  uint32_t kind;             /* HBG_PEER_* */
  uint64_t control_plane_ns; /* hbg_peer_launch: entry until its last
                                driver call returned (host): the step's
                                call list built, then the launches (a
                                capture and instantiation included) */
  uint64_t exec_ns;          /* end of launch to completion (host, after
                                hbg_peer_wait) */
  uint64_t device_ns;        /* device time of the step: an event before
                                its first kernel to one after its last;
                                0 where the device keeps no timer */
  uint64_t nodes;            /* kernel calls in the step */
  uint64_t launches;         /* launch calls made: nodes (eager) or 1
                                (cuda-graph) */
  uint64_t updates;          /* cuda-graph: kernel nodes updated */
  uint64_t capture_ns;       /* cuda-graph: host time capturing the graph
                                when this step captured it (the first
                                step, or the calls changed shape), else 0 */
  uint64_t instantiate_ns;   /* cuda-graph: instantiation, likewise */
} hbg_peer_stats;

/* Make a peer of `kind` for workload w on the device of the runtime w was
 * created on. Allocates the device memory the calls need (the node heap,
 * kernel scratch, a status word). Capturing happens at the first
 * hbg_peer_launch.
 * @return 0 and *out, HBG_E_INVAL, HBG_E_UNSUPPORTED (not a cuda device,
 * or, for cuda-graph, a driver without the kernel-node calls; hbg_last_error()
 * says which), HBG_E_NOMEM, or a device error. */
HBG_API int hbg_peer_create(hbg_workload *w, int kind, hbg_peer **out);

/* Launch step `step` asynchronously (the previous launch must have been
 * waited: HBG_E_BUSY otherwise). @return 0 or an error (nothing of the
 * step is still running once an error is returned here: calls already
 * queued have completed; the step's outputs are then undefined). */
HBG_API int hbg_peer_launch(hbg_peer *p, uint32_t step);

/* Wait for the launched step; *st (optional, struct_size set by the
 * caller) receives its statistics.
 * @return 0, HBG_E_INVAL (st->struct_size ends before kind), HBG_E_STATE
 * (nothing launched), the error of the first call the device rejected
 * (for example HBG_E_KERNEL; hbg_last_error() names the call; the calls
 * after it did nothing), or a device error. */
HBG_API int hbg_peer_wait(hbg_peer *p, hbg_peer_stats *st);

/* Wait for a launched step, free the device memory and the graph.
 * Accepts NULL. Call before hbg_workload_destroy. */
HBG_API void hbg_peer_destroy(hbg_peer *p);

#ifdef __cplusplus
}
#endif

#endif
