/* Process-wide host settings of `hbg bench` and the device options it
 * reports: the host allocator arm (set once for the CLI's own process; the
 * library never touches allocator settings), keys read back out of the
 * device options string, and the orchestrating thread's page faults. */
#ifndef HBG_TOOLS_BENCH_HOST_H
#define HBG_TOOLS_BENCH_HOST_H

#include <stddef.h>
#include <stdint.h>

enum {
  BENCH_ALLOC_RETAIN = 0, /* freed heap pages stay in the process */
  BENCH_ALLOC_TRIM,       /* glibc's defaults: trim the heap top, mmap big blocks */
  BENCH_ALLOC__COUNT
};

/* "retain", "trim". */
const char *bench_host_alloc_name(int arm);
/* @return 0 and *arm, or -1 for a name that is not an arm. */
int bench_host_alloc_parse(const char *s, int *arm);
/* Apply the arm to this process (call once, before any large allocation).
 * retain: M_TRIM_THRESHOLD and M_MMAP_THRESHOLD set to their largest values,
 * so free() neither returns the heap's top to the kernel nor unmaps blocks.
 * trim: nothing is changed.
 * @return 0; 1 when retain is not available here (not glibc's malloc, or
 * mallopt refused), the process then runs with its allocator's defaults;
 * -1 for an unknown arm. */
int bench_host_alloc_apply(int arm);

/* The value of the last `key=` in a "k=v,k=v" options string, copied into
 * buf. @return 1 found, 0 absent, -1 value does not fit in buf. */
int bench_opt_get(const char *opts, const char *key, char *buf, size_t n);

/* Minor page faults taken so far by the calling thread (Linux), or
 * UINT64_MAX where the count is not available. */
uint64_t bench_thread_minflt(void);

#endif
