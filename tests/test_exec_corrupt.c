/* Corrupted device images: bit flips in the Definition, the Submission and
 * the task window after upload, and kernels that overwrite a Definition
 * whose verdict is cached. Every case ends with a status (an error for the
 * hashed images), never a crash or a hang; the repaired images run again. */
#include <pthread.h>
#include <stddef.h>

#include "test_exec_fixture.h"

#define N XG_N

typedef struct scene {
  xf f;
  hbg__def *d;
  uint64_t def, sub, isub, heap, x, b, y, z;
  uint32_t sub_size, isub_size;
  uint8_t *def_img, *sub_img, *isub_img;
  float want[N];
} scene;

static uint8_t *snapshot(xf *f, uint64_t a, uint32_t n) {
  uint8_t *p = malloc(n);
  ASSERT(p);
  xf_read(f, p, a, n);
  return p;
}

static void scene_open(scene *s) {
  xf_open(&s->f, "workers=2");
  s->d = xg_def();
  float x[N], b[N];
  for (uint32_t i = 0; i < N; i++) {
    x[i] = xrandf();
    b[i] = xrandf();
  }
  s->def = xf_upload(&s->f, s->d->image, s->d->size);
  s->x = xf_floats(&s->f, x, N);
  s->b = xf_floats(&s->f, b, N);
  s->y = xf_alloc(&s->f, N * 4);
  s->z = xf_alloc(&s->f, N * 4);
  s->heap = xf_alloc(&s->f, s->d->heap_size);
  s->sub = xg_sub(&s->f, s->d, s->x, s->b, s->y, 1.5f, 0, 0, &s->sub_size);
  s->isub = xg_sub(&s->f, s->d, s->x, s->b, s->y, 1.5f, 0, 1, &s->isub_size);
  s->def_img = snapshot(&s->f, s->def, s->d->size);
  s->sub_img = snapshot(&s->f, s->sub, s->sub_size);
  s->isub_img = snapshot(&s->f, s->isub, s->isub_size);
  xg_ref(x, b, 1.5f, s->want);
}

static void scene_close(scene *s) {
  uint64_t fr[] = {s->def, s->x, s->b, s->y, s->z, s->heap, s->sub, s->isub};
  for (size_t i = 0; i < HBG__ARRAY_LEN(fr); i++)
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, fr[i]));
  free(s->def_img);
  free(s->sub_img);
  free(s->isub_img);
  hbg__def_free(s->d);
  xf_close(&s->f);
}

/* Window: a COPY, then the graph (inline Definition or retained). They
 * touch different outputs, so a flip that drops the dependency does not
 * make the two race. */
static uint64_t scene_window(scene *s, int inl, uint64_t *bytes) {
  wb w;
  wb_init(&w);
  hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->z, 0, N, HBG_ACCESS_OUT)};
  uint32_t t0 = wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
  if (inl)
    wb_graph(&w, s->isub, s->isub_size, 0, s->d->size, s->heap, &t0, 1);
  else
    wb_graph(&w, s->sub, s->sub_size, s->def, s->d->size, s->heap, &t0, 1);
  return wb_upload(&w, &s->f, bytes);
}

static void expect_good(scene *s, uint64_t W, uint64_t wbytes) {
  hbg_dev_status st;
  float zero[N] = {0}, got[N];
  xf_write(&s->f, s->y, zero, sizeof zero);
  ASSERT_OK(xf_launch(&s->f, W, wbytes, &st));
  ASSERT_EQ(st.tasks_done, 2);
  xf_read(&s->f, got, s->y, sizeof got);
  for (uint32_t i = 0; i < N; i++)
    if (memcmp(&got[i], &s->want[i], 4))
      T_FAIL("y[%u] %.9g vs %.9g (status %s)", i, (double)got[i],
             (double)s->want[i], hbg_err_name(st.error));
}

static int is_img_err(int rc) {
  return rc <= HBG_E_IMG_TRUNCATED && rc >= HBG_E_IMG_VIEW_WRITE;
}

/* Flip bit `bit` of byte `off` of the image at a (host copy img). */
static void flip(xf *f, uint64_t a, uint8_t *img, uint32_t off, int bit) {
  uint8_t v = (uint8_t)(img[off] ^ (1u << bit));
  xf_write(f, a + off, &v, 1);
}

static void restore(xf *f, uint64_t a, const uint8_t *img, uint32_t off) {
  xf_write(f, a + off, &img[off], 1);
}

static void t_hashed_flips(scene *s) {
  struct {
    uint64_t addr;
    uint8_t *img;
    uint32_t size;
    int inl;
  } targets[] = {
      {s->def, s->def_img, s->d->size, 0},
      {s->sub, s->sub_img, s->sub_size, 0},
      {s->isub, s->isub_img, s->isub_size, 1},
  };
  uint64_t Wb[2], W[2];
  W[0] = scene_window(s, 0, &Wb[0]);
  W[1] = scene_window(s, 1, &Wb[1]);
  expect_good(s, W[0], Wb[0]);
  expect_good(s, W[1], Wb[1]);
  uint64_t hist[64] = {0};
  for (size_t t = 0; t < HBG__ARRAY_LEN(targets); t++) {
    uint32_t size = targets[t].size;
    int inl = targets[t].inl;
    /* every bit of the header, then random bits */
    uint32_t hdr =
        t == 0 ? (uint32_t)sizeof(hbg_def_hdr) : (uint32_t)sizeof(hbg_sub_hdr);
    for (uint32_t k = 0; k < hdr * 8 + 300; k++) {
      uint32_t off, bit;
      if (k < hdr * 8) {
        off = k / 8;
        bit = k % 8;
      } else {
        xrand_state = xrand_state * 1664525u + 1013904223u;
        off = (xrand_state >> 8) % size;
        bit = xrand_state % 8;
      }
      if (off >= size)
        continue;
      flip(&s->f, targets[t].addr, targets[t].img, off, (int)bit);
      hbg_dev_status st;
      int rc = xf_launch(&s->f, W[inl], Wb[inl], &st);
      if (!is_img_err(rc))
        T_FAIL("target %zu byte %u bit %u: %s", t, off, bit, hbg_err_name(rc));
      ASSERT_EQ(st.task, 1);
      ASSERT_EQ(st.node, UINT32_MAX);
      ASSERT_EQ(st.tasks_done, 0);
      hist[-rc]++;
      restore(&s->f, targets[t].addr, targets[t].img, off);
    }
    expect_good(s, W[inl], Wb[inl]);
  }
  ASSERT(hist[-HBG_E_IMG_HASH] > 0);
  printf("flip errors:");
  for (int i = 0; i < 64; i++)
    if (hist[i])
      printf(" %s=%llu", hbg_err_name(-i), (unsigned long long)hist[i]);
  printf("\n");
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W[0]));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W[1]));
}

/* The window carries no hash: any flip may run, fail or do something else,
 * but must report a status. Images are re-uploaded after each run since a
 * flipped address can point a kernel at them. */
static void t_window_flips(scene *s) {
  for (int inl = 0; inl < 2; inl++) {
    uint64_t wbytes, W = scene_window(s, inl, &wbytes);
    uint8_t *img = snapshot(&s->f, W, (uint32_t)wbytes);
    uint32_t errs = 0, oks = 0;
    for (uint32_t k = 0; k < wbytes * 8; k += 5) {
      flip(&s->f, W, img, k / 8, (int)(k % 8));
      hbg_dev_status st;
      int rc = xf_launch(&s->f, W, wbytes, &st);
      if (rc)
        errs++;
      else
        oks++;
      restore(&s->f, W, img, k / 8);
      xf_write(&s->f, s->def, s->def_img, s->d->size);
      xf_write(&s->f, s->sub, s->sub_img, s->sub_size);
      xf_write(&s->f, s->isub, s->isub_img, s->isub_size);
    }
    ASSERT(errs > 0);
    expect_good(s, W, wbytes);
    free(img);
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  }
}

/* Kernels writing over a Definition whose verdict is cached (no host write
 * tells the cache): the verdict is dropped, the next launch verifies the
 * Definition again and reports what the kernel did to it. */
static void t_self_modify(scene *s) {
  uint64_t wbytes, W = scene_window(s, 0, &wbytes);
  expect_good(s, W, wbytes);
  uint32_t body = s->d->size - (uint32_t)sizeof(hbg_def_hdr);
  uint32_t counts[2] = {0, 0};
  for (int k = 0; k < 200; k++) {
    xrand_state = xrand_state * 1664525u + 1013904223u;
    uint32_t r = xrand_state;
    uint32_t pat = k < 4 ? (uint32_t[]){0, 1, 0xffffffffu, 0x40400000u}[k]
                         : (k % 3 ? r % 97 : r);
    /* a FILL over part of the Definition, from a separate launch */
    uint32_t words = (k % 2 ? body : (r >> 8) % body) / 4;
    if (words == 0)
      words = 1;
    uint32_t first = (uint32_t)sizeof(hbg_def_hdr) / 4 +
                     (k % 2 ? 0 : (r >> 4) % (body / 4 - words + 1));
    if (k % 5 == 4)
      first = 0; /* the header too */
    hbg_tensor t = xg_vec(s->def, (uint64_t)first * 4, words, HBG_ACCESS_OUT);
    uint64_t sc = pat;
    wb w;
    wb_init(&w);
    wb_task(&w, HBG_KERNEL_FILL, &t, 1, &sc, 1, NULL, 0);
    uint64_t fb, F = wb_upload(&w, &s->f, &fb);
    hbg_dev_status st;
    ASSERT_OK(xf_launch(&s->f, F, fb, &st));
    ASSERT_OK(hbg_dev_mem_free(s->f.dev, F));
    int rc = xf_launch(&s->f, W, wbytes, &st);
    counts[rc != 0]++;
    if (rc) {
      ASSERT(is_img_err(rc));
      ASSERT_EQ(st.task, 1);
      ASSERT_EQ(st.tasks_done, 0);
    }
    xf_write(&s->f, s->def, s->def_img, s->d->size);
    expect_good(s, W, wbytes);
  }
  printf("self-modified Definition: %u ran, %u failed\n", counts[0], counts[1]);
  ASSERT_EQ(counts[0], 0);

  /* a launch whose kernels would write over its own images is refused
   * before anything runs: an ordinary task over the Definition, the graph
   * itself over its Submission (a boundary output placed there), and the
   * status over the Definition */
  hbg_dev_status st;
  wb w;
  wb_init(&w);
  hbg_tensor t = xg_vec(s->def, 64, 4, HBG_ACCESS_OUT);
  uint64_t one = 0;
  wb_task(&w, HBG_KERNEL_FILL, &t, 1, &one, 1, NULL, 0);
  wb_graph(&w, s->sub, s->sub_size, s->def, s->d->size, s->heap, NULL, 0);
  uint64_t fb, F = wb_upload(&w, &s->f, &fb);
  ASSERT_ERR(xf_launch(&s->f, F, fb, &st), HBG_E_RANGE);
  ASSERT_EQ(st.task, 0);
  ASSERT_EQ(st.tasks_done, 0);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, F));
  expect_good(s, W, wbytes);

  uint64_t big = xf_alloc(&s->f, 4096);
  uint32_t ss;
  uint64_t S2 = xg_sub(&s->f, s->d, s->x, s->b, big, 1.0f, 0, 0, &ss);
  uint8_t *img = snapshot(&s->f, S2, ss);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, S2));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, big));
  S2 = xf_alloc(&s->f, 4096);
  /* point y (boundary 2) at the Submission's own memory, fix its hash */
  hbg_sub_hdr sh;
  memcpy(&sh, img, sizeof sh);
  ASSERT_EQ(sh.n_tensors, 3);
  hbg_sub_bind y;
  const size_t yoff = sh.off_tensors + 2 * sizeof y;
  memcpy(&y, img + yoff, sizeof y);
  ASSERT_UEQ(y.addr, big);
  y.addr = S2;
  y.offset = 0;
  memcpy(img + yoff, &y, sizeof y);
  uint64_t h = hbg__hash_skip(img, ss, offsetof(hbg_sub_hdr, hash));
  memcpy(img + offsetof(hbg_sub_hdr, hash), &h, 8);
  xf_write(&s->f, S2, img, ss);
  wb_init(&w);
  wb_graph(&w, S2, ss, s->def, s->d->size, s->heap, NULL, 0);
  F = wb_upload(&w, &s->f, &fb);
  ASSERT_ERR(xf_launch(&s->f, F, fb, &st), HBG_E_RANGE);
  ASSERT_EQ(st.task, 0);
  /* y at an offset whose extent (from the Definition's signature) runs
   * past the end of its buffer */
  y.addr = s->y;
  y.offset = 8;
  memcpy(img + yoff, &y, sizeof y);
  h = hbg__hash_skip(img, ss, offsetof(hbg_sub_hdr, hash));
  memcpy(img + offsetof(hbg_sub_hdr, hash), &h, 8);
  xf_write(&s->f, S2, img, ss);
  ASSERT_ERR(xf_launch(&s->f, F, fb, &st), HBG_E_RANGE);
  ASSERT_EQ(st.task, 0);
  /* y at address 0: refused by the validator, nothing runs */
  y.addr = 0;
  y.offset = s->y;
  memcpy(img + yoff, &y, sizeof y);
  h = hbg__hash_skip(img, ss, offsetof(hbg_sub_hdr, hash));
  memcpy(img + offsetof(hbg_sub_hdr, hash), &h, 8);
  xf_write(&s->f, S2, img, ss);
  ASSERT_ERR(xf_launch(&s->f, F, fb, &st), HBG_E_IMG_FIELD);
  ASSERT_EQ(st.task, 0);
  ASSERT_EQ(st.tasks_done, 0);
  free(img);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, F));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, S2));

  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = W,
                           .window_bytes = wbytes,
                           .status = s->def + 128};
  ASSERT_OK(hbg_dev_launch(s->f.dev, s->f.q, &l));
  ASSERT_OK(hbg_dev_queue_sync(s->f.dev, s->f.q));
  xf_read(&s->f, &st, s->def + 128, sizeof st);
  ASSERT_EQ(st.error, HBG_E_RANGE);
  ASSERT_EQ(st.task, UINT32_MAX);
  /* the status landed in the Definition: it is verified (and refused) */
  ASSERT(is_img_err(xf_launch(&s->f, W, wbytes, &st)));
  xf_write(&s->f, s->def, s->def_img, s->d->size);
  expect_good(s, W, wbytes);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
}

/* The cache: a verified Definition is not verified again until the host
 * writes or frees its memory. */
static void t_cache(scene *s) {
  uint64_t wbytes, W = scene_window(s, 0, &wbytes);
  hbg_dev_status st;
  expect_good(s, W, wbytes);
  ASSERT_OK(xf_launch(&s->f, W, wbytes, &st));
  ASSERT_UEQ(st.defs_verified, 0);
  xf_write(&s->f, s->def + 200, s->def_img + 200, 8);
  ASSERT_OK(xf_launch(&s->f, W, wbytes, &st));
  ASSERT_UEQ(st.defs_verified, 1);
  ASSERT_OK(xf_launch(&s->f, W, wbytes, &st));
  ASSERT_UEQ(st.defs_verified, 0);
  /* a write next to it (a different allocation) keeps the verdict */
  float x[N];
  xf_read(&s->f, x, s->x, sizeof x);
  xf_write(&s->f, s->x, x, sizeof x);
  ASSERT_OK(xf_launch(&s->f, W, wbytes, &st));
  ASSERT_UEQ(st.defs_verified, 0);
  /* free and allocate again: the verdict is gone even if the bytes and the
   * address are the same */
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, s->def));
  s->def = xf_alloc(&s->f, s->d->size);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  W = scene_window(s, 0, &wbytes);
  int rc = xf_launch(&s->f, W, wbytes, &st);
  if (rc == 0)
    ASSERT_UEQ(st.defs_verified, 1);
  xf_write(&s->f, s->def, s->def_img, s->d->size);
  ASSERT_OK(xf_launch(&s->f, W, wbytes, &st));
  ASSERT_UEQ(st.defs_verified, 1);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
}

/* Invalidations from another thread while launches run. */
typedef struct writer {
  scene *s;
  uint64_t scratch;
  volatile int stop;
  pthread_mutex_t mu;
} writer;

static void *writer_main(void *arg) {
  writer *w = arg;
  uint8_t buf[256];
  memset(buf, 1, sizeof buf);
  for (;;) {
    pthread_mutex_lock(&w->mu);
    int stop = w->stop;
    pthread_mutex_unlock(&w->mu);
    if (stop)
      break;
    xf_write(&w->s->f, w->scratch, buf, sizeof buf);
  }
  return NULL;
}

static void t_concurrent_invalidate(scene *s) {
  writer w = {.s = s, .scratch = xf_alloc(&s->f, 256)};
  pthread_mutex_init(&w.mu, NULL);
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, writer_main, &w), 0);
  uint64_t wbytes[2], W[2];
  W[0] = scene_window(s, 0, &wbytes[0]);
  W[1] = scene_window(s, 1, &wbytes[1]);
  for (int i = 0; i < 100; i++)
    expect_good(s, W[i % 2], wbytes[i % 2]);
  pthread_mutex_lock(&w.mu);
  w.stop = 1;
  pthread_mutex_unlock(&w.mu);
  pthread_join(th, NULL);
  pthread_mutex_destroy(&w.mu);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W[0]));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W[1]));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, w.scratch));
}

/* A Submission of the scene's graph with boundary i at (addr[i], off[i]),
 * written without the host's checks: what a corrupted or hostile host
 * could upload. */
static uint64_t raw_sub(scene *s, const uint64_t *addr, const uint64_t *off,
                        uint32_t *size) {
  hbg_tensor bt[3];
  for (int i = 0; i < 3; i++)
    bt[i] = xg_vec(addr[i], off[i], N, i == 2 ? HBG_ACCESS_OUT : HBG_ACCESS_IN);
  uint64_t bs = hbg__kernel_f32(1.0f);
  uint32_t n = hbg__sub_size(s->d, 0);
  uint8_t *img = aligned_alloc(8, HBG__ALIGN_UP(n, 8));
  ASSERT(img);
  ASSERT_EQ(hbg__sub_write(img, n, s->d, 42, 0, bt, &bs, 0), (int)n);
  uint64_t a = xf_upload(&s->f, img, n);
  free(img);
  *size = n;
  return a;
}

/* One graph entry (task 0): its status. */
static int launch_graph(scene *s, uint64_t sub, uint32_t sub_size,
                        uint64_t heap, hbg_dev_status *st) {
  wb w;
  wb_init(&w);
  wb_graph(&w, sub, sub_size, s->def, s->d->size, heap, NULL, 0);
  uint64_t bytes, W = wb_upload(&w, &s->f, &bytes);
  int rc = xf_launch(&s->f, W, bytes, st);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  return rc;
}

/* Tensors placed where they must not be: element 0 misaligned, a boundary
 * offset that carries it into another allocation, a heap block over a
 * boundary input, a task writing over the window. Each is refused before
 * any kernel runs, with the entry named. */
static void t_placement(scene *s) {
  hbg_dev_status st;
  uint32_t n;
  /* x with room to spare, so that offset 2 stays inside its allocation */
  uint64_t X = xf_alloc(&s->f, N * 4 + 64);
  float x[N];
  xf_read(&s->f, x, s->x, sizeof x);
  xf_write(&s->f, X, x, sizeof x);
  uint64_t addr[3] = {X, s->b, s->y}, off[3] = {0, 0, 0};
  uint64_t sub = raw_sub(s, addr, off, &n);
  ASSERT_OK(launch_graph(s, sub, n, s->heap, &st));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, sub));

  off[0] = 2; /* f32 element 0 at byte offset 2: a mutated Submission */
  sub = raw_sub(s, addr, off, &n);
  ASSERT_ERR(launch_graph(s, sub, n, s->heap, &st), HBG_E_IMG_TENSOR_ALIGN);
  ASSERT_EQ(st.task, 0);
  ASSERT_EQ(st.node, 0); /* x's first reader */
  ASSERT_UEQ(st.nodes_done, 0);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, sub));
  off[0] = 0;

  /* y's offset lands in z, another live allocation */
  ASSERT(s->z > s->y);
  off[2] = s->z - s->y;
  sub = raw_sub(s, addr, off, &n);
  ASSERT_ERR(launch_graph(s, sub, n, s->heap, &st), HBG_E_RANGE);
  ASSERT_EQ(st.task, 0);
  ASSERT_UEQ(st.nodes_done, 0);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, sub));
  off[2] = 0;

  /* the heap block over the graph's own input x; next to it is fine */
  uint64_t HX = xf_alloc(&s->f, N * 4 + s->d->heap_size);
  xf_write(&s->f, HX, x, sizeof x);
  addr[0] = HX;
  sub = raw_sub(s, addr, off, &n);
  ASSERT_ERR(launch_graph(s, sub, n, HX, &st), HBG_E_RANGE);
  ASSERT_EQ(st.task, 0);
  ASSERT_UEQ(st.nodes_done, 0);
  ASSERT_OK(launch_graph(s, sub, n, HX + N * 4, &st));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, sub));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, HX));

  /* an ordinary task (1) whose output is the window itself */
  uint64_t W = xf_alloc(&s->f, 4096);
  wb w;
  wb_init(&w);
  hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->z, 0, N, HBG_ACCESS_OUT)};
  wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
  cp[1] = xg_vec(W, 0, N, HBG_ACCESS_OUT);
  wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
  uint64_t bytes, tmp = wb_upload(&w, &s->f, &bytes);
  uint8_t img[4096];
  ASSERT(bytes <= sizeof img);
  xf_read(&s->f, img, tmp, bytes);
  xf_write(&s->f, W, img, bytes);
  ASSERT_ERR(xf_launch(&s->f, W, bytes, &st), HBG_E_RANGE);
  ASSERT_EQ(st.task, 1);
  ASSERT_UEQ(st.nodes_done, 0);
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, tmp));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, X));
}

/* A Definition whose node 1 breaks its kernel's signature (scale without
 * its scalar): the status names the entry and the node. */
static void t_bad_node_located(scene *s) {
  hbg__def *d = xg_bad_def();
  hbg_tensor rb[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->y, 0, N, HBG_ACCESS_OUT)};
  uint32_t n = hbg__sub_size(d, 1);
  uint8_t *img = aligned_alloc(8, HBG__ALIGN_UP(n, 8));
  ASSERT(img);
  ASSERT_EQ(hbg__sub_write(img, n, d, 43, 0, rb, NULL, 1), (int)n);
  uint64_t sub = xf_upload(&s->f, img, n);
  free(img);
  uint64_t heap = xf_alloc(&s->f, d->heap_size);
  wb w;
  wb_init(&w);
  hbg_tensor cp[2] = {xg_vec(s->x, 0, N, HBG_ACCESS_IN),
                      xg_vec(s->z, 0, N, HBG_ACCESS_OUT)};
  wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, NULL, 0);
  wb_graph(&w, sub, n, 0, d->size, heap, NULL, 0);
  uint64_t bytes, W = wb_upload(&w, &s->f, &bytes);
  hbg_dev_status st;
  for (int k = 0; k < 2; k++) { /* the failed verdict is not cached */
    ASSERT_ERR(xf_launch(&s->f, W, bytes, &st), HBG_E_KERNEL);
    ASSERT_EQ(st.task, 1);
    ASSERT_EQ(st.node, 1);
  }
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, W));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, heap));
  ASSERT_OK(hbg_dev_mem_free(s->f.dev, sub));
  hbg__def_free(d);
}

int main(void) {
  scene s;
  scene_open(&s);
  t_cache(&s);
  t_hashed_flips(&s);
  t_window_flips(&s);
  t_self_modify(&s);
  t_concurrent_invalidate(&s);
  t_placement(&s);
  t_bad_node_located(&s);
  scene_close(&s);
  printf("exec_corrupt: ok\n");
  return 0;
}
