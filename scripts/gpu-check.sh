#!/usr/bin/env bash
# CUDA checks for a machine with a GPU, in one run of under 4 minutes:
#   1. configure + build (Release, -j16) with the cuda backend required
#   2. hbg devices, then the cuda tests (ctest -R cuda)
#   3. per-copy microbenchmark: pageable vs pinned sync H2D at 2.5 KB,
#      130 KB and 5 MB (tests/cuda_copybench.c, built here against libhbg)
#   4. hbg selfcheck and hbg bench --device cuda on qwen3-14b and dsv4 with
#      all four policies (skipped with a message while those commands are
#      not built)
#   5. a summary table, last
# Logs: ${OUT:-/tmp}/gpu-check-*.log.
#
# usage: scripts/gpu-check.sh [--mock]
#   --mock  no GPU needed: steps 1-3 against the stand-in CUDA runtime in
#           src/device/cuda/mock, preloaded in front of libcudart (checks
#           the backend's logic, not CUDA's behaviour or speed).
# env: BUILD (build folder; default build, build-mock with --mock), JOBS (16),
#      CC (compiler for the whole build).
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
MOCK=0
if [ "${1:-}" = "--mock" ]; then
  MOCK=1
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--mock]" >&2
  exit 2
fi
OUTDIR=${OUT:-/tmp}
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
if [ "$MOCK" = 1 ]; then BUILD=${BUILD:-build-mock}; else BUILD=${BUILD:-build}; fi
JOBS=${JOBS:-16}
START=$(date +%s)
BUDGET=225 # seconds for the whole run, leaving margin under 4 minutes
HBG=$BUILD/bin/hbg
ROWS=()
FAIL=0

log() { echo "$OUTDIR/gpu-check-$1.log"; }
elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET - $(elapsed))); }
row() { ROWS+=("$(printf '%-26s %-8s %s' "$1" "$2" "$3")"); }
step() { printf '\n== %s (t=%ss)\n' "$*" "$(elapsed)"; }
# run_to LOGNAME SECONDS CMD...: run with a time limit, tee to its log.
run_to() {
  local name=$1 secs=$2
  shift 2
  if [ "$secs" -lt 5 ]; then
    echo "out of time budget: skipped $*" | tee "$(log "$name")"
    return 124
  fi
  timeout --kill-after=5 "$secs" "$@" 2>&1 | tee "$(log "$name")"
  return "${PIPESTATUS[0]}"
}
finish() {
  printf '\n== summary (%ss, logs in %s)\n' "$(elapsed)" "$OUTDIR"
  printf '%-26s %-8s %s\n' "check" "result" "detail"
  for r in ${ROWS[@]+"${ROWS[@]}"}; do echo "$r"; done
  exit "$FAIL"
}

PRELOAD=
if [ "$MOCK" = 1 ]; then
  step "mock CUDA runtime"
  PRELOAD=$ROOT/$BUILD/libcudart_mock.so
  mkdir -p "$BUILD"
  if ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -g -shared -fPIC \
      -I/usr/local/cuda/include src/device/cuda/mock/cudart_mock.c \
      -o "$PRELOAD" -lpthread >"$(log mock)" 2>&1; then
    row "mock cudart" ok "$PRELOAD"
  else
    cat "$(log mock)"
    row "mock cudart" FAIL "$(log mock)"
    FAIL=1
    finish
  fi
fi

# build TYPE LOGNAME
build() {
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE="$1" -DHBG_WITH_CUDA=ON \
    >"$(log "$2")" 2>&1 && cmake --build "$BUILD" -j"$JOBS" >>"$(log "$2")" 2>&1
}
step "configure + build ($BUILD, Release, -j$JOBS)"
if build Release build; then
  row "build Release" ok "$(grep -m1 'cuda backend' "$(log build)" | sed 's/^-- //')"
else
  grep -E 'error|Error' "$(log build)" | head -20
  row "build Release" FAIL "see $(log build)"
  FAIL=1
  # Keep the GPU session useful: the checks below on the default build type.
  step "configure + build ($BUILD, RelWithDebInfo, -j$JOBS)"
  if build RelWithDebInfo build-fallback; then
    row "build RelWithDebInfo" ok "fallback after the Release failure"
  else
    tail -40 "$(log build-fallback)"
    row "build RelWithDebInfo" FAIL "see $(log build-fallback)"
    finish
  fi
fi

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv \
    >"$(log nvidia-smi)" 2>&1 && cat "$(log nvidia-smi)"
fi

step "hbg devices"
if LD_PRELOAD=$PRELOAD "$HBG" devices --json >"$(log devices)" 2>&1; then
  cat "$(log devices)"
  LD_PRELOAD=$PRELOAD "$HBG" devices 2>&1 | grep -A1 '^cuda' || true
  avail=$(tr -d '\n' <"$(log devices)" | grep -o '"name": "cuda"[^}]*' |
    grep -o '"availability": "[^"]*"' | cut -d'"' -f4)
  row "hbg devices: cuda" ok "${avail:-not listed}"
else
  cat "$(log devices)"
  row "hbg devices" skip "command not built or failed"
fi

step "ctest -R cuda"
(cd "$BUILD" && LD_PRELOAD=$PRELOAD run_to ctest "$(left)" \
  ctest -R cuda --output-on-failure --timeout 120)
rc=$?
line=$(grep -E 'tests passed|tests failed' "$(log ctest)" | tail -1)
skipped=$(grep -c 'Skipped' "$(log ctest)")
if [ $rc -eq 0 ] && [ "$skipped" -eq 0 ]; then
  row "ctest -R cuda" ok "$line"
elif [ $rc -eq 0 ]; then
  row "ctest -R cuda" SKIP "$line; $skipped skipped (no GPU?)"
  FAIL=1
else
  row "ctest -R cuda" FAIL "${line:-rc $rc}, see $(log ctest)"
  FAIL=1
fi

step "copy microbenchmark (sync H2D, pageable vs pinned)"
BENCH_BIN=$BUILD/cuda_copybench
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Iinclude tests/cuda_copybench.c \
    -L"$BUILD" -lhbg -Wl,-rpath,"$ROOT/$BUILD" -o "$BENCH_BIN" \
    >"$(log copybench-build)" 2>&1; then
  ITERS=200
  [ "$MOCK" = 1 ] && ITERS=20
  LD_PRELOAD=$PRELOAD run_to copybench "$(($(left) < 60 ? $(left) : 60))" \
    "$BENCH_BIN" cuda "$ITERS" | grep -v '^copybench,'
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    while IFS=, read -r _ bytes mode med _ _ gbs; do
      row "copy $bytes B $mode" ok "median ${med} us, ${gbs} GB/s"
    done < <(grep '^copybench,' "$(log copybench)")
  else
    row "copybench" FAIL "rc $rc, see $(log copybench)"
    FAIL=1
  fi
else
  cat "$(log copybench-build)"
  row "copybench" FAIL "build failed, see $(log copybench-build)"
  FAIL=1
fi

if [ "$MOCK" = 1 ]; then
  row "selfcheck / bench" skip "not meaningful against the mock"
  finish
fi

step "hbg selfcheck --device cuda"
if "$HBG" selfcheck --help >/dev/null 2>&1; then
  run_to selfcheck "$(($(left) < 40 ? $(left) : 40))" \
    "$HBG" selfcheck --device cuda --iters 500
  rc=$?
  if [ $rc -eq 0 ]; then
    row "hbg selfcheck" ok "see $(log selfcheck)"
  else
    row "hbg selfcheck" FAIL "rc $rc, see $(log selfcheck)"
    FAIL=1
  fi
else
  echo "hbg selfcheck is not built yet: skipped"
  row "hbg selfcheck" skip "command not built"
fi

step "hbg bench --device cuda"
if "$HBG" bench --help >"$(log bench-help)" 2>&1; then
  for wl in qwen3-14b dsv4; do
    secs=$(left)
    [ "$wl" = qwen3-14b ] && secs=$((secs / 2))
    run_to "bench-$wl" "$secs" "$HBG" bench --device cuda --workload "$wl" \
      --policy deferred,pinned-eager,coalesced,pinned-bulk --rounds 40 \
      --json "${OUT:-/tmp}/gpu-check-bench-$wl.json"
    rc=$?
    if [ $rc -eq 0 ]; then
      row "bench $wl" ok "see $(log "bench-$wl")"
      grep -E '^ *(deferred|pinned-eager|coalesced|pinned-bulk)\b' "$(log "bench-$wl")" |
        head -4 | while read -r l; do echo "    $l"; done
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      row "bench $wl" TIMEOUT "after ${secs}s, see $(log "bench-$wl")"
      FAIL=1
    else
      row "bench $wl" FAIL "rc $rc, see $(log "bench-$wl")"
      FAIL=1
    fi
  done
else
  echo "hbg bench --help failed: bench is not built yet, skipped"
  row "hbg bench" skip "command not built ($(head -1 "$(log bench-help)"))"
fi

finish
