"""Elementwise ops: unary math, binary arithmetic with numpy broadcasting, comparisons, activations, casts."""

from __future__ import annotations

import math
from functools import reduce

from mlcc.frontend.onnx.ops import quantize
from mlcc.frontend.onnx.ops.helpers import broadcast_inputs, full, require_float, scalar, scalar_op, uniform_value
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.frontend.onnx.types import ir_dtype, onnx_type_name
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import DTYPE_BITS, Instruction, Shape, is_float

UNARY = {
    "Abs": "abs", "Neg": "negate", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Tanh": "tanh",
    "Erf": "erf", "Sigmoid": "logistic", "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin",
    "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh",
    "Atanh": "atanh", "Floor": "floor", "Ceil": "ceil", "Round": "round-nearest-even", "Sign": "sign",
    "Not": "not", "BitwiseNot": "not", "IsNaN": "is-nan", "Reciprocal": "reciprocal", "Relu": "relu",
    "Softplus": "softplus", "Softsign": "softsign",
}
BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide",
          "And": "and", "Or": "or", "Xor": "xor",
          "BitwiseAnd": "and", "BitwiseOr": "or", "BitwiseXor": "xor"}
COMPARE = {"Equal": "EQ", "Less": "LT", "LessOrEqual": "LE", "Greater": "GT", "GreaterOrEqual": "GE"}
VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add"}


def _unary_rule(opcode: str):
    def import_unary(b: Builder, node: OnnxNode) -> list[Result]:
        return [b.op(opcode, [node.input(0)])]
    return import_unary


# x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1 are x: (identity value, input positions it may take)
IDENTITY = {"add": (0, (0, 1)), "subtract": (0, (1,)), "multiply": (1, (0, 1)), "divide": (1, (1,))}


def _binary_rule(opcode: str):
    def import_binary(b: Builder, node: OnnxNode) -> list[Result]:
        if opcode in IDENTITY and node.dtype(0) != "pred":
            value, positions = IDENTITY[opcode]
            for k in positions:
                other = 1 - k
                if uniform_value(node, k) == value and _covers(b, node.dims(other), node.dims(k)):
                    return [node.value(other) if node.value(other) is not None else node.input(other)]
        return [b.op(opcode, broadcast_inputs(b, node, [0, 1]))]
    return import_binary


def _covers(b: Builder, dims, other) -> bool:
    """Broadcasting ``other`` against ``dims`` gives ``dims``."""
    try:
        return tuple(dims) == b.broadcast_shapes(dims, other)
    except ValueError:
        return False


def _compare_rule(direction: str):
    def import_compare(b: Builder, node: OnnxNode) -> list[Result]:
        return [b.op("compare", broadcast_inputs(b, node, [0, 1]), direction=direction)]
    return import_compare


def _variadic_rule(opcode: str):
    def import_variadic(b: Builder, node: OnnxNode) -> list[Result]:
        xs = broadcast_inputs(b, node, [i for i in range(node.num_inputs) if node.has_input(i)])
        return [reduce(lambda x, y: b.op(opcode, [x, y]), xs)]
    return import_variadic


for _op, _opcode in UNARY.items():
    onnx_op(_op, since=1)(_unary_rule(_opcode))
for _op, _opcode in BINARY.items():
    onnx_op(_op, since=7)(_binary_rule(_opcode))
for _op, _direction in COMPARE.items():
    onnx_op(_op, since=7)(_compare_rule(_direction))
for _op, _opcode in VARIADIC.items():
    onnx_op(_op, since=1)(_variadic_rule(_opcode))


@onnx_op("Mean", since=1)
def import_mean(b: Builder, node: OnnxNode) -> list[Result]:
    xs = broadcast_inputs(b, node, [i for i in range(node.num_inputs) if node.has_input(i)])
    total = reduce(lambda x, y: b.op("add", [x, y]), xs)
    return [total if len(xs) == 1 else scalar_op(b, "divide", total, len(xs))]


@onnx_op("Pow", since=7)
def import_pow(b: Builder, node: OnnxNode) -> list[Result]:
    return [b.op("power", broadcast_inputs(b, node, [0, 1], dtype=node.dtype(0)))]


@onnx_op("Mod", since=10)
def import_mod(b: Builder, node: OnnxNode) -> list[Result]:
    fmod = node.attr("fmod", 0)
    if is_float(node.dtype(0)) and not fmod and node.opset < 28:
        raise node.error("Mod of floating-point inputs needs fmod=1 before opset 28")
    return [b.op("fmod" if fmod else "remainder", broadcast_inputs(b, node, [0, 1]))]


@onnx_op("BitShift", since=11)
def import_bit_shift(b: Builder, node: OnnxNode) -> list[Result]:
    direction = node.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise node.error(f"direction '{direction}' is neither LEFT nor RIGHT")
    signed = node.dtype(0).startswith("s")  # signed types arrived in opset 28: their right shift keeps the sign
    opcode = "shift-left" if direction == "LEFT" else "shift-right-arithmetic" if signed else "shift-right-logical"
    return [b.op(opcode, broadcast_inputs(b, node, [0, 1]))]


@onnx_op("IsInf", since=10)
def import_is_inf(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    inf = b.op("is-inf", [x])
    if pos and neg:
        return [inf]
    if not pos and not neg:
        return [full(b, False, "pred", x.shape.dims)]
    sign = scalar_op(b, "compare", x, 0, direction="GT" if pos else "LT")
    return [b.op("and", [inf, sign])]


@onnx_op("Where", since=9)
def import_where(b: Builder, node: OnnxNode) -> list[Result]:
    return [b.op("select", broadcast_inputs(b, node, [0, 1, 2]))]


@onnx_op("Cast", since=6)
def import_cast(b: Builder, node: OnnxNode) -> list[Result]:
    to = node.attr("to")
    dtype = ir_dtype(to)
    if dtype is None:
        raise node.unsupported(f"cast to {onnx_type_name(to)}")
    return [quantize.cast(b, node, node.input(0), dtype)]


@onnx_op("CastLike", since=15)
def import_cast_like(b: Builder, node: OnnxNode) -> list[Result]:
    like = node.tensor(1)
    if like.inst is None and like.value is None and like.deferred:  # e.g. an initializer of a type mlcc lacks
        raise node.unsupported(f"input '{like.name}' {like.deferred}")
    return [quantize.cast(b, node, node.input(0), like.dtype)]


@onnx_op("Clip", since=6)
def import_clip_attrs(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    lo = scalar(b, node.attr("min"), x.shape.dtype) if node.has_attr("min") else None
    hi = scalar(b, node.attr("max"), x.shape.dtype) if node.has_attr("max") else None
    return [_clip(b, x, lo, hi)]


@onnx_op("Clip", since=11)
def import_clip(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    bounds = []
    for i in (1, 2):
        if not node.has_input(i):
            bounds.append(None)
            continue
        bound = node.input(i)
        if bound.shape.rank != 0:
            if any(d != 1 for d in bound.shape.dims):
                raise node.error(f"min/max must be scalars, got dims {list(bound.shape.dims)}")
            bound = b.reshape(bound, ())
        bounds.append(bound)
    return [_clip(b, x, *bounds)]


def _clip(b: Builder, x: Instruction, lo: Instruction | None, hi: Instruction | None) -> Instruction:
    if lo is not None and hi is not None:
        return b.op("clamp", [lo, x, hi])
    if lo is not None:
        x = b.elementwise("maximum", x, lo)
    if hi is not None:
        x = b.elementwise("minimum", x, hi)
    return x


# ---- activations
def _where_negative(b: Builder, x: Instruction, negative: Instruction, positive: Instruction,
                    strict: bool = True) -> Instruction:
    """select(x < 0 (or x <= 0), negative, positive)."""
    cond = scalar_op(b, "compare", x, 0, direction="LT" if strict else "LE")
    return b.elementwise("select", cond, negative, positive)


@onnx_op("LeakyRelu", since=6)
def import_leaky_relu(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    return [_where_negative(b, x, scalar_op(b, "multiply", x, node.attr("alpha", 0.01)), x)]


@onnx_op("PRelu", since=7)
def import_prelu(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    slope = b.broadcast_to(node.input(1), x.shape.dims)
    return [_where_negative(b, x, b.op("multiply", [x, slope]), x)]


@onnx_op("Elu", since=6)
def import_elu(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    neg = scalar_op(b, "multiply", b.op("expm1", [x]), node.attr("alpha", 1.0))
    return [_where_negative(b, x, neg, x)]


@onnx_op("Selu", since=6)
def import_selu(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    alpha = node.attr("alpha", 1.67326319217681884765625)
    gamma = node.attr("gamma", 1.05070102214813232421875)
    neg = scalar_op(b, "multiply", b.op("expm1", [x]), alpha)
    return [scalar_op(b, "multiply", _where_negative(b, x, neg, x, strict=False), gamma)]


@onnx_op("Celu", since=12)
def import_celu(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    alpha = node.attr("alpha", 1.0)
    neg = scalar_op(b, "multiply", b.op("expm1", [scalar_op(b, "divide", x, alpha)]), alpha)
    return [_where_negative(b, x, neg, x, strict=False)]


@onnx_op("ThresholdedRelu", since=10)
def import_thresholded_relu(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    keep = scalar_op(b, "compare", x, node.attr("alpha", 1.0), direction="GT")
    return [b.op("select", [keep, x, full(b, 0, x.shape.dtype, x.shape.dims)])]


@onnx_op("Binarizer", since=1, domain="ai.onnx.ml")
def import_binarizer(b: Builder, node: OnnxNode) -> list[Result]:
    """1 where x > threshold, else 0, in x's type (an integer x is above t when it is above floor(t))."""
    x = node.input(0)
    threshold = node.attr("threshold", 0.0)
    if not is_float(x.shape.dtype):
        threshold = math.floor(threshold)
    return [b.convert(scalar_op(b, "compare", x, threshold, direction="GT"), x.shape.dtype)]


def _hard_sigmoid(b: Builder, x: Instruction, alpha: float, beta: float) -> Instruction:
    dtype = x.shape.dtype
    y = scalar_op(b, "add", scalar_op(b, "multiply", x, alpha), beta)
    return b.op("clamp", [scalar(b, 0, dtype), y, scalar(b, 1, dtype)])


@onnx_op("HardSigmoid", since=6)
def import_hard_sigmoid(b: Builder, node: OnnxNode) -> list[Result]:
    return [_hard_sigmoid(b, node.input(0), node.attr("alpha", 0.2), node.attr("beta", 0.5))]


@onnx_op("HardSwish", since=14)
def import_hard_swish(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    return [b.op("multiply", [x, _hard_sigmoid(b, x, 1 / 6, 0.5)])]


@onnx_op("Mish", since=18)
def import_mish(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    return [b.op("mish", [x])]


@onnx_op("Gelu", since=20)
def import_gelu(b: Builder, node: OnnxNode) -> list[Result]:
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.error(f"approximate='{approximate}' is neither none nor tanh")
    x = node.input(0)
    require_float(node, x)
    return [b.op("gelu", [x], approximate=approximate)]


@onnx_op("Shrink", since=9)
def import_shrink(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    bias, lambd = node.attr("bias", 0.0), node.attr("lambd", 0.5)
    below = scalar_op(b, "compare", x, -lambd, direction="LT")
    above = scalar_op(b, "compare", x, lambd, direction="GT")
    zero = full(b, 0, x.shape.dtype, x.shape.dims)
    y = b.op("select", [above, scalar_op(b, "subtract", x, bias), zero])
    return [b.op("select", [below, scalar_op(b, "add", x, bias), y])]


def _swish(b: Builder, x: Instruction, alpha: float) -> Instruction:
    gate = x if alpha == 1.0 else scalar_op(b, "multiply", x, alpha)
    return b.op("multiply", [x, b.op("logistic", [gate])])


@onnx_op("Swish", since=24)
def import_swish(b: Builder, node: OnnxNode) -> list[Result]:
    return [_swish(b, node.input(0), node.attr("alpha", 1.0))]


@onnx_op("SwiGLU", since=28)
def import_swiglu(b: Builder, node: OnnxNode) -> list[Result]:
    gate, value = node.input(0), node.input(1)
    if gate.shape.dims != value.shape.dims:
        raise node.error(f"A {list(gate.shape.dims)} and B {list(value.shape.dims)} must have the same dims")
    return [b.op("multiply", [_swish(b, gate, node.attr("alpha", 1.0)), value])]


@onnx_op("BitCast", since=26)
def import_bitcast(b: Builder, node: OnnxNode) -> list[Result]:
    to = node.attr("to")
    dtype = ir_dtype(to)
    if dtype is None:
        raise node.unsupported(f"bitcast to {onnx_type_name(to)}")
    x = node.input(0)
    if DTYPE_BITS[dtype] != DTYPE_BITS[x.shape.dtype]:
        raise node.error(f"cannot reinterpret {x.shape.dtype} as {dtype}")
    if dtype == x.shape.dtype:
        return [x]
    if "pred" in (dtype, x.shape.dtype):  # a bool's byte is 0 or 1: the same bits as converting
        return [b.convert(x, dtype)]
    return [b.op("bitcast-convert", [x], Shape(dtype, x.shape.dims))]
