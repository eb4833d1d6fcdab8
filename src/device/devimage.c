#include "device/devimage.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define EM_CUDA 190u
#define ET_REL 1u
#define SHT_SYMTAB 2u
#define STT_FUNC 2u
#define STO_CUDA_ENTRY 0x10u /* st_other of a __global__ kernel */

static uint64_t rd(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n; i-- > 0;)
    v = v << 8 | p[i];
  return v;
}

int hbg__devimg_ident(const char *s) {
  if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              *s == '_'))
    return 0;
  size_t i = 1;
  for (; s[i] && i < 256; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
      return 0;
  return s[i] == '\0' && i <= 255;
}

/* ---- PTX: a tokenizer that skips comments and string literals ---- */

typedef struct lex {
  const char *p, *end;
} lex;

static int is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%' ||
         c == '.';
}

/* The next token in [*s, *s + *n). @return 0 at the end. */
static int lex_next(lex *x, const char **s, size_t *n) {
  for (;;) {
    while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' ||
                             *x->p == '\n' || *x->p == '\r' || *x->p == '\0'))
      x->p++;
    if (x->end - x->p >= 2 && x->p[0] == '/' && x->p[1] == '/') {
      while (x->p < x->end && *x->p != '\n')
        x->p++;
    } else if (x->end - x->p >= 2 && x->p[0] == '/' && x->p[1] == '*') {
      x->p += 2;
      while (x->end - x->p >= 2 && !(x->p[0] == '*' && x->p[1] == '/'))
        x->p++;
      x->p = x->end - x->p >= 2 ? x->p + 2 : x->end;
    } else {
      break;
    }
  }
  if (x->p >= x->end)
    return 0;
  *s = x->p;
  if (*x->p == '"') {
    x->p++;
    while (x->p < x->end && *x->p != '"')
      x->p++;
    if (x->p < x->end)
      x->p++;
  } else if (is_word(*x->p)) {
    while (x->p < x->end && is_word(*x->p))
      x->p++;
  } else {
    x->p++;
  }
  *n = (size_t)(x->p - *s);
  return 1;
}

static int tok_is(const char *s, size_t n, const char *want) {
  return n == strlen(want) && memcmp(s, want, n) == 0;
}

/* PTX text: its first directive (after comments) is .version, and it has
 * a .target; no NUL byte except at the end. */
static int ptx_like(const uint8_t *p, size_t n) {
  size_t text = n;
  while (text > 0 && p[text - 1] == '\0')
    text--;
  if (text == 0 || memchr(p, '\0', text))
    return 0;
  lex x = {(const char *)p, (const char *)p + text};
  const char *s;
  size_t len;
  if (!lex_next(&x, &s, &len) || !tok_is(s, len, ".version"))
    return 0;
  while (lex_next(&x, &s, &len))
    if (tok_is(s, len, ".target"))
      return 1;
  return 0;
}

static int ptx_defines(const uint8_t *p, size_t n, const char *sym) {
  lex x = {(const char *)p, (const char *)p + n};
  const char *s, *prev = NULL;
  size_t len, prev_n = 0;
  int found = HBG__DEVIMG_ABSENT;
  while (lex_next(&x, &s, &len)) {
    int func = tok_is(s, len, ".func"), entry = tok_is(s, len, ".entry");
    int vis = prev && (tok_is(prev, prev_n, ".visible") ||
                       tok_is(prev, prev_n, ".weak"));
    prev = s;
    prev_n = len;
    if (!(func || entry) || !vis)
      continue;
    if (!lex_next(&x, &s, &len))
      break;
    if (func && tok_is(s, len, "(")) { /* the return parameter */
      while (lex_next(&x, &s, &len) && !tok_is(s, len, ")")) {
      }
      if (!lex_next(&x, &s, &len))
        break;
    }
    if (tok_is(s, len, sym)) {
      if (func)
        return HBG__DEVIMG_FUNC;
      found = HBG__DEVIMG_ENTRY;
    }
    prev = s;
    prev_n = len;
  }
  return found;
}

/* ---- CUDA ELF (cubin) ---- */

/* A 64-bit little-endian ELF for EM_CUDA. */
static int cuda_elf(const uint8_t *p, size_t n) {
  return n >= 64 && memcmp(p, "\x7f" "ELF", 4) == 0 && p[4] == 2 &&
         p[5] == 1 && rd(p + 18, 2) == EM_CUDA;
}

static int elf_defines(const uint8_t *p, size_t n, const char *sym) {
  if (!cuda_elf(p, n))
    return HBG__DEVIMG_UNKNOWN;
  uint64_t shoff = rd(p + 0x28, 8), shent = rd(p + 0x3a, 2),
           shnum = rd(p + 0x3c, 2);
  if (shent < 64 || shoff > n || shnum > (n - shoff) / shent)
    return HBG__DEVIMG_UNKNOWN;
  size_t want = strlen(sym);
  int found = HBG__DEVIMG_ABSENT;
  for (uint64_t i = 0; i < shnum; i++) {
    const uint8_t *sh = p + shoff + i * shent;
    if (rd(sh + 4, 4) != SHT_SYMTAB)
      continue;
    uint64_t off = rd(sh + 0x18, 8), size = rd(sh + 0x20, 8),
             link = rd(sh + 0x28, 4), ent = rd(sh + 0x38, 8);
    if (ent < 24 || off > n || size > n - off || link >= shnum)
      return HBG__DEVIMG_UNKNOWN;
    const uint8_t *st = p + shoff + link * shent;
    uint64_t soff = rd(st + 0x18, 8), ssize = rd(st + 0x20, 8);
    if (soff > n || ssize > n - soff)
      return HBG__DEVIMG_UNKNOWN;
    for (uint64_t k = 0; k < size / ent; k++) {
      const uint8_t *y = p + off + k * ent;
      uint64_t name = rd(y, 4), info = y[4], other = y[5],
               shndx = rd(y + 6, 2);
      if ((info & 0xf) != STT_FUNC || shndx == 0 || (info >> 4) == 0 ||
          name >= ssize || ssize - name <= want)
        continue;
      const uint8_t *nm = p + soff + name;
      if (memcmp(nm, sym, want) != 0 || nm[want] != '\0')
        continue;
      if (!(other & STO_CUDA_ENTRY))
        return HBG__DEVIMG_FUNC;
      found = HBG__DEVIMG_ENTRY;
    }
  }
  return found;
}

/* ---- fatbin: 16-byte header (magic, version, header size, body size),
 * then entries: u16 kind (1 PTX, 2 ELF) at 0, u32 header size at 4, u64
 * payload size at 8, u32 arch at 28. A payload may be compressed; what is
 * neither PTX text nor an ELF is taken as such and not read. ---- */

typedef int (*entry_fn)(void *ctx, uint32_t kind, const uint8_t *pay,
                        uint64_t size);

/* Calls fn on each entry until it returns non-zero. @return fn's value,
 * 0 after the last entry, or -1 when the headers do not hold together. */
static int fatbin_walk(const uint8_t *p, size_t n, entry_fn fn, void *ctx) {
  if (n < 16 || rd(p, 4) != FATBIN_MAGIC)
    return -1;
  uint64_t hs = rd(p + 6, 2), body = rd(p + 8, 8);
  if (hs < 16 || hs > n || body > n - hs)
    return -1;
  for (uint64_t off = hs; off < hs + body;) {
    if (hs + body - off < 32)
      return -1;
    const uint8_t *e = p + off;
    uint64_t ehs = rd(e + 4, 4), size = rd(e + 8, 8);
    if (ehs < 32 || ehs > hs + body - off || size > hs + body - off - ehs)
      return -1;
    int rc = fn(ctx, (uint32_t)rd(e, 2), e + ehs, size);
    if (rc)
      return rc;
    off += ehs + size;
  }
  return 0;
}

typedef struct fat_scan {
  int code; /* any PTX or ELF entry */
  int exec; /* a readable ELF entry that is not relocatable */
} fat_scan;

static int scan_entry(void *ctx, uint32_t kind, const uint8_t *pay,
                      uint64_t size) {
  fat_scan *f = ctx;
  if (kind == 1 || kind == 2)
    f->code = 1;
  if (kind == 2 && cuda_elf(pay, size) && rd(pay + 16, 2) != ET_REL)
    f->exec = 1;
  return 0;
}

typedef struct fat_find {
  const char *sym;
  int best; /* HBG__DEVIMG_*, the most telling answer so far */
  int unread;
} fat_find;

static int find_entry(void *ctx, uint32_t kind, const uint8_t *pay,
                      uint64_t size) {
  fat_find *f = ctx;
  int r = HBG__DEVIMG_UNKNOWN;
  if (kind == 1 && ptx_like(pay, size))
    r = ptx_defines(pay, size, f->sym);
  else if (kind == 2 && cuda_elf(pay, size))
    r = elf_defines(pay, size, f->sym);
  if (r == HBG__DEVIMG_UNKNOWN) {
    f->unread = 1;
    return 0;
  }
  if (r > f->best)
    f->best = r;
  return r == HBG__DEVIMG_FUNC;
}

/* ---- the two entry points ---- */

int hbg__devimg_kind(const void *img, size_t n, char *why, size_t len) {
  const uint8_t *p = img;
  if (!p || n == 0) {
    snprintf(why, len, "no bytes");
    return HBG_E_INVAL;
  }
  if (n >= 4 && rd(p, 4) == FATBIN_MAGIC) {
    fat_scan f = {0, 0};
    if (fatbin_walk(p, n, scan_entry, &f) < 0) {
      snprintf(why, len, "a fatbin whose headers do not fit its %zu bytes",
               n);
      return HBG_E_INVAL;
    }
    if (!f.code) {
      snprintf(why, len, "a fatbin with no PTX or ELF entry");
      return HBG_E_INVAL;
    }
    if (f.exec) {
      snprintf(why, len, "a fatbin of executable device code: build it "
                         "with nvcc -rdc=true");
      return HBG_E_INVAL;
    }
    return HBG__DEVIMG_FATBIN;
  }
  if (n >= 4 && memcmp(p, "\x7f" "ELF", 4) == 0) {
    if (!cuda_elf(p, n)) {
      snprintf(why, len,
               "an ELF file for machine %u, not a CUDA cubin (machine %u): "
               "a host object or library is not device code",
               n >= 20 ? (unsigned)rd(p + 18, 2) : 0u, EM_CUDA);
      return HBG_E_INVAL;
    }
    if (rd(p + 16, 2) != ET_REL) {
      snprintf(why, len, "an executable cubin (ELF type %u): build it with "
                         "nvcc -rdc=true so that it can be linked",
               (unsigned)rd(p + 16, 2));
      return HBG_E_INVAL;
    }
    return HBG__DEVIMG_CUBIN;
  }
  if (ptx_like(p, n))
    return HBG__DEVIMG_PTX;
  snprintf(why, len,
           "%zu bytes that are not device code: neither PTX text (a "
           ".version directive first, then .target), a CUDA ELF cubin nor "
           "a fatbin",
           n);
  return HBG_E_INVAL;
}

int hbg__devimg_defines(const void *img, size_t n, int kind,
                        const char *sym) {
  const uint8_t *p = img;
  if (!p || !sym)
    return HBG__DEVIMG_UNKNOWN;
  switch (kind) {
  case HBG__DEVIMG_PTX:
    return ptx_defines(p, n, sym);
  case HBG__DEVIMG_CUBIN:
    return elf_defines(p, n, sym);
  case HBG__DEVIMG_FATBIN: {
    fat_find f = {sym, HBG__DEVIMG_ABSENT, 0};
    if (fatbin_walk(p, n, find_entry, &f) < 0)
      return HBG__DEVIMG_UNKNOWN;
    if (f.best == HBG__DEVIMG_FUNC || !f.unread)
      return f.best;
    return HBG__DEVIMG_UNKNOWN; /* an unread entry may define it */
  }
  default:
    return HBG__DEVIMG_UNKNOWN;
  }
}
