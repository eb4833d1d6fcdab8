/* A user kernel failing in one lane of many ends its call for every lane
 * of the worker alike: the lanes vote at the phase's barrier, so none
 * goes on into the next phase's barrier without the others (which would
 * put a CTA's barriers out of step, or leave a warp waiting). The bind
 * fails with HBG_E_KERNEL at the kernel's entry, and the next bind on the
 * same runtime runs right. The user kernel uk_fail (tests/uk/uk_test.c)
 * fails in a chosen lane and phase of its four: every lane of the worker,
 * phases 0 to 3, on the stand-in's grids (test_cuda_lane_fail_mock: a
 * worker of 4 lanes; _warp32: warps of 32) and with worker=cta (the
 * block's lanes, one worker a CTA); on a GPU, warps of 32 and worker=cta.
 * Then a failing call in a graph: at its entry and node. */
#include <hbg/hbg.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h"
#include "test.h"
#include "uk/uk_test.h"

#define N 256u
#define PHASES UK_FAIL_PHASES

typedef struct world {
  hbg_runtime *rt;
  uint64_t x, y;
  float in[N];
} world;

static void open_world(world *w, const char *opts) {
  w->rt = uk_cuda_runtime(opts, HBG_POLICY_COALESCED);
  ASSERT_OK(uk_register(w->rt, UK_FAIL, "uk_fail", PHASES));
  for (uint32_t i = 0; i < N; i++)
    w->in[i] = (float)i * 0.5f;
  ASSERT_OK(hbg_buffer_alloc(w->rt, N * 4, &w->x));
  ASSERT_OK(hbg_buffer_alloc(w->rt, N * 4, &w->y));
  ASSERT_OK(hbg_buffer_write(w->rt, w->x, w->in, N * 4));
}

static void close_world(world *w) {
  ASSERT_OK(hbg_buffer_free(w->rt, w->x));
  ASSERT_OK(hbg_buffer_free(w->rt, w->y));
  hbg_runtime_destroy(w->rt);
}

static void args(world *w, hbg_tensor a[2]) {
  uint32_t dims[1] = {N};
  hbg_tensor_contig(&a[0], w->x, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
  hbg_tensor_contig(&a[1], w->y, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
}

/* One bind: a COPY, then uk_fail(lane, phase) on x and y. @return the
 * wait's result, with the error's location. */
static int run_task(world *w, uint64_t lane, uint64_t phase,
                    uint32_t *entry, uint32_t *node) {
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(w->rt, &b));
  hbg_tensor a[2];
  args(w, a);
  hbg_scalar s[2] = {{.value = lane, .kind = HBG_SCALAR_STATIC},
                     {.value = phase, .kind = HBG_SCALAR_STATIC}};
  hbg_task copy = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a};
  hbg_task_id id = 0;
  ASSERT_OK(hbg_submit_task(b, &copy, &id));
  hbg_task t = {.kernel = UK_FAIL, .n_args = 2, .args = a, .n_scalars = 2,
                .scalars = s, .n_deps = 1, .deps = &id};
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  int rc = hbg_bind_wait(b);
  *entry = *node = 0;
  if (rc)
    ASSERT_OK(hbg_bind_error_location(b, entry, node));
  hbg_bind_end(b);
  return rc;
}

/* y as the last phase left it: x + PHASES - 1. */
static void check_out(world *w) {
  float out[N];
  ASSERT_OK(hbg_buffer_read(w->rt, out, w->y, N * 4));
  for (uint32_t i = 0; i < N; i++)
    if (out[i] != w->in[i] + (float)(PHASES - 1))
      T_FAIL("element %u is %g, want %g", i, (double)out[i],
             (double)(w->in[i] + (float)(PHASES - 1)));
}

/* Every lane of a worker of `lanes`, failing in every phase in turn. */
static void sweep(const char *opts, uint32_t lanes) {
  world w;
  open_world(&w, opts);
  uint32_t entry, node;
  unsigned runs = 0;
  for (uint32_t lane = 0; lane < lanes; lane += lanes > 8 ? 7 : 1)
    for (uint32_t ph = 0; ph < PHASES; ph++) {
      int rc = run_task(&w, lane, ph, &entry, &node);
      if (rc != HBG_E_KERNEL || entry != 1 || node != HBG_TASK_NONE)
        T_FAIL("%s: lane %u failing in phase %u: %s at entry %u node %u, "
               "want HBG_E_KERNEL at entry 1: %s",
               opts, lane, ph, hbg_err_name(rc), entry, node,
               hbg_last_error());
      ASSERT_OK(run_task(&w, 1u << 20, 0, &entry, &node)); /* no failure */
      check_out(&w);
      runs++;
    }
  printf("  %-24s %u failing binds (lanes of %u, phases 0-%u), each "
         "followed by one that runs right\n",
         opts, runs, lanes, PHASES - 1);
  close_world(&w);
}

/* In a graph: the call's entry and node. */
static int rec_fail(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt = 0;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  if (!bt || nt != 2)
    return HBG_E_INVAL;
  hbg_tensor a[2] = {bt[0], bt[1]};
  hbg_scalar s[2] = {{.value = 0, .kind = HBG_SCALAR_BOUNDARY, .index = 0},
                     {.value = 0, .kind = HBG_SCALAR_BOUNDARY, .index = 1}};
  hbg_task copy = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a};
  hbg_task_id id = 0;
  int rc = hbg_record_task(rec, &copy, &id);
  if (rc)
    return rc;
  hbg_task t = {.kernel = UK_FAIL, .n_args = 2, .args = a, .n_scalars = 2,
                .scalars = s, .n_deps = 1, .deps = &id};
  return hbg_record_task(rec, &t, NULL);
}

static void graph_fail(const char *opts) {
  world w;
  open_world(&w, opts);
  for (int round = 0; round < 2; round++) {
    hbg_bind *b = NULL;
    ASSERT_OK(hbg_bind_begin(w.rt, &b));
    hbg_tensor a[2];
    args(&w, a);
    uint64_t sc[2] = {round == 0 ? 2u : 1u << 20, 2};
    hbg_graph_submit g = {.key = 0x554b4641494cull, .n_tensors = 2,
                          .tensors = a, .n_scalars = 2, .scalars = sc,
                          .record = rec_fail};
    ASSERT_OK(hbg_submit_graph(b, &g, NULL));
    ASSERT_OK(hbg_bind_launch(b));
    int rc = hbg_bind_wait(b);
    if (round == 0) {
      uint32_t entry = 0, node = 0;
      ASSERT_ERR(rc, HBG_E_KERNEL);
      ASSERT_OK(hbg_bind_error_location(b, &entry, &node));
      ASSERT_UEQ(entry, 0);
      ASSERT_UEQ(node, 1);
      printf("  %-24s in a graph: %s\n", opts, hbg_last_error());
    } else {
      ASSERT_OK(rc);
      check_out(&w);
    }
    hbg_bind_end(b);
  }
  close_world(&w);
}

static uint32_t env_u32(const char *name, uint32_t def) {
  const char *v = getenv(name);
  return v && *v ? (uint32_t)atoi(v) : def;
}

int main(void) {
  skip_without_gpu();
  void *mock = cuda_standin();
  /* a worker's lanes: the stand-in's warp (its blocks up to 4 by default,
   * warps of 32 in the warp32 runs), a GPU's warp of 32; a CTA's */
  uint32_t block = mock ? env_u32("HBG_MOCK_CUDA_LANES", 4) : 256;
  uint32_t warp = mock ? env_u32("HBG_MOCK_CUDA_WARP", 32) : 32;
  if (warp > block)
    warp = block;
  sweep("worker=warp", warp);
  sweep("worker=cta", block);
  graph_fail("worker=warp");
  printf("cuda lane fail: ok\n");
  return 0;
}
