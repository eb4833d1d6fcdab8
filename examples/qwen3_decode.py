#!/usr/bin/env python3
"""Qwen3 decode through hbg from Python, checked against PyTorch.

One decoder layer is recorded once as a Graph Definition and replayed for
every layer of every step (``Bind.graphs(..., chain=True)``); the weights,
the KV cache, the activations and the RoPE tables stay torch tensors that
hbg uses in place (``Runtime.from_dlpack``, no copy). Each step runs through
hbg, then through an independent torch implementation of the same model
(python/tests/qwen3_torch.py, written from the model's definition), and the
hidden state after every layer is compared.

    qwen3_decode.py --random --config tiny --steps 8
    qwen3_decode.py --random --config qwen3-0.6b --layers 2 --weights bf16
    qwen3_decode.py --model DIR          # a Hugging Face Qwen3 checkpoint
                                         # (config.json + safetensors)

The layer graph (per layer: 20 boundary tensors, 2 boundary scalars:
position p and attention length p + 1) is tiled so that
several of the sim's workers share a layer: one GEMV node per head for q,
k and v, q_norm / k_norm / RoPE / attention per head, 128-row tiles for
the o, gate, up and down projections (the residual adds and SiLU * up per
tile). The step's K and V rows are boundary tensors [kv_heads][head_dim]
with strides [T * head_dim, 1], views of the cache at position p, so the
same Definition writes a new row every step; each head's k RoPE and v
projection writes its [head_dim] run of them. The layer's caches are
boundary tensors too ([kv_heads][T][head_dim], inputs), and attention
reads its kv head's [T][head_dim] slice of them. The recorder takes each
view for a view of the smallest boundary tensor holding it: a head's run
of the row belongs to the row (and moves with it), a head's slice of the
cache to the cache, since a strided tensor holds only its elements, not
the holes between them (before main's 0db40f8 the row's extent held the
slice, which then followed the row: wrong keys from the second step on,
and no error). Around
the layer chain, two ordinary tasks: the embedding row (COPY, bf16 ->
f32 with bf16 weights) and the final RMSNorm (model.norm). Per-layer
scratch (attention output, post-attention residual, SiLU * up) is a torch
tensor too, for the joins between tiles.

Weights: --weights f32, or bf16 (GEMV's W and RMSNorm's w read bf16,
everything else f32; the torch reference widens the same bf16 weights to
f32, so the two compute the same function).

Tolerance. hbg and torch both compute in f32 but sum in different orders
(hbg's GEMV in four lanes, its RMSNorm and softmax as fixed trees; torch's
BLAS its own way), so they differ by rounding. The error is the normwise
relative error max|hbg - torch| / max|torch| of a layer's output (an
element near zero does not blow it up). Measured with random f32 weights
(--random --f64 --config C --layers N --steps S, the vocab cut with
--vocab 1024 / 4096 for 0.6b to draw the embedding quickly; the last two
columns are the final state's distance to a float64 computation, worst
over the steps):

    config                          worst over steps x layers   vs float64
                                    hbg vs torch f32            hbg    torch
    tiny, 2 layers, 6 steps         7.2e-7                      2.4e-7 3.6e-7
    qwen3-0.6b dims, 2 layers, 4    2.4e-6                      9.4e-7 2.0e-6
    qwen3-0.6b dims, 28 layers, 6   3.1e-6                      1.6e-6 2.8e-6
      the same, --weights bf16      3.7e-6                      1.5e-6 2.9e-6

so hbg is as close to float64 as torch is, and the error hardly grows
with depth (each layer's RMSNorm rescales). --rtol (default 1e-4) leaves
more than 30x over the 28-layer figure; a real bug (a wrong head,
position or cache row) gives errors of order 1 (python/tests/
test_model_qwen3.py checks that a corrupted cache row is caught).
Exit status 1 when any layer of any step passes it.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

try:
    import torch
except ImportError:
    print("qwen3_decode: torch is not installed (Debian: python3-torch)")
    sys.exit(77)

import hbg  # noqa: E402
from qwen3_torch import (PRESETS, Qwen3Torch, layer_names,  # noqa: E402
                         preset, random_weights, read_checkpoint, rel_error,
                         rope_tables)

LAYER_KEY = 0x71776E33  # "qwn3": the layer graph's key
TILE = 128              # rows per o / gate / up / down tile

_HBG_DTYPE = {torch.float32: hbg.DType.F32, torch.bfloat16: hbg.DType.BF16}
_ESIZE = {hbg.DType.F32: 4, hbg.DType.BF16: 2}

# boundary tensors of the layer graph, in order
(B_X, B_XOUT, B_NORM_IN, B_WQ, B_WK, B_WV, B_QNORM, B_KNORM, B_WO,
 B_NORM_POST, B_WG, B_WU, B_WD, B_COS, B_SIN, B_KROW, B_VROW, B_SCRATCH,
 B_KCACHE, B_VCACHE) = range(20)


def _sub(t, shape, start=0, mode=hbg.Access.IN, strides=None):
    """A view of a boundary (or inner) tensor: shape at element `start`."""
    return hbg.Tensor(t.addr, shape, t.dtype, mode,
                      t.offset + start * _ESIZE[t.dtype], strides)


class HbgQwen3:
    """A Qwen3 decode stack on an hbg runtime.

    weights: Hugging Face names -> torch tensors (f32 or bf16; every
    tensor of the layers of one dtype), kept and used in place. layers
    (default cfg.layers) cuts the stack; max_positions is the KV cache's
    T. ``step(token, pos)`` runs one decode step; then ``hidden(i)`` is
    the state after layer i and ``final`` the state after model.norm
    (torch tensors viewing hbg's memory: read them before the next
    step)."""

    def __init__(self, rt, cfg, weights, max_positions, layers=None,
                 tile=TILE):
        self.rt, self.cfg, self.tile = rt, cfg, tile
        self.layers = L = cfg.layers if layers is None else layers
        self.T = T = max_positions
        H, D, Hk = cfg.hidden, cfg.head_dim, cfg.kv_heads
        QD, F = cfg.heads * D, cfg.intermediate
        self.eps = cfg.eps
        wdt = weights[layer_names(0)["q_proj"]].dtype
        if wdt not in _HBG_DTYPE:
            raise TypeError("weights of dtype %s (want float32 or bfloat16)"
                            % wdt)
        self.wdtype = _HBG_DTYPE[wdt]
        self.keep = []          # the torch tensors hbg uses in place
        self.bufs = []          # their hbg Buffers: a Tensor does not keep
                                # its Buffer alive, and a collected import
                                # is forgotten by the runtime
        self.wbytes = 0         # bytes of the weights among them

        def imp(t, weight=False):
            t = t.contiguous()
            self.keep.append(t)
            if weight:
                self.wbytes += t.numel() * t.element_size()
            b = rt.from_dlpack(t)
            self.bufs.append(b)
            return b

        self.embed = imp(weights["model.embed_tokens.weight"], True)
        self.norm_w = imp(weights["model.norm.weight"], True)
        # activations: act[i] feeds layer i, act[L] the final norm
        self.act = torch.zeros(L + 1, H)
        self.final = torch.zeros(H)
        self.k_cache = torch.zeros(L, Hk, T, D)
        self.v_cache = torch.zeros(L, Hk, T, D)
        cos, sin = rope_tables(cfg, T)
        # scratch per layer: attention output [QD] | h [H] | f [F]
        self.offs = [0, QD, QD + H]
        self.scratch = torch.zeros(L, QD + H + F)
        b_act, b_final = imp(self.act), imp(self.final)
        b_k, b_v = imp(self.k_cache), imp(self.v_cache)
        b_cos, b_sin, b_scr = imp(cos), imp(sin), imp(self.scratch)
        self._b_act, self._b_k, self._b_v = b_act, b_k, b_v
        self.act0 = b_act.tensor((H,), mode="out")
        self.final_in = b_act.tensor((H,), offset=L * H * 4)
        self.final_out = b_final.tensor(mode="out")
        self.norm_t = self.norm_w.tensor()
        # per layer: the boundary tensors before the K/V rows, and after
        self._head, self._tail = [], []
        S = self.scratch.shape[1]
        for i in range(L):
            names = layer_names(i)
            w = {k: imp(weights[n], True) for k, n in names.items()}
            dts = {x.tensor().dtype for x in w.values()}
            if dts != {self.wdtype}:
                raise TypeError("layer %d mixes weight dtypes %s" % (
                    i, sorted(d.name for d in dts)))
            self._head.append([
                b_act.tensor((H,), offset=i * H * 4),
                b_act.tensor((H,), offset=(i + 1) * H * 4, mode="out"),
                w["input_layernorm"].tensor(), w["q_proj"].tensor(),
                w["k_proj"].tensor(), w["v_proj"].tensor(),
                w["q_norm"].tensor(), w["k_norm"].tensor(),
                w["o_proj"].tensor(), w["post_attention_layernorm"].tensor(),
                w["gate_proj"].tensor(), w["up_proj"].tensor(),
                w["down_proj"].tensor(), b_cos.tensor(), b_sin.tensor()])
            base = i * Hk * T * D * 4
            self._tail.append([
                b_scr.tensor((S,), offset=i * S * 4, mode="inout"),
                b_k.tensor((Hk, T, D), offset=base),
                b_v.tensor((Hk, T, D), offset=base)])
        self.stats = None

    # -- the layer graph, recorded once (on the first step's layer 0)
    def _record(self, rec):
        cfg, tile = self.cfg, self.tile
        H, D, F = cfg.hidden, cfg.head_dim, cfg.intermediate
        Hq, Hk = cfg.heads, cfg.kv_heads
        QD, G, T = Hq * D, Hq // Hk, self.T
        bt = rec.tensors
        x, xout = bt[B_X], bt[B_XOUT]
        cos, sin, scr = bt[B_COS], bt[B_SIN], bt[B_SCRATCH]
        kc, vc = bt[B_KCACHE], bt[B_VCACHE]
        o_attn, o_h, o_f = self.offs
        eps = [float(self.eps)]
        pos, length = hbg.Scalar.boundary(0), hbg.Scalar.boundary(1)
        IN, OUT = hbg.Access.IN, hbg.Access.OUT
        K = hbg.Kernel

        def new(n):
            return hbg.Tensor.internal((n,))

        def task(kernel, args, scalars=()):
            rec.task(kernel, args, scalars)
            return args[-1].with_mode(IN)

        xn = task(K.RMSNORM, [x, bt[B_NORM_IN], new(H)], eps)
        # q: projection, q_norm and RoPE per head
        q = []
        for h in range(Hq):
            t = task(K.GEMV, [_sub(bt[B_WQ], (D, H), h * D * H), xn, new(D)])
            t = task(K.RMSNORM, [t, bt[B_QNORM], new(D)], eps)
            q.append(task(K.ROPE, [t, cos, sin, new(D)], [pos]))
        # k (k_norm, RoPE) and v per head, written into the step's cache
        # rows (a head's run of the row: a view of the row)
        for g in range(Hk):
            t = task(K.GEMV, [_sub(bt[B_WK], (D, H), g * D * H), xn, new(D)])
            t = task(K.RMSNORM, [t, bt[B_KNORM], new(D)], eps)
            rec.task(K.ROPE, [t, cos, sin,
                              _sub(bt[B_KROW], (D,), g * T * D, OUT)], [pos])
            rec.task(K.GEMV, [_sub(bt[B_WV], (D, H), g * D * H), xn,
                              _sub(bt[B_VROW], (D,), g * T * D, OUT)])
        # attention per query head over its kv head's cache slice [T][D]
        # (a view of the cache), positions [0, p]
        for h in range(Hq):
            g = h // G
            rec.task(K.ATTN, [q[h], _sub(kc, (T, D), g * T * D),
                              _sub(vc, (T, D), g * T * D),
                              _sub(scr, (D,), o_attn + h * D, OUT)], [length])
        attn = _sub(scr, (QD,), o_attn)
        # o projection + residual, in row tiles
        for r in range(0, H, tile):
            n = min(tile, H - r)
            t = task(K.GEMV, [_sub(bt[B_WO], (n, QD), r * QD), attn, new(n)])
            rec.task(K.ADD, [_sub(x, (n,), r), t,
                             _sub(scr, (n,), o_h + r, OUT)])
        hmid = _sub(scr, (H,), o_h)
        m = task(K.RMSNORM, [hmid, bt[B_NORM_POST], new(H)], eps)
        # silu(gate) * up, in row tiles
        for r in range(0, F, tile):
            n = min(tile, F - r)
            g_ = task(K.GEMV, [_sub(bt[B_WG], (n, H), r * H), m, new(n)])
            u_ = task(K.GEMV, [_sub(bt[B_WU], (n, H), r * H), m, new(n)])
            rec.task(K.SILU_MUL, [g_, u_, _sub(scr, (n,), o_f + r, OUT)])
        f = _sub(scr, (F,), o_f)
        # down projection + residual, in row tiles
        for r in range(0, H, tile):
            n = min(tile, H - r)
            t = task(K.GEMV, [_sub(bt[B_WD], (n, F), r * F), f, new(n)])
            rec.task(K.ADD, [_sub(hmid, (n,), r), t,
                             _sub(xout, (n,), r, OUT)])

    def rows(self, pos):
        """The boundary tensors of every layer's replay at position pos."""
        cfg, T = self.cfg, self.T
        D, Hk = cfg.head_dim, cfg.kv_heads
        rows = []
        for i in range(self.layers):
            off = (i * Hk * T + pos) * D * 4
            kr = self._b_k.tensor((Hk, D), offset=off, mode="out",
                                  strides=(T * D, 1))
            vr = self._b_v.tensor((Hk, D), offset=off, mode="out",
                                  strides=(T * D, 1))
            rows.append(self._head[i] + [kr, vr] + self._tail[i])
        return hbg.pack(rows)

    def step(self, token, pos):
        """Decode token at position pos: the embedding row, the layer
        chain, model.norm, in one bind. Returns the bind's stats."""
        if not 0 <= pos < self.T:
            raise ValueError("position %d outside the cache (T=%d)" % (
                pos, self.T))
        H = self.cfg.hidden
        row = self.embed.tensor((H,), offset=token * H *
                                _ESIZE[self.wdtype])
        rows = self.rows(pos)
        with self.rt.bind() as b:
            e = b.task(hbg.Kernel.COPY, [row, self.act0])
            ids = b.graphs(LAYER_KEY, rows, [[pos, pos + 1]] * self.layers,
                           self._record, deps=[e], chain=True)
            b.task(hbg.Kernel.RMSNORM, [self.final_in, self.norm_t,
                                        self.final_out], [float(self.eps)],
                   deps=[ids[-1]])
        self.stats = b.stats
        return b.stats

    def hidden(self, i):
        """The hidden state after layer i (a torch view of hbg's memory)."""
        return self.act[i + 1]

    def weight_bytes(self):
        """Bytes of the weights hbg reads (embedding table included)."""
        return self.wbytes

    def kv_bytes(self):
        return (self.k_cache.numel() + self.v_cache.numel()) * 4


def bf16_weights_supported(rt):
    """Do this libhbg's kernels take bf16 weights: GEMV's W, RMSNORM's w,
    COPY bf16 -> f32 (the i40-bf16 kernels)? Tried on three tiny tasks."""
    W = torch.ones(2, 4, dtype=torch.bfloat16)
    x, y = torch.ones(4), torch.zeros(4)
    bufs = [rt.from_dlpack(t) for t in (W, x, y)]
    bw, bx, by = bufs
    wrow = bw.tensor((4,))
    tasks = [(hbg.Kernel.GEMV, [bw.tensor(), bx.tensor(),
                                by.tensor((2,), mode="out")], []),
             (hbg.Kernel.RMSNORM, [bx.tensor(), wrow,
                                   by.tensor(mode="out")], [1e-6]),
             (hbg.Kernel.COPY, [wrow, by.tensor(mode="out")], [])]
    try:
        for k, args, sc in tasks:
            with rt.bind() as b:
                b.task(k, args, sc)
        return True
    except hbg.ArgumentError:
        return False
    finally:
        for b in bufs:
            b.free()


def load_weights(args):
    """(cfg, weights) from --model or --random, cut to --layers and
    converted to --weights."""
    if args.model:
        import json
        with open(os.path.join(args.model, "config.json")) as f:
            from qwen3_torch import Qwen3Config
            cfg = Qwen3Config.from_hf(json.load(f))
        layers = cfg.layers if args.layers is None else min(args.layers,
                                                             cfg.layers)
        names = ["model.embed_tokens.weight", "model.norm.weight"]
        for i in range(layers):
            names += list(layer_names(i).values())
        cfg, w = read_checkpoint(args.model, names)
    else:
        over = {}
        if args.vocab:
            over["vocab"] = args.vocab
        cfg = preset(args.config, **over)
        layers = cfg.layers if args.layers is None else min(args.layers,
                                                             cfg.layers)
        cfg = cfg.replace(layers=layers)
        w = random_weights(cfg, seed=args.seed, dtype="f32")
    dt = {"f32": torch.float32, "bf16": torch.bfloat16}[args.weights]
    w = {k: v.to(dt) for k, v in w.items()}
    return cfg.replace(layers=layers), w


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="DIR",
                     help="a Hugging Face Qwen3 checkpoint folder")
    src.add_argument("--random", action="store_true",
                     help="random weights of --config")
    p.add_argument("--config", default="tiny", choices=sorted(PRESETS),
                   help="preset for --random (default tiny)")
    p.add_argument("--vocab", type=int, default=0,
                   help="override the preset's vocab (--random)")
    p.add_argument("--layers", type=int, default=None,
                   help="run only the first N layers")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--max-positions", type=int, default=0,
                   help="KV cache length T (default: --steps)")
    p.add_argument("--weights", choices=("f32", "bf16"), default="f32")
    p.add_argument("--policy", default=None,
                   help="hbg policy (%s; default the library's)" %
                   ", ".join(hbg.policies()))
    p.add_argument("--workers", type=int, default=0,
                   help="sim workers (default the sim's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rtol", type=float, default=1e-4,
                   help="max normwise relative error per layer")
    p.add_argument("--f64", action="store_true",
                   help="also compare against a float64 reference")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    cfg, w = load_weights(args)
    T = args.max_positions or args.steps
    opts = "workers=%d" % args.workers if args.workers else None
    gen = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, cfg.vocab, (args.steps,), generator=gen)
    ref = Qwen3Torch(cfg, w, max_positions=T)
    ref64 = Qwen3Torch(cfg, w, max_positions=T,
                       dtype=torch.float64) if args.f64 else None
    worst = 0.0
    with hbg.Runtime(policy=args.policy, device="sim",
                     device_options=opts) as rt:
        if args.weights == "bf16" and not bf16_weights_supported(rt):
            print("qwen3_decode: this libhbg's kernels take no bf16 weights "
                  "(GEMV W, RMSNORM w, COPY bf16 -> f32); use --weights f32")
            return 77
        m = HbgQwen3(rt, cfg, w, T)
        print("qwen3 %s: %d layers, hidden %d, heads %d/%d, head_dim %d, "
              "intermediate %d, vocab %d; weights %s (%.1f MB), KV cache "
              "%.1f MB (T=%d); hbg %s, policy %s" % (
                  args.model or args.config, m.layers, cfg.hidden,
                  cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate,
                  cfg.vocab, args.weights, m.weight_bytes() / 1e6,
                  m.kv_bytes() / 1e6, T, hbg.backend, rt.policy))
        print("%4s %7s %10s %10s %10s %9s %9s%s" % (
            "step", "token", "max|err|", "rel err", "worst lyr", "hbg ms",
            "torch ms", "   rel err f64: hbg  torch" if ref64 else ""))
        for pos in range(args.steps):
            tok = int(tokens[pos])
            t0 = time.perf_counter()
            st = m.step(tok, pos)
            t1 = time.perf_counter()
            hs = ref.step(tok, pos)
            fin = ref.final_norm(hs[-1])
            t2 = time.perf_counter()
            lyr = max(rel_error(m.hidden(i), hs[i])[1]
                      for i in range(m.layers))
            a, r = rel_error(m.final, fin)
            worst = max(worst, lyr, r)
            extra = ""
            if ref64 is not None:
                hs64 = ref64.step(tok, pos)
                fin64 = ref64.final_norm(hs64[-1])
                extra = "   %9.2e %9.2e" % (rel_error(m.final, fin64)[1],
                                           rel_error(fin, fin64)[1])
            if pos == 0:
                print("     (%d graph replays per step, %d recorded)" % (
                    st.n_graphs, st.n_recorded))
            print("%4d %7d %10.3e %10.3e %10.3e %9.2f %9.2f%s" % (
                pos, tok, a, r, lyr, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
                extra))
    ok = worst <= args.rtol
    print("worst normwise relative error %.3e over %d steps x %d layers: "
          "%s (rtol %g)" % (worst, args.steps, m.layers,
                            "ok" if ok else "FAIL", args.rtol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
