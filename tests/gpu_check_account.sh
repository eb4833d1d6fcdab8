#!/usr/bin/env bash
# gpu_check_account (scripts/gpu-check.sh's step 5b) on bench JSON written
# here with known figures: the GPU's rows (the per-hop split, the targets
# met and missed, the run before beside), the stand-in's (n/a), and the
# failures (no split reported, no JSON). Usage: gpu_check_account.sh TOOL.
set -eu
tool=$1
t_name=gpu_check_account
. "$(cd "$(dirname "$0")" && pwd)/sh_helpers.sh"

pol() { # pol NAME DEVICE_US [SPLIT]: one policy row
  local split=${3:-1}
  printf '{"name": "%s", "device_us": {"median": %s, "min": 1},' "$1" "$2"
  if [ "$split" = 1 ]; then
    printf '"device_setup_us": {"median": 200}, "device_tail_us": 50,'
    printf '"device_body_us": 30000, "exec_items_per_bind": 11085,'
  else
    printf '"device_setup_us": {"median": null}, "device_tail_us": null,'
    printf '"device_body_us": null, "exec_items_per_bind": null,'
  fi
  printf '"exec_defs_validated_per_bind": 0, "exec_setup_nodes_per_bind": 0,'
  printf '"exec_dispatch_ops_per_item": 9.5, "verified": true}'
}
bench() { # bench WORKLOAD LAYERS POLICY_ROWS...: a bench JSON on stdout
  local wl=$1 layers=$2
  shift 2
  printf '{"workload": "%s", "layers": %s, "policies": [' "$wl" "$layers"
  local first=1 p
  for p in "$@"; do
    [ $first = 1 ] || printf ','
    first=0
    printf '%s' "$p"
  done
  printf '], "arms": [{"name": "eager", "device_us": {"median": 9000}},'
  printf '{"name": "cuda-graph", "device_us": {"median": 8000}}]}\n'
}

mkdir "$tmp/gpu"
bench qwen3-14b 40 "$(pol deferred 2000)" "$(pol pinned-eager 1900)" \
  "$(pol coalesced 1800)" "$(pol pinned-bulk 1850)" \
  >"$tmp/gpu/gpu-check-bench-qwen3-14b-exec-device.json"
bench qwen3-14b 40 "$(pol coalesced 1700)" >"$tmp/gpu/gpu-check-bench-qwen3-14b-cta.json"
bench dsv4 43 "$(pol deferred 4600)" "$(pol coalesced 4500)" \
  >"$tmp/gpu/gpu-check-bench-dsv4-exec-device.json"
printf '{"bench": {"qwen3-14b-exec-device": {"policies": [%s]}}}\n' \
  "$(pol coalesced 61800)" >"$tmp/old.json"

expect_rc 0 "$tool" "$tmp/gpu" "$tmp/old.json" 0
grep '^ROW|' "$tmp/out" >"$tmp/rows"
[ "$(wc -l <"$tmp/rows")" = 4 ] || { cat "$tmp/out"; fail "not 4 rows"; }
# (1800 - 200 - 50) / 565 = 2.743; 30000 / 11085 = 2.706
grep -q '^ROW|per-hop split qwen3-14b|ok|.*device 1800 us = set-up 200.0 + run 1600.0 (tail 50.0); bodies 30000 us/bind over 11085 items = 2.706 us/item; derived over 565 items: hop 2.743 us, hop without body 0.037 us$' "$tmp/rows" ||
  { cat "$tmp/rows"; fail "qwen3-14b split"; }
grep -q '^ROW|target qwen3-14b|met|coalesced 1800 us (target 2000), worst policy deferred 1.11x coalesced (target 1.2x), 0.225x cuda-graph, was 61800 us$' "$tmp/rows" ||
  { cat "$tmp/rows"; fail "qwen3-14b target"; }
# (4500 - 250) / 1064 = 3.994
grep -q '^ROW|per-hop split dsv4|ok|.*over 1064 items: hop 3.994 us' "$tmp/rows" ||
  { cat "$tmp/rows"; fail "dsv4 split"; }
grep -q '^ROW|target dsv4|missed|coalesced 4500 us (target 4000), worst policy deferred 1.02x' "$tmp/rows" ||
  { cat "$tmp/rows"; fail "dsv4 target"; }
grep -Eq '^  coalesced, worker=cta +1700\.0 ' "$tmp/out" || { cat "$tmp/out"; fail "no worker=cta row"; }
grep -q '"hop_without_body_us"' "$tmp/gpu/gpu-check-executor.json" || fail "no executor JSON"

# the stand-in: no timing, n/a
expect_rc 0 "$tool" "$tmp/gpu" "$tmp/none.json" 1
grep -q '^ROW|executor qwen3-14b|n/a|stand-in, no GPU timing (coalesced: set-up 200 us, tail 50 us, bodies 30000 us over 11085 items/bind' "$tmp/out" ||
  { cat "$tmp/out"; fail "mock row"; }
[ "$(grep -c '^ROW|' "$tmp/out")" = 2 ] || fail "mock: not 2 rows"

# a policy without the split, and a workload without its JSON: failures
mkdir "$tmp/bad"
bench qwen3-14b 4 "$(pol coalesced 1800)" "$(pol deferred 1900 0)" \
  >"$tmp/bad/gpu-check-bench-qwen3-14b-exec-device.json"
expect_rc 0 "$tool" "$tmp/bad" "$tmp/none.json" 1
grep -q '^ROW|executor qwen3-14b|FAIL|1 of 2 policies reported' "$tmp/out" ||
  { cat "$tmp/out"; fail "missing split not a failure"; }
grep -q '^ROW|executor dsv4|FAIL|no exec=device JSON' "$tmp/out" ||
  { cat "$tmp/out"; fail "missing JSON not a failure"; }
echo "gpu_check_account: ok"
