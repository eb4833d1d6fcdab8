/* Private state of the sim device, shared by the files of src/device/sim. */
#ifndef HBG_DEVICE_SIM_SIM_INTERNAL_H
#define HBG_DEVICE_SIM_SIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "common/ranges.h"
#include "device/sim/sim.h"
#include "exec/exec.h"

#define HBG__SIM_DEV_ALIGN 256u
#define HBG__SIM_OFF_BITS 48
#define HBG__SIM_OFF_MASK ((UINT64_C(1) << HBG__SIM_OFF_BITS) - 1)
#define HBG__SIM_TAG_BASE (UINT64_C(0xD5) << 56)
#define HBG__SIM_MEM_MIN (UINT64_C(64) << 10)
#define HBG__SIM_MEM_MAX (UINT64_C(1) << 40)
/* Imported host ranges (mem_import) take device offsets from here to the
 * top of the offset space, apart from every heap (mem= is at most
 * HBG__SIM_MEM_MAX). */
#define HBG__SIM_IMP_BASE HBG__SIM_MEM_MAX
#define HBG__SIM_IMP_END (UINT64_C(1) << HBG__SIM_OFF_BITS)
#define HBG__SIM_CHUNK_MIN UINT64_C(256)
#define HBG__SIM_CHUNK_MAX (UINT64_C(256) << 20)

/* The host registry is a range table (src/common/ranges.h) using aux for
 * the mapped length and flags for HBG__SIM_REG_*; the heap's live and free
 * extents are treaps (hbg__stree below), the live ones using aux for the
 * reserved span. */
enum { HBG__SIM_REG_OWNED = 1u << 0, HBG__SIM_REG_LOCKED = 1u << 1 };

/* A WAIT command holds its queue until ev's record ev_seq has completed
 * (queue_wait_event); it takes no executor. */
enum {
  HBG__SIM_CMD_COPY,
  HBG__SIM_CMD_LAUNCH,
  HBG__SIM_CMD_EVENT,
  HBG__SIM_CMD_WAIT
};

/* Launches run on a pool of scheduler threads, grown while launches wait
 * and none is idle, up to one per queue and at most this many. */
#define HBG__SIM_SCHED_MAX 64u

typedef struct hbg__sim_queue hbg__sim_queue;
typedef struct hbg__sim_event hbg__sim_event;

/* One unit of work for the copy engine or the scheduler. A command with
 * q == NULL lives on the submitting thread's stack and is completed by
 * setting done; a queued command is owned by its queue. */
typedef struct hbg__sim_cmd {
  struct hbg__sim_cmd *next;     /* queue FIFO */
  struct hbg__sim_cmd *run_next; /* engine or scheduler run list */
  int kind;
  _Atomic int done; /* set by the executor; waiters may poll it unlocked */
  int err;
  int to_device;
  const char *name;
  uint8_t *dst;
  const uint8_t *src;
  size_t bytes;
  hbg_devptr dev_addr;
  uint64_t model_ns;          /* modelled duration; 0 = none */
  _Atomic uint64_t deadline;  /* set by the engine when service starts (only
                                 when model_ns): completion not before it */
  /* clock=virtual: the device's clock when it was submitted (by the
   * submitter), the real time its executor took (by the executor) and the
   * virtual time it completed (under mu, before done) */
  uint64_t submit_v, run_ns, end_v;
  hbg__sim_queue *q;
  hbg__sim_event *ev;
  uint64_t ev_seq;
  hbg_dev_launch_desc desc;
} hbg__sim_cmd;

struct hbg__sim_queue {
  hbg__sim *s;
  hbg__sim_cmd *head, *tail; /* pending; head may be running */
  int busy;                  /* head handed to the engine or scheduler */
  int err;                   /* first asynchronous error, until queue_sync */
  uint64_t v_done;           /* clock=virtual: when its last command ended */
  hbg__sim_queue *prev, *next;
};

struct hbg__sim_event {
  hbg__sim *s;
  uint64_t rec;  /* sequence of the latest record */
  uint64_t done; /* highest completed record sequence */
  uint64_t done_ns; /* when record `done` completed (CLOCK_MONOTONIC) */
  uint64_t done_v;  /* the same on the virtual clock (clock=virtual) */
  int refs;      /* the handle plus pending records and waits */
  hbg__sim_event *prev, *next;
};

typedef struct hbg__sim_counters {
  _Atomic uint64_t h2d_copies, h2d_bytes;
  _Atomic uint64_t d2h_copies, d2h_bytes;
  _Atomic uint64_t async_copies, async_degraded;
  _Atomic uint64_t pinned_direct, bounce_chunks, handshakes;
  /* waits for a pinned copy or a bounce chunk: ended while polling, slept
   * on done_cv (the rest found the command done when they took mu) */
  _Atomic uint64_t spin_hits, sleeps;
  _Atomic uint64_t mem_allocs, mem_frees, mem_in_use;
  _Atomic uint64_t host_allocs, host_frees, host_in_use;
  _Atomic uint64_t launches;
  _Atomic uint64_t mlock_failed;
  _Atomic uint64_t modelled, modelled_ns;
} hbg__sim_counters;

/* A treap of extents keyed by start (sim_tree.c): O(log n) expected
 * insert, remove, floor and first-fit. */
typedef struct hbg__snode {
  uint64_t start, len, aux;
  uint64_t max_len; /* longest len in the subtree */
  uint32_t l, r;    /* children, 0 = none */
  uint32_t prio;
  uint32_t pad;
} hbg__snode;

typedef struct hbg__stree {
  hbg__snode *v; /* node pool, v[0] unused */
  uint32_t root, n, cap, used, free_head;
  uint64_t seed;
} hbg__stree;

/* Room for n nodes in the tree (so insertions up to n cannot fail).
 * @return 0 or HBG_E_NOMEM. */
int hbg__stree_reserve(hbg__stree *t, uint32_t n);
void hbg__stree_free(hbg__stree *t);
/* Capacity must have been reserved; starts are unique. */
void hbg__stree_insert(hbg__stree *t, uint64_t start, uint64_t len,
                       uint64_t aux);
/* @return 0 and the removed node in *out, or -1 if no node starts there. */
int hbg__stree_remove(hbg__stree *t, uint64_t start, hbg__snode *out);
/* The node with the greatest start <= key / the least start > key / the
 * least start whose len >= len; NULL if none. Valid until the next
 * change. */
const hbg__snode *hbg__stree_floor(const hbg__stree *t, uint64_t key);
const hbg__snode *hbg__stree_after(const hbg__stree *t, uint64_t key);
const hbg__snode *hbg__stree_first_fit(const hbg__stree *t, uint64_t len);

struct hbg__sim {
  hbg_device *dev;
  uint64_t tag;
  uint64_t chunk;
  uint32_t workers;
  uint64_t spin_ns; /* bounded polling before sleeping; 0 = always sleep */
  hbg__sim_model model; /* cost model (sim_model.c); all zero = none */
  /* clock=virtual: modelled costs are not slept. The device's clock is
   * CLOCK_MONOTONIC + v_off; a caller that waits for the device has v_off
   * set so that its wait took the modelled time instead of the real one
   * (hbg__sim_vreach). eng_v (under mu): when the copy engine is free on
   * that clock. */
  int vclock;
  _Atomic int64_t v_off;
  uint64_t eng_v;
  const char *profile;  /* the preset it started from */

  /* device heap */
  uint8_t *heap;
  uint64_t heap_bytes;
  pthread_rwlock_t heap_lock;
  hbg__stree live;     /* start = offset, len = requested, aux = span */
  hbg__stree free_ext; /* start = offset, len = bytes; coalesced */
  uint64_t heap_free;
  /* imported host ranges, under heap_lock too: start = device offset
   * (HBG__SIM_IMP_BASE and up, with the host address's low 8 bits), len =
   * bytes, aux = the caller's host address; each keeps its 256-byte
   * aligned span plus a 256-byte gap from the next */
  hbg__rtab imports;

  /* registered (pinned) host memory */
  pthread_mutex_t reg_mu;
  hbg__rtab reg; /* start = address, len = bytes, aux = mapped length */

  /* engine, scheduler, queues and events: all under mu */
  pthread_mutex_t mu;
  pthread_cond_t eng_cv, sched_cv, done_cv;
  hbg__sim_cmd *eng_head, *eng_tail;
  _Atomic uint64_t eng_posted; /* moves with every command handed to the
                                  engine and with the stop request */
  _Atomic int eng_asleep;      /* the engine sleeps on eng_cv (it stays set
                                  until a woken engine has taken mu) */
  hbg__sim_cmd *sched_head, *sched_tail;
  uint32_t sched_idle; /* scheduler threads waiting for a launch */
  uint32_t n_sched;    /* scheduler threads started */
  uint32_t n_queues;   /* live queues: most launches that can run at once */
  hbg__sim_queue *queues;
  hbg__sim_event *events;
  int stop;
  pthread_t eng_thread, sched_thread[HBG__SIM_SCHED_MAX];

  pthread_mutex_t bounce_mu; /* one staged copy at a time */
  uint8_t *bounce[2];
  size_t bounce_map;
  int bounce_locked;

  hbg__exec *exec;
  hbg__sim_counters st;
};

#define HBG__SIM_INC(s, f, v)                                                  \
  atomic_fetch_add_explicit(&(s)->st.f, (uint64_t)(v), memory_order_relaxed)
#define HBG__SIM_DEC(s, f, v)                                                  \
  atomic_fetch_sub_explicit(&(s)->st.f, (uint64_t)(v), memory_order_relaxed)
#define HBG__SIM_GET(s, f)                                                     \
  atomic_load_explicit(&(s)->st.f, memory_order_relaxed)

/* sim_model.c */
/* Look up a preset by name (n bytes, not NUL-terminated).
 * @return 0 and *model, *name (static), or HBG_E_NOTFOUND. */
int hbg__sim_profile(const char *p, size_t n, hbg__sim_model *model,
                     const char **name);
/* Parse one cost key into *m; *bit gets the key's override bit.
 * @return 1 handled, 0 not a cost key, HBG_E_INVAL bad value. */
int hbg__sim_model_key(const char *key, size_t klen, const char *val,
                       size_t vlen, hbg__sim_model *m, uint32_t *bit);
/* Copy the keys of over whose bit is set in mask into m. */
void hbg__sim_model_apply(hbg__sim_model *m, const hbg__sim_model *over,
                          uint32_t mask);
/* @return the modelled duration of one copy command: a pinned copy
 * (pageable == 0) or one staging chunk (first: the copy's first chunk,
 * which carries the fixed cost). 0 when nothing is modelled. */
uint64_t hbg__sim_model_copy(const hbg__sim_model *m, uint64_t bytes,
                             int pageable, int first);
/* Sleep until the CLOCK_MONOTONIC time deadline_ns (absolute), with the
 * calling thread's timer slack at its minimum for the sleep. */
void hbg__sim_sleep_until(uint64_t deadline_ns);
/* Account a modelled delay of ns taken by the calling op: sleep to t0 + ns,
 * or with clock=virtual advance the device's clock by ns (no-op when ns is
 * 0). */
void hbg__sim_model_delay(hbg__sim *s, uint64_t t0, uint64_t ns);
/* The device's clock: CLOCK_MONOTONIC, plus v_off with clock=virtual. */
uint64_t hbg__sim_vnow(hbg__sim *s);
/* clock=virtual: a caller that started waiting at v0 (device clock) for
 * work that completed at target leaves its wait at max(v0, target) on the
 * device's clock, whatever real time the wait took. No-op otherwise. */
void hbg__sim_vreach(hbg__sim *s, uint64_t v0, uint64_t target);

/* sim_engine.c */
/* Wait until no queue has pending work (a device-wide synchronise). */
void hbg__sim_drain_all(hbg__sim *s);

/* sim_heap.c */
int hbg__sim_heap_init(hbg__sim *s, uint64_t bytes);
void hbg__sim_heap_fini(hbg__sim *s);
int hbg__sim_mem_alloc(hbg_device *dev, size_t bytes, hbg_devptr *out);
int hbg__sim_mem_free(hbg_device *dev, hbg_devptr p);
int hbg__sim_mem_import(hbg_device *dev, uint64_t addr, size_t bytes,
                        hbg_devptr *out);
int hbg__sim_mem_unimport(hbg_device *dev, hbg_devptr p);

/* sim_host.c */
int hbg__sim_host_init(hbg__sim *s);
void hbg__sim_host_fini(hbg__sim *s);
int hbg__sim_host_alloc(hbg_device *dev, size_t bytes, void **out);
int hbg__sim_host_free(hbg_device *dev, void *p);
int hbg__sim_host_register(hbg_device *dev, void *p, size_t bytes);
int hbg__sim_host_unregister(hbg_device *dev, void *p);
/* @return non-zero when [p, p+bytes) lies inside one registered range. */
int hbg__sim_is_pinned(hbg__sim *s, const void *p, size_t bytes);
/* mlock, counting a failure (the range stays registered either way).
 * @return 1 locked, 0 not. */
int hbg__sim_try_lock(hbg__sim *s, void *p, size_t bytes);

/* sim_engine.c */
int hbg__sim_engine_start(hbg__sim *s);
/* Drain every queue, stop and join the threads, free queues and events. */
void hbg__sim_engine_stop(hbg__sim *s);
int hbg__sim_copy_h2d(hbg_device *dev, hbg_devptr dst, const void *src,
                      size_t bytes);
int hbg__sim_copy_d2h(hbg_device *dev, void *dst, hbg_devptr src,
                      size_t bytes);
int hbg__sim_queue_create(hbg_device *dev, hbg_dev_queue **out);
int hbg__sim_queue_destroy(hbg_device *dev, hbg_dev_queue *q);
int hbg__sim_copy_h2d_async(hbg_device *dev, hbg_dev_queue *q, hbg_devptr dst,
                            const void *src, size_t bytes);
int hbg__sim_queue_sync(hbg_device *dev, hbg_dev_queue *q);
int hbg__sim_queue_borrow(hbg_device *dev, void *native, hbg_dev_queue **out);
int hbg__sim_queue_unborrow(hbg_device *dev, hbg_dev_queue *q);
int hbg__sim_event_create(hbg_device *dev, hbg_dev_event **out);
int hbg__sim_event_destroy(hbg_device *dev, hbg_dev_event *ev);
int hbg__sim_event_record(hbg_device *dev, hbg_dev_event *ev,
                          hbg_dev_queue *q);
int hbg__sim_event_query(hbg_device *dev, hbg_dev_event *ev);
int hbg__sim_queue_wait_event(hbg_device *dev, hbg_dev_queue *q,
                              hbg_dev_event *ev);
int hbg__sim_event_wait(hbg_device *dev, hbg_dev_event *ev);
int hbg__sim_event_elapsed(hbg_device *dev, hbg_dev_event *start,
                           hbg_dev_event *end, uint64_t *ns);
int hbg__sim_launch(hbg_device *dev, hbg_dev_queue *q,
                    const hbg_dev_launch_desc *l);

#endif
