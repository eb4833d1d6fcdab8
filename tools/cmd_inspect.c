#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg.h>

#include "cli.h"

static void inspect_usage(FILE *f) {
  fprintf(f,
          "usage: hbg inspect [--json] FILE\n"
          "Validate a Definition, Submission or task-window image and print "
          "it.\n"
          "Exit status: 0 valid, 1 invalid or unreadable (error name on "
          "stderr), 2 usage.\n");
}

/* The whole file in one malloc block (suitably aligned for the validator).
 * An I/O failure leaves errno in *sys_err. */
static int read_file(const char *path, void **out, size_t *len,
                     int *sys_err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    *sys_err = errno;
    return HBG_E_IO;
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  int rc = HBG_E_NOMEM;
  if (!buf)
    goto err_file;
  for (;;) {
    if (n == cap) {
      unsigned char *nb = cap > ((size_t)1 << 30) ? NULL : realloc(buf, cap * 2);
      if (!nb) {
        rc = cap > ((size_t)1 << 30) ? HBG_E_LIMIT : HBG_E_NOMEM;
        goto err_buf;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  if (ferror(f)) {
    *sys_err = errno;
    rc = HBG_E_IO;
    goto err_buf;
  }
  fclose(f);
  *out = buf;
  *len = n;
  return 0;

err_buf:
  free(buf);
err_file:
  fclose(f);
  return rc;
}

int hbg_cmd_inspect(int argc, char **argv) {
  int json = 0;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      inspect_usage(stdout);
      return 0;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      fprintf(stderr, "hbg inspect: unknown option '%s'\n", argv[i]);
      inspect_usage(stderr);
      return 2;
    } else if (path) {
      fprintf(stderr, "hbg inspect: more than one file\n");
      inspect_usage(stderr);
      return 2;
    } else {
      path = argv[i];
    }
  }
  if (!path) {
    inspect_usage(stderr);
    return 2;
  }

  void *img = NULL;
  size_t len = 0;
  int sys_err = 0;
  int rc = read_file(path, &img, &len, &sys_err);
  if (rc) {
    if (sys_err)
      fprintf(stderr, "hbg inspect: %s: %s\n", path, strerror(sys_err));
    else
      fprintf(stderr, "hbg inspect: %s: %s (%s)\n", path, hbg_err_name(rc),
              hbg_strerror(rc));
    return 1;
  }
  rc = hbg_image_dump(img, len, json, stdout);
  free(img);
  fflush(stdout);
  if (rc) {
    fprintf(stderr, "hbg inspect: %s: %s (%s)\n", path, hbg_err_name(rc),
            hbg_strerror(rc));
    return 1;
  }
  return 0;
}
