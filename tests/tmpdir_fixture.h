/* A test's temporary folder: made under /tmp (mkdtemp), removed with all
 * it holds at exit, also after a failed assert. */
#ifndef HBG_TEST_TMPDIR_FIXTURE_H
#define HBG_TEST_TMPDIR_FIXTURE_H

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static char g_root[64];

static int tmpdir_rm_one(const char *p, const struct stat *sb, int flag,
                         struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

/* Remove the folder and what it holds. @return 0 or -1. */
static int tmpdir_remove(void) {
  int rc = g_root[0] ? nftw(g_root, tmpdir_rm_one, 16, FTW_DEPTH | FTW_PHYS)
                     : 0;
  g_root[0] = '\0';
  return rc;
}

static void tmpdir_at_exit(void) { (void)tmpdir_remove(); }

/* g_root: a new folder /tmp/<name>.XXXXXX, removed at exit. */
static void tmpdir_make(const char *name) {
  snprintf(g_root, sizeof g_root, "/tmp/%s.XXXXXX", name);
  if (!mkdtemp(g_root))
    T_FAIL("mkdtemp: %s", strerror(errno));
  atexit(tmpdir_at_exit);
}

#endif
