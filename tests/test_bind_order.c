/* Binds of one runtime run on the device in launch order, whatever the
 * pipeline depth. Bind k computes P[(k+1) % 2] = P[k % 2] + 24 through a
 * recorded graph (ADD into an inner tensor, COPY out), so bind k+1 reads
 * what bind k wrote. Bind 1 is held on the device (sim: a user kernel that
 * waits for the test; cuda stand-in: hbgmock_gate) while bind 2 is
 * launched: bind 2 must not complete before bind 1 is let go, and must then
 * read bind 1's output. Every policy; on the sim, and on the cuda stand-in
 * when HBG_CUDA_LIB names it (test_bind_order_mock). Also: a backend
 * without queue_wait_event falls back to a wait on the host, the wait
 * failing latches the bind with nothing launched, and three binds in
 * flight (depth 3) are ordered by one wait each. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "device/device_internal.h"
#include "gate_fixture.h"
#include "pingpong_fixture.h"
#include "test.h"


static int done_now(hbg_bind *b) {
  return hbg_dev_event_query(b->rt->dev, b->slot->done) == 0;
}

static hbg_runtime *mk(const char *device, const char *opts,
                       hbg_device *handle, int policy, uint32_t depth) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = device;
  cfg.device_options = opts;
  cfg.device_handle = handle;
  cfg.policy = (uint32_t)policy;
  cfg.pipeline_depth = depth;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

/* Bind 1 held, bind 2 launched after it: bind 2 stays pending until the
 * gate opens, then reads bind 1's output. */
static void held_pair(hbg_runtime *rt, int sim, const char *what) {
  pp w;
  pp_create(&w, rt, sim);
  /* a bind that records the graph first, so the held pair replays it */
  pp_wait(pp_launch(&w, 0, 0));
  gate_close();
  hbg_bind *b1 = pp_launch(&w, 1, 1);
  hbg_bind *b2 = pp_launch(&w, 2, 0);
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < HELD_MS)
    if (done_now(b2))
      T_FAIL("%s: bind 2 completed while bind 1, launched before it, was "
             "held on the device",
             what);
  if (sim) {
    pthread_mutex_lock(&gate_mu);
    int entered = gate_entered;
    pthread_mutex_unlock(&gate_mu);
    ASSERT(entered); /* bind 1 really was running, held */
  }
  ASSERT(!done_now(b1));
  gate_open();
  pp_wait(b1);
  pp_wait(b2);
  pp_check(&w, 3);
  pp_destroy(&w);
}

static void sim_held_pairs(void) {
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_runtime *rt = mk("sim", "workers=2", NULL, p, 2);
    ASSERT_OK(gate_register(hbg_runtime_device(rt)));
    held_pair(rt, 1, hbg_policy_name(p));
    hbg_runtime_destroy(rt);
  }
  printf("sim: bind 2 waited for held bind 1 under every policy\n");
}

/* Depth 3: binds 2 and 3 launched while 1 is held; each waits only for
 * its predecessor, so 3 is ordered after 1 through 2. */
static void sim_depth3(void) {
  hbg_runtime *rt = mk("sim", "workers=2", NULL, HBG_POLICY_COALESCED, 3);
  ASSERT_OK(gate_register(hbg_runtime_device(rt)));
  pp w;
  pp_create(&w, rt, 1);
  gate_close();
  hbg_bind *b[3];
  for (uint32_t k = 0; k < 3; k++)
    b[k] = pp_launch(&w, k, k == 0);
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < HELD_MS / 2)
    ASSERT(!done_now(b[1]) && !done_now(b[2]));
  gate_open();
  for (uint32_t k = 0; k < 3; k++)
    pp_wait(b[k]);
  pp_check(&w, 3);
  /* and many pipelined binds keep the chain exact */
  for (uint32_t k = 3; k < 60; k += 3) {
    for (uint32_t j = 0; j < 3; j++)
      b[j] = pp_launch(&w, k + j, 0);
    for (uint32_t j = 0; j < 3; j++)
      pp_wait(b[j]);
  }
  pp_check(&w, 60);
  pp_destroy(&w);
  hbg_runtime_destroy(rt);
  printf("sim: depth 3 ordered\n");
}

/* A sim whose queue_wait_event is not there (as for a backend built
 * before the op: the handle's resolved pointer is NULL): the core waits
 * for the previous bind on the host, so bind 2's launch returns only once
 * bind 1 has completed (the gate is opened by another thread). */
static void sim_host_wait_fallback(void) {
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open("sim", "workers=2", &dev));
  dev->queue_wait_event = NULL;
  ASSERT_ERR(hbg_dev_queue_wait_event(dev, (hbg_dev_queue *)1,
                                      (hbg_dev_event *)1),
             HBG_E_UNSUPPORTED);
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_runtime *rt = mk(NULL, NULL, dev, p, 2);
    ASSERT_OK(gate_register(dev));
    pp w;
    pp_create(&w, rt, 1);
    pp_wait(pp_launch(&w, 0, 0));
    gate_close();
    hbg_bind *b1 = pp_launch(&w, 1, 1);
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, gate_open_later, NULL), 0);
    uint64_t t0 = now_ms();
    hbg_bind *b2 = pp_launch(&w, 2, 0);
    ASSERT(done_now(b1)); /* the launch waited for it */
    ASSERT_UGE(now_ms() - t0, HELD_MS - 50);
    pthread_join(th, NULL);
    pp_wait(b1);
    pp_wait(b2);
    pp_check(&w, 3);
    pp_destroy(&w);
    hbg_runtime_destroy(rt);
    ASSERT_OK(hbg_sim_unregister_kernel(dev, K_GATE));
  }
  hbg_device_close(dev);
  printf("sim without queue_wait_event: ordered by a host wait\n");
}

/* The wait failing (injected) latches bind 2 before its launch: nothing
 * of it runs, and the runtime goes on. */
static void wait_failure_latches(void) {
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_device *dev = NULL;
    ASSERT_OK(hbg_device_open("fault", "inner=sim;workers=2", &dev));
    hbg_runtime *rt = mk(NULL, NULL, dev, p, 2);
    ASSERT_OK(gate_register(hbg_fault_inner(dev)));
    pp w;
    pp_create(&w, rt, 1);
    pp_wait(pp_launch(&w, 0, 0));
    gate_close();
    hbg_bind *b1 = pp_launch(&w, 1, 1);
    uint64_t launches = hbg_fault_calls(dev, HBG_DEV_OP_LAUNCH);
    ASSERT_OK(hbg_fault_arm(dev, HBG_DEV_OP_QUEUE_WAIT_EVENT, 1, 0));
    hbg_bind *b2 = NULL;
    ASSERT_OK(hbg_bind_begin(rt, &b2));
    uint32_t dims[1] = {N};
    hbg_tensor bt[3];
    hbg_tensor_contig(&bt[0], w.p[0], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
    hbg_tensor_contig(&bt[1], w.c24, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
    hbg_tensor_contig(&bt[2], w.p[1], 0, HBG_DTYPE_F32, 1, dims,
                      HBG_ACCESS_OUT);
    hbg_graph_submit g = {.key = 0x50494e47ull, .n_tensors = 3,
                          .tensors = bt, .record = pp_record, .user = &w};
    ASSERT_OK(hbg_submit_graph(b2, &g, NULL));
    ASSERT_ERR(hbg_bind_launch(b2), HBG_E_INJECTED);
    ASSERT(strstr(hbg_last_error(), "queue_wait_event") != NULL);
    ASSERT_EQ(hbg_bind_fatal(b2), HBG_E_INJECTED);
    ASSERT_UEQ(hbg_fault_calls(dev, HBG_DEV_OP_LAUNCH), launches);
    ASSERT_ERR(hbg_bind_launch(b2), HBG_E_FATAL);
    hbg_bind_end(b2);
    gate_open();
    pp_wait(b1);
    pp_check(&w, 2); /* bind 2 never ran */
    /* the runtime goes on, ordered again */
    hbg_bind *b3 = pp_launch(&w, 2, 0);
    hbg_bind *b4 = pp_launch(&w, 3, 0);
    pp_wait(b3);
    pp_wait(b4);
    pp_check(&w, 4);
    pp_destroy(&w);
    hbg_runtime_destroy(rt);
    hbg_device_close(dev);
  }
  printf("a failed wait latches its bind, nothing launched\n");
}

/* The cuda stand-in (HBG_CUDA_LIB): the same held pair with the stand-in's
 * kernel gate, exec=device, every policy. */
static void cuda_held_pairs(void) {
  const char *lib = getenv("HBG_CUDA_LIB");
  if (!lib || !*lib) {
    printf("cuda stand-in part not run: HBG_CUDA_LIB unset (run as "
           "test_bind_order_mock)\n");
    return;
  }
  gate_mock_load(lib);
  for (int p = 0; p < HBG_POLICY__COUNT; p++) {
    hbg_runtime *rt = mk("cuda", "exec=device", NULL, p, 2);
    held_pair(rt, 0, hbg_policy_name(p));
    hbg_runtime_destroy(rt);
  }
  mock_gate = NULL;
  printf("cuda stand-in: bind 2 waited for held bind 1 under every "
         "policy\n");
}

int main(void) {
  sim_held_pairs();
  sim_depth3();
  sim_host_wait_fallback();
  wait_failure_latches();
  cuda_held_pairs();
  printf("bind order: ok\n");
  return 0;
}
