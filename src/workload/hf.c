/*
 * Hugging Face Qwen3 checkpoints: config.json, and safetensors files (one,
 * or an index and its shards). The safetensors layout: 8 bytes of
 * little-endian u64 N, then N bytes of JSON naming each tensor's dtype,
 * shape and data_offsets (relative to the byte after the header, end
 * exclusive), then the data.
 *
 * Opening reads and checks every header and keeps the files open; a read
 * goes with pread straight into the destination when the dtypes match, and
 * through a chunk of at most HF_CHUNK bytes when it converts.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/util.h"
#include "kernels/kernels.h"
#include "workload/hf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hf.c reads little-endian safetensors data in place"
#endif

#define HF_CONFIG_MAX (16ull << 20)    /* config.json */
#define HF_HEADER_MAX 100000000ull     /* a safetensors header: 100 MB */
#define HF_INDEX_MAX HF_HEADER_MAX     /* model.safetensors.index.json */
#define HF_MAX_DIMS 8u                 /* dims of one tensor */
#define HF_CHUNK (1u << 20)            /* bytes read per converted chunk */
#define HF_EXACT_MAX 9007199254740992.0 /* 2^53: integers a double holds */

static const char HF_SINGLE[] = "model.safetensors";
static const char HF_INDEX[] = "model.safetensors.index.json";

/* ---- number conversions ---- */

/* IEEE binary16 -> binary32 bits, exact: subnormals normalized, inf and
 * NaN (payload kept) mapped to theirs. */
static uint32_t hf_f16_bits(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f)
    return sign | 0x7f800000u | (man << 13);
  if (exp != 0)
    return sign | ((exp + 112u) << 23) | (man << 13);
  if (man == 0)
    return sign;
  /* man * 2^-24 = 1.f * 2^(p - 24), p the top set bit of man */
  uint32_t p = 9;
  while (!(man & (1u << p)))
    p--;
  return sign | ((p + 103u) << 23) | ((man & ~(1u << p)) << (23 - p));
}

static float hf_f16_to_f32(uint16_t h) {
  uint32_t b = hf_f16_bits(h);
  float f;
  memcpy(&f, &b, 4);
  return f;
}

/* ---- files ---- */

static int hf_open_err(const char *path, int err) {
  hbg__error_set("%s: cannot open: %s", path, strerror(err));
  return err == ENOENT || err == ENOTDIR ? HBG_E_NOTFOUND : HBG_E_IO;
}

/* Read len bytes at off. @return 0, or -1 with errno set (0 at an early
 * end of file). */
static int hf_pread_all(int fd, void *buf, uint64_t len, uint64_t off) {
  uint8_t *p = buf;
  while (len > 0) {
    size_t n = len > (1u << 30) ? (size_t)1 << 30 : (size_t)len;
    if (off > (uint64_t)INT64_MAX - n) {
      errno = EOVERFLOW;
      return -1;
    }
    ssize_t r = pread(fd, p, n, (off_t)off);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0) {
      errno = 0;
      return -1;
    }
    p += r;
    off += (uint64_t)r;
    len -= (uint64_t)r;
  }
  return 0;
}

static const char *hf_why(int err) {
  return err ? strerror(err) : "unexpected end of file";
}

/* dir + "/" + name, malloc'd; NULL when out of memory. */
static char *hf_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  int slash = a > 0 && dir[a - 1] != '/';
  char *s = malloc(a + (size_t)slash + b + 1);
  if (!s)
    return NULL;
  memcpy(s, dir, a);
  if (slash)
    s[a] = '/';
  memcpy(s + a + slash, name, b + 1);
  return s;
}

/* The whole of a small file, NUL-terminated, into *out (malloc'd).
 * @return 0, HBG_E_NOTFOUND, HBG_E_IO, HBG_E_LIMIT (past max bytes),
 * HBG_E_INVAL (not a regular file), HBG_E_NOMEM. */
static int hf_slurp(const char *path, uint64_t max, char **out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return hf_open_err(path, errno);
  struct stat st;
  int rc = 0;
  char *buf = NULL;
  if (fstat(fd, &st) != 0) {
    hbg__error_set("%s: %s", path, strerror(errno));
    rc = HBG_E_IO;
  } else if (!S_ISREG(st.st_mode)) {
    hbg__error_set("%s: not a regular file", path);
    rc = HBG_E_INVAL;
  } else if ((uint64_t)st.st_size > max) {
    hbg__error_set("%s: %llu bytes, over the limit of %llu", path,
                   (unsigned long long)st.st_size, (unsigned long long)max);
    rc = HBG_E_LIMIT;
  } else if (!(buf = malloc((size_t)st.st_size + 1))) {
    hbg__error_set("%s: out of memory", path);
    rc = HBG_E_NOMEM;
  } else if (hf_pread_all(fd, buf, (uint64_t)st.st_size, 0) != 0) {
    hbg__error_set("%s: read failed: %s", path, hf_why(errno));
    rc = HBG_E_IO;
  }
  close(fd);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[st.st_size] = '\0';
  *out = buf;
  *len = (size_t)st.st_size;
  return 0;
}

/* Parse len bytes of JSON; only whitespace may follow the value.
 * @return the tree, or NULL with hbg_last_error() naming who. */
static cJSON *hf_json(const char *text, size_t len, const char *who) {
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!root) {
    size_t at = end && end >= text ? (size_t)(end - text) : 0;
    hbg__error_set("%s: not valid JSON (near byte %zu)", who, at);
    return NULL;
  }
  for (const char *p = end; p && p < text + len; p++) {
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
      hbg__error_set("%s: bytes after the JSON value (at byte %zu)", who,
                     (size_t)(p - text));
      cJSON_Delete(root);
      return NULL;
    }
  }
  return root;
}

/* ---- config.json ---- */

/* A count: an integer >= 1 that fits uint32. *present tells whether the
 * key was there (a JSON null counts as absent where !required). */
/* Key `key` as a number in *it, or *it NULL when it is absent (or a JSON
 * null) and not required. */
static int cfg_number(const cJSON *root, const char *who, const char *key,
                      int required, const cJSON **it) {
  *it = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!*it || (!required && cJSON_IsNull(*it))) {
    *it = NULL;
    if (!required)
      return 0;
    hbg__error_set("%s: %s is missing", who, key);
    return HBG_E_NOTFOUND;
  }
  if (!cJSON_IsNumber(*it)) {
    hbg__error_set("%s: %s is not a number", who, key);
    return HBG_E_INVAL;
  }
  return 0;
}

static int cfg_count(const cJSON *root, const char *who, const char *key,
                     int required, uint32_t *out, int *present) {
  const cJSON *it;
  *present = 0;
  HBG__TRY(cfg_number(root, who, key, required, &it));
  if (!it)
    return 0;
  double v = it->valuedouble;
  if (!(v >= 1)) {
    hbg__error_set("%s: %s is %.17g, it must be at least 1", who, key, v);
    return HBG_E_INVAL;
  }
  if (v > (double)UINT32_MAX) {
    hbg__error_set("%s: %s is %.17g, past the limit of %u", who, key, v,
                   (unsigned)UINT32_MAX);
    return HBG_E_LIMIT;
  }
  if ((double)(uint32_t)v != v) {
    hbg__error_set("%s: %s is %.17g, not an integer", who, key, v);
    return HBG_E_INVAL;
  }
  *out = (uint32_t)v;
  *present = 1;
  return 0;
}

/* A number > 0 and finite; absent leaves *out (where !required). */
static int cfg_positive(const cJSON *root, const char *who, const char *key,
                        int required, double *out) {
  const cJSON *it;
  HBG__TRY(cfg_number(root, who, key, required, &it));
  if (!it)
    return 0;
  if (!(it->valuedouble > 0) || !isfinite(it->valuedouble)) {
    hbg__error_set("%s: %s is %g, it must be positive and finite", who, key,
                   it->valuedouble);
    return HBG_E_INVAL;
  }
  *out = it->valuedouble;
  return 0;
}

/* Settings that change what the decoder computes and that hbg's Qwen3 does
 * not compute: refused by name rather than loaded into a model that would
 * then give other numbers than the checkpoint's own. Absent or null is the
 * plain Qwen3 (and so are false and "silu"). */
static int cfg_unsupported(const cJSON *root, const char *who) {
  static const char *const must_be_null[] = {"rope_scaling"};
  static const char *const must_be_false[] = {"use_sliding_window",
                                              "attention_bias"};
  for (size_t i = 0; i < HBG__ARRAY_LEN(must_be_null); i++) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, must_be_null[i]);
    if (it && !cJSON_IsNull(it)) {
      hbg__error_set("%s: %s is set; hbg's Qwen3 supports only plain RoPE "
                     "(%s null or absent)",
                     who, must_be_null[i], must_be_null[i]);
      return HBG_E_UNSUPPORTED;
    }
  }
  for (size_t i = 0; i < HBG__ARRAY_LEN(must_be_false); i++) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, must_be_false[i]);
    if (it && !cJSON_IsNull(it) && !cJSON_IsFalse(it)) {
      hbg__error_set("%s: %s is not false; hbg's Qwen3 does not support it",
                     who, must_be_false[i]);
      return HBG_E_UNSUPPORTED;
    }
  }
  const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
  if (act && !cJSON_IsNull(act) &&
      (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0)) {
    hbg__error_set("%s: hidden_act is not \"silu\"; hbg's Qwen3 computes "
                   "SiLU only",
                   who);
    return HBG_E_UNSUPPORTED;
  }
  return 0;
}

static int cfg_fill(const cJSON *root, const char *who, hbg__hf_qwen3 *q) {
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
  if (mt && !cJSON_IsNull(mt)) {
    if (!cJSON_IsString(mt)) {
      hbg__error_set("%s: model_type is not a string", who);
      return HBG_E_INVAL;
    }
    if (strcmp(mt->valuestring, "qwen3") != 0) {
      hbg__error_set("%s: model_type is \"%s\", only \"qwen3\" is supported",
                     who, mt->valuestring);
      return HBG_E_INVAL;
    }
  }
  static const struct {
    const char *key;
    size_t off;
  } req[] = {
      {"hidden_size", offsetof(hbg__hf_qwen3, hidden)},
      {"intermediate_size", offsetof(hbg__hf_qwen3, intermediate)},
      {"num_attention_heads", offsetof(hbg__hf_qwen3, heads)},
      {"num_key_value_heads", offsetof(hbg__hf_qwen3, kv_heads)},
      {"num_hidden_layers", offsetof(hbg__hf_qwen3, layers)},
      {"vocab_size", offsetof(hbg__hf_qwen3, vocab)},
  };
  int present;
  for (size_t i = 0; i < HBG__ARRAY_LEN(req); i++)
    HBG__TRY(cfg_count(root, who, req[i].key, 1,
                       (uint32_t *)(void *)((char *)q + req[i].off), &present));
  double eps = 0;
  HBG__TRY(cfg_positive(root, who, "rms_norm_eps", 1, &eps));
  q->eps = (float)eps;
  if (!(q->eps > 0) || !isfinite(q->eps)) {
    hbg__error_set("%s: rms_norm_eps is %g, out of a float's range", who, eps);
    return HBG_E_INVAL;
  }
  q->rope_theta = 10000.0;
  HBG__TRY(cfg_positive(root, who, "rope_theta", 0, &q->rope_theta));
  HBG__TRY(cfg_count(root, who, "max_position_embeddings", 0, &q->max_pos,
                     &present));
  HBG__TRY(cfg_count(root, who, "head_dim", 0, &q->head_dim, &present));
  if (!present) {
    if (q->hidden % q->heads != 0) {
      hbg__error_set("%s: head_dim is absent and hidden_size %u is not a "
                     "multiple of num_attention_heads %u",
                     who, q->hidden, q->heads);
      return HBG_E_INVAL;
    }
    q->head_dim = q->hidden / q->heads;
  }
  if (q->head_dim % 2 != 0) {
    hbg__error_set("%s: head_dim is %u, it must be even", who, q->head_dim);
    return HBG_E_INVAL;
  }
  if (q->heads % q->kv_heads != 0) {
    hbg__error_set("%s: num_key_value_heads %u does not divide "
                   "num_attention_heads %u",
                   who, q->kv_heads, q->heads);
    return HBG_E_INVAL;
  }
  const cJSON *tie =
      cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
  if (tie && !cJSON_IsNull(tie)) {
    if (!cJSON_IsBool(tie)) {
      hbg__error_set("%s: tie_word_embeddings is not true or false", who);
      return HBG_E_INVAL;
    }
    q->tie_embeddings = cJSON_IsTrue(tie) ? 1 : 0;
  }
  return cfg_unsupported(root, who);
}

int hbg__hf_config_parse(const char *json, size_t len, const char *who,
                         hbg__hf_qwen3 *out) {
  if (!who)
    who = "config.json";
  if (!json || !out) {
    hbg__error_set("%s: NULL argument", who);
    return HBG_E_INVAL;
  }
  cJSON *root = hf_json(json, len, who);
  if (!root)
    return HBG_E_INVAL;
  int rc = 0;
  hbg__hf_qwen3 q = {0};
  if (!cJSON_IsObject(root)) {
    hbg__error_set("%s: not a JSON object", who);
    rc = HBG_E_INVAL;
  } else {
    rc = cfg_fill(root, who, &q);
  }
  cJSON_Delete(root);
  if (rc == 0)
    *out = q;
  return rc;
}

int hbg__hf_config_read(const char *path, hbg__hf_qwen3 *out) {
  if (!path || !out) {
    hbg__error_set("hf config: NULL argument");
    return HBG_E_INVAL;
  }
  char *text = NULL;
  size_t len = 0;
  HBG__TRY(hf_slurp(path, HF_CONFIG_MAX, &text, &len));
  int rc = hbg__hf_config_parse(text, len, path, out);
  free(text);
  return rc;
}

/* ---- safetensors ---- */

/* Every dtype the format names with a whole number of bytes. The first
 * three are the ones hbg__hf_read converts. */
enum { HF_F32, HF_BF16, HF_F16 };
static const struct {
  const char *name;
  uint32_t size;
} hf_dtypes[] = {
    {"F32", 4},     {"BF16", 2},    {"F16", 2},     {"F64", 8},
    {"I64", 8},     {"I32", 4},     {"I16", 2},     {"I8", 1},
    {"U64", 8},     {"U32", 4},     {"U16", 2},     {"U8", 1},
    {"BOOL", 1},    {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
};

typedef struct hf_tensor {
  char *name;
  uint32_t file; /* index into files */
  uint32_t dtype;
  uint32_t ndim;
  uint64_t shape[HF_MAX_DIMS];
  uint64_t off;   /* first byte, from the start of the file */
  uint64_t bytes; /* data_offsets end - begin */
} hf_tensor;

typedef struct hf_file {
  char *name; /* as the index names it */
  char *path; /* dir/name */
  int fd;
} hf_file;

struct hbg__hf_ckpt {
  char *src; /* model.safetensors or the index: names a missing tensor */
  hf_file *files;
  uint32_t nfiles, cap_files;
  hf_tensor *t; /* sorted by name once open */
  uint32_t nt, cap_t;
};

void hbg__hf_close(hbg__hf_ckpt *c) {
  if (!c)
    return;
  for (uint32_t i = 0; i < c->nfiles; i++) {
    if (c->files[i].fd >= 0)
      close(c->files[i].fd);
    free(c->files[i].name);
    free(c->files[i].path);
  }
  for (uint32_t i = 0; i < c->nt; i++)
    free(c->t[i].name);
  free(c->files);
  free(c->t);
  free(c->src);
  free(c);
}

/* "[a, b, c]" into buf (cut short where it does not fit). */
static const char *hf_fmt_shape(char *buf, size_t cap, const uint64_t *s,
                                uint32_t n) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (uint32_t i = 0; i < n && k < cap; i++) {
    int w = snprintf(buf + k, cap - k, "%s%llu", i ? ", " : "",
                     (unsigned long long)s[i]);
    if (w < 0)
      break;
    k += (size_t)w;
  }
  if (k < cap)
    snprintf(buf + k, cap - k, "]");
  return buf;
}

/* A non-negative integer below 2^53 (a double holds it exactly). */
static int hf_uint(const cJSON *it, uint64_t *out) {
  if (!cJSON_IsNumber(it))
    return -1;
  double v = it->valuedouble;
  if (!(v >= 0 && v < HF_EXACT_MAX))
    return -1;
  uint64_t u = (uint64_t)v;
  if ((double)u != v)
    return -1;
  *out = u;
  return 0;
}

/* Add a file entry (no fd yet). @return 0 or HBG_E_NOMEM / HBG_E_LIMIT. */
static int hf_add_file(hbg__hf_ckpt *c, const char *dir, const char *name) {
  int rc = HBG__RESERVE(c->files, c->cap_files, (uint64_t)c->nfiles + 1);
  if (rc) {
    hbg__error_set("%s: too many files", dir);
    return rc;
  }
  hf_file *f = &c->files[c->nfiles];
  f->name = strdup(name);
  f->path = hf_join(dir, name);
  f->fd = -1;
  if (!f->name || !f->path) {
    free(f->name);
    free(f->path);
    hbg__error_set("%s: out of memory", dir);
    return HBG_E_NOMEM;
  }
  c->nfiles++;
  return 0;
}

/* One header entry: check it, append its tensor. */
static int st_entry(hbg__hf_ckpt *c, uint32_t fi, const cJSON *e,
                    uint64_t data0, uint64_t dsize) {
  const char *path = c->files[fi].path, *name = e->string;
  if (!name || !name[0]) {
    hbg__error_set("%s: a tensor with an empty name", path);
    return HBG_E_INVAL;
  }
  if (!cJSON_IsObject(e)) {
    hbg__error_set("%s: %s is not a JSON object", path, name);
    return HBG_E_INVAL;
  }
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  const char *missing = !dt ? "dtype" : !sh ? "shape" : !of ? "data_offsets" : NULL;
  if (missing) {
    hbg__error_set("%s: %s has no %s", path, name, missing);
    return HBG_E_INVAL;
  }
  if (!cJSON_IsString(dt)) {
    hbg__error_set("%s: %s: dtype is not a string", path, name);
    return HBG_E_INVAL;
  }
  uint32_t dtype = UINT32_MAX;
  for (uint32_t i = 0; i < HBG__ARRAY_LEN(hf_dtypes); i++)
    if (strcmp(dt->valuestring, hf_dtypes[i].name) == 0)
      dtype = i;
  if (dtype == UINT32_MAX) {
    hbg__error_set("%s: %s has an unknown dtype \"%s\"", path, name,
                   dt->valuestring);
    return HBG_E_INVAL;
  }
  if (!cJSON_IsArray(sh)) {
    hbg__error_set("%s: %s: shape is not an array", path, name);
    return HBG_E_INVAL;
  }
  int nd = cJSON_GetArraySize(sh);
  if (nd < 0 || (uint32_t)nd > HF_MAX_DIMS) {
    hbg__error_set("%s: %s has %d dims, more than %u", path, name, nd,
                   HF_MAX_DIMS);
    return HBG_E_LIMIT;
  }
  hf_tensor t = {.file = fi, .dtype = dtype, .ndim = (uint32_t)nd};
  uint64_t count = 1;
  uint32_t k = 0;
  const cJSON *d;
  cJSON_ArrayForEach(d, sh) {
    if (hf_uint(d, &t.shape[k]) != 0) {
      hbg__error_set("%s: %s: shape[%u] is not a non-negative integer", path,
                     name, k);
      return HBG_E_INVAL;
    }
    if (hbg__mul_u64(count, t.shape[k], &count) != 0) {
      hbg__error_set("%s: %s: the shape's element count overflows", path, name);
      return HBG_E_INVAL;
    }
    k++;
  }
  uint64_t b = 0, en = 0;
  if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 ||
      hf_uint(cJSON_GetArrayItem(of, 0), &b) != 0 ||
      hf_uint(cJSON_GetArrayItem(of, 1), &en) != 0) {
    hbg__error_set("%s: %s: data_offsets is not [begin, end] of two "
                   "non-negative integers",
                   path, name);
    return HBG_E_INVAL;
  }
  if (b > en) {
    hbg__error_set("%s: %s: data_offsets [%llu, %llu] end before they begin",
                   path, name, (unsigned long long)b, (unsigned long long)en);
    return HBG_E_INVAL;
  }
  if (en > dsize) {
    hbg__error_set("%s: %s: data_offsets end %llu is past the %llu data "
                   "bytes in the file (truncated?)",
                   path, name, (unsigned long long)en,
                   (unsigned long long)dsize);
    return HBG_E_INVAL;
  }
  uint64_t need = 0;
  if (hbg__mul_u64(count, hf_dtypes[dtype].size, &need) != 0 ||
      need != en - b) {
    char sbuf[256], nbuf[32] = "more than 2^64";
    if (need != 0 || count == 0)
      snprintf(nbuf, sizeof nbuf, "%llu", (unsigned long long)need);
    hbg__error_set("%s: %s holds %llu bytes, its shape %s of %s needs %s",
                   path, name, (unsigned long long)(en - b),
                   hf_fmt_shape(sbuf, sizeof sbuf, t.shape, t.ndim),
                   hf_dtypes[dtype].name, nbuf);
    return HBG_E_INVAL;
  }
  t.off = data0 + b;
  t.bytes = en - b;
  int rc = HBG__RESERVE(c->t, c->cap_t, (uint64_t)c->nt + 1);
  if (rc) {
    hbg__error_set("%s: %s: too many tensors", path, name);
    return rc;
  }
  if (!(t.name = strdup(name))) {
    hbg__error_set("%s: out of memory", path);
    return HBG_E_NOMEM;
  }
  c->t[c->nt++] = t;
  return 0;
}

static int hf_by_off(const void *a, const void *b) {
  const hf_tensor *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

static int hf_by_name(const void *a, const void *b) {
  return strcmp(((const hf_tensor *)a)->name, ((const hf_tensor *)b)->name);
}

/* No two tensors of one file [first, c->nt) share a byte: sorts them by
 * offset, where an overlap always shows between neighbours (the empty
 * ones left out). */
static int st_overlap(hbg__hf_ckpt *c, uint32_t first, uint64_t data0) {
  if (c->nt - first > 1)
    qsort(c->t + first, c->nt - first, sizeof *c->t, hf_by_off);
  const hf_tensor *prev = NULL;
  for (uint32_t i = first; i < c->nt; i++) {
    const hf_tensor *t = &c->t[i];
    if (t->bytes == 0)
      continue;
    if (prev && t->off < prev->off + prev->bytes) {
      hbg__error_set("%s: tensors %s [%llu, %llu) and %s [%llu, %llu) "
                     "overlap",
                     c->files[t->file].path, prev->name,
                     (unsigned long long)(prev->off - data0),
                     (unsigned long long)(prev->off + prev->bytes - data0),
                     t->name, (unsigned long long)(t->off - data0),
                     (unsigned long long)(t->off + t->bytes - data0));
      return HBG_E_INVAL;
    }
    prev = t;
  }
  return 0;
}

/* Read and check file fi's header (its fd open), appending its tensors. */
static int st_header(hbg__hf_ckpt *c, uint32_t fi) {
  const hf_file *f = &c->files[fi];
  struct stat st;
  if (fstat(f->fd, &st) != 0) {
    hbg__error_set("%s: %s", f->path, strerror(errno));
    return HBG_E_IO;
  }
  if (!S_ISREG(st.st_mode)) {
    hbg__error_set("%s: not a regular file", f->path);
    return HBG_E_INVAL;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (size < 8) {
    hbg__error_set("%s: %llu bytes, shorter than the 8-byte header size",
                   f->path, (unsigned long long)size);
    return HBG_E_INVAL;
  }
  uint8_t b8[8];
  if (hf_pread_all(f->fd, b8, 8, 0) != 0) {
    hbg__error_set("%s: read failed: %s", f->path, hf_why(errno));
    return HBG_E_IO;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--)
    n = n << 8 | b8[i];
  if (n > size - 8) {
    hbg__error_set("%s: header size %llu runs past the end of the file "
                   "(%llu bytes)",
                   f->path, (unsigned long long)n, (unsigned long long)size);
    return HBG_E_INVAL;
  }
  if (n > HF_HEADER_MAX) {
    hbg__error_set("%s: header size %llu is over the limit of %llu", f->path,
                   (unsigned long long)n, HF_HEADER_MAX);
    return HBG_E_LIMIT;
  }
  char *h = malloc((size_t)n + 1);
  if (!h) {
    hbg__error_set("%s: out of memory for a %llu-byte header", f->path,
                   (unsigned long long)n);
    return HBG_E_NOMEM;
  }
  if (hf_pread_all(f->fd, h, n, 8) != 0) {
    hbg__error_set("%s: read failed: %s", f->path, hf_why(errno));
    free(h);
    return HBG_E_IO;
  }
  h[n] = '\0';
  cJSON *root = hf_json(h, (size_t)n, f->path);
  free(h);
  if (!root)
    return HBG_E_INVAL;
  int rc = 0;
  uint32_t first = c->nt;
  if (!cJSON_IsObject(root)) {
    hbg__error_set("%s: the header is not a JSON object", f->path);
    rc = HBG_E_INVAL;
  }
  const cJSON *e;
  for (e = root->child; rc == 0 && e; e = e->next) {
    if (e->string && strcmp(e->string, "__metadata__") == 0) {
      const cJSON *m;
      int ok = cJSON_IsObject(e);
      for (m = ok ? e->child : NULL; m && ok; m = m->next)
        ok = cJSON_IsString(m);
      if (!ok) {
        hbg__error_set("%s: __metadata__ is not an object of strings",
                       f->path);
        rc = HBG_E_INVAL;
      }
      continue;
    }
    rc = st_entry(c, fi, e, 8 + n, size - 8 - n);
  }
  cJSON_Delete(root);
  if (rc == 0)
    rc = st_overlap(c, first, 8 + n);
  return rc;
}

/* Open file fi and read its header. */
static int st_open(hbg__hf_ckpt *c, uint32_t fi) {
  hf_file *f = &c->files[fi];
  f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0)
    return hf_open_err(f->path, errno);
  return st_header(c, fi);
}

static const hf_tensor *hf_find(const hbg__hf_ckpt *c, const char *name) {
  if (c->nt == 0)
    return NULL;
  hf_tensor key = {.name = (char *)(uintptr_t)name};
  return bsearch(&key, c->t, c->nt, sizeof *c->t, hf_by_name);
}

/* Sort by name; a name twice is refused naming its files. */
static int hf_index_names(hbg__hf_ckpt *c) {
  if (c->nt > 1)
    qsort(c->t, c->nt, sizeof *c->t, hf_by_name);
  for (uint32_t i = 1; i < c->nt; i++) {
    const hf_tensor *a = &c->t[i - 1], *b = &c->t[i];
    if (strcmp(a->name, b->name) != 0)
      continue;
    if (a->file == b->file)
      hbg__error_set("%s: tensor %s appears twice", c->files[a->file].path,
                     a->name);
    else
      hbg__error_set("tensor %s is in both %s and %s", a->name,
                     c->files[a->file].path, c->files[b->file].path);
    return HBG_E_INVAL;
  }
  return 0;
}

/* A shard's name: a file of the checkpoint's own folder. */
static int hf_shard_name_ok(const char *s) {
  return s[0] && !strchr(s, '/') && !strstr(s, "..");
}

static int hf_open_index(hbg__hf_ckpt *c, const char *dir) {
  const char *ix = c->src;
  char *text = NULL;
  size_t len = 0;
  int rc = hf_slurp(ix, HF_INDEX_MAX, &text, &len);
  if (rc == HBG_E_NOTFOUND) {
    hbg__error_set("%s: neither %s nor %s is there", dir, HF_SINGLE,
                   HF_INDEX);
    return rc;
  }
  HBG__TRY(rc);
  cJSON *root = hf_json(text, len, ix);
  free(text);
  if (!root)
    return HBG_E_INVAL;
  const cJSON *wm = NULL, *e;
  if (!cJSON_IsObject(root)) {
    hbg__error_set("%s: not a JSON object", ix);
    rc = HBG_E_INVAL;
  } else if (!(wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"))) {
    hbg__error_set("%s: weight_map is missing", ix);
    rc = HBG_E_NOTFOUND;
  } else if (!cJSON_IsObject(wm)) {
    hbg__error_set("%s: weight_map is not a JSON object", ix);
    rc = HBG_E_INVAL;
  } else if (!wm->child) {
    hbg__error_set("%s: weight_map is empty", ix);
    rc = HBG_E_INVAL;
  }
  /* Each shard the map names, opened once, in the order first named. */
  for (e = wm && rc == 0 ? wm->child : NULL; e && rc == 0; e = e->next) {
    if (!cJSON_IsString(e)) {
      hbg__error_set("%s: weight_map: %s is not a file name", ix, e->string);
      rc = HBG_E_INVAL;
      break;
    }
    const char *shard = e->valuestring;
    if (!hf_shard_name_ok(shard)) {
      hbg__error_set("%s: weight_map puts %s in \"%s\", not a file of the "
                     "checkpoint's folder",
                     ix, e->string, shard);
      rc = HBG_E_INVAL;
      break;
    }
    uint32_t fi = 0;
    while (fi < c->nfiles && strcmp(c->files[fi].name, shard) != 0)
      fi++;
    if (fi < c->nfiles)
      continue;
    if ((rc = hf_add_file(c, dir, shard)) != 0)
      break;
    rc = st_open(c, fi);
    if (rc == HBG_E_NOTFOUND)
      hbg__error_set("%s: weight_map puts %s in %s, which does not exist", ix,
                     e->string, c->files[fi].path);
  }
  if (rc == 0)
    rc = hf_index_names(c);
  /* Every tensor the map names is in the shard it names. */
  for (e = wm && rc == 0 ? wm->child : NULL; e && rc == 0; e = e->next) {
    const hf_tensor *t = hf_find(c, e->string);
    if (t && strcmp(c->files[t->file].name, e->valuestring) == 0)
      continue;
    char *where = hf_join(dir, e->valuestring);
    if (t)
      hbg__error_set("%s: weight_map puts %s in %s, which does not hold it "
                     "(%s does)",
                     ix, e->string, where ? where : e->valuestring,
                     c->files[t->file].path);
    else
      hbg__error_set("%s: weight_map puts %s in %s, which does not hold it",
                     ix, e->string, where ? where : e->valuestring);
    free(where);
    rc = HBG_E_NOTFOUND;
  }
  cJSON_Delete(root);
  return rc;
}

static int hf_open_in(hbg__hf_ckpt *c, const char *dir) {
  char *single = hf_join(dir, HF_SINGLE);
  if (!single) {
    hbg__error_set("%s: out of memory", dir);
    return HBG_E_NOMEM;
  }
  struct stat st;
  int have_single = stat(single, &st) == 0;
  int err = errno;
  if (!have_single && err != ENOENT) {
    int rc = hf_open_err(single, err);
    free(single);
    return rc;
  }
  if (have_single) {
    c->src = single;
    HBG__TRY(hf_add_file(c, dir, HF_SINGLE));
    HBG__TRY(st_open(c, 0));
    return hf_index_names(c);
  }
  free(single);
  if (!(c->src = hf_join(dir, HF_INDEX))) {
    hbg__error_set("%s: out of memory", dir);
    return HBG_E_NOMEM;
  }
  return hf_open_index(c, dir);
}

int hbg__hf_open(const char *dir, hbg__hf_ckpt **out) {
  if (!dir || !out) {
    hbg__error_set("hf checkpoint: NULL argument");
    return HBG_E_INVAL;
  }
  *out = NULL;
  hbg__hf_ckpt *c = calloc(1, sizeof *c);
  if (!c) {
    hbg__error_set("%s: out of memory", dir);
    return HBG_E_NOMEM;
  }
  int rc = hf_open_in(c, dir);
  if (rc) {
    hbg__hf_close(c);
    return rc;
  }
  *out = c;
  return 0;
}

int hbg__hf_has(const hbg__hf_ckpt *c, const char *name) {
  return c && name && hf_find(c, name) != NULL;
}

/* n elements of file dtype sd (HF_*) at src into dst as dd
 * (HBG_DTYPE_F32 or HBG_DTYPE_BF16, not the same as sd). */
static void hf_convert(const uint8_t *src, uint32_t sd, uint8_t *dst,
                       uint32_t dd, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    if (sd == HF_F32) { /* dd is BF16 */
      float f;
      memcpy(&f, src + 4 * i, 4);
      uint16_t h = hbg__bf16_from_f32(f);
      memcpy(dst + 2 * i, &h, 2);
      continue;
    }
    uint16_t h;
    memcpy(&h, src + 2 * i, 2);
    if (sd == HF_BF16) { /* dd is F32 */
      float f = hbg__bf16_to_f32(h);
      memcpy(dst + 4 * i, &f, 4);
    } else if (dd == HBG_DTYPE_F32) { /* F16 -> F32, as bits */
      uint32_t b = hf_f16_bits(h);
      memcpy(dst + 4 * i, &b, 4);
    } else { /* F16 -> BF16 through f32 */
      uint16_t o = hbg__bf16_from_f32(hf_f16_to_f32(h));
      memcpy(dst + 2 * i, &o, 2);
    }
  }
}

int hbg__hf_read(hbg__hf_ckpt *c, const char *name, uint32_t dtype,
                 const uint64_t *shape, uint32_t ndim, void *dst) {
  if (!c || !name || (ndim && !shape) || !dst) {
    hbg__error_set("hf read %s: NULL argument", name ? name : "(null)");
    return HBG_E_INVAL;
  }
  if (dtype != HBG_DTYPE_F32 && dtype != HBG_DTYPE_BF16) {
    hbg__error_set("%s: %s asked for as dtype %u; F32 or BF16 only", c->src,
                   name, dtype);
    return HBG_E_INVAL;
  }
  const hf_tensor *t = hf_find(c, name);
  if (!t) {
    hbg__error_set("%s: no tensor %s", c->src, name);
    return HBG_E_NOTFOUND;
  }
  const hf_file *f = &c->files[t->file];
  int same = ndim == t->ndim;
  for (uint32_t i = 0; same && i < ndim; i++)
    same = shape[i] == t->shape[i];
  if (!same) {
    char have[256], need[256];
    hbg__error_set("%s: %s has shape %s, the config needs %s", f->path, name,
                   hf_fmt_shape(have, sizeof have, t->shape, t->ndim),
                   hf_fmt_shape(need, sizeof need, shape, ndim));
    return HBG_E_INVAL;
  }
  if (t->dtype != HF_F32 && t->dtype != HF_BF16 && t->dtype != HF_F16) {
    hbg__error_set("%s: %s has dtype %s; only F32, BF16 and F16 are read",
                   f->path, name, hf_dtypes[t->dtype].name);
    return HBG_E_UNSUPPORTED;
  }
  uint32_t want = dtype == HBG_DTYPE_F32 ? HF_F32 : HF_BF16;
  if (t->dtype == want) {
    if (hf_pread_all(f->fd, dst, t->bytes, t->off) != 0) {
      hbg__error_set("%s: reading %s: %s", f->path, name, hf_why(errno));
      return HBG_E_IO;
    }
    return 0;
  }
  uint32_t ssz = hf_dtypes[t->dtype].size, dsz = hf_dtypes[want].size;
  uint64_t count = t->bytes / ssz, per = HF_CHUNK / ssz;
  uint8_t *buf = malloc(t->bytes < HF_CHUNK ? (size_t)t->bytes + 1 : HF_CHUNK);
  if (!buf) {
    hbg__error_set("%s: reading %s: out of memory", f->path, name);
    return HBG_E_NOMEM;
  }
  for (uint64_t i = 0; i < count;) {
    uint64_t k = HBG__MIN(per, count - i);
    if (hf_pread_all(f->fd, buf, k * ssz, t->off + i * ssz) != 0) {
      hbg__error_set("%s: reading %s: %s", f->path, name, hf_why(errno));
      free(buf);
      return HBG_E_IO;
    }
    hf_convert(buf, t->dtype, (uint8_t *)dst + i * dsz, dtype, k);
    i += k;
  }
  free(buf);
  return 0;
}
