#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_host.h"
#include "cli.h"

static const char *const track_names[] = {"orchestration", "uploads (host)",
                                          "copy engine", "device execution"};

/* ---------------- tracing ---------------- */

void bench_trace_cb(void *user, const hbg_trace_event *e) {
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
              bench_arm_name(a), s->index, e);
      B->mismatches++;
      v = 0;
    } else if (rc < 0) {
      return bench_report(a, "hbg_workload_verify", rc);
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
    return bench_report(a, "hbg_peer_launch", rc);
  hbg_peer_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  rc = hbg_peer_wait(a->p, &st);
  if (rc < 0)
    return bench_report(a, "hbg_peer_wait", rc);
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
    bench_report(a, "hbg_bind_wait", rc);
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
    return bench_report(a, "hbg_bind_stats_get", rc);
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
  x->counts = st.exec_counts != 0;
  x->items = st.exec_items;
  x->dispatch_ops = st.exec_dispatch_ops;
  x->kernel_phases = st.exec_kernel_phases;
  x->body_ns = st.device_body_ns;
  x->tail_ns = st.device_tail_ns;
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
    return bench_report(a, "hbg_bind_begin", rc);
  rc = hbg_workload_submit(a->w, b, s->index);
  if (rc < 0) {
    hbg_bind_end(b);
    return bench_report(a, "hbg_workload_submit", rc);
  }
  rc = hbg_bind_launch(b);
  if (rc < 0) {
    hbg_bind_end(b);
    return bench_report(a, "hbg_bind_launch", rc);
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
    return bench_report(NULL, "malloc", HBG_E_NOMEM);
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
    return bench_report(NULL, "calloc", HBG_E_NOMEM);
  t->cap = TRACE_CAP;
  atomic_init(&t->n, 0);
  for (uint32_t i = 0; i < TRACE_CAP; i++)
    atomic_init(&t->s[i].ready, 0);
  for (uint32_t ai = 0; ai < B->n_pol; ai++) {
    bench_arm *a = &B->arms[ai];
    a->tctx.buf = t;
    a->tctx.pid = ai;
    int rc = hbg_runtime_set_trace(a->rt, bench_trace_cb, &a->tctx);
    if (rc < 0)
      return bench_report(a, "hbg_runtime_set_trace", rc);
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
    return bench_report(NULL, "malloc", HBG_E_NOMEM);
  size_t k = 0;
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load_explicit(&t->s[i].ready, memory_order_acquire) &&
        t->s[i].ev.tid < 4)
      ev[k++] = t->s[i].ev;
  for (uint32_t i = 0; i < B->n_pol; i++)
    names[i] = bench_arm_name(&B->arms[i]);
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

/* ---------------- hooks for bench_multi.c ---------------- */

int bench_unit_open(const bench_opts *o, const char *device_options,
                    bench_unit **out) {
  *out = NULL;
  bench *B = calloc(1, sizeof *B);
  if (!B)
    return bench_report(NULL, "calloc", HBG_E_NOMEM);
  *out = B;
  B->o = *o;
  B->o.device_options = device_options;
  B->recs = calloc((size_t)(o->n_policies * o->n_deps * o->n_record +
                            o->n_peers) *
                       o->rounds,
                   sizeof *B->recs);
  if (!B->recs)
    return bench_report(NULL, "calloc", HBG_E_NOMEM);
  return bench_open_arms(B, &B->res.device, &B->res.layers);
}

int bench_unit_step(bench_unit *u, const bench_slot *s) {
  return run_bind(u, &u->arms[s->arm], s);
}

int bench_unit_result(bench_unit *u, const bench_result **out) {
  if (bench_fill_result(u) < 0)
    return -1;
  *out = &u->res;
  return 0;
}

uint32_t bench_unit_mismatches(const bench_unit *u) { return u->mismatches; }

void bench_unit_close(bench_unit *u) {
  if (!u)
    return;
  bench_close_arms(u);
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
  c.device = bench_run_device(o, &c.device_options);
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
  int rc = bench_parse_opts(&B.o, argc, argv);
  if (rc > 0) {
    bench_usage(stdout);
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

  if (bench_check_outputs(o) < 0)
    return 1;
  if (bench_multi_wanted(&o->multi))
    return run_multi(o);
  B.recs = calloc((size_t)(o->n_policies * o->n_deps * o->n_record +
                           o->n_peers) *
                      o->rounds,
                  sizeof *B.recs);
  if (!B.recs) {
    bench_report(NULL, "calloc", HBG_E_NOMEM);
    return 1;
  }
  if (bench_open_arms(&B, &B.res.device, &B.res.layers) < 0)
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

  if (bench_fill_result(&B) < 0)
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
  bench_close_arms(&B);
  free(B.tb.s);
  free(B.recs);
  return status;
}
