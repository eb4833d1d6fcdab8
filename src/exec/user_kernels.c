#include "exec/user_kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "graph/image.h"

typedef struct uk_entry {
  uint32_t kernel;
  hbg_kernel_fn fn;
  void *user;
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

int hbg__ukernels_add(hbg__ukernels *u, uint32_t kernel, hbg_kernel_fn fn,
                      void *user) {
  HBG__RETURN_IF(!u || !fn || kernel < HBG_KERNEL_USER_MIN, HBG_E_INVAL);
  int rc = 0;
  pthread_mutex_lock(&u->mu);
  uint32_t i = lower(u, kernel);
  if (i < u->n && u->v[i].kernel == kernel) {
    rc = HBG_E_BUSY;
  } else if ((rc = HBG__RESERVE(u->v, u->cap, (uint64_t)u->n + 1)) == 0) {
    memmove(&u->v[i + 1], &u->v[i], (size_t)(u->n - i) * sizeof *u->v);
    u->v[i] = (uk_entry){.kernel = kernel, .fn = fn, .user = user};
    u->n++;
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

int hbg__ukernels_get(hbg__ukernels *u, uint32_t kernel, hbg_kernel_fn *fn,
                      void **user) {
  HBG__RETURN_IF(!u, HBG_E_KERNEL);
  int rc = HBG_E_KERNEL;
  pthread_mutex_lock(&u->mu);
  uint32_t i = lower(u, kernel);
  if (i < u->n && u->v[i].kernel == kernel) {
    *fn = u->v[i].fn;
    *user = u->v[i].user;
    rc = 0;
  }
  pthread_mutex_unlock(&u->mu);
  return rc;
}

int hbg__ukernels_has(hbg__ukernels *u, uint32_t kernel) {
  hbg_kernel_fn fn;
  void *user;
  return hbg__ukernels_get(u, kernel, &fn, &user) == 0;
}

int hbg__ukernels_run(hbg__ukernels *u, uint32_t kernel, const hbg__ktensor *t,
                      uint32_t nt, const uint64_t *sc, uint32_t ns) {
  hbg_kernel_fn fn;
  void *user;
  HBG__TRY(hbg__ukernels_get(u, kernel, &fn, &user));
  HBG__RETURN_IF(nt > HBG_IMG_MAX_ARGS_PER_NODE, HBG_E_KERNEL);
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
