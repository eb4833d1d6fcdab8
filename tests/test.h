/* Minimal value-printing asserts for hbg tests. Exit 77 = skipped. */
#ifndef HBG_TEST_H
#define HBG_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_EXIT_SKIP 77

#define T_FAIL(...)                                                            \
  do {                                                                         \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                            \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n");                                                     \
    exit(1);                                                                   \
  } while (0)

#define ASSERT(c)                                                              \
  do {                                                                         \
    if (!(c))                                                                  \
      T_FAIL("assertion failed: %s", #c);                                      \
  } while (0)

#define T__CMP(a, op, b)                                                       \
  do {                                                                         \
    long long t__a = (long long)(a), t__b = (long long)(b);                    \
    if (!(t__a op t__b))                                                       \
      T_FAIL("%s %s %s (%lld vs %lld)", #a, #op, #b, t__a, t__b);              \
  } while (0)
#define T__UCMP(a, op, b)                                                      \
  do {                                                                         \
    unsigned long long t__a = (unsigned long long)(a),                         \
                       t__b = (unsigned long long)(b);                         \
    if (!(t__a op t__b))                                                       \
      T_FAIL("%s %s %s (%llu vs %llu)", #a, #op, #b, t__a, t__b);              \
  } while (0)

#define ASSERT_EQ(a, b) T__CMP(a, ==, b)
#define ASSERT_NE(a, b) T__CMP(a, !=, b)
#define ASSERT_LT(a, b) T__CMP(a, <, b)
#define ASSERT_LE(a, b) T__CMP(a, <=, b)
#define ASSERT_GT(a, b) T__CMP(a, >, b)
#define ASSERT_GE(a, b) T__CMP(a, >=, b)
#define ASSERT_UEQ(a, b) T__UCMP(a, ==, b)
#define ASSERT_ULE(a, b) T__UCMP(a, <=, b)
#define ASSERT_UGE(a, b) T__UCMP(a, >=, b)
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    int t__rc = (expr);                                                        \
    if (t__rc != 0)                                                            \
      T_FAIL("%s -> %d (%s)", #expr, t__rc, hbg_err_name(t__rc));              \
  } while (0)
#define ASSERT_ERR(expr, code)                                                 \
  do {                                                                         \
    int t__rc = (expr);                                                        \
    if (t__rc != (code))                                                       \
      T_FAIL("%s -> %d (%s), expected %s", #expr, t__rc,                       \
             hbg_err_name(t__rc), hbg_err_name(code));                         \
  } while (0)
#define ASSERT_STREQ(a, b)                                                     \
  do {                                                                         \
    const char *t__a = (a), *t__b = (b);                                       \
    if (!t__a || !t__b || strcmp(t__a, t__b) != 0)                             \
      T_FAIL("%s == %s (\"%s\" vs \"%s\")", #a, #b, t__a ? t__a : "(null)",    \
             t__b ? t__b : "(null)");                                          \
  } while (0)

#endif
