/* Ending a bind that was never launched while async window chunks may
 * still read its pinned arena: when the device cannot confirm that they
 * are done (the drain fails), nothing under them is freed or replaced;
 * the next hbg_bind_begin drains again before it reclaims (and fails if it
 * still cannot), and teardown drains too. A backend made of the sim's ops
 * whose queue sync and event wait fail on demand stands in for a device
 * that cannot say. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include <string.h>

#include "chain_fixture.h"
#include "core/core.h"
#include "test.h"

#define L 40u
#define N 64u

static int failing;
static hbg_dev_ops ops;
static int (*sim_sync)(hbg_device *, hbg_dev_queue *);
static int (*sim_wait)(hbg_device *, hbg_dev_event *);

static int bad_sync(hbg_device *d, hbg_dev_queue *q) {
  return failing ? HBG_E_DEVICE : sim_sync(d, q);
}
static int bad_wait(hbg_device *d, hbg_dev_event *e) {
  return failing ? HBG_E_DEVICE : sim_wait(d, e);
}

int main(void) {
  ops = *hbg_device_find("sim");
  sim_sync = ops.queue_sync;
  sim_wait = ops.event_wait;
  ops.queue_sync = bad_sync;
  ops.event_wait = bad_wait;
  hbg_device *dev = NULL;
  ASSERT_OK(hbg_device_open_ops(&ops, NULL, &dev));
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device_handle = dev;
  cfg.policy = HBG_POLICY_COALESCED;
  cfg.arena_bytes = 4096;         /* the window outgrows it */
  cfg.coalesce_chunk_bytes = 256; /* chunks go up while it fits */
  cfg.pipeline_depth = 1;
  hbg_runtime *rt = NULL;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  chain c;
  ASSERT_OK(chain_create(&c, rt, L, N));

  hbg__slot *s = &rt->slots[0];
  hbg_bind *b = NULL;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit(&c, b, 1));
  ASSERT(b->win_flushed > 0);                  /* chunks in flight */
  ASSERT_UGE(s->arena.high_water, s->arena.cap + 1); /* it wants to grow */
  const uint8_t *base = s->arena.base;
  const uint64_t cap = s->arena.cap;
  failing = 1;
  hbg_bind_end(b);
  ASSERT(s->undrained);
  ASSERT(s->arena.base == base); /* neither freed nor replaced */
  ASSERT_UEQ(s->arena.cap, cap);
  /* still unconfirmed: the next bind cannot start */
  ASSERT_ERR(hbg_bind_begin(rt, &b), HBG_E_DEVICE);
  ASSERT(s->arena.base == base);
  failing = 0;
  ASSERT_OK(hbg_bind_begin(rt, &b)); /* drains, then reclaims and grows */
  ASSERT(!s->undrained);
  ASSERT_UGE(s->arena.cap, 2 * cap);
  hbg_bind_end(b);
  ASSERT_OK(chain_bind(&c, 2, NULL)); /* verified bit for bit */

  /* ended undrained, then torn down: teardown drains it first */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(chain_submit(&c, b, 3));
  failing = 1;
  hbg_bind_end(b);
  ASSERT(s->undrained);
  failing = 0;
  chain_destroy(&c);
  hbg_runtime_destroy(rt);
  hbg_dev_stats st;
  st.struct_size = sizeof st;
  ASSERT_OK(hbg_dev_stats_get(dev, &st));
  ASSERT_UEQ(st.mem_in_use, 0);
  ASSERT_UEQ(st.host_in_use, 0);
  hbg_device_close(dev);
  printf("end after a failed drain: nothing reclaimed under the copies\n");
  return 0;
}
