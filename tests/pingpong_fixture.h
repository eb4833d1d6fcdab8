/* The ping-pong workload of the launch-order tests: bind k computes
 * P[(k+1) % 2] = P[k % 2] + 24 through a recorded graph (ADD into an inner
 * tensor, COPY out), so that bind k+1 reads what bind k wrote; optionally
 * behind the sim gate task of gate_fixture.h. */
#ifndef HBG_TESTS_PINGPONG_FIXTURE_H
#define HBG_TESTS_PINGPONG_FIXTURE_H

#include <hbg/hbg.h>

#include <string.h>

#include "gate_fixture.h"
#include "test.h"

#define N 64u

typedef struct pp {
  hbg_runtime *rt;
  int sim; /* the gate is a task (sim) or the stand-in's */
  uint64_t p[2], c24, dummy;
  float host[2][N];
} pp;

static inline int pp_record(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  if (!bt || nt != 3)
    return HBG_E_INVAL;
  uint32_t dims[1] = {N};
  hbg_tensor t;
  hbg_tensor_contig(&t, 0, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_tensor a0[3] = {bt[0], bt[1], t};
  hbg_task add = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = a0};
  int rc = hbg_record_task(rec, &add, NULL);
  if (rc)
    return rc;
  hbg_tensor a1[2] = {a0[2], bt[2]};
  a1[0].mode = HBG_ACCESS_IN;
  hbg_task copy = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a1};
  return hbg_record_task(rec, &copy, NULL);
}

static inline void pp_create(pp *w, hbg_runtime *rt, int sim) {
  memset(w, 0, sizeof *w);
  w->rt = rt;
  w->sim = sim;
  float c[N];
  for (uint32_t i = 0; i < N; i++) {
    w->host[0][i] = (float)i * 0.5f;
    w->host[1][i] = -7.0f; /* what bind 2 reads if bind 1 has not run */
    c[i] = 24.0f;
  }
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &w->p[0]));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &w->p[1]));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &w->c24));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &w->dummy));
  ASSERT_OK(hbg_buffer_write(rt, w->p[0], w->host[0], N * 4));
  ASSERT_OK(hbg_buffer_write(rt, w->p[1], w->host[1], N * 4));
  ASSERT_OK(hbg_buffer_write(rt, w->c24, c, N * 4));
}

/* Add P[(k+1) % 2] = P[k % 2] + 24 to b, after entry *dep if dep. */
static inline void pp_add(pp *w, hbg_bind *b, uint32_t k,
                          const hbg_task_id *dep, hbg_task_id *out) {
  uint32_t dims[1] = {N};
  hbg_tensor bt[3];
  hbg_tensor_contig(&bt[0], w->p[k % 2], 0, HBG_DTYPE_F32, 1, dims,
                    HBG_ACCESS_IN);
  hbg_tensor_contig(&bt[1], w->c24, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&bt[2], w->p[(k + 1) % 2], 0, HBG_DTYPE_F32, 1, dims,
                    HBG_ACCESS_OUT);
  hbg_graph_submit g = {.key = 0x50494e47ull, .n_tensors = 3, .tensors = bt,
                        .n_deps = dep ? 1 : 0, .deps = dep,
                        .record = pp_record, .user = w};
  ASSERT_OK(hbg_submit_graph(b, &g, out));
}

/* Bind k, orchestrated and not launched: P[(k+1) % 2] = P[k % 2] + 24,
 * behind the gate task if gated. */
static inline hbg_bind *pp_submit(pp *w, uint32_t k, int gated) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(w->rt, &b));
  hbg_task_id gate_id = 0;
  if (gated && w->sim) {
    uint32_t dims[1] = {N};
    hbg_tensor d;
    hbg_tensor_contig(&d, w->dummy, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
    hbg_task g = {.kernel = K_GATE, .n_args = 1, .args = &d};
    ASSERT_OK(hbg_submit_task(b, &g, &gate_id));
  }
  pp_add(w, b, k, gated && w->sim ? &gate_id : NULL, NULL);
  return b;
}

/* Bind k, launched on the runtime's own queue. */
static inline hbg_bind *pp_launch(pp *w, uint32_t k, int gated) {
  hbg_bind *b = pp_submit(w, k, gated);
  ASSERT_OK(hbg_bind_launch(b));
  return b;
}

static inline void pp_wait(hbg_bind *b) {
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
}

/* A runtime of the given policy on dev (not owned). */
static inline hbg_runtime *pp_runtime(hbg_device *dev, int policy) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device_handle = dev;
  cfg.policy = (uint32_t)policy;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

/* Binds first .. first + n - 1, each launched on the caller's stream and
 * waited for. */
static inline void pp_run_on(pp *w, void *stream, uint32_t first,
                             uint32_t n) {
  for (uint32_t k = first; k < first + n; k++) {
    hbg_bind *b = pp_submit(w, k, 0);
    ASSERT_OK(hbg_bind_launch_on(b, stream));
    pp_wait(b);
  }
}

/* After `binds` binds from the start: P[binds % 2] = P0 + 24 * binds. */
static inline void pp_check(pp *w, uint32_t binds) {
  float got[N], ref[N];
  memcpy(ref, w->host[0], sizeof ref);
  for (uint32_t k = 0; k < binds; k++)
    for (uint32_t i = 0; i < N; i++)
      ref[i] = ref[i] + 24.0f;
  ASSERT_OK(hbg_buffer_read(w->rt, got, w->p[binds % 2], N * 4));
  for (uint32_t i = 0; i < N; i++)
    if (got[i] != ref[i])
      T_FAIL("after %u binds element %u is %g, want %g (a bind read its "
             "input before the previous bind wrote it)",
             binds, i, (double)got[i], (double)ref[i]);
}

static inline void pp_destroy(pp *w) {
  for (int i = 0; i < 2; i++)
    ASSERT_OK(hbg_buffer_free(w->rt, w->p[i]));
  ASSERT_OK(hbg_buffer_free(w->rt, w->c24));
  ASSERT_OK(hbg_buffer_free(w->rt, w->dummy));
}

#endif
