"""Quantized operators: QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger, DynamicQuantizeLinear, and the
com.microsoft QOperator ops onnxruntime's quantizer writes (QGemm, QLinearAdd/Mul/Softmax/Sigmoid/LeakyRelu/
Concat/GlobalAveragePool, DynamicQuantizeMatMul, MatMulIntegerToFloat).

Each is imported as what it means, the float op between a dequantize of its integer inputs and a quantize
of its result, written in the same form as DequantizeLinear and QuantizeLinear import to:

    dequantize(q, s, z) = (convert_f(q) - convert_f(z)) * s
    quantize(y, s, z)   = convert_int(clamp(lo, round_half_even(y / s) + z, hi))

so passes/quantized_dot.py turns every dequantized contraction into an 8-bit integer dot or convolution
accumulated in s32 with the scales in its epilogue, and folds the quantize -> dequantize round trips.
MatMulInteger and ConvInteger (s32 results) are the same contraction with scale 1, converted to s32.
"""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.conv import window_pads
from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, scalar, static_dims
from mlcc.frontend.onnx.ops.linalg import dot, matmul
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction

QUANTIZED = ("u8", "s8")
MS = "com.microsoft"


def _spread(b: Builder, node: OnnxNode, v: Instruction, dims: tuple, axis: int | None, what: str) -> Instruction:
    """A scale or zero point at dims: one value, or a vector along axis."""
    if v.shape.rank == 0 or (v.shape.rank == 1 and v.shape.dims[0] == 1):
        return b.broadcast_to(b.reshape(v, ()), dims)
    if v.shape.rank != 1 or axis is None:
        raise node.unsupported(f"a {what} of dims {list(v.shape.dims)} (per tensor{', or along one axis' if axis is not None else ''} only)")
    if v.shape.dims[0] != dims[axis]:
        raise node.error(f"{what} has {v.shape.dims[0]} entries for dim {axis} of size {dims[axis]}")
    return broadcast_in_dims(b, v, dims, [axis])


def _quantized(node: OnnxNode, i: int) -> Instruction:
    x = node.input(i)
    if x.shape.dtype not in QUANTIZED:
        raise node.unsupported(f"input {i} of type {x.shape.dtype} (8-bit integers only)")
    return x


def dequantize(b: Builder, node: OnnxNode, q: Instruction, scale: int | None, zero: int | None,
               axis: int | None = None) -> Instruction:
    """(convert(q) - zero) * scale in the scale's type (f32 without one); scale and zero are input indices."""
    dims = tuple(q.shape.dims)
    dtype = node.input(scale).shape.dtype if scale is not None else "f32"
    y = b.convert(q, dtype)
    if zero is not None and node.has_input(zero):
        y = b.op("subtract", [y, b.convert(_spread(b, node, node.input(zero), dims, axis, "zero point"), dtype)])
    if scale is not None:
        y = b.op("multiply", [y, _spread(b, node, b.convert(node.input(scale), dtype), dims, axis, "scale")])
    return y


def quantize(b: Builder, node: OnnxNode, y: Instruction, scale: int, zero: int | None, dtype: str = "u8",
             axis: int | None = None) -> Instruction:
    """saturate(round_half_even(y / scale) + zero) as QuantizeLinear imports it."""
    if zero is not None and node.has_input(zero):
        dtype = node.input(zero).shape.dtype
    if dtype not in QUANTIZED:
        raise node.unsupported(f"quantizing to {dtype}")
    dims = tuple(y.shape.dims)
    work = node.input(scale).shape.dtype
    y = b.op("round-nearest-even", [b.op("divide", [b.convert(y, work),
                                                     _spread(b, node, node.input(scale), dims, axis, "scale")])])
    if zero is not None and node.has_input(zero):
        y = b.op("add", [y, b.convert(_spread(b, node, node.input(zero), dims, axis, "zero point"), work)])
    info = np.iinfo(numpy_dtype(dtype))
    y = b.op("clamp", [b.broadcast_to(scalar(b, float(info.min), work), dims), y,
                       b.broadcast_to(scalar(b, float(info.max), work), dims)])
    return b.convert(y, dtype)


def _column_axis(w: Instruction) -> int:
    return w.shape.rank - 1


# ---------------------------------------------------------------- contractions

@onnx_op("QLinearMatMul", since=10)
def import_qlinear_matmul(b: Builder, node: OnnxNode) -> list[Result]:
    a, w = _quantized(node, 0), _quantized(node, 3)
    y = matmul(b, dequantize(b, node, a, 1, 2), dequantize(b, node, w, 4, 5, _column_axis(w)))
    return [quantize(b, node, y, 6, 7)]


@onnx_op("MatMulInteger", since=10)
def import_matmul_integer(b: Builder, node: OnnxNode) -> list[Result]:
    """(A - a_zero_point) @ (B - b_zero_point) in s32: exact in the integer contraction the pass makes of it."""
    a, w = _quantized(node, 0), _quantized(node, 1)
    y = matmul(b, dequantize(b, node, a, None, 2, a.shape.rank - 2 if a.shape.rank > 1 else None),
               dequantize(b, node, w, None, 3, _column_axis(w)))
    return [b.convert(y, "s32")]


def _conv(b: Builder, node: OnnxNode, x: Instruction, w: Instruction) -> Instruction:
    n = x.shape.rank - 2
    if n < 1 or w.shape.rank != x.shape.rank:
        raise node.error(f"input rank {x.shape.rank} and weight rank {w.shape.rank} do not make a convolution")
    kernel = static_dims(node, w.shape.dims[2:], "kernel dims")
    sizes = static_dims(node, x.shape.dims[2:], "spatial dims")
    strides = list(node.attr("strides", [1] * n))
    dilations = list(node.attr("dilations", [1] * n))
    low, high = window_pads(node, sizes, kernel, strides, dilations)
    sp = "".join(str(i) for i in range(n))
    return b.op("convolution", [x, w], window_strides=tuple(strides), padding_low=tuple(low),
                padding_high=tuple(high), rhs_dilation=tuple(dilations), feature_group_count=node.attr("group", 1),
                dim_labels=f"bf{sp}_oi{sp}->bf{sp}")


@onnx_op("QLinearConv", since=10)
def import_qlinear_conv(b: Builder, node: OnnxNode) -> list[Result]:
    x, w = _quantized(node, 0), _quantized(node, 3)
    y = _conv(b, node, dequantize(b, node, x, 1, 2), dequantize(b, node, w, 4, 5, 0))
    if node.has_input(8):  # an s32 bias at scale x_scale * w_scale
        bias = node.input(8)
        if bias.shape.rank != 1:
            raise node.error(f"bias must be 1-D, has dims {list(bias.shape.dims)}")
        scale = b.op("multiply", [b.broadcast_to(b.reshape(node.input(1), ()), bias.shape.dims),
                                  _spread(b, node, node.input(4), tuple(bias.shape.dims), 0, "scale")])
        bias = b.op("multiply", [b.convert(bias, "f32"), scale])
        y = b.op("add", [y, broadcast_in_dims(b, bias, y.shape.dims, [1])])
    return [quantize(b, node, y, 6, 7)]


@onnx_op("ConvInteger", since=10)
def import_conv_integer(b: Builder, node: OnnxNode) -> list[Result]:
    x, w = _quantized(node, 0), _quantized(node, 1)
    y = _conv(b, node, dequantize(b, node, x, None, 2), dequantize(b, node, w, None, 3, 0))
    return [b.convert(y, "s32")]


@onnx_op("QGemm", since=1, domain=MS)
def import_qgemm(b: Builder, node: OnnxNode) -> list[Result]:
    """alpha * A' @ B' + C (C an s32 bias at scale a_scale * b_scale * alpha), quantized when y_scale is given."""
    a, w = _quantized(node, 0), _quantized(node, 3)
    trans_a, trans_b = node.attr("transA", 0), node.attr("transB", 0)
    x = dequantize(b, node, a, 1, 2)
    wf = dequantize(b, node, w, 4, 5, 0 if trans_b else 1)
    y = dot(b, x, wf, lhs_contract=[0 if trans_a else 1], rhs_contract=[1 if trans_b else 0])
    alpha = float(node.attr("alpha", 1.0))
    if alpha != 1.0:
        y = b.op("multiply", [y, b.broadcast_to(scalar(b, alpha, "f32"), y.shape.dims)])
    if node.has_input(6):
        c = node.input(6)
        n = y.shape.dims[1]
        c = b.convert(c, "f32")
        if c.shape.rank == 1:
            cs = b.op("multiply", [c, b.op("multiply", [b.broadcast_to(b.reshape(node.input(1), ()), c.shape.dims),
                                                          _spread(b, node, node.input(4), (n,), 0, "scale")])])
            c = broadcast_in_dims(b, cs, y.shape.dims, [1])
        else:
            raise node.unsupported(f"a bias of dims {list(c.shape.dims)} (1-D only)")
        if alpha != 1.0:
            c = b.op("multiply", [c, b.broadcast_to(scalar(b, alpha, "f32"), y.shape.dims)])
        y = b.op("add", [y, c])
    if node.has_input(7):
        return [quantize(b, node, y, 7, 8)]
    return [y]


def _float_matmul(b: Builder, node: OnnxNode, x: Instruction, w: Instruction, w_scale: int, w_zero: int | None,
                  bias: int | None) -> Instruction:
    y = matmul(b, x, dequantize(b, node, w, w_scale, w_zero, _column_axis(w)))
    if bias is not None and node.has_input(bias):
        y = b.op("add", [y, broadcast_in_dims(b, node.input(bias), y.shape.dims, [y.shape.rank - 1])])
    return y


@onnx_op("MatMulIntegerToFloat", since=1, domain=MS)
def import_matmul_integer_to_float(b: Builder, node: OnnxNode) -> list[Result]:
    a, w = _quantized(node, 0), _quantized(node, 1)
    return [_float_matmul(b, node, dequantize(b, node, a, 2, 4), w, 3, 5, 6)]


@onnx_op("DynamicQuantizeMatMul", since=1, domain=MS)
def import_dynamic_quantize_matmul(b: Builder, node: OnnxNode) -> list[Result]:
    """A dynamically quantized (u8) A times the s8/u8 B, in float: the quantize of A is DynamicQuantizeLinear's."""
    x = node.input(0)
    q, scale, zero = _dynamic_quantize(b, x)
    dims = tuple(q.shape.dims)
    a = b.op("multiply", [b.op("subtract", [b.convert(q, "f32"), b.broadcast_to(b.convert(zero, "f32"), dims)]),
                          b.broadcast_to(scale, dims)])
    return [_float_matmul(b, node, a, _quantized(node, 1), 2, 3, 4)]


# ---------------------------------------------------------------- dynamic quantization

def _dynamic_quantize(b: Builder, x: Instruction) -> tuple[Instruction, Instruction, Instruction]:
    """DynamicQuantizeLinear: u8 values, the f32 scale (range including 0, over 255) and the u8 zero point."""
    dims = tuple(x.shape.dims)
    every = tuple(range(x.shape.rank))
    zero = scalar(b, 0.0, "f32")
    hi = b.op("maximum", [b.op("reduce", [x], dimensions=every, kind="maximum"), zero])
    lo = b.op("minimum", [b.op("reduce", [x], dimensions=every, kind="minimum"), zero])
    scale = b.op("divide", [b.op("subtract", [hi, lo]), scalar(b, 255.0, "f32")])
    zp = b.op("clamp", [zero, b.op("round-nearest-even", [b.op("divide", [b.op("negate", [lo]), scale])]),
                        scalar(b, 255.0, "f32")])
    y = b.op("add", [b.op("round-nearest-even", [b.op("divide", [x, b.broadcast_to(scale, dims)])]),
                     b.broadcast_to(zp, dims)])
    y = b.op("clamp", [b.broadcast_to(zero, dims), y, b.broadcast_to(scalar(b, 255.0, "f32"), dims)])
    return b.convert(y, "u8"), scale, b.convert(zp, "u8")


@onnx_op("DynamicQuantizeLinear", since=11)
def import_dynamic_quantize_linear(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    if x.shape.dtype != "f32":
        raise node.unsupported(f"input of type {x.shape.dtype} (f32 only)")
    return list(_dynamic_quantize(b, x))


# ---------------------------------------------------------------- elementwise and the rest (QOperator)

def _binary(opcode: str):
    def import_qlinear_binary(b: Builder, node: OnnxNode) -> list[Result]:
        x, y = dequantize(b, node, _quantized(node, 0), 1, 2), dequantize(b, node, _quantized(node, 3), 4, 5)
        dims = b.broadcast_shapes(x.shape.dims, y.shape.dims)
        r = b.op(opcode, [b.broadcast_to(x, dims), b.broadcast_to(y, dims)])
        return [quantize(b, node, r, 6, 7, node.input(0).shape.dtype)]
    return import_qlinear_binary


onnx_op("QLinearAdd", since=1, domain=MS)(_binary("add"))
onnx_op("QLinearMul", since=1, domain=MS)(_binary("multiply"))


def _unary(fn):
    def import_qlinear_unary(b: Builder, node: OnnxNode) -> list[Result]:
        x = dequantize(b, node, _quantized(node, 0), 1, 2)
        return [quantize(b, node, fn(b, node, x), 3, 4, node.input(0).shape.dtype)]
    return import_qlinear_unary


def _softmax(b: Builder, node: OnnxNode, x: Instruction) -> Instruction:
    rank = x.shape.rank
    axis = node.axis(node.attr("axis", -1), rank)
    if node.attr("opset", 13) < 13 and axis != rank - 1:
        raise node.unsupported("softmax over the flattened trailing dims (opset < 13) of more than the last axis")
    return b.op("softmax", [x], dimension=axis)


def _leaky_relu(b: Builder, node: OnnxNode, x: Instruction) -> Instruction:
    alpha = b.broadcast_to(scalar(b, float(node.attr("alpha", 0.01)), x.shape.dtype), x.shape.dims)
    zero = b.broadcast_to(scalar(b, 0.0, x.shape.dtype), x.shape.dims)
    negative = b.op("compare", [x, zero], direction="LT")
    return b.op("select", [negative, b.op("multiply", [x, alpha]), x])


def _global_average(b: Builder, node: OnnxNode, x: Instruction) -> Instruction:
    channels_last = node.attr("channels_last", 0)
    rank = x.shape.rank
    axes = tuple(range(1, rank - 1)) if channels_last else tuple(range(2, rank))
    count = 1
    for d in static_dims(node, [x.shape.dims[a] for a in axes], "spatial dims"):
        count *= d
    y = b.op("reduce", [x], dimensions=axes, kind="add")
    y = b.op("divide", [y, b.broadcast_to(scalar(b, float(count), x.shape.dtype), y.shape.dims)])
    return b.reshape(y, tuple(1 if i in axes else d for i, d in enumerate(x.shape.dims)))


onnx_op("QLinearSoftmax", since=1, domain=MS)(_unary(_softmax))
onnx_op("QLinearSigmoid", since=1, domain=MS)(_unary(lambda b, node, x: b.op("logistic", [x])))
onnx_op("QLinearLeakyRelu", since=1, domain=MS)(_unary(_leaky_relu))
onnx_op("QLinearGlobalAveragePool", since=1, domain=MS)(_unary(_global_average))


@onnx_op("QLinearConcat", since=1, domain=MS)
def import_qlinear_concat(b: Builder, node: OnnxNode) -> list[Result]:
    """Inputs: y_scale, y_zero_point, then (x, x_scale, x_zero_point) per input."""
    count = node.num_inputs - 2
    if count < 3 or count % 3:
        raise node.error(f"{node.num_inputs} inputs are not y_scale, y_zero_point and triples of x, scale, zero")
    parts = [dequantize(b, node, _quantized(node, i), i + 1, i + 2) for i in range(2, node.num_inputs, 3)]
    axis = node.axis(node.attr("axis"), parts[0].shape.rank)
    y = b.op("concatenate", parts, dimension=axis)
    return [quantize(b, node, y, 0, 1, node.input(2).shape.dtype)]
