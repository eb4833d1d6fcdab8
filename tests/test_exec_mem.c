/* The executor apart from the sim: created with a memory interface of the
 * test's own (a host arena with two "allocations"), it validates and runs a
 * window through that interface alone, and refuses what it cannot map. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <stdlib.h>

#include "exec/exec.h"
/* Only the window builder of the fixture is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_exec_fixture.h"

#define BASE 0x7000000000ull
#define ARENA (1u << 16)
#define WIN_AT 0u       /* the window: [BASE, BASE + 32K) */
#define DATA_AT 32768u  /* the tensors: [BASE + 32K, BASE + 64K) */

typedef struct arena {
  uint8_t *mem;
  unsigned calls;
} arena;

/* Two allocations: the window half and the data half. */
static int arena_resolve(void *ctx, hbg_devptr base, uint64_t off,
                         uint64_t len, void **out) {
  arena *a = ctx;
  a->calls++;
  if (base < BASE || base - BASE >= ARENA)
    return HBG_E_RANGE;
  uint64_t start = base - BASE < DATA_AT ? WIN_AT : DATA_AT;
  uint64_t end = start == WIN_AT ? DATA_AT : ARENA;
  uint64_t at = base - BASE;
  if (off > end - at || len > end - at - off)
    return HBG_E_RANGE;
  *out = a->mem + at + off;
  return 0;
}

static uint64_t finish(wb *w, arena *a) {
  wb_finish(w);
  ASSERT(w->len <= DATA_AT);
  memcpy(a->mem + WIN_AT, w->buf, w->len);
  free(w->buf);
  return w->len;
}

static hbg_tensor vec16(uint64_t addr, uint32_t mode) {
  hbg_tensor t;
  uint32_t dims[1] = {16};
  ASSERT_OK(hbg_tensor_contig(&t, addr, 0, HBG_DTYPE_F32, 1, dims, mode));
  return t;
}

int main(void) {
  arena a = {.mem = aligned_alloc(64, ARENA)};
  ASSERT(a.mem);
  memset(a.mem, 0, ARENA);
  hbg__exec *e;
  hbg__exec_mem none = {.resolve = NULL, .ctx = &a};
  ASSERT_ERR(hbg__exec_create(NULL, 1, 1, &e), HBG_E_INVAL);
  ASSERT_ERR(hbg__exec_create(&none, 1, 1, &e), HBG_E_INVAL);
  hbg__exec_mem mem = {.resolve = arena_resolve, .ctx = &a};
  /* HBG_EXEC_WAKE_MIN: a bad value is an error naming the variable, here
   * and through the sim's open; empty means the default */
  static const char *bad[] = {"abc", "0", "-3", "4294967296", "12Q"};
  for (size_t i = 0; i < HBG__ARRAY_LEN(bad); i++) {
    ASSERT_OK(setenv("HBG_EXEC_WAKE_MIN", bad[i], 1));
    ASSERT_ERR(hbg__exec_create(&mem, 1, 1, &e), HBG_E_INVAL);
    ASSERT(strstr(hbg_last_error(), "HBG_EXEC_WAKE_MIN") != NULL);
    ASSERT(strstr(hbg_last_error(), bad[i]) != NULL);
    hbg_device *d = NULL;
    ASSERT_ERR(hbg_device_open("sim", NULL, &d), HBG_E_INVAL);
    ASSERT(d == NULL);
    ASSERT(strstr(hbg_device_open_error(), "HBG_EXEC_WAKE_MIN") != NULL);
  }
  static const char *good[] = {"", "1", "4K"};
  for (size_t i = 0; i < HBG__ARRAY_LEN(good); i++) {
    ASSERT_OK(setenv("HBG_EXEC_WAKE_MIN", good[i], 1));
    ASSERT_OK(hbg__exec_create(&mem, 1, 1, &e));
    hbg__exec_destroy(e);
  }
  ASSERT_OK(unsetenv("HBG_EXEC_WAKE_MIN"));
  ASSERT_OK(hbg__exec_create(&mem, 2, 1, &e));

  /* fill x = 3; y = x (after it) */
  const uint64_t x = BASE + DATA_AT, y = x + 64;
  wb w;
  wb_init(&w);
  hbg_tensor fx = vec16(x, HBG_ACCESS_OUT);
  uint64_t three = hbg_scalar_f32(3.0f);
  wb_task(&w, HBG_KERNEL_FILL, &fx, 1, &three, 1, NULL, 0);
  hbg_tensor cp[2] = {vec16(x, HBG_ACCESS_IN), vec16(y, HBG_ACCESS_OUT)};
  uint32_t dep = 0;
  wb_task(&w, HBG_KERNEL_COPY, cp, 2, NULL, 0, &dep, 1);
  uint64_t len = finish(&w, &a);
  hbg_dev_launch_desc l = {.struct_size = sizeof l, .window = BASE + WIN_AT,
                           .window_bytes = len, .status = 0};
  hbg_dev_status st;
  ASSERT_OK(hbg__exec_run(e, &l, &st));
  ASSERT_EQ(st.tasks_done, 2);
  float got[16];
  memcpy(got, a.mem + DATA_AT + 64, sizeof got);
  for (int i = 0; i < 16; i++)
    ASSERT(got[i] == 3.0f);
  ASSERT_GT(a.calls, 0);

  /* A tensor that runs past its allocation: refused through the interface,
   * before any kernel runs. */
  memset(a.mem + DATA_AT, 0, 128);
  wb_init(&w);
  wb_task(&w, HBG_KERNEL_FILL, &fx, 1, &three, 1, NULL, 0);
  hbg_tensor past = vec16(BASE + ARENA - 32, HBG_ACCESS_OUT);
  wb_task(&w, HBG_KERNEL_FILL, &past, 1, &three, 1, NULL, 0);
  l.window_bytes = finish(&w, &a);
  ASSERT_ERR(hbg__exec_run(e, &l, &st), HBG_E_RANGE);
  ASSERT_EQ(st.task, 1);
  ASSERT_EQ(st.tasks_done, 0);
  memcpy(got, a.mem + DATA_AT, sizeof got);
  ASSERT(got[0] == 0.0f);
  /* A window the interface cannot map at all. */
  l.window = BASE + ARENA;
  ASSERT_ERR(hbg__exec_run(e, &l, &st), HBG_E_RANGE);
  hbg__exec_destroy(e);
  free(a.mem);
  return 0;
}
