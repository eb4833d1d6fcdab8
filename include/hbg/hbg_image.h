/*
 * hbg device-side image contract -- for executor authors.
 *
 * The three images hbg uploads (Graph Definition, Submission, task window),
 * a validator for each, and an iterator that expands one graph entry into
 * its nodes with every tensor argument resolved to a device address. An
 * executor written against this header alone (a CUDA scheduler kernel, an
 * AICPU scheduler, a CPU thread pool) reads what hbg uploads; the byte-level
 * specification is docs/FORMAT.md.
 *
 * Freestanding: includes only <stdint.h> and <stddef.h>, allocates nothing,
 * calls nothing outside this file. Compiles as C11, C++11 and later, and
 * with nvcc, where every function is __host__ __device__ (HBG_IMAGE_FN).
 * Its constants are copies of hbg.h's (hbg.h is not included); the library
 * checks at build time that both agree.
 *
 * Images are little-endian and 8-byte aligned; every internal reference is a
 * u32 byte offset from the image's first byte. The validators treat their
 * input as untrusted bytes and never read outside [img, img + len).
 *
 * Content hash: Definitions and Submissions carry an XXH3-64 (seed 0) hash
 * of their bytes with the 8-byte hash field read as zero. This header cannot
 * compute it; the validators take an optional hbg_img_hash_fn and skip the
 * hash check when it is NULL (the caller then checks it, or trusts the
 * bytes another way, e.g. a verdict cached by address and header).
 *
 * Thread safety: every function is pure (reads its arguments only).
 */
#ifndef HBG_HBG_IMAGE_H
#define HBG_HBG_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define HBG_IMAGE_FN __host__ __device__
#else
#define HBG_IMAGE_FN
#endif

/* HBG_IMAGE_STATIC_ASSERT(cond, msg): a compile-time check in C11 and C++. */
#if defined(__cplusplus)
#define HBG_IMAGE_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define HBG_IMAGE_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) &&             \
    __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hbg images are little-endian; big-endian hosts need byte swapping"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Constants (values pinned; equal to hbg.h's where both exist)        */
/* ------------------------------------------------------------------ */

#define HBG_IMG_VERSION 2u /* 2: compact Submission tensor table */
#define HBG_IMG_ALIGN 8u   /* images, tables and window entries */
#define HBG_IMG_HEAP_ALIGN 64u /* node output offsets in the heap block */
#define HBG_DEF_MAGIC 0x46454447u /* "GDEF" */
#define HBG_SUB_MAGIC 0x42555347u /* "GSUB" */
#define HBG_WIN_MAGIC 0x4e495747u /* "GWIN" */

/* Limits the validator enforces (they also bound the recorder). */
#define HBG_IMG_MAX_NODES 65536u
#define HBG_IMG_MAX_ARGS_PER_NODE 64u
#define HBG_IMG_MAX_SCALARS_PER_NODE 64u
#define HBG_IMG_MAX_BOUNDARY 4096u
#define HBG_IMG_MAX_BYTES (256u << 20)
#define HBG_IMG_MAX_DEF_PAD (16u << 20) /* bytes of a Definition's pad */
#define HBG_IMG_MAX_DIMS 4 /* HBG_MAX_DIMS */

/* Kernel ids: [0, HBG_IMG_KERNEL_BUILTIN_COUNT) are hbg's built-in kernels
 * (hbg_kernel_id), [HBG_IMG_KERNEL_USER_MIN, 2^32) are user kernels that
 * hbg records, uploads and validates without interpreting; the ids between
 * are reserved and invalid. */
#define HBG_IMG_KERNEL_BUILTIN_COUNT 12u /* HBG_KERNEL__COUNT */
#define HBG_IMG_KERNEL_USER_MIN 0x1000u  /* HBG_KERNEL_USER_MIN */

enum { /* hbg_dtype */
  HBG_IMG_DTYPE_F32 = 1,
  HBG_IMG_DTYPE_F16 = 2,
  HBG_IMG_DTYPE_BF16 = 3,
  HBG_IMG_DTYPE_I32 = 4,
  HBG_IMG_DTYPE_I64 = 5,
  HBG_IMG_DTYPE_U8 = 6
};

enum { /* HBG_ACCESS_* */
  HBG_IMG_ACCESS_IN = 1,
  HBG_IMG_ACCESS_OUT = 2,
  HBG_IMG_ACCESS_INOUT = 3
};

enum { /* HBG_SCALAR_* */
  HBG_IMG_SCALAR_STATIC = 0,
  HBG_IMG_SCALAR_BOUNDARY = 1
};

/* Results: 0 or one of these (equal to hbg.h's HBG_E_* of the same name,
 * HBG_IMG_E_TRUNCATED == HBG_E_IMG_TRUNCATED and so on). */
enum {
  HBG_IMG_OK = 0,
  HBG_IMG_E_INVAL = -1,          /* NULL argument, index out of range */
  HBG_IMG_E_RANGE = -8,          /* a resolved address wraps around */
  HBG_IMG_E_KERNEL = -20,        /* unknown kernel or bad arguments (for
                                    executors; the validators never return
                                    it) */
  HBG_IMG_E_TRUNCATED = -32,     /* fewer bytes than the header says */
  HBG_IMG_E_MAGIC = -33,         /* not an hbg image */
  HBG_IMG_E_VERSION = -34,       /* another format version */
  HBG_IMG_E_SIZE = -35,          /* total_size inconsistent */
  HBG_IMG_E_OFFSET = -36,        /* a table outside the image */
  HBG_IMG_E_ALIGN = -37,         /* an offset or the image misaligned */
  HBG_IMG_E_COUNT = -38,         /* a count out of range */
  HBG_IMG_E_CSR = -39,           /* fanin / fanout tables inconsistent */
  HBG_IMG_E_CYCLE = -40,         /* an edge not pointing forward */
  HBG_IMG_E_ROOTS = -41,         /* root list wrong */
  HBG_IMG_E_REF = -42,           /* bad source reference */
  HBG_IMG_E_HASH = -43,          /* content hash mismatch */
  HBG_IMG_E_KIND = -44,          /* another image kind's magic */
  HBG_IMG_E_DEF = -45,           /* Submission does not match Definition */
  HBG_IMG_E_FIELD = -46,         /* bad field value */
  HBG_IMG_E_TENSOR_ALIGN = -47,  /* element 0 misaligned for its dtype */
  HBG_IMG_E_BOUNDARY_WRITE = -48, /* a node writes (exact source) a boundary
                                     tensor whose signature mode is IN */
  HBG_IMG_E_VIEW_WRITE = -49      /* a node writes a view into a boundary
                                     tensor whose signature mode is IN */
};

/* ------------------------------------------------------------------ */
/* Graph Definition                                                    */
/* ------------------------------------------------------------------ */

typedef struct hbg_def_hdr {
  uint32_t magic;      /* HBG_DEF_MAGIC */
  uint32_t version;    /* HBG_IMG_VERSION */
  uint32_t total_size; /* bytes of the whole image */
  uint32_t flags;      /* 0 */
  uint64_t hash;       /* XXH3-64 of the image with this field zeroed */
  uint64_t heap_size;  /* bytes of the internal heap block one replay needs */
  uint32_t n_nodes;
  uint32_t n_edges;    /* entries in fanin (== entries in fanout) */
  uint32_t n_roots;    /* nodes with no fanin */
  uint32_t n_tensors;  /* tensor-argument records, all nodes */
  uint32_t n_scalars;  /* scalar-argument records, all nodes */
  uint32_t n_btensors; /* boundary tensor signatures */
  uint32_t n_bscalars; /* boundary scalars expected */
  uint32_t off_nodes;      /* hbg_def_node[n_nodes] */
  uint32_t off_fanin_ptr;  /* u32[n_nodes + 1], CSR row starts into fanin */
  uint32_t off_fanin;      /* u32[n_edges], producer node ids */
  uint32_t off_fanout_ptr; /* u32[n_nodes + 1] */
  uint32_t off_fanout;     /* u32[n_edges], consumer node ids */
  uint32_t off_roots;      /* u32[n_roots], ascending */
  uint32_t off_tensors;    /* hbg_def_tensor[n_tensors] */
  uint32_t off_scalars;    /* hbg_def_scalar[n_scalars] */
  uint32_t off_bsig;       /* hbg_def_bsig[n_btensors] */
  uint32_t off_pad;        /* opaque pad section, 0 if none */
  uint32_t pad_size;       /* its bytes, 0 if none */
} hbg_def_hdr; /* 104 bytes */

/* The pad section (optional) is opaque bytes no reader interprets:
 * benchmarks use it to give a Definition a chosen size. When present it is
 * the image's tail, 8-aligned, after every table (off_pad + pad_size ==
 * total_size), at most HBG_IMG_MAX_DEF_PAD bytes, and covered by the
 * content hash like every other byte. off_pad and pad_size are both 0
 * without one. */

typedef struct hbg_def_node {
  uint32_t kernel;
  uint32_t first_tensor; /* index into the tensor table */
  uint32_t n_tensors;
  uint32_t first_scalar; /* index into the scalar table */
  uint32_t n_scalars;
  uint32_t reserved;
  uint64_t heap_off;     /* start of this node's own outputs in the heap */
  uint64_t heap_size;    /* bytes of own outputs (0 if none) */
} hbg_def_node; /* 40 bytes */

enum {
  HBG_SRC_BOUNDARY_EXACT = 1, /* ref = boundary index; the boundary tensor
                                 itself (offset 0, its signature) */
  HBG_SRC_BOUNDARY_VIEW = 2,  /* ref = boundary index; offset relative to
                                 the boundary tensor's element 0 */
  HBG_SRC_INTERNAL = 3,       /* ref = producer node; offset in heap block */
  HBG_SRC_OWN_OUTPUT = 4      /* ref = this node; offset in heap block */
};

typedef struct hbg_def_tensor {
  uint8_t src;   /* HBG_SRC_* */
  uint8_t dtype; /* HBG_IMG_DTYPE_* */
  uint8_t ndim;
  uint8_t mode;  /* HBG_IMG_ACCESS_* */
  uint32_t ref;
  uint64_t offset;
  uint32_t shape[HBG_IMG_MAX_DIMS];
  uint32_t strides[HBG_IMG_MAX_DIMS]; /* in elements */
} hbg_def_tensor; /* 48 bytes */

typedef struct hbg_def_scalar {
  uint32_t kind;  /* HBG_IMG_SCALAR_STATIC / HBG_IMG_SCALAR_BOUNDARY */
  uint32_t index; /* boundary scalar index when BOUNDARY, else 0 */
  uint64_t value; /* static value */
} hbg_def_scalar; /* 16 bytes */

typedef struct hbg_def_bsig {
  uint8_t dtype;
  uint8_t ndim;
  uint8_t mode;
  uint8_t reserved;
  uint32_t reserved2;
  uint32_t shape[HBG_IMG_MAX_DIMS];
  uint32_t strides[HBG_IMG_MAX_DIMS];
} hbg_def_bsig; /* 40 bytes */

/* ------------------------------------------------------------------ */
/* Submission (one replay)                                             */
/* [hbg_sub_hdr][hbg_sub_bind[n_tensors]][u64 scalars[n_scalars]]      */
/* [inline Definition, optional]                                       */
/* ------------------------------------------------------------------ */

enum { HBG_SUB_INLINE_DEF = 1u }; /* a Definition copy follows */

typedef struct hbg_sub_hdr {
  uint32_t magic;      /* HBG_SUB_MAGIC */
  uint32_t version;
  uint32_t total_size; /* includes the inline Definition if any */
  uint32_t flags;      /* HBG_SUB_INLINE_DEF */
  uint64_t hash;       /* XXH3-64 over bytes [0, off_def or total_size) with
                          this field zeroed (the inline Definition carries
                          its own hash) */
  uint64_t def_hash;   /* content hash of the Definition it replays */
  uint64_t full_key;
  uint32_t occurrence;
  uint32_t n_tensors;  /* boundary tensors (== def n_btensors) */
  uint32_t n_scalars;  /* boundary scalars (== def n_bscalars) */
  uint32_t off_tensors; /* hbg_sub_bind[n_tensors] */
  uint32_t off_scalars; /* u64[n_scalars] */
  uint32_t off_def;     /* inline Definition, 0 if none */
  uint32_t def_size;    /* bytes of the Definition */
  uint32_t reserved;
} hbg_sub_hdr; /* 72 bytes */

/* Boundary tensor i of a replay: the Definition's bsig[i] at addr + offset. */
typedef struct hbg_sub_bind {
  uint64_t addr;   /* device address of the buffer, never 0 */
  uint64_t offset; /* bytes to element 0 */
} hbg_sub_bind; /* 16 bytes */

/* A full tensor record: the task window's ordinary-task arguments. */
typedef struct hbg_sub_tensor {
  uint64_t addr;   /* device address of the buffer */
  uint64_t offset; /* bytes to element 0 */
  uint32_t shape[HBG_IMG_MAX_DIMS];
  uint32_t strides[HBG_IMG_MAX_DIMS];
  uint8_t dtype;
  uint8_t ndim;
  uint8_t mode;
  uint8_t reserved;
  uint32_t reserved2;
} hbg_sub_tensor; /* 56 bytes */

/* ------------------------------------------------------------------ */
/* Task window (one bind)                                              */
/* [hbg_win_hdr][entries ...][u32 index[n_tasks]]                      */
/* Ordinary entry: hbg_win_task, hbg_sub_tensor[n_tensors],            */
/*   u64 scalars[n_scalars], u32 deps[n_deps] (padded to 8).           */
/* Graph entry: hbg_win_task (kernel 0), u32 deps[n_deps] (padded).    */
/* ------------------------------------------------------------------ */

enum { HBG_WIN_TASK = 1, HBG_WIN_GRAPH = 2 };

typedef struct hbg_win_hdr {
  uint32_t magic;      /* HBG_WIN_MAGIC */
  uint32_t version;
  uint32_t total_size;
  uint32_t n_tasks;
  uint32_t off_index;  /* u32[n_tasks] */
  uint32_t flags;
  uint64_t bind_seq;   /* bind sequence number (diagnostics) */
  uint64_t reserved[4];
} hbg_win_hdr; /* 64 bytes */

typedef struct hbg_win_task {
  uint32_t kind;      /* HBG_WIN_TASK / HBG_WIN_GRAPH */
  uint32_t size;      /* bytes of this entry, multiple of 8 */
  uint32_t kernel;
  uint32_t n_deps;
  uint32_t n_tensors;
  uint32_t n_scalars;
  uint32_t off_tensors; /* from the entry start */
  uint32_t off_scalars;
  uint32_t off_deps;
  uint32_t sub_size;    /* graph: bytes of the Submission */
  uint64_t sub_addr;    /* graph: device address of the Submission */
  uint64_t def_addr;    /* graph: device address of the Definition */
  uint64_t heap_addr;   /* graph: device address of its heap block */
  uint32_t def_size;    /* graph: bytes of the Definition */
  uint32_t reserved;
} hbg_win_task; /* 72 bytes */

/* Layout checks: sizes and every field offset a reader depends on. */
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_def_hdr) == 104, "hbg_def_hdr size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_hdr, hash) == 16, "def hash");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_hdr, heap_size) == 24, "def heap");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_hdr, n_nodes) == 32, "def n_nodes");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_hdr, off_nodes) == 60, "def offs");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_hdr, off_bsig) == 92, "def bsig");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_hdr, off_pad) == 96, "def pad");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_hdr, pad_size) == 100, "def pad size");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_def_node) == 40, "hbg_def_node size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_node, heap_off) == 24, "node heap");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_def_tensor) == 48, "hbg_def_tensor size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_tensor, ref) == 4, "tensor ref");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_tensor, offset) == 8, "tensor off");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_tensor, shape) == 16, "tensor shp");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_tensor, strides) == 32, "tensor st");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_def_scalar) == 16, "hbg_def_scalar size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_scalar, value) == 8, "scalar val");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_def_bsig) == 40, "hbg_def_bsig size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_def_bsig, shape) == 8, "bsig shape");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_sub_hdr) == 72, "hbg_sub_hdr size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_sub_hdr, hash) == 16, "sub hash");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_sub_hdr, def_hash) == 24, "sub def");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_sub_hdr, occurrence) == 40, "sub occ");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_sub_hdr, def_size) == 64, "sub dsz");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_sub_bind) == 16, "hbg_sub_bind size");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_sub_tensor) == 56, "hbg_sub_tensor size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_sub_tensor, dtype) == 48, "sub dtype");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_win_hdr) == 64, "hbg_win_hdr size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_win_hdr, bind_seq) == 24, "win seq");
HBG_IMAGE_STATIC_ASSERT(sizeof(hbg_win_task) == 72, "hbg_win_task size");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_win_task, sub_addr) == 40, "task sub");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_win_task, heap_addr) == 56, "task heap");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_win_task, def_size) == 64, "task dsz");

/* ------------------------------------------------------------------ */
/* Views (filled by the validators; point into the image, own nothing) */
/* ------------------------------------------------------------------ */

typedef struct hbg_img_def_view {
  const uint8_t *base;
  const hbg_def_hdr *hdr;
  const hbg_def_node *nodes;
  const uint32_t *fanin_ptr, *fanin;
  const uint32_t *fanout_ptr, *fanout;
  const uint32_t *roots;
  const hbg_def_tensor *tensors;
  const hbg_def_scalar *scalars;
  const hbg_def_bsig *bsig;
} hbg_img_def_view;

typedef struct hbg_img_sub_view {
  const uint8_t *base;
  const hbg_sub_hdr *hdr;
  const hbg_sub_bind *tensors; /* where each boundary tensor lives */
  const uint64_t *scalars;
  const uint8_t *inline_def; /* NULL unless HBG_SUB_INLINE_DEF */
} hbg_img_sub_view;

typedef struct hbg_img_win_view {
  const uint8_t *base;
  const hbg_win_hdr *hdr;
  const uint32_t *index;
} hbg_img_win_view;

/* Content hash of len bytes at img, the 8 bytes at hash_off read as zero
 * (XXH3-64, seed 0). Supplied by the caller (e.g. xxHash's XXH3_64bits). */
typedef uint64_t (*hbg_img_hash_fn)(const void *img, uint64_t len,
                                    uint64_t hash_off, void *user);

/* ------------------------------------------------------------------ */
/* Small accessors                                                     */
/* ------------------------------------------------------------------ */

/* @return bytes per element of an HBG_IMG_DTYPE_*, 0 for an unknown one. */
static inline HBG_IMAGE_FN uint32_t hbg_img_dtype_size(uint32_t dtype) {
  switch (dtype) {
  case HBG_IMG_DTYPE_F32:
  case HBG_IMG_DTYPE_I32:
    return 4;
  case HBG_IMG_DTYPE_F16:
  case HBG_IMG_DTYPE_BF16:
    return 2;
  case HBG_IMG_DTYPE_I64:
    return 8;
  case HBG_IMG_DTYPE_U8:
    return 1;
  default:
    return 0;
  }
}

/* @return 1 for a built-in or user kernel id, 0 for a reserved one. */
static inline HBG_IMAGE_FN int hbg_img_kernel_valid(uint32_t kernel) {
  return kernel < HBG_IMG_KERNEL_BUILTIN_COUNT ||
         kernel >= HBG_IMG_KERNEL_USER_MIN;
}

/* @return 1 for a user kernel id (>= HBG_IMG_KERNEL_USER_MIN). */
static inline HBG_IMAGE_FN int hbg_img_kernel_is_user(uint32_t kernel) {
  return kernel >= HBG_IMG_KERNEL_USER_MIN;
}

/* Bytes from element 0 to one past the last element of a tensor with these
 * fields: 1 + sum((shape[i] - 1) * strides[i]), times the element size.
 * @return 0 when a field is invalid (dtype, ndim outside 1..4, mode outside
 * 1..3, a zero dim below ndim, a non-zero dim or stride at or above ndim)
 * or the result overflows 64 bits. */
static inline HBG_IMAGE_FN uint64_t hbg_img_extent(uint32_t dtype,
                                                   uint32_t ndim,
                                                   uint32_t mode,
                                                   const uint32_t *shape,
                                                   const uint32_t *strides) {
  uint64_t es = hbg_img_dtype_size(dtype), last = 0;
  if (!es || ndim == 0 || ndim > HBG_IMG_MAX_DIMS ||
      mode < HBG_IMG_ACCESS_IN || mode > HBG_IMG_ACCESS_INOUT)
    return 0;
  for (uint32_t i = 0; i < HBG_IMG_MAX_DIMS; i++) {
    if (i >= ndim) {
      if (shape[i] != 0 || strides[i] != 0)
        return 0;
      continue;
    }
    if (shape[i] == 0)
      return 0;
    /* (2^32-1)^2 fits in u64; four of them summed may not. */
    uint64_t span = (uint64_t)(shape[i] - 1) * strides[i];
    if (last > UINT64_MAX - span)
      return 0;
    last += span;
  }
  if (last == UINT64_MAX || last + 1 > UINT64_MAX / es)
    return 0;
  return (last + 1) * es;
}

/* Entry i of a validated window, NULL when i is out of range. */
static inline HBG_IMAGE_FN const hbg_win_task *
hbg_img_win_task(const hbg_img_win_view *w, uint32_t i) {
  if (!w || !w->hdr || i >= w->hdr->n_tasks)
    return NULL;
  return (const hbg_win_task *)(const void *)(w->base + w->index[i]);
}

/* Tables of a validated window entry. */
static inline HBG_IMAGE_FN const hbg_sub_tensor *
hbg_img_win_task_tensors(const hbg_win_task *t) {
  return (const hbg_sub_tensor *)(const void *)((const uint8_t *)t +
                                                t->off_tensors);
}
static inline HBG_IMAGE_FN const uint64_t *
hbg_img_win_task_scalars(const hbg_win_task *t) {
  return (const uint64_t *)(const void *)((const uint8_t *)t +
                                          t->off_scalars);
}
static inline HBG_IMAGE_FN const uint32_t *
hbg_img_win_task_deps(const hbg_win_task *t) {
  return (const uint32_t *)(const void *)((const uint8_t *)t + t->off_deps);
}

/* Where a graph entry's Definition lives: inside its Submission when the
 * Submission carries it inline, else at t->def_addr.
 * @return its device address; *size its bytes. */
static inline HBG_IMAGE_FN uint64_t hbg_img_graph_def_addr(
    const hbg_win_task *t, const hbg_sub_hdr *sub, uint64_t *size) {
  if (sub->flags & HBG_SUB_INLINE_DEF) {
    *size = sub->def_size;
    return t->sub_addr + sub->off_def;
  }
  *size = t->def_size;
  return t->def_addr;
}

/* ------------------------------------------------------------------ */
/* Validator                                                           */
/* ------------------------------------------------------------------ */

/* Internal helpers (hbg_img__ prefix): not part of the contract. */
#define HBG_IMG__CHECK(cond, code)                                             \
  do {                                                                         \
    if (cond)                                                                  \
      return (code);                                                           \
  } while (0)
#define HBG_IMG__TRY(expr)                                                     \
  do {                                                                         \
    int hbg_img__rc = (expr);                                                  \
    if (hbg_img__rc < 0)                                                       \
      return hbg_img__rc;                                                      \
  } while (0)

/* A table of count elements of elem bytes at off lies inside the image,
 * after the header, aligned. */
static inline HBG_IMAGE_FN int hbg_img__table(uint64_t total,
                                              uint32_t hdr_size, uint32_t off,
                                              uint64_t count, uint64_t elem,
                                              uint32_t align) {
  HBG_IMG__CHECK(off % align, HBG_IMG_E_ALIGN);
  if (count == 0)
    return off <= total ? 0 : HBG_IMG_E_OFFSET;
  HBG_IMG__CHECK(off < hdr_size, HBG_IMG_E_COUNT);
  HBG_IMG__CHECK(off > total || count * elem > total - off, HBG_IMG_E_OFFSET);
  return 0;
}

/* Header checks every image shares; *total receives the image size. */
static inline HBG_IMAGE_FN int hbg_img__hdr(const void *img, uint64_t len,
                                            uint32_t hdr_size, uint32_t magic,
                                            uint32_t *total) {
  HBG_IMG__CHECK(!img, HBG_IMG_E_INVAL);
  HBG_IMG__CHECK((uintptr_t)img % HBG_IMG_ALIGN, HBG_IMG_E_ALIGN);
  HBG_IMG__CHECK(len < hdr_size, HBG_IMG_E_TRUNCATED);
  /* magic, version, total_size lead every header */
  const uint32_t *w = (const uint32_t *)img;
  if (w[0] != magic) {
    HBG_IMG__CHECK(w[0] == HBG_DEF_MAGIC || w[0] == HBG_SUB_MAGIC ||
                       w[0] == HBG_WIN_MAGIC,
                   HBG_IMG_E_KIND);
    return HBG_IMG_E_MAGIC;
  }
  HBG_IMG__CHECK(w[1] != HBG_IMG_VERSION, HBG_IMG_E_VERSION);
  HBG_IMG__CHECK(w[2] > HBG_IMG_MAX_BYTES || w[2] < hdr_size ||
                     w[2] % HBG_IMG_ALIGN,
                 HBG_IMG_E_SIZE);
  HBG_IMG__CHECK(len < w[2], HBG_IMG_E_TRUNCATED);
  HBG_IMG__CHECK(len != w[2], HBG_IMG_E_SIZE);
  *total = w[2];
  return 0;
}

/* Row i of a CSR table holds v? A binary search of ids[ptr[i], ptr[i + 1]),
 * right when the row ascends; a row reaching past n_edges (possible only in
 * a table a check has already refused) reads nothing and answers 0. */
static inline HBG_IMAGE_FN int hbg_img__row_has(const uint32_t *ptr,
                                                const uint32_t *ids,
                                                uint32_t n_edges, uint32_t i,
                                                uint32_t v) {
  uint32_t a = ptr[i], b = ptr[i + 1];
  if (b > n_edges)
    return 0;
  while (a < b) {
    uint32_t m = a + (b - a) / 2;
    if (ids[m] == v)
      return 1;
    if (ids[m] < v)
      a = m + 1;
    else
      b = m;
  }
  return 0;
}

/* [off, off + ext) inside node n's own outputs. */
static inline HBG_IMAGE_FN int hbg_img__in_node(uint64_t off, uint64_t ext,
                                                const hbg_def_node *n) {
  return off >= n->heap_off && off - n->heap_off <= n->heap_size &&
         ext <= n->heap_size - (off - n->heap_off);
}

static inline HBG_IMAGE_FN int hbg_img__same_layout(const uint32_t *a,
                                                    const uint32_t *b) {
  for (uint32_t i = 0; i < HBG_IMG_MAX_DIMS; i++)
    if (a[i] != b[i])
      return 0;
  return 1;
}

static inline HBG_IMAGE_FN int hbg_img__tensor_ref(const hbg_img_def_view *v,
                                                   uint32_t node,
                                                   const hbg_def_tensor *t,
                                                   uint64_t ext) {
  const hbg_def_hdr *h = v->hdr;
  switch (t->src) {
  case HBG_SRC_BOUNDARY_EXACT: {
    HBG_IMG__CHECK(t->ref >= h->n_btensors, HBG_IMG_E_REF);
    const hbg_def_bsig *s = &v->bsig[t->ref];
    HBG_IMG__CHECK(t->offset != 0 || t->dtype != s->dtype ||
                       t->ndim != s->ndim ||
                       !hbg_img__same_layout(t->shape, s->shape) ||
                       !hbg_img__same_layout(t->strides, s->strides),
                   HBG_IMG_E_REF);
    HBG_IMG__CHECK((t->mode & HBG_IMG_ACCESS_OUT) &&
                       !(s->mode & HBG_IMG_ACCESS_OUT),
                   HBG_IMG_E_BOUNDARY_WRITE);
    return 0;
  }
  case HBG_SRC_BOUNDARY_VIEW: {
    HBG_IMG__CHECK(t->ref >= h->n_btensors, HBG_IMG_E_REF);
    const hbg_def_bsig *s = &v->bsig[t->ref];
    uint64_t bext =
        hbg_img_extent(s->dtype, s->ndim, s->mode, s->shape, s->strides);
    HBG_IMG__CHECK(t->offset > bext || ext > bext - t->offset, HBG_IMG_E_REF);
    HBG_IMG__CHECK((t->mode & HBG_IMG_ACCESS_OUT) &&
                       !(s->mode & HBG_IMG_ACCESS_OUT),
                   HBG_IMG_E_VIEW_WRITE);
    return 0;
  }
  case HBG_SRC_INTERNAL:
    HBG_IMG__CHECK(t->ref >= node, HBG_IMG_E_REF);
    HBG_IMG__CHECK(
        !hbg_img__row_has(v->fanin_ptr, v->fanin, h->n_edges, node, t->ref),
        HBG_IMG_E_REF);
    HBG_IMG__CHECK(!hbg_img__in_node(t->offset, ext, &v->nodes[t->ref]),
                   HBG_IMG_E_REF);
    return 0;
  case HBG_SRC_OWN_OUTPUT:
    HBG_IMG__CHECK(!(t->mode & HBG_IMG_ACCESS_OUT), HBG_IMG_E_FIELD);
    HBG_IMG__CHECK(t->ref != node, HBG_IMG_E_REF);
    HBG_IMG__CHECK(!hbg_img__in_node(t->offset, ext, &v->nodes[node]),
                   HBG_IMG_E_REF);
    return 0;
  default:
    return HBG_IMG_E_FIELD;
  }
}

static inline HBG_IMAGE_FN int hbg_img__tensor(const hbg_img_def_view *v,
                                               uint32_t node,
                                               const hbg_def_tensor *t) {
  uint64_t ext =
      hbg_img_extent(t->dtype, t->ndim, t->mode, t->shape, t->strides);
  HBG_IMG__CHECK(ext == 0, HBG_IMG_E_FIELD);
  HBG_IMG__TRY(hbg_img__tensor_ref(v, node, t, ext));
  /* Heap blocks and boundary element 0s are aligned to at least the
   * element size, so an offset that is not breaks element 0's alignment. */
  HBG_IMG__CHECK(t->offset % hbg_img_dtype_size(t->dtype),
                 HBG_IMG_E_TENSOR_ALIGN);
  return 0;
}

/* End of a table of count elem-byte entries at off (0 when empty). */
static inline HBG_IMAGE_FN uint64_t hbg_img__end(uint32_t off, uint64_t count,
                                                 uint64_t elem) {
  return count ? off + count * elem : 0;
}

/* The pad section is the image's tail and overlaps no table (every table
 * already shown to lie inside the image). */
static inline HBG_IMAGE_FN int hbg_img__pad(const hbg_def_hdr *h,
                                            uint32_t total) {
  if (h->pad_size == 0)
    return h->off_pad ? HBG_IMG_E_FIELD : 0;
  HBG_IMG__CHECK(h->off_pad % HBG_IMG_ALIGN, HBG_IMG_E_ALIGN);
  HBG_IMG__CHECK(h->pad_size > HBG_IMG_MAX_DEF_PAD, HBG_IMG_E_SIZE);
  HBG_IMG__CHECK(h->off_pad > total || h->pad_size != total - h->off_pad,
                 HBG_IMG_E_OFFSET);
  const uint64_t N = h->n_nodes;
  const uint64_t ends[] = {
      sizeof *h,
      hbg_img__end(h->off_nodes, N, sizeof(hbg_def_node)),
      hbg_img__end(h->off_fanin_ptr, N + 1, 4),
      hbg_img__end(h->off_fanin, h->n_edges, 4),
      hbg_img__end(h->off_fanout_ptr, N + 1, 4),
      hbg_img__end(h->off_fanout, h->n_edges, 4),
      hbg_img__end(h->off_roots, h->n_roots, 4),
      hbg_img__end(h->off_tensors, h->n_tensors, sizeof(hbg_def_tensor)),
      hbg_img__end(h->off_scalars, h->n_scalars, sizeof(hbg_def_scalar)),
      hbg_img__end(h->off_bsig, h->n_btensors, sizeof(hbg_def_bsig))};
  for (unsigned i = 0; i < sizeof ends / sizeof ends[0]; i++)
    HBG_IMG__CHECK(h->off_pad < ends[i], HBG_IMG_E_OFFSET);
  return 0;
}

/* ------------------------------------------------------------------ */
/* The Definition validator in pieces, for executors that validate in  */
/* parallel                                                            */
/* ------------------------------------------------------------------ */

/* hbg_img_def_validate below is hbg_img_def_check_head, then
 * hbg_img_def_check_unit for every unit u < hbg_img_def_units(v), then
 * the content hash. Unit u checks what index u of every table needs:
 * boundary signature u; node u's fan-in and fan-out rows, their edges and
 * the fan-in edges' mirror in fan-out; the roots list at u and node u's
 * presence in it; node u's record, tensor and scalar records (unit 0 also
 * each table's head and the record totals). Each check has a key that
 * orders it as the serial validator runs them (stage, then index); a unit
 * returns its first failing check's key or HBG_IMG_KEY_NONE, and the least
 * key of all units is the serial validator's first failure, its code
 * hbg_img_key_code(key). So units may run in any order and on any thread
 * (a GPU grid-stride loop keeping the least key with an atomic minimum)
 * and give the serial verdict. A unit reads only inside the tables
 * hbg_img_def_check_head bounded, whatever the bytes hold; a check whose
 * preconditions an earlier check refuses may answer anything, since that
 * earlier check's key is the lesser. */
#define HBG_IMG_KEY_NONE UINT64_MAX
/* stage in bits 40-63, index in bits 8-39, -code in bits 0-7 */
#define HBG_IMG_KEY(stage, index, code)                                        \
  (((uint64_t)(stage) << 40) | ((uint64_t)(uint32_t)(index) << 8) |           \
   (uint64_t)(uint8_t)(-(code)))

/* The HBG_IMG_E_* code of a key (0 for HBG_IMG_KEY_NONE). */
static inline HBG_IMAGE_FN int hbg_img_key_code(uint64_t key) {
  return key == HBG_IMG_KEY_NONE ? 0 : -(int)(key & 0xffu);
}

/* The stages of a Definition, in the serial validator's order. */
enum {
  HBG_IMG__DS_BSIG = 1,  /* boundary signature i */
  HBG_IMG__DS_IN_HEAD,   /* fanin_ptr[0] and [n] */
  HBG_IMG__DS_IN_ROW,    /* fan-in row i ascends */
  HBG_IMG__DS_IN_EDGE,   /* fan-in edge k */
  HBG_IMG__DS_OUT_HEAD,
  HBG_IMG__DS_OUT_ROW,
  HBG_IMG__DS_OUT_EDGE,
  HBG_IMG__DS_MIRROR,    /* fan-in edge k present in fan-out */
  HBG_IMG__DS_ROOTS,
  HBG_IMG__DS_NODE,      /* node i */
  HBG_IMG__DS_SUMS       /* tensor and scalar record totals */
};

/* The header, the tables' placement and the pad section; *v (not NULL)
 * then views the image for hbg_img_def_check_unit.
 * @return 0 or an HBG_IMG_E_* code. */
static inline HBG_IMAGE_FN int hbg_img_def_check_head(const void *img,
                                                      uint64_t len,
                                                      hbg_img_def_view *v) {
  uint32_t total;
  HBG_IMG__TRY(hbg_img__hdr(img, len, sizeof(hbg_def_hdr), HBG_DEF_MAGIC,
                            &total));
  const uint8_t *p = (const uint8_t *)img;
  const hbg_def_hdr *h = (const hbg_def_hdr *)img;
  HBG_IMG__CHECK(h->flags, HBG_IMG_E_FIELD);

  const uint64_t N = h->n_nodes;
  HBG_IMG__CHECK(N == 0 || N > HBG_IMG_MAX_NODES, HBG_IMG_E_COUNT);
  HBG_IMG__CHECK(h->n_btensors > HBG_IMG_MAX_BOUNDARY ||
                     h->n_bscalars > HBG_IMG_MAX_BOUNDARY,
                 HBG_IMG_E_COUNT);
  HBG_IMG__CHECK(h->n_roots > N || h->n_edges > N * (N - 1) / 2,
                 HBG_IMG_E_COUNT);
  HBG_IMG__CHECK(h->n_tensors > N * HBG_IMG_MAX_ARGS_PER_NODE ||
                     h->n_scalars > N * HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_IMG_E_COUNT);

  const uint32_t hs = sizeof *h;
  HBG_IMG__TRY(
      hbg_img__table(total, hs, h->off_nodes, N, sizeof(hbg_def_node), 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_fanin_ptr, N + 1, 4, 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_fanin, h->n_edges, 4, 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_fanout_ptr, N + 1, 4, 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_fanout, h->n_edges, 4, 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_roots, h->n_roots, 4, 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_tensors, h->n_tensors,
                              sizeof(hbg_def_tensor), 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_scalars, h->n_scalars,
                              sizeof(hbg_def_scalar), 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_bsig, h->n_btensors,
                              sizeof(hbg_def_bsig), 8));
  HBG_IMG__TRY(hbg_img__pad(h, total));

  v->base = p;
  v->hdr = h;
  v->nodes = (const hbg_def_node *)(const void *)(p + h->off_nodes);
  v->fanin_ptr = (const uint32_t *)(const void *)(p + h->off_fanin_ptr);
  v->fanin = (const uint32_t *)(const void *)(p + h->off_fanin);
  v->fanout_ptr = (const uint32_t *)(const void *)(p + h->off_fanout_ptr);
  v->fanout = (const uint32_t *)(const void *)(p + h->off_fanout);
  v->roots = (const uint32_t *)(const void *)(p + h->off_roots);
  v->tensors = (const hbg_def_tensor *)(const void *)(p + h->off_tensors);
  v->scalars = (const hbg_def_scalar *)(const void *)(p + h->off_scalars);
  v->bsig = (const hbg_def_bsig *)(const void *)(p + h->off_bsig);
  return 0;
}

/* Units of a Definition that passed hbg_img_def_check_head: one per node
 * or boundary signature, whichever are more. */
static inline HBG_IMAGE_FN uint32_t
hbg_img_def_units(const hbg_img_def_view *v) {
  const hbg_def_hdr *h = v->hdr;
  return h->n_nodes > h->n_btensors ? h->n_nodes : h->n_btensors;
}

/* Row u of a CSR table ascends from the last (stage `row`). */
static inline HBG_IMAGE_FN uint64_t hbg_img__csr_mono(const uint32_t *ptr,
                                                      uint32_t u,
                                                      uint32_t row) {
  return ptr[u] > ptr[u + 1] ? HBG_IMG_KEY(row, u, HBG_IMG_E_CSR)
                             : HBG_IMG_KEY_NONE;
}

/* Row u's edges (fan-in: producers below u; fan-out: consumers above)
 * at stage row + 1. */
static inline HBG_IMAGE_FN uint64_t hbg_img__csr_edges(
    const uint32_t *ptr, const uint32_t *ids, uint32_t n, uint32_t n_edges,
    uint32_t u, int fanin, uint32_t row) {
  uint32_t a = ptr[u], b = ptr[u + 1];
  if (a > b || b > n_edges) /* a row's or the head's check fails first */
    return HBG_IMG_KEY_NONE;
  for (uint32_t k = a; k < b; k++) {
    uint32_t v = ids[k];
    if (v >= n)
      return HBG_IMG_KEY(row + 1, k, HBG_IMG_E_CSR);
    if (fanin ? v >= u : v <= u)
      return HBG_IMG_KEY(row + 1, k, HBG_IMG_E_CYCLE);
    if (k > a && v <= ids[k - 1])
      return HBG_IMG_KEY(row + 1, k, HBG_IMG_E_CSR);
  }
  return HBG_IMG_KEY_NONE;
}

/* Row u of a CSR table: its bounds at stage `row`, its edges at stage
 * row + 1. */
static inline HBG_IMAGE_FN uint64_t hbg_img__csr_row(
    const uint32_t *ptr, const uint32_t *ids, uint32_t n, uint32_t n_edges,
    uint32_t u, int fanin, uint32_t row) {
  uint64_t k = hbg_img__csr_mono(ptr, u, row);
  if (k != HBG_IMG_KEY_NONE)
    return k;
  return hbg_img__csr_edges(ptr, ids, n, n_edges, u, fanin, row);
}

/* Same edge count, no duplicates on either side, every fan-in edge of row
 * u present in fan-out: the two tables describe the same edge set. */
static inline HBG_IMAGE_FN uint64_t hbg_img__mirror(const hbg_img_def_view *v,
                                                    uint32_t u) {
  const uint32_t n = v->hdr->n_nodes, ne = v->hdr->n_edges;
  uint32_t a = v->fanin_ptr[u], b = v->fanin_ptr[u + 1];
  if (a > b || b > ne)
    return HBG_IMG_KEY_NONE;
  for (uint32_t k = a; k < b; k++) {
    uint32_t p = v->fanin[k];
    if (p < n && !hbg_img__row_has(v->fanout_ptr, v->fanout, ne, p, u))
      return HBG_IMG_KEY(HBG_IMG__DS_MIRROR, k, HBG_IMG_E_CSR);
  }
  return HBG_IMG_KEY_NONE;
}

/* The roots list is the nodes with no fan-in, ascending: roots[u] names
 * such a node above roots[u - 1], and node u, if it has no fan-in, is in
 * the list. */
static inline HBG_IMAGE_FN uint64_t hbg_img__roots(const hbg_img_def_view *v,
                                                   uint32_t u) {
  const hbg_def_hdr *h = v->hdr;
  const uint64_t bad = HBG_IMG_KEY(HBG_IMG__DS_ROOTS, 0, HBG_IMG_E_ROOTS);
  if (u < h->n_roots) {
    uint32_t r = v->roots[u];
    if (r >= h->n_nodes || v->fanin_ptr[r] != v->fanin_ptr[r + 1] ||
        (u > 0 && v->roots[u - 1] >= r))
      return bad;
  }
  if (u < h->n_nodes && v->fanin_ptr[u] == v->fanin_ptr[u + 1]) {
    uint32_t a = 0, b = h->n_roots;
    while (a < b) {
      uint32_t m = a + (b - a) / 2;
      if (v->roots[m] == u)
        return HBG_IMG_KEY_NONE;
      if (v->roots[m] < u)
        a = m + 1;
      else
        b = m;
    }
    return bad;
  }
  return HBG_IMG_KEY_NONE;
}

/* Node i's record, its tensor and scalar records. Its records start where
 * node i - 1's end (their sums so far, had node i - 1 passed). */
static inline HBG_IMAGE_FN uint64_t hbg_img__node(const hbg_img_def_view *v,
                                                  uint32_t i) {
  const hbg_def_hdr *h = v->hdr;
  const hbg_def_node *nd = &v->nodes[i];
  uint64_t tsum = 0, ssum = 0;
  if (i > 0) {
    tsum = (uint64_t)v->nodes[i - 1].first_tensor + v->nodes[i - 1].n_tensors;
    ssum = (uint64_t)v->nodes[i - 1].first_scalar + v->nodes[i - 1].n_scalars;
  }
#define HBG_IMG__NODE_CHECK(cond, code)                                        \
  do {                                                                         \
    if (cond)                                                                  \
      return HBG_IMG_KEY(HBG_IMG__DS_NODE, i, (code));                         \
  } while (0)
  HBG_IMG__NODE_CHECK(!hbg_img_kernel_valid(nd->kernel) || nd->reserved,
                      HBG_IMG_E_FIELD);
  HBG_IMG__NODE_CHECK(nd->n_tensors > HBG_IMG_MAX_ARGS_PER_NODE ||
                          nd->n_scalars > HBG_IMG_MAX_SCALARS_PER_NODE,
                      HBG_IMG_E_COUNT);
  HBG_IMG__NODE_CHECK(nd->first_tensor != tsum || nd->first_scalar != ssum,
                      HBG_IMG_E_REF);
  tsum += nd->n_tensors;
  ssum += nd->n_scalars;
  HBG_IMG__NODE_CHECK(tsum > h->n_tensors || ssum > h->n_scalars,
                      HBG_IMG_E_REF);
  HBG_IMG__NODE_CHECK(nd->heap_off % HBG_IMG_HEAP_ALIGN, HBG_IMG_E_ALIGN);
  HBG_IMG__NODE_CHECK(nd->heap_off > h->heap_size ||
                          nd->heap_size > h->heap_size - nd->heap_off,
                      HBG_IMG_E_REF);
  for (uint32_t j = 0; j < nd->n_tensors; j++) {
    int rc = hbg_img__tensor(v, i, &v->tensors[nd->first_tensor + j]);
    HBG_IMG__NODE_CHECK(rc < 0, rc);
  }
  for (uint32_t j = 0; j < nd->n_scalars; j++) {
    const hbg_def_scalar *s = &v->scalars[nd->first_scalar + j];
    if (s->kind == HBG_IMG_SCALAR_STATIC)
      HBG_IMG__NODE_CHECK(s->index != 0, HBG_IMG_E_FIELD);
    else if (s->kind == HBG_IMG_SCALAR_BOUNDARY)
      HBG_IMG__NODE_CHECK(s->index >= h->n_bscalars, HBG_IMG_E_REF);
    else
      return HBG_IMG_KEY(HBG_IMG__DS_NODE, i, HBG_IMG_E_FIELD);
  }
#undef HBG_IMG__NODE_CHECK
  return HBG_IMG_KEY_NONE;
}

/* Boundary signature u: reserved fields zero, a valid layout. */
static inline HBG_IMAGE_FN uint64_t hbg_img__bsig(const hbg_img_def_view *v,
                                                  uint32_t u) {
  const hbg_def_bsig *s = &v->bsig[u];
  if (s->reserved || s->reserved2 ||
      !hbg_img_extent(s->dtype, s->ndim, s->mode, s->shape, s->strides))
    return HBG_IMG_KEY(HBG_IMG__DS_BSIG, u, HBG_IMG_E_FIELD);
  return HBG_IMG_KEY_NONE;
}

/* A CSR table's first and last row starts (stage `head`). */
static inline HBG_IMAGE_FN uint64_t hbg_img__csr_head(const uint32_t *ptr,
                                                      uint32_t n,
                                                      uint32_t n_edges,
                                                      uint32_t head) {
  if (ptr[0] != 0 || ptr[n] != n_edges)
    return HBG_IMG_KEY(head, 0, HBG_IMG_E_CSR);
  return HBG_IMG_KEY_NONE;
}

/* The tensor and scalar records the nodes claim, all of them. */
static inline HBG_IMAGE_FN uint64_t hbg_img__sums(const hbg_img_def_view *v) {
  const hbg_def_hdr *h = v->hdr;
  const hbg_def_node *last = &v->nodes[h->n_nodes - 1];
  if ((uint64_t)last->first_tensor + last->n_tensors != h->n_tensors ||
      (uint64_t)last->first_scalar + last->n_scalars != h->n_scalars)
    return HBG_IMG_KEY(HBG_IMG__DS_SUMS, 0, HBG_IMG_E_REF);
  return HBG_IMG_KEY_NONE;
}

/* Unit u (< hbg_img_def_units(v)) of a Definition that passed
 * hbg_img_def_check_head. @return its first failing check's key, or
 * HBG_IMG_KEY_NONE. */
static inline HBG_IMAGE_FN uint64_t
hbg_img_def_check_unit(const hbg_img_def_view *v, uint32_t u) {
  const hbg_def_hdr *h = v->hdr;
  const uint32_t n = h->n_nodes, ne = h->n_edges;
  uint64_t k;
  if (u < h->n_btensors && (k = hbg_img__bsig(v, u)) != HBG_IMG_KEY_NONE)
    return k;
  if (u == 0 && (k = hbg_img__csr_head(v->fanin_ptr, n, ne,
                                       HBG_IMG__DS_IN_HEAD)) !=
                    HBG_IMG_KEY_NONE)
    return k;
  if (u < n && (k = hbg_img__csr_row(v->fanin_ptr, v->fanin, n, ne, u, 1,
                                     HBG_IMG__DS_IN_ROW)) != HBG_IMG_KEY_NONE)
    return k;
  if (u == 0 && (k = hbg_img__csr_head(v->fanout_ptr, n, ne,
                                       HBG_IMG__DS_OUT_HEAD)) !=
                    HBG_IMG_KEY_NONE)
    return k;
  if (u < n &&
      (k = hbg_img__csr_row(v->fanout_ptr, v->fanout, n, ne, u, 0,
                            HBG_IMG__DS_OUT_ROW)) != HBG_IMG_KEY_NONE)
    return k;
  if (u < n && (k = hbg_img__mirror(v, u)) != HBG_IMG_KEY_NONE)
    return k;
  if ((k = hbg_img__roots(v, u)) != HBG_IMG_KEY_NONE)
    return k;
  if (u < n && (k = hbg_img__node(v, u)) != HBG_IMG_KEY_NONE)
    return k;
  if (u == 0)
    return hbg_img__sums(v);
  return HBG_IMG_KEY_NONE;
}

/* Validate a Graph Definition of len bytes at img (8-byte aligned): magic,
 * version, sizes, offsets, alignment, counts, CSR consistency (indices,
 * fanin/fanout mirror, edges pointing forward, roots), kernel ids (built-in
 * or user), every tensor and scalar reference, heap ranges, tensor offsets
 * aligned to their dtype, reserved fields zero; then, when hash is not
 * NULL, the content hash. The checks run in a fixed order and the first
 * that fails is the result (the pieces above, serially).
 * @return 0 (and *out when not NULL) or an HBG_IMG_E_* code. */
static inline HBG_IMAGE_FN int hbg_img_def_validate(const void *img,
                                                    uint64_t len,
                                                    hbg_img_hash_fn hash,
                                                    void *user,
                                                    hbg_img_def_view *out) {
  hbg_img_def_view v;
  HBG_IMG__TRY(hbg_img_def_check_head(img, len, &v));
  /* The units' checks stage by stage, each stage in index order: the first
   * failure is then the least key, with no pass past it. */
  const hbg_def_hdr *h = v.hdr;
  const uint32_t n = h->n_nodes, ne = h->n_edges;
  uint64_t key = HBG_IMG_KEY_NONE;
  for (uint32_t u = 0; u < h->n_btensors && key == HBG_IMG_KEY_NONE; u++)
    key = hbg_img__bsig(&v, u);
  if (key == HBG_IMG_KEY_NONE)
    key = hbg_img__csr_head(v.fanin_ptr, n, ne, HBG_IMG__DS_IN_HEAD);
  for (uint32_t u = 0; u < n && key == HBG_IMG_KEY_NONE; u++)
    key = hbg_img__csr_mono(v.fanin_ptr, u, HBG_IMG__DS_IN_ROW);
  for (uint32_t u = 0; u < n && key == HBG_IMG_KEY_NONE; u++)
    key = hbg_img__csr_edges(v.fanin_ptr, v.fanin, n, ne, u, 1,
                             HBG_IMG__DS_IN_ROW);
  if (key == HBG_IMG_KEY_NONE)
    key = hbg_img__csr_head(v.fanout_ptr, n, ne, HBG_IMG__DS_OUT_HEAD);
  for (uint32_t u = 0; u < n && key == HBG_IMG_KEY_NONE; u++)
    key = hbg_img__csr_mono(v.fanout_ptr, u, HBG_IMG__DS_OUT_ROW);
  for (uint32_t u = 0; u < n && key == HBG_IMG_KEY_NONE; u++)
    key = hbg_img__csr_edges(v.fanout_ptr, v.fanout, n, ne, u, 0,
                             HBG_IMG__DS_OUT_ROW);
  for (uint32_t u = 0; u < n && key == HBG_IMG_KEY_NONE; u++)
    key = hbg_img__mirror(&v, u);
  for (uint32_t u = 0; u < n && key == HBG_IMG_KEY_NONE; u++)
    key = hbg_img__roots(&v, u);
  for (uint32_t u = 0; u < n && key == HBG_IMG_KEY_NONE; u++)
    key = hbg_img__node(&v, u);
  if (key == HBG_IMG_KEY_NONE)
    key = hbg_img__sums(&v);
  const int code = hbg_img_key_code(key); /* 0 for HBG_IMG_KEY_NONE */
  if (code)
    return code;
  if (hash)
    HBG_IMG__CHECK(hash(v.base, v.hdr->total_size, offsetof(hbg_def_hdr, hash),
                        user) != v.hdr->hash,
                   HBG_IMG_E_HASH);
  if (out)
    *out = v;
  return 0;
}

/* Validate a Submission: header, boundary table (addr != 0), scalar table,
 * the inline Definition's placement (its contents are validated with
 * hbg_img_def_validate on view->inline_def), and, when hash is not NULL,
 * its own content hash (bytes [0, off_def or total_size)).
 * @return 0 (and *out when not NULL) or an HBG_IMG_E_* code. */
static inline HBG_IMAGE_FN int hbg_img_sub_validate(const void *img,
                                                    uint64_t len,
                                                    hbg_img_hash_fn hash,
                                                    void *user,
                                                    hbg_img_sub_view *out) {
  uint32_t total;
  HBG_IMG__TRY(hbg_img__hdr(img, len, sizeof(hbg_sub_hdr), HBG_SUB_MAGIC,
                            &total));
  const uint8_t *p = (const uint8_t *)img;
  const hbg_sub_hdr *h = (const hbg_sub_hdr *)img;
  HBG_IMG__CHECK((h->flags & ~(uint32_t)HBG_SUB_INLINE_DEF) || h->reserved,
                 HBG_IMG_E_FIELD);
  HBG_IMG__CHECK(h->n_tensors > HBG_IMG_MAX_BOUNDARY ||
                     h->n_scalars > HBG_IMG_MAX_BOUNDARY,
                 HBG_IMG_E_COUNT);
  const uint32_t hs = sizeof *h;
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_tensors, h->n_tensors,
                              sizeof(hbg_sub_bind), 8));
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_scalars, h->n_scalars, 8, 8));
  HBG_IMG__CHECK(h->def_size == 0, HBG_IMG_E_FIELD);

  uint64_t hashed = total;
  const uint8_t *inl = NULL;
  if (h->flags & HBG_SUB_INLINE_DEF) {
    HBG_IMG__CHECK(h->off_def % HBG_IMG_ALIGN, HBG_IMG_E_ALIGN);
    HBG_IMG__CHECK(h->off_def < hs, HBG_IMG_E_COUNT);
    HBG_IMG__CHECK(h->off_def > total || h->def_size > total - h->off_def,
                   HBG_IMG_E_OFFSET);
    HBG_IMG__CHECK(h->off_def + h->def_size != total, HBG_IMG_E_SIZE);
    /* The hashed part must not reach into the Definition copy. */
    HBG_IMG__CHECK((uint64_t)h->off_tensors +
                           (uint64_t)h->n_tensors * sizeof(hbg_sub_bind) >
                       h->off_def ||
                       (uint64_t)h->off_scalars + (uint64_t)h->n_scalars * 8 >
                           h->off_def,
                   HBG_IMG_E_OFFSET);
    hashed = h->off_def;
    inl = p + h->off_def;
  } else {
    HBG_IMG__CHECK(h->off_def != 0, HBG_IMG_E_FIELD);
  }

  const hbg_sub_bind *ts =
      (const hbg_sub_bind *)(const void *)(p + h->off_tensors);
  for (uint32_t i = 0; i < h->n_tensors; i++)
    HBG_IMG__CHECK(ts[i].addr == 0, HBG_IMG_E_FIELD);
  if (hash)
    HBG_IMG__CHECK(hash(p, hashed, offsetof(hbg_sub_hdr, hash), user) !=
                       h->hash,
                   HBG_IMG_E_HASH);
  if (out) {
    out->base = p;
    out->hdr = h;
    out->tensors = ts;
    out->scalars = (const uint64_t *)(const void *)(p + h->off_scalars);
    out->inline_def = inl;
  }
  return 0;
}

/* The alignment part of hbg_img_sub_check_def: element 0 of every boundary
 * tensor, and of every view of one, aligned to its dtype's size. On failure
 * *bad (optional) is the Definition tensor record whose element 0 is
 * misaligned, UINT32_MAX for a boundary tensor no node uses.
 * @return 0 or HBG_IMG_E_TENSOR_ALIGN. */
static inline HBG_IMAGE_FN int
hbg_img_sub_check_align(const hbg_img_sub_view *s, const hbg_img_def_view *d,
                        uint32_t *bad) {
  const hbg_sub_hdr *sh = s->hdr;
  const hbg_def_hdr *dh = d->hdr;
  const hbg_sub_bind *sb = s->tensors;
  for (uint32_t i = 0; i < dh->n_tensors; i++) {
    const hbg_def_tensor *t = &d->tensors[i];
    if ((t->src != HBG_SRC_BOUNDARY_EXACT &&
         t->src != HBG_SRC_BOUNDARY_VIEW) ||
        t->ref >= sh->n_tensors)
      continue;
    uint64_t es = hbg_img_dtype_size(t->dtype);
    if (es && (sb[t->ref].addr + sb[t->ref].offset + t->offset) % es) {
      if (bad)
        *bad = i;
      return HBG_IMG_E_TENSOR_ALIGN;
    }
  }
  for (uint32_t i = 0; i < dh->n_btensors && i < sh->n_tensors; i++) {
    uint64_t es = hbg_img_dtype_size(d->bsig[i].dtype);
    if (es && (sb[i].addr + sb[i].offset) % es) {
      if (bad)
        *bad = UINT32_MAX;
      return HBG_IMG_E_TENSOR_ALIGN;
    }
  }
  return 0;
}

/* A validated Submission against its validated Definition: def_hash,
 * def_size and counts (the boundary signature lives only in the
 * Definition); every boundary tensor's bytes, [addr + offset, + the
 * extent of its signature), below 2^64 (every view lies inside them, so
 * the node iterator then resolves every argument without wrapping); then
 * hbg_img_sub_check_align.
 * @return 0, HBG_IMG_E_INVAL, HBG_IMG_E_DEF, HBG_IMG_E_RANGE or
 * HBG_IMG_E_TENSOR_ALIGN. */
static inline HBG_IMAGE_FN int hbg_img_sub_check_def(const hbg_img_sub_view *s,
                                                     const hbg_img_def_view *d) {
  HBG_IMG__CHECK(!s || !d || !s->hdr || !d->hdr, HBG_IMG_E_INVAL);
  const hbg_sub_hdr *sh = s->hdr;
  const hbg_def_hdr *dh = d->hdr;
  HBG_IMG__CHECK(sh->def_hash != dh->hash || sh->def_size != dh->total_size ||
                     sh->n_tensors != dh->n_btensors ||
                     sh->n_scalars != dh->n_bscalars,
                 HBG_IMG_E_DEF);
  for (uint32_t i = 0; i < dh->n_btensors; i++) {
    const hbg_def_bsig *b = &d->bsig[i];
    const uint64_t a = s->tensors[i].addr, o = s->tensors[i].offset;
    const uint64_t ext =
        hbg_img_extent(b->dtype, b->ndim, b->mode, b->shape, b->strides);
    HBG_IMG__CHECK(a + o < a || a + o + ext < a + o, HBG_IMG_E_RANGE);
  }
  return hbg_img_sub_check_align(s, d, NULL);
}

static inline HBG_IMAGE_FN int hbg_img__entry_table(uint32_t size,
                                                    uint32_t off,
                                                    uint64_t count,
                                                    uint64_t elem,
                                                    uint32_t align) {
  if (count == 0)
    return 0;
  HBG_IMG__CHECK(off % align, HBG_IMG_E_ALIGN);
  HBG_IMG__CHECK(off < sizeof(hbg_win_task) || off > size ||
                     count * elem > size - off,
                 HBG_IMG_E_OFFSET);
  return 0;
}

static inline HBG_IMAGE_FN int hbg_img__win_entry(const uint8_t *e,
                                                  uint32_t i,
                                                  uint32_t n_tasks) {
  const hbg_win_task *t = (const hbg_win_task *)(const void *)e;
  HBG_IMG__CHECK(t->kind != HBG_WIN_TASK && t->kind != HBG_WIN_GRAPH,
                 HBG_IMG_E_FIELD);
  HBG_IMG__CHECK(t->reserved, HBG_IMG_E_FIELD);
  HBG_IMG__CHECK(t->n_tensors > HBG_IMG_MAX_ARGS_PER_NODE ||
                     t->n_scalars > HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_IMG_E_COUNT);
  HBG_IMG__TRY(hbg_img__entry_table(t->size, t->off_tensors, t->n_tensors,
                                    sizeof(hbg_sub_tensor), 8));
  HBG_IMG__TRY(
      hbg_img__entry_table(t->size, t->off_scalars, t->n_scalars, 8, 8));
  HBG_IMG__TRY(hbg_img__entry_table(t->size, t->off_deps, t->n_deps, 4, 4));
  if (t->kind == HBG_WIN_GRAPH) {
    HBG_IMG__CHECK(t->kernel != 0 || t->n_tensors || t->n_scalars ||
                       t->sub_size == 0 || t->def_size == 0,
                   HBG_IMG_E_FIELD);
  } else {
    HBG_IMG__CHECK(!hbg_img_kernel_valid(t->kernel), HBG_IMG_E_FIELD);
    const hbg_sub_tensor *ts = hbg_img_win_task_tensors(t);
    for (uint32_t j = 0; j < t->n_tensors; j++) {
      HBG_IMG__CHECK(ts[j].reserved || ts[j].reserved2 ||
                         !hbg_img_extent(ts[j].dtype, ts[j].ndim, ts[j].mode,
                                         ts[j].shape, ts[j].strides),
                     HBG_IMG_E_FIELD);
      HBG_IMG__CHECK((ts[j].addr + ts[j].offset) %
                         hbg_img_dtype_size(ts[j].dtype),
                     HBG_IMG_E_TENSOR_ALIGN);
    }
  }
  const uint32_t *deps = hbg_img_win_task_deps(t);
  for (uint32_t j = 0; j < t->n_deps; j++) {
    HBG_IMG__CHECK(deps[j] >= n_tasks, HBG_IMG_E_REF);
    HBG_IMG__CHECK(deps[j] >= i, HBG_IMG_E_CYCLE);
  }
  return 0;
}

/* The window in pieces, like the Definition's: hbg_img_win_validate is
 * hbg_img_win_check_head, then hbg_img_win_check_entry for each entry in
 * order. Entry i's check reads only inside the image, whatever the bytes
 * hold, and equals the serial validator's when entries 0..i-1 pass; so of
 * the entries checked in any order on any threads, the lowest that fails
 * gives the serial verdict.
 *
 * The header, the entry count against the size, the index table; *out
 * (not NULL) then views the window. @return 0 or an HBG_IMG_E_* code. */
static inline HBG_IMAGE_FN int hbg_img_win_check_head(const void *img,
                                                      uint64_t len,
                                                      hbg_img_win_view *out) {
  uint32_t total;
  HBG_IMG__TRY(hbg_img__hdr(img, len, sizeof(hbg_win_hdr), HBG_WIN_MAGIC,
                            &total));
  const uint8_t *p = (const uint8_t *)img;
  const hbg_win_hdr *h = (const hbg_win_hdr *)img;
  for (uint32_t i = 0; i < 4; i++)
    HBG_IMG__CHECK(h->reserved[i], HBG_IMG_E_FIELD);
  const uint32_t hs = sizeof *h;
  HBG_IMG__CHECK(h->n_tasks > (total - hs) / (sizeof(hbg_win_task) + 4),
                 HBG_IMG_E_COUNT);
  HBG_IMG__TRY(hbg_img__table(total, hs, h->off_index, h->n_tasks, 4, 8));
  out->base = p;
  out->hdr = h;
  out->index = (const uint32_t *)(const void *)(p + h->off_index);
  return 0;
}

/* Entry i (< n_tasks) of a window that passed hbg_img_win_check_head: its
 * offset (8-aligned, after entry i - 1's end, inside the image), size,
 * counts, tables, kernel id, ordinary tasks' tensor records, deps pointing
 * at earlier entries. @return 0 or an HBG_IMG_E_* code. */
static inline HBG_IMAGE_FN int hbg_img_win_check_entry(const hbg_img_win_view *w,
                                                       uint32_t i) {
  const uint32_t total = w->hdr->total_size;
  uint64_t prev_end = sizeof(hbg_win_hdr);
  if (i > 0) {
    uint32_t po = w->index[i - 1];
    /* entry i - 1's end, where its own check passes (else it fails first) */
    if (po % HBG_IMG_ALIGN || po > total ||
        total - po < sizeof(hbg_win_task))
      return 0;
    prev_end =
        (uint64_t)po + ((const hbg_win_task *)(const void *)(w->base + po))->size;
  }
  uint32_t off = w->index[i];
  HBG_IMG__CHECK(off % HBG_IMG_ALIGN, HBG_IMG_E_ALIGN);
  HBG_IMG__CHECK(off < prev_end || off > total ||
                     total - off < sizeof(hbg_win_task),
                 HBG_IMG_E_OFFSET);
  const hbg_win_task *t = (const hbg_win_task *)(const void *)(w->base + off);
  HBG_IMG__CHECK(t->size < sizeof *t, HBG_IMG_E_SIZE);
  HBG_IMG__CHECK(t->size % HBG_IMG_ALIGN, HBG_IMG_E_ALIGN);
  HBG_IMG__CHECK(t->size > total - off, HBG_IMG_E_OFFSET);
  return hbg_img__win_entry(w->base + off, i, w->hdr->n_tasks);
}

/* Validate a task window: header, index, each entry's bounds, counts,
 * kernel ids, ordinary tasks' tensor records, deps pointing at earlier
 * entries. The images graph entries point at are validated separately.
 * @return 0 (and *out when not NULL) or an HBG_IMG_E_* code. */
static inline HBG_IMAGE_FN int hbg_img_win_validate(const void *img,
                                                    uint64_t len,
                                                    hbg_img_win_view *out) {
  hbg_img_win_view w;
  HBG_IMG__TRY(hbg_img_win_check_head(img, len, &w));
  for (uint32_t i = 0; i < w.hdr->n_tasks; i++)
    HBG_IMG__TRY(hbg_img_win_check_entry(&w, i));
  if (out)
    *out = w;
  return 0;
}

/* The view of a Definition at img that passed hbg_img_def_validate
 * earlier, rebuilt from hdr, a copy of its header as validated (for an
 * executor that caches verdicts by address: no table is re-checked, so
 * the caller must know the memory is unchanged). out->hdr points at hdr. */
static inline HBG_IMAGE_FN void hbg_img_def_view_trusted(
    const void *img, const hbg_def_hdr *hdr, hbg_img_def_view *out) {
  const uint8_t *p = (const uint8_t *)img;
  out->base = p;
  out->hdr = hdr;
  out->nodes = (const hbg_def_node *)(const void *)(p + hdr->off_nodes);
  out->fanin_ptr = (const uint32_t *)(const void *)(p + hdr->off_fanin_ptr);
  out->fanin = (const uint32_t *)(const void *)(p + hdr->off_fanin);
  out->fanout_ptr = (const uint32_t *)(const void *)(p + hdr->off_fanout_ptr);
  out->fanout = (const uint32_t *)(const void *)(p + hdr->off_fanout);
  out->roots = (const uint32_t *)(const void *)(p + hdr->off_roots);
  out->tensors = (const hbg_def_tensor *)(const void *)(p + hdr->off_tensors);
  out->scalars = (const hbg_def_scalar *)(const void *)(p + hdr->off_scalars);
  out->bsig = (const hbg_def_bsig *)(const void *)(p + hdr->off_bsig);
}

/* ------------------------------------------------------------------ */
/* Node expansion (one graph entry of a window)                        */
/* ------------------------------------------------------------------ */

/* One replay of a Definition: its validated view, a copy of its header (all
 * bounds checks use the copy, so a Definition rewritten after validation
 * yields an error, never a read outside its tables), the Submission's
 * boundary (NULL: metadata only, addresses and boundary scalars 0) and the
 * device address of the heap block. An executor may point bind and
 * bscalars at its own copies of the Submission's tables (read once), and
 * may set hdr to the header it validated. */
typedef struct hbg_img_graph {
  hbg_img_def_view def;
  hbg_def_hdr hdr;
  const hbg_sub_bind *bind;  /* boundary tensor i lives at bind[i] */
  const uint64_t *bscalars;  /* boundary scalar i */
  uint64_t heap_addr;
} hbg_img_graph;

/* Node i, expanded. Node ids are a topological order: every fanin id is
 * smaller than the node's own. */
typedef struct hbg_img_node {
  uint32_t kernel;
  uint32_t n_tensors;
  uint32_t n_scalars;
  uint32_t n_fanin;         /* producers this node waits for */
  uint32_t n_fanout;
  uint32_t reserved;
  const uint32_t *fanout;   /* consumer node ids, ascending */
} hbg_img_node;

/* Tensor argument k of a node, resolved. */
typedef struct hbg_img_arg {
  uint64_t addr;   /* device address of element 0 */
  uint64_t extent; /* bytes from element 0 to one past the last element */
  uint64_t base_offset; /* bytes from the base (the boundary tensor's
                           element 0, or the heap block) to element 0 */
  uint32_t shape[HBG_IMG_MAX_DIMS];
  uint32_t strides[HBG_IMG_MAX_DIMS];
  uint8_t dtype, ndim, mode, src; /* src: HBG_SRC_* */
  uint32_t ref;    /* boundary index (boundary sources) or producer node */
} hbg_img_arg;

/* Set up node expansion for one replay. def must have passed
 * hbg_img_def_validate, sub (optional) hbg_img_sub_validate and
 * hbg_img_sub_check_def against it; then no call of hbg_img_graph_node,
 * _tensor or _scalar on it fails (with the same memory and in-range
 * indices).
 * @return 0 or HBG_IMG_E_INVAL (NULL g or def), HBG_IMG_E_DEF (boundary
 * counts differ), HBG_IMG_E_RANGE (the heap block, heap_addr plus the
 * Definition's heap_size, wraps around). */
static inline HBG_IMAGE_FN int hbg_img_graph_init(hbg_img_graph *g,
                                                  const hbg_img_def_view *def,
                                                  const hbg_img_sub_view *sub,
                                                  uint64_t heap_addr) {
  HBG_IMG__CHECK(!g || !def || !def->hdr, HBG_IMG_E_INVAL);
  g->def = *def;
  g->hdr = *def->hdr;
  g->bind = NULL;
  g->bscalars = NULL;
  g->heap_addr = heap_addr;
  HBG_IMG__CHECK(heap_addr + g->hdr.heap_size < heap_addr, HBG_IMG_E_RANGE);
  if (sub) {
    HBG_IMG__CHECK(!sub->hdr, HBG_IMG_E_INVAL);
    HBG_IMG__CHECK(sub->hdr->n_tensors != g->hdr.n_btensors ||
                       sub->hdr->n_scalars != g->hdr.n_bscalars,
                   HBG_IMG_E_DEF);
    g->bind = sub->tensors;
    g->bscalars = sub->scalars;
  }
  return 0;
}

/* Node i's kernel, argument counts, fan-in count and fan-out list.
 * @return 0 or an HBG_IMG_E_* code (i out of range, tables inconsistent). */
static inline HBG_IMAGE_FN int hbg_img_graph_node(const hbg_img_graph *g,
                                                  uint32_t i,
                                                  hbg_img_node *out) {
  const hbg_def_hdr *h = &g->hdr;
  HBG_IMG__CHECK(i >= h->n_nodes, HBG_IMG_E_INVAL);
  const hbg_def_node *nd = &g->def.nodes[i];
  HBG_IMG__CHECK(nd->n_tensors > HBG_IMG_MAX_ARGS_PER_NODE ||
                     nd->n_scalars > HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_IMG_E_COUNT);
  HBG_IMG__CHECK((uint64_t)nd->first_tensor + nd->n_tensors > h->n_tensors ||
                     (uint64_t)nd->first_scalar + nd->n_scalars > h->n_scalars,
                 HBG_IMG_E_REF);
  uint32_t a = g->def.fanin_ptr[i], b = g->def.fanin_ptr[i + 1];
  uint32_t c = g->def.fanout_ptr[i], d = g->def.fanout_ptr[i + 1];
  HBG_IMG__CHECK(b < a || b > h->n_edges || d < c || d > h->n_edges,
                 HBG_IMG_E_CSR);
  out->kernel = nd->kernel;
  out->n_tensors = nd->n_tensors;
  out->n_scalars = nd->n_scalars;
  out->n_fanin = b - a;
  out->n_fanout = d - c;
  out->reserved = 0;
  out->fanout = g->def.fanout + c;
  return 0;
}

/* Tensor argument k of node i: metadata from the Definition, element 0's
 * device address from its source -- boundary (exact or view): bind[ref].addr
 * + bind[ref].offset + offset; internal or own output: heap_addr + offset.
 * Every index is rechecked against the header copy (no read outside the
 * Definition's tables), heap tensors against the heap block, addresses
 * against wrap-around. That a view lies inside its boundary tensor is the
 * validator's check (per node it would cost an extent per argument): an
 * executor that trusts a cached verdict while the Definition's memory may
 * be rewritten bounds boundary ranges itself (the sim's executor does).
 * @return 0 or an HBG_IMG_E_* code. */
static inline HBG_IMAGE_FN int hbg_img_graph_tensor(const hbg_img_graph *g,
                                                    uint32_t i, uint32_t k,
                                                    hbg_img_arg *out) {
  const hbg_def_hdr *h = &g->hdr;
  HBG_IMG__CHECK(i >= h->n_nodes, HBG_IMG_E_INVAL);
  const hbg_def_node *nd = &g->def.nodes[i];
  HBG_IMG__CHECK(k >= nd->n_tensors, HBG_IMG_E_INVAL);
  HBG_IMG__CHECK((uint64_t)nd->first_tensor + k >= h->n_tensors,
                 HBG_IMG_E_REF);
  const hbg_def_tensor *t = &g->def.tensors[nd->first_tensor + k];
  uint64_t ext =
      hbg_img_extent(t->dtype, t->ndim, t->mode, t->shape, t->strides);
  HBG_IMG__CHECK(ext == 0, HBG_IMG_E_FIELD);
  uint64_t base = 0;
  switch (t->src) {
  case HBG_SRC_BOUNDARY_EXACT:
  case HBG_SRC_BOUNDARY_VIEW: {
    HBG_IMG__CHECK(t->ref >= h->n_btensors, HBG_IMG_E_REF);
    if (g->bind) {
      hbg_sub_bind sb = g->bind[t->ref];
      HBG_IMG__CHECK(sb.addr + sb.offset < sb.addr, HBG_IMG_E_RANGE);
      base = sb.addr + sb.offset;
    }
    break;
  }
  case HBG_SRC_INTERNAL:
  case HBG_SRC_OWN_OUTPUT:
    HBG_IMG__CHECK(t->offset > h->heap_size || ext > h->heap_size - t->offset,
                   HBG_IMG_E_REF);
    base = g->heap_addr;
    break;
  default:
    return HBG_IMG_E_FIELD;
  }
  HBG_IMG__CHECK(base + t->offset < base ||
                     base + t->offset + ext < base + t->offset,
                 HBG_IMG_E_RANGE);
  out->addr = (g->bind || t->src >= HBG_SRC_INTERNAL) ? base + t->offset : 0;
  out->extent = ext;
  out->base_offset = t->offset;
  for (uint32_t d = 0; d < HBG_IMG_MAX_DIMS; d++) {
    out->shape[d] = t->shape[d];
    out->strides[d] = t->strides[d];
  }
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  out->mode = t->mode;
  out->src = t->src;
  out->ref = t->ref;
  return 0;
}

/* Scalar argument k of node i: its static value, or the replay's boundary
 * scalar it names (0 without a Submission).
 * @return 0 or an HBG_IMG_E_* code. */
static inline HBG_IMAGE_FN int hbg_img_graph_scalar(const hbg_img_graph *g,
                                                    uint32_t i, uint32_t k,
                                                    uint64_t *out) {
  const hbg_def_hdr *h = &g->hdr;
  HBG_IMG__CHECK(i >= h->n_nodes, HBG_IMG_E_INVAL);
  const hbg_def_node *nd = &g->def.nodes[i];
  HBG_IMG__CHECK(k >= nd->n_scalars, HBG_IMG_E_INVAL);
  HBG_IMG__CHECK((uint64_t)nd->first_scalar + k >= h->n_scalars,
                 HBG_IMG_E_REF);
  const hbg_def_scalar *s = &g->def.scalars[nd->first_scalar + k];
  if (s->kind == HBG_IMG_SCALAR_STATIC) {
    *out = s->value;
    return 0;
  }
  HBG_IMG__CHECK(s->kind != HBG_IMG_SCALAR_BOUNDARY ||
                     s->index >= h->n_bscalars,
                 HBG_IMG_E_REF);
  *out = g->bscalars ? g->bscalars[s->index] : 0;
  return 0;
}

#undef HBG_IMG__CHECK
#undef HBG_IMG__TRY

#ifdef __cplusplus
}
#endif

#endif /* HBG_HBG_IMAGE_H */
