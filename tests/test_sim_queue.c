/* Queues, events, async copies and launches on the sim.
 *
 * The trace callback runs on the device's own threads; the test uses it as
 * a gate that holds the copy engine inside a command, which makes "still
 * pending" states deterministic without any sleep. */
#include <pthread.h>
#include <stdint.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "device/sim/sim.h"
#include "test.h"

#define MAX_EV 4096

typedef struct rec {
  hbg_trace_event ev;
  pthread_t thread;
} rec;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int closed;   /* hold the engine in the next COPY event */
  int held;     /* the engine is being held */
  rec evs[MAX_EV];
  int n;
} g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {{{0}}}, 0};

static void on_trace(void *user, const hbg_trace_event *ev) {
  (void)user;
  pthread_mutex_lock(&g.mu);
  if (g.n < MAX_EV)
    g.evs[g.n++] = (rec){*ev, pthread_self()};
  if (ev->track == HBG_TRACK_COPY && g.closed) {
    g.held = 1;
    pthread_cond_broadcast(&g.cv);
    while (g.closed)
      pthread_cond_wait(&g.cv, &g.mu);
    g.held = 0;
  }
  pthread_mutex_unlock(&g.mu);
}

static void gate_close(void) {
  pthread_mutex_lock(&g.mu);
  g.closed = 1;
  pthread_mutex_unlock(&g.mu);
}

static void gate_wait_held(void) {
  pthread_mutex_lock(&g.mu);
  while (!g.held)
    pthread_cond_wait(&g.cv, &g.mu);
  pthread_mutex_unlock(&g.mu);
}

static void gate_open(void) {
  pthread_mutex_lock(&g.mu);
  g.closed = 0;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
}

static void *gate_open_thread(void *arg) {
  (void)arg;
  gate_open();
  return NULL;
}

static void trace_reset(void) {
  pthread_mutex_lock(&g.mu);
  g.n = 0;
  pthread_mutex_unlock(&g.mu);
}

static hbg_dev_stats stats(hbg_device *d) {
  hbg_dev_stats st;
  ASSERT_OK(hbg_dev_stats_get(d, &st));
  return st;
}

static void *peek(hbg_device *d, hbg_devptr a, uint64_t n) {
  void *p = NULL;
  ASSERT_OK(hbg__sim_resolve(hbg__sim_from(d), a, n, &p));
  return p;
}

static void set_status(hbg_device *d, hbg_devptr a) {
  memset(peek(d, a, sizeof(hbg_dev_status)), 0x5a, sizeof(hbg_dev_status));
}

static int status_written(hbg_device *d, hbg_devptr a, hbg_dev_status *out) {
  memcpy(out, peek(d, a, sizeof *out), sizeof *out);
  return out->error != 0x5a5a5a5a;
}

static hbg_dev_launch_desc desc(hbg_devptr window, uint64_t bytes,
                                hbg_devptr status) {
  hbg_dev_launch_desc l = {.struct_size = sizeof l,
                           .window = window,
                           .window_bytes = bytes,
                           .status = status};
  return l;
}

/* Events: never recorded, record on an idle queue, pending, re-record. */
static void test_events(hbg_device *d) {
  hbg_dev_queue *q;
  hbg_dev_event *ev, *ev2;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  ASSERT_OK(hbg_dev_event_create(d, &ev));
  ASSERT_OK(hbg_dev_event_create(d, &ev2));
  ASSERT_OK(hbg_dev_event_query(d, ev));
  ASSERT_OK(hbg_dev_event_wait(d, ev));
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  ASSERT_OK(hbg_dev_event_query(d, ev));

  size_t n = 1 << 16;
  uint8_t *pin;
  hbg_devptr dst;
  ASSERT_OK(hbg_dev_host_alloc(d, n, (void **)&pin));
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &dst));
  memset(pin, 7, n);

  gate_close();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, pin, n));
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  gate_wait_held();
  ASSERT_ERR(hbg_dev_event_query(d, ev), HBG_E_AGAIN);
  ASSERT_ERR(hbg_dev_event_query(d, ev), HBG_E_AGAIN);
  /* the data has been copied but the command has not completed */
  ASSERT_OK(hbg_dev_event_record(d, ev2, q));
  ASSERT_ERR(hbg_dev_event_query(d, ev2), HBG_E_AGAIN);
  /* destroying an event with a pending record is fine */
  ASSERT_OK(hbg_dev_event_destroy(d, ev2));
  gate_open();
  ASSERT_OK(hbg_dev_event_wait(d, ev));
  ASSERT_OK(hbg_dev_event_query(d, ev));
  uint8_t *p = peek(d, dst, n);
  ASSERT_EQ(p[0], 7);
  ASSERT_EQ(p[n - 1], 7);

  /* re-recording an event tracks the latest record only */
  gate_close();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, pin, n));
  ASSERT_OK(hbg_dev_event_record(d, ev, q));
  gate_wait_held();
  ASSERT_ERR(hbg_dev_event_query(d, ev), HBG_E_AGAIN);
  hbg_dev_queue *q2;
  ASSERT_OK(hbg_dev_queue_create(d, &q2));
  ASSERT_OK(hbg_dev_event_record(d, ev, q2)); /* idle queue: done at once */
  ASSERT_OK(hbg_dev_event_query(d, ev));
  gate_open();
  ASSERT_OK(hbg_dev_queue_sync(d, q));
  ASSERT_OK(hbg_dev_event_query(d, ev));

  ASSERT_OK(hbg_dev_queue_destroy(d, q2));
  ASSERT_OK(hbg_dev_event_destroy(d, ev));
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, dst));
  ASSERT_OK(hbg_dev_host_free(d, pin));
}

/* Async copies: FIFO per queue, pinned enqueued, pageable degraded. */
static void test_async(hbg_device *d) {
  hbg_dev_queue *q;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  size_t n = 100000;
  uint8_t *pin, *page = malloc(n), *back = malloc(n);
  ASSERT(page && back);
  hbg_devptr dst;
  ASSERT_OK(hbg_dev_host_alloc(d, 4 * n, (void **)&pin));
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &dst));

  /* later copies to the same bytes win: they ran in order */
  hbg_dev_stats a = stats(d);
  for (int i = 0; i < 4; i++) {
    memset(pin + (size_t)i * n, i + 1, n);
    ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, pin + (size_t)i * n,
                                     n - (size_t)i * 1000));
  }
  ASSERT_OK(hbg_dev_queue_sync(d, q));
  hbg_dev_stats b = stats(d);
  ASSERT_UEQ(b.async_copies - a.async_copies, 4);
  ASSERT_UEQ(b.async_degraded - a.async_degraded, 0);
  ASSERT_UEQ(b.pinned_direct - a.pinned_direct, 4);
  ASSERT_UEQ(b.handshakes - a.handshakes, 4);
  ASSERT_UEQ(b.bounce_chunks - a.bounce_chunks, 0);
  ASSERT_UEQ(b.h2d_copies - a.h2d_copies, 4);
  ASSERT_OK(hbg_dev_copy_d2h(d, back, dst, n));
  for (int i = 0; i < 4; i++)
    ASSERT_EQ(back[n - (size_t)i * 1000 - 1], i + 1);
  ASSERT_EQ(back[n - 1], 1);

  /* pageable: degraded to a synchronous staged copy, data there on return */
  memset(page, 0x33, n);
  hbg_dev_stats c = stats(d);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, page, n));
  hbg_dev_stats e = stats(d);
  ASSERT_UEQ(e.async_copies - c.async_copies, 1);
  ASSERT_UEQ(e.async_degraded - c.async_degraded, 1);
  ASSERT_UEQ(e.bounce_chunks - c.bounce_chunks, 2); /* 64K chunks */
  ASSERT_UEQ(e.handshakes - c.handshakes, 2);
  ASSERT_UEQ(e.pinned_direct - c.pinned_direct, 0);
  memset(page, 0, n);
  uint8_t *p = peek(d, dst, n);
  ASSERT_EQ(p[0], 0x33);
  ASSERT_EQ(p[n - 1], 0x33);

  /* a degraded copy still runs after earlier work on its queue */
  gate_close();
  memset(pin, 0x44, n);
  memset(page, 0x55, n);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, pin, n));
  gate_wait_held();
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, gate_open_thread, NULL), 0);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, page, n));
  ASSERT_EQ(pthread_join(t, NULL), 0);
  ASSERT_EQ(p[0], 0x55);

  /* range errors are synchronous and leave the queue clean */
  ASSERT_ERR(hbg_dev_copy_h2d_async(d, q, dst, pin, n + 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d_async(d, q, dst + n, pin, 1), HBG_E_RANGE);
  ASSERT_ERR(hbg_dev_copy_h2d_async(d, q, 0, pin, 1), HBG_E_RANGE);
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, pin, 0));
  ASSERT_OK(hbg_dev_queue_sync(d, q));

  /* freed before the queued copy ran: the copy fails, never writes */
  hbg_devptr tmp;
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &tmp));
  gate_close();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, dst, pin, n));
  gate_wait_held();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, tmp, pin, n));
  ASSERT_OK(hbg_dev_mem_free(d, tmp));
  gate_open();
  ASSERT_ERR(hbg_dev_queue_sync(d, q), HBG_E_RANGE);
  ASSERT_OK(hbg_dev_queue_sync(d, q)); /* reported once */

  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, dst));
  ASSERT_OK(hbg_dev_host_free(d, pin));
  free(page);
  free(back);
}

/* Launches run on the scheduler thread, in queue order, and overlap copies
 * of other queues; the status lands in device memory. */
static void test_launch(hbg_device *d) {
  hbg_dev_queue *q1, *q2;
  ASSERT_OK(hbg_dev_queue_create(d, &q1));
  ASSERT_OK(hbg_dev_queue_create(d, &q2));
  hbg_devptr win, st1, st2, buf;
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &win));
  ASSERT_OK(hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &st1));
  ASSERT_OK(hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &st2));
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &buf));
  memset(peek(d, win, 4096), 0, 4096);
  uint8_t *pin;
  ASSERT_OK(hbg_dev_host_alloc(d, 4096, (void **)&pin));
  hbg_dev_status st;

  /* a garbage window: an error status, no crash */
  set_status(d, st1);
  hbg_dev_launch_desc l = desc(win, 4096, st1);
  hbg_dev_stats a = stats(d);
  ASSERT_OK(hbg_dev_launch(d, q1, &l));
  ASSERT_OK(hbg_dev_queue_sync(d, q1));
  ASSERT_UEQ(stats(d).launches - a.launches, 1);
  ASSERT(status_written(d, st1, &st));
  ASSERT_LT(st.error, 0);

  /* bad window addresses */
  static const uint64_t bad[] = {0, 1, 0xdeadbeef, UINT64_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    set_status(d, st1);
    l = desc(bad[i], 4096, st1);
    ASSERT_OK(hbg_dev_launch(d, q1, &l));
    ASSERT_OK(hbg_dev_queue_sync(d, q1));
    ASSERT(status_written(d, st1, &st));
    ASSERT_LT(st.error, 0);
  }
  set_status(d, st1);
  l = desc(win, UINT64_MAX, st1); /* window larger than its allocation */
  ASSERT_OK(hbg_dev_launch(d, q1, &l));
  ASSERT_OK(hbg_dev_queue_sync(d, q1));
  ASSERT(status_written(d, st1, &st));
  ASSERT_LT(st.error, 0);
  l = desc(win, 4096, 0); /* no status wanted */
  ASSERT_OK(hbg_dev_launch(d, q1, &l));
  ASSERT_OK(hbg_dev_queue_sync(d, q1));

  /* a status that is not sizeof(hbg_dev_status) of a live allocation */
  hbg_dev_stats b = stats(d);
  l = desc(win, 4096, st1 + 8);
  ASSERT_ERR(hbg_dev_launch(d, q1, &l), HBG_E_RANGE);
  l = desc(win, 4096, 0xdeadbeef);
  ASSERT_ERR(hbg_dev_launch(d, q1, &l), HBG_E_RANGE);
  ASSERT_UEQ(stats(d).launches, b.launches);

  /* ordering: a launch behind a held copy on q1 waits; q2's launch runs
   * while the copy engine is held */
  trace_reset();
  set_status(d, st1);
  set_status(d, st2);
  gate_close();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q1, buf, pin, 4096));
  l = desc(win, 4096, st1);
  ASSERT_OK(hbg_dev_launch(d, q1, &l));
  gate_wait_held();
  l = desc(win, 4096, st2);
  ASSERT_OK(hbg_dev_launch(d, q2, &l));
  ASSERT_OK(hbg_dev_queue_sync(d, q2));
  ASSERT(status_written(d, st2, &st));
  ASSERT(!status_written(d, st1, &st));
  gate_open();
  ASSERT_OK(hbg_dev_queue_sync(d, q1));
  ASSERT(status_written(d, st1, &st));

  /* status freed before the launch ran: reported by queue_sync */
  gate_close();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q1, buf, pin, 4096));
  gate_wait_held();
  hbg_devptr st3;
  ASSERT_OK(hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &st3));
  l = desc(win, 4096, st3);
  ASSERT_OK(hbg_dev_launch(d, q1, &l));
  ASSERT_OK(hbg_dev_mem_free(d, st3));
  gate_open();
  ASSERT_ERR(hbg_dev_queue_sync(d, q1), HBG_E_RANGE);

  ASSERT_OK(hbg_dev_queue_destroy(d, q1));
  ASSERT_OK(hbg_dev_queue_destroy(d, q2));
  ASSERT_OK(hbg_dev_mem_free(d, win));
  ASSERT_OK(hbg_dev_mem_free(d, st1));
  ASSERT_OK(hbg_dev_mem_free(d, st2));
  ASSERT_OK(hbg_dev_mem_free(d, buf));
  ASSERT_OK(hbg_dev_host_free(d, pin));
}

static int find(const char *name, int from, rec *out) {
  pthread_mutex_lock(&g.mu);
  int r = -1;
  for (int i = from; i < g.n; i++)
    if (!strcmp(g.evs[i].ev.name, name)) {
      *out = g.evs[i];
      r = i;
      break;
    }
  pthread_mutex_unlock(&g.mu);
  return r;
}

/* Trace events: one per engine command and per launch, on device threads,
 * and a queue's commands never overlap in time. */
static void test_trace(hbg_device *d) {
  hbg_dev_queue *q;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  size_t n = (130 << 10);
  uint8_t *pin, *page = calloc(1, n);
  ASSERT(page);
  hbg_devptr buf, win, st;
  ASSERT_OK(hbg_dev_host_alloc(d, n, (void **)&pin));
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &buf));
  ASSERT_OK(hbg_dev_mem_alloc(d, 4096, &win));
  ASSERT_OK(hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &st));

  trace_reset();
  ASSERT_OK(hbg_dev_copy_h2d(d, buf, pin, n));
  ASSERT_OK(hbg_dev_copy_h2d(d, buf, page, n));
  ASSERT_OK(hbg_dev_copy_d2h(d, page, buf, n));
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, buf, pin, n));
  hbg_dev_launch_desc l = desc(win, 4096, st);
  ASSERT_OK(hbg_dev_launch(d, q, &l));
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, buf, pin, 1000));
  ASSERT_OK(hbg_dev_queue_sync(d, q));

  pthread_mutex_lock(&g.mu);
  int total = g.n;
  int h2d = 0, d2h = 0, async = 0, launch = 0;
  uint64_t h2d_bytes = 0;
  pthread_t copy_thread = g.evs[0].thread;
  for (int i = 0; i < g.n; i++) {
    const rec *r = &g.evs[i];
    ASSERT(!pthread_equal(r->thread, pthread_self()));
    if (r->ev.track == HBG_TRACK_COPY)
      ASSERT(pthread_equal(r->thread, copy_thread));
    else
      ASSERT(!pthread_equal(r->thread, copy_thread));
    if (!strcmp(r->ev.name, "h2d")) {
      h2d++;
      h2d_bytes += r->ev.bytes;
      ASSERT_UEQ(r->ev.track, HBG_TRACK_COPY);
    } else if (!strcmp(r->ev.name, "d2h")) {
      d2h++;
    } else if (!strcmp(r->ev.name, "h2d_async")) {
      async++;
    } else if (!strcmp(r->ev.name, "launch")) {
      launch++;
      ASSERT_UEQ(r->ev.track, HBG_TRACK_DEVICE);
    }
  }
  pthread_mutex_unlock(&g.mu);
  ASSERT_EQ(h2d, 1 + 3);
  ASSERT_UEQ(h2d_bytes, 2 * n);
  ASSERT_EQ(d2h, 3);
  ASSERT_EQ(async, 2);
  ASSERT_EQ(launch, 1);
  ASSERT_EQ(total, 4 + 3 + 2 + 1);

  /* queue order: async copy, then launch, then the second copy */
  rec c1, ln, c2;
  int i1 = find("h2d_async", 0, &c1);
  ASSERT_GE(i1, 0);
  ASSERT_GE(find("launch", 0, &ln), 0);
  ASSERT_GE(find("h2d_async", i1 + 1, &c2), 0);
  ASSERT_UEQ(c1.ev.bytes, n);
  ASSERT_UEQ(c2.ev.bytes, 1000);
  ASSERT_ULE(c1.ev.start_ns + c1.ev.dur_ns, ln.ev.start_ns);
  ASSERT_ULE(ln.ev.start_ns + ln.ev.dur_ns, c2.ev.start_ns);

  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_OK(hbg_dev_mem_free(d, buf));
  ASSERT_OK(hbg_dev_mem_free(d, win));
  ASSERT_OK(hbg_dev_mem_free(d, st));
  ASSERT_OK(hbg_dev_host_free(d, pin));
  free(page);
}

/* queue_destroy drains pending work; close drains and frees what the
 * caller leaked. */
static void test_teardown(void) {
  hbg_device *d;
  ASSERT_OK(hbg_device_open("sim", "mem=16M", &d));
  hbg_device_set_trace(d, on_trace, NULL);
  hbg_dev_queue *q;
  ASSERT_OK(hbg_dev_queue_create(d, &q));
  size_t n = 1 << 20;
  uint8_t *pin;
  hbg_devptr a, b;
  ASSERT_OK(hbg_dev_host_alloc(d, n, (void **)&pin));
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &a));
  ASSERT_OK(hbg_dev_mem_alloc(d, n, &b));
  memset(pin, 0x77, n);
  gate_close();
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, a, pin, n));
  ASSERT_OK(hbg_dev_copy_h2d_async(d, q, b, pin, n));
  gate_wait_held();
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, gate_open_thread, NULL), 0);
  ASSERT_OK(hbg_dev_queue_destroy(d, q));
  ASSERT_EQ(pthread_join(t, NULL), 0);
  uint8_t *p = peek(d, b, n);
  ASSERT_EQ(p[0], 0x77);
  ASSERT_EQ(p[n - 1], 0x77);

  /* leak queues with pending work, events, memory: close handles it */
  hbg_dev_queue *q1, *q2;
  hbg_dev_event *ev;
  ASSERT_OK(hbg_dev_queue_create(d, &q1));
  ASSERT_OK(hbg_dev_queue_create(d, &q2));
  ASSERT_OK(hbg_dev_event_create(d, &ev));
  hbg_devptr st;
  ASSERT_OK(hbg_dev_mem_alloc(d, sizeof(hbg_dev_status), &st));
  hbg_device_set_trace(d, NULL, NULL);
  for (int i = 0; i < 8; i++) {
    ASSERT_OK(hbg_dev_copy_h2d_async(d, q1, a, pin, n));
    ASSERT_OK(hbg_dev_event_record(d, ev, q1));
    hbg_dev_launch_desc l = desc(b, n, st); /* q1 writes a meanwhile */
    ASSERT_OK(hbg_dev_launch(d, q2, &l));
  }
  hbg_device_close(d);
}

int main(void) {
  hbg_device *d;
  ASSERT_OK(hbg_device_open("sim", "mem=32M,workers=2", &d));
  hbg_device_set_trace(d, on_trace, NULL);
  ASSERT(hbg_device_tracing(d));
  test_events(d);
  test_async(d);
  test_launch(d);
  test_trace(d);
  hbg_device_set_trace(d, NULL, NULL);
  ASSERT(!hbg_device_tracing(d));
  hbg_device_close(d);
  test_teardown();
  printf("sim_queue: ok\n");
  return 0;
}
