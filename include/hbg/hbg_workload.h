/*
 * Built-in reference workloads (decode-step shapes from the upstream scenes)
 * and their host reference, for benchmarks and end-to-end checks.
 *
 * A workload owns device buffers (weights, inputs, outputs, KV cache) on one
 * runtime. Each bind submits one decode step: a few ordinary tasks, then the
 * graph submissions of each layer, then a few ordinary tasks. The decode
 * position is a boundary scalar, so the Definitions never change across
 * steps while the outputs do. Submitting writes no device memory.
 *
 *   qwen3-14b  40 layers, one submission per layer, one Definition of 277
 *              nodes, 26 boundary tensors and 2 boundary scalars per layer.
 *   dsv4       43 layers, three submissions per layer (attention, then a
 *              dense FFN in two parts or a MoE router + routed experts),
 *              7 Definitions of 32 to 50 nodes, up to 99 boundary tensors
 *              and 30 boundary scalars per layer.
 *   qwen3-0.6b Qwen3-0.6B at its real dims: 28 layers, hidden 1024, 16
 *              query heads over 8 KV heads of 128, intermediate 3072,
 *              vocabulary 151,936, tied embeddings; weights bf16 by
 *              default (hbg_workload_config.weight_dtype), random from the
 *              seed. One Definition per layer shape, tiled so the device's
 *              workers share a layer (a GEMV node per head for q/k/v, row
 *              tiles of about 2^17 weights for o, gate, up and down), one
 *              submission per layer; before the layers the token's
 *              embedding row, after them the final norm, the LM head in
 *              row tiles and a softmax.
 *   qwen3-14b-real  Qwen3-14B's dims (40 layers, hidden 5120, 40/8 heads
 *              of 128, intermediate 17408, vocabulary 151,936, untied):
 *              about 29.5 GB of bf16 weights, for a device with the
 *              memory; elsewhere hbg_workload_create refuses it with
 *              HBG_E_DEVMEM (or HBG_E_NOMEM for the host mirrors) and
 *              hbg_last_error() names the bytes needed.
 *   qwen3      the same decoder at the dims of a Hugging Face config.json,
 *              read from hbg_workload_config.model: a checkpoint folder
 *              (config.json plus model.safetensors, or
 *              model.safetensors.index.json and its shards; the standard
 *              tensor names, model.layers.{i}.self_attn.q_proj.weight,
 *              ...) whose weights are loaded, or a config.json file alone
 *              (random weights at its dims).
 *              The three Qwen3 workloads run one decode step per bind:
 *              input RMSNorm, q/k/v projections, per-head q_norm and
 *              k_norm, rotate-half RoPE at the step's position, K and V
 *              written into a KV cache of kv_len positions, grouped-query
 *              attention over the positions so far, o projection and
 *              residual, post-attention RMSNorm, SiLU-gated MLP and
 *              residual. Step s decodes token hbg_workload_token(w, s) at
 *              position s % kv_len.
 *   flat       no graph: a copy, then N (hbg_workload_config.tasks,
 *              1000 by default) ordinary three-tensor tasks over
 *              overlapping views of one buffer (alternately ADD and
 *              RMSNORM), each naming the task before it as its dependency
 *              -- or none on a runtime with HBG_DEPS_INFERRED, as the
 *              other workloads do too. Its layer count is 0.
 *
 * Thread safety: as for the runtime it was created on.
 */
#ifndef HBG_HBG_WORKLOAD_H
#define HBG_HBG_WORKLOAD_H

#include <hbg/hbg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbg_workload hbg_workload;

/* The most layers a built-in workload takes. */
#define HBG_WORKLOAD_MAX_LAYERS 100000u

typedef struct hbg_workload_config {
  uint32_t struct_size;
  uint32_t layers;    /* 0 = the workload's default; at most
                         HBG_WORKLOAD_MAX_LAYERS */
  const char *name;   /* a built-in name (hbg_workload_name) */
  uint64_t seed;      /* input/weight generator seed, 0 = fixed default */
  uint32_t def_size;  /* pad every Definition to at least this many bytes
                         with an opaque section (hbg_record_pad), to
                         measure the policies at another Definition size;
                         0 = the natural size (qwen3-14b: 62,616 B). At
                         most HBG_WORKLOAD_MAX_DEF_SIZE. A struct_size that
                         ends before this field reads as 0. */
  uint32_t tasks;     /* flat: ordinary tasks per step, 0 = 1000, at most
                         HBG_WORKLOAD_MAX_TASKS; the other workloads
                         ignore it. A struct_size that ends before this
                         field reads as 0. */
  /* The fields below are read only when struct_size covers them (0
   * otherwise). */
  const char *model;     /* workload "qwen3": a Hugging Face checkpoint
                            folder or a config.json file; NULL for every
                            other workload (which refuse one) */
  uint32_t weight_dtype; /* Qwen3 workloads: HBG_DTYPE_BF16 (0 = this
                            default) or HBG_DTYPE_F32; the others take 0 */
  uint32_t kv_len;       /* Qwen3 workloads at real dims: KV-cache
                            positions, 0 = HBG_WORKLOAD_DEFAULT_KV_LEN,
                            at most HBG_WORKLOAD_MAX_KV_LEN */
} hbg_workload_config;

/* hbg_workload_config.kv_len when 0, and its largest value. */
#define HBG_WORKLOAD_DEFAULT_KV_LEN 512u
#define HBG_WORKLOAD_MAX_KV_LEN 65536u

/* The largest hbg_workload_config.tasks. */
#define HBG_WORKLOAD_MAX_TASKS 1000000u
/* hbg_workload_config.tasks when 0. */
#define HBG_WORKLOAD_DEFAULT_TASKS 1000u

/* The largest hbg_workload_config.def_size. */
#define HBG_WORKLOAD_MAX_DEF_SIZE (16u << 20)

typedef struct hbg_workload_info {
  uint32_t struct_size;
  uint32_t layers;
  uint32_t n_defs;            /* distinct Definitions (graph keys) */
  uint32_t min_nodes, max_nodes; /* nodes per Definition */
  uint32_t max_btensors;      /* boundary tensors per layer (all of the
                                 layer's submissions), max */
  uint32_t max_bscalars;      /* boundary scalars per layer, max */
  uint32_t tasks_before, tasks_after; /* ordinary tasks around the layers */
  uint64_t device_bytes;      /* tensor memory the workload allocated */
  uint64_t node_heap_bytes;   /* device bytes hbg_workload_nodes' heap
                                 needs (graph-internal tensors of the
                                 largest Definition, laid out as the
                                 device's heap block lays them out; a
                                 multiple of 64); a caller whose
                                 struct_size ends before this field (a
                                 build before it) gets nothing written
                                 past its struct */
  uint64_t weight_bytes;      /* of device_bytes: weights and tables */
  uint64_t kv_bytes;          /* of device_bytes: the KV cache */
  uint32_t hidden;            /* hidden size (floats per hidden state),
                                 0 for a workload without hidden states */
  uint32_t vocab;             /* vocabulary, 0 for one without tokens */
} hbg_workload_info;

HBG_API void hbg_workload_config_init(hbg_workload_config *cfg);
/* @return the number of built-in workloads; names are static strings. */
HBG_API uint32_t hbg_workload_count(void);
HBG_API const char *hbg_workload_name(uint32_t i);

/* Allocate and fill the workload's device buffers on rt (hbg_last_error()
 * says why a creation failed: the model file and tensor, the bytes a short
 * device lacks, the setting a workload does not take) (weights from a
 * generator seeded by cfg->seed; layers beyond 64 (qwen3-14b) or 48 (dsv4)
 * reuse earlier layers' weights).
 * @return 0, HBG_E_INVAL, HBG_E_NOTFOUND (unknown name), HBG_E_LIMIT
 * (layers > HBG_WORKLOAD_MAX_LAYERS, def_size >
 * HBG_WORKLOAD_MAX_DEF_SIZE or tasks > HBG_WORKLOAD_MAX_TASKS),
 * HBG_E_NOMEM, or a device error. */
HBG_API int hbg_workload_create(hbg_runtime *rt, const hbg_workload_config *cfg,
                                hbg_workload **out);
/* Free device buffers. Accepts NULL. Call before hbg_runtime_destroy. */
HBG_API void hbg_workload_destroy(hbg_workload *w);

/* The device bytes hbg_workload_create(cfg) would allocate (weights, KV
 * cache, activations), without allocating them: what an engine checks
 * before it creates a workload, and what the CLI sizes the sim's memory
 * by. Reads a model's config.json, not its weights.
 * @return 0 and *bytes, or what hbg_workload_create would return for a
 * bad cfg (hbg_last_error() names the problem). */
HBG_API int hbg_workload_bytes(const hbg_workload_config *cfg,
                               uint64_t *bytes);
HBG_API int hbg_workload_get_info(const hbg_workload *w,
                                  hbg_workload_info *out);

/* Orchestrate decode step `step` into bind b (all tasks and graphs).
 * @return 0 or the first submission error. */
HBG_API int hbg_workload_submit(hbg_workload *w, hbg_bind *b, uint32_t step);

/* After the bind of `step` completed, and before another bind of this
 * workload runs: read the activations and caches back and compare them,
 * bit for bit, with a host reference run of the same DAG (same kernels,
 * same order) from the caches as the step found them.
 * *max_abs_err (optional) receives the largest difference (0 on a match).
 * @return 0 (match), HBG_E_VERIFY, HBG_E_NOMEM, or a device error. */
HBG_API int hbg_workload_verify(hbg_workload *w, uint32_t step,
                                double *max_abs_err);

/* After the bind of a step completed: copy hidden state `index` of that
 * step into out (n floats, n >= hbg_workload_info.hidden). Index 0 is the
 * input of layer 0 (the token's embedding row), index i the output of
 * layer i - 1 (the residual stream), up to index layers.
 * @return 0, HBG_E_INVAL (NULL w or out, n too small), HBG_E_RANGE (index
 * past layers), HBG_E_UNSUPPORTED (a workload without hidden states:
 * dsv4, flat), or a device error. */
HBG_API int hbg_workload_hidden(hbg_workload *w, uint32_t index, float *out,
                                uint32_t n);
/* The token decode step `step` embeds (Qwen3 workloads), or UINT32_MAX for
 * a workload without tokens. */
HBG_API uint32_t hbg_workload_token(const hbg_workload *w, uint32_t step);

/* ---- the step as a flat list of kernel calls (peer executors) ---- */

/* The most tensors / scalars one kernel call of a built-in workload has. */
#define HBG_WORKLOAD_NODE_MAX_TENSORS 16u
#define HBG_WORKLOAD_NODE_MAX_SCALARS 8u

/* One kernel call of a step: an ordinary task, or one node of a graph
 * submission with its boundary references resolved. Every tensor has an
 * absolute device address (offset included as in hbg_tensor); a
 * graph-internal tensor lies in the heap passed to hbg_workload_nodes. */
typedef struct hbg_workload_node {
  uint32_t kernel;    /* HBG_KERNEL_* */
  uint32_t n_tensors; /* <= HBG_WORKLOAD_NODE_MAX_TENSORS */
  uint32_t n_scalars; /* <= HBG_WORKLOAD_NODE_MAX_SCALARS */
  uint32_t task;      /* the bind's task index it belongs to (its window
                         entry: ordinary task or graph submission) */
  hbg_tensor tensors[HBG_WORKLOAD_NODE_MAX_TENSORS];
  uint64_t scalars[HBG_WORKLOAD_NODE_MAX_SCALARS]; /* raw bits, resolved */
} hbg_workload_node;

/* The kernel calls of decode step `step`, flattened: what the bind of that
 * step runs, one call per ordinary task or graph node, in an order that
 * satisfies every dependency when the calls run one at a time (submission
 * order; a graph's nodes in recording order). Graph-internal tensors are
 * placed in one heap of hbg_workload_info.node_heap_bytes at device
 * address `heap`, reused by every graph (so the calls must run in this
 * order, one after another). Running them writes what the bind writes:
 * hbg_workload_verify(w, step) then passes. Writes no device memory.
 * Each graph-internal output starts at a 64-byte aligned offset of the
 * heap (addr = heap, offset = that offset), as in the device's heap block.
 * With out NULL only *n is set (cap ignored).
 * @return 0 and *n, HBG_E_INVAL (w or n NULL, heap 0 or misaligned to 64),
 * HBG_E_LIMIT (more than cap calls; *n is the number needed, out is not
 * written). */
HBG_API int hbg_workload_nodes(hbg_workload *w, uint32_t step, uint64_t heap,
                               hbg_workload_node *out, uint32_t cap,
                               uint32_t *n);

#ifdef __cplusplus
}
#endif

#endif
