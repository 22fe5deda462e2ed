"""DeformConv: a convolution whose taps read X at run-time offset positions, as the ONNX reference reads them.

Kernel tap p of output position q reads X at ``-pad + stride * q + dilation * p + offset[p, q]`` per spatial
axis, bilinearly (GridSample's linear mode with align_corners and zero padding: each axis has the taps
floor(pos) and floor(pos) + 1, weighted 1 - t and t, and a tap outside X reads 0), and the read is scaled by
the mask (v2 modulation). Each channel uses the offsets and mask of its offset group. Every combination of
axis taps is one gather-elements from X flattened per channel; their weighted sum gives the sampled columns
[N, C, kernel taps, output positions], and one dot with the weight contracts (C/group, kernel taps) per
group. Positions and sampled columns are computed in f32 (f64 for f64 inputs). The batch dim may be symbolic
(the sampled columns and the dot carry it); channels, spatial dims and the kernel are static.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, static_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype


def _ints(node: OnnxNode, name: str, count: int, default: int) -> list[int]:
    values = [int(v) for v in node.attr(name, [default] * count)]
    if len(values) != count:
        raise node.error(f"{name} {values} has {len(values)} entries for {count} spatial dims")
    return values


@onnx_op("DeformConv", since=19)
def import_deform_conv(b: Builder, node: OnnxNode) -> list[Result]:
    x, w, offset = node.input(0), node.input(1), node.input(2)
    require_float(node, x)
    if x.shape.rank < 3:
        raise node.error(f"input dims {list(x.shape.dims)} have no spatial dim (rank 3 or more is needed)")
    n_batch = x.shape.dims[0]  # may be symbolic: every position and weight below is per sample
    dims = (n_batch, *static_dims(node, x.shape.dims[1:], "input channel and spatial dims"))
    channels, sizes = dims[1], dims[2:]
    n = len(sizes)
    wdims = static_dims(node, w.shape.dims, "weight dims")
    if len(wdims) != n + 2:
        raise node.error(f"weight dims {list(wdims)} do not match an input of dims {list(dims)}")
    out_channels, per_group, kernel = wdims[0], wdims[1], wdims[2:]
    if node.has_attr("kernel_shape") and [int(k) for k in node.attr("kernel_shape")] != list(kernel):
        raise node.error(f"kernel_shape {node.attr('kernel_shape')} differs from the weight's {list(kernel)}")
    group, offset_group = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    if group < 1 or channels != per_group * group or out_channels % group:
        raise node.error(f"group {group} does not split {channels} input channels into weights of "
                         f"{per_group} and {out_channels} output channels")
    if offset_group < 1 or channels % offset_group:
        raise node.error(f"offset_group {offset_group} does not divide {channels} input channels")
    strides, dilations = _ints(node, "strides", n, 1), _ints(node, "dilations", n, 1)
    pads = _ints(node, "pads", 2 * n, 0)
    if min(strides + dilations) < 1 or min(pads) < 0:
        raise node.error(f"strides {strides} and dilations {dilations} must be positive, pads {pads} not negative")
    out = [(size + pads[i] + pads[n + i] - (k - 1) * d - 1) // s + 1
           for i, (size, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations))]
    if min(out) < 1:
        raise node.error(f"the kernel {list(kernel)} (dilations {dilations}) is larger than the padded input "
                         f"{[s + pads[i] + pads[n + i] for i, s in enumerate(sizes)]}")
    taps, points = math.prod(kernel), math.prod(out)
    want = (n_batch, offset_group * taps * n, *out)
    if tuple(offset.shape.dims) != want:
        raise node.error(f"offset dims {list(offset.shape.dims)} are not {list(want)} "
                         f"(batch, offset_group * kernel taps * {n}, output dims)")
    mask = node.input(4) if node.has_input(4) else None
    if mask is not None and tuple(mask.shape.dims) != (n_batch, offset_group * taps, *out):
        raise node.error(f"mask dims {list(mask.shape.dims)} are not {[n_batch, offset_group * taps, *out]} "
                         f"(batch, offset_group * kernel taps, output dims)")
    bias = node.input(3) if node.has_input(3) else None
    if bias is not None and tuple(bias.shape.dims) != (out_channels,):
        raise node.error(f"bias dims {list(bias.shape.dims)} are not [{out_channels}]")

    dtype = x.shape.dtype
    work = "f64" if dtype == "f64" else "f32"
    grid = (n_batch, offset_group, taps, points)  # sample positions, per offset group
    offsets = b.convert(b.reshape(offset, (n_batch, offset_group, taps, n, points)), work)
    tap_index = np.indices(kernel).reshape(n, taps)
    out_index = np.indices(out).reshape(n, points)
    axes_taps = []  # per spatial axis: [(tap position as float, its weight)] for floor(pos) and floor(pos) + 1
    for i in range(n):
        start = -pads[i] + strides[i] * out_index[i][None, :] + dilations[i] * tap_index[i][:, None]
        base = broadcast_in_dims(b, b.constant(start.astype(numpy_dtype(work))), grid, [2, 3])
        moved = b.op("slice", [offsets], start_indices=(0, 0, 0, i, 0),
                     limit_indices=(n_batch, offset_group, taps, i + 1, points), strides=(1,) * 5)
        pos = b.op("add", [base, b.reshape(moved, grid)])
        low = b.op("floor", [pos])
        frac = b.op("subtract", [pos, low])
        one = full(b, 1.0, work, grid)
        axes_taps.append([(low, b.op("subtract", [one, frac])), (b.op("add", [low, one]), frac)])
    scale = b.convert(b.reshape(mask, grid), work) if mask is not None else None

    per_offset = channels // offset_group
    rows = b.reshape(x, (n_batch, offset_group, per_offset, math.prod(sizes)))
    sampled_dims = (n_batch, offset_group, per_offset, taps * points)
    cols = None
    for combo in itertools.product(*axes_taps):
        flat, valid, weight = None, None, None
        for i, (index, w_i) in enumerate(combo):
            size = sizes[i]
            inside = b.op("and", [b.op("compare", [index, full(b, 0.0, work, grid)], direction="GE"),
                                  b.op("compare", [index, full(b, size - 1.0, work, grid)], direction="LE")])
            index = b.op("minimum", [b.op("maximum", [index, full(b, 0.0, work, grid)]),
                                     full(b, size - 1.0, work, grid)])
            stride = math.prod(sizes[i + 1:])
            term = b.op("multiply", [index, full(b, float(stride), work, grid)]) if stride != 1 else index
            flat = term if flat is None else b.op("add", [flat, term])
            valid = inside if valid is None else b.op("and", [valid, inside])
            weight = w_i if weight is None else b.op("multiply", [weight, w_i])
        assert flat is not None and valid is not None and weight is not None
        if scale is not None:
            weight = b.op("multiply", [weight, scale])
        weight = b.op("select", [valid, weight, full(b, 0.0, work, grid)])
        at = broadcast_in_dims(b, b.reshape(b.convert(flat, "s64"), (n_batch, offset_group, taps * points)),
                               sampled_dims, [0, 1, 3])
        value = b.convert(b.op("gather-elements", [rows, at], axis=3), work)
        value = b.op("multiply", [value, broadcast_in_dims(b, b.reshape(weight, (n_batch, offset_group,
                                                                                  taps * points)),
                                                           sampled_dims, [0, 1, 3])])
        cols = value if cols is None else b.op("add", [cols, value])
    assert cols is not None

    per_out = out_channels // group
    cols = b.reshape(cols, (n_batch, group, per_group, taps, points))
    weights = b.convert(b.reshape(w, (group, per_out, per_group, taps)), work)
    y = b.op("dot", [cols, weights], lhs_batch_dims=(1,), lhs_contracting_dims=(2, 3), rhs_batch_dims=(0,),
             rhs_contracting_dims=(2, 3))  # [group, N, points, per_out]
    y = b.reshape(b.transpose(y, (1, 0, 3, 2)), (n_batch, out_channels, *out))
    if bias is not None:
        y = b.op("add", [y, broadcast_in_dims(b, b.convert(bias, work), y.shape.dims, [1])])
    return [b.convert(y, dtype)]
