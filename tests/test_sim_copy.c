/* Sync copies on the sim: data round trips at odd sizes and offsets through
 * both paths, the exact cost of each path (pinned: one direct command;
 * pageable: bounce chunks, one handshake each), pinned memory and
 * registration, range errors, caps and counters. */
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "device/sim/sim.h"
#include "test.h"

static hbg_dev_stats stats(hbg_device *d) {
  hbg_dev_stats st;
  ASSERT_OK(hbg_dev_stats_get(d, &st));
  ASSERT_UEQ(st.struct_size, sizeof st);
  return st;
}

static void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)((i * 2654435761u + seed) >> 7);
}

static void test_caps(hbg_device *d) {
  hbg_dev_caps c;
  ASSERT_OK(hbg_dev_caps_get(d, &c));
  ASSERT_UEQ(c.struct_size, sizeof c);
  ASSERT_UEQ(c.stage_align, 64);
  ASSERT_UEQ(c.piece_pad_align, 1);
  ASSERT_UEQ(c.piece_pad_extra, 0);
  ASSERT_UEQ(c.dev_align, 256);
  ASSERT_UEQ(c.flags, HBG_DEV_CAP_EXECUTES | HBG_DEV_CAP_HOST_REGISTER |
                          HBG_DEV_CAP_ASYNC_NEEDS_PINNED);
  ASSERT_UEQ(c.mem_bytes, 64u << 20);
}

/* 130 KiB with 64 KiB chunks: pageable = 3 chunks / 3 handshakes, pinned =
 * one direct command. */
static void test_path_counts(hbg_device *d) {
  const size_t n = 130 << 10;
  hbg_devptr dst;
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &dst));
  uint8_t *pageable = malloc(n), *pinned, *back = malloc(n);
  ASSERT(pageable && back);
  ASSERT_OK(hbg_dev_host_alloc(d, n, (void **)&pinned));
  ASSERT_UEQ((uintptr_t)pinned % 4096, 0);
  fill(pageable, n, 1);
  fill(pinned, n, 2);

  hbg_dev_stats a = stats(d);
  ASSERT_OK(hbg_dev_copy_h2d(d, dst, pageable, n));
  hbg_dev_stats b = stats(d);
  ASSERT_UEQ(b.bounce_chunks - a.bounce_chunks, 3);
  ASSERT_UEQ(b.handshakes - a.handshakes, 3);
  ASSERT_UEQ(b.pinned_direct - a.pinned_direct, 0);
  ASSERT_UEQ(b.h2d_copies - a.h2d_copies, 1);
  ASSERT_UEQ(b.h2d_bytes - a.h2d_bytes, n);
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dst, n));
  ASSERT(memcmp(back, pageable, n) == 0);
  hbg_dev_stats c = stats(d);
  ASSERT_UEQ(c.bounce_chunks - b.bounce_chunks, 3);
  ASSERT_UEQ(c.handshakes - b.handshakes, 3);
  ASSERT_UEQ(c.d2h_copies - b.d2h_copies, 1);
  ASSERT_UEQ(c.d2h_bytes - b.d2h_bytes, n);

  ASSERT_OK(hbg_dev_copy_h2d(d, dst, pinned, n));
  hbg_dev_stats e = stats(d);
  ASSERT_UEQ(e.bounce_chunks - c.bounce_chunks, 0);
  ASSERT_UEQ(e.handshakes - c.handshakes, 1);
  ASSERT_UEQ(e.pinned_direct - c.pinned_direct, 1);
  ASSERT_UEQ(e.h2d_copies - c.h2d_copies, 1);
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dst, n));
  ASSERT(memcmp(back, pinned, n) == 0);
  /* D2H into pinned memory is direct too */
  memset(pinned, 0, n);
  hbg_dev_stats f = stats(d);
  ASSERT_OK(hbg_dev_copy_d2h(d, pinned, dst, n));
  hbg_dev_stats g = stats(d);
  ASSERT_UEQ(g.handshakes - f.handshakes, 1);
  ASSERT_UEQ(g.pinned_direct - f.pinned_direct, 1);
  ASSERT_UEQ(g.bounce_chunks - f.bounce_chunks, 0);
  ASSERT(memcmp(back, pinned, n) == 0);

  /* inside the pinned block is direct; one byte past it (still mapped: the
   * block is page-rounded) is pageable */
  ASSERT_OK(hbg_dev_copy_h2d(d, dst, pinned + 1, n - 1));
  hbg_dev_stats h = stats(d);
  ASSERT_UEQ(h.pinned_direct - g.pinned_direct, 1);
  ASSERT_OK(hbg_dev_copy_h2d(d, dst, pinned + 1, n));
  hbg_dev_stats i1 = stats(d);
  ASSERT_UEQ(i1.pinned_direct - h.pinned_direct, 0);
  ASSERT_UEQ(i1.bounce_chunks - h.bounce_chunks, 3);

  /* exact chunk multiple: 128 KiB = 2 chunks */
  ASSERT_OK(hbg_dev_copy_h2d(d, dst, pageable, 128 << 10));
  hbg_dev_stats j = stats(d);
  ASSERT_UEQ(j.bounce_chunks - i1.bounce_chunks, 2);
  ASSERT_UEQ(j.handshakes - i1.handshakes, 2);

  /* 0-byte copies are no-ops */
  ASSERT_OK(hbg_dev_copy_h2d(d, dst, pageable, 0));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dst, 0));
  hbg_dev_stats k = stats(d);
  ASSERT_UEQ(k.handshakes, j.handshakes);

  ASSERT_OK(hbg_dev_host_free(d, pinned));
  ASSERT_ERR(hbg_dev_host_free(d, pinned), HBG_E_INVAL);
  ASSERT_OK(hbg_dev_mem_free(d, dst));
  free(pageable);
  free(back);
}

static void test_round_trips(hbg_device *d) {
  /* sizes around the 4 KiB chunk of the second device and odd offsets */
  static const size_t sizes[] = {1,    3,    63,   64,    255,   4095,
                                 4096, 4097, 8191, 12289, 65537, 200003};
  const size_t cap = 200003 + 512;
  hbg_devptr buf;
  ASSERT_OK(hbg_dev_mem_alloc(d, cap, &buf));
  uint8_t *src = malloc(cap + 16), *dst = malloc(cap + 16), *pin;
  ASSERT(src && dst);
  ASSERT_OK(hbg_dev_host_alloc(d, cap + 16, (void **)&pin));
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    for (size_t off = 0; off < 300; off += 149) {
      size_t n = sizes[si];
      for (int mode = 0; mode < 4; mode++) {
        /* mode bit 0: pinned source, bit 1: pinned destination */
        uint8_t *s = (mode & 1) ? pin + 3 : src + 5;
        uint8_t *o = (mode & 2) ? pin + 7 : dst + 1;
        fill(s, n, (uint32_t)(si * 31 + off + (size_t)mode));
        uint8_t *want = malloc(n);
        ASSERT(want);
        memcpy(want, s, n);
        ASSERT_OK(hbg_dev_copy_h2d(d, buf + off, s, n));
        memset(o, 0xee, n);
        ASSERT_OK(hbg_dev_copy_d2h(d, o, buf + off, n));
        if (memcmp(o, want, n) != 0)
          T_FAIL("round trip mismatch: size %zu off %zu mode %d", n, off,
                 mode);
        free(want);
      }
    }
  }
  /* neighbours are untouched by an interior write */
  uint8_t z[64] = {0}, one[8], back[64];
  memset(one, 0xab, sizeof one);
  ASSERT_OK(hbg_dev_copy_h2d(d, buf, z, sizeof z));
  ASSERT_OK(hbg_dev_copy_h2d(d, buf + 13, one, sizeof one));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, buf, sizeof back));
  for (size_t i = 0; i < sizeof back; i++)
    ASSERT_EQ(back[i], (i >= 13 && i < 21) ? 0xab : 0);
  ASSERT_OK(hbg_dev_host_free(d, pin));
  ASSERT_OK(hbg_dev_mem_free(d, buf));
  free(src);
  free(dst);
}

static void test_range_errors(hbg_device *d) {
  hbg_devptr a;
  ASSERT_OK(hbg_dev_mem_alloc(d, 1000, &a));
  uint8_t buf[2048] = {0};
  hbg_dev_stats s0 = stats(d);
  ASSERT_ERR(hbg_dev_copy_h2d(d, a, buf, 1001), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d(d, a + 999, buf, 2), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d(d, a - 256, buf, 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d(d, 0, buf, 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d(d, (uintptr_t)buf, buf, 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d(d, 0xdeadbeefull, buf, 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d(d, a + 1024, buf, 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_d2h(d, buf, a, 1001), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_d2h(d, buf, a + 512, 1000), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_d2h(d, buf, UINT64_MAX - 3, 8), HBG_E_RANGE);
  hbg_dev_stats s1 = stats(d);
  ASSERT_UEQ(s1.h2d_copies, s0.h2d_copies);
  ASSERT_UEQ(s1.handshakes, s0.handshakes);
  int64_t code;
  const char *msg;
  ASSERT_OK(hbg_device_native_error(d, &code, &msg));
  ASSERT(strstr(msg, "d2h") != NULL);
  ASSERT_OK(hbg_dev_copy_h2d(d, a, buf, 1000));
  ASSERT_OK(hbg_dev_mem_free(d, a));
  ASSERT_ERR(hbg_dev_copy_h2d(d, a, buf, 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_d2h(d, buf, a, 1), HBG_E_RANGE);
}

static void test_host_memory(hbg_device *d) {
  hbg__sim *s = hbg__sim_from(d);
  hbg__sim_info in0, in;
  ASSERT_OK(hbg__sim_get_info(s, &in0));
  hbg_dev_stats a = stats(d);
  void *p, *q;
  ASSERT_OK(hbg_dev_host_alloc(d, 100, &p));
  ASSERT_OK(hbg_dev_host_alloc(d, 5000, &q));
  ASSERT_UEQ((uintptr_t)p % 4096, 0);
  ASSERT_UEQ((uintptr_t)q % 4096, 0);
  memset(p, 1, 100);
  memset(q, 2, 5000);
  hbg_dev_stats b = stats(d);
  ASSERT_UEQ(b.host_allocs - a.host_allocs, 2);
  ASSERT_UEQ(b.host_in_use - a.host_in_use, 5100);
  ASSERT_OK(hbg__sim_get_info(s, &in));
  ASSERT_UEQ(in.registrations, in0.registrations + 2);
  ASSERT_UEQ(in.locked + in.mlock_failed - in0.locked - in0.mlock_failed, 2);

  /* register/unregister caller memory; misuse is INVAL */
  size_t n = 3 << 16;
  uint8_t *m = malloc(n);
  ASSERT(m);
  ASSERT_ERR(hbg_dev_host_register(d, p, 10), HBG_E_INVAL); /* overlaps */
  ASSERT_OK(hbg_dev_host_register(d, m, n));
  ASSERT_ERR(hbg_dev_host_register(d, m + 10, 10), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_register(d, m - 10, 11), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_free(d, m), HBG_E_INVAL);     /* not host_alloc */
  ASSERT_ERR(hbg_dev_host_unregister(d, p), HBG_E_INVAL); /* host_alloc */
  ASSERT_ERR(hbg_dev_host_unregister(d, m + 1), HBG_E_INVAL);
  ASSERT_ERR(hbg_dev_host_free(d, (uint8_t *)p + 1), HBG_E_INVAL);

  /* registered memory takes the direct path */
  hbg_devptr dev;
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &dev));
  fill(m, n, 9);
  hbg_dev_stats c = stats(d);
  ASSERT_OK(hbg_dev_copy_h2d(d, dev, m, n));
  hbg_dev_stats e = stats(d);
  ASSERT_UEQ(e.pinned_direct - c.pinned_direct, 1);
  ASSERT_UEQ(e.bounce_chunks - c.bounce_chunks, 0);
  ASSERT_OK(hbg_dev_host_unregister(d, m));
  ASSERT_ERR(hbg_dev_host_unregister(d, m), HBG_E_INVAL);
  /* and after unregistering, the staged path (chunk = 4 KiB here) */
  ASSERT_OK(hbg_dev_copy_h2d(d, dev, m, n));
  hbg_dev_stats f = stats(d);
  ASSERT_UEQ(f.pinned_direct - e.pinned_direct, 0);
  ASSERT_UEQ(f.bounce_chunks - e.bounce_chunks, n / 4096);
  ASSERT_UEQ(f.handshakes - e.handshakes, n / 4096);
  uint8_t *back = malloc(n);
  ASSERT(back);
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dev, n));
  ASSERT(memcmp(back, m, n) == 0);
  free(back);
  ASSERT_OK(hbg_dev_mem_free(d, dev));

  /* adjacent registrations are fine */
  ASSERT_OK(hbg_dev_host_register(d, m, 100));
  ASSERT_OK(hbg_dev_host_register(d, m + 100, 100));
  ASSERT_OK(hbg_dev_host_unregister(d, m + 100));
  ASSERT_OK(hbg_dev_host_unregister(d, m));
  free(m);

  ASSERT_OK(hbg_dev_host_free(d, p));
  ASSERT_OK(hbg_dev_host_free(d, q));
  hbg_dev_stats g = stats(d);
  ASSERT_UEQ(g.host_frees - a.host_frees, 2);
  ASSERT_UEQ(g.host_in_use, a.host_in_use);
  ASSERT_OK(hbg__sim_get_info(s, &in));
  ASSERT_UEQ(in.registrations, in0.registrations);

  /* past RLIMIT_MEMLOCK mlock fails; the memory is still pinned for us */
  void *big;
  ASSERT_OK(hbg_dev_host_alloc(d, 64u << 20, &big));
  ASSERT_OK(hbg__sim_get_info(s, &in));
  ASSERT_UEQ(in.registrations, in0.registrations + 1);
  hbg_devptr bd;
  ASSERT_OK(hbg_dev_mem_alloc(d, 1 << 20, &bd));
  hbg_dev_stats h = stats(d);
  ASSERT_OK(hbg_dev_copy_h2d(d, bd, big, 1 << 20));
  hbg_dev_stats i = stats(d);
  ASSERT_UEQ(i.pinned_direct - h.pinned_direct, 1);
  ASSERT_OK(hbg_dev_mem_free(d, bd));
  ASSERT_OK(hbg_dev_host_free(d, big));
}

/* Waits for synchronous copies: with spin=0 none polls (each sleeps on the
 * condition variable unless the copy is already done, which under a slow
 * sanitizer can be every time); a wait ends at most once, polling or
 * asleep. How many waits end while polling depends on the scheduler:
 * tests/sim_waitbench.c measures it. Data is checked either way. */
static void wait_modes(const char *opts, uint64_t spin_us) {
  hbg_device *d;
  ASSERT_OK(hbg_device_open("sim", opts, &d));
  hbg__sim *s = hbg__sim_from(d);
  ASSERT(s);
  const size_t n = 4096;
  uint8_t *pinned, *back = malloc(n);
  ASSERT(back);
  ASSERT_OK(hbg_dev_host_alloc(d, n, (void **)&pinned));
  hbg_devptr dst;
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &dst));
  const uint64_t copies = 200;
  for (uint32_t i = 0; i < copies; i++) {
    fill(pinned, n, i);
    ASSERT_OK(hbg_dev_copy_h2d(d, dst, pinned, n));
  }
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dst, n));
  ASSERT(memcmp(back, pinned, n) == 0);
  hbg__sim_info in;
  ASSERT_OK(hbg__sim_get_info(s, &in));
  ASSERT_UEQ(in.spin_us, spin_us);
  /* a wait that finds its command done when it takes the lock neither
   * polled nor slept */
  ASSERT(in.spin_hits + in.sleeps <= copies + 1);
  if (spin_us == 0)
    ASSERT_UEQ(in.spin_hits, 0);
  ASSERT_OK(hbg_dev_mem_free(d, dst));
  ASSERT_OK(hbg_dev_host_free(d, pinned));
  free(back);
  hbg_device_close(d);
}

/* Closing a device whose engine is inside its polling window (100 ms
 * here) shuts it down cleanly (a race here is TSan's to find). How long
 * the close takes is a measurement, not a test: tests/sim_waitbench.c. */
static void close_while_polling(void) {
  hbg_device *d;
  ASSERT_OK(hbg_device_open("sim", "spin=100000", &d));
  uint8_t *pinned;
  hbg_devptr dst;
  ASSERT_OK(hbg_dev_host_alloc(d, 4096, (void **)&pinned));
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &dst));
  uint8_t back[4096];
  fill(pinned, 4096, 7);
  ASSERT_OK(hbg_dev_copy_h2d(d, dst, pinned, 4096));
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dst, 4096)); /* then the engine polls */
  ASSERT(memcmp(back, pinned, 4096) == 0);
  hbg_device_close(d);
}

int main(void) {
  hbg_device *d;
  close_while_polling();
  wait_modes("spin=0", 0);
  wait_modes("", 200);
  wait_modes("spin=5000", 5000);
  ASSERT_OK(hbg_device_open("sim", "mem=64M", &d));
  test_caps(d);
  test_path_counts(d);
  test_round_trips(d);
  test_range_errors(d);
  hbg_device_close(d);

  ASSERT_OK(hbg_device_open("sim", "mem=8M,chunk=4K", &d));
  test_round_trips(d);
  test_host_memory(d);
  /* leaked pinned memory, registrations and device memory: close frees */
  void *p;
  hbg_devptr dp;
  static char reg[4096];
  ASSERT_OK(hbg_dev_host_alloc(d, 12345, &p));
  ASSERT_OK(hbg_dev_host_register(d, reg, sizeof reg));
  ASSERT_OK(hbg_dev_mem_alloc(d, 12345, &dp));
  hbg_device_close(d);
  printf("sim_copy: ok\n");
  return 0;
}
