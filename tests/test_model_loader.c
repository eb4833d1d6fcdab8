/* The Hugging Face checkpoint reader (src/workload/hf.c): config.json
 * (every key, its defaults, each refusal by name), and safetensors
 * checkpoints written here into a temporary folder, one file and sharded,
 * read as F32 and BF16 from F32, BF16 and F16 with exact bits; every
 * corruption refused with its code and a message naming the file and the
 * tensor. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hbg/hbg.h>

#include "test.h"
#include "tmpdir_fixture.h"
#include "workload/hf.h"


static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* The message names every one of the NULL-terminated strings. */
static void msg_has(const char *what, ...) {
  va_list ap;
  va_start(ap, what);
  const char *msg = hbg_last_error();
  for (const char *s = va_arg(ap, const char *); s;
       s = va_arg(ap, const char *))
    if (!strstr(msg, s))
      T_FAIL("%s: message \"%s\" lacks \"%s\"", what, msg, s);
  va_end(ap);
}

/* ---- files ---- */

static const char *case_dir(const char *tag) {
  static char buf[256];
  snprintf(buf, sizeof buf, "%s/%s", g_root, tag);
  if (mkdir(buf, 0700) != 0)
    T_FAIL("mkdir %s: %s", buf, strerror(errno));
  return buf;
}

static void put_file(const char *dir, const char *name, const void *p,
                     size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f)
    T_FAIL("fopen %s: %s", path, strerror(errno));
  ASSERT(n == 0 || fwrite(p, 1, n, f) == n);
  ASSERT(fclose(f) == 0);
}

static void put_text(const char *dir, const char *name, const char *text) {
  put_file(dir, name, text, strlen(text));
}

/* A safetensors file: the 8-byte size of header (hsize, or strlen), the
 * header, then n bytes of data. */
static void st_raw_n(const char *dir, const char *name, uint64_t hsize,
                     const char *header, const void *data, size_t n) {
  size_t hl = strlen(header);
  uint8_t *b = malloc(8 + hl + n + 1);
  ASSERT(b);
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(hsize >> (8 * i));
  memcpy(b + 8, header, hl);
  if (n)
    memcpy(b + 8 + hl, data, n);
  put_file(dir, name, b, 8 + hl + n);
  free(b);
}

static void st_raw(const char *dir, const char *name, const char *header,
                   const void *data, size_t n) {
  st_raw_n(dir, name, strlen(header), header, data, n);
}

/* One tensor of a file the builder lays out back to back. */
typedef struct tsp {
  const char *name, *dtype;
  uint32_t ndim;
  uint64_t shape[4];
  const void *data;
  size_t bytes;
} tsp;

static void st_build(const char *dir, const char *file, const tsp *t,
                     size_t n) {
  size_t cap = 1 << 16, k = 0, total = 0;
  char *h = malloc(cap);
  ASSERT(h);
  k += (size_t)snprintf(h + k, cap - k, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (size_t i = 0; i < n; i++) {
    k += (size_t)snprintf(h + k, cap - k,
                          ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name,
                          t[i].dtype);
    for (uint32_t d = 0; d < t[i].ndim; d++)
      k += (size_t)snprintf(h + k, cap - k, "%s%llu", d ? "," : "",
                            (unsigned long long)t[i].shape[d]);
    k += (size_t)snprintf(h + k, cap - k, "],\"data_offsets\":[%zu,%zu]}",
                          total, total + t[i].bytes);
    total += t[i].bytes;
  }
  k += (size_t)snprintf(h + k, cap - k, "}");
  while (k % 8) /* padded with spaces, as the format's writer does */
    h[k++] = ' ';
  h[k] = '\0';
  ASSERT(k < cap);
  uint8_t *data = malloc(total + 1);
  ASSERT(data);
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (t[i].bytes)
      memcpy(data + o, t[i].data, t[i].bytes);
    o += t[i].bytes;
  }
  st_raw(dir, file, h, data, total);
  free(data);
  free(h);
}

static void open_fails(const char *dir, int code, const char *tag, ...) {
  hbg__hf_ckpt *c = (hbg__hf_ckpt *)&g_root;
  int rc = hbg__hf_open(dir, &c);
  if (rc != code)
    T_FAIL("%s: hbg__hf_open -> %s, expected %s (%s)", tag, hbg_err_name(rc),
           hbg_err_name(code), hbg_last_error());
  ASSERT(c == NULL);
  va_list ap;
  va_start(ap, tag);
  const char *msg = hbg_last_error();
  for (const char *s = va_arg(ap, const char *); s;
       s = va_arg(ap, const char *))
    if (!strstr(msg, s))
      T_FAIL("%s: message \"%s\" lacks \"%s\"", tag, msg, s);
  va_end(ap);
}

/* ---- config.json ---- */

static const char QWEN3_06B[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false,"
    " \"bos_token_id\": 151643, \"eos_token_id\": 151645, \"head_dim\": 128,"
    " \"hidden_act\": \"silu\", \"hidden_size\": 1024,"
    " \"initializer_range\": 0.02, \"intermediate_size\": 3072,"
    " \"max_position_embeddings\": 40960, \"max_window_layers\": 28,"
    " \"model_type\": \"qwen3\", \"num_attention_heads\": 16,"
    " \"num_hidden_layers\": 28, \"num_key_value_heads\": 8,"
    " \"rms_norm_eps\": 1e-06, \"rope_scaling\": null,"
    " \"rope_theta\": 1000000, \"sliding_window\": null,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"use_cache\": true, \"vocab_size\": 151936}\n";

/* The required keys, with values that make a valid config. */
static const char *const REQ[][2] = {
    {"hidden_size", "64"},       {"intermediate_size", "96"},
    {"num_attention_heads", "4"}, {"num_key_value_heads", "2"},
    {"num_hidden_layers", "3"},  {"vocab_size", "100"},
    {"rms_norm_eps", "1e-5"},
};
#define NREQ (sizeof REQ / sizeof REQ[0])

/* The required keys (key skip left out, key over set to val) plus extra. */
static void cfg_text(char *buf, size_t cap, const char *skip,
                     const char *over, const char *val, const char *extra) {
  size_t k = (size_t)snprintf(buf, cap, "{");
  int first = 1;
  for (size_t i = 0; i < NREQ; i++) {
    if (skip && strcmp(skip, REQ[i][0]) == 0)
      continue;
    const char *v = over && strcmp(over, REQ[i][0]) == 0 ? val : REQ[i][1];
    k += (size_t)snprintf(buf + k, cap - k, "%s\"%s\": %s", first ? "" : ", ",
                          REQ[i][0], v);
    first = 0;
  }
  snprintf(buf + k, cap - k, "%s%s}", extra && extra[0] ? ", " : "",
           extra ? extra : "");
}

static void cfg_fails(const char *text, int code, const char *s1,
                      const char *s2) {
  hbg__hf_qwen3 q;
  memset(&q, 0xab, sizeof q);
  int rc = hbg__hf_config_parse(text, strlen(text), "cfg.json", &q);
  if (rc != code)
    T_FAIL("config %s -> %s, expected %s (%s)", text, hbg_err_name(rc),
           hbg_err_name(code), hbg_last_error());
  ASSERT_UEQ(q.hidden, 0xababababu); /* untouched */
  msg_has(text, "cfg.json", s1, s2, (const char *)NULL);
}

static void test_config(void) {
  hbg__hf_qwen3 q;
  ASSERT_OK(hbg__hf_config_parse(QWEN3_06B, strlen(QWEN3_06B), "q.json", &q));
  ASSERT_UEQ(q.hidden, 1024);
  ASSERT_UEQ(q.intermediate, 3072);
  ASSERT_UEQ(q.heads, 16);
  ASSERT_UEQ(q.kv_heads, 8);
  ASSERT_UEQ(q.head_dim, 128); /* not hidden / heads */
  ASSERT_UEQ(q.layers, 28);
  ASSERT_UEQ(q.vocab, 151936);
  ASSERT_UEQ(q.max_pos, 40960);
  ASSERT_UEQ(f2u(q.eps), f2u(1e-6f));
  ASSERT(q.rope_theta == 1000000.0);
  ASSERT_EQ(q.tie_embeddings, 1);

  /* Defaults: head_dim hidden / heads, rope_theta 10000, no tie, max_pos 0;
   * a JSON null is absent. */
  char buf[1024];
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, NULL);
  ASSERT_OK(hbg__hf_config_parse(buf, strlen(buf), "min.json", &q));
  ASSERT_UEQ(q.hidden, 64);
  ASSERT_UEQ(q.intermediate, 96);
  ASSERT_UEQ(q.heads, 4);
  ASSERT_UEQ(q.kv_heads, 2);
  ASSERT_UEQ(q.head_dim, 16);
  ASSERT_UEQ(q.layers, 3);
  ASSERT_UEQ(q.vocab, 100);
  ASSERT_UEQ(q.max_pos, 0);
  ASSERT_UEQ(f2u(q.eps), f2u(1e-5f));
  ASSERT(q.rope_theta == 10000.0);
  ASSERT_EQ(q.tie_embeddings, 0);
  cfg_text(buf, sizeof buf, NULL, NULL, NULL,
           "\"head_dim\": null, \"rope_theta\": null, \"model_type\": null, "
           "\"tie_word_embeddings\": false, \"max_position_embeddings\": null");
  ASSERT_OK(hbg__hf_config_parse(buf, strlen(buf), "nulls.json", &q));
  ASSERT_UEQ(q.head_dim, 16);
  ASSERT(q.rope_theta == 10000.0);
  ASSERT_EQ(q.tie_embeddings, 0);
  /* Whitespace after the object, and len short of a NUL. */
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, "\"rope_theta\": 5e5");
  strcat(buf, " \n\t");
  ASSERT_OK(hbg__hf_config_parse(buf, strlen(buf), "ws.json", &q));
  ASSERT(q.rope_theta == 500000.0);
  size_t n = strlen(buf);
  strcat(buf, "garbage");
  ASSERT_OK(hbg__hf_config_parse(buf, n, "len.json", &q));

  /* Each required key missing, named. */
  for (size_t i = 0; i < NREQ; i++) {
    cfg_text(buf, sizeof buf, REQ[i][0], NULL, NULL, NULL);
    cfg_fails(buf, HBG_E_NOTFOUND, REQ[i][0], "missing");
  }
  /* Bad values of each count. */
  static const char *const counts[] = {
      "hidden_size",        "intermediate_size", "num_attention_heads",
      "num_key_value_heads", "num_hidden_layers", "vocab_size"};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    cfg_text(buf, sizeof buf, NULL, counts[i], "0", NULL);
    cfg_fails(buf, HBG_E_INVAL, counts[i], NULL);
    cfg_text(buf, sizeof buf, NULL, counts[i], "-2", NULL);
    cfg_fails(buf, HBG_E_INVAL, counts[i], NULL);
    cfg_text(buf, sizeof buf, NULL, counts[i], "2.5", NULL);
    cfg_fails(buf, HBG_E_INVAL, counts[i], "integer");
    cfg_text(buf, sizeof buf, NULL, counts[i], "\"64\"", NULL);
    cfg_fails(buf, HBG_E_INVAL, counts[i], "number");
    cfg_text(buf, sizeof buf, NULL, counts[i], "true", NULL);
    cfg_fails(buf, HBG_E_INVAL, counts[i], "number");
    cfg_text(buf, sizeof buf, NULL, counts[i], "null", NULL);
    cfg_fails(buf, HBG_E_INVAL, counts[i], "number");
    cfg_text(buf, sizeof buf, NULL, counts[i], "4294967296", NULL);
    cfg_fails(buf, HBG_E_LIMIT, counts[i], NULL);
  }
  /* The largest count that fits is taken (hidden a multiple of heads). */
  cfg_text(buf, sizeof buf, NULL, "vocab_size", "4294967295", NULL);
  ASSERT_OK(hbg__hf_config_parse(buf, strlen(buf), "big.json", &q));
  ASSERT_UEQ(q.vocab, 4294967295u);
  /* heads % kv_heads, head_dim even and a count, the default's division. */
  cfg_text(buf, sizeof buf, NULL, "num_key_value_heads", "3", NULL);
  cfg_fails(buf, HBG_E_INVAL, "num_key_value_heads", "num_attention_heads");
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, "\"head_dim\": 15");
  cfg_fails(buf, HBG_E_INVAL, "head_dim", "even");
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, "\"head_dim\": 0");
  cfg_fails(buf, HBG_E_INVAL, "head_dim", NULL);
  cfg_text(buf, sizeof buf, NULL, "hidden_size", "66", NULL);
  cfg_fails(buf, HBG_E_INVAL, "head_dim", "hidden_size");
  cfg_text(buf, sizeof buf, NULL, "hidden_size", "66", "\"head_dim\": 32");
  ASSERT_OK(hbg__hf_config_parse(buf, strlen(buf), "hd.json", &q));
  ASSERT_UEQ(q.head_dim, 32);
  cfg_text(buf, sizeof buf, NULL, "hidden_size", "72", NULL); /* 72/4 = 18 */
  ASSERT_OK(hbg__hf_config_parse(buf, strlen(buf), "hd2.json", &q));
  ASSERT_UEQ(q.head_dim, 18);
  cfg_text(buf, sizeof buf, NULL, "hidden_size", "76", NULL); /* 76/4 = 19 */
  cfg_fails(buf, HBG_E_INVAL, "head_dim", "even");
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, "\"max_position_embeddings\": 0");
  cfg_fails(buf, HBG_E_INVAL, "max_position_embeddings", NULL);
  /* eps: positive, finite, a float's. */
  static const char *const bad_eps[] = {"0", "-1e-6", "1e999", "1e-50",
                                        "1e300", "\"1e-6\""};
  for (size_t i = 0; i < sizeof bad_eps / sizeof bad_eps[0]; i++) {
    cfg_text(buf, sizeof buf, NULL, "rms_norm_eps", bad_eps[i], NULL);
    cfg_fails(buf, HBG_E_INVAL, "rms_norm_eps", NULL);
  }
  static const char *const bad_theta[] = {"0", "-10000", "1e999", "\"1e4\"",
                                          "[1]"};
  for (size_t i = 0; i < sizeof bad_theta / sizeof bad_theta[0]; i++) {
    char extra[64];
    snprintf(extra, sizeof extra, "\"rope_theta\": %s", bad_theta[i]);
    cfg_text(buf, sizeof buf, NULL, NULL, NULL, extra);
    cfg_fails(buf, HBG_E_INVAL, "rope_theta", NULL);
  }
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, "\"tie_word_embeddings\": 1");
  cfg_fails(buf, HBG_E_INVAL, "tie_word_embeddings", NULL);
  /* model_type: qwen3 only, the other named. */
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, "\"model_type\": \"llama\"");
  cfg_fails(buf, HBG_E_INVAL, "model_type", "\"llama\"");
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, "\"model_type\": 3");
  cfg_fails(buf, HBG_E_INVAL, "model_type", NULL);
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, "\"model_type\": \"qwen3\"");
  ASSERT_OK(hbg__hf_config_parse(buf, strlen(buf), "mt.json", &q));
  /* What the decoder would compute differently: refused by name. Plain
   * values (as Qwen3's own configs have them) pass. */
  static const char *const unsupported[][2] = {
      {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}",
       "rope_scaling"},
      {"\"use_sliding_window\": true", "use_sliding_window"},
      {"\"attention_bias\": true", "attention_bias"},
      {"\"hidden_act\": \"gelu\"", "hidden_act"},
      {"\"hidden_act\": 1", "hidden_act"}};
  for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
    cfg_text(buf, sizeof buf, NULL, NULL, NULL, unsupported[i][0]);
    cfg_fails(buf, HBG_E_UNSUPPORTED, unsupported[i][1], NULL);
  }
  cfg_text(buf, sizeof buf, NULL, NULL, NULL,
           "\"rope_scaling\": null, \"use_sliding_window\": false, "
           "\"sliding_window\": null, \"attention_bias\": false, "
           "\"hidden_act\": \"silu\"");
  ASSERT_OK(hbg__hf_config_parse(buf, strlen(buf), "plain.json", &q));
  /* Not JSON, not an object, bytes after it. */
  cfg_fails("{\"hidden_size\": 64", HBG_E_INVAL, "JSON", NULL);
  cfg_fails("", HBG_E_INVAL, "JSON", NULL);
  cfg_fails("[1, 2]", HBG_E_INVAL, "object", NULL);
  cfg_text(buf, sizeof buf, NULL, NULL, NULL, NULL);
  strcat(buf, " x");
  cfg_fails(buf, HBG_E_INVAL, "after", NULL);
  ASSERT_ERR(hbg__hf_config_parse(NULL, 0, "x", &q), HBG_E_INVAL);
  ASSERT_ERR(hbg__hf_config_parse("{}", 2, "x", NULL), HBG_E_INVAL);

  /* From a file, refusals naming it. */
  const char *dir = case_dir("config");
  char path[512];
  put_text(dir, "config.json", QWEN3_06B);
  snprintf(path, sizeof path, "%s/config.json", dir);
  memset(&q, 0, sizeof q);
  ASSERT_OK(hbg__hf_config_read(path, &q));
  ASSERT_UEQ(q.head_dim, 128);
  ASSERT_UEQ(q.vocab, 151936);
  cfg_text(buf, sizeof buf, "vocab_size", NULL, NULL, NULL);
  put_text(dir, "bad.json", buf);
  snprintf(path, sizeof path, "%s/bad.json", dir);
  ASSERT_ERR(hbg__hf_config_read(path, &q), HBG_E_NOTFOUND);
  msg_has("bad.json", path, "vocab_size", (const char *)NULL);
  snprintf(path, sizeof path, "%s/absent.json", dir);
  ASSERT_ERR(hbg__hf_config_read(path, &q), HBG_E_NOTFOUND);
  msg_has("absent.json", path, (const char *)NULL);
  ASSERT_ERR(hbg__hf_config_read(dir, &q), HBG_E_INVAL); /* a folder */
  msg_has("folder", dir, (const char *)NULL);
  ASSERT_ERR(hbg__hf_config_read(NULL, &q), HBG_E_INVAL);
}

/* ---- conversions ---- */

/* Binary16 bits to binary32 bits, computed with ldexpf (the NaNs and
 * infinities by their fields). */
static uint32_t ref_f16(uint16_t h) {
  uint32_t s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  if (e == 31)
    return s << 31 | 0x7f800000u | m << 13;
  float v = e ? ldexpf((float)(1024 + m), (int)e - 25) : ldexpf((float)m, -24);
  return f2u(s ? -v : v);
}

/* binary32 bits to bf16: nearest, ties to even; NaNs quiet. */
static uint16_t ref_bf16(uint32_t b) {
  if ((b & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)(b >> 16 | 0x40);
  uint32_t hi = b >> 16, lo = b & 0xffff;
  if (lo > 0x8000 || (lo == 0x8000 && (hi & 1)))
    hi++;
  return (uint16_t)hi;
}

/* F32 values with their bf16 (the rounding cases). */
static const uint32_t F32_IN[14] = {
    0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,
    0x7f7fffff, 0xff7fffff, 0x7f800000, 0x7f800001, 0xffc00001,
    0x80000000, 0x00018000, 0x00008000, 0x7fa00000};
static const uint16_t F32_BF16[14] = {
    0x3f80, 0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x7f80, 0xff80,
    0x7f80, 0x7fc0, 0xffc0, 0x8000, 0x0002, 0x0000, 0x7fe0};
/* F16 values with their f32 and bf16. */
static const uint16_t F16_IN[10] = {0x3c00, 0x0001, 0x03ff, 0x7c00, 0xfc00,
                                    0x7e00, 0x7bff, 0x8000, 0xc000, 0x3555};
static const uint32_t F16_F32[10] = {
    0x3f800000, 0x33800000, 0x387fc000, 0x7f800000, 0xff800000,
    0x7fc00000, 0x477fe000, 0x80000000, 0xc0000000, 0x3eaaa000};
static const uint16_t F16_BF16[10] = {0x3f80, 0x3380, 0x3880, 0x7f80, 0xff80,
                                      0x7fc0, 0x4780, 0x8000, 0xc000, 0x3eab};
static const uint16_t BF16_IN[4] = {0x3f80, 0xff81, 0x0001, 0x7f7f};

static uint16_t g_all16[65536];
#define BIG16 1200000u /* 2.4 MB of F16 */
#define BIG32 300000u  /* 1.2 MB of F32 */
static uint16_t g_big16[BIG16];
static uint32_t g_big32[BIG32];
static uint16_t h64k[65536];

/* ---- one file ---- */

static void read_fails(hbg__hf_ckpt *c, const char *name, uint32_t dtype,
                       const uint64_t *shape, uint32_t ndim, int code,
                       const char *s1, const char *s2, const char *s3) {
  static uint32_t dst[BIG16]; /* room for any tensor here, as F32 */
  int rc = hbg__hf_read(c, name, dtype, shape, ndim, dst);
  if (rc != code)
    T_FAIL("read %s -> %s, expected %s (%s)", name, hbg_err_name(rc),
           hbg_err_name(code), hbg_last_error());
  msg_has(name, s1, s2, s3, (const char *)NULL);
}

static void test_single(void) {
  const char *d = case_dir("single");
  char dir[256];
  snprintf(dir, sizeof dir, "%s", d);
  int64_t i64[2] = {1, -1};
  uint8_t f8[3] = {1, 2, 3};
  float empty[1];
  for (uint32_t i = 0; i < 65536; i++)
    g_all16[i] = (uint16_t)i;
  tsp t[] = {
      {"a.f32", "F32", 2, {2, 7}, F32_IN, sizeof F32_IN},
      {"b.bf16", "BF16", 1, {4}, BF16_IN, sizeof BF16_IN},
      {"model.layers.0.c.f16", "F16", 3, {1, 2, 5}, F16_IN, sizeof F16_IN},
      {"d.i64", "I64", 1, {2}, i64, sizeof i64},
      {"e.f8", "F8_E4M3", 1, {3}, f8, sizeof f8},
      {"z.empty", "F32", 2, {0, 4}, empty, 0},
      {"s.scalar", "F32", 0, {0}, F32_IN, 4},
      {"all.f16", "F16", 1, {65536}, g_all16, sizeof g_all16},
      {"all.bf16", "BF16", 2, {256, 256}, g_all16, sizeof g_all16},
      {"big.f16", "F16", 1, {BIG16}, g_big16, sizeof g_big16},
      {"big.f32", "F32", 2, {3, BIG32 / 3}, g_big32, sizeof g_big32},
  };
  /* Past the reader's 1 MiB chunk: converted in several. */
  for (uint32_t i = 0; i < BIG16; i++)
    g_big16[i] = (uint16_t)(i * 7u);
  for (uint32_t i = 0; i < BIG32; i++)
    g_big32[i] = i * 2654435761u;
  st_build(dir, "model.safetensors", t, sizeof t / sizeof t[0]);

  hbg__hf_ckpt *c = NULL;
  ASSERT_OK(hbg__hf_open(dir, &c));
  ASSERT(c);
  ASSERT_EQ(hbg__hf_has(c, "a.f32"), 1);
  ASSERT_EQ(hbg__hf_has(c, "model.layers.0.c.f16"), 1);
  ASSERT_EQ(hbg__hf_has(c, "z.empty"), 1);
  ASSERT_EQ(hbg__hf_has(c, "lm_head.weight"), 0);
  ASSERT_EQ(hbg__hf_has(c, "__metadata__"), 0);
  ASSERT_EQ(hbg__hf_has(c, NULL), 0);
  ASSERT_EQ(hbg__hf_has(NULL, "a.f32"), 0);

  uint32_t f[64];
  uint16_t h[64];
  const uint64_t sb16[] = {BIG16}, sb32[] = {3, BIG32 / 3};
  const uint64_t s27[] = {2, 7}, s4[] = {4}, s125[] = {1, 2, 5};
  /* F32: as itself, and to bf16 rounded to nearest even. */
  ASSERT_OK(hbg__hf_read(c, "a.f32", HBG_DTYPE_F32, s27, 2, f));
  ASSERT(memcmp(f, F32_IN, sizeof F32_IN) == 0);
  ASSERT_OK(hbg__hf_read(c, "a.f32", HBG_DTYPE_BF16, s27, 2, h));
  for (int i = 0; i < 14; i++) {
    ASSERT_UEQ(h[i], F32_BF16[i]);
    ASSERT_UEQ(h[i], ref_bf16(F32_IN[i]));
  }
  /* BF16: as itself, and exactly to f32. */
  ASSERT_OK(hbg__hf_read(c, "b.bf16", HBG_DTYPE_BF16, s4, 1, h));
  ASSERT(memcmp(h, BF16_IN, sizeof BF16_IN) == 0);
  ASSERT_OK(hbg__hf_read(c, "b.bf16", HBG_DTYPE_F32, s4, 1, f));
  for (int i = 0; i < 4; i++)
    ASSERT_UEQ(f[i], (uint32_t)BF16_IN[i] << 16);
  /* F16: exactly to f32, to bf16 through f32. */
  ASSERT_OK(hbg__hf_read(c, "model.layers.0.c.f16", HBG_DTYPE_F32, s125, 3, f));
  for (int i = 0; i < 10; i++)
    ASSERT_UEQ(f[i], F16_F32[i]);
  ASSERT_OK(hbg__hf_read(c, "model.layers.0.c.f16", HBG_DTYPE_BF16, s125, 3, h));
  for (int i = 0; i < 10; i++)
    ASSERT_UEQ(h[i], F16_BF16[i]);
  /* A scalar, an empty tensor. */
  const uint64_t s04[] = {0, 4};
  ASSERT_OK(hbg__hf_read(c, "s.scalar", HBG_DTYPE_F32, NULL, 0, f));
  ASSERT_UEQ(f[0], F32_IN[0]);
  ASSERT_OK(hbg__hf_read(c, "s.scalar", HBG_DTYPE_BF16, NULL, 0, h));
  ASSERT_UEQ(h[0], 0x3f80);
  ASSERT_OK(hbg__hf_read(c, "z.empty", HBG_DTYPE_BF16, s04, 2, h));
  ASSERT_OK(hbg__hf_read(c, "z.empty", HBG_DTYPE_F32, s04, 2, f));

  /* Every half and every bf16, against the reference. */
  uint32_t *big = malloc(65536 * 4);
  uint16_t *big16 = malloc(65536 * 2);
  ASSERT(big && big16);
  const uint64_t s64k[] = {65536}, s256[] = {256, 256};
  ASSERT_OK(hbg__hf_read(c, "all.f16", HBG_DTYPE_F32, s64k, 1, big));
  ASSERT_OK(hbg__hf_read(c, "all.f16", HBG_DTYPE_BF16, s64k, 1, big16));
  for (uint32_t i = 0; i < 65536; i++) {
    if (big[i] != ref_f16((uint16_t)i))
      T_FAIL("f16 %04x -> f32 %08x, expected %08x", i, big[i],
             ref_f16((uint16_t)i));
    if (big16[i] != ref_bf16(ref_f16((uint16_t)i)))
      T_FAIL("f16 %04x -> bf16 %04x, expected %04x", i, big16[i],
             ref_bf16(ref_f16((uint16_t)i)));
  }
  ASSERT_OK(hbg__hf_read(c, "all.bf16", HBG_DTYPE_F32, s256, 2, big));
  ASSERT_OK(hbg__hf_read(c, "all.bf16", HBG_DTYPE_BF16, s256, 2, big16));
  for (uint32_t i = 0; i < 65536; i++) {
    ASSERT_UEQ(big[i], i << 16);
    ASSERT_UEQ(big16[i], i);
  }
  free(big);
  free(big16);
  big = malloc(BIG16 * 4);
  big16 = malloc(BIG16 * 2);
  ASSERT(big && big16);
  ASSERT_OK(hbg__hf_read(c, "big.f16", HBG_DTYPE_F32, sb16, 1, big));
  ASSERT_OK(hbg__hf_read(c, "big.f16", HBG_DTYPE_BF16, sb16, 1, big16));
  for (uint32_t i = 0; i < BIG16; i++) {
    ASSERT_UEQ(big[i], ref_f16(g_big16[i]));
    ASSERT_UEQ(big16[i], ref_bf16(ref_f16(g_big16[i])));
  }
  ASSERT_OK(hbg__hf_read(c, "big.f32", HBG_DTYPE_BF16, sb32, 2, big16));
  ASSERT_OK(hbg__hf_read(c, "big.f32", HBG_DTYPE_F32, sb32, 2, big));
  for (uint32_t i = 0; i < BIG32; i++) {
    ASSERT_UEQ(big16[i], ref_bf16(g_big32[i]));
    ASSERT_UEQ(big[i], g_big32[i]);
  }
  free(big);
  free(big16);

  /* The shape must match exactly; refusals name the file and tensor. */
  const uint64_t s72[] = {7, 2}, s14[] = {14}, s271[] = {2, 7, 1};
  read_fails(c, "a.f32", HBG_DTYPE_F32, s72, 2, HBG_E_INVAL,
             "model.safetensors: a.f32 has shape [2, 7], the config needs "
             "[7, 2]",
             NULL, NULL);
  read_fails(c, "a.f32", HBG_DTYPE_BF16, s14, 1, HBG_E_INVAL,
             "model.safetensors", "[2, 7]", "[14]");
  read_fails(c, "a.f32", HBG_DTYPE_F32, s271, 3, HBG_E_INVAL,
             "model.safetensors", "[2, 7, 1]", NULL);
  read_fails(c, "s.scalar", HBG_DTYPE_F32, s4, 1, HBG_E_INVAL,
             "model.safetensors", "has shape []", NULL);
  read_fails(c, "nope", HBG_DTYPE_F32, s4, 1, HBG_E_NOTFOUND,
             "model.safetensors", NULL, NULL);
  const uint64_t s2[] = {2}, s3[] = {3};
  read_fails(c, "d.i64", HBG_DTYPE_F32, s2, 1, HBG_E_UNSUPPORTED,
             "model.safetensors", "I64", NULL);
  read_fails(c, "e.f8", HBG_DTYPE_BF16, s3, 1, HBG_E_UNSUPPORTED,
             "model.safetensors", "F8_E4M3", NULL);
  read_fails(c, "a.f32", HBG_DTYPE_F16, s27, 2, HBG_E_INVAL, NULL, NULL,
             NULL);
  read_fails(c, "a.f32", HBG_DTYPE_I32, s27, 2, HBG_E_INVAL, NULL, NULL,
             NULL);
  ASSERT_ERR(hbg__hf_read(c, "a.f32", HBG_DTYPE_F32, NULL, 2, f),
             HBG_E_INVAL);
  ASSERT_ERR(hbg__hf_read(c, "a.f32", HBG_DTYPE_F32, s27, 2, NULL),
             HBG_E_INVAL);
  ASSERT_ERR(hbg__hf_read(c, NULL, HBG_DTYPE_F32, s27, 2, f), HBG_E_INVAL);
  ASSERT_ERR(hbg__hf_read(NULL, "a.f32", HBG_DTYPE_F32, s27, 2, f),
             HBG_E_INVAL);

  /* A file cut short after open: a read error naming file and tensor,
   * on the direct path and the converting one. */
  char path[512];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  struct stat st;
  ASSERT(stat(path, &st) == 0);
  ASSERT(truncate(path, st.st_size - (off_t)sizeof g_big32 - 100) == 0);
  read_fails(c, "big.f16", HBG_DTYPE_F32, sb16, 1, HBG_E_IO,
             "model.safetensors", "big.f16", "end of file");
  read_fails(c, "big.f32", HBG_DTYPE_F32, sb32, 2, HBG_E_IO,
             "model.safetensors", "big.f32", "end of file");
  read_fails(c, "big.f32", HBG_DTYPE_BF16, sb32, 2, HBG_E_IO,
             "model.safetensors", "big.f32", "end of file");
  /* Tensors before the cut still read. */
  ASSERT_OK(hbg__hf_read(c, "a.f32", HBG_DTYPE_F32, s27, 2, f));
  ASSERT_OK(hbg__hf_read(c, "all.bf16", HBG_DTYPE_BF16, s256, 2, h64k));
  hbg__hf_close(c);
  hbg__hf_close(NULL);

  /* Reopened, the truncated file is refused at open. */
  open_fails(dir, HBG_E_INVAL, "truncated", "model.safetensors", "big.f16",
             "truncated", (const char *)NULL);
}

/* ---- sharded ---- */

static void test_sharded(void) {
  const char *d = case_dir("sharded");
  char dir[256];
  snprintf(dir, sizeof dir, "%s", d);
  static const uint16_t emb[8] = {0x3f80, 0x4000, 0x4040, 0x4080,
                                  0xbf80, 0xc000, 0xc040, 0xc080};
  static const float norm[2] = {0.5f, -2.0f};
  static const uint16_t head[8] = {0x3c00, 0x4000, 0x4200, 0x4400,
                                   0xbc00, 0xc000, 0xc200, 0xc400};
  tsp s1[] = {{"model.embed_tokens.weight", "BF16", 2, {4, 2}, emb, sizeof emb},
              {"model.norm.weight", "F32", 1, {2}, norm, sizeof norm}};
  tsp s2[] = {{"lm_head.weight", "F16", 2, {4, 2}, head, sizeof head}};
  st_build(dir, "model-00001-of-00002.safetensors", s1, 2);
  st_build(dir, "model-00002-of-00002.safetensors", s2, 1);
  put_text(dir, "model.safetensors.index.json",
           "{\"metadata\": {\"total_size\": 40}, \"weight_map\": {"
           "\"lm_head.weight\": \"model-00002-of-00002.safetensors\","
           "\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
           "\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}\n");
  hbg__hf_ckpt *c = NULL;
  ASSERT_OK(hbg__hf_open(dir, &c));
  ASSERT_EQ(hbg__hf_has(c, "lm_head.weight"), 1);
  ASSERT_EQ(hbg__hf_has(c, "model.norm.weight"), 1);
  ASSERT_EQ(hbg__hf_has(c, "model.embed_tokens.weight"), 1);
  ASSERT_EQ(hbg__hf_has(c, "model.layers.0.mlp.up_proj.weight"), 0);
  const uint64_t s42[] = {4, 2}, s2d[] = {2};
  float f[8];
  uint16_t h[8];
  ASSERT_OK(hbg__hf_read(c, "model.embed_tokens.weight", HBG_DTYPE_F32, s42, 2,
                         f));
  static const float emb_f[8] = {1, 2, 3, 4, -1, -2, -3, -4};
  ASSERT(memcmp(f, emb_f, sizeof f) == 0);
  ASSERT_OK(hbg__hf_read(c, "lm_head.weight", HBG_DTYPE_F32, s42, 2, f));
  static const float head_f[8] = {1, 2, 3, 4, -1, -2, -3, -4};
  ASSERT(memcmp(f, head_f, sizeof f) == 0);
  ASSERT_OK(hbg__hf_read(c, "lm_head.weight", HBG_DTYPE_BF16, s42, 2, h));
  ASSERT(memcmp(h, emb, sizeof h) == 0);
  ASSERT_OK(hbg__hf_read(c, "model.norm.weight", HBG_DTYPE_BF16, s2d, 1, h));
  ASSERT_UEQ(h[0], 0x3f00);
  ASSERT_UEQ(h[1], 0xc000);
  /* A refusal names the shard that holds the tensor. */
  const uint64_t s24[] = {2, 4};
  read_fails(c, "lm_head.weight", HBG_DTYPE_F32, s24, 2, HBG_E_INVAL,
             "model-00002-of-00002.safetensors: lm_head.weight has shape "
             "[4, 2], the config needs [2, 4]",
             NULL, NULL);
  read_fails(c, "x.weight", HBG_DTYPE_F32, s24, 2, HBG_E_NOTFOUND,
             "model.safetensors.index.json", NULL, NULL);
  hbg__hf_close(c);

  /* model.safetensors beside the index wins. */
  tsp one[] = {{"only", "F32", 1, {2}, norm, sizeof norm}};
  st_build(dir, "model.safetensors", one, 1);
  ASSERT_OK(hbg__hf_open(dir, &c));
  ASSERT_EQ(hbg__hf_has(c, "only"), 1);
  ASSERT_EQ(hbg__hf_has(c, "lm_head.weight"), 0);
  hbg__hf_close(c);
}

/* ---- corruptions ---- */

static const float FOUR[4] = {1, 2, 3, 4};

/* A one-file checkpoint of this header and FOUR's 16 bytes. */
static void bad_header(const char *tag, const char *header, int code,
                       const char *s1, const char *s2) {
  const char *dir = case_dir(tag);
  st_raw(dir, "model.safetensors", header, FOUR, sizeof FOUR);
  open_fails(dir, code, tag, "model.safetensors", s1, s2, (const char *)NULL);
}

static void test_corrupt_file(void) {
  /* Shorter than 8 bytes; a header size past the file; over 100 MB. */
  const char *dir = case_dir("short");
  put_file(dir, "model.safetensors", "\x02\0\0\0\0", 5);
  open_fails(dir, HBG_E_INVAL, "short", "model.safetensors", "8-byte",
             (const char *)NULL);
  dir = case_dir("past");
  st_raw_n(dir, "model.safetensors", 1000, "{}", NULL, 0);
  open_fails(dir, HBG_E_INVAL, "past", "model.safetensors", "1000",
             (const char *)NULL);
  dir = case_dir("huge");
  {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    uint64_t n = 100000001; /* a sparse file big enough to hold it */
    uint8_t b8[8];
    for (int i = 0; i < 8; i++)
      b8[i] = (uint8_t)(n >> (8 * i));
    put_file(dir, "model.safetensors", b8, 8);
    ASSERT(truncate(path, (off_t)(8 + n + 16)) == 0);
  }
  open_fails(dir, HBG_E_LIMIT, "huge", "model.safetensors", "100000001",
             (const char *)NULL);

  /* The header: not JSON, not an object, bytes after the object. */
  bad_header("notjson", "{\"t\": {\"dtype\": \"F32\"", HBG_E_INVAL, "JSON",
             NULL);
  bad_header("empty", "", HBG_E_INVAL, "JSON", NULL);
  bad_header("array", "[1, 2]", HBG_E_INVAL, "object", NULL);
  bad_header("after",
             "{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}"
             " x",
             HBG_E_INVAL, "after", NULL);
  bad_header("after2",
             "{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}"
             "   }",
             HBG_E_INVAL, "after", NULL);
  /* Entries: a key missing, each wrong JSON type. */
  bad_header("nodtype", "{\"w.t\":{\"shape\":[4],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "dtype");
  bad_header("noshape", "{\"w.t\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "shape");
  bad_header("nooffs", "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[4]}}",
             HBG_E_INVAL, "w.t", "data_offsets");
  bad_header("notobj", "{\"w.t\": [1]}", HBG_E_INVAL, "w.t", "object");
  bad_header("dtypenum",
             "{\"w.t\":{\"dtype\":4,\"shape\":[4],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "dtype");
  bad_header("shapestr",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":\"4\",\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "shape");
  bad_header("dimstr",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "shape[0]");
  bad_header("dimneg",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "shape[1]");
  bad_header("dimfrac",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,10]}}",
             HBG_E_INVAL, "w.t", "shape[0]");
  bad_header("dims9",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,4],"
             "\"data_offsets\":[0,16]}}",
             HBG_E_LIMIT, "w.t", "9 dims");
  bad_header("offs1", "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16]}}",
             HBG_E_INVAL, "w.t", "data_offsets");
  bad_header("offs3",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0,0]}}",
             HBG_E_INVAL, "w.t", "data_offsets");
  bad_header("offsstr",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":\"0,16\"}}",
             HBG_E_INVAL, "w.t", "data_offsets");
  bad_header("offsneg",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[-4,-4]}}",
             HBG_E_INVAL, "w.t", "data_offsets");
  bad_header("offsrev",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}",
             HBG_E_INVAL, "w.t", "[8, 4]");
  /* An end past the data (a truncated file); a size that is not the
   * shape's; an unknown dtype named. */
  bad_header("trunc",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,20]}}",
             HBG_E_INVAL, "w.t", "truncated");
  bad_header("size",
             "{\"w.t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "needs 12");
  bad_header("sizebf",
             "{\"w.t\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "[2, 2]");
  bad_header("sizeovf",
             "{\"w.t\":{\"dtype\":\"F64\",\"shape\":[2147483648,2147483648],"
             "\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "more than 2^64");
  bad_header("countovf",
             "{\"w.t\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
             "\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "overflows");
  bad_header("dtype",
             "{\"w.t\":{\"dtype\":\"Q4_K\",\"shape\":[4],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.t", "\"Q4_K\"");
  /* Overlapping ranges name both tensors, also past an empty one between. */
  bad_header("overlap",
             "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"w.b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             HBG_E_INVAL, "w.a", "w.b");
  bad_header("overlap2",
             "{\"w.c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
             "\"w.e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
             "\"w.a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "w.a", "w.c");
  /* The same name twice in one header; __metadata__ not of strings. */
  bad_header("twice",
             "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
             HBG_E_INVAL, "w.a", "twice");
  bad_header("meta",
             "{\"__metadata__\":{\"format\":\"pt\",\"n\":3},"
             "\"w.a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
             HBG_E_INVAL, "__metadata__", NULL);
  bad_header("meta2", "{\"__metadata__\":[]}", HBG_E_INVAL, "__metadata__",
             NULL);

  /* Accepted: adjacent and empty ranges, a hole, trailing spaces, {}. */
  dir = case_dir("ok");
  st_raw(dir, "model.safetensors",
         "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"w.e\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
         "\"w.b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
         "\"w.c\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[12,16]}}  ",
         FOUR, sizeof FOUR);
  hbg__hf_ckpt *c = NULL;
  ASSERT_OK(hbg__hf_open(dir, &c));
  ASSERT_EQ(hbg__hf_has(c, "w.e"), 1);
  float f[2];
  const uint64_t s1[] = {1};
  ASSERT_OK(hbg__hf_read(c, "w.b", HBG_DTYPE_F32, s1, 1, f));
  ASSERT(f[0] == 2.0f);
  hbg__hf_close(c);
  dir = case_dir("none");
  st_raw(dir, "model.safetensors", "{}", NULL, 0);
  ASSERT_OK(hbg__hf_open(dir, &c));
  ASSERT_EQ(hbg__hf_has(c, "x"), 0);
  ASSERT_ERR(hbg__hf_read(c, "x", HBG_DTYPE_F32, s1, 1, f), HBG_E_NOTFOUND);
  hbg__hf_close(c);

  /* No checkpoint in the folder, no folder. */
  dir = case_dir("nothing");
  open_fails(dir, HBG_E_NOTFOUND, "nothing", "model.safetensors.index.json",
             "model.safetensors ", (const char *)NULL);
  char gone[512];
  snprintf(gone, sizeof gone, "%s/no-such-folder", g_root);
  open_fails(gone, HBG_E_NOTFOUND, "gone", "no-such-folder",
             (const char *)NULL);
  ASSERT_ERR(hbg__hf_open(NULL, &c), HBG_E_INVAL);
  ASSERT_ERR(hbg__hf_open(dir, NULL), HBG_E_INVAL);
}

#define SH1 "model-00001-of-00002.safetensors"
#define SH2 "model-00002-of-00002.safetensors"
#define IDX "model.safetensors.index.json"

/* Two shards (w.a in the first, w.b in the second) and this index. */
static const char *sharded(const char *tag, const char *index) {
  const char *dir = case_dir(tag);
  st_raw(dir, SH1, "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
         FOUR, sizeof FOUR);
  st_raw(dir, SH2, "{\"w.b\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}",
         FOUR, sizeof FOUR);
  if (index)
    put_text(dir, IDX, index);
  return dir;
}

static void test_corrupt_sharded(void) {
  const char *dir = sharded("ix-ok", "{\"weight_map\":{\"w.a\":\"" SH1
                                     "\",\"w.b\":\"" SH2 "\"}}");
  hbg__hf_ckpt *c = NULL;
  ASSERT_OK(hbg__hf_open(dir, &c));
  hbg__hf_close(c);
  /* A tensor in two shards, named with both. */
  dir = sharded("ix-dup", "{\"weight_map\":{\"w.a\":\"" SH1 "\",\"w.b\":\"" SH2
                          "\",\"w.c\":\"model-3.safetensors\"}}");
  st_raw(dir, "model-3.safetensors",
         "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
         FOUR, sizeof FOUR);
  open_fails(dir, HBG_E_INVAL, "ix-dup", "w.a", SH1, "model-3.safetensors",
             (const char *)NULL);
  /* A shard that does not exist, with a tensor the map puts there. */
  dir = sharded("ix-noshard", "{\"weight_map\":{\"w.a\":\"" SH1
                              "\",\"w.z\":\"model-9.safetensors\"}}");
  open_fails(dir, HBG_E_NOTFOUND, "ix-noshard", IDX, "w.z",
             "model-9.safetensors", "does not exist", (const char *)NULL);
  /* A tensor the named shard does not hold: absent, or in another. */
  dir = sharded("ix-notheld", "{\"weight_map\":{\"w.a\":\"" SH1 "\",\"w.b\":\"" SH2
                              "\",\"w.q\":\"" SH2 "\"}}");
  open_fails(dir, HBG_E_NOTFOUND, "ix-notheld", IDX, "w.q", SH2,
             "does not hold", (const char *)NULL);
  dir = sharded("ix-gone", "{\"weight_map\":{\"w.a\":\"" SH2 "\",\"w.b\":\"" SH2
                           "\"}}");
  open_fails(dir, HBG_E_NOTFOUND, "ix-gone", IDX, "w.a", SH2, "does not hold",
             (const char *)NULL);
  dir = sharded("ix-moved", "{\"weight_map\":{\"w.a\":\"" SH2 "\",\"w.b\":\"" SH1
                            "\"}}");
  open_fails(dir, HBG_E_NOTFOUND, "ix-moved", IDX, "w.a", SH2 ", which",
             SH1 " does", (const char *)NULL);
  /* Shard names outside the folder. */
  dir = sharded("ix-slash", "{\"weight_map\":{\"w.a\":\"sub/" SH1 "\"}}");
  open_fails(dir, HBG_E_INVAL, "ix-slash", IDX, "w.a", "sub/" SH1,
             (const char *)NULL);
  dir = sharded("ix-dotdot", "{\"weight_map\":{\"w.a\":\"..\"}}");
  open_fails(dir, HBG_E_INVAL, "ix-dotdot", IDX, "w.a", "\"..\"",
             (const char *)NULL);
  dir = sharded("ix-emptyname", "{\"weight_map\":{\"w.a\":\"\"}}");
  open_fails(dir, HBG_E_INVAL, "ix-emptyname", IDX, "w.a", (const char *)NULL);
  /* The index itself: not JSON, no map, a map of the wrong types. */
  dir = sharded("ix-json", "{\"weight_map\":");
  open_fails(dir, HBG_E_INVAL, "ix-json", IDX, "JSON", (const char *)NULL);
  dir = sharded("ix-array", "[]");
  open_fails(dir, HBG_E_INVAL, "ix-array", IDX, "object", (const char *)NULL);
  dir = sharded("ix-nomap", "{\"metadata\":{}}");
  open_fails(dir, HBG_E_NOTFOUND, "ix-nomap", IDX, "weight_map",
             (const char *)NULL);
  dir = sharded("ix-maparr", "{\"weight_map\":[]}");
  open_fails(dir, HBG_E_INVAL, "ix-maparr", IDX, "weight_map",
             (const char *)NULL);
  dir = sharded("ix-mapempty", "{\"weight_map\":{}}");
  open_fails(dir, HBG_E_INVAL, "ix-mapempty", IDX, "empty",
             (const char *)NULL);
  dir = sharded("ix-mapnum", "{\"weight_map\":{\"w.a\":\"" SH1 "\",\"w.b\":2}}");
  open_fails(dir, HBG_E_INVAL, "ix-mapnum", IDX, "w.b", (const char *)NULL);
  /* A corrupt shard is named. */
  dir = sharded("ix-badshard", "{\"weight_map\":{\"w.a\":\"" SH1 "\",\"w.b\":\"" SH2
                               "\"}}");
  st_raw(dir, SH2,
         "{\"w.b\":{\"dtype\":\"F16\",\"shape\":[9],\"data_offsets\":[0,16]}}",
         FOUR, sizeof FOUR);
  open_fails(dir, HBG_E_INVAL, "ix-badshard", SH2, "w.b", (const char *)NULL);
}

int main(void) {
  tmpdir_make("hbg_model_loader");
  test_config();
  test_single();
  test_sharded();
  test_corrupt_file();
  test_corrupt_sharded();
  ASSERT(tmpdir_remove() == 0);
  printf("model_loader: ok\n");
  return 0;
}
