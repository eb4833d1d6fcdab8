#!/usr/bin/env python3
"""Python vs C control plane on qwen3-14b, side by side in one process.

Three arms, interleaved bind by bind, each on its own runtime (same policy):

  C          the built-in qwen3-14b workload: hbg_workload_submit issues the
             decode step (2 tasks, 40 graph submissions, 3 tasks) from C.
  Python     the same shape recorded and issued from Python: one Definition
             of 277 nodes, 26 boundary tensors and 2 boundary scalars per
             layer, 40 layers chained, 2 tasks before and 3 after; one
             Bind.graph() call per layer.
  Python+n   the same bind, the 40 layers in one Bind.graphs() call
             (hbg_submit_graph_n, chained).

The Python arms' boundary tensors are views of two buffers (activations,
weights), as the C workload's are; --buffers separate gives each its own
buffer instead (the library then looks each up among ~1,000 buffers).

host_orch is measured by the library from bind begin to launch, so for the
Python arms it includes the interpreter's time between calls. Per-call cost
is the Python arm's host_orch minus the batched arm's, per layer. hbg.backend
(native or ctypes, HBG_PY_NATIVE=0) is printed with the results.

usage: control_plane_cost.py [--rounds N] [--warmup N] [--policy NAME]
                             [--buffers shared|separate] [--json FILE]
"""
import argparse
import json
import statistics
import time

import numpy as np

import hbg

DIM = 64
WEIGHTS = 24          # boundary tensors = 1 input + 24 weights + 1 output
NODES = 277


class PyQwen:
    """qwen3-14b's graph shape, recorded from Python."""

    def __init__(self, rt, layers, before, after, shared):
        rng = np.random.default_rng(1)
        self.layers, self.before, self.after = layers, before, after
        self.h0 = rng.standard_normal(DIM).astype(np.float32)
        self.w = [[(rng.standard_normal(DIM) * 1e-3).astype(np.float32)
                   for _ in range(WEIGHTS)] for _ in range(layers)]
        self.x = rt.buffer(self.h0)
        self.scratch = rt.alloc(DIM * 4)
        n = DIM * 4
        if shared:  # like the C workload: tensors are views of a few buffers
            acts = rt.alloc((layers + 1) * n)
            wbuf = rt.buffer(np.concatenate([w for ws in self.w for w in ws]))
            self.act = [(acts, l * n) for l in range(layers + 1)]
            self.dw = [[(wbuf, (l * WEIGHTS + j) * n) for j in range(WEIGHTS)]
                       for l in range(layers)]
        else:       # one device buffer per tensor
            self.act = [(rt.alloc(n), 0) for _ in range(layers + 1)]
            self.dw = [[(rt.buffer(w), 0) for w in ws] for ws in self.w]

        def view(bo, mode="in"):
            return bo[0].tensor(DIM, mode=mode, offset=bo[1])
        self.bt = [[view(self.act[l])] + [view(b) for b in self.dw[l]] +
                   [view(self.act[l + 1], "out")] for l in range(layers)]
        self.packed = [hbg.pack(r) for r in self.bt]   # per layer
        self.packed_rows = hbg.pack(self.bt)           # all layers
        self.x_t = self.x.tensor(DIM)
        self.a0_out = view(self.act[0], "out")
        self.out_t = view(self.act[layers])
        self.scr_t = self.scratch.tensor(DIM, mode="out")

    def output(self):
        buf, off = self.act[-1]
        return buf.numpy(shape=(DIM,), offset=off)

    @staticmethod
    def body(rec):
        t = rec.tensors
        h, w, out = t[0], t[1:1 + WEIGHTS], t[-1]
        x = hbg.Tensor.internal((DIM,))
        rec.task(hbg.Kernel.SCALE, [h, x], [hbg.Scalar.boundary(1)])
        for j in range(NODES - 2):
            y = hbg.Tensor.internal((DIM,))
            rec.task(hbg.Kernel.ADD, [x.with_mode("in"), w[j % WEIGHTS], y])
            x = y
        rec.task(hbg.Kernel.SCALE, [x.with_mode("in"), out],
                 [hbg.Scalar.boundary(0)])

    def scalars(self, step):
        return [hbg.f32(1.0), hbg.f32(1.0 + 1e-3 * (step % 7))]

    def submit(self, b, step, batched):
        t = b.task(hbg.Kernel.COPY, [self.x_t, self.a0_out])
        for _ in range(self.before - 1):
            t = b.task(hbg.Kernel.COPY, [self.x_t, self.a0_out], deps=[t])
        sc = self.scalars(step)
        g0 = time.perf_counter_ns()
        if batched:
            t = b.graphs(0x9E3, self.packed_rows, [sc] * self.layers,
                         self.body, deps=[t], chain=True)[-1]
        else:
            for l in range(self.layers):
                t = b.graph(0x9E3, self.packed[l], sc, self.body, deps=[t])
        self.graph_ns = time.perf_counter_ns() - g0
        for _ in range(self.after):
            t = b.task(hbg.Kernel.COPY, [self.out_t, self.scr_t], deps=[t])

    def reference(self, step):
        s0 = np.float32(1.0)
        s1 = np.float32(1.0 + 1e-3 * (step % 7))
        h = self.h0
        for l in range(self.layers):
            x = h * s1
            for j in range(NODES - 2):
                x = x + self.w[l][j % WEIGHTS]
            h = x * s0
        return h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--policy", default="coalesced")
    ap.add_argument("--buffers", choices=("shared", "separate"),
                    default="shared",
                    help="Python arms' boundary tensors: views of a few "
                    "buffers, as the C workload's (shared), or one buffer "
                    "each (separate)")
    ap.add_argument("--json")
    a = ap.parse_args()

    rts = {k: hbg.Runtime(policy=a.policy) for k in ("C", "Python",
                                                     "Python+n")}
    w = rts["C"].workload("qwen3-14b")
    info = w.info
    models = {k: PyQwen(rts[k], info.layers, info.tasks_before,
                        info.tasks_after, a.buffers == "shared")
              for k in ("Python", "Python+n")}
    rec = {k: {"host_orch": [], "control_plane": [], "orch_wall": [],
               "graph_calls": []} for k in rts}
    for step in range(a.warmup + a.rounds):
        for k, rt in rts.items():
            t0 = time.perf_counter_ns()
            b = rt.bind()
            if k == "C":
                w.submit(b, step)
            else:
                models[k].submit(b, step, batched=(k == "Python+n"))
            t1 = time.perf_counter_ns()
            b.launch()
            st = b.wait()
            b.end()
            if step >= a.warmup:
                rec[k]["host_orch"].append(st.host_orch_ns / 1e3)
                rec[k]["control_plane"].append(st.control_plane_ns / 1e3)
                rec[k]["orch_wall"].append((t1 - t0) / 1e3)
                rec[k]["graph_calls"].append(
                    models[k].graph_ns / 1e3 if k in models else float("nan"))
    last = a.warmup + a.rounds - 1
    assert w.verify(last) == 0.0
    for k, m in models.items():
        np.testing.assert_array_equal(m.output(), m.reference(last))

    med = {k: {p: statistics.median(v) for p, v in r.items()}
           for k, r in rec.items()}
    print("policy %s, %d layers, %d measured binds per arm (medians, us); "
          "hbg backend %s, buffers %s" % (a.policy, info.layers, a.rounds,
                                         hbg.backend, a.buffers))
    print("%-10s %10s %14s %14s %12s" % ("arm", "host_orch", "control_plane",
                                         "begin..launch", "graph calls"))
    for k in rts:
        print("%-10s %10.1f %14.1f %14.1f %12.1f" % (
            k, med[k]["host_orch"], med[k]["control_plane"],
            med[k]["orch_wall"], med[k]["graph_calls"]))
    per_call = (med["Python"]["graph_calls"] -
                med["Python+n"]["graph_calls"]) / info.layers
    print("Python cost per submit_graph call: %.2f us" % per_call)
    print("Python over C per bind: %.1f us (per-layer calls), %.1f us "
          "(batched)" % (med["Python"]["host_orch"] - med["C"]["host_orch"],
                         med["Python+n"]["host_orch"] - med["C"]["host_orch"]))
    print("outputs match the numpy / host references")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"policy": a.policy, "layers": info.layers,
                       "rounds": a.rounds, "median_us": med,
                       "python_per_submit_graph_us": per_call}, f, indent=2)
    for rt in rts.values():
        rt.close()


if __name__ == "__main__":
    main()
