/* Readable dump (hbg inspect): text and JSON for each image kind, partial
 * output and the validator's code for bad images. */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>
#include <hbg/hbg.h>

#include "common/util.h"
#include "graph/graph.h"
#include "graph_fixture.h"
#include "test.h"

static hbg_tensor g_bt[3];
static uint64_t g_bs[1] = {77};

/* n0 rmsnorm(x) -> own; n1 gemv(W view, n0) -> own; n2 add(n1, n0) -> out */
static hbg__def *make_def_pad(uint32_t pad_to) {
  g_bt[0] = ten(0x1000, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 8, 0);
  g_bt[1] = ten(0x2000, 0, HBG_DTYPE_BF16, HBG_ACCESS_IN, 16, 8);
  g_bt[2] = ten(0x3000, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 8, 0);
  hbg_recorder *r;
  ASSERT_OK(hbg__rec_begin(g_bt, 3, g_bs, 1, &r));
  hbg_tensor a0[2] = {g_bt[0], ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 8, 0)};
  hbg_scalar s0[2] = {{0x3727c5ac, HBG_SCALAR_STATIC, 0},
                      {0, HBG_SCALAR_BOUNDARY, 0}};
  hbg_task t = {HBG_KERNEL_RMSNORM, 2, a0, 2, 0, s0, NULL};
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  hbg_tensor a1[3] = {ten(0x2000, 64, HBG_DTYPE_BF16, HBG_ACCESS_IN, 8, 8),
                      a0[1], ten(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 8, 0)};
  a1[1].mode = HBG_ACCESS_IN;
  t = (hbg_task){HBG_KERNEL_GEMV, 3, a1, 0, 0, NULL, NULL};
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  hbg_tensor a2[3] = {a1[2], a0[1], g_bt[2]};
  a2[0].mode = HBG_ACCESS_IN;
  t = (hbg_task){HBG_KERNEL_ADD, 3, a2, 0, 0, NULL, NULL};
  ASSERT_OK(hbg_record_task(r, &t, NULL));
  if (pad_to)
    ASSERT_OK(hbg_record_pad(r, pad_to));
  hbg__def *d;
  ASSERT_OK(hbg__rec_finish(r, &d));
  return d;
}

static hbg__def *make_def(void) { return make_def_pad(0); }

/* Dump into a string. */
static char *dump(const void *img, size_t len, int json, int expect_rc) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  ASSERT(f);
  int rc = hbg_image_dump(img, len, json, f);
  fclose(f);
  if (rc != expect_rc)
    T_FAIL("dump -> %s, expected %s\n%s", hbg_err_name(rc),
           hbg_err_name(expect_rc), s);
  return s;
}

static cJSON *parse(char *s) {
  cJSON *j = cJSON_Parse(s);
  if (!j)
    T_FAIL("not JSON:\n%s", s);
  free(s);
  return j;
}

static const char *jstr(const cJSON *o, const char *k) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  ASSERT(cJSON_IsString(x));
  return x->valuestring;
}

static double jnum(const cJSON *o, const char *k) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  ASSERT(cJSON_IsNumber(x));
  return x->valuedouble;
}

static const cJSON *jget(const cJSON *o, const char *k) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!x)
    T_FAIL("missing key %s", k);
  return x;
}

static void check_def_json(const cJSON *o, const hbg__def *d) {
  ASSERT_STREQ(jstr(o, "kind"), "definition");
  ASSERT_STREQ(jstr(o, "status"), "HBG_OK");
  ASSERT(cJSON_IsTrue(jget(o, "valid")));
  const cJSON *h = jget(o, "header");
  ASSERT_EQ(jnum(h, "n_nodes"), 3);
  ASSERT_EQ(jnum(h, "total_size"), d->size);
  char hash[24];
  snprintf(hash, sizeof hash, "0x%016llx", (unsigned long long)d->hash);
  ASSERT_STREQ(jstr(h, "hash"), hash);
  const cJSON *nodes = jget(o, "nodes");
  ASSERT_EQ(cJSON_GetArraySize(nodes), 3);
  const cJSON *n1 = cJSON_GetArrayItem(nodes, 1);
  ASSERT_STREQ(jstr(n1, "kernel"), "gemv");
  const cJSON *ts = jget(n1, "tensors");
  ASSERT_EQ(cJSON_GetArraySize(ts), 3);
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(ts, 0), "src"), "boundary_view");
  ASSERT_EQ(jnum(cJSON_GetArrayItem(ts, 0), "offset"), 64);
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(ts, 0), "dtype"), "bf16");
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(ts, 1), "src"), "internal");
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(ts, 2), "src"), "own_output");
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(ts, 2), "mode"), "out");
  const cJSON *n0 = cJSON_GetArrayItem(nodes, 0);
  const cJSON *sc = jget(n0, "scalars");
  ASSERT_EQ(cJSON_GetArraySize(sc), 2);
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(sc, 0), "kind"), "static");
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(sc, 0), "value"), "0x000000003727c5ac");
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(sc, 1), "kind"), "boundary");
  ASSERT_EQ(cJSON_GetArraySize(jget(n0, "fanout")), 2);
  const cJSON *n2 = cJSON_GetArrayItem(nodes, 2);
  ASSERT_EQ(cJSON_GetArraySize(jget(n2, "fanin")), 2);
  /* edges: 0->1, 0->2, 1->2 */
  const cJSON *edges = jget(o, "edges");
  ASSERT_EQ(cJSON_GetArraySize(edges), 3);
  const cJSON *e2 = cJSON_GetArrayItem(edges, 2);
  ASSERT_EQ(cJSON_GetArrayItem(e2, 0)->valueint, 1);
  ASSERT_EQ(cJSON_GetArrayItem(e2, 1)->valueint, 2);
  const cJSON *roots = jget(o, "roots");
  ASSERT_EQ(cJSON_GetArraySize(roots), 1);
  ASSERT_EQ(cJSON_GetArrayItem(roots, 0)->valueint, 0);
  ASSERT_EQ(cJSON_GetArraySize(jget(o, "boundary_tensors")), 3);
  ASSERT_EQ(jnum(o, "boundary_scalars"), 1);
}

int main(void) {
  hbg__def *d = make_def();

  /* Definition, text */
  char *s = dump(d->image, d->size, 0, 0);
  ASSERT(strstr(s, "definition  size"));
  ASSERT(strstr(s, "status HBG_OK"));
  ASSERT(strstr(s, "n1  gemv"));
  ASSERT(strstr(s, "boundary_view  b1 +64"));
  ASSERT(strstr(s, "internal       n0"));
  ASSERT(strstr(s, "static 0x3727c5ac"));
  ASSERT(strstr(s, "1 -> 2"));
  ASSERT(strstr(s, "roots: 0"));
  free(s);

  /* Definition, JSON */
  cJSON *j = parse(dump(d->image, d->size, 1, 0));
  check_def_json(j, d);
  cJSON_Delete(j);

  /* a padded Definition: the pad's place and size in both forms */
  {
    ASSERT(!strstr(s = dump(d->image, d->size, 0, 0), "opaque pad"));
    free(s);
    hbg__def *pd = make_def_pad(d->size + 4096);
    s = dump(pd->image, pd->size, 0, 0);
    char want[64];
    snprintf(want, sizeof want, "opaque pad 4096 B at %u", (unsigned)d->size);
    ASSERT(strstr(s, want));
    free(s);
    cJSON *pj = parse(dump(pd->image, pd->size, 1, 0));
    const cJSON *ph = jget(pj, "header");
    ASSERT_EQ(jnum(ph, "off_pad"), d->size);
    ASSERT_EQ(jnum(ph, "pad_size"), 4096);
    ASSERT_EQ(jnum(ph, "total_size"), d->size + 4096);
    cJSON_Delete(pj);
    hbg__def_free(pd);
  }

  /* an odd base address is copied, not rejected */
  uint8_t *odd = malloc(d->size + 1);
  ASSERT(odd);
  memcpy(odd + 1, d->image, d->size);
  j = parse(dump(odd + 1, d->size, 1, 0));
  check_def_json(j, d);
  cJSON_Delete(j);
  free(odd);

  /* hash mismatch: code returned, tables still shown */
  uint8_t *bad = aligned_alloc(8, d->size);
  ASSERT(bad);
  memcpy(bad, d->image, d->size);
  ((hbg_def_hdr *)bad)->hash ^= 1;
  j = parse(dump(bad, d->size, 1, HBG_E_IMG_HASH));
  ASSERT_STREQ(jstr(j, "status"), "HBG_E_IMG_HASH");
  ASSERT(cJSON_IsFalse(jget(j, "valid")));
  ASSERT_EQ(cJSON_GetArraySize(jget(j, "nodes")), 3);
  cJSON_Delete(j);
  /* structural failure: header only */
  memcpy(bad, d->image, d->size);
  ((hbg_def_hdr *)bad)->n_roots = 0;
  j = parse(dump(bad, d->size, 1, HBG_E_IMG_ROOTS));
  ASSERT_STREQ(jstr(j, "status"), "HBG_E_IMG_ROOTS");
  ASSERT_EQ(jnum(jget(j, "header"), "n_roots"), 0);
  ASSERT(cJSON_GetObjectItemCaseSensitive(j, "nodes") == NULL);
  cJSON_Delete(j);
  s = dump(bad, d->size, 0, HBG_E_IMG_ROOTS);
  ASSERT(strstr(s, "status HBG_E_IMG_ROOTS"));
  ASSERT(strstr(s, "nodes 3"));
  free(s);
  /* truncated below the header */
  s = dump(d->image, 40, 0, HBG_E_IMG_TRUNCATED);
  ASSERT(strstr(s, "header incomplete"));
  free(s);
  free(bad);

  /* unknown bytes */
  uint64_t junk[4] = {0x1122334455667788ull, 0, 0, 0};
  j = parse(dump(junk, sizeof junk, 1, HBG_E_IMG_MAGIC));
  ASSERT_STREQ(jstr(j, "kind"), "unknown");
  cJSON_Delete(j);
  s = dump(junk, 0, 0, HBG_E_IMG_TRUNCATED);
  free(s);
  ASSERT_EQ(hbg_image_dump(NULL, 8, 0, stdout), HBG_E_INVAL);
  ASSERT_EQ(hbg_image_dump(junk, 8, 0, NULL), HBG_E_INVAL);

  /* Submission with the Definition inline */
  hbg_tensor bt[3];
  memcpy(bt, g_bt, sizeof bt);
  bt[0].addr = 0xAA0000;
  uint64_t bs[1] = {0x1234};
  uint32_t sz = hbg__sub_size(d, 1);
  uint8_t *sub = aligned_alloc(8, sz);
  ASSERT(sub);
  ASSERT_EQ(hbg__sub_write(sub, sz, d, 0xFEEDull, 4, bt, bs, 1), (int)sz);
  j = parse(dump(sub, sz, 1, 0));
  ASSERT_STREQ(jstr(j, "kind"), "submission");
  ASSERT_STREQ(jstr(j, "status"), "HBG_OK");
  ASSERT_EQ(jnum(jget(j, "header"), "occurrence"), 4);
  const cJSON *ts = jget(j, "tensors");
  ASSERT_EQ(cJSON_GetArraySize(ts), 3);
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(ts, 0), "addr"), "0x0000000000aa0000");
  ASSERT_EQ(jnum(cJSON_GetArrayItem(ts, 0), "offset"), 0);
  /* the compact record, with the signature of the inline Definition */
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(ts, 1), "dtype"), "bf16");
  ASSERT_EQ(jnum(cJSON_GetArrayItem(ts, 1), "ndim"), 2);
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(ts, 2), "mode"), "out");
  ASSERT_EQ(cJSON_GetArraySize(jget(cJSON_GetArrayItem(ts, 1), "shape")), 2);
  ASSERT_STREQ(cJSON_GetArrayItem(jget(j, "scalars"), 0)->valuestring,
               "0x0000000000001234");
  check_def_json(jget(j, "definition"), d);
  ASSERT_STREQ(jstr(j, "definition_match"), "HBG_OK");
  cJSON_Delete(j);
  s = dump(sub, sz, 0, 0);
  ASSERT(strstr(s, "submission  size"));
  ASSERT(strstr(s, "addr 0xaa0000 +0  f32[8]"));
  ASSERT(strstr(s, "signature from the inline definition"));
  ASSERT(strstr(s, "inline definition:"));
  ASSERT(strstr(s, "  definition  size"));
  ASSERT(strstr(s, "definition match: HBG_OK"));
  free(s);
  /* without the Definition: where each tensor lives, nothing else */
  {
    uint32_t psz = hbg__sub_size(d, 0);
    uint8_t *ps = aligned_alloc(8, psz);
    ASSERT(ps);
    ASSERT_EQ(hbg__sub_write(ps, psz, d, 0xFEEDull, 4, bt, bs, 0), (int)psz);
    j = parse(dump(ps, psz, 1, 0));
    const cJSON *pt = jget(j, "tensors");
    ASSERT_EQ(cJSON_GetArraySize(pt), 3);
    const cJSON *t2 = cJSON_GetArrayItem(pt, 2);
    ASSERT_STREQ(jstr(t2, "addr"), "0x0000000000003000");
    ASSERT_EQ(jnum(t2, "offset"), 0);
    ASSERT(cJSON_GetObjectItemCaseSensitive(t2, "dtype") == NULL);
    ASSERT_EQ(cJSON_GetArraySize(t2), 2);
    cJSON_Delete(j);
    s = dump(ps, psz, 0, 0);
    ASSERT(strstr(s, "  b2  addr 0x3000 +0\n"));
    ASSERT(strstr(s, "(signature in the definition)"));
    free(s);
    free(ps);
  }
  /* a broken inline copy is reported with its own code */
  sub[hbg__sub_size(d, 0) + 24] ^= 1; /* heap_size of the inline copy */
  j = parse(dump(sub, sz, 1, HBG_E_IMG_HASH));
  ASSERT_STREQ(jstr(j, "status"), "HBG_OK");
  ASSERT_STREQ(jstr(jget(j, "definition"), "status"), "HBG_E_IMG_HASH");
  cJSON_Delete(j);
  free(sub);

  /* task window: one ordinary task, one graph task depending on it */
  uint64_t win[64];
  memset(win, 0, sizeof win);
  uint8_t *w = (uint8_t *)win;
  hbg_win_hdr *wh = (hbg_win_hdr *)w;
  hbg_win_task *t0 = (hbg_win_task *)(w + 64);
  t0->kind = HBG_WIN_TASK;
  t0->kernel = HBG_KERNEL_FILL;
  t0->n_tensors = 1;
  t0->off_tensors = sizeof *t0;
  hbg_sub_tensor *st = (hbg_sub_tensor *)(w + 64 + sizeof *t0);
  st->addr = 0x3000;
  st->shape[0] = 8;
  st->strides[0] = 1;
  st->dtype = HBG_DTYPE_F32;
  st->ndim = 1;
  st->mode = HBG_ACCESS_OUT;
  t0->n_scalars = 1;
  t0->off_scalars = sizeof *t0 + sizeof *st;
  t0->size = sizeof *t0 + sizeof *st + 8;
  hbg_win_task *t1 = (hbg_win_task *)(w + 64 + t0->size);
  t1->kind = HBG_WIN_GRAPH;
  t1->n_deps = 1;
  t1->off_deps = sizeof *t1;
  t1->size = sizeof *t1 + 8;
  t1->sub_addr = 0x5000;
  t1->sub_size = 4096;
  t1->def_addr = 0x6000;
  t1->def_size = 8192;
  uint32_t *idx = (uint32_t *)(w + 64 + t0->size + t1->size);
  idx[0] = 64;
  idx[1] = 64 + t0->size;
  wh->magic = HBG_WIN_MAGIC;
  wh->version = HBG_IMG_VERSION;
  wh->n_tasks = 2;
  wh->off_index = 64 + t0->size + t1->size;
  wh->total_size = wh->off_index + 8;
  j = parse(dump(w, wh->total_size, 1, 0));
  ASSERT_STREQ(jstr(j, "kind"), "window");
  const cJSON *tasks = jget(j, "tasks");
  ASSERT_EQ(cJSON_GetArraySize(tasks), 2);
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(tasks, 0), "kernel"), "fill");
  ASSERT_STREQ(jstr(cJSON_GetArrayItem(tasks, 1), "kind"), "graph");
  ASSERT_EQ(cJSON_GetArraySize(jget(cJSON_GetArrayItem(tasks, 1), "deps")), 1);
  cJSON_Delete(j);
  s = dump(w, wh->total_size, 0, 0);
  ASSERT(strstr(s, "window  size"));
  ASSERT(strstr(s, "graph  sub 0x5000"));
  free(s);
  idx[1] = 60;
  s = dump(w, wh->total_size, 0, HBG_E_IMG_ALIGN);
  free(s);

  hbg__def_free(d);
  printf("graph_dump: ok\n");
  return 0;
}
