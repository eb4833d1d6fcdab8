/* Internal helpers shared by every layer. Not installed. */
#ifndef HBG_COMMON_UTIL_H
#define HBG_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <hbg/hbg.h>

#define HBG__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define HBG__ALIGN_UP(x, a) (((x) + ((a)-1)) / (a) * (a))
#define HBG__MIN(a, b) ((a) < (b) ? (a) : (b))
#define HBG__MAX(a, b) ((a) > (b) ? (a) : (b))
#define HBG__UNUSED(x) ((void)(x))

/* Default hbg_config.graph_cache_max. */
#define HBG__GRAPH_CACHE_DEFAULT 256u

/* RETURN_IF(cond, code): return code when cond holds; in debug builds
 * (HBG_DEBUG_ERRORS) print file:line first. */
#ifdef HBG_DEBUG_ERRORS
#define HBG__RETURN_IF(cond, code)                                             \
  do {                                                                         \
    if (cond) {                                                                \
      fprintf(stderr, "hbg: %s:%d: %s -> %s\n", __FILE__, __LINE__, #cond,     \
              hbg_err_name(code));                                             \
      return (code);                                                           \
    }                                                                          \
  } while (0)
#else
#define HBG__RETURN_IF(cond, code)                                             \
  do {                                                                         \
    if (cond)                                                                  \
      return (code);                                                           \
  } while (0)
#endif

/* Propagate a negative result. */
#define HBG__TRY(expr)                                                         \
  do {                                                                         \
    int hbg__rc = (expr);                                                      \
    if (hbg__rc < 0)                                                           \
      return hbg__rc;                                                          \
  } while (0)

static inline uint64_t hbg__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Overflow-checked size arithmetic: return 0 on success, -1 on overflow. */
static inline int hbg__add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  if (a > UINT64_MAX - b)
    return -1;
  *out = a + b;
  return 0;
}
static inline int hbg__mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a)
    return -1;
  *out = a * b;
  return 0;
}

/* The calling thread's message read by hbg_last_error(): cleared on entry
 * by each public call that records one, set (printf-style) where it fails. */
void hbg__error_clear(void);
void hbg__error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Look up key in a "k=v,k=v" option string; copy value into buf.
 * @return 1 found, 0 not found, -1 value too long. */
int hbg__opt_get(const char *opts, const char *key, char *buf, size_t len);
/* Parse an unsigned integer option with optional K/M/G suffix.
 * @return 0 (and *out, untouched if absent) or HBG_E_INVAL. */
int hbg__opt_u64(const char *opts, const char *key, uint64_t *out);
/* Parse an environment variable like hbg__opt_u64. */
int hbg__env_u64(const char *name, uint64_t *out);
int hbg__parse_u64(const char *s, uint64_t *out);

/* Make room for need elements of elem bytes in the array *pp points to
 * (any object pointer type), doubling the capacity from 16; the array moves
 * only on success. @return 0, HBG_E_NOMEM, or HBG_E_LIMIT (need does not
 * fit a u32 capacity). */
int hbg__reserve(void *pp, uint32_t *cap, uint64_t need, size_t elem);
#define HBG__RESERVE(arr, cap, need)                                           \
  hbg__reserve(&(arr), &(cap), (need), sizeof *(arr))

/* [lo, hi) of device memory, tagged (the window entry it belongs to). */
typedef struct hbg__span {
  uint64_t lo, hi;
  uint32_t tag;
} hbg__span;

/* Append [a, a + len) (hi saturates at UINT64_MAX) to the array *v of *n
 * spans; len 0 adds nothing. @return 0 or HBG_E_NOMEM / HBG_E_LIMIT. */
int hbg__span_add(hbg__span **v, uint32_t *n, uint32_t *cap, uint64_t a,
                  uint64_t len, uint32_t tag);

/* Sort rd by start, then find the first span of wr that overlaps any span
 * of rd: O((n_rd + n_wr) log n_rd).
 * @return its index in wr, or UINT32_MAX when none overlaps. */
uint32_t hbg__span_first_overlap(hbg__span *rd, uint32_t n_rd,
                                 const hbg__span *wr, uint32_t n_wr);

#endif
