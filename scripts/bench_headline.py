#!/usr/bin/env python3
"""Print docs/BENCHMARKS.md's headline tables from scripts/bench-headline.sh's
runs.

Usage: bench_headline.py OUT_DIR   (bench-headline.sh calls it). Reads
OUT_DIR/meta.txt, OUT_DIR/sim-WORKLOAD-REP.json (`hbg bench --json`) and
OUT_DIR/py-POLICY-nativeN-REP.json (control_plane_cost.py --json) and prints
Markdown on stdout. Exits 1 when a policy did not verify.

Each process gives one median per policy (or arm); a table cell is the
median of those over the processes, with their range in brackets when there
was more than one process. The ratio column is the ratio of two such cells.
"""
import glob
import json
import math
import os
import re
import statistics
import sys

POLICIES = ["deferred", "pinned-eager", "coalesced", "pinned-bulk"]
PY_POLICIES = ["coalesced", "pinned-eager", "deferred"]
PY_ARMS = ["C", "Python", "Python+n"]
TITLES = {"qwen3-14b": "Four policies on qwen3-14b",
          "dsv4": "Four policies on dsv4"}


def meta(out):
    m = {}
    with open(os.path.join(out, "meta.txt")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            m[k] = v
    return m


def measured(m):
    commit = m.get("commit", "unknown")
    if m.get("dirty"):
        commit += " (with uncommitted changes)"
    cpu = m.get("cpu") or "CPU model not reported"
    return ("Measured at commit %s on %s (%s–%s UTC), load average %s at the "
            "start and %s at the end; machine: %s, %s CPUs (`nproc`), %s."
            % (commit, m.get("date"), m.get("start"), m.get("end"),
               m.get("load_start"), m.get("load_end"), m.get("uname"),
               m.get("nproc"), cpu))


def cell(xs, fmt="%.1f"):
    s = fmt % statistics.median(xs)
    if len(xs) > 1:
        s += " (%s–%s)" % (fmt % min(xs), fmt % max(xs))
    return s


def rng(xs, fmt="%.3f"):
    lo, hi = fmt % min(xs), fmt % max(xs)
    return lo if lo == hi else "%s–%s" % (lo, hi)


def sim_tables(out, m, bad):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "sim-*.json"))):
        w = re.match(r"sim-(.+)-(\d+)\.json$", os.path.basename(path)).group(1)
        with open(path) as f:
            runs.setdefault(w, []).append(json.load(f))
    order = m.get("workloads", "").split()
    for w in sorted(runs, key=lambda w: (order.index(w) if w in order
                                         else len(order), w)):
        ds = runs[w]
        n = len(ds)
        layers = ds[0]["layers"]
        cp = {p: [] for p in POLICIES}
        co = []
        checks = 0
        for d in ds:
            pol = {p["name"]: p for p in d["policies"]}
            for p in POLICIES:
                if p not in pol:
                    bad.append("%s: policy %s missing" % (w, p))
                    continue
                cp[p].append(pol[p]["control_plane_us"]["median"])
                checks += pol[p]["verified_binds"]
                if not pol[p]["verified"]:
                    bad.append("%s: %s did not verify" % (w, p))
            if "coalesced" in pol and "deferred" in pol:
                co.append(pol["coalesced"]["control_plane_us"]["median"] /
                          pol["deferred"]["control_plane_us"]["median"])
        base = statistics.median(cp["deferred"]) if cp["deferred"] else math.nan
        print("### %s" % TITLES.get(w, "Four policies on " + w))
        print()
        print("Command, run %d time%s (one process each, the workloads "
              "alternated):" % (n, "" if n == 1 else "s"))
        print()
        print("```")
        print("build/bin/hbg bench --workload %s --rounds %s --warmup %s "
              "--host-alloc retain \\" % (w, m["rounds"], m["warmup"]))
        print("  --device-options profile=none --quiet --json run.json")
        print("```")
        print()
        print(measured(m))
        print()
        print("sim device, %d layers, the four policies interleaved in one "
              "process; control_plane per step in µs: each process's median, "
              "then the median over the %d process%s%s; the ratio is the "
              "policy's median over deferred's. Every policy verified "
              "against the host reference (%d checks)."
              % (layers, n, "" if n == 1 else "es",
                 "" if n == 1 else " and their range", checks))
        print()
        print("| policy | control_plane µs | ratio to deferred |")
        print("|---|---:|---:|")
        for p in POLICIES:
            if cp[p]:
                print("| %s | %s | %.3f |" % (p, cell(cp[p]),
                                              statistics.median(cp[p]) / base))
        print()
        if co:
            print("coalesced / deferred control_plane in each process: %s."
                  % rng(co))
            print()


def num(x):
    return "{:,.1f}".format(x)


def py_table(out, m, bad):
    files = sorted(glob.glob(os.path.join(out, "py-*.json")))
    if not files:
        return False
    runs = {}
    for path in files:
        g = re.match(r"py-(.+)-native(\d)-(\d+)\.json$", os.path.basename(path))
        with open(path) as f:
            d = json.load(f)
        runs.setdefault((g.group(1), g.group(2)), []).append(
            (int(g.group(3)), d["median_us"]))
    n = int(m["repeat"])
    backends = m.get("py_backends", "0").split()
    print("### Python vs C control plane")
    print()
    print("Commands (the package from python/src, the library at "
          "build/libhbg.so; %d run%s per policy and backend, one process "
          "each):" % (n, "" if n == 1 else "s"))
    print()
    print("```sh")
    print("for policy in coalesced pinned-eager deferred; do for run in %s; "
          "do for native in %s; do" % (" ".join(str(i) for i in range(1, n + 1)),
                                       " ".join(backends)))
    print("  HBG_PY_NATIVE=$native python3 python/examples/control_plane_cost.py \\")
    print("    --rounds %s --warmup %s --policy $policy --json "
          "out/$policy-native$native-run$run.json" % (m["py_rounds"],
                                                       m["py_warmup"]))
    print("done; done; done")
    print("```")
    print()
    print(measured(m) + " %s." % m.get("py_version", "CPython"))
    print()
    if "1" not in backends:
        print("hbg._native was not built: ctypes only.")
        print()
    print("| policy | backend | arm | host_orch µs (× C) | control_plane µs "
          "(× C) | graph calls µs | control_plane ÷ C, runs %s |"
          % " / ".join(str(i) for i in range(1, n + 1)))
    print("|---|---|---|---|---|---|---|")
    for policy in PY_POLICIES:
        for nat in backends:
            rs = sorted(runs.get((policy, nat), []))
            if not rs:
                bad.append("python %s native=%s: no run" % (policy, nat))
                continue
            backend = "native" if nat == "1" else "ctypes"
            med = {a: {ph: statistics.median(r[a][ph] for _, r in rs)
                       for ph in ("host_orch", "control_plane", "graph_calls")}
                   for a in PY_ARMS}
            c = med["C"]
            for a in PY_ARMS:
                x = med[a]
                if a == "C":
                    print("| %s | %s | C | %s | %s | — | |" % (
                        policy, backend, num(x["host_orch"]),
                        num(x["control_plane"])))
                    continue
                per_run = " / ".join(
                    "%.2f" % (r[a]["control_plane"] / r["C"]["control_plane"])
                    for _, r in rs)
                print("| %s | %s | %s | %s (%.2f×) | %s (%.2f×) | %s | %s |" % (
                    policy, backend, a, num(x["host_orch"]),
                    x["host_orch"] / c["host_orch"], num(x["control_plane"]),
                    x["control_plane"] / c["control_plane"],
                    num(x["graph_calls"]), per_run))
    print()
    return True


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    m = meta(out)
    bad = []
    print("<!-- scripts/bench-headline.sh at %s, %s %s UTC -->"
          % (m.get("commit"), m.get("date"), m.get("start")))
    print()
    sim_tables(out, m, bad)
    if not py_table(out, m, bad):
        print("(Python vs C: not run, no python3 with numpy or --python no.)")
        print()
    print("The GPU table (hbg, eager and CUDA Graphs on an H200) comes from "
          "scripts/gpu-check.sh, the upstream's table from "
          "scripts/upstream-table.sh.")
    for b in bad:
        print("bench_headline.py: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
