/*
 * Workload internals: device buffers with host mirrors, and an emitter that
 * runs one description of a decode step either through the public API
 * (ordinary tasks, graph submissions with a record callback), directly on
 * the host mirrors with the very same kernels (the reference), or into a
 * flat list of resolved kernel calls (hbg_workload_nodes).
 */
#ifndef HBG_WORKLOAD_WL_H
#define HBG_WORKLOAD_WL_H

#include <stdint.h>

#include <hbg/hbg_workload.h>

enum { WL_BUF_W, WL_BUF_G, WL_BUF_KV, WL_BUF_ACT, WL_BUF__COUNT };

typedef struct hbg__wl_buf {
  uint64_t dev;    /* device address */
  uint64_t floats; /* size */
  float *host;     /* mirror */
} hbg__wl_buf;

typedef struct hbg__wl_model hbg__wl_model;

struct hbg_workload {
  hbg_runtime *rt;
  const hbg__wl_model *model;
  uint32_t layers;
  uint64_t seed;
  uint32_t def_size; /* hbg_record_pad target, 0 = none */
  uint32_t tasks;    /* flat: tasks per step */
  char *model_path;  /* qwen3: a checkpoint folder or a config.json, owned */
  uint32_t wdtype;   /* weight dtype (HBG_DTYPE_F32 or _BF16), 0 = default */
  uint32_t kv_len;   /* KV-cache positions, 0 = the model's default */
  hbg__wl_buf buf[WL_BUF__COUNT];
  hbg_workload_info info;
  void *m; /* model state (layout), owned */
  /* host reference scratch for graph-internal tensors */
  float *scratch;
  uint64_t scratch_cap;
  /* Definitions seen by the last reference run: key, inner tasks */
  uint64_t def_keys[16];
  uint32_t def_nodes[16];
  uint32_t n_def_keys;
};

/* ---- emitter ---- */

enum { WL_EM_SUBMIT, WL_EM_RECORD, WL_EM_REF, WL_EM_NODES };

typedef struct hbg__wl_em {
  int mode;
  hbg_workload *w;
  hbg_bind *bind;       /* SUBMIT */
  hbg_recorder *rec;    /* RECORD */
  const hbg_tensor *bt; /* inside a graph: its boundary */
  uint32_t nbt, nbs;
  const uint64_t *bs;
  uint64_t heap_top; /* REF, NODES: heap bytes used by this graph */
  uint64_t heap_max; /* REF, NODES: the largest heap_top of any graph */
  uint32_t next_id;  /* REF, NODES: task ids, numbered as a bind does */
  uint32_t nodes;    /* inner tasks emitted */
  int body;          /* REF, NODES: inside a graph body */
  /* NODES: the heap's device address, the graph's task id (in a body),
   * where calls go (NULL: count only; at most cap) and how many there are */
  uint64_t heap;
  uint32_t task;
  hbg_workload_node *out;
  uint32_t cap, count;
  int rc;            /* first error, latched */
} hbg__wl_em;

typedef void (*hbg__wl_body_fn)(hbg__wl_em *em, const void *cfg);

/* An ordinary task (top level) or an inner task (inside a body). Outputs
 * with addr == 0 inside a body get heap space and args[i].addr is updated.
 * @return the task id (top level), 0 inside a body, or HBG_TASK_NONE after
 * an error (latched in em->rc). */
hbg_task_id hbg__wl_task(hbg__wl_em *em, uint32_t kernel, hbg_tensor *args,
                         uint32_t n, const hbg_scalar *sc, uint32_t ns,
                         const hbg_task_id *deps, uint32_t nd);

/* One graph submission: key, boundary, scalars, deps; body describes the
 * inner tasks in terms of em->bt / em->bs only (the same for every replay).
 * @return the task id, or HBG_TASK_NONE after an error. */
hbg_task_id hbg__wl_graph(hbg__wl_em *em, uint64_t key, const hbg_tensor *bt,
                          uint32_t nbt, const uint64_t *bs, uint32_t nbs,
                          const hbg_task_id *deps, uint32_t nd,
                          hbg__wl_body_fn body, const void *cfg);

/* ---- tensor helpers ---- */

/* Contiguous f32 tensor at float offset `off` of buffer b. */
hbg_tensor hbg__wl_t(const hbg_workload *w, int b, uint64_t off, uint32_t mode,
                     uint32_t ndim, const uint32_t *dims);
/* A tensor of any dtype at byte offset `boff` of buffer b, with strides in
 * elements (NULL = contiguous). */
hbg_tensor hbg__wl_tb(const hbg_workload *w, int b, uint64_t boff,
                      uint32_t dtype, uint32_t mode, uint32_t ndim,
                      const uint32_t *dims, const uint32_t *strides);
/* A view of base: element offset `eoff` (elements of base's dtype) from
 * base's element 0, own dims, strides (NULL = contiguous), base's dtype. */
hbg_tensor hbg__wl_view(const hbg_tensor *base, uint64_t eoff, uint32_t mode,
                        uint32_t ndim, const uint32_t *dims,
                        const uint32_t *strides);
/* A new graph-internal output (addr 0). */
hbg_tensor hbg__wl_new(uint32_t ndim, const uint32_t *dims);
/* t read as an input. */
hbg_tensor hbg__wl_in(hbg_tensor t);

#define WL_D(...) ((const uint32_t[]){__VA_ARGS__})
#define WL_ND(...) (uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / 4)

/* Convenience emitters for bodies and top-level tasks. */
void hbg__wl_k2(hbg__wl_em *em, uint32_t kernel, hbg_tensor a, hbg_tensor out,
                const hbg_scalar *sc, uint32_t ns, hbg_tensor *got);
void hbg__wl_k3(hbg__wl_em *em, uint32_t kernel, hbg_tensor a, hbg_tensor b,
                hbg_tensor out, const hbg_scalar *sc, uint32_t ns,
                hbg_tensor *got);

/* The decode head both models end with: final RMSNorm of the last residual,
 * LM-head GEMV, softmax. Offsets are float offsets into the activation (act)
 * and global (g) buffers. */
typedef struct hbg__wl_head {
  uint64_t resid, xf, logits, probs; /* act */
  uint64_t fnorm, lm;                /* g */
  uint32_t hidden, vocab;
} hbg__wl_head;
void hbg__wl_emit_head(hbg_workload *w, hbg__wl_em *em, hbg_task_id prev,
                       const hbg__wl_head *h);

hbg_scalar hbg__wl_static_f32(float f);
hbg_scalar hbg__wl_bscalar(uint32_t index);
uint64_t hbg__wl_f32(float f);

/* ---- deterministic generator ---- */
uint64_t hbg__wl_mix(uint64_t x);
void hbg__wl_fill(float *p, uint64_t n, uint64_t seed, float lo, float hi);

/* ---- models ---- */

struct hbg__wl_model {
  const char *name;
  uint32_t default_layers;
  /* Size the buffers (w->buf[*].floats), fill w->info counts; allocate
   * w->m. */
  int (*layout)(hbg_workload *w);
  /* Fill the host mirrors of the weight and global buffers. */
  void (*init)(hbg_workload *w);
  /* Optional: fill the host mirrors from a checkpoint after init (named
   * errors in hbg_last_error()). @return 0 or an error. */
  int (*load)(hbg_workload *w);
  /* Emit decode step `step`. */
  void (*step)(hbg_workload *w, hbg__wl_em *em, uint32_t step);
  /* Free what w->m owns (not w->m itself); may be NULL. */
  void (*free)(void *m);
  /* Where the hidden state `index` (0: the input of layer 0, i: the output
   * of layer i - 1) lies in the activation buffer: float offset and count.
   * NULL for a model without one residual stream. */
  int (*hidden)(const hbg_workload *w, uint32_t index, uint64_t *off,
                uint32_t *n);
  /* The token decode step `step` reads; NULL for a model without tokens. */
  uint32_t (*token)(const hbg_workload *w, uint32_t step);
};

extern const hbg__wl_model hbg__wl_qwen3;
extern const hbg__wl_model hbg__wl_dsv4;
extern const hbg__wl_model hbg__wl_flat;
extern const hbg__wl_model hbg__wl_qwen3_hf;    /* "qwen3": from model */
extern const hbg__wl_model hbg__wl_qwen3_06b;   /* "qwen3-0.6b" */
extern const hbg__wl_model hbg__wl_qwen3_14b_real; /* "qwen3-14b-real" */

#endif
