/* Which device one driver of `hbg bench` uses: the --device-list parser,
 * the launcher's local rank (mpirun, srun, Intel MPI), and the options
 * string that opens one device. No hbg dependency, so the tests compile it
 * on their own. */
#ifndef HBG_TOOLS_BENCH_PLACE_H
#define HBG_TOOLS_BENCH_PLACE_H

#include <stddef.h>
#include <stdint.h>

/* Most devices one `hbg bench --devices` drives. */
#define BENCH_PLACE_MAX 64

/* "0,2,3": distinct ordinals (each below 2^31), at most max of them.
 * @return how many (> 0) into out, or -1 (empty entry, not a number, a
 * repeat, too many). */
int bench_place_parse_list(const char *s, uint32_t *out, uint32_t max);

/* The local rank the launcher gave this process: the first variable set of
 * OMPI_COMM_WORLD_LOCAL_RANK, PMI_LOCAL_RANK, MPI_LOCALRANKID,
 * SLURM_LOCALID, read through get (getenv, or a test's table).
 * @return 1 with *rank and *from (the variable's name), 0 when none is set,
 * -1 when the first one set is not a number (*from names it). */
int bench_place_local_rank(char *(*get)(const char *), uint32_t *rank,
                           const char **from);

/* The options that open device `ordinal` of backend: base with every
 * device= entry taken out, then device=ORDINAL appended unless the backend
 * is the sim (each sim runtime is its own device; it has no ordinals).
 * @return 0, or -1 when the result does not fit in buf. */
int bench_place_options(const char *backend, const char *base,
                        uint32_t ordinal, char *buf, size_t n);

#endif
