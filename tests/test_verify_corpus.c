/* One corrupt-window corpus, three device sides: the sim's executor, the
 * cuda backend's launch verifier (against the stand-in CUDA library; rows
 * skipped when it cannot open, a failure where HBG_CUDA_LIB names the
 * stand-in) and the acl backend's (against the stand-in AscendCL library:
 * a failure where HBG_ACL_LIB names one that cannot open). Every case must end with the same status
 * error, the same failing entry and the same failing node everywhere:
 * bad magic, truncation, bad hashes, misaligned tensors, ranges into freed
 * memory or past an allocation, heap blocks out of place, kernel
 * signatures broken in a task or in a Definition's node, an entry writing
 * over an image. The good windows pass before and after, so a cached
 * verdict never hides a corruption and never outlives a repair. */
#include <dlfcn.h>
#include <stdlib.h>

#include "cuda_skip.h"
#include "test_exec_fixture.h"

#define N XG_N
#define NONE UINT32_MAX
#define HOLE (1u << 20)

typedef struct scene {
  xf f;
  hbg__def *d, *bad; /* bad: node 1 breaks its kernel's signature */
  uint64_t def, sub, isub, heap, x, b, y, z, X, dead, guard;
  uint32_t sub_size, isub_size;
} scene;

typedef struct verdict {
  int32_t error;
  uint32_t task, node;
} verdict;

/* ---- opening a backend ---- */

static int scene_open(scene *s, const char *backend, const char *opts) {
  memset(s, 0, sizeof *s);
  int rc = hbg_device_open(backend, opts, &s->f.dev);
  if (rc < 0) {
    printf("  %s: cannot open (%s): rows skipped\n", backend,
           hbg_err_name(rc));
    return rc;
  }
  xf *f = &s->f;
  ASSERT_OK(hbg_dev_queue_create(f->dev, &f->q));
  ASSERT_OK(hbg_dev_mem_alloc(f->dev, sizeof(hbg_dev_status), &f->status));
  s->d = xg_def();
  float x[N], b[N];
  for (uint32_t i = 0; i < N; i++) {
    x[i] = xrandf();
    b[i] = xrandf();
  }
  s->def = xf_upload(f, s->d->image, s->d->size);
  s->x = xf_floats(f, x, N);
  s->b = xf_floats(f, b, N);
  s->y = xf_alloc(f, N * 4);
  s->z = xf_alloc(f, N * 4);
  s->X = xf_alloc(f, N * 4 + 64); /* room for a misaligned x */
  xf_write(f, s->X, x, sizeof x);
  s->heap = xf_alloc(f, s->d->heap_size);
  s->sub = xg_sub(f, s->d, s->x, s->b, s->y, 1.5f, 0, 0, &s->sub_size);
  s->isub = xg_sub(f, s->d, s->x, s->b, s->y, 1.5f, 0, 1, &s->isub_size);
  /* Freed memory: the middle of a freed 1 MiB hole, held open by a guard
   * allocation after it, so the small buffers the cases allocate later
   * never land there. */
  uint64_t hole = xf_alloc(f, HOLE);
  s->guard = xf_alloc(f, 64);
  ASSERT_OK(hbg_dev_mem_free(f->dev, hole));
  s->dead = hole + HOLE / 2;
  return 0;
}

static void scene_close(scene *s) {
  uint64_t fr[] = {s->def, s->x, s->b, s->y,   s->z,
                   s->X,   s->heap, s->sub, s->isub, s->guard};
  for (size_t i = 0; i < HBG__ARRAY_LEN(fr); i++)
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, fr[i]));
  hbg__def_free(s->d);
  hbg__def_free(s->bad);
  xf_close(&s->f);
}

/* ---- building blocks ---- */

/* A Submission written, then changed by edit (optional), then uploaded. */
static uint64_t upload_edited(xf *f, const hbg__def *d, const hbg_tensor *bt,
                              const uint64_t *bs, int inl,
                              void (*edit)(uint8_t *img), uint32_t *size) {
  uint32_t n = hbg__sub_size(d, inl);
  uint8_t *img = aligned_alloc(8, HBG__ALIGN_UP(n, 8));
  ASSERT(img);
  ASSERT_EQ(hbg__sub_write(img, n, d, 42, 0, bt, bs, inl), (int)n);
  if (edit)
    edit(img);
  uint64_t a = xf_upload(f, img, n);
  free(img);
  *size = n;
  return a;
}

static uint64_t upload_img(xf *f, const hbg__def *d, const hbg_tensor *bt,
                           const uint64_t *bs, int inl, uint32_t *size) {
  return upload_edited(f, d, bt, bs, inl, NULL, size);
}

/* A Submission of the scene's graph with boundary i at (addr[i], off[i]),
 * written without the host's checks. */
static uint64_t raw_sub(scene *s, const uint64_t *addr, const uint64_t *off,
                        uint32_t *size) {
  hbg_tensor bt[3];
  for (int i = 0; i < 3; i++)
    bt[i] = xg_vec(addr[i], off[i], N, i == 2 ? HBG_ACCESS_OUT : HBG_ACCESS_IN);
  uint64_t bs = hbg__kernel_f32(1.0f);
  return upload_img(&s->f, s->d, bt, &bs, 0, size);
}

/* The window every case starts from: a COPY x -> z, then the graph. */
typedef struct wspec {
  hbg_tensor cp[2];
  uint32_t ncp, kernel;
  uint64_t sub, def, heap;
  uint32_t sub_size, def_size;
} wspec;

static wspec base_spec(const scene *s, int inl) {
  wspec w = {.cp = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                    xg_vec(s->z, 0, N, HBG_ACCESS_OUT)},
             .ncp = 2,
             .kernel = HBG_KERNEL_COPY,
             .sub = inl ? s->isub : s->sub,
             .sub_size = inl ? s->isub_size : s->sub_size,
             .def = inl ? 0 : s->def,
             .def_size = s->d->size,
             .heap = s->heap};
  return w;
}

static uint64_t build(scene *s, const wspec *w, uint64_t *bytes) {
  wb b;
  wb_init(&b);
  uint32_t t0 = wb_task(&b, w->kernel, w->cp, w->ncp, NULL, 0, NULL, 0);
  wb_graph(&b, w->sub, w->sub_size, w->def, w->def_size, w->heap, &t0, 1);
  return wb_upload(&b, &s->f, bytes);
}

static verdict launch_at(scene *s, uint64_t W, uint64_t bytes) {
  hbg_dev_status st;
  xf_launch(&s->f, W, bytes, &st);
  return (verdict){st.error, st.task, st.node};
}

static verdict launch(scene *s, const wspec *w) {
  uint64_t bytes, W = build(s, w, &bytes);
  verdict v = launch_at(s, W, bytes);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  return v;
}

/* Flip one byte of device memory, launch, put it back. */
static verdict launch_flipped(scene *s, const wspec *w, uint64_t a) {
  uint8_t v, nv;
  xf_read(&s->f, &v, a, 1);
  nv = (uint8_t)(v ^ 0x10);
  xf_write(&s->f, a, &nv, 1);
  verdict r = launch(s, w);
  xf_write(&s->f, a, &v, 1);
  return r;
}

/* ---- the corpus ---- */

typedef verdict (*case_fn)(scene *s);

static verdict c_good(scene *s) {
  wspec w = base_spec(s, 0);
  return launch(s, &w);
}

static verdict c_good_inline(scene *s) {
  wspec w = base_spec(s, 1);
  return launch(s, &w);
}

static verdict c_win_magic(scene *s) {
  wspec w = base_spec(s, 0);
  uint64_t bytes, W = build(s, &w, &bytes);
  uint32_t junk = 0x12345678;
  xf_write(&s->f, W, &junk, 4);
  verdict v = launch_at(s, W, bytes);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  return v;
}

static verdict c_win_truncated(scene *s) {
  wspec w = base_spec(s, 0);
  uint64_t bytes, W = build(s, &w, &bytes);
  verdict v = launch_at(s, W, 16);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  return v;
}

static verdict c_win_freed(scene *s) { return launch_at(s, s->dead, 512); }

static verdict c_win_bad_kind(scene *s) {
  wspec w = base_spec(s, 0);
  w.kernel = HBG_KERNEL__COUNT;
  return launch(s, &w);
}

static verdict c_def_hash(scene *s) {
  wspec w = base_spec(s, 0);
  return launch_flipped(s, &w, s->def + offsetof(hbg_def_hdr, hash));
}

static verdict c_def_body(scene *s) {
  wspec w = base_spec(s, 0);
  return launch_flipped(s, &w, s->def + s->d->size - 8);
}

static verdict c_inline_def_hash(scene *s) {
  wspec w = base_spec(s, 1);
  return launch_flipped(s, &w,
                        s->isub + s->isub_size - s->d->size +
                            offsetof(hbg_def_hdr, hash));
}

static verdict c_sub_hash(scene *s) {
  wspec w = base_spec(s, 0);
  return launch_flipped(s, &w, s->sub + offsetof(hbg_sub_hdr, hash));
}

static verdict c_sub_truncated(scene *s) {
  wspec w = base_spec(s, 0);
  w.sub_size -= 8;
  return launch(s, &w);
}

static verdict c_def_truncated(scene *s) {
  wspec w = base_spec(s, 0);
  w.def_size = 64;
  return launch(s, &w);
}

static verdict c_sub_other_def(scene *s) {
  if (!s->bad)
    s->bad = xg_bad_def();
  hbg_tensor bt[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->y, 0, N, HBG_ACCESS_OUT)};
  uint32_t n;
  uint64_t sub = upload_img(&s->f, s->bad, bt, NULL, 0, &n);
  wspec w = base_spec(s, 0);
  w.sub = sub;
  w.sub_size = n;
  verdict v = launch(s, &w);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, sub));
  return v;
}

static verdict c_task_misaligned(scene *s) {
  wspec w = base_spec(s, 0);
  w.cp[0] = xg_vec(s->X, 2, N, HBG_ACCESS_IN);
  return launch(s, &w);
}

static verdict c_bound_misaligned(scene *s) {
  uint64_t addr[3] = {s->X, s->b, s->y}, off[3] = {2, 0, 0};
  wspec w = base_spec(s, 0);
  w.sub = raw_sub(s, addr, off, &w.sub_size);
  verdict v = launch(s, &w);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, w.sub));
  return v;
}

static verdict c_heap_misaligned(scene *s) {
  wspec w = base_spec(s, 0);
  w.heap += 8;
  return launch(s, &w);
}

static verdict c_heap_freed(scene *s) {
  wspec w = base_spec(s, 0);
  w.heap = s->dead;
  return launch(s, &w);
}

static verdict c_heap_past_end(scene *s) {
  wspec w = base_spec(s, 0);
  w.heap += 64;
  return launch(s, &w);
}

static verdict c_heap_over_input(scene *s) {
  uint64_t HX = xf_alloc(&s->f, N * 4 + s->d->heap_size);
  uint64_t addr[3] = {HX, s->b, s->y}, off[3] = {0, 0, 0};
  wspec w = base_spec(s, 0);
  w.sub = raw_sub(s, addr, off, &w.sub_size);
  w.heap = HX;
  verdict v = launch(s, &w);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, w.sub));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, HX));
  return v;
}

static verdict c_bound_freed(scene *s) {
  uint64_t addr[3] = {s->x, s->b, s->dead}, off[3] = {0, 0, 0};
  wspec w = base_spec(s, 0);
  w.sub = raw_sub(s, addr, off, &w.sub_size);
  verdict v = launch(s, &w);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, w.sub));
  return v;
}

static verdict c_bound_other_alloc(scene *s) {
  uint64_t addr[3] = {s->x, s->b, s->y}, off[3] = {0, 0, 0};
  off[2] = s->z > s->y ? s->z - s->y : 1u << 20;
  wspec w = base_spec(s, 0);
  w.sub = raw_sub(s, addr, off, &w.sub_size);
  verdict v = launch(s, &w);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, w.sub));
  return v;
}

static verdict c_task_freed(scene *s) {
  wspec w = base_spec(s, 0);
  w.cp[1] = xg_vec(s->dead, 0, N, HBG_ACCESS_OUT);
  return launch(s, &w);
}

static verdict c_sub_freed(scene *s) {
  wspec w = base_spec(s, 0);
  w.sub = s->dead;
  return launch(s, &w);
}

static verdict c_def_freed(scene *s) {
  wspec w = base_spec(s, 0);
  w.def = s->dead;
  return launch(s, &w);
}

static verdict c_task_kernel(scene *s) {
  wspec w = base_spec(s, 0);
  w.ncp = 1;
  return launch(s, &w);
}

static verdict c_node_kernel(scene *s) {
  if (!s->bad)
    s->bad = xg_bad_def();
  hbg_tensor bt[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->y, 0, N, HBG_ACCESS_OUT)};
  uint32_t n;
  uint64_t sub = upload_img(&s->f, s->bad, bt, NULL, 1, &n);
  uint64_t heap = xf_alloc(&s->f, s->bad->heap_size);
  wspec w = base_spec(s, 0);
  w.sub = sub;
  w.sub_size = n;
  w.def = 0;
  w.def_size = s->bad->size;
  w.heap = heap;
  verdict v = launch(s, &w);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, heap));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, sub));
  return v;
}

/* The first tensor record of an inline Submission's Definition that
 * matches, edited; both content hashes then made right again, as a
 * hand-edited image would have them. */
static void edit_inline_def(uint8_t *img, int (*match)(const hbg_def_tensor *),
                            void (*edit)(hbg_def_tensor *)) {
  hbg_sub_hdr *sh = (hbg_sub_hdr *)img;
  uint8_t *def = img + sh->off_def;
  hbg_def_hdr *dh = (hbg_def_hdr *)def;
  hbg_def_tensor *t = (hbg_def_tensor *)(def + dh->off_tensors);
  uint32_t i = 0;
  while (i < dh->n_tensors && !match(&t[i]))
    i++;
  ASSERT(i < dh->n_tensors);
  edit(&t[i]);
  dh->hash = 0;
  dh->hash = hbg__hash(def, dh->total_size);
  sh->def_hash = dh->hash;
  sh->hash = 0;
  sh->hash = hbg__hash(img, sh->off_def);
}

/* Node 0 reads x (input-only, exact): its record now writes it. */
static int is_x_exact(const hbg_def_tensor *t) {
  return t->src == HBG_SRC_BOUNDARY_EXACT && t->ref == 0;
}
static void make_write(hbg_def_tensor *t) { t->mode = HBG_ACCESS_INOUT; }
static void read_to_write(uint8_t *img) {
  edit_inline_def(img, is_x_exact, make_write);
}

/* Node 2 writes a view of y: the view now targets x (input-only). */
static int is_out_view(const hbg_def_tensor *t) {
  return t->src == HBG_SRC_BOUNDARY_VIEW && (t->mode & HBG_ACCESS_OUT);
}
static void target_x(hbg_def_tensor *t) { t->ref = 0; }
static void out_to_input(uint8_t *img) {
  edit_inline_def(img, is_out_view, target_x);
}

static verdict launch_edited(scene *s, void (*edit)(uint8_t *img)) {
  hbg_tensor bt[3] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->b, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->y, 0, N, HBG_ACCESS_OUT)};
  uint64_t bs = hbg__kernel_f32(1.5f);
  wspec w = base_spec(s, 1);
  w.sub = upload_edited(&s->f, s->d, bt, &bs, 1, edit, &w.sub_size);
  verdict v = launch(s, &w);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, w.sub));
  return v;
}

static verdict c_def_writes_input(scene *s) {
  return launch_edited(s, read_to_write);
}

static verdict c_def_out_to_input(scene *s) {
  return launch_edited(s, out_to_input);
}

static verdict c_task_writes_def(scene *s) {
  wspec w = base_spec(s, 0);
  ASSERT(s->d->size >= N * 4);
  w.cp[1] = xg_vec(s->def, 0, N, HBG_ACCESS_OUT);
  return launch(s, &w);
}

static const struct {
  const char *name;
  case_fn fn;
  verdict want;
} corpus[] = {
    {"good", c_good, {0, NONE, NONE}},
    {"good, inline Definition", c_good_inline, {0, NONE, NONE}},
    {"window: bad magic", c_win_magic, {HBG_E_IMG_MAGIC, NONE, NONE}},
    {"window: truncated", c_win_truncated, {HBG_E_IMG_TRUNCATED, NONE, NONE}},
    {"window: in freed memory", c_win_freed, {HBG_E_RANGE, NONE, NONE}},
    {"window: bad kernel id", c_win_bad_kind, {HBG_E_IMG_FIELD, NONE, NONE}},
    {"Definition: bad hash", c_def_hash, {HBG_E_IMG_HASH, 1, NONE}},
    {"good (the Definition's verdict cached)", c_good, {0, NONE, NONE}},
    {"Definition: body changed", c_def_body, {HBG_E_IMG_FIELD, 1, NONE}},
    {"inline Definition: bad hash", c_inline_def_hash,
     {HBG_E_IMG_HASH, 1, NONE}},
    {"Definition: truncated", c_def_truncated, {HBG_E_IMG_TRUNCATED, 1, NONE}},
    {"Definition: in freed memory", c_def_freed, {HBG_E_RANGE, 1, NONE}},
    {"Submission: bad hash", c_sub_hash, {HBG_E_IMG_HASH, 1, NONE}},
    {"Submission: truncated", c_sub_truncated,
     {HBG_E_IMG_TRUNCATED, 1, NONE}},
    {"Submission: in freed memory", c_sub_freed, {HBG_E_RANGE, 1, NONE}},
    {"Submission: another Definition", c_sub_other_def,
     {HBG_E_IMG_DEF, 1, NONE}},
    {"task: misaligned tensor", c_task_misaligned,
     {HBG_E_IMG_TENSOR_ALIGN, NONE, NONE}},
    {"task: tensor in freed memory", c_task_freed, {HBG_E_RANGE, 0, NONE}},
    {"task: kernel signature", c_task_kernel, {HBG_E_KERNEL, 0, NONE}},
    {"task: writes over the Definition", c_task_writes_def,
     {HBG_E_RANGE, 0, NONE}},
    {"boundary: misaligned", c_bound_misaligned,
     {HBG_E_IMG_TENSOR_ALIGN, 1, 0}},
    {"boundary: in freed memory", c_bound_freed, {HBG_E_RANGE, 1, NONE}},
    {"boundary: offset into another allocation", c_bound_other_alloc,
     {HBG_E_RANGE, 1, NONE}},
    {"heap: misaligned", c_heap_misaligned,
     {HBG_E_IMG_TENSOR_ALIGN, 1, NONE}},
    {"heap: in freed memory", c_heap_freed, {HBG_E_RANGE, 1, NONE}},
    {"heap: past its allocation", c_heap_past_end, {HBG_E_RANGE, 1, NONE}},
    {"heap: over a boundary input", c_heap_over_input, {HBG_E_RANGE, 1, NONE}},
    {"node: kernel signature", c_node_kernel, {HBG_E_KERNEL, 1, 1}},
    {"Definition: a node writes an input-only boundary tensor",
     c_def_writes_input, {HBG_E_IMG_BOUNDARY_WRITE, 1, NONE}},
    {"Definition: an out view retargeted to an input-only boundary tensor",
     c_def_out_to_input, {HBG_E_IMG_VIEW_WRITE, 1, NONE}},
    {"good again", c_good, {0, NONE, NONE}},
    {"good again, inline Definition", c_good_inline, {0, NONE, NONE}},
};

static int failures;

static int run_backend(const char *backend, const char *opts) {
  scene s;
  printf("%s\n", backend);
  if (scene_open(&s, backend, opts) < 0)
    return 0;
  for (size_t i = 0; i < HBG__ARRAY_LEN(corpus); i++) {
    verdict got = corpus[i].fn(&s), want = corpus[i].want;
    printf("  %-42s %-24s task %d node %d\n", corpus[i].name,
           hbg_err_name(got.error), (int)got.task, (int)got.node);
    if (got.error != want.error || got.task != want.task ||
        got.node != want.node) {
      fprintf(stderr, "%s, %s: %s task %d node %d, want %s task %d node %d\n",
              backend, corpus[i].name, hbg_err_name(got.error), (int)got.task,
              (int)got.node, hbg_err_name(want.error), (int)want.task,
              (int)want.node);
      failures++;
    }
  }
  scene_close(&s);
  return 1;
}

int main(void) {
  (void)xf_open; /* the fixture's sim-only opener and host reference */
  (void)xg_ref;
  ASSERT_EQ(run_backend("sim", "workers=2"), 1);
  int more = run_backend("cuda", "exec=verify");
  if (!more && cuda_standin())
    T_FAIL("the cuda stand-in (HBG_CUDA_LIB=%s) did not open: its rows "
           "never skip",
           getenv("HBG_CUDA_LIB"));
  /* Hold the stand-in AscendCL library loaded past the device's close, as
   * the acl tests do: its bookkeeping stays reachable for the leak checker. */
  const char *acl = getenv("HBG_ACL_LIB");
  if (acl && *acl)
    (void)dlopen(acl, RTLD_NOW | RTLD_LOCAL);
  const int acl_ran = run_backend("acl", NULL);
  if (!acl_ran && acl && *acl)
    T_FAIL("the acl stand-in (HBG_ACL_LIB=%s) did not open: its rows "
           "never skip",
           acl);
  more += acl_ran;
  ASSERT_EQ(failures, 0);
  printf("verify_corpus: ok (sim + %d verifying backend(s))\n", more);
  return 0;
}
