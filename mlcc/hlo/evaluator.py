"""The numpy reference evaluator: the normative meaning of every opcode.

Values are logical numpy arrays of the instruction's dtype (layouts only matter to
``bitcast``); ``tuple`` values are Python tuples. Each opcode has one rule in
``EVAL_RULES``, ``rule(inst, operand_values) -> value``, and
``evaluate_computation`` casts every result to the instruction's dtype and checks
its dims. A ``parameter``'s rule receives the bound argument as its one operand.

Choices where numpy, XLA and ONNX differ, fixed here for every backend:

- f16/bf16 compute in f32 and round once at the end; reductions, dot,
  convolution, norms, softmax and attention accumulate in f32 (f64 stays f64).
- Integer ``divide`` truncates toward zero; ``x / 0`` is -1 (all bits set, the
  maximum for unsigned types) and ``INT_MIN / -1`` is ``INT_MIN``, as in XLA.
  ``remainder`` (sign of the divisor) and ``fmod`` (sign of the dividend) give
  ``x`` for ``x % 0`` and 0 for ``INT_MIN % -1``. Integer ``power`` with a negative
  exponent is 0 unless the base is 1 or -1. Integer overflow wraps.
- Shift amounts are read as unsigned: an amount >= the bit width shifts every bit
  out (0 for ``shift-left`` and ``shift-right-logical``, the sign for
  ``shift-right-arithmetic``, which works on the bit pattern as signed).
- ``convert`` from float to int truncates toward zero, saturates at the type's
  range and maps NaN to 0; ``convert`` to pred is ``x != 0``.
- Arithmetic on pred: ``add``/``or`` is logical or, ``multiply``/``and`` logical and.
- ``argmax``/``argmin`` treat NaN as the extreme value (numpy's rule).
- ``scatter-nd`` with ``reduction=none`` and duplicate indices: the last update wins.
- ``softmax`` of a row that is all -inf is NaN; ``attention`` gives 0 for a
  fully masked row, unless it has ``masked_value=V`` (the model masks by adding a finite V): then the
  softmax of every score of that row plus V, as the model computes it.

Symbolic dims are bound from the arguments' dims when parameters are evaluated
(or given up front, ``symbols=``); a symbol first produced by an op (a reshape's
``-1``) is bound from its result. A dim that is an expression (``64*seq``,
``past+seq``), or a symbolic slice bound, is evaluated once its symbols are bound.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mlcc.bundle.layout import from_physical, to_physical
from mlcc.hlo import symbolic
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.symbolic import NAME
from mlcc.hlo.ir import Computation, Instruction, Module, Shape
from mlcc.hlo.shape_inference import conv_dim_labels

Value = Any  # np.ndarray, or a tuple of values
Rule = Callable[[Instruction, list], Value]


class EvaluationError(ValueError):
    pass


EVAL_RULES: dict[str, Rule] = {}


def rule(*opcodes: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for opcode in opcodes:
            EVAL_RULES[opcode] = fn
        return fn
    return register


# ---------------------------------------------------------------- evaluation driver

@dataclass
class _Context:
    """What rules may read besides their operands: the module's constant data and bound symbols."""

    constants: Mapping[str, np.ndarray]
    symbols: dict[str, int] = field(default_factory=dict)


_CONTEXT: contextvars.ContextVar[_Context | None] = contextvars.ContextVar("mlcc_evaluator_context", default=None)


def _context() -> _Context:
    ctx = _CONTEXT.get()
    return ctx if ctx is not None else _Context({})


def _fail(inst: Instruction, message: str) -> NoReturn:
    raise EvaluationError(f"%{inst.name} ({inst.opcode}): {message}")


def evaluate_computation(comp: Computation, args: Sequence[np.ndarray],
                         constants: Mapping[str, np.ndarray],
                         symbols: Mapping[str, int] | None = None) -> np.ndarray | tuple[np.ndarray, ...]:
    """Evaluate ``comp`` on ``args`` (one per parameter, by index) in instruction order; ``symbols`` binds
    symbolic dims ahead of the arguments (a fusion's body sees its caller's)."""
    if comp.root is None:
        raise EvaluationError(f"%{comp.name}: computation has no root")
    params = comp.parameters()
    if len(args) != len(params):
        raise EvaluationError(f"%{comp.name}: {len(args)} arguments for {len(params)} parameters")
    last_use: dict[Instruction, int] = {}
    for i, inst in enumerate(comp.instructions):
        for op in inst.operands:
            last_use[op] = i
    values: dict[Instruction, Value] = {}
    token = _CONTEXT.set(_Context(constants, dict(symbols or {})))
    try:
        with np.errstate(all="ignore"):
            for i, inst in enumerate(comp.instructions):
                if inst.opcode == "parameter":
                    operands = [args[inst.attrs["index"]]]
                else:
                    operands = [values[op] for op in inst.operands]
                values[inst] = _apply(inst, operands)
                for op in inst.operands:
                    if last_use[op] == i and op is not comp.root:
                        values.pop(op, None)
            return values[comp.root]
    finally:
        _CONTEXT.reset(token)


def evaluate(module: Module, inputs: Mapping[str, np.ndarray],
             symbols: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Run the entry computation: parameters by their ``name=`` (else by index into ``inputs``' order).

    ``symbols`` gives symbolic dims their values (``{"seq": 7}``); the arguments must agree with them.
    """
    positional = list(inputs.values())
    args = []
    for p in module.entry.parameters():
        name = p.attrs.get("name")
        if name is not None:
            if name not in inputs:
                raise EvaluationError(f"%{p.name} (parameter): no input named '{name}'")
            args.append(inputs[name])
        else:
            index = p.attrs["index"]
            if index >= len(positional):
                raise EvaluationError(f"%{p.name} (parameter): no input at position {index}")
            args.append(positional[index])
    result = evaluate_computation(module.entry, args, module.constants, symbols)
    outputs = result if isinstance(result, tuple) else (result,)
    names = list(module.output_names) or [f"output{i}" for i in range(len(outputs))]
    if len(names) != len(outputs):
        raise EvaluationError(f"entry returns {len(outputs)} values for {len(names)} output names")
    return {name: np.array(value, copy=True) for name, value in zip(names, outputs)}


def evaluate_instruction(inst: Instruction, operands: Sequence[Value],
                         constants: Mapping[str, np.ndarray] | None = None) -> Value:
    """One instruction on operand values (for constant folding): its rule, cast and checked like in a computation."""
    token = _CONTEXT.set(_Context(constants if constants is not None else {}))
    try:
        with np.errstate(all="ignore"):
            return _apply(inst, list(operands))
    finally:
        _CONTEXT.reset(token)


def _apply(inst: Instruction, operands: list) -> Value:
    fn = EVAL_RULES.get(inst.opcode)
    if fn is None:
        _fail(inst, "no evaluation rule")
    try:
        result = fn(inst, operands)
        return _conform(inst, inst.shape, result)
    except EvaluationError:
        raise
    except Exception as e:  # a numpy error inside a rule: name the instruction
        raise EvaluationError(f"%{inst.name} ({inst.opcode}): {type(e).__name__}: {e}") from e


def _conform(inst: Instruction, shape: Any, value: Value) -> Value:
    """Cast a rule's result to the shape's dtype and check its dims (binding new symbols)."""
    if shape.is_tuple:
        if not isinstance(value, tuple) or len(value) != len(shape.elements):
            _fail(inst, f"rule returned {type(value).__name__}, expected a {len(shape.elements)}-tuple")
        return tuple(_conform(inst, s, v) for s, v in zip(shape.elements, value))
    if isinstance(value, tuple):
        _fail(inst, "rule returned a tuple for an array shape")
    arr = _convert(np.asarray(value), numpy_dtype(shape.dtype))
    symbols = _context().symbols
    if arr.ndim != shape.rank:
        _fail(inst, f"result has dims {list(arr.shape)}, expected {list(shape.dims)}")
    for d, n in zip(shape.dims, arr.shape):
        if isinstance(d, str) and d not in symbols and NAME.match(d):
            symbols[d] = n
        want = _dim_value(d, symbols)
        if want is not None and want != n:
            _fail(inst, f"result has dims {list(arr.shape)}, expected {list(shape.dims)}")
    return arr


def _dim_value(d: int | str, symbols: Mapping[str, int]) -> int | None:
    """A dim's size: the int, a bound symbol, an expression over bound symbols; None when unbound ("?")."""
    if isinstance(d, int):
        return d
    if d in symbols:
        return symbols[d]
    try:
        return symbolic.evaluate(d, symbols)
    except symbolic.SymbolicError:
        return None


def _dims(shape: Shape) -> tuple[int | None, ...]:
    """The shape's dims with bound symbols resolved (None where unbound)."""
    symbols = _context().symbols
    return tuple(_dim_value(d, symbols) for d in shape.dims)


def _index_values(inst: Instruction, values: Sequence[int | str]) -> list[int]:
    """Index attributes (slice bounds) that may be symbolic, as ints."""
    out = []
    for v in values:
        n = _dim_value(v, _context().symbols)
        if n is None:
            _fail(inst, f"symbolic index {v} is not bound")
        out.append(n)
    return out


def _static_dims(inst: Instruction) -> tuple[int, ...]:
    dims = _dims(inst.shape)
    unbound = [d for d, n in zip(inst.shape.dims, dims) if n is None]
    if unbound:
        _fail(inst, f"symbolic dims {unbound} are not bound by any argument")
    return dims  # type: ignore[return-value]


# ---------------------------------------------------------------- dtype helpers

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_HALF = (np.dtype(np.float16), numpy_dtype("bf16"))
_FLOATS = (*_HALF, _F32, _F64)


def _is_float(x: np.ndarray | np.dtype) -> bool:
    return (x if isinstance(x, np.dtype) else x.dtype) in _FLOATS


def _is_int(x: np.ndarray) -> bool:
    return x.dtype.kind in "iu"


def _widen(x: np.ndarray) -> np.ndarray:
    """f16/bf16 to f32 (the compute type of half precision); other dtypes unchanged."""
    return x.astype(_F32) if x.dtype in _HALF else x


def _accumulator(operand: np.dtype, result: np.dtype) -> np.dtype:
    """The dtype a contraction accumulates in."""
    if _is_float(operand) or _is_float(result):
        return _F64 if _F64 in (operand, result) else _F32
    if result.kind == "b":
        return np.dtype(np.bool_) if operand.kind == "b" else np.dtype(np.int64)
    return result


def _convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Value conversion: float to int truncates, saturates and maps NaN to 0; x to pred is x != 0."""
    if x.dtype == dtype:
        return x
    if dtype.kind == "b":
        return _widen(x) != 0
    if dtype.kind in "iu" and _is_float(x):
        info = np.iinfo(dtype)
        t = np.trunc(x.astype(_F64))
        high, low = t >= float(info.max), t <= float(info.min)
        safe = np.where(high | low | np.isnan(t), 0, t).astype(dtype)
        return np.where(high, info.max, np.where(low, info.min, safe)).astype(dtype)
    if dtype == _HALF[1] and (x.dtype == _F64 or x.dtype.kind in "iu"):
        return _f64_to_bf16(x.astype(_F64))
    if dtype == _HALF[0] and x.dtype.kind in "iu":
        return x.astype(_F64).astype(dtype)
    return x.astype(dtype)


def _f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """Correctly rounded f64 -> bf16 (ml_dtypes rounds twice, through f32): go through f32 rounding to odd."""
    f = x.astype(_F32)
    f = np.where(np.abs(f.astype(_F64)) > np.abs(x), np.nextafter(f, np.zeros((), _F32)), f)
    inexact = (f.astype(_F64) != x) & ~np.isnan(x)
    bits = f.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(_F32).astype(_HALF[1])


def _int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Truncating integer division; x / 0 = -1 (all ones), INT_MIN / -1 = INT_MIN."""
    zero = b == 0
    safe = np.where(zero, 1, b).astype(b.dtype)
    if a.dtype.kind == "i":
        safe = np.where((a == np.iinfo(a.dtype).min) & (safe == -1), 1, safe).astype(b.dtype)
    q = a // safe
    q = q + ((a % safe != 0) & ((a < 0) != (safe < 0))).astype(a.dtype)
    all_ones = np.array(-1).astype(a.dtype) if a.dtype.kind == "i" else np.array(np.iinfo(a.dtype).max, a.dtype)
    return np.where(zero, all_ones, q).astype(a.dtype)


def _int_remainder(fn: Callable, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fn (np.mod or np.fmod) with x % 0 = x and INT_MIN % -1 = 0."""
    safe = np.where(b == 0, 1, b).astype(b.dtype)
    if a.dtype.kind == "i":
        safe = np.where(safe == -1, 1, safe).astype(b.dtype)  # x % -1 is 0 for every x
    return np.where(b == 0, a, fn(a, safe)).astype(a.dtype)


def _int_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "u":
        return np.power(a, b)
    negative = b < 0
    r = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    odd = (b % 2) != 0
    at_negative = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
    return np.where(negative, at_negative, r).astype(a.dtype)


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
    "softplus": lambda x: np.logaddexp(0, x), "atan2": np.arctan2,
}
_NUMERIC = {
    "abs": np.abs, "negate": np.negative, "sign": np.sign, "subtract": np.subtract,
    "maximum": np.maximum, "minimum": np.minimum,
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "clamp": lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi),
}
_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}

for _name, _fn in _FLOAT_UNARY.items():
    EVAL_RULES[_name] = _float_only(_fn)
for _name, _fn in _NUMERIC.items():
    EVAL_RULES[_name] = _numeric(_fn)
for _name, _fn in _BITWISE.items():
    EVAL_RULES[_name] = _bitwise(_fn)
EVAL_RULES["add"] = _numeric(np.add)        # on pred: logical or
EVAL_RULES["multiply"] = _numeric(np.multiply)  # on pred: logical and


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


# ---------------------------------------------------------------- structural

@rule("parameter")
def _parameter(inst: Instruction, ops: list) -> Value:
    (arg,) = ops
    if inst.shape.is_tuple:
        return tuple(arg)
    arg = np.asarray(arg)
    if arg.ndim != inst.shape.rank:
        _fail(inst, f"argument has dims {list(arg.shape)}, expected {list(inst.shape.dims)}")
    symbols = _context().symbols
    for d, n in zip(inst.shape.dims, arg.shape):
        if isinstance(d, str) and NAME.match(d):
            symbols.setdefault(d, n)
        want = _dim_value(d, symbols)
        if want is not None and want != n:
            _fail(inst, f"dim '{d}' is {n} here but {want} elsewhere")
    return arg


@rule("constant")
def _constant(inst: Instruction, ops: list) -> np.ndarray:
    dtype, dims, attrs = numpy_dtype(inst.shape.dtype), _static_dims(inst), inst.attrs
    if "value" in attrs:
        values = attrs["value"]
        if len(values) != math.prod(dims):
            _fail(inst, f"{len(values)} values for dims {list(dims)}")
        return np.array(values, dtype=dtype).reshape(dims)
    if "splat" in attrs:
        return np.broadcast_to(np.array(attrs["splat"], dtype=dtype), dims)
    if "ref" in attrs:
        constants = _context().constants
        if attrs["ref"] not in constants:
            _fail(inst, f"no data for ref '{attrs['ref']}'")
        data = np.asarray(constants[attrs["ref"]])
        if data.size != math.prod(dims):
            _fail(inst, f"ref '{attrs['ref']}' has {data.size} elements for dims {list(dims)}")
        return data.reshape(dims)
    _fail(inst, "needs one of value=, splat=, ref=")


@rule("tuple")
def _tuple(inst: Instruction, ops: list) -> tuple:
    return tuple(ops)


@rule("get-tuple-element")
def _get_tuple_element(inst: Instruction, ops: list) -> Value:
    (t,) = ops
    return t[inst.attrs["index"]]


@rule("fusion")
def _fusion(inst: Instruction, ops: list) -> Value:
    if inst.called is None:
        _fail(inst, "no called computation")
    return evaluate_computation(inst.called, ops, _context().constants, _context().symbols)


@rule("size")
def _size(inst: Instruction, ops: list) -> np.ndarray:
    value = _dim_value(inst.attrs["expr"], _context().symbols)
    if value is None:
        _fail(inst, f"'{inst.attrs['expr']}' needs symbols that no argument has bound")
    return np.array(value, np.int64)


@rule("iota")
def _iota(inst: Instruction, ops: list) -> np.ndarray:
    dims = _static_dims(inst)
    if not dims:
        return np.zeros((), np.int64)
    d = inst.attrs["iota_dimension"]
    index_shape = [1] * len(dims)
    index_shape[d] = dims[d]
    return np.broadcast_to(np.arange(dims[d]).reshape(index_shape), dims)


# ---------------------------------------------------------------- data movement

# A bitcast reads its operand's bytes under another layout: the bundle format's conversion (mlcc/bundle/layout.py),
# the one the runtime and the weights file use.
_to_physical = to_physical
_from_physical = from_physical


@rule("bitcast")
def _bitcast(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    dims = _static_dims(inst)
    if x.size != math.prod(dims):
        _fail(inst, f"{x.size} elements cannot be read as dims {list(dims)}")
    flat = _to_physical(x, inst.operands[0].shape.layout).reshape(-1)
    return _from_physical(flat, dims, inst.shape.layout)


@rule("broadcast")
def _broadcast(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    mapping = inst.attrs["dimensions"]
    dims = list(_dims(inst.shape))
    for i, d in enumerate(mapping):
        if dims[d] is None and x.shape[i] != 1:
            dims[d] = x.shape[i]
    if None in dims:
        _fail(inst, f"symbolic dims in {list(inst.shape.dims)} are not bound")
    operand_shape = [1] * len(dims)
    for i, d in enumerate(mapping):
        operand_shape[d] = x.shape[i]
    return np.broadcast_to(x.reshape(operand_shape), dims)


@rule("reshape")
def _reshape(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    dims = _dims(inst.shape)
    if dims.count(None) > 1:
        _fail(inst, f"more than one unbound symbolic dim in {list(inst.shape.dims)}")
    return x.reshape([-1 if d is None else d for d in dims])


@rule("copy")
def _copy(inst: Instruction, ops: list) -> np.ndarray:
    return ops[0]


@rule("transpose")
def _transpose(inst: Instruction, ops: list) -> np.ndarray:
    return np.transpose(ops[0], inst.attrs["dimensions"])


@rule("slice")
def _slice(inst: Instruction, ops: list) -> np.ndarray:
    a = inst.attrs
    starts, limits = _index_values(inst, a["start_indices"]), _index_values(inst, a["limit_indices"])
    return ops[0][tuple(slice(s, l, st) for s, l, st in zip(starts, limits, a["strides"]))]


def _clamped_starts(inst: Instruction, dims: Sequence[int], sizes: Sequence[int], starts: list) -> list[int]:
    """Start indices clamped so the window [start, start + size) lies inside each dim, as XLA does."""
    out = []
    for n, size, s in zip(dims, sizes, starts):
        if np.ndim(s) != 0:
            _fail(inst, "start indices must be scalars")
        if size > n:
            _fail(inst, f"window of size {size} does not fit in dim of size {n}")
        out.append(int(np.clip(int(s), 0, n - size)))
    return out


@rule("dynamic-slice")
def _dynamic_slice(inst: Instruction, ops: list) -> np.ndarray:
    x, *starts = ops
    sizes = inst.attrs["slice_sizes"]
    begin = _clamped_starts(inst, x.shape, sizes, starts)
    return x[tuple(slice(b, b + size) for b, size in zip(begin, sizes))]


@rule("dynamic-update-slice")
def _dynamic_update_slice(inst: Instruction, ops: list) -> np.ndarray:
    x, update, *starts = ops
    begin = _clamped_starts(inst, x.shape, update.shape, starts)
    out = x.copy()
    out[tuple(slice(b, b + size) for b, size in zip(begin, update.shape))] = update
    return out


@rule("concatenate")
def _concatenate(inst: Instruction, ops: list) -> np.ndarray:
    return np.concatenate(ops, axis=inst.attrs["dimension"])


def _pad(x: np.ndarray, value: Any, low: Sequence[int], high: Sequence[int],
         interior: Sequence[int]) -> np.ndarray:
    """XLA pad: negative edge padding crops; interior padding goes between elements."""
    out_dims = [n + lo + hi + max(n - 1, 0) * i for n, lo, hi, i in zip(x.shape, low, high, interior)]
    out = np.full(out_dims, value, dtype=x.dtype)
    src, dst = [], []
    for n, lo, i, m in zip(x.shape, low, interior, out_dims):
        step = i + 1  # element j lands at lo + j * step; keep those inside [0, m)
        first = max(0, (-lo + step - 1) // step)
        end = min(n, max(0, (m - 1 - lo) // step + 1)) if m > 0 else 0
        if end <= first:
            return out
        src.append(slice(first, end))
        dst.append(slice(lo + first * step, lo + (end - 1) * step + 1, step))
    out[tuple(dst)] = x[tuple(src)]
    return out


@rule("pad")
def _pad_rule(inst: Instruction, ops: list) -> np.ndarray:
    x, value = ops
    a = inst.attrs
    return _pad(x, value, a["edge_padding_low"], a["edge_padding_high"], a["interior_padding"])


@rule("reverse")
def _reverse(inst: Instruction, ops: list) -> np.ndarray:
    dims = tuple(inst.attrs["dimensions"])
    return np.flip(ops[0], axis=dims) if dims else ops[0]


def _wrapped_indices(inst: Instruction, indices: np.ndarray, size: int, what: str) -> np.ndarray:
    """Indices in [-size, size) with negatives counted from the end; anything else is an error."""
    idx = indices.astype(np.int64)
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        _fail(inst, f"index {int(idx[bad].flat[0])} out of bounds for {what} of size {size}")
    return np.where(idx < 0, idx + size, idx)


@rule("gather")
def _gather(inst: Instruction, ops: list) -> np.ndarray:
    data, indices = ops
    axis = inst.attrs["axis"]
    idx = _wrapped_indices(inst, indices, data.shape[axis], f"axis {axis}")
    return np.take(data, idx, axis=axis)


@rule("gather-elements")
def _gather_elements(inst: Instruction, ops: list) -> np.ndarray:
    data, indices = ops
    axis = inst.attrs["axis"]
    for d, (n, m) in enumerate(zip(data.shape, indices.shape)):
        if d != axis and m > n:
            _fail(inst, f"indices dim {d} ({m}) exceeds data dim ({n})")
    index = [np.arange(m).reshape([-1 if k == d else 1 for k in range(indices.ndim)])
             for d, m in enumerate(indices.shape)]
    index[axis] = _wrapped_indices(inst, indices, data.shape[axis], f"axis {axis}")
    return data[tuple(index)]


@rule("gather-nd")
def _gather_nd(inst: Instruction, ops: list) -> np.ndarray:
    data, indices = ops
    b = inst.attrs["batch_dims"]
    depth = indices.shape[-1]
    batch = math.prod(data.shape[:b])
    count = math.prod(indices.shape[b:-1])
    flat_data = data.reshape((batch,) + data.shape[b:])
    flat_idx = indices.reshape(batch, count, depth)
    index = [np.broadcast_to(np.arange(batch)[:, None], (batch, count))]
    for j in range(depth):
        index.append(_wrapped_indices(inst, flat_idx[..., j], data.shape[b + j], f"dim {b + j}"))
    out = flat_data[tuple(index)]
    return out.reshape(indices.shape[:-1] + data.shape[b + depth:])


_SCATTER = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@rule("scatter-nd")
def _scatter_nd(inst: Instruction, ops: list) -> np.ndarray:
    data, indices, updates = ops
    reduction = inst.attrs["reduction"]
    if reduction != "none" and reduction not in _SCATTER:
        _fail(inst, f"unknown reduction '{reduction}'")
    depth = indices.shape[-1]
    expected = indices.shape[:-1] + data.shape[depth:]
    if updates.shape != expected:
        _fail(inst, f"updates have dims {list(updates.shape)}, expected {list(expected)}")
    count = math.prod(indices.shape[:-1])
    flat_idx = indices.reshape(count, depth)
    key = tuple(_wrapped_indices(inst, flat_idx[:, j], data.shape[j], f"dim {j}") for j in range(depth))
    values = _widen(updates).reshape((count,) + data.shape[depth:])
    out = _widen(data).copy()
    if reduction == "none":
        out[key] = values
    else:
        _SCATTER[reduction].at(out, key, values)
    return out


# ---------------------------------------------------------------- reductions

_REDUCERS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
             "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
_PRED_REDUCERS = {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or,
                  "minimum": np.logical_and, "and": np.logical_and, "or": np.logical_or,
                  "xor": np.logical_xor}


def _identity(kind: str, dtype: np.dtype) -> Any:
    """The value that leaves a reduction unchanged (also what padding contributes to a window)."""
    if kind in ("add", "or", "xor"):
        return np.zeros((), dtype)
    if kind == "multiply":
        return np.ones((), dtype)
    lowest = kind == "maximum"
    if dtype.kind == "f":
        return np.array(-np.inf if lowest else np.inf, dtype)
    if dtype.kind == "b":
        return np.array(not lowest if kind != "and" else True)
    info = np.iinfo(dtype)
    if kind == "and":
        return np.array(info.max if dtype.kind == "u" else -1, dtype)
    return np.array(info.min if lowest else info.max, dtype)


def _reducer(inst: Instruction, kind: str, x: np.ndarray) -> np.ufunc:
    if kind not in _REDUCERS:
        _fail(inst, f"unknown reduction kind '{kind}'")
    if x.dtype.kind == "b":
        return _PRED_REDUCERS[kind]
    if kind in ("and", "or", "xor") and _is_float(x):
        _fail(inst, f"'{kind}' needs pred or integer operands, got {x.dtype}")
    return _REDUCERS[kind]


@rule("reduce")
def _reduce(inst: Instruction, ops: list) -> np.ndarray:
    x = _widen(ops[0])
    kind = inst.attrs["kind"]
    ufunc = _reducer(inst, kind, x)
    axes = tuple(sorted(inst.attrs["dimensions"]))
    return ufunc.reduce(x, axis=axes, initial=_identity(kind, x.dtype))


@rule("argmax", "argmin")
def _argminmax(inst: Instruction, ops: list) -> np.ndarray:
    x = _widen(ops[0])
    d = inst.attrs["dimension"]
    n = x.shape[d]
    if n == 0:
        _fail(inst, f"dimension {d} is empty")
    fn = np.argmax if inst.opcode == "argmax" else np.argmin
    if inst.attrs.get("select_last_index", False):
        return n - 1 - fn(np.flip(x, d), axis=d)
    return fn(x, axis=d)


def _windows(x: np.ndarray, pad_value: Any, ufunc: np.ufunc, window: Sequence[int], strides: Sequence[int],
             low: Sequence[int], high: Sequence[int], dilations: Sequence[int],
             out_dims: Sequence[int]) -> np.ndarray:
    """ufunc-reduce every (dilated, strided) window of x padded with pad_value."""
    if math.prod(out_dims) == 0:
        return np.zeros(out_dims, x.dtype)
    rank = x.ndim
    padded = _pad(x, pad_value, low, high, [0] * rank)
    extent = [d * (w - 1) + 1 for w, d in zip(window, dilations)]
    view = sliding_window_view(padded, extent)
    view = view[tuple(slice(None, None, s) for s in strides) + tuple(slice(None, None, d) for d in dilations)]
    return ufunc.reduce(view, axis=tuple(range(rank, 2 * rank)))


@rule("reduce-window")
def _reduce_window(inst: Instruction, ops: list) -> np.ndarray:
    x = _widen(ops[0])
    a = inst.attrs
    kind = a["kind"]
    window, strides = a["window_dimensions"], a["window_strides"]
    low, high = a["padding_low"], a["padding_high"]
    dilations = a.get("window_dilations") or (1,) * x.ndim
    if any(w < 1 for w in window) or any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        _fail(inst, "window sizes, strides and dilations must be positive")
    out_dims = _static_dims(inst)
    args = (window, strides, low, high, dilations, out_dims)
    if kind != "avg":
        ufunc = _reducer(inst, kind, x)
        return _windows(x, _identity(kind, x.dtype), ufunc, *args)
    if x.dtype.kind in "iub":
        x = x.astype(np.int64)
    total = _windows(x, _identity("add", x.dtype), np.add, *args)
    if a.get("count_include_pad", False):
        count = np.array(math.prod(window), x.dtype)
    else:
        count = _windows(np.ones(x.shape, x.dtype), np.zeros((), x.dtype), np.add, *args)
    return _int_divide(total, count) if _is_int(x) else total / count


@rule("cumsum")
def _cumsum(inst: Instruction, ops: list) -> np.ndarray:
    x = _widen(ops[0])
    d = inst.attrs["dimension"]
    reverse = inst.attrs.get("reverse", False)
    if reverse:
        x = np.flip(x, d)
    out = np.cumsum(x, axis=d, dtype=np.int64 if x.dtype.kind == "b" else None)
    if inst.attrs.get("exclusive", False):
        shifted = np.zeros_like(out)
        body = [slice(None)] * x.ndim
        head = [slice(None)] * x.ndim
        body[d], head[d] = slice(1, None), slice(None, -1)
        shifted[tuple(body)] = out[tuple(head)]
        out = shifted
    return np.flip(out, d) if reverse else out


# ---------------------------------------------------------------- contractions

@rule("dot")
def _dot(inst: Instruction, ops: list) -> np.ndarray:
    lhs, rhs = ops
    a = inst.attrs
    lb, lc = list(a["lhs_batch_dims"]), list(a["lhs_contracting_dims"])
    rb, rc = list(a["rhs_batch_dims"]), list(a["rhs_contracting_dims"])
    lf = [i for i in range(lhs.ndim) if i not in lb + lc]
    rf = [i for i in range(rhs.ndim) if i not in rb + rc]
    acc = _accumulator(lhs.dtype, numpy_dtype(inst.shape.dtype))
    batch = [lhs.shape[i] for i in lb]
    lfree, rfree = [lhs.shape[i] for i in lf], [rhs.shape[i] for i in rf]
    k = math.prod(lhs.shape[i] for i in lc)
    left = lhs.astype(acc).transpose(lb + lf + lc).reshape(math.prod(batch), math.prod(lfree), k)
    right = rhs.astype(acc).transpose(rb + rc + rf).reshape(math.prod(batch), k, math.prod(rfree))
    return np.matmul(left, right).reshape(batch + lfree + rfree)


@rule("convolution")
def _convolution(inst: Instruction, ops: list) -> np.ndarray:
    x, w = ops
    a = inst.attrs
    lhs_labels, rhs_labels, out_labels = conv_dim_labels(a["dim_labels"])
    spatial = "".join(str(k) for k in range(x.ndim - 2))
    canonical = "bf" + spatial
    acc = _accumulator(x.dtype, numpy_dtype(inst.shape.dtype))
    x = x.astype(acc).transpose([lhs_labels.index(c) for c in canonical])          # [N, C, S...]
    w = w.astype(acc).transpose([rhs_labels.index(c) for c in "oi" + spatial])     # [O, I, K...]
    out_dims = _static_dims(inst)
    groups = a["feature_group_count"]
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    if groups < 1 or c % groups or o % groups:
        _fail(inst, f"{c} input and {o} output features do not split into {groups} groups")
    if math.prod(out_dims) == 0:
        return np.zeros(out_dims, acc)
    rank = len(spatial)
    zero = [0, 0]
    padded = _pad(x, np.zeros((), acc), zero + list(a["padding_low"]), zero + list(a["padding_high"]),
                  [0] * x.ndim)
    dilation, strides = a["rhs_dilation"], a["window_strides"]
    extent = [d * (k - 1) + 1 for k, d in zip(w.shape[2:], dilation)]
    patches = sliding_window_view(padded, extent, axis=tuple(range(2, 2 + rank))) if rank else padded
    patches = patches[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
                      + tuple(slice(None, None, d) for d in dilation)]                  # [N, C, P..., K...]
    positions = patches.shape[2:2 + rank]
    patches = patches.reshape((n, groups, c // groups) + patches.shape[2:])
    filters = w.reshape((groups, o // groups) + w.shape[1:])
    p, k = "pqrstu"[:rank], "vwxyzk"[:rank]
    out = np.einsum(f"ngc{p}{k},goc{k}->ngo{p}", patches, filters, optimize=True)
    out = out.reshape((n, o) + positions)
    return out.transpose([canonical.index(ch) for ch in out_labels])


# ---------------------------------------------------------------- composites

@rule("softmax")
def _softmax(inst: Instruction, ops: list) -> np.ndarray:
    x = _widen(ops[0])
    d = inst.attrs["dimension"]
    if x.size == 0:
        return x
    shifted = x - np.max(x, axis=d, keepdims=True)
    e = np.exp(shifted)
    total = np.sum(e, axis=d, keepdims=True)
    if inst.attrs.get("log", False):
        return shifted - np.log(total)
    return e / total


def _norm_shape(x: np.ndarray, axes: Sequence[int]) -> list[int]:
    """The shape that lines a parameter of the normalized dims up with x."""
    return [n if i in axes else 1 for i, n in enumerate(x.shape)]


@rule("layer-norm")
def _layer_norm(inst: Instruction, ops: list) -> np.ndarray:
    x, scale, bias = (_widen(v) for v in ops)
    axes = tuple(sorted(inst.attrs["dimensions"]))
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    y = centered / np.sqrt(var + inst.attrs["epsilon"])
    shape = _norm_shape(x, axes)
    return y * scale.reshape(shape) + bias.reshape(shape)


@rule("rms-norm")
def _rms_norm(inst: Instruction, ops: list) -> np.ndarray:
    x, scale = (_widen(v) for v in ops)
    axes = tuple(sorted(inst.attrs["dimensions"]))
    mean_square = np.mean(x * x, axis=axes, keepdims=True)
    return x / np.sqrt(mean_square + inst.attrs["epsilon"]) * scale.reshape(_norm_shape(x, axes))


@rule("batch-norm-inference")
def _batch_norm(inst: Instruction, ops: list) -> np.ndarray:
    x, scale, offset, mean, var = (_widen(v) for v in ops)
    shape = _norm_shape(x, (inst.attrs["feature_index"],))
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + inst.attrs["epsilon"])
    return y * scale.reshape(shape) + offset.reshape(shape)


@rule("attention")
def _attention(inst: Instruction, ops: list) -> np.ndarray:
    q, k, v = ops[:3]
    mask = ops[3] if len(ops) > 3 else None
    acc = _accumulator(q.dtype, q.dtype)
    q, k, v = q.astype(acc), k.astype(acc), v.astype(acc)
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        heads, kv_heads = q.shape[-3], k.shape[-3]
        if kv_heads == 0 or heads % kv_heads or v.shape[-3] != kv_heads:
            _fail(inst, f"{heads} query heads cannot share {kv_heads} key/value heads")
        k = np.repeat(k, heads // kv_heads, axis=-3)
        v = np.repeat(v, heads // kv_heads, axis=-3)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * np.array(inst.attrs["scale"], acc)
    sq, sk = scores.shape[-2:]
    keep = None
    if mask is not None:
        if mask.dtype.kind == "b":
            keep = mask
        else:
            scores = scores + mask.astype(acc)
    if inst.attrs["causal"]:
        causal = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        keep = causal if keep is None else keep & causal
    masked = inst.attrs.get("masked_value")
    if keep is not None:
        if masked is not None:  # the model adds this finite value where it masks: every score of a row it
            kept_any = np.any(keep, axis=-1, keepdims=True)  # masks whole stays, plus the value
            scores = np.where(keep | ~kept_any, scores, -np.inf) + np.where(kept_any, 0, np.array(masked, acc))
        else:
            scores = np.where(keep, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(scores - np.where(row_max == -np.inf, 0, row_max))
    total = np.sum(e, axis=-1, keepdims=True)
    probs = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    return np.matmul(probs, v)
