#!/usr/bin/env bash
# The hbg command-line tool end to end.
# Usage: cli.sh HBG IMAGE_GEN [plain|sanitized]
set -eu
hbg=$1; gen=$2; build=${3:-plain}
src=$(cd "$(dirname "$0")" && pwd)
t_name=cli; . "$(dirname "$0")/sh_helpers.sh"

"$hbg" version | grep -q '^hbg [0-9]' || fail "version"
expect_rc 2 "$hbg"
expect_rc 2 "$hbg" no-such-command
"$hbg" devices | grep -q '^sim  *available' || fail "devices: sim not available"
"$hbg" devices --json | grep -q '"name":[[:space:]]*"sim"' || fail "devices --json"
# the sim's cost-model options are listed, and a bad profile or cost value
# fails the open with a message naming it
"$hbg" devices | grep '^sim ' | grep -q 'profile=none|ascend-a2|h200-pcie5' ||
  fail "devices: sim profiles not listed"
"$hbg" devices | grep '^sim ' | grep -q 'copy_us=.*free_sync=0|1' ||
  fail "devices: sim cost keys not listed"
# cuda (when built) loads the driver at run time and says why it cannot:
# here a library that is not there; without an installed driver, the
# missing libcuda.so.1 (the toolkit's link stub is never picked up)
if "$hbg" devices | grep -q '^cuda '; then
  HBG_CUDA_LIB="$tmp/no-libcuda.so.1" "$hbg" devices >"$tmp/dev"
  grep -q '^cuda  *unavailable' "$tmp/dev" || fail "devices: cuda available without its library"
  grep -A1 '^cuda ' "$tmp/dev" | grep -q "reason: cannot load the CUDA driver library $tmp/no-libcuda.so.1" ||
    fail "devices: no reason for an unloadable cuda library"
  HBG_CUDA_LIB="$tmp/no-libcuda.so.1" "$hbg" devices --json | tr -d '\n' |
    grep -q '"name": "cuda", "available": false, "availability": "cannot load' ||
    fail "devices --json: cuda reason"
  if [ -z "${HBG_CUDA_LIB:-}" ] && ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    "$hbg" devices | grep -A1 '^cuda ' |
      grep -q 'reason: .*libcuda.so.1: cannot open shared object file' ||
      fail "devices: no driver, but cuda does not say libcuda.so.1 is missing"
  fi
fi
expect_rc 1 "$hbg" selfcheck --options profile=tpu-v9
grep -q "unknown profile.*'profile=tpu-v9'" "$tmp/err" || fail "selfcheck: bad profile"
expect_rc 1 "$hbg" selfcheck --options profile=ascend-a2,h2d_gbps=fast
grep -q "bad or out-of-range value in 'h2d_gbps=fast'" "$tmp/err" ||
  fail "selfcheck: bad cost value"

# inspect: every real image is valid, in text and JSON
mkdir -p "$tmp/img"
"$gen" "$tmp/img" >/dev/null
n=0
for f in "$tmp"/img/*; do
  case $f in */bad_*) continue ;; esac
  expect_rc 0 "$hbg" inspect "$f"
  grep -q 'HBG_OK' "$tmp/out" || fail "inspect $f: no status line"
  expect_rc 0 "$hbg" inspect --json "$f"
  grep -q '"valid":[[:space:]]*true' "$tmp/out" || fail "inspect --json $f"
  n=$((n + 1))
done
[ "$n" -ge 4 ] || fail "only $n images generated"
# the generator's broken images are rejected, each with its own error
for b in def_boundary_write:HBG_E_IMG_BOUNDARY_WRITE \
         def_view_write:HBG_E_IMG_VIEW_WRITE sub_wrap_inline:HBG_E_RANGE; do
  expect_rc 1 "$hbg" inspect "$tmp/img/bad_${b%%:*}.bin"
  grep -q "${b#*:}" "$tmp/err" || fail "inspect bad_${b%%:*}: not ${b#*:}"
done
# a flipped byte is rejected with a specific error; usage errors are 2
for f in "$tmp"/img/def_small.bin "$tmp"/img/sub_small.bin "$tmp"/img/win_small.bin; do
  cp "$f" "$tmp/bad"
  printf '\377' | dd of="$tmp/bad" bs=1 seek=40 conv=notrunc 2>/dev/null
  expect_rc 1 "$hbg" inspect "$tmp/bad"
  grep -q 'HBG_E_IMG_' "$tmp/err" || fail "inspect: no error name for a corrupt $f"
done
expect_rc 1 "$hbg" inspect "$tmp/no-such-file"
grep -q "no-such-file: No such file or directory" "$tmp/err" ||
  fail "inspect: a missing file is not reported as such"
expect_rc 2 "$hbg" inspect

# bench: a short verified run of every output format
expect_rc 0 "$hbg" bench --workload qwen3-14b --layers 3 --rounds 3 --warmup 1 \
  --quiet --json "$tmp/b.json" --csv "$tmp/b.csv" --svg "$tmp/b.svg" --trace "$tmp/b.trace"
grep -q '"verified":[[:space:]]*true' "$tmp/b.json" || fail "bench: not verified"
[ "$(grep -c '"verified":[[:space:]]*true' "$tmp/b.json")" = 4 ] || fail "bench: not all 4 policies verified"
grep -q '"pinned-bulk"' "$tmp/b.json" || fail "bench: pinned-bulk not run by default"
expect_rc 0 "$hbg" bench --help
grep -q 'pinned-bulk' "$tmp/out" || fail "bench --help: pinned-bulk not listed"
grep -q '<svg' "$tmp/b.svg" || fail "bench: no svg"
grep -q 'traceEvents' "$tmp/b.trace" || fail "bench: no trace"
[ "$(wc -l < "$tmp/b.csv")" -ge 10 ] || fail "bench: csv too short"
# the run's settings are recorded: host allocator arm (default retain), device
# options, profile (none without profile=) and the sim's copy polling
json_has() { # FILE KEY VALUE-REGEX
  grep -Eq "\"$2\":[[:space:]]*$3,?\$" "$1" || fail "$1: want \"$2\": $3"
}
# a sanitizer's allocator refuses mallopt: the run says "system" instead
if [ "$build" = plain ]; then arm_re='"retain"'; else arm_re='"(retain|system)"'; fi
json_has "$tmp/b.json" host_alloc "$arm_re"
json_has "$tmp/b.json" device_profile '"none"'
json_has "$tmp/b.json" sim_spin_us 200
head -1 "$tmp/b.csv" | grep -q ',host_alloc,device_profile,sim_spin_us,kind,launches,updates,capture_ns,instantiate_ns,deps,record,sim_clock$' || fail "bench: csv header"
tail -1 "$tmp/b.csv" | grep -Eq ",${arm_re//\"/},none,200,policy,,,,,explicit,once,real\$" || fail "bench: csv settings"
# every policy bind carries the sim's device time (its events), inside exec
head -1 "$tmp/b.csv" | cut -d, -f8,9 | grep -qx 'exec_ns,device_ns' || fail "bench: csv device_ns column"
awk -F, 'NR > 1 && !($9 > 0 && $9 <= $8) { bad = 1 } END { exit bad }' "$tmp/b.csv" ||
  fail "bench: a policy bind without device time inside its exec time"
grep -q '"device_us"' "$tmp/b.json" || fail "bench: no device_us in JSON"
# the sim's executor reports its own set-up time and counters per policy
[ "$(grep -Ec '"exec_setup_nodes_per_bind":[[:space:]]*[0-9]' "$tmp/b.json")" = 4 ] ||
  fail "bench: not every policy row has the executor's set-up nodes"
[ "$(grep -c '"exec_defs_validated_per_bind"' "$tmp/b.json")" = 4 ] ||
  fail "bench: not every policy row has the Definitions validated"
grep -A1 '"device_setup_us"' "$tmp/b.json" | grep -Eq '"median":[[:space:]]*[0-9]' ||
  fail "bench: no device_setup_us in JSON"
grep -Eq '"arms":[[:space:]]*\[\]' "$tmp/b.json" || fail "bench: JSON lacks the empty arms list"
grep -Eq "host allocator ${arm_re//\"/}" "$tmp/b.svg" || fail "bench: svg arm"
if command -v xmllint >/dev/null; then
  "$src/svg_check.sh" "$tmp/b.svg" >/dev/null || fail "bench: svg segments/labels"
fi
expect_rc 0 "$hbg" bench --layers 2 --rounds 2 --warmup 0 --policy deferred \
  --host-alloc trim --device-options spin=0 --json "$tmp/t.json"
grep -q '^  host allocator trim (glibc defaults.*device profile none, sim copy polling spin=0' \
  "$tmp/out" || fail "bench: table header lacks the arm"
json_has "$tmp/t.json" host_alloc '"trim"'
json_has "$tmp/t.json" sim_spin_us 0
json_has "$tmp/t.json" device_options '"spin=0"'
expect_rc 0 "$hbg" bench --layers 2 --rounds 2 --warmup 0 --policy deferred \
  --device-options profile=ascend-a2 --json "$tmp/p.json" --csv "$tmp/p.csv" --svg "$tmp/p.svg"
grep -q 'device profile ascend-a2, sim copy polling spin=200' "$tmp/out" || fail "bench: table header lacks the profile"
json_has "$tmp/p.json" device_profile '"ascend-a2"'
tail -1 "$tmp/p.csv" | grep -Eq ',ascend-a2,200,policy,,,,,explicit,once,real$' || fail "bench: csv profile"
grep -q 'device profile ascend-a2' "$tmp/p.svg" || fail "bench: svg profile"
# --deps and --record: each value an arm of every policy, interleaved,
# named policy/deps/record, with the values in JSON and CSV; flat workload
expect_rc 0 "$hbg" bench --workload flat --tasks 40 --rounds 2 --warmup 0 \
  --policy coalesced --deps explicit,inferred --record once,per-bind \
  --json "$tmp/d.json" --csv "$tmp/d.csv"
for a in coalesced/explicit/once coalesced/explicit/per-bind \
         coalesced/inferred/once coalesced/inferred/per-bind; do
  grep -q "^$a " "$tmp/out" || fail "bench: no table row for arm $a"
done
grep -q '40 tasks per bind' "$tmp/out" || fail "bench: table lacks the task count"
json_has "$tmp/d.json" tasks 40
grep -Eq '"deps":[[:space:]]*"inferred"' "$tmp/d.json" || fail "bench: JSON lacks deps"
grep -Eq '"record":[[:space:]]*"per-bind"' "$tmp/d.json" || fail "bench: JSON lacks record"
grep -q '^coalesced/inferred/per-bind,.*,inferred,per-bind,real$' "$tmp/d.csv" || fail "bench: CSV lacks deps/record"
# clock=virtual is labelled in the table, the JSON and every CSV row
expect_rc 0 "$hbg" bench --layers 2 --rounds 2 --warmup 0 --policy deferred \
  --device-options profile=ascend-a2,clock=virtual --json "$tmp/v.json" --csv "$tmp/v.csv"
grep -q 'spin=200 (us), clock virtual' "$tmp/out" || fail "bench: table lacks the clock"
grep -Eq '"sim_clock":[[:space:]]*"virtual"' "$tmp/v.json" || fail "bench: JSON lacks sim_clock"
tail -1 "$tmp/v.csv" | grep -q ',virtual$' || fail "bench: CSV lacks sim_clock"
expect_rc 1 "$hbg" bench --layers 2 --rounds 1 --warmup 0 --policy deferred \
  --device-options clock=sundial
grep -q "clock=sundial" "$tmp/err" || fail "bench: bad clock= not named"
# a model at its dims: --model a config.json alone (random weights), the
# weight dtype and bytes in the table and the JSON, the sim's mem= sized;
# a config that lacks a key names it; usage errors exit 2
cat >"$tmp/q3.json" <<'JSON'
{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
 "num_hidden_layers": 2, "vocab_size": 128, "rms_norm_eps": 1e-6,
 "rope_theta": 1000000.0, "tie_word_embeddings": true}
JSON
expect_rc 0 "$hbg" bench --model "$tmp/q3.json" --weights f32 --kv-len 16 \
  --rounds 2 --warmup 0 --policy coalesced --json "$tmp/m.json"
grep -q 'workload qwen3, 2 layers' "$tmp/out" || fail "bench --model: header"
grep -q 'weights f32, .* MB; KV cache 0.0 MB' "$tmp/out" || fail "bench --model: weight line"
grep -q '^coalesced .*yes' "$tmp/out" || fail "bench --model: not verified"
grep -Eq '"weight_dtype":[[:space:]]*"f32"' "$tmp/m.json" || fail "bench --model: JSON weight_dtype"
grep -Eq '"kv_bytes":[[:space:]]*8192' "$tmp/m.json" || fail "bench --model: JSON kv_bytes"
sed 's/"intermediate_size": 96,//' "$tmp/q3.json" >"$tmp/q3bad.json"
expect_rc 1 "$hbg" bench --model "$tmp/q3bad.json" --rounds 1 --policy coalesced
grep -q "q3bad.json: intermediate_size is missing" "$tmp/err" || fail "bench --model: missing key not named"
expect_rc 2 "$hbg" bench --model "$tmp/q3.json" --workload dsv4
grep -q -- "--model is for --workload qwen3" "$tmp/err" || fail "bench --model with another workload"
expect_rc 2 "$hbg" bench --workload qwen3
grep -q -- "--workload qwen3 needs --model" "$tmp/err" || fail "bench qwen3 without --model"
expect_rc 2 "$hbg" bench --weights f16
grep -q "bad --weights 'f16'" "$tmp/err" || fail "bench: bad --weights message"
expect_rc 2 "$hbg" bench --kv-len 70000
expect_rc 2 "$hbg" bench --deps sometimes
grep -q 'bad --deps' "$tmp/err" || fail "bench: bad --deps message"
expect_rc 2 "$hbg" bench --record always
grep -q 'bad --record' "$tmp/err" || fail "bench: bad --record message"
expect_rc 2 "$hbg" bench --host-alloc keep
grep -q "bad --host-alloc 'keep': want retain or trim" "$tmp/err" || fail "bench: bad --host-alloc message"
expect_rc 2 "$hbg" bench --host-alloc
"$hbg" bench --help | grep -q -- '--host-alloc ARM' || fail "bench --help: no --host-alloc"
# peer arms (--arm): listed with the device they need; a bad list, or a
# device other than cuda, is a usage error before anything runs
expect_rc 0 "$hbg" bench --help
grep -q -- '--arm LIST' "$tmp/out" || fail "bench --help: no --arm"
grep -Eq '^ +eager +one kernel launch per kernel call' "$tmp/out" || fail "bench --help: no eager arm"
grep -Eq '^ +cuda-graph +the step captured once as a CUDA graph' "$tmp/out" || fail "bench --help: no cuda-graph arm"
grep -q 'they need --device cuda' "$tmp/out" || fail "bench --help: arms do not say they need cuda"
for bad in nope eager,nope eager,eager eager, ,eager; do
  expect_rc 2 "$hbg" bench --arm "$bad" --rounds 1
  grep -q "bad --arm: want a comma list of distinct names from eager,cuda-graph" "$tmp/err" ||
    fail "bench --arm $bad: no message"
done
expect_rc 2 "$hbg" bench --arm eager --device sim --rounds 1 --json "$tmp/arm.json"
grep -q -- "--arm eager needs --device cuda: the peer executors launch CUDA kernels, and this run's device is sim" "$tmp/err" ||
  fail "bench --arm on sim: no message"
[ ! -e "$tmp/arm.json" ] || fail "bench --arm on sim: wrote output"
! grep -q hbg_runtime_create "$tmp/err" || fail "bench --arm on sim: opened a runtime first"
HBG_DEVICE=sim expect_rc 2 "$hbg" bench --arm cuda-graph --rounds 1
grep -q -- "--arm cuda-graph needs --device cuda" "$tmp/err" || fail "bench --arm, HBG_DEVICE=sim: no message"
# --host-alloc reaches the allocator: deferred mallocs ~2.5 MB of images per
# bind and frees them at completion; under trim glibc returns them to the
# kernel and every bind faults them in again, under retain it does not.
# (Sanitizer allocators ignore mallopt; GLIBC_TUNABLES would override.)
faults() { # ARM -> integer minor faults per bind of deferred, 40 layers
  expect_rc 0 "$hbg" bench --policy deferred --rounds 4 --warmup 5 --quiet \
    --host-alloc "$1" --json "$tmp/f.json"
  sed -n 's/.*"minor_faults_per_bind":[[:space:]]*\([0-9]*\).*/\1/p' "$tmp/f.json"
}
case "$(uname -s)/$build/${GLIBC_TUNABLES:-}" in
Linux/plain/)
  fr=$(faults retain); ft=$(faults trim)
  [ -n "$fr" ] && [ -n "$ft" ] || fail "bench: no minor_faults_per_bind"
  [ "$fr" -lt 20 ] && [ "$ft" -gt 100 ] ||
    fail "bench: --host-alloc has no effect (faults per bind: retain $fr, trim $ft)" ;;
*) echo "cli: --host-alloc fault check skipped ($build build)" ;;
esac
expect_rc 0 "$hbg" bench --workload dsv4 --layers 2 --rounds 2 --warmup 1 --policy coalesced
# which binds are verified: block ends by default, every N-th, or the last
verified_binds() { # expected count, bench options...
  want=$1; shift
  expect_rc 0 "$hbg" bench --layers 2 --rounds 6 --warmup 0 --interleave 3 \
    --policy deferred --quiet --json "$tmp/v.json" "$@"
  grep -Eq "\"verified_binds\":[[:space:]]*$want[,}]?\$" "$tmp/v.json" ||
    fail "bench $*: want $want verified binds"
}
verified_binds 2
grep -Eq '"verify_every":[[:space:]]*"block"' "$tmp/v.json" || fail "bench: verify_every not block"
verified_binds 2 --verify-every block
verified_binds 6 --verify-every 1
verified_binds 3 --verify-every 2
verified_binds 1 --verify-every 0
expect_rc 2 "$hbg" bench --verify-every blocks
expect_rc 2 "$hbg" bench --policy no-such-policy
expect_rc 1 "$hbg" bench --device no-such-device --rounds 1
expect_rc 2 "$hbg" bench --workload no-such-workload --rounds 1
grep -q "unknown workload 'no-such-workload'" "$tmp/err" || fail "bench: unknown workload message"
# --layers: the limit is in --help and named when exceeded
expect_rc 0 "$hbg" bench --help
grep -q -- "--layers N .*at most 100000" "$tmp/out" || fail "bench --help: no layer limit"
expect_rc 2 "$hbg" bench --layers 100001 --rounds 1
grep -q "at most 100000 layers" "$tmp/err" || fail "bench: --layers over the limit"
# --def-size: padded images travel (deferred ships 2 x 130,192 B of
# Definition per bind), the size is labelled, over-limit sizes are refused
expect_rc 0 "$hbg" bench --layers 2 --rounds 2 --warmup 1 --policy deferred,coalesced \
  --def-size 130192 --json "$tmp/d.json" --svg "$tmp/d.svg"
grep -q "Definitions padded to 130192 B" "$tmp/d.svg" || fail "bench --def-size: not in the SVG"
grep -q "padded to at least 130192 B" "$tmp/out" || fail "bench --def-size: not labelled"
grep -Eq '"def_size":[[:space:]]*130192' "$tmp/d.json" || fail "bench --def-size: not in JSON"
grep -Eq '"def_bytes_per_bind":[[:space:]]*260384' "$tmp/d.json" || fail "bench --def-size: deferred def bytes"
expect_rc 2 "$hbg" bench --def-size 17m --rounds 1
grep -q "at most 16777216 bytes" "$tmp/err" || fail "bench: --def-size over the limit"
# the library's message, not only the code
expect_rc 1 "$hbg" bench --device-options mem=1 --rounds 1
grep -q "sim: bad or out-of-range value in 'mem=1'" "$tmp/err" || fail "bench: no device message"
HBG_PIPELINE_DEPTH=0 expect_rc 1 "$hbg" bench --rounds 1
grep -q "HBG_PIPELINE_DEPTH='0'" "$tmp/err" || fail "bench: bad HBG_PIPELINE_DEPTH not named"
# output paths are checked before the run (the bad device would fail it),
# and a failed run neither leaves a new file nor truncates an old one
for opt in --json --csv --svg --trace; do
  expect_rc 1 "$hbg" bench --device-options mem=1 $opt /no/such/dir/x.out
  grep -q "cannot write /no/such/dir/x.out: No such file or directory" "$tmp/err" ||
    fail "bench $opt: bad path not reported"
  ! grep -q hbg_runtime_create "$tmp/err" || fail "bench $opt: ran before checking the path"
done
echo keep > "$tmp/old.json"
expect_rc 1 "$hbg" bench --device-options mem=1 --json "$tmp/old.json" --csv "$tmp/new.csv"
[ "$(cat "$tmp/old.json")" = keep ] || fail "bench: a failed run truncated --json"
[ ! -e "$tmp/new.csv" ] || fail "bench: a failed run left an empty --csv"

expect_rc 0 "$hbg" selfcheck --iters 64
grep -q 'readback: ok' "$tmp/out" || fail "selfcheck readback"
echo "cli: ok"
