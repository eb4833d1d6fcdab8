/*
 * The executors' scheduling cores, written once for the CPU and the GPU
 * (internal). Plain C in the common subset of C11, C++17 and CUDA, like
 * kern_src.h; freestanding: <stdint.h>, <stddef.h>, hbg_image.h. Two cores
 * over the same model (a window entry waits for its dependencies, a graph
 * node for its producers, counted with atomics):
 *
 * - hbg__sched_* (first): what the sim's executor (src/exec/exec.c) drives
 *   under its mutex, several items per lock round trip. All state lives in
 *   one block the caller provides, of hbg__sched_bytes(n_tasks, n_deps,
 *   n_nodes) bytes (8-aligned), known once the window and its Definitions
 *   are validated; nothing here allocates. An item is one ordinary task
 *   (node HBG__SCHED_NONE) or one node of a graph entry: (task << 32) |
 *   node. A node becomes ready when its producers' count, incremented
 *   atomically from the zero hbg__sched_init leaves, reaches its fan-in
 *   row's width (a task: its dependency count reaches zero), which one
 *   increment alone observes; so each item is pushed exactly once. One
 *   queue of n_items slots: a push reserves its slot with an atomic add on
 *   the tail and publishes the item with a release store; a pop claims the
 *   head with compare-and-swap and waits (briefly) until its slot is
 *   published. With atomics, after hbg__sched_start, any number of threads
 *   may call hbg__sched_pop, hbg__sched_done and hbg__sched_fail at once;
 *   an includer that calls the core under one lock defines
 *   HBG__SCHED_SERIAL (the sim's exec.c does) and gets plain loads and
 *   stores behind the same macros.
 * - hbg__disp_* (second, below): what the device executor
 *   (src/device/cuda/devcode/exec.c) runs on a GPU's warps and on the
 *   stand-in's CTA threads: no queue head every worker polls, the
 *   finishing worker keeping one newly ready item, fan-out split over a
 *   worker's lanes.
 *
 * The atomics are macros (HBG__SA_*): CUDA's under nvcc, GCC's __atomic
 * builtins on a CPU, or plain loads and stores with HBG__SCHED_SERIAL.
 * Under CUDA an item's outputs must be visible device-wide before its
 * completion is: the lanes that wrote them fence before the atomics that
 * publish it (each core's comment says where).
 */
#ifndef HBG_EXEC_SCHED_SRC_H
#define HBG_EXEC_SCHED_SRC_H

#include <stddef.h>
#include <stdint.h>

#include <hbg/hbg_image.h>

/* __host__ __device__ under nvcc, like the image helpers it calls. */
#define HBG__SFN HBG_IMAGE_FN

/* Atomics: relaxed counters, acquire/release publication. */
#if defined(__CUDA_ARCH__)
#define HBG__SA_ADD32(p, v) atomicAdd((unsigned *)(p), (unsigned)(v))
#define HBG__SA_SUB32(p, v) atomicSub((unsigned *)(p), (unsigned)(v))
#define HBG__SA_ADD64(p, v)                                                    \
  ((uint64_t)atomicAdd((unsigned long long *)(p), (unsigned long long)(v)))
#define HBG__SA_CAS64(p, expect, want)                                         \
  ((uint64_t)atomicCAS((unsigned long long *)(p),                              \
                       (unsigned long long)(expect),                           \
                       (unsigned long long)(want)) == (uint64_t)(expect))
#define HBG__SA_CAS32(p, expect, want)                                         \
  (atomicCAS((unsigned *)(p), (unsigned)(expect), (unsigned)(want)) ==         \
   (unsigned)(expect))
#define HBG__SA_LOAD32(p) (*(volatile uint32_t *)(p))
#define HBG__SA_LOAD64(p) (*(volatile uint64_t *)(p))
#define HBG__SA_LOAD64_ACQ(p) hbg__sa_load64_acq(p)
#define HBG__SA_STORE64_REL(p, v)                                              \
  do {                                                                         \
    __threadfence();                                                           \
    *(volatile uint64_t *)(p) = (v);                                           \
  } while (0)
#define HBG__SA_STORE32(p, v) (*(volatile uint32_t *)(p) = (v))
#define HBG__SA_XCHG32(p, v) atomicExch((unsigned *)(p), (unsigned)(v))
#define HBG__SA_FENCE() __threadfence()
static inline __device__ uint64_t hbg__sa_load64_acq(const uint64_t *p) {
  uint64_t v = *(volatile const uint64_t *)p;
  __threadfence();
  return v;
}
#elif defined(HBG__SCHED_SERIAL)
/* The includer serialises every call of the core (exec.c: under its
 * mutex), so plain loads and stores do: x86's locked instructions cost the
 * sim's executor a quarter of its time for nothing. Same lines, same order
 * of operations; only the macros differ. */
#define HBG__SA_ADD32(p, v) hbg__ss_add32((p), (v))
#define HBG__SA_SUB32(p, v) hbg__ss_add32((p), 0u - (uint32_t)(v))
#define HBG__SA_ADD64(p, v) hbg__ss_add64((p), (v))
#define HBG__SA_CAS64(p, expect, want) hbg__ss_cas64((p), (expect), (want))
#define HBG__SA_CAS32(p, expect, want) hbg__ss_cas32((p), (expect), (want))
#define HBG__SA_LOAD32(p) (*(p))
#define HBG__SA_LOAD64(p) (*(p))
#define HBG__SA_LOAD64_ACQ(p) (*(p))
#define HBG__SA_STORE64_REL(p, v) (*(p) = (v))
#define HBG__SA_STORE32(p, v) (*(p) = (v))
#define HBG__SA_XCHG32(p, v) hbg__ss_xchg32((p), (v))
#define HBG__SA_FENCE() ((void)0)
static inline uint32_t hbg__ss_xchg32(uint32_t *p, uint32_t v) {
  uint32_t old = *p;
  *p = v;
  return old;
}
static inline uint32_t hbg__ss_add32(uint32_t *p, uint32_t v) {
  uint32_t old = *p;
  *p = old + v;
  return old;
}
static inline uint64_t hbg__ss_add64(uint64_t *p, uint64_t v) {
  uint64_t old = *p;
  *p = old + v;
  return old;
}
static inline int hbg__ss_cas64(uint64_t *p, uint64_t expect, uint64_t want) {
  if (*p != expect)
    return 0;
  *p = want;
  return 1;
}
static inline int hbg__ss_cas32(uint32_t *p, uint32_t expect, uint32_t want) {
  if (*p != expect)
    return 0;
  *p = want;
  return 1;
}
#else
#define HBG__SA_ADD32(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define HBG__SA_SUB32(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_ACQ_REL)
#define HBG__SA_ADD64(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define HBG__SA_CAS64(p, expect, want)                                         \
  hbg__sa_cas64((p), (expect), (want))
#define HBG__SA_CAS32(p, expect, want)                                         \
  hbg__sa_cas32((p), (expect), (want))
#define HBG__SA_LOAD32(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define HBG__SA_LOAD64(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define HBG__SA_LOAD64_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define HBG__SA_STORE64_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define HBG__SA_STORE32(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define HBG__SA_XCHG32(p, v) __atomic_exchange_n((p), (v), __ATOMIC_ACQ_REL)
/* the counts' acq_rel read-modify-writes already order what came before */
#define HBG__SA_FENCE() ((void)0)
static inline int hbg__sa_cas64(uint64_t *p, uint64_t expect, uint64_t want) {
  return __atomic_compare_exchange_n(p, &expect, want, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}
static inline int hbg__sa_cas32(uint32_t *p, uint32_t expect, uint32_t want) {
  return __atomic_compare_exchange_n(p, &expect, want, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}
#endif

/* HBG__SA_PAUSE(): a waiter's back-off between two polls. The includer may
 * define it (the device code's host build yields the CPU); by default a
 * GPU thread sleeps a little and a CPU spins one pause. */
#ifndef HBG__SA_PAUSE
#if defined(__CUDA_ARCH__)
#define HBG__SA_PAUSE() __nanosleep(256)
#elif defined(__x86_64__) || defined(__i386__)
#define HBG__SA_PAUSE() __builtin_ia32_pause()
#else
#define HBG__SA_PAUSE() ((void)0)
#endif
#endif

#define HBG__SCHED_NONE 0xffffffffu
#define HBG__SCHED_EMPTY 0xffffffffffffffffull /* a queue slot not yet set */

/* Per window entry. */
typedef struct hbg__sched_task {
  const hbg_img_graph *g; /* graph entry: its node expansion; NULL: task */
  const uint32_t *deps;   /* window entries it waits for (all < its id) */
  uint32_t n_deps;
  uint32_t pending;    /* unfinished dependencies (atomic) */
  uint32_t nodes_left; /* graph: unfinished nodes (atomic) */
  uint32_t first_out, n_out; /* dependents: out[first_out, + n_out) */
  uint32_t reserved;
  uint64_t node_base; /* graph: its nodes' fan-in counters at fanin[base] */
} hbg__sched_task;

typedef struct hbg__sched {
  uint32_t n_tasks;
  uint32_t n_deps;
  uint64_t n_nodes; /* graph nodes of every entry */
  uint64_t n_items; /* ordinary tasks + graph nodes: queue slots */
  uint64_t q_head, q_tail; /* atomic */
  uint64_t items_done;     /* atomic */
  uint32_t tasks_done;     /* atomic */
  uint32_t failed;         /* atomic: 0, then 1 once an error is kept */
  int32_t error;           /* the first error, with its entry and node */
  uint32_t err_task, err_node;
  uint32_t reserved;
  uint64_t ops; /* the operations below counted (an includer's report) */
  hbg__sched_task *task; /* [n_tasks] */
  uint32_t *out;         /* [n_deps] dependents, per task in a row */
  uint32_t *fanin;       /* [n_nodes] finished producers (atomic) */
  uint64_t *q;           /* [n_items] */
} hbg__sched;

/* Count n of the core's atomic operations (plain under
 * HBG__SCHED_SERIAL, like the operations themselves). */
#if defined(HBG__SCHED_SERIAL)
#define HBG__SCHED_OPS(s, n) ((s)->ops += (n))
#else
#define HBG__SCHED_OPS(s, n) ((void)HBG__SA_ADD64(&(s)->ops, (uint64_t)(n)))
#endif

static inline HBG__SFN uint64_t hbg__sched_al8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}

/* Bytes of the block for a window of n_tasks entries, n_deps dependencies
 * in all and n_nodes graph nodes in all (n_items <= n_tasks + n_nodes). */
static inline HBG__SFN uint64_t hbg__sched_bytes(uint32_t n_tasks,
                                                 uint64_t n_deps,
                                                 uint64_t n_nodes) {
  return hbg__sched_al8(sizeof(hbg__sched)) +
         hbg__sched_al8((uint64_t)n_tasks * sizeof(hbg__sched_task)) +
         hbg__sched_al8(n_deps * 4) + hbg__sched_al8(n_nodes * 4) +
         ((uint64_t)n_tasks + n_nodes) * 8;
}

/* Lay the block out (every counter zero). Then hbg__sched_task_set for
 * each entry in order, then hbg__sched_start. */
static inline HBG__SFN hbg__sched *hbg__sched_init(void *block,
                                                   uint32_t n_tasks,
                                                   uint64_t n_deps,
                                                   uint64_t n_nodes) {
  uint8_t *p = (uint8_t *)block;
  uint64_t *w = (uint64_t *)block; /* 8-aligned, a multiple of 8 bytes */
  uint64_t words = hbg__sched_bytes(n_tasks, n_deps, n_nodes) / 8;
  for (uint64_t i = 0; i < words; i++)
    w[i] = 0;
  hbg__sched *s = (hbg__sched *)block;
  p += hbg__sched_al8(sizeof *s);
  s->task = (hbg__sched_task *)p;
  p += hbg__sched_al8((uint64_t)n_tasks * sizeof(hbg__sched_task));
  s->out = (uint32_t *)p;
  p += hbg__sched_al8(n_deps * 4);
  s->fanin = (uint32_t *)p;
  p += hbg__sched_al8(n_nodes * 4);
  s->q = (uint64_t *)p;
  s->n_tasks = n_tasks;
  s->err_task = HBG__SCHED_NONE;
  s->err_node = HBG__SCHED_NONE;
  return s;
}

/* Keep the first error (and where); later ones are dropped. */
static inline HBG__SFN void hbg__sched_fail(hbg__sched *s, int err,
                                            uint32_t task, uint32_t node) {
  if (HBG__SA_CAS32(&s->failed, 0u, 1u)) {
    s->error = err;
    s->err_task = task;
    s->err_node = node;
  }
}

/* Entry i (in order): g its node expansion (NULL: an ordinary task; a
 * graph's Definition validated), deps its window dependencies. Nothing
 * per node: a node's producers count its fan-in up from the zero
 * hbg__sched_init left, to its fan-in row's width. @return 0 or an
 * HBG_IMG_E_* code (*bad_node is kept for callers; no node fails here). */
static inline HBG__SFN int hbg__sched_task_set(hbg__sched *s, uint32_t i,
                                               const hbg_img_graph *g,
                                               const uint32_t *deps,
                                               uint32_t n_deps,
                                               uint32_t *bad_node) {
  hbg__sched_task *t = &s->task[i];
  t->g = g;
  t->deps = deps;
  t->n_deps = n_deps;
  t->pending = n_deps;
  for (uint32_t k = 0; k < n_deps; k++) {
    if (deps[k] >= i)
      return HBG_IMG_E_CYCLE;
    s->task[deps[k]].n_out++;
  }
  s->n_deps += n_deps;
  if (!g) {
    s->n_items++;
    return 0;
  }
  (void)bad_node;
  t->node_base = s->n_nodes;
  t->nodes_left = g->hdr.n_nodes;
  s->n_nodes += g->hdr.n_nodes;
  s->n_items += g->hdr.n_nodes;
  return 0;
}

static inline HBG__SFN void hbg__sched_push(hbg__sched *s, uint32_t task,
                                            uint32_t node) {
  HBG__SCHED_OPS(s, 2); /* the tail, the slot */
  uint64_t at = HBG__SA_ADD64(&s->q_tail, (uint64_t)1);
  if (at >= s->n_items) {
    hbg__sched_fail(s, HBG_IMG_E_CSR, task, node);
    return;
  }
  HBG__SA_STORE64_REL(&s->q[at], (uint64_t)task << 32 | node);
}

/* Every node without producers of a task whose dependencies are done:
 * the Definition's roots table (validated: ascending node ids, exactly the
 * nodes with an empty fan-in row), not a scan of every node. */
static inline HBG__SFN void hbg__sched_task_ready(hbg__sched *s, uint32_t i) {
  const hbg__sched_task *t = &s->task[i];
  if (!t->g) {
    hbg__sched_push(s, i, HBG__SCHED_NONE);
    return;
  }
  for (uint32_t k = 0; k < t->g->hdr.n_roots; k++) {
    uint32_t j = t->g->def.roots[k];
    if (j >= t->g->hdr.n_nodes) { /* only if rewritten under a verdict */
      hbg__sched_fail(s, HBG_IMG_E_ROOTS, i, j);
      return;
    }
    hbg__sched_push(s, i, j);
  }
}

/* After every hbg__sched_task_set: dependents' rows, queue slots, and the
 * entries without dependencies made ready. Single-threaded. */
static inline HBG__SFN void hbg__sched_start(hbg__sched *s) {
  uint32_t acc = 0;
  for (uint32_t i = 0; i < s->n_tasks; i++) {
    s->task[i].first_out = acc;
    acc += s->task[i].n_out;
    s->task[i].n_out = 0;
  }
  for (uint32_t i = 0; i < s->n_tasks; i++) {
    const hbg__sched_task *t = &s->task[i];
    for (uint32_t k = 0; k < t->n_deps; k++) {
      hbg__sched_task *d = &s->task[t->deps[k]];
      s->out[d->first_out + d->n_out++] = i;
    }
  }
  for (uint64_t k = 0; k < s->n_items; k++)
    s->q[k] = HBG__SCHED_EMPTY;
  for (uint32_t i = 0; i < s->n_tasks; i++)
    if (s->task[i].pending == 0)
      hbg__sched_task_ready(s, i);
}

/* Items ready and not yet popped (a snapshot). */
static inline HBG__SFN uint64_t hbg__sched_ready(const hbg__sched *s) {
  uint64_t t = HBG__SA_LOAD64(&s->q_tail), h = HBG__SA_LOAD64(&s->q_head);
  if (t > s->n_items)
    t = s->n_items;
  return t > h ? t - h : 0;
}

/* Claim the next ready item. @return 1 and *item, or 0 when none is
 * ready now. */
static inline HBG__SFN int hbg__sched_pop(hbg__sched *s, uint64_t *item) {
  uint64_t h = HBG__SA_LOAD64(&s->q_head);
  for (;;) {
    uint64_t t = HBG__SA_LOAD64(&s->q_tail);
    if (t > s->n_items)
      t = s->n_items;
    if (h >= t)
      return 0;
    if (HBG__SA_CAS64(&s->q_head, h, h + 1))
      break;
    h = HBG__SA_LOAD64(&s->q_head);
  }
  uint64_t v;
  while ((v = HBG__SA_LOAD64_ACQ(&s->q[h])) == HBG__SCHED_EMPTY) {
  }
  HBG__SCHED_OPS(s, 2); /* the head, the slot */
  *item = v;
  return 1;
}

static inline HBG__SFN void hbg__sched_task_done(hbg__sched *s, uint32_t i) {
  const hbg__sched_task *t = &s->task[i];
  HBG__SCHED_OPS(s, 1 + t->n_out);
  HBG__SA_ADD32(&s->tasks_done, 1u);
  for (uint32_t k = 0; k < t->n_out; k++) {
    uint32_t d = s->out[t->first_out + k];
    if (HBG__SA_SUB32(&s->task[d].pending, 1u) == 1u)
      hbg__sched_task_ready(s, d);
  }
}

/* Item ran: its consumers' fan-in counts up, the ones reaching their
 * fan-in row's width are pushed; a graph entry whose last node ran
 * completes, and its dependents count down in turn. A fan-out row that
 * does not match the fan-in rows (possible only if the Definition changed
 * under a cached verdict) is HBG_IMG_E_CSR at this item. */
static inline HBG__SFN void hbg__sched_done(hbg__sched *s, uint64_t item) {
  uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
  HBG__SA_FENCE(); /* the item's outputs before its consumers' counts */
  HBG__SCHED_OPS(s, 1);
  HBG__SA_ADD64(&s->items_done, (uint64_t)1);
  hbg__sched_task *t = &s->task[i];
  if (j == HBG__SCHED_NONE) {
    hbg__sched_task_done(s, i);
    return;
  }
  /* The fan-out row straight from the validated view, bounded by the
   * header copy (hbg_img_graph_node checked the node itself at set-up). */
  const hbg_img_graph *g = t->g;
  if (j >= g->hdr.n_nodes) {
    hbg__sched_fail(s, HBG_IMG_E_CSR, i, j);
    return;
  }
  uint32_t a = g->def.fanout_ptr[j], b = g->def.fanout_ptr[j + 1];
  if (b < a || b > g->hdr.n_edges) {
    hbg__sched_fail(s, HBG_IMG_E_CSR, i, j);
    return;
  }
  for (uint32_t k = a; k < b; k++) {
    uint32_t c = g->def.fanout[k];
    if (c >= g->hdr.n_nodes) {
      hbg__sched_fail(s, HBG_IMG_E_CSR, i, j);
      return;
    }
    uint32_t nf = g->def.fanin_ptr[c + 1] - g->def.fanin_ptr[c];
    HBG__SCHED_OPS(s, 1);
    uint32_t old = HBG__SA_ADD32(&s->fanin[t->node_base + c], 1u);
    if (old >= nf) {
      hbg__sched_fail(s, HBG_IMG_E_CSR, i, j);
      return;
    }
    if (old + 1 == nf)
      hbg__sched_push(s, i, c);
  }
  HBG__SCHED_OPS(s, 1);
  if (HBG__SA_SUB32(&t->nodes_left, 1u) == 1u)
    hbg__sched_task_done(s, i);
}

/* Every entry has completed. */
static inline HBG__SFN int hbg__sched_complete(const hbg__sched *s) {
  return HBG__SA_LOAD32(&s->tasks_done) == s->n_tasks;
}

/* ==================================================================== */
/* The dispatch core: what the device executor (src/device/cuda/devcode/ */
/* exec.c) runs on the GPU's warps and on the stand-in's lanes.          */
/* ==================================================================== */

/* Atomics with their memory order spelled out, so that the GPU build
 * issues one ordered operation where the order is needed and none
 * elsewhere (no fence beside a relaxed atomic), and the host build asks
 * its compiler for the same orders (ThreadSanitizer then checks the GPU's
 * ordering, not a stronger one):
 *   RLX   relaxed: counts nobody reads data through;
 *   AR    acquire-release read-modify-write: a count that completes
 *         publishes what its adders wrote to whoever sees it complete;
 *   ACQ / REL  a load that takes, a store that publishes. */
#if defined(__CUDA_ARCH__)
static inline __device__ uint32_t hbg__da_add32_ar(uint32_t *p, uint32_t v) {
  uint32_t r;
  asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], %2;"
               : "=r"(r)
               : "l"(p), "r"(v)
               : "memory");
  return r;
}
static inline __device__ uint64_t hbg__da_add64_rlx(uint64_t *p, uint64_t v) {
  uint64_t r;
  asm volatile("atom.relaxed.gpu.add.u64 %0, [%1], %2;"
               : "=l"(r)
               : "l"(p), "l"(v)
               : "memory");
  return r;
}
static inline __device__ uint64_t hbg__da_load64_acq(const uint64_t *p) {
  uint64_t r;
  asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(r) : "l"(p) : "memory");
  return r;
}
static inline __device__ uint32_t hbg__da_load32_acq(const uint32_t *p) {
  uint32_t r;
  asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(r) : "l"(p) : "memory");
  return r;
}
static inline __device__ uint64_t hbg__da_load64_rlx(const uint64_t *p) {
  uint64_t r;
  asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(r) : "l"(p) : "memory");
  return r;
}
static inline __device__ uint32_t hbg__da_load32_rlx(const uint32_t *p) {
  uint32_t r;
  asm volatile("ld.relaxed.gpu.u32 %0, [%1];" : "=r"(r) : "l"(p) : "memory");
  return r;
}
static inline __device__ void hbg__da_store64_rel(uint64_t *p, uint64_t v) {
  asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
static inline __device__ void hbg__da_store64_rlx(uint64_t *p, uint64_t v) {
  asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
static inline __device__ void hbg__da_store32_rel(uint32_t *p, uint32_t v) {
  asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
#define HBG__DA_ADD32_AR(p, v) hbg__da_add32_ar((p), (v))
#define HBG__DA_SUB32_AR(p, v) hbg__da_add32_ar((p), 0u - (uint32_t)(v))
#define HBG__DA_ADD64_RLX(p, v) hbg__da_add64_rlx((p), (v))
#define HBG__DA_LOAD64_ACQ(p) hbg__da_load64_acq(p)
#define HBG__DA_LOAD32_RLX(p) hbg__da_load32_rlx(p)
#define HBG__DA_LOAD32_ACQ(p) hbg__da_load32_acq(p)
#define HBG__DA_LOAD64_RLX(p) hbg__da_load64_rlx(p)
#define HBG__DA_STORE64_REL(p, v) hbg__da_store64_rel((p), (v))
#define HBG__DA_STORE32_REL(p, v) hbg__da_store32_rel((p), (v))
#define HBG__DA_STORE64_RLX(p, v) hbg__da_store64_rlx((p), (v))
/* the continuation slot lives in the worker's shared memory */
#define HBG__DA_CAS64_CTA(p, expect, want)                                     \
  ((uint64_t)atomicCAS_block((unsigned long long *)(p),                        \
                             (unsigned long long)(expect),                     \
                             (unsigned long long)(want)) ==                    \
   (uint64_t)(expect))
#else
#define HBG__DA_ADD32_AR(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define HBG__DA_SUB32_AR(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_ACQ_REL)
#define HBG__DA_ADD64_RLX(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define HBG__DA_LOAD64_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define HBG__DA_LOAD32_RLX(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define HBG__DA_LOAD32_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define HBG__DA_LOAD64_RLX(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define HBG__DA_STORE64_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define HBG__DA_STORE32_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define HBG__DA_STORE64_RLX(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define HBG__DA_CAS64_CTA(p, expect, want)                                     \
  hbg__da_cas64_cta((p), (expect), (want))
static inline int hbg__da_cas64_cta(uint64_t *p, uint64_t expect,
                                    uint64_t want) {
  return __atomic_compare_exchange_n(p, &expect, want, 0, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED);
}
#endif

/* The window's entries and their nodes, counted by any number of
 * workers at once, with nothing on one thread that grows with the window:
 *
 * - Ready items go out through one ticket queue. A worker with nothing to
 *   run takes a ticket (one relaxed add on q_head) and waits on that
 *   ticket's own slot, which the ticket's push fills (one relaxed add on
 *   q_tail reserving any number of slots, one release store per item):
 *   waiting workers poll different slots, not one shared head.
 * - The window's end, a failure or a deadline sets one stop word (a
 *   release store): a worker whose slot is empty and a worker about to
 *   start an item read it (relaxed) and leave. Nothing is pushed to stop
 *   the workers, so stopping costs the same whatever their number.
 * - The worker that makes an item ready keeps the first one it makes
 *   ready as its next item (the continuation, in the worker's shared
 *   memory) instead of pushing it: a chain of dependent items runs on one
 *   worker with no queue round trip.
 * - Producers count their consumers up (cnt, zeroed at set-up) with one
 *   acquire-release add; the add that reaches the consumer's fan-in makes
 *   it ready. A node whose fan-in is one producer needs no count. Nodes
 *   whose fan-in rows are the same (the tiles of a projection that all
 *   read one normalised vector, say) share one count, their group
 *   leader's: a producer counts each group it feeds once, and the group's
 *   last producer makes every member ready at once, its members after the
 *   first in one queue reservation. Groups are found once per Definition
 *   (hbg__disp_plan), kept with its verdict.
 * - An entry's dependents are a list built at set-up by one atomic exchange
 *   per dependency; a graph entry completes when its sinks (the nodes
 *   nothing consumes: every other node ran before one of them could) have
 *   run, counted down by the sinks alone; an entry whose last dependency
 *   completes is made ready: its roots, or the ordinary task itself.
 *
 * Memory order: a worker's lanes write an item's outputs, meet at the
 * worker's barrier (which orders them for every lane of the worker), and
 * then count with acquire-release adds: a count that completes has
 * acquired every producer's outputs, and the ready item's run (by this
 * worker, after its next barrier, or pushed with a release store that its
 * ticket's acquire load takes) sees them. The same orders on a CPU.
 *
 * Each call counts the dispatch operations it issued (global atomics,
 * fences, release stores and the acquire load that hands an item over) in
 * *ops, so that a host build can report them per item.
 *
 * Everything the core reads of an image (def views, the node plan) must
 * be validated and immutable for the launch (the executor runs from
 * private copies). */

#define HBG__D_NONE 0xffffffffu
#define HBG__D_EMPTY 0xffffffffffffffffull /* a slot no push has served */

/* How a node of a validated Definition is counted (hbg__disp_plan, kept
 * with the Definition's verdict). */
typedef struct hbg__dnode {
  uint32_t leader;  /* the least node with the same fan-in row: counted
                       for the group, by its producers, at cnt[leader] */
  uint32_t nf;      /* its producers (its fan-in row's width) */
  uint32_t members; /* a leader: the nodes of its group (itself too) */
  uint32_t flags;   /* HBG__DN_SINK */
} hbg__dnode;

#define HBG__DN_SINK 1u /* no consumer */

/* Groups: rows up to this wide, first producers with up to this many
 * consumers, are compared; a longer one counts on its own. */
#define HBG__D_GROUP_ROW 64u
#define HBG__D_GROUP_SCAN 4096u

/* Node u's plan (any thread, every node of a Definition that passed its
 * validator). */
static inline HBG__SFN void hbg__disp_plan(const hbg_img_def_view *v,
                                           uint32_t u, hbg__dnode *out) {
  const uint32_t *fp = v->fanin_ptr, *fi = v->fanin;
  const uint32_t a = fp[u], w = fp[u + 1] - a;
  hbg__dnode n;
  n.leader = u;
  n.nf = w;
  n.members = 1;
  n.flags = v->fanout_ptr[u + 1] == v->fanout_ptr[u] ? HBG__DN_SINK : 0u;
  if (w >= 1 && w <= HBG__D_GROUP_ROW) {
    const uint32_t p0 = fi[a];
    const uint32_t oa = v->fanout_ptr[p0], ob = v->fanout_ptr[p0 + 1];
    if (ob - oa <= HBG__D_GROUP_SCAN) {
      uint32_t least = u, same = 0;
      for (uint32_t k = oa; k < ob; k++) {
        const uint32_t c = v->fanout[k], ca = fp[c];
        if (fp[c + 1] - ca != w)
          continue;
        uint32_t e = 0;
        while (e < w && fi[ca + e] == fi[a + e])
          e++;
        if (e < w)
          continue;
        same++;
        if (c < least)
          least = c;
      }
      n.leader = least;
      if (least == u && same)
        n.members = same;
    }
  }
  *out = n;
}

/* Per window entry. */
typedef struct hbg__dent {
  uint32_t pending;    /* atomic: dependencies not yet complete */
  uint32_t sinks_left; /* atomic: graph: sinks not yet run */
  uint32_t out_head;   /* first link of its dependents, HBG__D_NONE */
  uint32_t done;       /* 1 once complete (read after a timeout) */
  uint64_t node_base;  /* graph: its nodes' counters at cnt[node_base] */
  const hbg_img_def_view *def; /* graph: the validated view; NULL: task */
  const hbg__dnode *plan;      /* graph: its Definition's node plan */
} hbg__dent;

/* One dependency, on its producer's list. */
typedef struct hbg__dlink {
  uint32_t entry; /* the dependent */
  uint32_t next;  /* HBG__D_NONE ends the list */
} hbg__dlink;

typedef struct hbg__disp {
  uint64_t q_tail; /* atomic: slots reserved (each word on its own line) */
  uint64_t pad0[7];
  uint64_t q_head; /* atomic: tickets taken */
  uint64_t pad1[7];
  uint32_t tasks_done; /* atomic: entries complete */
  uint32_t pad2[15];
  uint32_t stop;   /* 1: every worker leaves (release store) */
  uint32_t failed; /* atomic: an error is kept */
  int32_t error;   /* the first error, with its entry and node */
  uint32_t err_task, err_node;
  uint32_t n_tasks;
  uint64_t n_slots;
  hbg__dent *ent;     /* [n_tasks] */
  hbg__dlink *links;  /* [n_deps] */
  uint32_t *cnt;      /* [n_nodes] */
  uint64_t *q;        /* [n_slots] */
} hbg__disp;

/* Queue slots for n_items items (ordinary tasks + graph nodes): each is
 * pushed at most once. */
static inline HBG__SFN uint64_t hbg__disp_slots(uint64_t n_items) {
  return n_items;
}

/* One thread, before anything else: the scalar state (pointers are the
 * caller's, each array 8-aligned). */
static inline HBG__SFN void hbg__disp_init(hbg__disp *d, uint32_t n_tasks,
                                           uint64_t n_slots, hbg__dent *ent,
                                           hbg__dlink *links, uint32_t *cnt,
                                           uint64_t *q) {
  d->q_tail = 0;
  d->q_head = 0;
  d->tasks_done = 0;
  d->stop = n_tasks == 0; /* nothing to run: every worker leaves at once */
  d->failed = 0;
  d->error = 0;
  d->err_task = HBG__D_NONE;
  d->err_node = HBG__D_NONE;
  d->n_tasks = n_tasks;
  d->n_slots = n_slots;
  d->ent = ent;
  d->links = links;
  d->cnt = cnt;
  d->q = q;
}

/* Set-up, any thread, after every entry's out_head is HBG__D_NONE: link
 * `link` (each used once) records that entry depends on dep. */
static inline HBG__SFN void hbg__disp_link(hbg__disp *d, uint32_t link,
                                           uint32_t entry, uint32_t dep) {
  d->links[link].entry = entry;
  d->links[link].next = HBG__SA_XCHG32(&d->ent[dep].out_head, link);
}

/* Every worker leaves once it has run what it holds. */
static inline HBG__SFN void hbg__disp_stop(hbg__disp *d, uint64_t *ops) {
  HBG__DA_STORE32_REL(&d->stop, 1u);
  ++*ops;
}

/* Whether the workers are to leave (a relaxed read: what the stop
 * publishes, nobody reads after it). */
static inline HBG__SFN int hbg__disp_stopped(hbg__disp *d) {
  return HBG__DA_LOAD32_RLX(&d->stop) != 0;
}

/* Keep the first error (and where), then stop: items already running
 * finish, nothing new starts. */
static inline HBG__SFN void hbg__disp_fail(hbg__disp *d, int err,
                                           uint32_t task, uint32_t node,
                                           uint64_t *ops) {
  if (HBG__SA_CAS32(&d->failed, 0u, 1u)) {
    d->error = err;
    d->err_task = task;
    d->err_node = node;
  }
  hbg__disp_stop(d, ops); /* the release store publishes the error too */
}

/* n slots, the first at the returned index. */
static inline HBG__SFN uint64_t hbg__disp_reserve(hbg__disp *d, uint64_t n,
                                                  uint64_t *ops) {
  ++*ops;
  return HBG__DA_ADD64_RLX(&d->q_tail, n);
}

/* Item into reserved slot `at`. */
static inline HBG__SFN void hbg__disp_put(hbg__disp *d, uint64_t at,
                                          uint64_t item, uint64_t *ops) {
  if (at >= d->n_slots) { /* cannot happen: every item is pushed once */
    hbg__disp_fail(d, HBG_IMG_E_CSR, (uint32_t)(item >> 32), (uint32_t)item,
                   ops);
    return;
  }
  HBG__DA_STORE64_REL(&d->q[at], item);
  ++*ops;
}

/* A ticket for the next item pushed: poll it with hbg__disp_poll. */
static inline HBG__SFN uint64_t hbg__disp_ticket(hbg__disp *d, uint64_t *ops) {
  ++*ops;
  return HBG__DA_ADD64_RLX(&d->q_head, (uint64_t)1);
}

/* Ticket t's item, HBG__D_EMPTY while its push has not come (count the
 * load that returns an item as one operation). */
static inline HBG__SFN uint64_t hbg__disp_poll(hbg__disp *d, uint64_t t) {
  if (t >= d->n_slots) /* more tickets than items: only the stop serves */
    return HBG__D_EMPTY;
  return HBG__DA_LOAD64_ACQ(&d->q[t]);
}

/* A ready item: the worker's continuation when it has none yet (cont not
 * NULL, *cont HBG__D_EMPTY), else pushed. */
static inline HBG__SFN void hbg__disp_ready(hbg__disp *d, uint64_t item,
                                            uint64_t *cont, uint64_t *ops) {
  if (cont && HBG__DA_CAS64_CTA(cont, HBG__D_EMPTY, item))
    return;
  hbg__disp_put(d, hbg__disp_reserve(d, 1, ops), item, ops);
}

/* Nodes ids[0, n) of entry i, all ready: the first perhaps the
 * continuation, the rest pushed with one reservation. */
static inline HBG__SFN void hbg__disp_ready_n(hbg__disp *d, uint32_t i,
                                              const uint32_t *ids, uint32_t n,
                                              uint64_t *cont, uint64_t *ops) {
  if (!n)
    return;
  uint32_t k = 0;
  if (cont && HBG__DA_CAS64_CTA(cont, HBG__D_EMPTY,
                                (uint64_t)i << 32 | ids[0]))
    k = 1;
  if (k == n)
    return;
  const uint64_t at = hbg__disp_reserve(d, n - k, ops);
  for (uint32_t m = k; m < n; m++)
    hbg__disp_put(d, at + (m - k), (uint64_t)i << 32 | ids[m], ops);
}

/* Entry i's dependencies are complete: its roots, or the task itself. */
static inline HBG__SFN void hbg__disp_entry_ready(hbg__disp *d, uint32_t i,
                                                  uint64_t *cont,
                                                  uint64_t *ops) {
  const hbg_img_def_view *v = d->ent[i].def;
  if (!v) {
    hbg__disp_ready(d, (uint64_t)i << 32 | HBG__D_NONE, cont, ops);
    return;
  }
  hbg__disp_ready_n(d, i, v->roots, v->hdr->n_roots, cont, ops);
}

/* Group leader c of entry i has every producer done: its members ready
 * (the consumers of its first producer whose leader it is). */
static inline HBG__SFN void hbg__disp_group_ready(hbg__disp *d, uint32_t i,
                                                  uint32_t c, uint64_t *cont,
                                                  uint64_t *ops) {
  const hbg__dent *e = &d->ent[i];
  const hbg__dnode *pl = e->plan;
  if (pl[c].members <= 1) {
    hbg__disp_ready(d, (uint64_t)i << 32 | c, cont, ops);
    return;
  }
  const hbg_img_def_view *v = e->def;
  const uint32_t p0 = v->fanin[v->fanin_ptr[c]];
  const uint32_t oa = v->fanout_ptr[p0], ob = v->fanout_ptr[p0 + 1];
  uint32_t k = 0, n = pl[c].members;
  if (cont && HBG__DA_CAS64_CTA(cont, HBG__D_EMPTY, (uint64_t)i << 32 | c))
    k = 1; /* the leader runs next here; the others go out */
  if (k == n)
    return;
  uint64_t at = hbg__disp_reserve(d, n - k, ops);
  const uint64_t end = at + (n - k);
  for (uint32_t o = oa; o < ob && at < end; o++) {
    const uint32_t m = v->fanout[o];
    if (pl[m].leader != c || (k && m == c))
      continue;
    hbg__disp_put(d, at++, (uint64_t)i << 32 | m, ops);
  }
}

/* Item (i, j) (a graph node) has run: lane `lane` of `lanes` counts its
 * share of j's consumers' groups, each that completes made ready. Every
 * lane of the worker calls it after the worker's barrier that follows the
 * item's writes. */
static inline HBG__SFN void hbg__disp_fanout(hbg__disp *d, uint32_t i,
                                             uint32_t j, uint32_t lane,
                                             uint32_t lanes, uint64_t *cont,
                                             uint64_t *ops) {
  const hbg__dent *e = &d->ent[i];
  const hbg_img_def_view *v = e->def;
  const hbg__dnode *pl = e->plan;
  const uint32_t a = v->fanout_ptr[j], b = v->fanout_ptr[j + 1];
  for (uint32_t k = a + lane; k < b; k += lanes) {
    const uint32_t c = v->fanout[k];
    if (pl[c].leader != c)
      continue; /* counted for its group */
    if (pl[c].nf > 1) {
      ++*ops;
      if (HBG__DA_ADD32_AR(&d->cnt[e->node_base + c], 1u) + 1u != pl[c].nf)
        continue;
    }
    hbg__disp_group_ready(d, i, c, cont, ops);
  }
}

/* Entry i is complete: its dependents count down. @return 1 when it was
 * the window's last. */
static inline HBG__SFN int hbg__disp_entry_done(hbg__disp *d, uint32_t i,
                                                uint64_t *cont,
                                                uint64_t *ops) {
  HBG__SA_STORE32(&d->ent[i].done, 1u);
  for (uint32_t l = d->ent[i].out_head; l != HBG__D_NONE;
       l = d->links[l].next) {
    const uint32_t e = d->links[l].entry;
    ++*ops;
    if (HBG__DA_SUB32_AR(&d->ent[e].pending, 1u) == 1u)
      hbg__disp_entry_ready(d, e, cont, ops);
  }
  ++*ops;
  if (HBG__DA_ADD32_AR(&d->tasks_done, 1u) + 1u != d->n_tasks)
    return 0;
  hbg__disp_stop(d, ops);
  return 1;
}

/* Item (i, j) has run and its fan-out is counted (one lane): an ordinary
 * task, or a graph entry's last sink, completes its entry. @return 1 when
 * the window is complete. */
static inline HBG__SFN int hbg__disp_item_done(hbg__disp *d, uint64_t item,
                                               uint64_t *cont, uint64_t *ops) {
  const uint32_t i = (uint32_t)(item >> 32), j = (uint32_t)item;
  if (j != HBG__D_NONE) {
    if (!(d->ent[i].plan[j].flags & HBG__DN_SINK))
      return 0;
    ++*ops;
    if (HBG__DA_SUB32_AR(&d->ent[i].sinks_left, 1u) != 1u)
      return 0;
  }
  return hbg__disp_entry_done(d, i, cont, ops);
}

#endif
