/*
 * Binds launched on queues the caller owns (hbg_bind_launch_on), and binds
 * launched into the caller's stream capture.
 *
 * Borrowed queues. The runtime wraps each caller queue once
 * (hbg_dev_queue_borrow) and keeps the wrapper until hbg_runtime_stream_forget
 * or hbg_runtime_destroy: a backend keeps per-queue executor state in it
 * (cuda, exec=device), which must outlive the launches that use it.
 *
 * Captured launches. While the caller captures the queue, nothing runs:
 * the copy of the window and the executor's launch become nodes of the
 * caller's graph, and the copy node reads its pinned source at every
 * replay. So a captured bind's window (the slot's pinned arena, which
 * holds it), its device window, its heap block (inner tensors) and its
 * status word leave the slot and
 * become the capture's snapshot: immutable, owned by the graph (the
 * backend's capture_retain: a user object on cuda), freed once the graph
 * and every instance of it are gone. The slot makes new ones at its next
 * hbg_bind_begin outside a capture. While any snapshot lives, retired
 * device memory (evicted resident Definitions, which a snapshot's window
 * names) is kept.
 *
 * A snapshot's destructor runs on a driver thread and may not call the
 * device: it only moves the snapshot to its home's list of dead ones,
 * which the runtime frees at its next hbg_bind_begin outside a capture or
 * at hbg_runtime_destroy. The home outlives the runtime while snapshots
 * live (refcount): a graph destroyed after hbg_runtime_destroy finds it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/util.h"
#include "core/core.h"
#include "core/policy/policy.h"

struct hbg__snapshot {
  hbg__capture_home *home;
  void *arena;            /* pinned host window (the slot's arena) */
  hbg_devptr win_dev;     /* device window */
  hbg_devptr status_dev;  /* status word the replays write */
  hbg_devptr heap_dev;    /* the slot's heap: the graphs' inner tensors */
  uint64_t capture_id;
  struct hbg__snapshot *next;
};

struct hbg__capture_home {
  pthread_mutex_t mu;
  uint32_t refs;          /* the runtime's + one per live snapshot */
  _Atomic uint32_t live;  /* snapshots whose graph lives */
  _Atomic uint32_t n_dead; /* on the dead list: hbg_bind_begin looks here
                              before it takes the mutex */
  int rt_gone;            /* hbg_runtime_destroy ran */
  hbg__snapshot *dead;    /* graph gone, memory not yet freed */
};

int hbg__capture_home_new(hbg_runtime *rt) {
  hbg__capture_home *h = calloc(1, sizeof *h);
  if (!h || pthread_mutex_init(&h->mu, NULL) != 0) {
    free(h);
    return HBG_E_NOMEM;
  }
  h->refs = 1;
  rt->capture_home = h;
  return 0;
}

static void home_unref_locked(hbg__capture_home *h) {
  int last = --h->refs == 0;
  pthread_mutex_unlock(&h->mu);
  if (last) {
    pthread_mutex_destroy(&h->mu);
    free(h);
  }
}

/* The graph holding the snapshot is gone (capture_retain's destroy). */
static void snapshot_destroy(void *p) {
  hbg__snapshot *sn = p;
  hbg__capture_home *h = sn->home;
  pthread_mutex_lock(&h->mu);
  atomic_fetch_sub(&h->live, 1);
  if (h->rt_gone) {
    /* Its memory went with the device, or stays with the caller's device
     * until it closes: nothing here may call the device. */
    free(sn);
  } else {
    sn->next = h->dead;
    h->dead = sn;
    atomic_fetch_add(&h->n_dead, 1);
  }
  home_unref_locked(h);
}

uint32_t hbg__captures_live(const hbg_runtime *rt) {
  return rt->capture_home ? atomic_load(&rt->capture_home->live) : 0;
}

static void snapshot_free(hbg_runtime *rt, hbg__snapshot *sn) {
  hbg__host_release(rt, sn->arena, "captured window (pinned)");
  hbg__mem_release(rt, sn->win_dev, "captured window");
  hbg__mem_release(rt, sn->status_dev, "captured status word");
  hbg__mem_release(rt, sn->heap_dev, "captured heap block");
  free(sn);
}

void hbg__captures_reap(hbg_runtime *rt) {
  hbg__capture_home *h = rt->capture_home;
  if (!h || !atomic_load(&h->n_dead))
    return;
  pthread_mutex_lock(&h->mu);
  hbg__snapshot *d = h->dead;
  h->dead = NULL;
  atomic_store(&h->n_dead, 0);
  pthread_mutex_unlock(&h->mu);
  while (d) {
    hbg__snapshot *n = d->next;
    snapshot_free(rt, d);
    d = n;
  }
}

void hbg__captures_fini(hbg_runtime *rt) {
  hbg__capture_home *h = rt->capture_home;
  if (!h)
    return;
  hbg__captures_reap(rt);
  pthread_mutex_lock(&h->mu);
  h->rt_gone = 1;
  uint32_t live = atomic_load(&h->live);
  home_unref_locked(h);
  rt->capture_home = NULL;
  if (live && !rt->rel_failed)
    hbg__error_set("hbg_runtime_destroy: %u captured graph%s holding hbg "
                   "launches still live: destroy them before the runtime "
                   "(their replays read memory the runtime owned)",
                   live, live > 1 ? "s are" : " is");
}

/* ---------------- borrowed queues ---------------- */

int hbg__borrowed_queue(hbg_runtime *rt, void *native, hbg_dev_queue **out) {
  for (uint32_t i = 0; i < rt->n_borrowed; i++)
    if (rt->borrowed[i].native == native) {
      *out = rt->borrowed[i].q;
      return 0;
    }
  uint64_t id = 0;
  if (hbg_dev_capturing(rt->dev, &id)) {
    hbg__error_set("hbg_bind_launch_on: stream %p is new to this runtime "
                   "and a capture (%llu) is running: a first launch on a "
                   "stream prepares it (device memory), which a capture "
                   "forbids; launch once on it before capturing",
                   native, (unsigned long long)id);
    return HBG_E_CAPTURING;
  }
  if (rt->n_borrowed == HBG__ARRAY_LEN(rt->borrowed)) {
    hbg__error_set("hbg_bind_launch_on: %u streams are in use by this "
                   "runtime already (hbg_runtime_stream_forget one)",
                   rt->n_borrowed);
    return HBG_E_LIMIT;
  }
  hbg_dev_queue *q = NULL;
  int rc = hbg_dev_queue_borrow(rt->dev, native, &q);
  if (rc < 0) {
    hbg__error_set("hbg_bind_launch_on: the device cannot launch on stream "
                   "%p: %s",
                   native, hbg__native_why(rt, rc));
    return rc;
  }
  rt->borrowed[rt->n_borrowed].native = native;
  rt->borrowed[rt->n_borrowed].q = q;
  rt->n_borrowed++;
  *out = q;
  return 0;
}

/* Wait for the binds last launched on q, then forget it. */
static int forget(hbg_runtime *rt, uint32_t i, const char *call) {
  hbg_dev_queue *q = rt->borrowed[i].q;
  for (uint32_t k = 0; k < rt->depth; k++) {
    hbg__slot *s = &rt->slots[k];
    if (s->last_q != q)
      continue;
    if (s->in_flight) {
      int rc = hbg_dev_event_wait(rt->dev, s->done);
      if (rc < 0) {
        hbg__error_set("%s: waiting for bind %llu launched on stream %p "
                       "failed: %s; the stream is still in use",
                       call, (unsigned long long)s->bind.seq,
                       rt->borrowed[i].native, hbg_err_name(rc));
        return rc;
      }
    }
  }
  for (uint32_t k = 0; k < rt->depth; k++)
    if (rt->slots[k].last_q == q)
      rt->slots[k].last_q = NULL;
  int rc = hbg_dev_queue_unborrow(rt->dev, q);
  hbg__release_failed(rt, rc, "queue_unborrow", "borrowed queue",
                      (uint64_t)(uintptr_t)rt->borrowed[i].native);
  rt->borrowed[i] = rt->borrowed[--rt->n_borrowed];
  return 0;
}

int hbg_runtime_stream_forget(hbg_runtime *rt, void *stream) {
  hbg__error_clear();
  HBG__RETURN_IF(!rt, HBG_E_INVAL);
  HBG__GUARD(rt, "hbg_runtime_stream_forget");
  uint64_t id = 0;
  if (hbg_dev_capturing(rt->dev, &id)) {
    hbg__error_set("hbg_runtime_stream_forget: a capture (%llu) is running "
                   "on a stream hbg launched on: forgetting a stream frees "
                   "its device state, which the capture forbids; forget it "
                   "after the capture",
                   (unsigned long long)id);
    return HBG_E_CAPTURING;
  }
  for (uint32_t i = 0; i < rt->n_borrowed; i++)
    if (rt->borrowed[i].native == stream)
      return forget(rt, i, "hbg_runtime_stream_forget");
  hbg__error_set("hbg_runtime_stream_forget: stream %p was never launched "
                 "on by this runtime (or forgotten already)",
                 stream);
  return HBG_E_NOTFOUND;
}

void hbg__borrowed_fini(hbg_runtime *rt) {
  /* Binds in flight were drained by the caller (hbg_runtime_destroy). */
  while (rt->n_borrowed)
    (void)forget(rt, rt->n_borrowed - 1, "hbg_runtime_destroy");
}

/* ---------------- captured launches ---------------- */

int hbg__capture_begin_check(hbg_runtime *rt, hbg__slot *s) {
  uint64_t id = 0;
  if (!hbg_dev_capturing(rt->dev, &id))
    return 0;
  if (rt->ops != &hbg__policy_coalesced) {
    hbg__error_set("hbg_bind_begin: a capture (%llu) is running and the "
                   "policy is %s: only coalesced binds can be captured",
                   (unsigned long long)id, rt->ops->name);
    return HBG_E_CAPTURING;
  }
  if (s->in_flight) {
    hbg__error_set("hbg_bind_begin: pipeline slot %u still holds bind %llu, "
                   "launched before the capture (%llu) and not waited for: "
                   "waiting now would break the capture; hbg_bind_wait "
                   "every bind before capturing",
                   s->index, (unsigned long long)s->bind.seq,
                   (unsigned long long)id);
    return HBG_E_CAPTURING;
  }
  if (!s->status_dev || !s->win_dev ||
      (rt->ops->arena && !s->arena.base)) {
    hbg__error_set("hbg_bind_begin: pipeline slot %u's staging went to a "
                   "bind captured earlier, and new staging is device memory "
                   "a capture forbids allocating: one capture holds at most "
                   "pipeline_depth (%u) binds",
                   s->index, rt->depth);
    return HBG_E_CAPTURING;
  }
  return 1;
}

int hbg__capture_launch(hbg_bind *b, hbg_dev_queue *lq, uint64_t id) {
  hbg_runtime *rt = b->rt;
  hbg__slot *s = b->slot;
  const char *why = NULL;
  if (rt->ops != &hbg__policy_coalesced)
    why = "only the coalesced policy launches into a capture (its bind is "
          "one window copy and the executor's launch)";
  else if (!b->win.pinned)
    why = "the bind's window outgrew the pinned arena (raise arena_bytes, "
          "or run the step once before capturing: the arena grows to it)";
  else if (s->n_heap_extra)
    why = "its inner tensors outgrew the slot's heap block (run the step "
          "2 x pipeline_depth times before capturing: a slot's heap grows "
          "at its next bind)";
  else if (b->win_flushed)
    why = "coalesce_chunk_bytes started copies of the window before the "
          "launch (set it to 0 for captured binds)";
  else if (rt->cfg.flags & HBG_CFG_NO_LAUNCH)
    why = "the runtime does not launch (HBG_CFG_NO_LAUNCH)";
  if (why) {
    hbg__error_set("hbg_bind_launch_on: bind %llu cannot be captured "
                   "(capture %llu): %s; nothing was launched or captured",
                   (unsigned long long)b->seq, (unsigned long long)id, why);
    return HBG_E_CAPTURING;
  }
  int rc = hbg__launch_begin(b);
  if (rc < 0)
    return hbg__latch(b, rc);
  uint64_t t1 = hbg__rt_now(rt);
  rc = hbg__finish_window(b);
  if (rc < 0)
    return hbg__latch(b, rc);
  hbg__snapshot *sn = calloc(1, sizeof *sn);
  if (!sn)
    return hbg__latch(b, HBG_E_NOMEM);
  hbg__capture_home *h = rt->capture_home;
  *sn = (hbg__snapshot){.home = h,
                        .arena = s->arena.base,
                        .win_dev = s->win_dev,
                        .status_dev = s->status_dev,
                        .heap_dev = s->heap_dev,
                        .capture_id = id};
  /* The graph owns the snapshot from here: on failure below the nodes
   * already captured still name its memory, so it is never reused. */
  pthread_mutex_lock(&h->mu);
  h->refs++;
  atomic_fetch_add(&h->live, 1);
  pthread_mutex_unlock(&h->mu);
  rc = hbg_dev_capture_retain(rt->dev, lq, sn, snapshot_destroy);
  if (rc < 0) {
    pthread_mutex_lock(&h->mu);
    atomic_fetch_sub(&h->live, 1);
    h->refs--;
    pthread_mutex_unlock(&h->mu);
    free(sn);
    hbg__error_set("hbg_bind_launch_on: tying bind %llu's snapshot to the "
                   "caller's graph (capture %llu) failed: %s; nothing was "
                   "captured",
                   (unsigned long long)b->seq, (unsigned long long)id,
                   hbg_err_name(rc));
    return hbg__latch(b, rc);
  }
  s->arena.base = NULL;
  s->arena.cap = 0;
  s->win_dev = 0;
  s->win_cap = 0;
  s->status_dev = 0;
  s->heap_dev = 0;
  s->heap_cap = 0;
  rc = hbg_dev_copy_h2d_async(rt->dev, lq, sn->win_dev, b->win.p,
                              (size_t)b->win.len);
  if (rc == 0) {
    b->st.window.bytes += b->win.len;
    b->st.window.copies++;
    b->st.h2d_bytes += b->win.len;
    b->st.h2d_copies++;
    b->st.window_upload_ns += hbg__rt_now(rt) - t1;
    hbg__launch_counted(b);
    hbg_dev_launch_desc d;
    hbg__launch_desc(b, sn->win_dev, sn->status_dev, &d);
    d.flags |= HBG_DEV_LAUNCH_CAPTURED;
    b->t_launch_start = hbg__rt_now(rt);
    rc = hbg_dev_launch(rt->dev, lq, &d);
  }
  if (rc < 0) {
    hbg__error_set("hbg_bind_launch_on: capturing bind %llu (capture %llu) "
                   "failed: %s: %s; the caller's graph may hold part of it: "
                   "end and discard the capture",
                   (unsigned long long)b->seq, (unsigned long long)id,
                   hbg_err_name(rc), hbg__native_why(rt, rc));
    return hbg__latch(b, rc);
  }
  /* Nothing runs now: the bind is complete as far as the host goes. */
  b->state = HBG__BIND_LAUNCHED;
  b->captured = 1;
  return 0;
}
