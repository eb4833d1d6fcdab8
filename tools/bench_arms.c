/* hbg bench: the arms (each a runtime and a workload, or a peer
 * executor), their names, their failures' reports, the result they fill
 * (bench.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_host.h"
#include "cli.h"

/* ---------------- errors ---------------- */

const char *bench_arm_name(const bench_arm *a) {
  return a->peer ? hbg_peer_name(a->peer) : a->name;
}

/* The calling thread's last bench_report, for bench_unit_last_error: a device
 * driven by its own thread (--devices) or rank (--mpi) hands it on. */
static _Thread_local char last_report[512];

int bench_report(const bench_arm *a, const char *what, int rc) {
  const char *why = hbg_last_error();
  int n = snprintf(last_report, sizeof last_report, "%s%s%s failed: %s (%s)%s%s",
                   a ? bench_arm_name(a) : "", a ? ": " : "", what,
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

/* ---------------- setup ---------------- */

/* Arm i's runtime and workload; the first also names the device and
 * reads the layer count. */
static void workload_config(const bench_opts *o, hbg_workload_config *wc) {
  hbg_workload_config_init(wc);
  wc->name = o->workload;
  wc->layers = o->layers;
  wc->def_size = o->def_size;
  wc->tasks = o->tasks;
  wc->model = o->model;
  wc->weight_dtype = o->weight_dtype;
  wc->kv_len = o->kv_len;
}

/* The sim's options with mem= sized to the workload's buffers when they
 * name none (the sim's default is far below a model at real dims): the
 * buffers plus room for the runtime's own (windows, arenas, executor). */
static const char *sim_mem_options(bench *B, const char *device,
                                   const char *opts) {
  if (strcmp(device, "sim") || (opts && (strstr(opts, "mem=") == opts ||
                                         strstr(opts, ",mem="))))
    return opts;
  hbg_workload_config wc;
  workload_config(&B->o, &wc);
  uint64_t need;
  if (hbg_workload_bytes(&wc, &need) != 0 || need < (UINT64_C(128) << 20))
    return opts;
  need += need / 8 + (UINT64_C(256) << 20);
  snprintf(B->sim_opts, sizeof B->sim_opts, "%s%smem=%llu", opts ? opts : "",
           opts && *opts ? "," : "", (unsigned long long)need);
  return B->sim_opts;
}

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
  cfg.device_options =
      sim_mem_options(B, cfg.device ? cfg.device : "sim", cfg.device_options);
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
    return bench_report(a, "hbg_runtime_create", rc);
  hbg_workload_config wc;
  workload_config(&B->o, &wc);
  rc = hbg_workload_create(a->rt, &wc, &a->w);
  int known = 0;
  for (uint32_t k = 0; k < hbg_workload_count(); k++)
    known |= !strcmp(B->o.workload, hbg_workload_name(k));
  if (rc == HBG_E_NOTFOUND && !known) {
    fprintf(stderr, "hbg bench: unknown workload '%s'; built in:",
            B->o.workload);
    for (uint32_t k = 0; k < hbg_workload_count(); k++)
      fprintf(stderr, " %s", hbg_workload_name(k));
    fputc('\n', stderr);
    return rc;
  }
  if (rc < 0)
    return bench_report(a, "hbg_workload_create", rc);
  if (!i) {
    hbg_workload_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    rc = hbg_workload_get_info(a->w, &info);
    if (rc < 0)
      return bench_report(a, "hbg_workload_get_info", rc);
    *layers = info.layers;
    B->res.weight_bytes = info.weight_bytes;
    B->res.kv_bytes = info.kv_bytes;
    if (!strncmp(B->o.workload, "qwen3", 5) && strcmp(B->o.workload, "qwen3-14b"))
      B->res.weight_dtype =
          B->o.weight_dtype == HBG_DTYPE_F32 ? "f32" : "bf16";
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

int bench_open_arms(bench *B, const char **device, uint32_t *layers) {
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
      return bench_report(a, "hbg_peer_create", rc);
  }
  return 0;
}

void bench_close_arms(bench *B) {
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
int bench_fill_result(bench *B) {
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
    B->pol[i].name = bench_arm_name(a);
    B->pol[i].arm = a->peer != 0;
    B->pol[i].capture_ns = a->capture_ns;
    B->pol[i].instantiate_ns = a->instantiate_ns;
    B->pol[i].captures = a->captures;
    B->pol[i].deps = a->peer ? NULL : hbg_deps_name(a->deps);
    B->pol[i].record = a->peer ? NULL : hbg_record_name(a->record);
  }
  bench_result_machine(res);
  if (bench_result_compute(res) < 0) {
    bench_report(NULL, "statistics", HBG_E_NOMEM);
    return -1;
  }
  return 0;
}

