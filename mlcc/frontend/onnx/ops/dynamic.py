"""Ops whose output size depends on data: NonZero, Unique, NonMaxSuppression, TopK with a run-time k.

Each becomes one op with the flag ``binds_count`` (nonzero, unique, nms, sort-indices): a 1-D s64 result whose
element 0 is the run-time count and whose data, planned at a compile-time bound, follows. The output's
data-dependent dim is a symbol named after the op and its number among the graph's ops of that kind
(``nonzero_0``, ``unique_0``, ``nms_0``, ``topk_0``), with the range [0, bound]: the bound comes from the op's
semantics (NonZero and Unique: the input's element count; NonMaxSuppression: max_output_boxes_per_class (at most
the boxes) x classes x batch; TopK: the axis length), or from ``--shape nonzero_0=..N``, which a run-time
max_output_boxes_per_class needs. Consumers see the dim as any symbolic dim (``sym_nonzero_0`` in kernels), a
slice of the result takes the counted part, and the runtime reads the count back after the op's kernel runs
(docs/data-dependent-shapes.md). Inputs known at import fold to constants here.
"""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.evaluator.dynamic import non_max_suppression, unique_rows
from mlcc.hlo.ir import Instruction, is_float


def count_symbol(node: OnnxNode, kind: str, bound: int | None, why: str = "") -> tuple[str, int]:
    """The next free symbol of ``kind`` (nonzero_0, nonzero_1, ...) and its bound: the user's (--shape
    NAME=..N), else ``bound``; none is an unsupported node naming the --shape to give."""
    ctx = node.ctx
    k = 0
    while f"{kind}_{k}" in ctx.ranges:
        k += 1
    name = f"{kind}_{k}"
    if name in ctx.count_bounds:
        bound = ctx.count_bounds[name][1]
    elif bound is None:
        raise node.unsupported(f"output '{node.proto.output[0]}' has a data-dependent size with no bound "
                               f"({why}): give one with --shape {name}=..N")
    ctx.ranges[name] = (0, bound)
    return name, bound


def _static(node: OnnxNode, x: Instruction) -> None:
    if not x.shape.is_static:
        raise node.unsupported(f"input dims {list(x.shape.dims)} (a data-dependent op needs static input dims)")


def _take(b: Builder, p: Instruction, start: int, dims: tuple, counted: int, symbol: str) -> Instruction:
    """The data at p[start:] as ``dims`` (the bound's), with dim ``counted`` cut to the run-time count."""
    n = int(np.prod(dims))
    flat = b.op("slice", [p], start_indices=(start,), limit_indices=(start + n,), strides=(1,))
    full = b.reshape(flat, dims)
    limits = tuple(symbol if i == counted else d for i, d in enumerate(dims))
    return b.op("slice", [full], start_indices=(0,) * len(dims), limit_indices=limits, strides=(1,) * len(dims))


@onnx_op("NonZero", since=9)
@onnx_op("NonZero", since=13)
def import_nonzero(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    known = node.value(0)
    if known is not None:
        return [np.array(np.nonzero(np.asarray(known).reshape(known.shape or (1,))), np.int64)]
    _static(node, x)
    if x.shape.rank == 0:
        raise node.unsupported("NonZero of a scalar")
    symbol, bound = count_symbol(node, "nonzero", x.shape.numel())
    p = b.op("nonzero", [x], symbol=symbol, tensor=node.proto.output[0], bound=bound)
    return [_take(b, p, 1, (x.shape.rank, bound), 1, symbol)]


@onnx_op("Unique", since=11)
def import_unique(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    is_sorted = bool(node.attr("sorted", 1))
    axis = node.attr("axis", None)
    rank = x.shape.rank
    axis = None if axis is None else node.axis(axis, rank)
    known = node.value(0)
    if known is not None:
        arr = np.asarray(known)
        rows = arr.reshape(-1, 1) if axis is None else np.moveaxis(arr, axis, 0).reshape(arr.shape[axis], -1)
        first, counts, inverse = unique_rows(rows, is_sorted)
        y = arr.reshape(-1)[first] if axis is None else np.take(arr, first, axis=axis)
        return [y, first, inverse, counts]
    _static(node, x)
    if axis is None:
        rows = b.reshape(x, (x.shape.numel(), 1))
    else:
        perm = [axis] + [d for d in range(rank) if d != axis]
        moved = b.transpose(x, perm) if perm != list(range(rank)) else x
        rows = b.reshape(moved, (x.shape.dims[axis], x.shape.numel() // max(x.shape.dims[axis], 1)))
    n = rows.shape.dims[0]
    symbol, bound = count_symbol(node, "unique", n)
    p = b.op("unique", [rows], symbol=symbol, tensor=node.proto.output[0], bound=bound, sorted=int(is_sorted))
    first = _take(b, p, 1, (bound,), 0, symbol)
    counts = _take(b, p, 1 + bound, (bound,), 0, symbol)
    inverse = b.op("slice", [p], start_indices=(1 + 2 * bound,), limit_indices=(1 + 2 * bound + n,), strides=(1,))
    if axis is None:
        y = b.op("gather", [b.reshape(x, (n,)), first], axis=0)
    else:
        y = b.op("gather", [x, first], axis=axis)
    return [y, first, inverse, counts]


def _scalar(b: Builder, node: OnnxNode, i: int, dtype: str, default: float | int) -> Instruction:
    """Input i as a scalar of dtype (its default when absent or empty, as onnx.reference reads it)."""
    if not node.has_input(i) or (node.value(i) is not None and node.value(i).size == 0):
        return b.splat(default, dtype)
    v = node.input(i)
    if v.shape.is_static and v.shape.numel() != 1:
        raise node.error(f"input {i} has {v.shape.numel()} elements, not 1")
    return b.convert(b.reshape(v, ()), dtype) if v.shape.dtype != dtype else b.reshape(v, ())


@onnx_op("NonMaxSuppression", since=10)
@onnx_op("NonMaxSuppression", since=11)
def import_nms(b: Builder, node: OnnxNode) -> list[Result]:
    boxes, scores = node.input(0), node.input(1)
    for v in (boxes, scores):
        _static(node, v)
    if not is_float(boxes.shape.dtype):
        raise node.unsupported(f"boxes of {boxes.shape.dtype}")
    center = int(node.attr("center_point_box", 0))
    batch, classes, n = scores.shape.dims if scores.shape.rank == 3 else (None, None, None)
    if boxes.shape.rank != 3 or boxes.shape.dims[2] != 4 or batch != boxes.shape.dims[0] or n != boxes.shape.dims[1]:
        raise node.error(f"boxes {list(boxes.shape.dims)} and scores {list(scores.shape.dims)}: "
                         "expected [batch, boxes, 4] and [batch, classes, boxes]")
    max_known = node.value(2) if node.has_input(2) else np.zeros(0)
    if max_known is not None and max_known.size == 0:  # max_output_boxes_per_class defaults to 0: nothing selected
        return [np.zeros((0, 3), np.int64)]
    known = [node.value(i) if node.has_input(i) else np.zeros(0) for i in range(5)]
    if all(v is not None for v in known):
        iou = float(known[3].reshape(-1)[0]) if known[3].size else 0.0
        score = float(known[4].reshape(-1)[0]) if known[4].size else -np.inf
        return [non_max_suppression(known[0], known[1], max(int(known[2].reshape(-1)[0]), 0), iou, score, bool(center))]
    natural = None
    if max_known is not None:
        natural = min(max(int(np.asarray(max_known).reshape(-1)[0]), 0), n) * classes * batch
    symbol, bound = count_symbol(node, "nms", natural, f"max_output_boxes_per_class (input '{node.proto.input[2]}') "
                                 "is not known at import time")
    operands = [boxes, scores, _scalar(b, node, 2, "s64", 0), _scalar(b, node, 3, "f32", 0.0),
                _scalar(b, node, 4, "f32", float("-inf"))]
    p = b.op("nms", operands, symbol=symbol, tensor=node.proto.output[0], bound=bound, center_point_box=center)
    return [_take(b, p, 1, (bound, 3), 0, symbol)]


def import_top_k_dynamic(b: Builder, node: OnnxNode, x: Instruction, axis: int, largest: bool) -> list[Result]:
    """TopK whose k is a run-time input: every index sorted along the axis (stable, so ties keep the lower index
    first), the first k of them, and the values they pick."""
    _static(node, x)
    symbol, _ = count_symbol(node, "topk", x.shape.dims[axis])
    k = _scalar(b, node, 1, "s64", 0)
    p = b.op("sort-indices", [x, k], symbol=symbol, tensor=node.proto.output[0], dimension=axis, largest=int(largest))
    indices = _take(b, p, 1, x.shape.dims, axis, symbol)
    return [b.op("gather-elements", [x, indices], axis=axis), indices]

