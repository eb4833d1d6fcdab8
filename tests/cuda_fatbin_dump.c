/* Writes the device module libhbg embeds (hbg__cu_fatbin) to FILE and
 * lists its entries, one line each: "elf sm_NN" or "ptx compute_NN" (the
 * fatbin's 16-byte header, then entries with a u16 kind (1 PTX, 2 ELF) at
 * 0, u32 header size at 4, u64 payload size at 8, u32 arch at 28).
 * usage: cuda_fatbin_dump FILE */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern const unsigned char hbg__cu_fatbin[];
extern const size_t hbg__cu_fatbin_size;

static uint64_t rd(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n; i-- > 0;)
    v = v << 8 | p[i];
  return v;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cuda_fatbin_dump FILE\n");
    return 2;
  }
  const unsigned char *b = hbg__cu_fatbin;
  const uint64_t n = hbg__cu_fatbin_size;
  FILE *f = fopen(argv[1], "wb");
  if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
    perror(argv[1]);
    return 1;
  }
  if (n < 16 || rd(b, 4) != 0xBA55ED50u) {
    fprintf(stderr, "not a fatbin (%llu bytes)\n", (unsigned long long)n);
    return 1;
  }
  uint64_t hs = rd(b + 6, 2), body = rd(b + 8, 8);
  if (hs + body != n) {
    fprintf(stderr, "fatbin header says %llu + %llu bytes, have %llu\n",
            (unsigned long long)hs, (unsigned long long)body,
            (unsigned long long)n);
    return 1;
  }
  printf("fatbin, %llu bytes\n", (unsigned long long)n);
  for (uint64_t off = hs; off < n;) {
    const unsigned char *e = b + off;
    uint64_t kind = rd(e, 2), ehs = rd(e + 4, 4), size = rd(e + 8, 8);
    uint64_t arch = rd(e + 28, 4);
    if (ehs < 32 || off + ehs + size > n) {
      fprintf(stderr, "bad entry at %llu\n", (unsigned long long)off);
      return 1;
    }
    printf("%s %s_%llu (%llu bytes)\n", kind == 2 ? "elf" : kind == 1 ? "ptx" : "other",
           kind == 1 ? "compute" : "sm", (unsigned long long)arch,
           (unsigned long long)size);
    off += ehs + size;
  }
  return 0;
}
