"""QuantizeLinear and DequantizeLinear: per tensor, per axis and blocked (``block_size``), to and from the integer
types (8/16-bit, 4- and 2-bit), the fp8 types and f4e2m1, with ``saturate`` and ``output_dtype``, as ONNX's
reference implementation computes them (onnx/reference/ops/op_quantize_linear.py, op_dequantize_linear.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, scalar
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.frontend.onnx.types import ir_dtype, onnx_type_name
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import F8_DTYPES, INT_DTYPES, NARROW_INT_DTYPES, STORAGE_DTYPES, Instruction, Shape

QUANT_INT_DTYPES = ("s8", "u8", "s16", "u16") + NARROW_INT_DTYPES
FP8_QUANT_DTYPES = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz")


def _int_range(dtype: str) -> tuple[int, int]:
    info = ml_dtypes.iinfo(numpy_dtype(dtype))
    return int(info.min), int(info.max)


def float_max(dtype: str) -> float:
    """The largest finite value of a narrow float type (448 for f8e4m3fn)."""
    return float(ml_dtypes.finfo(numpy_dtype(dtype)).max)


def _check_scale(node: OnnxNode, i: int) -> None:
    """A constant scale must be a nonzero number (one that is computed is the model's business at run time)."""
    v = node.value(i)
    if v is None:
        return
    f = np.asarray(v).astype(np.float64)
    if np.isnan(f).any() or (f == 0).any():
        bad = "NaN" if np.isnan(f).any() else "zero"
        raise node.error(f"scale '{node.proto.input[i]}' has a {bad} entry")


def _check_zero_point(node: OnnxNode, i: int, dtype: str) -> None:
    """An fp8 or f4 zero point must be 0: the types have no offset (the reference rejects another value)."""
    v = node.value(i)
    if v is None or dtype not in FP8_QUANT_DTYPES:
        return
    if (np.asarray(v).astype(np.float32) != 0).any():
        raise node.error(f"zero point '{node.proto.input[i]}' of {dtype} must be 0")


def _expand(b: Builder, node: OnnxNode, v: Instruction, x: Instruction, what: str, i: int) -> Instruction:
    """A scale or zero point broadcast to x's dims: a scalar (or one element), 1-D along ``axis``, or blocked
    (``block_size``): of x's rank, with ceil(dim / block_size) entries along ``axis``, each repeated block_size
    times (the last block may be short)."""
    dims = x.shape.dims
    block = node.attr("block_size", 0) if node.has_attr("block_size") else 0
    name = node.proto.input[i]
    if v.shape.rank == 0 or (v.shape.is_static and v.shape.numel() == 1 and not block):
        return b.broadcast_to(b.reshape(v, ()), dims)
    axis = node.axis(node.attr("axis", 1), x.shape.rank)
    if not block:
        if v.shape.rank != 1:
            raise node.error(f"{what} '{name}' has rank {v.shape.rank}: per-axis quantization takes a 1-D "
                             f"{what} (blocked quantization needs block_size)")
        if v.shape.dims[0] != dims[axis]:
            raise node.error(f"{what} '{name}' has {v.shape.dims[0]} entries for dim {axis} of size {dims[axis]}")
        return broadcast_in_dims(b, v, dims, [axis])
    if block < 0:
        raise node.error(f"block_size {block} is negative")
    if v.shape.rank != x.shape.rank:
        raise node.error(f"{what} '{name}' has rank {v.shape.rank}: blocked quantization takes one of x's rank "
                         f"{x.shape.rank}")
    size = dims[axis]
    if not isinstance(size, int):
        raise node.unsupported(f"blocked quantization along a symbolic dim ({size})")
    nblocks = -(-size // block)
    for d, (vd, xd) in enumerate(zip(v.shape.dims, dims)):
        want = nblocks if d == axis else xd
        if vd != want:
            raise node.error(f"{what} '{name}' has dims {list(v.shape.dims)}: block_size {block} along axis {axis} "
                             f"of x's dims {list(dims)} needs {want} at dim {d}")
    wide = list(v.shape.dims)
    wide.insert(axis + 1, block)
    mapping = [d if d <= axis else d + 1 for d in range(v.shape.rank)]
    rep = broadcast_in_dims(b, v, tuple(wide), mapping)
    full = list(dims)
    full[axis] = nblocks * block
    rep = b.reshape(rep, tuple(full))
    if nblocks * block != size:
        rank = x.shape.rank
        rep = b.op("slice", [rep], Shape(v.shape.dtype, tuple(dims)), start_indices=(0,) * rank,
                   limit_indices=tuple(dims), strides=(1,) * rank)
    return rep


def _output_dtype(node: OnnxNode) -> str | None:
    if node.has_attr("output_dtype") and node.attr("output_dtype"):
        to = node.attr("output_dtype")
        dtype = ir_dtype(to)
        if dtype is None:
            raise node.unsupported(f"output_dtype {onnx_type_name(to)}")
        return dtype
    return None


@onnx_op("DequantizeLinear", since=10, fold=False)  # quantized weights stay quantized: see passes/quantized_dot.py
def import_dequantize_linear(b: Builder, node: OnnxNode) -> list[Result]:
    """(x - zero_point) * scale, computed in float32 (float64 for a float64 scale) and rounded to the output
    type; fp8 and f4 inputs have no zero point."""
    x = node.input(0)
    src = x.shape.dtype
    if src not in INT_DTYPES and src not in STORAGE_DTYPES:
        raise node.unsupported(f"dequantizing {src}")
    _check_scale(node, 1)
    out = _output_dtype(node) or node.input(1).shape.dtype
    work = "f64" if node.input(1).shape.dtype == "f64" else "f32"
    scale = b.convert(_expand(b, node, node.input(1), x, "scale", 1), work)
    y = b.convert(x, work)
    if node.has_input(2):
        _check_zero_point(node, 2, src)
        if src not in F8_DTYPES and src != "f4e2m1fn":
            if node.dtype(2) != src:
                raise node.error(f"zero point '{node.proto.input[2]}' is {node.dtype(2)}, x is {src}")
            y = b.op("subtract", [y, b.convert(_expand(b, node, node.input(2), x, "zero point", 2), work)])
    return [b.convert(b.op("multiply", [y, scale]), out)]


@onnx_op("QuantizeLinear", since=10)
def import_quantize_linear(b: Builder, node: OnnxNode) -> list[Result]:
    """Integers: clamp(round_half_even(x / scale) + zero_point); fp8: x / scale, clamped to the type's largest
    value when ``saturate`` (the default); f4e2m1: x / scale + zero_point (the convert saturates)."""
    x = node.input(0)
    attr_out = _output_dtype(node)
    if node.has_input(2):
        out = node.dtype(2)
        if attr_out is not None and attr_out != out:
            raise node.error(f"output_dtype {attr_out} differs from the zero point's type {out}")
    else:
        out = attr_out or "u8"
    if out not in QUANT_INT_DTYPES and out not in FP8_QUANT_DTYPES and out != "f4e2m1fn":
        raise node.unsupported(f"quantizing to {out}")
    _check_scale(node, 1)
    work = node.input(1).shape.dtype
    if node.has_attr("precision") and node.attr("precision"):
        work = ir_dtype(node.attr("precision")) or work
    scale = b.convert(_expand(b, node, node.input(1), b.convert(x, work), "scale", 1), work)
    y = b.op("divide", [b.convert(x, work), scale])
    if out in FP8_QUANT_DTYPES:
        if node.has_input(2):
            _check_zero_point(node, 2, out)
        if node.attr("saturate", 1):
            m = float_max(out)
            y = b.op("clamp", [scalar(b, -m, work), y, scalar(b, m, work)])
        return [b.convert(y, out)]
    if out == "f4e2m1fn":
        if node.has_input(2):
            y = b.op("add", [y, b.convert(_expand(b, node, node.input(2), x, "zero point", 2), work)])
        return [b.convert(b.convert(y, "f32"), out)]
    y = b.op("round-nearest-even", [y])
    if node.has_input(2):
        y = b.op("add", [y, b.convert(_expand(b, node, node.input(2), x, "zero point", 2), work)])
    lo, hi = _int_range(out)
    y = b.op("clamp", [scalar(b, float(lo), work), y, scalar(b, float(hi), work)])
    return [b.convert(y, out)]


def cast(b: Builder, node: OnnxNode, x: Instruction, dtype: str) -> Instruction:
    """ONNX's Cast of x to ``dtype``: the IR convert, except that a cast to an fp8 type with ``saturate`` (the
    default) clamps to the type's largest finite value first (infinities too; NaN stays NaN), and a cast to
    f8e8m0fnu rounds per ``round_mode`` ("up" by default) and ``saturate`` as onnx.numpy_helper.to_float8e8m0."""
    saturate = node.attr("saturate", 1) if node.has_attr("saturate") else 1
    if dtype == "f8e8m0fnu":
        mode = node.attr("round_mode", "up") if node.has_attr("round_mode") else "up"
        if isinstance(mode, bytes):
            mode = mode.decode()
        if mode not in ("up", "down", "nearest"):
            raise node.error(f"round_mode '{mode}' is not up, down or nearest")
        return _to_e8m0(b, b.convert(x, "f32"), saturate, mode)
    if dtype in FP8_QUANT_DTYPES and saturate and x.shape.dtype != dtype:
        f = b.convert(x, "f32")
        m = float_max(dtype)
        return b.convert(b.op("clamp", [scalar(b, -m, "f32"), f, scalar(b, m, "f32")]), dtype)
    return b.convert(x, dtype)


def _to_e8m0(b: Builder, x: Instruction, saturate: bool, mode: str) -> Instruction:
    """float32 -> f8e8m0fnu on the bits (the sign is dropped): the biased exponent, plus one where ``mode``
    rounds up (not past 254 when saturating); 255 (NaN) for NaN and infinities."""
    dims = x.shape.dims

    def k(v: int) -> Instruction:
        return b.broadcast_to(scalar(b, v, "u32"), dims)

    def masked(bits: int) -> Instruction:
        return b.op("compare", [b.op("and", [u, k(bits)]), k(0)], Shape("pred", dims), direction="NE")

    u = b.op("bitcast-convert", [x], Shape("u32", dims))
    e = b.op("and", [b.op("shift-right-logical", [u, k(23)]), k(0xFF)])
    special = b.op("compare", [e, k(0xFF)], Shape("pred", dims), direction="EQ")
    if mode == "down":
        up = None
    elif mode == "up":
        up = masked(0x7FFFFF)
    else:
        lsb = b.op("compare", [e, k(0)], Shape("pred", dims), direction="GT")
        up = b.op("and", [masked(0x400000), b.op("or", [b.op("or", [masked(0x200000), masked(0x1FFFFF)]), lsb])])
    if up is not None and saturate:
        at_max = b.op("compare", [e, k(0xFE)], Shape("pred", dims), direction="EQ")
        up = b.op("and", [up, b.op("not", [at_max])])
    if up is not None:
        e = b.op("add", [e, b.convert(up, "u32")])
    e = b.op("select", [special, k(0xFF), e])
    return b.op("bitcast-convert", [b.convert(e, "u8")], Shape("f8e8m0fnu", dims))
