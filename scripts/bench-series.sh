#!/usr/bin/env bash
# Control-plane scaling series: qwen3-14b shape at growing layer counts, all
# three policies interleaved in one process per point. Prints one table row
# per layer count (medians, microseconds) and keeps the JSON under $OUT_DIR.
set -eu
HBG=${HBG:-build/bin/hbg}
OUT_DIR=${OUT_DIR:-build/series}
LAYERS=${LAYERS:-"10 20 50 100 200 500 1000"}
mkdir -p "$OUT_DIR"
printf '%6s %14s %14s %14s %10s %10s\n' layers deferred_us pinned_eager_us coalesced_us pe/def co/def
for l in $LAYERS; do
  rounds=40; [ "$l" -ge 200 ] && rounds=15; [ "$l" -ge 500 ] && rounds=8
  "$HBG" bench --workload qwen3-14b --layers "$l" --rounds "$rounds" --warmup 4 \
    --interleave 1 --verify-every 0 --quiet --json "$OUT_DIR/qwen3-$l.json"
  python3 - "$OUT_DIR/qwen3-$l.json" "$l" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = {p["name"]: p["control_plane_us"]["median"] for p in d["policies"]}
de, pe, co = m["deferred"], m["pinned-eager"], m["coalesced"]
print("%6s %14.1f %14.1f %14.1f %10.3f %10.3f" % (sys.argv[2], de, pe, co, pe / de, co / de))
PY
done
