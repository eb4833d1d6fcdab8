#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/util.h"
#include "graph/graph.h"

static const char *const kernel_names[HBG_KERNEL__COUNT] = {
    [HBG_KERNEL_NOP] = "nop",         [HBG_KERNEL_COPY] = "copy",
    [HBG_KERNEL_ADD] = "add",         [HBG_KERNEL_MUL] = "mul",
    [HBG_KERNEL_SCALE] = "scale",     [HBG_KERNEL_RMSNORM] = "rmsnorm",
    [HBG_KERNEL_GEMV] = "gemv",       [HBG_KERNEL_ROPE] = "rope",
    [HBG_KERNEL_SILU_MUL] = "silu_mul", [HBG_KERNEL_SOFTMAX] = "softmax",
    [HBG_KERNEL_ATTN] = "attn",       [HBG_KERNEL_FILL] = "fill",
};

static const char *kernel_name(uint32_t k) {
  if (hbg_img_kernel_is_user(k))
    return "user";
  return k < HBG_KERNEL__COUNT && kernel_names[k] ? kernel_names[k] : "?";
}

static const char *dtype_name(uint32_t d) {
  static const char *const n[] = {"?", "f32", "f16", "bf16", "i32", "i64", "u8"};
  return d < HBG__ARRAY_LEN(n) ? n[d] : "?";
}

static const char *mode_name(uint32_t m) {
  static const char *const n[] = {"?", "in", "out", "inout"};
  return m < HBG__ARRAY_LEN(n) ? n[m] : "?";
}

static const char *src_name(uint32_t s) {
  static const char *const n[] = {"?", "boundary_exact", "boundary_view",
                                  "internal", "own_output"};
  return s < HBG__ARRAY_LEN(n) ? n[s] : "?";
}

/* ---------------- JSON helpers: any allocation failure sets *oom ---------- */

typedef struct jctx {
  int oom;
} jctx;

static cJSON *jchk(jctx *j, cJSON *item) {
  if (!item)
    j->oom = 1;
  return item;
}

static void jnum(jctx *j, cJSON *o, const char *k, double v) {
  if (o)
    jchk(j, cJSON_AddNumberToObject(o, k, v));
}

static void jhex(jctx *j, cJSON *o, const char *k, uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  if (o)
    jchk(j, cJSON_AddStringToObject(o, k, buf));
}

static void jmagic(jctx *j, cJSON *o, uint32_t v) {
  char buf[12];
  snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
  if (o)
    jchk(j, cJSON_AddStringToObject(o, "magic", buf));
}

static void ju64(jctx *j, cJSON *o, const char *k, uint64_t v) {
  if (v < (1ull << 53))
    jnum(j, o, k, (double)v);
  else
    jhex(j, o, k, v);
}

static void jstr(jctx *j, cJSON *o, const char *k, const char *s) {
  if (o)
    jchk(j, cJSON_AddStringToObject(o, k, s));
}

static cJSON *jobj(jctx *j, cJSON *parent, const char *k) {
  if (!parent)
    return NULL;
  cJSON *o = jchk(j, cJSON_CreateObject());
  if (!o)
    return NULL;
  if (cJSON_IsArray(parent) ? !cJSON_AddItemToArray(parent, o)
                            : !cJSON_AddItemToObject(parent, k, o)) {
    cJSON_Delete(o);
    j->oom = 1;
    return NULL;
  }
  return o;
}

static cJSON *jarr(jctx *j, cJSON *parent, const char *k) {
  return parent ? jchk(j, cJSON_AddArrayToObject(parent, k)) : NULL;
}

static void jpush(jctx *j, cJSON *arr, double v) {
  if (!arr)
    return;
  cJSON *n = jchk(j, cJSON_CreateNumber(v));
  if (n && !cJSON_AddItemToArray(arr, n)) {
    cJSON_Delete(n);
    j->oom = 1;
  }
}

static void jdims(jctx *j, cJSON *o, const char *k, const uint32_t *d,
                  uint32_t ndim) {
  cJSON *a = jarr(j, o, k);
  for (uint32_t i = 0; i < ndim && i < HBG_MAX_DIMS; i++)
    jpush(j, a, d[i]);
}

static void jstatus(jctx *j, cJSON *o, int rc) {
  jstr(j, o, "status", hbg_err_name(rc));
  if (o)
    jchk(j, cJSON_AddBoolToObject(o, "valid", rc == 0));
}

static void jlayout(jctx *j, cJSON *o, uint32_t dtype, uint32_t ndim,
                    uint32_t mode, const uint32_t *shape,
                    const uint32_t *strides) {
  jstr(j, o, "dtype", dtype_name(dtype));
  jnum(j, o, "ndim", ndim);
  jstr(j, o, "mode", mode_name(mode));
  jdims(j, o, "shape", shape, ndim);
  jdims(j, o, "strides", strides, ndim);
}

/* ---------------- text helpers ---------------- */

static void tdims(FILE *f, const uint32_t *d, uint32_t ndim) {
  fputc('[', f);
  for (uint32_t i = 0; i < ndim && i < HBG_MAX_DIMS; i++)
    fprintf(f, "%s%" PRIu32, i ? "," : "", d[i]);
  fputc(']', f);
}

static void tlayout(FILE *f, uint32_t dtype, uint32_t ndim, uint32_t mode,
                    const uint32_t *shape, const uint32_t *strides) {
  fprintf(f, "%s", dtype_name(dtype));
  tdims(f, shape, ndim);
  fprintf(f, " strides ");
  tdims(f, strides, ndim);
  fprintf(f, " %s", mode_name(mode));
}

static void tstatus(FILE *f, const char *ind, int rc) {
  fprintf(f, "%sstatus %s (%s)\n", ind, hbg_err_name(rc),
          rc ? hbg_strerror(rc) : "valid");
}

/* ---------------- Definition ---------------- */

static void def_hdr_json(jctx *j, cJSON *o, const hbg_def_hdr *h) {
  cJSON *x = jobj(j, o, "header");
  jmagic(j, x, h->magic);
  jnum(j, x, "version", h->version);
  jnum(j, x, "total_size", h->total_size);
  jnum(j, x, "flags", h->flags);
  jhex(j, x, "hash", h->hash);
  ju64(j, x, "heap_size", h->heap_size);
  jnum(j, x, "n_nodes", h->n_nodes);
  jnum(j, x, "n_edges", h->n_edges);
  jnum(j, x, "n_roots", h->n_roots);
  jnum(j, x, "n_tensors", h->n_tensors);
  jnum(j, x, "n_scalars", h->n_scalars);
  jnum(j, x, "n_btensors", h->n_btensors);
  jnum(j, x, "n_bscalars", h->n_bscalars);
  jnum(j, x, "off_nodes", h->off_nodes);
  jnum(j, x, "off_fanin_ptr", h->off_fanin_ptr);
  jnum(j, x, "off_fanin", h->off_fanin);
  jnum(j, x, "off_fanout_ptr", h->off_fanout_ptr);
  jnum(j, x, "off_fanout", h->off_fanout);
  jnum(j, x, "off_roots", h->off_roots);
  jnum(j, x, "off_tensors", h->off_tensors);
  jnum(j, x, "off_scalars", h->off_scalars);
  jnum(j, x, "off_bsig", h->off_bsig);
  jnum(j, x, "off_pad", h->off_pad);
  jnum(j, x, "pad_size", h->pad_size);
}

static void def_body_json(jctx *j, cJSON *o, const hbg__def_view *v) {
  const hbg_def_hdr *h = v->hdr;
  cJSON *b = jarr(j, o, "boundary_tensors");
  for (uint32_t i = 0; i < h->n_btensors; i++) {
    const hbg_def_bsig *s = &v->bsig[i];
    cJSON *t = jobj(j, b, NULL);
    jnum(j, t, "index", i);
    jlayout(j, t, s->dtype, s->ndim, s->mode, s->shape, s->strides);
  }
  jnum(j, o, "boundary_scalars", h->n_bscalars);

  cJSON *nodes = jarr(j, o, "nodes");
  for (uint32_t i = 0; i < h->n_nodes; i++) {
    const hbg_def_node *n = &v->nodes[i];
    cJSON *x = jobj(j, nodes, NULL);
    jnum(j, x, "id", i);
    jstr(j, x, "kernel", kernel_name(n->kernel));
    jnum(j, x, "kernel_id", n->kernel);
    ju64(j, x, "heap_off", n->heap_off);
    ju64(j, x, "heap_size", n->heap_size);
    cJSON *ts = jarr(j, x, "tensors");
    for (uint32_t k = 0; k < n->n_tensors; k++) {
      const hbg_def_tensor *t = &v->tensors[n->first_tensor + k];
      cJSON *y = jobj(j, ts, NULL);
      jstr(j, y, "src", src_name(t->src));
      jnum(j, y, "ref", t->ref);
      ju64(j, y, "offset", t->offset);
      jlayout(j, y, t->dtype, t->ndim, t->mode, t->shape, t->strides);
    }
    cJSON *ss = jarr(j, x, "scalars");
    for (uint32_t k = 0; k < n->n_scalars; k++) {
      const hbg_def_scalar *s = &v->scalars[n->first_scalar + k];
      cJSON *y = jobj(j, ss, NULL);
      if (s->kind == HBG_SCALAR_BOUNDARY) {
        jstr(j, y, "kind", "boundary");
        jnum(j, y, "index", s->index);
      } else {
        jstr(j, y, "kind", "static");
        jhex(j, y, "value", s->value);
      }
    }
    cJSON *fi = jarr(j, x, "fanin");
    for (uint32_t k = v->fanin_ptr[i]; k < v->fanin_ptr[i + 1]; k++)
      jpush(j, fi, v->fanin[k]);
    cJSON *fo = jarr(j, x, "fanout");
    for (uint32_t k = v->fanout_ptr[i]; k < v->fanout_ptr[i + 1]; k++)
      jpush(j, fo, v->fanout[k]);
  }
  cJSON *edges = jarr(j, o, "edges");
  for (uint32_t c = 0; c < h->n_nodes; c++)
    for (uint32_t k = v->fanin_ptr[c]; k < v->fanin_ptr[c + 1]; k++) {
      cJSON *e = jchk(j, cJSON_CreateArray());
      if (!e)
        continue;
      jpush(j, e, v->fanin[k]);
      jpush(j, e, c);
      if (!cJSON_AddItemToArray(edges, e)) {
        cJSON_Delete(e);
        j->oom = 1;
      }
    }
  cJSON *roots = jarr(j, o, "roots");
  for (uint32_t k = 0; k < h->n_roots; k++)
    jpush(j, roots, v->roots[k]);
}

/* Validate a Definition and describe it; the tables only when they passed
 * the structural checks (a hash mismatch alone still shows them). */
static int def_json(jctx *j, cJSON *o, const uint8_t *p, uint64_t len) {
  hbg__def_view v;
  int rc = hbg__def_validate(p, len, &v);
  int body = rc == 0 ||
             (rc == HBG_E_IMG_HASH && hbg__def_validate_nohash(p, len, &v) == 0);
  jstr(j, o, "kind", "definition");
  jstatus(j, o, rc);
  if (len >= sizeof(hbg_def_hdr))
    def_hdr_json(j, o, (const hbg_def_hdr *)p);
  if (body)
    def_body_json(j, o, &v);
  return rc;
}

static void def_hdr_text(FILE *f, const char *ind, const hbg_def_hdr *h) {
  fprintf(f,
          "%sdefinition  size %" PRIu32 "  version %" PRIu32
          "  flags 0x%" PRIx32 "  hash 0x%016" PRIx64 "  heap %" PRIu64 "\n",
          ind, h->total_size, h->version, h->flags, h->hash, h->heap_size);
  fprintf(f,
          "%s  nodes %" PRIu32 "  edges %" PRIu32 "  roots %" PRIu32
          "  tensors %" PRIu32 "  scalars %" PRIu32 "  boundary %" PRIu32
          " tensors / %" PRIu32 " scalars\n",
          ind, h->n_nodes, h->n_edges, h->n_roots, h->n_tensors, h->n_scalars,
          h->n_btensors, h->n_bscalars);
  fprintf(f,
          "%s  offsets nodes %" PRIu32 " fanin_ptr %" PRIu32 " fanin %" PRIu32
          " fanout_ptr %" PRIu32 " fanout %" PRIu32 " roots %" PRIu32
          " tensors %" PRIu32 " scalars %" PRIu32 " bsig %" PRIu32 "\n",
          ind, h->off_nodes, h->off_fanin_ptr, h->off_fanin, h->off_fanout_ptr,
          h->off_fanout, h->off_roots, h->off_tensors, h->off_scalars,
          h->off_bsig);
  if (h->pad_size)
    fprintf(f, "%s  opaque pad %" PRIu32 " B at %" PRIu32 "\n", ind,
            h->pad_size, h->off_pad);
}

static void def_body_text(FILE *f, const char *ind, const hbg__def_view *v) {
  const hbg_def_hdr *h = v->hdr;
  fprintf(f, "%sboundary tensors:\n", ind);
  for (uint32_t i = 0; i < h->n_btensors; i++) {
    const hbg_def_bsig *s = &v->bsig[i];
    fprintf(f, "%s  b%" PRIu32 "  ", ind, i);
    tlayout(f, s->dtype, s->ndim, s->mode, s->shape, s->strides);
    fputc('\n', f);
  }
  fprintf(f, "%sboundary scalars: %" PRIu32 "\n", ind, h->n_bscalars);
  fprintf(f, "%snodes:\n", ind);
  for (uint32_t i = 0; i < h->n_nodes; i++) {
    const hbg_def_node *n = &v->nodes[i];
    fprintf(f, "%s  n%" PRIu32 "  %s", ind, i, kernel_name(n->kernel));
    if (hbg_img_kernel_is_user(n->kernel))
      fprintf(f, " %#" PRIx32, n->kernel);
    if (n->heap_size)
      fprintf(f, "  heap [%" PRIu64 ", %" PRIu64 ")", n->heap_off,
              n->heap_off + n->heap_size);
    fprintf(f, "  fanin");
    if (v->fanin_ptr[i] == v->fanin_ptr[i + 1])
      fprintf(f, " -");
    for (uint32_t k = v->fanin_ptr[i]; k < v->fanin_ptr[i + 1]; k++)
      fprintf(f, " %" PRIu32, v->fanin[k]);
    fprintf(f, "  fanout");
    if (v->fanout_ptr[i] == v->fanout_ptr[i + 1])
      fprintf(f, " -");
    for (uint32_t k = v->fanout_ptr[i]; k < v->fanout_ptr[i + 1]; k++)
      fprintf(f, " %" PRIu32, v->fanout[k]);
    fputc('\n', f);
    for (uint32_t k = 0; k < n->n_tensors; k++) {
      const hbg_def_tensor *t = &v->tensors[n->first_tensor + k];
      fprintf(f, "%s    t%" PRIu32 "  %-14s ", ind, k, src_name(t->src));
      if (t->src == HBG_SRC_BOUNDARY_EXACT || t->src == HBG_SRC_BOUNDARY_VIEW)
        fprintf(f, "b%" PRIu32, t->ref);
      else
        fprintf(f, "n%" PRIu32, t->ref);
      fprintf(f, " +%" PRIu64 "  ", t->offset);
      tlayout(f, t->dtype, t->ndim, t->mode, t->shape, t->strides);
      fputc('\n', f);
    }
    for (uint32_t k = 0; k < n->n_scalars; k++) {
      const hbg_def_scalar *s = &v->scalars[n->first_scalar + k];
      if (s->kind == HBG_SCALAR_BOUNDARY)
        fprintf(f, "%s    s%" PRIu32 "  boundary %" PRIu32 "\n", ind, k,
                s->index);
      else
        fprintf(f, "%s    s%" PRIu32 "  static 0x%" PRIx64 "\n", ind, k,
                s->value);
    }
  }
  fprintf(f, "%sedges (%" PRIu32 "):\n", ind, h->n_edges);
  for (uint32_t c = 0; c < h->n_nodes; c++)
    for (uint32_t k = v->fanin_ptr[c]; k < v->fanin_ptr[c + 1]; k++)
      fprintf(f, "%s  %" PRIu32 " -> %" PRIu32 "\n", ind, v->fanin[k], c);
  fprintf(f, "%sroots:", ind);
  for (uint32_t k = 0; k < h->n_roots; k++)
    fprintf(f, " %" PRIu32, v->roots[k]);
  fputc('\n', f);
}

static int def_text(FILE *f, const char *ind, const uint8_t *p, uint64_t len) {
  hbg__def_view v;
  int rc = hbg__def_validate(p, len, &v);
  int body = rc == 0 ||
             (rc == HBG_E_IMG_HASH && hbg__def_validate_nohash(p, len, &v) == 0);
  if (len >= sizeof(hbg_def_hdr))
    def_hdr_text(f, ind, (const hbg_def_hdr *)p);
  else
    fprintf(f, "%sdefinition (%" PRIu64 " bytes, header incomplete)\n", ind,
            len);
  tstatus(f, ind, rc);
  if (body)
    def_body_text(f, ind, &v);
  return rc;
}

/* ---------------- Submission ---------------- */

/* The inline Definition's verdict, then the Submission-vs-Definition one. */
static int sub_inline_rc(const hbg__sub_view *s, int *match) {
  const hbg_sub_hdr *h = s->hdr;
  hbg__def_view d;
  int rc = hbg__def_validate(s->inline_def, h->def_size, &d);
  *match = rc ? rc : hbg__sub_check_def(s, &d);
  return rc;
}

static void sub_hdr_json(jctx *j, cJSON *o, const hbg_sub_hdr *h) {
  cJSON *x = jobj(j, o, "header");
  jmagic(j, x, h->magic);
  jnum(j, x, "version", h->version);
  jnum(j, x, "total_size", h->total_size);
  jnum(j, x, "flags", h->flags);
  jhex(j, x, "hash", h->hash);
  jhex(j, x, "def_hash", h->def_hash);
  jhex(j, x, "full_key", h->full_key);
  jnum(j, x, "occurrence", h->occurrence);
  jnum(j, x, "n_tensors", h->n_tensors);
  jnum(j, x, "n_scalars", h->n_scalars);
  jnum(j, x, "off_tensors", h->off_tensors);
  jnum(j, x, "off_scalars", h->off_scalars);
  jnum(j, x, "off_def", h->off_def);
  jnum(j, x, "def_size", h->def_size);
}

/* The boundary signatures of a Submission's inline Definition, when there
 * is one whose structure is sound (its hash may still be wrong: that is
 * reported with the Definition) and whose count matches; else NULL. */
static const hbg_def_bsig *sub_sigs(const hbg__sub_view *s) {
  hbg__def_view d;
  if (!s->inline_def ||
      hbg__def_validate_nohash(s->inline_def, s->hdr->def_size, &d) != 0 ||
      d.hdr->n_btensors != s->hdr->n_tensors)
    return NULL;
  return d.bsig;
}

static void sub_tensor_json(jctx *j, cJSON *arr, const hbg_sub_tensor *t) {
  cJSON *y = jobj(j, arr, NULL);
  jhex(j, y, "addr", t->addr);
  ju64(j, y, "offset", t->offset);
  jlayout(j, y, t->dtype, t->ndim, t->mode, t->shape, t->strides);
}

static void sub_bind_json(jctx *j, cJSON *arr, const hbg_sub_bind *t,
                          const hbg_def_bsig *sig) {
  cJSON *y = jobj(j, arr, NULL);
  jhex(j, y, "addr", t->addr);
  ju64(j, y, "offset", t->offset);
  if (sig)
    jlayout(j, y, sig->dtype, sig->ndim, sig->mode, sig->shape, sig->strides);
}

static int sub_json(jctx *j, cJSON *o, const uint8_t *p, uint64_t len) {
  hbg__sub_view s;
  int rc = hbg__sub_validate(p, len, &s);
  jstr(j, o, "kind", "submission");
  jstatus(j, o, rc);
  if (len >= sizeof(hbg_sub_hdr))
    sub_hdr_json(j, o, (const hbg_sub_hdr *)p);
  if (rc)
    return rc;
  const hbg_def_bsig *sig = sub_sigs(&s);
  cJSON *ts = jarr(j, o, "tensors");
  for (uint32_t i = 0; i < s.hdr->n_tensors; i++)
    sub_bind_json(j, ts, &s.tensors[i], sig ? &sig[i] : NULL);
  cJSON *ss = jarr(j, o, "scalars");
  for (uint32_t i = 0; i < s.hdr->n_scalars; i++) {
    char buf[24];
    snprintf(buf, sizeof buf, "0x%016" PRIx64, s.scalars[i]);
    cJSON *x = jchk(j, cJSON_CreateString(buf));
    if (x && ss && !cJSON_AddItemToArray(ss, x)) {
      cJSON_Delete(x);
      j->oom = 1;
    }
  }
  if (!s.inline_def)
    return 0;
  int match;
  int drc = sub_inline_rc(&s, &match);
  def_json(j, jobj(j, o, "definition"), s.inline_def, s.hdr->def_size);
  jstr(j, o, "definition_match", hbg_err_name(match));
  return drc ? drc : match;
}

static int sub_text(FILE *f, const uint8_t *p, uint64_t len) {
  hbg__sub_view s;
  int rc = hbg__sub_validate(p, len, &s);
  if (len >= sizeof(hbg_sub_hdr)) {
    const hbg_sub_hdr *h = (const hbg_sub_hdr *)p;
    fprintf(f,
            "submission  size %" PRIu32 "  version %" PRIu32
            "  flags 0x%" PRIx32 "  hash 0x%016" PRIx64 "\n",
            h->total_size, h->version, h->flags, h->hash);
    fprintf(f,
            "  def_hash 0x%016" PRIx64 "  def_size %" PRIu32
            "  full_key 0x%016" PRIx64 "  occurrence %" PRIu32 "\n",
            h->def_hash, h->def_size, h->full_key, h->occurrence);
    fprintf(f,
            "  tensors %" PRIu32 " @%" PRIu32 "  scalars %" PRIu32
            " @%" PRIu32,
            h->n_tensors, h->off_tensors, h->n_scalars, h->off_scalars);
    if (h->flags & HBG_SUB_INLINE_DEF)
      fprintf(f, "  inline definition @%" PRIu32 "\n", h->off_def);
    else
      fprintf(f, "  no inline definition\n");
  } else {
    fprintf(f, "submission (%" PRIu64 " bytes, header incomplete)\n", len);
  }
  tstatus(f, "", rc);
  if (rc)
    return rc;
  const hbg_def_bsig *sig = sub_sigs(&s);
  fprintf(f, "boundary tensors%s:\n",
          sig ? " (signature from the inline definition)"
              : " (signature in the definition)");
  for (uint32_t i = 0; i < s.hdr->n_tensors; i++) {
    const hbg_sub_bind *t = &s.tensors[i];
    fprintf(f, "  b%" PRIu32 "  addr 0x%" PRIx64 " +%" PRIu64, i, t->addr,
            t->offset);
    if (sig) {
      fputs("  ", f);
      tlayout(f, sig[i].dtype, sig[i].ndim, sig[i].mode, sig[i].shape,
              sig[i].strides);
    }
    fputc('\n', f);
  }
  fprintf(f, "boundary scalars:");
  for (uint32_t i = 0; i < s.hdr->n_scalars; i++)
    fprintf(f, " 0x%" PRIx64, s.scalars[i]);
  fputc('\n', f);
  if (!s.inline_def)
    return 0;
  int match;
  int drc = sub_inline_rc(&s, &match);
  fprintf(f, "inline definition:\n");
  def_text(f, "  ", s.inline_def, s.hdr->def_size);
  fprintf(f, "definition match: %s\n", hbg_err_name(match));
  return drc ? drc : match;
}

/* ---------------- Task window ---------------- */

static const uint32_t *win_deps(const hbg_win_task *t) {
  return (const uint32_t *)((const uint8_t *)t + t->off_deps);
}

static int win_json(jctx *j, cJSON *o, const uint8_t *p, uint64_t len) {
  hbg__win_view w;
  int rc = hbg__win_validate(p, len, &w);
  jstr(j, o, "kind", "window");
  jstatus(j, o, rc);
  if (len >= sizeof(hbg_win_hdr)) {
    const hbg_win_hdr *h = (const hbg_win_hdr *)p;
    cJSON *x = jobj(j, o, "header");
    jmagic(j, x, h->magic);
    jnum(j, x, "version", h->version);
    jnum(j, x, "total_size", h->total_size);
    jnum(j, x, "n_tasks", h->n_tasks);
    jnum(j, x, "off_index", h->off_index);
    jnum(j, x, "flags", h->flags);
    ju64(j, x, "bind_seq", h->bind_seq);
  }
  if (rc)
    return rc;
  cJSON *tasks = jarr(j, o, "tasks");
  for (uint32_t i = 0; i < w.hdr->n_tasks; i++) {
    const hbg_win_task *t = hbg__win_task(&w, i);
    cJSON *x = jobj(j, tasks, NULL);
    jnum(j, x, "id", i);
    jnum(j, x, "offset", w.index[i]);
    jnum(j, x, "size", t->size);
    jstr(j, x, "kind", t->kind == HBG_WIN_GRAPH ? "graph" : "task");
    cJSON *deps = jarr(j, x, "deps");
    for (uint32_t k = 0; k < t->n_deps; k++)
      jpush(j, deps, win_deps(t)[k]);
    if (t->kind == HBG_WIN_GRAPH) {
      jhex(j, x, "sub_addr", t->sub_addr);
      jnum(j, x, "sub_size", t->sub_size);
      jhex(j, x, "def_addr", t->def_addr);
      jnum(j, x, "def_size", t->def_size);
      jhex(j, x, "heap_addr", t->heap_addr);
      continue;
    }
    jstr(j, x, "kernel", kernel_name(t->kernel));
    const hbg_sub_tensor *ts =
        (const hbg_sub_tensor *)((const uint8_t *)t + t->off_tensors);
    cJSON *ta = jarr(j, x, "tensors");
    for (uint32_t k = 0; k < t->n_tensors; k++)
      sub_tensor_json(j, ta, &ts[k]);
    const uint8_t *sc = (const uint8_t *)t + t->off_scalars;
    cJSON *sa = jarr(j, x, "scalars");
    for (uint32_t k = 0; k < t->n_scalars; k++) {
      uint64_t val;
      memcpy(&val, sc + 8 * (size_t)k, sizeof val);
      char buf[24];
      snprintf(buf, sizeof buf, "0x%016" PRIx64, val);
      cJSON *s = jchk(j, cJSON_CreateString(buf));
      if (s && sa && !cJSON_AddItemToArray(sa, s)) {
        cJSON_Delete(s);
        j->oom = 1;
      }
    }
  }
  return 0;
}

static int win_text(FILE *f, const uint8_t *p, uint64_t len) {
  hbg__win_view w;
  int rc = hbg__win_validate(p, len, &w);
  if (len >= sizeof(hbg_win_hdr)) {
    const hbg_win_hdr *h = (const hbg_win_hdr *)p;
    fprintf(f,
            "window  size %" PRIu32 "  version %" PRIu32 "  tasks %" PRIu32
            "  index @%" PRIu32 "  flags 0x%" PRIx32 "  bind %" PRIu64 "\n",
            h->total_size, h->version, h->n_tasks, h->off_index, h->flags,
            h->bind_seq);
  } else {
    fprintf(f, "window (%" PRIu64 " bytes, header incomplete)\n", len);
  }
  tstatus(f, "", rc);
  if (rc)
    return rc;
  for (uint32_t i = 0; i < w.hdr->n_tasks; i++) {
    const hbg_win_task *t = hbg__win_task(&w, i);
    fprintf(f, "  task %" PRIu32 " @%" PRIu32 " size %" PRIu32 "  ", i,
            w.index[i], t->size);
    if (t->kind == HBG_WIN_GRAPH)
      fprintf(f,
              "graph  sub 0x%" PRIx64 " (%" PRIu32 " B)  def 0x%" PRIx64
              " (%" PRIu32 " B)  heap 0x%" PRIx64,
              t->sub_addr, t->sub_size, t->def_addr, t->def_size,
              t->heap_addr);
    else
      fprintf(f, "%s  tensors %" PRIu32 "  scalars %" PRIu32,
              kernel_name(t->kernel), t->n_tensors, t->n_scalars);
    fprintf(f, "  deps");
    if (!t->n_deps)
      fprintf(f, " -");
    for (uint32_t k = 0; k < t->n_deps; k++)
      fprintf(f, " %" PRIu32, win_deps(t)[k]);
    fputc('\n', f);
    if (t->kind == HBG_WIN_GRAPH)
      continue;
    const hbg_sub_tensor *ts =
        (const hbg_sub_tensor *)((const uint8_t *)t + t->off_tensors);
    for (uint32_t k = 0; k < t->n_tensors; k++) {
      fprintf(f, "    t%" PRIu32 "  addr 0x%" PRIx64 " +%" PRIu64 "  ", k,
              ts[k].addr, ts[k].offset);
      tlayout(f, ts[k].dtype, ts[k].ndim, ts[k].mode, ts[k].shape,
              ts[k].strides);
      fputc('\n', f);
    }
  }
  return 0;
}

/* ---------------- entry points ---------------- */

static int dump_aligned(const uint8_t *p, uint64_t len, int json, FILE *out) {
  uint32_t magic = 0;
  if (len >= sizeof magic)
    memcpy(&magic, p, sizeof magic);
  int known = magic == HBG_DEF_MAGIC || magic == HBG_SUB_MAGIC ||
              magic == HBG_WIN_MAGIC;
  int unknown_rc = len < sizeof magic ? HBG_E_IMG_TRUNCATED : HBG_E_IMG_MAGIC;

  if (!json) {
    if (!known) {
      fprintf(out, "unknown image (%" PRIu64 " bytes, magic 0x%08" PRIx32 ")\n",
              len, magic);
      tstatus(out, "", unknown_rc);
      return unknown_rc;
    }
    if (magic == HBG_DEF_MAGIC)
      return def_text(out, "", p, len);
    if (magic == HBG_SUB_MAGIC)
      return sub_text(out, p, len);
    return win_text(out, p, len);
  }

  jctx j = {0};
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return HBG_E_NOMEM;
  int rc;
  if (!known) {
    jstr(&j, o, "kind", "unknown");
    jstatus(&j, o, unknown_rc);
    jnum(&j, o, "size", (double)len);
    rc = unknown_rc;
  } else if (magic == HBG_DEF_MAGIC) {
    rc = def_json(&j, o, p, len);
  } else if (magic == HBG_SUB_MAGIC) {
    rc = sub_json(&j, o, p, len);
  } else {
    rc = win_json(&j, o, p, len);
  }
  char *s = j.oom ? NULL : cJSON_Print(o);
  cJSON_Delete(o);
  if (!s)
    return HBG_E_NOMEM;
  fputs(s, out);
  fputc('\n', out);
  cJSON_free(s);
  return rc;
}

int hbg__image_dump(const void *img, uint64_t len, int json, FILE *out) {
  HBG__RETURN_IF(!out || (!img && len), HBG_E_INVAL);
  if (((uintptr_t)img % HBG_IMG_ALIGN) == 0 || len == 0)
    return dump_aligned(img ? img : (const void *)"", len, json, out);
  /* The validator wants an aligned base; a file mapped at an odd address
   * should still be inspectable. */
  uint8_t *copy = aligned_alloc(HBG_IMG_ALIGN, HBG__ALIGN_UP((size_t)len, 8));
  if (!copy)
    return HBG_E_NOMEM;
  memcpy(copy, img, (size_t)len);
  int rc = dump_aligned(copy, len, json, out);
  free(copy);
  return rc;
}

int hbg_image_dump(const void *img, size_t len, int json, FILE *out) {
  return hbg__image_dump(img, len, json, out);
}
