/* cuda backend, launch: the device verifies the task window and every image
 * it references, in queue order, and writes an hbg_dev_status the host
 * reads back after an event recorded behind the launch. Crafted windows in
 * both layouts the upload policies produce (Submissions with the Definition
 * inline in their own buffers; Submissions inside the window with one
 * resident Definition), then one broken image per case. Skips (77) without
 * a GPU. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "cuda_skip.h"
#include "test.h"

#define N 64u /* f32 elements per boundary tensor */
#define WCAP 65536u

static int quiet;

typedef struct fx {
  hbg_device *d;
  hbg_dev_queue *q;
  hbg_dev_event *ev;
  hbg_devptr x, bias, y, heap, status, status2, win, dead;
  hbg_tensor bt[3], bt_half[3];
  uint64_t scalar;
  hbg__def *def, *half; /* half: same body, boundary of N/2 elements */
  uint8_t *pin;         /* pinned staging of the window */
} fx;

typedef struct win {
  uint8_t *p;
  uint32_t len, n;
  uint32_t idx[16];
} win;

static void layer_boundary(hbg_tensor bt[3], const fx *f, uint32_t n) {
  uint32_t dims[1] = {n};
  ASSERT_OK(hbg_tensor_contig(&bt[0], f->x, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_IN));
  ASSERT_OK(hbg_tensor_contig(&bt[1], f->bias, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_IN));
  ASSERT_OK(hbg_tensor_contig(&bt[2], f->y, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_OUT));
}

/* y = (x + bias) * s, through one tensor in the graph's heap. */
static hbg__def *record_layer(const hbg_tensor bt[3], const uint64_t *s,
                              uint32_t n) {
  hbg_recorder *r = NULL;
  ASSERT_OK(hbg__rec_begin(bt, 3, s, 1, &r));
  uint32_t dims[1] = {n};
  hbg_tensor t;
  ASSERT_OK(hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_OUT));
  hbg_tensor a0[3] = {bt[0], bt[1], t};
  hbg_task k0 = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a0};
  ASSERT_OK(hbg_record_task(r, &k0, NULL));
  t = a0[2];
  t.mode = HBG_ACCESS_IN;
  hbg_tensor a1[2] = {t, bt[2]};
  hbg_scalar sc = {.kind = HBG_SCALAR_BOUNDARY, .index = 0};
  hbg_task k1 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a1,
                 .n_scalars = 1, .scalars = &sc};
  ASSERT_OK(hbg_record_task(r, &k1, NULL));
  hbg__def *def = NULL;
  ASSERT_OK(hbg__rec_finish(r, &def));
  ASSERT(def->heap_size > 0);
  return def;
}

static void fx_init(fx *f) {
  memset(f, 0, sizeof *f);
  ASSERT_OK(hbg_device_open("cuda", "exec=verify", &f->d));
  ASSERT_OK(hbg_dev_queue_create(f->d, &f->q));
  ASSERT_OK(hbg_dev_event_create(f->d, &f->ev));
  ASSERT_OK(hbg_dev_mem_alloc(f->d, N * 4, &f->x));
  ASSERT_OK(hbg_dev_mem_alloc(f->d, N * 4, &f->bias));
  ASSERT_OK(hbg_dev_mem_alloc(f->d, N * 4, &f->y));
  ASSERT_OK(hbg_dev_mem_alloc(f->d, 1u << 16, &f->heap));
  ASSERT_OK(hbg_dev_mem_alloc(f->d, sizeof(hbg_dev_status), &f->status));
  ASSERT_OK(hbg_dev_mem_alloc(f->d, sizeof(hbg_dev_status), &f->status2));
  ASSERT_OK(hbg_dev_mem_alloc(f->d, WCAP, &f->win));
  /* An address no allocation holds. Not one freed here: a GPU's allocator
   * hands a freed address out again to the next allocation (seen on an
   * H200: the Submissions uploaded next landed on it). */
  f->dead = f->win + ((uint64_t)1 << 40);
  ASSERT_OK(hbg_dev_host_alloc(f->d, WCAP, (void **)&f->pin));
  f->scalar = 0x3f800000u;
  layer_boundary(f->bt, f, N);
  layer_boundary(f->bt_half, f, N / 2);
  f->def = record_layer(f->bt, &f->scalar, N);
  f->half = record_layer(f->bt_half, &f->scalar, N / 2);
  ASSERT(f->def->hash != f->half->hash);
  ASSERT_UEQ(f->def->size, f->half->size); /* shapes only differ */
}

static void fx_fini(fx *f) {
  hbg__def_free(f->def);
  hbg__def_free(f->half);
  ASSERT_OK(hbg_dev_host_free(f->d, f->pin));
  hbg_devptr bufs[] = {f->x, f->bias, f->y, f->heap, f->status, f->status2,
                       f->win};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    ASSERT_OK(hbg_dev_mem_free(f->d, bufs[i]));
  ASSERT_OK(hbg_dev_event_destroy(f->d, f->ev));
  ASSERT_OK(hbg_dev_queue_destroy(f->d, f->q));
  hbg_dev_stats s;
  ASSERT_OK(hbg_dev_stats_get(f->d, &s));
  ASSERT_UEQ(s.mem_in_use, 0);
  hbg_device_close(f->d);
}

/* ---- window builder (the layout hbg_bind_launch produces) ---- */

static void win_init(win *w) {
  w->p = aligned_alloc(64, WCAP);
  ASSERT(w->p);
  memset(w->p, 0, WCAP);
  w->len = sizeof(hbg_win_hdr);
  w->n = 0;
}

static hbg_win_task *win_entry(win *w, uint32_t size) {
  ASSERT(w->len + size + 64 <= WCAP && w->n < 16);
  w->idx[w->n++] = w->len;
  hbg_win_task *e = (hbg_win_task *)(w->p + w->len);
  w->len += size;
  return e;
}

static hbg_win_task *win_graph(win *w, hbg_devptr sub, uint32_t sub_size,
                               hbg_devptr def, uint32_t def_size,
                               hbg_devptr heap) {
  hbg_win_task *e = win_entry(w, sizeof *e);
  e->kind = HBG_WIN_GRAPH;
  e->size = sizeof *e;
  e->off_deps = sizeof *e;
  e->sub_addr = sub;
  e->sub_size = sub_size;
  e->def_addr = def;
  e->def_size = def_size;
  e->heap_addr = heap;
  return e;
}

/* Coalesced layout: the Submission follows its entry inside the window. */
static void win_graph_inside(win *w, const fx *f, const hbg__def *def,
                             const hbg_tensor *bt, hbg_devptr def_dev,
                             uint32_t occ) {
  uint32_t sub_size = hbg__sub_size(def, 0);
  hbg_win_task *e = win_graph(w, 0, sub_size, def_dev, def->size,
                              f->heap + occ * 4096u);
  ASSERT(w->len + sub_size + 64 <= WCAP);
  e->sub_addr = f->win + w->len;
  ASSERT_EQ(hbg__sub_write(w->p + w->len, sub_size, def, 0x1234, occ, bt,
                           &f->scalar, 0),
            (int)sub_size);
  w->len += sub_size;
}

static void win_copy_task(win *w, hbg_devptr src, hbg_devptr dst,
                          uint64_t dst_off) {
  uint32_t size = sizeof(hbg_win_task) + 2 * sizeof(hbg_sub_tensor);
  hbg_win_task *e = win_entry(w, size);
  e->kind = HBG_WIN_TASK;
  e->size = size;
  e->kernel = HBG_KERNEL_COPY;
  e->n_tensors = 2;
  e->off_tensors = sizeof *e;
  e->off_scalars = size;
  e->off_deps = size;
  hbg_sub_tensor *t = (hbg_sub_tensor *)((uint8_t *)e + e->off_tensors);
  hbg_devptr addr[2] = {src, dst};
  for (int i = 0; i < 2; i++) {
    t[i].addr = addr[i];
    t[i].offset = i ? dst_off : 0;
    t[i].shape[0] = N;
    t[i].strides[0] = 1;
    t[i].dtype = HBG_DTYPE_F32;
    t[i].ndim = 1;
    t[i].mode = i ? HBG_ACCESS_OUT : HBG_ACCESS_IN;
  }
}

static void win_finish(win *w) {
  w->len = (w->len + 7u) & ~7u;
  hbg_win_hdr *h = (hbg_win_hdr *)w->p;
  h->off_index = w->len;
  memcpy(w->p + w->len, w->idx, w->n * 4u);
  w->len += (w->n * 4u + 7u) & ~7u;
  if (w->n == 0)
    w->len += 8;
  h->magic = HBG_WIN_MAGIC;
  h->version = HBG_IMG_VERSION;
  h->total_size = w->len;
  h->n_tasks = w->n;
  h->bind_seq = 1;
}

/* A Submission with its Definition inline, in its own device buffer (the
 * deferred / pinned-eager layout). *def_dev receives the inline copy. */
static hbg_devptr upload_sub(fx *f, const hbg__def *def, const hbg_tensor *bt,
                             uint32_t occ, uint32_t *size,
                             hbg_devptr *def_dev) {
  uint32_t n = hbg__sub_size(def, 1);
  uint8_t *host = aligned_alloc(64, (n + 63u) & ~63u);
  ASSERT(host);
  ASSERT_EQ(hbg__sub_write(host, n, def, 0x1234, occ, bt, &f->scalar, 1),
            (int)n);
  hbg_devptr d = 0;
  ASSERT_OK(hbg_dev_mem_alloc(f->d, n, &d));
  ASSERT_OK(hbg_dev_copy_h2d(f->d, d, host, n));
  *def_dev = d + ((const hbg_sub_hdr *)host)->off_def;
  *size = n;
  free(host);
  return d;
}

/* Upload the window asynchronously on the queue, launch right behind it,
 * wait on an event recorded after the launch, read the status back. */
static hbg_dev_status run_len(fx *f, const win *w, uint64_t wbytes) {
  hbg_dev_status st;
  memset(&st, 0xA5, sizeof st);
  ASSERT_OK(hbg_dev_copy_h2d(f->d, f->status, &st, sizeof st));
  memcpy(f->pin, w->p, w->len);
  ASSERT_OK(hbg_dev_copy_h2d_async(f->d, f->q, f->win, f->pin, w->len));
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = f->win,
                           .window_bytes = wbytes,
                           .status = f->status};
  ASSERT_OK(hbg_dev_launch(f->d, f->q, &l));
  ASSERT_OK(hbg_dev_event_record(f->d, f->ev, f->q));
  ASSERT_OK(hbg_dev_event_wait(f->d, f->ev));
  ASSERT_OK(hbg_dev_copy_d2h(f->d, &st, f->status, sizeof st));
  if (!quiet)
    printf("  status: error %d (%s) task %d done %u defs %llu\n", st.error,
         hbg_err_name(st.error), (int)st.task, st.tasks_done,
         (unsigned long long)st.defs_verified);
  return st;
}

static hbg_dev_status run(fx *f, const win *w) { return run_len(f, w, w->len); }

static void expect(const hbg_dev_status *st, int err, uint32_t task) {
  ASSERT_EQ(st->error, err);
  ASSERT_UEQ(st->task, task);
  ASSERT_UEQ(st->node, UINT32_MAX);
  ASSERT_UEQ(st->nodes_done, 0);
}

/* Deferred layout: an ordinary task and three Submissions, each carrying
 * its own copy of the Definition. */
static void test_inline_defs(fx *f) {
  printf("inline Definitions\n");
  hbg_devptr sub[3], def[3];
  uint32_t sub_size = 0;
  for (uint32_t i = 0; i < 3; i++)
    sub[i] = upload_sub(f, f->def, f->bt, i, &sub_size, &def[i]);
  win w;
  win_init(&w);
  win_copy_task(&w, f->x, f->y, 0);
  for (uint32_t i = 0; i < 3; i++)
    win_graph(&w, sub[i], sub_size, def[i], f->def->size,
              f->heap + i * 4096u);
  win_finish(&w);
  hbg_dev_status st = run(f, &w);
  expect(&st, 0, UINT32_MAX);
  ASSERT_UEQ(st.tasks_done, 4);
  ASSERT_UEQ(st.defs_verified, 3);

  /* A Submission where no allocation is: rejected before any DMA. */
  hbg_win_task *e = (hbg_win_task *)(w.p + w.idx[2]);
  hbg_devptr keep = e->sub_addr;
  e->sub_addr = f->dead;
  e->def_addr = f->dead + (def[1] - sub[1]);
  st = run(f, &w);
  expect(&st, HBG_E_RANGE, 2);
  ASSERT_UEQ(st.tasks_done, 2);
  e->sub_addr = keep;
  e->def_addr = def[1];

  /* A Submission that runs past the end of its buffer. */
  e->sub_size += 64;
  st = run(f, &w);
  expect(&st, HBG_E_RANGE, 2);
  e->sub_size -= 64;

  /* The graph heap is not device memory. */
  e->heap_addr = f->dead;
  st = run(f, &w);
  expect(&st, HBG_E_RANGE, 2);
  e->heap_addr = f->heap;

  /* One byte of a Submission changed on the device. */
  uint8_t b = 0x5A;
  ASSERT_OK(hbg_dev_copy_h2d(f->d, sub[0] + sizeof(hbg_sub_hdr) + 8, &b, 1));
  st = run(f, &w);
  ASSERT_EQ(st.task, 1);
  ASSERT(st.error == HBG_E_IMG_HASH || st.error == HBG_E_IMG_FIELD);

  st = run(f, &w); /* still broken: a Submission is checked every launch */
  ASSERT_EQ(st.task, 1);
  free(w.p);
  for (uint32_t i = 0; i < 3; i++)
    ASSERT_OK(hbg_dev_mem_free(f->d, sub[i]));
}

/* Coalesced layout: Submissions inside the window, one resident
 * Definition verified once; its verdict holds across launches while the
 * bytes read back hash alike. */
static void test_resident_def(fx *f) {
  printf("resident Definition\n");
  hbg_devptr def = 0;
  ASSERT_OK(hbg_dev_mem_alloc(f->d, f->def->size, &def));
  ASSERT_OK(hbg_dev_copy_h2d(f->d, def, f->def->image, f->def->size));
  win w;
  win_init(&w);
  for (uint32_t i = 0; i < 3; i++)
    win_graph_inside(&w, f, f->def, f->bt, def, i);
  win_finish(&w);
  hbg_dev_status st = run(f, &w);
  expect(&st, 0, UINT32_MAX);
  ASSERT_UEQ(st.tasks_done, 3);
  ASSERT_UEQ(st.defs_verified, 1);

  /* The Definition's hash field changed on the device. */
  uint64_t h = f->def->hash ^ 1;
  ASSERT_OK(hbg_dev_copy_h2d(f->d, def + offsetof(hbg_def_hdr, hash), &h, 8));
  st = run(f, &w);
  expect(&st, HBG_E_IMG_HASH, 0);
  ASSERT_UEQ(st.defs_verified, 0);
  ASSERT_OK(hbg_dev_copy_h2d(f->d, def + offsetof(hbg_def_hdr, hash),
                             &f->def->hash, 8));
  st = run(f, &w);
  expect(&st, 0, UINT32_MAX);

  /* A Submission replaying another Definition than the one it names. */
  hbg_devptr half = 0;
  ASSERT_OK(hbg_dev_mem_alloc(f->d, f->half->size, &half));
  ASSERT_OK(hbg_dev_copy_h2d(f->d, half, f->half->image, f->half->size));
  win w2;
  win_init(&w2);
  win_graph_inside(&w2, f, f->def, f->bt, def, 0);
  win_graph_inside(&w2, f, f->half, f->bt_half, def, 1);
  win_finish(&w2);
  st = run(f, &w2);
  expect(&st, HBG_E_IMG_DEF, 1);
  /* the verdict of the last launch holds: the bytes still hash alike */
  ASSERT_UEQ(st.defs_verified, 0);
  /* ...and with its own Definition it is fine: two distinct ones, the new
   * one validated. */
  ((hbg_win_task *)(w2.p + w2.idx[1]))->def_addr = half;
  ((hbg_win_task *)(w2.p + w2.idx[1]))->def_size = f->half->size;
  st = run(f, &w2);
  expect(&st, 0, UINT32_MAX);
  ASSERT_UEQ(st.defs_verified, 1);
  free(w2.p);

  /* A boundary tensor that points at freed memory. */
  hbg_tensor bad[3];
  memcpy(bad, f->bt, sizeof bad);
  bad[1].addr = f->dead;
  win w3;
  win_init(&w3);
  win_graph_inside(&w3, f, f->def, f->bt, def, 0);
  win_graph_inside(&w3, f, f->def, bad, def, 1);
  win_finish(&w3);
  st = run(f, &w3);
  expect(&st, HBG_E_RANGE, 1);
  free(w3.p);

  /* A boundary tensor whose extent (from the Definition's signature) runs
   * 8 bytes past the end of its buffer. */
  memcpy(bad, f->bt, sizeof bad);
  bad[1].offset = 8;
  win_init(&w3);
  win_graph_inside(&w3, f, f->def, f->bt, def, 0);
  win_graph_inside(&w3, f, f->def, bad, def, 1);
  win_finish(&w3);
  st = run(f, &w3);
  expect(&st, HBG_E_RANGE, 1);
  free(w3.p);

  /* A boundary tensor at address 0: the Submission is malformed. */
  memcpy(bad, f->bt, sizeof bad);
  bad[2].addr = 0;
  win_init(&w3);
  win_graph_inside(&w3, f, f->def, bad, def, 0);
  win_finish(&w3);
  st = run(f, &w3);
  expect(&st, HBG_E_IMG_FIELD, 0);
  free(w3.p);

  ASSERT_OK(hbg_dev_mem_free(f->d, half));
  ASSERT_OK(hbg_dev_mem_free(f->d, def));
  free(w.p);
}

static void test_window(fx *f) {
  printf("window\n");
  win w;
  win_init(&w);
  win_finish(&w);
  hbg_dev_status st = run(f, &w); /* empty bind */
  expect(&st, 0, UINT32_MAX);
  ASSERT_UEQ(st.tasks_done, 0);
  free(w.p);

  win_init(&w);
  win_copy_task(&w, f->x, f->y, 0);
  win_copy_task(&w, f->x, f->y, 8); /* 8 bytes past the end of y */
  win_finish(&w);
  st = run(f, &w);
  expect(&st, HBG_E_RANGE, 1);
  ASSERT_UEQ(st.tasks_done, 1);

  st = run_len(f, &w, w.len - 8);
  expect(&st, HBG_E_IMG_TRUNCATED, UINT32_MAX);
  st = run_len(f, &w, WCAP + 8); /* past the window buffer */
  expect(&st, HBG_E_RANGE, UINT32_MAX);
  st = run_len(f, &w, 16);
  expect(&st, HBG_E_IMG_TRUNCATED, UINT32_MAX);
  w.p[0] ^= 1;
  st = run(f, &w);
  expect(&st, HBG_E_IMG_MAGIC, UINT32_MAX);
  free(w.p);
}

/* Two launches queued back to back, waited once: both statuses land. */
static void test_back_to_back(fx *f) {
  printf("back to back\n");
  win w;
  win_init(&w);
  win_copy_task(&w, f->x, f->y, 0);
  win_finish(&w);
  memcpy(f->pin, w.p, w.len);
  ASSERT_OK(hbg_dev_copy_h2d_async(f->d, f->q, f->win, f->pin, w.len));
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = f->win,
                           .window_bytes = w.len,
                           .status = f->status};
  ASSERT_OK(hbg_dev_launch(f->d, f->q, &l));
  l.status = f->status2;
  l.window_bytes = 8;
  ASSERT_OK(hbg_dev_launch(f->d, f->q, &l));
  ASSERT_OK(hbg_dev_event_record(f->d, f->ev, f->q));
  ASSERT_OK(hbg_dev_event_wait(f->d, f->ev));
  hbg_dev_status a, b;
  ASSERT_OK(hbg_dev_copy_d2h(f->d, &a, f->status, sizeof a));
  ASSERT_OK(hbg_dev_copy_d2h(f->d, &b, f->status2, sizeof b));
  expect(&a, 0, UINT32_MAX);
  ASSERT_UEQ(a.tasks_done, 1);
  expect(&b, HBG_E_IMG_TRUNCATED, UINT32_MAX);
  free(w.p);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

/* Random byte flips in the window (entries, Submissions inside it, device
 * addresses) and in the resident Definition: every launch must succeed and
 * report a verdict; no mutated address may reach a DMA (the backend checks
 * ranges first, so a copy error would fail the launch). */
static void test_mutations(fx *f) {
  printf("mutations\n");
  hbg_devptr def = 0, sub = 0, inl = 0;
  uint32_t sub_size = 0;
  ASSERT_OK(hbg_dev_mem_alloc(f->d, f->def->size, &def));
  ASSERT_OK(hbg_dev_copy_h2d(f->d, def, f->def->image, f->def->size));
  sub = upload_sub(f, f->def, f->bt, 7, &sub_size, &inl);
  win w;
  win_init(&w);
  win_copy_task(&w, f->x, f->y, 0);
  win_graph_inside(&w, f, f->def, f->bt, def, 0);
  win_graph(&w, sub, sub_size, inl, f->def->size, f->heap);
  win_graph_inside(&w, f, f->def, f->bt, def, 1);
  win_finish(&w);
  hbg_dev_status st = run(f, &w);
  expect(&st, 0, UINT32_MAX);
  uint8_t *orig = malloc(w.len);
  ASSERT(orig);
  memcpy(orig, w.p, w.len);
  int counts[64] = {0};
  quiet = 1;
  for (int it = 0; it < 400; it++) {
    memcpy(w.p, orig, w.len);
    uint32_t flips = 1 + rnd(4), at = 0;
    int in_def = it % 4 == 3;
    for (uint32_t k = 0; k < flips; k++) {
      uint8_t b = (uint8_t)(1u << rnd(8));
      if (in_def) {
        at = rnd(f->def->size);
        uint8_t v = f->def->image[at] ^ b;
        ASSERT_OK(hbg_dev_copy_h2d(f->d, def + at, &v, 1));
      } else {
        w.p[rnd(w.len)] ^= b;
      }
    }
    st = run(f, &w);
    ASSERT(st.error <= 0 && st.error > -64);
    ASSERT(st.error == 0 || st.task == UINT32_MAX || st.task < w.n);
    counts[-st.error]++;
    if (in_def)
      ASSERT_OK(hbg_dev_copy_h2d(f->d, def, f->def->image, f->def->size));
  }
  quiet = 0;
  for (int e = 0; e < 64; e++)
    if (counts[e])
      printf("  %-22s %d\n", hbg_err_name(-e), counts[e]);
  ASSERT(counts[0] < 400);
  memcpy(w.p, orig, w.len);
  st = run(f, &w);
  expect(&st, 0, UINT32_MAX);
  free(orig);
  free(w.p);
  ASSERT_OK(hbg_dev_mem_free(f->d, sub));
  ASSERT_OK(hbg_dev_mem_free(f->d, def));
}

int main(void) {
  skip_without_gpu();
  fx f;
  fx_init(&f);
  hbg_dev_stats s0;
  ASSERT_OK(hbg_dev_stats_get(f.d, &s0));
  test_inline_defs(&f);
  test_resident_def(&f);
  test_window(&f);
  test_back_to_back(&f);
  test_mutations(&f);
  hbg_dev_stats s1;
  ASSERT_OK(hbg_dev_stats_get(f.d, &s1));
  ASSERT_UGE(s1.launches, s0.launches + 20);
  fx_fini(&f);
  printf("cuda launch: ok\n");
  return 0;
}
