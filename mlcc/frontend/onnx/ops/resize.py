"""Resize: per resized axis, gathers at source indices computed at import time.

Nearest reads one source element per output element. Linear and cubic (with
antialias, exclude_outside and tf_crop_and_resize) sum a few gathered taps times
weights, both computed at import time the way the ONNX reference computes them.
"""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, static_dims
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
    if mode == "align_corners":  # onnxruntime divides by the integer output length less one
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


def reference_coords(node: OnnxNode, mode: str, size: int, out: int, scale: float,
                     roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Source coordinates in float64, and for tf_crop_and_resize which outputs lie outside the input."""
    y = np.arange(out, dtype=np.float64)
    length = scale * size
    if mode == "tf_crop_and_resize":
        if roi is None:
            raise node.error("tf_crop_and_resize needs the roi input")
        lo, hi = roi
        x = (np.full(out, (hi - lo) * (size - 1) / 2) if length == 1
             else y * (hi - lo) * (size - 1) / (length - 1)) + lo * (size - 1)
        return x, (x < 0) | (x > size - 1)
    if mode == "align_corners":  # onnxruntime's integer output length, not the reference's size * scale
        return (np.zeros(out) if out == 1 else y * (size - 1) / (out - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "pytorch_half_pixel":
        return (np.full(out, -0.5) if length == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = size / 2 * (1 - out / length)
        return offset + (y + 0.5) / scale - 0.5, None
    raise node.unsupported(f"coordinate_transformation_mode '{mode}'")


def _coefficients(node: OnnxNode, mode: str, ratio: float, scale: float) -> np.ndarray:
    """The taps' weights for one output element at ``ratio`` in (0, 1] past its left neighbour."""
    antialias = bool(node.attr("antialias", 0))
    if mode == "nearest":
        rounding = node.attr("nearest_mode", "round_prefer_floor")
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        return np.array({"round_prefer_floor": [ratio <= 0.5, ratio > 0.5],
                         "round_prefer_ceil": [ratio < 0.5, ratio >= 0.5],
                         "floor": [1, 0], "ceil": [0, 1]}[rounding], dtype=np.float64)
    if mode == "linear":
        if not antialias:
            return np.array([1 - ratio, ratio])
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        args = (np.arange(start, 2 - start) - ratio) * s
        coeffs = np.clip(1 - np.abs(args), 0, 1)
        return coeffs / coeffs.sum()
    a = float(node.attr("cubic_coeff_a", -0.75))
    if not antialias:
        r = ratio
        return np.array([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                         ((a + 2) * r - (a + 3)) * r * r + 1,
                         ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                         ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a])
    s = min(scale, 1.0)
    start = int(np.floor(-2 / s) + 1)
    x = np.abs(s * (np.arange(start, 2 - start) - ratio))
    coeffs = np.where(x <= 1, (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1,
                      np.where(x < 2, a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a, 0.0))
    return coeffs / coeffs.sum()


def taps(node: OnnxNode, size: int, out: int, scale: float,
         roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(source indices [out, n], weights [out, n], extrapolated [out] or None) along one axis,
    as onnx.reference's Resize computes them (neighbours clamped to the edge)."""
    mode = node.attr("mode", "nearest")
    x, extrapolated = reference_coords(node, node.attr("coordinate_transformation_mode", "half_pixel"),
                                       size, out, scale, roi)
    left = np.floor(x)
    ratios = np.where(x == left, 1.0, x - left)
    coeffs = np.stack([_coefficients(node, mode, float(r), scale) for r in ratios])
    n = coeffs.shape[1]
    pad = int(np.ceil(n / 2))
    padded = x + pad
    p = np.floor(padded).astype(np.int64)
    frac = padded - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    neighbours = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if node.attr("exclude_outside", 0):
        coeffs = np.where((neighbours < 0) | (neighbours >= size), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    return np.clip(neighbours, 0, size - 1), coeffs, extrapolated


def _resize_axis(b: Builder, node: OnnxNode, x: Instruction, axis: int, out: int, scale: float,
                 roi: tuple[float, float] | None) -> Instruction:
    size = x.shape.dims[axis]
    transform = node.attr("coordinate_transformation_mode", "half_pixel")
    if node.attr("mode", "nearest") == "nearest" and transform != "tf_crop_and_resize":
        coords = source_coords(node, transform, size, out, scale)
        return b.op("gather", [x, b.constant(nearest_indices(node, coords, size))], axis=axis)
    indices, coeffs, extrapolated = taps(node, size, out, scale, roi)
    y = None
    for t in range(indices.shape[1]):
        if not coeffs[:, t].any():
            continue
        picked = b.op("gather", [x, b.constant(indices[:, t])], axis=axis)
        term = b.op("multiply", [picked, _weights(b, x, axis, coeffs[:, t], picked.shape.dims)])
        y = term if y is None else b.op("add", [y, term])
    if y is None:  # every weight is 0 (all outputs extrapolated)
        dims = list(x.shape.dims)
        dims[axis] = out
        y = full(b, 0, x.shape.dtype, dims)
    if extrapolated is not None and extrapolated.any():
        dims = y.shape.dims
        outside = broadcast_in_dims(b, b.constant(extrapolated), dims, [axis])
        fill = full(b, float(node.attr("extrapolation_value", 0.0)), x.shape.dtype, dims)
        y = b.op("select", [outside, fill, y])
    return y


@onnx_op("Resize", since=11)
@onnx_op("Resize", since=13)
@onnx_op("Resize", since=18)
@onnx_op("Resize", since=19)
def import_resize(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise node.error(f"unknown mode '{mode}'")
    if node.attr("antialias", 0) and mode == "nearest":
        raise node.error("antialias applies to linear and cubic modes only")
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise node.error(f"unknown keep_aspect_ratio_policy '{policy}'")
    if mode != "nearest" and not is_float(x.shape.dtype):
        raise node.unsupported(f"{mode} resize of {x.shape.dtype}")
    rank = x.shape.rank
    axes = [node.axis(a, rank) for a in node.attr("axes", list(range(rank)))]
    sizes_in = static_dims(node, [x.shape.dims[a] for a in axes], "resized dims")
    scales_given = node.has_input(2) and node.value(2) is not None and node.value(2).size > 0
    if node.has_input(3) and node.value(3) is not None and node.value(3).size > 0:
        outs = [int(v) for v in node.value(3).reshape(-1)]
        scales = [o / i for o, i in zip(outs, sizes_in)]
        if policy != "stretch":  # one scale for every axis, the output rounded half up
            scale = min(scales) if policy == "not_larger" else max(scales)
            scales = [scale] * len(axes)
            outs = [int(scale * i + 0.5) for i in sizes_in]
    elif scales_given:
        scales = [float(v) for v in node.value(2).reshape(-1)]
        outs = [int(np.floor(i * s)) for i, s in zip(sizes_in, scales)]
    elif node.has_input(2) and node.value(2) is None:
        raise node.unsupported(f"the scales (input '{node.proto.input[2]}') must be known at import time")
    else:  # the sizes follow from ONNX's inferred output dims
        inferred = node.inferred_dims(0, "scales / sizes")
        outs = static_dims(node, [inferred[a] for a in axes], "output dims")
        scales = [o / i for o, i in zip(outs, sizes_in)]
    if len(outs) != len(axes):
        raise node.error(f"{len(outs)} scales/sizes for {len(axes)} axes")
    rois = _rois(node, len(axes))
    y = x
    for axis, size, out, scale, roi in zip(axes, sizes_in, outs, scales, rois):
        if out != size or scale != 1.0 or (roi is not None and roi != (0.0, 1.0)):
            y = _resize_axis(b, node, y, axis, out, scale, roi)
    return [y]


def _rois(node: OnnxNode, n: int) -> list[tuple[float, float] | None]:
    """Per resized axis, the (start, end) of the roi input (used by tf_crop_and_resize only)."""
    if node.attr("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize":
        return [None] * n
    if not node.has_input(1):
        raise node.error("tf_crop_and_resize needs the roi input")
    roi = [float(v) for v in node.const(1, "roi").reshape(-1)]
    if len(roi) != 2 * n:
        raise node.error(f"roi has {len(roi)} values for {n} axes")
    return [(roi[i], roi[n + i]) for i in range(n)]


@onnx_op("Upsample", since=7)
@onnx_op("Upsample", since=9)
def import_upsample(b: Builder, node: OnnxNode) -> list[Result]:
    """Resize before Resize: asymmetric coordinates (``i / scale``); nearest reads the floor when
    upsampling and the ceiling when downsampling (onnxruntime's rule), linear blends two clamped taps."""
    x = node.input(0)
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise node.error(f"unknown mode '{mode}'")
    if mode != "nearest" and not is_float(x.shape.dtype):
        raise node.unsupported(f"{mode} upsampling of {x.shape.dtype}")
    scales = ([float(s) for s in node.attr("scales")] if node.opset < 9
              else [float(s) for s in node.const(1, "scales").reshape(-1)])
    if len(scales) != x.shape.rank:
        raise node.error(f"{len(scales)} scales for a rank-{x.shape.rank} input")
    sizes = static_dims(node, x.shape.dims, "input dims")
    y = x
    for axis, (size, scale) in enumerate(zip(sizes, scales)):
        out = int(np.floor(size * scale))
        if out == size and scale == 1.0:
            continue
        coords = source_coords(node, "asymmetric", size, out, scale)
        if mode == "nearest":
            idx = np.floor(coords) if scale >= 1 else np.ceil(coords)
            y = b.op("gather", [y, b.constant(np.clip(idx, 0, size - 1).astype(np.int64))], axis=axis)
            continue
        left = np.clip(np.floor(coords), 0, size - 1)
        frac = np.clip(coords - left, 0, 1).astype(np.float64)
        right = np.minimum(left + 1, size - 1)
        terms = []
        for idx, w in ((left, 1 - frac), (right, frac)):
            picked = b.op("gather", [y, b.constant(idx.astype(np.int64))], axis=axis)
            terms.append(b.op("multiply", [picked, _weights(b, y, axis, w, picked.shape.dims)]))
        y = b.op("add", terms)
    return [y]
