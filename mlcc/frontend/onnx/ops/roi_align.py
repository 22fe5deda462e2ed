"""RoiAlign with a fixed sampling_ratio: each output bin averages (or takes the max of) a grid of
bilinear samples inside its region of interest, as onnxruntime and the ONNX reference compute it.

The rois and batch indices are read at run time: the sample positions are elementwise arithmetic on the
rois over dims [rois, out_h, grid_h, out_w, grid_w], and the four corners of every sample are read with
one gather-elements each from X's rows for the roi's batch index (X flattened per channel)."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, static_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction


@onnx_op("RoiAlign", since=10)
@onnx_op("RoiAlign", since=16)
def import_roi_align(b: Builder, node: OnnxNode) -> list[Result]:
    x, rois = node.input(0), node.input(1)
    require_float(node, x)
    n_batch, channels, height, width = static_dims(node, x.shape.dims, "input dims")
    n_rois = static_dims(node, rois.shape.dims[:1], "roi count")[0]
    if tuple(rois.shape.dims) != (n_rois, 4) or tuple(node.dims(2)) != (n_rois,):
        raise node.error(f"rois dims {list(rois.shape.dims)} and batch_indices dims {list(node.dims(2))} "
                         f"are not [num_rois, 4] and [num_rois]")
    mode = node.attr("mode", "avg")
    if mode not in ("avg", "max"):
        raise node.error(f"unknown mode '{mode}'")
    half_pixel = node.attr("coordinate_transformation_mode", "half_pixel" if node.opset >= 16 else
                           "output_half_pixel") == "half_pixel"
    out_h, out_w = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
    ratio = int(node.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise node.unsupported("sampling_ratio 0 (the sample grid's size would depend on each roi's size)")
    scale = float(node.attr("spatial_scale", 1.0))
    dtype = x.shape.dtype
    dims = (n_rois, out_h, ratio, out_w, ratio)

    def k(v: float) -> Instruction:
        return full(b, v, dtype, dims)

    def op(opcode: str, *xs: Instruction, **attrs) -> Instruction:
        return b.op(opcode, list(xs), **attrs)

    def column(i: int) -> Instruction:
        c = b.reshape(b.op("slice", [rois], start_indices=(0, i), limit_indices=(n_rois, i + 1), strides=(1, 1)),
                      (n_rois,))
        shifted = b.op("multiply", [b.convert(c, dtype), full(b, scale, dtype, (n_rois,))])
        return b.op("subtract", [shifted, full(b, 0.5 if half_pixel else 0.0, dtype, (n_rois,))])

    def sample_positions(lo: Instruction, hi: Instruction, bins: int, axes: tuple[int, int]) -> Instruction:
        extent = b.op("subtract", [hi, lo])
        if not half_pixel:  # malformed rois are forced to 1x1
            extent = b.op("maximum", [extent, full(b, 1.0, dtype, (n_rois,))])
        size = b.op("divide", [extent, full(b, float(bins), dtype, (n_rois,))])
        steps = (np.arange(bins)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio).astype(np.float64)
        table = broadcast_in_dims(b, b.constant(steps.astype(numpy_dtype(dtype))), dims, axes)
        return op("add", broadcast_in_dims(b, lo, dims, [0]), op("multiply", broadcast_in_dims(b, size, dims, [0]),
                                                                  table))

    ys = sample_positions(column(1), column(3), out_h, (1, 2))
    xs = sample_positions(column(0), column(2), out_w, (3, 4))
    outside_y = op("or", op("compare", ys, k(-1.0), direction="LT"), op("compare", ys, k(height), direction="GT"))
    outside_x = op("or", op("compare", xs, k(-1.0), direction="LT"), op("compare", xs, k(width), direction="GT"))
    outside = op("or", outside_y, outside_x)

    def corners(p: Instruction, size: int) -> tuple[Instruction, Instruction, Instruction, Instruction]:
        """(low index, high index, low weight, high weight) along one axis."""
        p = op("maximum", p, k(0.0))
        low = op("floor", p)
        edge = op("compare", low, k(size - 1.0), direction="GE")
        low = op("select", edge, k(size - 1.0), low)
        p = op("select", edge, low, p)
        high = op("select", edge, low, op("add", low, k(1.0)))
        frac = op("subtract", p, low)
        return low, high, op("subtract", k(1.0), frac), frac

    y_lo, y_hi, wy_lo, wy_hi = corners(ys, height)
    x_lo, x_hi, wx_lo, wx_hi = corners(xs, width)
    points = n_rois * out_h * ratio * out_w * ratio
    rows = b.op("gather", [b.reshape(x, (n_batch, channels, height * width)), node.input(2)], axis=0)
    values = []
    for yy, wy in ((y_lo, wy_lo), (y_hi, wy_hi)):
        for xx, wx in ((x_lo, wx_lo), (x_hi, wx_hi)):
            flat = b.convert(op("add", op("multiply", yy, k(float(width))), xx), "s64")
            weight = op("select", outside, k(0.0), op("multiply", wy, wx))
            at = broadcast_in_dims(b, b.reshape(flat, (n_rois, points // n_rois)), (n_rois, channels, points // n_rois),
                                   [0, 2])
            picked = b.op("gather-elements", [rows, at], axis=2)
            w = broadcast_in_dims(b, b.reshape(weight, (n_rois, points // n_rois)), picked.shape.dims, [0, 2])
            values.append(b.op("multiply", [picked, w]))
    combine = "add" if mode == "avg" else "maximum"
    total = values[0]
    for v in values[1:]:
        total = b.op(combine, [total, v])
    total = b.reshape(total, (n_rois, channels, out_h, ratio, out_w, ratio))
    y = b.op("reduce", [total], dimensions=(3, 5), kind=combine)
    if mode == "avg":
        y = b.op("divide", [y, full(b, float(ratio * ratio), dtype, y.shape.dims)])
    return [y]

