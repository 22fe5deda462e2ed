"""QuantizeLinear and DequantizeLinear, per tensor or per axis (blocked quantization is not supported)."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, scalar
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.frontend.onnx.types import ir_dtype, onnx_type_name
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import INT_DTYPES, Instruction


def _per_axis(b: Builder, node: OnnxNode, v: Instruction, x: Instruction, what: str) -> Instruction:
    """A scale or zero point broadcast to x's dims: a scalar, or 1-D along ``axis``."""
    if node.attr("block_size", 0):
        raise node.unsupported("blocked quantization (block_size)")
    dims = x.shape.dims
    if v.shape.rank == 0 or (v.shape.rank == 1 and v.shape.dims[0] == 1):
        return b.broadcast_to(b.reshape(v, ()), dims)
    if v.shape.rank != 1:
        raise node.unsupported(f"a {what} of rank {v.shape.rank} (blocked quantization)")
    axis = node.axis(node.attr("axis", 1), x.shape.rank)
    if v.shape.dims[0] != dims[axis]:
        raise node.error(f"{what} has {v.shape.dims[0]} entries for dim {axis} of size {dims[axis]}")
    return broadcast_in_dims(b, v, dims, [axis])


@onnx_op("DequantizeLinear", since=10, fold=False)  # quantized weights stay quantized: see passes/quantized_dot.py
def import_dequantize_linear(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    if x.shape.dtype not in INT_DTYPES:
        raise node.unsupported(f"dequantizing {x.shape.dtype}")
    out = node.input(1).shape.dtype
    if node.has_attr("output_dtype") and node.attr("output_dtype"):
        out = ir_dtype(node.attr("output_dtype")) or out
    scale = b.convert(_per_axis(b, node, node.input(1), x, "scale"), out)
    y = b.convert(x, out)
    if node.has_input(2):
        y = b.op("subtract", [y, b.convert(_per_axis(b, node, node.input(2), x, "zero point"), out)])
    return [b.op("multiply", [y, scale])]


@onnx_op("QuantizeLinear", since=10)
def import_quantize_linear(b: Builder, node: OnnxNode) -> list[Result]:
    """saturate(round_half_even(x / scale) + zero_point)."""
    x = node.input(0)
    if node.has_input(2):
        out = node.dtype(2)
    elif node.has_attr("output_dtype") and node.attr("output_dtype"):
        out = ir_dtype(node.attr("output_dtype"))
        if out is None:
            raise node.unsupported(f"quantizing to {onnx_type_name(node.attr('output_dtype'))}")
    else:
        out = "u8"
    if out not in INT_DTYPES:
        raise node.unsupported(f"quantizing to {out}")
    work = node.input(1).shape.dtype
    scale = _per_axis(b, node, node.input(1), b.convert(x, work), "scale")
    y = b.op("round-nearest-even", [b.op("divide", [b.convert(x, work), scale])])
    if node.has_input(2):
        y = b.op("add", [y, b.convert(_per_axis(b, node, node.input(2), x, "zero point"), work)])
    info = np.iinfo(numpy_dtype(out))
    y = b.op("clamp", [scalar(b, float(info.min), work), y, scalar(b, float(info.max), work)])
    return [b.convert(y, out)]
