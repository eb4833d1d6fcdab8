/*
 * Your own kernels inside hbg's executor, on the sim and on a GPU, from one
 * source (user_kernel_ops.c, hbg_kernel.h's lane model).
 *
 *   user_kernel sim [LANES]              the sim runs the cc build (fn)
 *   user_kernel cuda OPS.ptx [OPTIONS]   a GPU runs the nvcc -rdc build:
 *                                        hbg links OPS.ptx with its
 *                                        executor (cuLink*) and launches it
 *
 * A layer of a decode-like loop is recorded once as a graph and replayed
 * per layer: h = rms_scale(x, w) per row, then y = alpha * h + 0.5 * x
 * (alpha differs per layer, a boundary scalar). The outputs are checked
 * bit for bit against the host's own computation of the same arithmetic.
 *
 * Build the kernels for a GPU (docs/USER_KERNELS.md):
 *   nvcc -x cu -rdc=true -ptx -arch=sm_90 -fmad=false -I include \
 *        -o user_kernel_ops.ptx examples/user_kernel_ops.c
 */
#include <hbg/hbg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "user_kernel_ops.h"

#define ROWS 3u
#define D 96u /* not a multiple of the 64 partials: some hold two terms */
#define LAYERS 4u
#define EPS 1e-5f
#define BETA 0.5f

#define CHECK(expr)                                                            \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_) {                                                                 \
      fprintf(stderr, "user_kernel: %s: %s\n  %s\n", #expr,                  \
              hbg_err_name(rc_), hbg_last_error());                           \
      return 1;                                                                \
    }                                                                          \
  } while (0)

/* One layer: boundary [x, w, y], scalar alpha. */
static int layer(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt;
  const hbg_tensor *io = hbg_record_tensors(rec, &nt);
  uint32_t dims[2] = {ROWS, D};
  hbg_tensor h;
  hbg_tensor_contig(&h, 0, 0, HBG_DTYPE_F32, 2, dims, HBG_ACCESS_OUT);
  hbg_tensor rms_args[3] = {io[0], io[1], h};
  hbg_scalar eps = hbg_scalar_static(hbg_scalar_f32(EPS));
  hbg_task rms = {.kernel = UK_RMS_SCALE, .n_args = 3, .args = rms_args,
                  .n_scalars = 1, .scalars = &eps};
  int rc = hbg_record_task(rec, &rms, NULL);
  if (rc)
    return rc;
  hbg_tensor hin = rms_args[2]; /* now in the graph's heap */
  hin.mode = HBG_ACCESS_IN;
  hbg_tensor ax_args[3] = {hin, io[0], io[2]};
  hbg_scalar ab[2] = {hbg_scalar_boundary(0),
                      hbg_scalar_static(hbg_scalar_f32(BETA))};
  hbg_task ax = {.kernel = UK_AXPBY, .n_args = 3, .args = ax_args,
                 .n_scalars = 2, .scalars = ab};
  return hbg_record_task(rec, &ax, NULL);
}

/* The host's own computation, in the kernels' documented order. */
static void reference(float *x, const float *w, uint32_t layers) {
  static float y[ROWS * D];
  for (uint32_t l = 0; l < layers; l++) {
    float alpha = 0.75f + 0.125f * (float)l;
    for (uint32_t r = 0; r < ROWS; r++) {
      const float *xr = x + r * D;
      float s[UK_PARTS];
      for (uint32_t p = 0; p < UK_PARTS; p++) {
        s[p] = 0.0f;
        for (uint32_t j = p; j < D; j += UK_PARTS)
          s[p] = s[p] + xr[j] * xr[j];
      }
      for (uint32_t width = UK_PARTS / 2; width > 0; width /= 2)
        for (uint32_t i = 0; i < width; i++)
          s[i] = s[i] + s[i + width];
      float inv = 1.0f / __builtin_sqrtf(s[0] / (float)D + EPS);
      for (uint32_t j = 0; j < D; j++) {
        float h = xr[j] * inv * w[j];
        y[r * D + j] = alpha * h + BETA * xr[j];
      }
    }
    memcpy(x, y, sizeof y);
  }
}

static void *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *p = NULL;
  size_t cap = 0;
  *n = 0;
  for (;;) {
    if (*n == cap) {
      char *g = realloc(p, cap = cap ? 2 * cap : 65536);
      if (!g)
        break;
      p = g;
    }
    size_t got = fread(p + *n, 1, cap - *n, f);
    *n += got;
    if (got == 0)
      break;
  }
  fclose(f);
  return p;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "sim") && strcmp(argv[1], "cuda")) ||
      (!strcmp(argv[1], "cuda") && argc < 3)) {
    fprintf(stderr, "usage: user_kernel sim [LANES]\n"
                    "       user_kernel cuda OPS.ptx [DEVICE OPTIONS]\n");
    return 2;
  }
  int cuda = strcmp(argv[1], "cuda") == 0;
  char options[64] = "";
  if (!cuda && argc > 2)
    snprintf(options, sizeof options, "lanes=%s", argv[2]);
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = argv[1];
  cfg.device_options = cuda ? (argc > 3 ? argv[3] : NULL) : options;
  cfg.deps = HBG_DEPS_INFERRED; /* each layer waits for the one it reads */
  hbg_runtime *rt;
  CHECK(hbg_runtime_create(&cfg, &rt));

  /* One registration struct for either device: fn for the sim, the
   * device code and its symbols for cuda. */
  size_t image_size = 0;
  void *image = cuda ? read_file(argv[2], &image_size) : NULL;
  if (cuda && !image) {
    fprintf(stderr, "user_kernel: cannot read %s\n", argv[2]);
    return 1;
  }
  hbg_kernel_impl k[2] = {
      {.struct_size = sizeof(hbg_kernel_impl), .kernel = UK_RMS_SCALE,
       .phases = UK_RMS_PHASES, .rows_of = 1, .scratch_floats = UK_PARTS,
       .fn = uk_rms_scale, .symbol = "uk_rms_scale", .image = image,
       .image_size = image_size},
      {.struct_size = sizeof(hbg_kernel_impl), .kernel = UK_AXPBY,
       .phases = 1, .fn = uk_axpby, .symbol = "uk_axpby", .image = image,
       .image_size = image_size}};
  CHECK(hbg_kernel_register(hbg_runtime_device(rt), k, 2));
  free(image); /* hbg keeps its own copy */

  static float x0[ROWS * D], w[D], got[ROWS * D], ref[ROWS * D];
  for (uint32_t i = 0; i < ROWS * D; i++)
    x0[i] = (float)((int)(i * 37 % 101) - 50) / 16.0f;
  for (uint32_t j = 0; j < D; j++)
    w[j] = 0.5f + (float)(j % 13) / 8.0f;
  uint64_t act[LAYERS + 1], dw;
  for (uint32_t l = 0; l <= LAYERS; l++)
    CHECK(hbg_buffer_alloc(rt, sizeof x0, &act[l]));
  CHECK(hbg_buffer_alloc(rt, sizeof w, &dw));
  CHECK(hbg_buffer_write(rt, act[0], x0, sizeof x0));
  CHECK(hbg_buffer_write(rt, dw, w, sizeof w));

  uint32_t dims[2] = {ROWS, D}, wd[1] = {D};
  hbg_bind *b;
  CHECK(hbg_bind_begin(rt, &b));
  for (uint32_t l = 0; l < LAYERS; l++) {
    hbg_tensor io[3];
    hbg_tensor_contig(&io[0], act[l], 0, HBG_DTYPE_F32, 2, dims, HBG_ACCESS_IN);
    hbg_tensor_contig(&io[1], dw, 0, HBG_DTYPE_F32, 1, wd, HBG_ACCESS_IN);
    hbg_tensor_contig(&io[2], act[l + 1], 0, HBG_DTYPE_F32, 2, dims,
                      HBG_ACCESS_OUT);
    uint64_t alpha = hbg_scalar_f32(0.75f + 0.125f * (float)l);
    hbg_graph_submit g = {.key = 1, .n_tensors = 3, .tensors = io,
                          .scalars = &alpha, .n_scalars = 1,
                          .record = layer};
    CHECK(hbg_submit_graph(b, &g, NULL));
  }
  CHECK(hbg_bind_launch(b));
  CHECK(hbg_bind_wait(b));
  hbg_bind_end(b);
  CHECK(hbg_buffer_read(rt, got, act[LAYERS], sizeof got));

  memcpy(ref, x0, sizeof ref);
  reference(ref, w, LAYERS);
  uint32_t bad = 0;
  for (uint32_t i = 0; i < ROWS * D; i++)
    if (memcmp(&got[i], &ref[i], sizeof got[i]) != 0 && bad++ < 4)
      fprintf(stderr, "element %u: %.9g, the host has %.9g\n", i,
              (double)got[i], (double)ref[i]);
  /* A digest of the output bytes (FNV-1a): equal digests on two devices
   * are equal bits. */
  uint64_t digest = 0xcbf29ce484222325ull;
  const unsigned char *bytes = (const unsigned char *)got;
  for (size_t i = 0; i < sizeof got; i++)
    digest = (digest ^ bytes[i]) * 0x100000001b3ull;
  printf("user_kernel: %u layers of 2 user kernels on %s%s%s: %s (output "
         "fnv1a64 %016llx)\n",
         LAYERS, argv[1], options[0] ? " " : "", options,
         bad ? "MISMATCH" : "bit-exact with the host",
         (unsigned long long)digest);
  for (uint32_t l = 0; l <= LAYERS; l++)
    CHECK(hbg_buffer_free(rt, act[l]));
  CHECK(hbg_buffer_free(rt, dw));
  hbg_runtime_destroy(rt);
  return bad ? 1 : 0;
}
