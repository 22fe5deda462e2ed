"""Scatters back into images: MaxUnpool (each value to the flat index MaxPool gave it) and Col2Im (each
block's columns summed into the image), both one scatter-nd into zeros with indices known at import time
or given."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import full, static_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder


@onnx_op("MaxUnpool", since=9)
@onnx_op("MaxUnpool", since=11)
def import_max_unpool(b: Builder, node: OnnxNode) -> list[Result]:
    """Zeros of the pool's input shape, ``x[i]`` stored at flat index ``indices[i]``; an ``output_shape``
    larger than that shape pads it with zeros at the end of each dim (as the ONNX reference does)."""
    x, indices = node.input(0), node.input(1)
    dims = static_dims(node, x.shape.dims, "input dims")
    if tuple(node.dims(1)) != dims:
        raise node.error(f"indices dims {list(node.dims(1))} differ from the input's {list(dims)}")
    n = len(dims) - 2
    kernel = list(node.attr("kernel_shape"))
    strides = list(node.attr("strides", [1] * n))
    pads = list(node.attr("pads", [0] * (2 * n)))
    if n < 1 or len(kernel) != n or len(strides) != n or len(pads) != 2 * n:
        raise node.error(f"kernel_shape {kernel}, strides {strides} and pads {pads} do not match {n} spatial dims")
    inferred = list(dims[:2]) + [(d - 1) * s - (lo + hi) + k for d, s, k, lo, hi
                                 in zip(dims[2:], strides, kernel, pads[:n], pads[n:])]
    total, count = int(np.prod(inferred)), int(np.prod(dims))
    flat = b.op("scatter-nd", [full(b, 0, x.shape.dtype, (total,)), b.reshape(b.convert(indices, "s64"), (count, 1)),
                               b.reshape(x, (count,))], reduction="none")
    y = b.reshape(flat, tuple(inferred))
    if node.has_input(2):
        wanted = node.ints(2, "output_shape")
        if len(wanted) != len(dims) or any(w < i for w, i in zip(wanted, inferred)):
            raise node.error(f"output_shape {wanted} is smaller than the unpooled shape {inferred}")
        if wanted != inferred:
            y = b.op("pad", [y, b.splat(0, x.shape.dtype)], edge_padding_low=(0,) * len(dims),
                     edge_padding_high=tuple(w - i for w, i in zip(wanted, inferred)),
                     interior_padding=(0,) * len(dims))
    return [y]


@onnx_op("Col2Im", since=18)
def import_col2im(b: Builder, node: OnnxNode) -> list[Result]:
    """[N, C * prod(block), L] -> [N, C, *image]: column l of block element k adds into the image at
    ``position(l) * strides - pads_low + k * dilations`` (positions outside the image are dropped)."""
    x = node.input(0)
    image = node.ints(1, "image_shape")
    block = node.ints(2, "block_shape")
    n = len(image)
    if len(block) != n or n < 1:
        raise node.error(f"image_shape {image} and block_shape {block} differ in rank")
    strides = list(node.attr("strides", [1] * n))
    dilations = list(node.attr("dilations", [1] * n))
    pads = list(node.attr("pads", [0] * (2 * n)))
    if len(strides) != n or len(dilations) != n or len(pads) != 2 * n:
        raise node.error(f"strides {strides}, dilations {dilations} and pads {pads} do not match {n} image dims")
    batch, rows, length = static_dims(node, x.shape.dims, "input dims")
    kernel = int(np.prod(block))
    blocks = [(size + lo + hi - d * (k - 1) - 1) // s + 1 for size, lo, hi, d, k, s
              in zip(image, pads[:n], pads[n:], dilations, block, strides)]
    if x.shape.rank != 3 or rows % kernel or length != int(np.prod(blocks)) or min(blocks) < 1:
        raise node.error(f"input dims {list(x.shape.dims)} do not hold {kernel}-element blocks at "
                         f"{blocks} positions")
    channels = rows // kernel
    where = np.meshgrid(*[np.arange(k) * d for k, d in zip(block, dilations)], indexing="ij")
    starts = np.meshgrid(*[np.arange(m) * s - lo for m, s, lo in zip(blocks, strides, pads[:n])], indexing="ij")
    coords = [w.reshape(-1, 1) + p.reshape(1, -1) for w, p in zip(where, starts)]  # [kernel, length] per dim
    inside = np.all([(c >= 0) & (c < size) for c, size in zip(coords, image)], axis=0)
    pixels = int(np.prod(image))
    flat = np.ravel_multi_index([np.clip(c, 0, size - 1) for c, size in zip(coords, image)], image)
    flat = np.where(inside, flat, pixels).astype(np.int64)  # outside: one extra slot, dropped after
    cols = b.reshape(x, (batch, channels, kernel * length))
    cols = b.transpose(cols, [2, 0, 1])  # [kernel * length, N, C]
    summed = b.op("scatter-nd", [full(b, 0, x.shape.dtype, (pixels + 1, batch, channels)),
                                 b.constant(flat.reshape(-1, 1)), cols], reduction="add")
    summed = b.op("slice", [summed], start_indices=(0, 0, 0), limit_indices=(pixels, batch, channels),
                  strides=(1, 1, 1))
    return [b.reshape(b.transpose(summed, [1, 2, 0]), (batch, channels, *image))]
