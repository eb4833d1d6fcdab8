/* libFuzzer target: the device code images hbg_kernel_register reads
 * (src/device/devimage.c, compiled into this target for coverage).
 * Properties: no out-of-bounds read on any bytes (ASan); a kind is one of
 * the three, or HBG_E_INVAL with a reason; every lookup answers one of the
 * four values, whatever kind it is asked to read the bytes as. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg.h>

#include "device/devimage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char why[256] = "";
  int k = hbg__devimg_kind(data, size, why, sizeof why);
  if (k < 0 ? (k != HBG_E_INVAL || why[0] == '\0')
            : (k != HBG__DEVIMG_PTX && k != HBG__DEVIMG_CUBIN &&
               k != HBG__DEVIMG_FATBIN))
    abort();
  for (int kind = HBG__DEVIMG_PTX; kind <= HBG__DEVIMG_FATBIN; kind++) {
    int r = hbg__devimg_defines(data, size, kind, "uk_axpby");
    if (r < HBG__DEVIMG_UNKNOWN || r > HBG__DEVIMG_ENTRY)
      abort();
  }
  char s[300];
  size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
  memcpy(s, data, n);
  s[n] = '\0';
  (void)hbg__devimg_ident(s);
  return 0;
}
