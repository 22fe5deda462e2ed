"""Small IR-building helpers shared by the import rules."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mlcc.frontend.onnx.registry import OnnxNode
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Dim, Instruction, Shape, is_float
from mlcc.hlo.symbolic import SymbolicError, product


def scalar(b: Builder, value: float | int | bool, dtype: str) -> Instruction:
    return b.splat(value, dtype)


def full(b: Builder, value: float | int | bool, dtype: str, dims: Sequence[Dim]) -> Instruction:
    return b.splat(value, dtype, tuple(dims))


def scalar_op(b: Builder, opcode: str, x: Instruction, value: float, **attrs) -> Instruction:
    """``x <opcode> value`` with the scalar broadcast to x's dims."""
    return b.elementwise(opcode, x, full(b, value, x.shape.dtype, x.shape.dims), **attrs)


def broadcast_in_dims(b: Builder, x: Instruction, dims: Sequence[Dim], mapping: Sequence[int]) -> Instruction:
    """Broadcast x to ``dims``, x's dim i landing on result dim ``mapping[i]``."""
    if tuple(dims) == tuple(x.shape.dims) and list(mapping) == list(range(len(dims))):
        return x
    return b.op("broadcast", [x], Shape(x.shape.dtype, tuple(dims)), dimensions=tuple(mapping))


def dims_product(dims: Sequence[Dim]) -> Dim | None:
    """The product of dims: an int or a symbolic expression (``4*seq``); None when a dim is unknown ("?")."""
    try:
        return product(dims)
    except SymbolicError:
        return None


def kept_dims(dims: Sequence[Dim], axes: Sequence[int]) -> tuple[Dim, ...]:
    """``dims`` with the reduced ``axes`` set to 1 (keepdims=1)."""
    return tuple(1 if i in axes else d for i, d in enumerate(dims))


def normalize_axes(node: OnnxNode, axes: Sequence[int], rank: int) -> list[int]:
    out = [node.axis(int(a), rank) for a in axes]
    if len(set(out)) != len(out):
        raise node.error(f"repeated axes {list(axes)}")
    return sorted(out)


def require_float(node: OnnxNode, x: Instruction) -> None:
    if not is_float(x.shape.dtype):
        raise node.unsupported(f"input type {x.shape.dtype} (this op needs a floating-point input)")


def static_dims(node: OnnxNode, dims: Sequence[Dim], what: str) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in dims):
        raise node.unsupported(f"{what} {list(dims)} must be static")
    return tuple(int(d) for d in dims)  # type: ignore[arg-type]


def uniform_value(node: OnnxNode, i: int) -> float | int | bool | None:
    """The one value every element of input ``i`` has, when it is known at import time."""
    v = node.value(i)
    if v is None or v.size == 0:
        return None
    flat = v.reshape(-1)
    first = flat[0]
    if flat.size > 1 and not (np.all(flat == first) and np.all(np.signbit(flat) == np.signbit(first))
                              if v.dtype.kind == "f" else np.all(flat == first)):
        return None
    return first.item()


def broadcast_inputs(b: Builder, node: OnnxNode, indices: Sequence[int], dtype: str | None = None) -> list[Instruction]:
    """Inputs ``indices`` broadcast numpy-style to their common dims (converted to ``dtype`` if given).

    A known input whose elements are all equal becomes one splat constant of the
    result dims instead of a constant plus a broadcast.
    """
    shapes = [node.dims(i) for i in indices]
    try:
        dims = b.broadcast_shapes(*shapes)
    except ValueError:
        listed = " and ".join("[" + ",".join(str(d) for d in s) + "]" for s in shapes)
        raise node.error(f"inputs have incompatible shapes {listed}") from None
    out = []
    for i in indices:
        u = uniform_value(node, i)
        if u is not None:
            out.append(full(b, u, dtype or node.dtype(i), dims))
        else:
            out.append(b.broadcast_to(b.convert(node.input(i), dtype) if dtype else node.input(i), dims))
    return out


def repeat_heads(b: Builder, x: Instruction, heads: int) -> Instruction:
    """[B, Hkv, S, D] -> [B, heads, S, D] for grouped-query attention: query head h reads K/V head
    h // (heads / Hkv), each KV head repeated heads / Hkv times in a row."""
    batch, kv_heads, seq, dim = x.shape.dims
    if kv_heads == heads:
        return x
    reps = heads // kv_heads  # type: ignore[operator]
    wide = broadcast_in_dims(b, x, (batch, kv_heads, reps, seq, dim), [0, 1, 3, 4])
    return b.reshape(wide, (batch, heads, seq, dim))
