"""Gather and scatter ops."""

from __future__ import annotations

from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder


@onnx_op("Gather", since=1)
def import_gather(b: Builder, node: OnnxNode) -> list[Result]:
    data = node.input(0)
    axis = node.axis(node.attr("axis", 0), data.shape.rank)
    return [b.op("gather", [data, node.input(1)], axis=axis)]


@onnx_op("GatherElements", since=11)
def import_gather_elements(b: Builder, node: OnnxNode) -> list[Result]:
    data = node.input(0)
    axis = node.axis(node.attr("axis", 0), data.shape.rank)
    return [b.op("gather-elements", [data, node.input(1)], axis=axis)]


@onnx_op("GatherND", since=11)
def import_gather_nd(b: Builder, node: OnnxNode) -> list[Result]:
    indices = node.input(1)
    if indices.shape.dtype != "s64":
        raise node.error(f"indices must be int64, not {indices.shape.dtype}")
    return [b.op("gather-nd", [node.input(0), indices], batch_dims=node.attr("batch_dims", 0))]


@onnx_op("ScatterND", since=11)
def import_scatter_nd(b: Builder, node: OnnxNode) -> list[Result]:
    reduction = node.attr("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise node.error(f"unknown reduction '{reduction}'")
    return [b.op("scatter-nd", [node.input(0), node.input(1), node.input(2)], reduction=reduction)]
