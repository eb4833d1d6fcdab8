"""Qwen3 decoder layers for single-token decode in plain PyTorch, and a
minimal safetensors reader and writer, for hbg's tests and examples.

Written from the model's definition (Hugging Face's Qwen3 decoder: the
config keys and tensor names below are theirs), not from hbg's kernels, so
that it can check them:

    layer:  h = x + o_proj(attn(rope(q_norm(q_proj(n))), rope(k_norm(k_proj(n))),
                                v_proj(n)))       n = input_layernorm(x)
            y = h + down_proj(silu(gate_proj(m)) * up_proj(m))
                                                  m = post_attention_layernorm(h)

with RMSNorm(x) = x * rsqrt(mean(x**2) + eps) * w (q_norm and k_norm per
head, over head_dim), rotate-half RoPE at position p (inv_freq[i] =
theta**(-2i/D), angles p * inv_freq), keys and values written into a cache
[layers][kv_heads][T][head_dim], and grouped-query attention
softmax(q K^T / sqrt(D)) V over positions [0, p] (query head h reads kv
head h // (heads // kv_heads)). Projections have no bias.

Not part of the hbg package: tests import it with python/tests on
sys.path (conftest.py's folder), examples add that folder themselves.

    cfg = preset("tiny")
    w = random_weights(cfg, seed=0, dtype="bf16")   # Hugging Face names
    ref = Qwen3Torch(cfg, w, max_positions=16)      # f32 compute
    hs = ref.step(token=5, pos=0)                   # hidden after each layer
    write_checkpoint("ckpt", cfg, w, shards=2)
    cfg2, w2 = read_checkpoint("ckpt")
"""
import dataclasses
import json
import math
import os
import struct
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

# ---------------------------------------------------------------- config


@dataclasses.dataclass(frozen=True)
class Qwen3Config:
    """The dims of a Qwen3 decoder (Hugging Face's names in to_hf())."""
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    vocab: int
    eps: float = 1e-6
    rope_theta: float = 1e6
    tie_embeddings: bool = True
    max_positions: int = 40960

    def __post_init__(self):
        if self.heads % self.kv_heads:
            raise ValueError("heads %d is not a multiple of kv_heads %d" % (
                self.heads, self.kv_heads))
        if self.head_dim % 2:
            raise ValueError("head_dim %d is odd (rotate-half RoPE)" %
                             self.head_dim)

    def replace(self, **kw) -> "Qwen3Config":
        return dataclasses.replace(self, **kw)

    def to_hf(self) -> dict:
        """config.json's keys, as Hugging Face's Qwen3Config writes them."""
        return {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "num_hidden_layers": self.layers,
            "vocab_size": self.vocab,
            "rms_norm_eps": self.eps,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_embeddings,
            "max_position_embeddings": self.max_positions,
            "hidden_act": "silu",
            "attention_bias": False,
            "torch_dtype": "bfloat16",
        }

    @classmethod
    def from_hf(cls, d: dict) -> "Qwen3Config":
        """From a config.json dict (head_dim defaults to hidden / heads,
        as in Hugging Face's config)."""
        heads = int(d["num_attention_heads"])
        return cls(
            hidden=int(d["hidden_size"]),
            intermediate=int(d["intermediate_size"]),
            heads=heads,
            kv_heads=int(d.get("num_key_value_heads", heads)),
            head_dim=int(d.get("head_dim") or d["hidden_size"] // heads),
            layers=int(d["num_hidden_layers"]),
            vocab=int(d["vocab_size"]),
            eps=float(d.get("rms_norm_eps", 1e-6)),
            rope_theta=float(d.get("rope_theta", 1e6)),
            tie_embeddings=bool(d.get("tie_word_embeddings", False)),
            max_positions=int(d.get("max_position_embeddings", 40960)))


PRESETS = {
    "tiny": Qwen3Config(hidden=64, intermediate=128, heads=4, kv_heads=2,
                        head_dim=16, layers=2, vocab=256),
    # Qwen/Qwen3-0.6B's config.json
    "qwen3-0.6b": Qwen3Config(hidden=1024, intermediate=3072, heads=16,
                              kv_heads=8, head_dim=128, layers=28,
                              vocab=151936, eps=1e-6, rope_theta=1e6,
                              tie_embeddings=True),
}


def preset(name: str, **overrides) -> Qwen3Config:
    """A preset config ("tiny", "qwen3-0.6b"), with fields overridden."""
    if name not in PRESETS:
        raise KeyError("unknown preset %r (have %s)" % (
            name, ", ".join(PRESETS)))
    return PRESETS[name].replace(**overrides)


# ---------------------------------------------------------------- weights

def layer_names(i: int) -> Dict[str, str]:
    """Short name -> Hugging Face tensor name of layer i."""
    p = "model.layers.%d." % i
    return {
        "input_layernorm": p + "input_layernorm.weight",
        "q_proj": p + "self_attn.q_proj.weight",
        "k_proj": p + "self_attn.k_proj.weight",
        "v_proj": p + "self_attn.v_proj.weight",
        "o_proj": p + "self_attn.o_proj.weight",
        "q_norm": p + "self_attn.q_norm.weight",
        "k_norm": p + "self_attn.k_norm.weight",
        "post_attention_layernorm": p + "post_attention_layernorm.weight",
        "gate_proj": p + "mlp.gate_proj.weight",
        "up_proj": p + "mlp.up_proj.weight",
        "down_proj": p + "mlp.down_proj.weight",
    }


def weight_shapes(cfg: Qwen3Config) -> Dict[str, Tuple[int, ...]]:
    """Every tensor of a checkpoint, Hugging Face name -> shape ([out, in]
    for projections), in a fixed order."""
    H, F, D = cfg.hidden, cfg.intermediate, cfg.head_dim
    QD, KD = cfg.heads * D, cfg.kv_heads * D
    out = {"model.embed_tokens.weight": (cfg.vocab, H)}
    for i in range(cfg.layers):
        n = layer_names(i)
        out.update({
            n["input_layernorm"]: (H,),
            n["q_proj"]: (QD, H),
            n["k_proj"]: (KD, H),
            n["v_proj"]: (KD, H),
            n["o_proj"]: (H, QD),
            n["q_norm"]: (D,),
            n["k_norm"]: (D,),
            n["post_attention_layernorm"]: (H,),
            n["gate_proj"]: (F, H),
            n["up_proj"]: (F, H),
            n["down_proj"]: (H, F),
        })
    out["model.norm.weight"] = (H,)
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = (cfg.vocab, H)
    return out


def _torch_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    return {"f32": torch.float32, "float32": torch.float32,
            "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}[dtype]


def random_weights(cfg: Qwen3Config, seed: int = 0,
                   dtype="f32") -> Dict[str, torch.Tensor]:
    """Random weights with Hugging Face names and shapes, scaled like a
    trained model's: projections uniform in +-1/sqrt(fan_in) (what
    nn.Linear draws), the embedding (and an untied lm_head) N(0, 0.02), norm
    weights uniform in [0.8, 1.2]. dtype "f32" or "bf16" (the f32 draw
    rounded to bf16: ``w.to(torch.bfloat16)``). Drawn with numpy's
    generator from ``seed`` (reproducible, and faster than torch's)."""
    rng = np.random.default_rng(seed)
    dt = _torch_dtype(dtype)
    out = {}
    for name, shape in weight_shapes(cfg).items():
        n = int(np.prod(shape))
        if name.endswith("norm.weight"):
            a = rng.uniform(0.8, 1.2, n).astype(np.float32)
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            a = rng.standard_normal(n, dtype=np.float32)
            a *= np.float32(0.02)
        else:
            k = 1.0 / math.sqrt(shape[1])
            a = rng.random(n, dtype=np.float32)
            a *= np.float32(2 * k)
            a -= np.float32(k)
        t = torch.from_numpy(a.reshape(shape))
        out[name] = t if dt == torch.float32 else t.to(dt)
    return out


def rope_tables(cfg: Qwen3Config, positions: int,
                dtype=torch.float32) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [positions][head_dim / 2] of p * inv_freq, inv_freq[i] =
    theta**(-2i/D), computed in float64 and rounded to dtype."""
    D = cfg.head_dim
    i = torch.arange(0, D, 2, dtype=torch.float64)
    inv_freq = cfg.rope_theta ** (-i / D)
    ang = torch.arange(positions, dtype=torch.float64)[:, None] * inv_freq
    return ang.cos().to(dtype).contiguous(), ang.sin().to(dtype).contiguous()


# ---------------------------------------------------------------- model

class Qwen3Torch:
    """Single-token decode through Qwen3 decoder layers in torch eager.

    weights: Hugging Face names (random_weights, read_checkpoint), f32 or
    bf16; they are widened to ``dtype`` (float32, or float64 for a
    high-precision reference) and every operation runs in that dtype.
    The KV cache is [layers][kv_heads][max_positions][head_dim]. ``layers``
    (default cfg.layers) cuts the stack."""

    def __init__(self, cfg: Qwen3Config, weights: Dict[str, torch.Tensor],
                 max_positions: int = 64, dtype=torch.float32,
                 layers: Optional[int] = None) -> None:
        self.cfg = cfg
        self.dtype = dtype
        self.layers = cfg.layers if layers is None else layers
        self.T = max_positions
        self.embed = weights["model.embed_tokens.weight"]  # rows widened
        self.norm = weights["model.norm.weight"].to(dtype)
        self.w = []
        for i in range(self.layers):
            self.w.append({k: weights[v].to(dtype)
                           for k, v in layer_names(i).items()})
        shape = (self.layers, cfg.kv_heads, max_positions, cfg.head_dim)
        self.k_cache = torch.zeros(shape, dtype=dtype)
        self.v_cache = torch.zeros(shape, dtype=dtype)
        i = torch.arange(0, cfg.head_dim, 2, dtype=torch.float64)
        self.inv_freq = cfg.rope_theta ** (-i / cfg.head_dim)

    def reset(self) -> None:
        self.k_cache.zero_()
        self.v_cache.zero_()

    def rmsnorm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.cfg.eps) * w

    def rope(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        """Rotate-half RoPE of x [..., D] at position pos."""
        ang = pos * self.inv_freq
        cos, sin = ang.cos().to(self.dtype), ang.sin().to(self.dtype)
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)

    def layer(self, i: int, x: torch.Tensor, pos: int) -> torch.Tensor:
        cfg, w = self.cfg, self.w[i]
        Hq, Hk, D = cfg.heads, cfg.kv_heads, cfg.head_dim
        n = self.rmsnorm(x, w["input_layernorm"])
        q = (w["q_proj"] @ n).view(Hq, D)
        k = (w["k_proj"] @ n).view(Hk, D)
        v = (w["v_proj"] @ n).view(Hk, D)
        q = self.rope(self.rmsnorm(q, w["q_norm"]), pos)
        k = self.rope(self.rmsnorm(k, w["k_norm"]), pos)
        self.k_cache[i, :, pos] = k
        self.v_cache[i, :, pos] = v
        K = self.k_cache[i, :, :pos + 1]            # [Hk][L][D]
        V = self.v_cache[i, :, :pos + 1]
        g = Hq // Hk
        K = K.repeat_interleave(g, 0)               # [Hq][L][D]
        V = V.repeat_interleave(g, 0)
        s = (K @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(D)   # [Hq][L]
        a = (torch.softmax(s, -1).unsqueeze(1) @ V).squeeze(1)  # [Hq][D]
        h = x + w["o_proj"] @ a.reshape(Hq * D)
        m = self.rmsnorm(h, w["post_attention_layernorm"])
        f = torch.nn.functional.silu(w["gate_proj"] @ m) * (w["up_proj"] @ m)
        return h + w["down_proj"] @ f

    def step(self, token: int, pos: int) -> List[torch.Tensor]:
        """Decode token at position pos (the cache holds positions < pos):
        the hidden state after each layer (a list of [hidden] tensors)."""
        if not 0 <= pos < self.T:
            raise ValueError("position %d outside the cache (%d)" % (
                pos, self.T))
        x = self.embed[token].to(self.dtype)
        out = []
        for i in range(self.layers):
            x = self.layer(i, x, pos)
            out.append(x)
        return out

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        """model.norm of the last hidden state."""
        return self.rmsnorm(x, self.norm)

    def decode(self, tokens: Sequence[int]) -> List[List[torch.Tensor]]:
        """Steps 0 .. len(tokens)-1 from an empty cache: per step, the
        hidden state after each layer."""
        self.reset()
        return [self.step(t, p) for p, t in enumerate(tokens)]


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> Tuple[float, float]:
    """(max |got - ref|, max |got - ref| / max |ref|), in float64: the
    relative error is normwise (an element near zero does not blow it
    up)."""
    d = (got.double() - ref.double()).abs().max().item()
    scale = ref.double().abs().max().item()
    return d, d / scale if scale else d


# ---------------------------------------------------------------- safetensors

# safetensors dtype name -> (numpy dtype of its bits, torch dtype)
_ST_DTYPES = {
    "F32": (np.float32, torch.float32),
    "F16": (np.float16, torch.float16),
    "BF16": (np.int16, torch.bfloat16),
    "F64": (np.float64, torch.float64),
    "I32": (np.int32, torch.int32),
    "I64": (np.int64, torch.int64),
}
_ST_OF_TORCH = {v[1]: k for k, v in _ST_DTYPES.items()}


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        a = t.view(torch.int16).numpy()
    else:
        a = t.numpy()
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def save_safetensors(path: str, tensors: Dict[str, torch.Tensor],
                     metadata: Optional[Dict[str, str]] = None) -> None:
    """Write tensors (f32, bf16, f16, f64, i32, i64) to one .safetensors
    file: an 8-byte little-endian header length, the JSON header {name:
    {dtype, shape, data_offsets: [begin, end)}} (offsets into the data
    that follows; "__metadata__" when given), padded with spaces to a
    multiple of 8 bytes, then each tensor's raw little-endian bytes in
    the header's order (names sorted). bf16 is its raw uint16 bits."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = {str(k): str(v) for k, v in
                                  metadata.items()}
    blobs, off = [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in _ST_OF_TORCH:
            raise TypeError("%s: dtype %s has no safetensors name here" % (
                name, t.dtype))
        b = _tensor_bytes(t)
        header[name] = {"dtype": _ST_OF_TORCH[t.dtype],
                        "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors_header(path: str) -> Tuple[dict, int]:
    """(header dict, byte offset of the data section) of a .safetensors
    file."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError("%s: shorter than a safetensors header" % path)
        (n,) = struct.unpack("<Q", raw)
        size = os.fstat(f.fileno()).st_size
        if n > size - 8:
            raise ValueError("%s: header length %d past the end of the file"
                             % (path, n))
        header = json.loads(f.read(n))
    return header, 8 + n


def load_safetensors(path: str,
                     names: Optional[Sequence[str]] = None
                     ) -> Dict[str, torch.Tensor]:
    """Read a .safetensors file (all tensors, or those named): name ->
    torch tensor of the stored dtype (bf16 as torch.bfloat16)."""
    header, base = read_safetensors_header(path)
    size = os.path.getsize(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            if name == "__metadata__" or (names is not None and
                                          name not in names):
                continue
            if info["dtype"] not in _ST_DTYPES:
                raise TypeError("%s: %s has dtype %s (read here: %s)" % (
                    path, name, info["dtype"], ", ".join(_ST_DTYPES)))
            npdt, tdt = _ST_DTYPES[info["dtype"]]
            shape = tuple(int(d) for d in info["shape"])
            b, e = (int(x) for x in info["data_offsets"])
            count = int(np.prod(shape)) if shape else 1
            itemsize = np.dtype(npdt).itemsize
            if e - b != count * itemsize or e < b or base + e > size:
                raise ValueError("%s: %s: data_offsets [%d, %d) do not hold "
                                 "%s %s" % (path, name, b, e, info["dtype"],
                                            list(shape)))
            f.seek(base + b)
            a = np.fromfile(f, dtype=np.dtype(npdt).newbyteorder("<"),
                            count=count).astype(npdt, copy=False)
            t = torch.from_numpy(a.reshape(shape))
            out[name] = t.view(torch.bfloat16) if tdt == torch.bfloat16 else t
    return out


INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


def write_checkpoint(path: str, cfg: Qwen3Config,
                     weights: Dict[str, torch.Tensor],
                     shards: int = 1) -> List[str]:
    """A Hugging Face style checkpoint in folder path: config.json (see
    Qwen3Config.to_hf) and the tensors, in model.safetensors (shards=1)
    or model-0000i-of-0000n.safetensors with model.safetensors.index.json
    ({"metadata": {"total_size"}, "weight_map": {name: file}}). Tensors are
    assigned to shards in weight_shapes() order, in runs of about equal
    bytes (fewer shards when a tensor is larger than a shard's share).
    Returns the files written."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg.to_hf(), f, indent=2)
    order = [n for n in weight_shapes(cfg) if n in weights]
    order += sorted(n for n in weights if n not in order)
    files = ["config.json"]
    if shards <= 1:
        save_safetensors(os.path.join(path, SINGLE_NAME), weights,
                         {"format": "pt"})
        return files + [SINGLE_NAME]
    sizes = [weights[n].numel() * weights[n].element_size() for n in order]
    total = sum(sizes)
    groups, acc = [[] for _ in range(shards)], 0
    for n, s in zip(order, sizes):
        groups[min(shards - 1, acc * shards // max(total, 1))].append(n)
        acc += s
    groups = [g for g in groups if g]  # a tensor past a shard's share
    weight_map = {}
    for i, g in enumerate(groups):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, len(groups))
        save_safetensors(os.path.join(path, name),
                         {n: weights[n] for n in g}, {"format": "pt"})
        weight_map.update({n: name for n in g})
        files.append(name)
    with open(os.path.join(path, INDEX_NAME), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": weight_map}, f, indent=2)
    return files + [INDEX_NAME]


def read_checkpoint(path: str, names: Optional[Sequence[str]] = None
                    ) -> Tuple[Qwen3Config, Dict[str, torch.Tensor]]:
    """(config, tensors) of a checkpoint folder: config.json and
    model.safetensors, or the shards model.safetensors.index.json names.
    names: read only these tensors."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = Qwen3Config.from_hf(json.load(f))
    index = os.path.join(path, INDEX_NAME)
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        files = [SINGLE_NAME]
    out = {}
    for fn in files:
        out.update(load_safetensors(os.path.join(path, fn), names))
    return cfg, out
