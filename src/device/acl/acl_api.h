/*
 * The part of the CANN AscendCL runtime API the acl backend uses, declared
 * here so that hbg builds without CANN headers or libraries; the library is
 * loaded with dlopen at device open. Not installed.
 *
 * Sources: the public CANN documentation, "AscendCL API Reference" (the
 * English and Chinese editions, CANN 6.x to 8.x, hiascend.com, pages
 * aclcppdevg_03_NNNN; page numbers move between releases, names do not):
 *   aclInit, aclFinalize                  "aclInit" / "aclFinalize"
 *   aclrtSetDevice, aclrtResetDevice      "aclrtSetDevice", "aclrtResetDevice"
 *   aclrtCreateStream, aclrtDestroyStream "aclrtCreateStream",
 *                                         "aclrtDestroyStream"
 *   aclrtSynchronizeStream                "aclrtSynchronizeStream"
 *   aclrtMalloc, aclrtFree                "aclrtMalloc", "aclrtFree",
 *                                         "aclrtMemMallocPolicy"
 *   aclrtMallocHost, aclrtFreeHost        "aclrtMallocHost", "aclrtFreeHost"
 *   aclrtMemcpy, aclrtMemcpyAsync         "aclrtMemcpy", "aclrtMemcpyAsync",
 *                                         "aclrtMemcpyKind"
 *   aclrtCreateEvent, aclrtRecordEvent,   "aclrtCreateEvent",
 *   aclrtQueryEventStatus,                "aclrtRecordEvent",
 *   aclrtSynchronizeEvent,                "aclrtQueryEventStatus" (with
 *   aclrtDestroyEvent,                    aclrtEventRecordedStatus),
 *   aclrtStreamWaitEvent                  "aclrtSynchronizeEvent",
 *                                         "aclrtDestroyEvent",
 *                                         "aclrtStreamWaitEvent"
 *   aclGetRecentErrMsg                    "aclGetRecentErrMsg"
 *   aclError and the codes below          "aclError" (return-code table);
 *                                         107xxx/207xxx are the runtime's
 *                                         codes from the same table
 * The declarations are written from those pages, not copied from CANN
 * headers; docs/ACL.md lists them with their documented signatures.
 */
#ifndef HBG_DEVICE_ACL_ACL_API_H
#define HBG_DEVICE_ACL_ACL_API_H

#include <stddef.h>
#include <stdint.h>

typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtEvent;

/* The documented enums are plain C enums: passed as int. */
typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
  ACL_MEMCPY_DEFAULT = 4
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2
} aclrtMemMallocPolicy;

typedef enum aclrtEventRecordedStatus {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_UNINITIALIZE 100001
#define ACL_ERROR_REPEAT_INITIALIZE 100002
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#define ACL_ERROR_BAD_ALLOC 200000
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001
#define ACL_ERROR_INTERNAL_ERROR 500000

/* CANN rule for pieces carved from one allocation (aclrtMalloc /
 * aclrtMallocHost restrictions): ALIGN_UP(len, 32) + 32 bytes each, every
 * piece starting 64-byte aligned. */
#define HBG__ACL_PIECE_ALIGN 32u
#define HBG__ACL_PIECE_EXTRA 32u
#define HBG__ACL_START_ALIGN 64u

/* X(return type, name, parameter list). Every symbol is resolved at open. */
#define HBG__ACL_SYMBOLS(X)                                                    \
  X(aclError, aclInit, (const char *configPath))                               \
  X(aclError, aclFinalize, (void))                                             \
  X(aclError, aclrtSetDevice, (int32_t deviceId))                              \
  X(aclError, aclrtResetDevice, (int32_t deviceId))                            \
  X(aclError, aclrtCreateStream, (aclrtStream * stream))                       \
  X(aclError, aclrtDestroyStream, (aclrtStream stream))                        \
  X(aclError, aclrtSynchronizeStream, (aclrtStream stream))                    \
  X(aclError, aclrtMalloc,                                                     \
    (void **devPtr, size_t size, aclrtMemMallocPolicy policy))                 \
  X(aclError, aclrtFree, (void *devPtr))                                       \
  X(aclError, aclrtMallocHost, (void **hostPtr, size_t size))                  \
  X(aclError, aclrtFreeHost, (void *hostPtr))                                  \
  X(aclError, aclrtMemcpy,                                                     \
    (void *dst, size_t destMax, const void *src, size_t count,                 \
     aclrtMemcpyKind kind))                                                    \
  X(aclError, aclrtMemcpyAsync,                                                \
    (void *dst, size_t destMax, const void *src, size_t count,                 \
     aclrtMemcpyKind kind, aclrtStream stream))                                \
  X(aclError, aclrtCreateEvent, (aclrtEvent * event))                          \
  X(aclError, aclrtRecordEvent, (aclrtEvent event, aclrtStream stream))        \
  X(aclError, aclrtQueryEventStatus,                                           \
    (aclrtEvent event, aclrtEventRecordedStatus * status))                     \
  X(aclError, aclrtSynchronizeEvent, (aclrtEvent event))                       \
  X(aclError, aclrtDestroyEvent, (aclrtEvent event))                           \
  X(aclError, aclrtStreamWaitEvent, (aclrtStream stream, aclrtEvent event))    \
  X(const char *, aclGetRecentErrMsg, (void))

#endif
