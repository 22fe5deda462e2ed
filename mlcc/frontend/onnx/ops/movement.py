"""Data movement built from gathers, scatters, slices and pads: ScatterElements (and the old Scatter),
ReverseSequence, Compress, CenterCropPad; AffineGrid; the window functions (Hann, Hamming, Blackman); CumProd."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, static_dims
from mlcc.frontend.onnx.ops.shape_ops import slice_axis
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.frontend.onnx.types import ir_dtype, onnx_type_name
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Shape

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _wrapped(b: Builder, idx: Instruction, size) -> Instruction:
    """Indices as s64 with negative ones counted from the end of a dim of ``size``."""
    idx = b.convert(idx, "s64")
    dims = idx.shape.dims
    negative = b.op("compare", [idx, full(b, 0, "s64", dims)], direction="LT")
    return b.op("select", [negative, b.op("add", [idx, full(b, size, "s64", dims)]), idx])


@onnx_op("Scatter", since=9)
@onnx_op("ScatterElements", since=11)
def import_scatter_elements(b: Builder, node: OnnxNode) -> list[Result]:
    """scatter-nd with full index tuples: position p of indices writes data[p with p[axis] = indices[p]]."""
    data, indices, updates = node.input(0), node.input(1), node.input(2)
    rank = data.shape.rank
    axis = node.axis(node.attr("axis", 0), rank)
    reduction = node.attr("reduction", "none")
    if reduction not in REDUCTIONS:
        raise node.error(f"unknown reduction '{reduction}'")
    if indices.shape.dims != updates.shape.dims or indices.shape.rank != rank:
        raise node.error(f"indices {list(indices.shape.dims)} and updates {list(updates.shape.dims)} must have "
                         f"the same dims, of data's rank {rank}")
    dims = indices.shape.dims
    wide = tuple(dims) + (1,)
    columns = []
    for d in range(rank):
        if d == axis:
            coord = _wrapped(b, indices, data.shape.dims[axis])
        else:
            coord = b.op("iota", [], Shape("s64", dims), iota_dimension=d)
        columns.append(b.reshape(coord, wide))
    tuples = b.op("concatenate", columns, dimension=rank)
    return [b.op("scatter-nd", [data, tuples, updates], reduction=reduction)]


@onnx_op("ReverseSequence", since=10)
def import_reverse_sequence(b: Builder, node: OnnxNode) -> list[Result]:
    """Along time_axis, each batch entry's first sequence_lens[b] elements reversed (the rest kept)."""
    x, lens = node.input(0), b.convert(node.input(1), "s64")
    batch_axis, time_axis = node.attr("batch_axis", 1), node.attr("time_axis", 0)
    if {batch_axis, time_axis} not in ({0, 1},):
        raise node.error(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1")
    dims = x.shape.dims
    t = b.op("iota", [], Shape("s64", dims), iota_dimension=time_axis)
    n = broadcast_in_dims(b, lens, dims, [batch_axis])
    last = b.op("subtract", [n, full(b, 1, "s64", dims)])
    reversed_t = b.op("subtract", [last, t])
    inside = b.op("compare", [t, n], direction="LT")
    return [b.op("gather-elements", [x, b.op("select", [inside, reversed_t, t])], axis=time_axis)]


@onnx_op("Compress", since=9)
@onnx_op("Compress", since=11)
def import_compress(b: Builder, node: OnnxNode) -> list[Result]:
    """The elements (along axis, or of the flattened input) whose condition is true; the condition is needed
    at import time, since it decides the output's dims."""
    x = node.input(0)
    keep = np.flatnonzero(np.asarray(node.const(1, "condition")).reshape(-1).astype(bool))
    if node.has_attr("axis"):
        axis = node.axis(node.attr("axis"), x.shape.rank)
    else:
        n = static_dims(node, x.shape.dims, "input dims")
        x = b.reshape(x, (int(np.prod(n, dtype=np.int64)),))
        axis = 0
    size = x.shape.dims[axis]
    if isinstance(size, int) and keep.size and keep[-1] >= size:
        raise node.error(f"the condition selects element {int(keep[-1])} of a dim of size {size}")
    return [b.op("gather", [x, b.constant(keep.astype(np.int64))], axis=axis)]


@onnx_op("CenterCropPad", since=18)
def import_center_crop_pad(b: Builder, node: OnnxNode) -> list[Result]:
    """Per axis, a centered crop (a slice) or a centered zero padding to the target size."""
    x = node.input(0)
    rank = x.shape.rank
    axes = [node.axis(a, rank) for a in node.attr("axes", list(range(rank)))]
    targets = node.ints(1, "shape")
    if len(targets) != len(axes):
        raise node.error(f"shape has {len(targets)} sizes for {len(axes)} axes")
    sizes = static_dims(node, [x.shape.dims[a] for a in axes], "cropped or padded dims")
    y = x
    for axis, size, target in zip(axes, sizes, targets):
        if target < size:
            start = (size - target) // 2
            y = slice_axis(b, y, axis, start, start + target)
        elif target > size:
            low, high = [0] * rank, [0] * rank
            low[axis] = (target - size) // 2
            high[axis] = target - size - low[axis]
            y = b.op("pad", [y, b.splat(0, y.shape.dtype)], edge_padding_low=tuple(low),
                     edge_padding_high=tuple(high), interior_padding=(0,) * rank)
    return [y]


def _base_grid(sizes: list[int], align_corners: bool) -> np.ndarray:
    """[*sizes, len(sizes) + 1]: the normalized coordinates (x first, then y, z) and a 1, per output position."""
    axes = []
    for n in sizes:
        if align_corners:
            axes.append(np.linspace(-1.0, 1.0, n) if n > 1 else np.array([-1.0]))
        else:
            axes.append((2.0 * np.arange(n) + 1.0) / n - 1.0)
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack(list(mesh)[::-1] + [np.ones(sizes)], axis=-1)


@onnx_op("AffineGrid", since=20)
def import_affine_grid(b: Builder, node: OnnxNode) -> list[Result]:
    """grid[n, ...] = theta[n] @ (x, y[, z], 1): the base grid is known at import, so this is one dot."""
    theta = node.input(0)
    require_float(node, theta)
    size = node.ints(1, "size")
    spatial = size[2:]
    if len(spatial) not in (2, 3) or tuple(theta.shape.dims[1:]) != (len(spatial), len(spatial) + 1):
        raise node.error(f"theta dims {list(theta.shape.dims)} do not fit the output size {size}")
    base = _base_grid(spatial, bool(node.attr("align_corners", 0)))
    points = int(np.prod(spatial))
    grid = b.constant(base.reshape(points, len(spatial) + 1).astype(numpy_dtype(theta.shape.dtype)))
    # [points, k+1] x [N, k, k+1] -> [points, N, k]
    out = b.op("dot", [grid, theta], lhs_batch_dims=(), lhs_contracting_dims=(1,), rhs_batch_dims=(),
               rhs_contracting_dims=(2,))
    batch = theta.shape.dims[0]
    out = b.transpose(out, (1, 0, 2))
    return [b.reshape(out, (batch, *spatial, len(spatial)))]


def _window_positions(node: OnnxNode) -> tuple[np.ndarray, int, str]:
    """(n for n in [0, size) in the output type, the denominator N, the output dtype), as ONNX's reference has them."""
    size = int(node.ints(0, "size")[0])
    dtype = ir_dtype(node.attr("output_datatype", 1))
    if dtype is None:
        raise node.unsupported(f"output_datatype {onnx_type_name(node.attr('output_datatype'))}")
    denominator = size if node.attr("periodic", 1) else size - 1
    return np.arange(size, dtype=numpy_dtype(dtype)), denominator, dtype


@onnx_op("HannWindow", since=17)
def import_hann_window(b: Builder, node: OnnxNode) -> list[Result]:
    n, big_n, dtype = _window_positions(node)
    return [(np.sin(n * np.pi / big_n) ** 2).astype(numpy_dtype(dtype))]


@onnx_op("HammingWindow", since=17)
def import_hamming_window(b: Builder, node: OnnxNode) -> list[Result]:
    n, big_n, dtype = _window_positions(node)
    alpha = 25.0 / 46.0
    return [(alpha - np.cos(n * np.pi * 2 / big_n) * (1 - alpha)).astype(numpy_dtype(dtype))]


@onnx_op("BlackmanWindow", since=17)
def import_blackman_window(b: Builder, node: OnnxNode) -> list[Result]:
    n, big_n, dtype = _window_positions(node)
    y = np.cos((n * (np.pi * 2)) / big_n) * (-0.5)
    y += np.cos((n * (np.pi * 4)) / big_n) * 0.08
    y += 0.42
    return [y.astype(numpy_dtype(dtype))]


def _shift(b: Builder, x: Instruction, axis: int, by: int, fill: float | int) -> Instruction:
    """x moved ``by`` places forward along axis, the first ``by`` places filled with ``fill``."""
    rank = x.shape.rank
    low, high = [0] * rank, [0] * rank
    low[axis], high[axis] = by, -by
    return b.op("pad", [x, b.splat(fill, x.shape.dtype)], edge_padding_low=tuple(low), edge_padding_high=tuple(high),
                interior_padding=(0,) * rank)


@onnx_op("CumProd", since=26)
def import_cum_prod(b: Builder, node: OnnxNode) -> list[Result]:
    """A log-depth scan: y *= y shifted by 1, 2, 4, ... places (the shifted-in places are 1)."""
    x = node.input(0)
    rank = x.shape.rank
    axis = node.axis(node.ints(1, "axis")[0], rank)
    size = static_dims(node, [x.shape.dims[axis]], "scanned dim")[0]
    if node.attr("reverse", 0):
        x = b.op("reverse", [x], dimensions=(axis,))
    if node.attr("exclusive", 0) and size:
        x = _shift(b, x, axis, 1, 1)
    y, step = x, 1
    while step < size:
        y = b.op("multiply", [y, _shift(b, y, axis, step, 1)])
        step *= 2
    if node.attr("reverse", 0):
        y = b.op("reverse", [y], dimensions=(axis,))
    return [y]
