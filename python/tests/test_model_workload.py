"""hbg's own Qwen3 workload (C: the "qwen3" workload, hf.c's checkpoint
reader, qwen3_hf.c's tiled layer) loaded from a Hugging Face checkpoint
that qwen3_torch.write_checkpoint writes, run for several decode steps and
compared, layer by layer, with an independent PyTorch implementation of
the same model reading the same file.

What it shows: the checkpoint's tensors land where the C workload reads
them (names, shapes, [out, in] layout, the tied or untied LM head), and the
C description of a layer computes what Qwen3 computes. Every step is also
checked bit for bit against hbg's host reference (``Workload.verify``).
Tolerance: the normwise relative error of each layer's output at most
RTOL = 1e-4 against torch in f32 and in float64 (measured: about 1e-6; hbg
sums in a fixed order of its own, torch in BLAS's, so they differ in the
last bits of every dot product and the errors grow slowly with depth).
The embedding row (hidden state 0) is exact.

The ctest entry "python" skips this (HBG_TEST_SKIP_MODEL=1); it runs
under "python_model_workload".
"""
import os
import sys

import pytest

import hbg

if os.environ.get("HBG_TEST_SKIP_MODEL") == "1":
    pytest.skip("HBG_TEST_SKIP_MODEL=1 (ctest python_model_workload runs "
                "these)", allow_module_level=True)

try:
    import torch
except ImportError:
    if os.environ.get("HBG_TEST_REQUIRE_TORCH") == "1":
        raise ImportError("HBG_TEST_REQUIRE_TORCH=1 but torch does not import "
                          "in %s (Debian: apt-get install python3-torch)" %
                          sys.executable)
    pytest.skip("torch not installed", allow_module_level=True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_torch import (Qwen3Torch, preset, random_weights,  # noqa: E402
                         rel_error, write_checkpoint)

RTOL = 1e-4
KV_LEN = 64

# name -> (config, decode steps, shards); tiny is untied, the 0.6B dims
# tied (their vocab cut to 1024: the vocab is no layer's dim, and the
# embedding table is then quick to draw)
CASES = {
    "tiny": (preset("tiny", layers=3, tie_embeddings=False), 6, 2),
    "0.6b-dims": (preset("qwen3-0.6b", layers=2, vocab=1024), 4, 1),
}


def _runtime(policy, model, dtype):
    need = hbg.workload_bytes(model=model, weights=dtype, kv_len=KV_LEN)
    return hbg.Runtime(policy=policy, device="sim",
                       device_options="mem=%d" % (need + (64 << 20)))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_workload_matches_torch(tmp_path, case, dtype):
    cfg, steps, shards = CASES[case]
    weights = random_weights(cfg, seed=7, dtype=dtype)
    model = str(tmp_path / "ckpt")
    write_checkpoint(model, cfg, weights, shards=shards)
    refs = {torch.float32: Qwen3Torch(cfg, weights, KV_LEN, torch.float32),
            torch.float64: Qwen3Torch(cfg, weights, KV_LEN, torch.float64)}
    policies = hbg.policies() if case == "tiny" else ["coalesced"]
    worst = 0.0
    for policy in policies:
        for ref in refs.values():
            ref.reset()
        with _runtime(policy, model, dtype) as rt:
            w = rt.workload(model=model, weights=dtype, kv_len=KV_LEN)
            info = w.info
            assert (info.layers, info.hidden, info.vocab) == (
                cfg.layers, cfg.hidden, cfg.vocab)
            for step in range(steps):
                with rt.bind() as b:
                    w.submit(b, step)
                assert w.verify(step) == 0.0
                tok = w.token(step)
                assert 0 <= tok < cfg.vocab
                # the embedding row, exactly as the file holds it
                h0 = torch.from_numpy(w.hidden(0))
                want = weights["model.embed_tokens.weight"][tok].float()
                assert torch.equal(h0, want), (case, dtype, policy, step)
                for dt, ref in refs.items():
                    outs = ref.step(tok, step)
                    for layer, o in enumerate(outs):
                        got = torch.from_numpy(w.hidden(layer + 1))
                        _, rel = rel_error(got, o)
                        worst = max(worst, rel)
                        assert rel <= RTOL, (case, dtype, policy, step, layer,
                                             str(dt), rel)
            w.close()
    print("%s %s: worst layer error %.2e (rtol %g)" % (case, dtype, worst,
                                                        RTOL))


def test_bf16_file_read_as_f32(tmp_path):
    """A bf16 checkpoint read with f32 weights: widened exactly, so the same
    numbers as reading it as bf16."""
    cfg = preset("tiny", layers=2)
    weights = random_weights(cfg, seed=3, dtype="bf16")
    model = str(tmp_path / "ckpt")
    write_checkpoint(model, cfg, weights)
    out = {}
    for dtype in ("bf16", "f32"):
        with _runtime("coalesced", model, dtype) as rt:
            w = rt.workload(model=model, weights=dtype, kv_len=KV_LEN)
            for step in range(3):
                with rt.bind() as b:
                    w.submit(b, step)
                w.verify(step)
            out[dtype] = [w.hidden(i).copy() for i in range(cfg.layers + 1)]
            w.close()
    for a, b in zip(out["bf16"], out["f32"]):
        assert (a == b).all()


def test_refusals(tmp_path):
    cfg = preset("tiny", layers=2)
    weights = random_weights(cfg, seed=1)
    del weights["model.layers.1.mlp.up_proj.weight"]
    model = str(tmp_path / "ckpt")
    write_checkpoint(model, cfg, weights)
    with hbg.Runtime(device="sim") as rt:
        with pytest.raises(hbg.HbgError) as e:
            rt.workload(model=model)
        assert "model.layers.1.mlp.up_proj.weight" in str(e.value)
        with pytest.raises(hbg.HbgError) as e:
            rt.workload(model=model, layers=3)
        assert "has 2 layers" in str(e.value)
        with pytest.raises(hbg.HbgError):
            rt.workload("qwen3-0.6b", model=model)
    with pytest.raises(hbg.HbgError):
        hbg.workload_bytes(model=str(tmp_path / "nothing"))
