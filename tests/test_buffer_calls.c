/* hbg_buffer_free, _write and _read against the runtime's own memory and
 * against binds in flight:
 * - a free of anything but the start of a live buffer of this runtime (a
 *   second free whose address the runtime has since reused, a runtime
 *   address, an address inside a buffer, another runtime's buffer) is
 *   HBG_E_INVAL, named in hbg_last_error(), and frees nothing: later binds
 *   still verify;
 * - a free, write or read whose wait for binds in flight fails returns that
 *   error and does nothing (the buffer stays live, nothing is copied);
 * - hbg_runtime_destroy right after such a free (the bind still in flight)
 *   frees every buffer still live: the caller's device is left with no
 *   byte allocated; a free failing there is named as a user buffer's;
 * - a write is not seen by a bind launched before it and a read sees what
 *   a bind launched before it wrote, although that bind is held on the
 *   device when the call is made (sim, every policy; the cuda stand-in
 *   when HBG_CUDA_LIB names it: test_buffer_calls_mock). */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chain_fixture.h"
#include "common/util.h"
#include "core/core.h"
#include "gate_fixture.h"
#include "test.h"

#define N 64u
#define L 4u

static hbg_runtime *mk(hbg_device *dev, int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_handle = dev;
  cfg.policy = (uint32_t)policy;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static uint64_t frees(hbg_device *dev) {
  hbg_dev_stats st;
  st.struct_size = sizeof st;
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  return st.mem_frees;
}

static uint64_t frees_failed(hbg_device *dev) {
  hbg_dev_stats st;
  st.struct_size = sizeof st;
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  return st.free_failures;
}

static void expect_refused(hbg_runtime *rt, uint64_t addr, const char *says) {
  hbg_device *dev = hbg_runtime_device(rt);
  uint64_t before = frees(dev);
  ASSERT_ERR(hbg_buffer_free(rt, addr), HBG_E_INVAL);
  if (!strstr(hbg_last_error(), says))
    T_FAIL("hbg_buffer_free(0x%llx): '%s' does not say '%s'",
           (unsigned long long)addr, hbg_last_error(), says);
  ASSERT_UEQ(frees(dev), before);
}

/* Under pinned-eager the runtime allocates retained buffers during binds,
 * from memory a freed user buffer gave back: freeing that old address
 * again must not release them. */
static void free_refusals(int policy) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", NULL, &dev));
  hbg_runtime *rt = mk(dev, policy), *other = mk(dev, policy);
  uint64_t gone = 0, theirs = 0;
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  ASSERT_OK(hbg_buffer_alloc(rt, 1u << 20, &gone));
  ASSERT_OK(hbg_buffer_free(rt, gone));
  ASSERT_OK(hbg_buffer_alloc(other, N * 4, &theirs));
  ASSERT_OK(chain_bind(&c, 0, NULL));
  if (policy == HBG_POLICY_PINNED_EAGER) {
    /* the sim allocates first fit: the retained buffers took the hole */
    uint8_t probe;
    ASSERT_OK(hbg_dev_copy_d2h(dev, &probe, gone, 1));
  }
  expect_refused(rt, gone, "not a live buffer of this runtime");
  expect_refused(rt, c.b[1] + 4, "inside the buffer");
  expect_refused(rt, theirs, "not a live buffer of this runtime");
  expect_refused(rt, rt->slots[0].status_dev, "not a live buffer");
  expect_refused(rt, rt->slots[1].status_dev, "not a live buffer");
  for (uint32_t step = 1; step < 4; step++)
    ASSERT_OK(chain_bind(&c, step, NULL)); /* verified bit for bit */
  ASSERT_OK(hbg_buffer_free(other, theirs));
  ASSERT_ERR(hbg_buffer_free(other, theirs), HBG_E_INVAL);
  chain_destroy(&c);
  hbg_runtime_destroy(other);
  hbg_runtime_destroy(rt);
  hbg_dev_stats st;
  st.struct_size = sizeof st;
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  ASSERT_UEQ(st.mem_in_use, 0);
  ASSERT_UEQ(st.free_failures, 0);
  hbg_device_close(dev);
}

/* A failed wait for the bind in flight: free, write and read return it,
 * and do nothing. */
static void failed_waits(int policy) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_runtime *rt = mk(dev, policy);
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit(&c, b, 0));
  ASSERT_OK(hbg_bind_launch(b));
  uint64_t copies = hbg_fault_calls(dev, HBG_DEV_OP_COPY_H2D) +
                    hbg_fault_calls(dev, HBG_DEV_OP_COPY_D2H);
  uint64_t mfree = hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE);
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_EVENT_WAIT, 1, 0));
  ASSERT_ERR(hbg_buffer_free(rt, c.input), HBG_E_INJECTED);
  ASSERT(strstr(hbg_last_error(), "hbg_buffer_free: waiting for bind"));
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE), mfree);
  float x[N];
  memset(x, 0, sizeof x);
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_EVENT_WAIT, 1, 0));
  ASSERT_ERR(hbg_buffer_write(rt, c.input, x, sizeof x), HBG_E_INJECTED);
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_EVENT_WAIT, 1, 0));
  ASSERT_ERR(hbg_buffer_read(rt, x, c.out, sizeof x), HBG_E_INJECTED);
  ASSERT(strstr(hbg_last_error(), "hbg_buffer_read: waiting for bind"));
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_COPY_H2D) +
                 hbg_fault_calls(dev, HBG_DEV_OP_COPY_D2H),
             copies);
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  /* the input is still live and unchanged: the next bind verifies */
  ASSERT_OK(chain_bind(&c, 1, NULL));
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  hbg_device_close(dev);
}

/* A free whose wait fails keeps its buffer live; hbg_runtime_destroy at
 * once (the bind in flight, never waited) frees it with the chain's
 * buffers, never freed by hand: the device the caller keeps open is left
 * with nothing allocated. A second round fails the last mem_free of that
 * teardown: the user's buffers go last, so it names one, and the device
 * still gets every byte back (the fault device releases what it fails). */
static void failed_free_then_destroy(int policy) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_device *inner = hbg_fault_inner(dev);
  uint64_t teardown_frees = 0;
  for (int round = 0; round < 2; round++) {
    hbg_runtime *rt = mk(dev, policy);
    chain c;
    ASSERT_OK(chain_create(&c, rt, L, N));
    uint64_t kept = 0;
    ASSERT_OK(hbg_buffer_alloc(rt, 128, &kept));
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(chain_submit(&c, b, 0));
    ASSERT_OK(hbg_bind_launch(b));
    hbg_bind_end(b);
    uint64_t mfree = hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE);
    ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_EVENT_WAIT, 1, 0));
    ASSERT_ERR(hbg_buffer_free(rt, kept), HBG_E_INJECTED);
    ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE), mfree);
    hbg_dev_stats st = {.struct_size = sizeof st};
    ASSERT_OK(hbg_dev_stats_get(inner, &st));
    ASSERT(st.mem_in_use > 0);
    hbg_fault_reset(dev);
    if (round == 1)
      ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_MEM_FREE, teardown_frees, 0));
    hbg__error_clear();
    hbg_runtime_destroy(rt);
    ASSERT_OK(hbg_dev_stats_get(inner, &st));
    if (st.mem_in_use != 0 || st.host_in_use != 0)
      T_FAIL("%s round %d: %llu device and %llu pinned bytes left allocated "
             "after hbg_runtime_destroy",
             hbg_policy_name(policy), round,
             (unsigned long long)st.mem_in_use,
             (unsigned long long)st.host_in_use);
    if (round == 0) {
      teardown_frees = hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE);
      ASSERT_UGE(teardown_frees, 2u * L + 4); /* the chain's, and kept */
      ASSERT_STREQ(hbg_last_error(), "");
      ASSERT_UEQ(frees_failed(dev), 0);
    } else {
      ASSERT_UEQ(hbg_fault_fired(dev), 1);
      ASSERT_UEQ(frees_failed(dev), 1);
      if (!strstr(hbg_last_error(), "mem_free of the user buffer"))
        T_FAIL("%s: '%s' does not name a user buffer", hbg_policy_name(policy),
               hbg_last_error());
    }
    chain_forget(&c);
  }
  hbg_device_close(dev);
}

/* One held bind copies X to Y. A write of X made while it is held must
 * not reach it; a read of Y made while it is held must see its output. */
typedef struct xy {
  hbg_runtime *rt;
  int sim;
  uint64_t x, y, dummy;
} xy;

static hbg_bind *copy_held(xy *w) {
  uint32_t dims[1] = {N};
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(w->rt, &b));
  hbg_task_id gate = 0;
  uint32_t n_deps = 0;
  if (w->sim) {
    hbg_tensor d;
    hbg_tensor_contig(&d, w->dummy, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
    hbg_task g = {.kernel = K_GATE, .n_args = 1, .args = &d};
    ASSERT_OK(hbg_submit_task(b, &g, &gate));
    n_deps = 1;
  }
  hbg_tensor t[2];
  hbg_tensor_contig(&t[0], w->x, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&t[1], w->y, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_task cp = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = t,
                 .n_deps = n_deps, .deps = &gate};
  ASSERT_OK(hbg_submit_task(b, &cp, NULL));
  gate_close();
  ASSERT_OK(hbg_bind_launch(b));
  return b;
}

static void fill(float *v, float base) {
  for (uint32_t i = 0; i < N; i++)
    v[i] = base + (float)i;
}

static void ordered_copies(hbg_runtime *rt, int sim, const char *what) {
  xy w = {.rt = rt, .sim = sim};
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &w.x));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &w.y));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &w.dummy));
  float old[N], neu[N], got[N];
  fill(old, 1.0f);
  fill(neu, 1000.0f);
  memset(got, 0, sizeof got);
  ASSERT_OK(hbg_buffer_write(rt, w.x, old, sizeof old));
  ASSERT_OK(hbg_buffer_write(rt, w.y, got, sizeof got));

  /* write while held: the bind copies the old X */
  hbg_bind *b = copy_held(&w);
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, gate_open_later, NULL), 0);
  ASSERT_OK(hbg_buffer_write(rt, w.x, neu, sizeof neu));
  pthread_join(th, NULL);
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_read(rt, got, w.y, sizeof got));
  if (memcmp(got, old, sizeof got) != 0)
    T_FAIL("%s: a bind launched before hbg_buffer_write saw the write "
           "(y[0] = %g, want %g)",
           what, (double)got[0], (double)old[0]);

  /* read while held: the read sees the bind's output (the new X) */
  b = copy_held(&w);
  ASSERT_EQ(pthread_create(&th, NULL, gate_open_later, NULL), 0);
  ASSERT_OK(hbg_buffer_read(rt, got, w.y, sizeof got));
  pthread_join(th, NULL);
  if (memcmp(got, neu, sizeof got) != 0)
    T_FAIL("%s: hbg_buffer_read did not see the output of a bind launched "
           "before it (y[0] = %g, want %g)",
           what, (double)got[0], (double)neu[0]);
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_free(rt, w.x));
  ASSERT_OK(hbg_buffer_free(rt, w.y));
  ASSERT_OK(hbg_buffer_free(rt, w.dummy));
}

int main(void) {
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    free_refusals(p);
    failed_waits(p);
    failed_free_then_destroy(p);
    hbg_device *dev = NULL;
    ASSERT_OK(hbg_device_open("sim", "workers=2", &dev));
    ASSERT_OK(gate_register(dev));
    hbg_runtime *rt = mk(dev, p);
    ordered_copies(rt, 1, hbg_policy_name(p));
    hbg_runtime_destroy(rt);
    hbg_device_close(dev);
  }
  printf("sim: buffer calls ok under every policy\n");
  const char *lib = getenv("HBG_CUDA_LIB");
  if (lib && *lib) {
    gate_mock_load(lib);
    for (int p = 0; p < HBG_POLICY__COUNT; p++) {
      hbg_config cfg;
      hbg_config_init(&cfg);
      cfg.device = "cuda";
      cfg.device_options = "exec=device";
      cfg.policy = (uint32_t)p;
      hbg_runtime *rt = NULL;
      ASSERT_OK(hbg_runtime_create(&cfg, &rt));
      ordered_copies(rt, 0, hbg_policy_name(p));
      hbg_runtime_destroy(rt);
    }
    printf("cuda stand-in: write and read ordered with held binds\n");
  } else {
    printf("cuda stand-in part not run: HBG_CUDA_LIB unset (run as "
           "test_buffer_calls_mock)\n");
  }
  return 0;
}
