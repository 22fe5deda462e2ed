"""Elementwise ops, constants, iota, compare, select, clamp and conversions."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.stablehlo.importer import Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.ir import DTYPE_BYTES, Instruction, Shape

UNARY = {
    "stablehlo.abs": "abs", "stablehlo.negate": "negate", "stablehlo.exponential": "exp",
    "stablehlo.exponential_minus_one": "expm1", "stablehlo.log": "log", "stablehlo.log_plus_one": "log-plus-one",
    "stablehlo.sqrt": "sqrt", "stablehlo.rsqrt": "rsqrt", "stablehlo.cbrt": "cbrt", "stablehlo.tanh": "tanh",
    "stablehlo.logistic": "logistic", "stablehlo.sine": "sin", "stablehlo.cosine": "cos", "stablehlo.tan": "tan",
    "stablehlo.floor": "floor", "stablehlo.ceil": "ceil", "stablehlo.round_nearest_even": "round-nearest-even",
    "stablehlo.round_nearest_afz": "round-nearest-afz", "stablehlo.sign": "sign", "stablehlo.not": "not",
    "stablehlo.is_finite": "is-finite", "stablehlo.popcnt": "popcnt",
    "chlo.erf": "erf", "chlo.tan": "tan", "chlo.asin": "asin", "chlo.acos": "acos", "chlo.atan": "atan",
    "chlo.sinh": "sinh", "chlo.cosh": "cosh", "chlo.asinh": "asinh", "chlo.acosh": "acosh",
    "chlo.atanh": "atanh", "chlo.is_inf": "is-inf",
}

BINARY = {
    "stablehlo.add": "add", "stablehlo.subtract": "subtract", "stablehlo.multiply": "multiply",
    "stablehlo.divide": "divide",
    "stablehlo.remainder": "fmod",  # StableHLO's remainder takes the dividend's sign: C fmod
    "stablehlo.power": "power", "stablehlo.maximum": "maximum", "stablehlo.minimum": "minimum",
    "stablehlo.atan2": "atan2", "stablehlo.and": "and", "stablehlo.or": "or", "stablehlo.xor": "xor",
    "stablehlo.shift_left": "shift-left", "stablehlo.shift_right_arithmetic": "shift-right-arithmetic",
    "stablehlo.shift_right_logical": "shift-right-logical",
}


@stablehlo_op(*UNARY)
def import_unary(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.op(UNARY[op.name], args)


@stablehlo_op(*BINARY)
def import_binary(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.op(BINARY[op.name], args)


@stablehlo_op("chlo.square")
def import_square(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.op("multiply", [args[0], args[0]])


@stablehlo_op("chlo.is_pos_inf", "chlo.is_neg_inf")
def import_is_signed_inf(cx: Context, op: Op, args: list[Instruction]) -> Results:
    (x,) = args
    inf = np.inf if op.name == "chlo.is_pos_inf" else -np.inf
    bound = cx.b.splat(inf, x.shape.dtype, x.shape.dims)
    return cx.b.op("compare", [x, bound], direction="EQ")


@stablehlo_op("stablehlo.compare")
def import_compare(cx: Context, op: Op, args: list[Instruction]) -> Results:
    direction = op.attrs.get("comparison_direction")
    if direction not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        raise cx.error(op, f"unknown comparison direction {direction!r}")
    if op.attrs.get("compare_type") == "TOTALORDER":  # floats compared by their total order (NaN, -0 included)
        args = [total_order_key(cx, a) for a in args]
    return cx.b.op("compare", args, direction=direction)


def total_order_key(cx: Context, x: Instruction) -> Instruction:
    """An integer ordering like float x in the total order (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN): the
    sign-magnitude bits made two's complement. Other types are their own key."""
    dtype = x.shape.dtype
    if dtype not in ("f16", "bf16", "f32", "f64"):
        return x
    width = 8 * DTYPE_BYTES[dtype]
    bits = f"s{width}"
    signed = cx.b.op("bitcast-convert", [x], x.shape.with_dtype(bits))
    dims = tuple(x.shape.dims)
    sign = cx.b.op("shift-right-arithmetic", [signed, cx.b.splat(width - 1, bits, dims)])
    magnitude = cx.b.op("and", [sign, cx.b.splat((1 << (width - 1)) - 1, bits, dims)])
    return cx.b.op("xor", [signed, magnitude])


@stablehlo_op("stablehlo.select")
def import_select(cx: Context, op: Op, args: list[Instruction]) -> Results:
    pred, on_true, on_false = args
    if pred.shape.rank == 0 and on_true.shape.rank:
        pred = cx.b.broadcast_to(pred, on_true.shape.dims)
    return cx.b.op("select", [pred, on_true, on_false])


@stablehlo_op("stablehlo.clamp")
def import_clamp(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.op("clamp", args)


@stablehlo_op("stablehlo.convert")
def import_convert(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.convert(args[0], cx.result_shape(op).dtype)


@stablehlo_op("stablehlo.bitcast_convert")
def import_bitcast_convert(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """Between widths, as XLA does it (little-endian): a wide element is r narrow ones along a new last dim of
    size r, the lowest bits first."""
    (x,) = args
    out = cx.result_shape(op)
    if x.shape.dtype == out.dtype:
        return x
    wide, narrow = DTYPE_BYTES[x.shape.dtype], DTYPE_BYTES[out.dtype]
    if wide == narrow and tuple(x.shape.dims) == out.dims:
        return cx.b.op("bitcast-convert", [x], out)
    if wide < narrow:
        wide, narrow = narrow, wide
    ratio = wide // narrow
    split = DTYPE_BYTES[x.shape.dtype] > DTYPE_BYTES[out.dtype]
    dims = tuple(x.shape.dims)
    if (wide % narrow or (split and out.dims != dims + (ratio,)) or (not split and dims != out.dims + (ratio,))
            or not (_plain_bits(x.shape.dtype) and _plain_bits(out.dtype))):
        raise cx.unsupported(op, f"bitcast of {x.shape.dtype}{list(dims)} to {out.dtype}{list(out.dims)} is not "
                                 "supported")
    wide_u, narrow_u = f"u{8 * wide}", f"u{8 * narrow}"

    def as_unsigned(v: Instruction, dtype: str) -> Instruction:
        return v if v.shape.dtype == dtype else cx.b.op("bitcast-convert", [v], Shape(dtype, v.shape.dims))

    def shift(v: Instruction, opcode: str, k: int) -> Instruction:
        return cx.b.op(opcode, [v, cx.b.splat(8 * narrow * k, v.shape.dtype, v.shape.dims)]) if k else v
    if split:
        w = as_unsigned(x, wide_u)
        mask = cx.b.splat((1 << (8 * narrow)) - 1, wide_u, dims)
        parts = [cx.b.reshape(cx.b.convert(cx.b.op("and", [shift(w, "shift-right-logical", k), mask]), narrow_u),
                              dims + (1,)) for k in range(ratio)]
        result = cx.b.op("concatenate", parts, dimension=len(dims))
    else:
        n = as_unsigned(x, narrow_u)
        rank = len(dims)
        result = None
        for k in range(ratio):
            part = cx.b.op("slice", [n], start_indices=(0,) * (rank - 1) + (k,), limit_indices=out.dims + (k + 1,),
                           strides=(1,) * rank)
            part = shift(cx.b.convert(cx.b.reshape(part, out.dims), wide_u), "shift-left", k)
            result = part if result is None else cx.b.op("or", [result, part])
        assert result is not None
    return as_unsigned(result, out.dtype) if result.shape.dtype != out.dtype else result


def _plain_bits(dtype: str) -> bool:
    """An element type a wide bitcast can take apart: integers and the IEEE floats (not pred, not packed)."""
    return dtype != "pred" and dtype in DTYPE_BYTES and DTYPE_BYTES[dtype] in (1, 2, 4, 8)


@stablehlo_op("stablehlo.constant")
def import_constant(cx: Context, op: Op, args: list[Instruction]) -> Results:
    value = op.attrs.get("value")
    if not hasattr(value, "array"):
        raise cx.error(op, "constant needs a dense value")
    return cx.constant(value.array)


@stablehlo_op("stablehlo.iota")
def import_iota(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.b.op("iota", [], cx.result_shape(op), iota_dimension=int(op.attrs["iota_dimension"]))


@stablehlo_op("stablehlo.optimization_barrier")
def import_optimization_barrier(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return args
