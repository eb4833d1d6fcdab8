/* hbg_buffer_import and hbg_buffer_host_ptr on the sim (the cuda half is
 * test_cuda_import):
 * - host arrays the caller owns, imported, are read and written by tasks
 *   and graph submissions in place under every policy and both dependency
 *   modes: the results are in the caller's arrays with no copy back, and a
 *   write through the array between binds is what the next bind reads;
 * - a tensor or boundary tensor straddling an import's end is HBG_E_RANGE;
 * - hbg_buffer_free forgets an import (one mem_unimport, no mem_free; a
 *   later task naming it is HBG_E_RANGE) and leaves the caller's bytes as
 *   they were; hbg_runtime_destroy forgets live ones the same way (under
 *   ASan in `make asan`: the sim never touches the pages after);
 * - refusals, each named in hbg_last_error(): NULL / 0 / wrapping ranges,
 *   an overlapping second import (naming both), the sim's own heap, an
 *   import space exhausted; injected device failures of the import and of
 *   its unimport (in free and in destroy);
 * - hbg_buffer_host_ptr on allocated and imported buffers, and outside;
 * - the sim's import table itself: alignment carried over, copies and
 *   async copies reaching the caller's pages, mem_free refusing an import,
 *   offsets reused after unimport, the first-fit gap search. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/sim/sim.h"
#include "scale_fixture.h"
#include "test.h"

#define N 1024u

static hbg_runtime *mk(hbg_device *dev, int policy, int deps) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_handle = dev;
  cfg.policy = (uint32_t)policy;
  cfg.deps = (uint32_t)deps;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static uint64_t d2h_bytes(hbg_device *dev) {
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  return st.d2h_bytes;
}

/* One bind: y = 2 x (a task), z = 3 y (a graph replay after it), and
 * w = x + a (a task over an import and an allocated buffer). */
static void bind_once(hbg_runtime *rt, uint64_t ix, uint64_t iy, uint64_t ba,
                      uint64_t bw) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task_id t0 = HBG_TASK_NONE;
  ASSERT_OK(submit_scale(b, vec(ix, 0, N, HBG_ACCESS_IN),
                         vec(iy, 0, N, HBG_ACCESS_OUT), 2.0f, &t0));
  ASSERT_OK(submit_graph(b, vec(iy, 0, N, HBG_ACCESS_IN),
                         vec(iy, N * 4, N, HBG_ACCESS_OUT), &t0));
  hbg_tensor a[3] = {vec(ix, 0, N, HBG_ACCESS_IN), vec(ba, 0, N, HBG_ACCESS_IN),
                     vec(bw, 0, N, HBG_ACCESS_OUT)};
  hbg_task add = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a};
  ASSERT_OK(hbg_submit_task(b, &add, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
}

static void check_results(hbg_runtime *rt, const float *x, const float *yz,
                          const float *ha, uint64_t bw, const char *when) {
  float w[N];
  for (uint32_t i = 0; i < N; i++) {
    float y = x[i] * 2.0f, z = y * 3.0f;
    if (yz[i] != y || yz[N + i] != z)
      T_FAIL("%s (%s): element %u: y %g z %g, expected %g %g", when,
             hbg_policy_name(hbg_runtime_policy(rt)), i, (double)yz[i],
             (double)yz[N + i], (double)y, (double)z);
  }
  ASSERT_OK(hbg_buffer_read(rt, w, bw, sizeof w));
  for (uint32_t i = 0; i < N; i++)
    if (w[i] != x[i] + ha[i])
      T_FAIL("%s: w[%u] %g, expected %g", when, i, (double)w[i],
             (double)(x[i] + ha[i]));
}

/* Tasks and graphs over imported host arrays, every policy. */
static void binds_in_place(int policy, int deps) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_runtime *rt = mk(dev, policy, deps);
  float *x = aligned_alloc(256, N * 4), *yz = aligned_alloc(256, 2 * N * 4);
  ASSERT(x && yz);
  float ha[N];
  for (uint32_t i = 0; i < N; i++) {
    x[i] = (float)i * 0.25f - 7.0f;
    ha[i] = (float)(i % 13);
    yz[i] = yz[N + i] = -1.0f;
  }
  uint64_t ix = 0, iy = 0, ba = 0, bw = 0;
  ASSERT_OK(hbg_buffer_import(rt, (uint64_t)(uintptr_t)x, N * 4, &ix));
  ASSERT_OK(hbg_buffer_import(rt, (uint64_t)(uintptr_t)yz, 2 * N * 4, &iy));
  ASSERT(ix != (uint64_t)(uintptr_t)x); /* a sim device address */
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &ba));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &bw));
  ASSERT_OK(hbg_buffer_write(rt, ba, ha, sizeof ha));
  void *p = NULL;
  ASSERT_OK(hbg_buffer_host_ptr(rt, iy, 2 * N * 4, &p));
  ASSERT(p == (void *)yz);
  ASSERT_OK(hbg_buffer_host_ptr(rt, iy + N * 4 + 8, 16, &p));
  ASSERT(p == (void *)(yz + N + 2));

  uint64_t d2h = d2h_bytes(dev);
  bind_once(rt, ix, iy, ba, bw);
  /* read nothing back but the statuses: the results are in place */
  ASSERT_ULE(d2h_bytes(dev) - d2h, 1024);
  check_results(rt, x, yz, ha, bw, "first bind");
  for (int step = 0; step < 3; step++) {
    for (uint32_t i = 0; i < N; i++) /* through the caller's array */
      x[i] = (float)((i * 7 + (uint32_t)step) % 31) - 15.0f;
    d2h = d2h_bytes(dev);
    bind_once(rt, ix, iy, ba, bw);
    ASSERT_ULE(d2h_bytes(dev) - d2h, 1024 + N * 4); /* w read back */
    check_results(rt, x, yz, ha, bw, "after a write through the array");
  }
  /* hbg_buffer_write / _read reach the caller's bytes too */
  float v[4] = {1.5f, 2.5f, 3.5f, 4.5f}, r[4];
  ASSERT_OK(hbg_buffer_write(rt, ix + 16, v, sizeof v));
  ASSERT(memcmp(x + 4, v, sizeof v) == 0);
  x[9] = 99.0f;
  ASSERT_OK(hbg_buffer_read(rt, r, ix + 32, sizeof r));
  ASSERT(r[1] == 99.0f);

  /* a tensor straddling the import's end */
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_ERR(submit_scale(b, vec(ix, 0, N + 1, HBG_ACCESS_IN),
                          vec(bw, 0, N + 1, HBG_ACCESS_OUT), 1.0f, NULL),
             HBG_E_RANGE);
  ASSERT_ERR(submit_scale(b, vec(iy, 0, N, HBG_ACCESS_IN),
                          vec(iy, N * 4 + 8, N, HBG_ACCESS_OUT), 1.0f, NULL),
             HBG_E_RANGE);
  ASSERT_ERR(submit_graph(b, vec(iy, 0, N, HBG_ACCESS_IN),
                          vec(iy, N * 4 + 4, N, HBG_ACCESS_OUT), NULL),
             HBG_E_RANGE);
  hbg_bind_end(b);

  /* free forgets: no mem_free, the caller's bytes as they were */
  float *snap = malloc(N * 4);
  ASSERT(snap);
  memcpy(snap, x, N * 4);
  uint64_t frees = hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE);
  uint64_t unimports = hbg_fault_calls(dev, HBG_DEV_OP_MEM_UNIMPORT);
  ASSERT_ERR(hbg_buffer_free(rt, ix + 4), HBG_E_INVAL);
  expect_msg("free inside an import", "inside the buffer");
  ASSERT_OK(hbg_buffer_free(rt, ix));
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE), frees);
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_MEM_UNIMPORT), unimports + 1);
  ASSERT(memcmp(snap, x, N * 4) == 0);
  ASSERT_ERR(hbg_buffer_free(rt, ix), HBG_E_INVAL);
  ASSERT_ERR(hbg_buffer_host_ptr(rt, ix, 4, &p), HBG_E_RANGE);
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_ERR(submit_scale(b, vec(ix, 0, N, HBG_ACCESS_IN),
                          vec(iy, 0, N, HBG_ACCESS_OUT), 1.0f, NULL),
             HBG_E_RANGE);
  hbg_bind_end(b);
  ASSERT_ERR(hbg_dev_copy_d2h(dev, r, ix, 4), HBG_E_RANGE);

  /* destroy with iy live: forgotten, the caller's bytes untouched */
  float *snap2 = malloc(2 * N * 4);
  ASSERT(snap2);
  memcpy(snap2, yz, 2 * N * 4);
  unimports = hbg_fault_calls(dev, HBG_DEV_OP_MEM_UNIMPORT);
  frees = hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE);
  hbg__error_clear();
  hbg_runtime_destroy(rt);
  ASSERT_STREQ(hbg_last_error(), "");
  ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_MEM_UNIMPORT), unimports + 1);
  ASSERT(memcmp(snap2, yz, 2 * N * 4) == 0);
  hbg__sim_info in;
  ASSERT_OK(hbg__sim_get_info(hbg__sim_from(dev), &in));
  ASSERT_UEQ(in.imports, 0);
  ASSERT_UEQ(in.live_allocs, 0);
  /* only the runtime's and ba / bw's allocations were freed */
  ASSERT_UGE(hbg_fault_calls(dev, HBG_DEV_OP_MEM_FREE), frees + 2);
  ASSERT_ERR(hbg_dev_copy_d2h(dev, r, iy, 4), HBG_E_RANGE);
  hbg_device_close(dev);
  free(snap);
  free(snap2);
  free(x);
  free(yz);
}

/* Refusals at import, and hbg_buffer_host_ptr's. */
static void refusals(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("fault", "inner=sim", &dev));
  hbg_runtime *rt = mk(dev, HBG_POLICY_COALESCED, HBG_DEPS_EXPLICIT);
  static float host[N];
  uint64_t h = (uint64_t)(uintptr_t)host, d = 0, d2 = 0;
  ASSERT_ERR(hbg_buffer_import(NULL, h, 4, &d), HBG_E_INVAL);
  ASSERT_ERR(hbg_buffer_import(rt, h, 4, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_buffer_import(rt, 0, 4, &d), HBG_E_INVAL);
  expect_msg("NULL", "a NULL address");
  ASSERT_ERR(hbg_buffer_import(rt, h, 0, &d), HBG_E_INVAL);
  expect_msg("0 bytes", "0 bytes");
  ASSERT_ERR(hbg_buffer_import(rt, UINT64_MAX - 8, 16, &d), HBG_E_INVAL);
  expect_msg("wrap", "wraps around");

  ASSERT_OK(hbg_buffer_import(rt, h, sizeof host, &d));
  /* alignment carries over: the device address has the host's low bits */
  ASSERT_UEQ(d & 255, h & 255);
  /* overlapping: refused naming both */
  char hx[32], dx[32];
  snprintf(hx, sizeof hx, "0x%llx", (unsigned long long)(h + 64));
  snprintf(dx, sizeof dx, "0x%llx", (unsigned long long)h);
  ASSERT_ERR(hbg_buffer_import(rt, h + 64, 128, &d2), HBG_E_INVAL);
  expect_msg("overlap", hx);
  expect_msg("overlap", dx);
  expect_msg("overlap", "overlaps the import");
  ASSERT_ERR(hbg_buffer_import(rt, h, sizeof host, &d2), HBG_E_INVAL);
  ASSERT_ERR(hbg_buffer_import(rt, h - 16, 32, &d2), HBG_E_INVAL);
  /* adjacent is fine */
  static float after[16];
  uint64_t da = 0;
  if ((uint64_t)(uintptr_t)after + sizeof after <= h ||
      (uint64_t)(uintptr_t)after >= h + sizeof host) {
    ASSERT_OK(
        hbg_buffer_import(rt, (uint64_t)(uintptr_t)after, sizeof after, &da));
    ASSERT_OK(hbg_buffer_free(rt, da));
  }
  /* the sim's own device memory is not the caller's to import */
  uint64_t ba = 0;
  void *p = NULL;
  ASSERT_OK(hbg_buffer_alloc(rt, 4096, &ba));
  ASSERT_OK(hbg_buffer_host_ptr(rt, ba, 4096, &p));
  ASSERT_OK(hbg_buffer_write(rt, ba, host, 64));
  ASSERT(memcmp(p, host, 64) == 0);
  ASSERT_OK(hbg_buffer_host_ptr(rt, ba + 4000, 96, &p));
  ASSERT_ERR(hbg_buffer_host_ptr(rt, ba + 4000, 97, &p), HBG_E_RANGE);
  expect_msg("host_ptr straddle", "not inside one live buffer");
  ASSERT_ERR(hbg_buffer_host_ptr(rt, ba - 256, 4, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg_buffer_host_ptr(rt, d + sizeof host, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg_buffer_host_ptr(rt, 12345, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg_buffer_host_ptr(NULL, ba, 1, &p), HBG_E_INVAL);
  ASSERT_ERR(hbg_buffer_host_ptr(rt, ba, 1, NULL), HBG_E_INVAL);
  ASSERT_OK(hbg_buffer_host_ptr(rt, ba, 4096, &p));
  ASSERT_ERR(hbg_buffer_import(rt, (uint64_t)(uintptr_t)p, 64, &d2),
             HBG_E_INVAL);
  expect_msg("heap", "the sim's own device memory");
  /* the import space is 2^48 - 2^40 bytes: more is a limit (nothing is
   * touched at import, so a range of no real memory shows it) */
  ASSERT_ERR(hbg_buffer_import(rt, UINT64_C(1) << 50, UINT64_C(1) << 48, &d2),
             HBG_E_LIMIT);
  expect_msg("limit", "no room in the sim's import space");
  /* an injected device failure: named, nothing kept */
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_MEM_IMPORT, 1, 0));
  static float other[64];
  ASSERT_ERR(
      hbg_buffer_import(rt, (uint64_t)(uintptr_t)other, sizeof other, &d2),
      HBG_E_INJECTED);
  expect_msg("injected", "injected fault in mem_import");
  hbg__sim_info in;
  ASSERT_OK(hbg__sim_get_info(hbg__sim_from(dev), &in));
  ASSERT_UEQ(in.imports, 1);
  ASSERT_UEQ(in.import_bytes, sizeof host);
  /* a failed unimport is final, like a failed free: the import leaves */
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_MEM_UNIMPORT, 1, 0));
  ASSERT_ERR(hbg_buffer_free(rt, d), HBG_E_INJECTED);
  ASSERT_ERR(hbg_buffer_free(rt, d), HBG_E_INVAL);
  hbg_dev_stats st = {.struct_size = sizeof st};
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  ASSERT_UEQ(st.free_failures, 1);
  /* (the fault wrapper forwards a release even when it injects a
   * failure: the sim forgot it too) */
  ASSERT_OK(hbg__sim_get_info(hbg__sim_from(dev), &in));
  ASSERT_UEQ(in.imports, 0);
  /* and in destroy: named as the imported buffer's */
  ASSERT_OK(hbg_buffer_import(rt, h, sizeof host, &d));
  ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_MEM_UNIMPORT, 1, 0));
  hbg__error_clear();
  hbg_runtime_destroy(rt);
  expect_msg("destroy", "mem_unimport of the imported buffer");
  ASSERT_OK(hbg__sim_get_info(hbg__sim_from(dev), &in));
  ASSERT_UEQ(in.imports, 0);
  ASSERT_UEQ(in.live_allocs, 0);
  hbg_device_close(dev);
}

/* The sim's import table through the device ops. */
static void sim_table(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", NULL, &dev));
  hbg__sim *s = hbg__sim_from(dev);
  uint8_t *buf = malloc(8192);
  ASSERT(buf);
  memset(buf, 0x11, 8192);
  hbg_devptr a = 0, b = 0;
  ASSERT_ERR(hbg_dev_mem_import(dev, 0, 4, &a), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_mem_import(dev, 1, 0, &a), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_mem_import(dev, 1, 4, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_mem_import(NULL, 1, 4, &a), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_mem_import(dev, UINT64_MAX - 2, 4, &a), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_mem_unimport(NULL, 1), HBG_E_INVAL);
  ASSERT_OK(hbg_dev_mem_import(dev, (uint64_t)(uintptr_t)(buf + 3), 4096, &a));
  ASSERT_UEQ(a & 255, (uint64_t)(uintptr_t)(buf + 3) & 255);
  void *p = NULL;
  ASSERT_OK(hbg__sim_resolve(s, a, 4096, &p));
  ASSERT(p == buf + 3);
  ASSERT_OK(hbg__sim_resolve_in(s, a, 4000, 96, &p));
  ASSERT(p == buf + 4003);
  ASSERT_ERR(hbg__sim_resolve_in(s, a, 4000, 97, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, a - 1, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, a + 4096, 1, &p), HBG_E_RANGE);
  /* copies, sync and async, land in the caller's pages */
  uint8_t src[64], dst[64];
  memset(src, 0x5A, sizeof src);
  ASSERT_OK(hbg_dev_copy_h2d(dev, a + 100, src, sizeof src));
  ASSERT(memcmp(buf + 103, src, sizeof src) == 0);
  buf[300] = 0x77;
  ASSERT_OK(hbg_dev_copy_d2h(dev, dst, a + 297, sizeof dst));
  ASSERT_UEQ(dst[0], 0x77);
  hbg_dev_queue *q = NULL;
  ASSERT_OK(hbg_dev_queue_create(dev, &q));
  void *pin = NULL;
  ASSERT_OK(hbg_dev_host_alloc(dev, 64, &pin));
  memset(pin, 0x3C, 64);
  ASSERT_OK(hbg_dev_copy_h2d_async(dev, q, a + 1000, pin, 64));
  ASSERT_OK(hbg_dev_queue_sync(dev, q));
  ASSERT(memcmp(buf + 1003, pin, 64) == 0);
  ASSERT_ERR(hbg_dev_copy_h2d(dev, a + 4090, src, 7), HBG_E_RANGE);
  /* mem_free never frees an import; unimport only its start */
  ASSERT_ERR(hbg_dev_mem_free(dev, a), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_mem_unimport(dev, a + 1), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_mem_unimport(dev, 0x1234), HBG_E_INVAL);
  /* a second range right after: its own offsets, a gap between */
  ASSERT_OK(
      hbg_dev_mem_import(dev, (uint64_t)(uintptr_t)(buf + 4099), 4093, &b));
  ASSERT_UGE(b, a + 4096 + 256);
  ASSERT_ERR(
      hbg_dev_mem_import(dev, (uint64_t)(uintptr_t)(buf + 4000), 200, &b),
      HBG_E_INVAL);
  ASSERT_OK(hbg_dev_mem_unimport(dev, a));
  ASSERT_ERR(hbg__sim_resolve(s, a, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_mem_unimport(dev, a), HBG_E_INVAL);
  ASSERT_OK(hbg__sim_resolve(s, b, 4093, &p));
  ASSERT(p == buf + 4099);
  ASSERT_OK(hbg_dev_mem_unimport(dev, b));

  /* Filling the import space (no memory behind these host addresses,
   * above any process's mappings: an import touches nothing): the next
   * one fits only in a gap an unimport left, found by the first-fit
   * search. */
  const uint64_t room = (UINT64_C(1) << 48) - (UINT64_C(1) << 40);
  const uint64_t H = UINT64_C(1) << 50;
  hbg_devptr big1 = 0, big2 = 0, small = 0, small2 = 0;
  ASSERT_OK(hbg_dev_mem_import(dev, H, room / 2, &big1));
  ASSERT_OK(hbg_dev_mem_import(dev, H + room / 2, room / 2 - 1024, &big2));
  ASSERT_ERR(hbg_dev_mem_import(dev, H + room, 4096, &small), HBG_E_LIMIT);
  ASSERT_OK(hbg_dev_mem_unimport(dev, big1));
  ASSERT_OK(hbg_dev_mem_import(dev, H + room + 8, 4096, &small));
  ASSERT_UEQ(small, big1 + 8); /* the first gap, the host's low bits */
  ASSERT_OK(hbg__sim_resolve(s, small + 16, 8, &p));
  ASSERT(p == (void *)(uintptr_t)(H + room + 8 + 16));
  ASSERT_OK(hbg_dev_mem_import(dev, H + room + 8192, 4096, &small2));
  ASSERT_UGE(small2, small + 4096 + 256);
  ASSERT_OK(hbg__sim_resolve(s, big2 + room / 2 - 1025, 1, &p));
  ASSERT(p == (void *)(uintptr_t)(H + room / 2 + room / 2 - 1025));
  hbg__sim_info in;
  ASSERT_OK(hbg__sim_get_info(s, &in));
  ASSERT_UEQ(in.imports, 3);
  /* close forgets the rest */
  ASSERT_OK(hbg_dev_host_free(dev, pin));
  ASSERT_OK(hbg_dev_queue_destroy(dev, q));
  hbg_device_close(dev);
  for (int i = 0; i < 8192; i++)
    if (i < 3 || i >= 4099 + 4093) /* outside both imports */
      ASSERT_UEQ(buf[i], 0x11);
  free(buf);
}

/* A backend built before the import ops (its table ends before them):
 * imports are unsupported, named; a backend outside the registry has no
 * host addresses either. */
static void older_backend(void) {
  hbg_dev_ops ops = *hbg_device_find("sim");
  ops.struct_size = (uint32_t)offsetof(hbg_dev_ops, mem_import);
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open_ops(&ops, NULL, &dev));
  hbg_devptr d = 0;
  static float host[16];
  uint64_t h = (uint64_t)(uintptr_t)host;
  ASSERT_ERR(hbg_dev_mem_import(dev, h, sizeof host, &d), HBG_E_UNSUPPORTED);
  ASSERT_ERR(hbg_dev_mem_unimport(dev, 0x1000), HBG_E_UNSUPPORTED);
  hbg_runtime *rt = mk(dev, HBG_POLICY_DEFERRED, HBG_DEPS_EXPLICIT);
  ASSERT_ERR(hbg_buffer_import(rt, h, sizeof host, &d), HBG_E_UNSUPPORTED);
  expect_msg("older backend", "cannot import memory");
  uint64_t b = 0;
  void *p = NULL;
  ASSERT_OK(hbg_buffer_alloc(rt, 64, &b));
  ASSERT_ERR(hbg_buffer_host_ptr(rt, b, 64, &p), HBG_E_UNSUPPORTED);
  expect_msg("older backend", "not addressable from the host");
  hbg_runtime_destroy(rt);
  hbg_device_close(dev);
}

/* A device that hands out an address the runtime already uses (no
 * built-in backend does: each refuses overlaps itself): the runtime's own
 * check refuses it, names both, and gives the import back. */
static hbg_devptr fake_at;
static int fake_unimports;

static int fake_import(hbg_device *dev, uint64_t addr, size_t bytes,
                       hbg_devptr *out) {
  (void)dev, (void)addr, (void)bytes;
  *out = fake_at;
  return 0;
}

static int fake_unimport(hbg_device *dev, hbg_devptr p) {
  (void)dev;
  ASSERT_UEQ(p, fake_at);
  fake_unimports++;
  return 0;
}

static void overlapping_device(void) {
  hbg_dev_ops ops = *hbg_device_find("sim");
  ops.mem_import = fake_import;
  ops.mem_unimport = fake_unimport;
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open_ops(&ops, NULL, &dev));
  hbg_runtime *rt = mk(dev, HBG_POLICY_DEFERRED, HBG_DEPS_EXPLICIT);
  uint64_t b = 0, d = 0;
  static float host[16];
  ASSERT_OK(hbg_buffer_alloc(rt, 1024, &b));
  char at[32];
  snprintf(at, sizeof at, "0x%llx", (unsigned long long)b);
  fake_at = b + 64; /* inside it */
  ASSERT_ERR(hbg_buffer_import(rt, (uint64_t)(uintptr_t)host, 16, &d),
             HBG_E_INVAL);
  expect_msg("device address inside a buffer", "overlaps the live allocated");
  expect_msg("device address inside a buffer", at);
  fake_at = b - 32; /* reaching into it from below */
  ASSERT_ERR(hbg_buffer_import(rt, (uint64_t)(uintptr_t)host, 64, &d),
             HBG_E_INVAL);
  expect_msg("device range reaching a buffer", at);
  ASSERT_EQ(fake_unimports, 2);
  fake_at = b + 1024; /* right after it: fine */
  ASSERT_OK(hbg_buffer_import(rt, (uint64_t)(uintptr_t)host, 64, &d));
  ASSERT_UEQ(d, b + 1024);
  ASSERT_OK(hbg_buffer_free(rt, d));
  ASSERT_EQ(fake_unimports, 3);
  hbg_runtime_destroy(rt);
  hbg_device_close(dev);
}

int main(void) {
  overlapping_device();
  printf("overlapping device: ok\n");
  older_backend();
  printf("older backend: ok\n");
  sim_table();
  printf("sim import table: ok\n");
  refusals();
  printf("refusals: ok\n");
  for (int policy = 0; policy < HBG_POLICY__COUNT; policy++)
    for (int deps = 0; deps < HBG_DEPS__COUNT; deps++) {
      binds_in_place(policy, deps);
      printf("%s/%s: binds in place: ok\n", hbg_policy_name(policy),
             hbg_deps_name(deps));
    }
  return 0;
}
