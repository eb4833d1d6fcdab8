/* Staging and device windows sized to need: the coalesced window does not
 * follow the pinned arena, deferred pins nothing, and a pinned arena that
 * cannot be had names arena_bytes in the error. */
#include <string.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_workload.h>

#include "core/core.h"
#include "test.h"

static hbg_runtime *mk(hbg_device *dev, int policy, uint64_t arena) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.device_handle = dev;
  cfg.arena_bytes = arena;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static uint64_t in_use(hbg_device *dev, int pinned) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  return pinned ? st.host_in_use : st.mem_in_use;
}

/* Two qwen3-14b binds (one per pipeline slot), verified; @return the
 * device bytes held afterwards beyond the workload's tensors, and the last
 * bind's stats. */
static uint64_t qwen_binds(hbg_device *dev, int policy, uint64_t arena,
                           hbg_bind_stats *st) {
  uint64_t base = in_use(dev, 0);
  hbg_runtime *rt = mk(dev, policy, arena);
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = "qwen3-14b";
  hbg_workload *w = NULL;
  ASSERT_OK(hbg_workload_create(rt, &wc, &w));
  hbg_workload_info info;
  ASSERT_OK(hbg_workload_get_info(w, &info));
  for (uint32_t step = 0; step < 2; step++) {
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, step));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    ASSERT_OK(hbg_bind_stats_get(b, st));
    hbg_bind_end(b);
    ASSERT_OK(hbg_workload_verify(w, step, NULL));
  }
  if (policy == HBG_POLICY_COALESCED)
    for (uint32_t i = 0; i < rt->depth; i++) {
      /* the window buffer follows the window, not the 16 MiB arena */
      ASSERT_GT(rt->slots[i].win_cap, 0);
      ASSERT_ULE(rt->slots[i].win_cap, 65536);
      ASSERT_ULE(st->window.bytes + st->graph.bytes, rt->slots[i].win_cap);
    }
  uint64_t held = in_use(dev, 0) - base - info.device_bytes;
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
  ASSERT_UEQ(in_use(dev, 0), base);
  return held;
}

/* Device memory does not depend on arena_bytes: a 4 KiB arena and the
 * 16 MiB default hold the same device bytes (the windows used to be sized
 * to the arena, 16 MiB per slot). */
static void test_coalesced_window(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", "mem=256M", &dev));
  hbg_bind_stats st;
  uint64_t big = qwen_binds(dev, HBG_POLICY_COALESCED, 16u << 20, &st);
  uint64_t small = qwen_binds(dev, HBG_POLICY_COALESCED, 4096, &st);
  ASSERT_UEQ(big, small);
  /* near the need: the resident Definition, two heaps of internal
   * tensors, two windows of at most 64 KiB, two status words */
  ASSERT_ULE(big, 4u << 20);
  printf("coalesced qwen3-14b: %llu device bytes beyond the workload's, "
         "16 MiB arena or 4 KiB\n", (unsigned long long)big);
  hbg_device_close(dev);
}

/* A 32 MiB device: the first coalesced bind fits (it used to ask for a
 * 16 MiB window per slot and fail with HBG_E_DEVMEM). */
static void test_small_device(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", "mem=32M", &dev));
  hbg_bind_stats st;
  qwen_binds(dev, HBG_POLICY_COALESCED, 0, &st);
  ASSERT_EQ(st.device_status, 0);
  hbg_device_close(dev);
}

/* deferred stages in heap memory: no pinned arena at all. */
static void test_deferred_no_arena(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", NULL, &dev));
  uint64_t pinned = in_use(dev, 1);
  hbg_runtime *rt = mk(dev, HBG_POLICY_DEFERRED, 0);
  ASSERT_UEQ(in_use(dev, 1), pinned);
  for (uint32_t i = 0; i < rt->depth; i++)
    ASSERT(rt->slots[i].arena.base == NULL);
  hbg_runtime_destroy(rt);
  /* the pinned policies still get their arena */
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    if (p == HBG_POLICY_DEFERRED)
      continue;
    rt = mk(dev, p, 1u << 20);
    ASSERT_UEQ(in_use(dev, 1), pinned + 2 * (1u << 20));
    hbg_runtime_destroy(rt);
  }
  hbg_device_close(dev);
}

/* An arena that cannot be pinned: the error says arena_bytes did it, in
 * hbg_last_error() and in the device's native error. */
static void test_arena_error(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = HBG_POLICY_PINNED_EAGER;
  cfg.device_handle = dev;
  cfg.arena_bytes = 3u << 20;
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_HOST_ALLOC, 1, HBG_E_NOMEM));
  hbg_runtime *rt = NULL;
  ASSERT_ERR(hbg_runtime_create(&cfg, &rt), HBG_E_NOMEM);
  ASSERT(rt == NULL);
  const char *last = hbg_last_error();
  ASSERT(strstr(last, "arena_bytes") != NULL);
  ASSERT(strstr(last, "HBG_ARENA_BYTES") != NULL);
  ASSERT(strstr(last, "3145728") != NULL);
  int64_t code = 0;
  const char *msg = NULL;
  ASSERT_OK(hbg_device_native_error(dev, &code, &msg));
  ASSERT(strstr(msg, "arena_bytes") != NULL);
  /* deferred never asks for an arena: the same fault is no error */
  cfg.policy = HBG_POLICY_DEFERRED;
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_HOST_ALLOC, 1, HBG_E_NOMEM));
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  hbg_runtime_destroy(rt);
  hbg_fault_arm(dev, HBG_DEV_OP_HOST_ALLOC, 0, 0);
  hbg_device_close(dev);
}

int main(void) {
  test_coalesced_window();
  test_small_device();
  test_deferred_no_arena();
  test_arena_error();
  printf("core_sizing: ok\n");
  return 0;
}
