#!/usr/bin/env bash
# The runs behind docs/SCALING.md: hbg bench --devices N and mpirun -n N
# hbg bench --mpi for N = 1 2 4, one run each, then one summary table per
# form (markdown) from their JSON. Extra arguments go to every hbg bench.
# Usage: scripts/scaling.sh BUILD_DIR OUT_DIR [hbg bench options...]
set -eu
build=$1; out=$2; shift 2
hbg=$build/bin/hbg
mkdir -p "$out"
mpirun=(mpirun -n)
[ "$(id -u)" = 0 ] && mpirun=(mpirun --allow-run-as-root -n)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
for n in 1 2 4; do
  echo "load before --devices $n: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$hbg" bench --devices "$n" "$@" --json "$out/devices-$n.json" >"$out/devices-$n.txt"
  echo "load before --mpi -n $n: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "${mpirun[@]}" "$n" --oversubscribe "$hbg" bench --mpi "$@" \
    --json "$out/mpi-$n.json" >"$out/mpi-$n.txt"
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
d = {n: json.load(open("%s/devices-%d.json" % (out, n))) for n in (1, 2, 4)}
m = {n: json.load(open("%s/mpi-%d.json" % (out, n))) for n in (1, 2, 4)}
names = [p["name"] for p in d[1]["aggregate"]["policies"]]
print("One process, one thread per device (control-plane median, us; each "
      "run's own N=1 = device 0 alone, alternate blocks):\n")
print("| policy | " + " | ".join("N=%d: N=1 / all / worst (ratio)" % n
                                  for n in (1, 2, 4)) + " |")
print("|---|" + "---|" * 3)
for i, name in enumerate(names):
    cells = []
    for n in (1, 2, 4):
        p = d[n]["aggregate"]["policies"][i]
        cells.append("%.0f / %.0f / %.0f (%.2fx)" % (
            p["n1_control_plane_median_us"], p["control_plane_median_us"],
            p["worst_control_plane_median_us"], p["worst_ratio_to_n1"]))
    print("| %s | %s |" % (name, " | ".join(cells)))
print("| binds/s (ratio to N=1) | " + " | ".join(
    "%.0f (%.2fx)" % (d[n]["aggregate"]["binds_per_s"],
                      d[n]["aggregate"]["binds_per_s_ratio_to_n1"])
    for n in (1, 2, 4)) + " |")
print("| driving threads' CPU s (process CPU s) | " + " | ".join(
    "%.2f (%.2f)" % (d[n]["aggregate"]["thread_cpu_s"],
                     d[n]["aggregate"]["process_cpu_s"]) for n in (1, 2, 4)) + " |")
print("\nOne rank per device (control-plane median, us: median over the ranks "
      "/ worst rank; ratio of the worst to the -n 1 run):\n")
print("| policy | " + " | ".join("-n %d" % n for n in (1, 2, 4)) + " |")
print("|---|" + "---|" * 3)
base = {}
for i, name in enumerate(names):
    cells = []
    for n in (1, 2, 4):
        v = [r["policies"][i]["control_plane_median_us"] for r in m[n]["ranks"]]
        if n == 1:
            base[name] = v[0]
        cells.append("%.0f / %.0f (%.2fx)" % (statistics.median(v), max(v),
                                               max(v) / base[name]))
    print("| %s | %s |" % (name, " | ".join(cells)))
print("| binds/s across ranks | " + " | ".join(
    "%.0f" % m[n]["binds_per_s"] for n in (1, 2, 4)) + " |")
print("| verified | " + " | ".join(
    "%s" % ("all" if m[n]["verified"] and d[n]["aggregate"]["verified"] else "NO")
    for n in (1, 2, 4)) + " |")
PY
