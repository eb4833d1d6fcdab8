/*
 * The part of the CUDA driver API the cuda backend calls, resolved with
 * dlsym from libcuda.so.1 (or the library named by lib= / HBG_CUDA_LIB) at
 * device open, so that libhbg carries no link to libcuda or libcudart and
 * loads where no NVIDIA driver is installed. Types and constants come from
 * the toolkit's cuda.h (build time only); the prototypes below are checked
 * against cuda.h's at compile time (cuda.c, cu_typecheck). Not installed.
 *
 * Names are the exported symbols, so versioned entry points carry their
 * suffix (cuMemAlloc_v2, not the cuda.h macro cuMemAlloc).
 */
#ifndef HBG_DEVICE_CUDA_CUDA_API_H
#define HBG_DEVICE_CUDA_CUDA_API_H

#include <cuda.h>

#define HBG__CU_DEFAULT_LIB "libcuda.so.1"

/* X(return type, name, parameter list). Every one is resolved at open; a
 * missing one fails the open (HBG_E_LOAD) with its name. */
#define HBG__CU_SYMBOLS(X)                                                     \
  X(CUresult, cuInit, (unsigned int flags))                                    \
  X(CUresult, cuDriverGetVersion, (int *version))                              \
  X(CUresult, cuGetErrorName, (CUresult error, const char **str))              \
  X(CUresult, cuGetErrorString, (CUresult error, const char **str))            \
  X(CUresult, cuDeviceGetCount, (int *count))                                  \
  X(CUresult, cuDeviceGet, (CUdevice * device, int ordinal))                   \
  X(CUresult, cuDeviceGetName, (char *name, int len, CUdevice dev))            \
  X(CUresult, cuDeviceGetAttribute,                                            \
    (int *pi, CUdevice_attribute attrib, CUdevice dev))                        \
  X(CUresult, cuDeviceTotalMem_v2, (size_t * bytes, CUdevice dev))             \
  X(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev))      \
  X(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                    \
  X(CUresult, cuCtxGetCurrent, (CUcontext * pctx))                             \
  X(CUresult, cuCtxSetCurrent, (CUcontext ctx))                                \
  X(CUresult, cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize))            \
  X(CUresult, cuMemFree_v2, (CUdeviceptr dptr))                                \
  X(CUresult, cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int flags)) \
  X(CUresult, cuMemFreeHost, (void *p))                                        \
  X(CUresult, cuMemHostRegister_v2,                                            \
    (void *p, size_t bytesize, unsigned int flags))                            \
  X(CUresult, cuMemHostUnregister, (void *p))                                  \
  X(CUresult, cuMemcpyHtoDAsync_v2,                                            \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream s))              \
  X(CUresult, cuMemcpyDtoHAsync_v2,                                            \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream s))                    \
  X(CUresult, cuStreamCreate, (CUstream * phStream, unsigned int flags))       \
  X(CUresult, cuStreamSynchronize, (CUstream hStream))                         \
  X(CUresult, cuStreamDestroy_v2, (CUstream hStream))                          \
  X(CUresult, cuEventCreate, (CUevent * phEvent, unsigned int flags))          \
  X(CUresult, cuEventRecord, (CUevent hEvent, CUstream hStream))               \
  X(CUresult, cuEventQuery, (CUevent hEvent))                                  \
  X(CUresult, cuEventSynchronize, (CUevent hEvent))                            \
  X(CUresult, cuStreamWaitEvent,                                               \
    (CUstream hStream, CUevent hEvent, unsigned int flags))                    \
  X(CUresult, cuEventDestroy_v2, (CUevent hEvent))                            \
  /* the embedded device module (cuda_module.c) */                             \
  X(CUresult, cuModuleLoadData, (CUmodule * module, const void *image))        \
  X(CUresult, cuModuleUnload, (CUmodule hmod))                                 \
  X(CUresult, cuModuleGetFunction,                                             \
    (CUfunction * hfunc, CUmodule hmod, const char *name))                     \
  X(CUresult, cuLaunchKernel,                                                  \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,               \
     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,    \
     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,    \
     void **kernelParams, void **extra))                                       \
  /* the executor's grid: every CTA resident at once (cuda_module.c) */       \
  X(CUresult, cuLaunchCooperativeKernel,                                       \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,               \
     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,    \
     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,    \
     void **kernelParams))                                                     \
  X(CUresult, cuOccupancyMaxActiveBlocksPerMultiprocessor,                     \
    (int *numBlocks, CUfunction func, int blockSize,                           \
     size_t dynamicSMemSize))                                                  \
  X(CUresult, cuFuncGetAttribute,                                              \
    (int *pi, CUfunction_attribute attrib, CUfunction hfunc))                  \
  X(CUresult, cuCtxGetLimit, (size_t * pvalue, CUlimit limit))                 \
  X(CUresult, cuCtxSetLimit, (CUlimit limit, size_t value))                    \
  /* stream capture into CUDA graphs (the cuda-graph bench arm) */             \
  X(CUresult, cuStreamBeginCapture_v2,                                         \
    (CUstream hStream, CUstreamCaptureMode mode))                              \
  X(CUresult, cuStreamEndCapture, (CUstream hStream, CUgraph * phGraph))       \
  X(CUresult, cuGraphInstantiateWithFlags,                                     \
    (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags))     \
  X(CUresult, cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream))       \
  X(CUresult, cuGraphExecDestroy, (CUgraphExec hGraphExec))                    \
  X(CUresult, cuGraphDestroy, (CUgraph hGraph))

/* Resolved at open when present, NULL otherwise: only the peer executors
 * (cuda_peer.c) use them, and the backend opens without them.
 *   cuEventElapsedTime_v2  device time per step (CUDA 12.8+ drivers); where
 *                          it is missing, the v1 symbol cuEventElapsedTime
 *                          (same prototype, every driver) fills the slot
 *                          (cu_load); without either a peer reports
 *                          device_ns 0.
 *   cuGraphGetNodes, cuGraphKernelNodeGetParams_v2,
 *   cuGraphExecKernelNodeSetParams_v2
 *                          the cuda-graph peer's per-step kernel-node
 *                          updates (CUDA 12.0+ for the _v2 pair); without
 *                          them hbg_peer_create(cuda-graph) is
 *                          HBG_E_UNSUPPORTED naming the missing one, and
 *                          the eager peer still runs.
 *   cuCtxGetDevice         the device of a borrowed context (ctx=current)
 *   cuStreamIsCapturing, cuUserObjectCreate, cuUserObjectRelease,
 *   cuGraphRetainUserObject
 *                          binds launched into a caller's stream capture
 *                          (hbg_bind_launch_on); without them a capture
 *                          cannot take a bind (HBG_E_CAPTURING says so)
 *   cuLinkCreate_v2, cuLinkAddData_v2, cuLinkComplete, cuLinkDestroy
 *                          linking users' device code with the executor
 *                          (cuda_link.c); without them hbg_kernel_register
 *                          is HBG_E_UNSUPPORTED naming the missing one, and
 *                          everything else runs.
 *   cuPointerGetAttributes validating a caller's memory once at import
 *                          (mem_import, hbg_buffer_import); without it
 *                          imports are HBG_E_UNSUPPORTED. */
#define HBG__CU_OPTIONAL_SYMBOLS(X)                                            \
  X(CUresult, cuEventElapsedTime_v2,                                           \
    (float *pMilliseconds, CUevent hStart, CUevent hEnd))                      \
  X(CUresult, cuLinkCreate_v2,                                                 \
    (unsigned int numOptions, CUjit_option *options, void **optionValues,      \
     CUlinkState *stateOut))                                                   \
  X(CUresult, cuLinkAddData_v2,                                                \
    (CUlinkState state, CUjitInputType type, void *data, size_t size,          \
     const char *name, unsigned int numOptions, CUjit_option *options,         \
     void **optionValues))                                                     \
  X(CUresult, cuLinkComplete,                                                  \
    (CUlinkState state, void **cubinOut, size_t *sizeOut))                     \
  X(CUresult, cuLinkDestroy, (CUlinkState state))                              \
  X(CUresult, cuGraphGetNodes,                                                 \
    (CUgraph hGraph, CUgraphNode * nodes, size_t * numNodes))                  \
  X(CUresult, cuGraphKernelNodeGetParams_v2,                                   \
    (CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS * nodeParams))                 \
  X(CUresult, cuGraphExecKernelNodeSetParams_v2,                               \
    (CUgraphExec hGraphExec, CUgraphNode hNode,                                \
     const CUDA_KERNEL_NODE_PARAMS *nodeParams))                               \
  X(CUresult, cuPointerGetAttributes,                                          \
    (unsigned int numAttributes, CUpointer_attribute *attributes, void **data, \
     CUdeviceptr ptr))                                                         \
  X(CUresult, cuCtxGetDevice, (CUdevice * device))                             \
  X(CUresult, cuStreamIsCapturing,                                             \
    (CUstream hStream, CUstreamCaptureStatus * captureStatus))                 \
  X(CUresult, cuUserObjectCreate,                                              \
    (CUuserObject * object_out, void *ptr, CUhostFn destroy,                   \
     unsigned int initialRefcount, unsigned int flags))                        \
  X(CUresult, cuUserObjectRelease, (CUuserObject object, unsigned int count)) \
  X(CUresult, cuGraphRetainUserObject,                                         \
    (CUgraph graph, CUuserObject object, unsigned int count,                   \
     unsigned int flags))

/* Versioned entry points cuda.h no longer declares under these names,
 * resolved by name (the unsuffixed export is an older ABI): the capture's
 * id and graph, for binds launched into a caller's capture (capture.c in
 * the core, cu_queue_capture / cu_capture_retain). _v3 (CUDA 12.3+) adds
 * edge data; either serves. */
typedef CUresult (*hbg__cu_capinfo_v2_fn)(CUstream, CUstreamCaptureStatus *,
                                          cuuint64_t *, CUgraph *,
                                          const CUgraphNode **, size_t *);
typedef CUresult (*hbg__cu_capinfo_v3_fn)(CUstream, CUstreamCaptureStatus *,
                                          cuuint64_t *, CUgraph *,
                                          const CUgraphNode **,
                                          const CUgraphEdgeData **, size_t *);

/* The exported name of cuEventElapsedTime's first version (cuda.h's macro
 * names the _v2 one). */
#define HBG__CU_EVENT_ELAPSED_V1 "cuEventElapsedTime"

typedef struct hbg__cu_fns {
#define HBG__CU_FN_PTR(ret, name, params) ret(*name) params;
  HBG__CU_SYMBOLS(HBG__CU_FN_PTR)
  HBG__CU_OPTIONAL_SYMBOLS(HBG__CU_FN_PTR)
#undef HBG__CU_FN_PTR
  hbg__cu_capinfo_v2_fn cuStreamGetCaptureInfo_v2;
  hbg__cu_capinfo_v3_fn cuStreamGetCaptureInfo_v3;
} hbg__cu_fns;

#endif
