/* Early, located errors through the public API: misaligned tensors, tensors
 * outside the runtime's live buffers and kernel signatures the kernel does
 * not take are refused at hbg_submit_task, at hbg_submit_graph and at
 * hbg_record_task (a bad recording is never cached), and a device-side
 * error names its window entry and graph node. */
#include <hbg/hbg.h>

#include "test.h"

#define NF 256u /* floats per buffer */
#define HBG__ARRAY_LEN_T(a) (sizeof(a) / sizeof((a)[0]))

static hbg_runtime *rt;
static uint64_t A, B, C, D;

static hbg_tensor vec2(uint64_t addr, uint64_t off, uint32_t dtype,
                       uint32_t mode, uint32_t d0, uint32_t d1) {
  hbg_tensor t;
  uint32_t dims[2] = {d0, d1};
  ASSERT_OK(hbg_tensor_contig(&t, addr, off, dtype, d1 ? 2 : 1, dims, mode));
  return t;
}

static hbg_tensor vec(uint64_t addr, uint64_t off, uint32_t n, uint32_t mode) {
  return vec2(addr, off, HBG_DTYPE_F32, mode, n, 0);
}

static hbg_task mk(uint32_t kernel, hbg_tensor *a, uint32_t n) {
  hbg_task t = {.kernel = kernel, .n_args = n, .args = a};
  return t;
}

static uint64_t f32bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* hbg_last_error() names the culprit. */
#define ASSERT_MSG(part)                                                       \
  do {                                                                         \
    if (!strstr(hbg_last_error(), (part)))                                     \
      T_FAIL("message '%s' lacks '%s'", hbg_last_error(), (part));             \
  } while (0)

static void run_ok(hbg_bind *b) {
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
}

/* ---- ordinary tasks ---- */

static void t_task_checks(void) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_tensor a[3] = {vec(A, 0, 4, HBG_ACCESS_IN), vec(B, 0, 4, HBG_ACCESS_IN),
                     vec(C, 0, 4, HBG_ACCESS_OUT)};
  hbg_task t = mk(HBG_KERNEL_ADD, a, 3);
  /* f32 element 0 at byte offset 2 */
  a[0].offset = 2;
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_INVAL);
  ASSERT_MSG("argument 0: element 0 (offset 2) is not aligned");
  a[0].offset = 4;
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  /* addresses: a freed buffer, past the end, an offset into the next one */
  a[0].offset = 0;
  a[2].addr = D; /* freed in main */
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_RANGE);
  ASSERT_MSG("argument 2: addr");
  ASSERT_MSG("no live hbg_buffer_alloc buffer");
  a[2].addr = C;
  a[2].offset = NF * 4 - 8;
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_RANGE);
  ASSERT_MSG("argument 2: offset 1016 + 16 bytes leave");
  a[2].offset = 0;
  a[1].addr = A;
  a[1].offset = B - A; /* B's bytes, reached from A */
  ASSERT(B > A);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_RANGE);
  a[1] = vec(B, 0, 4, HBG_ACCESS_IN);
  ASSERT_OK(hbg_submit_task(b, &t, NULL)); /* good again */
  ASSERT_EQ(hbg_last_error()[0], 0); /* the message is gone */
  /* kernel signatures: f16 into an f32 add, shape mismatch, two args,
   * an output whose mode is IN */
  hbg_tensor h = vec2(B, 0, HBG_DTYPE_F16, HBG_ACCESS_IN, 4, 0);
  hbg_tensor bad[3] = {a[0], h, a[2]};
  t = mk(HBG_KERNEL_ADD, bad, 3);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  ASSERT_MSG("add: argument 1 (b) is f16, must be f32");
  bad[1] = vec(B, 0, 8, HBG_ACCESS_IN);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  ASSERT_MSG("add: argument shapes do not fit");
  t = mk(HBG_KERNEL_ADD, a, 2);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  ASSERT_MSG("add takes 3 tensors, got 2");
  bad[1] = a[1];
  bad[2].mode = HBG_ACCESS_IN;
  t = mk(HBG_KERNEL_ADD, bad, 3);
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_KERNEL);
  ASSERT_MSG("add: argument 2 (out) needs mode OUT");
  /* none of it latched the bind; the two good tasks run */
  ASSERT_EQ(hbg_bind_fatal(b), 0);
  run_ok(b);
}

/* ---- graphs ---- */

enum {
  BAD_NONE,
  BAD_VIEW_ALIGN, /* a view of x whose element 0 is at byte 2 */
  BAD_F16_ADD,
  BAD_SHAPE,
  BAD_ARITY,
  BAD_OUT_MODE,
  BAD_OUTSIDE, /* neither an inner output nor inside a boundary tensor */
  BAD__COUNT
};

typedef struct rec_ctx {
  int bad;
  int calls;
} rec_ctx;

/* Boundary: x[16] in, y[16] out. Good graph: y = x + x, then y = y * 1. */
static int rec_graph(hbg_recorder *rec, void *user) {
  rec_ctx *c = user;
  c->calls++;
  uint32_t nt;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  ASSERT_EQ(nt, 2);
  hbg_tensor x = bt[0], y = bt[1];
  hbg_tensor a[3] = {x, x, vec(0, 0, 16, HBG_ACCESS_OUT)};
  hbg_task t = mk(HBG_KERNEL_ADD, a, 3);
  switch (c->bad) {
  case BAD_VIEW_ALIGN:
    a[0] = vec(x.addr, x.offset + 2, 4, HBG_ACCESS_IN);
    a[1] = a[0];
    a[2] = vec(0, 0, 4, HBG_ACCESS_OUT);
    break;
  case BAD_F16_ADD:
    a[1] = vec2(x.addr, x.offset, HBG_DTYPE_F16, HBG_ACCESS_IN, 16, 0);
    break;
  case BAD_SHAPE:
    a[1] = vec(x.addr, x.offset, 8, HBG_ACCESS_IN);
    break;
  case BAD_ARITY:
    t.n_args = 2;
    break;
  case BAD_OUT_MODE:
    a[2] = y;
    a[2].mode = HBG_ACCESS_IN;
    break;
  case BAD_OUTSIDE:
    a[1] = vec(C, 0, 16, HBG_ACCESS_IN);
    break;
  default:
    break;
  }
  int rc = hbg_record_task(rec, &t, NULL);
  if (c->bad != BAD_NONE && rc == 0)
    T_FAIL("bad case %d recorded", c->bad);
  /* A callback that ignores the error and goes on: still never cached. */
  hbg_tensor in = a[2];
  in.mode = HBG_ACCESS_IN;
  if (c->bad != BAD_NONE)
    in = x;
  hbg_tensor a1[2] = {in, y};
  a1[1].mode = HBG_ACCESS_OUT;
  hbg_scalar one = {.value = f32bits(1.0f), .kind = HBG_SCALAR_STATIC};
  hbg_task t1 = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a1,
                 .n_scalars = 1, .scalars = &one};
  ASSERT_OK(hbg_record_task(rec, &t1, NULL));
  return 0;
}

static int submit(hbg_bind *b, uint64_t key, rec_ctx *c, uint64_t xoff,
                  uint32_t xdtype) {
  uint32_t n = xdtype == HBG_DTYPE_U8 ? 64 : 16;
  hbg_tensor bt[2] = {vec2(A, xoff, xdtype, HBG_ACCESS_IN, n, 0),
                      vec(B, 0, 16, HBG_ACCESS_OUT)};
  hbg_graph_submit g = {.key = key, .n_tensors = 2, .tensors = bt,
                        .record = rec_graph, .user = c};
  return hbg_submit_graph(b, &g, NULL);
}

static void t_graph_checks(void) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  rec_ctx good = {0};
  /* a boundary tensor at byte offset 2: refused before recording */
  ASSERT_ERR(submit(b, 1, &good, 2, HBG_DTYPE_F32), HBG_E_INVAL);
  ASSERT_MSG("boundary tensor 0: element 0 (offset 2) is not aligned");
  ASSERT_EQ(good.calls, 0);
  /* a boundary tensor in a freed buffer */
  {
    hbg_tensor bt[2] = {vec(D, 0, 16, HBG_ACCESS_IN),
                        vec(B, 0, 16, HBG_ACCESS_OUT)};
    hbg_graph_submit g = {.key = 1, .n_tensors = 2, .tensors = bt,
                          .record = rec_graph, .user = &good};
    ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_RANGE);
    ASSERT_EQ(good.calls, 0);
  }
  /* each bad inner task: refused at record and never cached, so the next
   * submission of the key records (and fails) again */
  static const int want[BAD__COUNT] = {
      [BAD_VIEW_ALIGN] = HBG_E_INVAL, [BAD_F16_ADD] = HBG_E_KERNEL,
      [BAD_SHAPE] = HBG_E_KERNEL,     [BAD_ARITY] = HBG_E_KERNEL,
      [BAD_OUT_MODE] = HBG_E_KERNEL,  [BAD_OUTSIDE] = HBG_E_INVAL};
  for (int k = BAD_VIEW_ALIGN; k < BAD__COUNT; k++) {
    rec_ctx c = {.bad = k};
    ASSERT_ERR(submit(b, 100 + (uint64_t)k, &c, 0, HBG_DTYPE_F32), want[k]);
    ASSERT_MSG("the recording is not kept: hbg_record_task");
    ASSERT_MSG("inner task 0");
    ASSERT_ERR(submit(b, 100 + (uint64_t)k, &c, 0, HBG_DTYPE_F32), want[k]);
    ASSERT_EQ(c.calls, 2);
    ASSERT_EQ(hbg_bind_fatal(b), 0);
  }
  ASSERT_OK(submit(b, 1, &good, 0, HBG_DTYPE_F32));
  ASSERT_EQ(good.calls, 1);
  run_ok(b);
}

/* A replay whose boundary differs from the recorded signature, and
 * dependency ids that name no earlier task: the message says what. */
static int rec_dep(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_tensor a[2] = {bt[0], bt[1]};
  hbg_task_id dep = 0;
  hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a,
                .n_deps = 1, .deps = &dep};
  ASSERT_ERR(hbg_record_task(rec, &t, NULL), HBG_E_INVAL);
  ASSERT_MSG("hbg_record_task (inner task 0): dependency 0 is inner task 0, "
             "not an earlier one");
  hbg_scalar s = {.kind = HBG_SCALAR_BOUNDARY, .index = 3};
  t.n_deps = 0;
  t.n_scalars = 1;
  t.scalars = &s;
  t.kernel = HBG_KERNEL_NOP;
  ASSERT_ERR(hbg_record_task(rec, &t, NULL), HBG_E_INVAL);
  ASSERT_MSG("scalar 0: boundary scalar 3, but the graph has 0");
  return 0;
}

static void t_messages(void) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  rec_ctx good = {0};
  ASSERT_OK(submit(b, 21, &good, 0, HBG_DTYPE_F32));
  hbg_tensor x = vec(A, 0, 16, HBG_ACCESS_IN), y = vec(B, 0, 16, HBG_ACCESS_OUT);
  struct {
    hbg_tensor x, y;
    uint32_t n;
    const char *want;
  } cases[] = {
      {vec(A, 0, 8, HBG_ACCESS_IN), y, 2,
       "hbg_submit_graph: key 21: boundary tensor 0: shape [8], recorded "
       "[16]"},
      {vec2(A, 0, HBG_DTYPE_U8, HBG_ACCESS_IN, 64, 0), y, 2,
       "key 21: boundary tensor 0: dtype u8, recorded f32"},
      {x, vec(B, 0, 16, HBG_ACCESS_INOUT), 2,
       "key 21: boundary tensor 1: mode INOUT, recorded OUT"},
      {vec2(A, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 4, 4), y, 2,
       "key 21: boundary tensor 0: 2 dims [4, 4], recorded 1 dims [16]"},
      {x, y, 1, "key 21: 1 boundary tensors and 0 scalars, recorded 2 and 0"},
  };
  for (size_t k = 0; k < HBG__ARRAY_LEN_T(cases); k++) {
    hbg_tensor bt[2] = {cases[k].x, cases[k].y};
    hbg_graph_submit g = {.key = 21, .n_tensors = cases[k].n, .tensors = bt,
                          .record = rec_graph, .user = &good};
    ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_SIGNATURE);
    ASSERT_MSG(cases[k].want);
  }
  {
    hbg_tensor bt[2] = {x, y};
    bt[0].strides[0] = 2; /* every other float of A's first 32 */
    hbg_graph_submit g = {.key = 21, .n_tensors = 2, .tensors = bt,
                          .record = rec_graph, .user = &good};
    ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_SIGNATURE);
    ASSERT_MSG("key 21: boundary tensor 0: strides [2], recorded [1]");
  }
  ASSERT_EQ(good.calls, 1); /* none of them recorded again */
  /* dependencies: the bind has one entry (id 0) */
  hbg_tensor a[2] = {vec(A, 0, 4, HBG_ACCESS_IN), vec(C, 0, 4, HBG_ACCESS_OUT)};
  hbg_task_id deps[2] = {0, 42};
  hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a,
                .n_deps = 2, .deps = deps};
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_INVAL);
  ASSERT_MSG("hbg_submit_task: dependency 1 is task id 42, but the bind's "
             "tasks so far are 0..0");
  {
    hbg_tensor bt[2] = {vec(A, 0, 16, HBG_ACCESS_IN), y};
    hbg_graph_submit g = {.key = 21, .n_tensors = 2, .tensors = bt,
                          .n_deps = 1, .deps = &deps[1],
                          .record = rec_graph, .user = &good};
    ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_INVAL);
    ASSERT_MSG("hbg_submit_graph: dependency 0 is task id 42");
    /* an inner task's dependency on itself, a boundary scalar it lacks */
    g.n_deps = 0;
    g.key = 22;
    g.record = rec_dep;
    ASSERT_ERR(hbg_submit_graph(b, &g, NULL), HBG_E_INVAL);
    ASSERT_MSG("the recording is not kept: hbg_record_task (inner task 0): "
               "dependency 0 is inner task 0");
  }
  hbg_scalar bs = {.kind = HBG_SCALAR_BOUNDARY};
  t.n_deps = 0;
  t.n_scalars = 1;
  t.scalars = &bs;
  t.kernel = HBG_KERNEL_NOP;
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_INVAL);
  ASSERT_MSG("hbg_submit_task: scalar 0: an ordinary task's scalars are "
             "static");
  hbg_bind_end(b);
  /* a bind with no task yet */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  t.n_scalars = 0;
  t.n_deps = 1;
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_INVAL);
  ASSERT_MSG("dependency 0 is task id 0, but the bind has no task yet");
  hbg_bind_end(b);
}

/* A u8 boundary with an f32 view: element 0 of the boundary needs 4-byte
 * alignment in every replay, though its own dtype needs 1. */
static int rec_u8_view(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_tensor a[2] = {vec(bt[0].addr, bt[0].offset + 4, 4, HBG_ACCESS_IN),
                     vec(0, 0, 4, HBG_ACCESS_OUT)};
  hbg_task t = mk(HBG_KERNEL_COPY, a, 2);
  return hbg_record_task(rec, &t, NULL);
}

static void t_view_alignment_on_replay(void) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  for (uint64_t off = 0; off < 8; off++) {
    hbg_tensor bt[1] = {vec2(A, off, HBG_DTYPE_U8, HBG_ACCESS_IN, 64, 0)};
    hbg_graph_submit g = {.key = 7, .n_tensors = 1, .tensors = bt,
                          .record = rec_u8_view};
    int rc = hbg_submit_graph(b, &g, NULL);
    if (off % 4)
      ASSERT_ERR(rc, HBG_E_INVAL);
    else
      ASSERT_OK(rc);
  }
  run_ok(b);
}

/* ---- device-side error location ---- */

/* Boundary x[1][4], cos[2][2], sin[2][2] in, y[1][4] out; scalar position.
 * n0: t = copy(x); n1: y = rope(t, cos, sin; position). */
static int rec_rope(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_tensor a0[2] = {bt[0], vec2(0, 0, HBG_DTYPE_F32, HBG_ACCESS_OUT, 1, 4)};
  hbg_task t0 = mk(HBG_KERNEL_COPY, a0, 2);
  int rc = hbg_record_task(rec, &t0, NULL);
  if (rc)
    return rc;
  hbg_tensor a1[4] = {a0[1], bt[1], bt[2], bt[3]};
  a1[0].mode = HBG_ACCESS_IN;
  hbg_scalar pos = {.kind = HBG_SCALAR_BOUNDARY, .index = 0};
  hbg_task t1 = {.kernel = HBG_KERNEL_ROPE, .n_args = 4, .args = a1,
                 .n_scalars = 1, .scalars = &pos};
  return hbg_record_task(rec, &t1, NULL);
}

static int rope_bind(uint64_t position, uint32_t *entry, uint32_t *node) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  uint32_t e = 0, n = 0;
  ASSERT_ERR(hbg_bind_error_location(b, &e, &n), HBG_E_NOTFOUND);
  hbg_tensor cp[2] = {vec(C, 0, 4, HBG_ACCESS_IN), vec(C, 64, 4, HBG_ACCESS_OUT)};
  hbg_task t = mk(HBG_KERNEL_COPY, cp, 2);
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  hbg_tensor bt[4] = {vec2(A, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 1, 4),
                      vec2(B, 0, HBG_DTYPE_F32, HBG_ACCESS_IN, 2, 2),
                      vec2(B, 64, HBG_DTYPE_F32, HBG_ACCESS_IN, 2, 2),
                      vec2(C, 128, HBG_DTYPE_F32, HBG_ACCESS_OUT, 1, 4)};
  hbg_graph_submit g = {.key = 9, .n_tensors = 4, .tensors = bt,
                        .scalars = &position, .n_scalars = 1,
                        .record = rec_rope};
  hbg_task_id id;
  ASSERT_OK(hbg_submit_graph(b, &g, &id));
  ASSERT_EQ(id, 1);
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_ERR(hbg_bind_error_location(b, &e, &n), HBG_E_NOTFOUND);
  int rc = hbg_bind_wait(b);
  int lrc = hbg_bind_error_location(b, &e, &n);
  ASSERT_ERR(hbg_bind_error_location(NULL, &e, &n), HBG_E_INVAL);
  ASSERT_ERR(hbg_bind_error_location(b, NULL, &n), HBG_E_INVAL);
  hbg_bind_end(b);
  if (lrc == 0) {
    *entry = e;
    *node = n;
  } else {
    ASSERT_ERR(lrc, HBG_E_NOTFOUND);
  }
  return rc;
}

static void t_location(void) {
  uint32_t e = 77, n = 77;
  ASSERT_OK(rope_bind(1, &e, &n));
  ASSERT_EQ(e, 77); /* no error: nothing to locate */
  /* position 5 of a 2-row table: only the device sees the scalar's value */
  ASSERT_ERR(rope_bind(5, &e, &n), HBG_E_KERNEL);
  ASSERT_MSG("device: HBG_E_KERNEL at window entry 1, graph node 1");
  ASSERT_EQ(e, 1);
  ASSERT_EQ(n, 1);
  /* the bind after it is clean */
  ASSERT_OK(rope_bind(0, &e, &n));
}

int main(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim"; /* always built; not whatever HBG_DEVICE says */
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_OK(hbg_buffer_alloc(rt, NF * 4, &A));
  ASSERT_OK(hbg_buffer_alloc(rt, NF * 4, &B));
  ASSERT_OK(hbg_buffer_alloc(rt, NF * 4, &C));
  ASSERT_OK(hbg_buffer_alloc(rt, NF * 4, &D));
  ASSERT_OK(hbg_buffer_free(rt, D));
  float zero[NF] = {0};
  ASSERT_OK(hbg_buffer_write(rt, A, zero, sizeof zero));
  ASSERT_OK(hbg_buffer_write(rt, B, zero, sizeof zero));
  ASSERT_OK(hbg_buffer_write(rt, C, zero, sizeof zero));
  t_task_checks();
  t_graph_checks();
  t_view_alignment_on_replay();
  t_messages();
  t_location();
  hbg_buffer_free(rt, A);
  hbg_buffer_free(rt, B);
  hbg_buffer_free(rt, C);
  hbg_runtime_destroy(rt);
  printf("submit_checks: ok\n");
  return 0;
}
