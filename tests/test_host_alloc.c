/* The CLI's host-side settings (tools/bench_host.c): --host-alloc names,
 * that retain really keeps freed heap pages in the process and trim hands
 * them back (each arm in its own child: the setting is process-wide), reading
 * keys back out of a device options string, and the thread fault counter. */
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/bench_host.c"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

#if defined(__GLIBC__) && !defined(SANITIZED)
#define CHECK_ARMS 1
#endif

#define BLOCK (512u * 1024u) /* above glibc's default mmap threshold */
#define NBLOCKS 64u          /* 32 MiB in all */

static void t_names(void) {
  int arm = -1;
  ASSERT_EQ(bench_host_alloc_parse("retain", &arm), 0);
  ASSERT_EQ(arm, BENCH_ALLOC_RETAIN);
  ASSERT_EQ(bench_host_alloc_parse("trim", &arm), 0);
  ASSERT_EQ(arm, BENCH_ALLOC_TRIM);
  static const char *const bad[] = {"", "Retain", "retained", "trim ", "keep"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    arm = 42;
    ASSERT_EQ(bench_host_alloc_parse(bad[i], &arm), -1);
    ASSERT_EQ(arm, 42); /* untouched on failure */
  }
  ASSERT_EQ(bench_host_alloc_parse(NULL, &arm), -1);
  ASSERT_STREQ(bench_host_alloc_name(BENCH_ALLOC_RETAIN), "retain");
  ASSERT_STREQ(bench_host_alloc_name(BENCH_ALLOC_TRIM), "trim");
  ASSERT_STREQ(bench_host_alloc_name(BENCH_ALLOC__COUNT), "?");
  ASSERT_EQ(bench_host_alloc_apply(-1), -1);
}

static void t_opt_get(void) {
  char buf[16];
  const char *o = "workers=2,profile=ascend-a2,spin=0";
  ASSERT_EQ(bench_opt_get(o, "profile", buf, sizeof buf), 1);
  ASSERT_STREQ(buf, "ascend-a2");
  ASSERT_EQ(bench_opt_get(o, "spin", buf, sizeof buf), 1);
  ASSERT_STREQ(buf, "0");
  ASSERT_EQ(bench_opt_get(o, "mem", buf, sizeof buf), 0);
  /* the last one wins, as in the sim's own parser */
  ASSERT_EQ(bench_opt_get("spin=1,,spin=50", "spin", buf, sizeof buf), 1);
  ASSERT_STREQ(buf, "50");
  /* whole keys only */
  ASSERT_EQ(bench_opt_get("profiles=x,xprofile=y,profile", "profile", buf,
                          sizeof buf), 0);
  ASSERT_EQ(bench_opt_get("profile=", "profile", buf, sizeof buf), 1);
  ASSERT_STREQ(buf, "");
  ASSERT_EQ(bench_opt_get(NULL, "profile", buf, sizeof buf), 0);
  ASSERT_EQ(bench_opt_get("", "profile", buf, sizeof buf), 0);
  ASSERT_EQ(bench_opt_get("profile=0123456789abcdef", "profile", buf,
                          sizeof buf), -1);
}

#ifdef CHECK_ARMS
static long rss_pages(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, rss = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &rss) != 2)
      rss = -1;
    fclose(f);
  }
  return rss;
}

/* In a child: apply the arm, fault in NBLOCKS blocks, free them all.
 * Exit 10 when RSS kept at least 3/4 of them, 11 when it dropped by at least
 * 3/4, 1 on an error. */
static int child(int arm) {
  if (bench_host_alloc_apply(arm) != 0)
    return 1;
  static char *b[NBLOCKS];
  long page = sysconf(_SC_PAGESIZE);
  for (uint32_t i = 0; i < NBLOCKS; i++) {
    if (!(b[i] = malloc(BLOCK)))
      return 1;
    memset(b[i], (int)i + 1, BLOCK);
  }
  long before = rss_pages();
  for (uint32_t i = NBLOCKS; i-- > 0;)
    free(b[i]);
  long after = rss_pages();
  long total = (long)(NBLOCKS * (uint64_t)BLOCK / (uint64_t)page);
  printf("test_host_alloc: %s: rss %ld -> %ld pages (blocks: %ld pages)\n",
         bench_host_alloc_name(arm), before, after, total);
  fflush(stdout);
  if (before < 0 || after < 0)
    return 1;
  if (before - after <= total / 4)
    return 10;
  if (before - after >= total * 3 / 4)
    return 11;
  return 1;
}

static int run_child(int arm) {
  fflush(stdout);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0)
    _exit(child(arm));
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT(WIFEXITED(st));
  return WEXITSTATUS(st);
}
#endif

static void t_arms(void) {
#ifdef CHECK_ARMS
  const char *tun = getenv("GLIBC_TUNABLES");
  if (tun && strstr(tun, "malloc")) {
    printf("test_host_alloc: GLIBC_TUNABLES sets malloc: arms not checked\n");
    return;
  }
  ASSERT_EQ(run_child(BENCH_ALLOC_RETAIN), 10);
  ASSERT_EQ(run_child(BENCH_ALLOC_TRIM), 11);
#else
  printf("test_host_alloc: not glibc's allocator: arms not checked\n");
#endif
}

static void t_minflt(void) {
#if defined(RUSAGE_THREAD)
  uint64_t f0 = bench_thread_minflt();
  ASSERT(f0 != UINT64_MAX);
  /* fresh anonymous pages fault on first touch */
  size_t n = 256 * (size_t)sysconf(_SC_PAGESIZE);
  char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  ASSERT(p != MAP_FAILED);
  memset(p, 1, n);
  uint64_t f1 = bench_thread_minflt();
  ASSERT(munmap(p, n) == 0);
  ASSERT_UGE(f1 - f0, 256 / 16); /* fault-around may map several at once */
#endif
}

int main(void) {
  t_names();
  t_opt_get();
  t_arms();
  t_minflt();
  printf("test_host_alloc: ok\n");
  return 0;
}
