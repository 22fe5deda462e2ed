"""GridSample: X read at the run-time positions of a grid, as the ONNX reference (after PyTorch) reads it.

Per spatial axis the grid's normalized coordinate is denormalized (align_corners), rounded half to even
for nearest, and an out-of-range one is clamped (padding_mode border) or reflected (reflection). Each
axis then has taps (nearest 1, linear 2, cubic 4) with weights; every combination of taps reads X,
flattened per channel, with one gather-elements at the taps' flat index (the index clamped or reflected
into range, or the read zeroed, by padding_mode) and adds its weight times the value.
"""

from __future__ import annotations

import itertools
import math

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, static_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Instruction

CUBIC_ALPHA = -0.75


class _Coords:
    """Elementwise arithmetic on coordinate arrays of one dtype and dims."""

    def __init__(self, b: Builder, like: Instruction) -> None:
        self.b, self.dtype, self.dims = b, like.shape.dtype, like.shape.dims

    def k(self, value: float) -> Instruction:
        return full(self.b, value, self.dtype, self.dims)

    def op(self, opcode: str, *xs: Instruction | float, **attrs) -> Instruction:
        return self.b.op(opcode, [x if isinstance(x, Instruction) else self.k(x) for x in xs], **attrs)

    def where(self, cond: Instruction, a: Instruction | float, c: Instruction | float) -> Instruction:
        return self.op("select", cond, a, c)

    def cmp(self, a: Instruction | float, c: Instruction | float, direction: str) -> Instruction:
        return self.op("compare", a, c, direction=direction)

    def clamp(self, x: Instruction, lo: float, hi: float) -> Instruction:
        return self.op("minimum", self.op("maximum", x, lo), hi)

    def reflect(self, x: Instruction, lo: float, hi: float) -> Instruction:
        """x reflected by the near border until it lies in [lo, hi] (the reference's _gs_reflect)."""
        span = hi - lo
        below, above = self.cmp(x, lo, "LT"), self.cmp(x, hi, "GT")
        dx = self.where(below, self.op("subtract", lo, x), self.op("subtract", x, hi))
        turns = self.op("floor", self.op("divide", dx, span))
        r = self.op("subtract", dx, self.op("multiply", turns, span))
        halves = self.op("floor", self.op("multiply", turns, 0.5))
        even = self.cmp(self.op("subtract", turns, self.op("multiply", halves, 2.0)), 0.0, "EQ")
        from_lo, from_hi = self.op("add", r, lo), self.op("subtract", hi, r)
        inside = self.where(below, self.where(even, from_lo, from_hi), self.where(even, from_hi, from_lo))
        return self.where(self.op("or", below, above), inside, x)


def _cubic_weights(c: _Coords, t: Instruction) -> list[Instruction]:
    a = CUBIC_ALPHA
    def outer(s: Instruction) -> Instruction:  # ((a s - 5a) s + 8a) s - 4a, for s in [1, 2]
        return c.op("subtract", c.op("multiply", c.op("add", c.op("multiply", c.op("subtract", c.op("multiply", s, a),
                                                                                   5 * a), s), 8 * a), s), 4 * a)
    def inner(s: Instruction) -> Instruction:  # ((a + 2) s - (a + 3)) s s + 1, for s in [0, 1]
        return c.op("add", c.op("multiply", c.op("multiply", c.op("subtract", c.op("multiply", s, a + 2), a + 3), s),
                                s), 1.0)
    one_minus = c.op("subtract", 1.0, t)
    return [outer(c.op("add", t, 1.0)), inner(t), inner(one_minus), outer(c.op("add", one_minus, 1.0))]


@onnx_op("GridSample", since=16)
@onnx_op("GridSample", since=20)
@onnx_op("GridSample", since=22)
def import_grid_sample(b: Builder, node: OnnxNode) -> list[Result]:
    x, grid = node.input(0), node.input(1)
    require_float(node, x)
    require_float(node, grid)
    mode = node.attr("mode", "linear" if node.opset >= 20 else "bilinear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = node.attr("padding_mode", "zeros")
    align = bool(node.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic") or padding not in ("zeros", "border", "reflection"):
        raise node.error(f"unknown mode '{mode}' or padding_mode '{padding}'")
    dims = static_dims(node, x.shape.dims, "input dims")
    n_batch, channels, sizes = dims[0], dims[1], dims[2:]
    rank = len(sizes)
    gdims = static_dims(node, grid.shape.dims, "grid dims")
    if rank < 1 or len(gdims) != rank + 2 or gdims[0] != n_batch or gdims[-1] != rank:
        raise node.error(f"grid dims {list(gdims)} do not match an input of dims {list(dims)}")
    out = gdims[1:-1]
    points = 1
    for d in out:
        points *= d
    flat_grid = b.reshape(grid, (n_batch, points, rank))
    c = _Coords(b, b.reshape(b.op("slice", [flat_grid], start_indices=(0, 0, 0), limit_indices=(n_batch, points, 1),
                                  strides=(1, 1, 1)), (n_batch, points)))
    axes_taps = []  # per spatial axis: [(index as float, weight or None)]
    for i, size in enumerate(sizes):
        g = b.op("slice", [flat_grid], start_indices=(0, 0, rank - 1 - i), limit_indices=(n_batch, points, rank - i),
                 strides=(1, 1, 1))
        g = b.reshape(g, (n_batch, points))
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        pos = (c.op("multiply", c.op("add", g, 1.0), (size - 1) / 2) if align
               else c.op("divide", c.op("subtract", c.op("multiply", c.op("add", g, 1.0), float(size)), 1.0), 2.0))
        if mode == "nearest":
            pos = c.op("round-nearest-even", pos)
        if padding == "border":
            pos = c.where(c.op("or", c.cmp(pos, lo, "LT"), c.cmp(pos, hi, "GT")), c.clamp(pos, 0, size - 1), pos)
        elif padding == "reflection":
            pos = c.reflect(pos, lo, hi)
        if mode == "nearest":
            axes_taps.append([(_trunc(c, pos), None)])
            continue
        base = c.op("floor", pos)
        t = c.op("subtract", pos, base)
        if mode == "linear":
            axes_taps.append([(base, c.op("subtract", 1.0, t)), (c.op("add", base, 1.0), t)])
        else:
            weights = _cubic_weights(c, t)
            axes_taps.append([(c.op("add", base, float(k - 1)), w) for k, w in enumerate(weights)])
    rows = b.reshape(x, (n_batch, channels, math.prod(sizes)))
    y = None
    for combo in itertools.product(*axes_taps):
        flat, valid, weight = None, None, None
        for i, (index, w) in enumerate(combo):
            size, (lo, hi) = sizes[i], ((0.0, sizes[i] - 1.0) if align else (-0.5, sizes[i] - 0.5))
            if padding == "zeros":
                ok = c.op("and", c.cmp(index, 0.0, "GE"), c.cmp(index, float(size - 1), "LE"))
                valid = ok if valid is None else c.op("and", valid, ok)
            elif padding == "reflection":
                index = _trunc(c, c.reflect(index, lo, hi))
            index = c.clamp(index, 0, size - 1)
            stride = math.prod(sizes[i + 1:])
            term = c.op("multiply", index, float(stride)) if stride != 1 else index
            flat = term if flat is None else c.op("add", flat, term)
            if w is not None:
                weight = w if weight is None else c.op("multiply", weight, w)
        at = broadcast_in_dims(b, b.convert(flat, "s64"), (n_batch, channels, points), [0, 2])
        value = b.op("gather-elements", [rows, at], axis=2)
        if weight is not None:
            wx = broadcast_in_dims(b, b.convert(weight, x.shape.dtype), value.shape.dims, [0, 2])
            value = b.op("multiply", [value, wx])
        if valid is not None:
            keep = broadcast_in_dims(b, valid, value.shape.dims, [0, 2])
            value = b.op("select", [keep, value, full(b, 0, x.shape.dtype, value.shape.dims)])
        y = value if y is None else b.op("add", [y, value])
    return [b.reshape(y, (n_batch, channels) + tuple(out))]


def _trunc(c: _Coords, x: Instruction) -> Instruction:
    """x rounded toward zero (a C cast to int)."""
    return c.where(c.cmp(x, 0.0, "LT"), c.op("ceil", x), c.op("floor", x))
