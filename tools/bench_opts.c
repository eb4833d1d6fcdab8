/* hbg bench: usage and options (bench.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_host.h"
#include "cli.h"

void bench_usage(FILE *f) {
  fprintf(f,
"usage: hbg bench [options]\n"
"\n"
"Run the upload policies side by side on a built-in workload, interleaved in\n"
"one process on one device kind, and report per-bind control-plane phases.\n"
"\n"
"  --workload NAME       qwen3-14b (default), dsv4, flat (the control-plane\n"
"                        workloads: upstream node counts at hidden size 64),\n"
"                        qwen3-0.6b, qwen3-14b-real (real dims, random\n"
"                        weights) or qwen3 (dims and weights from --model)\n"
"  --model PATH          a Hugging Face Qwen3 checkpoint folder (config.json\n"
"                        and *.safetensors), or a config.json alone (random\n"
"                        weights at its dims); implies --workload qwen3\n"
"  --weights DTYPE       Qwen3 real-dim workloads: bf16 (default) or f32\n"
"  --kv-len N            Qwen3 real-dim workloads: KV-cache positions\n"
"                        (default %u); step s decodes at position s %% N\n"
"  --layers N            layers, at most %u (default: the workload's; a\n"
"                        model's first N of its layers)\n"
"  --device NAME         device backend (default sim, env HBG_DEVICE)\n"
"  --device-options S    backend options k=v,k=v (on the sim without mem=,\n"
"                        mem= is sized to the workload's buffers)\n"
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
          HBG_WORKLOAD_DEFAULT_KV_LEN, HBG_WORKLOAD_MAX_LAYERS, TRACE_BINDS,
          BENCH_PLACE_MAX);
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
const char *bench_run_device(const bench_opts *o, const char **options) {
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
  const char *dev = bench_run_device(o, NULL);
  if (!strcmp(dev, "cuda"))
    return 0;
  fprintf(stderr,
          "hbg bench: --arm %s needs --device cuda: the peer executors "
          "launch CUDA kernels, and this run's device is %s\n",
          hbg_peer_name(o->peers[0]), dev);
  return -1;
}

/* @return 0, 1 (--help), or -1 (usage error, printed). */
int bench_parse_opts(bench_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  o->workload = "qwen3-14b";
  int workload_named = 0;
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
    if (OPT("--workload")) {
      o->workload = v;
      workload_named = 1;
    } else if (OPT("--model"))
      o->model = v;
    else if (OPT("--weights")) {
      if (r > 0 && !strcmp(v, "bf16"))
        o->weight_dtype = HBG_DTYPE_BF16;
      else if (r > 0 && !strcmp(v, "f32"))
        o->weight_dtype = HBG_DTYPE_F32;
      else if (r > 0) {
        fprintf(stderr, "hbg bench: bad --weights '%s': want bf16 or f32\n",
                v);
        return -1;
      }
    } else if (OPT("--kv-len")) {
      if (r > 0 && parse_u32(a, v, 1, &o->kv_len) < 0)
        return -1;
      if (r > 0 && o->kv_len > HBG_WORKLOAD_MAX_KV_LEN) {
        fprintf(stderr, "hbg bench: --kv-len %u: at most %u positions\n",
                o->kv_len, HBG_WORKLOAD_MAX_KV_LEN);
        return -1;
      }
    }
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
  if (o->model) {
    if (workload_named && strcmp(o->workload, "qwen3")) {
      fprintf(stderr, "hbg bench: --model is for --workload qwen3, not '%s'\n",
              o->workload);
      return -1;
    }
    o->workload = "qwen3";
  } else if (!strcmp(o->workload, "qwen3")) {
    fprintf(stderr, "hbg bench: --workload qwen3 needs --model PATH\n");
    return -1;
  }
  const char *dev_opts;
  bench_run_device(o, &dev_opts);
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
int bench_check_outputs(const bench_opts *o) {
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

