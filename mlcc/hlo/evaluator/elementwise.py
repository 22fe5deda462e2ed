"""Evaluation rules of the elementwise ops (unary, binary, compare, select, convert, gelu)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction
from mlcc.hlo.evaluator.core import (_F64, EVAL_RULES, Rule, _convert, _fail, _int_divide, _int_power,
                                     _int_remainder, _is_float, _is_int, _widen, rule)


# ---------------------------------------------------------------- elementwise

def _float_only(fn: Callable) -> Rule:
    """A floating-point op; f16/bf16 compute in f32."""
    def apply(inst: Instruction, ops: list) -> np.ndarray:
        for x in ops:
            if not _is_float(x):
                _fail(inst, f"needs floating-point operands, got {x.dtype}")
        return fn(*[_widen(x) for x in ops])
    return apply


def _numeric(fn: Callable) -> Rule:
    """An op on every dtype; f16/bf16 compute in f32."""
    def apply(inst: Instruction, ops: list) -> np.ndarray:
        return fn(*[_widen(x) for x in ops])
    return apply


def _bitwise(fn: Callable) -> Rule:
    """Logical on pred, bitwise on integers."""
    def apply(inst: Instruction, ops: list) -> np.ndarray:
        for x in ops:
            if _is_float(x):
                _fail(inst, f"needs pred or integer operands, got {x.dtype}")
        return fn(*ops)
    return apply


_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    return _erf_scalar(x.astype(_F64)).astype(_F64).astype(x.dtype)


def _logistic(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


_FLOAT_UNARY = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log-plus-one": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "tanh": np.tanh, "erf": _erf,
    "logistic": _logistic, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "reciprocal": lambda x: 1 / x,
    "softplus": lambda x: np.logaddexp(0, x), "softsign": lambda x: x / (1 + np.abs(x)), "mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
    "atan2": np.arctan2,
}
_NUMERIC = {
    "abs": np.abs, "negate": np.negative, "sign": np.sign, "subtract": np.subtract,
    "maximum": np.maximum, "minimum": np.minimum,
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "clamp": lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi),
}
_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}

for _name, _fn in _FLOAT_UNARY.items():
    EVAL_RULES.add(_name, _float_only(_fn))
for _name, _fn in _NUMERIC.items():
    EVAL_RULES.add(_name, _numeric(_fn))
for _name, _fn in _BITWISE.items():
    EVAL_RULES.add(_name, _bitwise(_fn))
EVAL_RULES.add("add", _numeric(np.add))        # on pred: logical or
EVAL_RULES.add("multiply", _numeric(np.multiply))  # on pred: logical and


@rule("floor", "ceil", "round-nearest-even", "round-nearest-afz")
def _rounding(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    if not _is_float(x):
        return x
    fn = {"floor": np.floor, "ceil": np.ceil, "round-nearest-even": np.rint,
          "round-nearest-afz": _round_half_away}[inst.opcode]
    return fn(_widen(x))


@rule("not")
def _not(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    if _is_float(x):
        _fail(inst, f"needs a pred or integer operand, got {x.dtype}")
    return np.logical_not(x) if x.dtype.kind == "b" else np.invert(x)


@rule("is-finite", "is-nan", "is-inf")
def _classify(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    if not _is_float(x):
        return np.full(x.shape, inst.opcode == "is-finite")
    fn = {"is-finite": np.isfinite, "is-nan": np.isnan, "is-inf": np.isinf}[inst.opcode]
    return fn(_widen(x))


@rule("popcnt")
def _popcnt(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    if x.dtype.kind == "b":
        return x
    if not _is_int(x):
        _fail(inst, f"needs an integer operand, got {x.dtype}")
    return np.bitwise_count(x.astype(np.dtype(f"u{x.dtype.itemsize}")))


@rule("divide")
def _divide(inst: Instruction, ops: list) -> np.ndarray:
    a, b = ops
    return _int_divide(a, b) if _is_int(a) else np.divide(_widen(a), _widen(b))


@rule("remainder", "fmod")
def _remainder(inst: Instruction, ops: list) -> np.ndarray:
    a, b = ops
    fn = np.mod if inst.opcode == "remainder" else np.fmod
    return _int_remainder(fn, a, b) if _is_int(a) else fn(_widen(a), _widen(b))


@rule("power")
def _power(inst: Instruction, ops: list) -> np.ndarray:
    a, b = ops
    return _int_power(a, b) if _is_int(a) else np.power(_widen(a), _widen(b))


@rule("shift-left", "shift-right-logical", "shift-right-arithmetic")
def _shift(inst: Instruction, ops: list) -> np.ndarray:
    a, b = ops
    if not _is_int(a):
        _fail(inst, f"needs integer operands, got {a.dtype}")
    bits = a.dtype.itemsize * 8
    unsigned, signed = np.dtype(f"u{a.dtype.itemsize}"), np.dtype(f"i{a.dtype.itemsize}")
    amount = b.astype(unsigned)
    in_range = amount < bits
    if inst.opcode == "shift-right-arithmetic":
        shift = np.where(in_range, amount, bits - 1).astype(signed)
        return np.right_shift(a.astype(signed), shift).astype(a.dtype)
    shift = np.where(in_range, amount, 0).astype(unsigned)
    fn = np.left_shift if inst.opcode == "shift-left" else np.right_shift
    return np.where(in_range, fn(a.astype(unsigned), shift), 0).astype(unsigned).astype(a.dtype)


_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}


@rule("compare")
def _compare(inst: Instruction, ops: list) -> np.ndarray:
    a, b = ops
    direction = inst.attrs["direction"]
    if direction not in _COMPARE:
        _fail(inst, f"unknown direction '{direction}'")
    return _COMPARE[direction](_widen(a), _widen(b))


@rule("select")
def _select(inst: Instruction, ops: list) -> np.ndarray:
    p, on_true, on_false = ops
    return np.where(p, on_true, on_false)


@rule("convert")
def _convert_rule(inst: Instruction, ops: list) -> np.ndarray:
    return _convert(ops[0], numpy_dtype(inst.shape.dtype))


@rule("bitcast-convert")
def _bitcast_convert(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    dtype = numpy_dtype(inst.shape.dtype)
    if x.dtype.itemsize != dtype.itemsize:
        _fail(inst, f"{x.dtype} and {dtype} differ in width")
    raw = np.ascontiguousarray(x).view(np.dtype(f"u{dtype.itemsize}"))
    return (raw != 0 if dtype.kind == "b" else raw.view(dtype)).reshape(x.shape)


@rule("gelu")
def _gelu(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    if not _is_float(x):
        _fail(inst, f"needs a floating-point operand, got {x.dtype}")
    x = _widen(x)
    approximate = inst.attrs["approximate"]
    if approximate == "none":
        return 0.5 * x * (1 + _erf(x / np.sqrt(2).astype(x.dtype)))
    if approximate == "tanh":
        c = np.sqrt(2 / np.pi).astype(x.dtype)
        return 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x * x * x)))
    _fail(inst, f"unknown approximate='{approximate}'")
