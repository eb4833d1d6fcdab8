#!/usr/bin/env bash
# hbg bench --mpi under mpirun: 2 ranks on sim devices, rank 0's combined
# JSON and table; a failure injected on rank 1 (and on rank 0) ends the run
# non-zero, the failed rank's error printed by rank 0, well within the
# bound (timeout); on the cuda stand-in (HBG_CUDA_LIB set) the ranks take
# ordinals 0 and 1 from the local rank, and a rank whose device does not
# exist fails the run. Exit 77 without mpirun.
# Usage: bench_mpi.sh HBG
set -eu
hbg=$1
t_name=bench_mpi; . "$(dirname "$0")/sh_helpers.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
command -v timeout >/dev/null || { echo "SKIP: no timeout"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3 to read the JSON"; exit 77; }
# containers: no ptrace for Open MPI's single-copy path, no rsh agent
# needed; one host: shared memory only (Open MPI's TCP transport takes two
# of its locks in both orders, which ThreadSanitizer reports under make tsan)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl=self,vader
export OMPI_MCA_plm_rsh_agent=
# Open MPI as root needs --allow-run-as-root; 2 ranks on a 2-core host
mpi=(mpirun --allow-run-as-root --oversubscribe -n 2)
BOUND=120
run() { # run WANT_RC cmd...: within BOUND seconds
  local want=$1; shift
  set +e; timeout $BOUND "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?; set -e
  [ "$rc" != 124 ] || { cat "$tmp/err" >&2; fail "'$*' still running after ${BOUND}s"; }
  if [ "$want" = nonzero ]; then
    [ "$rc" != 0 ] || { cat "$tmp/out" >&2; fail "'$*' exited 0"; }
  elif [ "$rc" != "$want" ]; then
    cat "$tmp/err" >&2; fail "'$*' exited $rc, expected $want"
  fi
}
small=(--workload qwen3-14b --layers 2 --rounds 4 --warmup 1 --interleave 2)

run 0 "${mpi[@]}" "$hbg" bench --mpi "${small[@]}" --json "$tmp/m.json"
grep -q '^hbg bench --mpi: 2 ranks, sim' "$tmp/out" || fail "table: no header"
grep -Eq '^0 +[^ ]+ +0 +yes +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+$' "$tmp/out" || fail "table: rank 0 row"
grep -Eq '^1 +[^ ]+ +1 +yes ' "$tmp/out" || fail "table: rank 1 row"
grep -q '^binds/s across ranks: [0-9]' "$tmp/out" || fail "table: binds/s"
python3 - "$tmp/m.json" <<'PY' || fail "combined json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == "mpi" and d["size"] == 2 and d["verified"] is True
assert d["binds_per_s"] > 0
r = d["ranks"]
assert [x["rank"] for x in r] == [0, 1] and [x["ordinal"] for x in r] == [0, 1]
for x in r:
    assert x["ok"] and x["verified"] and x["error"] is None, x
    assert x["ordinal_from"] == "OMPI_COMM_WORLD_LOCAL_RANK" and x["host"]
    assert x["binds"] == 20 and x["thread_cpu_s"] > 0
    assert [p["name"] for p in x["policies"]] == ["deferred", "pinned-eager", "coalesced", "pinned-bulk"]
    assert all(p["verified"] and p["control_plane_median_us"] > 0 for p in x["policies"])
    assert x["bench"]["rounds"] == 4 and x["bench"]["device"] == "sim"
PY

# device= of the device options overrides the local rank
run 0 "${mpi[@]}" "$hbg" bench --mpi "${small[@]}" --policy coalesced \
  --device-options spin=0,device=5 --json "$tmp/o.json" --quiet
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [x["ordinal"] for x in d["ranks"]] == [5, 5], d["ranks"]
assert all(x["ordinal_from"].startswith("device=") for x in d["ranks"])
assert d["ranks"][0]["device_options"] == "spin=0" and d["verified"]
' "$tmp/o.json" || fail "device= override"

# a device= that is not an ordinal: the rank fails, named
run nonzero mpirun --allow-run-as-root -n 1 "$hbg" bench --mpi "${small[@]}" \
  --device-options device=first
grep -q 'bad device= in the device options' "$tmp/err" &&
  grep -q 'hbg bench: rank 0 failed: ' "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "bad device= not reported"; }

# a failure on rank 1 while rank 0 has a long run ahead (about 10 minutes
# here): rank 0 prints it and aborts at once
long=(--workload qwen3-14b --layers 2 --rounds 100000 --warmup 0)
start=$(date +%s)
HBG_TEST_FAIL_RANK=1 run nonzero "${mpi[@]}" -x HBG_TEST_FAIL_RANK "$hbg" bench \
  --mpi "${long[@]}" --json "$tmp/f.json"
grep -q 'hbg bench: rank 1 failed: host .*, sim device 1 .*failure injected by HBG_TEST_FAIL_RANK' "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "rank 1's failure not reported by rank 0"; }
[ ! -e "$tmp/f.json" ] || fail "a failed run wrote the JSON"
echo "bench_mpi: rank 1's failure ended the run in $(( $(date +%s) - start )) s"
HBG_TEST_FAIL_RANK=0 run nonzero "${mpi[@]}" -x HBG_TEST_FAIL_RANK "$hbg" bench \
  --mpi "${long[@]}"
grep -q 'hbg bench: rank 0 failed: .*HBG_TEST_FAIL_RANK' "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "rank 0's failure not reported"; }

if [ -n "${HBG_CUDA_LIB:-}" ]; then
  cuda=(--device cuda --device-options exec=device --policy deferred,coalesced "${small[@]}")
  HBG_MOCK_CUDA_NDEV=2 run 0 "${mpi[@]}" -x HBG_CUDA_LIB -x HBG_MOCK_CUDA_NDEV \
    "$hbg" bench --mpi "${cuda[@]}" --json "$tmp/c.json"
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [x["device_options"] for x in d["ranks"]] == ["exec=device,device=0", "exec=device,device=1"]
assert d["verified"]
' "$tmp/c.json" || fail "cuda ordinals"
  # one stand-in GPU: rank 1's device=1 does not open
  HBG_MOCK_CUDA_NDEV=1 run nonzero "${mpi[@]}" -x HBG_CUDA_LIB -x HBG_MOCK_CUDA_NDEV \
    "$hbg" bench --mpi "${cuda[@]}"
  grep -q 'hbg bench: rank 1 failed: .*cuda device 1 .*device=1: only 1 GPU' "$tmp/err" ||
    { cat "$tmp/err" >&2; fail "rank 1's open failure not reported"; }
fi
echo "bench_mpi: ok"
