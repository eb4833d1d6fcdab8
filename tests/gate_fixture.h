/* A gate that holds a bind on the device until the test opens it: on the
 * sim a user kernel (K_GATE, registered with gate_register) that blocks
 * its worker, on the cuda stand-in the stand-in's kernel gate
 * (hbgmock_gate, loaded by gate_mock_load), which holds the next kernel
 * queued. */
#ifndef HBG_TESTS_GATE_FIXTURE_H
#define HBG_TESTS_GATE_FIXTURE_H

#include <hbg/hbg.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "test.h"

#define K_GATE (HBG_KERNEL_USER_MIN + 7u)
#define HELD_MS 300u

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_closed;
static int gate_entered;
static void (*mock_gate)(int n); /* the stand-in's, when testing cuda */

static inline uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sim user kernel: blocks its worker until the gate opens (10 s at most,
 * so that a broken test fails instead of hanging). */
static inline int gate_kernel(void *user, const hbg_tensor *t, void *const *data,
                       uint32_t nt, const uint64_t *sc, uint32_t ns) {
  (void)user, (void)t, (void)data, (void)nt, (void)sc, (void)ns;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&gate_mu);
  gate_entered = 1;
  int rc = 0;
  while (gate_closed && rc == 0)
    rc = pthread_cond_timedwait(&gate_cv, &gate_mu, &until);
  pthread_mutex_unlock(&gate_mu);
  return rc == 0 ? 0 : HBG_E_AGAIN;
}

static inline void gate_close(void) {
  pthread_mutex_lock(&gate_mu);
  gate_closed = 1;
  gate_entered = 0;
  pthread_mutex_unlock(&gate_mu);
  if (mock_gate)
    mock_gate(1); /* the next kernel queued: bind 1's executor */
}

static inline void gate_open(void) {
  pthread_mutex_lock(&gate_mu);
  gate_closed = 0;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
  if (mock_gate)
    mock_gate(0);
}

static inline void *gate_open_later(void *arg) {
  (void)arg;
  struct timespec ts = {0, (long)HELD_MS * 1000000L};
  nanosleep(&ts, NULL);
  gate_open();
  return NULL;
}

static inline int gate_register(hbg_device *dev) {
  return hbg_sim_register_kernel(dev, K_GATE, gate_kernel, NULL);
}

/* HBG_CUDA_LIB's hbgmock_gate: gate_close / gate_open drive it from now. */
static inline void gate_mock_load(const char *lib) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    T_FAIL("HBG_CUDA_LIB=%s: %s", lib, dlerror());
  void *g = dlsym(h, "hbgmock_gate");
  if (!g)
    T_FAIL("HBG_CUDA_LIB=%s exports no hbgmock_gate", lib);
  memcpy(&mock_gate, &g, sizeof g);
}

#endif
