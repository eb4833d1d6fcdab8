/*
 * hbg -- host-built graphs.
 *
 * Public API for applications: runtimes, device buffers, binds (rounds),
 * ordinary tasks, graph submissions recorded once and replayed per layer, and
 * the per-bind phase records.
 *
 * Conventions
 *   - Every function that can fail returns 0 or a negative hbg error code
 *     (HBG_E_*). Codes are pinned forever; hbg_err_name() / hbg_strerror()
 *     turn them into text.
 *   - Output pointers come last and are written only on success.
 *   - Every *_destroy / *_close accepts NULL.
 *   - Thread safety: a runtime and its binds are used from one thread at a
 *     time (the orchestration thread); between calls the runtime may move
 *     to another thread. This is checked: a call that changes a runtime or
 *     its binds (hbg_bind_begin, hbg_submit_task, hbg_submit_graph,
 *     hbg_submit_graph_n, hbg_bind_launch, hbg_bind_wait,
 *     hbg_buffer_alloc, hbg_buffer_import, hbg_buffer_free,
 *     hbg_buffer_write, hbg_buffer_read, hbg_buffer_host_ptr,
 *     hbg_runtime_set_trace) entered while another thread
 *     is inside one of them on the same runtime changes nothing and returns
 *     HBG_E_BUSY, and hbg_last_error() names the call the other thread is
 *     in ("hbg_buffer_alloc: the runtime is in use by another thread (in
 *     hbg_bind_wait)..."). hbg_bind_end, which cannot fail, waits for that
 *     call to return instead. Calls that a record or trace callback makes
 *     on the thread already inside a call go through. Calls that only read
 *     (hbg_bind_stats_get, hbg_bind_fatal, ...) and hbg_runtime_destroy are
 *     not checked: no other thread may be using the runtime when it is
 *     destroyed. Backends run their own threads internally. Distinct
 *     runtimes are independent.
 */
#ifndef HBG_HBG_H
#define HBG_HBG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <hbg/hbg_kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HBG_STATIC_DEFINE)
#define HBG_API
#elif defined(HBG_BUILDING_LIBRARY)
#define HBG_API __attribute__((visibility("default")))
#else
#define HBG_API
#endif

/* ------------------------------------------------------------------ */
/* Version                                                             */
/* ------------------------------------------------------------------ */

#define HBG_VERSION_MAJOR 0
#define HBG_VERSION_MINOR 1
#define HBG_VERSION_PATCH 0
#define HBG_VERSION_NUMBER \
  (HBG_VERSION_MAJOR * 10000 + HBG_VERSION_MINOR * 100 + HBG_VERSION_PATCH)
#define HBG_VERSION_STRING "0.1.0"

/* @return HBG_VERSION_NUMBER of the library actually linked. */
HBG_API unsigned hbg_version_number(void);
/* @return HBG_VERSION_STRING of the library actually linked (static storage). */
HBG_API const char *hbg_version_string(void);

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* X(name, value, message). Values are pinned: never renumber, only append. */
#define HBG_ERRNO_MAP(X)                                                       \
  X(INVAL, -1, "invalid argument")                                            \
  X(NOMEM, -2, "out of host memory")                                          \
  X(DEVMEM, -3, "out of device memory")                                       \
  X(DEVICE, -4, "device backend error (see the native error)")                \
  X(UNSUPPORTED, -5, "operation not supported by this backend")               \
  X(NOTFOUND, -6, "not found")                                                \
  X(STATE, -7, "call not valid in the current state")                         \
  X(RANGE, -8, "device address or size out of range")                         \
  X(AGAIN, -9, "not complete yet")                                            \
  X(FATAL, -10, "bind latched a fatal error and was not launched")            \
  X(RECORD, -11, "graph record callback failed")                              \
  X(EMPTY, -12, "graph record callback submitted no task")                    \
  X(NESTED, -13, "graph submitted from inside a record callback")             \
  X(SIGNATURE, -14, "boundary does not match the recorded signature")         \
  X(LIMIT, -15, "a count or size exceeds a limit")                            \
  X(IO, -16, "input/output error")                                            \
  X(LOAD, -17, "backend library or symbol could not be loaded")               \
  X(INJECTED, -18, "injected fault")                                          \
  X(VERIFY, -19, "device output differs from the host reference")             \
  X(KERNEL, -20, "unknown kernel or bad kernel arguments")                    \
  X(BUSY, -21, "resource still in use")                                       \
  X(TIMEOUT, -22, "the device did not finish within its deadline")            \
  X(CAPTURING, -23, "not allowed while a queue hbg launched on is captured")  \
  X(IMG_TRUNCATED, -32, "image truncated")                                    \
  X(IMG_MAGIC, -33, "bad image magic")                                        \
  X(IMG_VERSION, -34, "unsupported image version")                            \
  X(IMG_SIZE, -35, "image size field inconsistent")                           \
  X(IMG_OFFSET, -36, "image offset out of bounds")                            \
  X(IMG_ALIGN, -37, "image offset misaligned")                                \
  X(IMG_COUNT, -38, "image count out of range")                               \
  X(IMG_CSR, -39, "inconsistent fanin/fanout tables")                         \
  X(IMG_CYCLE, -40, "graph has a cycle")                                      \
  X(IMG_ROOTS, -41, "root list wrong")                                        \
  X(IMG_REF, -42, "bad source reference")                                     \
  X(IMG_HASH, -43, "content hash mismatch")                                   \
  X(IMG_KIND, -44, "wrong image kind")                                        \
  X(IMG_DEF, -45, "submission does not match its definition")                 \
  X(IMG_FIELD, -46, "bad field value in image")                              \
  X(IMG_TENSOR_ALIGN, -47, "tensor element 0 misaligned for its dtype")     \
  X(IMG_BOUNDARY_WRITE, -48,                                                   \
    "node writes a boundary tensor its signature marks input-only")           \
  X(IMG_VIEW_WRITE, -49,                                                       \
    "node writes a view into a boundary tensor its signature marks "           \
    "input-only")

typedef enum hbg_err {
  HBG_OK = 0,
#define HBG__ERR_ENUM(name, val, msg) HBG_E_##name = (val),
  HBG_ERRNO_MAP(HBG__ERR_ENUM)
#undef HBG__ERR_ENUM
} hbg_err;

/* @return "HBG_E_INVAL" style name, "HBG_OK", or "HBG_E_UNKNOWN". Static. */
HBG_API const char *hbg_err_name(int err);
/* @return human-readable message for an error code. Static storage. */
HBG_API const char *hbg_strerror(int err);

/* The calling thread's message about its last failure that recorded one,
 * naming the culprit: a configuration error ("HBG_PIPELINE_DEPTH='0': out
 * of range 1..64"), a device that failed to open ("sim: bad or out-of-range
 * value in 'mem=1'"). "" when there is none. A call that records messages
 * (hbg_config_init, hbg_runtime_create, hbg_device_open) clears the slot
 * on entry, so after one of them fails the slot holds that failure's
 * message or "". Read it after a failure, like errno; valid until the
 * thread's next hbg call. Thread-local storage, never NULL. */
HBG_API const char *hbg_last_error(void);

/* ------------------------------------------------------------------ */
/* Tensors, scalars, tasks                                             */
/* ------------------------------------------------------------------ */

#define HBG_MAX_DIMS 4

typedef enum hbg_dtype {
  HBG_DTYPE_F32 = 1,
  HBG_DTYPE_F16 = 2,
  HBG_DTYPE_BF16 = 3,
  HBG_DTYPE_I32 = 4,
  HBG_DTYPE_I64 = 5,
  HBG_DTYPE_U8 = 6
} hbg_dtype;

/* @return bytes per element of dtype, 0 for an unknown dtype. */
HBG_API uint32_t hbg_dtype_size(uint32_t dtype);

enum {
  HBG_ACCESS_IN = 1,
  HBG_ACCESS_OUT = 2,
  HBG_ACCESS_INOUT = 3
};

/* A tensor argument: a view into a device buffer.
 * addr is a device address from hbg_buffer_alloc() or hbg_buffer_import(),
 * and [addr + offset,
 * addr + offset + extent) must lie inside that same live buffer; element 0
 * (addr + offset) must be aligned to hbg_dtype_size(dtype). Inside a record
 * callback,
 * an output (mode has HBG_ACCESS_OUT) with addr == 0 is allocated in the
 * graph's internal heap block; hbg_record_task() writes the address it got
 * back into the caller's struct, and later inner tasks pass that tensor to
 * read it. Strides are in elements; shape[i] and strides[i] for i >= ndim
 * must be 0. */
typedef struct hbg_tensor {
  uint64_t addr;
  uint64_t offset; /* bytes from addr to element 0 */
  uint32_t shape[HBG_MAX_DIMS];
  uint32_t strides[HBG_MAX_DIMS];
  uint8_t dtype; /* hbg_dtype */
  uint8_t ndim;  /* 1..HBG_MAX_DIMS */
  uint8_t mode;  /* HBG_ACCESS_* */
  uint8_t reserved;
} hbg_tensor;

/* Fill t as a contiguous row-major tensor of ndim dims (dims[0] outermost).
 * @return 0, or HBG_E_INVAL (NULL t/dims, ndim 0 or > HBG_MAX_DIMS, bad dtype,
 * a zero dim). */
HBG_API int hbg_tensor_contig(hbg_tensor *t, uint64_t addr, uint64_t offset,
                              uint32_t dtype, uint32_t ndim,
                              const uint32_t *dims, uint32_t mode);
/* @return bytes from element 0 to one past the last element (0 if invalid). */
HBG_API uint64_t hbg_tensor_extent(const hbg_tensor *t);

enum {
  HBG_SCALAR_STATIC = 0,   /* value is baked into the Definition */
  HBG_SCALAR_BOUNDARY = 1  /* index names a boundary scalar of the graph */
};

/* A scalar argument of a task. Every scalar travels as a u64: integers
 * (ROPE's position, ATTN's length) as the value itself, f32 values (eps,
 * alpha, scale) as their IEEE-754 bits in the low 32 bits with the high 32
 * bits zero -- hbg_scalar_f32() makes one. Boundary scalars of a graph
 * (hbg_graph_submit.scalars) use the same encoding. */
typedef struct hbg_scalar {
  uint64_t value;
  uint32_t kind;  /* HBG_SCALAR_* */
  uint32_t index; /* boundary scalar index when kind == HBG_SCALAR_BOUNDARY */
} hbg_scalar;

/* @return the scalar encoding of an f32: its bits in the low 32 bits. */
HBG_API uint64_t hbg_scalar_f32(float value);
/* @return the f32 held in the low 32 bits of a scalar (for user kernels). */
HBG_API float hbg_scalar_to_f32(uint64_t scalar);
/* @return the scalar encoding of an unsigned integer (the value). */
HBG_API uint64_t hbg_scalar_u32(uint32_t value);
/* @return the scalar encoding of a signed integer (two's complement). */
HBG_API uint64_t hbg_scalar_i64(int64_t value);
/* @return a static scalar argument (baked into a recorded Definition). */
HBG_API hbg_scalar hbg_scalar_static(uint64_t value);
/* @return a scalar argument that reads boundary scalar `index` of the graph
 * being recorded (only inside a record callback). */
HBG_API hbg_scalar hbg_scalar_boundary(uint32_t index);

typedef uint32_t hbg_task_id;
#define HBG_TASK_NONE UINT32_MAX

/* Built-in kernels, run by the sim device's CPU workers (and the same
 * source on the GPU). Arguments are listed in hbg_task.args order; "s0",
 * "s1" are hbg_task.scalars[0], [1].
 *
 * Rules for every kernel but NOP: every tensor is HBG_DTYPE_F32, except
 * that GEMV's W, RMSNORM's w and COPY's in may be HBG_DTYPE_BF16 (COPY's
 * out stays f32: it widens a bf16 row, such as an embedding, to f32); F16,
 * the integer dtypes and bf16 anywhere else are refused. A bf16 element
 * widens to f32 exactly (its 16 bits are the f32's high half) where the
 * kernel reads it; the products and sums then run in f32, in the same
 * fixed order as on f32 data, so the result equals bit for bit the f32
 * kernel on the weight widened beforehand, on the sim and the GPU alike.
 * Each tensor has 1 to HBG_MAX_DIMS dims, no zero dim, strides in elements
 * of its own dtype (hbg_dtype_size), at most 2^26 elements. Inputs need
 * HBG_ACCESS_IN in their mode, outputs HBG_ACCESS_OUT (INOUT serves
 * both). Inputs may broadcast (stride 0); outputs may not. "Flat" means a tensor is read in its own row-major
 * order, so two flat tensors need the same element count, not the same
 * shape. Outputs must not overlap inputs, except that the element-wise
 * kernels (COPY, ADD, MUL, SCALE, SILU_MUL, FILL) and ROPE may run in
 * place: the output the identical tensor as an input (same address,
 * offset, dtype, shape and strides). hbg_submit_task and hbg_record_task
 * refuse a task that breaks this with HBG_E_KERNEL, and hbg_last_error()
 * names the task, the two arguments and the overlapping bytes. Overlap is
 * judged on extents, [element 0, one past the last element): a strided
 * view counts the holes between its elements, so two interleaved views
 * (even and odd elements) overlap although they share no element.
 * Reductions run in a fixed order that does not depend on how many threads
 * share a kernel, and exp is hbg's own (no libm), no operation is fused,
 * so results are bit-identical on any thread count, CPU or GPU. RMSNORM's
 * sum of squares and SOFTMAX's and ATTN's maximum and sum are "tree"
 * reductions: 256 partials (partial p over the elements i = p mod 256, in
 * ascending i), then s[p] += s[p + w] for w = 128, 64, ..., 1.
 * Wrong arity, dtype, mode, shape or scalar count is HBG_E_KERNEL, and
 * hbg_last_error() names the kernel and the argument by index and name
 * ("gemv: argument 1 (x) is bf16, must be f32").
 *
 *   NOP       any tensors of any dtype, any scalars: does nothing
 *   COPY      [in, out]                 out = in                    (flat)
 *             (in f32 or bf16, out f32)
 *   ADD       [a, b, out]               out = a + b                 (flat)
 *   MUL       [a, b, out]               out = a * b                 (flat)
 *   SCALE     [in, out]; s0 = f32 alpha out = in * alpha            (flat)
 *   RMSNORM   [in, w, out]; s0 = f32 eps
 *             per row of the last dim d: out = in / sqrt(mean(in^2) + eps) * w;
 *             w has d elements (flat, one constant stride), f32 or bf16;
 *             out has in's shape
 *   GEMV      [W, x, out]; optional s0 = f32 alpha
 *             W is 2-D [n][k] (f32 or bf16), x has k elements, out n (each
 *             flat with one constant stride): out[i] = sum_j W[i][j] * x[j]
 *             (* alpha); the sum runs in four lanes j % 4, tail into lane
 *             0, then (l0 + l1) + (l2 + l3)
 *   ROPE      [x, cos, sin, out]; s0 = integer position p
 *             x [..][d] with d even, cos and sin 2-D [P][d/2] with p < P,
 *             out x's shape; rotate-half (NeoX/Qwen) on each row:
 *             out[i] = x[i] c[i] - x[i+d/2] s[i],
 *             out[i+d/2] = x[i+d/2] c[i] + x[i] s[i]
 *   SILU_MUL  [a, b, out]               out = a / (1 + exp(-a)) * b (flat)
 *   SOFTMAX   [in, out]                 softmax over the last dim; same shape
 *   ATTN      [q, K, V, out]; s0 = integer length L (1 <= L <= T),
 *             optional s1 = f32 scale (default 1/sqrt(D))
 *             q [Hq][D], K and V [Hk][T][D] (or q [D], K/V [T][D]: one head),
 *             out q's shape, Hq a multiple of Hk, Hq*T*D at most 2^28:
 *             single-query attention of head h over K/V head h / (Hq / Hk),
 *             positions [0, L)
 *   FILL      [out]; s0 = f32 value     out = value
 */
typedef enum hbg_kernel_id {
  HBG_KERNEL_NOP = 0,
  HBG_KERNEL_COPY = 1,
  HBG_KERNEL_ADD = 2,
  HBG_KERNEL_MUL = 3,
  HBG_KERNEL_SCALE = 4,
  HBG_KERNEL_RMSNORM = 5,
  HBG_KERNEL_GEMV = 6,
  HBG_KERNEL_ROPE = 7,
  HBG_KERNEL_SILU_MUL = 8,
  HBG_KERNEL_SOFTMAX = 9,
  HBG_KERNEL_ATTN = 10,
  HBG_KERNEL_FILL = 11,
  HBG_KERNEL__COUNT
} hbg_kernel_id;

/* User kernels: ids from HBG_KERNEL_USER_MIN up (to UINT32_MAX) belong to
 * the application. hbg records, replays, uploads and validates tasks that
 * use them without interpreting the kernel: only the structure is checked
 * (at most 64 tensors and 64 scalars, each tensor valid metadata with a
 * mode, element 0 aligned to its dtype, inside a live buffer) and the
 * overlap rule above, read from the modes: no argument with mode OUT or
 * INOUT may overlap one with mode IN, identical or not (a user kernel that
 * updates a tensor in place takes it once, as INOUT). The ids between
 * HBG_KERNEL__COUNT and HBG_KERNEL_USER_MIN are reserved for built-ins
 * (HBG_E_KERNEL). A device
 * runs a user kernel with the implementation registered for its id
 * (hbg_kernel_register on the sim and cuda, hbg_sim_register_kernel on the
 * sim; an executor written against hbg_image.h on others); a launch
 * reaching an id with none fails with HBG_E_KERNEL (on cuda exec=device the
 * submission is refused already). */
#define HBG_KERNEL_USER_MIN 0x1000u

/* A user kernel's CPU implementation on the sim device. t[i] is the layout
 * of tensor argument i (dtype, ndim, mode, shape, strides; addr and offset
 * 0) and data[i] the host memory of its element 0; only the tensor's
 * extent (hbg_tensor_extent) from there belongs to it. Runs on the sim's
 * worker threads, possibly for several tasks at once.
 * @return 0, or a negative hbg error code that fails the launch (the bind's
 * device status says which task and node). */
struct hbg_device;
typedef int (*hbg_kernel_fn)(void *user, const hbg_tensor *t,
                             void *const *data, uint32_t n_tensors,
                             const uint64_t *scalars, uint32_t n_scalars);

/* Register fn as the implementation of user kernel `kernel` on a sim device
 * (hbg_runtime_device(rt) when the runtime uses "sim", or a device from
 * hbg_device_open). Thread-safe; a registration holds until unregistered
 * or the device is closed.
 * @return 0, HBG_E_INVAL (NULL dev or fn, kernel below
 * HBG_KERNEL_USER_MIN), HBG_E_UNSUPPORTED (not a sim device), HBG_E_BUSY
 * (kernel already registered), HBG_E_NOMEM. */
HBG_API int hbg_sim_register_kernel(struct hbg_device *dev, uint32_t kernel,
                                    hbg_kernel_fn fn, void *user);
/* Remove a registration. Call it only when no launch that may run the
 * kernel is in flight (after hbg_bind_wait). Thread-safe.
 * @return 0, HBG_E_INVAL (NULL dev), HBG_E_UNSUPPORTED (not a sim device),
 * HBG_E_NOTFOUND (kernel not registered). */
HBG_API int hbg_sim_unregister_kernel(struct hbg_device *dev,
                                      uint32_t kernel);

/* A user kernel written to the lane model of hbg_kernel.h, one source for
 * the sim and the GPU (docs/USER_KERNELS.md). Fill what the device needs,
 * or both halves to register the same struct anywhere:
 *   sim   fn, the host build of the function (cc);
 *   cuda  image, image_size and symbol: relocatable device code built
 *         with nvcc -rdc=true (PTX text, or a cubin or fatbin holding an
 *         sm_XX ELF and/or PTX) that defines `symbol` as an
 *         extern "C" __device__ function (HBG_KERNEL_FN). hbg copies the
 *         bytes. */
typedef struct hbg_kernel_impl {
  uint32_t struct_size; /* sizeof(hbg_kernel_impl) */
  uint32_t kernel;      /* >= HBG_KERNEL_USER_MIN */
  uint32_t phases;      /* phases per call (or per row), 1..2^20 */
  uint32_t rows_of;     /* 0: phases per call; k + 1: per row of tensor k */
  uint64_t scratch_floats; /* shared by a call's lanes, at most 2^24 */
  hbg_kernel_lane_fn fn;   /* sim */
  const char *symbol;      /* cuda: the function's name (a C identifier) */
  const void *image;       /* cuda: the device code */
  size_t image_size;       /* cuda: its bytes */
} hbg_kernel_impl;

/* Register impls[0..n) on dev (hbg_runtime_device(rt), or a device from
 * hbg_device_open), all or none.
 *   sim   each runs through the executor's user-kernel table, its phases
 *         and lanes as hbg_kernel.h says (lanes=); hbg_sim_unregister_kernel
 *         removes one.
 *   cuda  (exec=device) hbg links its executor (relocatable device code
 *         inside libhbg) with every image registered so far on this device
 *         and a dispatch it generates, with the driver's linker (cuLink*),
 *         loads the result and runs every later launch of the device from
 *         it; a registration holds until the device is closed. Without a
 *         registration the device runs its built-in module (nothing is
 *         linked, built-ins cost the same). With HBG_CUDA_LINK_CACHE=DIR
 *         the linked image is kept in DIR, keyed by a content hash of
 *         every input and the driver version, and loaded from there next
 *         time instead of linking.
 * Later submissions may use the ids; on cuda a task or graph node whose
 * user kernel has no implementation on the runtime's device is refused
 * at hbg_submit_task / hbg_record_task (HBG_E_KERNEL), on the sim at
 * launch (it may be registered in between). Thread-safe (one registration
 * at a time per device; launches may run meanwhile). hbg_last_error()
 * names the kernel and what is wrong; a link failure carries the driver
 * linker's log.
 * @return 0; HBG_E_INVAL (NULL dev or impls, n 0, struct_size too small,
 * an id below HBG_KERNEL_USER_MIN, phases, rows_of or scratch_floats out of
 * range, no fn on the sim, no image or symbol on cuda, a symbol that is not
 * a C identifier or is hbg's own, image bytes that are not device code or
 * a cubin built without -rdc); HBG_E_BUSY (an id registered already, or
 * twice in impls); HBG_E_NOTFOUND (the image's symbol table, where hbg can
 * read it, lacks the symbol); HBG_E_KERNEL (the driver's linker refused
 * the code); HBG_E_UNSUPPORTED (not a sim or cuda exec=device device, or a
 * driver without the cuLink* calls); HBG_E_NOMEM; a mapped driver error. */
HBG_API int hbg_kernel_register(struct hbg_device *dev,
                                const hbg_kernel_impl *impls, uint32_t n);

/* One kernel launch. args are the tensors (inputs and outputs, mode says
 * which), scalars the scalar arguments, deps earlier task ids this task waits
 * for.
 *
 * Dependencies. Inside a record callback they are inferred from the data:
 * an inner task waits for every earlier inner task whose tensors overlap
 * its own bytes where either of the two writes (read after write, write
 * after read, write after write); deps (earlier inner node ids) may add
 * more. Between the entries of a bind -- ordinary tasks and graph
 * submissions -- the runtime's hbg_config.deps decides: with
 * HBG_DEPS_EXPLICIT (the default) an entry waits only for the task ids in
 * its deps (hbg_task.deps, hbg_graph_submit.deps), and entries without a
 * path between them may run concurrently, so a layer that reads the
 * previous layer's output must name that layer's id; with
 * HBG_DEPS_INFERRED the same data rule as inside a recording applies
 * between entries too, and deps may add more (see hbg_deps). */
typedef struct hbg_task {
  uint32_t kernel;
  uint32_t n_args;
  hbg_tensor *args; /* in/out: see hbg_tensor about addr == 0 outputs */
  uint32_t n_scalars;
  uint32_t n_deps;
  const hbg_scalar *scalars;
  const hbg_task_id *deps;
} hbg_task;

/* ------------------------------------------------------------------ */
/* Runtime                                                             */
/* ------------------------------------------------------------------ */

typedef struct hbg_runtime hbg_runtime;
typedef struct hbg_bind hbg_bind;
typedef struct hbg_recorder hbg_recorder;
struct hbg_device;

typedef enum hbg_policy {
  HBG_POLICY_DEFERRED = 0,
  HBG_POLICY_PINNED_EAGER = 1,
  HBG_POLICY_COALESCED = 2,
  HBG_POLICY_PINNED_BULK = 3,
  HBG_POLICY__COUNT
} hbg_policy;

/* Upload policies (values pinned forever):
 * - deferred: each Submission carries its Definition inline, in heap memory;
 *   after orchestration one device allocation + sync copy per Submission,
 *   freed when the bind completes.
 * - pinned-eager: the same images in the slot's retained pinned arena, each
 *   copied the moment it is published into a device buffer retained per
 *   {graph key, occurrence}.
 * - coalesced: Definitions resident on the device by content hash; small
 *   Submissions ride in the window, one copy at launch.
 * - pinned-bulk: the same images as pinned-eager in the pinned arena,
 *   nothing copied during orchestration; at launch all of them in ONE copy
 *   into the slot's retained device block.
 * @return "deferred", "pinned-eager", "coalesced", "pinned-bulk", or NULL. */
HBG_API const char *hbg_policy_name(int policy);
/* @return 0 and *out, or HBG_E_INVAL for an unknown name. */
HBG_API int hbg_policy_parse(const char *name, int *out);

/* How the entries of a bind are ordered (hbg_config.deps; values pinned).
 * - explicit (default): an entry waits only for the task ids in its deps.
 * - inferred: each entry also waits for every earlier entry of the bind
 *   whose bytes overlap its own where either writes (RAW, WAR, WAW), the
 *   rule recordings use; a graph submission counts its boundary tensors,
 *   each as a write when an inner task writes it (or a view of it) and as
 *   a read otherwise. Explicit deps are merged in. An entry waits for at
 *   most 256 distinct earlier entries (HBG_E_LIMIT past that). */
typedef enum hbg_deps {
  HBG_DEPS_EXPLICIT = 0,
  HBG_DEPS_INFERRED = 1,
  HBG_DEPS__COUNT
} hbg_deps;

/* When Definitions are recorded (hbg_config.record; values pinned).
 * - once (default): on a key's first submission; the host Definition is
 *   kept in the graph cache.
 * - per-bind: every bind records each key again on its first submission in
 *   that bind (the host recordings are dropped at hbg_bind_begin), as a
 *   runtime without a host Definition cache does. What the policies keep
 *   on the device is kept as with once (a Definition with the same content
 *   stays resident under coalesced). */
typedef enum hbg_record {
  HBG_RECORD_ONCE = 0,
  HBG_RECORD_PER_BIND = 1,
  HBG_RECORD__COUNT
} hbg_record;

/* @return "explicit" / "inferred", or NULL. */
HBG_API const char *hbg_deps_name(int deps);
/* @return 0 and *out, or HBG_E_INVAL for an unknown name. */
HBG_API int hbg_deps_parse(const char *name, int *out);
/* @return "once" / "per-bind", or NULL. */
HBG_API const char *hbg_record_name(int record);
/* @return 0 and *out, or HBG_E_INVAL for an unknown name. */
HBG_API int hbg_record_parse(const char *name, int *out);

/* Upper limits of hbg_config fields (and of their HBG_* variables). */
#define HBG_ARENA_BYTES_MAX (1ull << 32) /* 4 GiB: images use u32 offsets */
#define HBG_PIPELINE_DEPTH_MAX 64

enum {
  HBG_CFG_POISON_STAGING = 1u << 0, /* overwrite host staging after upload */
  HBG_CFG_NO_LAUNCH = 1u << 1       /* upload only; do not execute (timing) */
};

typedef struct hbg_config {
  uint32_t struct_size;       /* sizeof(hbg_config), set by hbg_config_init;
                                 HBG_CONFIG_SIZE_V1 (a caller built before
                                 deps and record) is accepted too */
  uint32_t policy;            /* hbg_policy; env HBG_POLICY */
  const char *device;         /* backend name, default "sim"; env HBG_DEVICE */
  const char *device_options; /* backend options "k=v,k=v"; env HBG_DEVICE_OPTIONS */
  struct hbg_device *device_handle; /* optional: an open device to use
                                       (not owned; outlives the runtime) */
  uint64_t arena_bytes;       /* initial pinned staging arena per slot
                                 (pinned-eager, pinned-bulk, coalesced;
                                 deferred has none); 0 = 16 MiB, at most
                                 HBG_ARENA_BYTES_MAX; grown at a bind's
                                 start to the last bind's need;
                                 env HBG_ARENA_BYTES */
  uint32_t pipeline_depth;    /* binds in flight, 0 = 2, at most
                                 HBG_PIPELINE_DEPTH_MAX; env HBG_PIPELINE_DEPTH.
                                 Whatever the depth, binds execute on the
                                 device one after another in launch order
                                 (hbg_bind_launch); what overlaps a running
                                 bind is the host's orchestration of the
                                 next ones and their uploads */
  uint32_t coalesce_chunk_bytes; /* coalesced: start async chunks of at
                                    least this size during orchestration;
                                    0 = one copy at launch */
  uint64_t orch_id;           /* orchestration identity, part of full keys */
  uint32_t flags;             /* HBG_CFG_* */
  uint32_t graph_cache_max;   /* recorded graphs kept (the graph cache),
                                 0 = 256; env HBG_GRAPH_CACHE_MAX. Past it the
                                 least recently used graph is evicted: its
                                 host Definition, its device copy
                                 (coalesced) and its per-{key, occurrence}
                                 buffers (pinned-eager), each freed once no
                                 bind in flight may read it. A key
                                 submitted again is recorded again. */
  const char *env_invalid;    /* set by hbg_config_init: NULL, or the name
                                 of the first HBG_* variable whose value it
                                 rejected (static storage) */
  /* Fields below were appended after the first release: a caller built
   * before them has struct_size == HBG_CONFIG_SIZE_V1 and gets their
   * defaults. */
  uint32_t deps;              /* hbg_deps: how entries of a bind are
                                 ordered; env HBG_DEPS (explicit,
                                 inferred) */
  uint32_t record;            /* hbg_record: when Definitions are
                                 recorded; env HBG_RECORD (once,
                                 per-bind) */
} hbg_config;

/* sizeof(hbg_config) before deps and record were added. */
#define HBG_CONFIG_SIZE_V1 72u

/* Fill cfg with defaults, then apply the HBG_* environment variables:
 * HBG_POLICY (a policy name), HBG_DEVICE (a backend name),
 * HBG_DEVICE_OPTIONS, HBG_ARENA_BYTES (1 .. HBG_ARENA_BYTES_MAX, K/M/G
 * suffix), HBG_PIPELINE_DEPTH (1 .. HBG_PIPELINE_DEPTH_MAX),
 * HBG_GRAPH_CACHE_MAX (1 .. UINT32_MAX), HBG_DEPS (explicit, inferred),
 * HBG_RECORD (once, per-bind). An empty
 * variable counts as unset. An invalid value is not replaced by the
 * default: cfg->env_invalid names the variable, hbg_last_error() says
 * what is wrong, and hbg_runtime_create() with this cfg fails with
 * HBG_E_INVAL. */
HBG_API void hbg_config_init(hbg_config *cfg);

/* Open the device and create a runtime on it.
 * @return 0, HBG_E_INVAL (bad config: a field out of its documented range,
 * or cfg->env_invalid set), HBG_E_NOTFOUND (unknown device), HBG_E_NOMEM,
 * or a device error. On failure hbg_last_error() names the culprit (the
 * field or variable and its value, or the device call that failed, what it
 * was creating and the device's message). */
HBG_API int hbg_runtime_create(const hbg_config *cfg, hbg_runtime **out);
/* Wait for binds in flight, release retained device buffers, arenas and
 * Definitions (reverse order of creation), then free every buffer of
 * hbg_buffer_alloc still live (one never freed, or one whose
 * hbg_buffer_free returned a failed wait) and forget every import still
 * live (the caller's memory untouched), whatever failed before, and
 * last close the device if the runtime opened it: on a device the caller
 * passed in cfg.device_handle, nothing the runtime allocated stays behind.
 * Accepts NULL. A release that fails does not stop the rest: the device
 * counts it (hbg_dev_stats.free_failures) and hbg_last_error() names the
 * first (the call, the object, the device's message); with none,
 * hbg_last_error() is left as it was. */
HBG_API void hbg_runtime_destroy(hbg_runtime *rt);
/* @return the device the runtime uses (owned by the runtime or the caller). */
HBG_API struct hbg_device *hbg_runtime_device(hbg_runtime *rt);
/* @return the runtime's policy. */
HBG_API int hbg_runtime_policy(const hbg_runtime *rt);
/* @return the runtime's dependency mode (hbg_deps: cfg.deps as created),
 * or HBG_E_INVAL for NULL. */
HBG_API int hbg_runtime_deps(const hbg_runtime *rt);
/* Last backend-native error seen by the runtime's device.
 * @return 0 and *code, *msg (msg valid until the next device call), or
 * HBG_E_NOTFOUND when none was recorded. */
HBG_API int hbg_runtime_last_native_error(hbg_runtime *rt, int64_t *code,
                                          const char **msg);

/* Device buffers for tensor data (inputs, weights, outputs), owned by the
 * runtime: hbg_runtime_destroy frees the ones still live. A free that
 * fails is final like every release (the device may have let the memory
 * go): the buffer leaves the runtime all the same, so a later task naming
 * it is HBG_E_RANGE, and the device counts the failure
 * (hbg_dev_stats.free_failures). */
HBG_API int hbg_buffer_alloc(hbg_runtime *rt, uint64_t bytes, uint64_t *out);
/* Import memory the caller allocated and keeps owning (an engine's
 * tensor), without a copy: from then on [*out, *out + bytes) is usable
 * wherever a buffer of hbg_buffer_alloc is (tensors of tasks and graph
 * submissions, hbg_buffer_write / _read / _host_ptr), checked the same way
 * (a tensor leaving it is HBG_E_RANGE).
 *   cuda  addr is a device pointer in the device's context (cuMemAlloc,
 *         PyTorch's caching allocator); *out is addr. Validated once, here,
 *         with cuPointerGetAttributes: the pointer's context must be the
 *         device's (primary) context, its memory type device memory, and
 *         the driver's address range of it must hold [addr, addr + bytes).
 *         The bounds are the caller's: a tensor that is a sub-block of a
 *         larger allocation (a caching allocator's segment, an expandable
 *         segment's reservation) imports only its own bytes. The device's
 *         registry of live allocations takes the range, so exec=device and
 *         the verifier accept tensors in it.
 *   sim   addr is a HOST pointer (cast to uint64_t) to memory the caller
 *         owns; the sim maps it into its device address space zero-copy
 *         and *out is the sim device address naming it (with addr's low 8
 *         bits, so alignment carries over): kernels, copies and the
 *         executor read and write the caller's bytes directly, so a write
 *         through addr between binds is what the next bind reads.
 * The caller keeps the memory valid, and does not reuse it, until the
 * import is freed (hbg_buffer_free, which forgets it and never frees the
 * caller's memory) or the runtime destroyed (which forgets live imports
 * the same way). hbg never frees, moves or resizes it.
 * @return 0 and *out; HBG_E_INVAL (NULL rt or out, addr 0, bytes 0, a
 * range that wraps, one overlapping a live buffer or import of the
 * device: hbg_last_error() names both); HBG_E_RANGE (cuda: the pointer is
 * not CUDA memory, is host or managed memory, belongs to another context,
 * or its allocation ends before addr + bytes: hbg_last_error() names the
 * address, the bytes and which, "ends 4096 bytes early");
 * HBG_E_UNSUPPORTED (a device that cannot import: acl, a driver without
 * cuPointerGetAttributes); HBG_E_LIMIT (sim: no room left in its import
 * address space); HBG_E_NOMEM; HBG_E_BUSY; or a device error. */
HBG_API int hbg_buffer_import(hbg_runtime *rt, uint64_t addr, uint64_t bytes,
                              uint64_t *out);
/* The host address of [addr, addr + bytes) inside a live buffer of rt
 * (allocated or imported), where the device's memory is host-addressable:
 * on the sim its heap, or the caller's own pages for an import (for a
 * zero-copy host view, e.g. a DLPack kDLCPU export). Not ordered with
 * binds: read or write through it only while no bind in flight uses the
 * buffer (after hbg_bind_wait).
 * @return 0 and *out; HBG_E_RANGE (the range is not inside one live
 * buffer of rt); HBG_E_UNSUPPORTED (device memory the host cannot
 * address: cuda, acl); HBG_E_INVAL (NULL rt or out); HBG_E_BUSY. */
HBG_API int hbg_buffer_host_ptr(hbg_runtime *rt, uint64_t addr,
                                uint64_t bytes, void **out);
/* Free a buffer of hbg_buffer_alloc, or forget one of hbg_buffer_import
 * (the caller's memory is left as it is, never freed). addr must be the
 * start of a live buffer of rt: anything else (an address inside a buffer,
 * one already freed, another runtime's, memory the runtime uses for
 * itself) is HBG_E_INVAL and changes nothing. A launched bind may still
 * read or write the buffer, so this first waits for every bind of rt in
 * flight (launched, not yet reclaimed): freeing a workload's buffers right
 * after launching a bind, without waiting for it, is safe, and so is
 * reusing an import's memory once this returns 0; when that wait fails,
 * its error is returned and the buffer stays live (free it again, or
 * hbg_runtime_destroy frees or forgets it).
 * @return 0, HBG_E_INVAL, or a device error. */
HBG_API int hbg_buffer_free(hbg_runtime *rt, uint64_t addr);
/* Copy bytes between host memory and device memory (a buffer of
 * hbg_buffer_alloc), synchronously. Ordered with binds like a copy on a
 * device-wide queue: each call first waits until every bind of rt launched
 * before it has completed on the device, so a write is seen by every bind
 * launched after it and by none launched before, and a read sees what
 * every bind launched before it wrote. The cost: called while binds are in
 * flight, it waits for them (the pipeline drains); called between binds
 * (after hbg_bind_wait), it costs only the copy. Write inputs before
 * hbg_bind_launch and read results after hbg_bind_wait to keep binds
 * overlapping. Not ordered against a bind still open (not launched).
 * @return 0, HBG_E_INVAL, a device error (the wait's: nothing copied). */
HBG_API int hbg_buffer_write(hbg_runtime *rt, uint64_t dst, const void *src,
                             uint64_t bytes);
HBG_API int hbg_buffer_read(hbg_runtime *rt, void *dst, uint64_t src,
                            uint64_t bytes);

/* ------------------------------------------------------------------ */
/* Binds                                                               */
/* ------------------------------------------------------------------ */

/* Start a bind on the next pipeline slot. Waits for the device to finish the
 * bind that last used that slot, then reclaims its staging space.
 * Slots are used round-robin.
 * @return 0, HBG_E_STATE (the next slot is still held by a bind not yet
 * ended), HBG_E_NESTED (called from a record callback), or a device error. */
HBG_API int hbg_bind_begin(hbg_runtime *rt, hbg_bind **out);

/* Append an ordinary task. *out (optional) receives its task id.
 * Checked here, before anything is appended: every tensor (see hbg_tensor:
 * metadata, element 0 aligned to its dtype, inside one live buffer) and the
 * kernel's signature (argument count, dtypes, modes, shapes, scalar count).
 * @return 0, HBG_E_INVAL (bad or misaligned tensor, bad dependency),
 * HBG_E_RANGE (a tensor outside every live buffer, or leaving the one its
 * addr is in), HBG_E_KERNEL (unknown kernel, arguments it does not take,
 * or an output overlapping an input: see the kernels' rules),
 * HBG_E_LIMIT, HBG_E_NESTED, HBG_E_STATE, HBG_E_FATAL. After a refused
 * tensor, signature, overlap or dependency id, hbg_last_error() names the
 * argument and the rule
 * ("hbg_submit_task: argument 0: element 0 (offset 2) is not aligned ...",
 * "hbg_submit_task: add takes 3 tensors, got 2"). */
HBG_API int hbg_submit_task(hbg_bind *b, const hbg_task *t, hbg_task_id *out);

typedef int (*hbg_record_fn)(hbg_recorder *rec, void *user);

typedef struct hbg_graph_submit {
  uint64_t key;                 /* caller's graph key */
  const uint64_t *variant;      /* config values selecting a variant */
  uint32_t n_variant;
  uint32_t n_tensors;           /* boundary tensors */
  const hbg_tensor *tensors;
  const uint64_t *scalars;      /* boundary scalars */
  uint32_t n_scalars;
  uint32_t n_deps;              /* earlier task ids of this bind that this
                                   graph waits for (with HBG_DEPS_INFERRED,
                                   merged with the inferred ones) */
  const hbg_task_id *deps;
  hbg_record_fn record;         /* called only when the key is recorded */
  void *user;
} hbg_graph_submit;

/* Submit one replay of a graph. On the key's first submission in this
 * runtime the record callback runs and its inner tasks become the
 * Definition; later submissions only build a Submission. Boundary tensors
 * are checked as hbg_submit_task checks its arguments; a replay also needs
 * element 0 of each boundary tensor aligned to the largest element size of
 * the views recorded on it. Boundary tensors may share bytes only where
 * the recorded inner tasks that touch them are ordered by the graph's
 * dependencies (a task writing a new KV row, then attention reading the
 * cache that holds it), or where one in-place task's output is exactly
 * its input: two inner tasks nothing orders may not both touch shared
 * bytes with one writing them (HBG_E_INVAL, naming both boundary tensors
 * and the bytes; in a recording of more than 4096 inner tasks, or where
 * two overlapping boundary tensors have more than 65536 pairs of
 * accesses, such an overlap is refused whatever the order). A recording
 * in which any hbg_record_task call
 * failed is never kept: the next submission of the key records again.
 * @return 0, HBG_E_INVAL (bad, misaligned or aliasing boundary tensors),
 * HBG_E_RANGE
 * (a boundary tensor outside its live buffer), HBG_E_NESTED, HBG_E_RECORD
 * (callback returned non-zero; its code is not kept, and hbg_last_error()
 * gives it and, when one failed, the first failed hbg_record_task's own
 * message), the first error an
 * hbg_record_task call of the callback returned (when the callback itself
 * returned 0: HBG_E_KERNEL, HBG_E_INVAL, ...), HBG_E_EMPTY,
 * HBG_E_SIGNATURE, HBG_E_LIMIT, HBG_E_FATAL (the bind latched a fatal
 * error), or a device error (which latches HBG_E_FATAL on the bind).
 * hbg_last_error() names a refused boundary tensor, what differs from the
 * recorded signature (the counts, or the first differing field of a
 * boundary tensor: "key 7: boundary tensor 2: shape [4, 8], recorded
 * [4, 16]"), a dependency id that names no earlier task, or the inner
 * task, argument and rule of a recording that is not kept. */
HBG_API int hbg_submit_graph(hbg_bind *b, const hbg_graph_submit *g,
                             hbg_task_id *out);

enum {
  HBG_GRAPH_N_CHAIN = 1u << 0 /* replay i > 0 depends on replay i - 1 */
};

/* Submit n replays of one graph in one call (batched hbg_submit_graph):
 * replay i takes the boundary tensors g->tensors[i * g->n_tensors ...] and
 * scalars g->scalars[i * g->n_scalars ...]; key, variant, record and user
 * are shared. Replay 0 waits for g->deps; later replays wait for g->deps
 * too, or with HBG_GRAPH_N_CHAIN only for the replay before them (the
 * layer chain of a decode step). Replays run in order, as n calls of
 * hbg_submit_graph would; on an error the earlier replays stay submitted.
 * out (optional) receives the n task ids.
 * @return 0, HBG_E_INVAL (NULL b or g, n == 0, NULL arrays, unknown
 * flags), HBG_E_NOMEM, or the first failing replay's error (as
 * hbg_submit_graph). */
HBG_API int hbg_submit_graph_n(hbg_bind *b, const hbg_graph_submit *g,
                               uint32_t n, uint32_t flags, hbg_task_id *out);

/* Inside a record callback: append an inner task. Outputs with addr == 0 are
 * placed in the graph's heap block and t->args[i].addr is updated. Every
 * other argument must be the output of an earlier inner task (or part of
 * it), a boundary tensor (same buffer, offset and layout), or lie inside
 * one: it is then a view of the smallest boundary tensor that contains it,
 * kept as an offset from that tensor's element 0, so that it moves with
 * the tensor in later replays. A strided boundary tensor contains only its
 * elements: a view must lie inside one of its innermost contiguous runs
 * (a slice of one head's row of a [heads][D] row with stride T*D, not a
 * range spanning the holes between heads, which stays with a dense tensor
 * that holds it). Element 0 of every argument must be aligned
 * to its dtype, and a view's offset from its boundary tensor's element 0 a
 * multiple of its element size. An argument that writes (mode OUT or
 * INOUT) a boundary tensor, or a view of one, needs a boundary tensor whose
 * mode includes HBG_ACCESS_OUT. The kernel's signature and the overlap
 * rule are checked as in hbg_submit_task (an inner output with addr 0 is
 * placed apart from everything). Any failure also marks the recording bad: the callback
 * may go on, but no Definition is built from it.
 * @return 0, HBG_E_INVAL (bad, misaligned, or unknown tensor: neither an
 * earlier inner output nor inside a boundary tensor; a write into an
 * input-only boundary tensor), HBG_E_KERNEL,
 * HBG_E_NESTED (used outside a callback), HBG_E_LIMIT; hbg_last_error()
 * then names the inner task, the argument and what is wrong. */
HBG_API int hbg_record_task(hbg_recorder *rec, hbg_task *t, hbg_task_id *out);
/* Inside a record callback: the boundary of the submission being recorded. */
HBG_API const hbg_tensor *hbg_record_tensors(hbg_recorder *rec, uint32_t *n);
HBG_API const uint64_t *hbg_record_scalars(hbg_recorder *rec, uint32_t *n);
/* Inside a record callback: make the Definition being recorded at least
 * def_size bytes (rounded up to 8) by appending an opaque pad section, which
 * no reader interprets but which is uploaded, hashed and validated like the
 * rest of the image (for benchmarks that need a Definition of a given size;
 * docs/ARCHITECTURE.md, "Images"). No pad when the recorded Definition is
 * already that large; 0 (the default) means none.
 * @return 0, HBG_E_INVAL (rec NULL), HBG_E_LIMIT (def_size > 16 MiB). */
HBG_API int hbg_record_pad(hbg_recorder *rec, uint32_t def_size);

/* Finish orchestration: upload what is left and launch the bind on the
 * device (asynchronously). Binds of one runtime execute on the device in
 * launch order, whatever pipeline_depth: this bind's execution starts only
 * after the previously launched bind has completed (its queue waits for
 * that bind's completion event on the device; a backend without
 * queue_wait_event makes this call wait on the host instead). Only host
 * orchestration and uploads overlap a running bind. When that wait cannot
 * be set up, the bind is latched (HBG_E_FATAL later) and nothing of it is
 * launched. When the completion event cannot be recorded
 * after the launch, the bind is drained and collected here instead (it
 * ran, so it is not reported as failed).
 * @return 0, HBG_E_FATAL (latched earlier: nothing is launched), HBG_E_STATE,
 * or a device error (the bind is not launched; except when both recording
 * the completion event and draining fail: then it ran with an unknown
 * outcome and the error is latched). */
HBG_API int hbg_bind_launch(hbg_bind *b);

/* Launch b on a queue the caller owns, instead of the runtime's own: on
 * cuda a CUstream of the device's context (for example PyTorch's current
 * stream), on the sim a queue the caller made with hbg_dev_queue_create
 * on hbg_runtime_device(rt) (hbg_device.h). The bind runs after the work
 * the caller queued on that stream before this call, and the caller's work
 * queued after it sees its results; binds of the runtime still run in
 * launch order (the stream waits, on the device, for the bind launched
 * before when that one went to another queue). hbg never creates,
 * synchronises or destroys the caller's stream: it wraps it at the first
 * launch (which prepares per-stream state: on cuda exec=device the
 * executor's scratch block, device memory) and keeps the wrapper until
 * hbg_runtime_stream_forget or hbg_runtime_destroy. Under the coalesced
 * policy with coalesce_chunk_bytes 0, the launch makes no allocation, no
 * synchronisation, no query and no module load: one async copy of the
 * window from the pinned arena, the executor's launch, and event records.
 *
 * Capture. When the caller is capturing the stream (cuStreamBeginCapture),
 * nothing runs now: the window copy and the executor's launch are recorded
 * into the caller's graph, and every replay of the graph runs the bind as
 * it was orchestrated, reading the caller's tensors as they are then. The
 * bind's staging (its pinned window, device window and status word) goes
 * to the graph, which frees it when the graph and its instances are
 * destroyed; hbg_bind_wait on a captured bind returns 0 at once. Only the
 * coalesced policy captures (others: HBG_E_CAPTURING). While a capture on
 * a stream hbg launched on runs, every call that would allocate, free,
 * copy synchronously, wait or query returns HBG_E_CAPTURING before it
 * touches the driver, so the capture stays valid: wait for earlier binds
 * before capturing, launch once on the stream before capturing on it, and
 * capture at most pipeline_depth binds per capture. docs/INTEROP.md has
 * the rules.
 * @return as hbg_bind_launch, plus HBG_E_INVAL (stream NULL, or not a
 * queue of the device), HBG_E_LIMIT (HBG_DEV_BORROWED_MAX streams in use),
 * HBG_E_UNSUPPORTED (a backend that cannot borrow queues), HBG_E_CAPTURING
 * (the capture cannot take this bind, named in hbg_last_error(); nothing
 * was launched and the bind stays open, or the capture was invalidated
 * before). */
HBG_API int hbg_bind_launch_on(hbg_bind *b, void *stream);

/* Forget a stream hbg_bind_launch_on wrapped (after waiting for the binds
 * launched on it), before the caller destroys it.
 * @return 0, HBG_E_NOTFOUND (never launched on, or forgotten already),
 * HBG_E_INVAL, HBG_E_CAPTURING (a capture runs on a stream hbg launched
 * on: forgetting frees device state), or the wait's error (the stream
 * stays known). */
HBG_API int hbg_runtime_stream_forget(hbg_runtime *rt, void *stream);

/* Wait for a launched bind to complete and collect the device status.
 * @return 0, the device-side error (e.g. HBG_E_IMG_HASH, HBG_E_KERNEL,
 * HBG_E_RANGE, HBG_E_IMG_TENSOR_ALIGN; hbg_bind_error_location says where,
 * and hbg_last_error() repeats it in words) or a device error.
 * HBG_E_TIMEOUT: the device executor (cuda, exec=device) waited past its
 * deadline (the device option deadline_ms=, default 10 s) for its CTAs to
 * be resident or for its items, and ended the launch; hbg_last_error()
 * says where it waited (the launch's start or a set-up barrier, with how
 * many CTAs got there; or the run, with the item still running, which
 * hbg_bind_error_location gives too). The runtime stays usable: the next
 * bind runs as usual. A kernel that never returns (a user kernel that
 * loops) still holds its worker, so this call returns when it does. */
HBG_API int hbg_bind_wait(hbg_bind *b);

/* Where the device-side error hbg_bind_wait returned happened.
 * *entry is the window entry (the task id hbg_submit_task or
 * hbg_submit_graph gave it); *node the inner node of that graph (in record
 * order, the id hbg_record_task gave it), or HBG_TASK_NONE for an ordinary
 * task or an error in the graph's images rather than in one node.
 * @return 0 and both, HBG_E_NOTFOUND (no device-side error, not waited yet,
 * or the device could not name an entry: a bad window header), or
 * HBG_E_INVAL (NULL argument). */
HBG_API int hbg_bind_error_location(const hbg_bind *b, uint32_t *entry,
                                    uint32_t *node);

/* Per-bind records. Times in nanoseconds (monotonic clock). */
typedef struct hbg_phase_bytes {
  uint64_t bytes;
  uint64_t copies;
} hbg_phase_bytes;

typedef struct hbg_bind_stats {
  uint32_t struct_size;
  uint32_t policy;
  uint64_t host_orch_ns;     /* orchestration minus upload time nested in it */
  uint64_t graph_upload_ns;  /* Submissions and Definitions */
  uint64_t window_upload_ns; /* task window and the rest */
  uint64_t control_plane_ns; /* sum of the three */
  uint64_t exec_ns;          /* launch to completion (after hbg_bind_wait),
                                host clock */
  hbg_phase_bytes graph;     /* graph images (Submissions + Definitions) */
  hbg_phase_bytes window;    /* task window */
  uint64_t def_bytes;        /* Definition bytes uploaded (part of graph),
                                inline copies included */
  uint64_t h2d_bytes;        /* all H2D bytes of the bind */
  uint64_t h2d_copies;       /* all H2D copies of the bind */
  uint32_t n_tasks;          /* task window entries */
  uint32_t n_graphs;         /* graph submissions */
  uint32_t n_recorded;       /* Definitions recorded in this bind */
  uint32_t leftover;         /* images uploaded by the leftover scan */
  uint32_t fallback;         /* images that fell back to heap memory */
  uint32_t dev_allocs;       /* device allocations made by the bind */
  uint64_t arena_high_water; /* bytes of pinned arena used */
  int32_t fatal;             /* latched fatal error, 0 if none */
  int32_t device_status;     /* device-side status after wait */
  uint32_t n_evicted;        /* graphs evicted from the graph cache by this
                                bind (hbg_config.graph_cache_max) */
  uint64_t device_ns;        /* device time of the launch (after
                                hbg_bind_wait): from an event recorded on
                                the slot's queue right before the launch to
                                the completion event, by the device's own
                                clock; 0 where the device keeps no event
                                timer (hbg_dev_ops.event_elapsed) or the
                                timer could not be read */
  /* The device executor's own account of the launch (after
   * hbg_bind_wait), where the device gives one (exec_split 1: the sim, and
   * cuda with exec=device); 0 elsewhere. */
  uint64_t device_setup_ns;    /* the device's clock from the executor's
                                  start to the end of its set-up */
  uint64_t device_run_ns;      /* from there to the end of the run */
  uint64_t exec_setup_nodes;   /* graph node records its set-up read,
                                  summed over its threads */
  uint64_t exec_defs_validated; /* Definitions the device structurally
                                   validated for this bind (every backend
                                   that validates; a verdict kept from an
                                   earlier bind is not counted) */
  uint32_t exec_split;         /* 1: the first three were reported */
  uint32_t exec_counts;        /* 1: the counters below were reported */
  /* The executor's counters (exec_counts 1: the sim, and cuda with
   * exec=device), summed over its workers; 0 elsewhere. */
  uint64_t exec_items;         /* items it ran (ordinary tasks + nodes) */
  uint64_t exec_dispatch_ops;  /* its scheduling's global atomics, fences,
                                  release stores and item-handing acquire
                                  loads (kernel bodies excluded; the sim:
                                  its scheduler's counted operations, done
                                  under its lock) */
  uint64_t exec_kernel_phases; /* kernel phases run (a barrier of the
                                  worker after each) */
  uint64_t device_body_ns;     /* device time inside kernel bodies (cuda
                                  exec=device; 0 on the sim) */
  uint64_t device_tail_ns;     /* from the window's completion to the
                                  executor's end (cuda exec=device) */
  uint32_t exec_workers;       /* its workers (a warp, a CTA, a thread) */
  uint32_t reserved2;
} hbg_bind_stats;

/* sizeof(hbg_bind_stats) before device_ns was added. */
#define HBG_BIND_STATS_SIZE_V1 152u
/* sizeof(hbg_bind_stats) before device_setup_ns was added. */
#define HBG_BIND_STATS_SIZE_V2 160u
/* sizeof(hbg_bind_stats) before exec_items was added. */
#define HBG_BIND_STATS_SIZE_V3 200u

/* *out receives the bind's statistics. Set out->struct_size to
 * sizeof(hbg_bind_stats) first: a caller built before device_ns has
 * HBG_BIND_STATS_SIZE_V1 there, one built before device_setup_ns
 * HBG_BIND_STATS_SIZE_V2, one built before exec_items
 * HBG_BIND_STATS_SIZE_V3, and gets nothing written past that; any other
 * value gets the whole struct (a struct grows only at its end).
 * @return 0 and *out, or HBG_E_INVAL. */
HBG_API int hbg_bind_stats_get(const hbg_bind *b, hbg_bind_stats *out);
/* @return the latched fatal error of the bind, 0 if none. */
HBG_API int hbg_bind_fatal(const hbg_bind *b);

/* End a bind: release the slot for reuse. A launched bind may still run on
 * the device; the slot's next hbg_bind_begin waits for it. A bind never
 * launched (or latched fatal) is rolled back. Accepts NULL; ignored when
 * called from a record callback. When another thread is inside a call on
 * the bind's runtime, waits for that call to return first. */
HBG_API void hbg_bind_end(hbg_bind *b);

/* ------------------------------------------------------------------ */
/* Tracing                                                             */
/* ------------------------------------------------------------------ */

enum {
  HBG_TRACK_ORCH = 0,   /* host orchestration (binds, record, build) */
  HBG_TRACK_UPLOAD = 1, /* host-side upload calls */
  HBG_TRACK_COPY = 2,   /* the device's copy engine */
  HBG_TRACK_DEVICE = 3  /* device execution of a launch */
};

typedef struct hbg_trace_event {
  uint32_t track;    /* HBG_TRACK_* */
  uint32_t reserved;
  const char *name;  /* static string */
  uint64_t start_ns; /* CLOCK_MONOTONIC */
  uint64_t dur_ns;
  uint64_t bytes;    /* bytes moved, 0 if not a copy */
  uint64_t bind_seq; /* bind sequence number, 0 if unknown */
} hbg_trace_event;

/* Trace callbacks run on the thread that did the work: the orchestration
 * thread for ORCH/UPLOAD, the device's threads for COPY/DEVICE, so the
 * callback must be thread-safe and quick. */
typedef void (*hbg_trace_fn)(void *user, const hbg_trace_event *ev);

/* Install (fn != NULL) or remove a trace callback on the runtime and its
 * device. @return 0 or HBG_E_INVAL. */
HBG_API int hbg_runtime_set_trace(hbg_runtime *rt, hbg_trace_fn fn,
                                  void *user);

/* ------------------------------------------------------------------ */
/* Images                                                              */
/* ------------------------------------------------------------------ */

/* Validate a Definition, Submission or task-window image and print it in
 * readable form (json != 0: one JSON object) to out.
 * @return 0, or the validator's HBG_E_IMG_* code (still prints what it
 * could read). */
HBG_API int hbg_image_dump(const void *img, size_t len, int json, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* HBG_HBG_H */
