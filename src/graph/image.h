/*
 * On-device image formats: Graph Definition, Submission, task window.
 *
 * All images are pointer-free, position-independent PODs of fixed-width
 * little-endian fields. Every internal reference is a u32 byte offset from
 * the image's first byte, 8-byte aligned. The host builds them; the device
 * (sim scheduler, CUDA verify kernel) treats them as untrusted bytes and runs
 * the validator before use. The structs below are the exact layouts
 * (static-asserted); hosts are little-endian (checked at build time).
 */
#ifndef HBG_GRAPH_IMAGE_H
#define HBG_GRAPH_IMAGE_H

#include <stdint.h>

#include <hbg/hbg.h>

#define HBG_IMG_VERSION 2u /* 2: compact Submission tensor table */
#define HBG_IMG_ALIGN 8u
#define HBG_DEF_MAGIC 0x46454447u /* "GDEF" */
#define HBG_SUB_MAGIC 0x42555347u /* "GSUB" */
#define HBG_WIN_MAGIC 0x4e495747u /* "GWIN" */

/* Limits the validator enforces (also bound the recorder). */
#define HBG_IMG_MAX_NODES 65536u
#define HBG_IMG_MAX_ARGS_PER_NODE 64u
#define HBG_IMG_MAX_SCALARS_PER_NODE 64u
#define HBG_IMG_MAX_BOUNDARY 4096u
#define HBG_IMG_MAX_BYTES (256u << 20)
#define HBG_IMG_MAX_DEF_PAD (16u << 20) /* bytes of a Definition's pad */

/* ---- Graph Definition ---- */

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

/* The pad section (optional) is opaque bytes that no reader interprets:
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
  HBG_SRC_BOUNDARY_EXACT = 1, /* ref = boundary index; addr/offset from the
                                 Submission, shape etc. from the bsig */
  HBG_SRC_BOUNDARY_VIEW = 2,  /* ref = boundary index; offset relative to
                                 the boundary tensor's element 0 */
  HBG_SRC_INTERNAL = 3,       /* ref = producer node; offset in heap block */
  HBG_SRC_OWN_OUTPUT = 4      /* ref = this node; offset in heap block */
};

typedef struct hbg_def_tensor {
  uint8_t src;   /* HBG_SRC_* */
  uint8_t dtype;
  uint8_t ndim;
  uint8_t mode;  /* HBG_ACCESS_* */
  uint32_t ref;
  uint64_t offset;
  uint32_t shape[HBG_MAX_DIMS];
  uint32_t strides[HBG_MAX_DIMS];
} hbg_def_tensor; /* 48 bytes */

typedef struct hbg_def_scalar {
  uint32_t kind;  /* HBG_SCALAR_STATIC / HBG_SCALAR_BOUNDARY */
  uint32_t index; /* boundary scalar index when BOUNDARY */
  uint64_t value; /* static value */
} hbg_def_scalar; /* 16 bytes */

typedef struct hbg_def_bsig {
  uint8_t dtype;
  uint8_t ndim;
  uint8_t mode;
  uint8_t reserved;
  uint32_t reserved2;
  uint32_t shape[HBG_MAX_DIMS];
  uint32_t strides[HBG_MAX_DIMS];
} hbg_def_bsig; /* 40 bytes */

/* ---- Submission (one replay) ----
 * [hbg_sub_hdr][hbg_sub_bind[n_tensors]][u64 scalars[n_scalars]]
 * [inline Definition, optional]
 * A boundary tensor's signature (dtype, ndim, mode, shape, strides) lives
 * only in the Definition (hbg_def_bsig, checked by the host on every replay);
 * the Submission carries only where each boundary tensor lives. */

enum { HBG_SUB_INLINE_DEF = 1u }; /* a Definition copy follows (deferred) */

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

/* A full tensor record: the task window's ordinary-task entries. */
typedef struct hbg_sub_tensor {
  uint64_t addr;   /* device address of the buffer */
  uint64_t offset; /* bytes to element 0 */
  uint32_t shape[HBG_MAX_DIMS];
  uint32_t strides[HBG_MAX_DIMS];
  uint8_t dtype;
  uint8_t ndim;
  uint8_t mode;
  uint8_t reserved;
  uint32_t reserved2;
} hbg_sub_tensor; /* 56 bytes */

/* ---- Task window (one bind) ----
 * [hbg_win_hdr][entries ...][u32 index[n_tasks]]
 * Entries are appended in submission order; index[i] is the byte offset of
 * task i's entry. Ordinary task entry:
 *   hbg_win_task, hbg_sub_tensor[n_tensors], u64 scalars[n_scalars],
 *   u32 deps[n_deps] (padded to 8).
 * Graph task entry:
 *   hbg_win_task (kernel = 0), u32 deps[n_deps] (padded to 8); the images it
 *   points at live wherever the upload policy put them (inside the window
 *   block for coalesced). */

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

_Static_assert(sizeof(hbg_def_hdr) == 104, "def hdr layout");
_Static_assert(sizeof(hbg_def_node) == 40, "def node layout");
_Static_assert(sizeof(hbg_def_tensor) == 48, "def tensor layout");
_Static_assert(sizeof(hbg_def_scalar) == 16, "def scalar layout");
_Static_assert(sizeof(hbg_def_bsig) == 40, "def bsig layout");
_Static_assert(sizeof(hbg_sub_hdr) == 72, "sub hdr layout");
_Static_assert(sizeof(hbg_sub_bind) == 16, "sub bind layout");
_Static_assert(sizeof(hbg_sub_tensor) == 56, "sub tensor layout");
_Static_assert(sizeof(hbg_win_hdr) == 64, "win hdr layout");
_Static_assert(sizeof(hbg_win_task) == 72, "win task layout");
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hbg images are little-endian; big-endian hosts need byte swapping"
#endif

#endif
