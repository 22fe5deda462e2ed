"""Reductions: Reduce*, ArgMax/ArgMin, TopK, CumSum, Softmax/LogSoftmax/Hardmax."""

from __future__ import annotations

from typing import Callable

import numpy as np

from mlcc.frontend.onnx.ops.helpers import (broadcast_in_dims, dims_product, full, kept_dims, normalize_axes,
                                            scalar_op, static_dims)
from mlcc.frontend.onnx.ops.dynamic import import_top_k_dynamic
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Shape


def _reduce_axes(node: OnnxNode, rank: int, input_since: int) -> list[int] | None:
    """The reduced axes, all of them by default; None when the op is an identity (noop_with_empty_axes)."""
    if node.opset >= input_since:
        axes = node.ints(1, "axes") if node.has_input(1) else []
        if not axes and node.attr("noop_with_empty_axes", 0):
            return None
    else:
        axes = list(node.attr("axes", []))
    return normalize_axes(node, axes, rank) if axes else list(range(rank))


def _reduce(b: Builder, x: Instruction, axes: list[int], kind: str) -> Instruction:
    return b.op("reduce", [x], dimensions=tuple(axes), kind=kind) if axes else x


def _count(node: OnnxNode, x: Instruction, axes: list[int]) -> int:
    n = 1
    for d in static_dims(node, [x.shape.dims[a] for a in axes], "reduced dims"):
        n *= d
    return n


def _sum(b, node, x, axes):
    return _reduce(b, x, axes, "add")


def _mean(b, node, x, axes):
    return scalar_op(b, "divide", _reduce(b, x, axes, "add"), _count(node, x, axes))


def _sum_square(b, node, x, axes):
    return _reduce(b, b.op("multiply", [x, x]), axes, "add")


def _l1(b, node, x, axes):
    return _reduce(b, b.op("abs", [x]), axes, "add")


def _l2(b, node, x, axes):
    return b.op("sqrt", [_sum_square(b, node, x, axes)])


def _log_sum(b, node, x, axes):
    return b.op("log", [_reduce(b, x, axes, "add")])


def _log_sum_exp(b, node, x, axes):
    """log(sum(exp(x - max))) + max, as onnxruntime computes it."""
    top = _reduce(b, x, axes, "maximum")
    kept = [i for i in range(x.shape.rank) if i not in axes]
    shifted = b.op("subtract", [x, broadcast_in_dims(b, top, x.shape.dims, kept)])
    return b.op("add", [b.op("log", [_reduce(b, b.op("exp", [shifted]), axes, "add")]), top])


def _kind(kind: str):
    return lambda b, node, x, axes: _reduce(b, x, axes, kind)


REDUCTIONS: dict[str, tuple[Callable, int]] = {
    "ReduceSum": (_sum, 13), "ReduceMean": (_mean, 18), "ReduceMax": (_kind("maximum"), 18),
    "ReduceMin": (_kind("minimum"), 18), "ReduceProd": (_kind("multiply"), 18), "ReduceL1": (_l1, 18),
    "ReduceL2": (_l2, 18), "ReduceLogSum": (_log_sum, 18), "ReduceLogSumExp": (_log_sum_exp, 18),
    "ReduceSumSquare": (_sum_square, 18),
}


BOOL_REDUCTIONS = {"ReduceMax": "or", "ReduceMin": "and"}


def _reduce_rule(compute: Callable, input_since: int, bool_kind: str | None):
    def import_reduce(b: Builder, node: OnnxNode) -> list[Result]:
        x = node.input(0)
        axes = _reduce_axes(node, x.shape.rank, input_since)
        if axes is None:
            return [x]
        if x.shape.dtype == "pred" and bool_kind is None:
            raise node.unsupported("reducing a bool tensor")
        y = _reduce(b, x, axes, bool_kind) if x.shape.dtype == "pred" else compute(b, node, x, axes)
        return [b.reshape(y, kept_dims(x.shape.dims, axes)) if node.attr("keepdims", 1) else y]
    return import_reduce


for _op, (_compute, _input_since) in REDUCTIONS.items():
    _rule = _reduce_rule(_compute, _input_since, BOOL_REDUCTIONS.get(_op))
    onnx_op(_op, since=1)(_rule)
    onnx_op(_op, since=_input_since)(_rule)


def _arg(kind: str):
    def import_arg(b: Builder, node: OnnxNode) -> list[Result]:
        x = node.input(0)
        axis = node.axis(node.attr("axis", 0), x.shape.rank)
        attrs = {"select_last_index": True} if node.attr("select_last_index", 0) else {}
        y = b.op(kind, [x], dimension=axis, **attrs)
        return [b.reshape(y, kept_dims(x.shape.dims, [axis])) if node.attr("keepdims", 1) else y]
    return import_arg


onnx_op("ArgMax", since=1)(_arg("argmax"))
onnx_op("ArgMin", since=1)(_arg("argmin"))


@onnx_op("CumSum", since=11)
def import_cumsum(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    axis = node.axis(int(node.const(1, "axis").reshape(-1)[0]), x.shape.rank)
    attrs = {}
    if node.attr("exclusive", 0):
        attrs["exclusive"] = True
    if node.attr("reverse", 0):
        attrs["reverse"] = True
    return [b.op("cumsum", [x], dimension=axis, **attrs)]


# ---- softmax family: before opset 13 the input is seen as 2-D, split at axis


def _along_axis(b: Builder, node: OnnxNode, x: Instruction,
                fn: Callable[[Instruction, int], Instruction]) -> Instruction:
    rank = x.shape.rank
    axis = node.axis(node.attr("axis", -1 if node.opset >= 13 else 1), rank)
    if node.opset >= 13 or axis == rank - 1:
        return fn(x, axis)
    outer, inner = dims_product(x.shape.dims[:axis]), dims_product(x.shape.dims[axis:])
    if outer is None or inner is None:
        raise node.unsupported(f"flattening symbolic dims {list(x.shape.dims)}")
    y = fn(b.reshape(x, (outer, inner)), 1)
    return b.reshape(y, x.shape.dims)


@onnx_op("Softmax", since=1)
@onnx_op("Softmax", since=13)
def import_softmax(b: Builder, node: OnnxNode) -> list[Result]:
    return [_along_axis(b, node, node.input(0), lambda x, axis: b.op("softmax", [x], dimension=axis))]


@onnx_op("LogSoftmax", since=1)
@onnx_op("LogSoftmax", since=13)
def import_log_softmax(b: Builder, node: OnnxNode) -> list[Result]:
    return [_along_axis(b, node, node.input(0), lambda x, axis: b.op("softmax", [x], dimension=axis, log=True))]


@onnx_op("Hardmax", since=1)
@onnx_op("Hardmax", since=13)
def import_hardmax(b: Builder, node: OnnxNode) -> list[Result]:
    def hardmax(x: Instruction, axis: int) -> Instruction:
        top = b.op("argmax", [x], dimension=axis)
        kept = [i for i in range(x.shape.rank) if i != axis]
        where = b.op("iota", [], Shape("s64", x.shape.dims), iota_dimension=axis)
        hot = b.op("compare", [where, broadcast_in_dims(b, top, x.shape.dims, kept)], direction="EQ")
        return b.convert(hot, x.shape.dtype)
    return [_along_axis(b, node, node.input(0), hardmax)]


TOPK_MAX_K = 64


@onnx_op("TopK", since=1)
@onnx_op("TopK", since=10)
def import_top_k(b: Builder, node: OnnxNode) -> list[Result]:
    """k rounds of argmax (argmin), each masking out what it picked; ties go to the lower index."""
    x = node.input(0)
    rank = x.shape.rank
    axis = node.axis(node.attr("axis", -1), rank)
    if node.opset < 10:
        k = node.attr("k")
    elif node.value(1) is not None:
        k = int(node.value(1).reshape(-1)[0])
    else:  # k known only at run time: a data-dependent dim bounded by the axis (ops/dynamic.py)
        return import_top_k_dynamic(b, node, x, axis, bool(node.attr("largest", 1)))
    n = x.shape.dims[axis]
    if not isinstance(n, int) or not 0 <= k <= n:
        raise node.error(f"k={k} does not fit dim {n}")
    if k > TOPK_MAX_K:
        raise node.unsupported(f"k={k} (at most {TOPK_MAX_K})")
    largest = node.attr("largest", 1)
    dtype = x.shape.dtype
    if dtype == "pred":
        raise node.unsupported("TopK of bool")
    info = np.finfo if dtype in ("f16", "bf16", "f32", "f64") else np.iinfo
    np_type = numpy_dtype(dtype)
    fill = (-np.inf if largest else np.inf) if info is np.finfo else (
        info(np_type).min if largest else info(np_type).max)
    kept = kept_dims(x.shape.dims, [axis])
    others = [i for i in range(rank) if i != axis]
    values, indices = [], []
    work = x
    for j in range(k):
        pick = b.op("argmax" if largest else "argmin", [work], dimension=axis)
        pick_kept = b.reshape(pick, kept)
        indices.append(pick_kept)
        values.append(b.op("gather-elements", [x, pick_kept], axis=axis))
        if j + 1 < k:
            where = b.op("iota", [], Shape("s64", x.shape.dims), iota_dimension=axis)
            taken = b.op("compare", [where, broadcast_in_dims(b, pick, x.shape.dims, others)], direction="EQ")
            work = b.op("select", [taken, full(b, fill, dtype, x.shape.dims), work])
    if k == 1:
        return [values[0], indices[0]]
    if k == 0:
        dims = list(x.shape.dims)
        dims[axis] = 0
        return [full(b, 0, dtype, dims), full(b, 0, "s64", dims)]
    return [b.op("concatenate", values, dimension=axis), b.op("concatenate", indices, dimension=axis)]
