"""Convolutions and pooling: Conv, ConvTranspose -> convolution; MaxPool, AveragePool, LpPool -> reduce-window."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mlcc.frontend.onnx.ops.helpers import (
    broadcast_in_dims, full, kept_dims, scalar_op, static_dims, uniform_value,
)
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, is_float


def window_pads(node: OnnxNode, sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int]) -> tuple[list[int], list[int]]:
    """(low, high) spatial padding from ``pads`` or ``auto_pad`` (SAME_UPPER puts the odd one at the end)."""
    n = len(sizes)
    auto = node.attr("auto_pad", "NOTSET")
    if auto == "NOTSET":
        pads = list(node.attr("pads", [0] * (2 * n)))
        if len(pads) != 2 * n:
            raise node.error(f"{len(pads)} pads for {n} spatial dims")
        return pads[:n], pads[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.error(f"unknown auto_pad '{auto}'")
    low, high = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        low.append(small if auto == "SAME_UPPER" else big)
        high.append(big if auto == "SAME_UPPER" else small)
    return low, high


def _spatial_attrs(node: OnnxNode, n: int, kernel: Sequence[int]) -> tuple[list[int], list[int]]:
    strides = list(node.attr("strides", [1] * n))
    dilations = list(node.attr("dilations", [1] * n))
    if len(strides) != n or len(dilations) != n:
        raise node.error(f"strides {strides} / dilations {dilations} do not match {n} spatial dims")
    if node.has_attr("kernel_shape") and list(node.attr("kernel_shape")) != list(kernel):
        raise node.error(f"kernel_shape {node.attr('kernel_shape')} differs from the weights' {list(kernel)}")
    return strides, dilations


def _labels(n: int, filter_labels: str = "oi") -> str:
    sp = "".join(str(i) for i in range(n))
    return f"bf{sp}_{filter_labels}{sp}->bf{sp}"


def _add_bias(b: Builder, node: OnnxNode, y: Instruction, index: int) -> Instruction:
    uniform = uniform_value(node, index) if node.has_input(index) else None
    if not node.has_input(index) or uniform == 0:
        return y
    bias = node.input(index)
    if bias.shape.rank != 1:
        raise node.error(f"bias must be 1-D, has dims {list(bias.shape.dims)}")
    return b.op("add", [y, broadcast_in_dims(b, bias, y.shape.dims, [1])])


@onnx_op("Conv", since=1)
def import_conv(b: Builder, node: OnnxNode) -> list[Result]:
    x, w = node.input(0), node.input(1)
    n = x.shape.rank - 2
    if n < 1 or w.shape.rank != x.shape.rank:
        raise node.error(f"input rank {x.shape.rank} and weight rank {w.shape.rank} do not make a convolution")
    kernel = static_dims(node, w.shape.dims[2:], "kernel dims")
    sizes = static_dims(node, x.shape.dims[2:], "spatial dims")
    strides, dilations = _spatial_attrs(node, n, kernel)
    low, high = window_pads(node, sizes, kernel, strides, dilations)
    y = b.op("convolution", [x, w], window_strides=tuple(strides), padding_low=tuple(low), padding_high=tuple(high),
             rhs_dilation=tuple(dilations), feature_group_count=node.attr("group", 1), dim_labels=_labels(n))
    return [_add_bias(b, node, y, 2)]


@onnx_op("ConvTranspose", since=1)
def import_conv_transpose(b: Builder, node: OnnxNode) -> list[Result]:
    """A convolution of the stride-dilated, padded input with the flipped kernel, channels swapped."""
    x, w = node.input(0), node.input(1)
    n = x.shape.rank - 2
    if n < 1 or w.shape.rank != x.shape.rank:
        raise node.error(f"input rank {x.shape.rank} and weight rank {w.shape.rank} do not make a convolution")
    kernel = static_dims(node, w.shape.dims[2:], "kernel dims")
    sizes = static_dims(node, x.shape.dims[2:], "spatial dims")
    strides, dilations = _spatial_attrs(node, n, kernel)
    group = node.attr("group", 1)
    out_pad = list(node.attr("output_padding", [0] * n))
    auto = node.attr("auto_pad", "NOTSET")
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    full_size = [s * (i - 1) + op + e for s, i, op, e in zip(strides, sizes, out_pad, effective)]
    if node.has_attr("output_shape") or auto in ("SAME_UPPER", "SAME_LOWER"):
        wanted = list(node.attr("output_shape"))[-n:] if node.has_attr("output_shape") else [
            i * s for i, s in zip(sizes, strides)]
        total = [f - o for f, o in zip(full_size, wanted)]
        if auto == "SAME_UPPER":
            low, high = [t // 2 for t in total], [t - t // 2 for t in total]
        else:
            low, high = [t - t // 2 for t in total], [t // 2 for t in total]
    elif auto == "VALID":
        low, high = [0] * n, [0] * n
    else:
        pads = list(node.attr("pads", [0] * (2 * n)))
        low, high = pads[:n], pads[n:]
    dtype = x.shape.dtype
    zero = b.splat(0, dtype)
    xp = b.op("pad", [x, zero], edge_padding_low=(0, 0) + tuple(e - 1 - lo for e, lo in zip(effective, low)),
              edge_padding_high=(0, 0) + tuple(e - 1 - hi + op for e, hi, op in zip(effective, high, out_pad)),
              interior_padding=(0, 0) + tuple(s - 1 for s in strides))
    wf = b.op("reverse", [w], dimensions=tuple(range(2, n + 2)))
    c_in, c_out_g = static_dims(node, w.shape.dims[:2], "weight dims")
    if group == 1:
        labels = _labels(n, "io")
    else:
        wf = b.reshape(wf, (group, c_in // group, c_out_g) + tuple(kernel))
        wf = b.transpose(wf, [0, 2, 1] + list(range(3, n + 3)))
        wf = b.reshape(wf, (group * c_out_g, c_in // group) + tuple(kernel))
        labels = _labels(n)
    y = b.op("convolution", [xp, wf], window_strides=(1,) * n, padding_low=(0,) * n, padding_high=(0,) * n,
             rhs_dilation=tuple(dilations), feature_group_count=group, dim_labels=labels)
    return [_add_bias(b, node, y, 2)]


# ---- pooling


def _pool_geometry(node: OnnxNode, x: Instruction) -> tuple[list[int], ...]:
    """(sizes, kernel, strides, dilations, low, high, extra): the spatial window of a pool, ``extra`` the
    high padding ceil_mode adds past ``high``."""
    n = x.shape.rank - 2
    kernel = list(node.attr("kernel_shape"))
    if len(kernel) != n:
        raise node.error(f"kernel_shape {kernel} does not match {n} spatial dims")
    sizes = list(static_dims(node, x.shape.dims[2:], "spatial dims"))
    strides = list(node.attr("strides", [1] * n))
    dilations = list(node.attr("dilations", [1] * n))
    low, high = window_pads(node, sizes, kernel, strides, dilations)
    extra = [0] * n
    if node.attr("ceil_mode", 0):
        for i, (size, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations)):
            span = size + low[i] + high[i] - ((k - 1) * d + 1)
            out = -(-span // s) + 1
            if (out - 1) * s >= size + low[i]:
                out -= 1
            extra[i] = max((out - 1) * s - span, 0)
    return sizes, kernel, strides, dilations, list(low), list(high), extra


def _pool_window(b: Builder, node: OnnxNode, x: Instruction, kind: str) -> Instruction:
    n = x.shape.rank - 2
    _, kernel, strides, dilations, low, high, extra = _pool_geometry(node, x)
    attrs = {"window_dimensions": (1, 1) + tuple(kernel), "window_strides": (1, 1) + tuple(strides)}
    if any(d != 1 for d in dilations):
        attrs["window_dilations"] = (1, 1) + tuple(dilations)
    if kind == "avg" and node.attr("count_include_pad", 0) and (any(low) or any(high)):
        if any(extra):  # ceil-mode windows count the explicit pads but not the overhang
            x = b.op("pad", [x, b.splat(0, x.shape.dtype)], edge_padding_low=(0, 0) + tuple(low),
                     edge_padding_high=(0, 0) + tuple(high), interior_padding=(0,) * x.shape.rank)
            low, high = [0] * n, [0] * n
        else:
            attrs["count_include_pad"] = True
    return b.op("reduce-window", [x], kind=kind, padding_low=(0, 0) + tuple(low),
                padding_high=(0, 0) + tuple(h + e for h, e in zip(high, extra)), **attrs)


def _pool(kind: str):
    def import_pool(b: Builder, node: OnnxNode) -> list[Result]:
        x = node.input(0)
        if x.shape.rank < 3:
            raise node.error(f"pooling needs rank >= 3, got {x.shape.rank}")
        y = _pool_window(b, node, x, kind)
        if not node.output_used(1):
            return [y]
        return [y, _max_pool_indices(b, node, x, y)]
    return import_pool


def _max_pool_indices(b: Builder, node: OnnxNode, x: Instruction, y: Instruction) -> Instruction:
    """MaxPool's Indices: the flat index into x of each window's maximum (the first in row-major order
    among equal ones; storage_order=1 numbers the spatial dims column-major). Each window's elements are
    gathered from x flattened per channel, padding read as the lowest value, and the smallest index
    whose element equals the window's maximum is kept."""
    sizes, kernel, strides, dilations, low, high, extra = _pool_geometry(node, x)
    outs = [int(d) for d in y.shape.dims[2:]]
    spatial = int(np.prod(sizes))
    grids = np.meshgrid(*[np.arange(o) * s - lo for o, s, lo in zip(outs, strides, low)], indexing="ij")
    taps = np.meshgrid(*[np.arange(k) * d for k, d in zip(kernel, dilations)], indexing="ij")
    coords = [g.reshape(-1, 1) + t.reshape(1, -1) for g, t in zip(grids, taps)]  # [outputs, window] per dim
    inside = np.all([(c >= 0) & (c < size) for c, size in zip(coords, sizes)], axis=0)
    flat = np.ravel_multi_index([np.clip(c, 0, size - 1) for c, size in zip(coords, sizes)], sizes)
    flat = np.where(inside, flat, spatial)  # the padding slot appended after the spatial elements
    n_, c_ = static_dims(node, x.shape.dims[:2], "batch and channel dims")
    dtype = x.shape.dtype
    lowest = np.finfo(numpy_dtype(dtype)).min if is_float(dtype) else np.iinfo(numpy_dtype(dtype)).min
    rows = b.reshape(x, (n_, c_, spatial))
    rows = b.op("concatenate", [rows, full(b, -np.inf if is_float(dtype) else lowest, dtype, (n_, c_, 1))],
                dimension=2)
    windows = b.op("gather", [rows, b.constant(flat)], axis=2)  # [n, c, outputs, window]
    dims = windows.shape.dims
    peak = b.reshape(y, dims[:3])
    hit = b.op("compare", [windows, broadcast_in_dims(b, peak, dims, [0, 1, 2])], direction="EQ")
    table = broadcast_in_dims(b, b.constant(flat.astype(np.int64)), dims, [2, 3])
    first = b.op("reduce", [b.op("select", [hit, table, full(b, spatial, "s64", dims)])], dimensions=(3,),
                 kind="minimum")
    if node.attr("storage_order", 0):
        column_major = np.arange(spatial).reshape(sizes).transpose().reshape(-1)
        order = np.argsort(column_major)  # row-major position -> its column-major number
        first = b.op("gather", [b.constant(np.append(order, spatial).astype(np.int64)), first], axis=0)
    offsets = (np.arange(n_ * c_, dtype=np.int64) * spatial).reshape(n_, c_)
    first = b.op("add", [first, broadcast_in_dims(b, b.constant(offsets), dims[:3], [0, 1])])
    return b.reshape(first, tuple(y.shape.dims))


onnx_op("MaxPool", since=1)(_pool("maximum"))
onnx_op("AveragePool", since=1)(_pool("avg"))


@onnx_op("LpPool", since=11)
def import_lp_pool(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    p = node.attr("p", 2)
    powered = scalar_op(b, "power", b.op("abs", [x]), p)
    total = _pool_window(b, node, powered, "add")
    return [scalar_op(b, "power", total, 1.0 / p)]


def _global_pool(kind: str):
    def import_global_pool(b: Builder, node: OnnxNode) -> list[Result]:
        x = node.input(0)
        axes = list(range(2, x.shape.rank))
        y = b.op("reduce", [x], dimensions=tuple(axes), kind="add" if kind == "avg" else kind)
        if kind == "avg":
            count = 1
            for d in static_dims(node, x.shape.dims[2:], "spatial dims"):
                count *= d
            y = scalar_op(b, "divide", y, count)
        return [b.reshape(y, kept_dims(x.shape.dims, axes))]
    return import_global_pool


onnx_op("GlobalAveragePool", since=1)(_global_pool("avg"))
onnx_op("GlobalMaxPool", since=1)(_global_pool("maximum"))
