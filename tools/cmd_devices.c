#include <stdio.h>
#include <string.h>

#include <hbg/hbg.h>
#include <hbg/hbg_device.h>

#include "cli.h"

static void usage(FILE *f) {
  fprintf(f, "usage: hbg devices [--json]\n\n"
             "List the built-in device backends and whether each can be\n"
             "opened on this machine.\n");
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

int hbg_cmd_devices(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "hbg devices: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }

  uint32_t n = hbg_device_count();
  if (json)
    printf("[");
  else
    printf("%-8s %-14s %s\n", "NAME", "AVAILABILITY", "SUMMARY");
  for (uint32_t i = 0; i < n; i++) {
    const hbg_dev_ops *o = hbg_device_backend(i);
    char why[256] = "";
    int rc = o->probe ? o->probe(why, sizeof why) : 0;
    const char *avail = why[0] ? why : "available";
    if (rc < 0 && !why[0])
      avail = hbg_strerror(rc);
    if (json) {
      printf("%s\n  {\"name\": ", i ? "," : "");
      json_str(o->name);
      printf(", \"available\": %s, \"availability\": ", rc < 0 ? "false" : "true");
      json_str(avail);
      printf(", \"summary\": ");
      json_str(o->summary ? o->summary : "");
      printf("}");
    } else {
      printf("%-8s %-14s %s\n", o->name, rc < 0 ? "unavailable" : "available",
             o->summary ? o->summary : "");
      if (why[0] && (rc < 0 || strcmp(why, "available") != 0))
        printf("%-8s   %s: %s\n", "", rc < 0 ? "reason" : "detail", avail);
    }
  }
  if (json)
    printf("%s]\n", n ? "\n" : "");
  return 0;
}
