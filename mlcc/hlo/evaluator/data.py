"""Evaluation rules of the structural ops (parameter, constant, tuples, fusion) and of data movement."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mlcc.bundle.layout import from_physical, to_physical
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.symbolic import NAME
from mlcc.hlo.ir import Instruction
from mlcc.hlo.evaluator.core import (Value, _context, _dim_value, _dims, _fail, _index_values, _static_dims,
                                     _widen, evaluate_computation, rule)


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

@rule("bitcast")
def _bitcast(inst: Instruction, ops: list) -> np.ndarray:
    (x,) = ops
    dims = _static_dims(inst)
    if x.size != math.prod(dims):
        _fail(inst, f"{x.size} elements cannot be read as dims {list(dims)}")
    flat = to_physical(x, inst.operands[0].shape.layout).reshape(-1)
    return from_physical(flat, dims, inst.shape.layout)


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
    elif out.dtype != data.dtype and reduction in ("add", "mul"):
        _combine_rounded(out, key, values, _SCATTER[reduction], data.dtype)
    else:
        _SCATTER[reduction].at(out, key, values)
    return out


def _combine_rounded(out: np.ndarray, key: tuple, values: np.ndarray, combine: Any, dtype: np.dtype) -> None:
    """Half precision: the updates combined in order, each result rounded to dtype (XLA applies the body one
    update at a time): round r combines, at each position, the r-th update sent there."""
    if not len(values):
        return
    flat = np.ravel_multi_index(key, out.shape[:len(key)])
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    starts = np.maximum.accumulate(np.where(first, np.arange(len(ordered)), 0))
    rank = np.empty(len(flat), np.int64)
    rank[order] = np.arange(len(ordered)) - starts
    for r in range(int(rank.max()) + 1):
        pick = rank == r
        at = tuple(k[pick] for k in key)
        out[at] = combine(out[at], values[pick]).astype(dtype).astype(out.dtype)
