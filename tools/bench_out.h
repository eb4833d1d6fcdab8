/* Results of `hbg bench` and their writers: the stdout table, JSON (cJSON),
 * CSV, an SVG chart and a Chrome/Perfetto trace. No hbg dependency. */
#ifndef HBG_TOOLS_BENCH_OUT_H
#define HBG_TOOLS_BENCH_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_stats.h"

enum {
  BENCH_PH_CONTROL = 0,
  BENCH_PH_HOST_ORCH,
  BENCH_PH_GRAPH_UP,
  BENCH_PH_WINDOW_UP,
  BENCH_PH_EXEC,
  BENCH_PH_DEVICE, /* device time by device events (0: not kept) */
  BENCH_PH__COUNT
};

/* "control_plane", "host_orch", ... */
const char *bench_phase_name(int ph);
/* @return non-zero for the phases a peer arm has (control_plane, exec,
 * device); the rest are upload phases only a policy has. */
int bench_phase_of_arm(int ph);

/* One measured bind. */
typedef struct bench_rec {
  uint32_t arm;
  uint32_t round;
  uint64_t seq;
  uint64_t ns[BENCH_PH__COUNT];
  uint64_t graph_bytes, graph_copies;
  uint64_t window_bytes, window_copies;
  uint64_t def_bytes;
  uint64_t h2d_bytes, h2d_copies;
  uint64_t arena_high_water;
  uint32_t leftover, fallback, dev_allocs, n_recorded;
  uint64_t minflt; /* orchestrating thread's minor faults; UINT64_MAX: n/a */
  int32_t verified; /* -1 not checked, 0 mismatch, 1 matched */
  double max_abs_err;
  uint64_t launches, updates; /* peer arms: launch calls, kernel nodes
                                 updated (cuda-graph) in the step */
  /* The device executor's own account (hbg_bind_stats' exec_*): set-up
   * time by the device's clock, node records its set-up read, Definitions
   * it validated; split 0 where the device gives no set-up figures. */
  uint64_t dev_setup_ns, setup_nodes, defs_validated;
  uint8_t split;
  /* Its counters (hbg_bind_stats' exec_counts): items run, dispatch
   * operations, kernel phases, kernel-body and tail device time; counts 0
   * where the device gives none. */
  uint8_t counts;
  uint64_t items, dispatch_ops, kernel_phases, body_ns, tail_ns;
} bench_rec;

typedef struct bench_policy_res {
  const char *name;
  bench_summary ph[BENCH_PH__COUNT]; /* ns */
  double ratio[BENCH_PH__COUNT];     /* median / first policy's median */
  /* means per measured bind */
  double graph_bytes, graph_copies, window_bytes, window_copies, def_bytes;
  double h2d_bytes, h2d_copies, leftover, fallback, dev_allocs;
  double minflt; /* NaN where a bind had no count */
  uint64_t arena_high_water; /* max over the measured binds */
  uint32_t binds, checked, mismatched;
  double max_abs_err;
  int verified; /* checked > 0 && mismatched == 0 */
  /* Peer arms (hbg bench --arm); set by the caller, kept by
   * bench_result_compute but for the means. */
  int arm;                 /* 0: an upload policy, 1: a peer arm */
  double launches, updates; /* means per measured step (computed) */
  uint64_t capture_ns, instantiate_ns; /* the arm's first graph capture
                                          and instantiation (cuda-graph),
                                          0 when it never captured */
  uint32_t captures;       /* steps that captured, warm-up included */
  /* The arm's runtime settings, set by the caller and kept (NULL: not
   * reported): how a bind's entries are ordered ("explicit", "inferred")
   * and when Definitions are recorded ("once", "per-bind"). */
  const char *deps, *record;
  /* The device executor's account (computed; policies only): the set-up
   * time's summary (ns) and mean set-up node records over the binds that
   * reported them (split_binds), mean Definitions validated per bind. */
  bench_summary dev_setup;
  double setup_nodes, defs_validated;
  uint32_t split_binds;
  /* Its counters over the binds that reported them (count_binds; NaN
   * without): items run per bind (mean), dispatch operations and kernel
   * phases per item, kernel-body and tail device time per bind (ns,
   * means). */
  double items_per_bind, ops_per_item, phases_per_item, body_ns, tail_ns;
  uint32_t count_binds;
} bench_policy_res;

/* bench_result.verify_every: verify the last measured bind of each block. */
#define BENCH_VERIFY_BLOCK UINT32_MAX

/* The sim's copy polling when its options do not set spin= (README). */
#define BENCH_SIM_SPIN_DEFAULT_US 200

typedef struct bench_result {
  const char *workload, *device, *device_options, *version;
  /* every setting that moves a ratio: the host allocator arm ("retain",
   * "trim", or "system" where retain is unavailable), GLIBC_TUNABLES (NULL
   * when unset), the device profile (profile= of the device options, "none"
   * without one) and the sim's copy polling in us (-1: not the sim) */
  const char *host_alloc, *glibc_tunables, *device_profile;
  int64_t sim_spin_us;
  /* the sim's clock= option: "real" (modelled costs slept) or "virtual"
   * (added to the device's clock); NULL: not the sim */
  const char *sim_clock;
  uint32_t layers, rounds, warmup, interleave, verify_every, pipeline;
  uint64_t chunk;
  uint32_t def_size; /* Definitions padded to at least this, 0 = natural */
  uint32_t tasks;    /* flat workload: tasks per bind (0: not flat) */
  uint64_t weight_bytes, kv_bytes; /* the workload's weights and KV cache */
  const char *weight_dtype;        /* "bf16", "f32"; NULL: no such setting */
  double trim;
  char hostname[128];
  long nproc;
  uint32_t n_policies;
  uint32_t n_arms;       /* peer arms, after the policies in pol */
  bench_policy_res *pol; /* n_policies + n_arms rows, name (and the peer
                            fields of arm rows) set by the caller */
  size_t n_recs;
  const bench_rec *recs; /* measured binds, any order */
} bench_result;

/* Fill every pol[i] but its name and the caller's peer fields from recs
 * (rec.arm indexes pol: policies, then peer arms).
 * @return 0, or -1 (out of memory, a row without measured binds). */
int bench_result_compute(bench_result *r);
/* Hostname and processor count of this machine into r. */
void bench_result_machine(bench_result *r);

/* Writers. @return 0, or -1 (out of memory or a write error). */
int bench_print_table(const bench_result *r, FILE *f);
int bench_write_json(const bench_result *r, FILE *f);
int bench_write_csv(const bench_result *r, FILE *f);
int bench_write_svg(const bench_result *r, FILE *f);

typedef struct bench_trace_ev {
  uint32_t pid; /* process: one per policy */
  uint32_t tid; /* track */
  const char *name;
  uint64_t start_ns, dur_ns, bytes, seq;
} bench_trace_ev;

/* Chrome trace-event JSON ({"traceEvents": [...]}): metadata naming each
 * pid (proc_names[pid]) and tid (track_names[tid]), then complete events
 * ("ph":"X") with ts/dur in microseconds from the earliest event. */
int bench_write_trace(const bench_trace_ev *ev, size_t n,
                      const char *const *proc_names, uint32_t n_procs,
                      const char *const *track_names, uint32_t n_tracks,
                      FILE *f);

#endif
