/* Test-side access to the stand-in libascendcl (ascendcl_stub.c): the
 * control functions are reached through dlopen of the same path the
 * backend loads (HBG_ACL_LIB), so both see one copy of the stub's state. */
#ifndef HBG_TESTS_HBGSTUB_H
#define HBG_TESTS_HBGSTUB_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HBGSTUB_FNS(X)                                                         \
  X(void, reset, (void))                                                       \
  X(size_t, calls, (void))                                                     \
  X(const char *, call_name, (size_t i))                                       \
  X(uint64_t, call_arg, (size_t i, unsigned j))                                \
  X(int, call_rc, (size_t i))                                                  \
  X(size_t, log, (size_t from, char *buf, size_t len))                         \
  X(int, fail, (const char *name, unsigned long k, int code))                  \
  X(unsigned long, fired, (void))                                              \
  X(void, set_errmsg, (const char *msg))                                       \
  X(void, set_mem_limit, (uint64_t bytes))                                     \
  X(uint64_t, count, (const char *what))                                       \
  X(int, peek, (uint64_t addr, void *dst, size_t len))                         \
  X(int, poke, (uint64_t addr, const void *src, size_t len))

typedef struct hbgstub {
  void *lib;
  const char *path;
#define HBGSTUB_FIELD(r, n, p) r(*n) p;
  HBGSTUB_FNS(HBGSTUB_FIELD)
#undef HBGSTUB_FIELD
} hbgstub;

/* Attach to the stub at path (already loaded by the backend, or loaded
 * now and kept for the life of the test so its state survives closes).
 * @return 0, or -1 with a message on stderr. */
static inline int hbgstub_attach(hbgstub *s, const char *path) {
  memset(s, 0, sizeof *s);
  if (!path || !*path) {
    fprintf(stderr, "hbgstub: no stub path (HBG_ACL_LIB)\n");
    return -1;
  }
  s->path = path;
  s->lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!s->lib)
    s->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!s->lib) {
    fprintf(stderr, "hbgstub: %s\n", dlerror());
    return -1;
  }
  void *sym;
#define HBGSTUB_LOAD(r, n, p)                                                  \
  sym = dlsym(s->lib, "hbgstub_" #n);                                          \
  if (!sym) {                                                                  \
    fprintf(stderr, "hbgstub: missing hbgstub_" #n "\n");                      \
    return -1;                                                                 \
  }                                                                            \
  memcpy(&s->n, &sym, sizeof sym);
  HBGSTUB_FNS(HBGSTUB_LOAD)
#undef HBGSTUB_LOAD
  return 0;
}

/* The names of the calls logged from `from` on, space-separated (static
 * buffer, valid until the next call). */
static inline const char *hbgstub_seq(hbgstub *s, size_t from) {
  static char buf[1 << 16];
  s->log(from, buf, sizeof buf);
  return buf;
}

/* The stub's path from the environment variable env, which CMake sets for
 * every acl test whenever it builds the acl backend (tests/extra.cmake):
 * exit 77 only when the backend itself is not built; the variable missing
 * with the backend built is a broken test set-up, and fails. */
static inline const char *hbgstub_path(const char *env, int backend_built) {
  if (!backend_built) {
    printf("SKIP: acl backend not built\n");
    exit(77);
  }
  const char *p = getenv(env);
  if (!p || !*p) {
    fprintf(stderr, "%s is not set although the acl backend is built "
                    "(tests/extra.cmake sets it)\n", env);
    exit(1);
  }
  return p;
}

#endif
