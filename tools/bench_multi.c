#include "bench_multi.h"
#include "bench_host.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hbg/hbg.h>

/* ---------------- options ---------------- */

int bench_multi_opt(bench_multi_opts *m, const char *name, const char *val) {
  if (!strncmp(name, "--devices", 9)) {
    char *end;
    errno = 0;
    unsigned long n = strtoul(val, &end, 10);
    if (errno || end == val || *end || *val == '-' || n < 1 ||
        n > BENCH_PLACE_MAX) {
      fprintf(stderr, "hbg bench: bad --devices '%s': want 1..%u\n", val,
              BENCH_PLACE_MAX);
      return -1;
    }
    m->devices = (uint32_t)n;
    return 0;
  }
  int n = bench_place_parse_list(val, m->list, BENCH_PLACE_MAX);
  if (n < 0) {
    fprintf(stderr,
            "hbg bench: bad --device-list '%s': want a comma list of at "
            "most %u distinct device ordinals\n",
            val, BENCH_PLACE_MAX);
    return -1;
  }
  m->n_list = (uint32_t)n;
  return 0;
}

int bench_multi_opt_mpi(bench_multi_opts *m) {
#ifdef HBG_HAVE_MPI
  m->mpi = 1;
  return 0;
#else
  (void)m;
  fprintf(stderr, "hbg bench: --mpi: this hbg was built without MPI support "
                  "(CMake found no MPI; install libopenmpi-dev and "
                  "reconfigure)\n");
  return -1;
#endif
}

int bench_multi_wanted(const bench_multi_opts *m) {
  return m->devices || m->n_list || m->mpi;
}

int bench_multi_check(const bench_multi_opts *m, int single_outputs,
                      const char *device_options) {
  if (!bench_multi_wanted(m))
    return 0;
  if ((m->devices != 0) + (m->n_list != 0) + (m->mpi != 0) > 1) {
    fprintf(stderr, "hbg bench: --devices, --device-list and --mpi exclude "
                    "one another (under --mpi each rank drives one device)\n");
    return -1;
  }
  if (single_outputs) {
    fprintf(stderr, "hbg bench: --csv, --svg and --trace are written for "
                    "one device; with --devices, --device-list or --mpi use "
                    "--json\n");
    return -1;
  }
  char v[32];
  if (!m->mpi && bench_opt_get(device_options, "device", v, sizeof v) != 0) {
    fprintf(stderr, "hbg bench: --devices / --device-list choose the "
                    "devices; take device= out of the device options\n");
    return -1;
  }
  return 0;
}

/* ---------------- one device ---------------- */

uint64_t bench_multi_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t bench_multi_thread_cpu_ns(void) {
  struct timespec t;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
    return 0;
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t process_cpu_ns(void) {
  struct timespec t;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0)
    return 0;
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void bench_dev_fail(bench_dev *d, int rc, const char *msg) {
  if (d->rc)
    return;
  d->rc = rc < 0 ? rc : HBG_E_INVAL;
  snprintf(d->err, sizeof d->err, "%s", msg && *msg ? msg : hbg_err_name(rc));
}

int bench_dev_open(bench_dev *d, const bench_multi_ctx *c) {
  if (bench_place_options(c->device, c->device_options, d->ordinal,
                          d->options, sizeof d->options) < 0) {
    bench_dev_fail(d, HBG_E_INVAL, "device options too long");
    return d->rc;
  }
  int rc = bench_unit_open(c->opts, d->options, &d->u);
  if (rc < 0)
    bench_dev_fail(d, rc, bench_unit_last_error());
  return d->rc;
}

int bench_dev_run(bench_dev *d, const bench_slot *s, size_t n) {
  uint64_t t0 = bench_multi_now_ns(), c0 = bench_multi_thread_cpu_ns();
  for (size_t i = 0; i < n && !d->rc; i++) {
    int rc = bench_unit_step(d->u, &s[i]);
    if (rc < 0)
      bench_dev_fail(d, rc, bench_unit_last_error());
    else
      d->binds++;
  }
  d->cpu_ns += bench_multi_thread_cpu_ns() - c0;
  d->busy_ns += bench_multi_now_ns() - t0;
  return d->rc;
}

int bench_dev_finish(bench_dev *d) {
  if (!d->rc && bench_unit_result(d->u, &d->res) < 0)
    bench_dev_fail(d, HBG_E_NOMEM, bench_unit_last_error());
  return d->rc;
}

static int jnum(cJSON *o, const char *k, double v) {
  cJSON *n = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
  if (!n || !cJSON_AddItemToObject(o, k, n)) {
    cJSON_Delete(n);
    return -1;
  }
  return 0;
}

static int jbool(cJSON *o, const char *k, int v) {
  return cJSON_AddBoolToObject(o, k, v) ? 0 : -1;
}

/* The plain run's JSON, as `hbg bench --json` writes it, as an object. */
static cJSON *plain_json(const bench_result *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return NULL;
  int rc = bench_write_json(r, f);
  if (fclose(f) != 0)
    rc = -1;
  cJSON *o = rc == 0 ? cJSON_Parse(buf) : NULL;
  free(buf);
  return o;
}

static int dev_verified(const bench_dev *d) {
  if (d->rc || !d->res || bench_unit_mismatches(d->u))
    return 0;
  uint32_t rows = d->res->n_policies + d->res->n_arms;
  for (uint32_t i = 0; i < rows; i++)
    if (!d->res->pol[i].verified)
      return 0;
  return rows > 0;
}

cJSON *bench_dev_row(const bench_dev *d) {
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  int bad = jnum(o, "ordinal", d->ordinal);
  bad |= cJSON_AddStringToObject(o, "device_options", d->options) ? 0 : -1;
  bad |= jbool(o, "ok", !d->rc);
  if (d->rc)
    bad |= cJSON_AddStringToObject(o, "error", d->err) ? 0 : -1;
  else
    bad |= cJSON_AddNullToObject(o, "error") ? 0 : -1;
  bad |= jbool(o, "verified", dev_verified(d));
  bad |= jnum(o, "binds", (double)d->binds);
  bad |= jnum(o, "busy_s", d->busy_ns / 1e9);
  bad |= jnum(o, "thread_cpu_s", d->cpu_ns / 1e9);
  bad |= jnum(o, "binds_per_s",
              d->busy_ns ? d->binds / (d->busy_ns / 1e9) : NAN);
  cJSON *arr = cJSON_AddArrayToObject(o, "policies");
  if (!arr)
    bad = -1;
  for (uint32_t i = 0; d->res && arr && !bad &&
                       i < d->res->n_policies + d->res->n_arms;
       i++) {
    const bench_policy_res *p = &d->res->pol[i];
    cJSON *x = cJSON_CreateObject();
    if (!x || !cJSON_AddItemToArray(arr, x)) {
      cJSON_Delete(x);
      bad = -1;
      break;
    }
    bad |= cJSON_AddStringToObject(x, "name", p->name) ? 0 : -1;
    bad |= jnum(x, "control_plane_median_us", p->ph[BENCH_PH_CONTROL].median / 1e3);
    bad |= jnum(x, "verified_binds", p->checked);
    bad |= jnum(x, "verify_mismatches", p->mismatched);
    bad |= jbool(x, "verified", p->verified);
  }
  if (d->res && !bad) {
    cJSON *plain = plain_json(d->res);
    if (!plain || !cJSON_AddItemToObject(o, "bench", plain)) {
      cJSON_Delete(plain);
      bad = -1;
    }
  }
  if (bad) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

int bench_multi_schedule(const bench_multi_ctx *c, bench_slot **out,
                         size_t *len) {
  *len = bench_schedule_len(c->n_arms, c->warmup, c->rounds);
  *out = malloc(*len * sizeof **out);
  if (!*out)
    return -1;
  if (bench_schedule(c->n_arms, c->warmup, c->rounds, c->interleave, *out,
                     *len) < 0) {
    free(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

int bench_multi_write_json(const cJSON *doc, const char *path) {
  char *s = cJSON_Print(doc);
  if (!s) {
    fprintf(stderr, "hbg bench: out of memory writing %s\n", path);
    return -1;
  }
  FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
  int rc = -1;
  if (f) {
    rc = fputs(s, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
    if (f != stdout && fclose(f) != 0)
      rc = -1;
  }
  if (rc < 0)
    fprintf(stderr, "hbg bench: cannot write %s: %s\n", path,
            strerror(errno));
  cJSON_free(s);
  return rc;
}

/* ---------------- --devices: one thread per device ---------------- */

/* Each block of the schedule runs twice: on device 0's solo unit alone
 * (the N=1 baseline; the other threads wait), then on every device at
 * once. Three barrier waits per block; `failed` is written only between
 * the first and the third, read only after the third, so every thread
 * leaves the loop at the same block. */
typedef struct multi_run {
  const bench_multi_ctx *c;
  bench_slot *sched;
  size_t len;
  uint32_t n;
  pthread_barrier_t bar;
  atomic_int failed;
  bench_dev solo, *devs;
  uint64_t group_wall_ns, group_proc_ns; /* written by thread 0 only */
  uint64_t solo_wall_ns, solo_proc_ns;
} multi_run;

typedef struct multi_thread {
  multi_run *R;
  bench_dev *d;
  pthread_t th;
} multi_thread;

static void *multi_thread_main(void *arg) {
  multi_thread *t = arg;
  multi_run *R = t->R;
  bench_dev *d = t->d;
  int first = d->index == 0;
  if (bench_dev_open(d, R->c) < 0 || (first && bench_dev_open(&R->solo, R->c) < 0))
    atomic_store(&R->failed, 1);
  pthread_barrier_wait(&R->bar);
  if (atomic_load(&R->failed))
    return NULL;
  for (size_t b = 0; b < R->len;) {
    size_t e = b;
    while (e + 1 < R->len && !R->sched[e].block_end)
      e++;
    e++;
    pthread_barrier_wait(&R->bar);
    if (first) {
      uint64_t t0 = bench_multi_now_ns(), p0 = process_cpu_ns();
      if (bench_dev_run(&R->solo, &R->sched[b], e - b) < 0)
        atomic_store(&R->failed, 1);
      R->solo_proc_ns += process_cpu_ns() - p0;
      R->solo_wall_ns += bench_multi_now_ns() - t0;
    }
    pthread_barrier_wait(&R->bar);
    uint64_t t0 = first ? bench_multi_now_ns() : 0;
    uint64_t p0 = first ? process_cpu_ns() : 0;
    if (bench_dev_run(d, &R->sched[b], e - b) < 0)
      atomic_store(&R->failed, 1);
    pthread_barrier_wait(&R->bar);
    if (first) {
      R->group_proc_ns += process_cpu_ns() - p0;
      R->group_wall_ns += bench_multi_now_ns() - t0;
    }
    if (atomic_load(&R->failed))
      break;
    b = e;
  }
  return NULL;
}

/* The measured binds' control-plane times of arm `arm` on every device,
 * summarised together. */
static int pooled(const multi_run *R, uint32_t arm, bench_summary *out) {
  size_t cap = (size_t)R->n * R->c->rounds, k = 0;
  uint64_t *v = malloc((cap ? cap : 1) * sizeof *v);
  if (!v)
    return -1;
  for (uint32_t i = 0; i < R->n; i++) {
    const bench_result *r = R->devs[i].res;
    for (size_t j = 0; j < r->n_recs && k < cap; j++)
      if (r->recs[j].arm == arm)
        v[k++] = r->recs[j].ns[BENCH_PH_CONTROL];
  }
  int rc = bench_summarize(v, k, 0.2, out);
  free(v);
  return rc;
}

typedef struct multi_agg {
  const char *name;
  double solo_us, all_us, worst_us;
  uint32_t worst;
} multi_agg;

static int aggregate(const multi_run *R, multi_agg *agg, uint32_t rows) {
  for (uint32_t a = 0; a < rows; a++) {
    bench_summary s;
    if (pooled(R, a, &s) < 0)
      return -1;
    agg[a].name = R->solo.res->pol[a].name;
    agg[a].solo_us = R->solo.res->pol[a].ph[BENCH_PH_CONTROL].median / 1e3;
    agg[a].all_us = s.median / 1e3;
    agg[a].worst_us = -1;
    for (uint32_t i = 0; i < R->n; i++) {
      double m = R->devs[i].res->pol[a].ph[BENCH_PH_CONTROL].median / 1e3;
      if (m > agg[a].worst_us) {
        agg[a].worst_us = m;
        agg[a].worst = i;
      }
    }
  }
  return 0;
}

static void print_table(const multi_run *R, const multi_agg *agg,
                        uint32_t rows, uint32_t verified) {
  const bench_multi_ctx *c = R->c;
  const bench_result *r0 = R->solo.res;
  double solo_bps = R->solo.binds / (R->solo_wall_ns / 1e9);
  double all_bps = (double)R->n * R->len / (R->group_wall_ns / 1e9);
  uint64_t cpu = 0;
  for (uint32_t i = 0; i < R->n; i++)
    cpu += R->devs[i].cpu_ns;
  printf("hbg bench --devices %u: %s, %s, %u layers, %u rounds + %u warm-up "
         "per policy, blocks of %u\n",
         R->n, c->device, c->workload, r0->layers, c->rounds, c->warmup,
         c->interleave);
  printf("N=1: device %u alone, each block run before the same block on all "
         "%u devices\n\n", R->solo.ordinal, R->n);
  printf("%-14s %12s %12s %8s %14s %12s %8s\n", "control plane", "N=1 med",
         "all med", "ratio", "worst device", "worst med", "ratio");
  for (uint32_t a = 0; a < rows; a++) {
    char worst[32];
    snprintf(worst, sizeof worst, "#%u (ord %u)", agg[a].worst,
             R->devs[agg[a].worst].ordinal);
    printf("%-14s %9.1f us %9.1f us %7.2fx %14s %9.1f us %7.2fx\n",
           agg[a].name, agg[a].solo_us, agg[a].all_us,
           bench_ratio(agg[a].all_us, agg[a].solo_us), worst,
           agg[a].worst_us, bench_ratio(agg[a].worst_us, agg[a].solo_us));
  }
  printf("\nbinds/s: N=1 %.0f, N=%u %.0f across devices (%.2fx)\n", solo_bps,
         R->n, all_bps, bench_ratio(all_bps, solo_bps));
  printf("driving threads' CPU: N=1 %.3f s, N=%u %.3f s in all (process: "
         "%.3f s, %.3f s)\n",
         R->solo.cpu_ns / 1e9, R->n, cpu / 1e9, R->solo_proc_ns / 1e9,
         R->group_proc_ns / 1e9);
  printf("verified: %u of %u devices, and the N=1 run %s\n", verified, R->n,
         dev_verified(&R->solo) ? "yes" : "NO");
}

static cJSON *multi_json(const multi_run *R, const multi_agg *agg,
                         uint32_t rows, uint32_t verified) {
  const bench_multi_ctx *c = R->c;
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return NULL;
  int bad = cJSON_AddStringToObject(root, "mode", "devices") ? 0 : -1;
  bad |= jnum(root, "devices", R->n);
  bad |= cJSON_AddStringToObject(root, "device", c->device) ? 0 : -1;
  bad |= cJSON_AddStringToObject(root, "workload", c->workload) ? 0 : -1;
  bad |= jnum(root, "rounds", c->rounds);
  bad |= jnum(root, "warmup", c->warmup);
  bad |= jnum(root, "interleave", c->interleave);
  bad |= cJSON_AddStringToObject(
             root, "schedule",
             "each block on device 0 alone (n1), then on every device at "
             "once, one host thread per device") ? 0 : -1;
  cJSON *n1 = cJSON_AddObjectToObject(root, "n1");
  cJSON *ag = cJSON_AddObjectToObject(root, "aggregate");
  cJSON *devs = cJSON_AddArrayToObject(root, "per_device");
  if (!n1 || !ag || !devs) {
    cJSON_Delete(root);
    return NULL;
  }
  cJSON *solo = bench_dev_row(&R->solo);
  if (!solo || !cJSON_AddItemToObject(n1, "device", solo)) {
    cJSON_Delete(solo);
    bad = -1;
  }
  bad |= jnum(n1, "wall_s", R->solo_wall_ns / 1e9);
  bad |= jnum(n1, "process_cpu_s", R->solo_proc_ns / 1e9);
  bad |= jnum(n1, "binds_per_s", R->solo.binds / (R->solo_wall_ns / 1e9));
  uint64_t cpu = 0, binds = 0;
  for (uint32_t i = 0; i < R->n; i++) {
    cpu += R->devs[i].cpu_ns;
    binds += R->devs[i].binds;
  }
  double bps = binds / (R->group_wall_ns / 1e9);
  bad |= jnum(ag, "binds", (double)binds);
  bad |= jnum(ag, "wall_s", R->group_wall_ns / 1e9);
  bad |= jnum(ag, "binds_per_s", bps);
  bad |= jnum(ag, "binds_per_s_ratio_to_n1",
              bench_ratio(bps, R->solo.binds / (R->solo_wall_ns / 1e9)));
  bad |= jnum(ag, "thread_cpu_s", cpu / 1e9);
  bad |= jnum(ag, "process_cpu_s", R->group_proc_ns / 1e9);
  bad |= jnum(ag, "verified_devices", verified);
  bad |= jbool(ag, "verified", verified == R->n && dev_verified(&R->solo));
  cJSON *pa = cJSON_AddArrayToObject(ag, "policies");
  for (uint32_t a = 0; pa && a < rows; a++) {
    cJSON *x = cJSON_CreateObject();
    if (!x || !cJSON_AddItemToArray(pa, x)) {
      cJSON_Delete(x);
      bad = -1;
      break;
    }
    bad |= cJSON_AddStringToObject(x, "name", agg[a].name) ? 0 : -1;
    bad |= jnum(x, "n1_control_plane_median_us", agg[a].solo_us);
    bad |= jnum(x, "control_plane_median_us", agg[a].all_us);
    bad |= jnum(x, "ratio_to_n1", bench_ratio(agg[a].all_us, agg[a].solo_us));
    bad |= jnum(x, "worst_device", agg[a].worst);
    bad |= jnum(x, "worst_control_plane_median_us", agg[a].worst_us);
    bad |= jnum(x, "worst_ratio_to_n1",
                bench_ratio(agg[a].worst_us, agg[a].solo_us));
  }
  if (!pa)
    bad = -1;
  for (uint32_t i = 0; i < R->n && !bad; i++) {
    cJSON *row = bench_dev_row(&R->devs[i]);
    if (!row || !cJSON_AddItemToArray(devs, row)) {
      cJSON_Delete(row);
      bad = -1;
      break;
    }
    bad |= jnum(row, "index", i);
    cJSON *pol = cJSON_GetObjectItemCaseSensitive(row, "policies");
    for (uint32_t a = 0; a < rows && !bad; a++) {
      cJSON *x = cJSON_GetArrayItem(pol, (int)a);
      bad |= x ? jnum(x, "ratio_to_n1",
                      bench_ratio(R->devs[i].res->pol[a].ph[BENCH_PH_CONTROL].median / 1e3,
                                  agg[a].solo_us))
               : -1;
    }
  }
  if (bad) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

int bench_multi_main(const bench_multi_ctx *c) {
  const bench_multi_opts *m = c->m;
  multi_run R;
  memset(&R, 0, sizeof R);
  R.c = c;
  R.n = m->n_list ? m->n_list : m->devices;
  atomic_init(&R.failed, 0);
  R.devs = calloc(R.n, sizeof *R.devs);
  multi_thread *th = calloc(R.n, sizeof *th);
  int status = 1;
  uint32_t started = 0;
  if (!R.devs || !th || bench_multi_schedule(c, &R.sched, &R.len) < 0) {
    fprintf(stderr, "hbg bench: out of memory\n");
    goto out;
  }
  for (uint32_t i = 0; i < R.n; i++) {
    R.devs[i].index = i;
    R.devs[i].ordinal = m->n_list ? m->list[i] : i;
  }
  R.solo.ordinal = R.devs[0].ordinal;
  if (pthread_barrier_init(&R.bar, NULL, R.n) != 0) {
    fprintf(stderr, "hbg bench: pthread_barrier_init failed\n");
    goto out;
  }
  for (; started < R.n; started++) {
    th[started].R = &R;
    th[started].d = &R.devs[started];
    if (pthread_create(&th[started].th, NULL, multi_thread_main,
                       &th[started]) != 0)
      break;
  }
  if (started < R.n) {
    /* the started threads wait at the first barrier for the rest: never
     * released, so the process ends here */
    fprintf(stderr, "hbg bench: cannot start the thread of device %u\n",
            started);
    exit(1);
  }
  for (uint32_t i = 0; i < R.n; i++)
    pthread_join(th[i].th, NULL);
  pthread_barrier_destroy(&R.bar);

  int failed = atomic_load(&R.failed);
  if (!failed && bench_dev_finish(&R.solo) < 0)
    failed = 1;
  if (R.solo.rc)
    fprintf(stderr, "hbg bench: device %u alone (the N=1 run) failed: %s\n",
            R.solo.ordinal, R.solo.err);
  for (uint32_t i = 0; i < R.n; i++)
    if ((!failed && bench_dev_finish(&R.devs[i]) < 0) || R.devs[i].rc) {
      fprintf(stderr, "hbg bench: device #%u (ordinal %u, options '%s') "
                      "failed: %s\n",
              i, R.devs[i].ordinal, R.devs[i].options, R.devs[i].err);
      failed = 1;
    }
  if (failed)
    goto out;
  uint32_t rows = R.solo.res->n_policies + R.solo.res->n_arms, verified = 0;
  multi_agg agg[16];
  if (rows > sizeof agg / sizeof agg[0] || aggregate(&R, agg, rows) < 0) {
    fprintf(stderr, "hbg bench: out of memory\n");
    goto out;
  }
  for (uint32_t i = 0; i < R.n; i++)
    verified += (uint32_t)dev_verified(&R.devs[i]);
  status = verified == R.n && dev_verified(&R.solo) ? 0 : 1;
  if (status)
    fprintf(stderr, "hbg bench: %u of %u devices (and the N=1 run: %s) "
                    "matched the host reference\n",
            verified, R.n, dev_verified(&R.solo) ? "yes" : "no");
  if (!c->quiet)
    print_table(&R, agg, rows, verified);
  if (c->json) {
    cJSON *doc = multi_json(&R, agg, rows, verified);
    if (!doc) {
      fprintf(stderr, "hbg bench: out of memory building the JSON\n");
      status = 1;
    } else {
      if (bench_multi_write_json(doc, c->json) < 0)
        status = 1;
      cJSON_Delete(doc);
    }
  }
out:
  bench_unit_close(R.solo.u);
  for (uint32_t i = 0; R.devs && i < R.n; i++)
    bench_unit_close(R.devs[i].u);
  free(R.devs);
  free(th);
  free(R.sched);
  return status;
}

#ifndef HBG_HAVE_MPI
int bench_mpi_main(const bench_multi_ctx *c) {
  (void)c; /* bench_multi_opt_mpi refuses --mpi in this build */
  return 2;
}
#endif
