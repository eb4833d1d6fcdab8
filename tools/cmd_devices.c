#include <stdio.h>

#include "cli.h"

/* TODO(owner): placeholder until the issue that builds it lands. */
int hbg_cmd_devices(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "hbg devices: not built yet\n");
  return 1;
}
