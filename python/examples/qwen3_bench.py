#!/usr/bin/env python3
"""Time a Qwen3 decode step: hbg on the sim device against PyTorch eager on
the CPU, alternating step by step in one run.

hbg runs examples/qwen3_decode.py's stack (one tiled layer graph replayed
per layer, weights and KV cache torch tensors used in place); per step it
records the wall time of the bind (begin .. wait, Python included) and the
device time the bind's stats report (``BindStats.device_ns``: the sim's
execution from its device events). torch runs qwen3_torch.Qwen3Torch (the
test's reference: eager ops, f32) with ``torch.set_num_threads(W)``, W the
sim's worker count (``--workers``, default 2, the sim's own default), so
both get the same number of CPU threads. With --weights bf16 hbg's GEMV
and RMSNorm read the bf16 weights; torch computes on them widened to f32
(what the reference does), so it reads twice the weight bytes.

Every step decodes the same token at the same position in both, and the
final hidden states are compared (the worst normwise relative error is
printed: the timing is of a computation that agrees). Medians over
--steps timed steps after --warmup ones (the first records the graph).

    qwen3_bench.py                           # qwen3-0.6b, 28 layers, f32
    qwen3_bench.py --layers 4 --weights bf16 --steps 20 --json out.json

Nothing is tuned: it reports what it measures.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import torch  # noqa: E402

import hbg  # noqa: E402
from qwen3_decode import HbgQwen3, bf16_weights_supported  # noqa: E402
from qwen3_torch import (PRESETS, Qwen3Torch, layer_names,  # noqa: E402
                         preset, random_weights, rel_error)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="qwen3-0.6b", choices=sorted(PRESETS))
    p.add_argument("--layers", type=int, default=None,
                   help="first N layers (default all of the config's)")
    p.add_argument("--vocab", type=int, default=0,
                   help="override the vocab (only the embedding table's "
                   "size: one row is read per step)")
    p.add_argument("--weights", choices=("f32", "bf16"), default="f32")
    p.add_argument("--steps", type=int, default=16, help="timed steps")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--workers", type=int, default=2,
                   help="sim workers = torch threads (default 2)")
    p.add_argument("--policy", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE",
                   help="also write the results as JSON ('-': stdout)")
    return p.parse_args(argv)


def med_ms(xs):
    return statistics.median(xs) * 1e3


def main(argv=None):
    threads = torch.get_num_threads()
    try:
        return run(parse_args(argv))
    finally:
        torch.set_num_threads(threads)


def run(args):
    over = {"vocab": args.vocab} if args.vocab else {}
    cfg = preset(args.config, **over)
    if args.layers:
        cfg = cfg.replace(layers=min(args.layers, cfg.layers))
    n = args.warmup + args.steps
    T = n
    t0 = time.perf_counter()
    w = random_weights(cfg, seed=args.seed, dtype=args.weights)
    t_draw = time.perf_counter() - t0
    torch.set_num_threads(args.workers)
    ref = Qwen3Torch(cfg, w, max_positions=T)
    gen = torch.Generator().manual_seed(args.seed)
    tokens = [int(t) for t in torch.randint(0, cfg.vocab, (n,),
                                            generator=gen)]
    hw, hd, tw = [], [], []
    worst = 0.0
    with hbg.Runtime(policy=args.policy, device="sim",
                     device_options="workers=%d" % args.workers) as rt:
        if args.weights == "bf16" and not bf16_weights_supported(rt):
            print("qwen3_bench: this libhbg's kernels take no bf16 weights")
            return 77
        m = HbgQwen3(rt, cfg, w, T)
        layer_bytes = sum(w[x].numel() * w[x].element_size()
                          for i in range(cfg.layers)
                          for x in layer_names(i).values())
        for pos, tok in enumerate(tokens):
            a = time.perf_counter()
            st = m.step(tok, pos)
            b = time.perf_counter()
            with torch.no_grad():
                hs = ref.step(tok, pos)
                fin = ref.final_norm(hs[-1])
            c = time.perf_counter()
            worst = max(worst, rel_error(m.final, fin)[1])
            if pos >= args.warmup:
                hw.append(b - a)
                hd.append(st.device_ns * 1e-9)
                tw.append(c - b)
        policy = rt.policy
    res = {
        "config": args.config, "layers": cfg.layers, "hidden": cfg.hidden,
        "heads": cfg.heads, "kv_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim, "intermediate": cfg.intermediate,
        "vocab": cfg.vocab, "weights": args.weights,
        "layer_weight_bytes": layer_bytes,
        "weight_bytes": m.weight_bytes(),
        "kv_cache_bytes": m.kv_bytes(), "kv_positions": T,
        "steps": args.steps, "warmup": args.warmup,
        "sim_workers": args.workers, "torch_threads":
            torch.get_num_threads(), "torch": torch.__version__,
        "hbg_backend": hbg.backend, "policy": policy,
        "hbg_wall_ms": med_ms(hw), "hbg_device_ms": med_ms(hd),
        "torch_wall_ms": med_ms(tw),
        "ratio_wall": med_ms(hw) / med_ms(tw),
        "ratio_device": med_ms(hd) / med_ms(tw),
        "hbg_wall_ms_all": [x * 1e3 for x in hw],
        "hbg_device_ms_all": [x * 1e3 for x in hd],
        "torch_wall_ms_all": [x * 1e3 for x in tw],
        "worst_rel_error": worst, "draw_s": t_draw,
    }
    print("qwen3 %s, %d layers, weights %s: layer weights %.1f MB (+ "
          "embedding and norm: %.1f MB in all), KV cache %.2f MB (T=%d, f32)"
          % (args.config, cfg.layers, args.weights, layer_bytes / 1e6,
             res["weight_bytes"] / 1e6, res["kv_cache_bytes"] / 1e6, T))
    print("sim workers %d, torch threads %d (torch %s), hbg %s, policy %s; "
          "medians of %d steps after %d warm-up" % (
              args.workers, torch.get_num_threads(), torch.__version__,
              hbg.backend, policy, args.steps, args.warmup))
    print("%-28s %10s %12s" % ("", "ms / step", "hbg / torch"))
    print("%-28s %10.2f %12.2f" % ("hbg wall (bind, Python in)",
                                   res["hbg_wall_ms"], res["ratio_wall"]))
    print("%-28s %10.2f %12.2f" % ("hbg device (stats)",
                                   res["hbg_device_ms"],
                                   res["ratio_device"]))
    print("%-28s %10.2f %12s" % ("torch eager wall", res["torch_wall_ms"],
                                 "1"))
    print("worst normwise relative error of the final state: %.2e" % worst)
    if args.json:
        text = json.dumps(res, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
