"""Write a LLaMA-style decoder (seeded random weights) as ONNX with external data, streaming the weights.

    python tools/gen_llama.py OUT.onnx [--layers 32 --hidden 4096 --heads 32 --ffn 11008 --vocab 32000]
                                       [--positions 4096] [--dtype float16|float32] [--batch 1|NAME] [--seed 0]

The defaults are LLaMA-2-7B's shapes (6.7e9 parameters, 13.5 GB of fp16 weights). The graph (opset 17, the
ops an exporter writes: no fused RMSNorm or rotary op) is RMSNorm (computed in f32, as the reference code
does), rotary position embeddings (rotate-half, cos/sin tables gathered at the token positions), multi-head
attention over a KV cache with a causal mask, and a gated SiLU MLP; the logits come from an untied head.

Inputs: ``input_ids`` int64 [batch, seq] and ``past_key_<i>``/``past_value_<i>`` [batch, heads, past,
head_dim]; outputs: ``logits`` [batch, seq, vocab] and ``present_key_<i>``/``present_value_<i>`` [batch,
heads, past + seq, head_dim]. ``seq`` and ``past`` are symbolic (``batch`` too with --batch NAME). The
positions of the new tokens are past .. past + seq - 1.

The weights go to OUT.data (beside OUT.onnx), written slab by slab from one seeded generator per tensor:
the script never holds more than a slab (--slab-mib) of them, whatever the model's size. A weight's values
are the same whatever --dtype is (drawn in f16, stored as the dtype), so a float32 model computes what the
float16 one would with exact weights. Each tensor starts at a multiple of 4096 bytes in the data file.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ALIGN = 4096
DTYPES = {"float16": (np.float16, TensorProto.FLOAT16), "float32": (np.float32, TensorProto.FLOAT)}


@dataclass(frozen=True)
class Config:
    layers: int = 32
    hidden: int = 4096
    heads: int = 32
    ffn: int = 11008
    vocab: int = 32000
    positions: int = 4096
    dtype: str = "float16"
    batch: int | str = 1
    seed: int = 0
    eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True)
class Weight:
    """A tensor of the data file: random normal * std (drawn in f16), ones, or a rotary table."""

    name: str
    dims: tuple[int, ...]
    kind: str          # "normal", "ones", "cos", "sin"
    std: float = 0.0

    @property
    def numel(self) -> int:
        return math.prod(self.dims)


def weights(c: Config) -> list[Weight]:
    """Every weight of the model, in file order. Linear weights are [in, out], as MatMul reads them."""
    d, f, std = c.hidden, c.ffn, 0.02
    out = [Weight("embed_tokens", (c.vocab, d), "normal", std),
           Weight("rope_cos", (c.positions, c.head_dim), "cos"), Weight("rope_sin", (c.positions, c.head_dim), "sin")]
    for i in range(c.layers):
        p = f"layers.{i}."
        out += [Weight(p + "input_norm", (d,), "ones")]
        out += [Weight(p + f"attn.{w}", (d, d), "normal", std) for w in ("q", "k", "v", "o")]
        out += [Weight(p + "post_norm", (d,), "ones"),
                Weight(p + "mlp.gate", (d, f), "normal", std), Weight(p + "mlp.up", (d, f), "normal", std),
                Weight(p + "mlp.down", (f, d), "normal", std)]
    out += [Weight("norm", (d,), "ones"), Weight("lm_head", (d, c.vocab), "normal", std)]
    return out


def _slabs(w: Weight, c: Config, index: int, slab_elems: int):
    """The values of ``w`` in row-major order, a slab of at most ``slab_elems`` elements at a time."""
    np_dtype = DTYPES[c.dtype][0]
    if w.kind in ("cos", "sin"):  # positions x head_dim, the halves repeated (rotate-half convention)
        inv_freq = 1.0 / c.rope_theta ** (np.arange(0, c.head_dim, 2, dtype=np.float64) / c.head_dim)
        rows = max(1, slab_elems // c.head_dim)
        for start in range(0, c.positions, rows):
            angles = np.outer(np.arange(start, min(start + rows, c.positions), dtype=np.float64), inv_freq)
            table = np.cos(angles) if w.kind == "cos" else np.sin(angles)
            yield np.concatenate([table, table], axis=1).astype(np.float16).astype(np_dtype)
        return
    if w.kind == "ones":
        yield np.ones(w.numel, np_dtype)
        return
    rng = np.random.default_rng([c.seed, index])
    for start in range(0, w.numel, slab_elems):
        n = min(slab_elems, w.numel - start)
        slab = rng.standard_normal(n, dtype=np.float32)
        slab *= np.float32(w.std)
        yield slab.astype(np.float16).astype(np_dtype, copy=False)


def write_data(path: Path, c: Config, slab_mib: int = 64, progress: bool = False) -> dict[str, tuple[int, int]]:
    """Write every weight into ``path``; returns name -> (offset, length)."""
    itemsize = np.dtype(DTYPES[c.dtype][0]).itemsize
    slab_elems = max(1, (slab_mib << 20) // 4)  # the f32 draw is the largest buffer
    ranges: dict[str, tuple[int, int]] = {}
    ws = weights(c)
    total = sum(w.numel for w in ws) * itemsize
    started, written = time.perf_counter(), 0
    with open(path, "wb") as f:
        for index, w in enumerate(ws):
            pad = -f.tell() % ALIGN
            f.write(b"\0" * pad)
            offset = f.tell()
            for slab in _slabs(w, c, index, slab_elems):
                f.write(slab.tobytes())
                written += slab.nbytes
            ranges[w.name] = (offset, f.tell() - offset)
            if progress and sys.stderr.isatty():
                rate = written / max(1e-9, time.perf_counter() - started) / 2**20
                print(f"\r{written / 2**30:6.2f} / {total / 2**30:.2f} GiB  {rate:6.0f} MiB/s", end="",
                      file=sys.stderr, flush=True)
    if progress and sys.stderr.isatty():
        print(file=sys.stderr)
    return ranges


class _Graph:
    """Nodes, constants and unique value names."""

    def __init__(self, c: Config) -> None:
        self.c = c
        self.nodes: list[onnx.NodeProto] = []
        self.consts: list[TensorProto] = []
        self.count = 0

    def op(self, op_type: str, inputs: list[str], name: str, outputs: int = 1, **attrs) -> list[str] | str:
        self.count += 1
        outs = [f"{name}" if outputs == 1 else f"{name}.{k}" for k in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{op_type}_{self.count}_{name}", **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, name: str, values, dtype: int) -> str:
        arr = np.asarray(values)
        self.consts.append(helper.make_tensor(name, dtype, list(arr.shape), arr.reshape(-1).tolist()))
        return name


def _rms_norm(g: _Graph, x: str, weight: str, name: str) -> str:
    """x / sqrt(mean(x^2) + eps) * weight, computed in f32 and cast back (as the reference code does)."""
    half = g.c.dtype == "float16"
    xf = g.op("Cast", [x], f"{name}.f32", to=TensorProto.FLOAT) if half else x
    sq = g.op("Mul", [xf, xf], f"{name}.sq")
    mean = g.op("ReduceMean", [sq], f"{name}.mean", axes=[-1], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [mean, "eps"], f"{name}.var")], f"{name}.std")
    normed = g.op("Div", [xf, std], f"{name}.normed")
    if half:
        normed = g.op("Cast", [normed], f"{name}.half", to=TensorProto.FLOAT16)
    return g.op("Mul", [normed, weight], name)


def _rotate(g: _Graph, x: str, cos: str, sin: str, name: str) -> str:
    """x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x[..., d/2:], x[..., :d/2])."""
    lo = g.op("Slice", [x, "zero1", "half1", "minus1"], f"{name}.lo")
    hi = g.op("Slice", [x, "half1", "big1", "minus1"], f"{name}.hi")
    rotated = g.op("Concat", [g.op("Neg", [hi], f"{name}.neg"), lo], f"{name}.rot", axis=-1)
    return g.op("Add", [g.op("Mul", [x, cos], f"{name}.cos"), g.op("Mul", [rotated, sin], f"{name}.sin")], name)


def _attention(g: _Graph, i: int, h: str, cos: str, sin: str, mask: str) -> tuple[str, str, str]:
    c, p = g.c, f"layers.{i}.attn."
    half = c.dtype == "float16"

    def heads(x: str, name: str) -> str:  # [b, s, d] -> [b, heads, s, head_dim]
        return g.op("Transpose", [g.op("Reshape", [x, "split_heads"], name + ".split")], name, perm=[0, 2, 1, 3])

    q = _rotate(g, heads(g.op("MatMul", [h, p + "q"], p + "q_proj"), p + "q_heads"), cos, sin, p + "q_rot")
    k = _rotate(g, heads(g.op("MatMul", [h, p + "k"], p + "k_proj"), p + "k_heads"), cos, sin, p + "k_rot")
    v = heads(g.op("MatMul", [h, p + "v"], p + "v_proj"), p + "v_heads")
    present_k = g.op("Concat", [f"past_key_{i}", k], f"present_key_{i}", axis=2)
    present_v = g.op("Concat", [f"past_value_{i}", v], f"present_value_{i}", axis=2)
    kt = g.op("Transpose", [present_k], p + "kt", perm=[0, 1, 3, 2])
    scores = g.op("Mul", [g.op("MatMul", [q, kt], p + "qk"), "scale"], p + "scaled")
    scores = g.op("Add", [scores, mask], p + "masked")
    if half:  # softmax in f32, as the reference code does
        scores = g.op("Cast", [scores], p + "scores_f32", to=TensorProto.FLOAT)
    probs = g.op("Softmax", [scores], p + "probs", axis=-1)
    if half:
        probs = g.op("Cast", [probs], p + "probs_half", to=TensorProto.FLOAT16)
    ctx = g.op("MatMul", [probs, present_v], p + "ctx")
    merged = g.op("Reshape", [g.op("Transpose", [ctx], p + "ctx_t", perm=[0, 2, 1, 3]), "merge_heads"], p + "merged")
    return g.op("MatMul", [merged, p + "o"], p + "o_proj"), present_k, present_v


def _mlp(g: _Graph, i: int, h: str) -> str:
    p = f"layers.{i}.mlp."
    gate = g.op("MatMul", [h, p + "gate"], p + "gate_proj")
    silu = g.op("Mul", [gate, g.op("Sigmoid", [gate], p + "sigmoid")], p + "silu")
    up = g.op("MatMul", [h, p + "up"], p + "up_proj")
    return g.op("MatMul", [g.op("Mul", [silu, up], p + "gated"), p + "down"], p + "down_proj")


def build_graph(c: Config, ranges: dict[str, tuple[int, int]], location: str) -> onnx.ModelProto:
    """The model, its weights external in ``location`` at ``ranges``."""
    np_dtype, elem = DTYPES[c.dtype]
    g = _Graph(c)
    hd = c.head_dim
    g.const("eps", np.array(c.eps, np.float32), TensorProto.FLOAT)
    g.const("scale", np.array(1.0 / math.sqrt(hd), np_dtype), elem)
    g.const("mask_zero", np.array(0.0, np_dtype), elem)
    g.const("mask_min", np.array(np.finfo(np_dtype).min, np_dtype), elem)
    g.const("split_heads", np.array([0, 0, c.heads, hd], np.int64), TensorProto.INT64)
    g.const("merge_heads", np.array([0, 0, c.hidden], np.int64), TensorProto.INT64)
    for name, value in (("zero1", [0]), ("half1", [hd // 2]), ("big1", [hd]), ("minus1", [-1]), ("axis0", [0]),
                        ("axis1", [1])):
        g.const(name, np.array(value, np.int64), TensorProto.INT64)
    g.const("one", np.array(1, np.int64), TensorProto.INT64)
    g.const("zero", np.array(0, np.int64), TensorProto.INT64)
    # positions past .. past + seq - 1, the causal mask [seq, past + seq]
    past = g.op("Squeeze", [g.op("Shape", ["past_key_0"], "past_shape", start=2, end=3), "axis0"], "past")
    seq = g.op("Squeeze", [g.op("Shape", ["input_ids"], "seq_shape", start=1, end=2), "axis0"], "seq")
    total = g.op("Add", [past, seq], "total")
    positions = g.op("Range", [past, total, "one"], "positions")
    keys = g.op("Range", ["zero", total, "one"], "key_positions")
    allowed = g.op("LessOrEqual", [g.op("Unsqueeze", [keys, "axis0"], "keys_row"),
                                   g.op("Unsqueeze", [positions, "axis1"], "queries_col")], "allowed")
    mask = g.op("Where", [allowed, "mask_zero", "mask_min"], "causal_mask")
    cos = g.op("Gather", ["rope_cos", positions], "cos", axis=0)
    sin = g.op("Gather", ["rope_sin", positions], "sin", axis=0)
    x = g.op("Gather", ["embed_tokens", "input_ids"], "embedded", axis=0)
    presents = []
    for i in range(c.layers):
        attn, pk, pv = _attention(g, i, _rms_norm(g, x, f"layers.{i}.input_norm", f"layers.{i}.attn_norm"),
                                  cos, sin, mask)
        x = g.op("Add", [x, attn], f"layers.{i}.attn_residual")
        x = g.op("Add", [x, _mlp(g, i, _rms_norm(g, x, f"layers.{i}.post_norm", f"layers.{i}.mlp_norm"))],
                 f"layers.{i}.mlp_residual")
        presents += [pk, pv]
    g.op("MatMul", [_rms_norm(g, x, "norm", "final_norm"), "lm_head"], "logits")

    batch = c.batch
    kv = [batch, c.heads, "past", hd]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, "seq"])]
    outputs = [helper.make_tensor_value_info("logits", elem, [batch, "seq", c.vocab])]
    for i in range(c.layers):
        inputs += [helper.make_tensor_value_info(f"past_{kind}_{i}", elem, kv) for kind in ("key", "value")]
        outputs += [helper.make_tensor_value_info(f"present_{kind}_{i}", elem, [batch, c.heads, "total", hd])
                    for kind in ("key", "value")]
    initializers = []
    for w in weights(c):
        t = TensorProto(name=w.name, data_type=elem, dims=list(w.dims), data_location=TensorProto.EXTERNAL)
        offset, length = ranges[w.name]
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        initializers.append(t)
    graph = helper.make_graph(g.nodes, "llama", inputs, outputs, initializers + g.consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="mlcc gen_llama")
    model.ir_version = 8
    return model


def generate(out: Path, c: Config, slab_mib: int = 64, progress: bool = False) -> Path:
    """Write ``out`` (the graph) and ``out`` with suffix .data (the weights); returns the data file's path."""
    if c.hidden % c.heads or c.head_dim % 2:
        raise ValueError(f"hidden {c.hidden} is not heads {c.heads} times an even head_dim")
    out.parent.mkdir(parents=True, exist_ok=True)
    data = out.with_suffix(".data")
    ranges = write_data(data, c, slab_mib, progress)
    onnx.save(build_graph(c, ranges, data.name), out)
    return data


def parameter_count(c: Config) -> int:
    return sum(w.numel for w in weights(c))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=11008)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--positions", type=int, default=4096, help="rotary table rows: the longest past + seq")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float16")
    ap.add_argument("--batch", default="1", help="a size, or a name for a symbolic batch dim")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slab-mib", type=int, default=64, help="the most weight data held at once (MiB of f32)")
    a = ap.parse_args(argv)
    batch: int | str = int(a.batch) if a.batch.isdigit() else a.batch
    c = Config(a.layers, a.hidden, a.heads, a.ffn, a.vocab, a.positions, a.dtype, batch, a.seed)
    started = time.perf_counter()
    try:
        data = generate(a.out, c, a.slab_mib, progress=True)
    except ValueError as e:
        print(f"gen_llama: {e}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    size = data.stat().st_size
    print(f"{a.out}: {parameter_count(c):,} parameters, {size / 2**30:.2f} GiB in {data.name}, {seconds:.1f} s "
          f"({size / 2**30 / max(seconds, 1e-9) * 60:.1f} GiB/min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
