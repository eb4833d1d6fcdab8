/* hbg_kernel_register: the checks every backend shares, then the
 * backend's own half, reached through the registry (device/device.h's
 * hbg__backend hooks; see kernel_reg.h). */
#include "device/kernel_reg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/device.h"
#include "graph/image.h"

/* The fields of k every device checks; why names the culprit. */
static int impl_generic(const hbg_kernel_impl *k, char *why, size_t len) {
  if (k->kernel < HBG_KERNEL_USER_MIN) {
    snprintf(why, len, "kernel %u is not a user kernel id (they start at "
                       "%#x)",
             k->kernel, HBG_KERNEL_USER_MIN);
    return HBG_E_INVAL;
  }
  if (k->phases == 0 || k->phases > HBG__UK_MAX_PHASES) {
    snprintf(why, len, "phases %u: want 1..%u", k->phases,
             HBG__UK_MAX_PHASES);
    return HBG_E_INVAL;
  }
  if (k->rows_of > HBG_IMG_MAX_ARGS_PER_NODE) {
    snprintf(why, len, "rows_of %u: want 0 (phases per call) or a tensor "
                       "index + 1 up to %u",
             k->rows_of, HBG_IMG_MAX_ARGS_PER_NODE);
    return HBG_E_INVAL;
  }
  if (k->scratch_floats > HBG__UK_MAX_SCRATCH) {
    snprintf(why, len, "scratch_floats %llu: at most %llu",
             (unsigned long long)k->scratch_floats,
             (unsigned long long)HBG__UK_MAX_SCRATCH);
    return HBG_E_INVAL;
  }
  return 0;
}

int hbg_kernel_register(struct hbg_device *dev, const hbg_kernel_impl *impls,
                        uint32_t n) {
  hbg__error_clear();
  if (!dev || !impls || n == 0) {
    hbg__error_set("hbg_kernel_register: %s", !dev     ? "NULL device"
                                              : !impls ? "NULL impls"
                                                       : "no kernel (n 0)");
    return HBG_E_INVAL;
  }
  /* Every element is impls[0].struct_size bytes: a newer caller's array
   * strides by its own size, and fields past ours read as 0. */
  const size_t v1 = sizeof(hbg_kernel_impl);
  size_t stride = impls->struct_size;
  if (stride < v1) {
    hbg__error_set("hbg_kernel_register: struct_size %zu, want at least "
                   "%zu (sizeof(hbg_kernel_impl))",
                   stride, v1);
    return HBG_E_INVAL;
  }
  hbg_kernel_impl *k = calloc(n, sizeof *k);
  HBG__RETURN_IF(!k, HBG_E_NOMEM);
  char why[256];
  int rc = 0;
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    const hbg_kernel_impl *in =
        (const hbg_kernel_impl *)(const void *)((const char *)impls +
                                                i * stride);
    memcpy(&k[i], in, v1);
    if (in->struct_size != stride) {
      snprintf(why, sizeof why, "struct_size %u differs from impls[0]'s",
               in->struct_size);
      rc = HBG_E_INVAL;
    } else {
      rc = impl_generic(&k[i], why, sizeof why);
    }
    if (rc < 0)
      hbg__error_set("hbg_kernel_register: impls[%u]: %s", i, why);
  }
  if (rc < 0)
    goto out;
  hbg_device *impl = NULL;
  const hbg__backend *be = hbg__backend_of(dev, &impl);
  if (be && be->kernel_register) {
    rc = be->kernel_register(impl, k, n);
    goto out;
  }
  hbg__error_set("hbg_kernel_register: device '%s' runs no user kernel "
                 "(sim and cuda exec=device do)",
                 hbg_device_name(dev));
  rc = HBG_E_UNSUPPORTED;
out:
  free(k);
  return rc;
}

int hbg__dev_user_kernel_check(hbg_device *dev, const hbg_task *t,
                               const char *who) {
  if (!hbg_img_kernel_is_user(t->kernel))
    return 0;
  hbg_device *impl = NULL;
  const hbg__backend *be = hbg__backend_of(dev, &impl);
  if (!be || !be->user_kernel_check)
    return 0;
  char why[256] = "";
  int rc = be->user_kernel_check(impl, t, why, sizeof why);
  if (rc < 0)
    hbg__error_set("%s: %s", who, why);
  return rc;
}
