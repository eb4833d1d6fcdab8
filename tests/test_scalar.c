/* The scalar helpers encode exactly what the built-in kernels decode. */
#include <math.h>

#include <hbg/hbg.h>

#include "test.h"

static void encodings(void) {
  ASSERT_UEQ(hbg_scalar_f32(1.0f), 0x3f800000u);
  /* negative floats are not sign-extended: the high 32 bits stay zero */
  ASSERT_UEQ(hbg_scalar_f32(-2.0f), 0xc0000000u);
  ASSERT_UEQ(hbg_scalar_f32(1e-6f) >> 32, 0);
  ASSERT(hbg_scalar_to_f32(hbg_scalar_f32(1e-6f)) == 1e-6f);
  ASSERT(hbg_scalar_to_f32(0xffffffff00000000ull | 0x3f800000u) == 1.0f);
  ASSERT(isnan(hbg_scalar_to_f32(hbg_scalar_f32(NAN))));
  ASSERT_UEQ(hbg_scalar_u32(7), 7);
  ASSERT_UEQ(hbg_scalar_u32(UINT32_MAX), 0xffffffffull);
  ASSERT_UEQ(hbg_scalar_i64(-1), UINT64_MAX);
  ASSERT_UEQ(hbg_scalar_i64(INT64_MIN), 0x8000000000000000ull);
  hbg_scalar s = hbg_scalar_static(42);
  ASSERT_UEQ(s.value, 42);
  ASSERT_EQ(s.kind, HBG_SCALAR_STATIC);
  ASSERT_EQ(s.index, 0);
  s = hbg_scalar_boundary(3);
  ASSERT_EQ(s.kind, HBG_SCALAR_BOUNDARY);
  ASSERT_EQ(s.index, 3);
  ASSERT_UEQ(s.value, 0);
}

/* SCALE with alpha from hbg_scalar_f32 on the sim device. */
static void scale_on_device(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_options = "mem=8M";
  cfg.arena_bytes = 64u << 10;
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  enum { N = 8 };
  float in[N], out[N];
  for (int i = 0; i < N; i++)
    in[i] = (float)i - 3.0f;
  uint64_t din, dout;
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof in, &din));
  ASSERT_OK(hbg_buffer_alloc(rt, sizeof out, &dout));
  ASSERT_OK(hbg_buffer_write(rt, din, in, sizeof in));
  uint32_t dims[1] = {N};
  hbg_tensor args[2];
  ASSERT_OK(hbg_tensor_contig(&args[0], din, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_IN));
  ASSERT_OK(hbg_tensor_contig(&args[1], dout, 0, HBG_DTYPE_F32, 1, dims,
                              HBG_ACCESS_OUT));
  hbg_scalar alpha = hbg_scalar_static(hbg_scalar_f32(-0.5f));
  hbg_task t = {.kernel = HBG_KERNEL_SCALE, .n_args = 2, .args = args,
                .n_scalars = 1, .scalars = &alpha};
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_submit_task(b, &t, NULL));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
  ASSERT_OK(hbg_buffer_read(rt, out, dout, sizeof out));
  for (int i = 0; i < N; i++)
    if (out[i] != in[i] * -0.5f)
      T_FAIL("out[%d] = %g, want %g", i, out[i], in[i] * -0.5f);
  hbg_runtime_destroy(rt);
}

int main(void) {
  encodings();
  scale_on_device();
  printf("scalar: ok\n");
  return 0;
}
