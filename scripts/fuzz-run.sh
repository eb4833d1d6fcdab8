#!/usr/bin/env bash
# Generate the seed corpus into BUILD_DIR and fuzz the image validators.
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
exec "$fuzz" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds"
