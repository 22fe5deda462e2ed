"""Gather and scatter ops."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Shape


def _check_known_indices(node: OnnxNode, indices: np.ndarray | None, sizes: list, what: str) -> None:
    """Indices known at import must lie in [-size, size) (RELIABILITY.md item 22: ONNX makes them an error,
    and a folded gather must never read outside its data). ``sizes`` has one entry per index component
    (the last axis of ``indices`` for the ND ops); a symbolic size is not checked."""
    if indices is None or indices.size == 0:
        return
    idx = np.asarray(indices).astype(np.int64, copy=False).reshape(-1, len(sizes))
    for k, n in enumerate(sizes):
        if not isinstance(n, int):
            continue
        col = idx[:, k]
        bad = (col < -n) | (col >= n)
        if bad.any():
            raise node.error(f"{what} {int(col[bad][0])} is out of range for a dim of size {n}")


@onnx_op("Gather", since=1)
def import_gather(b: Builder, node: OnnxNode) -> list[Result]:
    data = node.input(0)
    axis = node.axis(node.attr("axis", 0), data.shape.rank)
    _check_known_indices(node, node.value(1), [data.shape.dims[axis]], "index")
    return [b.op("gather", [data, node.input(1)], axis=axis)]


@onnx_op("GatherElements", since=11)
def import_gather_elements(b: Builder, node: OnnxNode) -> list[Result]:
    data = node.input(0)
    axis = node.axis(node.attr("axis", 0), data.shape.rank)
    _check_known_indices(node, node.value(1), [data.shape.dims[axis]], "index")
    return [b.op("gather-elements", [data, node.input(1)], axis=axis)]


@onnx_op("GatherND", since=11)
def import_gather_nd(b: Builder, node: OnnxNode) -> list[Result]:
    indices = node.input(1)
    if indices.shape.dtype != "s64":
        raise node.error(f"indices must be int64, not {indices.shape.dtype}")
    _check_nd_indices(node, node.attr("batch_dims", 0))
    return [b.op("gather-nd", [node.input(0), indices], batch_dims=node.attr("batch_dims", 0))]


def _check_nd_indices(node: OnnxNode, batch_dims: int) -> None:
    known = node.value(1)
    data_dims, index_dims = node.dims(0), node.dims(1)
    if known is None or not index_dims or not isinstance(index_dims[-1], int):
        return
    sizes = list(data_dims[batch_dims:batch_dims + index_dims[-1]])
    if len(sizes) != index_dims[-1]:
        raise node.error(f"index tuples of {index_dims[-1]} components for data of rank {len(data_dims)}")
    _check_known_indices(node, known, sizes, "index")


@onnx_op("ScatterND", since=11)
def import_scatter_nd(b: Builder, node: OnnxNode) -> list[Result]:
    reduction = node.attr("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise node.error(f"unknown reduction '{reduction}'")
    _check_nd_indices(node, 0)
    return [b.op("scatter-nd", [node.input(0), node.input(1), node.input(2)], reduction=reduction)]


@onnx_op("ArrayFeatureExtractor", since=1, domain="ai.onnx.ml")
def import_array_feature_extractor(b: Builder, node: OnnxNode) -> list[Result]:
    """The columns ``indices`` (flattened) of x's last axis; a 1-D x is read as one row [1, n]."""
    x = node.input(0)
    if x.shape.rank == 0:
        raise node.error("the input is a scalar")
    if x.shape.rank == 1:
        x = b.reshape(x, (1,) + tuple(x.shape.dims))
    indices = node.input(1)
    if indices.shape.rank != 1:
        indices = b.reshape(indices, (_count(node),))
    _check_known_indices(node, node.value(1), [x.shape.dims[-1]], "index")
    return [b.op("gather", [x, indices], axis=x.shape.rank - 1)]


def _count(node: OnnxNode) -> int:
    n = 1
    for d in node.dims(1):
        if not isinstance(d, int):
            raise node.unsupported(f"indices of dims {list(node.dims(1))} (static dims are needed)")
        n *= d
    return n


@onnx_op("TensorScatter", since=24)
def import_tensor_scatter(b: Builder, node: OnnxNode) -> list[Result]:
    """The cache with ``update`` written along ``axis`` from each batch row's write index (mode circular:
    wrapping around). Read as a gather: cache position p of batch row r takes update element
    ``p - write_indices[r]`` (modulo the cache length when circular) where that lies in the update."""
    cache, update = node.input(0), node.input(1)
    rank = cache.shape.rank
    axis = node.axis(node.attr("axis", -2), rank)
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise node.error(f"unknown mode '{mode}'")
    if axis == 0 or update.shape.rank != rank or any(
            c != u for i, (c, u) in enumerate(zip(cache.shape.dims, update.shape.dims)) if i != axis):
        raise node.error(f"update dims {list(update.shape.dims)} do not fit cache dims {list(cache.shape.dims)} "
                         f"along axis {axis} (not the batch axis)")
    batch, size, length = cache.shape.dims[0], cache.shape.dims[axis], update.shape.dims[axis]
    if not isinstance(size, int) or not isinstance(length, int) or length > size:
        raise node.unsupported(f"an update of length {length} into a cache of length {size} (static, not longer)")
    rows = (b.convert(node.input(2), "s64") if node.has_input(2)
            else b.splat(0, "s64", (batch,)))
    grid = (batch, size)
    offset = b.op("subtract", [b.broadcast_to(b.reshape(b.constant(np.arange(size, dtype=np.int64)), (1, size)), grid),
                               b.op("broadcast", [rows], _s64(grid), dimensions=(0,))])
    if mode == "circular":
        wrapped = b.op("remainder", [offset, b.splat(size, "s64", grid)])
        negative = b.op("compare", [wrapped, b.splat(0, "s64", grid)], direction="LT")
        offset = b.op("select", [negative, b.op("add", [wrapped, b.splat(size, "s64", grid)]), wrapped])
    inside = b.op("and", [b.op("compare", [offset, b.splat(0, "s64", grid)], direction="GE"),
                          b.op("compare", [offset, b.splat(length, "s64", grid)], direction="LT")])
    index = b.op("select", [inside, offset, b.splat(0, "s64", grid)])
    dims = cache.shape.dims
    picked = b.op("gather-elements", [update, b.op("broadcast", [index], _s64(dims), dimensions=(0, axis))],
                  axis=axis)
    written = b.op("broadcast", [inside], Shape("pred", tuple(dims)), dimensions=(0, axis))
    return [b.op("select", [written, picked, cache])]


def _s64(dims) -> Shape:
    return Shape("s64", tuple(dims))
