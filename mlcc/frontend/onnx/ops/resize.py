"""Resize (nearest and linear): per resized axis, gathers at source indices computed at import time."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, static_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, is_float


def source_coords(node: OnnxNode, mode: str, size: int, out: int, scale: float) -> np.ndarray:
    """Where each output position along one axis reads from in the input (coordinate_transformation_mode).

    Computed in float32, as onnxruntime does, so that nearest-neighbour ties round the same way.
    """
    x = np.arange(out, dtype=np.float32)
    scale = np.float32(scale)
    size = np.float32(size)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out > 1 else np.zeros_like(x)
    if mode == "align_corners":
        return x * (size - 1) / np.float32(out - 1) if out > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    if mode == "half_pixel_symmetric":
        adjustment = out / (scale * size)
        offset = size / 2 * (1 - adjustment)
        return offset + (x + 0.5) / scale - 0.5
    raise node.unsupported(f"coordinate_transformation_mode '{mode}'")


def nearest_indices(node: OnnxNode, coords: np.ndarray, size: int) -> np.ndarray:
    mode = node.attr("nearest_mode", "round_prefer_floor")
    frac = coords - np.floor(coords)
    if mode == "round_prefer_floor":
        idx = np.where(frac == 0.5, np.floor(coords), np.round(coords))
    elif mode == "round_prefer_ceil":
        idx = np.where(frac == 0.5, np.ceil(coords), np.round(coords))
    elif mode == "floor":
        idx = np.floor(coords)
    elif mode == "ceil":
        idx = np.ceil(coords)
    else:
        raise node.error(f"unknown nearest_mode '{mode}'")
    return np.clip(idx, 0, size - 1).astype(np.int64)


def _weights(b: Builder, x: Instruction, axis: int, values: np.ndarray, dims) -> Instruction:
    w = b.constant(values.astype(numpy_dtype(x.shape.dtype)))
    return broadcast_in_dims(b, w, dims, [axis])


def _resize_axis(b: Builder, node: OnnxNode, x: Instruction, axis: int, out: int, scale: float) -> Instruction:
    size = x.shape.dims[axis]
    coords = source_coords(node, node.attr("coordinate_transformation_mode", "half_pixel"), size, out, scale)
    if node.attr("mode", "nearest") == "nearest":
        return b.op("gather", [x, b.constant(nearest_indices(node, coords, size))], axis=axis)
    coords = np.clip(coords, 0, size - 1)
    low = np.floor(coords).astype(np.int64)
    high = np.minimum(low + 1, size - 1)
    frac = coords - low
    a = b.op("gather", [x, b.constant(low)], axis=axis)
    c = b.op("gather", [x, b.constant(high)], axis=axis)
    dims = a.shape.dims
    return b.op("add", [b.op("multiply", [a, _weights(b, x, axis, 1 - frac, dims)]),
                        b.op("multiply", [c, _weights(b, x, axis, frac, dims)])])


@onnx_op("Resize", since=11)
@onnx_op("Resize", since=13)
@onnx_op("Resize", since=18)
@onnx_op("Resize", since=19)
def import_resize(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise node.unsupported(f"mode '{mode}' (nearest and linear are supported)")
    if node.attr("antialias", 0):
        raise node.unsupported("antialias=1")
    if node.attr("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize":
        raise node.unsupported("coordinate_transformation_mode 'tf_crop_and_resize'")
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise node.unsupported(f"keep_aspect_ratio_policy '{node.attr('keep_aspect_ratio_policy')}'")
    if mode == "linear" and not is_float(x.shape.dtype):
        raise node.unsupported(f"linear resize of {x.shape.dtype}")
    rank = x.shape.rank
    axes = [node.axis(a, rank) for a in node.attr("axes", list(range(rank)))]
    sizes_in = static_dims(node, [x.shape.dims[a] for a in axes], "resized dims")
    scales_given = node.has_input(2) and node.value(2) is not None and node.value(2).size > 0
    if node.has_input(3) and node.value(3) is not None and node.value(3).size > 0:
        outs = [int(v) for v in node.value(3).reshape(-1)]
        scales = [o / i for o, i in zip(outs, sizes_in)]
    elif scales_given:
        scales = [float(v) for v in node.value(2).reshape(-1)]
        outs = [int(np.floor(i * s)) for i, s in zip(sizes_in, scales)]
    elif node.has_input(2) and node.value(2) is None:
        raise node.unsupported("the scales must be known at import time")
    else:  # the sizes follow from ONNX's inferred output dims
        inferred = node.inferred_dims(0, "scales / sizes")
        outs = static_dims(node, [inferred[a] for a in axes], "output dims")
        scales = [o / i for o, i in zip(outs, sizes_in)]
    if len(outs) != len(axes):
        raise node.error(f"{len(outs)} scales/sizes for {len(axes)} axes")
    y = x
    for axis, size, out, scale in zip(axes, sizes_in, outs, scales):
        if out != size or scale != 1.0:
            y = _resize_axis(b, node, y, axis, out, scale)
    return [y]
