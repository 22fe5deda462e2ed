"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (-> log-softmax, gather-elements, reduce)."""

from __future__ import annotations

from mlcc.frontend.onnx.ops.helpers import full, require_float
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Instruction

REDUCTIONS = ("none", "sum", "mean")


def _nll(b: Builder, node: OnnxNode, log_prob: Instruction, target: Instruction,
         weight: Instruction | None) -> Instruction:
    """-log_prob[n, target[n, d...], d...] * weight[target], reduced as the ``reduction`` attribute says.

    log_prob is [N, C, d...], target [N, d...] of class indices. Elements whose
    target equals ``ignore_index`` weigh 0; "mean" divides by the sum of weights.
    """
    reduction = node.attr("reduction", "mean")
    if reduction not in REDUCTIONS:
        raise node.error(f"unknown reduction '{reduction}'")
    dtype = log_prob.shape.dtype
    dims = target.shape.dims
    if log_prob.shape.rank != len(dims) + 1 or log_prob.shape.rank < 2:
        raise node.error(f"input dims {list(log_prob.shape.dims)} do not fit target dims {list(dims)}")
    target = b.convert(target, "s64")
    keep = None
    if node.has_attr("ignore_index"):
        ignored = full(b, node.attr("ignore_index"), "s64", dims)
        keep = b.op("compare", [target, ignored], direction="NE")
        target = b.op("select", [keep, target, full(b, 0, "s64", dims)])
    expanded = (dims[0], 1) + tuple(dims[1:])
    picked = b.op("gather-elements", [log_prob, b.reshape(target, expanded)], axis=1)
    loss = b.op("negate", [b.reshape(picked, dims)])
    if weight is not None:
        w = b.op("gather", [b.convert(weight, dtype), target], axis=0)
    else:
        w = full(b, 1, dtype, dims)
    if keep is not None:
        w = b.op("select", [keep, w, full(b, 0, dtype, dims)])
    if weight is not None or keep is not None:
        loss = b.op("multiply", [loss, w])
    if reduction == "none":
        return loss
    everything = tuple(range(len(dims)))
    total = b.op("reduce", [loss], dimensions=everything, kind="add")
    if reduction == "sum":
        return total
    return b.op("divide", [total, b.op("reduce", [w], dimensions=everything, kind="add")])


@onnx_op("NegativeLogLikelihoodLoss", since=12)
def import_nll_loss(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    weight = node.input(2) if node.has_input(2) else None
    return [_nll(b, node, x, node.input(1), weight)]


@onnx_op("SoftmaxCrossEntropyLoss", since=12)
def import_softmax_cross_entropy_loss(b: Builder, node: OnnxNode) -> list[Result]:
    scores = node.input(0)
    require_float(node, scores)
    log_prob = b.op("softmax", [scores], dimension=1, log=True)
    weight = node.input(2) if node.has_input(2) else None
    loss = _nll(b, node, log_prob, node.input(1), weight)
    return [loss, log_prob] if node.num_outputs > 1 else [loss]
