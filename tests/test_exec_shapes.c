/* Window shapes through the public API, on every device executor the test
 * can reach, under every policy: each (device, policy, dependency mode,
 * shape) runs in a child process whose every bind is watched (alarm): a
 * bind that does not complete in time is a named HANG, never a stuck test.
 * The devices: the sim always; the cuda backend's device executor
 * (exec=device) when HBG_CUDA_LIB names the stand-in driver
 * (test_exec_shapes_mock, and the _1x1 / _7x3 grids), or where the cuda
 * probe finds a GPU; HBG_SHAPES_DEVICES=sim,cuda picks them instead,
 * HBG_SHAPES_POLICIES=deferred,coalesced (names, comma-separated) the
 * policies.
 *
 * Shapes (the window's entries; every output read back and compared with
 * values the test computes itself, bit for bit):
 *   empty            no entry at all
 *   empty_between    one task, then an empty bind, then one task
 *   empty_pipelined  two empty binds launched before either is waited for
 *   one_task         one ordinary task
 *   graph_1node      one graph submission whose graph has one node
 *   graph_only       one graph of four nodes (a diamond), no ordinary task
 *   mix              task -> graph -> task
 *   graph_chain      one graph whose 4096 nodes form one chain
 *   fanout_max       one graph: a node feeding 65535 consumers (the most a
 *                    Definition holds: HBG_IMG_MAX_NODES nodes); then a
 *                    window of four chained replays of it (262144 nodes)
 *   fanin_max        one graph: a node waiting for 65535 producers
 *                    (both fans 16383 in sanitizer builds: see MAXN)
 *   diamond          one graph: 1 -> 4094 -> 1
 *   bounds_max       one graph of 4096 boundary tensors and 4096 boundary
 *                    scalars (HBG_IMG_MAX_BOUNDARY), in two binds
 *   chain            1024 entries (tasks and graph replays), each waiting
 *                    for the one before
 *   wide             512 independent entries (far more than any grid's
 *                    workers)
 *   replays          32 replays of one key, then 16 chained replays of
 *                    another (hbg_submit_graph_n), in two binds
 *   keys             12 keys, each submitted twice, interleaved
 *   win_fanin        257 producers; a task and a graph each waiting for 256
 *                    of them (the most an entry may wait for), and one
 *                    waiting for 257 refused (HBG_E_LIMIT)
 *   win_fanout       one producer, 1024 dependents (tasks and graphs)
 *   dup_deps         explicit ids repeated and out of order
 *   binds_grow       a bind of one task in flight while one of 1024 entries
 *                    reading its output is launched; then one task again
 *   fail_entry       entry 2 of 70 fails on the device (a ROPE position
 *                    past its table, a boundary scalar), two entries wait
 *                    for it: the wait names entry 2, and the next bind runs
 *   fail_graph       one graph whose node 0 fails, 1024 nodes waiting for
 *                    it and 64 not
 *   bf16_weights     bf16 weights (GEMV's W, RMSNORM's w, COPY's input)
 *                    in ordinary tasks and in a graph's boundary, replayed
 *                    on two weight sets: each output the bits of the
 *                    host's f32 kernel (kernels.h) on the widened weight
 * Shapes whose entries depend on each other run with explicit ids
 * (HBG_DEPS_EXPLICIT) and with none (HBG_DEPS_INFERRED: the same order from
 * the data); the others build the same window either way and run once.
 *
 * Usage: test_exec_shapes [SHAPE...] runs the sweep (all shapes, or those
 * named); test_exec_shapes --one DEVICE POLICY DEPS SHAPE runs one case in
 * this process (no fork: for a debugger). HBG_SHAPES_TIMEOUT=S: seconds a
 * bind may take (default 5, 20 in sanitizer builds; recording and set-up
 * get six times that). Exit 1 when any case hangs, fails or crashes: the
 * summary lists them. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_image.h>

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "test.h"

#define RC_HANG 124 /* a child whose watchdog fired */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

/* Nodes of the fan graphs: the most a Definition holds. Recording them
 * costs the host time quadratic in the fan (the recorder compares each
 * access with every earlier one of its buffer): about 3 s per case in a
 * release build, one to two minutes in a sanitizer (Debug) build at
 * 16384 nodes, which therefore records graphs of 4096 nodes (fan 4095)
 * instead: the sanitizers look for memory and ordering errors, which the
 * limits' sizes do not change. */
#ifdef SANITIZED
#define MAXN (1u << 12)
#else
#define MAXN HBG_IMG_MAX_NODES
#endif
/* The most earlier entries one entry may wait for: hbg_submit_task's and
 * hbg_submit_graph's check of explicit ids, and HBG_DEPS_INFERRED's limit
 * (hbg.h: "at most 256 distinct earlier entries"). */
#define WIN_DEPS_MAX (HBG_IMG_MAX_ARGS_PER_NODE * 4u)

/* ------------------------------------------------------------------ */
/* The watchdog                                                        */
/* ------------------------------------------------------------------ */

/* Seconds a bind may take before it counts as hung: the largest bind here
 * takes well under a second on the stand-in's smallest grid; sanitizer
 * builds get four times as long. HBG_SHAPES_TIMEOUT overrides. */
#ifdef SANITIZED
#define WD_SECS 20u
#else
#define WD_SECS 5u
#endif

static char wd_case[192];   /* "cuda/pinned-eager/inferred/chain" */
static const char *volatile wd_step = "";
static char wd_after[32]; /* "5 s", written before the alarm is set */
static unsigned wd_secs = WD_SECS;

static void wd_put(const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t k = write(2, s, n);
    if (k <= 0)
      return;
    s += k;
    n -= (size_t)k;
  }
}

static void wd_fire(int sig) {
  (void)sig;
  wd_put("HANG: ");
  wd_put(wd_case);
  wd_put(": ");
  wd_put((const char *)wd_step);
  wd_put(": not done after ");
  wd_put(wd_after);
  wd_put(" (watchdog)\n");
  _exit(RC_HANG);
}

/* From here on `step` must finish within secs seconds. */
static void wd_arm(const char *step, unsigned secs) {
  alarm(0);
  wd_step = step;
  snprintf(wd_after, sizeof wd_after, "%u s", secs);
  alarm(secs);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A case's time from its binds' launches to the end of their waits,
 * summed: shared with the sweep (MAP_SHARED), which prints it beside the
 * case's whole time (runtime creation, recording, checks). */
static uint64_t *bind_ns;

/* ------------------------------------------------------------------ */
/* One case's context and helpers                                      */
/* ------------------------------------------------------------------ */

typedef struct cx {
  hbg_runtime *rt;
  int inferred;
  int pass_deps; /* pass explicit ids even when inferring (merged) */
  const char *name; /* wd_case */
  uint64_t one;     /* ONES floats of 1.0f */
} cx;

#define ONES 4096u

/* Dependency ids as the mode wants them: all of them with explicit ids,
 * none when the runtime infers them from the data (unless the shape asks
 * for both, merged). */
static uint32_t nd(const cx *c, uint32_t n) {
  return c->inferred && !c->pass_deps ? 0 : n;
}

static uint64_t dalloc(cx *c, uint32_t n, float init) {
  uint64_t a = 0;
  ASSERT_OK(hbg_buffer_alloc(c->rt, (uint64_t)n * 4, &a));
  float *h = malloc((size_t)n * 4);
  ASSERT(h);
  for (uint32_t i = 0; i < n; i++)
    h[i] = init;
  ASSERT_OK(hbg_buffer_write(c->rt, a, h, (uint64_t)n * 4));
  free(h);
  return a;
}

static void dput(cx *c, uint64_t a, const float *h, uint32_t n) {
  ASSERT_OK(hbg_buffer_write(c->rt, a, h, (uint64_t)n * 4));
}

/* The device's n floats at a equal want[], bit for bit. */
static void expect(cx *c, uint64_t a, const float *want, uint32_t n,
                   const char *what) {
  float *got = malloc((size_t)n * 4);
  ASSERT(got);
  ASSERT_OK(hbg_buffer_read(c->rt, got, a, (uint64_t)n * 4));
  uint32_t bad = 0, first = 0;
  for (uint32_t i = 0; i < n; i++)
    if (memcmp(&got[i], &want[i], 4) != 0 && bad++ == 0)
      first = i;
  if (bad)
    T_FAIL("%s: WRONG RESULT in %s: %u of %u elements differ, first [%u] = "
           "%g, expected %g",
           c->name, what, bad, n, first, (double)got[first],
           (double)want[first]);
  free(got);
}

static void expect_all(cx *c, uint64_t a, float v, uint32_t n,
                       const char *what) {
  float *w = malloc((size_t)n * 4);
  ASSERT(w);
  for (uint32_t i = 0; i < n; i++)
    w[i] = v;
  expect(c, a, w, n, what);
  free(w);
}

/* Elements [at, at + n) of a float buffer (or of a boundary tensor). */
static hbg_tensor vec(uint64_t addr, uint64_t offset, uint32_t at, uint32_t n,
                      uint32_t mode) {
  hbg_tensor t;
  uint32_t dims[1] = {n};
  hbg_tensor_contig(&t, addr, offset + (uint64_t)at * 4, HBG_DTYPE_F32, 1,
                    dims, mode);
  return t;
}

static hbg_tensor view(const hbg_tensor *b, uint32_t at, uint32_t n,
                       uint32_t mode) {
  return vec(b->addr, b->offset, at, n, mode);
}

static hbg_tensor heap_out(uint32_t n) { return vec(0, 0, 0, n, HBG_ACCESS_OUT); }

static hbg_tensor as_in(hbg_tensor t) {
  t.mode = HBG_ACCESS_IN;
  return t;
}

static hbg_bind *begin(cx *c) {
  hbg_bind *b = NULL;
  int rc = hbg_bind_begin(c->rt, &b);
  if (rc)
    T_FAIL("%s: hbg_bind_begin -> %s: %s", c->name, hbg_err_name(rc),
           hbg_last_error());
  return b;
}

/* An ordinary task: kernel over args, an optional f32 scalar. */
static hbg_task_id task(cx *c, hbg_bind *b, uint32_t kernel, hbg_tensor *args,
                        uint32_t n_args, const float *s,
                        const hbg_task_id *deps, uint32_t n_deps) {
  hbg_scalar sc = hbg_scalar_static(s ? hbg_scalar_f32(*s) : 0);
  hbg_task t = {.kernel = kernel, .n_args = n_args, .args = args,
                .n_scalars = s ? 1 : 0, .scalars = &sc,
                .n_deps = nd(c, n_deps), .deps = deps};
  hbg_task_id id = HBG_TASK_NONE;
  int rc = hbg_submit_task(b, &t, &id);
  if (rc)
    T_FAIL("%s: hbg_submit_task(kernel %u) -> %s: %s", c->name, kernel,
           hbg_err_name(rc), hbg_last_error());
  return id;
}

static hbg_task_id t_fill(cx *c, hbg_bind *b, hbg_tensor out, float v,
                          const hbg_task_id *deps, uint32_t n_deps) {
  return task(c, b, HBG_KERNEL_FILL, &out, 1, &v, deps, n_deps);
}

static hbg_task_id t_scale(cx *c, hbg_bind *b, hbg_tensor in, hbg_tensor out,
                           float a, const hbg_task_id *deps,
                           uint32_t n_deps) {
  hbg_tensor args[2] = {in, out};
  return task(c, b, HBG_KERNEL_SCALE, args, 2, &a, deps, n_deps);
}

static hbg_task_id t_add(cx *c, hbg_bind *b, hbg_tensor x, hbg_tensor y,
                         hbg_tensor out, const hbg_task_id *deps,
                         uint32_t n_deps) {
  hbg_tensor args[3] = {x, y, out};
  return task(c, b, HBG_KERNEL_ADD, args, 3, NULL, deps, n_deps);
}

static hbg_task_id t_copy(cx *c, hbg_bind *b, hbg_tensor in, hbg_tensor out,
                          const hbg_task_id *deps, uint32_t n_deps) {
  hbg_tensor args[2] = {in, out};
  return task(c, b, HBG_KERNEL_COPY, args, 2, NULL, deps, n_deps);
}

static hbg_task_id graph(cx *c, hbg_bind *b, uint64_t key, hbg_record_fn fn,
                         void *user, const hbg_tensor *bt, uint32_t nbt,
                         const uint64_t *sc, uint32_t nsc,
                         const hbg_task_id *deps, uint32_t n_deps) {
  hbg_graph_submit g = {.key = key, .n_tensors = nbt, .tensors = bt,
                        .scalars = sc, .n_scalars = nsc,
                        .n_deps = nd(c, n_deps), .deps = deps,
                        .record = fn, .user = user};
  hbg_task_id id = HBG_TASK_NONE;
  int rc = hbg_submit_graph(b, &g, &id);
  if (rc)
    T_FAIL("%s: hbg_submit_graph(key 0x%llx) -> %s: %s", c->name,
           (unsigned long long)key, hbg_err_name(rc), hbg_last_error());
  return id;
}

/* Launch and wait under the watchdog; the bind ran all n_entries entries
 * without a device-side error. */
static void run(cx *c, hbg_bind *b, const char *step, uint32_t n_entries) {
  char what[160];
  snprintf(what, sizeof what, "%s, hbg_bind_launch", step);
  wd_arm(what, wd_secs);
  uint64_t t0 = now_ns();
  int rc = hbg_bind_launch(b);
  if (rc)
    T_FAIL("%s: %s: hbg_bind_launch -> %s: %s", c->name, step,
           hbg_err_name(rc), hbg_last_error());
  snprintf(what, sizeof what, "%s, hbg_bind_wait", step);
  wd_arm(what, wd_secs);
  rc = hbg_bind_wait(b);
  alarm(0);
  *bind_ns += now_ns() - t0;
  if (rc)
    T_FAIL("%s: %s: hbg_bind_wait -> %s: %s", c->name, step,
           hbg_err_name(rc), hbg_last_error());
  hbg_bind_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  if (st.n_tasks != n_entries || st.device_status != 0 || st.fatal != 0)
    T_FAIL("%s: %s: stats say %u entries (expected %u), device status %d, "
           "fatal %d",
           c->name, step, st.n_tasks, n_entries, st.device_status, st.fatal);
}

/* Launch and wait under the watchdog; the wait reports want_rc at entry
 * want_entry, node want_node. */
static void run_fail(cx *c, hbg_bind *b, const char *step, int want_rc,
                     uint32_t want_entry, uint32_t want_node) {
  wd_arm(step, wd_secs);
  uint64_t t0 = now_ns();
  int rc = hbg_bind_launch(b);
  if (rc)
    T_FAIL("%s: %s: hbg_bind_launch -> %s: %s", c->name, step,
           hbg_err_name(rc), hbg_last_error());
  rc = hbg_bind_wait(b);
  alarm(0);
  *bind_ns += now_ns() - t0;
  uint32_t entry = 0, node = 0;
  int loc = hbg_bind_error_location(b, &entry, &node);
  if (rc != want_rc || loc != 0 || entry != want_entry || node != want_node)
    T_FAIL("%s: %s: hbg_bind_wait -> %s at entry %d node %d (location %s), "
           "expected %s at entry %u node %d: %s",
           c->name, step, hbg_err_name(rc), (int)entry, (int)node,
           hbg_err_name(loc), hbg_err_name(want_rc), want_entry,
           (int)want_node, hbg_last_error());
}

/* ------------------------------------------------------------------ */
/* Graphs (record callbacks)                                           */
/* ------------------------------------------------------------------ */

#define K_FILL1 0x5348415045000001ull
#define K_SCALE1 0x5348415045000002ull
#define K_STEP 0x5348415045000003ull
#define K_DIAMOND 0x5348415045000004ull
#define K_FANOUT 0x5348415045000005ull
#define K_FANIN 0x5348415045000006ull
#define K_DIAMAX 0x5348415045000007ull
#define K_BOUNDS 0x5348415045000008ull
#define K_ROPE1 0x5348415045000009ull
#define K_FAILFAN 0x534841504500000aull
#define K_BF16 0x534841504500000bull
#define K_ADDN 0x5348415045000100ull /* + k */

#define DN 32u /* the diamond's elements */

static int rtask(hbg_recorder *rec, uint32_t kernel, hbg_tensor *args,
                 uint32_t n_args, const hbg_scalar *s,
                 const hbg_task_id *deps, uint32_t n_deps) {
  hbg_task t = {.kernel = kernel, .n_args = n_args, .args = args,
                .n_scalars = s ? 1 : 0, .scalars = s, .n_deps = n_deps,
                .deps = deps};
  return hbg_record_task(rec, &t, NULL);
}

static const hbg_tensor *bounds(hbg_recorder *rec, uint32_t want) {
  uint32_t n = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &n);
  return bt && n == want ? bt : NULL;
}

/* [out]; scalar 0: out = value. One node. */
static int rec_fill1(hbg_recorder *rec, void *user) {
  (void)user;
  const hbg_tensor *bt = bounds(rec, 1);
  if (!bt)
    return -1;
  hbg_tensor o = bt[0];
  hbg_scalar s = hbg_scalar_boundary(0);
  return rtask(rec, HBG_KERNEL_FILL, &o, 1, &s, NULL, 0);
}

/* [in, out]; scalar 0: out = in * alpha. One node. */
static int rec_scale1(hbg_recorder *rec, void *user) {
  (void)user;
  const hbg_tensor *bt = bounds(rec, 2);
  if (!bt)
    return -1;
  hbg_tensor a[2] = {bt[0], bt[1]};
  hbg_scalar s = hbg_scalar_boundary(0);
  return rtask(rec, HBG_KERNEL_SCALE, a, 2, &s, NULL, 0);
}

/* [in, one, out]: out = in + one. One node. */
static int rec_step(hbg_recorder *rec, void *user) {
  (void)user;
  const hbg_tensor *bt = bounds(rec, 3);
  if (!bt)
    return -1;
  hbg_tensor a[3] = {bt[0], bt[1], bt[2]};
  return rtask(rec, HBG_KERNEL_ADD, a, 3, NULL, NULL, 0);
}

/* [X, Y] of DN: a = 2X, b = 3X, c = a + b, Y = c (= 5X). Four nodes. */
static int rec_diamond(hbg_recorder *rec, void *user) {
  (void)user;
  const hbg_tensor *bt = bounds(rec, 2);
  if (!bt)
    return -1;
  hbg_scalar two = hbg_scalar_static(hbg_scalar_f32(2.0f));
  hbg_scalar three = hbg_scalar_static(hbg_scalar_f32(3.0f));
  hbg_tensor a0[2] = {bt[0], heap_out(DN)}, a1[2] = {bt[0], heap_out(DN)};
  int rc;
  if ((rc = rtask(rec, HBG_KERNEL_SCALE, a0, 2, &two, NULL, 0)) ||
      (rc = rtask(rec, HBG_KERNEL_SCALE, a1, 2, &three, NULL, 0)))
    return rc;
  hbg_tensor a2[3] = {as_in(a0[1]), as_in(a1[1]), heap_out(DN)};
  if ((rc = rtask(rec, HBG_KERNEL_ADD, a2, 3, NULL, NULL, 0)))
    return rc;
  hbg_tensor a3[2] = {as_in(a2[2]), bt[1]};
  return rtask(rec, HBG_KERNEL_COPY, a3, 2, NULL, NULL, 0);
}

/* [X, one, Y] of 1 element: *k + 1 nodes t_j = t_{j-1} + one (t_-1 = X),
 * then Y = t: Y = X + *k + 1, one chain of *k + 2 nodes. */
static int rec_addn(hbg_recorder *rec, void *user) {
  const uint32_t k = *(const uint32_t *)user;
  const hbg_tensor *bt = bounds(rec, 3);
  if (!bt)
    return -1;
  hbg_tensor prev = bt[0];
  for (uint32_t j = 0; j <= k; j++) {
    hbg_tensor a[3] = {prev, bt[1], heap_out(1)};
    int rc = rtask(rec, HBG_KERNEL_ADD, a, 3, NULL, NULL, 0);
    if (rc)
      return rc;
    prev = as_in(a[2]);
  }
  hbg_tensor a[2] = {prev, bt[2]};
  return rtask(rec, HBG_KERNEL_COPY, a, 2, NULL, NULL, 0);
}

/* Fan-out values: consumer k writes value * (1 + k % 8). */
static float fan_alpha(uint32_t k) { return (float)(1u + k % 8u); }
/* Fan-in values: producer k writes this. */
static float fan_value(uint32_t k) { return (float)(k % 251u) * 0.5f + 1.0f; }

/* The fan-out's outputs: FO_BUFS boundary tensors of FO_EACH elements,
 * each in its own buffer. One buffer would do as well, but the recorder
 * compares each access with every earlier access of the same buffer, so
 * 65535 writes into one buffer cost seconds; split, only the reads of node
 * 0's output pile up. The fan-in's writes cannot be split (its last node
 * reads them all as one tensor). */
#define FO_BUFS 256u
#define FO_EACH 256u

/* [Y_0 .. Y_255] of 256 each; scalar 0: node 0 fills an inner h with the
 * value, nodes 1..*n each scale h into one element of the Ys: node 0 has
 * *n consumers. */
static int rec_fanout(hbg_recorder *rec, void *user) {
  const uint32_t n = *(const uint32_t *)user;
  const hbg_tensor *bt = bounds(rec, FO_BUFS);
  if (!bt)
    return -1;
  hbg_tensor h = heap_out(1);
  hbg_scalar v = hbg_scalar_boundary(0);
  int rc = rtask(rec, HBG_KERNEL_FILL, &h, 1, &v, NULL, 0);
  for (uint32_t k = 0; rc == 0 && k < n; k++) {
    hbg_tensor a[2] = {as_in(h),
                       view(&bt[k / FO_EACH], k % FO_EACH, 1, HBG_ACCESS_OUT)};
    hbg_scalar s = hbg_scalar_static(hbg_scalar_f32(fan_alpha(k)));
    rc = rtask(rec, HBG_KERNEL_SCALE, a, 2, &s, NULL, 0);
  }
  return rc;
}

/* [B, Z] of *n: nodes 0..*n-1 each fill one element of B, node *n copies
 * all of B into Z: *n producers. */
static int rec_fanin(hbg_recorder *rec, void *user) {
  const uint32_t n = *(const uint32_t *)user;
  const hbg_tensor *bt = bounds(rec, 2);
  if (!bt)
    return -1;
  int rc = 0;
  for (uint32_t k = 0; rc == 0 && k < n; k++) {
    hbg_tensor o = view(&bt[0], k, 1, HBG_ACCESS_OUT);
    hbg_scalar s = hbg_scalar_static(hbg_scalar_f32(fan_value(k)));
    rc = rtask(rec, HBG_KERNEL_FILL, &o, 1, &s, NULL, 0);
  }
  if (rc)
    return rc;
  hbg_tensor a[2] = {view(&bt[0], 0, n, HBG_ACCESS_IN), bt[1]};
  return rtask(rec, HBG_KERNEL_COPY, a, 2, NULL, NULL, 0);
}

/* [Y, Z] of *n; scalar 0: node 0 fills h, nodes 1..*n scale it into the
 * elements of Y, the last copies Y into Z: fan-out *n, then fan-in *n. */
static int rec_diamax(hbg_recorder *rec, void *user) {
  const uint32_t n = *(const uint32_t *)user;
  const hbg_tensor *bt = bounds(rec, 2);
  if (!bt)
    return -1;
  hbg_tensor h = heap_out(1);
  hbg_scalar v = hbg_scalar_boundary(0);
  int rc = rtask(rec, HBG_KERNEL_FILL, &h, 1, &v, NULL, 0);
  for (uint32_t k = 0; rc == 0 && k < n; k++) {
    hbg_tensor a[2] = {as_in(h), view(&bt[0], k, 1, HBG_ACCESS_OUT)};
    hbg_scalar s = hbg_scalar_static(hbg_scalar_f32(fan_alpha(k)));
    rc = rtask(rec, HBG_KERNEL_SCALE, a, 2, &s, NULL, 0);
  }
  if (rc)
    return rc;
  hbg_tensor a[2] = {view(&bt[0], 0, n, HBG_ACCESS_IN), bt[1]};
  return rtask(rec, HBG_KERNEL_COPY, a, 2, NULL, NULL, 0);
}

/* ROPE over x [8] with cos and sin [2][4]: positions 0 and 1 run; a
 * larger one is the device's HBG_E_KERNEL (a value only the run sees when
 * it is a boundary scalar). */
#define RD 8u
#define RP 2u

static int rope_node(hbg_recorder *rec, const hbg_tensor *x,
                     const hbg_tensor *cs, const hbg_tensor *sn,
                     hbg_tensor *out) {
  hbg_tensor a[4] = {*x, *cs, *sn, *out};
  hbg_scalar p = hbg_scalar_boundary(0);
  hbg_task t = {.kernel = HBG_KERNEL_ROPE, .n_args = 4, .args = a,
                .n_scalars = 1, .scalars = &p};
  int rc = hbg_record_task(rec, &t, NULL);
  *out = a[3];
  return rc;
}

/* [x, cos, sin, out]; scalar 0: the position. One node. */
static int rec_rope1(hbg_recorder *rec, void *user) {
  (void)user;
  const hbg_tensor *bt = bounds(rec, 4);
  if (!bt)
    return -1;
  hbg_tensor o = bt[3];
  return rope_node(rec, &bt[0], &bt[1], &bt[2], &o);
}

/* [x, cos, sin, Y (1024), Z (64)]; scalar 0: the position. Node 0: ROPE
 * into an inner h; nodes 1..1024 scale h[0] into Y's elements; nodes
 * 1025..1088 fill Z's, waiting for nothing. */
static int rec_failfan(hbg_recorder *rec, void *user) {
  (void)user;
  const hbg_tensor *bt = bounds(rec, 5);
  if (!bt)
    return -1;
  hbg_tensor h = heap_out(RD);
  int rc = rope_node(rec, &bt[0], &bt[1], &bt[2], &h);
  for (uint32_t k = 0; rc == 0 && k < 1024; k++) {
    hbg_tensor a[2] = {view(&h, 0, 1, HBG_ACCESS_IN),
                       view(&bt[3], k, 1, HBG_ACCESS_OUT)};
    hbg_scalar s = hbg_scalar_static(hbg_scalar_f32(2.0f));
    rc = rtask(rec, HBG_KERNEL_SCALE, a, 2, &s, NULL, 0);
  }
  for (uint32_t k = 0; rc == 0 && k < 64; k++) {
    hbg_tensor o = view(&bt[4], k, 1, HBG_ACCESS_OUT);
    hbg_scalar s = hbg_scalar_static(hbg_scalar_f32(3.0f));
    rc = rtask(rec, HBG_KERNEL_FILL, &o, 1, &s, NULL, 0);
  }
  return rc;
}

/* Entries that submit the small graphs. */
static hbg_task_id g_fill1(cx *c, hbg_bind *b, hbg_tensor out, float v,
                           const hbg_task_id *deps, uint32_t n_deps) {
  uint64_t s = hbg_scalar_f32(v);
  return graph(c, b, K_FILL1, rec_fill1, NULL, &out, 1, &s, 1, deps, n_deps);
}

static hbg_task_id g_scale1(cx *c, hbg_bind *b, hbg_tensor in, hbg_tensor out,
                            float a, const hbg_task_id *deps,
                            uint32_t n_deps) {
  hbg_tensor bt[2] = {in, out};
  uint64_t s = hbg_scalar_f32(a);
  return graph(c, b, K_SCALE1, rec_scale1, NULL, bt, 2, &s, 1, deps, n_deps);
}

static hbg_task_id g_step(cx *c, hbg_bind *b, hbg_tensor in, hbg_tensor out,
                          const hbg_task_id *deps, uint32_t n_deps) {
  hbg_tensor bt[3] = {in, vec(c->one, 0, 0, in.shape[0], HBG_ACCESS_IN), out};
  return graph(c, b, K_STEP, rec_step, NULL, bt, 3, NULL, 0, deps, n_deps);
}

static hbg_task_id g_diamond(cx *c, hbg_bind *b, hbg_tensor x, hbg_tensor y,
                             const hbg_task_id *deps, uint32_t n_deps) {
  hbg_tensor bt[2] = {x, y};
  return graph(c, b, K_DIAMOND, rec_diamond, NULL, bt, 2, NULL, 0, deps,
               n_deps);
}

/* ------------------------------------------------------------------ */
/* The shapes                                                          */
/* ------------------------------------------------------------------ */

static void sh_empty(cx *c) {
  hbg_bind *b = begin(c);
  run(c, b, "the empty bind", 0);
  hbg_bind_end(b);
}

static void one_fill_bind(cx *c, uint64_t o, float v, const char *step) {
  hbg_bind *b = begin(c);
  t_fill(c, b, vec(o, 0, 0, 16, HBG_ACCESS_OUT), v, NULL, 0);
  run(c, b, step, 1);
  hbg_bind_end(b);
  expect_all(c, o, v, 16, step);
}

static void sh_empty_between(cx *c) {
  uint64_t o = dalloc(c, 16, -1.0f);
  one_fill_bind(c, o, 1.5f, "bind 1 (one task)");
  sh_empty(c);
  one_fill_bind(c, o, 2.5f, "bind 3 (one task, after the empty bind)");
}

static void sh_empty_pipelined(cx *c) {
  hbg_bind *b1 = begin(c);
  uint64_t t0 = now_ns();
  wd_arm("empty bind 1's launch", wd_secs);
  ASSERT_OK(hbg_bind_launch(b1));
  hbg_bind *b2 = begin(c);
  wd_arm("empty bind 2's launch (bind 1 in flight)", wd_secs);
  ASSERT_OK(hbg_bind_launch(b2));
  wd_arm("empty bind 1's wait (bind 2 in flight)", wd_secs);
  ASSERT_OK(hbg_bind_wait(b1));
  wd_arm("empty bind 2's wait", wd_secs);
  ASSERT_OK(hbg_bind_wait(b2));
  alarm(0);
  *bind_ns += now_ns() - t0;
  hbg_bind_end(b1);
  hbg_bind_end(b2);
  uint64_t o = dalloc(c, 16, -1.0f);
  one_fill_bind(c, o, 0.75f, "bind 3 (one task, after two empty binds)");
}

static void sh_one_task(cx *c) {
  uint64_t o = dalloc(c, 16, -1.0f);
  one_fill_bind(c, o, 1.25f, "the bind of one task");
}

static void sh_graph_1node(cx *c) {
  uint64_t o = dalloc(c, 16, -1.0f);
  hbg_bind *b = begin(c);
  g_fill1(c, b, vec(o, 0, 0, 16, HBG_ACCESS_OUT), 2.5f, NULL, 0);
  run(c, b, "the bind of one one-node graph", 1);
  hbg_bind_end(b);
  expect_all(c, o, 2.5f, 16, "the graph's output");
}

static void diamond_input(float *x) {
  for (uint32_t i = 0; i < DN; i++)
    x[i] = (float)i * 0.25f - 3.0f;
}

static void sh_graph_only(cx *c) {
  float x[DN], y[DN];
  diamond_input(x);
  for (uint32_t i = 0; i < DN; i++)
    y[i] = 5.0f * x[i];
  uint64_t dx = dalloc(c, DN, 0.0f), dy = dalloc(c, DN, -1.0f);
  dput(c, dx, x, DN);
  hbg_bind *b = begin(c);
  g_diamond(c, b, vec(dx, 0, 0, DN, HBG_ACCESS_IN),
            vec(dy, 0, 0, DN, HBG_ACCESS_OUT), NULL, 0);
  run(c, b, "the bind of one four-node graph", 1);
  hbg_bind_end(b);
  expect(c, dy, y, DN, "Y = 5X");
}

static void sh_mix(cx *c) {
  uint64_t dx = dalloc(c, DN, -1.0f), dy = dalloc(c, DN, -1.0f),
           dz = dalloc(c, DN, -1.0f);
  hbg_bind *b = begin(c);
  hbg_task_id i0 = t_fill(c, b, vec(dx, 0, 0, DN, HBG_ACCESS_OUT), 1.5f,
                          NULL, 0);
  hbg_task_id i1 = g_diamond(c, b, vec(dx, 0, 0, DN, HBG_ACCESS_IN),
                             vec(dy, 0, 0, DN, HBG_ACCESS_OUT), &i0, 1);
  t_scale(c, b, vec(dy, 0, 0, DN, HBG_ACCESS_IN),
          vec(dz, 0, 0, DN, HBG_ACCESS_OUT), 0.5f, &i1, 1);
  run(c, b, "the bind task -> graph -> task", 3);
  hbg_bind_end(b);
  expect_all(c, dy, 7.5f, DN, "the graph's Y = 5X");
  expect_all(c, dz, 3.75f, DN, "the last task's Z = Y / 2");
}

static void sh_graph_chain(cx *c) {
  static const uint32_t k = 4094; /* 4095 ADD nodes and a COPY: 4096 */
  uint64_t dx = dalloc(c, 1, 0.5f), dy = dalloc(c, 1, -1.0f);
  hbg_bind *b = begin(c);
  hbg_tensor bt[3] = {vec(dx, 0, 0, 1, HBG_ACCESS_IN),
                      vec(c->one, 0, 0, 1, HBG_ACCESS_IN),
                      vec(dy, 0, 0, 1, HBG_ACCESS_OUT)};
  graph(c, b, K_ADDN + k, rec_addn, (void *)&k, bt, 3, NULL, 0, NULL, 0);
  run(c, b, "the bind of one 4096-node chain graph", 1);
  hbg_bind_end(b);
  expect_all(c, dy, 0.5f + (float)(k + 1), 1, "the chain's end");
}

static void sh_fanout_max(cx *c) {
  static const uint32_t n = MAXN - 1;
  _Static_assert(FO_BUFS * FO_EACH >= MAXN - 1, "room for every consumer");
  uint64_t dy[FO_BUFS];
  hbg_tensor y[FO_BUFS];
  for (uint32_t i = 0; i < FO_BUFS; i++) {
    dy[i] = dalloc(c, FO_EACH, -1.0f);
    y[i] = vec(dy[i], 0, 0, FO_EACH, HBG_ACCESS_OUT);
  }
  static float want[FO_BUFS * FO_EACH];
  for (uint32_t k = 0; k < FO_BUFS * FO_EACH; k++)
    want[k] = k < n ? 0.5f * fan_alpha(k) : -1.0f;
  hbg_bind *b = begin(c);
  uint64_t s = hbg_scalar_f32(0.5f);
  wd_arm("recording the fan-out graph", wd_secs * 6);
  graph(c, b, K_FANOUT, rec_fanout, (void *)&n, y, FO_BUFS, &s, 1, NULL, 0);
  char step[96];
  snprintf(step, sizeof step, "the bind of one graph: 1 node -> %u consumers",
           n);
  run(c, b, step, 1);
  hbg_bind_end(b);
  for (uint32_t i = 0; i < FO_BUFS; i++)
    expect(c, dy[i], want + i * FO_EACH, FO_EACH,
           "the consumers' outputs");
  /* four chained replays in one window (4 x MAXN nodes), the last
   * replay's values win */
  b = begin(c);
  hbg_task_id prev = HBG_TASK_NONE;
  c->pass_deps = 1;
  for (uint32_t r = 0; r < 4; r++) {
    s = hbg_scalar_f32((float)(r + 1));
    prev = graph(c, b, K_FANOUT, rec_fanout, (void *)&n, y, FO_BUFS, &s, 1,
                 &prev, r ? 1 : 0);
  }
  c->pass_deps = 0;
  run(c, b, "the bind of four chained replays of the fan-out graph", 4);
  hbg_bind_end(b);
  for (uint32_t k = 0; k < n; k++)
    want[k] = 4.0f * fan_alpha(k);
  for (uint32_t i = 0; i < FO_BUFS; i++)
    expect(c, dy[i], want + i * FO_EACH, FO_EACH,
           "the last replay's outputs");
}

static void sh_fanin_max(cx *c) {
  static const uint32_t n = MAXN - 1;
  uint64_t db = dalloc(c, n, -1.0f), dz = dalloc(c, n, -1.0f);
  float *want = malloc((size_t)n * 4);
  ASSERT(want);
  for (uint32_t k = 0; k < n; k++)
    want[k] = fan_value(k);
  hbg_bind *b = begin(c);
  hbg_tensor bt[2] = {vec(db, 0, 0, n, HBG_ACCESS_INOUT),
                      vec(dz, 0, 0, n, HBG_ACCESS_OUT)};
  wd_arm("recording the fan-in graph", wd_secs * 6);
  graph(c, b, K_FANIN, rec_fanin, (void *)&n, bt, 2, NULL, 0, NULL, 0);
  char step[96];
  snprintf(step, sizeof step, "the bind of one graph: %u producers -> 1 node",
           n);
  run(c, b, step, 1);
  hbg_bind_end(b);
  expect(c, db, want, n, "the producers' outputs");
  expect(c, dz, want, n, "the fan-in node's copy of them");
  free(want);
}

static void sh_diamond(cx *c) {
  static const uint32_t n = 4094;
  uint64_t dy = dalloc(c, n, -1.0f), dz = dalloc(c, n, -1.0f);
  float *want = malloc((size_t)n * 4);
  ASSERT(want);
  for (uint32_t k = 0; k < n; k++)
    want[k] = 0.25f * fan_alpha(k);
  hbg_bind *b = begin(c);
  hbg_tensor bt[2] = {vec(dy, 0, 0, n, HBG_ACCESS_INOUT),
                      vec(dz, 0, 0, n, HBG_ACCESS_OUT)};
  uint64_t s = hbg_scalar_f32(0.25f);
  graph(c, b, K_DIAMAX, rec_diamax, (void *)&n, bt, 2, &s, 1, NULL, 0);
  run(c, b, "the bind of one graph: 1 -> 4094 -> 1", 1);
  hbg_bind_end(b);
  expect(c, dy, want, n, "the 4094 middle nodes' outputs");
  expect(c, dz, want, n, "the last node's copy of them");
  free(want);
}

/* [T_0 .. T_4095] of 4 each, scalars s_0 .. s_4095: node k fills T_k with
 * s_k. The most boundary tensors and scalars a graph may have. */
static int rec_bounds(hbg_recorder *rec, void *user) {
  (void)user;
  const hbg_tensor *bt = bounds(rec, HBG_IMG_MAX_BOUNDARY);
  if (!bt)
    return -1;
  int rc = 0;
  for (uint32_t k = 0; rc == 0 && k < HBG_IMG_MAX_BOUNDARY; k++) {
    hbg_tensor o = bt[k];
    hbg_scalar s = hbg_scalar_boundary(k);
    rc = rtask(rec, HBG_KERNEL_FILL, &o, 1, &s, NULL, 0);
  }
  return rc;
}

/* Two binds, each one replay of the 4096-boundary graph with its own
 * scalars; the tensors are 4096 slices of one buffer (a buffer each would
 * cost 4096 allocations, writes and reads on the device, seconds on the
 * stand-in). */
static void sh_bounds_max(cx *c) {
  enum { NB = HBG_IMG_MAX_BOUNDARY, E = 4 };
  static uint64_t s[NB];
  static hbg_tensor bt[NB];
  static float want[NB * E];
  uint64_t d = dalloc(c, NB * E, -1.0f);
  for (uint32_t k = 0; k < NB; k++)
    bt[k] = vec(d, 0, k * E, E, HBG_ACCESS_OUT);
  for (uint32_t r = 0; r < 2; r++) {
    for (uint32_t k = 0; k < NB; k++) {
      s[k] = hbg_scalar_f32(fan_value(k + r));
      for (uint32_t i = 0; i < E; i++)
        want[k * E + i] = fan_value(k + r);
    }
    hbg_bind *b = begin(c);
    graph(c, b, K_BOUNDS, rec_bounds, NULL, bt, NB, s, NB, NULL, 0);
    run(c, b, r ? "bind 2 of the 4096-boundary graph"
                : "bind 1 of the 4096-boundary graph", 1);
    hbg_bind_end(b);
    expect(c, d, want, NB * E, "the boundary tensors");
  }
}

/* T[0] = 1; entry k: T[k] = T[k-1] + 1, every fourth a graph replay. */
static void sh_chain(cx *c) {
  enum { L = 1024 };
  uint64_t dt = dalloc(c, L, -1.0f);
  float want[L];
  hbg_bind *b = begin(c);
  hbg_task_id prev = t_fill(c, b, vec(dt, 0, 0, 1, HBG_ACCESS_OUT), 1.0f,
                            NULL, 0);
  want[0] = 1.0f;
  for (uint32_t k = 1; k < L; k++) {
    hbg_tensor in = vec(dt, 0, k - 1, 1, HBG_ACCESS_IN),
               out = vec(dt, 0, k, 1, HBG_ACCESS_OUT);
    if (k % 4 == 3)
      prev = g_step(c, b, in, out, &prev, 1);
    else
      prev = t_add(c, b, in, vec(c->one, 0, 0, 1, HBG_ACCESS_IN), out, &prev,
                   1);
    want[k] = (float)(k + 1);
  }
  run(c, b, "the bind of a 1024-entry chain", L);
  hbg_bind_end(b);
  expect(c, dt, want, L, "the chain's elements");
}

static void sh_wide(cx *c) {
  enum { W = 512 };
  uint64_t dout = dalloc(c, W, -1.0f);
  float want[W];
  hbg_bind *b = begin(c);
  for (uint32_t i = 0; i < W; i++) {
    want[i] = (float)i * 0.5f + 0.25f;
    hbg_tensor o = vec(dout, 0, i, 1, HBG_ACCESS_OUT);
    if (i % 2)
      g_fill1(c, b, o, want[i], NULL, 0);
    else
      t_fill(c, b, o, want[i], NULL, 0);
  }
  run(c, b, "the bind of 512 independent entries", W);
  hbg_bind_end(b);
  expect(c, dout, want, W, "the entries' outputs");
}

/* Bind r (0, 1): 32 independent diamond replays Y_i = 5 X_i; then 16
 * chained replays of the step graph, T[j+1] = T[j] + 1. */
static void sh_replays(cx *c) {
  enum { R = 32, S = 16 };
  uint64_t dx = dalloc(c, R * DN, 0.0f), dy = dalloc(c, R * DN, -1.0f);
  uint64_t dt = dalloc(c, S + 1, -1.0f);
  static float x[R * DN], y[R * DN];
  for (uint32_t r = 0; r < 2; r++) {
    for (uint32_t i = 0; i < R * DN; i++) {
      x[i] = (float)((i * 7 + r * 3) % 64) * 0.5f - 8.0f;
      y[i] = 5.0f * x[i];
    }
    dput(c, dx, x, R * DN);
    float t0 = 10.0f * (float)(r + 1);
    dput(c, dt, &t0, 1);
    hbg_bind *b = begin(c);
    for (uint32_t i = 0; i < R; i++)
      g_diamond(c, b, vec(dx, 0, i * DN, DN, HBG_ACCESS_IN),
                vec(dy, 0, i * DN, DN, HBG_ACCESS_OUT), NULL, 0);
    hbg_tensor bt[3 * S];
    for (uint32_t j = 0; j < S; j++) {
      bt[3 * j] = vec(dt, 0, j, 1, HBG_ACCESS_IN);
      bt[3 * j + 1] = vec(c->one, 0, 0, 1, HBG_ACCESS_IN);
      bt[3 * j + 2] = vec(dt, 0, j + 1, 1, HBG_ACCESS_OUT);
    }
    hbg_graph_submit g = {.key = K_STEP, .n_tensors = 3, .tensors = bt,
                          .record = rec_step};
    int rc = hbg_submit_graph_n(b, &g, S, HBG_GRAPH_N_CHAIN, NULL);
    if (rc)
      T_FAIL("%s: hbg_submit_graph_n -> %s: %s", c->name, hbg_err_name(rc),
             hbg_last_error());
    run(c, b, r ? "bind 2 of replays" : "bind 1 of replays", R + S);
    hbg_bind_end(b);
    expect(c, dy, y, R * DN, "the diamond replays' outputs");
    float want[S + 1];
    for (uint32_t j = 0; j <= S; j++)
      want[j] = t0 + (float)j;
    expect(c, dt, want, S + 1, "the chained replays' outputs");
  }
}

/* Keys k = 0..11, graph k: Y = X + k + 1 in k + 2 nodes; each submitted
 * twice, round two after round one, on other outputs. */
static void sh_keys(cx *c) {
  enum { K = 12 };
  static const uint32_t ks[K] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  uint64_t dx = dalloc(c, 2 * K, 0.0f), dy = dalloc(c, 2 * K, -1.0f);
  float x[2 * K], y[2 * K];
  for (uint32_t i = 0; i < 2 * K; i++) {
    x[i] = (float)i * 0.5f;
    y[i] = x[i] + (float)(i % K + 1);
  }
  dput(c, dx, x, 2 * K);
  hbg_bind *b = begin(c);
  for (uint32_t i = 0; i < 2 * K; i++) {
    hbg_tensor bt[3] = {vec(dx, 0, i, 1, HBG_ACCESS_IN),
                        vec(c->one, 0, 0, 1, HBG_ACCESS_IN),
                        vec(dy, 0, i, 1, HBG_ACCESS_OUT)};
    graph(c, b, K_ADDN + ks[i % K], rec_addn, (void *)&ks[i % K], bt, 3,
          NULL, 0, NULL, 0);
  }
  run(c, b, "the bind of 12 keys, two submissions each", 2 * K);
  hbg_bind_end(b);
  expect(c, dy, y, 2 * K, "the keys' outputs");
}

/* 257 producers fill B[i] (tasks and graph replays); a task copies B[0,
 * 256) into C and a graph computes D[1, 257) = 5 B[1, 257), each waiting
 * for 256 of them; a copy waiting for all 257 is refused. */
static void sh_win_fanin(cx *c) {
  enum { P = WIN_DEPS_MAX + 1 };
  uint64_t db = dalloc(c, P, -1.0f), dc = dalloc(c, P, -1.0f),
           dd = dalloc(c, P, -1.0f), dr = dalloc(c, P, -1.0f);
  float want[P], want_d[P];
  hbg_task_id ids[P];
  hbg_bind *b = begin(c);
  for (uint32_t i = 0; i < P; i++) {
    want[i] = fan_value(i);
    hbg_tensor o = vec(db, 0, i, 1, HBG_ACCESS_OUT);
    ids[i] = i % 2 ? g_fill1(c, b, o, want[i], NULL, 0)
                   : t_fill(c, b, o, want[i], NULL, 0);
  }
  t_copy(c, b, vec(db, 0, 0, P - 1, HBG_ACCESS_IN),
         vec(dc, 0, 0, P - 1, HBG_ACCESS_OUT), ids, P - 1);
  g_scale1(c, b, vec(db, 0, 1, P - 1, HBG_ACCESS_IN),
           vec(dd, 0, 1, P - 1, HBG_ACCESS_OUT), 5.0f, ids + 1, P - 1);
  /* past the limit: refused, nothing appended */
  hbg_tensor a[2] = {vec(db, 0, 0, P, HBG_ACCESS_IN),
                     vec(dr, 0, 0, P, HBG_ACCESS_OUT)};
  hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a,
                .n_deps = nd(c, P), .deps = ids};
  ASSERT_ERR(hbg_submit_task(b, &t, NULL), HBG_E_LIMIT);
  run(c, b, "the bind of 257 producers and two 256-way fan-ins", P + 2);
  hbg_bind_end(b);
  expect(c, db, want, P, "the producers' outputs");
  expect(c, dc, want, P - 1, "the task's copy of 256 of them");
  want_d[0] = -1.0f;
  for (uint32_t i = 1; i < P; i++)
    want_d[i] = 5.0f * want[i];
  expect(c, dd, want_d, P, "the graph's 5x of 256 of them");
  expect_all(c, dr, -1.0f, P, "the refused copy's output (untouched)");
}

/* One producer fills A; 1024 dependents each scale it into C[i]. */
static void sh_win_fanout(cx *c) {
  enum { F = 1024 };
  uint64_t da = dalloc(c, 1, -1.0f), dout = dalloc(c, F, -1.0f);
  float want[F];
  hbg_bind *b = begin(c);
  hbg_task_id p = t_fill(c, b, vec(da, 0, 0, 1, HBG_ACCESS_OUT), 1.5f, NULL,
                         0);
  for (uint32_t i = 0; i < F; i++) {
    want[i] = 1.5f * fan_alpha(i);
    hbg_tensor in = vec(da, 0, 0, 1, HBG_ACCESS_IN),
               out = vec(dout, 0, i, 1, HBG_ACCESS_OUT);
    if (i % 2)
      g_scale1(c, b, in, out, fan_alpha(i), &p, 1);
    else
      t_scale(c, b, in, out, fan_alpha(i), &p, 1);
  }
  run(c, b, "the bind of one producer and 1024 dependents", F + 1);
  hbg_bind_end(b);
  expect(c, dout, want, F, "the dependents' outputs");
}

/* Explicit ids out of order and repeated (merged with the inferred ones
 * when inferring): entries 0..3 fill P[i]; entry 4 adds P[0] + P[3] after
 * waiting for {3, 0, 0, 2, 3, 1, 3, 0}; entry 5 copies that after {4, 4}. */
static void sh_dup_deps(cx *c) {
  uint64_t dp = dalloc(c, 4, -1.0f), dq = dalloc(c, 1, -1.0f),
           dr = dalloc(c, 1, -1.0f);
  c->pass_deps = 1;
  hbg_bind *b = begin(c);
  for (uint32_t i = 0; i < 4; i++) {
    hbg_tensor o = vec(dp, 0, i, 1, HBG_ACCESS_OUT);
    if (i % 2)
      g_fill1(c, b, o, (float)(i + 1), NULL, 0);
    else
      t_fill(c, b, o, (float)(i + 1), NULL, 0);
  }
  static const hbg_task_id d4[8] = {3, 0, 0, 2, 3, 1, 3, 0}, d5[2] = {4, 4};
  t_add(c, b, vec(dp, 0, 0, 1, HBG_ACCESS_IN), vec(dp, 0, 3, 1, HBG_ACCESS_IN),
        vec(dq, 0, 0, 1, HBG_ACCESS_OUT), d4, 8);
  g_scale1(c, b, vec(dq, 0, 0, 1, HBG_ACCESS_IN),
           vec(dr, 0, 0, 1, HBG_ACCESS_OUT), 2.0f, d5, 2);
  c->pass_deps = 0;
  run(c, b, "the bind with repeated, unordered ids", 6);
  hbg_bind_end(b);
  static const float p[4] = {1, 2, 3, 4};
  expect(c, dp, p, 4, "the producers' outputs");
  expect_all(c, dq, 5.0f, 1, "P[0] + P[3]");
  expect_all(c, dr, 10.0f, 1, "2 (P[0] + P[3])");
}

/* Binds of growing size in flight together: one task; launched before it
 * is waited for, 1025 entries reading its output; then one task again. */
static void sh_binds_grow(cx *c) {
  enum { F = 1024 };
  uint64_t da = dalloc(c, 1, -1.0f), dout = dalloc(c, F, -1.0f),
           dl = dalloc(c, 16, -1.0f);
  float want[F];
  hbg_bind *b1 = begin(c);
  t_fill(c, b1, vec(da, 0, 0, 1, HBG_ACCESS_OUT), 0.5f, NULL, 0);
  uint64_t t0 = now_ns();
  wd_arm("bind 1's launch (one task)", wd_secs);
  ASSERT_OK(hbg_bind_launch(b1));
  alarm(0);
  *bind_ns += now_ns() - t0;
  hbg_bind *b2 = begin(c);
  hbg_task_id p = t_copy(c, b2, vec(da, 0, 0, 1, HBG_ACCESS_IN),
                         vec(dout, 0, 0, 1, HBG_ACCESS_OUT), NULL, 0);
  want[0] = 0.5f;
  for (uint32_t i = 1; i < F; i++) {
    want[i] = 0.5f * fan_alpha(i);
    hbg_tensor in = vec(dout, 0, 0, 1, HBG_ACCESS_IN),
               out = vec(dout, 0, i, 1, HBG_ACCESS_OUT);
    if (i % 2)
      g_scale1(c, b2, in, out, fan_alpha(i), &p, 1);
    else
      t_scale(c, b2, in, out, fan_alpha(i), &p, 1);
  }
  t0 = now_ns();
  wd_arm("bind 2's launch (1024 entries, bind 1 in flight)", wd_secs);
  ASSERT_OK(hbg_bind_launch(b2));
  wd_arm("bind 1's wait (bind 2 in flight)", wd_secs);
  ASSERT_OK(hbg_bind_wait(b1));
  wd_arm("bind 2's wait", wd_secs);
  ASSERT_OK(hbg_bind_wait(b2));
  alarm(0);
  *bind_ns += now_ns() - t0;
  hbg_bind_end(b1);
  hbg_bind_end(b2);
  expect(c, dout, want, F, "bind 2's outputs");
  one_fill_bind(c, dl, 6.5f, "bind 3 (one task, after the large one)");
}

/* The ROPE operands: x, cos and sin (identity rotation: cos 1, sin 0). */
static void rope_operands(cx *c, hbg_tensor *x, hbg_tensor *cs,
                          hbg_tensor *sn) {
  uint64_t dx = dalloc(c, RD, 0.5f), dcs = dalloc(c, RP * RD / 2, 1.0f),
           dsn = dalloc(c, RP * RD / 2, 0.0f);
  uint32_t dims[2] = {RP, RD / 2};
  *x = vec(dx, 0, 0, RD, HBG_ACCESS_IN);
  hbg_tensor_contig(cs, dcs, 0, HBG_DTYPE_F32, 2, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(sn, dsn, 0, HBG_DTYPE_F32, 2, dims, HBG_ACCESS_IN);
}

/* A window whose entry 2 fails on the device (a ROPE position past its
 * table): entries wait for it, others do not. The wait names entry 2,
 * node 0; the runtime goes on (a bind after it runs). What else of the
 * failed window ran is not checked: executors may differ there. */
static void sh_fail_entry(cx *c) {
  hbg_tensor x, cs, sn;
  rope_operands(c, &x, &cs, &sn);
  uint64_t da = dalloc(c, RD, -1.0f), dr = dalloc(c, RD, -1.0f),
           ds = dalloc(c, RD, -1.0f), dz = dalloc(c, 64, -1.0f);
  /* first a bind where the ROPE graph runs: position 1 is in the table */
  hbg_bind *b = begin(c);
  uint64_t p = 1;
  hbg_tensor bt[4] = {x, cs, sn, vec(dr, 0, 0, RD, HBG_ACCESS_OUT)};
  graph(c, b, K_ROPE1, rec_rope1, NULL, bt, 4, &p, 1, NULL, 0);
  run(c, b, "the bind of one ROPE graph (position 1)", 1);
  hbg_bind_end(b);
  expect_all(c, dr, 0.5f, RD, "ROPE by the identity");
  b = begin(c);
  hbg_task_id i0 = t_fill(c, b, vec(da, 0, 0, RD, HBG_ACCESS_OUT), 1.0f,
                          NULL, 0);
  hbg_task_id i1 = t_copy(c, b, vec(da, 0, 0, RD, HBG_ACCESS_IN),
                          vec(ds, 0, 0, RD, HBG_ACCESS_OUT), &i0, 1);
  p = RP; /* past the table */
  hbg_task_id i2 = graph(c, b, K_ROPE1, rec_rope1, NULL, bt, 4, &p, 1, &i1,
                         1);
  ASSERT_EQ(i2, 2);
  hbg_tensor rin = vec(dr, 0, 0, RD, HBG_ACCESS_IN);
  hbg_task_id i3 = t_scale(c, b, rin, vec(ds, 0, 0, RD, HBG_ACCESS_OUT),
                           2.0f, &i2, 1);
  t_scale(c, b, vec(ds, 0, 0, RD, HBG_ACCESS_IN),
          vec(da, 0, 0, RD, HBG_ACCESS_OUT), 2.0f, &i3, 1);
  for (uint32_t k = 0; k < 64; k++)
    t_fill(c, b, vec(dz, 0, k, 1, HBG_ACCESS_OUT), 3.0f, NULL, 0);
  run_fail(c, b, "the bind whose entry 2 fails", HBG_E_KERNEL, 2, 0);
  hbg_bind_end(b);
  uint64_t o = dalloc(c, 16, -1.0f);
  one_fill_bind(c, o, 4.5f, "a bind after the failed one");
}

/* One graph whose node 0 fails, with 1024 nodes waiting for it and 64
 * that do not. */
static void sh_fail_graph(cx *c) {
  hbg_tensor x, cs, sn;
  rope_operands(c, &x, &cs, &sn);
  uint64_t dy = dalloc(c, 1024, -1.0f), dz = dalloc(c, 64, -1.0f);
  hbg_tensor bt[5] = {x, cs, sn, vec(dy, 0, 0, 1024, HBG_ACCESS_OUT),
                      vec(dz, 0, 0, 64, HBG_ACCESS_OUT)};
  float want[1024];
  for (uint32_t k = 0; k < 1024; k++)
    want[k] = 1.0f;
  for (uint32_t r = 0; r < 2; r++) {
    uint64_t p = r ? RP : 0;
    hbg_bind *b = begin(c);
    graph(c, b, K_FAILFAN, rec_failfan, NULL, bt, 5, &p, 1, NULL, 0);
    if (r == 0) {
      run(c, b, "the fan-out graph whose ROPE runs (position 0)", 1);
      expect(c, dy, want, 1024, "2 x ROPE's first element");
      expect_all(c, dz, 3.0f, 64, "the independent nodes");
    } else {
      run_fail(c, b, "the fan-out graph whose node 0 fails", HBG_E_KERNEL,
               0, 0);
    }
    hbg_bind_end(b);
  }
  uint64_t o = dalloc(c, 16, -1.0f);
  one_fill_bind(c, o, 4.5f, "a bind after the failed one");
}

/* bf16 weights: GEMV W [BN][BK] (BK not a multiple of 4, more rows than a
 * warp's eight), RMSNORM rows of BD > 256 (several partials per lane) with
 * w bf16 [BD], a COPY of an embedding row at a 2-byte offset. */
enum { BN = 37, BK = 301, BD = 600, BR = 3 };

static uint32_t bf_rng = 99;
static float bf_rand(void) {
  bf_rng = bf_rng * 1664525u + 1013904223u;
  return (float)(bf_rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

/* n bf16 values on the device (at byte 2 of a fresh buffer when odd2), and
 * their widening on the host. */
static hbg_tensor bf_upload(cx *c, uint32_t d0, uint32_t d1, int odd2,
                            float *wide) {
  const uint32_t n = d0 * (d1 ? d1 : 1);
  uint16_t *h = malloc((size_t)n * 2);
  ASSERT(h);
  for (uint32_t i = 0; i < n; i++) {
    h[i] = hbg__bf16_from_f32(bf_rand() * 2.0f);
    wide[i] = hbg__bf16_to_f32(h[i]);
  }
  uint64_t a = 0, off = odd2 ? 2 : 0;
  ASSERT_OK(hbg_buffer_alloc(c->rt, (uint64_t)n * 2 + off, &a));
  ASSERT_OK(hbg_buffer_write(c->rt, a + off, h, (uint64_t)n * 2));
  free(h);
  hbg_tensor t;
  uint32_t dims[2] = {d0, d1};
  ASSERT_OK(hbg_tensor_contig(&t, a, off, HBG_DTYPE_BF16, d1 ? 2 : 1, dims,
                              HBG_ACCESS_IN));
  return t;
}

static hbg_tensor f32_2d(uint64_t a, uint32_t d0, uint32_t d1,
                         uint32_t mode) {
  hbg_tensor t;
  uint32_t dims[2] = {d0, d1};
  ASSERT_OK(hbg_tensor_contig(&t, a, 0, HBG_DTYPE_F32, 2, dims, mode));
  return t;
}

/* The host's f32 kernel: t's tensors over host arrays (data), the bf16
 * ones given as their widened f32 copies. */
static void bf_ref(uint32_t kernel, const hbg_tensor *t, float *const *data,
                   uint32_t nt, uint64_t s) {
  hbg__ktensor k[3];
  for (uint32_t i = 0; i < nt; i++) {
    hbg_tensor f = t[i];
    f.dtype = HBG_DTYPE_F32;
    hbg__ktensor_from(&k[i], &f, data[i]);
  }
  ASSERT_OK(hbg__kernel_run(kernel, k, nt, &s, 1));
}

/* [W bf16 [BN][BK], x [BK], w bf16 [BN], y [BN]]; scalar 0 alpha:
 * h = W x * alpha, y = rmsnorm(h, w). Two nodes. */
static int rec_bf16(hbg_recorder *rec, void *user) {
  (void)user;
  const hbg_tensor *bt = bounds(rec, 4);
  if (!bt)
    return -1;
  hbg_tensor g[3] = {bt[0], bt[1], heap_out(BN)};
  hbg_scalar alpha = hbg_scalar_boundary(0);
  int rc = rtask(rec, HBG_KERNEL_GEMV, g, 3, &alpha, NULL, 0);
  if (rc)
    return rc;
  hbg_tensor r[3] = {as_in(g[2]), bt[2], bt[3]};
  hbg_scalar eps = hbg_scalar_static(hbg_scalar_f32(1e-5f));
  return rtask(rec, HBG_KERNEL_RMSNORM, r, 3, &eps, NULL, 0);
}

static void sh_bf16(cx *c) {
  static float wf[2][BN * BK], xf[2][BK], nf[BN], rw[BD], tab[4 * BD],
      rin[BR * BD], want[BR * BD], h[BN];
  hbg_tensor W[2] = {bf_upload(c, BN, BK, 0, wf[0]),
                     bf_upload(c, BN, BK, 1, wf[1])};
  hbg_tensor NW = bf_upload(c, BN, 0, 1, nf);
  hbg_tensor RW = bf_upload(c, BD, 0, 0, rw);
  hbg_tensor TAB = bf_upload(c, 4, BD, 0, tab);
  uint64_t dx[2], dy[3], drin = dalloc(c, BR * BD, 0.0f),
                         dr = dalloc(c, BR * BD, -1.0f),
                         de = dalloc(c, BD, -1.0f);
  for (int i = 0; i < 2; i++) {
    for (uint32_t j = 0; j < BK; j++)
      xf[i][j] = bf_rand();
    dx[i] = dalloc(c, BK, 0.0f);
    dput(c, dx[i], xf[i], BK);
  }
  for (int i = 0; i < 3; i++)
    dy[i] = dalloc(c, BN, -1.0f);
  for (uint32_t j = 0; j < BR * BD; j++)
    rin[j] = bf_rand() * 3.0f;
  dput(c, drin, rin, BR * BD);
  hbg_bind *b = begin(c);
  /* tasks: y0 = W0 x0 * 0.5; RMSNORM of rin with w bf16; embedding row 1
   * (element 0 at byte 1200 of TAB; W1 and NW start at byte 2) */
  hbg_tensor g[3] = {W[0], vec(dx[0], 0, 0, BK, HBG_ACCESS_IN),
                     vec(dy[0], 0, 0, BN, HBG_ACCESS_OUT)};
  float half = 0.5f;
  task(c, b, HBG_KERNEL_GEMV, g, 3, &half, NULL, 0);
  hbg_tensor r[3] = {f32_2d(drin, BR, BD, HBG_ACCESS_IN), RW,
                     f32_2d(dr, BR, BD, HBG_ACCESS_OUT)};
  float eps = 1e-6f;
  task(c, b, HBG_KERNEL_RMSNORM, r, 3, &eps, NULL, 0);
  hbg_tensor row;
  const uint32_t rdims[1] = {BD};
  ASSERT_OK(hbg_tensor_contig(&row, TAB.addr, (uint64_t)BD * 2,
                              HBG_DTYPE_BF16, 1, rdims, HBG_ACCESS_IN));
  hbg_tensor e[2] = {row, vec(de, 0, 0, BD, HBG_ACCESS_OUT)};
  task(c, b, HBG_KERNEL_COPY, e, 2, NULL, NULL, 0);
  /* the graph, replayed on W1 x1 and W0 x1 */
  for (int i = 1; i < 3; i++) {
    hbg_tensor bt[4] = {W[i & 1], vec(dx[1], 0, 0, BK, HBG_ACCESS_IN), NW,
                        vec(dy[i], 0, 0, BN, HBG_ACCESS_OUT)};
    uint64_t alpha = hbg_scalar_f32(i == 1 ? 2.0f : -0.75f);
    graph(c, b, K_BF16, rec_bf16, NULL, bt, 4, &alpha, 1, NULL, 0);
  }
  run(c, b, "the bind of bf16-weight tasks and graph replays", 5);
  hbg_bind_end(b);

  float *gd[3] = {wf[0], xf[0], want};
  bf_ref(HBG_KERNEL_GEMV, g, gd, 3, hbg_scalar_f32(0.5f));
  expect(c, dy[0], want, BN, "GEMV, W bf16");
  float *rd[3] = {rin, rw, want};
  bf_ref(HBG_KERNEL_RMSNORM, r, rd, 3, hbg_scalar_f32(1e-6f));
  expect(c, dr, want, BR * BD, "RMSNORM, w bf16");
  expect(c, de, tab + BD, BD, "COPY of a bf16 row");
  for (int i = 1; i < 3; i++) {
    hbg_tensor gt[3] = {W[i & 1], vec(0, 0, 0, BK, HBG_ACCESS_IN),
                        vec(0, 0, 0, BN, HBG_ACCESS_OUT)};
    float *gg[3] = {wf[i & 1], xf[1], h};
    bf_ref(HBG_KERNEL_GEMV, gt, gg, 3,
           hbg_scalar_f32(i == 1 ? 2.0f : -0.75f));
    hbg_tensor rt_[3] = {vec(0, 0, 0, BN, HBG_ACCESS_IN), NW,
                         vec(0, 0, 0, BN, HBG_ACCESS_OUT)};
    float *rr[3] = {h, nf, want};
    bf_ref(HBG_KERNEL_RMSNORM, rt_, rr, 3, hbg_scalar_f32(1e-5f));
    expect(c, dy[i], want, BN, "the graph's y, W and w bf16");
  }
}

/* The watchdog's own check (sim only, not a shape of the sweep): a user
 * kernel that never returns must be named a HANG. */
#define K_NEVER (HBG_KERNEL_USER_MIN + 0x37u)
static volatile sig_atomic_t never_stop; /* nothing sets it */

static int never_returns(void *user, const hbg_tensor *t, void *const *data,
                         uint32_t n_tensors, const uint64_t *scalars,
                         uint32_t n_scalars) {
  (void)user, (void)t, (void)data, (void)n_tensors, (void)scalars,
      (void)n_scalars;
  while (!never_stop)
    pause();
  return 0;
}

static void sh_never(cx *c) {
  ASSERT_OK(hbg_sim_register_kernel(hbg_runtime_device(c->rt), K_NEVER,
                                    never_returns, NULL));
  uint64_t o = dalloc(c, 1, 0.0f);
  hbg_bind *b = begin(c);
  hbg_tensor a = vec(o, 0, 0, 1, HBG_ACCESS_INOUT);
  task(c, b, K_NEVER, &a, 1, NULL, NULL, 0);
  run(c, b, "a kernel that never returns (the expected hang)", 1);
  T_FAIL("%s: the bind of a kernel that never returns completed", c->name);
}

typedef struct shape {
  const char *name;
  void (*fn)(cx *c);
  int deps; /* entries wait for each other: run under both modes */
} shape;

static const shape shapes[] = {
    {"empty", sh_empty, 0},
    {"empty_between", sh_empty_between, 0},
    {"empty_pipelined", sh_empty_pipelined, 0},
    {"one_task", sh_one_task, 0},
    {"graph_1node", sh_graph_1node, 0},
    {"graph_only", sh_graph_only, 0},
    {"mix", sh_mix, 1},
    {"graph_chain", sh_graph_chain, 0},
    {"fanout_max", sh_fanout_max, 0},
    {"fanin_max", sh_fanin_max, 0},
    {"diamond", sh_diamond, 0},
    {"bounds_max", sh_bounds_max, 0},
    {"chain", sh_chain, 1},
    {"wide", sh_wide, 0},
    {"replays", sh_replays, 1},
    {"keys", sh_keys, 0},
    {"win_fanin", sh_win_fanin, 1},
    {"win_fanout", sh_win_fanout, 1},
    {"dup_deps", sh_dup_deps, 1},
    {"binds_grow", sh_binds_grow, 1},
    {"fail_entry", sh_fail_entry, 1},
    {"fail_graph", sh_fail_graph, 0},
    {"bf16_weights", sh_bf16, 0},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* ------------------------------------------------------------------ */
/* One case, in this process                                           */
/* ------------------------------------------------------------------ */

static int run_one(const char *dev, int policy, int deps, const shape *s) {
  snprintf(wd_case, sizeof wd_case, "%s/%s/%s/%s", dev,
           hbg_policy_name(policy), hbg_deps_name(deps), s->name);
  signal(SIGALRM, wd_fire);
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.deps = (uint32_t)deps;
  if (strcmp(dev, "cuda") == 0) {
    cfg.device = "cuda";
    cfg.device_options = "exec=device";
  } else {
    cfg.device = "sim";
    cfg.device_options = NULL;
  }
  cx c = {.inferred = deps == HBG_DEPS_INFERRED, .name = wd_case};
  wd_arm("creating the runtime", wd_secs * 6);
  int rc = hbg_runtime_create(&cfg, &c.rt);
  if (rc)
    T_FAIL("%s: hbg_runtime_create -> %s: %s", c.name, hbg_err_name(rc),
           hbg_last_error());
  wd_arm("allocating", wd_secs * 6);
  c.one = dalloc(&c, ONES, 1.0f);
  alarm(0);
  s->fn(&c);
  wd_arm("destroying the runtime", wd_secs * 6);
  hbg_runtime_destroy(c.rt);
  alarm(0);
  return 0;
}

/* ------------------------------------------------------------------ */
/* The sweep: one child per case                                       */
/* ------------------------------------------------------------------ */

enum { CASE_OK, CASE_HANG, CASE_FAIL, CASE_CRASH };
static const char *const r_name[] = {"ok", "HANG", "FAIL", "CRASH"};

typedef struct result {
  char what[192];
  int r;
  int detail; /* exit code or signal */
  double ms, bind_ms;
  char why[512]; /* the last line the case wrote to stderr */
} result;

static int run_case(const char *dev, int policy, int deps, const shape *s,
                    result *out) {
  fflush(stdout);
  fflush(stderr);
  *bind_ns = 0;
  /* the child's stderr goes to a file, echoed here once it has ended, its
   * last line kept for the summary */
  FILE *err = tmpfile();
  ASSERT(err);
  uint64_t t0 = now_ns();
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    dup2(fileno(err), 2);
    exit(run_one(dev, policy, deps, s));
  }
  /* the child's watchdog names a hang; this is the backstop for one that
   * cannot fire (every bind has wd_secs, host steps 6 x that) */
  const uint64_t limit = (uint64_t)wd_secs * 30u * 1000000000ull;
  int st = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    ASSERT(w >= 0);
    if (w == pid)
      break;
    if (now_ns() - t0 > limit) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      fprintf(stderr, "HANG: %s/%s/%s/%s: killed by the sweep after %u s\n",
              dev, hbg_policy_name(policy), hbg_deps_name(deps), s->name,
              wd_secs * 30u);
      st = RC_HANG << 8;
      break;
    }
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  out->ms = (double)(now_ns() - t0) / 1e6;
  out->why[0] = 0;
  rewind(err);
  char line[512];
  while (fgets(line, sizeof line, err)) {
    fputs(line, stderr);
    size_t k = strlen(line);
    while (k && (line[k - 1] == '\n' || line[k - 1] == '\r'))
      line[--k] = 0;
    if (k)
      snprintf(out->why, sizeof out->why, "%s", line);
  }
  fclose(err);
  out->bind_ms = (double)*bind_ns / 1e6;
  snprintf(out->what, sizeof out->what, "%s/%s/%s/%s", dev,
           hbg_policy_name(policy), hbg_deps_name(deps), s->name);
  if (WIFSIGNALED(st)) {
    out->r = CASE_CRASH;
    out->detail = WTERMSIG(st);
  } else if (WEXITSTATUS(st) == 0) {
    out->r = CASE_OK;
  } else if (WEXITSTATUS(st) == RC_HANG) {
    out->r = CASE_HANG;
  } else {
    out->r = CASE_FAIL;
    out->detail = WEXITSTATUS(st);
  }
  if (out->r == CASE_OK)
    printf("  %-44s %-5s %9.1f ms (binds %8.1f ms)\n", out->what,
           r_name[out->r], out->ms, out->bind_ms);
  else
    printf("  %-44s %-5s %9.1f ms\n", out->what, r_name[out->r], out->ms);
  fflush(stdout);
  return out->r;
}

/* Whether the cuda backend opens here without HBG_CUDA_LIB (a GPU): asked
 * in a child, so that this process never initialises a driver before it
 * forks. */
static int cuda_here(void) {
  fflush(stdout);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    const hbg_dev_ops *ops = hbg_device_find("cuda");
    char why[256] = "";
    _exit(ops && (!ops->probe || ops->probe(why, sizeof why) == 0) ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static const shape never = {"watchdog_self_test", sh_never, 0};

static const shape *find_shape(const char *name) {
  for (size_t i = 0; i < N_SHAPES; i++)
    if (strcmp(shapes[i].name, name) == 0)
      return &shapes[i];
  T_FAIL("unknown shape '%s'", name);
}

int main(int argc, char **argv) {
  void *shm = mmap(NULL, sizeof *bind_ns, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT(shm != MAP_FAILED);
  bind_ns = shm;
  const char *e = getenv("HBG_SHAPES_TIMEOUT");
  if (e && *e) {
    long v = strtol(e, NULL, 10);
    ASSERT(v > 0 && v < 3600);
    wd_secs = (unsigned)v;
  }
  if (argc == 6 && strcmp(argv[1], "--one") == 0) {
    int policy = 0, deps = 0;
    ASSERT_OK(hbg_policy_parse(argv[3], &policy));
    ASSERT_OK(hbg_deps_parse(argv[4], &deps));
    uint64_t t0 = now_ns();
    run_one(argv[2], policy, deps, find_shape(argv[5]));
    printf("%s: ok, %.1f ms (binds %.1f ms)\n", wd_case,
           (double)(now_ns() - t0) / 1e6, (double)*bind_ns / 1e6);
    return 0;
  }
  int want[N_SHAPES];
  for (size_t i = 0; i < N_SHAPES; i++)
    want[i] = argc < 2;
  for (int a = 1; a < argc; a++)
    want[find_shape(argv[a]) - shapes] = 1;

  const char *devs[2];
  int n_dev = 0;
  const char *lib = getenv("HBG_CUDA_LIB");
  const char *pick = getenv("HBG_SHAPES_DEVICES");
  int cuda = lib && *lib ? 1 : cuda_here();
  if (pick && *pick) {
    if (strstr(pick, "sim"))
      devs[n_dev++] = "sim";
    if (strstr(pick, "cuda")) {
      if (!cuda)
        T_FAIL("HBG_SHAPES_DEVICES names cuda, but the cuda backend does "
               "not open here (no HBG_CUDA_LIB, no GPU)");
      devs[n_dev++] = "cuda";
    }
  } else {
    devs[n_dev++] = "sim";
    if (cuda)
      devs[n_dev++] = "cuda";
  }
  ASSERT_GT(n_dev, 0);
  printf("window shapes, every bind watched for %u s; fan graphs of %u "
         "nodes; cuda: %s\n",
         wd_secs, MAXN,
         !cuda ? "not run (no HBG_CUDA_LIB, no GPU)"
         : lib && *lib ? "the stand-in driver (HBG_CUDA_LIB)"
                       : "a GPU");
  if (lib && *lib)
    printf("stand-in grid: HBG_MOCK_CUDA_SMS=%s HBG_MOCK_CUDA_LANES=%s\n",
           getenv("HBG_MOCK_CUDA_SMS") ? getenv("HBG_MOCK_CUDA_SMS")
                                       : "(default)",
           getenv("HBG_MOCK_CUDA_LANES") ? getenv("HBG_MOCK_CUDA_LANES")
                                         : "(default)");

  /* the watchdog first: a hang on the sim, named within a second */
  unsigned secs = wd_secs;
  wd_secs = 1;
  result self;
  if (run_case("sim", HBG_POLICY_DEFERRED, HBG_DEPS_EXPLICIT, &never,
               &self) != CASE_HANG)
    T_FAIL("the watchdog did not name the sim's never-ending kernel a hang "
           "(%s)",
           r_name[self.r]);
  printf("  (that hang was the watchdog's self-test: expected)\n\n");
  wd_secs = secs;

  enum { MAX_CASES = 2 * N_SHAPES * 2 * HBG_POLICY__COUNT };
  static result res[MAX_CASES];
  size_t n = 0, bad = 0;
  double dev_ms[2] = {0, 0};
  /* policies in the order the brief's list gives them */
  static const int pol[HBG_POLICY__COUNT] = {
      HBG_POLICY_DEFERRED, HBG_POLICY_PINNED_EAGER, HBG_POLICY_PINNED_BULK,
      HBG_POLICY_COALESCED};
  /* HBG_SHAPES_POLICIES=name,name: only those (sanitizer builds run two,
   * an inline-Definition policy and coalesced) */
  const char *only = getenv("HBG_SHAPES_POLICIES");
  for (int d = 0; d < n_dev; d++)
    for (size_t i = 0; i < N_SHAPES; i++) {
      if (!want[i])
        continue;
      for (int dm = 0; dm < (shapes[i].deps ? 2 : 1); dm++)
        for (int p = 0; p < HBG_POLICY__COUNT; p++) {
          if (only && *only && !strstr(only, hbg_policy_name(pol[p])))
            continue;
          if (run_case(devs[d], pol[p], dm, &shapes[i], &res[n]) != CASE_OK)
            bad++;
          dev_ms[d] += res[n].ms;
          n++;
        }
    }
  printf("\n%zu cases, %zu not ok", n, bad);
  for (int d = 0; d < n_dev; d++)
    printf("; %s %.1f s", devs[d], dev_ms[d] / 1000.0);
  printf("\n");
  for (int r = CASE_HANG; r <= CASE_CRASH; r++)
    for (size_t i = 0; i < n; i++)
      if (res[i].r == r) {
        if (strncmp(res[i].why, "HANG: ", 6) == 0)
          printf("%s\n", res[i].why); /* names the case and its step */
        else if (r == CASE_CRASH)
          printf("%s: %s (signal %d)\n", r_name[r], res[i].what,
                 res[i].detail);
        else
          printf("%s: %s\n", r_name[r], res[i].what);
        if (res[i].why[0] && strncmp(res[i].why, "HANG: ", 6) != 0)
          printf("    %s\n", res[i].why);
      }
  if (bad)
    return 1;
  printf("window shapes: ok\n");
  return 0;
}
