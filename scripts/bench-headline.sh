#!/usr/bin/env bash
# The headline tables of docs/BENCHMARKS.md, regenerated: the four policies
# on qwen3-14b and on dsv4 (sim device, control plane per step and the
# ratio to deferred) and, where the Python package can run, Python against
# C (python/examples/control_plane_cost.py, both backends when hbg._native
# was built). Prints the tables on stdout in the Markdown of BENCHMARKS.md,
# each with its command, the commit (git rev-parse --short HEAD), the date
# and the machine (uname, nproc, CPU model); keeps every run's JSON under
# --out. The GPU table is scripts/gpu-check.sh's, the upstream's table
# scripts/upstream-table.sh's.
#
#   scripts/bench-headline.sh                        # as in BENCHMARKS.md
#   scripts/bench-headline.sh --rounds 3 --warmup 1 --repeat 1 --python no
#
# Options (defaults as BENCHMARKS.md measured them):
#   --rounds N     measured binds per policy / arm (60; Python: --py-rounds)
#   --warmup N     warm-up binds (5; Python: 10)
#   --repeat N     processes per configuration (3)
#   --py-rounds N  measured binds per Python arm (200)
#   --python MODE  auto (default: when an interpreter with numpy is there),
#                  yes (fail without one) or no
#   --workloads L  space-separated (default "qwen3-14b dsv4")
#   --out DIR      where the JSON goes (build/headline)
# Environment: HBG (the CLI, build/bin/hbg), HBG_LIBRARY (libhbg for the
# Python package, build/libhbg.so), HBG_PY_NATIVE_MODULE (the extension,
# build/python/hbg/_native.abi3.so when it exists; "none": ctypes only).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
HBG=${HBG:-build/bin/hbg}
ROUNDS=60 WARMUP=5 REPEAT=3 PY_ROUNDS=200 PY_WARMUP=10 PYTHON=auto
WORKLOADS="qwen3-14b dsv4" OUT_DIR=build/headline
usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; PY_ROUNDS=$2; shift 2 ;;
    --warmup) WARMUP=$2; PY_WARMUP=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --py-rounds) PY_ROUNDS=$2; shift 2 ;;
    --python) PYTHON=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-headline.sh: unknown option $1" >&2; usage ;;
  esac
done
case $PYTHON in auto|yes|no) ;; *) echo "bench-headline.sh: --python auto|yes|no" >&2; exit 2 ;; esac
for n in "$ROUNDS" "$WARMUP" "$REPEAT" "$PY_ROUNDS" "$PY_WARMUP"; do
  case $n in ''|*[!0-9]*) echo "bench-headline.sh: not a count: '$n'" >&2; exit 2 ;; esac
done
[ "$REPEAT" -ge 1 ] && [ "$ROUNDS" -ge 1 ] || { echo "bench-headline.sh: --repeat and --rounds must be at least 1" >&2; exit 2; }
[ -x "$HBG" ] || { echo "bench-headline.sh: no CLI at $HBG (build first, or set HBG)" >&2; exit 1; }

# The interpreter for the formatter (any python3) and for the Python arms
# (one that imports numpy: Debian's first, as tests/python_run.sh picks).
py=
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null 2>&1; then py=$(command -v "$cand"); break; fi
done
[ -n "$py" ] || { echo "bench-headline.sh: python3 is needed to read the JSON" >&2; exit 1; }
pyarm=
if [ "$PYTHON" != no ]; then
  for cand in /usr/bin/python3 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy' >/dev/null 2>&1; then
      pyarm=$(command -v "$cand"); break
    fi
  done
  if [ -z "$pyarm" ] && [ "$PYTHON" = yes ]; then
    echo "bench-headline.sh: --python yes, but no python3 imports numpy" >&2; exit 1
  fi
fi

mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/sim-*.json "$OUT_DIR"/py-*.json
OUT_DIR=$(cd "$OUT_DIR" && pwd)
meta=$OUT_DIR/meta.txt
{
  echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    echo "dirty=1"
  fi
  echo "date=$(date -u '+%Y-%m-%d')"
  echo "start=$(date -u '+%H:%M')"
  echo "uname=$(uname -srm)"
  echo "nproc=$(nproc)"
  echo "cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
  echo "load_start=$(cut -d' ' -f1 /proc/loadavg)"
  echo "rounds=$ROUNDS"
  echo "warmup=$WARMUP"
  echo "repeat=$REPEAT"
  echo "workloads=$WORKLOADS"
  echo "py_rounds=$PY_ROUNDS"
  echo "py_warmup=$PY_WARMUP"
} >"$meta"

# The sim: all four policies in one process, REPEAT processes per workload,
# the workloads alternated so that the machine's drift is shared.
for rep in $(seq 1 "$REPEAT"); do
  for w in $WORKLOADS; do
    echo "[$rep/$REPEAT] $w, load $(cut -d' ' -f1 /proc/loadavg)" >&2
    "$HBG" bench --workload "$w" --rounds "$ROUNDS" --warmup "$WARMUP" \
      --host-alloc retain --device-options profile=none --quiet \
      --json "$OUT_DIR/sim-$w-$rep.json"
  done
done

# Python against C: three policies, each run REPEAT times, native then
# ctypes, one process each; the package from the source tree.
if [ -n "$pyarm" ]; then
  lib=${HBG_LIBRARY:-build/libhbg.so}
  native=${HBG_PY_NATIVE_MODULE:-build/python/hbg/_native.abi3.so}
  [ -f "$lib" ] || { echo "bench-headline.sh: no library at $lib (set HBG_LIBRARY)" >&2; exit 1; }
  lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
  pkg=$(mktemp -d)
  trap 'rm -rf "$pkg"' EXIT
  cp -r "$root/python/src/hbg" "$pkg/hbg"
  rm -rf "$pkg/hbg/__pycache__" "$pkg/hbg/"libhbg.so* "$pkg/hbg/hbg" "$pkg/hbg/"_native*.so
  backends="0"
  if [ "$native" != none ] && [ -f "$native" ]; then
    cp "$native" "$pkg/hbg/"; backends="1 0"
  fi
  echo "py_backends=$backends" >>"$meta"
  echo "py_version=$("$pyarm" -c 'import sys, numpy; print("CPython", sys.version.split()[0] + ",", "numpy", numpy.__version__)')" >>"$meta"
  for policy in coalesced pinned-eager deferred; do
    for rep in $(seq 1 "$REPEAT"); do
      for nat in $backends; do
        echo "[$rep/$REPEAT] python $policy native=$nat, load $(cut -d' ' -f1 /proc/loadavg)" >&2
        HBG_LIBRARY=$lib HBG_PY_NATIVE=$nat PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH} \
          "$pyarm" "$root/python/examples/control_plane_cost.py" \
          --rounds "$PY_ROUNDS" --warmup "$PY_WARMUP" --policy "$policy" \
          --json "$OUT_DIR/py-$policy-native$nat-$rep.json" >/dev/null
      done
    done
  done
fi
echo "load_end=$(cut -d' ' -f1 /proc/loadavg)" >>"$meta"
echo "end=$(date -u '+%H:%M')" >>"$meta"

"$py" "$here/bench_headline.py" "$OUT_DIR"
