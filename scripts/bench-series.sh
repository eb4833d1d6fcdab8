#!/usr/bin/env bash
# Control-plane scaling series: qwen3-14b shape at growing layer counts, all
# four policies interleaved bind by bind in one process per point. Prints one
# table row per layer count (medians, microseconds; ratios against deferred
# from the same process) and keeps the JSON under $OUT_DIR.
#
#   scripts/bench-series.sh                    # host allocator arm: retain
#   HOST_ALLOC=trim scripts/bench-series.sh    # glibc's defaults
set -eu
HBG=${HBG:-build/bin/hbg}
OUT_DIR=${OUT_DIR:-build/series}
LAYERS=${LAYERS:-"10 20 50 100 200 500 1000"}
HOST_ALLOC=${HOST_ALLOC:-retain}
mkdir -p "$OUT_DIR"
echo "host allocator $HOST_ALLOC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%6s %11s %11s %11s %11s %7s %7s %7s %7s\n' layers deferred pinned_eager \
  pinned_bulk coalesced pe/def pb/def co/def def_orch
for l in $LAYERS; do
  rounds=40; [ "$l" -ge 200 ] && rounds=15; [ "$l" -ge 500 ] && rounds=8
  "$HBG" bench --workload qwen3-14b --layers "$l" --rounds "$rounds" --warmup 4 \
    --interleave 1 --verify-every 0 --host-alloc "$HOST_ALLOC" --quiet \
    --json "$OUT_DIR/qwen3-$l-$HOST_ALLOC.json"
  python3 - "$OUT_DIR/qwen3-$l-$HOST_ALLOC.json" "$l" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = {p["name"]: p["control_plane_us"]["median"] for p in d["policies"]}
o = {p["name"]: p["host_orch_us"]["median"] for p in d["policies"]}
de, pe, pb, co = m["deferred"], m["pinned-eager"], m["pinned-bulk"], m["coalesced"]
# def_orch: deferred's host_orch against pinned-eager's (1.0 = same work)
print("%6s %11.1f %11.1f %11.1f %11.1f %7.3f %7.3f %7.3f %7.3f" % (
    sys.argv[2], de, pe, pb, co, pe / de, pb / de, co / de,
    o["deferred"] / o["pinned-eager"]))
PY
done
