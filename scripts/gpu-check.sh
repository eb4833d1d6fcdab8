#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU: build, test and measure
# the cuda backend in about 6.5 minutes (GPU_CHECK_BUDGET, 390 s), with no
# package registry reachable. A device machine lent for 15 minutes spends
# one or two of them starting: this leaves room for the transfers and for
# one rerun of a part.
#
# Recipe (the GPU machine has no apt access; carry the build's packages):
#   here (a Debian 12 machine with apt), once:
#     mkdir -p .debs && (cd .debs && apt-get download \
#       libxxhash-dev libxxhash0 libcjson-dev libcjson1 \
#       pkgconf pkgconf-bin libpkgconf3)
#     (.debs/ is git-ignored: carry it with the tree, e.g. the device run
#      tool's carry=[".debs"])
#   there:
#     scripts/gpu-check.sh [--out DIR]
#   If pkg-config cannot find libxxhash and libcjson on the machine, the
#   script unpacks every .debs/*.deb with `dpkg -x` into a private prefix
#   ($BUILD/deps) and points the build at it only: PKG_CONFIG_LIBDIR (the
#   prefix's pkgconfig folders, nothing else), PKG_CONFIG_SYSROOT_DIR (so the
#   packages' /usr paths resolve inside the prefix), CMAKE_PREFIX_PATH and
#   LD_LIBRARY_PATH. --carried forces that path even where the system has
#   the packages (how it is checked on a machine without a GPU:
#   `scripts/gpu-check.sh --mock --carried --debs DIR` in a fresh BUILD).
#   Needs there: cmake with make or ninja, a C compiler, pkg-config (else
#   the carried pkgconf above, which needs glibc 2.34 or later), dpkg (else
#   ar and tar), the CUDA toolkit (headers, nvcc and its host C++ compiler
#   for the embedded device module and the blocker, compute-sanitizer;
#   /usr/local/cuda), the NVIDIA driver (libcuda.so.1) and coreutils
#   (timeout), tar and gzip. Past those the build needs xxHash and cJSON
#   (the .debs) and nothing else; no Python either (the executor's account,
#   step 5b, is a C program of the build: tests/gpu_check_account).
#
# Steps, each with a time limit inside the budget:
#   1. configure + build (Release) with the cuda backend required
#   2. nvidia-smi and `hbg devices`
#   2a. the smoke bind: one layer, one bind, exec=device with deadline_ms=
#      5000, under `timeout 20`: if it fails or hangs, the run stops there
#      (summary, JSON and archive written), so a hang costs 20 s, not the
#      budget
#   3. the CUDA tests (ctest -R 'cuda|kern_gpu' -E _mock): every one must
#      run, none may skip. The _mock entries (the stand-in driver on the
#      CPU, its other grids and warps of 32) are CI's and are left out on
#      the GPU; --mock runs the plain tests' _mock twins (the stand-in's
#      environment) and leaves out the grid and warp32 variants and the
#      timing-bound test_cuda_deadline_mock (their own ctest entries);
#      hbg inside an engine (tests/test_gpu_interop): binds launched on a
#      stream the check made, between its cuMemsetD32Async and its
#      readback, on its own cuMemAlloc memory imported, its context
#      borrowed (ctx=current); then one bind captured with the driver API
#      and replayed 100 times with the input rewritten, each equal to eager;
#      the device module on the GPU (tests/test_cuda_module: the embedded
#      sm_90 module loads at open, its image-check kernel gives the expected
#      verdicts, a captured CUDA graph of it replays);
#      hbg selfcheck (pinned vs pageable synchronous copies at 2.5 KB,
#      130 KB and 5 MB: a Submission, a baseline Submission, a whole bind)
#      the device executor (tests/test_cuda_exec: exec=device runs a
#      hand-built window, qwen3-14b and dsv4 under every policy bit-exact
#      against the host reference, located errors; a wrong output names
#      the node that wrote it)
#      user kernels (tests/test_cuda_user and examples/user_kernel: the
#      example's nvcc -rdc code linked with the executor by the driver's
#      linker, run bit-exact with the host and with the sim, link and load
#      time reported)
#   4. a first tiny bind with exec=verify: one layer, one bind (hbg bench
#      --layers 1)
#   5. hbg bench --device cuda on qwen3-14b and dsv4, every policy, two
#      runs: exec=verify (host-side launch verifier) and exec=device (the
#      bind runs on the GPU; must verify against the host reference), the
#      latter beside the peer arms eager and cuda-graph (--arm; each row:
#      control plane and device time per step, cuda-graph's capture and
#      instantiation apart; JSON and CSV kept)
#   5b. the device executor's account (issue 32), from step 5's JSON by
#      tests/gpu_check_account: per workload and policy, measured by the
#      device clock: device time, set-up (device_setup_us), the stop tail
#      (device_tail_us: the window's completion to the executor's end),
#      kernel bodies (device_body_us, summed over the workers) and items
#      per bind; derived: run = device - set-up, body per item = bodies /
#      items, per hop = (run - tail) / the critical path (565 items per
#      qwen3-14b bind, 1,064 per dsv4 bind at their default layers), and
#      the hop without the mean body; Definitions validated and set-up node
#      records per bind, the cuda-graph peer beside them, and the device
#      times of the run before (the committed docs/results/h200/
#      gpu-check.json) beside the new ones; the issue's targets (coalesced
#      qwen3-14b <= 2 ms, dsv4 <= 4 ms, every policy within 1.2x of
#      coalesced) reported as met or missed; plus the coalesced binds once
#      more with a CTA per worker (worker=cta) beside the default warps
#   5c. the blocker (tests/gpu_blocker.cu, built here with nvcc against
#      the build's libhbg): a kernel of one CTA per SM, each with all the
#      shared memory a CTA may take, holds every SM but one on a stream of
#      its own for 6 s, in hbg's primary context; a bind run then through
#      the public C API (coalesced, qwen3-14b, 2 layers, deadline_ms=3000)
#      must return within 6 + 15 s, after the blocker (the cooperative
#      grid waits for residency) or with a clear error (HBG_E_TIMEOUT
#      naming where it waited), and the next bind must run and verify; the
#      row gives the time waited and the result. A hang is an alarm in the
#      program, and `timeout` around it
#   5d. a real model at its real dims: hbg bench --workload qwen3-0.6b
#      (coalesced and deferred, exec=device, bf16 weights, verified bit for
#      bit), then qwen3-14b-real's first 8 layers where the memory and the
#      budget allow; the row: device time per step beside the weight bytes
#      over the memory's nominal bandwidth
#   6. compute-sanitizer, last, each run under its own time limit, in this
#      order: memcheck, racecheck and synccheck on a bench of 3 binds per
#      policy (deferred and coalesced, qwen3-14b, 2 layers, --warmup 1
#      --rounds 2: binds alternate between the runtime's two pipeline
#      slots, so the third reuses the first's slot and takes the verdict
#      cache's hit path) beside both peer arms, so every device kernel runs
#      under each tool; then one failing bind (test_exec_shapes --one cuda
#      coalesced explicit fail_entry: an item fails, the wait names its
#      entry, the next bind runs) under racecheck and synccheck; then a CTA
#      per worker (worker=cta, dsv4 coalesced, 3 binds) under racecheck and
#      synccheck; then the user-kernel example under each tool. The device
#      deadline is raised to 120 s under the tools (they slow the kernels)
#   7. one JSON file with everything (gpu-check.json), a summary table
#      (gpu-check-summary.txt) and every step's log, JSON and CSV in one
#      archive (gpu-check-logs.tar.gz), in the output folder
# When time runs short: every step's limit is cut to what is left of the
# budget, and a step that would start with less than its minimum left
# (5 s, a sanitizer run 20 s) does not run: its row says "skip (out of
# time budget)". The sanitizers, last, are what a slow run loses first,
# from the end of the order above (user kernels, worker=cta, the failing
# bind, then the benches); a check cut off by its limit is a TIMEOUT row,
# which fails the run.
#
# usage: scripts/gpu-check.sh [--mock] [--carried] [--out DIR] [--debs DIR]
#                             [--prebuilt DIR]
#   --mock     no GPU: the same flow against the stand-in driver library
#              (tests/cuda_standin, loaded through HBG_CUDA_LIB); checks the
#              backend's logic, not CUDA's behaviour or speed; the blocker
#              is built but not run (test_cuda_deadline_mock models it
#              with hbgmock_occupy), the sanitizers are n/a
#   --carried  build against the unpacked .debs even if the system has them
#   --out DIR  output folder (default $OUT, else /tmp/gpu-check)
#   --debs DIR the carried .deb files (default .debs)
#   --prebuilt DIR  skip steps 0-1 and use that (configured, built) build
#              folder; CTest's gpu_check_mock runs --mock this way
# env: BUILD (default build-gpu, build-gpu-mock with --mock), JOBS (nproc),
#      CC, CUDA_HOME (default /usr/local/cuda), GPU_CHECK_BUDGET (seconds,
#      390), GPU_CHECK_BUILD_S (the build's limit, 180 s).
# With exec=verify the bench's host-reference check fails on cuda (it
# verifies the images only): such runs are reported as "ran, outputs not
# computed", not as failures. exec=device runs must verify.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
MOCK=0
CARRIED=0
PREBUILT=
OUTDIR=${OUT:-/tmp/gpu-check}
DEBS=$ROOT/.debs
while [ $# -gt 0 ]; do
  case $1 in
  --mock) MOCK=1 ;;
  --carried) CARRIED=1 ;;
  --out) OUTDIR=$2; shift ;;
  --debs) DEBS=$2; shift ;;
  --prebuilt) PREBUILT=$2; shift ;;
  *) echo "usage: $0 [--mock] [--carried] [--out DIR] [--debs DIR] [--prebuilt DIR]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
if [ -n "$PREBUILT" ]; then BUILD=$PREBUILT
elif [ "$MOCK" = 1 ]; then BUILD=${BUILD:-build-gpu-mock}; else BUILD=${BUILD:-build-gpu}; fi
mkdir -p "$BUILD" && BUILD=$(cd "$BUILD" && pwd)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
if [ -z "${CUDA_HOME:-}" ]; then
  CUDA_HOME=/usr/local/cuda
  if [ ! -x $CUDA_HOME/bin/nvcc ] && command -v nvcc >/dev/null 2>&1; then
    CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  fi
fi
[ -d "$CUDA_HOME/bin" ] && PATH=$PATH:$CUDA_HOME/bin
[ -d "$CUDA_HOME/compute-sanitizer" ] && PATH=$PATH:$CUDA_HOME/compute-sanitizer
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-390} # seconds for the whole run
HBG=$BUILD/bin/hbg
ROWS=()   # "check|result|detail"
JROWS=()  # JSON objects, one per check
FAIL=0

log() { echo "$OUTDIR/gpu-check-$1.log"; }
elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET - $(elapsed))); }
cap() { local l; l=$(left); echo $((l < $1 ? l : $1)); }
jstr() { # a JSON string literal
  printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' |
    tr '\t\n\r' '   ' | tr -d '\000-\037')"
}
row() { # row CHECK RESULT DETAIL [SECONDS]
  ROWS+=("$1|$2|$3")
  JROWS+=("{\"check\": $(jstr "$1"), \"result\": $(jstr "$2"), \"detail\": $(jstr "$3"), \"seconds\": ${4:-0}}")
  # a missed performance target is a measurement, not a broken check
  case $2 in ok | skip | n/a | met | missed) ;; *) FAIL=1 ;; esac
}
step() { printf '\n== %s (t=%ss)\n' "$*" "$(elapsed)"; }
# run_to LOGNAME SECONDS CMD...: run with a time limit, output to its log.
run_to() {
  local name=$1 secs=$2
  shift 2
  if [ "$secs" -lt 5 ]; then
    echo "out of time budget: skipped $*" >"$(log "$name")"
    return 124
  fi
  timeout --kill-after=5 "$secs" "$@" >"$(log "$name")" 2>&1
}

finish() {
  local sum=$OUTDIR/gpu-check-summary.txt
  {
    printf 'gpu-check (%s), %ss, logs in %s\n' \
      "$([ "$MOCK" = 1 ] && echo "mock: stand-in driver" || echo "GPU")" "$(elapsed)" "$OUTDIR"
    printf '%-30s %-9s %s\n' check result detail
    for r in ${ROWS[@]+"${ROWS[@]}"}; do
      IFS='|' read -r a b c <<<"$r"
      printf '%-30s %-9s %s\n' "$a" "$b" "$c"
    done
  } >"$sum"
  echo
  cat "$sum"
  local j=$OUTDIR/gpu-check.json
  {
    printf '{\n  "mode": %s,\n  "passed": %s,\n  "seconds": %s,\n' \
      "$(jstr "$([ "$MOCK" = 1 ] && echo mock || echo gpu)")" \
      "$([ "$FAIL" = 0 ] && echo true || echo false)" "$(elapsed)"
    printf '  "git": %s,\n  "host": %s,\n  "deps": %s,\n' \
      "$(jstr "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")" \
      "$(jstr "$(uname -srm) $(nproc) cores")" "$(jstr "${DEPS_FROM:-?}")"
    printf '  "gpu": %s,\n  "cuda_device": %s,\n' \
      "$(jstr "$(cat "$(log nvidia-smi)" 2>/dev/null | tail -n +2 | head -4)")" \
      "$(jstr "$(grep -A1 '^cuda ' "$(log devices)" 2>/dev/null | tail -1 | sed 's/^ *//')")"
    printf '  "checks": [\n'
    local i n=${#JROWS[@]}
    for ((i = 0; i < n; i++)); do
      printf '    %s%s\n' "${JROWS[$i]}" "$([ $((i + 1)) -lt "$n" ] && echo ,)"
    done
    printf '  ],\n  "bench": {'
    local first=1 f
    for f in "$OUTDIR"/gpu-check-bench-*.json; do
      [ -s "$f" ] || continue
      [ $first = 1 ] || printf ','
      first=0
      printf '\n    %s: ' "$(jstr "$(basename "$f" .json | sed 's/^gpu-check-bench-//')")"
      cat "$f"
    done
    # the executor's account (step 5b), measured and derived figures
    printf '\n  },\n  "executor": '
    if [ -s "$OUTDIR/gpu-check-executor.json" ]; then
      cat "$OUTDIR/gpu-check-executor.json"
    else
      printf 'null\n'
    fi
    printf '}\n'
  } >"$j"
  echo "JSON: $j"
  # Everything else in one archive (a device run hands back few files).
  (cd "$OUTDIR" && tar czf gpu-check-logs.tar.gz --exclude gpu-check-logs.tar.gz \
    $(ls | grep -v -e '^gpu-check.json$' -e '^gpu-check-summary.txt$' -e '\.tar\.gz$') \
    2>/dev/null && ls | grep -v -e '^gpu-check.json$' -e '^gpu-check-summary.txt$' \
    -e '^gpu-check-logs.tar.gz$' | xargs -r rm -f)
  exit "$FAIL"
}

# ---- 0. the build's packages: the system's, else the carried .debs ----
step "dependencies"
DEPS_FROM=system
if [ -n "$PREBUILT" ]; then
  DEPS_FROM="prebuilt $BUILD"
elif [ "$CARRIED" = 1 ] || ! command -v pkg-config >/dev/null 2>&1 ||
  ! pkg-config --exists libxxhash libcjson 2>/dev/null; then
  PREFIX=$BUILD/deps
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  n=0
  for deb in "$DEBS"/*.deb; do
    [ -f "$deb" ] || continue
    if command -v dpkg >/dev/null 2>&1; then
      dpkg -x "$deb" "$PREFIX" && n=$((n + 1))
    else # no dpkg: a .deb is an ar archive holding data.tar.*
      (cd "$PREFIX" && ar p "$deb" "$(ar t "$deb" | grep '^data\.tar')" |
        tar xf - --auto-compress 2>/dev/null ||
        ar p "$deb" "$(ar t "$deb" | grep '^data\.tar')" | tar xJf -) &&
        n=$((n + 1))
    fi
  done
  if [ "$n" -lt 4 ]; then
    row "deps" FAIL "pkg-config has no libxxhash/libcjson and $DEBS holds $n .deb files (need libxxhash-dev libxxhash0 libcjson-dev libcjson1, and pkgconf pkgconf-bin libpkgconf3 where the machine has no pkg-config; see the header)"
    finish
  fi
  pcdirs=$(find "$PREFIX" -type d -name pkgconfig | tr '\n' ':')
  libdirs=$(find "$PREFIX" -name 'lib*.so*' -printf '%h\n' | sort -u | tr '\n' ':')
  export PKG_CONFIG_LIBDIR=${pcdirs%:} PKG_CONFIG_PATH=
  export PKG_CONFIG_SYSROOT_DIR=$PREFIX
  export CMAKE_PREFIX_PATH=$PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=${libdirs%:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # pkgconf drops -I<sysroot>/usr/include as a system folder: keep it, and
  # give the compiler and linker the prefix's folders as well
  export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
  export CPATH=$PREFIX/usr/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=${libdirs%:}${LIBRARY_PATH:+:$LIBRARY_PATH}
  DEPS_FROM="carried: $n .deb files unpacked into $PREFIX"
  # no pkg-config on the machine: the carried pkgconf (pkgconf, pkgconf-bin,
  # libpkgconf3), its library found through LD_LIBRARY_PATH
  if ! command -v pkg-config >/dev/null 2>&1 && [ -x "$PREFIX/usr/bin/pkgconf" ]; then
    export PATH=$PREFIX/usr/bin:$PATH
    DEPS_FROM="$DEPS_FROM; pkg-config: the carried pkgconf"
  fi
  if ! pkg-config --exists libxxhash libcjson; then
    row "deps" FAIL "unpacked $n .debs but pkg-config cannot see libxxhash/libcjson in $PREFIX"
    finish
  fi
fi
row "deps" ok "$DEPS_FROM"

# ---- 1. build ----
step "configure + build ($BUILD, Release, -j$JOBS)"
t0=$(date +%s)
if [ -n "$PREBUILT" ]; then
  if [ -x "$HBG" ]; then
    row "build" skip "prebuilt: $BUILD"
  else
    row "build" FAIL "--prebuilt $BUILD: no $HBG"
    finish
  fi
elif GEN=() && { command -v make >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1 || GEN=(-G Ninja); } &&
  cmake -S . -B "$BUILD" ${GEN[@]+"${GEN[@]}"} -DCMAKE_BUILD_TYPE=Release -DHBG_WITH_CUDA=ON \
  >"$(log build)" 2>&1 &&
  timeout --kill-after=5 "$(cap "${GPU_CHECK_BUILD_S:-180}")" cmake --build "$BUILD" -j"$JOBS" >>"$(log build)" 2>&1; then
  detail=$(grep -m1 'cuda backend' "$(log build)" | sed 's/^-- //')
  if [ "$DEPS_FROM" != system ]; then
    # the libraries CMake linked come from the prefix, not the system
    libs=$(grep -E '^pkgcfg_lib_HBG_(XXHASH|CJSON)_' "$BUILD/CMakeCache.txt" | cut -d= -f2)
    loaded=$(ldd "$HBG" | grep -E 'libxxhash|libcjson' | awk '{print $3}')
    if [ "$(echo "$libs" "$loaded" | tr ' ' '\n' | grep -c "^$BUILD/deps/")" -ne 4 ]; then
      row "build" FAIL "not built/run against the carried prefix: linked $libs; loaded $loaded"
      finish
    fi
    detail="$detail; linked and loaded from $BUILD/deps: $(echo $loaded | tr '\n' ' ')"
  fi
  row "build" ok "$detail" $(($(date +%s) - t0))
else
  grep -E 'error|Error' "$(log build)" | head -20
  row "build" FAIL "see $(log build)" $(($(date +%s) - t0))
  finish
fi

if [ "$MOCK" = 1 ]; then
  export HBG_CUDA_LIB=$BUILD/tests/libhbg_cuda_mock.so
  export HBG_CUDA_NOSYM_LIB=$BUILD/tests/libhbg_cuda_mock_nosym.so
  [ -f "$HBG_CUDA_LIB" ] || { row "stand-in" FAIL "$HBG_CUDA_LIB not built"; finish; }
fi

# ---- 2. the machine ----
step "nvidia-smi, hbg devices"
{
  for t in cc gcc make ninja cmake pkg-config dpkg nvcc compute-sanitizer; do
    printf '%-18s %s\n' "$t" "$(command -v "$t" || echo -)"
  done
  nvcc --version 2>&1 | tail -2
  cmake --version 2>&1 | head -1
  ldconfig -p 2>/dev/null | grep 'libcuda.so.1'
} >"$(log tools)" 2>&1
# The driver library: the loader's, else one found where drivers live.
if [ "$MOCK" = 0 ] && [ -z "${HBG_CUDA_LIB:-}" ] &&
  ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 /usr/local/cuda/compat \
    -name 'libcuda.so.1' 2>/dev/null | head -1)
  # hbg loads it by path; the blocker's CUDA runtime and compute-sanitizer
  # look for it on the loader's path
  [ -n "$lib" ] && export HBG_CUDA_LIB=$lib &&
    export LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} &&
    echo "HBG_CUDA_LIB=$lib" >>"$(log tools)"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max \
    --format=csv >"$(log nvidia-smi)" 2>&1
  row "nvidia-smi" ok "$(tail -n +2 "$(log nvidia-smi)" | head -1)"
else
  echo "no nvidia-smi" >"$(log nvidia-smi)"
  row "nvidia-smi" "$([ "$MOCK" = 1 ] && echo n/a || echo FAIL)" "not found"
fi
"$HBG" devices >"$(log devices)" 2>&1
if grep -q '^cuda  *available' "$(log devices)"; then
  row "hbg devices: cuda" ok "$(grep -A1 '^cuda ' "$(log devices)" | tail -1 | sed 's/^ *//')"
else
  row "hbg devices: cuda" FAIL "$(grep -A1 '^cuda ' "$(log devices)" | tail -1 | sed 's/^ *//')"
fi

# bench_row NAME LOG JSON RC SECONDS [strict]: strict (exec=device) runs
# must verify against the host reference.
bench_row() {
  local name=$1 lg=$2 js=$3 rc=$4 secs=$5 strict=${6:-}
  if [ "$rc" -eq 0 ]; then
    row "$name" ok "verified against the host reference" "$secs"
  elif [ -n "$strict" ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ]; then
    row "$name" FAIL "rc $rc: $(grep '^hbg' "$lg" | head -1)" "$secs"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    row "$name" TIMEOUT "see $lg" "$secs"
  elif [ "$rc" -eq 1 ] && [ -s "$js" ] &&
    ! grep -v -e 'differs from the host reference' -e 'verified bind(s) differ' \
      -e '^hbg bench: workload ' "$lg" |
      grep -q '^hbg bench:'; then
    row "$name" ok "$(grep -c '"verified"' "$js") policies ran; outputs not computed (exec=verify: cuda verifies, does not execute)" "$secs"
  else
    row "$name" FAIL "rc $rc: $(grep '^hbg' "$lg" | head -1)" "$secs"
  fi
}

# ---- 2a. the smoke bind: a hang costs 20 s, not the budget ----
step "smoke bind (exec=device, 20 s)"
t0=$(date +%s)
run_to smoke "$(cap 20)" "$HBG" bench --device cuda \
  --device-options exec=device,deadline_ms=5000 --workload qwen3-14b \
  --layers 1 --rounds 1 --warmup 0 --policy coalesced --verify-every 1 \
  --json "$OUTDIR/gpu-check-smoke.json"
rc=$?
bench_row "smoke bind (exec=device)" "$(log smoke)" "$OUTDIR/gpu-check-smoke.json" $rc $(($(date +%s) - t0)) strict
if [ $rc -ne 0 ]; then
  row "run stopped" FAIL "the smoke bind did not pass (rc $rc$([ $rc -eq 124 ] || [ $rc -eq 137 ] && echo ': hung, killed after 20 s')): nothing after it ran"
  finish
fi

# ---- 3. the CUDA tests: all run, none skip ----
step "ctest -R cuda"
t0=$(date +%s)
# kern_gpu: every built-in kernel on the GPU against the CPU, bit for bit
# (it needs a GPU: left out of the stand-in's flow). The _mock entries run
# the stand-in (CI runs them all); on the GPU they are left out. The
# stand-in's flow runs the plain tests' _mock twins (each with the
# stand-in's environment), not the other grids and warp32 variants, nor
# test_cuda_deadline_mock: its 200 ms deadlines are missed when it shares
# two loaded cores with the rest of a ctest run (as gpu_check_mock does),
# and it has its own ctest entry.
if [ "$MOCK" = 1 ]; then
  SEL=(-R '^(test_cuda_[a-z_]+_mock|test_cuda_driver|cuda_fatbin_contents|cuda_user_kernel_nvlink|no_cuda_needed)$'
    -E '^test_cuda_deadline_mock$')
else
  SEL=(-R 'cuda|kern_gpu' -E '_mock')
fi
(cd "$BUILD" && run_to ctest "$(cap 120)" ctest "${SEL[@]}" \
  --output-on-failure --timeout 100 -j2)
rc=$?
line=$(grep -E 'tests passed|tests failed' "$(log ctest)" | tail -1)
skipped=$(grep -c '\*\*\*Skipped' "$(log ctest)")
if [ $rc -eq 0 ] && [ "$skipped" -eq 0 ]; then
  row "ctest -R cuda" ok "$line" $(($(date +%s) - t0))
elif [ $rc -eq 0 ]; then
  row "ctest -R cuda" SKIPPED "$line; $skipped skipped: $(grep -h 'SKIP' "$(log ctest)" | head -1)" $(($(date +%s) - t0))
else
  row "ctest -R cuda" FAIL "${line:-rc $rc}, see $(log ctest)" $(($(date +%s) - t0))
fi

# ---- 3a. the device module on the device ----
step "device module (test_cuda_module)"
t0=$(date +%s)
run_to module "$(cap 60)" "$BUILD/tests/test_cuda_module"
rc=$?
if [ $rc -eq 0 ]; then
  row "device module" ok "$(grep -m1 'cuda device module on' "$(log module)"); $(grep -c '^  ' "$(log module)") checks passed" $(($(date +%s) - t0))
elif [ $rc -eq 77 ]; then
  row "device module" SKIPPED "$(head -1 "$(log module)")" $(($(date +%s) - t0))
else
  row "device module" FAIL "rc $rc: $(grep -m1 -e 'test_cuda_module.c' -e SKIP "$(log module)")" $(($(date +%s) - t0))
fi

# ---- 3a'. hbg inside an engine: its stream, its memory, its capture ----
step "engine interop (test_gpu_interop)"
t0=$(date +%s)
run_to interop "$(cap 60)" "$BUILD/tests/test_gpu_interop"
rc=$?
if [ $rc -eq 0 ]; then
  row "engine interop" ok "$(grep -c -e '^eager:' -e '^capture:' "$(log interop)") of 2 checks passed: stream order, 100 replays" $(($(date +%s) - t0))
elif [ $rc -eq 77 ]; then
  row "engine interop" SKIPPED "$(head -1 "$(log interop)")" $(($(date +%s) - t0))
else
  row "engine interop" FAIL "rc $rc: $(grep -m1 -e 'test_gpu_interop.c' -e SKIP "$(log interop)")" $(($(date +%s) - t0))
fi

# ---- 3b. the device executor on the device ----
step "device executor (test_cuda_exec)"
t0=$(date +%s)
run_to exec "$(cap 90)" "$BUILD/tests/test_cuda_exec"
rc=$?
if [ $rc -eq 0 ]; then
  row "device executor" ok "$(grep -m1 'cuda device executor on' "$(log exec)"); $(grep -c 'verify HBG_OK' "$(log exec)") workload binds bit-exact" $(($(date +%s) - t0))
elif [ $rc -eq 77 ]; then
  row "device executor" SKIPPED "$(head -1 "$(log exec)")" $(($(date +%s) - t0))
else
  row "device executor" FAIL "rc $rc: $(grep -m3 -e 'test_cuda_exec.c' -e 'differs' -e SKIP "$(log exec)" | tr '\n' ';')" $(($(date +%s) - t0))
fi

# The fault paths test_cuda_exec ran (wild and straddling tensor addresses
# in a Submission and in a task: located errors; teardown in flight).
faults=$(grep -cE '(wild tensor address|tensor past its buffer) +error -8 \(HBG_E_RANGE\)' "$(log exec)")
teardown=$(grep -c 'teardown in flight' "$(log exec)")
if [ "$faults" -eq 3 ] && [ "$teardown" -eq 2 ]; then
  row "fault paths" ok "3 bad tensor addresses located (HBG_E_RANGE at entry and node), 2 teardowns with a bind in flight clean"
else
  row "fault paths" FAIL "located bad addresses $faults of 3, teardowns $teardown of 2: see $(log exec)"
fi

# ---- 3c. user kernels: linked into the executor, run on the device ----
# tests/test_cuda_user: registration refusals and the driver linker's log,
# the example's kernels (nvcc -rdc PTX and fatbin) linked with the
# executor and run bit-exact, the on-disk link cache; its link and load
# times are reported. examples/user_kernel on the device and on the sim
# must give the same output bytes (their digests), both bit-exact with
# the host's own computation.
step "user kernels (test_cuda_user, examples/user_kernel)"
t0=$(date +%s)
export HBG_TEST_UK_PTX=$BUILD/examples/user_kernel_ops.ptx
export HBG_TEST_UK_FATBIN=$BUILD/examples/user_kernel_ops.fatbin
export HBG_TEST_HOST_OBJECT=$BUILD/examples/libexample_user_kernel_ops.so
[ "$MOCK" = 1 ] && export HBG_MOCK_USER_LIB=$HBG_TEST_HOST_OBJECT
run_to user "$(cap 60)" "$BUILD/tests/test_cuda_user"
rc=$?
UK=$BUILD/examples/example_user_kernel
run_to user-cuda "$(cap 30)" "$UK" cuda "$HBG_TEST_UK_PTX"
rc_cuda=$?
run_to user-sim "$(cap 30)" "$UK" sim 4
rc_sim=$?
times=$(grep -m2 -E '^  (link|from the cache)' "$(log user)" | sed 's/^ *//' | tr '\n' ';')
d_cuda=$(grep -o 'fnv1a64 [0-9a-f]*' "$(log user-cuda)")
d_sim=$(grep -o 'fnv1a64 [0-9a-f]*' "$(log user-sim)")
if [ $rc -eq 0 ] && [ $rc_cuda -eq 0 ] && [ $rc_sim -eq 0 ] && [ -n "$d_cuda" ] &&
  [ "$d_cuda" = "$d_sim" ]; then
  row "user kernels (linked, run)" ok "linked with the executor and run bit-exact with the host and the sim ($d_cuda); $times" $(($(date +%s) - t0))
else
  row "user kernels (linked, run)" FAIL "test rc $rc ($(grep -m1 -e 'test_cuda_user.c' -e SKIP "$(log user)")), example on cuda rc $rc_cuda ($d_cuda), on the sim rc $rc_sim ($d_sim)" $(($(date +%s) - t0))
fi

# ---- 3b. per-copy self-check: pinned vs pageable sync H2D, D2H readback ----
for size in 2560 130K 5M; do
  step "hbg selfcheck --device cuda --size $size"
  t0=$(date +%s)
  run_to "selfcheck-$size" "$(cap 30)" "$HBG" selfcheck --device cuda \
    --size "$size" --iters "$([ "$MOCK" = 1 ] && echo 20 || echo 500)"
  rc=$?
  if [ $rc -eq 0 ]; then
    row "hbg selfcheck $size" ok "$(grep -iE 'pinned|pageable' "$(log "selfcheck-$size")" | head -2 | tr -s ' ' | tr '\n' ';')" $(($(date +%s) - t0))
  else
    row "hbg selfcheck $size" FAIL "rc $rc, see $(log "selfcheck-$size")" $(($(date +%s) - t0))
  fi
done

# ---- 4. first tiny bind, exec=verify (exec=device was the smoke bind) ----
step "first tiny bind (exec=verify)"
t0=$(date +%s)
run_to tiny "$(cap 30)" "$HBG" bench --device cuda --device-options exec=verify \
  --workload qwen3-14b --layers 1 --rounds 1 --warmup 0 --policy deferred \
  --verify-every 1 --json "$OUTDIR/gpu-check-tiny.json"
rc=$?
bench_row "first bind (1 layer)" "$(log tiny)" "$OUTDIR/gpu-check-tiny.json" $rc $(($(date +%s) - t0))

# ---- 5. the reference workloads under every policy ----
ROUNDS=60
[ "$MOCK" = 1 ] && ROUNDS=4
for wl in qwen3-14b dsv4; do
  for arm in verify device; do
    step "hbg bench --device cuda --device-options exec=$arm --workload $wl"
    t0=$(date +%s)
    extra=()
    [ "$MOCK" = 1 ] && extra=(--layers 4 --warmup 1)
    name=bench-$wl
    # the peers (one launch per call, a replayed CUDA graph) beside the
    # policies where the policies execute too
    [ "$arm" = device ] && name=bench-$wl-exec-device &&
      extra+=(--arm eager,cuda-graph)
    run_to "$name" "$(cap 60)" "$HBG" bench --device cuda \
      --device-options "exec=$arm" --workload "$wl" \
      --policy deferred,pinned-eager,coalesced,pinned-bulk --rounds "$ROUNDS" \
      ${extra[@]+"${extra[@]}"} --json "$OUTDIR/gpu-check-$name.json" \
      --csv "$OUTDIR/gpu-check-$name.csv"
    rc=$?
    bench_row "bench $wl exec=$arm" "$(log "$name")" "$OUTDIR/gpu-check-$name.json" $rc $(($(date +%s) - t0)) \
      "$([ "$arm" = device ] && echo strict)"
  done
done

# ---- 5b. the device executor's account: set-up, per-hop cost, old/new ----
step "the device executor's account (issue 32)"
for wl in qwen3-14b dsv4; do
  step "hbg bench exec=device,worker=cta --workload $wl (coalesced)"
  t0=$(date +%s)
  extra=()
  [ "$MOCK" = 1 ] && extra=(--layers 4 --warmup 1)
  run_to "bench-$wl-cta" "$(cap 60)" "$HBG" bench --device cuda \
    --device-options exec=device,worker=cta --workload "$wl" \
    --policy coalesced --rounds "$ROUNDS" ${extra[@]+"${extra[@]}"} \
    --json "$OUTDIR/gpu-check-bench-$wl-cta.json"
  bench_row "bench $wl worker=cta" "$(log "bench-$wl-cta")" \
    "$OUTDIR/gpu-check-bench-$wl-cta.json" $? $(($(date +%s) - t0)) strict
done
# The account: measured and derived figures per policy in the log, the
# rows (per-hop split, targets) in the summary; tests/gpu_check_account.c.
ACCT=$BUILD/tests/gpu_check_account
if [ -x "$ACCT" ]; then
  "$ACCT" "$OUTDIR" "$ROOT/docs/results/h200/gpu-check.json" "$MOCK" \
    >"$(log executor)" 2>&1
  rc=$?
  [ $rc -ne 0 ] && row "executor account" FAIL "rc $rc, see $(log executor)"
  while IFS='|' read -r tag a b c; do
    [ "$tag" = ROW ] && row "$a" "$b" "$c"
  done <"$(log executor)"
else
  row "executor account" FAIL "$ACCT not built"
fi

# ---- 5c. the blocker: a foreign kernel holding SMs while hbg binds ----
# tests/gpu_blocker.cu, built here with nvcc against the build's libhbg
# (the toolkit's runtime, linked statically). On the stand-in it is built
# only: test_cuda_deadline_mock models the same (hbgmock_occupy).
step "blocker: a kernel holding all SMs but one while a bind runs"
t0=$(date +%s)
BLOCKER=$BUILD/gpu_blocker
BLOCK_S=6
run_to blocker-build "$(cap 60)" nvcc -O2 -std=c++17 -arch=sm_90 \
  -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -I "$ROOT/include" \
  -o "$BLOCKER" "$ROOT/tests/gpu_blocker.cu" -L "$BUILD" -lhbg \
  -Xlinker -rpath="$BUILD"
rc=$?
if [ $rc -ne 0 ]; then
  row "blocker" FAIL "nvcc rc $rc: $(grep -m1 -iE 'error|not found' "$(log blocker-build)")" $(($(date +%s) - t0))
elif [ "$MOCK" = 1 ]; then
  row "blocker" n/a "built; running it needs a GPU (the stand-in's model: test_cuda_deadline_mock, an SM held by hbgmock_occupy)" $(($(date +%s) - t0))
elif [ "$(left)" -lt $((BLOCK_S + 20)) ]; then
  row "blocker" skip "out of time budget ($(left) s left)"
else
  run_to blocker "$(cap $((BLOCK_S + 30)))" "$BLOCKER" --seconds "$BLOCK_S" \
    --policy coalesced --workload qwen3-14b --layers 2 --deadline-ms 3000
  rc=$?
  res=$(grep '^RESULT ' "$(log blocker)" | tail -1 | cut -d' ' -f2-)
  if [ $rc -eq 0 ]; then
    row "blocker" ok "${res#ok }" $(($(date +%s) - t0))
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    row "blocker" TIMEOUT "hung: killed after $(cap $((BLOCK_S + 30))) s; $(tail -1 "$(log blocker)")" $(($(date +%s) - t0))
  else
    row "blocker" FAIL "rc $rc: ${res:-$(tail -1 "$(log blocker)")}" $(($(date +%s) - t0))
  fi
fi

# ---- 5d. a real model at its real dims: qwen3-0.6b, then qwen3-14b's ----
# One token per bind through every layer (bf16 weights), exec=device,
# verified bit for bit against the host reference (the sim computes the
# same bits: the kernels' order is fixed). The row gives the device time
# per step beside the weight bytes over the memory's nominal bandwidth
# (H200 4.8 TB/s, H100 SXM 3.35 TB/s; no target yet). qwen3-14b-real's
# first 8 layers (its LM head and embedding whole) run where the device
# has the memory and the budget leaves 150 s for the sanitizers.
model_row() { # model_row NAME LOG RC SECONDS
  local lg=$2 rc=$3 dev mb bw floor
  dev=$(awk '/^coalesced /{p=1} p && $1=="device"{print $2; exit}' "$lg")
  mb=$(sed -n 's/^  weights [a-z0-9]*, \([0-9.]*\) MB.*/\1/p' "$lg" | head -1)
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
  *H200*) bw=4800 ;; *H100*) bw=3350 ;; *) bw= ;;
  esac
  floor=n/a
  [ -n "$bw" ] && [ -n "$mb" ] && floor=$(awk -v m="$mb" -v b="$bw" 'BEGIN{printf "%.1f", m / b * 1000}')
  if [ "$rc" -eq 0 ]; then
    row "$1" ok "verified; coalesced device ${dev:-?} us per step, weights ${mb:-?} MB, bandwidth floor ${floor} us" "$4"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    row "$1" TIMEOUT "cut off by its limit, see $lg" "$4"
  else
    row "$1" FAIL "rc $rc: $(grep -m2 -e '^hbg' -e differs "$lg" | tr '\n' ';')" "$4"
  fi
}
step "hbg bench --workload qwen3-0.6b (real dims)"
t0=$(date +%s)
extra=(--rounds 8 --warmup 2)
[ "$MOCK" = 1 ] && extra=(--layers 2 --rounds 2 --warmup 1)
run_to model06 "$(cap 90)" "$HBG" bench --device cuda \
  --device-options exec=device --workload qwen3-0.6b \
  --policy coalesced,deferred --interleave 2 "${extra[@]}" \
  --json "$OUTDIR/gpu-check-model-qwen3-0.6b.json"
model_row "model qwen3-0.6b" "$(log model06)" $? $(($(date +%s) - t0))
if [ "$MOCK" = 0 ] && [ "$(left)" -gt 240 ]; then
  step "hbg bench --workload qwen3-14b-real --layers 8"
  t0=$(date +%s)
  run_to model14 "$(cap 90)" "$HBG" bench --device cuda \
    --device-options exec=device --workload qwen3-14b-real --layers 8 \
    --policy coalesced --rounds 3 --warmup 1 \
    --json "$OUTDIR/gpu-check-model-qwen3-14b-real.json"
  model_row "model qwen3-14b-real, 8 layers" "$(log model14)" $? $(($(date +%s) - t0))
else
  row "model qwen3-14b-real, 8 layers" skip "$([ "$MOCK" = 1 ] && echo 'the stand-in: too large' || echo 'out of time budget')"
fi

# ---- 6. compute-sanitizer: memcheck, racecheck, synccheck (last) ----
# san NAME LOG TOOL SECONDS CMD...: one run under compute-sanitizer TOOL,
# its row. Skipped when less than 20 s of the budget is left; the device's
# deadline raised (the tools slow the kernels down many times).
san() {
  local name=$1 lg=$2 tool=$3 secs=$4 t0 rc summary
  shift 4
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    row "$name" skip "compute-sanitizer not installed (CUDA_HOME=$CUDA_HOME)"
    return
  elif [ "$(left)" -lt 20 ]; then
    row "$name" skip "out of time budget ($(left) s left)"
    return
  fi
  step "$name"
  t0=$(date +%s)
  HBG_CUDA_DEADLINE_MS=120000 HBG_SHAPES_TIMEOUT=120 run_to "$lg" \
    "$(cap "$secs")" compute-sanitizer --tool "$tool" --error-exitcode 3 "$@"
  rc=$?
  summary=$(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$(log "$lg")")
  if [ $rc -eq 3 ]; then
    row "$name" FAIL "$summary; $(grep -m1 -E 'HAZARD|Invalid|Barrier|Race|rror' "$(log "$lg")")" $(($(date +%s) - t0))
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    row "$name" TIMEOUT "see $(log "$lg")" $(($(date +%s) - t0))
  elif [ $rc -eq 0 ] && [ -n "$summary" ]; then
    # a bench's Definitions validated per measured bind: under 1, the
    # third bind took the verdict cache's hit path
    local defs
    defs=$(grep -o '"exec_defs_validated_per_bind":[^,]*' "$OUTDIR/gpu-check-$lg.json" 2>/dev/null |
      head -1 | tr -dc '0-9.\n')
    row "$name" ok "$summary${defs:+; Definitions validated $defs per measured bind}" $(($(date +%s) - t0))
  else
    row "$name" FAIL "rc $rc: ${summary:-no summary}, see $(log "$lg")" $(($(date +%s) - t0))
  fi
}
if [ "$MOCK" = 1 ]; then
  row "compute-sanitizer" n/a "needs a GPU (memcheck, racecheck, synccheck: 10 runs)"
  finish
fi
# 3 binds per policy (a warm-up, 2 measured): the third reuses the first's
# pipeline slot, so its Definitions hit the verdict cache; both peer arms
# run every other device kernel.
for tool in memcheck racecheck synccheck; do
  san "compute-sanitizer $tool" "$tool" "$tool" 90 "$HBG" bench --device cuda \
    --device-options exec=device --workload qwen3-14b --layers 2 --warmup 1 \
    --rounds 2 --interleave 1 --verify-every 1 --policy deferred,coalesced \
    --arm eager,cuda-graph --quiet --json "$OUTDIR/gpu-check-$tool.json"
done
# a bind that fails on the device: an item's error stops the window, the
# wait names its entry, the next bind runs
for tool in racecheck synccheck; do
  san "$tool, failing bind" "$tool-fail" "$tool" 45 \
    "$BUILD/tests/test_exec_shapes" --one cuda coalesced explicit fail_entry
done
# the CTA-per-worker shape (another barrier pattern)
for tool in racecheck synccheck; do
  san "$tool, worker=cta" "$tool-cta" "$tool" 60 "$HBG" \
    bench --device cuda --device-options exec=device,worker=cta \
    --workload dsv4 --layers 2 --warmup 1 --rounds 2 --interleave 1 \
    --policy coalesced --quiet --json "$OUTDIR/gpu-check-$tool-cta.json"
done
# the executor linked with the example's user kernels
for tool in memcheck racecheck synccheck; do
  san "$tool, user kernels" "user-$tool" "$tool" 40 \
    "$UK" cuda "$HBG_TEST_UK_PTX"
done

finish
