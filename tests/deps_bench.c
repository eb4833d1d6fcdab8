/* Cost of dependency inference alone (src/core/deps.c), per three-tensor
 * task, on the flat workload's access pattern: task i writes slot i mod 16
 * (1 KiB each) of one buffer and reads a 1 KiB view starting inside one of
 * the slots 2..4 before it, plus a second such view (even i) or a weight
 * view of another buffer (odd i). Prints the best of REPS runs of N tasks.
 * Built so it cannot rot, not run by CTest (its numbers depend on the
 * machine):  build/tests/deps_bench [N] [REPS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/deps.h"

#define SLOT 1024u
#define SLOTS 16u
#define A 0x100000ull
#define G 0x900000ull

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 31);
}

static uint64_t view(uint64_t *s, uint32_t i) {
  *s = mix(*s);
  uint32_t slot = (i + SLOTS - 2 - (uint32_t)(*s % 3)) % SLOTS;
  uint64_t at = (uint64_t)slot * SLOT + (*s >> 8) % (SLOT / 64) * 64;
  return at + SLOT > SLOTS * SLOT ? SLOTS * SLOT - SLOT : at;
}

int main(int argc, char **argv) {
  uint32_t n = argc > 1 ? (uint32_t)atoi(argv[1]) : 1000;
  uint32_t reps = argc > 2 ? (uint32_t)atoi(argv[2]) : 200;
  uint64_t(*v)[2] = calloc(n ? n : 1, sizeof *v);
  if (!v || !n || !reps)
    return 2;
  uint64_t s = 1;
  for (uint32_t i = 0; i < n; i++) {
    v[i][0] = A + view(&s, i);
    v[i][1] = i % 2 ? G + (s >> 16) % 64 * 64 : A + view(&s, i);
  }
  hbg__deps d;
  memset(&d, 0, sizeof d);
  uint64_t best = UINT64_MAX, edges = 0;
  for (uint32_t r = 0; r < reps; r++) {
    hbg__deps_reset(&d);
    edges = 0;
    uint64_t t0 = hbg__now_ns();
    for (uint32_t i = 0; i < n; i++) {
      hbg__deps_entry(&d);
      if (hbg__deps_add(&d, A, v[i][0], SLOT, 0) ||
          hbg__deps_add(&d, i % 2 ? G : A, v[i][1], SLOT, 0) ||
          hbg__deps_add(&d, A, A + (uint64_t)(i % SLOTS) * SLOT, SLOT, 1) ||
          hbg__deps_infer(&d, NULL, 0, "deps_bench", i))
        return 1;
      edges += d.n_out;
      hbg__deps_commit(&d, i);
    }
    uint64_t t = hbg__now_ns() - t0;
    if (t < best)
      best = t;
  }
  printf("deps_bench: %u tasks x 3 tensors, best of %u: %.1f ns per task, "
         "%.2f inferred edges per task\n",
         n, reps, (double)best / n, (double)edges / n);
  hbg__deps_free(&d);
  free(v);
  return 0;
}
