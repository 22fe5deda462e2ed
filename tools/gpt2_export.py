"""Export a GPT-2-style decoder (random weights, plain torch, no transformers) to ONNX.

    python tools/gpt2_export.py OUT.onnx [--layers 12 --embd 768 --heads 12 --vocab 50257 --seq 128]
                                         [--kv-cache --past 16] [--seed 0] [--positions N] [--dynamic]

With --dynamic the sequence dim of input_ids and logits is exported as the symbolic dim ``seq``, and
with --kv-cache the past length as ``past`` (the exporter then leaves Shape/Range/ConstantOfShape
chains in the graph). The test model
tests/data/models/gpt2_dyn_tiny.onnx is made with

    python tools/gpt2_export.py tests/data/models/gpt2_dyn_tiny.onnx --layers 2 --embd 64 --heads 4 \
        --vocab 1000 --positions 64 --seq 16 --dynamic --seed 0

With --kv-cache the model takes past_key_<i>/past_value_<i> [batch, heads, past, head_dim] and
returns present_key_<i>/present_value_<i> (past and new tokens), as decoder exports do.
With --dtype float16 the weights (and the KV cache) are half precision. A model over 2 GB (GPT-2 XL:
--layers 48 --embd 1600 --heads 25) cannot be one protobuf: its weights go to OUT.data beside OUT.onnx
(external data, each tensor at a multiple of 4096 bytes), moved there one tensor at a time from the
per-tensor files the exporter writes. Export it into a folder of its own:

    python tools/gpt2_export.py xl/gpt2_xl.onnx --layers 48 --embd 1600 --heads 25 --dtype float16

Needs torch (the CPU build is enough); uses the TorchScript exporter so onnxscript is not needed.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import warnings
from pathlib import Path

import onnx
import torch
from onnx import TensorProto
from torch import nn

DATA_ALIGNMENT = 4096
DTYPES = {"float32": torch.float32, "float16": torch.float16}


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x, past_k=None, past_v=None):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q = q.view(b, s, h, d // h).transpose(1, 2)
        k = k.view(b, s, h, d // h).transpose(1, 2)
        v = v.view(b, s, h, d // h).transpose(1, 2)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        t = k.shape[2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        causal = torch.ones(s, t, dtype=torch.bool, device=x.device).tril(diagonal=t - s)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x, k, v


class GPT2(nn.Module):
    def __init__(self, vocab: int, positions: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(positions, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, input_ids, *past):
        s = input_ids.shape[1]
        offset = past[0].shape[2] if past else 0
        pos = torch.arange(offset, offset + s, device=input_ids.device).unsqueeze(0)  # on the model's device
        x = self.wte(input_ids) + self.wpe(pos)
        presents = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, *(past[2 * i:2 * i + 2] if past else ()))
            presents += [k, v]
        logits = self.ln_f(x) @ self.wte.weight.t()
        return (logits, *presents) if past else logits


def export(path: str, layers: int, d: int, heads: int, vocab: int, seq: int, batch: int = 1,
           kv_cache: bool = False, past: int = 16, seed: int = 0, positions: int | None = None,
           dynamic: bool = False, dtype: str = "float32") -> None:
    torch.manual_seed(seed)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with _default_dtype(DTYPES[dtype]):  # made in the dtype: a half model never exists as floats
        model = GPT2(vocab, positions or max(1024, seq + past), d, layers, heads).eval()
        _export(model, path, layers, heads, d, vocab, seq, batch, kv_cache, past, dynamic)
    gather_external_data(Path(path))


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype):
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _export(model: nn.Module, path: str, layers: int, heads: int, d: int, vocab: int, seq: int, batch: int,
            kv_cache: bool, past: int, dynamic: bool) -> None:
    ids = torch.randint(0, vocab, (batch, seq))
    args: tuple = (ids,)
    inputs, outputs = ["input_ids"], ["logits"]
    if kv_cache:
        for i in range(layers):
            args += (torch.randn(batch, heads, past, d // heads), torch.randn(batch, heads, past, d // heads))
            inputs += [f"past_key_{i}", f"past_value_{i}"]
            outputs += [f"present_key_{i}", f"present_value_{i}"]
    axes = None
    if dynamic:  # seq symbolic; with a KV cache the past length too (presents hold past + seq tokens)
        axes = {"input_ids": {1: "seq"}, "logits": {1: "seq"}}
        for name in inputs[1:]:
            axes[name] = {2: "past"}
        for name in outputs[1:]:
            axes[name] = {2: "total"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, dynamo=False, opset_version=17, input_names=inputs,
                          output_names=outputs, do_constant_folding=True, dynamic_axes=axes)


def _all_tensors(graph: onnx.GraphProto):
    """Initializers and tensor attributes (Constant nodes' values), subgraphs included."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t
            yield from a.tensors
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                yield from _all_tensors(g)


def gather_external_data(path: Path) -> None:
    """Move the weights the exporter wrote as one file per tensor (a model over 2 GB) into ``path`` with
    suffix .data, one tensor at a time, and point the model at it; a model without external data is left
    as it is."""
    model = onnx.load(str(path), load_external_data=False)
    external = [t for t in _all_tensors(model.graph) if t.data_location == TensorProto.EXTERNAL]
    if not external:
        return
    data = path.with_suffix(".data")
    partial = path.with_suffix(".data.partial")  # the old .data may be one of the sources
    sources: set[Path] = set()
    with open(partial, "wb") as out:
        for t in external:
            info = {e.key: e.value for e in t.external_data}
            source = path.parent / info["location"]
            offset = int(info.get("offset", 0))
            with open(source, "rb") as f:
                f.seek(offset)
                length = int(info["length"]) if "length" in info else source.stat().st_size - offset
                out.write(b"\0" * (-out.tell() % DATA_ALIGNMENT))
                start = out.tell()
                while out.tell() - start < length:
                    chunk = f.read(min(64 << 20, length - (out.tell() - start)))
                    if not chunk:
                        raise OSError(f"{source}: shorter than tensor '{t.name}' needs")
                    out.write(chunk)
            del t.external_data[:]
            for key, value in (("location", data.name), ("offset", str(start)), ("length", str(length))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            sources.add(source)
    partial.replace(data)
    onnx.save(model, str(path))
    for source in sorted(sources - {data}):
        source.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--kv-cache", action="store_true")
    ap.add_argument("--past", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--positions", type=int, default=None, help="position table size (default max(1024, seq + past))")
    ap.add_argument("--dynamic", action="store_true", help="export the sequence dim as symbolic 'seq'")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="the weights' type")
    a = ap.parse_args()
    export(a.out, a.layers, a.embd, a.heads, a.vocab, a.seq, a.batch, a.kv_cache, a.past, a.seed, a.positions,
           a.dynamic, a.dtype)


if __name__ == "__main__":
    main()
