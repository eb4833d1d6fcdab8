/*
 * Core layer (internal): runtime, pipeline slots, binds, staging arena,
 * retained device state; the upload policies' ops are in policy/policy.h.
 *
 * Ownership: the runtime owns the device (unless the caller passed one), the
 * graph cache (host Definitions), the retained Definition buffers
 * (coalesced) and the slots. Each slot owns its queue, completion event,
 * pinned arena, retained per-{key, occurrence} buffers (pinned-eager), the
 * retained bulk block (pinned-bulk), window/heap/status device buffers and
 * the embedded bind. Everything is
 * released at teardown in reverse order of creation, before the device is
 * closed.
 */
#ifndef HBG_CORE_CORE_H
#define HBG_CORE_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "core/deps.h"
#include "core/map.h"
#include "common/ranges.h"
#include "graph/graph.h"

/* ---- one thread at a time (guard.c) ---- */

/* Which thread is inside a public call that changes the runtime: its id
 * (pthread_self), 0 when none; the name of its outermost call (NULL while
 * it is being taken or given back); how deeply the owner has re-entered
 * (a record or trace callback calling back into hbg on the same thread).
 * depth is read and written by the owner only. */
typedef struct hbg__guard {
  _Atomic uintptr_t owner;
  _Atomic(const char *) call;
  uint32_t depth;
} hbg__guard;

/* HBG_E_BUSY, with hbg_last_error() naming `name` and the call the other
 * thread is in (the error path of hbg__guard_enter). */
int hbg__guard_busy(const hbg__guard *g, const char *name);
/* Enter `name`, waiting (sleeping 20 us at a time) while another thread is
 * inside a call: for the calls that release and cannot fail. */
void hbg__guard_enter_wait(hbg__guard *g, const char *name);

/* Enter public call `name` on this thread: 1, or 0 (nothing changed) when
 * another thread is inside a call on the same runtime. The acquire here and
 * the release in hbg__guard_exit order one thread's use of the runtime
 * before the next one's, so a runtime may move between threads. */
static inline int hbg__guard_try(hbg__guard *g, const char *name) {
  const uintptr_t self = (uintptr_t)pthread_self();
  /* Nested: only this thread ever stores its own id, so a plain load can
   * tell, without the compare-and-swap's cost. */
  if (atomic_load_explicit(&g->owner, memory_order_relaxed) == self) {
    g->depth++;
    return 1;
  }
  uintptr_t cur = 0;
  if (atomic_compare_exchange_strong_explicit(
          &g->owner, &cur, self, memory_order_acquire, memory_order_relaxed)) {
    atomic_store_explicit(&g->call, name, memory_order_relaxed);
    return 1;
  }
  return 0;
}

/* hbg__guard_try as 0, or HBG_E_BUSY with the message. */
static inline int hbg__guard_enter(hbg__guard *g, const char *name) {
  return hbg__guard_try(g, name) ? 0 : hbg__guard_busy(g, name);
}

static inline void hbg__guard_exit(hbg__guard *g) {
  if (g->depth) {
    g->depth--;
    return;
  }
  atomic_store_explicit(&g->call, NULL, memory_order_relaxed);
  atomic_store_explicit(&g->owner, 0, memory_order_release);
}

/* A guard held until the enclosing block is left, on every return path. */
typedef struct hbg__guard_scope {
  hbg__guard *g;
} hbg__guard_scope;

static inline void hbg__guard_scope_end(hbg__guard_scope *s) {
  if (s->g)
    hbg__guard_exit(s->g);
}

/* First statement of a guarded public call (after its NULL checks):
 * return HBG_E_BUSY when another thread holds rt, else hold it until the
 * function returns. */
#define HBG__GUARD_(rt, name, ret)                                               hbg__guard_scope hbg__gs __attribute__((cleanup(hbg__guard_scope_end))) = {        NULL};                                                                     do {                                                                             int hbg__grc = hbg__guard_enter(&(rt)->guard, (name));                         if (hbg__grc < 0)                                                                return ret;                                                                  hbg__gs.g = &(rt)->guard;                                                    } while (0)
#define HBG__GUARD(rt, name) HBG__GUARD_(rt, name, hbg__grc)
/* The same for a release that cannot fail: waits for the guard instead. */
#define HBG__GUARD_WAIT(rt, name)                                              \
  hbg__guard_scope hbg__gs                                                     \
      __attribute__((cleanup(hbg__guard_scope_end), unused)) = {&(rt)->guard}; \
  hbg__guard_enter_wait(&(rt)->guard, (name))

/* ---- small maps ---- */


/* A cached graph's place in the least-recently-used order (heap-allocated:
 * map entries move when the map grows or deletes). */
typedef struct hbg__lru {
  uint64_t full_key;
  struct hbg__lru *prev, *next; /* prev: more recently used */
  int resident;                 /* holds a reference on its resident copy */
} hbg__lru;

/* full key -> recorded graph */
typedef struct hbg__graph {
  hbg__mkey k; /* k1 = full key */
  hbg__def *def;
  hbg__lru *lru;
  uint64_t rec_seq; /* the bind that recorded def (HBG_RECORD_PER_BIND) */
} hbg__graph;

/* {graph key, occurrence} -> retained device buffer (two fields, never a
 * packed key) */
typedef struct hbg__retained {
  hbg__mkey k; /* k1 = full key, k2 = occurrence */
  hbg_devptr dev;
  uint64_t cap;
} hbg__retained;

/* content hash -> Definition resident on the device */
typedef struct hbg__resident {
  hbg__mkey k; /* k1 = content hash, k2 = size */
  hbg_devptr dev;
  uint32_t refs; /* cached graphs whose Definition this is */
} hbg__resident;

/* Per slot: how many occurrences of a key it retains buffers for. */
typedef struct hbg__rkey {
  hbg__mkey k; /* k1 = full key */
  uint32_t n_occ;
} hbg__rkey;

/* Device memory dropped from a cache while binds that may read it are open
 * or in flight: freed once every slot in the mask has been reclaimed. */
typedef struct hbg__retired {
  hbg_devptr dev;
  uint64_t slots; /* bit i: slot i may still read it */
} hbg__retired;


/* ---- staging arena (pinned, retained, per slot) ---- */

typedef struct hbg__arena {
  uint8_t *base;       /* pinned host block, NULL when none */
  uint64_t cap;
  uint64_t used;       /* bump cursor of the current bind */
  uint64_t high_water; /* bytes the last bind wanted (incl. what overflowed) */
} hbg__arena;

/* An image staged in host memory, waiting for upload. */
typedef struct hbg__pending {
  uint8_t *host;       /* staging memory */
  uint32_t size;
  uint32_t entry_off;  /* window entry to patch */
  uint32_t def_off;    /* offset of the inline Definition, 0 if none */
  uint32_t heap_owned; /* host is malloc'd (fallback / deferred) */
  uint32_t def_size;   /* bytes of the inline Definition */
  uint64_t full_key;
  uint32_t occurrence;
  uint32_t uploaded;
  uint64_t blk_off;    /* pinned-bulk: offset in the slot's bulk block */
} hbg__pending;

/* A growable host byte buffer. */
typedef struct hbg__buf {
  uint8_t *p;
  uint64_t len, cap;
  int pinned; /* p lives in the slot's arena */
} hbg__buf;

/* Per-bind occurrence counter, keyed by full key. */
typedef struct hbg__occ {
  hbg__mkey k; /* k1 = full key */
  uint32_t count;
} hbg__occ;

enum { HBG__BIND_IDLE = 0, HBG__BIND_OPEN, HBG__BIND_LAUNCHED };

typedef struct hbg__slot hbg__slot;
typedef struct hbg__snapshot hbg__snapshot;         /* core/capture.c */
typedef struct hbg__capture_home hbg__capture_home; /* core/capture.c */
typedef struct hbg__policy_ops hbg__policy_ops; /* core/policy/policy.h */

struct hbg_bind {
  hbg_runtime *rt;
  hbg__slot *slot;
  int state;
  int fatal;
  int captured; /* launched into the caller's capture: nothing ran */
  uint64_t seq;

  hbg__buf win;      /* task window being built (host) */
  uint32_t *index;   /* window entry offsets */
  uint32_t n_tasks, index_cap;
  uint64_t win_flushed; /* coalesced chunks already on their way */

  hbg__pending *pend;
  uint32_t n_pend, pend_cap;
  hbg__map occ;      /* full key -> occurrences in this bind */
  uint64_t heap_used; /* bytes of the slot heap claimed */
  uint64_t sub_bytes; /* coalesced: Submission bytes inside the window */
  uint64_t bulk_len;  /* pinned-bulk: bytes of the bind's packed images */
  uint32_t err_entry, err_node; /* device status location (HBG_TASK_NONE) */
  char timeout_msg[320]; /* where a bind past its deadline waited */
  /* The window's sizing for the launch descriptor (HBG_DEV_LAUNCH_SIZED):
   * dependencies and graph nodes of the published entries, the most
   * kernel scratch (floats) one of their calls needs; and
   * (HBG_DEV_LAUNCH_SIZED_IMAGES) the bytes and number of the distinct
   * Definitions they name, their boundary tensors and scalars. */
  uint64_t sz_deps, sz_nodes, sz_kscr;
  uint64_t sz_def_bytes, sz_defs, sz_btensors, sz_bscalars;
  hbg__deps deps; /* HBG_DEPS_INFERRED: the live reads and writes */
  uint64_t *bext;    /* a graph submission's boundary extents, then the
                        alias check's scratch (2 u64 per tensor); kept for
                        the next submission */
  uint32_t bext_cap;

  /* timing and counters */
  uint64_t t_begin, t_launch_start, nested_upload_ns;
  hbg_bind_stats st;
};

struct hbg__slot {
  uint32_t index;
  hbg_dev_queue *q;
  hbg_dev_queue *last_q; /* the queue its last bind launched on (q, or a
                            caller's); its done event was recorded there */
  hbg_dev_event *done;
  hbg_dev_event *start; /* recorded right before each launch; NULL where
                           the device keeps no event timer */
  int in_flight;       /* launched, completion not yet observed */
  int undrained;       /* an open bind ended while async copies from the
                          arena may still run: nothing is reclaimed until
                          a drain succeeds */
  int timed;           /* the in-flight launch has start and done recorded */
  hbg__arena arena;
  hbg__map retained;   /* pinned-eager buffers */
  hbg__map rkeys;      /* pinned-eager: full key -> occurrences retained */
  hbg_devptr *deferred; /* deferred-policy buffers freed at completion */
  uint32_t n_deferred, deferred_cap;
  hbg_devptr win_dev;  uint64_t win_cap;
  uint64_t win_high_water; /* coalesced: window bytes the last bind wanted */
  hbg_devptr heap_dev; uint64_t heap_cap;
  /* pinned-bulk: one block per slot holding a bind's images, sized at a
   * bind's start from the last bind's high-water mark */
  hbg_devptr bulk_dev; uint64_t bulk_cap, bulk_high_water;
  hbg_devptr *heap_extra; uint32_t n_heap_extra, heap_extra_cap;
  uint64_t heap_high_water;
  hbg_devptr status_dev;
  hbg_bind bind;
};

/* hbg_runtime.bufs kinds */
enum { HBG__BUF_ALLOC = 0, HBG__BUF_IMPORT = 1 };

struct hbg_runtime {
  hbg_config cfg;
  const hbg__policy_ops *ops; /* hbg__policies[cfg.policy] */
  hbg_device *dev;
  int own_dev;
  hbg_dev_caps caps;
  uint32_t depth;
  hbg__slot *slots;
  uint32_t next_slot;
  hbg__slot *last_launched; /* the slot of the latest launched bind */
  uint64_t bind_seq;
  int recording;     /* a record callback is running (any bind) */
  hbg__map graphs;   /* full key -> hbg__graph, at most graph_max */
  hbg__lru *lru_head, *lru_tail; /* most / least recently used */
  uint32_t graph_max;
  hbg__retired *retired;
  uint32_t n_retired, retired_cap;
  hbg__map resident; /* hash -> hbg__resident (coalesced) */
  hbg__rtab bufs;    /* live user buffers, for the submit checks: the
                        ranges of hbg_buffer_alloc (kind HBG__BUF_ALLOC)
                        and hbg_buffer_import (HBG__BUF_IMPORT: the
                        caller's memory, forgotten, never freed) */
  uint32_t buf_hint[32]; /* per argument position: index in bufs of the
                            range the last tensor there was in */
  hbg_trace_fn trace_fn;
  void *trace_user;
  /* failed releases since hbg_runtime_destroy began (release.c) */
  uint32_t rel_failed;
  char rel_first[256]; /* the first one, in words */
  hbg__guard guard; /* one thread at a time (guard.c) */
  /* Queues the caller lent (hbg_bind_launch_on), wrapped once each, and
   * the home of captured binds' snapshots (capture.c). */
  struct {
    void *native;
    hbg_dev_queue *q;
  } borrowed[HBG_DEV_BORROWED_MAX];
  uint32_t n_borrowed;
  hbg__capture_home *capture_home;
};


/* arena */
int hbg__arena_reserve(hbg_runtime *rt, hbg__slot *s, uint64_t cap);
void hbg__arena_release(hbg_runtime *rt, hbg__slot *s);
/* Bump-allocate len bytes with the device's alignment/padding rules.
 * @return pointer or NULL when it does not fit (the need is still counted
 * in high_water). */
void *hbg__arena_alloc(const hbg_dev_caps *caps, hbg__arena *a, uint64_t len);
uint64_t hbg__arena_piece(const hbg_dev_caps *caps, uint64_t len);

/* upload / slot internals shared by bind.c and runtime.c */
/* Check an explicit config (struct size, hbg_config_init's verdict on the
 * HBG_* variables, field ranges). @return 0 or HBG_E_INVAL, with the
 * culprit in hbg_last_error(). */
int hbg__config_check(const hbg_config *cfg);

int hbg__slot_init(hbg_runtime *rt, hbg__slot *s, uint32_t index);
void hbg__slot_fini(hbg_runtime *rt, hbg__slot *s);
int hbg__slot_reclaim(hbg_runtime *rt, hbg__slot *s);
/* Wait until the device is done with everything queued on the slot; when
 * the queue cannot be synchronised, wait on a completion event instead.
 * @return 0 when the slot is known to be idle, else the error. */
int hbg__slot_drain(hbg_runtime *rt, hbg__slot *s);
void hbg__bind_reset(hbg_bind *b);

/* graph cache (cache.c) */
/* Insert a recorded graph as the most recently used. @return 0, or
 * HBG_E_NOMEM (the caller still owns def). */
int hbg__graph_insert(hbg_runtime *rt, uint64_t fk, hbg__def *def,
                      hbg__graph **out);
void hbg__lru_touch(hbg_runtime *rt, hbg__lru *n);
/* Evict least recently used graphs until one more fits; device memory a
 * bind may still read is retired, not freed. @return how many. */
uint32_t hbg__graph_make_room(hbg_runtime *rt);
/* Replace gr's host Definition with def (recorded again: HBG_RECORD_PER_BIND)
 * and free the old one. Device-side state stays: a resident Definition
 * (coalesced) is kept when def has the same content; otherwise gr's
 * reference on it is dropped (retired once no bind may read it) and the
 * policy uploads def on its next use.
 * @return 0, or HBG_E_NOMEM (no room to retire the resident copy: nothing
 * changed, def is the caller's). */
int hbg__graph_redefine(hbg_runtime *rt, hbg__graph *gr, hbg__def *def);
/* Coalesced: count gr's reference on its resident Definition (once). */
int hbg__resident_ref(hbg_runtime *rt, hbg__graph *gr);
/* Pinned-eager: slot s retains a buffer for occurrence occ of fk. */
int hbg__retained_note(hbg__slot *s, uint64_t fk, uint32_t occ);
/* Pinned-eager: free the slot's buffers for occurrences of a key past the
 * count this bind used. */
void hbg__retained_trim(hbg_bind *b);
/* Drop every cached graph (teardown). */
void hbg__graphs_clear(hbg_runtime *rt);
/* Slot s no longer reads retired memory: free what nothing else may read. */
void hbg__retired_release(hbg_runtime *rt, hbg__slot *s);

/* The time the core's phases are measured in: the device's clock, which
 * is CLOCK_MONOTONIC unless the device models its waits on a virtual
 * clock (sim clock=virtual). */
static inline uint64_t hbg__rt_now(const hbg_runtime *rt) {
  return hbg_dev_clock_ns(rt->dev);
}

/* The device's own words about its last failure (valid until the next
 * device call), else rc's (release.c). */
const char *hbg__native_why(hbg_runtime *rt, int rc);

/* releases (release.c): a failed release is final, the caller forgets what
 * it named; what names it in the teardown report ("window buffer"). */
void hbg__release_failed(hbg_runtime *rt, int rc, const char *call,
                         const char *what, uint64_t addr);
void hbg__mem_release(hbg_runtime *rt, hbg_devptr d, const char *what);
void hbg__host_release(hbg_runtime *rt, void *p, const char *what);

/* launching (bind.c), shared with the captured launch (capture.c) */
/* Latch rc as b's fatal error. @return rc. */
int hbg__latch(hbg_bind *b, int rc);
/* Orchestration is over: time it and run the policy's launch hook. */
int hbg__launch_begin(hbg_bind *b);
/* Write the window's index and header; make the device window hold it. */
int hbg__finish_window(hbg_bind *b);
/* Fill the stats a launched bind reports. */
void hbg__launch_counted(hbg_bind *b);
void hbg__launch_desc(const hbg_bind *b, hbg_devptr window, hbg_devptr status,
                      hbg_dev_launch_desc *d);
/* A slot's status word, zeroed (runtime.c). */
int hbg__status_word_new(hbg_runtime *rt, hbg__slot *s);

/* borrowed queues and captured launches (capture.c) */
int hbg__capture_home_new(hbg_runtime *rt);
/* Free the snapshots whose graphs are gone. */
void hbg__captures_reap(hbg_runtime *rt);
/* Teardown: reap, and leave the home to the snapshots still live. */
void hbg__captures_fini(hbg_runtime *rt);
/* Snapshots whose graph lives (retired memory is kept meanwhile). */
uint32_t hbg__captures_live(const hbg_runtime *rt);
/* The runtime's wrapper of the caller's queue native, made on first use. */
int hbg__borrowed_queue(hbg_runtime *rt, void *native, hbg_dev_queue **out);
void hbg__borrowed_fini(hbg_runtime *rt);
/* hbg_bind_begin: @return 0 (no capture running), 1 (one is: the slot is
 * usable without device calls), or HBG_E_CAPTURING (it is not). */
int hbg__capture_begin_check(hbg_runtime *rt, hbg__slot *s);
/* hbg_bind_launch_on on a queue being captured (capture id). */
int hbg__capture_launch(hbg_bind *b, hbg_dev_queue *lq, uint64_t id);

/* tracing */
void hbg__trace(hbg_runtime *rt, uint32_t track, const char *name,
                uint64_t start, uint64_t end, uint64_t bytes, uint64_t seq);

#endif
