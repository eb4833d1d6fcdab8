/* One runtime, two threads: while one thread is inside a call that changes
 * the runtime (here: held inside hbg_submit_graph's record callback, and
 * inside hbg_bind_wait by a user kernel that blocks), every such call from
 * another thread fails with HBG_E_BUSY, changes nothing, and names the
 * call the first thread is in; the owner's own nested calls go through;
 * the runtime then moves to the other thread. Two threads hammering one
 * runtime get either success or HBG_E_BUSY, never a race (run under
 * ThreadSanitizer by `make tsan`). */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <hbg/hbg.h>

#include "test.h"

#define N 64u

static hbg_runtime *rt;
static uint64_t X, Y;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int inside, go;

static void set_flag(int *f) {
  pthread_mutex_lock(&mu);
  *f = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void wait_flag(const int *f) {
  pthread_mutex_lock(&mu);
  while (!*f)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

#define ASSERT_MSG(part)                                                       \
  do {                                                                         \
    if (!strstr(hbg_last_error(), (part)))                                     \
      T_FAIL("message '%s' lacks '%s'", hbg_last_error(), (part));             \
  } while (0)

static hbg_tensor vec(uint64_t addr, uint32_t mode) {
  hbg_tensor t;
  uint32_t n = N;
  ASSERT_OK(hbg_tensor_contig(&t, addr, 0, HBG_DTYPE_F32, 1, &n, mode));
  return t;
}

/* y = x * 2, recorded; the callback holds its thread inside
 * hbg_submit_graph until the main thread has tried everything. */
static int rec_hold(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *bt = hbg_record_tensors(rec, &nt);
  hbg_tensor a[2] = {bt[0], bt[1]};
  float two = 2.0f;
  hbg_scalar s = {.value = hbg_scalar_f32(two), .kind = HBG_SCALAR_STATIC};
  hbg_task t = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = a,
                .n_scalars = 1, .scalars = &s};
  ASSERT_OK(hbg_record_task(rec, &t, NULL));
  /* the owner's own calls from inside its call go through */
  uint64_t tmp;
  ASSERT_OK(hbg_buffer_alloc(rt, 256, &tmp));
  ASSERT_OK(hbg_buffer_free(rt, tmp));
  set_flag(&inside);
  wait_flag(&go);
  return 0;
}

static hbg_bind *held_bind;

static void *owner_thread(void *arg) {
  (void)arg;
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  held_bind = b;
  hbg_tensor bt[2] = {vec(X, HBG_ACCESS_IN), vec(Y, HBG_ACCESS_OUT)};
  hbg_graph_submit g = {.key = 1, .n_tensors = 2, .tensors = bt,
                        .record = rec_hold};
  ASSERT_OK(hbg_submit_graph(b, &g, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  return NULL;
}

#define ASSERT_BUSY(expr, call)                                                \
  do {                                                                         \
    ASSERT_ERR((expr), HBG_E_BUSY);                                            \
    ASSERT_MSG(call ": the runtime is in use by another thread (in "           \
                    "hbg_submit_graph)");                                      \
  } while (0)

static void t_held_in_submit(void) {
  float x[N], y[N];
  for (uint32_t i = 0; i < N; i++)
    x[i] = (float)i;
  ASSERT_OK(hbg_buffer_write(rt, X, x, sizeof x));
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, owner_thread, NULL), 0);
  wait_flag(&inside);
  uint64_t addr = 0;
  ASSERT_BUSY(hbg_buffer_alloc(rt, 64, &addr), "hbg_buffer_alloc");
  ASSERT_EQ(addr, 0);
  ASSERT_BUSY(hbg_buffer_write(rt, X, x, sizeof x), "hbg_buffer_write");
  ASSERT_BUSY(hbg_buffer_read(rt, y, X, sizeof y), "hbg_buffer_read");
  ASSERT_BUSY(hbg_buffer_free(rt, X), "hbg_buffer_free");
  ASSERT_BUSY(hbg_runtime_set_trace(rt, NULL, NULL), "hbg_runtime_set_trace");
  hbg_bind *b = NULL;
  ASSERT_BUSY(hbg_bind_begin(rt, &b), "hbg_bind_begin");
  ASSERT(b == NULL);
  hbg_tensor a[2] = {vec(X, HBG_ACCESS_IN), vec(Y, HBG_ACCESS_OUT)};
  hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a};
  ASSERT_BUSY(hbg_submit_task(held_bind, &t, NULL), "hbg_submit_task");
  hbg_graph_submit g = {.key = 2, .n_tensors = 2, .tensors = a,
                        .record = rec_hold};
  ASSERT_BUSY(hbg_submit_graph(held_bind, &g, NULL), "hbg_submit_graph");
  ASSERT_BUSY(hbg_submit_graph_n(held_bind, &g, 1, 0, NULL),
              "hbg_submit_graph_n");
  ASSERT_BUSY(hbg_bind_launch(held_bind), "hbg_bind_launch");
  ASSERT_BUSY(hbg_bind_wait(held_bind), "hbg_bind_wait");
  set_flag(&go);
  ASSERT_EQ(pthread_join(th, NULL), 0);
  /* the owner's bind ran whole; the buffers are all still there */
  ASSERT_OK(hbg_buffer_read(rt, y, Y, sizeof y));
  for (uint32_t i = 0; i < N; i++)
    ASSERT(y[i] == 2.0f * (float)i);
  /* the runtime moves to this thread */
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
}

/* ---- a thread inside hbg_bind_wait ---- */

#define UK (HBG_KERNEL_USER_MIN + 1)
static atomic_int kernel_running, kernel_release;

static int blocking_kernel(void *user, const hbg_tensor *t, void *const *data,
                           uint32_t nt, const uint64_t *sc, uint32_t ns) {
  (void)user, (void)t, (void)data, (void)nt, (void)sc, (void)ns;
  atomic_store(&kernel_running, 1);
  while (!atomic_load(&kernel_release)) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static void *waiter_thread(void *arg) {
  hbg_bind *b = arg;
  int rc;
  /* a BUSY from the main thread's probes changes nothing: try again */
  while ((rc = hbg_bind_wait(b)) == HBG_E_BUSY) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  ASSERT_OK(rc);
  return NULL;
}

static void t_held_in_wait(void) {
  ASSERT_OK(hbg_sim_register_kernel(hbg_runtime_device(rt), UK,
                                    blocking_kernel, NULL));
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_tensor a[1] = {vec(Y, HBG_ACCESS_INOUT)};
  hbg_task t = {.kernel = UK, .n_args = 1, .args = a};
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, waiter_thread, b), 0);
  /* probe until the waiter is inside hbg_bind_wait (at most ~10 s); the
   * buffers a probe got are freed after the bind (a free waits for it) */
  static uint64_t got[10000];
  int seen = 0, n_got = 0;
  for (int i = 0; i < 10000 && !seen; i++) {
    uint64_t addr;
    int rc = hbg_buffer_alloc(rt, 64, &addr);
    if (rc == 0) {
      got[n_got++] = addr;
    } else {
      ASSERT_ERR(rc, HBG_E_BUSY);
      ASSERT_MSG("hbg_buffer_alloc: the runtime is in use by another thread "
                 "(in hbg_bind_wait)");
      seen = 1;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  ASSERT(seen);
  ASSERT(atomic_load(&kernel_running));
  atomic_store(&kernel_release, 1);
  ASSERT_EQ(pthread_join(th, NULL), 0);
  hbg_bind_end(b);
  for (int i = 0; i < n_got; i++)
    ASSERT_OK(hbg_buffer_free(rt, got[i]));
  ASSERT_OK(hbg_sim_unregister_kernel(hbg_runtime_device(rt), UK));
}

/* ---- two threads on one runtime, every call retried on HBG_E_BUSY ---- */

static atomic_int busy_seen;

/* Call expr until it is neither HBG_E_BUSY nor `also` (a begin passes
 * HBG_E_STATE: both slots held by the other thread's binds; the others 1,
 * which no call returns); at most ~10 s. */
#define RETRY(expr, also)                                                      \
  do {                                                                         \
    int r__, n__ = 0;                                                          \
    while ((r__ = (expr)) == HBG_E_BUSY || r__ == (also)) {                    \
      if (r__ == HBG_E_BUSY)                                                   \
        atomic_fetch_add(&busy_seen, 1);                                       \
      if (++n__ > 100000)                                                      \
        T_FAIL("%s: still %s", #expr, hbg_err_name(r__));                      \
      struct timespec ts = {0, 100000};                                        \
      nanosleep(&ts, NULL);                                                    \
    }                                                                          \
    ASSERT_OK(r__);                                                            \
  } while (0)

static void *hammer(void *arg) {
  const uint64_t out = *(const uint64_t *)arg;
  hbg_tensor a[2] = {vec(X, HBG_ACCESS_IN), vec(out, HBG_ACCESS_OUT)};
  hbg_task t = {.kernel = HBG_KERNEL_COPY, .n_args = 2, .args = a};
  for (int i = 0; i < 100; i++) {
    hbg_bind *b;
    RETRY(hbg_bind_begin(rt, &b), HBG_E_STATE);
    RETRY(hbg_submit_task(b, &t, NULL), 1);
    RETRY(hbg_bind_launch(b), 1);
    RETRY(hbg_bind_wait(b), 1);
    hbg_bind_end(b); /* waits for the other thread's call: never refused */
  }
  return NULL;
}

static void t_hammer(void) {
  uint64_t o1, o2;
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &o1));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &o2));
  pthread_t t1, t2;
  ASSERT_EQ(pthread_create(&t1, NULL, hammer, &o1), 0);
  ASSERT_EQ(pthread_create(&t2, NULL, hammer, &o2), 0);
  ASSERT_EQ(pthread_join(t1, NULL), 0);
  ASSERT_EQ(pthread_join(t2, NULL), 0);
  float x[N], y[N];
  ASSERT_OK(hbg_buffer_read(rt, x, X, sizeof x));
  ASSERT_OK(hbg_buffer_read(rt, y, o2, sizeof y));
  ASSERT(memcmp(x, y, sizeof x) == 0);
  printf("thread_guard: %d busy refusals in the hammer\n",
         atomic_load(&busy_seen));
  ASSERT_OK(hbg_buffer_free(rt, o1));
  ASSERT_OK(hbg_buffer_free(rt, o2));
}

int main(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &X));
  ASSERT_OK(hbg_buffer_alloc(rt, N * 4, &Y));
  t_held_in_submit();
  t_held_in_wait();
  t_hammer();
  hbg_buffer_free(rt, X);
  hbg_buffer_free(rt, Y);
  hbg_runtime_destroy(rt);
  printf("thread_guard: ok\n");
  return 0;
}
