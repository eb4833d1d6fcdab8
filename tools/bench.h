/* hbg bench (internal to the CLI): the run's options, arms and state,
 * shared by its three parts: bench_opts.c (usage and option parsing),
 * bench_arms.c (opening, naming and closing the arms, the result they
 * fill, error reports) and cmd_bench.c (the schedule's loop, tracing,
 * output files, the multi-device hooks, the command). */
#ifndef HBG_TOOLS_BENCH_H
#define HBG_TOOLS_BENCH_H

#include <stdatomic.h>
#include <stdio.h>

#include <hbg/hbg.h>
#include <hbg/hbg_peer.h>
#include <hbg/hbg_workload.h>

#include "bench_multi.h"
#include "bench_out.h"
#include "bench_stats.h"

#define TRACE_BINDS 3u
#define TRACE_CAP (1u << 17)
#define MAX_PEERS 2u /* HBG_PEER_EAGER, HBG_PEER_CUDA_GRAPH */
#define MAX_ARMS                                                               \
  (HBG_POLICY__COUNT * HBG_DEPS__COUNT * HBG_RECORD__COUNT + MAX_PEERS)

typedef struct bench_opts {
  const char *workload, *device, *device_options;
  const char *json, *csv, *svg, *trace;
  uint32_t layers, rounds, warmup, interleave, verify_every, chunk;
  uint32_t def_size; /* --def-size, 0 = natural */
  uint32_t tasks;    /* --tasks (flat), 0 = the workload's default */
  const char *model; /* --model: a checkpoint folder or config.json */
  uint32_t weight_dtype; /* --weights, 0 = the workload's default */
  uint32_t kv_len;   /* --kv-len, 0 = the workload's default */
  int deps[HBG_DEPS__COUNT]; /* --deps: each value an arm per policy */
  uint32_t n_deps;
  int record[HBG_RECORD__COUNT]; /* --record: likewise */
  uint32_t n_record;
  double trim;
  int pipeline, quiet;
  int host_alloc; /* BENCH_ALLOC_* */
  int policies[HBG_POLICY__COUNT];
  uint32_t n_policies;
  int peers[MAX_PEERS]; /* --arm: HBG_PEER_* */
  uint32_t n_peers;
  bench_multi_opts multi; /* --devices, --device-list, --mpi */
  const char *host_alloc_res; /* the allocator arm in effect, reported */
} bench_opts;

typedef struct trace_slot {
  bench_trace_ev ev;
  atomic_int ready;
} trace_slot;

typedef struct trace_buf {
  trace_slot *s;
  uint32_t cap;
  atomic_uint n;
} trace_buf;

typedef struct trace_ctx {
  trace_buf *buf;
  uint32_t pid;
} trace_ctx;

/* One arm of the run: an upload policy, or (peer != 0) a peer executor
 * on its own runtime and workload. */
typedef struct bench_arm {
  int policy;
  int deps, record; /* hbg_deps, hbg_record of its runtime */
  char name[48];    /* policy[/deps][/record] */
  int peer;       /* HBG_PEER_*, 0 for a policy */
  hbg_peer *p;
  uint64_t capture_ns, instantiate_ns; /* the first capture */
  uint32_t captures;
  hbg_runtime *rt;
  hbg_workload *w;
  hbg_bind *inflight;
  bench_slot inflight_slot;
  trace_ctx tctx;
} bench_arm;

typedef struct bench {
  bench_opts o;
  bench_arm arms[MAX_ARMS]; /* the policies (each with every --deps and
                               --record value), then the peers */
  uint32_t n_arms, n_pol;
  bench_rec *recs;
  uint32_t mismatches;
  uint64_t verify_minflt; /* faults taken inside host-reference checks */
  trace_buf tb;
  int progress;
  size_t done, total;
  bench_result res; /* fill_result */
  bench_policy_res pol[MAX_ARMS];
  char profile[64], spin[32], clock[16];
  char sim_opts[512]; /* the sim's options with mem= sized (bench_arms.c) */
} bench;

/* bench_opts.c */
void bench_usage(FILE *f);
/* Parse argv into *o. @return 0, 1 (--help: the caller prints the
 * usage), or -1 (the error printed). */
int bench_parse_opts(bench_opts *o, int argc, char **argv);
/* The device the run would use (--device, else HBG_DEVICE, else sim) and
 * in *options its options (--device-options, else HBG_DEVICE_OPTIONS). */
const char *bench_run_device(const bench_opts *o, const char **options);
/* Every output file can be written. @return 0 or -1 (printed). */
int bench_check_outputs(const bench_opts *o);

/* bench_arms.c */
const char *bench_arm_name(const bench_arm *a);
/* Print what failed (and keep it for bench_unit_last_error). @return rc. */
int bench_report(const bench_arm *a, const char *what, int rc);
int bench_open_arms(bench *B, const char **device, uint32_t *layers);
void bench_close_arms(bench *B);
int bench_fill_result(bench *B);

/* cmd_bench.c */
void bench_trace_cb(void *user, const hbg_trace_event *e);

#endif
