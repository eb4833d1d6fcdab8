/* Which device a driver of hbg bench uses (tools/bench_place.c): the
 * --device-list parser, the launcher's local rank, the per-device options. */
#include "../tools/bench_place.c"
#include "test.h"

static const char *const *env_tab; /* name, value, name, value, ..., NULL */

static char *fake_getenv(const char *name) {
  for (const char *const *p = env_tab; p && *p; p += 2)
    if (!strcmp(p[0], name))
      return (char *)p[1];
  return NULL;
}

static void t_list(void) {
  uint32_t v[4];
  ASSERT_EQ(bench_place_parse_list("0,2,3", v, 4), 3);
  ASSERT_UEQ(v[0], 0);
  ASSERT_UEQ(v[1], 2);
  ASSERT_UEQ(v[2], 3);
  ASSERT_EQ(bench_place_parse_list("7", v, 4), 1);
  ASSERT_UEQ(v[0], 7);
  ASSERT_EQ(bench_place_parse_list("", v, 4), -1);
  ASSERT_EQ(bench_place_parse_list("1,", v, 4), -1);
  ASSERT_EQ(bench_place_parse_list(",1", v, 4), -1);
  ASSERT_EQ(bench_place_parse_list("1,1", v, 4), -1);     /* repeat */
  ASSERT_EQ(bench_place_parse_list("-1", v, 4), -1);
  ASSERT_EQ(bench_place_parse_list("1x", v, 4), -1);
  ASSERT_EQ(bench_place_parse_list("2147483648", v, 4), -1);
  ASSERT_EQ(bench_place_parse_list("0,1,2,3,4", v, 4), -1); /* too many */
}

static void t_local_rank(void) {
  uint32_t r = 99;
  const char *from = NULL;
  env_tab = NULL;
  ASSERT_EQ(bench_place_local_rank(fake_getenv, &r, &from), 0);
  static const char *const slurm[] = {"SLURM_LOCALID", "3", NULL};
  env_tab = slurm;
  ASSERT_EQ(bench_place_local_rank(fake_getenv, &r, &from), 1);
  ASSERT_UEQ(r, 3);
  ASSERT(!strcmp(from, "SLURM_LOCALID"));
  /* the order: Open MPI, then PMI, then Intel MPI, then Slurm */
  static const char *const all[] = {"SLURM_LOCALID", "3", "MPI_LOCALRANKID",
                                    "2", "PMI_LOCAL_RANK", "1",
                                    "OMPI_COMM_WORLD_LOCAL_RANK", "0", NULL};
  env_tab = all;
  ASSERT_EQ(bench_place_local_rank(fake_getenv, &r, &from), 1);
  ASSERT_UEQ(r, 0);
  ASSERT(!strcmp(from, "OMPI_COMM_WORLD_LOCAL_RANK"));
  static const char *const pmi[] = {"MPI_LOCALRANKID", "2", "PMI_LOCAL_RANK",
                                    "1", NULL};
  env_tab = pmi;
  ASSERT_EQ(bench_place_local_rank(fake_getenv, &r, &from), 1);
  ASSERT_UEQ(r, 1);
  static const char *const bad[] = {"PMI_LOCAL_RANK", "one", "SLURM_LOCALID",
                                    "0", NULL};
  env_tab = bad;
  ASSERT_EQ(bench_place_local_rank(fake_getenv, &r, &from), -1);
  ASSERT(!strcmp(from, "PMI_LOCAL_RANK"));
}

static void t_options(void) {
  char b[64];
  ASSERT_EQ(bench_place_options("cuda", NULL, 2, b, sizeof b), 0);
  ASSERT(!strcmp(b, "device=2"));
  ASSERT_EQ(bench_place_options("cuda", "exec=device", 3, b, sizeof b), 0);
  ASSERT(!strcmp(b, "exec=device,device=3"));
  /* device= given is replaced, the rest kept in order */
  ASSERT_EQ(bench_place_options("acl", "device=1,lib=x,,device=5", 0, b,
                                sizeof b), 0);
  ASSERT(!strcmp(b, "lib=x,device=0"));
  /* the sim has no ordinals: nothing appended, device= dropped */
  ASSERT_EQ(bench_place_options("sim", "spin=0,device=1", 4, b, sizeof b), 0);
  ASSERT(!strcmp(b, "spin=0"));
  ASSERT_EQ(bench_place_options("sim", NULL, 4, b, sizeof b), 0);
  ASSERT(!strcmp(b, ""));
  /* does not fit */
  ASSERT_EQ(bench_place_options("cuda", "exec=device", 3, b, 12), -1);
  ASSERT_EQ(bench_place_options("sim", "profile=ascend-a2", 0, b, 8), -1);
}

int main(void) {
  t_list();
  t_local_rank();
  t_options();
  return 0;
}
