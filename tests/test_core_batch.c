/* hbg_submit_graph_n: n replays of one key in one call, same results as n
 * single submissions, argument errors, and a failing replay in the middle. */
#include <hbg/hbg.h>

#include "graph_fixture.h"
#include "test.h"

#define N 4
#define DIM 64

static int recorded;

static int body(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *io = hbg_record_tensors(rec, &nt); /* a, b, out */
  hbg_tensor args[3] = {io[0], io[1], io[2]};
  hbg_task t = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = args};
  recorded++;
  return hbg_record_task(rec, &t, NULL);
}

static void tensor(hbg_tensor *t, uint64_t addr, uint32_t dim, uint32_t mode) {
  uint32_t dims[1] = {dim};
  ASSERT_OK(hbg_tensor_contig(t, addr, 0, HBG_DTYPE_F32, 1, dims, mode));
}

/* HBG_GRAPH_N_CHAIN: layer i reads layer i - 1's output; without the
 * chained dependencies the device may run layers out of order. */
#define CHAIN 24
static void chain(hbg_runtime *rt) {
  static float h[DIM], one[DIM], got[DIM];
  uint64_t act[CHAIN + 1], ones;
  hbg_tensor bt[CHAIN * 3];
  for (int k = 0; k < DIM; k++)
    h[k] = (float)k, one[k] = 1.0f;
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof one, &ones));
  ASSERT_OK(hbg_buffer_write(rt, ones, one, sizeof one));
  for (int i = 0; i <= CHAIN; i++)
    ASSERT_OK(hbg_buffer_alloc(rt, sizeof h, &act[i]));
  ASSERT_OK(hbg_buffer_write(rt, act[0], h, sizeof h));
  for (int i = 0; i < CHAIN; i++) {
    tensor(&bt[3 * i], act[i], DIM, HBG_ACCESS_IN);
    tensor(&bt[3 * i + 1], ones, DIM, HBG_ACCESS_IN);
    tensor(&bt[3 * i + 2], act[i + 1], DIM, HBG_ACCESS_OUT);
  }
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_graph_submit g = {.key = 8, .n_tensors = 3, .tensors = bt,
                        .record = add_add_body};
  hbg_task_id ids[CHAIN];
  ASSERT_OK(hbg_submit_graph_n(b, &g, CHAIN, HBG_GRAPH_N_CHAIN, ids));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_read(rt, got, act[CHAIN], sizeof got));
  for (int k = 0; k < DIM; k++)
    ASSERT_EQ((int)got[k], k + 2 * CHAIN);
}

int main(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_options = NULL;
  for (int pol = 0; pol < HBG_POLICY__COUNT; pol++) {
    cfg.policy = (uint32_t)pol;
    hbg_runtime *rt;
    ASSERT_OK(hbg_runtime_create(&cfg, &rt));
    uint64_t a[N], bb[N], o[N];
    float ha[DIM], hb[DIM], got[DIM];
    hbg_tensor bt[N * 3];
    for (int i = 0; i < N; i++) {
      for (int k = 0; k < DIM; k++) {
        ha[k] = (float)(k + i);
        hb[k] = (float)(10 * i);
      }
      ASSERT_OK(hbg_buffer_alloc(rt, sizeof ha, &a[i]));
      ASSERT_OK(hbg_buffer_alloc(rt, sizeof hb, &bb[i]));
      ASSERT_OK(hbg_buffer_alloc(rt, sizeof got, &o[i]));
      ASSERT_OK(hbg_buffer_write(rt, a[i], ha, sizeof ha));
      ASSERT_OK(hbg_buffer_write(rt, bb[i], hb, sizeof hb));
      tensor(&bt[3 * i], a[i], DIM, HBG_ACCESS_IN);
      tensor(&bt[3 * i + 1], bb[i], DIM, HBG_ACCESS_IN);
      tensor(&bt[3 * i + 2], o[i], DIM, HBG_ACCESS_OUT);
    }
    recorded = 0;
    hbg_bind *b;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    hbg_graph_submit g = {.key = 7, .n_tensors = 3, .tensors = bt,
                          .record = body};
    hbg_task_id ids[N] = {0};
    ASSERT_ERR(hbg_submit_graph_n(b, &g, 0, 0, ids), HBG_E_INVAL);
    ASSERT_ERR(hbg_submit_graph_n(b, NULL, N, 0, ids), HBG_E_INVAL);
    ASSERT_ERR(hbg_submit_graph_n(NULL, &g, N, 0, ids), HBG_E_INVAL);
    hbg_graph_submit bad = g;
    bad.tensors = NULL;
    ASSERT_ERR(hbg_submit_graph_n(b, &bad, N, 0, ids), HBG_E_INVAL);
    ASSERT_ERR(hbg_submit_graph_n(b, &g, N, 2, ids), HBG_E_INVAL);
    ASSERT_OK(hbg_submit_graph_n(b, &g, N, 0, ids));
    ASSERT_EQ(recorded, 1);
    for (int i = 1; i < N; i++)
      ASSERT_GT(ids[i], ids[i - 1]);
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_stats st;
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    ASSERT_EQ(st.n_graphs, N);
    hbg_bind_end(b);
    for (int i = 0; i < N; i++) {
      ASSERT_OK(hbg_buffer_read(rt, got, o[i], sizeof got));
      for (int k = 0; k < DIM; k++)
        ASSERT_EQ((int)got[k], k + i + 10 * i);
    }

    /* Replay 2 breaks the recorded signature: replays 0 and 1 stay
     * submitted, the ids are not written. */
    tensor(&bt[3 * 2], a[2], DIM / 2, HBG_ACCESS_IN);
    ASSERT_OK(hbg_bind_begin(rt, &b));
    hbg_task_id keep[N] = {99, 99, 99, 99};
    ASSERT_ERR(hbg_submit_graph_n(b, &g, N, 0, keep), HBG_E_SIGNATURE);
    for (int i = 0; i < N; i++)
      ASSERT_EQ(keep[i], 99);
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    ASSERT_EQ(st.n_graphs, 2);
    hbg_bind_end(b);
    chain(rt);
    hbg_runtime_destroy(rt);
  }
  return 0;
}
