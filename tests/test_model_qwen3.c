/* The Qwen3 workloads at real dims: qwen3-0.6b (two of its layers) under
 * every policy and with inferred dependencies, f32 and bf16 weights, each
 * step bit-exact against the host reference; "qwen3" from a checkpoint
 * folder this test writes (config.json and model.safetensors) and from a
 * config.json alone; the sizes hbg_workload_bytes and get_info report; and
 * every refusal, named. */
#include <ftw.h>
#include <stddef.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hbg/hbg.h>
#include <hbg/hbg_workload.h>

#include "test.h"
#include "tmpdir_fixture.h"


static hbg_runtime *sim(int policy, int deps, const char *opts) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.deps = (uint32_t)deps;
  cfg.device = "sim";
  cfg.device_options = opts;
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static void wconfig(hbg_workload_config *wc, const char *name,
                    const char *model, uint32_t layers, uint32_t wdt) {
  hbg_workload_config_init(wc);
  wc->name = name;
  wc->model = model;
  wc->layers = layers;
  wc->weight_dtype = wdt;
}

/* steps 0.. n-1 launched and each verified, bit for bit */
static void run_steps(hbg_runtime *rt, hbg_workload *w, uint32_t n) {
  for (uint32_t s = 0; s < n; s++) {
    hbg_bind *b;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, s));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_end(b);
    double err = -1.0;
    int rc = hbg_workload_verify(w, s, &err);
    if (rc)
      T_FAIL("step %u: verify %s, max_abs_err %g", s, hbg_err_name(rc), err);
  }
}

static void last_error_has(const char *a, const char *b) {
  const char *e = hbg_last_error();
  if (!strstr(e, a) || (b && !strstr(e, b)))
    T_FAIL("hbg_last_error() '%s' lacks '%s' / '%s'", e, a, b ? b : "");
}

/* ---- qwen3-0.6b ---- */

/* nodes of one 0.6B layer, counted from the description: input norm; per KV
 * head k and v GEMVs, k_norm, RoPE; per query head the q GEMV, q_norm,
 * RoPE, attention; o in 16 tiles of 64 rows (2^17 / 2048) and their
 * residual adds; the post norm; gate, up and SiLU-mul in 24 tiles of 128
 * rows; down in 25 tiles of 42 rows (the last 16) and their adds */
#define NODES_06B (1 + 8 * 4 + 16 * 4 + 16 * 2 + 1 + 24 * 3 + 25 * 2)

/* The sanitizers run the 0.6B's dims with a vocabulary of 1024 (a
 * config.json at its dims, the "qwen3" workload: the same layers; drawing
 * and checking a 151,936-row embedding instrumented takes minutes). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VOCAB_06B 1024u
#else
#define VOCAB_06B 151936u
#endif

static uint64_t bytes_06b(uint32_t layers, uint32_t es, uint32_t kv_len) {
  const uint64_t H = 1024, F = 3072, QD = 2048, KD = 1024, D = 128,
                 V = VOCAB_06B;
  uint64_t layer = (H + QD * H + 2 * KD * H + 2 * D + H * QD + H + 3 * F * H) *
                   es;
  uint64_t g = V * H * es + H * es + 2 * (uint64_t)kv_len * D / 2 * 4;
  uint64_t kv = 2 * (uint64_t)layers * 8 * kv_len * D * 4;
  uint64_t act = ((layers + 1) * H + layers * (QD + KD + QD + H + F) + H +
                  2 * V) * 4;
  return layers * layer + g + kv + act;
}

/* f32 weights once (the kernels' bf16 path aside, the same description),
 * with both dependency modes; bf16 under every policy. The sanitizers run
 * each kernel and policy path 5 to 20 times slower: there bf16 under
 * deferred and coalesced, f32 with inferred dependencies only (the same
 * code paths; the plain build covers the rest). */
static int wanted(int policy, int deps, uint32_t wdt) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  if (wdt == HBG_DTYPE_F32)
    return deps && policy == HBG_POLICY_COALESCED;
  return !deps &&
         (policy == HBG_POLICY_COALESCED || policy == HBG_POLICY_DEFERRED);
#else
  return policy == HBG_POLICY_COALESCED || (!deps && wdt == HBG_DTYPE_BF16);
#endif
}

static void test_06b(uint32_t wdt) {
  const uint32_t es = wdt == HBG_DTYPE_F32 ? 4 : 2;
  hbg_workload_config wc;
  char cfg06[160];
  snprintf(cfg06, sizeof cfg06, "%s/q06.json", g_root);
  FILE *cf = fopen(cfg06, "wb");
  ASSERT(cf);
  fprintf(cf, "{\"model_type\": \"qwen3\", \"hidden_size\": 1024, "
              "\"intermediate_size\": 3072, \"num_attention_heads\": 16, "
              "\"num_key_value_heads\": 8, \"head_dim\": 128, "
              "\"num_hidden_layers\": 28, \"vocab_size\": %u, "
              "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000, "
              "\"tie_word_embeddings\": true}",
          VOCAB_06B);
  fclose(cf);
  if (VOCAB_06B == 151936u)
    wconfig(&wc, "qwen3-0.6b", NULL, 2, wdt);
  else
    wconfig(&wc, "qwen3", cfg06, 2, wdt);
  uint64_t need;
  ASSERT_OK(hbg_workload_bytes(&wc, &need));
  ASSERT_UEQ(need, bytes_06b(2, es, HBG_WORKLOAD_DEFAULT_KV_LEN));
  char opts[64];
  snprintf(opts, sizeof opts, "mem=%llu",
           (unsigned long long)(need + (64u << 20)));
  for (int p = 0; p < HBG_POLICY__COUNT; p++)
    for (int deps = 0; deps < 2; deps++) {
      if (!wanted(p, deps, wdt))
        continue;
      hbg_runtime *rt =
          sim(p, deps ? HBG_DEPS_INFERRED : HBG_DEPS_EXPLICIT, opts);
      hbg_workload *w;
      ASSERT_OK(hbg_workload_create(rt, &wc, &w));
      hbg_workload_info info;
      memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      ASSERT_OK(hbg_workload_get_info(w, &info));
      ASSERT_EQ(info.layers, 2);
      ASSERT_EQ(info.n_defs, 1);
      ASSERT_EQ(info.max_nodes, NODES_06B);
      ASSERT_EQ(info.hidden, 1024);
      ASSERT_EQ(info.vocab, VOCAB_06B);
      ASSERT_UEQ(info.device_bytes, need);
      /* a caller built before weight_bytes: nothing past its struct */
      {
        unsigned char old[sizeof info];
        memset(old, 0xcd, sizeof old);
        hbg_workload_info *o = (hbg_workload_info *)(void *)old;
        o->struct_size = (uint32_t)offsetof(hbg_workload_info, weight_bytes);
        ASSERT_OK(hbg_workload_get_info(w, o));
        ASSERT_UEQ(o->node_heap_bytes, info.node_heap_bytes);
        for (size_t i = offsetof(hbg_workload_info, weight_bytes);
             i < sizeof old; i++)
          ASSERT_EQ(old[i], 0xcd);
      }
      ASSERT_UEQ(info.kv_bytes, 2ull * 2 * 8 * 512 * 128 * 4);
      ASSERT_UEQ(info.weight_bytes,
                 need - info.kv_bytes -
                     ((3 * 1024 + 2 * (2048 + 1024 + 2048 + 1024 + 3072) +
                       1024 + 2 * VOCAB_06B) *
                      4ull));
      run_steps(rt, w, p == HBG_POLICY_COALESCED ? 3 : 2);
      /* the hidden states are the residual stream: the embedding row of
       * the token (exact in f32), then one per layer */
      float h0[1024], h2[1024];
      ASSERT_OK(hbg_workload_hidden(w, 0, h0, 1024));
      ASSERT_OK(hbg_workload_hidden(w, 2, h2, 1024));
      ASSERT(memcmp(h0, h2, sizeof h0) != 0);
      ASSERT_ERR(hbg_workload_hidden(w, 3, h0, 1024), HBG_E_RANGE);
      ASSERT_ERR(hbg_workload_hidden(w, 0, h0, 1023), HBG_E_INVAL);
      ASSERT(hbg_workload_token(w, 0) < VOCAB_06B);
      ASSERT(hbg_workload_token(w, 0) != hbg_workload_token(w, 1));
      hbg_workload_destroy(w);
      hbg_runtime_destroy(rt);
    }
  printf("qwen3-0.6b %s: 2 layers, %u nodes per layer, %llu B, verified "
         "(bf16: every policy; f32: coalesced, explicit and inferred)\n",
         wdt == HBG_DTYPE_F32 ? "f32" : "bf16", NODES_06B,
         (unsigned long long)need);
}

/* ---- a checkpoint written here ---- */

/* tiny dims: hidden 64, intermediate 96, 4 query heads over 2 KV heads of
 * 16, 2 layers, vocabulary 128, untied */
static const char CONFIG[] =
    "{\"model_type\": \"qwen3\", \"hidden_size\": 64, "
    "\"intermediate_size\": %u, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 2, \"head_dim\": 16, \"num_hidden_layers\": 2, "
    "\"vocab_size\": 128, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, "
    "\"tie_word_embeddings\": false}";

typedef struct tdesc {
  char name[96];
  uint32_t d0, d1; /* d1 0: 1-D */
} tdesc;

static uint32_t g_nt;
static tdesc g_t[64];

static void add(const char *name, uint32_t d0, uint32_t d1) {
  tdesc *t = &g_t[g_nt++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->d0 = d0;
  t->d1 = d1;
}

static void tensors(uint32_t inter, const char *skip) {
  static const char *const lw[] = {
      "input_layernorm",  "self_attn.q_proj", "self_attn.k_proj",
      "self_attn.v_proj", "self_attn.o_proj", "self_attn.q_norm",
      "self_attn.k_norm", "post_attention_layernorm",
      "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  const uint32_t dims[][2] = {{64, 0},    {64, 64}, {32, 64}, {32, 64},
                              {64, 64},   {16, 0},  {16, 0},  {64, 0},
                              {inter, 64}, {inter, 64}, {64, inter}};
  g_nt = 0;
  add("model.embed_tokens.weight", 128, 64);
  add("model.norm.weight", 64, 0);
  add("lm_head.weight", 128, 64);
  for (uint32_t l = 0; l < 2; l++)
    for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++) {
      char n[96];
      snprintf(n, sizeof n, "model.layers.%u.%s.weight", l, lw[i]);
      if (!skip || strcmp(n, skip))
        add(n, dims[i][0], dims[i][1]);
    }
}

/* config.json with intermediate `inter` (the tensors may disagree) and one
 * model.safetensors of F32 tensors, value i of tensor t a function of both */
static const char *write_ckpt(const char *tag, uint32_t cfg_inter,
                              uint32_t tensor_inter, const char *skip) {
  static char dir[160];
  snprintf(dir, sizeof dir, "%s/%s", g_root, tag);
  ASSERT_EQ(mkdir(dir, 0700), 0);
  char path[224], text[1024];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "wb");
  ASSERT(f);
  snprintf(text, sizeof text, CONFIG, cfg_inter);
  fputs(text, f);
  fclose(f);
  tensors(tensor_inter, skip);
  char *hdr = malloc(1 << 16);
  ASSERT(hdr);
  size_t n = 0;
  uint64_t off = 0;
  n += (size_t)snprintf(hdr + n, 1 << 16, "{");
  for (uint32_t i = 0; i < g_nt; i++) {
    const tdesc *t = &g_t[i];
    uint64_t count = (uint64_t)t->d0 * (t->d1 ? t->d1 : 1);
    char shape[32];
    if (t->d1)
      snprintf(shape, sizeof shape, "[%u, %u]", t->d0, t->d1);
    else
      snprintf(shape, sizeof shape, "[%u]", t->d0);
    n += (size_t)snprintf(hdr + n, (1 << 16) - n,
                          "%s\"%s\": {\"dtype\": \"F32\", \"shape\": %s, "
                          "\"data_offsets\": [%llu, %llu]}",
                          i ? ", " : "", t->name, shape,
                          (unsigned long long)off,
                          (unsigned long long)(off + count * 4));
    off += count * 4;
  }
  n += (size_t)snprintf(hdr + n, (1 << 16) - n, "}");
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  f = fopen(path, "wb");
  ASSERT(f);
  uint64_t hn = n;
  fwrite(&hn, 8, 1, f);
  fwrite(hdr, 1, n, f);
  for (uint32_t i = 0; i < g_nt; i++) {
    const tdesc *t = &g_t[i];
    uint64_t count = (uint64_t)t->d0 * (t->d1 ? t->d1 : 1);
    int norm = strstr(t->name, "norm") != NULL;
    for (uint64_t j = 0; j < count; j++) {
      /* norms around 1, the rest small and signed */
      float v = norm ? 1.0f + 0.01f * (float)((j * 7 + i) % 11)
                     : 0.02f * (float)((int)((j * 31 + i * 17) % 23) - 11) /
                           11.0f;
      fwrite(&v, 4, 1, f);
    }
  }
  fclose(f);
  free(hdr);
  return dir;
}

static float ckpt_value(uint32_t tensor, uint64_t j) {
  return 0.02f * (float)((int)((j * 31 + tensor * 17) % 23) - 11) / 11.0f;
}

static uint16_t bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static void test_checkpoint(void) {
  const char *dir = write_ckpt("good", 96, 96, NULL);
  for (int wi = 0; wi < 2; wi++) {
    const uint32_t wdt = wi ? HBG_DTYPE_BF16 : HBG_DTYPE_F32;
    for (int p = 0; p < HBG_POLICY__COUNT; p++) {
      hbg_runtime *rt = sim(p, HBG_DEPS_EXPLICIT, NULL);
      hbg_workload_config wc;
      wconfig(&wc, "qwen3", dir, 0, wdt);
      hbg_workload *w;
      ASSERT_OK(hbg_workload_create(rt, &wc, &w));
      hbg_workload_info info;
      memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      ASSERT_OK(hbg_workload_get_info(w, &info));
      ASSERT_EQ(info.layers, 2); /* the config's */
      ASSERT_EQ(info.hidden, 64);
      ASSERT_EQ(info.vocab, 128);
      run_steps(rt, w, 4);
      /* hidden 0 is the step's embedding row, as the file holds it */
      float h[64];
      ASSERT_OK(hbg_workload_hidden(w, 0, h, 64));
      uint32_t tok = hbg_workload_token(w, 3);
      ASSERT(tok < 128);
      for (uint32_t j = 0; j < 64; j++) {
        float want = ckpt_value(0, (uint64_t)tok * 64 + j);
        if (wdt == HBG_DTYPE_BF16) {
          uint32_t u = (uint32_t)bf16(want) << 16;
          memcpy(&want, &u, 4);
        }
        ASSERT(memcmp(&h[j], &want, 4) == 0);
      }
      hbg_workload_destroy(w);
      hbg_runtime_destroy(rt);
    }
  }
  /* the config alone: random weights at its dims */
  char cfg_path[224];
  snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
  hbg_runtime *rt = sim(HBG_POLICY_COALESCED, HBG_DEPS_EXPLICIT, NULL);
  hbg_workload_config wc;
  wconfig(&wc, "qwen3", cfg_path, 1, 0);
  hbg_workload *w;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  run_steps(rt, w, 2);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
  printf("qwen3 from a checkpoint: loaded, f32 and bf16, every policy\n");
}

static void refused(const hbg_workload_config *wc, const char *opts, int code,
                    const char *a, const char *b) {
  hbg_runtime *rt = sim(HBG_POLICY_COALESCED, HBG_DEPS_EXPLICIT, opts);
  hbg_workload *w = NULL;
  ASSERT_ERR(hbg_workload_create(rt, wc, &w), code);
  ASSERT(w == NULL);
  last_error_has(a, b);
  hbg_runtime_destroy(rt);
}

static void test_refusals(void) {
  hbg_workload_config wc;
  const char *dir = write_ckpt("missing", 96, 96,
                               "model.layers.1.mlp.up_proj.weight");
  wconfig(&wc, "qwen3", dir, 0, 0);
  refused(&wc, NULL, HBG_E_NOTFOUND, "model.layers.1.mlp.up_proj.weight",
          NULL);
  dir = write_ckpt("shape", 96, 80, NULL);
  wconfig(&wc, "qwen3", dir, 0, 0);
  refused(&wc, NULL, HBG_E_INVAL, "model.safetensors",
          "model.layers.0.mlp.gate_proj.weight");
  dir = write_ckpt("layers", 96, 96, NULL);
  wconfig(&wc, "qwen3", dir, 3, 0);
  refused(&wc, NULL, HBG_E_INVAL, "has 2 layers", NULL);
  uint64_t bytes;
  ASSERT_ERR(hbg_workload_bytes(&wc, &bytes), HBG_E_INVAL); /* planning */
  last_error_has("has 2 layers", NULL);
  wconfig(&wc, "qwen3", "/nonexistent/qwen3", 0, 0);
  refused(&wc, NULL, HBG_E_NOTFOUND, "/nonexistent/qwen3", NULL);
  wconfig(&wc, "qwen3", NULL, 0, 0);
  refused(&wc, NULL, HBG_E_INVAL, "hbg_workload_config.model", NULL);
  wconfig(&wc, "qwen3-0.6b", dir, 0, 0);
  refused(&wc, NULL, HBG_E_INVAL, "takes no model", NULL);
  wconfig(&wc, "qwen3-0.6b", NULL, 1, HBG_DTYPE_F16);
  refused(&wc, NULL, HBG_E_INVAL, "weight_dtype", NULL);
  wconfig(&wc, "qwen3-14b", NULL, 1, HBG_DTYPE_F32);
  refused(&wc, NULL, HBG_E_INVAL, "weight_dtype", "only 0");
  wconfig(&wc, "qwen3-0.6b", NULL, 1, 0);
  wc.kv_len = HBG_WORKLOAD_MAX_KV_LEN + 1;
  refused(&wc, NULL, HBG_E_LIMIT, "kv_len", NULL);
  ASSERT_ERR(hbg_workload_bytes(&wc, &bytes), HBG_E_LIMIT);
  /* a device short of memory: the bytes needed are named */
  wconfig(&wc, "qwen3-0.6b", NULL, 1, 0);
  ASSERT_OK(hbg_workload_bytes(&wc, &bytes));
  char need[32];
  snprintf(need, sizeof need, "needs %llu bytes", (unsigned long long)bytes);
  refused(&wc, "mem=256m", HBG_E_DEVMEM, need, "of device memory");
  /* and the 14B's real dims, on this sim */
  wconfig(&wc, "qwen3-14b-real", NULL, 0, 0);
  ASSERT_OK(hbg_workload_bytes(&wc, &bytes));
  ASSERT_UGE(bytes, 29000000000ull);
  refused(&wc, NULL, HBG_E_DEVMEM, "qwen3-14b-real", "of device memory");
  /* a workload without hidden states or tokens */
  hbg_runtime *rt = sim(HBG_POLICY_COALESCED, HBG_DEPS_EXPLICIT, NULL);
  wconfig(&wc, "dsv4", NULL, 2, 0);
  hbg_workload *w;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  float h[64];
  ASSERT_ERR(hbg_workload_hidden(w, 0, h, 64), HBG_E_UNSUPPORTED);
  ASSERT_EQ(hbg_workload_token(w, 0), UINT32_MAX);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
  printf("refusals: named\n");
}

int main(void) {
  tmpdir_make("hbg_model_qwen3");
  test_refusals();
  test_checkpoint();
  test_06b(HBG_DTYPE_F32);
  test_06b(HBG_DTYPE_BF16);
  printf("model_qwen3: ok\n");
  return 0;
}
