"""The evaluator's driver and the helpers its rules share: the rule table, the evaluation context
(constants, bound symbols), result conforming, and dtype helpers. The meaning of each op, and the
choices where numpy, XLA and ONNX differ, are in the package's docstring (mlcc/hlo/evaluator/__init__.py).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from mlcc.hlo import symbolic
from mlcc.hlo.evaluator import narrow
from mlcc.bundle.dtypes import complex_pairs, from_complex_pairs
from mlcc.hlo.dtypes import numpy_dtype, pack_bits, unpack_bits
from mlcc.hlo.symbolic import NAME
from mlcc.hlo.ir import DTYPE_BITS, Computation, Instruction, Module, Shape
from mlcc.hlo.rules import RuleTable

Value = Any  # np.ndarray, or a tuple of values
Rule = Callable[[Instruction, list], Value]

class EvaluationError(ValueError):
    pass

EVAL_RULES: RuleTable[Rule] = RuleTable("evaluation rule")
rule = EVAL_RULES.register  # @rule("floor", "ceil") registers the function for both opcodes

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
    Packed inputs and outputs (a parameter with ``packed=``, ``module.packed_outputs``) are values as a
    bundle's user sees them: an input given as values of its type is packed here (its bytes are taken as
    they are), and an output is unpacked to its values. So are complex ones (``complex=true``,
    ``module.complex_outputs``): an input given as a complex array is taken as its real pairs, and an output
    is given back complex.
    """
    positional = list(inputs.values())
    args = []
    for p in module.entry.parameters():
        name = p.attrs.get("name")
        if name is not None:
            if name not in inputs:
                raise EvaluationError(f"%{p.name} (parameter): no input named '{name}'")
            value = inputs[name]
            if "packed" in p.attrs and np.asarray(value).dtype == numpy_dtype(p.attrs["packed"]):
                value = pack_bits(np.asarray(value), DTYPE_BITS[p.attrs["packed"]])
            if p.attrs.get("complex") and np.iscomplexobj(value):
                value = complex_pairs(np.asarray(value))
            args.append(value)
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
    outputs = tuple(unpack_bits(v, module.packed_outputs[i].dtype, DTYPE_BITS[module.packed_outputs[i].dtype],
                                module.packed_outputs[i].numel()).reshape(module.packed_outputs[i].dims)
                    if i in module.packed_outputs else v for i, v in enumerate(outputs))
    outputs = tuple(from_complex_pairs(np.asarray(v)) if i in module.complex_outputs else v
                    for i, v in enumerate(outputs))
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
    if narrow.is_narrow(x.dtype) or narrow.is_narrow(dtype):
        return narrow.convert(x, dtype, _convert)
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
