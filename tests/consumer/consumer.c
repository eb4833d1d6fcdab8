/* Compiled against the installed headers as C and as C++, and linked with
 * the shared and the static library. It runs one bind on the sim device
 * and prints an image as JSON, so that a static link pulls in every
 * dependency (xxHash, cJSON, threads, libm, the CUDA runtime when built). */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_image.h>
#include <hbg/hbg_workload.h>

#include <stdio.h>
#include <string.h>

#define CHECK(expr)                                                            \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_) {                                                                 \
      fprintf(stderr, "consumer: %s: %s (%s)\n", #expr, hbg_err_name(rc_),    \
              hbg_last_error());                                               \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  if (hbg_version_number() != HBG_VERSION_NUMBER)
    return 1;
  if (strcmp(hbg_err_name(HBG_E_INVAL), "HBG_E_INVAL") != 0)
    return 1;
  if (hbg_device_find("sim") == NULL)
    return 1;
  hbg_config cfg;
  hbg_config_init(&cfg);
  if (cfg.struct_size != sizeof cfg)
    return 1;
  cfg.device = "sim";
  cfg.device_options = "mem=8M";
  cfg.arena_bytes = 64u << 10;
  hbg_runtime *rt;
  CHECK(hbg_runtime_create(&cfg, &rt));
  uint64_t buf;
  CHECK(hbg_buffer_alloc(rt, 16 * sizeof(float), &buf));
  uint32_t dims[1] = {16};
  hbg_tensor out;
  CHECK(hbg_tensor_contig(&out, buf, 0, HBG_DTYPE_F32, 1, dims,
                          HBG_ACCESS_OUT));
  hbg_scalar value = hbg_scalar_static(hbg_scalar_f32(2.5f));
  hbg_task fill;
  memset(&fill, 0, sizeof fill);
  fill.kernel = HBG_KERNEL_FILL;
  fill.n_args = 1;
  fill.args = &out;
  fill.n_scalars = 1;
  fill.scalars = &value;
  hbg_bind *b;
  CHECK(hbg_bind_begin(rt, &b));
  CHECK(hbg_submit_task(b, &fill, NULL));
  CHECK(hbg_bind_launch(b));
  CHECK(hbg_bind_wait(b));
  hbg_bind_end(b);
  float got[16];
  CHECK(hbg_buffer_read(rt, got, buf, sizeof got));
  hbg_runtime_destroy(rt);
  if (got[15] != 2.5f)
    return 1;
  /* The installed image contract agrees with hbg.h and rejects junk. */
  static const uint64_t junk_win[8] = {1, 2, 3};
  if (HBG_IMG_KERNEL_USER_MIN != HBG_KERNEL_USER_MIN ||
      hbg_img_dtype_size(HBG_DTYPE_F32) != 4 ||
      hbg_img_win_validate(junk_win, sizeof junk_win, NULL) != HBG_E_IMG_MAGIC)
    return 1;
  /* Not an image: the dump reports an error, in JSON (cJSON). */
  static const unsigned char junk[64] = {1, 2, 3};
  if (hbg_image_dump(junk, sizeof junk, 1, stdout) == 0)
    return 1;
  printf("\nconsumer %s: %u backends\n", hbg_version_string(),
         hbg_device_count());
  return 0;
}
