/*
 * A minimal decode loop on the public API: one layer body recorded once as
 * a Graph Definition, replayed for every layer of every step, shipped with
 * the coalesced policy, checked against a host computation.
 *
 *   layer l:  h = (h + bias[l]) * scale[step]      (scale is a boundary scalar)
 */
#include <hbg/hbg.h>

#include <stdio.h>
#include <string.h>

#define LAYERS 32
#define DIM 256

/* Runs once, on the first submission of the key: the layer body. */
static int layer_body(hbg_recorder *rec, void *user) {
  (void)user;
  uint32_t nt, ns;
  const hbg_tensor *io = hbg_record_tensors(rec, &nt); /* h_in, bias, h_out */
  hbg_record_scalars(rec, &ns);                        /* scale */
  uint32_t dims[1] = {DIM};

  hbg_tensor sum;
  hbg_tensor_contig(&sum, 0, 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
  hbg_tensor add_args[3] = {io[0], io[1], sum};
  hbg_task add = {.kernel = HBG_KERNEL_ADD, .n_args = 3, .args = add_args};
  int rc = hbg_record_task(rec, &add, NULL);
  if (rc)
    return rc;

  hbg_tensor in = add_args[2]; /* now an internal tensor of the graph heap */
  in.mode = HBG_ACCESS_IN;
  hbg_tensor scale_args[2] = {in, io[2]};
  hbg_scalar scale = hbg_scalar_boundary(0);
  hbg_task mul = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = scale_args,
                  .n_scalars = 1, .scalars = &scale};
  return hbg_record_task(rec, &mul, NULL);
}

#define CHECK(expr)                                                            \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_) {                                                                 \
      fprintf(stderr, "%s: %s %s\n", #expr, hbg_strerror(rc_),              \
              hbg_last_error());                                               \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.policy = HBG_POLICY_COALESCED;
  hbg_runtime *rt;
  CHECK(hbg_runtime_create(&cfg, &rt));

  static float h0[DIM], bias[LAYERS][DIM], ref[DIM], got[DIM];
  uint64_t act[LAYERS + 1], dbias[LAYERS];
  for (int i = 0; i < DIM; i++)
    h0[i] = (float)(i % 7) - 3.0f;
  for (int l = 0; l <= LAYERS; l++)
    CHECK(hbg_buffer_alloc(rt, sizeof h0, &act[l]));
  for (int l = 0; l < LAYERS; l++) {
    for (int i = 0; i < DIM; i++)
      bias[l][i] = 0.01f * (float)((i + l) % 11);
    CHECK(hbg_buffer_alloc(rt, sizeof bias[l], &dbias[l]));
    CHECK(hbg_buffer_write(rt, dbias[l], bias[l], sizeof bias[l]));
  }

  uint32_t dims[1] = {DIM};
  for (uint32_t step = 0; step < 4; step++) {
    float scale = 1.0f - 0.0625f * (float)step;
    uint64_t scale_bits = hbg_scalar_f32(scale);
    CHECK(hbg_buffer_write(rt, act[0], h0, sizeof h0));

    hbg_bind *b;
    CHECK(hbg_bind_begin(rt, &b));
    hbg_task_id prev = HBG_TASK_NONE;
    for (uint32_t l = 0; l < LAYERS; l++) {
      hbg_tensor io[3];
      hbg_tensor_contig(&io[0], act[l], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
      hbg_tensor_contig(&io[1], dbias[l], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_IN);
      hbg_tensor_contig(&io[2], act[l + 1], 0, HBG_DTYPE_F32, 1, dims, HBG_ACCESS_OUT);
      hbg_graph_submit g = {.key = 1, .n_tensors = 3, .tensors = io,
                            .scalars = &scale_bits, .n_scalars = 1,
                            .n_deps = l ? 1 : 0, .deps = &prev,
                            .record = layer_body};
      CHECK(hbg_submit_graph(b, &g, &prev));
    }
    CHECK(hbg_bind_launch(b));
    CHECK(hbg_bind_wait(b));
    hbg_bind_stats st;
    st.struct_size = sizeof st; /* the struct this program was built with */
    CHECK(hbg_bind_stats_get(b, &st));
    hbg_bind_end(b);

    memcpy(ref, h0, sizeof ref);
    for (int l = 0; l < LAYERS; l++)
      for (int i = 0; i < DIM; i++)
        ref[i] = (ref[i] + bias[l][i]) * scale;
    CHECK(hbg_buffer_read(rt, got, act[LAYERS], sizeof got));
    int ok = memcmp(got, ref, sizeof got) == 0;
    printf("step %u: %u graphs (%u recorded), %llu H2D bytes in %llu copies, "
           "control plane %.1f us, %s\n",
           step, st.n_graphs, st.n_recorded, (unsigned long long)st.h2d_bytes,
           (unsigned long long)st.h2d_copies, st.control_plane_ns / 1e3,
           ok ? "matches the host" : "MISMATCH");
    if (!ok)
      return 1;
  }
  for (int l = 0; l <= LAYERS; l++)
    hbg_buffer_free(rt, act[l]);
  for (int l = 0; l < LAYERS; l++)
    hbg_buffer_free(rt, dbias[l]);
  hbg_runtime_destroy(rt);
  return 0;
}
