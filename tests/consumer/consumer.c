/* Compiled against the installed headers as C and as C++. */
#include <hbg/hbg.h>
#include <hbg/hbg_device.h>
#include <hbg/hbg_workload.h>

#include <stdio.h>
#include <string.h>

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
  printf("consumer %s: %u backends\n", hbg_version_string(),
         hbg_device_count());
  return 0;
}
