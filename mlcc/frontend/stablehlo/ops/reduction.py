"""reduce and reduce_window, recognised from their bodies; argmax/argmin from JAX's two-operand reduce."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mlcc.frontend.stablehlo.importer import (Complex, Context, Results, complex_op, componentwise_body,
                                              stablehlo_op)
from mlcc.frontend.stablehlo.ops import windows
from mlcc.frontend.stablehlo.ops.data import int_tuple
from mlcc.frontend.stablehlo.syntax import Block, Op
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction

BODY_KINDS = {"stablehlo.add": "add", "stablehlo.multiply": "multiply", "stablehlo.maximum": "maximum",
              "stablehlo.minimum": "minimum", "stablehlo.and": "and", "stablehlo.or": "or",
              "stablehlo.xor": "xor"}


def body_kinds(region: list[Block], n: int) -> list[str] | None:
    """The reduction kind of each of n results when the body is ``r_i = op(acc_i, x_i)``; else None."""
    block = region[0]
    if len(block.args) != 2 * n or not block.ops or block.ops[-1].name != "stablehlo.return":
        return None
    defs = {id(r): op for op in block.ops[:-1] for r in op.results}
    if len(block.ops) - 1 != n:
        return None
    kinds = []
    for i, value in enumerate(block.ops[-1].operands):
        op = defs.get(id(value))
        if op is None or op.name not in BODY_KINDS:
            return None
        pair = {id(v) for v in op.operands}
        if pair != {id(block.args[i]), id(block.args[n + i])}:
            return None
        kinds.append(BODY_KINDS[op.name])
    return kinds


def identity(kind: str, dtype: str) -> np.ndarray:
    np_dtype = numpy_dtype(dtype)
    if kind in ("add", "or", "xor"):
        return np.zeros((), np_dtype)
    if kind == "multiply":
        return np.ones((), np_dtype)
    if np_dtype.kind == "b":
        return np.array(kind in ("and", "minimum"))
    if kind == "and":
        return np.array(-1).astype(np_dtype)
    if np_dtype.kind in "iu":
        info = np.iinfo(np_dtype)
        return np.array(info.min if kind == "maximum" else info.max, np_dtype)
    return np.array(-np.inf if kind == "maximum" else np.inf, np_dtype)


def is_identity(cx: Context, init: Instruction, kind: str) -> bool:
    value = cx.value_of(init)
    if value is None or value.size != 1:
        return False
    want = identity(kind, init.shape.dtype)
    return bool(value.reshape(()) == want) and bool(np.signbit(value.reshape(())) == np.signbit(want))


def combine_init(cx: Context, result: Instruction, init: Instruction, kind: str) -> Instruction:
    """Fold the init value in: op(init, reduce(x)) is reduce with init, for these associative kinds."""
    if is_identity(cx, init, kind):
        return result
    return cx.b.op(kind, [result, cx.b.broadcast_to(init, result.shape.dims)])


# ---------------------------------------------------------------- reduce
@stablehlo_op("stablehlo.reduce")
def import_reduce(cx: Context, op: Op, args: list[Instruction]) -> Results:
    n = len(args) // 2
    inputs, inits = args[:n], args[n:]
    dims = int_tuple(cx, op, "dimensions")
    kinds = body_kinds(op.regions[0], n) if op.regions else None
    if kinds is None:
        if n == 2 and _is_argminmax(cx, op, inputs, inits, dims):
            return _argminmax(cx, op, inputs, inits, dims)
        return windows.reduce_any_body(cx, op, inputs, inits, dims)
    results = []
    for x, init, kind in zip(inputs, inits, kinds):
        reduced = cx.b.op("reduce", [x], dimensions=dims, kind=kind) if dims else x
        results.append(combine_init(cx, reduced, init, kind))
    return results


def _is_argminmax(cx: Context, op: Op, inputs: Sequence[Instruction], inits: Sequence[Instruction],
                  dims: tuple[int, ...]) -> bool:
    """Whether the reduce is JAX's argmax/argmin form (values and an iota along the one reduced dim, inits
    the values' identity and 0), which _argminmax imports as the IR's argmax/argmin."""
    values, index = inputs
    which = _argminmax_kind(op.regions[0][0])
    if (which is None or len(dims) != 1 or index.opcode != "iota"
            or index.attrs["iota_dimension"] != dims[0] or index.shape.dims != values.shape.dims):
        return False
    start = cx.value_of(inits[1])
    kind = "maximum" if which == "argmax" else "minimum"
    return is_identity(cx, inits[0], kind) and start is not None and start.reshape(()) == 0


def _argminmax(cx: Context, op: Op, inputs: Sequence[Instruction], inits: Sequence[Instruction],
               dims: tuple[int, ...]) -> Results:
    """JAX's argmax: reduce (values, iota) with a body that keeps the larger value and the smaller index."""
    values, index = inputs
    which = _argminmax_kind(op.regions[0][0])
    kind = "maximum" if which == "argmax" else "minimum"
    best = cx.b.op("reduce", [values], dimensions=dims, kind=kind)
    position = cx.b.op(which, [values], dimension=dims[0])
    return [best, cx.b.convert(position, index.shape.dtype)]


def _argminmax_kind(block: Block) -> str | None:
    """'argmax' when the body compares acc_value GT/GE x_value (argmin for LT/LE), else None."""
    if len(block.args) != 4:
        return None
    acc, x = block.args[0], block.args[2]
    flip = {"GT": "LT", "GE": "LE", "LT": "GT", "LE": "GE"}
    for inner in block.ops:
        if inner.name != "stablehlo.compare" or len(inner.operands) != 2:
            continue
        a, b = inner.operands
        direction = inner.attrs.get("comparison_direction")
        if (a, b) == (x, acc) and direction in flip:
            direction = flip[direction]
        elif (a, b) != (acc, x):
            continue
        if direction in ("GT", "GE"):
            return "argmax"
        if direction in ("LT", "LE"):
            return "argmin"
    return None


# ---------------------------------------------------------------- reduce_window
HALF_TYPES = ("bf16", "f16")
MAX_SEQUENTIAL_HALF_SUM = 256  # longest half-precision running sum added in XLA's order (O(n^2) adds)


@complex_op("stablehlo.reduce_window")
def import_complex_reduce_window(cx: Context, op: Op, args: list[Any]) -> Results:
    """Complex operands: an add body on each part (its real rule, as for the other componentwise ops); any
    other body (max/min in the spec's lexicographic order, products) window position by window position."""
    n = len(args) // 2
    if componentwise_body(op) and all(isinstance(a, Complex) for a in args):
        parts = [import_reduce_window(cx, op, [a[k] for a in args]) for k in (0, 1)]
        re, im = ([p] if isinstance(p, Instruction) else list(p) for p in parts)
        return [Complex(r, i) for r, i in zip(re, im)]
    return windows.reduce_window_general(cx, op, args[:n], args[n:])


@stablehlo_op("stablehlo.reduce_window")
def import_reduce_window(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """add/max/min of one operand: the IR's reduce-window (or cumsum); any other form: windows.py."""
    n = len(args) // 2
    if n != 1:
        return windows.reduce_window_general(cx, op, args[:n], args[n:])
    x, init = args
    rank = x.shape.rank
    ones = (1,) * rank
    kinds = body_kinds(op.regions[0], 1) if op.regions else None
    low, high = windows.padding_of(cx, op, rank)
    if (kinds is None or kinds[0] not in ("add", "maximum", "minimum")
            or any(d != 1 for d in int_tuple(cx, op, "base_dilations", ones))):
        return windows.reduce_window_general(cx, op, [x], [init])
    kind = kinds[0]
    window = int_tuple(cx, op, "window_dimensions")
    strides = int_tuple(cx, op, "window_strides", ones)
    dilations = int_tuple(cx, op, "window_dilations", ones)
    cumulative = _cumulative_dim(x.shape.dims, window, strides, dilations, low, high)
    if (kind == "add" and cumulative is not None and x.shape.dtype in HALF_TYPES
            and x.shape.dims[cumulative[0]] <= MAX_SEQUENTIAL_HALF_SUM):
        # XLA adds a window's elements one at a time in the element type (each sum rounded to bf16/f16);
        # the IR's cumsum sums in f32 and rounds once, which drifts from that as the sums grow
        return windows.reduce_window_general(cx, op, [x], [init])
    if kind == "add" and cumulative is not None:
        dim, reverse = cumulative
        out = cx.b.op("cumsum", [x], dimension=dim, **({"reverse": True} if reverse else {}))
    else:
        attrs = {"window_dilations": dilations} if dilations != ones else {}
        out = cx.b.op("reduce-window", [x], kind=kind, window_dimensions=window, window_strides=strides,
                      padding_low=low, padding_high=high, **attrs)
    return combine_init(cx, out, init, kind)


def _cumulative_dim(dims: Sequence[int], window: Sequence[int], strides: Sequence[int],
                    dilations: Sequence[int], low: Sequence[int], high: Sequence[int]) -> tuple[int, bool] | None:
    """(dim, reverse) when the window is a running sum along one dim (how JAX lowers cumsum)."""
    if any(s != 1 for s in strides) or any(d != 1 for d in dilations):
        return None
    long = [i for i, w in enumerate(window) if w != 1]
    if len(long) != 1 or any(low[i] or high[i] for i in range(len(dims)) if i != long[0]):
        return None
    d = long[0]
    n = dims[d]
    if n < 2 or window[d] != n:
        return None
    if (low[d], high[d]) == (n - 1, 0):
        return d, False
    if (low[d], high[d]) == (0, n - 1):
        return d, True
    return None

