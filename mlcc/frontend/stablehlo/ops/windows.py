"""reduce_window in its general forms and select_and_scatter, one window position at a time.

Each result element of reduce_window reduces, starting from the init values, the
window at its position of the inputs padded (edge padding, and base_dilations - 1
between elements). The spec pads with the init values; XLA (and so JAX's results)
leaves padding and holes out of the reduction, which is the same when init is the
body's identity and what this module does otherwise. It pads with ``pad`` and then,
for each of the window's positions, takes one strided ``slice`` of every padded
input (the elements at that position of every window) and applies the body to the
running results and the slices at once (Context.import_lifted), keeping the running
result where the element is padding: any body, several operands, any dilation.

select_and_scatter picks one element per window of the operand (the body ``select``
says whether the element chosen so far stays chosen against the next one; padding is
never chosen) and combines each source element into the result, which starts as
init, at the picked element's position, with the body ``scatter``.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

import numpy as np

from mlcc.frontend.stablehlo.importer import Complex, Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.ops import full_index
from mlcc.frontend.stablehlo.ops.data import int_tuple
from mlcc.frontend.stablehlo.syntax import Op, as_array
from mlcc.hlo.ir import Instruction, Shape

MAX_WINDOW_POSITIONS = 1024  # positions of one window the general forms visit one by one


def padding_of(cx: Context, op: Op, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if "padding" not in op.attrs:
        return (0,) * rank, (0,) * rank
    padding = np.asarray(as_array(op.attrs["padding"]), dtype=np.int64).reshape(rank, 2)
    return tuple(int(p) for p in padding[:, 0]), tuple(int(p) for p in padding[:, 1])


def _positions(cx: Context, op: Op, window: Sequence[int]) -> list[tuple[int, ...]]:
    count = math.prod(window)
    if count > MAX_WINDOW_POSITIONS:
        raise cx.unsupported(op, f"a window of {count} positions (at most {MAX_WINDOW_POSITIONS} in this form)")
    return list(itertools.product(*[range(w) for w in window]))


def _at_position(cx: Context, padded: Instruction, w: Sequence[int], dilations: Sequence[int],
                 strides: Sequence[int], out: Sequence[int]) -> Instruction:
    """The element at window position w of every window (one per result element): a strided slice."""
    start = tuple(wi * di for wi, di in zip(w, dilations))
    limit = tuple(s + (n - 1) * st + 1 for s, n, st in zip(start, out, strides))
    return cx.b.op("slice", [padded], start_indices=start, limit_indices=limit, strides=tuple(strides))


def _each(fn: Callable[[Instruction], Instruction], v: Any) -> Any:
    """fn of an instruction, or of each part of a complex value."""
    return Complex(*(fn(p) for p in v)) if isinstance(v, Complex) else fn(v)


def _each2(fn: Callable[[Instruction, Instruction], Instruction], a: Any, b: Any) -> Any:
    """fn of two instructions, or of the matching parts of two complex values."""
    return Complex(*(fn(p, q) for p, q in zip(a, b))) if isinstance(a, Complex) else fn(a, b)


def _first(v: Any) -> Instruction:
    return v.re if isinstance(v, Complex) else v


def reduce_window_general(cx: Context, op: Op, inputs: list[Any], inits: list[Any]) -> Results:
    """Any body, any operands (complex ones too: their parts move together and the body sees Complex values)."""
    rank = _first(inputs[0]).shape.rank
    ones = (1,) * rank
    window = int_tuple(cx, op, "window_dimensions")
    strides = int_tuple(cx, op, "window_strides", ones)
    base = int_tuple(cx, op, "base_dilations", ones)
    dilations = int_tuple(cx, op, "window_dilations", ones)
    low, high = padding_of(cx, op, rank)
    out = tuple(cx.result_shape(op, 0).dims)
    interior = tuple(b - 1 for b in base)
    padded = [_each2(lambda p, q: cx.b.op("pad", [p, q], edge_padding_low=low, edge_padding_high=high,
                                          interior_padding=interior), x, init) for x, init in zip(inputs, inits)]
    real = None  # which padded elements are the inputs' (padding and holes take no part, as in XLA)
    if any(low + high + interior):
        real = cx.b.op("pad", [cx.b.splat(True, "pred", tuple(_first(inputs[0]).shape.dims)),
                               cx.scalar(False, "pred")],
                       edge_padding_low=low, edge_padding_high=high, interior_padding=interior)
    results = [_each(lambda p: cx.b.broadcast_to(p, out), init) for init in inits]
    if 0 in out:
        return results
    for w in _positions(cx, op, window):
        pieces = [_each(lambda p: _at_position(cx, p, w, dilations, strides, out), p) for p in padded]
        new = cx.import_lifted(op.regions[0], results + pieces, out)
        new = [_each(lambda p: p if tuple(p.shape.dims) == out else cx.b.broadcast_to(p, out), r) for r in new]
        if real is not None:
            valid = _at_position(cx, real, w, dilations, strides, out)
            new = [_each2(lambda p, q: cx.b.op("select", [valid, p, q]), r, old) for r, old in zip(new, results)]
        results = new
    return results


def reduce_any_body(cx: Context, op: Op, inputs: list[Any], inits: list[Any], dims: Sequence[int]) -> Results:
    """stablehlo.reduce with any body and operands (complex ones too), for a body that is associative and
    commutative (the spec leaves the order of a reduction to the implementation): the reduced elements are
    laid out along one last axis, its halves combined pairwise by the body (the odd one out carried along)
    until one element is left, and that combined with the init values."""
    x = _first(inputs[0])
    rank = x.shape.rank
    kept = [d for d in range(rank) if d not in dims]
    out = tuple(int(x.shape.dims[d]) for d in kept)
    n = math.prod(int(x.shape.dims[d]) for d in dims)
    lay = kept + list(dims)
    values = [_each(lambda p: cx.b.reshape(cx.b.transpose(p, lay) if lay != list(range(rank)) else p, out + (n,)),
                    v) for v in inputs]
    axis = len(out)

    def part(v: Any, lo: int, hi: int) -> Any:
        return _each(lambda p: cx.b.op("slice", [p], start_indices=(0,) * axis + (lo,), limit_indices=out + (hi,),
                                       strides=(1,) * (axis + 1)), v)

    def combine(a: list[Any], b: list[Any], dims_: tuple[int, ...]) -> list[Any]:
        new = cx.import_lifted(op.regions[0], a + b, dims_)
        return [_each(lambda p: p if tuple(p.shape.dims) == dims_ else cx.b.broadcast_to(p, dims_), r) for r in new]

    if n == 0:
        return [_each(lambda p: cx.b.broadcast_to(p, out), init) for init in inits]
    while n > 1:
        half = n // 2
        paired = combine([part(v, 0, half) for v in values], [part(v, half, 2 * half) for v in values],
                         out + (half,))
        if n % 2:
            paired = [_each2(lambda p, q: cx.b.op("concatenate", [p, q], dimension=axis), r, part(v, n - 1, n))
                      for r, v in zip(paired, values)]
        values, n = paired, half + n % 2
    values = [_each(lambda p: cx.b.reshape(p, out), v) for v in values]
    return combine([_each(lambda p: cx.b.broadcast_to(p, out), init) for init in inits], values, out)


# ---------------------------------------------------------------- select_and_scatter
@stablehlo_op("stablehlo.select_and_scatter")
def import_select_and_scatter(cx: Context, op: Op, args: list[Instruction]) -> Results:
    operand, source, init = args
    rank = operand.shape.rank
    ones = (1,) * rank
    window = int_tuple(cx, op, "window_dimensions", ones)
    strides = int_tuple(cx, op, "window_strides", ones)
    low, high = padding_of(cx, op, rank)
    if len(op.regions) != 2:
        raise cx.error(op, "select_and_scatter needs a select and a scatter region")
    out = tuple(int(d) for d in source.shape.dims)
    zero = cx.scalar(0, operand.shape.dtype)
    padded = cx.b.op("pad", [operand, zero], edge_padding_low=low, edge_padding_high=high,
                     interior_padding=(0,) * rank)
    real = cx.b.op("pad", [cx.b.splat(True, "pred", tuple(operand.shape.dims)), cx.scalar(False, "pred")],
                   edge_padding_low=low, edge_padding_high=high, interior_padding=(0,) * rank)
    best = chosen = at = None
    for k, w in enumerate(_positions(cx, op, window)):
        value = _at_position(cx, padded, w, ones, strides, out)
        valid = _at_position(cx, real, w, ones, strides, out)
        if best is None:
            best, chosen, at = value, valid, cx.b.splat(0, "s64", out)
            continue
        (keep,) = cx.import_lifted(op.regions[0], [best, value], out)
        if keep.shape.rank == 0:
            keep = cx.b.broadcast_to(keep, out)
        take = cx.b.op("and", [valid, cx.b.op("or", [cx.b.op("not", [chosen]), cx.b.op("not", [keep])])])
        best = cx.b.op("select", [take, value, best])
        at = cx.b.op("select", [take, cx.b.splat(k, "s64", out), at])
        chosen = cx.b.op("or", [chosen, valid])
    assert at is not None and chosen is not None
    columns = []
    for d in range(rank):  # operand index = source index * stride + window position - low padding
        column = cx.b.op("iota", [], Shape("s64", out), iota_dimension=d)
        if strides[d] != 1:
            column = cx.b.op("multiply", [column, cx.b.splat(strides[d], "s64", out)])
        if window[d] > 1:  # the position's coordinate along d: (at // inner) % window[d]
            inner = math.prod(window[d + 1:])
            position = at if inner == 1 else cx.b.op("divide", [at, cx.b.splat(inner, "s64", out)])
            if any(w > 1 for w in window[:d]):
                position = cx.b.op("remainder", [position, cx.b.splat(window[d], "s64", out)])
            column = cx.b.op("add", [column, position])
        if low[d]:
            column = cx.b.op("subtract", [column, cx.b.splat(low[d], "s64", out)])
        columns.append(cx.b.reshape(column, out + (1,)))
    full = columns[0] if rank == 1 else cx.b.op("concatenate", columns, dimension=rank)
    start = cx.b.broadcast_to(init, tuple(operand.shape.dims))
    ok = cx.b.op("broadcast", [chosen], Shape("pred", out + (rank,)), dimensions=tuple(range(rank)))
    (result,) = full_index.scatter_at(cx, op, op.regions[1], [start], full, [source], ok)
    return result
