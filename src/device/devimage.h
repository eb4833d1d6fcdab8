/*
 * Device code images a user hands to hbg_kernel_register (internal): what
 * kind they are (PTX text, a CUDA ELF cubin, a fatbin) and whether they
 * define a function. Pure functions over untrusted bytes, no CUDA headers
 * (the fuzz target tests/fuzz/fuzz_devimage.c runs them): every read is
 * bounded by the length given.
 */
#ifndef HBG_DEVICE_DEVIMAGE_H
#define HBG_DEVICE_DEVIMAGE_H

#include <stddef.h>
#include <stdint.h>

enum {
  HBG__DEVIMG_PTX = 1,
  HBG__DEVIMG_CUBIN = 2,
  HBG__DEVIMG_FATBIN = 3
};

/* What p[0..n) holds. @return HBG__DEVIMG_*, or HBG_E_INVAL with why
 * (len bytes) saying what the bytes are instead: not device code (a host
 * ELF object, text without PTX directives, ...), a cubin that is not
 * relocatable (built without -rdc), a fatbin whose headers do not hold
 * together or that has no PTX or ELF entry. */
int hbg__devimg_kind(const void *p, size_t n, char *why, size_t len);

/* How an image of kind `kind` defines `sym`. */
enum {
  HBG__DEVIMG_UNKNOWN = -1, /* unreadable here (compressed fatbin entries) */
  HBG__DEVIMG_ABSENT = 0,   /* not defined (declared extern at most) */
  HBG__DEVIMG_FUNC = 1,     /* a visible function (__device__) */
  HBG__DEVIMG_ENTRY = 2     /* a kernel entry (__global__), not callable */
};
int hbg__devimg_defines(const void *p, size_t n, int kind, const char *sym);

/* @return 1 when s is a C identifier of at most 255 characters. */
int hbg__devimg_ident(const char *s);

#endif
