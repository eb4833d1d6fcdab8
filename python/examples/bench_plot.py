#!/usr/bin/env python3
"""Benchmark every upload policy on a built-in workload and plot the
control-plane phases (matplotlib), like `hbg bench --svg`.

usage: bench_plot.py [WORKLOAD] [OUT.png]
"""
import sys

import hbg

workload = sys.argv[1] if len(sys.argv) > 1 else "qwen3-14b"
out = sys.argv[2] if len(sys.argv) > 2 else "bench.png"

r = hbg.bench(workload=workload, rounds=30, warmup=3)
for name, p in r.policies.items():
    print("%-14s control_plane %8.1f us (median)  verified %s" % (
        name, p["control_plane_us"]["median"], p["verified"]))
try:
    r.plot(path=out)
    print("wrote", out)
except ImportError:
    print("matplotlib not installed: no plot (apt-get install "
          "python3-matplotlib)")
