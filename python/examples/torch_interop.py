#!/usr/bin/env python3
"""hbg on torch tensors, through DLPack, without a copy.

The weights and activations of a small MLP block stay torch tensors (CPU:
the sim device addresses host memory); ``rt.from_dlpack(t)`` makes each an
hbg Buffer of the same memory. One layer body is recorded once as a
Graph Definition and replayed for every layer of every step; the result is
read through ``torch.from_dlpack(buffer)`` and checked against the same
computation in torch.

    layer l:  h = rmsnorm(x) * w_norm[l]
              x' = x + W_down[l] @ (silu(W_gate[l] @ h) * (W_up[l] @ h))

Exit status 77 (skipped) where torch or libhbg's DLPack calls are missing.
"""
import sys

try:
    import torch
except ImportError:
    print("torch_interop: torch is not installed (Debian: python3-torch)")
    sys.exit(77)

import hbg

if not (hbg._L.HAVE_IMPORT and hbg._L.HAVE_HOST_PTR):
    print("torch_interop: libhbg lacks hbg_buffer_import / "
          "hbg_buffer_host_ptr")
    sys.exit(77)

LAYERS, D, F, STEPS = 6, 64, 128, 3
EPS = 1e-6
ATOL = RTOL = 1e-4  # hbg's reductions run in another order than torch's

torch.manual_seed(0)
w_norm = [1.0 + 0.1 * torch.randn(D) for _ in range(LAYERS)]
w_gate = [torch.randn(F, D) / D ** 0.5 for _ in range(LAYERS)]
w_up = [torch.randn(F, D) / D ** 0.5 for _ in range(LAYERS)]
w_down = [torch.randn(D, F) / F ** 0.5 for _ in range(LAYERS)]
act = [torch.zeros(D) for _ in range(LAYERS + 1)]  # act[l] feeds layer l


def layer_body(rec):  # runs once, when key 1 is first submitted
    x, wn, wg, wu, wd, out = rec.tensors
    h, g, u, a, y = (hbg.Tensor.internal((n,)) for n in (D, F, F, F, D))
    rec.task(hbg.Kernel.RMSNORM, [x, wn, h], [EPS])
    h = h.with_mode("in")
    rec.task(hbg.Kernel.GEMV, [wg, h, g])
    rec.task(hbg.Kernel.GEMV, [wu, h, u])
    rec.task(hbg.Kernel.SILU_MUL, [g.with_mode("in"), u.with_mode("in"), a])
    rec.task(hbg.Kernel.GEMV, [wd, a.with_mode("in"), y])
    rec.task(hbg.Kernel.ADD, [x, y.with_mode("in"), out])


def reference(x):
    for l in range(LAYERS):
        h = x / torch.sqrt(x.pow(2).mean() + EPS) * w_norm[l]
        x = x + w_down[l] @ (torch.nn.functional.silu(w_gate[l] @ h) *
                             (w_up[l] @ h))
    return x


with hbg.Runtime(policy="coalesced", device="sim") as rt:
    # zero-copy imports: each Buffer is the torch tensor's memory
    bw = [[rt.from_dlpack(t) for t in (w_norm[l], w_gate[l], w_up[l],
                                       w_down[l])] for l in range(LAYERS)]
    ba = [rt.from_dlpack(t) for t in act]
    rows = hbg.pack([[ba[l].tensor()] + [w.tensor() for w in bw[l]] +
                     [ba[l + 1].tensor(mode="out")] for l in range(LAYERS)])
    out = torch.from_dlpack(ba[LAYERS])  # hbg's last activation, no copy
    assert out.data_ptr() == act[LAYERS].data_ptr()
    worst = 0.0
    for step in range(STEPS):
        act[0].copy_(torch.randn(D))     # written by torch, read by hbg
        with rt.bind() as b:
            b.graphs(1, rows, record=layer_body, chain=True)
        ref = reference(act[0].clone())
        err = (out - ref).abs().max().item()
        worst = max(worst, err)
        ok = torch.allclose(out, ref, atol=ATOL, rtol=RTOL)
        print("step %d: %d layers as %d graph replays (%d recorded), max "
              "|hbg - torch| = %.3g, %s" % (
                  step, LAYERS, b.stats.n_graphs, b.stats.n_recorded, err,
                  "allclose(atol=rtol=%g)" % ATOL if ok else "MISMATCH"))
        assert ok
    print("max error over %d steps: %.3g" % (STEPS, worst))
