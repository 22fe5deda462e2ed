"""Evaluation rules of the reductions: reduce, argmax/argmin, reduce-window, cumsum."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mlcc.hlo.ir import Instruction
from mlcc.hlo.evaluator.core import _fail, _int_divide, _is_float, _is_int, _static_dims, _widen, rule
from mlcc.hlo.evaluator.data import _pad


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
