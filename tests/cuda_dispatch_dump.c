/* Writes the user-kernel dispatch hbg_kernel_register generates
 * (hbg__cu_dispatch_ptx) for the example's kernels (examples/
 * user_kernel_ops.h), the per-row one under two ids as a registration may
 * have it, to FILE. For cuda_user_kernel_nvlink.sh.
 * usage: cuda_dispatch_dump FILE */
#include <stdio.h>
#include <stdlib.h>

#include "../examples/user_kernel_ops.h"
#include "device/cuda/cuda_link.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cuda_dispatch_dump FILE\n");
    return 2;
  }
  hbg__cu_ureg r[3] = {
      {.kernel = UK_RMS_SCALE, .phases = UK_RMS_PHASES, .rows_of = 1,
       .scratch_floats = UK_PARTS, .symbol = "uk_rms_scale"},
      {.kernel = UK_AXPBY, .phases = 1, .symbol = "uk_axpby"},
      {.kernel = 0xffffffffu, .phases = 3, .rows_of = 2,
       .scratch_floats = 1ull << 24, .symbol = "uk_rms_scale"}};
  char *ptx = hbg__cu_dispatch_ptx(r, 3);
  FILE *f = fopen(argv[1], "w");
  if (!ptx || !f || fputs(ptx, f) < 0 || fclose(f) != 0) {
    perror(argv[1]);
    return 1;
  }
  free(ptx);
  return 0;
}
