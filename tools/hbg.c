#include <stdio.h>
#include <string.h>

#include <hbg/hbg.h>

#include "cli.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} cmds[] = {
    {"bench", hbg_cmd_bench, "benchmark upload policies on a workload"},
    {"devices", hbg_cmd_devices, "list device backends"},
    {"inspect", hbg_cmd_inspect, "validate and print an image file"},
    {"selfcheck", hbg_cmd_selfcheck, "device copy self-check (pinned vs pageable)"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: hbg <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].help);
  fprintf(f, "  %-10s %s\n", "version", "print the library version");
  fprintf(f, "\n'hbg <command> --help' for a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *c = argv[1];
  if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(c, "version") || !strcmp(c, "--version")) {
    printf("hbg %s\n", hbg_version_string());
    return 0;
  }
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(c, cmds[i].name))
      return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "hbg: unknown command '%s'\n", c);
  usage(stderr);
  return 2;
}
