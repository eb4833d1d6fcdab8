/* The sim's device heap: opaque addresses, alignment, first-fit with
 * coalescing, out-of-memory, resolve bounds, double free, and a random
 * alloc/free sequence checked against a model. */
#include <stdint.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "device/sim/sim.h"
#include "test.h"

#define HEAP (1u << 20)

static hbg__sim_info info(hbg__sim *s) {
  hbg__sim_info in;
  ASSERT_OK(hbg__sim_get_info(s, &in));
  return in;
}

static void test_addresses(hbg_device *d, hbg__sim *s) {
  hbg_devptr a, b, c;
  ASSERT_OK(hbg_dev_mem_alloc(d, 1, &a));
  ASSERT_OK(hbg_dev_mem_alloc(d, 300, &b));
  ASSERT_OK(hbg_dev_mem_alloc(d, 256, &c));
  ASSERT(a != 0 && b != 0 && c != 0);
  ASSERT_UEQ(a % 256, 0);
  ASSERT_UEQ(b % 256, 0);
  ASSERT_UEQ(c % 256, 0);
  ASSERT_UEQ(b - a, 256); /* first fit, spans rounded to 256 */
  ASSERT_UEQ(c - b, 512);
  hbg__sim_info in = info(s);
  ASSERT_UEQ(a >> 48, in.tag >> 48);
  /* never a host pointer into the heap */
  void *pa;
  ASSERT_OK(hbg__sim_resolve(s, a, 1, &pa));
  ASSERT((uintptr_t)pa != (uintptr_t)a);

  /* resolve: the requested length bounds an allocation, not its span */
  void *p;
  ASSERT_OK(hbg__sim_resolve(s, b, 300, &p));
  ASSERT_OK(hbg__sim_resolve(s, b + 299, 1, &p));
  ASSERT_OK(hbg__sim_resolve(s, b + 300, 0, &p));
  ASSERT_ERR(hbg__sim_resolve(s, b + 299, 2, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, b + 300, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, b, 301, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, b, UINT64_MAX, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, b + 256, UINT64_MAX - 10, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, a - 1, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, 0, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, (uintptr_t)pa, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, c + 4096, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, UINT64_MAX, 1, &p), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(NULL, a, 1, &p), HBG_E_INVAL);
  ASSERT_ERR(hbg__sim_resolve(s, a, 1, NULL), HBG_E_INVAL);

  /* frees: interior, unknown, double */
  ASSERT_ERR(hbg_dev_mem_free(d, b + 256), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_mem_free(d, 12345), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_mem_free(d, UINT64_MAX), HBG_E_RANGE);
  ASSERT_OK(hbg_dev_mem_free(d, b));
  ASSERT_ERR(hbg_dev_mem_free(d, b), HBG_E_RANGE);
  ASSERT_ERR(hbg__sim_resolve(s, b, 1, &p), HBG_E_RANGE);

  /* first fit reuses the hole; a larger request goes past it */
  hbg_devptr e, f;
  ASSERT_OK(hbg_dev_mem_alloc(d, 600, &e));
  ASSERT_UEQ(e, c + 256);
  ASSERT_OK(hbg_dev_mem_alloc(d, 512, &f));
  ASSERT_UEQ(f, b);
  ASSERT_OK(hbg_dev_mem_free(d, a));
  ASSERT_OK(hbg_dev_mem_free(d, c));
  ASSERT_OK(hbg_dev_mem_free(d, f));
  ASSERT_OK(hbg_dev_mem_free(d, e));
  in = info(s);
  ASSERT_UEQ(in.free_extents, 1);
  ASSERT_UEQ(in.free_bytes, HEAP);
  ASSERT_UEQ(in.live_allocs, 0);
}

static void test_oom(hbg_device *d, hbg__sim *s) {
  hbg_devptr a, b;
  ASSERT_ERR(hbg_dev_mem_alloc(d, HEAP + 1, &a), HBG_E_DEVMEM);
  ASSERT_ERR(hbg_dev_mem_alloc(d, SIZE_MAX, &a), HBG_E_DEVMEM);
  ASSERT_OK(hbg_dev_mem_alloc(d, HEAP, &a));
  ASSERT_ERR(hbg_dev_mem_alloc(d, 1, &b), HBG_E_DEVMEM);
  int64_t code;
  const char *msg;
  ASSERT_OK(hbg_device_native_error(d, &code, &msg));
  ASSERT(strstr(msg, "free") != NULL);
  ASSERT_OK(hbg_dev_mem_free(d, a));
  /* fragmentation: half the heap free in 256-byte holes, no 512 fits */
  enum { N = HEAP / 256 };
  static hbg_devptr v[N];
  for (int i = 0; i < N; i++)
    ASSERT_OK(hbg_dev_mem_alloc(d, 256, &v[i]));
  for (int i = 0; i < N; i += 2)
    ASSERT_OK(hbg_dev_mem_free(d, v[i]));
  ASSERT_UEQ(info(s).free_extents, N / 2);
  ASSERT_ERR(hbg_dev_mem_alloc(d, 257, &b), HBG_E_DEVMEM);
  ASSERT_OK(hbg_dev_mem_alloc(d, 200, &b));
  ASSERT_UEQ(b, v[0]);
  ASSERT_OK(hbg_dev_mem_free(d, b));
  for (int i = 1; i < N; i += 2)
    ASSERT_OK(hbg_dev_mem_free(d, v[i]));
  ASSERT_UEQ(info(s).free_extents, 1);
  ASSERT_OK(hbg_dev_mem_alloc(d, HEAP, &a));
  ASSERT_OK(hbg_dev_mem_free(d, a));
}

/* xorshift: deterministic */
static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void test_random(hbg_device *d, hbg__sim *s) {
  enum { SLOTS = 200, STEPS = 20000 };
  hbg_devptr addr[SLOTS] = {0};
  size_t len[SLOTS] = {0};
  uint64_t used = 0, in_use = 0;
  hbg_dev_stats st0, st;
  ASSERT_OK(hbg_dev_stats_get(d, &st0));
  for (int step = 0; step < STEPS; step++) {
    int i = (int)(rnd() % SLOTS);
    if (addr[i]) {
      ASSERT_OK(hbg_dev_mem_free(d, addr[i]));
      used -= (len[i] + 255) / 256 * 256;
      in_use -= len[i];
      addr[i] = 0;
      continue;
    }
    size_t n = 1 + (size_t)(rnd() % 20000);
    int rc = hbg_dev_mem_alloc(d, n, &addr[i]);
    if (rc == HBG_E_DEVMEM) {
      addr[i] = 0;
      continue;
    }
    ASSERT_OK(rc);
    len[i] = n;
    used += (n + 255) / 256 * 256;
    in_use += n;
    ASSERT_UEQ(addr[i] % 256, 0);
    /* tag the first and last byte; no other live allocation overlaps */
    uint8_t *p;
    ASSERT_OK(hbg__sim_resolve(s, addr[i], n, (void **)&p));
    p[0] = (uint8_t)i;
    p[n - 1] = (uint8_t)i;
    if (step % 97 == 0) {
      for (int j = 0; j < SLOTS; j++) {
        if (!addr[j])
          continue;
        ASSERT_OK(hbg__sim_resolve(s, addr[j], len[j], (void **)&p));
        ASSERT_EQ(p[0], (uint8_t)j);
        ASSERT_EQ(p[len[j] - 1], (uint8_t)j);
        ASSERT_ERR(hbg__sim_resolve(s, addr[j], len[j] + 1, (void **)&p),
                   HBG_E_RANGE);
      }
      hbg__sim_info in = info(s);
      ASSERT_UEQ(in.free_bytes, HEAP - used);
      ASSERT_ULE(in.free_extents, in.live_allocs + 1);
      ASSERT_OK(hbg_dev_stats_get(d, &st));
      ASSERT_UEQ(st.mem_in_use, in_use);
    }
  }
  for (int i = 0; i < SLOTS; i++)
    if (addr[i])
      ASSERT_OK(hbg_dev_mem_free(d, addr[i]));
  hbg__sim_info in = info(s);
  ASSERT_UEQ(in.free_extents, 1);
  ASSERT_UEQ(in.free_bytes, HEAP);
  ASSERT_OK(hbg_dev_stats_get(d, &st));
  ASSERT_UEQ(st.mem_in_use, 0);
  ASSERT_UEQ(st.mem_allocs - st0.mem_allocs, st.mem_frees - st0.mem_frees);
}

int main(void) {
  hbg_device *d;
  ASSERT_OK(hbg_device_open("sim", "mem=1M", &d));
  hbg__sim *s = hbg__sim_from(d);
  ASSERT(s != NULL);
  test_addresses(d, s);
  test_oom(d, s);
  test_random(d, s);

  /* two sims never accept each other's addresses */
  hbg_device *d2;
  ASSERT_OK(hbg_device_open("sim", "mem=1M", &d2));
  hbg_devptr a, b;
  ASSERT_OK(hbg_dev_mem_alloc(d, 64, &a));
  ASSERT_OK(hbg_dev_mem_alloc(d2, 64, &b));
  ASSERT(a != b);
  void *p;
  ASSERT_ERR(hbg__sim_resolve(hbg__sim_from(d2), a, 1, &p), HBG_E_RANGE);
  /* leaked allocations are released by close (LSan checks) */
  hbg_device_close(d2);
  hbg_device_close(d);
  printf("sim_mem: ok\n");
  return 0;
}
