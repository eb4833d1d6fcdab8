/* The sim's copy engine and scheduler threads, queues and events.
 *
 * Every copy is a command handed to the engine thread; the submitter waits
 * for its completion (one handshake). An idle engine polls for new work for
 * a bounded time (option spin=, microseconds) before sleeping on a condition
 * variable, as a DMA engine is always ready; a synchronous copy's submitter
 * polls for completion while the engine is awake, as a driver's synchronous
 * copy spin-waits (CUDA's cudaDeviceScheduleAuto does when there are fewer
 * active contexts than CPUs). With spin=0 every wait sleeps. Queued work is
 * FIFO per queue: only a queue's head command is ever handed to an executor,
 * and its completion hands over the next one, so copies (engine thread) and
 * launches (scheduler threads, one launch each) of different queues overlap,
 * launches of different queues with each other too. A queue whose head is
 * a wait (queue_wait_event) stays still until the awaited event record has
 * completed; that is the only order between queues.
 *
 * With a cost model (sim_model.c) a copy command carries a modelled
 * duration: the engine stamps its deadline (start of service + duration)
 * when it takes the command, performs the copy, and sleeps to the deadline
 * before completing it; its waiter sleeps to the same deadline and polls
 * only from there on, so a long modelled copy costs no busy CPU. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "common/list.h"
#include "common/util.h"
#include "device/sim/sim_internal.h"

/* ---- bounded polling ----------------------------------------------------
 * A poller yields the CPU on every round: on a machine with fewer cores than
 * runnable threads the thread it waits for may be queued on the very CPU it
 * spins on, and a busy loop would hold it off for a whole time slice. */

/* Poll until *word differs from seen or spin_ns pass.
 * @return non-zero when it changed. */
static int spin_while_equal(const _Atomic uint64_t *word, uint64_t seen,
                            uint64_t spin_ns) {
  uint64_t until = hbg__now_ns() + spin_ns;
  for (;;) {
    if (atomic_load_explicit(word, memory_order_acquire) != seen)
      return 1;
    sched_yield();
    if (hbg__now_ns() >= until)
      return 0;
  }
}

static int spin_until_done(const _Atomic int *done, uint64_t spin_ns) {
  uint64_t until = hbg__now_ns() + spin_ns;
  for (;;) {
    if (atomic_load_explicit(done, memory_order_acquire))
      return 1;
    sched_yield();
    if (hbg__now_ns() >= until)
      return 0;
  }
}

/* ---- executors ---------------------------------------------------------- */

static void trace_cmd(hbg__sim *s, uint32_t track, const char *name,
                      uint64_t t0, uint64_t bytes) {
  hbg_trace_event ev = {.track = track,
                        .name = name,
                        .start_ns = t0,
                        .dur_ns = hbg__now_ns() - t0,
                        .bytes = bytes};
  hbg_device_trace(s->dev, &ev);
}

static void run_copy(hbg__sim *s, hbg__sim_cmd *c) {
  int tracing = hbg_device_tracing(s->dev);
  uint64_t t0 = tracing || c->model_ns ? hbg__now_ns() : 0;
  /* clock=virtual: nothing to sleep; cmd_complete dates the completion */
  if (c->model_ns && !s->vclock)
    atomic_store_explicit(&c->deadline, t0 + c->model_ns,
                          memory_order_release);
  uint8_t *dst = c->dst;
  const uint8_t *src = c->src;
  if (c->q) {
    /* Queued copies run later than they were checked: the allocation may
     * have been freed since. */
    void *p;
    if (hbg__sim_resolve(s, c->dev_addr, c->bytes, &p) < 0) {
      c->err = HBG_E_RANGE;
      return;
    }
    if (c->to_device)
      dst = p;
    else
      src = p;
  }
  memcpy(dst, src, c->bytes);
  if (c->to_device && s->exec)
    hbg__exec_invalidate(s->exec, c->dev_addr, c->bytes);
  HBG__SIM_INC(s, handshakes, 1);
  if (s->vclock) {
    HBG__SIM_INC(s, modelled, c->model_ns != 0);
    HBG__SIM_INC(s, modelled_ns, c->model_ns);
  } else {
    hbg__sim_model_delay(s, t0, c->model_ns);
  }
  if (tracing)
    trace_cmd(s, HBG_TRACK_COPY, c->name, t0, c->bytes);
}

static void run_launch(hbg__sim *s, hbg__sim_cmd *c) {
  int tracing = hbg_device_tracing(s->dev);
  uint64_t t0 = tracing ? hbg__now_ns() : 0;
  hbg_dev_status st;
  memset(&st, 0, sizeof st);
  st.task = UINT32_MAX;
  st.node = UINT32_MAX;
  int rc = s->exec ? hbg__exec_run(s->exec, &c->desc, &st)
                   : HBG_E_UNSUPPORTED;
  if (rc < 0 && st.error == 0)
    st.error = rc;
  if (c->desc.status) {
    void *p;
    if (hbg__sim_resolve(s, c->desc.status, sizeof st, &p) == 0) {
      memcpy(p, &st, sizeof st);
      if (s->exec)
        hbg__exec_invalidate(s->exec, c->desc.status, sizeof st);
    } else {
      c->err = HBG_E_RANGE;
    }
  }
  if (tracing)
    trace_cmd(s, HBG_TRACK_DEVICE, "launch", t0, 0);
}

/* Caller holds mu. */
static void event_unref(hbg__sim_event *ev) {
  if (--ev->refs == 0)
    free(ev);
}

static void queue_kick(hbg__sim *s, hbg__sim_queue *q);

/* A record of ev completed: queues waiting on it may move on. Caller holds
 * mu. */
static void event_done(hbg__sim *s, hbg__sim_event *ev, uint64_t seq,
                       uint64_t done_v) {
  if (seq > ev->done) {
    ev->done = seq;
    ev->done_ns = hbg__now_ns();
    ev->done_v = done_v;
    for (hbg__sim_queue *w = s->queues; w; w = w->next)
      if (w->head && w->head->kind == HBG__SIM_CMD_WAIT && w->head->ev == ev)
        queue_kick(s, w);
  }
  event_unref(ev);
}

/* Caller holds mu: a scheduler thread more when a launch would otherwise
 * wait behind a running one (a failed start leaves it to those running). */
static void sched_grow(hbg__sim *s);

static void run_list_push(hbg__sim_cmd **head, hbg__sim_cmd **tail,
                          hbg__sim_cmd *c) {
  c->run_next = NULL;
  if (*tail)
    (*tail)->run_next = c;
  else
    *head = c;
  *tail = c;
}

/* Hand q's head to its executor; event records complete on the spot.
 * Caller holds mu and broadcasts done_cv afterwards. */
static void queue_kick(hbg__sim *s, hbg__sim_queue *q) {
  hbg__sim_cmd *c;
  while ((c = q->head) && !q->busy) {
    if (c->kind == HBG__SIM_CMD_WAIT && c->ev->done < c->ev_seq)
      return; /* event_done kicks q again */
    if (c->kind == HBG__SIM_CMD_EVENT || c->kind == HBG__SIM_CMD_WAIT) {
      q->head = c->next;
      if (!q->head)
        q->tail = NULL;
      if (c->submit_v > q->v_done)
        q->v_done = c->submit_v;
      if (c->kind == HBG__SIM_CMD_WAIT) {
        /* on the device's clock the queue goes on once the record did */
        if (c->ev->done_v > q->v_done)
          q->v_done = c->ev->done_v;
        event_unref(c->ev);
      } else {
        event_done(s, c->ev, c->ev_seq, q->v_done);
      }
      free(c);
      continue;
    }
    q->busy = 1;
    if (c->kind == HBG__SIM_CMD_COPY) {
      run_list_push(&s->eng_head, &s->eng_tail, c);
      atomic_fetch_add_explicit(&s->eng_posted, 1, memory_order_release);
      pthread_cond_signal(&s->eng_cv);
    } else {
      run_list_push(&s->sched_head, &s->sched_tail, c);
      if (s->sched_idle == 0)
        sched_grow(s);
      pthread_cond_signal(&s->sched_cv);
    }
  }
}

/* clock=virtual, caller holds mu: when c ends on the device's clock. It
 * starts once submitted, once its queue's previous command ended, and (a
 * copy) once the copy engine is free; a copy takes its modelled time (its
 * real one when nothing is modelled), a launch the real time it ran. */
static void cmd_date(hbg__sim *s, hbg__sim_cmd *c) {
  uint64_t start = c->submit_v;
  if (c->q && c->q->v_done > start)
    start = c->q->v_done;
  int copy = c->kind == HBG__SIM_CMD_COPY;
  if (copy && s->eng_v > start)
    start = s->eng_v;
  c->end_v = start + (copy && c->model_ns ? c->model_ns : c->run_ns);
  if (copy)
    s->eng_v = c->end_v;
  if (c->q)
    c->q->v_done = c->end_v;
}

/* Caller holds mu. */
static void cmd_complete(hbg__sim *s, hbg__sim_cmd *c) {
  hbg__sim_queue *q = c->q;
  if (s->vclock)
    cmd_date(s, c);
  if (q) {
    if (c->err && !q->err)
      q->err = c->err;
    q->head = c->next;
    if (!q->head)
      q->tail = NULL;
    q->busy = 0;
    free(c);
    queue_kick(s, q);
  } else {
    atomic_store_explicit(&c->done, 1, memory_order_release);
  }
  pthread_cond_broadcast(&s->done_cv);
}

/* posted, when not NULL, counts commands pushed to this executor's run
 * list: an idle executor polls it for s->spin_ns before sleeping. */
static void executor_loop(hbg__sim *s, hbg__sim_cmd **head,
                          hbg__sim_cmd **tail, pthread_cond_t *cv,
                          const _Atomic uint64_t *posted, uint32_t *idle,
                          void (*run)(hbg__sim *, hbg__sim_cmd *)) {
  int polled = 0;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    hbg__sim_cmd *c = *head;
    if (!c) {
      if (s->stop)
        break;
      if (posted && !polled && s->spin_ns) {
        uint64_t seen = atomic_load_explicit(posted, memory_order_acquire);
        pthread_mutex_unlock(&s->mu);
        spin_while_equal(posted, seen, s->spin_ns);
        pthread_mutex_lock(&s->mu);
        polled = 1;
        continue;
      }
      if (posted)
        atomic_store_explicit(&s->eng_asleep, 1, memory_order_release);
      if (idle)
        (*idle)++;
      pthread_cond_wait(cv, &s->mu);
      if (idle)
        (*idle)--;
      if (posted)
        atomic_store_explicit(&s->eng_asleep, 0, memory_order_release);
      continue;
    }
    polled = 0;
    *head = c->run_next;
    if (!*head)
      *tail = NULL;
    pthread_mutex_unlock(&s->mu);
    uint64_t t0 = s->vclock ? hbg__now_ns() : 0;
    run(s, c);
    if (s->vclock)
      c->run_ns = hbg__now_ns() - t0;
    pthread_mutex_lock(&s->mu);
    cmd_complete(s, c);
  }
  pthread_mutex_unlock(&s->mu);
}

static void *engine_main(void *arg) {
  hbg__sim *s = arg;
#ifdef __linux__
  /* Modelled deadlines are microseconds apart: no 50 µs default slack on
   * the engine's own sleeps. */
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
#endif
  executor_loop(s, &s->eng_head, &s->eng_tail, &s->eng_cv, &s->eng_posted,
                NULL, run_copy);
  return NULL;
}

static void *sched_main(void *arg) {
  hbg__sim *s = arg;
  executor_loop(s, &s->sched_head, &s->sched_tail, &s->sched_cv, NULL,
                &s->sched_idle, run_launch);
  return NULL;
}

static void sched_grow(hbg__sim *s) {
  if (s->stop || s->n_sched >= s->n_queues ||
      s->n_sched >= HBG__SIM_SCHED_MAX)
    return;
  if (pthread_create(&s->sched_thread[s->n_sched], NULL, sched_main, s) == 0)
    s->n_sched++;
}

/* Caller holds mu. A polling engine sees the count move and stops at
 * once instead of at the end of its polling window. */
static void engine_stop_locked(hbg__sim *s) {
  s->stop = 1;
  atomic_fetch_add_explicit(&s->eng_posted, 1, memory_order_release);
  pthread_cond_broadcast(&s->eng_cv);
}

int hbg__sim_engine_start(hbg__sim *s) {
  if (pthread_mutex_init(&s->mu, NULL) != 0)
    return HBG_E_NOMEM;
  if (pthread_mutex_init(&s->bounce_mu, NULL) != 0)
    goto err_mu;
  if (pthread_cond_init(&s->eng_cv, NULL) != 0)
    goto err_bounce_mu;
  if (pthread_cond_init(&s->sched_cv, NULL) != 0)
    goto err_eng_cv;
  if (pthread_cond_init(&s->done_cv, NULL) != 0)
    goto err_sched_cv;
  if (pthread_create(&s->eng_thread, NULL, engine_main, s) != 0)
    goto err_done_cv;
  if (pthread_create(&s->sched_thread[0], NULL, sched_main, s) != 0)
    goto err_engine;
  s->n_sched = 1;
  return 0;

err_engine:
  pthread_mutex_lock(&s->mu);
  engine_stop_locked(s);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->eng_thread, NULL);
err_done_cv:
  pthread_cond_destroy(&s->done_cv);
err_sched_cv:
  pthread_cond_destroy(&s->sched_cv);
err_eng_cv:
  pthread_cond_destroy(&s->eng_cv);
err_bounce_mu:
  pthread_mutex_destroy(&s->bounce_mu);
err_mu:
  pthread_mutex_destroy(&s->mu);
  hbg_device_set_native(s->dev, -1, "cannot start device threads");
  return HBG_E_NOMEM;
}

void hbg__sim_engine_stop(hbg__sim *s) {
  pthread_mutex_lock(&s->mu);
  for (;;) {
    hbg__sim_queue *q = s->queues;
    while (q && !q->head)
      q = q->next;
    if (!q)
      break;
    pthread_cond_wait(&s->done_cv, &s->mu);
  }
  engine_stop_locked(s);
  pthread_cond_broadcast(&s->sched_cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->eng_thread, NULL);
  /* no thread starts after stop is set (sched_grow), and none while mu is
   * not held: n_sched is final */
  for (uint32_t i = 0; i < s->n_sched; i++)
    pthread_join(s->sched_thread[i], NULL);

  while (s->queues) {
    hbg__sim_queue *q = s->queues;
    s->queues = q->next;
    free(q);
  }
  while (s->events) {
    hbg__sim_event *ev = s->events;
    s->events = ev->next;
    free(ev);
  }
  pthread_cond_destroy(&s->done_cv);
  pthread_cond_destroy(&s->sched_cv);
  pthread_cond_destroy(&s->eng_cv);
  pthread_mutex_destroy(&s->bounce_mu);
  pthread_mutex_destroy(&s->mu);
}

/* ---- synchronous copies ------------------------------------------------- */

/* Caller holds mu. */
static void engine_submit(hbg__sim *s, hbg__sim_cmd *c) {
  run_list_push(&s->eng_head, &s->eng_tail, c);
  atomic_fetch_add_explicit(&s->eng_posted, 1, memory_order_release);
  pthread_cond_signal(&s->eng_cv);
}

/* Wait for a modelled command: sleep to its deadline once the engine has
 * stamped it, then poll (spin= allowing, while the engine is awake) for
 * the engine's own wake-up; sleep on done_cv for the rest. */
static void model_wait(hbg__sim *s, hbg__sim_cmd *c) {
  uint64_t poll_until = hbg__now_ns() + s->spin_ns;
  while (!atomic_load_explicit(&c->done, memory_order_acquire)) {
    uint64_t d = atomic_load_explicit(&c->deadline, memory_order_acquire);
    uint64_t now = hbg__now_ns();
    if (d && now < d) {
      hbg__sim_sleep_until(d);
      poll_until = d + s->spin_ns;
      continue;
    }
    if (s->spin_ns && now < poll_until &&
        !atomic_load_explicit(&s->eng_asleep, memory_order_acquire)) {
      sched_yield();
      continue;
    }
    pthread_mutex_lock(&s->mu);
    while (!atomic_load_explicit(&c->done, memory_order_acquire))
      pthread_cond_wait(&s->done_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    HBG__SIM_INC(s, sleeps, 1);
    return;
  }
  HBG__SIM_INC(s, spin_hits, 1);
}

/* Wait for a posted stack command (a pinned copy or one bounce chunk). Poll
 * while the engine is awake (running or polling); when it sleeps, its
 * wake-up (tens of microseconds on a VM) outlasts what polling saves, and
 * the poller would only compete with it for a CPU, so sleep at once. Also
 * sleep when polling runs out. Caller does not hold mu. */
static void engine_wait_real(hbg__sim *s, hbg__sim_cmd *c);

/* With clock=virtual the wait ends at the command's completion on the
 * device's clock, whatever real time it took. */
static void engine_wait(hbg__sim *s, hbg__sim_cmd *c) {
  if (!s->vclock) {
    engine_wait_real(s, c);
    return;
  }
  uint64_t v0 = hbg__sim_vnow(s);
  engine_wait_real(s, c);
  hbg__sim_vreach(s, v0, c->end_v);
}

static void engine_wait_real(hbg__sim *s, hbg__sim_cmd *c) {
  if (c->model_ns && !s->vclock) {
    model_wait(s, c);
    return;
  }
  if (s->spin_ns &&
      !atomic_load_explicit(&s->eng_asleep, memory_order_acquire) &&
      spin_until_done(&c->done, s->spin_ns)) {
    HBG__SIM_INC(s, spin_hits, 1);
    return;
  }
  int slept = 0;
  pthread_mutex_lock(&s->mu);
  while (!atomic_load_explicit(&c->done, memory_order_acquire)) {
    slept = 1;
    pthread_cond_wait(&s->done_cv, &s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  if (slept)
    HBG__SIM_INC(s, sleeps, 1);
}

static void copy_cmd(hbg__sim_cmd *c, const char *name, int to_device,
                     uint8_t *dst, const uint8_t *src, size_t bytes,
                     hbg_devptr dev_addr) {
  memset(c, 0, sizeof *c);
  c->kind = HBG__SIM_CMD_COPY;
  c->name = name;
  c->to_device = to_device;
  c->dst = dst;
  c->src = src;
  c->bytes = bytes;
  c->dev_addr = dev_addr;
  atomic_init(&c->deadline, 0);
}

static void cmd_post(hbg__sim *s, hbg__sim_cmd *c) {
  c->submit_v = s->vclock ? hbg__sim_vnow(s) : 0;
  pthread_mutex_lock(&s->mu);
  engine_submit(s, c);
  pthread_mutex_unlock(&s->mu);
}

static void copy_direct(hbg__sim *s, hbg__sim_cmd *c) {
  cmd_post(s, c);
  engine_wait(s, c);
  HBG__SIM_INC(s, pinned_direct, 1);
}

static void chunk_submit(hbg__sim *s, hbg__sim_cmd *c) {
  cmd_post(s, c);
  HBG__SIM_INC(s, bounce_chunks, 1);
}

/* Pageable H2D: the calling thread fills one bounce buffer while the engine
 * drains the other. */
static void staged_h2d(hbg__sim *s, uint8_t *dev, hbg_devptr addr,
                       const uint8_t *src, size_t bytes, const char *name) {
  hbg__sim_cmd c[2];
  int busy[2] = {0, 0};
  pthread_mutex_lock(&s->bounce_mu);
  for (size_t off = 0, i = 0; off < bytes; i++) {
    size_t b = i & 1, n = HBG__MIN((size_t)s->chunk, bytes - off);
    if (busy[b])
      engine_wait(s, &c[b]);
    memcpy(s->bounce[b], src + off, n);
    copy_cmd(&c[b], name, 1, dev + off, s->bounce[b], n, addr + off);
    c[b].model_ns = hbg__sim_model_copy(&s->model, n, 1, off == 0);
    chunk_submit(s, &c[b]);
    busy[b] = 1;
    off += n;
  }
  for (size_t b = 0; b < 2; b++)
    if (busy[b])
      engine_wait(s, &c[b]);
  pthread_mutex_unlock(&s->bounce_mu);
}

/* Pageable D2H: the engine fills one bounce buffer while the calling
 * thread drains the other. */
static void staged_d2h(hbg__sim *s, uint8_t *dst, const uint8_t *dev,
                       hbg_devptr addr, size_t bytes) {
  hbg__sim_cmd c[2];
  size_t off[2] = {0, 0};
  size_t next = 0;
  pthread_mutex_lock(&s->bounce_mu);
  for (size_t b = 0; b < 2 && next < bytes; b++) {
    size_t n = HBG__MIN((size_t)s->chunk, bytes - next);
    copy_cmd(&c[b], "d2h", 0, s->bounce[b], dev + next, n, addr + next);
    c[b].model_ns = hbg__sim_model_copy(&s->model, n, 1, next == 0);
    off[b] = next;
    chunk_submit(s, &c[b]);
    next += n;
  }
  for (size_t i = 0, done = 0; done < bytes; i++) {
    size_t b = i & 1;
    engine_wait(s, &c[b]);
    memcpy(dst + off[b], s->bounce[b], c[b].bytes);
    done += c[b].bytes;
    if (next < bytes) {
      size_t n = HBG__MIN((size_t)s->chunk, bytes - next);
      copy_cmd(&c[b], "d2h", 0, s->bounce[b], dev + next, n, addr + next);
      c[b].model_ns = hbg__sim_model_copy(&s->model, n, 1, next == 0);
      off[b] = next;
      chunk_submit(s, &c[b]);
      next += n;
    }
  }
  pthread_mutex_unlock(&s->bounce_mu);
}

static int h2d_sync(hbg__sim *s, hbg_devptr dst, const void *src,
                    size_t bytes, const char *name) {
  void *d;
  if (hbg__sim_resolve(s, dst, bytes, &d) < 0) {
    hbg_device_set_native(s->dev, HBG_E_RANGE,
                          "sim: h2d of %zu bytes to 0x%llx: outside a live "
                          "allocation",
                          bytes, (unsigned long long)dst);
    return HBG_E_RANGE;
  }
  if (hbg__sim_is_pinned(s, src, bytes)) {
    hbg__sim_cmd c;
    copy_cmd(&c, name, 1, d, src, bytes, dst);
    c.model_ns = hbg__sim_model_copy(&s->model, bytes, 0, 1);
    copy_direct(s, &c);
  } else {
    staged_h2d(s, d, dst, src, bytes, name);
  }
  HBG__SIM_INC(s, h2d_copies, 1);
  HBG__SIM_INC(s, h2d_bytes, bytes);
  return 0;
}

int hbg__sim_copy_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                      size_t bytes) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!src && bytes, HBG_E_INVAL);
  if (bytes == 0)
    return 0;
  return h2d_sync(s, dst, src, bytes, "h2d");
}

int hbg__sim_copy_d2h(hbg_device *dev, void *dst, hbg_devptr src,
                      size_t bytes) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!dst && bytes, HBG_E_INVAL);
  if (bytes == 0)
    return 0;
  void *d;
  if (hbg__sim_resolve(s, src, bytes, &d) < 0) {
    hbg_device_set_native(dev, HBG_E_RANGE,
                          "sim: d2h of %zu bytes from 0x%llx: outside a live "
                          "allocation",
                          bytes, (unsigned long long)src);
    return HBG_E_RANGE;
  }
  if (hbg__sim_is_pinned(s, dst, bytes)) {
    hbg__sim_cmd c;
    copy_cmd(&c, "d2h", 0, dst, d, bytes, src);
    c.model_ns = hbg__sim_model_copy(&s->model, bytes, 0, 1);
    copy_direct(s, &c);
  } else {
    staged_d2h(s, dst, d, src, bytes);
  }
  HBG__SIM_INC(s, d2h_copies, 1);
  HBG__SIM_INC(s, d2h_bytes, bytes);
  return 0;
}

/* ---- queues ------------------------------------------------------------- */

void hbg__sim_drain_all(hbg__sim *s) {
  uint64_t v0 = hbg__sim_vnow(s), v = 0;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    hbg__sim_queue *q = s->queues;
    while (q && !q->head)
      q = q->next;
    if (!q)
      break;
    pthread_cond_wait(&s->done_cv, &s->mu);
  }
  for (hbg__sim_queue *q = s->queues; q; q = q->next)
    v = HBG__MAX(v, q->v_done);
  pthread_mutex_unlock(&s->mu);
  hbg__sim_vreach(s, v0, v);
}

/* Caller holds mu. Handles are checked against the live lists so that a
 * stale or foreign handle is an error, not a dereference. */
static hbg__sim_queue *queue_get(hbg__sim *s, hbg_dev_queue *h) {
  for (hbg__sim_queue *q = s->queues; q; q = q->next)
    if ((void *)q == (void *)h)
      return q;
  return NULL;
}

static hbg__sim_event *event_get(hbg__sim *s, hbg_dev_event *h) {
  for (hbg__sim_event *ev = s->events; ev; ev = ev->next)
    if ((void *)ev == (void *)h)
      return ev;
  return NULL;
}

/* Caller holds mu. */
static void queue_drain(hbg__sim *s, hbg__sim_queue *q) {
  while (q->head)
    pthread_cond_wait(&s->done_cv, &s->mu);
}

/* Caller holds mu. */
static void queue_push(hbg__sim *s, hbg__sim_queue *q, hbg__sim_cmd *c) {
  c->submit_v = s->vclock ? hbg__sim_vnow(s) : 0;
  c->q = q;
  c->next = NULL;
  if (q->tail)
    q->tail->next = c;
  else
    q->head = c;
  q->tail = c;
  if (q->head == c) {
    queue_kick(s, q);
    pthread_cond_broadcast(&s->done_cv);
  }
}

int hbg__sim_queue_create(hbg_device *dev, hbg_dev_queue **out) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!out, HBG_E_INVAL);
  hbg__sim_queue *q = calloc(1, sizeof *q);
  if (!q)
    return HBG_E_NOMEM;
  q->s = s;
  pthread_mutex_lock(&s->mu);
  HBG__DLIST_PUSH(s->queues, q);
  s->n_queues++;
  pthread_mutex_unlock(&s->mu);
  *out = (hbg_dev_queue *)(void *)q;
  return 0;
}

int hbg__sim_queue_destroy(hbg_device *dev, hbg_dev_queue *h) {
  hbg__sim *s = hbg_device_impl(dev);
  if (!h)
    return 0;
  pthread_mutex_lock(&s->mu);
  hbg__sim_queue *q = queue_get(s, h);
  if (!q) {
    pthread_mutex_unlock(&s->mu);
    return HBG_E_INVAL;
  }
  queue_drain(s, q);
  HBG__DLIST_UNLINK(s->queues, q);
  s->n_queues--;
  pthread_mutex_unlock(&s->mu);
  free(q);
  return 0;
}

/* The sim's queues are its own: a caller borrows one it created with
 * queue_create, and the wrapper is the queue itself. */
int hbg__sim_queue_borrow(hbg_device *dev, void *native, hbg_dev_queue **out) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!out || !native, HBG_E_INVAL);
  pthread_mutex_lock(&s->mu);
  hbg__sim_queue *q = queue_get(s, native);
  pthread_mutex_unlock(&s->mu);
  if (!q) {
    hbg_device_set_native(dev, HBG_E_INVAL,
                          "queue %p is not a live queue of this sim device "
                          "(hbg_dev_queue_create)",
                          native);
    return HBG_E_INVAL;
  }
  *out = native;
  return 0;
}

int hbg__sim_queue_unborrow(hbg_device *dev, hbg_dev_queue *q) {
  (void)dev;
  (void)q;
  return 0;
}

int hbg__sim_queue_sync(hbg_device *dev, hbg_dev_queue *h) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!h, HBG_E_INVAL);
  uint64_t v0 = hbg__sim_vnow(s), v = 0;
  pthread_mutex_lock(&s->mu);
  hbg__sim_queue *q = queue_get(s, h);
  int rc = HBG_E_INVAL;
  if (q) {
    queue_drain(s, q);
    rc = q->err;
    q->err = 0;
    v = q->v_done;
  }
  pthread_mutex_unlock(&s->mu);
  hbg__sim_vreach(s, v0, v);
  if (rc == HBG_E_RANGE)
    hbg_device_set_native(dev, HBG_E_RANGE,
                          "sim: an asynchronous command on the queue touched "
                          "device memory freed before it ran");
  return rc;
}

int hbg__sim_copy_h2d_async(hbg_device *dev, hbg_dev_queue *h, hbg_devptr dst,
                            const void *src, size_t bytes) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!h || (!src && bytes), HBG_E_INVAL);
  void *d = NULL;
  if (bytes && hbg__sim_resolve(s, dst, bytes, &d) < 0) {
    hbg_device_set_native(dev, HBG_E_RANGE,
                          "sim: async h2d of %zu bytes to 0x%llx: outside a "
                          "live allocation",
                          bytes, (unsigned long long)dst);
    return HBG_E_RANGE;
  }
  int pinned = bytes == 0 || hbg__sim_is_pinned(s, src, bytes);
  hbg__sim_cmd *c = NULL;
  if (pinned && bytes) {
    c = malloc(sizeof *c);
    if (!c)
      return HBG_E_NOMEM;
    copy_cmd(c, "h2d_async", 1, d, src, bytes, dst);
    c->model_ns = hbg__sim_model_copy(&s->model, bytes, 0, 1);
  }

  pthread_mutex_lock(&s->mu);
  hbg__sim_queue *q = queue_get(s, h);
  if (!q) {
    pthread_mutex_unlock(&s->mu);
    free(c);
    return HBG_E_INVAL;
  }
  if (bytes == 0) {
    pthread_mutex_unlock(&s->mu);
    return 0;
  }
  if (c) {
    queue_push(s, q, c);
    pthread_mutex_unlock(&s->mu);
    HBG__SIM_INC(s, async_copies, 1);
    HBG__SIM_INC(s, pinned_direct, 1);
    HBG__SIM_INC(s, h2d_copies, 1);
    HBG__SIM_INC(s, h2d_bytes, bytes);
    return 0;
  }
  /* Pageable source: like the real drivers, the copy cannot be deferred,
   * so it runs synchronously in queue order. */
  queue_drain(s, q);
  pthread_mutex_unlock(&s->mu);
  HBG__SIM_INC(s, async_copies, 1);
  HBG__SIM_INC(s, async_degraded, 1);
  return h2d_sync(s, dst, src, bytes, "h2d");
}

/* ---- events ------------------------------------------------------------- */

int hbg__sim_event_create(hbg_device *dev, hbg_dev_event **out) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!out, HBG_E_INVAL);
  hbg__sim_event *ev = calloc(1, sizeof *ev);
  if (!ev)
    return HBG_E_NOMEM;
  ev->s = s;
  ev->refs = 1;
  pthread_mutex_lock(&s->mu);
  HBG__DLIST_PUSH(s->events, ev);
  pthread_mutex_unlock(&s->mu);
  *out = (hbg_dev_event *)(void *)ev;
  return 0;
}

int hbg__sim_event_destroy(hbg_device *dev, hbg_dev_event *h) {
  hbg__sim *s = hbg_device_impl(dev);
  if (!h)
    return 0;
  pthread_mutex_lock(&s->mu);
  hbg__sim_event *ev = event_get(s, h);
  if (!ev) {
    pthread_mutex_unlock(&s->mu);
    return HBG_E_INVAL;
  }
  HBG__DLIST_UNLINK(s->events, ev);
  /* Pending records keep it alive until they complete. */
  if (--ev->refs == 0)
    free(ev);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

/* Queue an event command on q: a record (the event's next record) or a
 * wait (for its current one). */
static int event_cmd(hbg_device *dev, hbg_dev_queue *qh, hbg_dev_event *eh,
                     int kind) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!eh || !qh, HBG_E_INVAL);
  hbg__sim_cmd *c = calloc(1, sizeof *c);
  if (!c)
    return HBG_E_NOMEM;
  c->kind = kind;
  pthread_mutex_lock(&s->mu);
  hbg__sim_event *ev = event_get(s, eh);
  hbg__sim_queue *q = queue_get(s, qh);
  if (!ev || !q) {
    pthread_mutex_unlock(&s->mu);
    free(c);
    return HBG_E_INVAL;
  }
  c->ev = ev;
  c->ev_seq = kind == HBG__SIM_CMD_EVENT ? ++ev->rec : ev->rec;
  ev->refs++;
  queue_push(s, q, c);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

int hbg__sim_event_record(hbg_device *dev, hbg_dev_event *eh,
                          hbg_dev_queue *qh) {
  return event_cmd(dev, qh, eh, HBG__SIM_CMD_EVENT);
}

int hbg__sim_queue_wait_event(hbg_device *dev, hbg_dev_queue *qh,
                              hbg_dev_event *eh) {
  return event_cmd(dev, qh, eh, HBG__SIM_CMD_WAIT);
}

int hbg__sim_event_query(hbg_device *dev, hbg_dev_event *h) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!h, HBG_E_INVAL);
  pthread_mutex_lock(&s->mu);
  hbg__sim_event *ev = event_get(s, h);
  int rc = !ev ? HBG_E_INVAL : ev->done >= ev->rec ? 0 : HBG_E_AGAIN;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int hbg__sim_event_wait(hbg_device *dev, hbg_dev_event *h) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!h, HBG_E_INVAL);
  pthread_mutex_lock(&s->mu);
  hbg__sim_event *ev = event_get(s, h);
  if (!ev) {
    pthread_mutex_unlock(&s->mu);
    return HBG_E_INVAL;
  }
  uint64_t target = ev->rec, v0 = hbg__sim_vnow(s);
  ev->refs++;
  while (ev->done < target)
    pthread_cond_wait(&s->done_cv, &s->mu);
  uint64_t v = ev->done_v;
  if (--ev->refs == 0)
    free(ev);
  pthread_mutex_unlock(&s->mu);
  hbg__sim_vreach(s, v0, v);
  return 0;
}

/* The completion times event_done stamped: the moment the queue reached
 * each record, which is when the work queued before it had completed. */
int hbg__sim_event_elapsed(hbg_device *dev, hbg_dev_event *sh,
                           hbg_dev_event *eh, uint64_t *ns) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!sh || !eh || !ns, HBG_E_INVAL);
  pthread_mutex_lock(&s->mu);
  hbg__sim_event *a = event_get(s, sh), *b = event_get(s, eh);
  int rc = 0;
  uint64_t d = 0;
  if (!a || !b)
    rc = HBG_E_INVAL;
  else if (!a->rec || !b->rec)
    rc = HBG_E_STATE;
  else if (a->done < a->rec || b->done < b->rec)
    rc = HBG_E_AGAIN;
  else if (s->vclock)
    d = b->done_v > a->done_v ? b->done_v - a->done_v : 0;
  else
    d = b->done_ns > a->done_ns ? b->done_ns - a->done_ns : 0;
  pthread_mutex_unlock(&s->mu);
  if (rc == 0)
    *ns = d;
  return rc;
}

/* ---- launch ------------------------------------------------------------- */

int hbg__sim_launch(hbg_device *dev, hbg_dev_queue *h,
                    const hbg_dev_launch_desc *l) {
  hbg__sim *s = hbg_device_impl(dev);
  uint64_t t0 = s->model.launch_ns ? hbg__now_ns() : 0;
  HBG__RETURN_IF(!h || !l, HBG_E_INVAL);
  HBG__RETURN_IF(l->struct_size < sizeof *l, HBG_E_INVAL);
  void *p;
  if (l->status && hbg__sim_resolve(s, l->status, sizeof(hbg_dev_status),
                                    &p) < 0) {
    hbg_device_set_native(dev, HBG_E_RANGE,
                          "sim: launch status 0x%llx: not %zu bytes of a "
                          "live allocation",
                          (unsigned long long)l->status,
                          sizeof(hbg_dev_status));
    return HBG_E_RANGE;
  }
  hbg__sim_cmd *c = calloc(1, sizeof *c);
  if (!c)
    return HBG_E_NOMEM;
  c->kind = HBG__SIM_CMD_LAUNCH;
  c->desc = *l;
  pthread_mutex_lock(&s->mu);
  hbg__sim_queue *q = queue_get(s, h);
  if (!q) {
    pthread_mutex_unlock(&s->mu);
    free(c);
    return HBG_E_INVAL;
  }
  queue_push(s, q, c);
  pthread_mutex_unlock(&s->mu);
  HBG__SIM_INC(s, launches, 1);
  hbg__sim_model_delay(s, t0, s->model.launch_ns);
  return 0;
}
