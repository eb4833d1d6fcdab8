#!/usr/bin/env bash
# hbg bench --devices / --device-list: N devices from one process, one host
# thread each, beside the N=1 run; every device verified; per-device rows and
# the aggregate in the JSON, aggregate and worst device in the table; the
# usage errors. On the cuda stand-in (HBG_CUDA_LIB set): ordinals reach the
# backend as device=, a device that does not exist fails the run, and
# unverified devices fail it.
# Usage: bench_multi.sh HBG HBG_WITHOUT_MPI|-
set -eu
hbg=$1; nompi=${2:--}
t_name=bench_multi; . "$(dirname "$0")/sh_helpers.sh"
command -v python3 >/dev/null || { echo "SKIP: no python3 to read the JSON"; exit 77; }
small=(--workload qwen3-14b --layers 2 --rounds 4 --warmup 1 --interleave 2)

# sim: 2 devices
expect_rc 0 "$hbg" bench "${small[@]}" --devices 2 --json "$tmp/d2.json"
grep -q '^hbg bench --devices 2: sim' "$tmp/out" || fail "table: no header"
grep -Eq '^coalesced +[0-9.]+ us +[0-9.]+ us +[0-9.]+x +#[01] \(ord [01]\)' "$tmp/out" ||
  fail "table: no coalesced row with the worst device"
grep -q '^binds/s: N=1 [0-9]*, N=2 [0-9]* across devices' "$tmp/out" || fail "table: binds/s"
grep -q "^driving threads' CPU: N=1 " "$tmp/out" || fail "table: CPU time"
grep -q '^verified: 2 of 2 devices, and the N=1 run yes' "$tmp/out" || fail "table: verified"
python3 - "$tmp/d2.json" <<'PY' || fail "json (2 devices)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == "devices" and d["devices"] == 2 and d["device"] == "sim"
rows = d["per_device"]
assert [r["index"] for r in rows] == [0, 1] and [r["ordinal"] for r in rows] == [0, 1]
names = ["deferred", "pinned-eager", "coalesced", "pinned-bulk"]
for r in rows:
    assert r["ok"] and r["error"] is None and r["verified"], r
    assert r["binds"] == 4 * 5 and r["thread_cpu_s"] > 0 and r["binds_per_s"] > 0
    assert [p["name"] for p in r["policies"]] == names
    for p in r["policies"]:
        assert p["verified"] and p["verified_binds"] >= 2 and p["ratio_to_n1"] > 0
    assert r["bench"]["policies"][0]["binds"] == 4   # the plain run's JSON
n1 = d["n1"]
assert n1["device"]["verified"] and n1["device"]["binds"] == 20 and n1["binds_per_s"] > 0
a = d["aggregate"]
assert a["verified"] and a["verified_devices"] == 2 and a["binds"] == 40
assert a["thread_cpu_s"] > 0 and a["binds_per_s"] > 0 and a["binds_per_s_ratio_to_n1"] > 0
for p, name in zip(a["policies"], names):
    assert p["name"] == name and p["worst_device"] in (0, 1)
    worst = rows[p["worst_device"]]["policies"][names.index(name)]
    assert p["worst_control_plane_median_us"] == worst["control_plane_median_us"]
    assert max(r["policies"][names.index(name)]["control_plane_median_us"]
               for r in rows) == p["worst_control_plane_median_us"]
    assert abs(p["ratio_to_n1"] * p["n1_control_plane_median_us"]
               - p["control_plane_median_us"]) < 1e-6 * p["control_plane_median_us"]
PY

# a list of ordinals (labels on the sim), one policy
expect_rc 0 "$hbg" bench "${small[@]}" --policy coalesced --device-list 3,1,2 \
  --json "$tmp/l.json" --quiet
[ ! -s "$tmp/out" ] || fail "--quiet printed a table"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["devices"] == 3 and [r["ordinal"] for r in d["per_device"]] == [3, 1, 2]
assert d["n1"]["device"]["ordinal"] == 3 and d["aggregate"]["verified"]
' "$tmp/l.json" || fail "json (--device-list)"

# usage errors
expect_rc 2 "$hbg" bench --devices 0
expect_rc 2 "$hbg" bench --devices 65
expect_rc 2 "$hbg" bench --devices two
expect_rc 2 "$hbg" bench --device-list 1,1
expect_rc 2 "$hbg" bench --device-list 1,
expect_rc 2 "$hbg" bench --devices 2 --device-list 0,1
grep -q 'exclude one another' "$tmp/err" || fail "no message for --devices with --device-list"
expect_rc 2 "$hbg" bench --devices 2 --csv "$tmp/x.csv"
grep -q 'for one device' "$tmp/err" || fail "no message for --csv"
expect_rc 2 "$hbg" bench --devices 2 --device-options spin=0,device=1
grep -q 'take device= out' "$tmp/err" || fail "no message for device="
[ ! -e "$tmp/x.csv" ] || fail "a refused run left its output"
if [ "$nompi" != - ]; then
  expect_rc 2 "$hbg" bench --mpi --devices 2
  grep -q 'exclude one another' "$tmp/err" || fail "no message for --mpi with --devices"
  # the same CLI built without MPI: --mpi is a usage error naming it
  expect_rc 2 "$nompi" bench --mpi
  grep -q 'built without MPI support' "$tmp/err" || fail "--mpi without MPI: no message"
fi

if [ -n "${HBG_CUDA_LIB:-}" ]; then
  cuda=(--device cuda --policy deferred,coalesced "${small[@]}")
  # ordinals 0 and 3 of 4 stand-in GPUs, executed on the device, verified
  HBG_MOCK_CUDA_NDEV=4 expect_rc 0 "$hbg" bench "${cuda[@]}" \
    --device-options exec=device --device-list 0,3 --json "$tmp/c.json"
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["per_device"]
assert [r["device_options"] for r in rows] == ["exec=device,device=0", "exec=device,device=3"], rows
assert all(r["verified"] for r in rows) and d["aggregate"]["verified"]
assert rows[1]["bench"]["device_options"] == "exec=device,device=3"
' "$tmp/c.json" || fail "json (cuda ordinals)"
  # ordinal 3 of 2: that device's open fails, named, exit 1
  HBG_MOCK_CUDA_NDEV=2 expect_rc 1 "$hbg" bench "${cuda[@]}" \
    --device-options exec=device --device-list 0,3
  grep -q "device #1 (ordinal 3, options 'exec=device,device=3') failed: .*device=3: only 2 GPU" "$tmp/err" ||
    fail "missing device: no message"
  # the launch verifier (exec=verify) leaves outputs unwritten: every
  # device unverified
  HBG_MOCK_CUDA_NDEV=2 expect_rc 1 "$hbg" bench "${cuda[@]}" --devices 2 \
    --device-options exec=verify --json "$tmp/u.json"
  grep -q '0 of 2 devices (and the N=1 run: no) matched' "$tmp/err" ||
    fail "unverified devices: no message"
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert not d["aggregate"]["verified"]
assert [r["verified"] for r in d["per_device"]] == [False, False]
' "$tmp/u.json" || fail "json (unverified)"
fi
echo "bench_multi: ok"
