/* The device executor never waits forever: a launch that cannot finish
 * fails with HBG_E_TIMEOUT once its deadline (deadline_ms=) has passed,
 * hbg_last_error names where it waited, and the runtime runs the next bind
 * right. On the cuda stand-in (test_cuda_deadline_mock):
 *   - a CTA held back until the others have left (hbgmock_stall_cta, what
 *     a grid that is not all resident meets): CTA 1 leaves the others
 *     waiting at set-up's first grid barrier, CTA 0 leaves them waiting
 *     for the launch to begin;
 *   - a foreign kernel holding an SM (hbgmock_occupy) while every SM holds
 *     one executor CTA (HBG_MOCK_CUDA_SM_BLOCKS=1): the cooperative
 *     launch waits until the whole grid fits and then runs right; a device
 *     without cooperative launches (HBG_MOCK_CUDA_COOP=0) gets a plain
 *     launch whose resident CTAs time out at the first barrier, 3 of 4
 *     there;
 *   - an item running past the deadline (the user kernel uk_sleep of
 *     tests/uk/uk_test.c): the
 *     run, naming its window entry and graph node;
 *   - the grid sized by the occupancy API and the stack limit raised to
 *     the executor's frame.
 * On a GPU (test_cuda_deadline) only the run's deadline and the grid. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_skip.h"
#include "pingpong_fixture.h"
#include "test.h"
#include "uk/uk_test.h"

/* The deadline the tests give (HBG_TEST_DEADLINE_MS: sanitizer builds,
 * whose host build of the device code is far slower, give more), and
 * past it a launch ends within SLACK_MS on a loaded test machine (the
 * held-back CTA starts once the others have left, and leaves). */
static uint32_t DEADLINE_MS = 1500u, SLACK_MS = 5000u;

static void *mock;

static void (*mock_fn(const char *name))(void) {
  void (*f)(void) = NULL;
  *(void **)&f = dlsym(mock, name);
  if (!f)
    T_FAIL("the stand-in lacks %s", name);
  return f;
}

static void stall_cta(int cta) {
  ((void (*)(int))mock_fn("hbgmock_stall_cta"))(cta);
}

static void occupy(int sms, int ms) {
  ((void (*)(int, int))mock_fn("hbgmock_occupy"))(sms, ms);
}

static uint64_t ms_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint32_t env_u32(const char *name, uint32_t def) {
  const char *v = getenv(name);
  return v && *v ? (uint32_t)atoi(v) : def;
}

static hbg_runtime *mk(uint32_t deadline_ms, int policy) {
  char opts[64];
  snprintf(opts, sizeof opts, "deadline_ms=%u", deadline_ms);
  return uk_cuda_runtime(opts, policy);
}

/* One ping-pong bind (k) expected to time out within the deadline: the
 * error, its message containing `where`, the status's phase. */
static void expect_timeout(pp *w, uint32_t k, const char *where,
                           const char *what) {
  uint64_t t0 = ms_now();
  hbg_bind *b = pp_launch(w, k, 0);
  int rc = hbg_bind_wait(b);
  uint64_t dt = ms_now() - t0;
  const char *m = hbg_last_error();
  printf("  %-36s %s after %llu ms: %s\n", what, hbg_err_name(rc),
         (unsigned long long)dt, m);
  ASSERT_ERR(rc, HBG_E_TIMEOUT);
  if (!strstr(m, where))
    T_FAIL("%s: the message '%s' does not say '%s'", what, m, where);
  hbg_bind_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  ASSERT_EQ(st.device_status, HBG_E_TIMEOUT);
  ASSERT_UGE(dt + 1, DEADLINE_MS); /* not before the deadline */
  ASSERT_ULE(dt, DEADLINE_MS + SLACK_MS);
  hbg_bind_end(b);
}

/* After a timeout the runtime goes on: two binds right (P advanced by
 * every bind that ran; a timed-out bind ran no item of the graph). */
static void still_usable(pp *w, uint32_t *k) {
  pp_wait(pp_launch(w, *k, 0));
  ++*k;
  pp_wait(pp_launch(w, *k, 0));
  ++*k;
}

/* The stall scenarios on one runtime: its ping-pong counts the binds that
 * ran (a timed-out one reads P[k % 2] but writes nothing). */
static void test_stalls(int policy) {
  hbg_runtime *rt = mk(DEADLINE_MS, policy);
  pp w;
  pp_create(&w, rt, 0);
  uint32_t k = 0, ran = 0;
  pp_wait(pp_launch(&w, k, 0)); /* records the graph, warms the cache */
  k++;
  ran++;
  const uint32_t ctas = env_u32("HBG_MOCK_CUDA_SMS", 4);
  char barrier1[96], begin[96];
  snprintf(barrier1, sizeof barrier1,
           "in set-up, at grid barrier 1: %u of %u CTAs", ctas - 1, ctas);
  snprintf(begin, sizeof begin,
           "waiting for its launch to begin: %u of %u CTAs", ctas - 1, ctas);
  stall_cta(1);
  expect_timeout(&w, k, barrier1, "CTA 1 held back");
  /* the timed-out bind wrote nothing: P[k % 2] was not advanced, so the
   * next bind reads from where the last good one wrote */
  uint32_t good = k;
  k = good; /* relaunch the same step */
  still_usable(&w, &k);
  ran += 2;
  stall_cta(0);
  expect_timeout(&w, k, begin, "CTA 0 held back");
  still_usable(&w, &k);
  ran += 2;
  pp_check(&w, ran);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
}

/* A foreign kernel holds one SM for two deadlines: the cooperative launch waits
 * until the grid fits, then runs right (and its CTAs never waited for each
 * other for long); without cooperative launches the resident CTAs run out
 * of time at the first barrier. */
static void test_residency(void) {
  setenv("HBG_MOCK_CUDA_SM_BLOCKS", "1", 1); /* an executor CTA per SM */
  hbg_runtime *rt = mk(DEADLINE_MS, HBG_POLICY_COALESCED);
  pp w;
  pp_create(&w, rt, 0);
  pp_wait(pp_launch(&w, 0, 0));
  const uint32_t held = 2 * DEADLINE_MS; /* longer than a deadline */
  occupy(1, (int)held);
  uint64_t t0 = ms_now();
  hbg_bind *b = pp_launch(&w, 1, 0);
  ASSERT_OK(hbg_bind_wait(b));
  uint64_t dt = ms_now() - t0;
  hbg_bind_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  printf("  cooperative, an SM held %u ms       ran after %llu ms, set-up "
         "%.3f ms on the device\n",
         held, (unsigned long long)dt, (double)st.device_setup_ns / 1e6);
  ASSERT_UGE(dt + 50, held); /* it waited for the SM */
  ASSERT_ULE(st.device_setup_ns, (uint64_t)DEADLINE_MS * 1000000u);
  hbg_bind_end(b);
  pp_check(&w, 2);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);

  setenv("HBG_MOCK_CUDA_COOP", "0", 1);
  rt = mk(DEADLINE_MS, HBG_POLICY_COALESCED);
  pp_create(&w, rt, 0);
  pp_wait(pp_launch(&w, 0, 0));
  occupy(1, (int)(5 * DEADLINE_MS));
  const uint32_t ctas = env_u32("HBG_MOCK_CUDA_SMS", 4);
  char barrier1[96];
  snprintf(barrier1, sizeof barrier1,
           "in set-up, at grid barrier 1: %u of %u CTAs", ctas - 1, ctas);
  expect_timeout(&w, 1, barrier1, "plain launch, an SM held 5 deadlines");
  occupy(0, 0);
  uint32_t k = 1;
  still_usable(&w, &k);
  pp_check(&w, 3);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
  unsetenv("HBG_MOCK_CUDA_COOP");
  unsetenv("HBG_MOCK_CUDA_SM_BLOCKS");
}

/* Register uk_sleep on rt's device. @return the registration's result. */
static int reg_sleep(hbg_runtime *rt) {
  return uk_register(rt, UK_SLEEP, "uk_sleep", 1);
}

/* A bind of two ordinary tasks: COPY x to y, then uk_sleep(ms) x to y.
 * @return hbg_bind_wait's result; *dt its wall time, *st the stats. */
static int sleep_bind(hbg_runtime *rt, uint64_t x, uint64_t y, uint64_t ms,
                      uint64_t *dt, hbg_bind_stats *st, uint32_t *entry,
                      uint32_t *node) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  uint32_t dims[1] = {N};
  hbg_tensor a[2];
  hbg_tensor_contig(&a[0], x, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&a[1], y, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_scalar s = {.value = ms, .kind = HBG_SCALAR_STATIC};
  hbg_task t1 = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a};
  hbg_task t2 = {.kernel = UK_SLEEP, .n_args = 2, .args = a,
                 .n_scalars = 1, .scalars = &s};
  hbg_task_id id1 = 0;
  ASSERT_OK(hbg_submit_task(b, &t1, &id1));
  t2.n_deps = 1;
  t2.deps = &id1;
  ASSERT_OK(hbg_submit_task(b, &t2, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  uint64_t t0 = ms_now();
  int rc = hbg_bind_wait(b);
  *dt = ms_now() - t0;
  memset(st, 0, sizeof *st);
  st->struct_size = sizeof *st;
  ASSERT_OK(hbg_bind_stats_get(b, st));
  *entry = *node = 0;
  if (rc)
    ASSERT_OK(hbg_bind_error_location(b, entry, node));
  hbg_bind_end(b);
  return rc;
}

/* An item that takes longer than the deadline: the run's timeout names
 * it; the runtime goes on (a second bind runs the same kernel briefly and
 * right). */
static void test_run(void) {
  hbg_runtime *rt = mk(DEADLINE_MS, HBG_POLICY_COALESCED);
  ASSERT_OK(reg_sleep(rt));
  uint64_t x = 0, y = 0, dt = 0;
  float in[N], out[N];
  for (uint32_t i = 0; i < N; i++)
    in[i] = (float)i + 0.25f;
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &x));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &y));
  ASSERT_OK(hbg_buffer_write(rt, x, in, N * 4));
  hbg_bind_stats st;
  uint32_t entry, node;
  int rc = sleep_bind(rt, x, y, 2 * DEADLINE_MS, &dt, &st, &entry, &node);
  printf("  uk_sleep %u ms, deadline %u ms       %s after %llu ms: %s\n",
         2 * DEADLINE_MS, DEADLINE_MS, hbg_err_name(rc),
         (unsigned long long)dt, hbg_last_error());
  ASSERT_ERR(rc, HBG_E_TIMEOUT);
  ASSERT_UEQ(entry, 1);
  ASSERT_UEQ(node, HBG_TASK_NONE);
  if (!strstr(hbg_last_error(), "in the run: window entry 1 (an ordinary "
                                 "task) was still running"))
    T_FAIL("the run's timeout does not name entry 1 as running: %s",
           hbg_last_error());
  ASSERT_UGE(dt + 1, DEADLINE_MS);
  ASSERT_OK(sleep_bind(rt, x, y, 1, &dt, &st, &entry, &node));
  ASSERT_OK(hbg_buffer_read(rt, out, y, N * 4));
  ASSERT(memcmp(in, out, sizeof in) == 0);
  ASSERT_OK(hbg_buffer_free(rt, x));
  ASSERT_OK(hbg_buffer_free(rt, y));
  hbg_runtime_destroy(rt);
}

/* deadline_ms= and HBG_CUDA_DEADLINE_MS out of range are named. */
static void test_option(void) {
  hbg_device *d = NULL;
  const char *had = getenv("HBG_CUDA_DEADLINE_MS");
  char keep[32] = "";
  if (had)
    snprintf(keep, sizeof keep, "%s", had);
  ASSERT_ERR(hbg_device_open("cuda", "deadline_ms=0", &d), HBG_E_INVAL);
  if (!strstr(hbg_last_error(), "deadline_ms="))
    T_FAIL("deadline_ms=0: %s", hbg_last_error());
  setenv("HBG_CUDA_DEADLINE_MS", "junk", 1);
  ASSERT_ERR(hbg_device_open("cuda", NULL, &d), HBG_E_INVAL);
  if (!strstr(hbg_last_error(), "HBG_CUDA_DEADLINE_MS"))
    T_FAIL("HBG_CUDA_DEADLINE_MS=junk: %s", hbg_last_error());
  if (had)
    setenv("HBG_CUDA_DEADLINE_MS", keep, 1);
  else
    unsetenv("HBG_CUDA_DEADLINE_MS");
  ASSERT_OK(hbg_device_open("cuda", "deadline_ms=86400000", &d));
  hbg_device_close(d);
}

/* The stand-in's grid for blocks of `lanes` (its defaults: 4 SMs, blocks
 * of 4, warps of up to 32 that tile the block). */
static uint32_t workers_for(uint32_t lanes) {
  uint32_t warp = env_u32("HBG_MOCK_CUDA_WARP", 32);
  if (warp > lanes)
    warp = lanes;
  while (lanes % warp)
    warp--;
  return env_u32("HBG_MOCK_CUDA_SMS", 4) *
         (lanes / warp <= 8 ? lanes / warp : 1);
}

/* The grid: one CTA per SM of the most threads up to 256 that an SM
 * holds of the function launched (the occupancy API), asked again of a
 * function a user-kernel link makes; the context's stack raised to the
 * executor's frame. The stand-in's model: 65536 registers per SM,
 * hbg_dc_exec 128 per thread and 4048 bytes of stack; a linked executor
 * HBG_MOCK_CUDA_LINKED_REGS / _LOCAL. */
static void test_grid(void) {
  size_t (*stack)(void) = (size_t(*)(void))mock_fn("hbgmock_stack_limit");
  const uint32_t lanes = env_u32("HBG_MOCK_CUDA_LANES", 4);
  hbg_runtime *rt = mk(DEADLINE_MS, HBG_POLICY_COALESCED);
  ASSERT_UGE(stack(), 4048);
  uint64_t x = 0, y = 0, dt = 0;
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &x));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &y));
  setenv("HBG_MOCK_CUDA_LINKED_LOCAL", "20000", 1);
  ASSERT_OK(reg_sleep(rt));
  unsetenv("HBG_MOCK_CUDA_LINKED_LOCAL");
  ASSERT_UGE(stack(), 20000); /* the linked function's frame */
  hbg_bind_stats st;
  uint32_t entry, node;
  ASSERT_OK(sleep_bind(rt, x, y, 1, &dt, &st, &entry, &node));
  ASSERT_EQ(st.exec_counts, 1);
  ASSERT_UEQ(st.exec_workers, workers_for(lanes));
  ASSERT_OK(hbg_buffer_free(rt, x));
  ASSERT_OK(hbg_buffer_free(rt, y));
  hbg_runtime_destroy(rt);

  /* a link whose function no SM can hold: refused, naming why */
  rt = mk(DEADLINE_MS, HBG_POLICY_COALESCED);
  setenv("HBG_MOCK_CUDA_LINKED_REGS", "100000", 1);
  ASSERT_ERR(reg_sleep(rt), HBG_E_LIMIT);
  unsetenv("HBG_MOCK_CUDA_LINKED_REGS");
  if (!strstr(hbg_last_error(), "registers"))
    T_FAIL("an executor no SM holds: %s", hbg_last_error());
  printf("  grid %u workers; a link no SM holds: %s\n", workers_for(lanes),
         hbg_last_error());
  hbg_runtime_destroy(rt);

  /* blocks of 256: a linked function of 300 registers runs as 128 */
  if (lanes >= 256) {
    rt = mk(DEADLINE_MS, HBG_POLICY_COALESCED);
    ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &x));
    ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &y));
    setenv("HBG_MOCK_CUDA_LINKED_REGS", "300", 1);
    ASSERT_OK(reg_sleep(rt));
    ASSERT_OK(sleep_bind(rt, x, y, 1, &dt, &st, &entry, &node));
    unsetenv("HBG_MOCK_CUDA_LINKED_REGS");
    ASSERT_UEQ(st.exec_workers, workers_for(128));
    printf("  a link of 300 registers: %u workers (128 lanes a CTA)\n",
           st.exec_workers);
    ASSERT_OK(hbg_buffer_free(rt, x));
    ASSERT_OK(hbg_buffer_free(rt, y));
    hbg_runtime_destroy(rt);
  }
}

int main(void) {
  skip_without_gpu();
  const char *dl = getenv("HBG_TEST_DEADLINE_MS");
  if (dl && atoi(dl) > 0) {
    DEADLINE_MS = (uint32_t)atoi(dl);
    SLACK_MS = 15 * DEADLINE_MS;
  }
  mock = cuda_standin();
  test_option();
  if (mock) {
    for (int p = 0; p < HBG_POLICY__COUNT; p++) {
      printf("%s:\n", hbg_policy_name(p));
      test_stalls(p);
    }
    test_residency();
    test_grid();
  }
  test_run();
  printf("cuda deadline: ok\n");
  return 0;
}
