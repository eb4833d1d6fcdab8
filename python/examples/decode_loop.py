#!/usr/bin/env python3
"""A decode loop from Python: one layer body recorded once as a Graph
Definition, replayed for every layer of every step, checked against numpy.

    layer l:  h = (h + bias[l]) * scale[step]     (scale: a boundary scalar)
"""
import numpy as np

import hbg

LAYERS, DIM = 32, 256


def layer_body(rec):  # runs once, when key 1 is first submitted
    h, bias, out = rec.tensors
    tmp = hbg.Tensor.internal((DIM,))                 # in the graph's heap
    rec.task(hbg.Kernel.ADD, [h, bias, tmp])
    rec.task(hbg.Kernel.SCALE, [tmp.with_mode("in"), out],
             [hbg.Scalar.boundary(0)])


with hbg.Runtime(policy="coalesced") as rt:
    h0 = (np.arange(DIM) % 7 - 3).astype(np.float32)
    bias = [np.full(DIM, 0.01 * l, np.float32) for l in range(LAYERS)]
    act = [rt.alloc(DIM * 4) for _ in range(LAYERS + 1)]
    dbias = [rt.buffer(b) for b in bias]
    rows = hbg.pack([[act[l].tensor(DIM), dbias[l].tensor(DIM),
                      act[l + 1].tensor(DIM, mode="out")]
                     for l in range(LAYERS)])
    for step in range(4):
        scale = 1.0 - 0.0625 * step
        act[0].write(h0)
        with rt.bind() as b:                          # begin ... launch, wait, end
            b.graphs(1, rows, [[hbg.f32(scale)]] * LAYERS, layer_body,
                     chain=True)                      # layer l waits for l - 1
        ref = h0
        for l in range(LAYERS):
            ref = (ref + bias[l]) * np.float32(scale)
        ok = np.array_equal(act[LAYERS].numpy(), ref)
        print("step %d: %d graphs (%d recorded), %d H2D bytes in %d copies, "
              "control plane %.1f us, %s" % (
                  step, b.stats.n_graphs, b.stats.n_recorded,
                  b.stats.h2d_bytes, b.stats.h2d_copies,
                  b.stats.control_plane_ns / 1e3,
                  "matches numpy" if ok else "MISMATCH"))
        assert ok
