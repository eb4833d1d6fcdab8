#!/usr/bin/env bash
# hbg bench --arm on the cuda stand-in (HBG_CUDA_LIB): both peer arms run
# interleaved with two policies (exec=device, so every row's output is the
# device's and is checked against the host reference), and every output
# reports them. Usage: bench_arms.sh HBG. Exit 77 without HBG_CUDA_LIB.
set -eu
hbg=$1
src=$(cd "$(dirname "$0")" && pwd)
[ -n "${HBG_CUDA_LIB:-}" ] || { echo "SKIP: HBG_CUDA_LIB not set"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "bench_arms: $*" >&2; exit 1; }

"$hbg" bench --device cuda --device-options exec=device --workload qwen3-14b \
  --layers 2 --rounds 4 --warmup 1 --interleave 2 --verify-every 1 \
  --policy coalesced,deferred --arm eager,cuda-graph \
  --json "$tmp/a.json" --csv "$tmp/a.csv" --svg "$tmp/a.svg" \
  >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "run failed"; }

# table: the arms, their phases and the capture apart
grep -q 'peer arms: eager cuda-graph' "$tmp/out" || fail "table: no peer arms line"
grep -Eq '^cuda-graph +control_plane' "$tmp/out" || fail "table: no cuda-graph row"
grep -Eq '^cuda-graph +1\.0 ' "$tmp/out" || fail "table: cuda-graph not one launch per step"
grep -Eq '^eager .* yes \(4/4\)$' "$tmp/out" || fail "table: eager not verified 4/4"
grep -Eq '^cuda-graph .* 1  yes \(4/4\)$' "$tmp/out" || fail "table: cuda-graph not captured once, verified 4/4"

# JSON: an arms list of both, verified, the capture recorded
tr -d ' \t\n' <"$tmp/a.json" >"$tmp/j"
grep -q '"arms":\[{"name":"eager"' "$tmp/j" || fail "json: no eager arm"
grep -q '},{"name":"cuda-graph"' "$tmp/j" || fail "json: no cuda-graph arm"
[ "$(grep -o '"verified":true' "$tmp/j" | wc -l)" = 4 ] || fail "json: not 2 policies + 2 arms verified"
grep -Eq '"name":"cuda-graph".*"launches_per_step":1,"updates_per_step":[0-9.]+,"capture_us":[0-9.e+-]+,"instantiate_us":[0-9.e+-]+,"captures":1,' "$tmp/j" ||
  fail "json: cuda-graph counts or capture"
grep -Eq '"name":"eager".*"capture_us":null' "$tmp/j" || fail "json: eager captured"

# CSV: 4 steps per arm; cuda-graph 1 launch and its capture on each row;
# eager more launches than 1; every row has device time
[ "$(grep -c ',arm,' "$tmp/a.csv")" = 8 ] || fail "csv: want 8 arm rows"
awk -F, 'NR > 1 && $1 == "cuda-graph" && !($29 == 1 && $31 > 0) { bad = 1 }
         NR > 1 && $1 == "eager" && !($29 > 1 && $31 == 0) { bad = 1 }
         NR > 1 && !($9 > 0) { bad = 1 } END { exit bad }' "$tmp/a.csv" ||
  fail "csv: launches, capture or device_ns"
if command -v xmllint >/dev/null; then
  "$src/svg_check.sh" "$tmp/a.svg" >/dev/null || fail "svg segments/labels"
fi
grep -q 'peer arm: control_plane' "$tmp/a.svg" || fail "svg: no arm legend"
echo "bench_arms: ok"
