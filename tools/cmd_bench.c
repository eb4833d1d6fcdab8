#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hbg/hbg.h>
#include <hbg/hbg_peer.h>
#include <hbg/hbg_workload.h>

#include "bench_host.h"
#include "bench_multi.h"
#include "bench_out.h"
#include "bench_stats.h"
#include "cli.h"

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
} bench;

static const char *const track_names[] = {"orchestration", "uploads (host)",
                                          "copy engine", "device execution"};

static void usage(FILE *f) {
  fprintf(f,
"usage: hbg bench [options]\n"
"\n"
"Run the upload policies side by side on a built-in workload, interleaved in\n"
"one process on one device kind, and report per-bind control-plane phases.\n"
"\n"
"  --workload NAME       qwen3-14b (default), dsv4 or flat\n"
"  --layers N            layers, at most %u (default: the workload's)\n"
"  --device NAME         device backend (default sim, env HBG_DEVICE)\n"
"  --device-options S    backend options k=v,k=v\n"
"  --policy LIST         comma list of deferred,pinned-eager,coalesced,\n"
"                        pinned-bulk\n"
"                        (default all four; the first is the ratio baseline)\n"
"  --arm LIST            comma list of peer executors run as extra arms,\n"
"                        interleaved with the policies, each on its own\n"
"                        runtime and workload and verified like them:\n"
"                          eager       one kernel launch per kernel call\n"
"                          cuda-graph  the step captured once as a CUDA graph,\n"
"                                      replayed with one launch per step\n"
"                        they need --device cuda (another device: exit 2\n"
"                        before anything runs); their capture and\n"
"                        instantiation are reported apart from the steps\n"
"  --rounds N            measured binds per policy (default 60)\n"
"  --warmup N            warm-up binds per policy, dropped (default 5)\n"
"  --interleave K        binds per block: A x K, B x K, C x K, A x K ... (default 5)\n"
"  --trim F              trimmed mean drops floor(n*F) at each end (default 0.2)\n"
"  --host-alloc ARM      host allocator for the whole run, set once at start\n"
"                        for every policy: retain (default) keeps freed heap\n"
"                        pages in the process (glibc mallopt: no trimming of\n"
"                        the heap top, no mmap for blocks up to 32 MiB); trim\n"
"                        keeps glibc's defaults, which hand freed pages back\n"
"                        to the kernel, so a policy that mallocs and frees per\n"
"                        bind faults its pages in again every bind\n"
"  --deps LIST           comma list of explicit,inferred: how each bind's\n"
"                        entries are ordered (hbg_config.deps); each value is\n"
"                        an arm of every policy, interleaved with the rest;\n"
"                        with inferred the workload names no dependency\n"
"                        (default explicit)\n"
"  --record LIST         comma list of once,per-bind: when Definitions are\n"
"                        recorded (hbg_config.record); each value an arm of\n"
"                        every policy, like --deps (default once)\n"
"  --tasks N             flat workload: tasks per bind (default 1000)\n"
"  --chunk BYTES         coalesced: async chunk size, k/m suffix (default 0: one copy)\n"
"  --def-size BYTES      pad every Definition to at least BYTES with an opaque\n"
"                        section (k/m suffix, at most 16m; default 0: natural\n"
"                        size, 62,616 B for qwen3-14b); labelled in the output\n"
"  --pipeline            keep 2 binds in flight (begin bind N+1 before waiting\n"
"                        bind N); a bind to verify and the last of a block are\n"
"                        waited before the next begins\n"
"  --verify-every N|block\n"
"                        verify every N-th measured bind against the host\n"
"                        reference (0 = only the last of each policy), or the\n"
"                        last of each block (default block: the host reference\n"
"                        run then never sits between two binds of a block)\n"
"  --json FILE           summary as JSON\n"
"  --csv FILE            one row per measured bind\n"
"  --svg FILE            stacked bar chart of the control-plane phases\n"
"  --trace FILE          Chrome/Perfetto trace of %u extra binds per policy\n"
"  --devices N           drive N devices at once, one host thread each, the\n"
"                        same schedule on every one (sim: N sims; cuda:\n"
"                        ordinals 0..N-1), beside device 0 alone (the N=1\n"
"                        baseline, in alternate blocks); reports each device\n"
"                        and the aggregate (at most %u)\n"
"  --device-list L       as --devices, on the ordinals of the comma list L\n"
"  --mpi                 one rank per device under mpirun: the ordinal is the\n"
"                        launcher's local rank (OMPI_COMM_WORLD_LOCAL_RANK,\n"
"                        PMI_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID), or\n"
"                        device= of --device-options; rank 0 writes the\n"
"                        combined table and --json (exit 2 when this hbg was\n"
"                        built without MPI)\n"
"                        (--csv, --svg and --trace are for one device)\n"
"  --quiet               no table, no progress\n"
"  --help                this text\n"
"\n"
"Exit status: 0, 1 on an error or a verification mismatch, 2 on bad usage\n"
"(--arm without --device cuda included).\n",
          HBG_WORKLOAD_MAX_LAYERS, TRACE_BINDS, BENCH_PLACE_MAX);
}

/* ---------------- options ---------------- */

static int take(int argc, char **argv, int *i, const char *name,
                const char **val) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  if (strncmp(a, name, n) != 0)
    return 0;
  if (a[n] == '=') {
    *val = a + n + 1;
    return 1;
  }
  if (a[n] != '\0')
    return 0;
  if (*i + 1 >= argc) {
    fprintf(stderr, "hbg bench: %s needs a value\n", name);
    return -1;
  }
  *val = argv[++*i];
  return 1;
}

static int parse_u32(const char *name, const char *s, uint32_t lo,
                     uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mul = 1;
  if (end != s && (*end == 'k' || *end == 'K'))
    mul = 1024, end++;
  else if (end != s && (*end == 'm' || *end == 'M'))
    mul = 1024 * 1024, end++;
  if (errno || end == s || *end || *s == '-' || v * mul > UINT32_MAX ||
      v * mul < lo) {
    fprintf(stderr, "hbg bench: bad value for %s: '%s'\n", name, s);
    return -1;
  }
  *out = (uint32_t)(v * mul);
  return 0;
}

/* A comma list of distinct names, each turned into an int by parse, at
 * most max of them. @return 0 with out[0..*n), or -1. */
static int parse_list(const char *s, int (*parse)(const char *, int *),
                      int *out, uint32_t max, uint32_t *n) {
  *n = 0;
  while (*s) {
    const char *e = strchr(s, ',');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    char name[32];
    int v;
    if (len == 0 || len >= sizeof name)
      return -1;
    memcpy(name, s, len);
    name[len] = '\0';
    if (parse(name, &v) < 0 || *n >= max)
      return -1;
    for (uint32_t i = 0; i < *n; i++)
      if (out[i] == v)
        return -1;
    out[(*n)++] = v;
    s += len + (e != NULL);
    if (e && !*s)
      return -1;
  }
  return *n ? 0 : -1;
}

static int parse_policies(bench_opts *o, const char *s) {
  if (parse_list(s, hbg_policy_parse, o->policies, HBG_POLICY__COUNT,
                 &o->n_policies) == 0)
    return 0;
  fprintf(stderr,
          "hbg bench: bad --policy: want a comma list of distinct names from "
          "deferred,pinned-eager,coalesced,pinned-bulk\n");
  return -1;
}

static int parse_deps(bench_opts *o, const char *s) {
  if (parse_list(s, hbg_deps_parse, o->deps, HBG_DEPS__COUNT, &o->n_deps) ==
      0)
    return 0;
  fprintf(stderr, "hbg bench: bad --deps: want a comma list of distinct "
                  "names from explicit,inferred\n");
  return -1;
}

static int parse_record(bench_opts *o, const char *s) {
  if (parse_list(s, hbg_record_parse, o->record, HBG_RECORD__COUNT,
                 &o->n_record) == 0)
    return 0;
  fprintf(stderr, "hbg bench: bad --record: want a comma list of distinct "
                  "names from once,per-bind\n");
  return -1;
}

static int parse_peers(bench_opts *o, const char *s) {
  if (parse_list(s, hbg_peer_parse, o->peers, MAX_PEERS, &o->n_peers) == 0)
    return 0;
  fprintf(stderr, "hbg bench: bad --arm: want a comma list of distinct names "
                  "from %s,%s\n",
          hbg_peer_name(HBG_PEER_EAGER), hbg_peer_name(HBG_PEER_CUDA_GRAPH));
  return -1;
}

/* The device the run would use (--device, else HBG_DEVICE, else sim) and
 * its options (--device-options, else HBG_DEVICE_OPTIONS, else NULL). */
static const char *run_device(const bench_opts *o, const char **options) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  if (options)
    *options = o->device_options ? o->device_options : cfg.device_options;
  return o->device ? o->device : cfg.device ? cfg.device : "sim";
}

/* The peers run CUDA kernels: on any other device the run would fail at
 * hbg_peer_create, after the policies' setup. Refused here instead, with
 * the device the run would use. */
static int check_peer_device(const bench_opts *o) {
  if (!o->n_peers)
    return 0;
  const char *dev = run_device(o, NULL);
  if (!strcmp(dev, "cuda"))
    return 0;
  fprintf(stderr,
          "hbg bench: --arm %s needs --device cuda: the peer executors "
          "launch CUDA kernels, and this run's device is %s\n",
          hbg_peer_name(o->peers[0]), dev);
  return -1;
}

/* @return 0, 1 (--help), or -1 (usage error, printed). */
static int parse_opts(bench_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  o->workload = "qwen3-14b";
  o->rounds = 60;
  o->warmup = 5;
  o->interleave = 5;
  o->verify_every = BENCH_VERIFY_BLOCK;
  o->trim = 0.2;
  o->host_alloc = BENCH_ALLOC_RETAIN;
  for (int p = 0; p < HBG_POLICY__COUNT; p++)
    o->policies[o->n_policies++] = p;
  o->deps[o->n_deps++] = HBG_DEPS_EXPLICIT;
  o->record[o->n_record++] = HBG_RECORD_ONCE;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    int r;
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
      return 1;
    if (!strcmp(a, "--pipeline")) {
      o->pipeline = 1;
      continue;
    }
    if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
      o->quiet = 1;
      continue;
    }
    if (!strcmp(a, "--mpi")) {
      if (bench_multi_opt_mpi(&o->multi) < 0)
        return -1;
      continue;
    }
#define OPT(name) ((r = take(argc, argv, &i, name, &v)) != 0)
    if (OPT("--workload"))
      o->workload = v;
    else if (OPT("--layers")) {
      if (r > 0 && parse_u32(a, v, 1, &o->layers) < 0)
        return -1;
      if (r > 0 && o->layers > HBG_WORKLOAD_MAX_LAYERS) {
        fprintf(stderr, "hbg bench: --layers %u: at most %u layers\n",
                o->layers, HBG_WORKLOAD_MAX_LAYERS);
        return -1;
      }
    } else if (OPT("--device"))
      o->device = v;
    else if (OPT("--device-options"))
      o->device_options = v;
    else if (OPT("--policy")) {
      if (r > 0 && parse_policies(o, v) < 0)
        return -1;
    } else if (OPT("--deps")) {
      if (r > 0 && parse_deps(o, v) < 0)
        return -1;
    } else if (OPT("--record")) {
      if (r > 0 && parse_record(o, v) < 0)
        return -1;
    } else if (OPT("--tasks")) {
      if (r > 0 && parse_u32(a, v, 1, &o->tasks) < 0)
        return -1;
      if (r > 0 && o->tasks > HBG_WORKLOAD_MAX_TASKS) {
        fprintf(stderr, "hbg bench: --tasks %u: at most %u tasks\n",
                o->tasks, HBG_WORKLOAD_MAX_TASKS);
        return -1;
      }
    } else if (OPT("--arm")) {
      if (r > 0 && parse_peers(o, v) < 0)
        return -1;
    } else if (OPT("--rounds")) {
      if (r > 0 && parse_u32(a, v, 1, &o->rounds) < 0)
        return -1;
    } else if (OPT("--warmup")) {
      if (r > 0 && parse_u32(a, v, 0, &o->warmup) < 0)
        return -1;
    } else if (OPT("--interleave")) {
      if (r > 0 && parse_u32(a, v, 1, &o->interleave) < 0)
        return -1;
    } else if (OPT("--chunk")) {
      if (r > 0 && parse_u32(a, v, 0, &o->chunk) < 0)
        return -1;
    } else if (OPT("--def-size")) {
      if (r > 0 && parse_u32(a, v, 0, &o->def_size) < 0)
        return -1;
      if (r > 0 && o->def_size > HBG_WORKLOAD_MAX_DEF_SIZE) {
        fprintf(stderr, "hbg bench: --def-size %u: at most %u bytes\n",
                o->def_size, HBG_WORKLOAD_MAX_DEF_SIZE);
        return -1;
      }
    } else if (OPT("--verify-every")) {
      if (r > 0 && strcmp(v, "block") == 0)
        o->verify_every = BENCH_VERIFY_BLOCK;
      else if (r > 0 && parse_u32(a, v, 0, &o->verify_every) < 0)
        return -1;
    } else if (OPT("--trim")) {
      if (r > 0) {
        char *end;
        o->trim = strtod(v, &end);
        if (end == v || *end || !(o->trim >= 0.0 && o->trim < 0.5)) {
          fprintf(stderr, "hbg bench: --trim wants 0 <= F < 0.5\n");
          return -1;
        }
      }
    } else if (OPT("--host-alloc")) {
      if (r > 0 && bench_host_alloc_parse(v, &o->host_alloc) < 0) {
        fprintf(stderr,
                "hbg bench: bad --host-alloc '%s': want retain or trim\n", v);
        return -1;
      }
    } else if (OPT("--devices") || OPT("--device-list")) {
      if (r > 0 && bench_multi_opt(&o->multi, a, v) < 0)
        return -1;
    } else if (OPT("--json"))
      o->json = v;
    else if (OPT("--csv"))
      o->csv = v;
    else if (OPT("--svg"))
      o->svg = v;
    else if (OPT("--trace"))
      o->trace = v;
    else {
      fprintf(stderr, "hbg bench: unknown option '%s'\n", a);
      return -1;
    }
#undef OPT
    if (r < 0)
      return -1;
  }
  const char *dev_opts;
  run_device(o, &dev_opts);
  if (bench_multi_check(&o->multi, o->csv || o->svg || o->trace,
                        dev_opts) < 0)
    return -1;
  for (uint32_t k = 0; k < hbg_workload_count(); k++)
    if (!strcmp(o->workload, hbg_workload_name(k)))
      return check_peer_device(o);
  fprintf(stderr, "hbg bench: unknown workload '%s'; built in:", o->workload);
  for (uint32_t k = 0; k < hbg_workload_count(); k++)
    fprintf(stderr, " %s", hbg_workload_name(k));
  fputc('\n', stderr);
  return -1;
}

/* Each output file can be written, checked before the benchmark runs:
 * opened for append (nothing truncated), and removed again if this made it. */
static int check_outputs(const bench_opts *o) {
  const char *paths[] = {o->json, o->csv, o->svg, o->trace};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    if (!paths[i])
      continue;
    int existed = access(paths[i], F_OK) == 0;
    FILE *f = fopen(paths[i], "a");
    if (!f) {
      fprintf(stderr, "hbg bench: cannot write %s: %s\n", paths[i],
              strerror(errno));
      return -1;
    }
    fclose(f);
    if (!existed)
      remove(paths[i]);
  }
  return 0;
}

/* ---------------- errors ---------------- */

static const char *arm_name(const bench_arm *a) {
  return a->peer ? hbg_peer_name(a->peer) : a->name;
}

/* The calling thread's last report, for bench_unit_last_error: a device
 * driven by its own thread (--devices) or rank (--mpi) hands it on. */
static _Thread_local char last_report[512];

static int report(const bench_arm *a, const char *what, int rc) {
  const char *why = hbg_last_error();
  int n = snprintf(last_report, sizeof last_report, "%s%s%s failed: %s (%s)%s%s",
                   a ? arm_name(a) : "", a ? ": " : "", what,
                   hbg_err_name(rc), hbg_strerror(rc), *why ? ": " : "", why);
  fprintf(stderr, "hbg bench: %s\n", last_report);
  int64_t code;
  const char *msg = NULL;
  if (a && a->rt && hbg_runtime_last_native_error(a->rt, &code, &msg) == 0) {
    fprintf(stderr, "hbg bench:   native error %lld: %s\n", (long long)code,
            msg ? msg : "");
    if (n >= 0 && (size_t)n < sizeof last_report)
      snprintf(last_report + n, sizeof last_report - (size_t)n,
               "; native error %lld: %s", (long long)code, msg ? msg : "");
  }
  return rc;
}

const char *bench_unit_last_error(void) { return last_report; }

/* ---------------- tracing ---------------- */

static void trace_cb(void *user, const hbg_trace_event *e) {
  trace_ctx *c = user;
  trace_buf *t = c->buf;
  unsigned i = atomic_fetch_add_explicit(&t->n, 1, memory_order_relaxed);
  if (i >= t->cap)
    return;
  trace_slot *s = &t->s[i];
  s->ev.pid = c->pid;
  s->ev.tid = e->track;
  s->ev.name = e->name;
  s->ev.start_ns = e->start_ns;
  s->ev.dur_ns = e->dur_ns;
  s->ev.bytes = e->bytes;
  s->ev.seq = e->bind_seq;
  atomic_store_explicit(&s->ready, 1, memory_order_release);
}

/* ---------------- binds ---------------- */

static int wants_verify(const bench *B, const bench_slot *s) {
  if (!s->measured)
    return 0;
  if (s->round + 1 == B->o.rounds)
    return 1;
  if (B->o.verify_every == BENCH_VERIFY_BLOCK)
    return s->block_end;
  return B->o.verify_every && (s->round + 1) % B->o.verify_every == 0;
}

static void progress(bench *B) {
  B->done++;
  if (B->progress && (B->done % 4 == 0 || B->done == B->total))
    fprintf(stderr, "\rhbg bench: %zu/%zu binds", B->done, B->total);
}

/* The record of a measured step (arm, round and step set), or NULL. */
static bench_rec *step_rec(bench *B, const bench_arm *a, const bench_slot *s) {
  if (!s->measured || !B->recs)
    return NULL;
  bench_rec *x = &B->recs[(size_t)(a - B->arms) * B->o.rounds + s->round];
  x->arm = (uint32_t)(a - B->arms);
  x->round = s->round;
  x->seq = s->index;
  return x;
}

/* The step's host-reference check when the schedule asks for one, then the
 * progress line; *rec is the step's record (verified -1 when not checked, 0
 * on a mismatch, counted, 1 on a match; max_abs_err), NULL for a step not
 * measured. @return 0 or an error (reported). */
static int check_step(bench *B, bench_arm *a, const bench_slot *s,
                      bench_rec **rec) {
  double e = 0.0;
  int v = -1;
  *rec = NULL;
  if (wants_verify(B, s)) {
    uint64_t f0 = bench_thread_minflt();
    int rc = hbg_workload_verify(a->w, s->index, &e);
    B->verify_minflt += bench_thread_minflt() - f0;
    if (rc == HBG_E_VERIFY) {
      if (B->progress)
        fputc('\n', stderr);
      fprintf(stderr,
              "hbg bench: %s: step %u differs from the host reference "
              "(max abs err %g)\n",
              arm_name(a), s->index, e);
      B->mismatches++;
      v = 0;
    } else if (rc < 0) {
      return report(a, "hbg_workload_verify", rc);
    } else {
      v = 1;
    }
  }
  progress(B);
  bench_rec *x = step_rec(B, a, s);
  if (x) {
    x->verified = v;
    x->max_abs_err = e;
  }
  *rec = x;
  return 0;
}

/* One step of a peer arm, launched and waited at once (a peer holds one
 * step in flight; --pipeline is for the policies). A step that captured
 * the graph has capture and instantiation taken out of its control plane:
 * they are recorded apart, the first time in the arm. */
static int run_peer_step(bench *B, bench_arm *a, const bench_slot *s) {
  int rc = hbg_peer_launch(a->p, s->index);
  if (rc < 0)
    return report(a, "hbg_peer_launch", rc);
  hbg_peer_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  rc = hbg_peer_wait(a->p, &st);
  if (rc < 0)
    return report(a, "hbg_peer_wait", rc);
  uint64_t setup = st.capture_ns + st.instantiate_ns;
  if (setup) {
    if (!a->captures) {
      a->capture_ns = st.capture_ns;
      a->instantiate_ns = st.instantiate_ns;
    }
    a->captures++;
  }
  bench_rec *x;
  rc = check_step(B, a, s, &x);
  if (rc < 0 || !x)
    return rc;
  x->ns[BENCH_PH_CONTROL] =
      st.control_plane_ns > setup ? st.control_plane_ns - setup : 0;
  x->ns[BENCH_PH_EXEC] = st.exec_ns;
  x->ns[BENCH_PH_DEVICE] = st.device_ns;
  x->launches = st.launches;
  x->updates = st.updates;
  return 0;
}

static int finish(bench *B, bench_arm *a, hbg_bind *b, const bench_slot *s) {
  hbg_bind_stats st;
  int rc = hbg_bind_wait(b);
  if (rc < 0) {
    uint32_t entry, node;
    int located = hbg_bind_error_location(b, &entry, &node) == 0;
    hbg_bind_end(b);
    report(a, "hbg_bind_wait", rc);
    if (located && node != HBG_TASK_NONE)
      fprintf(stderr, "hbg bench:   at window entry %u, graph node %u\n",
              entry, node);
    else if (located)
      fprintf(stderr, "hbg bench:   at window entry %u\n", entry);
    return rc;
  }
  st.struct_size = sizeof st; /* this build's struct, device_ns included */
  rc = hbg_bind_stats_get(b, &st);
  hbg_bind_end(b);
  if (rc < 0)
    return report(a, "hbg_bind_stats_get", rc);
  bench_rec *x;
  rc = check_step(B, a, s, &x);
  if (rc < 0 || !x)
    return rc;
  x->ns[BENCH_PH_CONTROL] = st.control_plane_ns;
  x->ns[BENCH_PH_HOST_ORCH] = st.host_orch_ns;
  x->ns[BENCH_PH_GRAPH_UP] = st.graph_upload_ns;
  x->ns[BENCH_PH_WINDOW_UP] = st.window_upload_ns;
  x->ns[BENCH_PH_EXEC] = st.exec_ns;
  x->ns[BENCH_PH_DEVICE] = st.device_ns;
  x->graph_bytes = st.graph.bytes;
  x->graph_copies = st.graph.copies;
  x->window_bytes = st.window.bytes;
  x->window_copies = st.window.copies;
  x->def_bytes = st.def_bytes;
  x->h2d_bytes = st.h2d_bytes;
  x->h2d_copies = st.h2d_copies;
  x->arena_high_water = st.arena_high_water;
  x->leftover = st.leftover;
  x->fallback = st.fallback;
  x->dev_allocs = st.dev_allocs;
  x->n_recorded = st.n_recorded;
  x->defs_validated = st.exec_defs_validated;
  x->split = st.exec_split != 0;
  x->dev_setup_ns = st.device_setup_ns;
  x->setup_nodes = st.exec_setup_nodes;
  return 0;
}

/* One bind of step s->index. With --pipeline the bind stays in flight until
 * the next one of the same policy is launched. */
static int run_bind_inner(bench *B, bench_arm *a, const bench_slot *s) {
  if (a->peer)
    return run_peer_step(B, a, s);
  hbg_bind *b = NULL;
  int rc = hbg_bind_begin(a->rt, &b);
  if (rc < 0)
    return report(a, "hbg_bind_begin", rc);
  rc = hbg_workload_submit(a->w, b, s->index);
  if (rc < 0) {
    hbg_bind_end(b);
    return report(a, "hbg_workload_submit", rc);
  }
  rc = hbg_bind_launch(b);
  if (rc < 0) {
    hbg_bind_end(b);
    return report(a, "hbg_bind_launch", rc);
  }
  if (!B->o.pipeline)
    return finish(B, a, b, s);
  if (a->inflight) {
    hbg_bind *prev = a->inflight;
    a->inflight = NULL;
    rc = finish(B, a, prev, &a->inflight_slot);
    if (rc < 0) {
      hbg_bind_end(b);
      return rc;
    }
  }
  if (s->block_end || wants_verify(B, s))
    return finish(B, a, b, s);
  a->inflight = b;
  a->inflight_slot = *s;
  return 0;
}

/* run_bind_inner, counting the orchestrating thread's minor page faults
 * (host-reference checks excluded) into the measured bind's record. With
 * --pipeline the count also covers the previous bind's wait. */
static int run_bind(bench *B, bench_arm *a, const bench_slot *s) {
  uint64_t f0 = bench_thread_minflt(), v0 = B->verify_minflt;
  int rc = run_bind_inner(B, a, s);
  uint64_t f1 = bench_thread_minflt();
  if (rc == 0 && s->measured && B->recs) {
    bench_rec *x = &B->recs[(size_t)(a - B->arms) * B->o.rounds + s->round];
    x->minflt = f0 == UINT64_MAX || f1 == UINT64_MAX
                    ? UINT64_MAX
                    : f1 - f0 - (B->verify_minflt - v0);
  }
  return rc;
}

static int run_measured(bench *B) {
  const bench_opts *o = &B->o;
  size_t len = bench_schedule_len(B->n_arms, o->warmup, o->rounds);
  bench_slot *sched = malloc(len * sizeof *sched);
  if (!sched)
    return report(NULL, "malloc", HBG_E_NOMEM);
  int rc = bench_schedule(B->n_arms, o->warmup, o->rounds, o->interleave,
                          sched, len);
  for (size_t i = 0; i < len && rc == 0; i++)
    rc = run_bind(B, &B->arms[sched[i].arm], &sched[i]);
  free(sched);
  return rc;
}

static int run_traced(bench *B) {
  trace_buf *t = &B->tb;
  t->s = calloc(TRACE_CAP, sizeof *t->s);
  if (!t->s)
    return report(NULL, "calloc", HBG_E_NOMEM);
  t->cap = TRACE_CAP;
  atomic_init(&t->n, 0);
  for (uint32_t i = 0; i < TRACE_CAP; i++)
    atomic_init(&t->s[i].ready, 0);
  for (uint32_t ai = 0; ai < B->n_pol; ai++) {
    bench_arm *a = &B->arms[ai];
    a->tctx.buf = t;
    a->tctx.pid = ai;
    int rc = hbg_runtime_set_trace(a->rt, trace_cb, &a->tctx);
    if (rc < 0)
      return report(a, "hbg_runtime_set_trace", rc);
    for (uint32_t j = 0; j < TRACE_BINDS && rc == 0; j++) {
      bench_slot s = {.arm = ai,
                      .index = B->o.warmup + B->o.rounds + j,
                      .block_end = j + 1 == TRACE_BINDS};
      rc = run_bind(B, a, &s);
    }
    hbg_runtime_set_trace(a->rt, NULL, NULL);
    if (rc < 0)
      return rc;
  }
  return 0;
}

static int write_trace(bench *B) {
  trace_buf *t = &B->tb;
  uint32_t n = atomic_load(&t->n);
  if (n > t->cap) {
    fprintf(stderr, "hbg bench: trace: %u events dropped (buffer full)\n",
            n - t->cap);
    n = t->cap;
  }
  bench_trace_ev *ev = malloc((n ? n : 1) * sizeof *ev);
  const char *names[MAX_ARMS];
  if (!ev)
    return report(NULL, "malloc", HBG_E_NOMEM);
  size_t k = 0;
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load_explicit(&t->s[i].ready, memory_order_acquire) &&
        t->s[i].ev.tid < 4)
      ev[k++] = t->s[i].ev;
  for (uint32_t i = 0; i < B->n_pol; i++)
    names[i] = arm_name(&B->arms[i]);
  int rc = -1;
  FILE *f = fopen(B->o.trace, "w");
  if (f) {
    rc = bench_write_trace(ev, k, names, B->n_pol, track_names, 4, f);
    if (fclose(f) != 0)
      rc = -1;
  }
  free(ev);
  if (rc < 0)
    fprintf(stderr, "hbg bench: cannot write %s: %s\n", B->o.trace,
            strerror(errno));
  return rc;
}

typedef int (*writer_fn)(const bench_result *, FILE *);

static int write_out(const char *path, writer_fn fn, const bench_result *r) {
  FILE *f = fopen(path, "w");
  int rc = -1;
  if (f) {
    rc = fn(r, f);
    if (fclose(f) != 0)
      rc = -1;
  }
  if (rc < 0)
    fprintf(stderr, "hbg bench: cannot write %s: %s\n", path,
            strerror(errno));
  return rc;
}

/* ---------------- setup ---------------- */

/* Arm i's runtime and workload; the first also names the device and
 * reads the layer count. */
static int open_arm(bench *B, uint32_t i, const char **device,
                    uint32_t *layers) {
  bench_arm *a = &B->arms[i];
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = (uint32_t)a->policy;
  if (B->o.device)
    cfg.device = B->o.device;
  if (B->o.device_options)
    cfg.device_options = B->o.device_options;
  cfg.coalesce_chunk_bytes = B->o.chunk;
  cfg.deps = (uint32_t)a->deps;
  cfg.record = (uint32_t)a->record;
  if (!i) {
    *device = cfg.device ? cfg.device : "sim";
    if (!B->o.device_options)
      B->o.device_options = cfg.device_options;
  }
  int rc = hbg_runtime_create(&cfg, &a->rt);
  if (rc < 0)
    return report(a, "hbg_runtime_create", rc);
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = B->o.workload;
  wc.layers = B->o.layers;
  wc.def_size = B->o.def_size;
  wc.tasks = B->o.tasks;
  rc = hbg_workload_create(a->rt, &wc, &a->w);
  if (rc == HBG_E_NOTFOUND) {
    fprintf(stderr, "hbg bench: unknown workload '%s'; built in:",
            B->o.workload);
    for (uint32_t k = 0; k < hbg_workload_count(); k++)
      fprintf(stderr, " %s", hbg_workload_name(k));
    fputc('\n', stderr);
    return rc;
  }
  if (rc < 0)
    return report(a, "hbg_workload_create", rc);
  if (!i) {
    hbg_workload_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    rc = hbg_workload_get_info(a->w, &info);
    if (rc < 0)
      return report(a, "hbg_workload_get_info", rc);
    *layers = info.layers;
  }
  return 0;
}

/* Arm a's name: its policy, then its deps and record values where the run
 * has more than one of them or a value other than the default. */
static void name_arm(const bench_opts *o, bench_arm *a) {
  int n = snprintf(a->name, sizeof a->name, "%s", hbg_policy_name(a->policy));
  if (o->n_deps > 1 || a->deps != HBG_DEPS_EXPLICIT)
    n += snprintf(a->name + n, sizeof a->name - (size_t)n, "/%s",
                  hbg_deps_name(a->deps));
  if (o->n_record > 1 || a->record != HBG_RECORD_ONCE)
    snprintf(a->name + n, sizeof a->name - (size_t)n, "/%s",
             hbg_record_name(a->record));
}

static int open_arms(bench *B, const char **device, uint32_t *layers) {
  const bench_opts *o = &B->o;
  uint32_t i = 0;
  for (uint32_t p = 0; p < o->n_policies; p++)
    for (uint32_t d = 0; d < o->n_deps; d++)
      for (uint32_t r = 0; r < o->n_record; r++, i++) {
        bench_arm *a = &B->arms[i];
        a->policy = o->policies[p];
        a->deps = o->deps[d];
        a->record = o->record[r];
        name_arm(o, a);
        B->n_arms = B->n_pol = i + 1;
        int rc = open_arm(B, i, device, layers);
        if (rc < 0)
          return rc;
      }
  /* Each peer on a runtime of its own (the first policy's settings; the
   * peer uploads nothing through it) and a workload of its own. */
  for (uint32_t j = 0; j < B->o.n_peers; j++) {
    uint32_t k = B->n_pol + j;
    bench_arm *a = &B->arms[k];
    a->policy = B->o.policies[0];
    a->deps = B->o.deps[0];
    a->record = B->o.record[0];
    a->peer = B->o.peers[j];
    B->n_arms = k + 1;
    int rc = open_arm(B, k, device, layers);
    if (rc < 0)
      return rc;
    rc = hbg_peer_create(a->w, a->peer, &a->p);
    if (rc < 0)
      return report(a, "hbg_peer_create", rc);
  }
  return 0;
}

static void close_arms(bench *B) {
  for (uint32_t i = B->n_arms; i-- > 0;) {
    bench_arm *a = &B->arms[i];
    hbg_bind_end(a->inflight);
    a->inflight = NULL;
    hbg_peer_destroy(a->p);
    a->p = NULL;
    hbg_workload_destroy(a->w);
    hbg_runtime_destroy(a->rt);
    a->w = NULL;
    a->rt = NULL;
  }
}

/* B->res and B->pol from the measured binds and the run's settings.
 * @return 0, or -1 (out of memory, reported). */
static int fill_result(bench *B) {
  const bench_opts *o = &B->o;
  bench_result *res = &B->res;
  int rc;
  res->host_alloc = o->host_alloc_res;
  res->glibc_tunables = getenv("GLIBC_TUNABLES");
  res->workload = o->workload;
  res->device_options = o->device_options;
  rc = bench_opt_get(o->device_options, "profile", B->profile,
                     sizeof B->profile);
  res->device_profile = rc > 0 ? B->profile : rc < 0 ? "?" : "none";
  res->sim_spin_us = -1;
  if (!strcmp(res->device, "sim")) {
    res->sim_spin_us = BENCH_SIM_SPIN_DEFAULT_US;
    if (bench_opt_get(o->device_options, "spin", B->spin, sizeof B->spin) > 0)
      res->sim_spin_us = strtoll(B->spin, NULL, 10);
    res->sim_clock = "real";
    if (bench_opt_get(o->device_options, "clock", B->clock, sizeof B->clock) >
        0)
      res->sim_clock = B->clock;
  }
  res->version = hbg_version_string();
  res->rounds = o->rounds;
  res->warmup = o->warmup;
  res->interleave = o->interleave;
  res->verify_every = o->verify_every;
  res->pipeline = (uint32_t)o->pipeline;
  res->chunk = o->chunk;
  res->def_size = o->def_size;
  res->tasks = strcmp(o->workload, "flat") == 0
                   ? (o->tasks ? o->tasks : HBG_WORKLOAD_DEFAULT_TASKS)
                   : 0;
  res->trim = o->trim;
  res->n_policies = B->n_pol;
  res->n_arms = B->n_arms - B->n_pol;
  res->pol = B->pol;
  res->n_recs = (size_t)B->n_arms * o->rounds;
  res->recs = B->recs;
  for (uint32_t i = 0; i < B->n_arms; i++) {
    const bench_arm *a = &B->arms[i];
    B->pol[i].name = arm_name(a);
    B->pol[i].arm = a->peer != 0;
    B->pol[i].capture_ns = a->capture_ns;
    B->pol[i].instantiate_ns = a->instantiate_ns;
    B->pol[i].captures = a->captures;
    B->pol[i].deps = a->peer ? NULL : hbg_deps_name(a->deps);
    B->pol[i].record = a->peer ? NULL : hbg_record_name(a->record);
  }
  bench_result_machine(res);
  if (bench_result_compute(res) < 0) {
    report(NULL, "statistics", HBG_E_NOMEM);
    return -1;
  }
  return 0;
}

/* ---------------- hooks for bench_multi.c ---------------- */

int bench_unit_open(const bench_opts *o, const char *device_options,
                    bench_unit **out) {
  *out = NULL;
  bench *B = calloc(1, sizeof *B);
  if (!B)
    return report(NULL, "calloc", HBG_E_NOMEM);
  *out = B;
  B->o = *o;
  B->o.device_options = device_options;
  B->recs = calloc((size_t)(o->n_policies * o->n_deps * o->n_record +
                            o->n_peers) *
                       o->rounds,
                   sizeof *B->recs);
  if (!B->recs)
    return report(NULL, "calloc", HBG_E_NOMEM);
  return open_arms(B, &B->res.device, &B->res.layers);
}

int bench_unit_step(bench_unit *u, const bench_slot *s) {
  return run_bind(u, &u->arms[s->arm], s);
}

int bench_unit_result(bench_unit *u, const bench_result **out) {
  if (fill_result(u) < 0)
    return -1;
  *out = &u->res;
  return 0;
}

uint32_t bench_unit_mismatches(const bench_unit *u) { return u->mismatches; }

void bench_unit_close(bench_unit *u) {
  if (!u)
    return;
  close_arms(u);
  free(u->tb.s);
  free(u->recs);
  free(u);
}

/* --devices, --device-list, --mpi. */
static int run_multi(const bench_opts *o) {
  bench_multi_ctx c;
  memset(&c, 0, sizeof c);
  c.m = &o->multi;
  c.opts = o;
  c.device = run_device(o, &c.device_options);
  c.workload = o->workload;
  c.json = o->json;
  c.quiet = o->quiet;
  c.n_arms = o->n_policies + o->n_peers;
  c.warmup = o->warmup;
  c.rounds = o->rounds;
  c.interleave = o->interleave;
  return o->multi.mpi ? bench_mpi_main(&c) : bench_multi_main(&c);
}

int hbg_cmd_bench(int argc, char **argv) {
  bench B;
  memset(&B, 0, sizeof B);
  int rc = parse_opts(&B.o, argc, argv);
  if (rc > 0) {
    usage(stdout);
    return 0;
  }
  if (rc < 0) {
    fprintf(stderr, "hbg bench: 'hbg bench --help' lists the options\n");
    return 2;
  }
  const bench_opts *o = &B.o;
  int status = 1;

  rc = bench_host_alloc_apply(o->host_alloc);
  B.o.host_alloc_res = rc ? "system" : bench_host_alloc_name(o->host_alloc);
  if (rc)
    fprintf(stderr, "hbg bench: --host-alloc %s needs glibc's malloc and "
                    "mallopt; this run keeps the allocator's defaults "
                    "(recorded as \"system\")\n",
            bench_host_alloc_name(o->host_alloc));

  if (check_outputs(o) < 0)
    return 1;
  if (bench_multi_wanted(&o->multi))
    return run_multi(o);
  B.recs = calloc((size_t)(o->n_policies * o->n_deps * o->n_record +
                           o->n_peers) *
                      o->rounds,
                  sizeof *B.recs);
  if (!B.recs) {
    report(NULL, "calloc", HBG_E_NOMEM);
    return 1;
  }
  if (open_arms(&B, &B.res.device, &B.res.layers) < 0)
    goto out;
  B.total = bench_schedule_len(B.n_arms, o->warmup, o->rounds) +
            (o->trace ? (size_t)B.n_pol * TRACE_BINDS : 0);
  B.progress = !o->quiet && isatty(STDERR_FILENO);
  if (run_measured(&B) < 0)
    goto out;
  if (o->trace && run_traced(&B) < 0)
    goto out;
  if (B.progress)
    fprintf(stderr, "\r\033[K");
  B.progress = 0;

  if (fill_result(&B) < 0)
    goto out;
  const bench_result *res = &B.res;
  status = B.mismatches ? 1 : 0;
  if (!o->quiet && bench_print_table(res, stdout) < 0)
    status = 1;
  if (o->json && write_out(o->json, bench_write_json, res) < 0)
    status = 1;
  if (o->csv && write_out(o->csv, bench_write_csv, res) < 0)
    status = 1;
  if (o->svg && write_out(o->svg, bench_write_svg, res) < 0)
    status = 1;
  if (o->trace && write_trace(&B) < 0)
    status = 1;
  if (B.mismatches)
    fprintf(stderr, "hbg bench: %u verified bind(s) differ from the host "
                    "reference\n", B.mismatches);
out:
  if (B.progress)
    fputc('\n', stderr);
  close_arms(&B);
  free(B.tb.s);
  free(B.recs);
  return status;
}
