#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

#include <hbg/hbg_image.h>

#include "common/util.h"

/* kern_src.h spells the kernel ids without hbg.h. */
#define SAME_ID(n) _Static_assert((int)HBG__K_##n == (int)HBG_KERNEL_##n, #n)
SAME_ID(NOP);
SAME_ID(COPY);
SAME_ID(ADD);
SAME_ID(MUL);
SAME_ID(SCALE);
SAME_ID(RMSNORM);
SAME_ID(GEMV);
SAME_ID(ROPE);
SAME_ID(SILU_MUL);
SAME_ID(SOFTMAX);
SAME_ID(ATTN);
SAME_ID(FILL);
_Static_assert(HBG_KERNEL__COUNT == 12, "a new kernel belongs in kern_src.h");
#undef SAME_ID

/* Scratch floats on the calling thread's stack; more is malloc'ed (ATTN
 * over more than ~3.5k positions). */
#define SCRATCH_STACK 4096u

uint64_t hbg__kernel_f32(float f) { return HBG__K_F2U(f); }

float hbg__kernel_to_f32(uint64_t v) { return hbg__k_f32(v); }

uint16_t hbg__bf16_from_f32(float f) { return hbg__k_f32_bf16(f); }

float hbg__bf16_to_f32(uint16_t b) { return hbg__k_bf16_f32(b); }

void hbg__ktensor_meta(hbg__ktensor *k, uint32_t dtype, uint32_t ndim,
                       uint32_t mode, const uint32_t *shape,
                       const uint32_t *strides) {
  memset(k, 0, sizeof *k);
  k->dtype = dtype;
  k->ndim = ndim;
  k->mode = mode;
  memcpy(k->shape, shape, sizeof k->shape);
  memcpy(k->strides, strides, sizeof k->strides);
}

void hbg__ktensor_from(hbg__ktensor *k, const hbg_tensor *t, void *data) {
  memset(k, 0, sizeof *k);
  k->data = data;
  k->dtype = t->dtype;
  k->ndim = t->ndim;
  k->mode = t->mode;
  for (uint32_t i = 0; i < HBG_MAX_DIMS; i++) {
    k->shape[i] = t->shape[i];
    k->strides[i] = t->strides[i];
  }
}

uint64_t hbg__ktensor_extent(const hbg__ktensor *t) {
  uint64_t es = hbg_dtype_size(t->dtype);
  if (es == 0 || t->ndim == 0 || t->ndim > HBG_MAX_DIMS)
    return 0;
  uint64_t last = 0, n = 1;
  for (uint32_t i = 0; i < t->ndim; i++) {
    uint64_t span;
    if (t->shape[i] == 0)
      return 0;
    if (hbg__mul_u64(n, t->shape[i], &n) || n > HBG__KERNEL_MAX_NUMEL)
      return 0;
    if (hbg__mul_u64(t->shape[i] - 1, t->strides[i], &span) ||
        hbg__add_u64(last, span, &last))
      return 0;
  }
  if (last >= UINT64_MAX / es - 1)
    return 0;
  return (last + 1) * es;
}

static int no_bcast(const hbg__ktensor *t) {
  for (uint32_t i = 0; i < t->ndim; i++)
    if (t->strides[i] == 0 && t->shape[i] != 1)
      return 0;
  return 1;
}

/* A tensor's layout and mode are good for an argument that needs `need`
 * (0: any mode). Its dtype is checked apart (arg_dtype_ok). */
static int targ(const hbg__ktensor *t, uint32_t need) {
  return hbg__ktensor_extent(t) != 0 && (t->mode & need) == need &&
         (need != HBG_ACCESS_OUT || no_bcast(t)) && t->mode >= HBG_ACCESS_IN &&
         t->mode <= HBG_ACCESS_INOUT;
}

/* ---- registry ---- */

typedef struct kdesc {
  const char *name;
  uint32_t nt; /* tensor count; UINT32_MAX = any */
  uint32_t ns_min, ns_max;
  uint32_t out_mask;  /* bit i: tensor i is an output */
  uint32_t in_place;  /* the output may be one of the inputs (same layout) */
  uint32_t bf16_mask; /* bit i: tensor i may be bf16 as well as f32 */
  const char *role[4]; /* each argument's name, as hbg.h lists them */
} kdesc;

static const kdesc kdescs[HBG_KERNEL__COUNT] = {
    [HBG_KERNEL_NOP] = {"nop", UINT32_MAX, 0, UINT32_MAX, 0, 0, 0, {0}},
    [HBG_KERNEL_COPY] = {"copy", 2, 0, 0, 1u << 1, 1, 1u << 0, {"in", "out"}},
    [HBG_KERNEL_ADD] = {"add", 3, 0, 0, 1u << 2, 1, 0, {"a", "b", "out"}},
    [HBG_KERNEL_MUL] = {"mul", 3, 0, 0, 1u << 2, 1, 0, {"a", "b", "out"}},
    [HBG_KERNEL_SCALE] = {"scale", 2, 1, 1, 1u << 1, 1, 0, {"in", "out"}},
    [HBG_KERNEL_RMSNORM] = {"rmsnorm", 3, 1, 1, 1u << 2, 0, 1u << 1,
                            {"in", "w", "out"}},
    [HBG_KERNEL_GEMV] = {"gemv", 3, 0, 1, 1u << 2, 0, 1u << 0,
                         {"W", "x", "out"}},
    [HBG_KERNEL_ROPE] = {"rope", 4, 1, 1, 1u << 3, 1, 0,
                         {"x", "cos", "sin", "out"}},
    [HBG_KERNEL_SILU_MUL] = {"silu_mul", 3, 0, 0, 1u << 2, 1, 0,
                             {"a", "b", "out"}},
    [HBG_KERNEL_SOFTMAX] = {"softmax", 2, 0, 0, 1u << 1, 0, 0, {"in", "out"}},
    [HBG_KERNEL_ATTN] = {"attn", 4, 1, 2, 1u << 3, 0, 0,
                         {"q", "K", "V", "out"}},
    [HBG_KERNEL_FILL] = {"fill", 1, 1, 1, 1u << 0, 1, 0, {"out"}},
};

/* Argument i of built-in kernel d (not NOP) may have dtype `dtype`: f32,
 * or bf16 where the kernel reads it widened (GEMV's W, RMSNORM's w,
 * COPY's input). */
static int arg_dtype_ok(const kdesc *d, uint32_t i, uint32_t dtype) {
  return dtype == HBG_DTYPE_F32 ||
         (dtype == HBG_DTYPE_BF16 && i < 32 && ((d->bf16_mask >> i) & 1));
}

static const char *dtype_name(uint32_t dtype) {
  static const char *const names[] = {NULL,  "f32", "f16", "bf16",
                                      "i32", "i64", "u8"};
  return dtype < HBG__ARRAY_LEN(names) ? names[dtype] : NULL;
}

const char *hbg__kernel_name(uint32_t kernel) {
  return kernel < HBG_KERNEL__COUNT ? kdescs[kernel].name : NULL;
}

static int shapes_check(uint32_t kernel, const hbg__ktensor *t) {
  uint64_t s;
  switch (kernel) {
  case HBG_KERNEL_COPY:
  case HBG_KERNEL_SCALE:
    return hbg__k_numel(&t[0]) == hbg__k_numel(&t[1]) ? 0 : HBG_E_KERNEL;
  case HBG_KERNEL_ADD:
  case HBG_KERNEL_MUL:
  case HBG_KERNEL_SILU_MUL:
    return hbg__k_numel(&t[0]) == hbg__k_numel(&t[2]) && hbg__k_numel(&t[1]) == hbg__k_numel(&t[2])
               ? 0
               : HBG_E_KERNEL;
  case HBG_KERNEL_SOFTMAX:
    return hbg__k_same_shape(&t[0], &t[1]) ? 0 : HBG_E_KERNEL;
  case HBG_KERNEL_RMSNORM:
    return hbg__k_same_shape(&t[0], &t[2]) && hbg__k_numel(&t[1]) == hbg__k_last_dim(&t[0]) &&
                   hbg__k_lin_stride(&t[1], &s)
               ? 0
               : HBG_E_KERNEL;
  case HBG_KERNEL_GEMV:
    return t[0].ndim == 2 && hbg__k_numel(&t[1]) == t[0].shape[1] &&
                   hbg__k_numel(&t[2]) == t[0].shape[0] && hbg__k_lin_stride(&t[1], &s) &&
                   hbg__k_lin_stride(&t[2], &s)
               ? 0
               : HBG_E_KERNEL;
  case HBG_KERNEL_ROPE: {
    uint32_t d = hbg__k_last_dim(&t[0]);
    return hbg__k_same_shape(&t[0], &t[3]) && d % 2 == 0 && t[1].ndim == 2 &&
                   hbg__k_same_shape(&t[1], &t[2]) && t[1].shape[1] == d / 2
               ? 0
               : HBG_E_KERNEL;
  }
  case HBG_KERNEL_ATTN: {
    hbg__kattn a;
    return hbg__k_attn_dims(t, &a);
  }
  default:
    return 0;
  }
}

/* A user kernel is checked for structure only: counts, and each tensor a
 * valid layout with a mode. */
static int user_check(const hbg__ktensor *t, uint32_t nt, uint32_t ns) {
  HBG__RETURN_IF(nt > HBG_IMG_MAX_ARGS_PER_NODE ||
                     ns > HBG_IMG_MAX_SCALARS_PER_NODE,
                 HBG_E_KERNEL);
  for (uint32_t i = 0; i < nt; i++)
    HBG__RETURN_IF(!targ(&t[i], 0), HBG_E_KERNEL);
  return 0;
}

int hbg__kernel_check(uint32_t kernel, const hbg__ktensor *t, uint32_t nt,
                      uint32_t ns) {
  HBG__RETURN_IF(nt > 0 && !t, HBG_E_KERNEL);
  if (hbg_img_kernel_is_user(kernel))
    return user_check(t, nt, ns);
  HBG__RETURN_IF(kernel >= HBG_KERNEL__COUNT, HBG_E_KERNEL);
  const kdesc *k = &kdescs[kernel];
  HBG__RETURN_IF(k->nt != UINT32_MAX && nt != k->nt, HBG_E_KERNEL);
  HBG__RETURN_IF(ns < k->ns_min || ns > k->ns_max, HBG_E_KERNEL);
  for (uint32_t i = 0; i < nt; i++) {
    const int nop = kernel == HBG_KERNEL_NOP;
    uint32_t need = nop                    ? 0
                    : (k->out_mask >> i) & 1 ? HBG_ACCESS_OUT
                                             : HBG_ACCESS_IN;
    HBG__RETURN_IF(!targ(&t[i], need), HBG_E_KERNEL);
    HBG__RETURN_IF(!nop && !arg_dtype_ok(k, i, t[i].dtype), HBG_E_KERNEL);
  }
  return shapes_check(kernel, t);
}

int hbg__task_kernel_check(const hbg_task *t, const char *who) {
  hbg__ktensor k[HBG_IMG_MAX_ARGS_PER_NODE];
  HBG__RETURN_IF(t->n_args > HBG_IMG_MAX_ARGS_PER_NODE, HBG_E_KERNEL);
  for (uint32_t i = 0; i < t->n_args; i++)
    hbg__ktensor_from(&k[i], &t->args[i], NULL);
  int rc = hbg__kernel_check(t->kernel, k, t->n_args, t->n_scalars);
  if (rc == 0)
    return 0;
  /* Say which rule failed (the error path only). */
  if (hbg_img_kernel_is_user(t->kernel)) {
    hbg__error_set("%s: user kernel %#x: a count over 64 or an argument "
                   "with a bad layout or mode",
                   who, t->kernel);
    return rc;
  }
  if (t->kernel >= HBG_KERNEL__COUNT) {
    hbg__error_set("%s: unknown kernel %u (user kernels start at %#x)", who,
                   t->kernel, HBG_KERNEL_USER_MIN);
    return rc;
  }
  const kdesc *d = &kdescs[t->kernel];
  if (d->nt != UINT32_MAX && t->n_args != d->nt) {
    hbg__error_set("%s: %s takes %u tensors, got %u", who, d->name, d->nt,
                   t->n_args);
    return rc;
  }
  if (t->n_scalars < d->ns_min || t->n_scalars > d->ns_max) {
    hbg__error_set("%s: %s takes %u to %u scalars, got %u", who, d->name,
                   d->ns_min, d->ns_max, t->n_scalars);
    return rc;
  }
  for (uint32_t i = 0; i < t->n_args && t->kernel != HBG_KERNEL_NOP; i++) {
    int out = (d->out_mask >> i) & 1;
    uint32_t need = out ? HBG_ACCESS_OUT : HBG_ACCESS_IN;
    const char *role = i < 4 && d->role[i] ? d->role[i] : "?";
    if (!arg_dtype_ok(d, i, k[i].dtype)) {
      const char *dn = dtype_name(k[i].dtype);
      char dbuf[24];
      if (!dn) {
        snprintf(dbuf, sizeof dbuf, "dtype %u", k[i].dtype);
        dn = dbuf;
      }
      hbg__error_set("%s: %s: argument %u (%s) is %s, must be %s", who,
                     d->name, i, role, dn,
                     arg_dtype_ok(d, i, HBG_DTYPE_BF16) ? "f32 or bf16"
                                                        : "f32");
      return rc;
    }
    if (targ(&k[i], need))
      continue;
    hbg__error_set(
        "%s: %s: argument %u (%s) %s", who, d->name, i, role,
        k[i].mode < HBG_ACCESS_IN || k[i].mode > HBG_ACCESS_INOUT
            ? "has an invalid mode"
        : (k[i].mode & need) != need
            ? (out ? "needs mode OUT" : "needs mode IN")
        : out && !no_bcast(&k[i]) ? "may not broadcast (stride 0)"
                                  : "has a bad shape or strides");
    return rc;
  }
  hbg__error_set("%s: %s: argument shapes do not fit together (see the "
                 "kernel's rules in hbg.h)",
                 who, d->name);
  return rc;
}

static int same_tensor(const hbg_tensor *a, const hbg_tensor *b) {
  return a->addr == b->addr && a->offset == b->offset &&
         a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
         memcmp(a->strides, b->strides, sizeof a->strides) == 0;
}

/* Bit masks of a task's output and input arguments (n_args <= 64). */
static void arg_masks(const hbg_task *t, uint64_t *outs, uint64_t *ins) {
  if (hbg_img_kernel_is_user(t->kernel)) {
    *outs = *ins = 0;
    for (uint32_t i = 0; i < t->n_args; i++) {
      if (t->args[i].mode & HBG_ACCESS_OUT)
        *outs |= 1ull << i;
      else if (t->args[i].mode == HBG_ACCESS_IN)
        *ins |= 1ull << i;
    }
    return;
  }
  uint64_t all = t->n_args >= 64 ? ~0ull : (1ull << t->n_args) - 1;
  *outs = kdescs[t->kernel].out_mask & all;
  *ins = all & ~*outs;
}

int hbg__kernel_in_place(uint32_t kernel) {
  return kernel < HBG_KERNEL__COUNT && kdescs[kernel].in_place;
}

int hbg__task_overlap_check(const hbg_task *t, const uint64_t *ext,
                            const char *who, const char *what, uint32_t id) {
  if (t->kernel == HBG_KERNEL_NOP)
    return 0; /* touches nothing */
  uint64_t outs, ins;
  arg_masks(t, &outs, &ins);
  const int user = hbg_img_kernel_is_user(t->kernel);
  for (; outs; outs &= outs - 1) {
    const uint32_t o = (uint32_t)__builtin_ctzll(outs);
    const hbg_tensor *out = &t->args[o];
    if (out->addr == 0)
      continue; /* a new inner output (addr 0) is placed apart */
    uint64_t olo = out->addr + out->offset;
    uint64_t ohi = olo + (ext ? ext[o] : hbg_tensor_extent(out));
    for (uint64_t m = ins; m; m &= m - 1) {
      const uint32_t i = (uint32_t)__builtin_ctzll(m);
      const hbg_tensor *in = &t->args[i];
      uint64_t ilo = in->addr + in->offset;
      if (in->addr == 0 || ilo >= ohi)
        continue;
      uint64_t ihi = ilo + (ext ? ext[i] : hbg_tensor_extent(in));
      if (ihi <= olo)
        continue;
      if (!user && kdescs[t->kernel].in_place && same_tensor(out, in))
        continue;
      const char *rule =
          user ? "a user kernel may not run in place (pass that tensor "
                 "once, with mode INOUT)"
          : kdescs[t->kernel].in_place
              ? "in place, the output must be the identical tensor: same "
                "address, offset, dtype, shape and strides"
              : "only the element-wise kernels and rope may run in place";
      char kname[24];
      if (user)
        snprintf(kname, sizeof kname, "user kernel %#x", t->kernel);
      else
        snprintf(kname, sizeof kname, "%s", kdescs[t->kernel].name);
      hbg__error_set("%s (%s %u): %s: output argument %u overlaps input "
                     "argument %u in bytes [0x%llx, 0x%llx) (%s)",
                     who, what, id, kname, o, i,
                     (unsigned long long)HBG__MAX(olo, ilo),
                     (unsigned long long)HBG__MIN(ohi, ihi), rule);
      return HBG_E_KERNEL;
    }
  }
  return 0;
}

uint64_t hbg__task_scratch_floats(const hbg_task *t) {
  hbg__ktensor k[HBG_IMG_MAX_ARGS_PER_NODE];
  if (t->kernel >= HBG_KERNEL__COUNT || t->n_args > HBG_IMG_MAX_ARGS_PER_NODE)
    return 0;
  for (uint32_t i = 0; i < t->n_args; i++)
    hbg__ktensor_from(&k[i], &t->args[i], NULL);
  if (hbg__kernel_check(t->kernel, k, t->n_args, t->n_scalars) != 0)
    return 0;
  hbg__kcall c = {.kernel = t->kernel, .nt = t->n_args, .ns = t->n_scalars,
                  .t = k, .sc = NULL};
  return hbg__k_scratch_floats(&c);
}

static void run_phases(const hbg__kcall *c, uint32_t n_lanes, float *s) {
  uint64_t phases = hbg__k_phases(c);
  for (uint64_t ph = 0; ph < phases; ph++)
    for (uint32_t l = 0; l < n_lanes; l++)
      hbg__k_phase(c, ph, l, n_lanes, s);
}

int hbg__kernel_run_lanes(uint32_t kernel, const hbg__ktensor *t, uint32_t nt,
                          const uint64_t *sc, uint32_t ns, uint32_t n_lanes,
                          uint64_t *phases) {
  HBG__RETURN_IF(n_lanes == 0, HBG_E_INVAL);
  HBG__TRY(hbg__kernel_check(kernel, t, nt, ns));
  HBG__RETURN_IF(ns > 0 && !sc, HBG_E_KERNEL);
  for (uint32_t i = 0; i < nt; i++)
    HBG__RETURN_IF(!t[i].data, HBG_E_KERNEL);
  HBG__RETURN_IF(kernel >= HBG_KERNEL__COUNT, HBG_E_KERNEL);
  hbg__kcall c = {.kernel = kernel, .nt = nt, .ns = ns, .t = t, .sc = sc};
  HBG__TRY(hbg__k_values_check(&c));
  hbg__k_prepare(&c);
  if (phases)
    *phases = hbg__k_phases(&c);
  uint64_t need = hbg__k_scratch_floats(&c);
  if (need == 0) {
    run_phases(&c, n_lanes, NULL);
    return 0;
  }
  if (need <= SCRATCH_STACK) {
    float stack[SCRATCH_STACK];
    run_phases(&c, n_lanes, stack);
    return 0;
  }
  float *s = malloc((size_t)need * sizeof *s);
  HBG__RETURN_IF(!s, HBG_E_NOMEM);
  run_phases(&c, n_lanes, s);
  free(s);
  return 0;
}

int hbg__kernel_run(uint32_t kernel, const hbg__ktensor *t, uint32_t nt,
                    const uint64_t *sc, uint32_t ns) {
  return hbg__kernel_run_lanes(kernel, t, nt, sc, ns, 1, NULL);
}
