/*
 * A Hugging Face Qwen3 checkpoint reader: the decoder's dimensions from
 * config.json, and its tensors from safetensors files (one
 * model.safetensors, or model.safetensors.index.json and its shards).
 *
 * Every refusal returns a negative HBG_E_* code and sets hbg_last_error()
 * to a message that names the file and, where there is one, the key or the
 * tensor. Codes: HBG_E_INVAL (malformed input, a value out of its range),
 * HBG_E_NOTFOUND (a missing file, key or tensor), HBG_E_LIMIT (a size past
 * a limit: a count past uint32, a safetensors header over 100 MB),
 * HBG_E_UNSUPPORTED (a tensor whose dtype cannot be converted), HBG_E_IO
 * (a failed or short read), HBG_E_NOMEM.
 */
#ifndef HBG_WORKLOAD_HF_H
#define HBG_WORKLOAD_HF_H

#include <stddef.h>
#include <stdint.h>

/* Dims of a Qwen3 decoder from a Hugging Face config.json. */
typedef struct hbg__hf_qwen3 {
  uint32_t hidden;       /* hidden_size */
  uint32_t intermediate; /* intermediate_size */
  uint32_t heads;        /* num_attention_heads */
  uint32_t kv_heads;     /* num_key_value_heads */
  uint32_t head_dim;     /* head_dim (default hidden / heads when absent) */
  uint32_t layers;       /* num_hidden_layers */
  uint32_t vocab;        /* vocab_size */
  uint32_t max_pos;      /* max_position_embeddings (0 when absent) */
  float eps;             /* rms_norm_eps */
  double rope_theta;     /* rope_theta (default 10000 when absent) */
  int tie_embeddings;    /* tie_word_embeddings (default 0) */
} hbg__hf_qwen3;

/* Parse a config.json file (path to the file). Required keys: hidden_size,
 * intermediate_size, num_attention_heads, num_key_value_heads,
 * num_hidden_layers, vocab_size, rms_norm_eps. Checks: every count >= 1 and
 * fits uint32, heads % kv_heads == 0, head_dim even, eps > 0 and finite,
 * rope_theta > 0; "model_type" when present must be "qwen3" (refuse others,
 * naming it). Every refusal names the file and the key in hbg_last_error().
 * A JSON null counts as absent for the optional keys (head_dim,
 * max_position_embeddings, rope_theta, tie_word_embeddings, model_type).
 * @return 0 and *out; HBG_E_NOTFOUND (no such file, a required key
 * missing), HBG_E_INVAL (not JSON, not an object, a wrong type or value),
 * HBG_E_LIMIT (a count past uint32, a file over 16 MB), HBG_E_IO,
 * HBG_E_NOMEM. *out is untouched on failure. */
int hbg__hf_config_read(const char *path, hbg__hf_qwen3 *out);
/* The same from a JSON text already in memory (what the tests mostly use);
 * `who` names it in errors. */
int hbg__hf_config_parse(const char *json, size_t len, const char *who,
                         hbg__hf_qwen3 *out);

/* An opened checkpoint: a directory holding either model.safetensors, or
 * model.safetensors.index.json ("weight_map": tensor name -> shard file
 * name) and its shards (model.safetensors wins where both are there).
 * Opening reads and validates every header (not the data), and keeps each
 * file open until hbg__hf_close.
 * @return 0 and *out; HBG_E_NOTFOUND (neither file, a shard the index
 * names missing, a tensor the index names absent from its shard),
 * HBG_E_INVAL (a malformed header or index), HBG_E_LIMIT, HBG_E_IO,
 * HBG_E_NOMEM. */
typedef struct hbg__hf_ckpt hbg__hf_ckpt;
int hbg__hf_open(const char *dir, hbg__hf_ckpt **out);
void hbg__hf_close(hbg__hf_ckpt *c); /* accepts NULL */

/* Read tensor `name` into dst as `dtype` (HBG_DTYPE_F32 or HBG_DTYPE_BF16),
 * converting from the file's dtype (safetensors "F32", "BF16", "F16"):
 * F32->BF16 rounds to nearest even, BF16->F32 and F16->F32 are exact,
 * F16->BF16 goes through f32. The tensor's shape must equal shape[0..ndim)
 * exactly. dst holds product(shape) elements of dtype. Reads of one
 * checkpoint may run on several threads at once.
 * @return 0; HBG_E_NOTFOUND (no such tensor), HBG_E_INVAL (NULL argument,
 * another dtype asked for, a shape mismatch), HBG_E_UNSUPPORTED (the
 * file's dtype is none of F32, BF16, F16), HBG_E_IO (a failed or short
 * read), HBG_E_NOMEM. */
int hbg__hf_read(hbg__hf_ckpt *c, const char *name, uint32_t dtype,
                 const uint64_t *shape, uint32_t ndim, void *dst);
/* Whether the checkpoint has tensor `name` (for lm_head.weight when
 * embeddings are tied): 1 or 0 (also for NULL arguments). */
int hbg__hf_has(const hbg__hf_ckpt *c, const char *name);

#endif
