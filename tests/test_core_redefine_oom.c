/* A key recorded again with new content (record=per-bind, coalesced) drops
 * its reference on the old resident Definition, which is then retired.
 * When there is no host memory to note the retirement, the submission is
 * refused with HBG_E_NOMEM and nothing changes: the old resident keeps its
 * reference (it is neither leaked with none nor freed under a bind), and
 * the same submission succeeds once memory is back. The allocation is made
 * to fail by wrapping realloc at link time (-Wl,--wrap=realloc). */
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg.h>

#include "core/core.h"
#include "test.h"

#define DIM 32

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);

static int fail_armed;
static size_t fail_size;
static int fail_fired;

/* Fails the first growth from nothing to fail_size bytes while armed: the
 * runtime's retired list starts that way (16 entries). */
void *__wrap_realloc(void *p, size_t n) {
  if (fail_armed && !p && n == fail_size) {
    fail_armed = 0;
    fail_fired++;
    return NULL;
  }
  return __real_realloc(p, n);
}

static int use_mul;

static int body(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *io = hbg_record_tensors(rec, &nt);
  hbg_tensor args[3] = {io[0], io[1], io[2]};
  hbg_task t = {.kernel = use_mul ? HBG_KERNEL_MUL : HBG_KERNEL_ADD,
                .n_args = 3, .args = args};
  return hbg_record_task(rec, &t, NULL);
}

static hbg_tensor vec(uint64_t addr, uint32_t mode) {
  hbg_tensor t;
  uint32_t dims[1] = {DIM};
  ASSERT_OK(hbg_tensor_contig(&t, addr, 0, HBG_DTYPE_F32, 1, dims, mode));
  return t;
}

static int submit(hbg_bind *b, const uint64_t *io) {
  hbg_tensor bt[3] = {vec(io[0], HBG_ACCESS_IN), vec(io[1], HBG_ACCESS_IN),
                      vec(io[2], HBG_ACCESS_OUT)};
  hbg_graph_submit g = {.key = 42, .n_tensors = 3, .tensors = bt,
                        .record = body};
  return hbg_submit_graph(b, &g, NULL);
}

static void run_bind(hbg_runtime *rt, const uint64_t *io) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(submit(b, io));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  float got[DIM];
  ASSERT_OK(hbg_buffer_read(rt, got, io[2], sizeof got));
  for (int k = 0; k < DIM; k++) {
    float v = use_mul ? (float)k * 3.0f : (float)k + 3.0f;
    if (memcmp(&v, &got[k], sizeof v) != 0)
      T_FAIL("element %d: %g, want %g", k, (double)got[k], (double)v);
  }
}

static uint32_t refs_of(hbg_runtime *rt, const hbg__def *d) {
  hbg__resident *r = hbg__map_get(&rt->resident, d->hash, d->size, 0);
  return r ? r->refs : 0;
}

int main(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = HBG_POLICY_COALESCED;
  cfg.record = HBG_RECORD_PER_BIND;
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  uint64_t io[3];
  float x[DIM], three[DIM];
  for (int k = 0; k < DIM; k++) {
    x[k] = (float)k;
    three[k] = 3.0f;
  }
  for (int i = 0; i < 3; i++)
    ASSERT_OK(hbg_buffer_alloc(rt, sizeof x, &io[i]));
  ASSERT_OK(hbg_buffer_write(rt, io[0], x, sizeof x));
  ASSERT_OK(hbg_buffer_write(rt, io[1], three, sizeof three));

  run_bind(rt, io); /* records the ADD body; resident */
  hbg__graph *gr = hbg__map_get(&rt->graphs, rt->lru_head->full_key, 0, 0);
  ASSERT(gr && gr->lru->resident);
  const hbg__def *old = gr->def;
  const uint64_t old_hash = old->hash, old_size = old->size;
  ASSERT_UEQ(refs_of(rt, old), 1);
  ASSERT(rt->retired == NULL);

  /* The MUL body: the old resident must be retired, and the list that
   * notes it cannot grow. */
  use_mul = 1;
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  fail_size = 16 * sizeof(hbg__retired);
  fail_armed = 1;
  ASSERT_ERR(submit(b, io), HBG_E_NOMEM);
  fail_armed = 0;
  ASSERT_EQ(fail_fired, 1);
  ASSERT(strstr(hbg_last_error(), "retiring") != NULL);
  ASSERT(gr->def == old && gr->def->hash == old_hash); /* unchanged */
  ASSERT(gr->lru->resident);
  ASSERT_UEQ(refs_of(rt, old), 1);
  /* the same submission, memory back: the old copy is retired */
  ASSERT_OK(submit(b, io));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT(gr->def->hash != old_hash);
  ASSERT(hbg__map_get(&rt->resident, old_hash, old_size, 0) == NULL);
  ASSERT_UEQ(refs_of(rt, gr->def), 1);
  run_bind(rt, io);

  hbg_dev_stats st;
  st.struct_size = sizeof st;
  hbg_device *dev = hbg_runtime_device(rt);
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  ASSERT_UEQ(st.free_failures, 0);
  hbg_runtime_destroy(rt);
  printf("redefine out of memory: refused, nothing changed\n");
  return 0;
}
