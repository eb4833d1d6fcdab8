/* hbg_config.record: once keeps a key's host Definition across binds;
 * per-bind records every key again in each bind (its first submission
 * there), while the device side is kept: under coalesced an unchanged
 * Definition stays resident (no Definition bytes uploaded again), a
 * changed one is uploaded and the old copy retired; results stay right
 * under every policy. */
#include <string.h>

#include <hbg/hbg.h>

#include "test.h"

#define DIM 32
#define LAYERS 3

static int recorded;
static int use_mul; /* the recording: out = a + b, or a * b */

static int body(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *io = hbg_record_tensors(rec, &nt);
  hbg_tensor args[3] = {io[0], io[1], io[2]};
  hbg_task t = {.kernel = use_mul ? HBG_KERNEL_MUL : HBG_KERNEL_ADD,
                .n_args = 3, .args = args};
  recorded++;
  return hbg_record_task(rec, &t, NULL);
}

static hbg_tensor vec(uint64_t addr, uint32_t mode) {
  hbg_tensor t;
  uint32_t dims[1] = {DIM};
  ASSERT_OK(hbg_tensor_contig(&t, addr, 0, HBG_DTYPE_F32, 1, dims, mode));
  return t;
}

/* One bind: LAYERS chained graph submissions act[i+1] = act[i] op two;
 * checks the result and returns the bind's stats. */
static void bind_once(hbg_runtime *rt, const uint64_t *act, uint64_t two,
                      hbg_bind_stats *st) {
  static float x[DIM], got[DIM];
  for (int k = 0; k < DIM; k++)
    x[k] = (float)k;
  ASSERT_OK(hbg_buffer_write(rt, act[0], x, sizeof x));
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task_id prev = HBG_TASK_NONE;
  for (int i = 0; i < LAYERS; i++) {
    hbg_tensor bt[3] = {vec(act[i], HBG_ACCESS_IN), vec(two, HBG_ACCESS_IN),
                        vec(act[i + 1], HBG_ACCESS_OUT)};
    hbg_graph_submit g = {.key = 42, .n_tensors = 3, .tensors = bt,
                          .n_deps = i ? 1 : 0, .deps = &prev,
                          .record = body};
    ASSERT_OK(hbg_submit_graph(b, &g, &prev));
  }
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  st->struct_size = sizeof *st;
  ASSERT_OK(hbg_bind_stats_get(b, st));
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_read(rt, got, act[LAYERS], sizeof got));
  for (int k = 0; k < DIM; k++) {
    float v = (float)k;
    for (int i = 0; i < LAYERS; i++)
      v = use_mul ? v * 2.0f : v + 2.0f;
    if (memcmp(&v, &got[k], sizeof v) != 0)
      T_FAIL("element %d: %g, want %g", k, (double)got[k], (double)v);
  }
}

static void run(int policy, int record) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)policy;
  cfg.record = (uint32_t)record;
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  uint64_t act[LAYERS + 1], two;
  static float t2[DIM];
  for (int k = 0; k < DIM; k++)
    t2[k] = 2.0f;
  for (int i = 0; i <= LAYERS; i++)
    ASSERT_OK(hbg_buffer_alloc(rt, sizeof t2, &act[i]));
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof t2, &two));
  ASSERT_OK(hbg_buffer_write(rt, two, t2, sizeof t2));

  recorded = 0;
  use_mul = 0;
  hbg_bind_stats st;
  bind_once(rt, act, two, &st);
  ASSERT_EQ(recorded, 1);
  ASSERT_UEQ(st.n_recorded, 1u);
  for (int r = 0; r < 3; r++)
    bind_once(rt, act, two, &st);
  int per_bind = record == HBG_RECORD_PER_BIND;
  /* per-bind: once in each bind, whatever the number of submissions */
  ASSERT_EQ(recorded, per_bind ? 4 : 1);
  ASSERT_UEQ(st.n_recorded, per_bind ? 1u : 0u);
  if (policy == HBG_POLICY_COALESCED)
    ASSERT_UEQ(st.def_bytes, 0u); /* the same content stays resident */

  /* A recording whose content changed: only per-bind sees it. */
  use_mul = per_bind;
  bind_once(rt, act, two, &st);
  if (per_bind && policy == HBG_POLICY_COALESCED)
    ASSERT(st.def_bytes > 0); /* the new Definition goes up */
  bind_once(rt, act, two, &st);
  if (policy == HBG_POLICY_COALESCED)
    ASSERT_UEQ(st.def_bytes, 0u);
  hbg_runtime_destroy(rt);
}

int main(void) {
  for (int p = 0; p < HBG_POLICY__COUNT; p++)
    for (int r = 0; r < HBG_RECORD__COUNT; r++)
      run(p, r);
  return 0;
}
