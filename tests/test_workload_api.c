/* Workload API: defaults, errors, and that verify catches a wrong output
 * (in the activations and in the caches). */
#include <stddef.h>
#include <stdlib.h>

#include <hbg/hbg.h>
#include <hbg/hbg_workload.h>

#include "test.h"
#include "workload/wl.h"

static hbg_runtime *runtime(const char *opts) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_options = opts;
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static void bind_step(hbg_runtime *rt, hbg_workload *w, uint32_t step) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_workload_submit(w, b, step));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
}

static void t_errors(void) {
  hbg_workload_config c;
  hbg_workload_config_init(&c);
  ASSERT_EQ(c.struct_size, sizeof c);
  ASSERT_EQ(c.layers, 0);
  ASSERT_STREQ(c.name, "qwen3-14b");
  hbg_workload_config_init(NULL);
  hbg_runtime *rt = runtime(NULL);
  hbg_workload *w = NULL;
  ASSERT_ERR(hbg_workload_create(NULL, &c, &w), HBG_E_INVAL);
  ASSERT_ERR(hbg_workload_create(rt, NULL, &w), HBG_E_INVAL);
  ASSERT_ERR(hbg_workload_create(rt, &c, NULL), HBG_E_INVAL);
  c.name = "llama";
  ASSERT_ERR(hbg_workload_create(rt, &c, &w), HBG_E_NOTFOUND);
  c.name = NULL;
  ASSERT_ERR(hbg_workload_create(rt, &c, &w), HBG_E_INVAL);
  c.name = "dsv4";
  c.layers = 1u << 30;
  ASSERT_ERR(hbg_workload_create(rt, &c, &w), HBG_E_LIMIT);
  c.layers = 0;
  c.struct_size = 4;
  ASSERT_ERR(hbg_workload_create(rt, &c, &w), HBG_E_INVAL);
  ASSERT(w == NULL);
  hbg_workload_destroy(NULL);
  hbg_workload_info info;
  ASSERT_ERR(hbg_workload_get_info(NULL, &info), HBG_E_INVAL);
  ASSERT_ERR(hbg_workload_submit(NULL, NULL, 0), HBG_E_INVAL);
  ASSERT_ERR(hbg_workload_verify(NULL, 0, NULL), HBG_E_INVAL);
  hbg_runtime_destroy(rt);
}

/* Corrupt one float of the device's activations or caches after a bind:
 * verify reports HBG_E_VERIFY and a non-zero error. */
static void t_detects(const char *name) {
  hbg_runtime *rt = runtime("workers=4");
  hbg_workload_config c;
  hbg_workload_config_init(&c);
  c.name = name;
  c.layers = 6;
  c.seed = 99;
  hbg_workload *w;
  ASSERT_OK(hbg_workload_create(rt, &c, &w));
  hbg_workload_info info;
  ASSERT_OK(hbg_workload_get_info(w, &info));
  ASSERT_EQ(info.struct_size, sizeof info);
  ASSERT(info.node_heap_bytes > 0);
  {
    /* a caller built before node_heap_bytes: nothing written past it */
    size_t old = offsetof(hbg_workload_info, node_heap_bytes);
    unsigned char raw[sizeof info];
    memset(raw, 0xA5, sizeof raw);
    hbg_workload_info *o = (hbg_workload_info *)(void *)raw;
    o->struct_size = (uint32_t)old;
    ASSERT_OK(hbg_workload_get_info(w, o));
    ASSERT_EQ(o->struct_size, old);
    ASSERT_EQ(o->tasks_after, info.tasks_after);
    for (size_t k = old; k < sizeof raw; k++)
      ASSERT_EQ(raw[k], 0xA5);
  }
  ASSERT_EQ(info.tasks_before, 2);
  ASSERT_EQ(info.tasks_after, 3);
  ASSERT(info.device_bytes > 0);
  /* nothing has run: the activations cannot match */
  ASSERT_ERR(hbg_workload_verify(w, 3, NULL), HBG_E_VERIFY);
  double err;
  for (uint32_t step = 3; step < 6; step++) {
    bind_step(rt, w, step);
    ASSERT_OK(hbg_workload_verify(w, step, &err));
    ASSERT(err == 0.0);
  }
  /* verifying another step than the one that ran fails */
  ASSERT_ERR(hbg_workload_verify(w, 4, &err), HBG_E_VERIFY);
  struct {
    int buf;
    uint64_t at;
  } pokes[] = {
      {WL_BUF_ACT, 0},                             /* embedding copy */
      {WL_BUF_ACT, w->buf[WL_BUF_ACT].floats - 1}, /* last probability */
      {WL_BUF_ACT, w->buf[WL_BUF_ACT].floats / 2},
      {WL_BUF_KV, 5 * 16}, /* layer 0 cache row of step 5 */
  };
  for (size_t i = 0; i < sizeof pokes / sizeof pokes[0]; i++) {
    bind_step(rt, w, 5);
    ASSERT_OK(hbg_workload_verify(w, 5, &err));
    uint64_t a = w->buf[pokes[i].buf].dev + pokes[i].at * 4;
    float v;
    ASSERT_OK(hbg_buffer_read(rt, &v, a, 4));
    v += 1.0f;
    ASSERT_OK(hbg_buffer_write(rt, a, &v, 4));
    err = 0;
    ASSERT_ERR(hbg_workload_verify(w, 5, &err), HBG_E_VERIFY);
    ASSERT(err > 0.5);
  }
  /* the cache holds other steps' rows: a later step still verifies */
  bind_step(rt, w, 6);
  ASSERT_OK(hbg_workload_verify(w, 6, &err));
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* Same seed, same outputs on another runtime with other worker counts,
 * waking workers for any ready item (so they run most kernels), each
 * kernel run as 7 lanes (the bits of a 7-thread CTA); another seed, other
 * outputs. */
static void t_seed(void) {
  float out[3][256];
  const char *opts[3] = {"workers=1", "workers=3,lanes=7", "workers=2"};
  uint64_t seeds[3] = {7, 7, 8};
  for (int i = 0; i < 3; i++) {
    if (i == 1)
      setenv("HBG_EXEC_WAKE_MIN", "1", 1);
    else
      unsetenv("HBG_EXEC_WAKE_MIN");
    hbg_runtime *rt = runtime(opts[i]);
    hbg_workload_config c;
    hbg_workload_config_init(&c);
    c.layers = 4;
    c.seed = seeds[i];
    hbg_workload *w;
    ASSERT_OK(hbg_workload_create(rt, &c, &w));
    bind_step(rt, w, 2);
    ASSERT_OK(hbg_workload_verify(w, 2, NULL));
    const hbg__wl_buf *act = &w->buf[WL_BUF_ACT];
    ASSERT_OK(hbg_buffer_read(rt, out[i], act->dev + (act->floats - 256) * 4,
                              sizeof out[i]));
    hbg_workload_destroy(w);
    hbg_runtime_destroy(rt);
  }
  ASSERT(memcmp(out[0], out[1], sizeof out[0]) == 0);
  ASSERT(memcmp(out[0], out[2], sizeof out[0]) != 0);
}

/* def_size pads the Definition: the qwen3 layer's images grow to the
 * asked size, every policy still runs the padded bind bit-exactly, and
 * out-of-range sizes and old struct sizes are handled. */
static void t_def_size(void) {
  static const char *const pol[] = {"deferred", "pinned-eager", "pinned-bulk",
                                    "coalesced"};
  const uint32_t want = 130192; /* the upstream runtime's qwen3 Definition */
  for (size_t i = 0; i < sizeof pol / sizeof pol[0]; i++) {
    hbg_config cfg;
    hbg_config_init(&cfg);
    cfg.device = "sim";
    int p;
    ASSERT_OK(hbg_policy_parse(pol[i], &p));
    cfg.policy = (uint32_t)p;
    hbg_runtime *rt;
    ASSERT_OK(hbg_runtime_create(&cfg, &rt));
    hbg_workload_config c;
    hbg_workload_config_init(&c);
    c.layers = 3;
    c.def_size = want;
    hbg_workload *w;
    ASSERT_OK(hbg_workload_create(rt, &c, &w));
    for (uint32_t step = 1; step < 3; step++) {
      hbg_bind *b;
      ASSERT_OK(hbg_bind_begin(rt, &b));
      ASSERT_OK(hbg_workload_submit(w, b, step));
      ASSERT_OK(hbg_bind_launch(b));
      ASSERT_OK(hbg_bind_wait(b));
      hbg_bind_stats st;
      ASSERT_OK(hbg_bind_stats_get(b, &st));
      hbg_bind_end(b);
      ASSERT_OK(hbg_workload_verify(w, step, NULL));
      if (i < 3) /* each Submission carries the padded Definition */
        ASSERT_EQ(st.def_bytes, 3ull * want);
      else /* resident: uploaded once, in the first bind */
        ASSERT_EQ(st.def_bytes, step == 1 ? want : 0);
    }
    hbg_workload_destroy(w);
    hbg_runtime_destroy(rt);
  }

  hbg_runtime *rt = runtime(NULL);
  hbg_workload_config c;
  hbg_workload_config_init(&c);
  hbg_workload *w = NULL;
  c.def_size = HBG_WORKLOAD_MAX_DEF_SIZE + 1;
  ASSERT_ERR(hbg_workload_create(rt, &c, &w), HBG_E_LIMIT);
  ASSERT(w == NULL);
  /* a caller built before def_size existed: the field is not read */
  c.struct_size = offsetof(hbg_workload_config, def_size);
  c.layers = 1;
  ASSERT_OK(hbg_workload_create(rt, &c, &w));
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_workload_submit(w, b, 0));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_stats st;
  ASSERT_OK(hbg_bind_stats_get(b, &st));
  hbg_bind_end(b);
  ASSERT(st.def_bytes > 0 && st.def_bytes < 100000);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

/* Two workloads on one runtime, natural and padded: the padded one records
 * its own Definitions instead of replaying the natural ones from the
 * runtime's graph cache (def_size is part of the key). */
static void t_def_size_shared_runtime(void) {
  const uint32_t want = 130192;
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.policy = HBG_POLICY_DEFERRED; /* every replay ships its Definition */
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  uint64_t got[2];
  for (int k = 0; k < 2; k++) {
    hbg_workload_config c;
    hbg_workload_config_init(&c);
    c.layers = 2;
    c.def_size = k ? want : 0;
    hbg_workload *w;
    ASSERT_OK(hbg_workload_create(rt, &c, &w));
    hbg_bind *b;
    ASSERT_OK(hbg_bind_begin(rt, &b));
    ASSERT_OK(hbg_workload_submit(w, b, 0));
    ASSERT_OK(hbg_bind_launch(b));
    ASSERT_OK(hbg_bind_wait(b));
    hbg_bind_stats st;
    ASSERT_OK(hbg_bind_stats_get(b, &st));
    hbg_bind_end(b);
    ASSERT_OK(hbg_workload_verify(w, 0, NULL));
    got[k] = st.def_bytes;
    hbg_workload_destroy(w);
  }
  ASSERT(got[0] > 0 && got[0] < 2ull * want);
  ASSERT_EQ(got[1], 2ull * want);
  hbg_runtime_destroy(rt);
}

int main(void) {
  t_errors();
  t_def_size();
  t_def_size_shared_runtime();
  t_detects("qwen3-14b");
  t_detects("dsv4");
  t_seed();
  printf("workload_api: ok\n");
  return 0;
}
