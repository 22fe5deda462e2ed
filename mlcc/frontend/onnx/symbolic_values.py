"""Symbolic known values: shape arithmetic on values computed from symbolic dims, done at import.

``Shape`` of a tensor with symbolic dims gives a value such as ``[1, seq, 64]``;
it is kept as a numpy object array of Python ints and Syms (``Tensor.sym``), so
exporter shape chains (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) fold
at import as static ones do and leave nothing in the IR. Each fold here returns
None when its result is not decidable at import (a float cast, a comparison the
symbol ranges do not settle); the node then falls back to its import rule,
which sees the value as unknown (``Deferred``).
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping

import numpy as np
import onnx

from mlcc.frontend.onnx.registry import OnnxNode
from mlcc.hlo.rules import RuleTable
from mlcc.hlo.symbolic import Sym, SymbolicError, as_sym

Fold = Callable[[OnnxNode, list], "list[np.ndarray] | None"]
FOLDS: RuleTable[Fold] = RuleTable("symbolic fold", keys="any")  # keyed by ONNX op type

_INT_TYPES = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
              onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}


def fold(*op_types: str) -> Callable[[Fold], Fold]:
    """Register fn as the symbolic fold of each ONNX op type (one fold per op type)."""
    return FOLDS.register(*op_types)


def fold_symbolic(node: OnnxNode) -> list[np.ndarray] | None:
    """The node's outputs computed at import from known (some symbolic) inputs; None when not decidable."""
    fn = FOLDS.get(node.op_type)
    if fn is None:
        return None
    values = [node.sym_value(i) for i in range(node.num_inputs)]
    try:
        out = fn(node, values)
    except SymbolicError:
        return None
    return None if out is None else [collapse(o) for o in out]


def element(x: object) -> int | Sym:
    """One element of a symbolic value: a Sym, or an int when it is constant."""
    s = as_sym(int(x) if isinstance(x, (np.integer, np.bool_)) else x)  # type: ignore[arg-type]
    return s.value if s.is_const else s


def collapse(arr: np.ndarray) -> np.ndarray:
    """An object array with constant Syms made ints; a plain int64 array when nothing symbolic is left."""
    arr = _array(arr)
    if arr.dtype != object:
        return arr
    flat = [element(x) for x in arr.reshape(-1)]
    if all(isinstance(x, int) for x in flat):
        return np.array(flat, dtype=np.int64).reshape(arr.shape)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(arr.shape)


def symbolic_array(items: list, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """An object array of ``items`` (ints and Syms), never letting numpy look inside them."""
    out = np.empty(len(items), dtype=object)
    out[:] = [element(x) for x in items]
    return out.reshape(shape if shape is not None else (len(items),))


def _array(x: object) -> np.ndarray:
    """numpy gives an element, not a 0-d array, for an elementwise op on 0-d object arrays."""
    return x if isinstance(x, np.ndarray) else symbolic_array([x], ())


def _ints(v: np.ndarray | None) -> list[int] | None:
    """The value's elements when every one is a plain int."""
    if v is None:
        return None
    flat = [element(x) for x in v.reshape(-1)]
    return [int(x) for x in flat] if all(isinstance(x, int) for x in flat) else None  # type: ignore[arg-type]


UNBOUNDED = 2 ** 62  # the upper end of a symbol given no range: sizes are never negative


def bounds(x: int | str | Sym, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """(lo, hi) of x with each symbol in its range; a symbol without one is any size >= 0."""
    s = as_sym(x)
    full = {name: ranges.get(name, (0, UNBOUNDED)) for name in s.symbols()}
    return s.bounds(full)


def at_most(a: int | str | Sym, b: int | str | Sym, ranges: Mapping[str, tuple[int, int]]) -> bool | None:
    """Whether a <= b for every value of the symbols in their ranges: True, False, or None (it depends)."""
    lo, hi = bounds(as_sym(a) - as_sym(b), ranges)
    return True if hi <= 0 else False if lo > 0 else None


def equal(a: int | Sym, b: int | Sym, ranges: Mapping[str, tuple[int, int]]) -> bool | None:
    """Whether a == b always (True), never (False), or it depends (None)."""
    if as_sym(a) == as_sym(b):
        return True
    if at_most(a, as_sym(b) - 1, ranges) or at_most(b, as_sym(a) - 1, ranges):
        return False
    return None


_AXES_INPUT_SINCE = {"Squeeze": 13, "Unsqueeze": 13, "ReduceProd": 18}  # before that opset, an attribute


def _axes(node: OnnxNode, values: list, rank: int) -> list[int] | None:
    """Axes given by attribute (older opsets) or by input 1; None when absent."""
    if node.opset >= _AXES_INPUT_SINCE[node.op_type]:
        if not node.has_input(1):
            return None
        axes = _ints(values[1])
        if axes is None:
            raise SymbolicError("symbolic axes")
    else:
        axes = node.attr("axes", None)
        if axes is None:
            return None
    return sorted(node.axis(int(a), rank) for a in axes)


@fold("Identity")
def _identity(node: OnnxNode, values: list) -> list[np.ndarray]:
    return [values[0]]


@fold("Cast")
def _cast(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    return [values[0]] if node.attr("to") in _INT_TYPES else None


@fold("Gather")
def _gather(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    data, idx = values[0], _ints(values[1])
    if data is None or idx is None:
        return None
    axis = node.axis(node.attr("axis", 0), data.ndim)
    n = data.shape[axis]
    if any(not -n <= i < n for i in idx):
        raise node.error(f"index out of range for dim {n}")
    picked = np.array([i % n for i in idx], dtype=np.int64).reshape(values[1].shape)
    return [np.take(data, picked, axis=axis)]


@fold("Unsqueeze")
def _unsqueeze(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    x = values[0]
    given = node.attr("axes", None) if node.opset < 13 else _ints(values[1]) if node.has_input(1) else None
    if x is None or given is None:
        return None
    rank = x.ndim + len(given)  # the axes count in the output's rank
    axes = sorted(node.axis(int(a), rank) for a in given)
    rest = iter(x.shape)
    return [x.reshape([1 if i in axes else next(rest) for i in range(rank)])]


@fold("Squeeze")
def _squeeze(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    x = values[0]
    if x is None:
        return None
    axes = _axes(node, values, x.ndim)
    drop = [i for i, d in enumerate(x.shape) if d == 1] if axes is None else axes
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in drop])]


@fold("Concat")
def _concat(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    if any(v is None for v in values):
        return None
    axis = node.axis(node.attr("axis"), values[0].ndim)
    return [np.concatenate(values, axis=axis)]


def clamp_slice(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX Slice's clamping, which is not Python's for negative steps: there a start before the first
    element clamps to 0 (Python: to -1, an empty slice) and an end clamps into [-1, dim - 1]."""
    start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


@fold("Slice")
def _slice(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    x = values[0]
    if x is None or node.opset < 10:
        return None
    starts, ends = _ints(values[1]), _ints(values[2])
    axes = _ints(values[3]) if node.has_input(3) else list(range(len(starts or [])))
    steps = _ints(values[4]) if node.has_input(4) else [1] * len(starts or [])
    if starts is None or ends is None or axes is None or steps is None or 0 in steps:
        return None
    index = [slice(None)] * x.ndim
    for a, s, e, step in zip(axes, starts, ends, steps):
        a = node.axis(a, x.ndim)
        s, e = clamp_slice(s, e, step, x.shape[a])
        index[a] = slice(s, e if e >= 0 else None, step)
    return [x[tuple(index)]]


def _elementwise(fn: Callable[..., object]) -> Fold:
    def apply(node: OnnxNode, values: list) -> list[np.ndarray] | None:
        if any(v is None for v in values):
            return None
        return [_array(np.frompyfunc(fn, len(values), 1)(*values))]
    return apply


def _div(a: int | Sym, b: int | Sym) -> int | Sym:
    """Integer division of sizes: exact, or floor where it is a polynomial (sizes are >= 0: floor is trunc)."""
    a, b = element(a), element(b)
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise SymbolicError("division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return as_sym(a) // as_sym(b)


FOLDS.add("Add", _elementwise(lambda a, b: element(a) + element(b)))
FOLDS.add("Sub", _elementwise(lambda a, b: element(a) - element(b)))
FOLDS.add("Mul", _elementwise(lambda a, b: element(a) * element(b)))
FOLDS.add("Div", _elementwise(_div))
FOLDS.add("Neg", _elementwise(lambda a: -element(a)))


@fold("Equal")
def _equal(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    if any(v is None for v in values):
        return None
    same = np.frompyfunc(lambda a, b: equal(a, b, node.ctx.ranges), 2, 1)(*values)
    if any(s is None for s in np.asarray(same).reshape(-1)):
        return None
    return [np.asarray(same, dtype=bool)]


@fold("Where")
def _where(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    if any(v is None for v in values):
        return None
    cond = np.asarray(values[0] != 0, dtype=bool)
    return [_array(np.where(cond, values[1], values[2]))]


def _pick(node: OnnxNode, sign: int) -> Fold:
    def pick(a: int | Sym, b: int | Sym) -> int | Sym:
        lower, upper = (b, a) if sign > 0 else (a, b)
        if at_most(lower, upper, node.ctx.ranges):
            return a
        if at_most(upper, lower, node.ctx.ranges):
            return b
        raise SymbolicError(f"cannot order {a} and {b}")

    return _elementwise_pairs(pick)


def _elementwise_pairs(pick: Callable) -> Fold:
    def apply(node: OnnxNode, values: list) -> list[np.ndarray] | None:
        if any(v is None for v in values):
            return None
        return [functools.reduce(lambda x, y: _array(np.frompyfunc(pick, 2, 1)(x, y)), values)]
    return apply


@fold("Max")
def _max(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    return _pick(node, 1)(node, values)


@fold("Min")
def _min(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    return _pick(node, -1)(node, values)


@fold("ReduceProd")
def _reduce_prod(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    x = values[0]
    if x is None:
        return None
    axes = _axes(node, values, x.ndim)
    if axes is None and node.attr("noop_with_empty_axes", 0):
        return [x]
    axes = list(range(x.ndim)) if axes is None else axes
    keep = bool(node.attr("keepdims", 1))
    out = np.multiply.reduce(x, axis=tuple(axes), keepdims=keep, initial=1) if axes else x
    return [np.asarray(out, dtype=object)]


@fold("Reshape")
def _reshape(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    x, target = values[0], _ints(values[1])
    if x is None or target is None:
        return None
    allowzero = node.attr("allowzero", 0) if node.opset >= 14 else 0
    dims = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    return [x.reshape(dims)]


@fold("Flatten")
def _flatten(node: OnnxNode, values: list) -> list[np.ndarray] | None:
    x = values[0]
    if x is None:
        return None
    axis = node.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return [x.reshape(outer, -1)]
