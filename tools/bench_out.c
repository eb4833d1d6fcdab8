#include "bench_out.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

static const char *const phase_names[BENCH_PH__COUNT] = {
    "control_plane", "host_orch", "graph_upload", "window_upload", "exec",
    "device"};

const char *bench_phase_name(int ph) {
  return ph >= 0 && ph < BENCH_PH__COUNT ? phase_names[ph] : "?";
}

int bench_phase_of_arm(int ph) {
  return ph == BENCH_PH_CONTROL || ph == BENCH_PH_EXEC || ph == BENCH_PH_DEVICE;
}

static uint32_t n_rows(const bench_result *r) {
  return r->n_policies + r->n_arms;
}

/* ---------------- aggregation ---------------- */

static int compute_policy(bench_result *r, uint32_t arm, uint64_t *scratch) {
  bench_policy_res *p = &r->pol[arm];
  const bench_policy_res keep = *p;
  memset(p, 0, sizeof *p);
  p->name = keep.name;
  p->arm = keep.arm;
  p->capture_ns = keep.capture_ns;
  p->instantiate_ns = keep.instantiate_ns;
  p->captures = keep.captures;
  p->deps = keep.deps;
  p->record = keep.record;
  size_t n = 0;
  double items = 0;
  for (size_t i = 0; i < r->n_recs; i++) {
    const bench_rec *x = &r->recs[i];
    if (x->arm != arm)
      continue;
    n++;
    p->graph_bytes += (double)x->graph_bytes;
    p->graph_copies += (double)x->graph_copies;
    p->window_bytes += (double)x->window_bytes;
    p->window_copies += (double)x->window_copies;
    p->def_bytes += (double)x->def_bytes;
    p->h2d_bytes += (double)x->h2d_bytes;
    p->h2d_copies += (double)x->h2d_copies;
    p->leftover += x->leftover;
    p->fallback += x->fallback;
    p->dev_allocs += x->dev_allocs;
    p->minflt += x->minflt == UINT64_MAX ? NAN : (double)x->minflt;
    p->launches += (double)x->launches;
    p->updates += (double)x->updates;
    p->defs_validated += (double)x->defs_validated;
    if (x->split) {
      p->split_binds++;
      p->setup_nodes += (double)x->setup_nodes;
    }
    if (x->counts) {
      p->count_binds++;
      items += (double)x->items;
      p->ops_per_item += (double)x->dispatch_ops;
      p->phases_per_item += (double)x->kernel_phases;
      p->body_ns += (double)x->body_ns;
      p->tail_ns += (double)x->tail_ns;
    }
    if (x->arena_high_water > p->arena_high_water)
      p->arena_high_water = x->arena_high_water;
    if (x->verified >= 0) {
      p->checked++;
      p->mismatched += x->verified == 0;
      if (x->max_abs_err > p->max_abs_err)
        p->max_abs_err = x->max_abs_err;
    }
  }
  if (!n)
    return -1;
  double *means[] = {&p->graph_bytes, &p->graph_copies, &p->window_bytes,
                     &p->window_copies, &p->def_bytes, &p->h2d_bytes,
                     &p->h2d_copies, &p->leftover, &p->fallback,
                     &p->dev_allocs, &p->minflt, &p->launches,
                     &p->updates, &p->defs_validated};
  for (size_t i = 0; i < sizeof means / sizeof means[0]; i++)
    *means[i] /= (double)n;
  p->setup_nodes = p->split_binds ? p->setup_nodes / p->split_binds : NAN;
  p->items_per_bind = p->count_binds ? items / p->count_binds : NAN;
  p->ops_per_item = items > 0 ? p->ops_per_item / items : NAN;
  p->phases_per_item = items > 0 ? p->phases_per_item / items : NAN;
  p->body_ns = p->count_binds ? p->body_ns / p->count_binds : NAN;
  p->tail_ns = p->count_binds ? p->tail_ns / p->count_binds : NAN;
  p->dev_setup.median = p->dev_setup.min = p->dev_setup.tmean = NAN;
  if (p->split_binds) {
    size_t k = 0;
    for (size_t i = 0; i < r->n_recs; i++)
      if (r->recs[i].arm == arm && r->recs[i].split)
        scratch[k++] = r->recs[i].dev_setup_ns;
    if (bench_summarize(scratch, k, r->trim, &p->dev_setup) < 0)
      return -1;
  }
  p->binds = (uint32_t)n;
  p->verified = p->checked > 0 && p->mismatched == 0;
  for (int ph = 0; ph < BENCH_PH__COUNT; ph++) {
    size_t k = 0;
    for (size_t i = 0; i < r->n_recs; i++)
      if (r->recs[i].arm == arm)
        scratch[k++] = r->recs[i].ns[ph];
    if (bench_summarize(scratch, k, r->trim, &p->ph[ph]) < 0)
      return -1;
  }
  return 0;
}

int bench_result_compute(bench_result *r) {
  if (!r || !r->n_policies || !r->pol || !r->n_recs || !r->recs)
    return -1;
  const uint32_t rows = n_rows(r);
  uint64_t *scratch = malloc(r->n_recs * sizeof *scratch);
  if (!scratch)
    return -1;
  int rc = 0;
  for (uint32_t a = 0; a < rows && rc == 0; a++)
    rc = compute_policy(r, a, scratch);
  free(scratch);
  if (rc < 0)
    return rc;
  for (uint32_t a = 0; a < rows; a++)
    for (int ph = 0; ph < BENCH_PH__COUNT; ph++)
      r->pol[a].ratio[ph] =
          bench_ratio(r->pol[a].ph[ph].median, r->pol[0].ph[ph].median);
  return 0;
}

void bench_result_machine(bench_result *r) {
  if (gethostname(r->hostname, sizeof r->hostname) != 0)
    strcpy(r->hostname, "unknown");
  r->hostname[sizeof r->hostname - 1] = '\0';
  r->nproc = sysconf(_SC_NPROCESSORS_ONLN);
}

/* ---------------- table ---------------- */

static const char *verify_text(const bench_result *r) {
  if (r->verify_every == BENCH_VERIFY_BLOCK)
    return "the last bind of each block";
  if (r->verify_every == 0)
    return "last bind of each policy";
  if (r->verify_every == 1)
    return "every measured bind";
  return "every n-th measured bind and the last";
}

static const char *alloc_text(const char *arm) {
  if (!arm)
    return "not recorded";
  if (!strcmp(arm, "retain"))
    return "retain (freed heap pages kept in the process)";
  if (!strcmp(arm, "trim"))
    return "trim (glibc defaults: freed heap pages returned to the kernel)";
  if (!strcmp(arm, "system"))
    return "system (the allocator's defaults; retain unavailable)";
  return arm;
}

/* ", sim copy polling spin=200 (us)[, clock virtual]" into buf, or ""
 * when the device is not the sim. */
static void spin_text(char *buf, size_t n, const bench_result *r) {
  if (r->sim_spin_us < 0)
    buf[0] = '\0';
  else
    snprintf(buf, n, ", sim copy polling spin=%lld (us)%s",
             (long long)r->sim_spin_us,
             r->sim_clock && !strcmp(r->sim_clock, "virtual")
                 ? ", clock virtual"
                 : "");
}

int bench_print_table(const bench_result *r, FILE *f) {
  char spin[64];
  spin_text(spin, sizeof spin, r);
  fprintf(f, "hbg bench: workload %s, %u layers, device %s%s%s\n",
          r->workload, r->layers, r->device,
          r->device_options && *r->device_options ? " " : "",
          r->device_options ? r->device_options : "");
  fprintf(f, "  host allocator %s, device profile %s%s\n",
          alloc_text(r->host_alloc),
          r->device_profile ? r->device_profile : "none", spin);
  if (r->tasks)
    fprintf(f, "  %u tasks per bind\n", r->tasks);
  if (r->weight_dtype)
    fprintf(f, "  weights %s, %.1f MB; KV cache %.1f MB\n", r->weight_dtype,
            (double)r->weight_bytes / 1e6, (double)r->kv_bytes / 1e6);
  if (r->glibc_tunables)
    fprintf(f, "  GLIBC_TUNABLES=%s\n", r->glibc_tunables);
  fprintf(f,
          "  %u measured + %u warm-up binds per policy, interleaved in blocks "
          "of %u, trimmed mean drops %.0f%% at each end\n",
          r->rounds, r->warmup, r->interleave, r->trim * 100.0);
  fprintf(f, "  pipeline %s, coalesce chunk %llu B, verify %s",
          r->pipeline ? "on (2 binds in flight)" : "off",
          (unsigned long long)r->chunk, verify_text(r));
  if (r->verify_every != BENCH_VERIFY_BLOCK)
    fprintf(f, " (every %u)", r->verify_every);
  fputc('\n', f);
  if (r->def_size)
    fprintf(f, "  Definitions padded to at least %u B (opaque section)\n",
            r->def_size);
  if (r->n_arms) {
    fprintf(f, "  peer arms:");
    for (uint32_t a = r->n_policies; a < n_rows(r); a++)
      fprintf(f, " %s", r->pol[a].name);
    fprintf(f, " (steps run without hbg, interleaved with the policies; "
               "no upload phases)\n");
  }
  fprintf(f, "  machine %s, %ld cpus\n\n", r->hostname, r->nproc);

  fprintf(f, "%-14s %-14s %12s %12s %12s\n", "policy / arm", "phase (us)",
          "median", "min", "tmean");
  for (uint32_t a = 0; a < n_rows(r); a++) {
    const bench_policy_res *p = &r->pol[a];
    int first = 1;
    for (int ph = 0; ph < BENCH_PH__COUNT; ph++) {
      if (p->arm && !bench_phase_of_arm(ph))
        continue;
      fprintf(f, "%-14s %-14s %12.2f %12.2f %12.2f\n", first ? p->name : "",
              phase_names[ph], p->ph[ph].median / 1e3, p->ph[ph].min / 1e3,
              p->ph[ph].tmean / 1e3);
      first = 0;
    }
  }
  fprintf(f, "(device: device time by device events, 0 where the device "
             "keeps no event timer)\n");
  fprintf(f, "\n%-14s %12s %12s %10s %12s %9s %9s %10s %9s  %s\n",
          "per bind", "graph B", "H2D B", "H2D cps", "def B", "leftover",
          "fallback", "arena hw", "faults", "verified");
  for (uint32_t a = 0; a < r->n_policies; a++) {
    const bench_policy_res *p = &r->pol[a];
    fprintf(f, "%-14s %12.0f %12.0f %10.1f %12.0f %9.1f %9.1f %10llu %9.1f  %s (%u/%u)\n",
            p->name, p->graph_bytes, p->h2d_bytes, p->h2d_copies,
            p->def_bytes, p->leftover, p->fallback,
            (unsigned long long)p->arena_high_water, p->minflt,
            p->verified ? "yes" : "NO", p->checked - p->mismatched,
            p->checked);
  }
  fprintf(f, "(faults: minor page faults of the orchestrating thread per "
             "bind, host-reference checks excluded)\n");
  if (r->n_arms) {
    fprintf(f, "\n%-14s %10s %10s %12s %14s %9s  %s\n", "per step",
            "launches", "updates", "capture us", "instantiate us", "captures",
            "verified");
    for (uint32_t a = r->n_policies; a < n_rows(r); a++) {
      const bench_policy_res *p = &r->pol[a];
      fprintf(f, "%-14s %10.1f %10.1f %12.2f %14.2f %9u  %s (%u/%u)\n",
              p->name, p->launches, p->updates, p->capture_ns / 1e3,
              p->instantiate_ns / 1e3, p->captures,
              p->verified ? "yes" : "NO", p->checked - p->mismatched,
              p->checked);
    }
    fprintf(f, "(capture, instantiate: the arm's first graph capture, "
               "outside the rows above; captures: steps that captured, "
               "warm-up included)\n");
  }
  if (n_rows(r) > 1) {
    fprintf(f, "\nratio of medians vs %s:\n", r->pol[0].name);
    for (uint32_t a = 1; a < n_rows(r); a++) {
      fprintf(f, "  %-14s", r->pol[a].name);
      for (int ph = 0; ph < BENCH_PH__COUNT; ph++) {
        if (r->pol[a].arm && !bench_phase_of_arm(ph))
          continue;
        double x = r->pol[a].ratio[ph];
        if (isnan(x))
          fprintf(f, " %s n/a", phase_names[ph]);
        else
          fprintf(f, " %s %.3fx", phase_names[ph], x);
      }
      fputc('\n', f);
    }
  }
  return ferror(f) ? -1 : 0;
}

/* ---------------- JSON ---------------- */

static int jnum(cJSON *o, const char *k, double v) {
  cJSON *n = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
  if (!n)
    return -1;
  if (!cJSON_AddItemToObject(o, k, n)) {
    cJSON_Delete(n);
    return -1;
  }
  return 0;
}

static int jstr(cJSON *o, const char *k, const char *v) {
  return cJSON_AddStringToObject(o, k, v ? v : "") ? 0 : -1;
}

static int jsum(cJSON *o, const char *k, const bench_summary *s) {
  cJSON *x = cJSON_AddObjectToObject(o, k);
  if (!x)
    return -1;
  int bad = jnum(x, "median", s->median / 1e3);
  bad |= jnum(x, "min", s->min / 1e3);
  bad |= jnum(x, "trimmed_mean", s->tmean / 1e3);
  return bad;
}

static int json_policy(cJSON *arr, const bench_policy_res *p) {
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return -1;
  if (!cJSON_AddItemToArray(arr, o)) {
    cJSON_Delete(o);
    return -1;
  }
  char key[32];
  int bad = jstr(o, "name", p->name);
  if (p->deps)
    bad |= jstr(o, "deps", p->deps);
  if (p->record)
    bad |= jstr(o, "record", p->record);
  for (int ph = 0; ph < BENCH_PH__COUNT; ph++) {
    if (p->arm && !bench_phase_of_arm(ph))
      continue;
    snprintf(key, sizeof key, "%s_us", phase_names[ph]);
    bad |= jsum(o, key, &p->ph[ph]);
  }
  if (p->arm) {
    bad |= jnum(o, "launches_per_step", p->launches);
    bad |= jnum(o, "updates_per_step", p->updates);
    bad |= jnum(o, "capture_us", p->captures ? p->capture_ns / 1e3 : NAN);
    bad |= jnum(o, "instantiate_us",
                p->captures ? p->instantiate_ns / 1e3 : NAN);
    bad |= jnum(o, "captures", p->captures);
  } else {
    bad |= jnum(o, "graph_bytes_per_bind", p->graph_bytes);
    bad |= jnum(o, "graph_copies_per_bind", p->graph_copies);
    bad |= jnum(o, "window_bytes_per_bind", p->window_bytes);
    bad |= jnum(o, "window_copies_per_bind", p->window_copies);
    bad |= jnum(o, "def_bytes_per_bind", p->def_bytes);
    bad |= jnum(o, "h2d_bytes_per_bind", p->h2d_bytes);
    bad |= jnum(o, "h2d_copies_per_bind", p->h2d_copies);
    bad |= jnum(o, "leftover_per_bind", p->leftover);
    bad |= jnum(o, "fallback_per_bind", p->fallback);
    bad |= jnum(o, "dev_allocs_per_bind", p->dev_allocs);
    bad |= jnum(o, "minor_faults_per_bind", p->minflt);
    bad |= jnum(o, "arena_high_water_bytes", (double)p->arena_high_water);
    /* the executor's own account: null where the device gives none */
    bad |= jsum(o, "device_setup_us", &p->dev_setup);
    bad |= jnum(o, "exec_defs_validated_per_bind", p->defs_validated);
    bad |= jnum(o, "exec_setup_nodes_per_bind", p->setup_nodes);
    bad |= jnum(o, "exec_items_per_bind", p->items_per_bind);
    bad |= jnum(o, "exec_dispatch_ops_per_item", p->ops_per_item);
    bad |= jnum(o, "exec_phases_per_item", p->phases_per_item);
    bad |= jnum(o, "device_body_us", p->body_ns / 1e3);
    bad |= jnum(o, "device_tail_us", p->tail_ns / 1e3);
  }
  bad |= jnum(o, "binds", p->binds);
  bad |= jnum(o, "verified_binds", p->checked);
  bad |= jnum(o, "verify_mismatches", p->mismatched);
  bad |= jnum(o, "max_abs_err", p->max_abs_err);
  bad |= cJSON_AddBoolToObject(o, "verified", p->verified) ? 0 : -1;
  cJSON *ra = cJSON_AddObjectToObject(o, "ratio_vs_first");
  if (!ra)
    return -1;
  for (int ph = 0; ph < BENCH_PH__COUNT; ph++)
    if (!p->arm || bench_phase_of_arm(ph))
      bad |= jnum(ra, phase_names[ph], p->ratio[ph]);
  return bad;
}

static int write_cjson(cJSON *root, int formatted, FILE *f) {
  char *s = formatted ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
  if (!s)
    return -1;
  int rc = fputs(s, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
  cJSON_free(s);
  return rc;
}

int bench_write_json(const bench_result *r, FILE *f) {
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return -1;
  int bad = jstr(root, "workload", r->workload);
  bad |= jstr(root, "device", r->device);
  bad |= jstr(root, "device_options", r->device_options);
  if (r->weight_dtype) {
    bad |= jstr(root, "weight_dtype", r->weight_dtype);
    bad |= jnum(root, "weight_bytes", (double)r->weight_bytes);
    bad |= jnum(root, "kv_bytes", (double)r->kv_bytes);
  }
  bad |= jstr(root, "device_profile", r->device_profile ? r->device_profile
                                                        : "none");
  if (r->sim_clock)
    bad |= jstr(root, "sim_clock", r->sim_clock);
  if (r->sim_spin_us >= 0)
    bad |= jnum(root, "sim_spin_us", (double)r->sim_spin_us);
  else
    bad |= cJSON_AddNullToObject(root, "sim_spin_us") ? 0 : -1;
  bad |= jstr(root, "host_alloc", r->host_alloc);
  if (r->glibc_tunables)
    bad |= jstr(root, "glibc_tunables", r->glibc_tunables);
  else
    bad |= cJSON_AddNullToObject(root, "glibc_tunables") ? 0 : -1;
  bad |= jstr(root, "version", r->version);
  bad |= jnum(root, "layers", r->layers);
  if (r->tasks)
    bad |= jnum(root, "tasks", r->tasks);
  bad |= jnum(root, "rounds", r->rounds);
  bad |= jnum(root, "warmup", r->warmup);
  bad |= jnum(root, "interleave", r->interleave);
  bad |= jnum(root, "trim", r->trim);
  if (r->verify_every == BENCH_VERIFY_BLOCK)
    bad |= jstr(root, "verify_every", "block");
  else
    bad |= jnum(root, "verify_every", r->verify_every);
  bad |= jnum(root, "chunk_bytes", (double)r->chunk);
  bad |= jnum(root, "def_size", r->def_size);
  bad |= cJSON_AddBoolToObject(root, "pipeline", r->pipeline) ? 0 : -1;
  cJSON *m = cJSON_AddObjectToObject(root, "machine");
  if (m) {
    bad |= jstr(m, "hostname", r->hostname);
    bad |= jnum(m, "nproc", (double)r->nproc);
  }
  cJSON *arr = cJSON_AddArrayToObject(root, "policies");
  cJSON *arms = cJSON_AddArrayToObject(root, "arms");
  if (!m || !arr || !arms)
    bad = -1;
  for (uint32_t a = 0; a < n_rows(r) && !bad; a++)
    bad |= json_policy(a < r->n_policies ? arr : arms, &r->pol[a]);
  if (!bad)
    bad = write_cjson(root, 1, f);
  cJSON_Delete(root);
  return bad ? -1 : 0;
}

/* ---------------- CSV ---------------- */

int bench_write_csv(const bench_result *r, FILE *f) {
  fprintf(f, "policy,round,step");
  for (int ph = 0; ph < BENCH_PH__COUNT; ph++)
    fprintf(f, ",%s_ns", phase_names[ph]);
  fprintf(f, ",graph_bytes,graph_copies,window_bytes,window_copies,def_bytes,"
             "h2d_bytes,h2d_copies,leftover,fallback,dev_allocs,recorded,"
             "arena_high_water,verified,max_abs_err,minor_faults,host_alloc,"
             "device_profile,sim_spin_us,kind,launches,updates,capture_ns,"
             "instantiate_ns,deps,record,sim_clock\n");
  for (size_t i = 0; i < r->n_recs; i++) {
    const bench_rec *x = &r->recs[i];
    const bench_policy_res *p = x->arm < n_rows(r) ? &r->pol[x->arm] : NULL;
    const char *name = p ? p->name : "?";
    fprintf(f, "%s,%u,%llu", name, x->round, (unsigned long long)x->seq);
    for (int ph = 0; ph < BENCH_PH__COUNT; ph++)
      fprintf(f, ",%llu", (unsigned long long)x->ns[ph]);
    fprintf(f, ",%llu,%llu,%llu,%llu,%llu,%llu,%llu,%u,%u,%u,%u,%llu,%s,%g,",
            (unsigned long long)x->graph_bytes,
            (unsigned long long)x->graph_copies,
            (unsigned long long)x->window_bytes,
            (unsigned long long)x->window_copies,
            (unsigned long long)x->def_bytes,
            (unsigned long long)x->h2d_bytes,
            (unsigned long long)x->h2d_copies, x->leftover, x->fallback,
            x->dev_allocs, x->n_recorded,
            (unsigned long long)x->arena_high_water,
            x->verified < 0 ? "" : x->verified ? "1" : "0",
            x->verified < 0 ? 0.0 : x->max_abs_err);
    if (x->minflt != UINT64_MAX)
      fprintf(f, "%llu", (unsigned long long)x->minflt);
    fprintf(f, ",%s,%s,", r->host_alloc ? r->host_alloc : "",
            r->device_profile ? r->device_profile : "none");
    if (r->sim_spin_us >= 0)
      fprintf(f, "%lld", (long long)r->sim_spin_us);
    if (p && p->arm)
      fprintf(f, ",arm,%llu,%llu,%llu,%llu", (unsigned long long)x->launches,
              (unsigned long long)x->updates,
              (unsigned long long)p->capture_ns,
              (unsigned long long)p->instantiate_ns);
    else
      fprintf(f, ",policy,,,,");
    fprintf(f, ",%s,%s,%s\n", p && p->deps ? p->deps : "",
            p && p->record ? p->record : "",
            r->sim_clock ? r->sim_clock : "");
  }
  return ferror(f) ? -1 : 0;
}

/* ---------------- SVG ---------------- */

static void xml_text(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&apos;", f); break;
    default:
      if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
        fputc(*s, f);
    }
  }
}

static void fmt_us(char *buf, size_t n, double us) {
  const char *fmt = us >= 100.0 ? "%.0f" : us >= 10.0 ? "%.1f" : "%.2f";
  snprintf(buf, n, fmt, us);
}

static void fmt_tick(char *buf, size_t n, double v, double step) {
  int dec = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
  snprintf(buf, n, "%.*f", dec > 6 ? 6 : dec, v);
}

static double nice_step(double range) {
  if (!(range > 0.0))
    return 1.0;
  double raw = range / 5.0;
  double e = pow(10.0, floor(log10(raw)));
  double m = raw / e;
  return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * e;
}

#define SVG_W 960.0
#define SVG_ML 150.0
#define SVG_MR 110.0
#define SVG_MT 92.0
#define SVG_BH 34.0
#define SVG_BG 34.0
#define SVG_PANEL_GAP 96.0
/* A policy whose stacked bar is under this share of the first panel's axis
 * is drawn again in a second panel with its own scale. */
#define SVG_ZOOM_SHARE 0.2

static const int svg_segs[3] = {BENCH_PH_HOST_ORCH, BENCH_PH_GRAPH_UP,
                                BENCH_PH_WINDOW_UP};
static const char *const svg_colors[3] = {"#4e79a7", "#f28e2b", "#59a14f"};
#define SVG_ARM_COLOR "#9c755f"

/* The drawn bar: the medians of the three phases, stacked; a peer arm's
 * is its control_plane median alone. */
static double svg_stacked_us(const bench_policy_res *p) {
  if (p->arm)
    return p->ph[BENCH_PH_CONTROL].median / 1e3;
  double s = 0.0;
  for (int i = 0; i < 3; i++)
    s += p->ph[svg_segs[i]].median / 1e3;
  return s;
}

static double svg_axis_max(double vmax, double *step) {
  *step = nice_step(vmax);
  double amax = vmax > 0.0 ? ceil(vmax / *step - 1e-9) * *step : *step * 5.0;
  return amax > 0.0 ? amax : *step;
}

static double svg_panel_height(uint32_t n) {
  return n * (SVG_BH + SVG_BG) + SVG_BG;
}

static void svg_bar(FILE *f, const bench_result *r, uint32_t a, double y,
                    double amax) {
  const bench_policy_res *p = &r->pol[a];
  double pw = SVG_W - SVG_ML - SVG_MR, x = SVG_ML;
  char b1[32];
  fprintf(f, "<g class=\"bar\">\n<text x=\"%.1f\" y=\"%.1f\" "
             "text-anchor=\"end\" font-weight=\"bold\">",
          SVG_ML - 10.0, y + SVG_BH / 2.0 + 5.0);
  xml_text(f, p->name);
  fprintf(f, "</text>\n");
  if (p->arm) {
    double us = p->ph[BENCH_PH_CONTROL].median / 1e3;
    double w = us / amax * pw;
    fmt_us(b1, sizeof b1, us);
    fprintf(f, "<rect class=\"seg\" x=\"%.3f\" y=\"%.1f\" "
               "width=\"%.3f\" height=\"%.1f\" fill=\"%s\"><title>", x, y,
            w, SVG_BH, SVG_ARM_COLOR);
    xml_text(f, p->name);
    fprintf(f, " control_plane: %s \xC2\xB5s</title></rect>\n", b1);
    x += w;
  }
  for (int i = 0; i < 3 && !p->arm; i++) {
    double us = p->ph[svg_segs[i]].median / 1e3;
    double w = us / amax * pw;
    fmt_us(b1, sizeof b1, us);
    fprintf(f, "<rect class=\"seg\" x=\"%.3f\" y=\"%.1f\" width=\"%.3f\" "
               "height=\"%.1f\" fill=\"%s\"><title>", x, y, w, SVG_BH,
            svg_colors[i]);
    xml_text(f, p->name);
    fprintf(f, " %s: %s \xC2\xB5s</title></rect>\n", phase_names[svg_segs[i]],
            b1);
    if (w >= 44.0)
      fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" "
                 "fill=\"#ffffff\" font-size=\"12\">%s</text>\n",
              x + w / 2.0, y + SVG_BH / 2.0 + 4.0, b1);
    x += w;
  }
  fmt_us(b1, sizeof b1, svg_stacked_us(p));
  fprintf(f, "<text x=\"%.2f\" y=\"%.1f\"><tspan class=\"total\">%s</tspan>"
             " \xC2\xB5s</text>\n", x + 6.0, y + SVG_BH / 2.0 + 5.0, b1);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
             "fill=\"#555555\">", SVG_ML + 2.0, y + SVG_BH + 14.0);
  if (p->arm)
    fprintf(f, "peer arm (no upload phases);");
  for (int i = 0; i < 3 && !p->arm; i++) {
    fmt_us(b1, sizeof b1, p->ph[svg_segs[i]].median / 1e3);
    fprintf(f, "%s%s %s", i ? " + " : "", phase_names[svg_segs[i]], b1);
  }
  fmt_us(b1, sizeof b1, p->ph[BENCH_PH_CONTROL].median / 1e3);
  fprintf(f, " \xC2\xB5s; control_plane median %s \xC2\xB5s", b1);
  if (a && isfinite(p->ratio[BENCH_PH_CONTROL]))
    fprintf(f, " (%.3fx %s)", p->ratio[BENCH_PH_CONTROL], r->pol[0].name);
  fprintf(f, "</text>\n</g>\n");
}

/* One panel: grid, axis with ticks, and a bar per listed policy. */
static void svg_panel(FILE *f, const bench_result *r, const uint32_t *list,
                      uint32_t n, double top, double vmax, const char *head) {
  double step, amax = svg_axis_max(vmax, &step);
  double pw = SVG_W - SVG_ML - SVG_MR;
  double ax_y = top + svg_panel_height(n);
  char b1[32];
  fprintf(f, "<g class=\"panel\">\n");
  if (head)
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-weight=\"bold\" "
               "fill=\"#333333\">%s</text>\n", SVG_ML, top - 8.0, head);
  fprintf(f, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
  for (double t = 0.0; t <= amax + step * 1e-6; t += step) {
    double x = SVG_ML + t / amax * pw;
    fprintf(f, "<line x1=\"%.3f\" y1=\"%.1f\" x2=\"%.3f\" y2=\"%.1f\"/>\n", x,
            top, x, ax_y);
  }
  fprintf(f, "</g>\n<g text-anchor=\"middle\" fill=\"#333333\">\n");
  for (double t = 0.0; t <= amax + step * 1e-6; t += step) {
    double x = SVG_ML + t / amax * pw;
    fmt_tick(b1, sizeof b1, t, step);
    fprintf(f, "<line x1=\"%.3f\" y1=\"%.1f\" x2=\"%.3f\" y2=\"%.1f\" "
               "stroke=\"#333333\"/>\n", x, ax_y, x, ax_y + 5.0);
    fprintf(f, "<text class=\"tick\" x=\"%.3f\" y=\"%.1f\">%s</text>\n", x,
            ax_y + 20.0, b1);
  }
  fprintf(f, "</g>\n");
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"#333333\"/>\n", SVG_ML, top, SVG_ML, ax_y);
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"#333333\"/>\n", SVG_ML, ax_y, SVG_ML + pw, ax_y);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
             "time per bind (\xC2\xB5s)</text>\n", SVG_ML + pw / 2.0,
          ax_y + 40.0);
  for (uint32_t i = 0; i < n; i++)
    svg_bar(f, r, list[i], top + SVG_BG + i * (SVG_BH + SVG_BG), amax);
  fprintf(f, "</g>\n");
}

int bench_write_svg(const bench_result *r, FILE *f) {
  uint32_t all[64], zoom[64], nz = 0;
  uint32_t n = n_rows(r) < 64 ? n_rows(r) : 64;
  double vmax = 0.0, zmax = 0.0;
  for (uint32_t a = 0; a < n; a++) {
    all[a] = a;
    vmax = fmax(vmax, svg_stacked_us(&r->pol[a]));
  }
  double step, amax = svg_axis_max(vmax, &step);
  for (uint32_t a = 0; a < n; a++) {
    double s = svg_stacked_us(&r->pol[a]);
    if (s > 0.0 && s < amax * SVG_ZOOM_SHARE) {
      zoom[nz++] = a;
      zmax = fmax(zmax, s);
    }
  }
  double p1 = svg_panel_height(n) + SVG_PANEL_GAP;
  double p2 = nz ? svg_panel_height(nz) + SVG_PANEL_GAP : 0.0;
  double legend_y = SVG_MT + p1 + p2;
  double h = legend_y + 72.0;
  char b1[64];

  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
          "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
          "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"13\">\n",
          SVG_W, h, SVG_W, h);
  fprintf(f, "<title>hbg bench: control-plane phases per bind (");
  xml_text(f, r->workload);
  fprintf(f, ", host allocator ");
  xml_text(f, r->host_alloc ? r->host_alloc : "?");
  fprintf(f, ")</title>\n");
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
             "fill=\"#ffffff\"/>\n", SVG_W, h);
  fprintf(f, "<text x=\"%.0f\" y=\"28\" font-size=\"17\" font-weight=\"bold\">"
             "Control-plane time per bind, median of each phase</text>\n",
          SVG_ML);
  fprintf(f, "<text x=\"%.0f\" y=\"50\" fill=\"#444444\">workload ", SVG_ML);
  xml_text(f, r->workload);
  fprintf(f, ", %u layers, device ", r->layers);
  xml_text(f, r->device);
  fprintf(f, ", %u measured binds per policy (%u warm-up dropped), "
             "interleaved x%u</text>\n", r->rounds, r->warmup, r->interleave);
  fprintf(f, "<text class=\"settings\" x=\"%.0f\" y=\"68\" fill=\"#444444\" "
             "font-size=\"12\">host allocator ", SVG_ML);
  xml_text(f, alloc_text(r->host_alloc));
  fprintf(f, ", device profile ");
  xml_text(f, r->device_profile ? r->device_profile : "none");
  spin_text(b1, sizeof b1, r);
  fputs(b1, f);
  fprintf(f, "</text>\n<text x=\"%.0f\" y=\"84\" fill=\"#444444\" "
             "font-size=\"12\">device options: ", SVG_ML);
  xml_text(f, r->device_options && *r->device_options ? r->device_options
                                                      : "(none)");
  if (r->glibc_tunables) {
    fprintf(f, "; GLIBC_TUNABLES=");
    xml_text(f, r->glibc_tunables);
  }
  if (r->def_size)
    fprintf(f, "; Definitions padded to %u B", r->def_size);
  fprintf(f, "</text>\n");

  svg_panel(f, r, all, n, SVG_MT + 18.0, vmax, nz ? "all policies" : NULL);
  if (nz) {
    snprintf(b1, sizeof b1,
             "zoomed: bars under %.0f%% of the axis above, own scale",
             SVG_ZOOM_SHARE * 100.0);
    svg_panel(f, r, zoom, nz, SVG_MT + 18.0 + p1, zmax, b1);
  }

  double lx = SVG_ML;
  for (int i = 0; i < 3; i++) {
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" "
               "fill=\"%s\"/>\n", lx, legend_y - 11.0, svg_colors[i]);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 20.0, legend_y,
            phase_names[svg_segs[i]]);
    lx += 160.0;
  }
  if (r->n_arms)
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" "
               "fill=\"%s\"/>\n<text x=\"%.1f\" y=\"%.1f\">peer arm: "
               "control_plane</text>\n", lx, legend_y - 11.0, SVG_ARM_COLOR,
            lx + 20.0, legend_y);
  static const char *const note[] = {
      "Each bar stacks the medians of its three phases; the number at its "
      "end is their sum.",
      "control_plane (under each bar) is the median of the per-bind sums, "
      "which need not equal the sum of the medians;",
      "the ratio beside it is of control_plane medians."};
  for (int i = 0; i < 3; i++)
    fprintf(f, "<text class=\"note\" x=\"%.0f\" y=\"%.1f\" "
               "font-size=\"11\" fill=\"#555555\">%s</text>\n",
            SVG_ML, legend_y + 22.0 + 15.0 * i, note[i]);
  fprintf(f, "</svg>\n");
  return ferror(f) ? -1 : 0;
}

/* ---------------- Chrome trace ---------------- */

static int trace_meta(cJSON *arr, const char *what, uint32_t pid, uint32_t tid,
                      const char *name, uint32_t sort) {
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return -1;
  if (!cJSON_AddItemToArray(arr, o)) {
    cJSON_Delete(o);
    return -1;
  }
  int bad = jstr(o, "name", what);
  bad |= jstr(o, "ph", "M");
  bad |= jnum(o, "pid", pid);
  bad |= jnum(o, "tid", tid);
  bad |= jnum(o, "ts", 0);
  cJSON *args = cJSON_AddObjectToObject(o, "args");
  if (!args)
    return -1;
  if (name)
    bad |= jstr(args, "name", name);
  else
    bad |= jnum(args, "sort_index", sort);
  return bad;
}

int bench_write_trace(const bench_trace_ev *ev, size_t n,
                      const char *const *proc_names, uint32_t n_procs,
                      const char *const *track_names, uint32_t n_tracks,
                      FILE *f) {
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return -1;
  int bad = jstr(root, "displayTimeUnit", "ns");
  cJSON *arr = cJSON_AddArrayToObject(root, "traceEvents");
  if (!arr)
    bad = -1;
  for (uint32_t p = 0; p < n_procs && !bad; p++) {
    bad |= trace_meta(arr, "process_name", p + 1, 0, proc_names[p], 0);
    bad |= trace_meta(arr, "process_sort_index", p + 1, 0, NULL, p);
    for (uint32_t t = 0; t < n_tracks && !bad; t++) {
      bad |= trace_meta(arr, "thread_name", p + 1, t + 1, track_names[t], 0);
      bad |= trace_meta(arr, "thread_sort_index", p + 1, t + 1, NULL, t);
    }
  }
  uint64_t t0 = UINT64_MAX;
  for (size_t i = 0; i < n; i++)
    if (ev[i].start_ns < t0)
      t0 = ev[i].start_ns;
  for (size_t i = 0; i < n && !bad; i++) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(arr, o)) {
      cJSON_Delete(o);
      bad = -1;
      break;
    }
    bad |= jstr(o, "name", ev[i].name ? ev[i].name : "?");
    bad |= jstr(o, "cat", "hbg");
    bad |= jstr(o, "ph", "X");
    bad |= jnum(o, "ts", (double)(ev[i].start_ns - t0) / 1e3);
    bad |= jnum(o, "dur", (double)ev[i].dur_ns / 1e3);
    bad |= jnum(o, "pid", ev[i].pid + 1);
    bad |= jnum(o, "tid", ev[i].tid + 1);
    cJSON *args = cJSON_AddObjectToObject(o, "args");
    if (!args) {
      bad = -1;
      break;
    }
    bad |= jnum(args, "bind", (double)ev[i].seq);
    if (ev[i].bytes)
      bad |= jnum(args, "bytes", (double)ev[i].bytes);
  }
  if (!bad)
    bad = write_cjson(root, 0, f);
  cJSON_Delete(root);
  return bad ? -1 : 0;
}
