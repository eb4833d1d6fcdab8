/* The fatal latch, and fault-injection sweeps for every policy (plain, and
 * with chunked window uploads where the policy uses them): every backend
 * call of runtime creation, of two binds in flight on a depth-2 pipeline
 * (including the begin that waits on a slot's completion event), and of
 * teardown with binds in flight fails once (teardown alone, and the user's
 * frees of its buffers before it). Each failure gives the injected error, a
 * latched bind is never launched, every launched bind writes its right
 * output, the next binds succeed, and device and pinned memory return to
 * their baseline; after teardown that is without freeing anything of the
 * runtime's by hand: hbg_runtime_destroy frees the user's buffers still
 * live. */
#include <stdatomic.h>

#include "chain_fixture.h"
#include "core/core.h"
#include "test.h"

#define L 4
#define N 32

static hbg_runtime *mk(hbg_device *dev, int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device_handle = dev;
  cfg.arena_bytes = 64 << 10;
  hbg_runtime *rt = NULL;
  int rc = hbg_runtime_create(&cfg, &rt);
  return rc ? NULL : rt;
}

static uint64_t launches(hbg_device *dev) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  return st.launches;
}

/* No device or pinned host memory is left allocated on the device. */
static void expect_nothing_held(hbg_device *inner) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(inner, &st));
  ASSERT_UEQ(st.mem_in_use, 0);
  ASSERT_UEQ(st.host_in_use, 0);
}

/* ---- what a launched bind wrote, seen after teardown ----
 * hbg_runtime_destroy frees the chains' buffers with the runtime, so their
 * output cannot be read afterwards. A bind that must be checked then ends
 * with K_SNAP, a sim user kernel after the chain's tail, which copies the
 * output into host memory and marks the copy taken. When teardown returns
 * without having waited for the bind, the copy is not taken yet. */

#define K_SNAP (HBG_KERNEL_USER_MIN + 9u)

typedef struct snap {
  uint32_t n;
  float *want, *got; /* the host reference; the copy K_SNAP took */
  atomic_int taken;
} snap;

/* Scalar 0: the snap, by address. */
static int snap_kernel(void *user, const hbg_tensor *t, void *const *data,
                       uint32_t nt, const uint64_t *sc, uint32_t ns) {
  (void)user;
  if (nt != 1 || ns != 1)
    return HBG_E_INVAL;
  snap *sn = (snap *)(uintptr_t)sc[0];
  if (t[0].shape[0] != sn->n)
    return HBG_E_INVAL;
  memcpy(sn->got, data[0], (size_t)sn->n * 4);
  atomic_store(&sn->taken, 1);
  return 0;
}

static void snap_register(hbg_device *dev) {
  ASSERT_OK(hbg_sim_register_kernel(hbg_fault_inner(dev), K_SNAP,
                                    snap_kernel, NULL));
}

/* The chain's step with K_SNAP after its tail, into sn (made here). */
static int snap_submit(chain *c, hbg_bind *b, uint32_t step, snap *sn) {
  sn->n = c->n;
  sn->want = malloc((size_t)c->n * 4);
  sn->got = calloc(c->n, 4);
  ASSERT(sn->want && sn->got);
  atomic_init(&sn->taken, 0);
  chain_ref(c, step, sn->want);
  hbg_task_id prev;
  int rc = chain_submit_head(c, b, &prev);
  for (uint32_t l = 0; rc == 0 && l < c->layers; l++)
    rc = chain_submit_layer(c, b, step, l, &prev);
  if (rc || (rc = chain_submit_tail_id(c, b, prev, &prev)))
    return rc;
  uint32_t dims[1] = {c->n};
  hbg_tensor t;
  hbg_tensor_contig(&t, c->out, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_scalar at = hbg_scalar_static((uint64_t)(uintptr_t)sn);
  hbg_task k = {.kernel = K_SNAP, .n_args = 1, .args = &t, .n_scalars = 1,
                .scalars = &at, .n_deps = 1, .deps = &prev};
  return hbg_submit_task(b, &k, NULL);
}

/* 0 when the copy was taken and equals the host reference bit for bit. */
static int snap_check(snap *sn) {
  if (!atomic_load(&sn->taken))
    return HBG_E_STATE;
  return memcmp(sn->got, sn->want, (size_t)sn->n * 4) ? HBG_E_VERIFY : 0;
}

static void snap_free(snap *sn) {
  free(sn->want);
  free(sn->got);
  memset(sn, 0, sizeof *sn);
}

static void test_latch(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_runtime *rt = mk(dev, HBG_POLICY_PINNED_EAGER);
  ASSERT(rt);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  ASSERT_OK(chain_bind(&c, 0, NULL));
  ASSERT_OK(chain_bind(&c, 1, NULL));
  uint64_t before = launches(dev);
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  /* The third eager upload (layer 2) fails after its task was published. */
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_COPY_H2D, 3, 0));
  ASSERT_ERR(chain_submit(&c, b, 2), HBG_E_INJECTED);
  ASSERT_EQ(hbg_bind_fatal(b), HBG_E_INJECTED);
  hbg_task nop = {.kernel = HBG_KERNEL_NOP};
  ASSERT_ERR(hbg_submit_task(b, &nop, NULL), HBG_E_FATAL);
  ASSERT_ERR(hbg_bind_launch(b), HBG_E_FATAL);
  hbg_bind_stats st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  ASSERT_EQ(st.fatal, HBG_E_INJECTED);
  ASSERT_UEQ(launches(dev), before); /* never launched */
  int64_t code = 0;
  const char *msg = NULL;
  ASSERT_OK(hbg_runtime_last_native_error(rt, &code, &msg));
  ASSERT(strstr(msg, "injected") != NULL);
  hbg_bind_end(b);
  ASSERT_OK(chain_bind(&c, 3, NULL));
  /* An unreadable device status is the bind's outcome, also when asked
   * again. */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit(&c, b, 5));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_COPY_D2H, 1, 0));
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_INJECTED);
  ASSERT_ERR(hbg_bind_wait(b), HBG_E_INJECTED);
  hbg_bind_end(b);
  ASSERT_OK(chain_bind(&c, 4, NULL));
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  hbg_device_close(dev);
}

/* Pinned-bulk copies nothing while it orchestrates; its one copy (or the
 * block growth before it) fails after every graph task was published:
 * latched, never launched, and the runtime stays usable. */
static void test_latch_bulk(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  hbg_runtime *rt = mk(dev, HBG_POLICY_PINNED_BULK);
  ASSERT(rt);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  static const int ops[2] = {HBG_DEV_OP_MEM_ALLOC, HBG_DEV_OP_COPY_H2D};
  for (uint32_t i = 0; i < 2; i++) {
    /* a cold slot grows its block at launch; a warm one only copies */
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(chain_submit(&c, b, i));
    uint64_t before = launches(dev);
    hbg_fault_reset(dev);
    ASSERT_OK(hbg_fault_arm(dev, ops[i], 1, 0));
    ASSERT_ERR(hbg_bind_launch(b), HBG_E_INJECTED);
    ASSERT(hbg_fault_fired(dev));
    hbg_fault_arm(dev, HBG_DEV_OP_ANY, 0, 0);
    ASSERT_EQ(hbg_bind_fatal(b), HBG_E_INJECTED);
    ASSERT_ERR(hbg_bind_launch(b), HBG_E_FATAL);
    ASSERT_UEQ(launches(dev), before);
    hbg_bind_end(b);
    if (i == 0) /* warm both slots */
      for (uint32_t s = 0; s < 2; s++)
        ASSERT_OK(chain_bind(&c, 10 + s, NULL));
  }
  /* nothing is copied during orchestration */
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_fault_reset(dev);
  ASSERT_OK(chain_submit(&c, b, 3));
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_COPY_H2D), 0);
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_COPY_H2D), 2); /* bulk, window */
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(chain_verify(&c, 3));
  ASSERT_OK(chain_bind(&c, 4, NULL));
  ASSERT_OK(chain_bind(&c, 5, NULL));
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  expect_nothing_held(inner);
  hbg_device_close(dev);
}

/* Recording the completion event fails after the launch: the bind has
 * reached the device, so it is not reported as failed (a caller retrying
 * it would run it twice). Launch drains the queue and collects the bind;
 * the wait gives the device's status without waiting again. The sim times
 * launches, so the launch's first record is the start event and the
 * completion event is its second; the untracked bind has no device time. */
static void test_untracked_launch(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_runtime *rt = mk(dev, p);
    ASSERT(rt);
    chain c;
    ASSERT_OK(chain_create(&c, rt, L, N));
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(chain_submit(&c, b, 0));
    uint64_t l0 = launches(dev);
    hbg_fault_reset(dev);
    ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_EVENT_RECORD, 2, 0));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_UEQ(hbg_fault_fired(dev), 1);
    ASSERT_UEQ(launches(dev), l0 + 1);
    ASSERT_EQ(hbg_bind_fatal(b), 0);
    ASSERT_OK(hbg_bind_wait(b));
    ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_EVENT_WAIT), 0);
    ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_EVENT_ELAPSED), 0);
    hbg_bind_stats st;
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    ASSERT_UEQ(st.device_ns, 0);
    hbg_bind_end(b);
    ASSERT_OK(chain_verify(&c, 0));
    /* both slots work afterwards */
    ASSERT_OK(chain_bind(&c, 1, NULL));
    ASSERT_OK(chain_bind(&c, 2, NULL));
    chain_destroy(&c);
    hbg_runtime_destroy(rt);
  }
  expect_nothing_held(hbg_fault_inner(dev));
  hbg_device_close(dev);
}

/* Teardown waits for a bind still running on the device even when the
 * queue cannot be synchronised: the runtime's buffers it reads (the user's
 * among them, which teardown frees) are not freed under it, so it writes
 * its right output before hbg_runtime_destroy returns (K_SNAP's copy), and
 * then every byte comes back. The bind is long (16 layers of 64K floats)
 * so that it is likely still running when teardown starts; three rounds
 * per policy. */
static void test_teardown_sync_fails(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim;mem=256M", &dev));
  snap_register(dev);
  for (int i = 0; i < 3 * HBG_POLICY__COUNT; i++) {
    const int p = i % HBG_POLICY__COUNT;
    hbg_runtime *rt = mk(dev, p);
    ASSERT(rt);
    chain c;
    ASSERT_OK(chain_create(&c, rt, 16, 1u << 16));
    hbg_bind *b = NULL;
    snap sn;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(snap_submit(&c, b, 0, &sn));
    ASSERT_OK(hbg_bind_launch(b));
    hbg_bind_end(b);
    hbg_fault_reset(dev);
    ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_QUEUE_SYNC, 1, 0));
    hbg_runtime_destroy(rt);
    ASSERT_UEQ(hbg_fault_fired(dev), 1);
    int rc = snap_check(&sn);
    if (rc)
      T_FAIL("%s round %d: the bind's output after teardown: %s",
             hbg_policy_name(p), i / HBG_POLICY__COUNT, hbg_err_name(rc));
    expect_nothing_held(hbg_fault_inner(dev));
    chain_forget(&c);
    snap_free(&sn);
  }
  hbg_device_close(dev);
}

/* A graph submission that fails before it is published gives its heap and
 * arena claims back (an extra heap block allocated for it is freed), leaves
 * the bind usable, and the same layer submitted again runs correctly. In a
 * cold bind the first layer claims an extra heap block (mem_alloc 1), then
 * its retained buffer (pinned-eager) or resident Definition (coalesced). */
static void test_unpublished_claims(int policy, int op, uint64_t k) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  hbg_runtime *rt = mk(dev, policy);
  ASSERT(rt);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task_id prev;
  ASSERT_OK(chain_submit_head(&c, b, &prev));
  const uint64_t heap0 = b->heap_used, arena0 = b->slot->arena.used;
  const uint64_t bulk0 = b->bulk_len;
  const uint32_t extra0 = b->slot->n_heap_extra, tasks0 = b->n_tasks;
  hbg_dev_stats st0 = {.struct_size = sizeof st0};
  ASSERT_OK(hbg_dev_stats_get(inner, &st0));

  ASSERT_OK(hbg_fault_arm(dev, op, k, 0));
  hbg_task_id p = prev;
  ASSERT_ERR(chain_submit_layer(&c, b, 0, 0, &p), HBG_E_INJECTED);
  ASSERT(hbg_fault_fired(dev));
  ASSERT_EQ(hbg_bind_fatal(b), 0); /* not published: no latch */
  ASSERT_UEQ(b->heap_used, heap0);
  ASSERT_UEQ(b->slot->arena.used, arena0);
  ASSERT_UEQ(b->bulk_len, bulk0);
  ASSERT_UEQ(b->slot->n_heap_extra, extra0);
  ASSERT_UEQ(b->n_tasks, tasks0);
  hbg_dev_stats st1 = {.struct_size = sizeof st1};
  ASSERT_OK(hbg_dev_stats_get(inner, &st1));
  ASSERT_UEQ(st1.mem_in_use, st0.mem_in_use);

  for (uint32_t l = 0; l < L; l++)
    ASSERT_OK(chain_submit_layer(&c, b, 0, l, &prev));
  ASSERT_OK(chain_submit_tail(&c, b, prev));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(chain_verify(&c, 0));
  ASSERT_OK(chain_bind(&c, 1, NULL));
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  expect_nothing_held(inner);
  hbg_device_close(dev);
}

/* ---- a failed free is final ----
 * A free that fails may still have released the memory (the fault device
 * forwards it, as a device that fails after releasing would), so the
 * runtime forgets the buffer: it is never written again, and never freed
 * again. Each test takes the forgotten address for a buffer of its own
 * (first fit hands it out again), fills it, and checks that the binds and
 * the teardown that follow leave it alone. */

#define GRAB_MAX 4096

/* Allocate blocks of the device's alignment on the inner device until
 * `want` comes back; free the rest. @return want, its *size bytes filled
 * with a pattern (pat), or 0 when it never came. */
static hbg_devptr grab(hbg_device *inner, hbg_devptr want, uint32_t *size,
                       uint8_t *pat) {
  hbg_dev_caps caps = {.struct_size = sizeof caps};
  ASSERT_OK(hbg_dev_caps_get(inner, &caps));
  *size = (uint32_t)caps.dev_align;
  ASSERT(*size >= 1 && *size <= 4096);
  static hbg_devptr got[GRAB_MAX];
  hbg_devptr mine = 0;
  uint32_t n = 0;
  for (; n < GRAB_MAX && !mine; n++) {
    ASSERT_OK(hbg_dev_mem_alloc(inner, *size, &got[n]));
    if (got[n] == want)
      mine = got[n--];
  }
  for (uint32_t i = 0; i < n; i++)
    ASSERT_OK(hbg_dev_mem_free(inner, got[i]));
  if (mine) {
    for (uint32_t i = 0; i < *size; i++)
      pat[i] = (uint8_t)(0xa5 ^ i);
    ASSERT_OK(hbg_dev_copy_h2d(inner, mine, pat, *size));
  }
  return mine;
}

/* The buffer is still allocated and holds its pattern; then free it. */
static void ungrab(hbg_device *inner, hbg_devptr mine, uint32_t size,
                   const uint8_t *pat) {
  uint8_t got[4096];
  ASSERT_OK(hbg_dev_copy_d2h(inner, got, mine, size));
  ASSERT(memcmp(got, pat, size) == 0);
  ASSERT_OK(hbg_dev_mem_free(inner, mine));
}

static uint64_t free_failures(hbg_device *dev) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  return st.free_failures;
}

/* victim, given up by a failed free, is taken for a buffer of the test's
 * own; binds of c0 then c1 (each may need new buffers) and the teardown
 * leave it alone. Destroys the chains, the runtime and the device. */
static void expect_left_alone(hbg_device *dev, hbg_runtime *rt,
                              hbg_devptr victim, chain *c0, chain *c1) {
  hbg_device *inner = hbg_fault_inner(dev);
  uint8_t pat[4096];
  uint32_t size;
  hbg_devptr mine = grab(inner, victim, &size, pat);
  ASSERT(mine == victim);
  ASSERT_OK(chain_bind(c0, 2, NULL));
  ASSERT_OK(chain_bind(c1, 3, NULL));
  chain_destroy(c0);
  chain_destroy(c1);
  hbg_runtime_destroy(rt);
  ungrab(inner, mine, size, pat);
  expect_nothing_held(inner);
  hbg_device_close(dev);
}

/* A fault device and a runtime on it with one pipeline slot, so that each
 * bind reclaims what the last one left. */
static hbg_runtime *mk_one_slot(hbg_device **devp, int policy,
                                uint32_t graph_cache_max) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  *devp = dev;
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device_handle = dev;
  cfg.pipeline_depth = 1;
  cfg.graph_cache_max = graph_cache_max;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

/* Pinned-eager: a bind using fewer occurrences than its slot retains frees
 * the rest at launch; that free fails. The next bind needing those
 * occurrences allocates new buffers. */
static void test_failed_trim_forgotten(void) {
  hbg_device *dev;
  hbg_runtime *rt = mk_one_slot(&dev, HBG_POLICY_PINNED_EAGER, 0);
  chain lng, shrt;
  ASSERT_OK(chain_create(&lng, rt, L, N));
  ASSERT_OK(chain_create(&shrt, rt, 2, N)); /* the same key, 2 layers */
  ASSERT_OK(chain_bind(&lng, 0, NULL));
  ASSERT_OK(chain_bind(&lng, 4, NULL)); /* a warm slot frees only the trim */
  hbg__slot *s = &rt->slots[0];
  hbg_devptr victim = 0;
  for (uint32_t i = 0; i < s->retained.cap; i++) {
    hbg__retained *r = hbg__map_at(&s->retained, i);
    if (r && r->k.k2 == 2)
      victim = r->dev;
  }
  ASSERT(victim != 0);
  hbg_fault_reset(dev);
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_MEM_FREE, 1, 0));
  ASSERT_OK(chain_bind(&shrt, 1, NULL)); /* the trim's free fails */
  ASSERT_UEQ(hbg_fault_fired(dev), 1);
  ASSERT_UEQ(free_failures(dev), 1);
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE), 2); /* occ 2, 3 */
  chain_destroy(&shrt);
  expect_left_alone(dev, rt, victim, &lng, &lng);
}

/* Evicting a graph retires its device memory until the bind that read it
 * is reclaimed; that free fails. It is not tried again, neither at the
 * next reclaim nor at teardown. */
static void test_failed_retired_forgotten(int policy) {
  hbg_device *dev;
  hbg_runtime *rt = mk_one_slot(&dev, policy, 1);
  chain a, b;
  ASSERT_OK(chain_create(&a, rt, L, N));
  ASSERT_OK(chain_create(&b, rt, L, N));
  b.key ^= 0xb;
  ASSERT_OK(chain_bind(&a, 0, NULL));
  ASSERT_OK(chain_bind(&b, 1, NULL)); /* evicts a's graph: retired */
  ASSERT(rt->n_retired > 0);
  const hbg_devptr victim = rt->retired[0].dev;
  const uint32_t n_retired = rt->n_retired;
  hbg_fault_reset(dev);
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_MEM_FREE, 1, 0));
  hbg_bind *bd = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &bd)); /* reclaim: the first free fails */
  hbg_bind_end(bd);
  ASSERT_UEQ(hbg_fault_fired(dev), 1);
  ASSERT_UEQ(rt->n_retired, 0);
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE), n_retired);
  ASSERT_UEQ(free_failures(dev), 1);
  expect_left_alone(dev, rt, victim, &a, &b);
}

/* A user buffer whose free fails leaves the runtime too: a task naming it
 * is refused. */
static void test_failed_buffer_free(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_runtime *rt = mk(dev, HBG_POLICY_COALESCED);
  ASSERT(rt);
  uint64_t a = 0, o = 0;
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &a));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &o));
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_MEM_FREE, 1, 0));
  ASSERT_ERR(hbg_buffer_free(rt, a), HBG_E_INJECTED);
  ASSERT_UEQ(free_failures(dev), 1);
  uint32_t dims[1] = {N};
  hbg_tensor t[2];
  hbg_tensor_contig(&t[0], a, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&t[1], o, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_task cp = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = t};
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_ERR(hbg_submit_task(b, &cp, NULL), HBG_E_RANGE);
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_free(rt, o));
  hbg_runtime_destroy(rt);
  expect_nothing_held(hbg_fault_inner(dev));
  hbg_device_close(dev);
}

/* Teardown frees whatever it can when a release fails: the failure is
 * counted in the device's stats (on the handle the runtime used), named in
 * hbg_last_error(), and all memory comes back (the fault device still
 * releases what it fails). */
static void test_destroy_reports(int policy, int op, uint64_t k,
                                 const char *named) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  hbg_runtime *rt = mk(dev, policy);
  ASSERT(rt);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  ASSERT_OK(chain_bind(&c, 0, NULL));
  ASSERT_OK(chain_bind(&c, 1, NULL));
  ASSERT_UEQ(free_failures(dev), 0);
  hbg_fault_reset(dev);
  ASSERT_OK(hbg_fault_arm(dev, op, k, 0));
  hbg_runtime_destroy(rt);
  ASSERT_UEQ(hbg_fault_fired(dev), 1);
  ASSERT_UEQ(free_failures(dev), 1);
  ASSERT_UEQ(free_failures(inner), 0);
  const char *msg = hbg_last_error();
  if (!strstr(msg, "hbg_runtime_destroy: 1 release failed") ||
      !strstr(msg, named) || !strstr(msg, "HBG_E_INJECTED"))
    T_FAIL("%s %s #%llu: '%s' does not name '%s'", hbg_policy_name(policy),
           hbg_dev_op_name(op), (unsigned long long)k, msg, named);
  /* the chain's buffers went with the runtime */
  expect_nothing_held(inner);
  chain_forget(&c);
  hbg_device_close(dev);
}

/* ---- the sweeps ----
 * Each sweep counts the backend calls of a scenario per op in a clean run,
 * then replays the scenario once per call with that call failing (op by op,
 * so a failure names the call). Every scenario ends with the runtime torn
 * down and the device back at its memory baseline. */

#define DEPTH 2
#define NCHAIN 4 /* binds A, B, C of the scenario; the last one for the rest */
#define CHUNK 256u /* coalesced chunks: several per bind of L layers */

typedef struct setup {
  int policy;
  uint32_t chunk; /* cfg.coalesce_chunk_bytes */
  int warm;       /* both slots ran a bind before the scenario */
  int evict;      /* a graph cache of one graph, B's chain its own key: every
                     bind of the scenario evicts what another bind in flight
                     reads (retired memory) */
} setup;

typedef struct world {
  hbg_device *dev, *inner;
  hbg_runtime *rt;
  chain c[NCHAIN];
} world;

/* One bind of a scenario. */
typedef struct run {
  hbg_bind *b; /* set while the bind is begun and not ended */
  chain *c;
  uint32_t step;
  int rc;       /* first error of begin, submit, launch or wait */
  int launched; /* the launch reached the device */
} run;

static char where[160]; /* what is being swept, for failure messages */

#define SWEEP_CHECK(cond)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      T_FAIL("%s: %s", where, #cond);                                          \
  } while (0)
/* The only error a scenario may see is the injected one. */
#define SWEEP_INJECTED(rc)                                                     \
  do {                                                                         \
    int s__rc = (rc);                                                          \
    if (s__rc != HBG_E_INJECTED)                                               \
      T_FAIL("%s: %s -> %s, expected HBG_E_INJECTED", where, #rc,              \
             hbg_err_name(s__rc));                                             \
  } while (0)

static hbg_runtime *mk_setup(hbg_device *dev, const setup *su) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)su->policy;
  cfg.device_handle = dev;
  cfg.arena_bytes = 64 << 10;
  cfg.pipeline_depth = DEPTH;
  cfg.coalesce_chunk_bytes = su->chunk;
  if (su->evict)
    cfg.graph_cache_max = 1;
  hbg_runtime *rt = NULL;
  return hbg_runtime_create(&cfg, &rt) ? NULL : rt;
}

static hbg_dev_stats mem_now(hbg_device *inner) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(inner, &st));
  return st;
}

static void world_up(world *w, hbg_device *dev, const setup *su) {
  w->dev = dev;
  w->inner = hbg_fault_inner(dev);
  w->rt = mk_setup(dev, su);
  ASSERT(w->rt);
  /* A uses fewer occurrences of the key than the slot retains (pinned-eager
   * frees the rest at its launch), B more (it allocates while A is in
   * flight), C as many as the warm-up: C reuses what A's launch trimmed. */
  static const uint32_t layers[NCHAIN] = {L - 2, L + 2, L, L};
  for (int i = 0; i < NCHAIN; i++)
    ASSERT_OK(chain_create(&w->c[i], w->rt, layers[i], N));
  if (su->evict)
    w->c[1].key ^= 0xb;
  if (su->warm)
    for (uint32_t s = 0; s < DEPTH; s++)
      ASSERT_OK(chain_bind(&w->c[NCHAIN - 1], s, NULL));
}

/* Tear down in the order a user does once nothing is in flight. */
static void world_down(world *w) {
  for (int i = 0; i < NCHAIN; i++)
    chain_destroy(&w->c[i]);
  hbg_runtime_destroy(w->rt);
  w->rt = NULL;
}

/* Submit the step of chain c. A submission that fails before it is
 * published leaves the bind as it was: it is submitted again, and the bind
 * goes on. @return 0 or the latched error. */
static int submit_chain(hbg_bind *b, chain *c, uint32_t step) {
  hbg_task_id prev = 0;
  for (uint32_t i = 0; i < c->layers + 2; i++) {
    for (int tries = 0;; tries++) {
      hbg_task_id p = prev;
      int rc = i == 0 ? chain_submit_head(c, b, &p)
               : i <= c->layers
                   ? chain_submit_layer(c, b, step, i - 1, &p)
                   : chain_submit_tail(c, b, prev);
      if (rc == 0) {
        prev = p;
        break;
      }
      SWEEP_INJECTED(rc);
      if (hbg_bind_fatal(b)) {
        SWEEP_CHECK(hbg_bind_fatal(b) == rc);
        return rc;
      }
      SWEEP_CHECK(tries == 0); /* one injected failure per scenario */
    }
  }
  return 0;
}

/* Begin, submit and launch one bind of chain c. A bind that fails is ended
 * at once; a bind with a latched error is never launched. */
static void start(world *w, run *r, chain *c, uint32_t step) {
  memset(r, 0, sizeof *r);
  r->c = c;
  r->step = step;
  r->rc = hbg_bind_begin(w->rt, &r->b);
  if (r->rc) {
    SWEEP_INJECTED(r->rc);
    r->b = NULL;
    return;
  }
  r->rc = submit_chain(r->b, c, step);
  uint64_t l0 = launches(w->inner);
  int lrc = hbg_bind_launch(r->b);
  r->launched = (int)(launches(w->inner) - l0);
  if (r->rc) {
    SWEEP_CHECK(lrc == HBG_E_FATAL);
  } else if (lrc) {
    SWEEP_INJECTED(lrc);
    SWEEP_CHECK(hbg_bind_fatal(r->b) == lrc);
    r->rc = lrc;
  }
  /* The check this sweep exists for: a latched bind never launched. */
  if (r->rc)
    SWEEP_CHECK(r->launched == 0);
  else
    SWEEP_CHECK(r->launched == 1);
  if (r->rc) {
    hbg_bind_end(r->b);
    r->b = NULL;
  }
}

/* Wait for (or only end) a launched bind. */
static void finish(run *r, int wait) {
  if (!r->b)
    return;
  if (wait) {
    int rc = hbg_bind_wait(r->b);
    if (rc) {
      SWEEP_INJECTED(rc);
      r->rc = rc;
    }
  }
  hbg_bind_end(r->b);
  r->b = NULL;
}

/* Once the device is drained: every launched bind wrote its right output,
 * whatever failed on the host afterwards. */
static void verify_launched(const run *r) {
  if (r->launched)
    SWEEP_CHECK(chain_verify(r->c, r->step) == 0);
}

/* Pipeline depth 2 with two binds in flight: A and B launched, A ended
 * without a wait, so C's begin waits on A's completion event; then C and
 * B are waited. @return binds that failed. */
static int scenario(world *w, run r[3]) {
  start(w, &r[0], &w->c[0], 2);
  start(w, &r[1], &w->c[1], 3);
  finish(&r[0], 0);
  start(w, &r[2], &w->c[2], 4);
  finish(&r[2], 1);
  finish(&r[1], 1);
  return (r[0].rc != 0) + (r[1].rc != 0) + (r[2].rc != 0);
}

/* After a scenario: the next bind on each slot succeeds and verifies (each
 * begin drains what its slot still had in flight), then every launched bind
 * of the scenario has its right output. With evictions one more bind
 * reclaims the first slot again, freeing what the first one retired. */
static void recover(world *w, const run r[3], const setup *su) {
  for (uint32_t s = 0; s < DEPTH + (su->evict != 0); s++) {
    int rc = chain_bind(&w->c[NCHAIN - 1], 5 + s, NULL);
    if (rc)
      T_FAIL("%s: bind %u after the fault: %s", where, s, hbg_err_name(rc));
  }
  for (int i = 0; i < 3; i++)
    verify_launched(&r[i]);
}

typedef struct op_count {
  uint64_t n[HBG_DEV_OP__COUNT];
} op_count;

static op_count count_now(hbg_device *dev) {
  op_count c;
  for (int op = 0; op < HBG_DEV_OP__COUNT; op++)
    c.n[op] = hbg_fault_calls(dev, op);
  return c;
}

static void set_where(const setup *su, const char *what, int op, uint64_t k) {
  snprintf(where, sizeof where, "%s %s%s%s%s: %s #%llu",
           hbg_policy_name(su->policy), what, su->chunk ? " chunked" : "",
           strcmp(what, "create") ? su->warm ? " warm" : " cold" : "",
           su->evict ? " evicting" : "",
           op < 0 ? "clean run" : hbg_dev_op_name(op), (unsigned long long)k);
}

/* Every call of the scenario fails once. After each: the next binds work,
 * the memory held equals a clean run's at the same point, and teardown
 * gives everything back. @return calls swept, or 0 when the setup issues
 * no call the plain setup does not (chunks a policy ignores). */
static uint64_t sweep_binds(const setup *su) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  const hbg_dev_stats base = mem_now(inner);

  /* The clean run: calls per op, and the memory held after recovery. */
  set_where(su, "binds", -1, 0);
  world w;
  run r[3];
  world_up(&w, dev, su);
  hbg_fault_reset(dev);
  ASSERT_EQ(scenario(&w, r), 0);
  const op_count calls = count_now(dev);
  recover(&w, r, su);
  const hbg_dev_stats ref = mem_now(inner);
  world_down(&w);
  if (su->chunk && calls.n[HBG_DEV_OP_COPY_H2D_ASYNC] == 0) {
    hbg_device_close(dev);
    return 0;
  }
  ASSERT(calls.n[HBG_DEV_OP_EVENT_WAIT] > 0); /* C waited on A in begin */
  if (su->chunk)
    ASSERT(calls.n[HBG_DEV_OP_QUEUE_SYNC] > 0);

  uint64_t swept = 0, failed = 0;
  for (int op = 0; op < HBG_DEV_OP__COUNT; op++)
    for (uint64_t k = 1; k <= calls.n[op]; k++) {
      set_where(su, "binds", op, k);
      world_up(&w, dev, su);
      hbg_fault_reset(dev);
      ASSERT_OK(hbg_fault_arm(dev, op, k, 0));
      failed += scenario(&w, r) != 0;
      ASSERT_OK(hbg_fault_arm(dev, op, 0, 0));
      SWEEP_CHECK(hbg_fault_fired(dev) == 1);
      recover(&w, r, su);
      const hbg_dev_stats now = mem_now(inner);
      SWEEP_CHECK(now.mem_in_use == ref.mem_in_use);
      SWEEP_CHECK(now.host_in_use == ref.host_in_use);
      world_down(&w);
      const hbg_dev_stats end = mem_now(inner);
      SWEEP_CHECK(end.mem_in_use == base.mem_in_use);
      SWEEP_CHECK(end.host_in_use == base.host_in_use);
      swept++;
    }
  ASSERT(failed > 0);
  printf("sweep %-12s binds%s%s%s: %llu calls, %llu failed scenarios\n",
         hbg_policy_name(su->policy), su->chunk ? " chunked" : "",
         su->warm ? " warm" : " cold", su->evict ? " evicting" : "",
         (unsigned long long)swept,
         (unsigned long long)failed);
  hbg_device_close(dev);
  return swept;
}

/* A failed creation's hbg_last_error() names the call that failed and what
 * it was creating. */
static void create_names(int op) {
  static const struct {
    int op;
    const char *what;
  } made[] = {
      {HBG_DEV_OP_QUEUE_CREATE, "queue of pipeline slot"},
      {HBG_DEV_OP_EVENT_CREATE, "event of pipeline slot"},
      {HBG_DEV_OP_MEM_ALLOC, "device status word of pipeline slot"},
      {HBG_DEV_OP_COPY_H2D, "device status word of pipeline slot"},
      {HBG_DEV_OP_HOST_ALLOC, "pinned staging arena"},
  };
  const char *msg = hbg_last_error();
  SWEEP_CHECK(strstr(msg, hbg_dev_op_name(op)) != NULL);
  int known = 0;
  for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
    if (made[i].op == op) {
      known = 1;
      if (!strstr(msg, made[i].what))
        T_FAIL("%s: '%s' does not name the %s", where, msg, made[i].what);
    }
  SWEEP_CHECK(known);
}

/* Runtime creation: every call fails once; a failed creation holds
 * nothing, names what failed, and the runtime created next works. */
static void sweep_create(const setup *su) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  const hbg_dev_stats base = mem_now(inner);
  hbg_fault_reset(dev);
  hbg_runtime *rt = mk_setup(dev, su);
  ASSERT(rt);
  const op_count calls = count_now(dev);
  hbg_runtime_destroy(rt);
  uint64_t swept = 0;
  for (int op = 0; op < HBG_DEV_OP__COUNT; op++)
    for (uint64_t k = 1; k <= calls.n[op]; k++) {
      set_where(su, "create", op, k);
      hbg_fault_reset(dev);
      ASSERT_OK(hbg_fault_arm(dev, op, k, 0));
      rt = mk_setup(dev, su);
      ASSERT_OK(hbg_fault_arm(dev, op, 0, 0));
      SWEEP_CHECK(hbg_fault_fired(dev) == 1);
      SWEEP_CHECK(rt == NULL);
      create_names(op);
      hbg_dev_stats now = mem_now(inner);
      SWEEP_CHECK(now.mem_in_use == base.mem_in_use);
      SWEEP_CHECK(now.host_in_use == base.host_in_use);
      rt = mk_setup(dev, su);
      SWEEP_CHECK(rt != NULL);
      chain c;
      ASSERT_OK(chain_create(&c, rt, L, N));
      SWEEP_CHECK(chain_bind(&c, 0, NULL) == 0);
      chain_destroy(&c);
      hbg_runtime_destroy(rt);
      swept++;
    }
  ASSERT(swept > 0);
  expect_nothing_held(inner);
  printf("sweep %-12s create%s: %llu calls\n", hbg_policy_name(su->policy),
         su->chunk ? " chunked" : "", (unsigned long long)swept);
  hbg_device_close(dev);
}

/* Teardown with binds in flight: A launched and ended, and on the other
 * slot B launched and not ended (open == 0) or begun, submitted and not
 * launched (open == 1; chunked coalesced windows have chunks on the
 * queue). The teardown is hbg_runtime_destroy alone (the user's buffers
 * left to it), or with frees the user's hbg_buffer_free of every chain
 * buffer first (the first waits for the binds in flight; a free whose
 * wait fails keeps its buffer live). Every call of that teardown fails
 * once: teardown still waits for the device, each launched bind wrote its
 * right output before hbg_runtime_destroy returned (K_SNAP's copy), and
 * all memory is back right after it, nothing freed by hand. */
static void start_snapped(world *w, run *r, chain *c, uint32_t step,
                          snap *sn) {
  memset(r, 0, sizeof *r);
  r->c = c;
  r->step = step;
  ASSERT_OK(hbg_bind_begin(w->rt, &r->b));
  ASSERT_OK(snap_submit(c, r->b, step, sn));
  uint64_t l0 = launches(w->inner);
  ASSERT_OK(hbg_bind_launch(r->b));
  r->launched = (int)(launches(w->inner) - l0);
  ASSERT(r->launched == 1);
}

static void teardown_setup(world *w, hbg_device *dev, const setup *su,
                           int open, run r[2], snap sn[2]) {
  world_up(w, dev, su);
  start_snapped(w, &r[0], &w->c[0], 2, &sn[0]);
  finish(&r[0], 0);
  if (open) {
    memset(&r[1], 0, sizeof r[1]);
    memset(&sn[1], 0, sizeof sn[1]); /* never launched: no copy */
    ASSERT_OK(hbg_bind_begin(w->rt, &r[1].b));
    ASSERT_OK(chain_submit(&w->c[1], r[1].b, 3));
  } else {
    start_snapped(w, &r[1], &w->c[1], 3, &sn[1]);
  }
  ASSERT(r[0].launched && r[1].b);
}

/* The user's frees of every buffer of chain c: each succeeds or gives the
 * injected error. */
static void user_frees(chain *c) {
  const uint32_t n = 2 * c->layers + 3; /* input, out, b[], bias[] */
  for (uint32_t i = 0; i < n; i++) {
    uint64_t a = i == 0 ? c->input
                 : i == 1 ? c->out
                 : i < c->layers + 3 ? c->b[i - 2]
                                     : c->bias[i - c->layers - 3];
    int rc = hbg_buffer_free(c->rt, a);
    if (rc)
      SWEEP_INJECTED(rc);
  }
}

static void teardown(world *w, int frees) {
  if (frees)
    for (int i = 0; i < NCHAIN; i++)
      user_frees(&w->c[i]);
  hbg_runtime_destroy(w->rt);
  w->rt = NULL;
}

static void sweep_teardown(const setup *su, int open, int frees) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  snap_register(dev);
  const hbg_dev_stats base = mem_now(inner);
  world w;
  run r[2];
  snap sn[2];
  teardown_setup(&w, dev, su, open, r, sn);
  hbg_fault_reset(dev);
  teardown(&w, frees);
  const op_count calls = count_now(dev);
  if (frees)
    ASSERT(calls.n[HBG_DEV_OP_EVENT_WAIT] > 0); /* a free waited */
  uint64_t swept = 0;
  for (int op = -1; op < HBG_DEV_OP__COUNT; op++)
    for (uint64_t k = op < 0 ? 0 : 1; k <= (op < 0 ? 0 : calls.n[op]); k++) {
      /* op -1: the clean teardown of the run above, checked like the rest */
      set_where(su, open ? frees ? "teardown open, frees" : "teardown open"
                    : frees ? "teardown, frees" : "teardown",
                op, k);
      if (op >= 0) {
        teardown_setup(&w, dev, su, open, r, sn);
        hbg_fault_reset(dev);
        ASSERT_OK(hbg_fault_arm(dev, op, k, 0));
        teardown(&w, frees);
        ASSERT_OK(hbg_fault_arm(dev, op, 0, 0));
        SWEEP_CHECK(hbg_fault_fired(dev) == 1);
        swept++;
      }
      for (int i = 0; i < 2; i++)
        if (r[i].launched && snap_check(&sn[i]) != 0)
          T_FAIL("%s: bind %c after teardown: %s", where, 'A' + i,
                 hbg_err_name(snap_check(&sn[i])));
      const hbg_dev_stats end = mem_now(inner);
      if (end.mem_in_use != base.mem_in_use)
        T_FAIL("%s: %llu device bytes left allocated after teardown", where,
               (unsigned long long)(end.mem_in_use - base.mem_in_use));
      SWEEP_CHECK(end.host_in_use == base.host_in_use);
      for (int i = 0; i < NCHAIN; i++)
        chain_forget(&w.c[i]);
      snap_free(&sn[0]);
      snap_free(&sn[1]);
    }
  ASSERT(swept > 0);
  printf("sweep %-12s teardown%s%s%s: %llu calls\n",
         hbg_policy_name(su->policy), open ? " open" : "",
         frees ? " frees" : "", su->chunk ? " chunked" : "",
         (unsigned long long)swept);
  hbg_device_close(dev);
}

int main(void) {
  /* slot 1 goes first: its last reclaim (a policy's per-bind buffers,
   * extra heap blocks), what the policy retains, then the slot's own */
  test_destroy_reports(HBG_POLICY_DEFERRED, HBG_DEV_OP_MEM_FREE, 1,
                       "mem_free of the deferred submission buffer");
  test_destroy_reports(HBG_POLICY_PINNED_EAGER, HBG_DEV_OP_MEM_FREE, 1,
                       "mem_free of the extra heap block");
  test_destroy_reports(HBG_POLICY_PINNED_BULK, HBG_DEV_OP_HOST_FREE, 1,
                       "host_free of the pinned staging arena");
  test_destroy_reports(HBG_POLICY_COALESCED, HBG_DEV_OP_EVENT_DESTROY, 1,
                       "event_destroy of the start event");
  test_destroy_reports(HBG_POLICY_COALESCED, HBG_DEV_OP_QUEUE_DESTROY, 2,
                       "queue_destroy of the queue");
  test_failed_trim_forgotten();
  test_failed_buffer_free();
  /* the policies that keep device memory per graph */
  test_failed_retired_forgotten(HBG_POLICY_PINNED_EAGER);
  test_failed_retired_forgotten(HBG_POLICY_COALESCED);
  test_latch();
  test_latch_bulk();
  test_unpublished_claims(HBG_POLICY_PINNED_BULK, HBG_DEV_OP_MEM_ALLOC, 1);
  test_untracked_launch();
  test_teardown_sync_fails();
  test_unpublished_claims(HBG_POLICY_PINNED_EAGER, HBG_DEV_OP_MEM_ALLOC, 2);
  test_unpublished_claims(HBG_POLICY_COALESCED, HBG_DEV_OP_MEM_ALLOC, 2);
  test_unpublished_claims(HBG_POLICY_COALESCED, HBG_DEV_OP_COPY_H2D, 1);
  int chunked = 0;
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    for (uint32_t chunk = 0; chunk <= CHUNK; chunk += CHUNK) {
      setup su = {.policy = p, .chunk = chunk, .warm = 1};
      /* A policy that ignores chunks repeats the plain setup: skip it. */
      if (!sweep_binds(&su))
        continue;
      chunked += chunk != 0;
      for (int frees = 0; frees < 2; frees++) {
        sweep_teardown(&su, 0, frees);
        sweep_teardown(&su, 1, frees);
      }
      sweep_create(&su);
      su.warm = 0;
      sweep_binds(&su);
      /* Evictions retire device memory where a policy keeps some per graph
       * (retained buffers, resident Definitions). */
      if (chunk || (p != HBG_POLICY_PINNED_EAGER && p != HBG_POLICY_COALESCED))
        continue;
      su.warm = 1;
      su.evict = 1;
      sweep_binds(&su);
    }
  }
  ASSERT(chunked > 0); /* some policy uploads in chunks */
  printf("core fault: ok\n");
  return 0;
}
