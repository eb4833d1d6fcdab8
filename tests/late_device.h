/* A device that starts work late: launch (and an event recorded after it)
 * is held back until someone waits on that event, queries it or syncs the
 * queue, then forwarded to an inner sim. The device reads a bind's images
 * only after the host has moved on to later binds, as a busy GPU does, so
 * memory freed while a bind is in flight is caught: the launch finds it
 * gone or rewritten. Options go to the inner sim. One late device at a
 * time per process. */
#ifndef HBG_TESTS_LATE_DEVICE_H
#define HBG_TESTS_LATE_DEVICE_H

#include <string.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#define LATE_MAX 64

typedef struct late_held {
  hbg_dev_queue *q;
  hbg_dev_launch_desc l;
  hbg_dev_event *ev; /* recorded after the launch, NULL if none yet */
} late_held;

typedef struct late_dev {
  hbg_device *inner;
  late_held held[LATE_MAX];
  uint32_t n_held;
  uint64_t held_total; /* launches that were held back */
} late_dev;

static late_dev late_state;

#define LATE_INNER (late_state.inner)

/* Start the held launch at index i (and its event record). */
static int late_start(uint32_t i) {
  late_held h = late_state.held[i];
  late_state.held[i] = late_state.held[--late_state.n_held];
  int rc = hbg_dev_launch(LATE_INNER, h.q, &h.l);
  if (rc == 0 && h.ev)
    rc = hbg_dev_event_record(LATE_INNER, h.ev, h.q);
  return rc;
}

static int late_flush_queue(hbg_dev_queue *q) {
  for (uint32_t i = 0; i < late_state.n_held;)
    if (late_state.held[i].q == q) {
      int rc = late_start(i);
      if (rc < 0)
        return rc;
    } else {
      i++;
    }
  return 0;
}

static int late_flush_event(hbg_dev_event *ev) {
  for (uint32_t i = 0; i < late_state.n_held; i++)
    if (late_state.held[i].ev == ev)
      return late_start(i);
  return 0;
}

static int late_open(hbg_device *dev, const char *options) {
  (void)dev;
  memset(&late_state, 0, sizeof late_state);
  return hbg_device_open("sim", options, &late_state.inner);
}
static void late_close(hbg_device *dev) {
  (void)dev;
  hbg_device_close(LATE_INNER);
  late_state.inner = NULL;
}
static int late_caps(hbg_device *d, hbg_dev_caps *c) {
  (void)d;
  return hbg_dev_caps_get(LATE_INNER, c);
}
static int late_stats(hbg_device *d, hbg_dev_stats *s) {
  (void)d;
  return hbg_dev_stats_get(LATE_INNER, s);
}
static int late_host_alloc(hbg_device *d, size_t n, void **out) {
  (void)d;
  return hbg_dev_host_alloc(LATE_INNER, n, out);
}
static int late_host_free(hbg_device *d, void *p) {
  (void)d;
  return hbg_dev_host_free(LATE_INNER, p);
}
static int late_mem_alloc(hbg_device *d, size_t n, hbg_devptr *out) {
  (void)d;
  return hbg_dev_mem_alloc(LATE_INNER, n, out);
}
static int late_mem_free(hbg_device *d, hbg_devptr p) {
  (void)d;
  return hbg_dev_mem_free(LATE_INNER, p);
}
static int late_h2d(hbg_device *d, hbg_devptr dst, const void *src,
                    size_t n) {
  (void)d;
  return hbg_dev_copy_h2d(LATE_INNER, dst, src, n);
}
static int late_d2h(hbg_device *d, void *dst, hbg_devptr src, size_t n) {
  (void)d;
  return hbg_dev_copy_d2h(LATE_INNER, dst, src, n);
}
static int late_queue_create(hbg_device *d, hbg_dev_queue **out) {
  (void)d;
  return hbg_dev_queue_create(LATE_INNER, out);
}
static int late_queue_destroy(hbg_device *d, hbg_dev_queue *q) {
  (void)d;
  late_flush_queue(q);
  return hbg_dev_queue_destroy(LATE_INNER, q);
}
static int late_h2d_async(hbg_device *d, hbg_dev_queue *q, hbg_devptr dst,
                          const void *src, size_t n) {
  (void)d;
  int rc = late_flush_queue(q);
  return rc < 0 ? rc : hbg_dev_copy_h2d_async(LATE_INNER, q, dst, src, n);
}
static int late_queue_sync(hbg_device *d, hbg_dev_queue *q) {
  (void)d;
  int rc = late_flush_queue(q);
  return rc < 0 ? rc : hbg_dev_queue_sync(LATE_INNER, q);
}
static int late_event_create(hbg_device *d, hbg_dev_event **out) {
  (void)d;
  return hbg_dev_event_create(LATE_INNER, out);
}
static int late_event_destroy(hbg_device *d, hbg_dev_event *ev) {
  (void)d;
  late_flush_event(ev);
  return hbg_dev_event_destroy(LATE_INNER, ev);
}
static int late_event_record(hbg_device *d, hbg_dev_event *ev,
                             hbg_dev_queue *q) {
  (void)d;
  for (uint32_t i = 0; i < late_state.n_held; i++)
    if (late_state.held[i].q == q && !late_state.held[i].ev) {
      late_state.held[i].ev = ev;
      return 0;
    }
  return hbg_dev_event_record(LATE_INNER, ev, q);
}
static int late_event_query(hbg_device *d, hbg_dev_event *ev) {
  (void)d;
  int rc = late_flush_event(ev);
  return rc < 0 ? rc : hbg_dev_event_query(LATE_INNER, ev);
}
static int late_event_wait(hbg_device *d, hbg_dev_event *ev) {
  (void)d;
  int rc = late_flush_event(ev);
  return rc < 0 ? rc : hbg_dev_event_wait(LATE_INNER, ev);
}
static int late_launch(hbg_device *d, hbg_dev_queue *q,
                       const hbg_dev_launch_desc *l) {
  (void)d;
  if (late_state.n_held == LATE_MAX)
    return HBG_E_LIMIT;
  late_state.held[late_state.n_held++] = (late_held){.q = q, .l = *l};
  late_state.held_total++;
  return 0;
}

static const hbg_dev_ops late_ops = {
    .struct_size = sizeof(hbg_dev_ops),
    .abi_version = HBG_DEV_ABI_VERSION,
    .name = "late",
    .summary = "test: sim whose launches start when waited on",
    .open = late_open,
    .close = late_close,
    .get_caps = late_caps,
    .get_stats = late_stats,
    .host_alloc = late_host_alloc,
    .host_free = late_host_free,
    .mem_alloc = late_mem_alloc,
    .mem_free = late_mem_free,
    .copy_h2d = late_h2d,
    .copy_d2h = late_d2h,
    .queue_create = late_queue_create,
    .queue_destroy = late_queue_destroy,
    .copy_h2d_async = late_h2d_async,
    .queue_sync = late_queue_sync,
    .event_create = late_event_create,
    .event_destroy = late_event_destroy,
    .event_record = late_event_record,
    .event_query = late_event_query,
    .event_wait = late_event_wait,
    .launch = late_launch,
};

#endif
