/*
 * A foreign kernel holding the GPU's SMs while hbg binds (scripts/
 * gpu-check.sh, the blocker step; a GPU only: the stand-in's model of the
 * same situation is test_cuda_deadline_mock, through hbgmock_occupy).
 *
 * On hbg's device (the device's primary context, which hbg's cuda backend
 * retains too), on a stream of its own, a kernel of one CTA per held SM
 * spins on %globaltimer for --seconds. Each CTA takes all the dynamic
 * shared memory a CTA may opt in to, so no CTA of another kernel that
 * uses shared memory (hbg's executor does) fits on an SM it holds. By
 * default it holds every SM but one: the executor's cooperative grid (an
 * occupancy-sized grid over all SMs) cannot be resident until the blocker
 * ends, while a few of its CTAs could start on the free SM, which is the
 * case a plain launch would wait in for ever.
 *
 * The sequence, through the public C API:
 *   1. a runtime on cuda (exec=device, deadline_ms=--deadline-ms) and a
 *      small workload; one bind, verified against the host reference;
 *   2. the blocker launched, and waited for until every CTA of it runs;
 *   3. one bind while it spins: the time hbg_bind_wait took and what it
 *      returned (verified when it returned 0); the blocker is stopped as
 *      soon as the bind returns;
 *   4. one bind after it, which must run and verify.
 * Pass: step 3 returns within --seconds + 15 s, 0 or an error with a
 * message (HBG_E_TIMEOUT naming where it waited, say), and step 4 runs.
 * A bind that does not return is reported by an alarm at that bound and
 * the program exits 3 (the script runs it under `timeout` as well).
 * The last line is "RESULT ok|FAIL <detail>" for the script.
 *
 * usage: gpu_blocker [--seconds T] [--hold N] [--policy P]
 *                    [--workload W] [--layers L] [--deadline-ms D]
 *   --hold N  SMs to hold (default: all but one; 0: all of them)
 * exit: 0 pass, 1 fail, 2 usage, 3 a bind hung, 77 no GPU.
 */
#include <hbg/hbg.h>
#include <hbg/hbg_workload.h>

#include <cuda_runtime.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One CTA per held SM: it records its SM (plus one, in a slot of its own
 * in host memory: no atomics across the bus) and spins until `ns` have
 * passed or the host sets *stop. */
__global__ void blocker(unsigned long long ns, unsigned *smid,
                        volatile unsigned *stop, unsigned long long *ran_ns) {
  extern __shared__ unsigned char held[];
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  if (threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    held[0] = (unsigned char)id; /* the block is the point, not its use */
    smid[blockIdx.x] = id + 1;
    __threadfence_system();
  }
  do {
    __nanosleep(100000); /* *stop is read across the bus */
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns && !*stop);
  if (threadIdx.x == 0 && blockIdx.x == 0)
    *ran_ns = t - t0;
}

static char alarm_msg[160]; /* written before the alarm is armed */
static void on_alarm(int sig) {
  (void)sig;
  (void)!write(1, alarm_msg, strlen(alarm_msg));
  _exit(3);
}

#define CU(call)                                                               \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      printf("RESULT FAIL %s: %s\n", #call, cudaGetErrorString(e_));           \
      return 1;                                                                \
    }                                                                          \
  } while (0)

/* One bind of `step`: its hbg_bind_wait time in *ms, verified when it
 * returned 0; *named: hbg put a failure in words (hbg_last_error).
 * @return the first error (launch, wait or verify). */
static int one_bind(hbg_runtime *rt, hbg_workload *w, uint32_t step, double *ms,
                    char *why, size_t why_n, int *named) {
  hbg_bind *b = NULL;
  why[0] = 0;
  *named = 0;
  *ms = 0;
  int rc = hbg_bind_begin(rt, &b);
  if (rc == 0)
    rc = hbg_workload_submit(w, b, step);
  if (rc == 0)
    rc = hbg_bind_launch(b);
  if (rc == 0) {
    double t0 = now_ms();
    rc = hbg_bind_wait(b);
    *ms = now_ms() - t0;
  }
  if (rc != 0) {
    uint32_t entry = 0, node = 0;
    int located = b && hbg_bind_error_location(b, &entry, &node) == 0;
    *named = hbg_last_error()[0] != 0;
    snprintf(why, why_n, "%s%s (entry %d, node %d)", hbg_last_error(),
             hbg_last_error()[0] ? "" : hbg_strerror(rc),
             located ? (int)entry : -1,
             located && node != HBG_TASK_NONE ? (int)node : -1);
  }
  if (b)
    hbg_bind_end(b);
  if (rc == 0) {
    double err = 0;
    rc = hbg_workload_verify(w, step, &err);
    if (rc != 0) {
      *named = hbg_last_error()[0] != 0;
      snprintf(why, why_n, "verify: %s (max abs error %g)", hbg_last_error(),
               err);
    }
  }
  return rc;
}

static int usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--seconds T] [--hold N] [--policy P] "
          "[--workload W] [--layers L] [--deadline-ms D]\n",
          argv0);
  return 2;
}

int main(int argc, char **argv) {
  double seconds = 6;
  int hold = -1, layers = 2;
  unsigned deadline_ms = 3000;
  const char *policy = "coalesced", *wl = "qwen3-14b";
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v)
      return usage(argv[0]);
    if (!strcmp(argv[i], "--seconds"))
      seconds = atof(v);
    else if (!strcmp(argv[i], "--hold"))
      hold = atoi(v);
    else if (!strcmp(argv[i], "--policy"))
      policy = v;
    else if (!strcmp(argv[i], "--workload"))
      wl = v;
    else if (!strcmp(argv[i], "--layers"))
      layers = atoi(v);
    else if (!strcmp(argv[i], "--deadline-ms"))
      deadline_ms = (unsigned)atoi(v);
    else
      return usage(argv[0]);
    i++;
  }
  int pol = 0;
  if (seconds <= 0 || seconds > 120 || layers < 1 || deadline_ms < 1 ||
      hbg_policy_parse(policy, &pol) != 0)
    return usage(argv[0]);
  setvbuf(stdout, NULL, _IOLBF, 0);

  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev < 1) {
    printf("RESULT n/a no CUDA device here\n");
    return 77;
  }

  /* 1. hbg first (it retains the primary context), one bind. */
  char opts[96];
  snprintf(opts, sizeof opts, "exec=device,deadline_ms=%u", deadline_ms);
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "cuda";
  cfg.device_options = opts;
  cfg.policy = (uint32_t)pol;
  hbg_runtime *rt = NULL;
  int rc = hbg_runtime_create(&cfg, &rt);
  if (rc != 0) {
    printf("RESULT FAIL hbg_runtime_create(cuda, %s): %s %s\n", opts,
           hbg_err_name(rc), hbg_last_error());
    return 1;
  }
  hbg_workload_config wc;
  hbg_workload_config_init(&wc);
  wc.name = wl;
  wc.layers = (uint32_t)layers;
  hbg_workload *w = NULL;
  rc = hbg_workload_create(rt, &wc, &w);
  if (rc != 0) {
    printf("RESULT FAIL hbg_workload_create(%s): %s %s\n", wl, hbg_err_name(rc),
           hbg_last_error());
    return 1;
  }
  /* every bind under an alarm: a hang is a named failure */
  const unsigned bound_s = (unsigned)(seconds + 15.5);
  snprintf(alarm_msg, sizeof alarm_msg,
           "RESULT FAIL a bind did not return within %u s (the blocker's "
           "time + 15 s): hung\n",
           bound_s);
  signal(SIGALRM, on_alarm);
  char why[512];
  double ms = 0;
  int named = 0;
  alarm(bound_s);
  rc = one_bind(rt, w, 0, &ms, why, sizeof why, &named);
  alarm(0);
  printf("bind before the blocker: %s, %.1f ms%s%s\n", hbg_err_name(rc), ms,
         why[0] ? ": " : "", why);
  if (rc != 0) {
    printf("RESULT FAIL the bind before the blocker: %s %s\n", hbg_err_name(rc),
           why);
    return 1;
  }

  /* 2. the blocker, on the same device and context, its own stream */
  int dev = 0, sms = 0, smem_optin = 0, smem_sm = 0, smem_res = 0;
  CU(cudaGetDevice(&dev));
  CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CU(cudaDeviceGetAttribute(&smem_optin,
                            cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  CU(cudaDeviceGetAttribute(&smem_sm,
                            cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  CU(cudaDeviceGetAttribute(&smem_res, cudaDevAttrReservedSharedMemoryPerBlock,
                            dev));
  if (hold < 0)
    hold = sms > 1 ? sms - 1 : 1;
  else if (hold == 0 || hold > sms)
    hold = sms;
  CU(cudaFuncSetAttribute(blocker, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          smem_optin));
  CU(cudaFuncSetAttribute(blocker,
                          cudaFuncAttributePreferredSharedMemoryCarveout,
                          cudaSharedmemCarveoutMaxShared));
  cudaStream_t s;
  CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  /* host memory the kernel reaches: its CTAs' SMs, the stop flag, the
   * time it ran */
  unsigned *stop = NULL, *smid = NULL;
  unsigned long long *ran_ns = NULL;
  CU(cudaHostAlloc((void **)&stop, sizeof *stop, cudaHostAllocMapped));
  CU(cudaHostAlloc((void **)&smid, (size_t)hold * sizeof *smid,
                   cudaHostAllocMapped));
  CU(cudaHostAlloc((void **)&ran_ns, sizeof *ran_ns, cudaHostAllocMapped));
  *stop = 0;
  memset(smid, 0, (size_t)hold * sizeof *smid);
  *ran_ns = 0;
  unsigned *d_stop, *d_smid;
  unsigned long long *d_ran;
  CU(cudaHostGetDevicePointer((void **)&d_stop, stop, 0));
  CU(cudaHostGetDevicePointer((void **)&d_smid, smid, 0));
  CU(cudaHostGetDevicePointer((void **)&d_ran, ran_ns, 0));
  const unsigned long long ns = (unsigned long long)(seconds * 1e9);
  volatile unsigned *vsmid = smid;
  double t_block = now_ms();
  blocker<<<hold, 32, smem_optin, s>>>(ns, d_smid, d_stop, d_ran);
  CU(cudaGetLastError());
  for (;;) {
    int started = 0;
    for (int i = 0; i < hold; i++)
      started += vsmid[i] != 0;
    if (started == hold)
      break;
    if (now_ms() - t_block > 5000) {
      printf("RESULT FAIL the blocker's %d CTAs did not all start in 5 s "
             "(%d did)\n",
             hold, started);
      *(volatile unsigned *)stop = 1;
      return 1;
    }
    usleep(100);
  }
  int distinct = 0;
  for (int i = 0; i < hold; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++)
      seen |= vsmid[j] == vsmid[i];
    distinct += !seen;
  }
  printf("blocker: %d CTAs of 32 threads and %d B of shared memory each "
         "(an SM has %d B, %d B reserved per CTA) on %d distinct of %d SMs, "
         "%.1f s, started in %.1f ms\n",
         hold, smem_optin, smem_sm, smem_res, distinct, sms, seconds,
         now_ms() - t_block);

  /* 3. a bind while it spins */
  alarm(bound_s);
  double t_bind = now_ms();
  int rc_during = one_bind(rt, w, 1, &ms, why, sizeof why, &named);
  double during_ms = now_ms() - t_bind;
  alarm(0);
  double blocker_left_ms = seconds * 1e3 - (t_bind - t_block);
  *(volatile unsigned *)stop = 1; /* no need to hold on */
  CU(cudaStreamSynchronize(s));
  double blocker_ms = (double)*ran_ns / 1e6;
  char during[768];
  const char *how =
      rc_during != 0 ? "failed"
      : during_ms + 250 >= blocker_left_ms
          ? "waited for the blocker, then ran"
          : "ran beside the blocker (its grid fit on the free SMs: residency "
            "not exercised)";
  snprintf(during, sizeof during,
           "%s after %.0f ms (%s; the blocker had %.0f "
           "ms left, ran %.0f ms)%s%s",
           hbg_err_name(rc_during), during_ms, how, blocker_left_ms, blocker_ms,
           why[0] ? ": " : ", verified", why);
  printf("bind during the blocker: %s\n", during);
  /* an error must say what it is */
  const int clear = rc_during == 0 || named;

  /* 4. the runtime goes on */
  alarm(bound_s);
  int rc_after = one_bind(rt, w, 2, &ms, why, sizeof why, &named);
  alarm(0);
  printf("bind after the blocker: %s, %.1f ms%s%s\n", hbg_err_name(rc_after),
         ms, why[0] ? ": " : ", verified", why);
  cudaStreamDestroy(s);
  cudaFreeHost(stop);
  cudaFreeHost(smid);
  cudaFreeHost(ran_ns);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);

  const int ok = during_ms <= (seconds + 15) * 1e3 && clear && rc_after == 0;
  printf("RESULT %s %d of %d SMs held %.0f s; bind during: %s; bind after: "
         "%s\n",
         ok ? "ok" : "FAIL", distinct, sms, seconds, during,
         hbg_err_name(rc_after));
  return ok ? 0 : 1;
}
