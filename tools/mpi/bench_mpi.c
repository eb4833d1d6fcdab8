/* `hbg bench --mpi`: one rank per device under mpirun (or srun). Compiled
 * into the hbg executable only when CMake finds MPI; libhbg never links it.
 *
 * Every rank opens its device (the launcher's local rank, or device= of the
 * device options), waits for the others (MPI_Ibarrier), runs the schedule a
 * plain run has on a worker thread, and hands its row (bench_dev_row, as
 * JSON text) to rank 0 with MPI_Igather / MPI_Igatherv. Only the main thread
 * calls MPI (MPI_THREAD_FUNNELED).
 *
 * Failures: a rank that fails sends its error to rank 0 (tag TAG_ERR) and
 * waits for the abort; rank 0 polls for such messages whenever it waits
 * (device run, barrier, gathers), prints the error and calls MPI_Abort, so
 * no rank waits on a failed one. Should rank 0 never get to it, the failed
 * rank aborts the job itself after ABORT_WAIT_S seconds.
 *
 * Test hook: HBG_TEST_FAIL_RANK=R makes rank R fail right after the
 * barrier, as a device failing mid-run would (the ctest test bench_mpi). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include <hbg/hbg.h>

#include "../bench_host.h"
#include "../bench_multi.h"

#define TAG_ERR 17
#define ABORT_WAIT_S 30

typedef struct rank_ctx {
  int rank, size;
  const char *backend;
  char host[128];
  const char *from; /* where the ordinal came from */
  bench_dev d;
  bench_slot *sched;
  size_t len;
  int inject; /* HBG_TEST_FAIL_RANK names this rank */
  atomic_int done;
} rank_ctx;

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Rank 0: a failed rank's message, when one came: printed, then the job
 * is aborted. */
static void poll_errors(const rank_ctx *r) {
  if (r->rank != 0)
    return;
  int flag = 0, n = 0;
  MPI_Status st;
  MPI_Iprobe(MPI_ANY_SOURCE, TAG_ERR, MPI_COMM_WORLD, &flag, &st);
  if (!flag)
    return;
  MPI_Get_count(&st, MPI_CHAR, &n);
  char *buf = malloc((size_t)n + 1);
  if (buf) {
    MPI_Recv(buf, n, MPI_CHAR, st.MPI_SOURCE, TAG_ERR, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    buf[n] = '\0';
  }
  fprintf(stderr, "hbg bench: rank %d failed: %s\n", st.MPI_SOURCE,
          buf ? buf : "(message lost: out of memory)");
  fprintf(stderr, "hbg bench: aborting all %d ranks\n", r->size);
  fflush(stderr);
  free(buf);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* This rank failed: rank 0 reports it and aborts; any other rank tells
 * rank 0 and waits (bounded) for the abort. Never returns. */
static void fail_rank(rank_ctx *r) {
  char msg[2048];
  snprintf(msg, sizeof msg, "host %s, %s device %u (ordinal: %s; options "
           "'%s'): %s", r->host, r->backend, r->d.ordinal, r->from,
           r->d.options, r->d.err);
  if (r->rank == 0) {
    fprintf(stderr, "hbg bench: rank 0 failed: %s\n", msg);
    fprintf(stderr, "hbg bench: aborting all %d ranks\n", r->size);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Send(msg, (int)strlen(msg), MPI_CHAR, 0, TAG_ERR, MPI_COMM_WORLD);
  for (int i = 0; i < ABORT_WAIT_S * 10; i++)
    sleep_ms(100);
  fprintf(stderr, "hbg bench: rank %d failed (%s) and rank 0 did not abort "
                  "within %d s; aborting\n",
          r->rank, msg, ABORT_WAIT_S);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* Wait for req; rank 0 takes failed ranks' messages meanwhile. */
static void wait_polling(rank_ctx *r, MPI_Request *req) {
  for (;;) {
    int done = 0;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    poll_errors(r);
    sleep_ms(1);
  }
}

static void *rank_thread(void *arg) {
  rank_ctx *r = arg;
  if (r->inject)
    bench_dev_fail(&r->d, HBG_E_INVAL,
                   "failure injected by HBG_TEST_FAIL_RANK (test hook)");
  else
    bench_dev_run(&r->d, r->sched, r->len);
  atomic_store(&r->done, 1);
  return NULL;
}

/* The device ordinal: device= of the options, else the launcher's local
 * rank, else 0. @return 0, or -1 (printed). */
static int pick_ordinal(rank_ctx *r, const char *options) {
  char v[32];
  uint32_t ord = 0;
  int got = bench_opt_get(options, "device", v, sizeof v);
  if (got != 0) {
    uint32_t one[1];
    if (got < 0 || bench_place_parse_list(v, one, 1) != 1) {
      fprintf(stderr, "hbg bench: rank %d: bad device= in the device "
                      "options\n", r->rank);
      return -1;
    }
    r->d.ordinal = one[0];
    r->from = "device= of the device options";
    return 0;
  }
  got = bench_place_local_rank(getenv, &ord, &r->from);
  if (got < 0) {
    fprintf(stderr, "hbg bench: rank %d: %s is not a number\n", r->rank,
            r->from);
    return -1;
  }
  if (got == 0) {
    r->from = "no local rank set: device 0";
    ord = 0;
  }
  r->d.ordinal = ord;
  return 0;
}

static double policy_median(const cJSON *row, int i) {
  const cJSON *p = cJSON_GetArrayItem(
      cJSON_GetObjectItemCaseSensitive(row, "policies"), i);
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "control_plane_median_us");
  return cJSON_IsNumber(m) ? m->valuedouble : -1.0;
}

/* Rank 0: the combined document from every rank's row. *verified: every
 * rank verified. NULL: a row did not parse, or no memory. */
static cJSON *combine(const bench_multi_ctx *c, int size, const char *text,
                      const int *displs, int *verified) {
  cJSON *root = cJSON_CreateObject();
  cJSON *ranks = root ? cJSON_AddArrayToObject(root, "ranks") : NULL;
  if (!ranks) {
    cJSON_Delete(root);
    return NULL;
  }
  *verified = 1;
  double binds = 0, longest = 0;
  int bad = cJSON_AddStringToObject(root, "mode", "mpi") ? 0 : -1;
  bad |= cJSON_AddNumberToObject(root, "size", size) ? 0 : -1;
  bad |= cJSON_AddStringToObject(root, "device", c->device) ? 0 : -1;
  bad |= cJSON_AddStringToObject(root, "workload", c->workload) ? 0 : -1;
  bad |= cJSON_AddNumberToObject(root, "rounds", c->rounds) ? 0 : -1;
  bad |= cJSON_AddNumberToObject(root, "warmup", c->warmup) ? 0 : -1;
  bad |= cJSON_AddNumberToObject(root, "interleave", c->interleave) ? 0 : -1;
  for (int i = 0; i < size && !bad; i++) {
    cJSON *row = cJSON_Parse(text + displs[i]);
    if (!row || !cJSON_AddItemToArray(ranks, row)) {
      cJSON_Delete(row);
      bad = -1;
      break;
    }
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "verified")))
      *verified = 0;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(row, "binds");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(row, "busy_s");
    binds += cJSON_IsNumber(b) ? b->valuedouble : 0;
    if (cJSON_IsNumber(t) && t->valuedouble > longest)
      longest = t->valuedouble;
  }
  bad |= cJSON_AddBoolToObject(root, "verified", *verified) ? 0 : -1;
  /* every rank starts at the barrier: the longest run bounds them all */
  bad |= cJSON_AddNumberToObject(root, "binds_per_s",
                                 longest > 0 ? binds / longest : 0) ? 0 : -1;
  if (bad) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

static void print_table(const bench_multi_ctx *c, const cJSON *doc) {
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(doc, "ranks");
  const cJSON *r0 = cJSON_GetArrayItem(ranks, 0);
  const cJSON *pols = cJSON_GetObjectItemCaseSensitive(r0, "policies");
  int np = cJSON_GetArraySize(pols);
  printf("hbg bench --mpi: %d ranks, %s, %s, %u rounds + %u warm-up per "
         "policy, blocks of %u; control-plane medians in us\n\n",
         cJSON_GetArraySize(ranks), c->device, c->workload, c->rounds,
         c->warmup, c->interleave);
  printf("%-5s %-20s %-8s %-9s", "rank", "host", "device", "verified");
  for (int p = 0; p < np; p++) {
    const cJSON *n =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(pols, p), "name");
    printf(" %13s", cJSON_IsString(n) ? n->valuestring : "?");
  }
  printf(" %10s\n", "binds/s");
  const cJSON *row;
  cJSON_ArrayForEach(row, ranks) {
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(row, "rank");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(row, "host");
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(row, "ordinal");
    const cJSON *bps = cJSON_GetObjectItemCaseSensitive(row, "binds_per_s");
    printf("%-5d %-20.20s %-8d %-9s", cJSON_IsNumber(rk) ? rk->valueint : -1,
           cJSON_IsString(h) ? h->valuestring : "?",
           cJSON_IsNumber(o) ? o->valueint : -1,
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "verified"))
               ? "yes"
               : "NO");
    for (int p = 0; p < np; p++)
      printf(" %13.1f", policy_median(row, p));
    printf(" %10.0f\n", cJSON_IsNumber(bps) ? bps->valuedouble : -1.0);
  }
  const cJSON *all = cJSON_GetObjectItemCaseSensitive(doc, "binds_per_s");
  printf("\nbinds/s across ranks: %.0f (every rank's binds over the longest "
         "rank's run)\n", cJSON_IsNumber(all) ? all->valuedouble : -1.0);
}

/* This rank's row as JSON text (malloc'ed), or NULL (no memory). */
static char *row_text(rank_ctx *r) {
  cJSON *row = bench_dev_row(&r->d);
  if (!row)
    return NULL;
  int bad = cJSON_AddNumberToObject(row, "rank", r->rank) ? 0 : -1;
  bad |= cJSON_AddStringToObject(row, "host", r->host) ? 0 : -1;
  bad |= cJSON_AddStringToObject(row, "ordinal_from", r->from) ? 0 : -1;
  char *s = bad ? NULL : cJSON_PrintUnformatted(row);
  cJSON_Delete(row);
  return s;
}

int bench_mpi_main(const bench_multi_ctx *c) {
  int provided = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) !=
      MPI_SUCCESS) {
    fprintf(stderr, "hbg bench: MPI_Init_thread failed\n");
    return 1;
  }
  rank_ctx r;
  memset(&r, 0, sizeof r);
  atomic_init(&r.done, 0);
  MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.size);
  if (gethostname(r.host, sizeof r.host - 1) != 0)
    snprintf(r.host, sizeof r.host, "?");
  r.d.index = (uint32_t)r.rank;
  r.backend = c->device;
  const char *fail = getenv("HBG_TEST_FAIL_RANK");
  uint32_t victim[1];
  r.inject = fail && bench_place_parse_list(fail, victim, 1) == 1 &&
             victim[0] == (uint32_t)r.rank;

  if (pick_ordinal(&r, c->device_options) < 0) {
    bench_dev_fail(&r.d, HBG_E_INVAL, "no device ordinal");
    fail_rank(&r);
  }
  if (bench_multi_schedule(c, &r.sched, &r.len) < 0) {
    bench_dev_fail(&r.d, HBG_E_NOMEM, "out of memory");
    fail_rank(&r);
  }
  if (bench_dev_open(&r.d, c) < 0)
    fail_rank(&r);

  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  wait_polling(&r, &req);

  pthread_t th;
  if (pthread_create(&th, NULL, rank_thread, &r) != 0) {
    bench_dev_fail(&r.d, HBG_E_NOMEM, "cannot start the device's thread");
    fail_rank(&r);
  }
  while (!atomic_load(&r.done)) {
    poll_errors(&r);
    sleep_ms(1);
  }
  pthread_join(th, NULL);
  if (bench_dev_finish(&r.d) < 0)
    fail_rank(&r);
  char *mine = row_text(&r);
  if (!mine) {
    bench_dev_fail(&r.d, HBG_E_NOMEM, "out of memory building the row");
    fail_rank(&r);
  }

  int len = (int)strlen(mine) + 1;
  int *lens = NULL, *displs = NULL;
  char *all = NULL;
  if (r.rank == 0) {
    lens = calloc((size_t)r.size, sizeof *lens);
    displs = calloc((size_t)r.size, sizeof *displs);
    if (!lens || !displs) {
      bench_dev_fail(&r.d, HBG_E_NOMEM, "out of memory");
      fail_rank(&r);
    }
  }
  MPI_Igather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  wait_polling(&r, &req);
  if (r.rank == 0) {
    size_t total = 0;
    for (int i = 0; i < r.size; i++) {
      displs[i] = (int)total;
      total += (size_t)lens[i];
    }
    all = malloc(total);
    if (!all) {
      bench_dev_fail(&r.d, HBG_E_NOMEM, "out of memory");
      fail_rank(&r);
    }
  }
  MPI_Igatherv(mine, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0,
               MPI_COMM_WORLD, &req);
  wait_polling(&r, &req);

  int status = 0;
  if (r.rank == 0) {
    int verified = 0;
    cJSON *doc = combine(c, r.size, all, displs, &verified);
    if (!doc) {
      fprintf(stderr, "hbg bench: cannot combine the ranks' results\n");
      status = 1;
    } else {
      status = verified ? 0 : 1;
      if (!verified)
        fprintf(stderr, "hbg bench: not every rank matched the host "
                        "reference\n");
      if (!c->quiet)
        print_table(c, doc);
      if (c->json && bench_multi_write_json(doc, c->json) < 0)
        status = 1;
      cJSON_Delete(doc);
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  cJSON_free(mine);
  free(all);
  free(lens);
  free(displs);
  free(r.sched);
  bench_unit_close(r.d.u);
  MPI_Finalize();
  return status;
}
