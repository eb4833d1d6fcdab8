/* `hbg bench` over several devices: --devices N / --device-list (one host
 * thread per device, bench_multi.c) and --mpi (one rank per device,
 * mpi/bench_mpi.c, built only when CMake finds MPI). Both drive the same
 * per-device run that a plain `hbg bench` makes, through the bench_unit
 * hooks of cmd_bench.c. */
#ifndef HBG_TOOLS_BENCH_MULTI_H
#define HBG_TOOLS_BENCH_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "bench_out.h"
#include "bench_place.h"
#include "bench_stats.h"

typedef struct bench_multi_opts {
  uint32_t devices;              /* --devices N; 0: not given */
  uint32_t list[BENCH_PLACE_MAX]; /* --device-list */
  uint32_t n_list;
  int mpi;                       /* --mpi */
} bench_multi_opts;

/* --devices N and --device-list L. @return 0, or -1 (printed). */
int bench_multi_opt(bench_multi_opts *m, const char *name, const char *val);
/* --mpi. @return 0, or -1 (printed) when this hbg was built without MPI. */
int bench_multi_opt_mpi(bench_multi_opts *m);
/* Nonzero when the run is over several devices or under MPI. */
int bench_multi_wanted(const bench_multi_opts *m);
/* The combination is one these modes run: one of --devices, --device-list,
 * --mpi; none of the single-device outputs (--csv, --svg, --trace); with
 * --devices or --device-list no device= in the device options.
 * @return 0, or -1 (printed). */
int bench_multi_check(const bench_multi_opts *m, int single_outputs,
                      const char *device_options);

/* ---- hooks of cmd_bench.c: one device's arms, as a plain run has them ---- */

typedef struct bench bench_unit;
struct bench_opts;

/* Open every arm (runtime + workload, peers) with these device options.
 * @return 0, or a negative hbg error (reported on stderr and kept for
 * bench_unit_last_error). *out is set either way; close it. */
int bench_unit_open(const struct bench_opts *o, const char *device_options,
                    bench_unit **out);
/* One slot of the schedule (slot.arm indexes the unit's arms).
 * @return 0, or a negative hbg error (reported). */
int bench_unit_step(bench_unit *u, const bench_slot *s);
/* The summary of the measured binds, as a plain run computes it; valid
 * until bench_unit_close. @return 0, or -1 (out of memory). */
int bench_unit_result(bench_unit *u, const bench_result **out);
/* Verified binds that differed from the host reference. */
uint32_t bench_unit_mismatches(const bench_unit *u);
/* Accepts NULL. */
void bench_unit_close(bench_unit *u);
/* The last error line cmd_bench.c printed on the calling thread ("" when
 * none): what a device's failure reports. */
const char *bench_unit_last_error(void);

/* ---- the multi-device run ---- */

typedef struct bench_multi_ctx {
  const bench_multi_opts *m;
  const struct bench_opts *opts; /* for bench_unit_open */
  const char *device;            /* backend, resolved (--device, env, sim) */
  const char *device_options;    /* as given (--device-options or env) */
  const char *workload;
  const char *json;              /* --json, or NULL */
  int quiet;
  uint32_t n_arms, warmup, rounds, interleave;
} bench_multi_ctx;

#define BENCH_DEV_OPTS_MAX 1024

/* One device and its driver's account. */
typedef struct bench_dev {
  uint32_t index;   /* position in the run (or the MPI rank) */
  uint32_t ordinal; /* device ordinal (a label for the sim) */
  char options[BENCH_DEV_OPTS_MAX];
  bench_unit *u;
  const bench_result *res; /* after bench_dev_finish */
  uint64_t binds;          /* slots run, warm-up included */
  uint64_t busy_ns;        /* wall time inside bench_dev_run */
  uint64_t cpu_ns;         /* driving thread's CPU time inside it */
  int rc;                  /* 0, or the first failure */
  char err[512];
} bench_dev;

/* Compose d->options for d->ordinal and open d->u. @return 0 or d->rc. */
int bench_dev_open(bench_dev *d, const bench_multi_ctx *c);
/* Run slots [0, n) on d, timing them. @return 0 or d->rc. */
int bench_dev_run(bench_dev *d, const bench_slot *s, size_t n);
/* Record a failure (the first one wins) with its message. */
void bench_dev_fail(bench_dev *d, int rc, const char *msg);
/* Compute d->res. @return 0 or d->rc. */
int bench_dev_finish(bench_dev *d);
/* A row: ordinal, device options, ok, error, verified, binds, busy and CPU
 * time, binds/s, per arm the control-plane median and its checks, and the
 * plain run's JSON object under "bench" (when d->res). NULL: no memory. */
cJSON *bench_dev_row(const bench_dev *d);
/* The schedule every device runs. @return 0, or -1 (no memory). */
int bench_multi_schedule(const bench_multi_ctx *c, bench_slot **out,
                         size_t *len);
/* Write a cJSON document to path (or "-": stdout). @return 0 or -1
 * (printed). */
int bench_multi_write_json(const cJSON *doc, const char *path);
/* CLOCK_MONOTONIC and CLOCK_THREAD_CPUTIME_ID, in ns. */
uint64_t bench_multi_now_ns(void);
uint64_t bench_multi_thread_cpu_ns(void);

/* `hbg bench --devices N` / `--device-list`. @return the exit status. */
int bench_multi_main(const bench_multi_ctx *c);
/* `hbg bench --mpi` (mpi/bench_mpi.c). @return the exit status. */
int bench_mpi_main(const bench_multi_ctx *c);

#endif
