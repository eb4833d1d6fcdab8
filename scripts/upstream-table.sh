#!/usr/bin/env bash
# The upstream runtime's published qwen3-14b table, reproduced: all four
# policies side by side in one process per configuration, for every device
# profile, both host-allocator arms and both Definition sizes (ours, and
# padded to the upstream's 130,192 B), each configuration REPEAT times.
# Writes $OUT_DIR/upstream-table.md and .json (scripts/upstream_table.py)
# and keeps every run's JSON beside them.
#
#   scripts/upstream-table.sh                      # the full table
#   PROFILES=ascend-a2 ARMS=retain REPEAT=1 scripts/upstream-table.sh
#   OPTIONS=spin=0 OUT_DIR=build/upstream-spin0 scripts/upstream-table.sh
#   RECORD=once,per-bind DEPS=inferred PROFILES=ascend-a2 scripts/upstream-table.sh
#
# RECORD and DEPS are `hbg bench --record` / `--deps` lists: each value is an
# arm of every policy in the same process (interleaved), and the table gives
# each record/deps mode its own rows.
set -eu
HBG=${HBG:-build/bin/hbg}
OUT_DIR=${OUT_DIR:-build/upstream}
PROFILES=${PROFILES:-"none ascend-a2 h200-pcie5"}
ARMS=${ARMS:-"retain trim"}
SIZES=${SIZES:-"0 130192"}   # --def-size; 0 = natural (62,616 B)
ROUNDS=${ROUNDS:-60}
REPEAT=${REPEAT:-3}
OPTIONS=${OPTIONS:-}         # extra sim options, e.g. spin=0
RECORD=${RECORD:-once}       # --record: once, per-bind or both
DEPS=${DEPS:-explicit}       # --deps: explicit, inferred or both
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/run-*.json
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "kernel: $(uname -r)"
  lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Hypervisor vendor)' || true
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT_DIR/machine.txt"

runs=()
for rep in $(seq 1 "$REPEAT"); do
  for profile in $PROFILES; do
    for arm in $ARMS; do
      for size in $SIZES; do
        opts="profile=$profile${OPTIONS:+,$OPTIONS}"
        out="$OUT_DIR/run-$profile-$arm-$size-$rep.json"
        echo "[$rep/$REPEAT] $profile $arm def-size=$size load $(cut -d' ' -f1 /proc/loadavg)" >&2
        "$HBG" bench --workload qwen3-14b --rounds "$ROUNDS" --warmup 5 \
          --host-alloc "$arm" --def-size "$size" --device-options "$opts" \
          --record "$RECORD" --deps "$DEPS" --quiet --json "$out"
        runs+=("$out")
      done
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT_DIR/machine.txt"

python3 "$here/upstream_table.py" "$OUT_DIR" "${runs[@]}" >/dev/null
cat "$OUT_DIR/machine.txt"
echo "wrote $OUT_DIR/upstream-table.md and $OUT_DIR/upstream-table.json" >&2
