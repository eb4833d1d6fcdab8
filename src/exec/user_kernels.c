#include "exec/user_kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "graph/image.h"

/* A registration: a CPU function (fn, user: hbg_sim_register_kernel) or a
 * lane-model kernel (lane: hbg_kernel_register). */
typedef struct uk_entry {
  uint32_t kernel;
  hbg_kernel_fn fn;
  void *user;
  hbg_kernel_lane_fn lane;
  uint32_t phases, rows_of;
  uint64_t scratch_floats;
} uk_entry;

struct hbg__ukernels {
  pthread_mutex_t mu;
  uk_entry *v; /* sorted by kernel */
  uint32_t n, cap;
};

int hbg__ukernels_create(hbg__ukernels **out) {
  HBG__RETURN_IF(!out, HBG_E_INVAL);
  hbg__ukernels *u = calloc(1, sizeof *u);
  HBG__RETURN_IF(!u, HBG_E_NOMEM);
  if (pthread_mutex_init(&u->mu, NULL)) {
    free(u);
    return HBG_E_NOMEM;
  }
  *out = u;
  return 0;
}

void hbg__ukernels_destroy(hbg__ukernels *u) {
  if (!u)
    return;
  pthread_mutex_destroy(&u->mu);
  free(u->v);
  free(u);
}

/* First entry whose id is >= kernel; caller holds mu. */
static uint32_t lower(const hbg__ukernels *u, uint32_t kernel) {
  uint32_t lo = 0, hi = u->n;
  while (lo < hi) {
    uint32_t m = lo + (hi - lo) / 2;
    if (u->v[m].kernel < kernel)
      lo = m + 1;
    else
      hi = m;
  }
  return lo;
}

/* Insert e at its place; caller holds mu. */
static int insert(hbg__ukernels *u, const uk_entry *e) {
  uint32_t i = lower(u, e->kernel);
  if (i < u->n && u->v[i].kernel == e->kernel)
    return HBG_E_BUSY;
  HBG__TRY(HBG__RESERVE(u->v, u->cap, (uint64_t)u->n + 1));
  memmove(&u->v[i + 1], &u->v[i], (size_t)(u->n - i) * sizeof *u->v);
  u->v[i] = *e;
  u->n++;
  return 0;
}

int hbg__ukernels_add(hbg__ukernels *u, uint32_t kernel, hbg_kernel_fn fn,
                      void *user) {
  HBG__RETURN_IF(!u || !fn || kernel < HBG_KERNEL_USER_MIN, HBG_E_INVAL);
  uk_entry e = {.kernel = kernel, .fn = fn, .user = user};
  pthread_mutex_lock(&u->mu);
  int rc = insert(u, &e);
  pthread_mutex_unlock(&u->mu);
  return rc;
}

int hbg__ukernels_add_lanes(hbg__ukernels *u, const hbg_kernel_impl *k,
                            uint32_t n, uint32_t *failed) {
  HBG__RETURN_IF(!u || (n && !k), HBG_E_INVAL);
  int rc = 0;
  uint32_t i = 0;
  pthread_mutex_lock(&u->mu);
  for (; i < n && rc == 0; i++) {
    uk_entry e = {.kernel = k[i].kernel,
                  .lane = k[i].fn,
                  .phases = k[i].phases,
                  .rows_of = k[i].rows_of,
                  .scratch_floats = k[i].scratch_floats};
    rc = e.lane ? insert(u, &e) : HBG_E_INVAL;
  }
  if (rc) { /* all or none: the ones before the failure leave again */
    *failed = --i;
    while (i-- > 0) {
      uint32_t j = lower(u, k[i].kernel);
      memmove(&u->v[j], &u->v[j + 1], (size_t)(u->n - j - 1) * sizeof *u->v);
      u->n--;
    }
  }
  pthread_mutex_unlock(&u->mu);
  return rc;
}

int hbg__ukernels_remove(hbg__ukernels *u, uint32_t kernel) {
  HBG__RETURN_IF(!u, HBG_E_INVAL);
  int rc = HBG_E_NOTFOUND;
  pthread_mutex_lock(&u->mu);
  uint32_t i = lower(u, kernel);
  if (i < u->n && u->v[i].kernel == kernel) {
    memmove(&u->v[i], &u->v[i + 1], (size_t)(u->n - i - 1) * sizeof *u->v);
    u->n--;
    rc = 0;
  }
  pthread_mutex_unlock(&u->mu);
  return rc;
}

/* A copy of kernel's entry. @return 0 or HBG_E_KERNEL (none). */
static int get(hbg__ukernels *u, uint32_t kernel, uk_entry *out) {
  HBG__RETURN_IF(!u, HBG_E_KERNEL);
  int rc = HBG_E_KERNEL;
  pthread_mutex_lock(&u->mu);
  uint32_t i = lower(u, kernel);
  if (i < u->n && u->v[i].kernel == kernel) {
    *out = u->v[i];
    rc = 0;
  }
  pthread_mutex_unlock(&u->mu);
  return rc;
}

int hbg__ukernels_get(hbg__ukernels *u, uint32_t kernel, hbg_kernel_fn *fn,
                      void **user) {
  uk_entry e;
  HBG__TRY(get(u, kernel, &e));
  HBG__RETURN_IF(!e.fn, HBG_E_KERNEL); /* a lane-model kernel */
  *fn = e.fn;
  *user = e.user;
  return 0;
}

int hbg__ukernels_has(hbg__ukernels *u, uint32_t kernel) {
  uk_entry e;
  return get(u, kernel, &e) == 0;
}

/* Scratch up to this many floats lives on the stack. */
#define LANE_STACK_FLOATS 512

/* A lane-model call: every phase, each by lanes 0..n_lanes-1 in turn; a
 * phase whose lanes fail ends the call with the most negative error. */
static int run_lanes(const uk_entry *e, const hbg__ktensor *t, uint32_t nt,
                     const uint64_t *sc, uint32_t ns, uint32_t n_lanes,
                     uint64_t *ran) {
  HBG__RETURN_IF(n_lanes == 0, HBG_E_INVAL);
  uint64_t phases = e->phases;
  if (e->rows_of) {
    HBG__RETURN_IF(e->rows_of > nt, HBG_E_KERNEL);
    phases *= hbg_kernel_rows(&t[e->rows_of - 1]);
  }
  if (ran)
    *ran = phases;
  hbg_kernel_call c = {.kernel = e->kernel, .n_tensors = nt, .n_scalars = ns,
                       .t = t, .scalars = sc};
  float stack[LANE_STACK_FLOATS];
  float *s = NULL;
  if (e->scratch_floats > LANE_STACK_FLOATS) {
    s = malloc((size_t)e->scratch_floats * sizeof *s);
    HBG__RETURN_IF(!s, HBG_E_NOMEM);
  } else if (e->scratch_floats) {
    s = stack;
  }
  int rc = 0;
  for (uint64_t ph = 0; ph < phases && rc == 0; ph++)
    for (uint32_t l = 0; l < n_lanes; l++) {
      int r = e->lane(&c, ph, l, n_lanes, s);
      r = r > 0 ? HBG_E_KERNEL : r;
      rc = r < rc ? r : rc;
    }
  if (s != stack)
    free(s);
  return rc;
}

int hbg__ukernels_run(hbg__ukernels *u, uint32_t kernel, const hbg__ktensor *t,
                      uint32_t nt, const uint64_t *sc, uint32_t ns,
                      uint32_t n_lanes, uint64_t *phases) {
  uk_entry e;
  HBG__TRY(get(u, kernel, &e));
  HBG__RETURN_IF(nt > HBG_IMG_MAX_ARGS_PER_NODE, HBG_E_KERNEL);
  if (e.lane)
    return run_lanes(&e, t, nt, sc, ns, n_lanes, phases);
  if (phases)
    *phases = 1; /* a plain function: one call */
  hbg_kernel_fn fn = e.fn;
  void *user = e.user;
  hbg_tensor args[HBG_IMG_MAX_ARGS_PER_NODE];
  void *data[HBG_IMG_MAX_ARGS_PER_NODE];
  for (uint32_t i = 0; i < nt; i++) {
    hbg_tensor *a = &args[i];
    memset(a, 0, sizeof *a);
    a->dtype = (uint8_t)t[i].dtype;
    a->ndim = (uint8_t)t[i].ndim;
    a->mode = (uint8_t)t[i].mode;
    memcpy(a->shape, t[i].shape, sizeof a->shape);
    memcpy(a->strides, t[i].strides, sizeof a->strides);
    data[i] = t[i].data;
  }
  int rc = fn(user, args, data, nt, sc, ns);
  return rc > 0 ? HBG_E_KERNEL : rc;
}
