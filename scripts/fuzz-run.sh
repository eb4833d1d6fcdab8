#!/usr/bin/env bash
# Generate the seed corpus into BUILD_DIR and fuzz the image validators,
# then the device code image reader (src/device/devimage.c).
#   scripts/fuzz-run.sh BUILD_DIR SECONDS
# BUILD_DIR must be configured with clang and -DHBG_FUZZ=ON (add
# -DHBG_SANITIZE=ON for ASan+UBSan) and built. Exits non-zero on a crash, a
# leak, a sanitizer report or a broken property; the reproducer is left in
# BUILD_DIR/fuzz/artifacts/.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build=$1
secs=$2
fuzz=$build/tests/fuzz/fuzz_validate
gen=$build/tests/fuzz/fuzz_corpus_gen
if [ ! -x "$fuzz" ] || [ ! -x "$gen" ]; then
  echo "fuzz-run: $fuzz or $gen missing; configure with" >&2
  echo "  cmake -S . -B $build -DCMAKE_C_COMPILER=clang -DHBG_FUZZ=ON -DHBG_SANITIZE=ON" >&2
  echo "and build it first" >&2
  exit 2
fi
seeds=$build/fuzz/seeds
corpus=$build/fuzz/corpus
artifacts=$build/fuzz/artifacts
mkdir -p "$seeds" "$corpus" "$artifacts"
"$gen" "$seeds"
echo "fuzz-run: $(ls "$seeds" | wc -l) seeds in $seeds, fuzzing for ${secs}s"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# New inputs go to the first directory (corpus); seeds are read only.
"$fuzz" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds"

# The device code images hbg_kernel_register reads, a quarter as long:
# seeds are a PTX text and a fatbin header around it.
dfuzz=$build/tests/fuzz/fuzz_devimage
dseeds=$build/fuzz/devimage-seeds
dcorpus=$build/fuzz/devimage-corpus
mkdir -p "$dseeds" "$dcorpus"
printf '.version 9.0\n.target sm_90\n.address_size 64\n.visible .func (.param .b32 r) uk_axpby(.param .b64 a)\n{\n\tret;\n}\n' \
  > "$dseeds/ptx"
{ printf '\x50\xed\x55\xba\x01\x00\x10\x00'; printf '\xc0\x00\x00\x00\x00\x00\x00\x00'
  printf '\x01\x00\x01\x01\x40\x00\x00\x00\x80\x00\x00\x00\x00\x00\x00\x00'
  head -c 48 /dev/zero; cat "$dseeds/ptx"; } > "$dseeds/fatbin"
dsecs=$(( secs / 4 > 10 ? secs / 4 : 10 ))
echo "fuzz-run: device images for ${dsecs}s"
exec "$dfuzz" -max_total_time="$dsecs" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$dcorpus" "$dseeds"
