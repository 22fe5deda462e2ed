"""Shape and data-movement ops: Shape, Reshape, Squeeze, Transpose, Expand, Concat, Split, Slice, Pad, Tile..."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mlcc.frontend.onnx.loading import dense_of_sparse
from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, dims_product, full, normalize_axes, static_dims
from mlcc.frontend.onnx.registry import Deferred, OnnxNode, Result, onnx_op
from mlcc.frontend.onnx.types import ir_dtype, onnx_type_name
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import dtype_of_numpy, numpy_dtype
from mlcc.hlo.ir import Dim, Instruction, Shape
from mlcc.hlo.symbolic import Sym, SymbolicError, as_sym, dim_of, product
from mlcc.frontend.onnx.symbolic_values import at_most, clamp_slice, symbolic_array

# ---- values known from shapes


@onnx_op("Shape", since=1)
def import_shape(b: Builder, node: OnnxNode) -> list[Result]:
    dims = node.dims(0)
    rank = len(dims)
    start, end = node.attr("start", 0), node.attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    picked = dims[start:end]
    if all(isinstance(d, int) for d in picked):
        return [np.array(picked, dtype=np.int64)]
    try:
        return [symbolic_array([as_sym(d) for d in picked])]
    except SymbolicError:  # a dim ONNX could not infer ('?')
        return [Deferred(f"is the shape of '{node.proto.input[0]}', which has unknown dims {list(picked)}")]


@onnx_op("Size", since=1)
def import_size(b: Builder, node: OnnxNode) -> list[Result]:
    dims = node.dims(0)
    if all(isinstance(d, int) for d in dims):
        return [np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)]
    try:
        return [symbolic_array([product(dims)], ())]
    except SymbolicError:
        return [Deferred(f"is the size of '{node.proto.input[0]}', which has unknown dims {list(dims)}")]


@onnx_op("Constant", since=1)
def import_constant(b: Builder, node: OnnxNode) -> list[Result]:
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if node.has_attr(key):
            return [np.array(node.attr(key), dtype=dtype)]
    if node.has_attr("value"):
        value = node.attr("value")
        _check_dtype(node, value)
        return [value]
    if node.has_attr("sparse_value"):
        return [dense_of_sparse(node.attr("sparse_value"))]
    kinds = [a.name for a in node.proto.attribute]
    raise node.unsupported(f"a Constant given by {kinds or 'nothing'}")


def _check_dtype(node: OnnxNode, value: np.ndarray) -> None:
    try:
        dtype_of_numpy(value.dtype)
    except TypeError:
        raise node.unsupported(f"a Constant of numpy dtype {value.dtype}") from None


@onnx_op("ConstantOfShape", since=9)
def import_constant_of_shape(b: Builder, node: OnnxNode) -> list[Result]:
    value = node.attr("value", None)
    arr = np.zeros((1,), np.float32) if value is None else value
    if arr.size != 1:
        raise node.error(f"value must have one element, has {arr.size}")
    _check_dtype(node, arr)
    shape = node.sym_value(0)
    dims = shape_dims(node, 0, "shape") if shape is not None else node.inferred_dims(0, "shape", 0)
    return [full(b, arr.reshape(-1)[0].item(), dtype_of_numpy(arr.dtype), dims)]


def shape_dims(node: OnnxNode, i: int, what: str) -> tuple[Dim, ...]:
    """Input ``i``, a shape known at import (maybe in symbolic dims), as IR dims; a negative one is an error."""
    dims = tuple(dim_of(d) for d in node.sizes(i, what))
    if any(isinstance(d, int) and d < 0 for d in dims):
        raise node.error(f"negative dim in {what} {list(dims)}")
    return dims


@onnx_op("Identity", since=1, sequences=True)
def import_identity(b: Builder, node: OnnxNode) -> list[Result]:
    if node.tensor(0).seq is not None:
        return [node.tensor(0)]
    value = node.value(0)
    return [value if value is not None else node.input(0)]


@onnx_op("Dropout", since=1)
def import_dropout(b: Builder, node: OnnxNode) -> list[Result]:
    if node.opset >= 12 and node.has_input(2):
        training = node.value(2)
        if training is None:
            raise node.unsupported(f"the training_mode (input '{node.proto.input[2]}') must be known at import time")
        ratio = float(node.const(1, "ratio")) if node.has_input(1) and bool(training) else 0.5
        if bool(training) and ratio != 0:
            raise node.unsupported("dropout in training mode (random) is not supported")
    if node.opset < 7 and not node.attr("is_test", 0):
        raise node.unsupported("dropout in training mode (is_test=0) is not supported")
    value = node.value(0)
    out = value if value is not None else node.input(0)
    if node.num_outputs == 1:
        return [out]
    return [out, full(b, True, "pred", node.dims(0)) if node.output_used(1) else None]


# ---- reshapes


def _reshape_minus_one(in_dims: Sequence[Dim], known: Sequence[Dim]) -> Dim | None:
    """The dim that -1 stands for, when ``known`` are the other target dims; None if it cannot be written
    (the element counts do not divide exactly for every value of the symbols)."""
    try:
        total, rest = as_sym(product(in_dims)), as_sym(product(known))
    except SymbolicError:  # a dim ONNX could not infer ('?')
        return None
    if rest == 0:
        return None
    q = total.exact_div(rest)
    return None if q is None else dim_of(q)


@onnx_op("Reshape", since=5)
def import_reshape(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    shape = node.sym_value(1)
    if shape is None:
        return [b.reshape(x, node.inferred_dims(0, "target shape", 1))]
    allowzero = node.attr("allowzero", 0) if node.opset >= 14 else 0
    target: list[Dim | None] = []
    for i, s in enumerate(dim_of(v) for v in shape.reshape(-1)):
        if isinstance(s, str):
            target.append(s)
        elif s == 0 and not allowzero:
            if i >= x.shape.rank:
                raise node.error(f"target shape {shape.tolist()} copies dim {i} of a rank-{x.shape.rank} input")
            target.append(x.shape.dims[i])
        elif s == -1:
            target.append(None)
        elif s < 0:
            raise node.error(f"bad target dim {s} in {shape.tolist()}")
        else:
            target.append(s)
    if target.count(None) > 1:
        raise node.error(f"target shape {shape.tolist()} has more than one -1")
    if None in target:
        inferred = _reshape_minus_one(x.shape.dims, [d for d in target if d is not None])
        if inferred is None:
            fallback = node.output_dims(0)
            if fallback is None:
                raise node.error(f"cannot reshape {list(x.shape.dims)} to {shape.tolist()}")
            return [b.reshape(x, fallback)]
        target[target.index(None)] = inferred
    _check_count(node, x.shape.dims, target)
    return [b.reshape(x, target)]  # type: ignore[arg-type]


def _check_count(node: OnnxNode, a: Sequence[Dim], c: Sequence[Dim]) -> None:
    try:
        same = product(a) == product(c)
    except SymbolicError:  # a dim ONNX could not infer ('?')
        return
    if not same:
        raise node.error(f"cannot reshape {list(a)} to {list(c)}")


@onnx_op("Flatten", since=1)
def import_flatten(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    rank = x.shape.rank
    axis = node.attr("axis", 1)
    if not -rank <= axis <= rank:
        raise node.error(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    outer, inner = dims_product(x.shape.dims[:axis]), dims_product(x.shape.dims[axis:])
    if outer is None or inner is None:
        return [b.reshape(x, node.inferred_dims(0, "flattened shape"))]
    return [b.reshape(x, (outer, inner))]


def _axes_unknown(node: OnnxNode) -> bool:
    return node.opset >= 13 and node.has_input(1) and node.value(1) is None


def _squeeze_axes(node: OnnxNode) -> list[int] | None:
    if node.opset >= 13:
        return node.ints(1, "axes") if node.has_input(1) else None
    return node.attr("axes", None)


@onnx_op("Squeeze", since=1)
@onnx_op("Squeeze", since=13)
def import_squeeze(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    dims = x.shape.dims
    if _axes_unknown(node):
        return [b.reshape(x, node.inferred_dims(0, "axes", 1))]
    axes = _squeeze_axes(node)
    if axes is None:
        drop = [i for i, d in enumerate(dims) if d == 1]
    else:
        drop = normalize_axes(node, axes, len(dims))
        for a in drop:
            if dims[a] != 1:
                raise node.error(f"cannot squeeze dim {a} of size {dims[a]}")
    return [b.reshape(x, [d for i, d in enumerate(dims) if i not in drop])]


@onnx_op("Unsqueeze", since=1)
@onnx_op("Unsqueeze", since=13)
def import_unsqueeze(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    if _axes_unknown(node):
        return [b.reshape(x, node.inferred_dims(0, "axes", 1))]
    axes = _squeeze_axes(node)
    if axes is None:
        raise node.error("axes are required")
    rank = x.shape.rank + len(axes)
    new = normalize_axes(node, axes, rank)
    rest = iter(x.shape.dims)
    return [b.reshape(x, [1 if i in new else next(rest) for i in range(rank)])]


@onnx_op("Transpose", since=1)
def import_transpose(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    rank = x.shape.rank
    perm = node.attr("perm", list(range(rank - 1, -1, -1)))
    if sorted(perm) != list(range(rank)):
        raise node.error(f"perm {perm} is not a permutation of rank {rank}")
    return [b.transpose(x, perm)]


@onnx_op("Expand", since=8)
def import_expand(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    shape = node.sym_value(1)
    if shape is None:
        dims = node.inferred_dims(0, "target shape", 1)
    else:
        try:
            dims = b.broadcast_shapes(x.shape.dims, shape_dims(node, 1, "target shape"))
        except ValueError:
            raise node.error(f"cannot expand {list(x.shape.dims)} to {[str(d) for d in shape.reshape(-1)]}") from None
    return [b.broadcast_to(x, dims)]


@onnx_op("DepthToSpace", since=11)
def import_depth_to_space(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    n, c, h, w = static_dims(node, x.shape.dims, "input dims")
    bs = node.attr("blocksize")
    if c % (bs * bs):
        raise node.error(f"{c} channels are not divisible by blocksize^2 = {bs * bs}")
    if node.attr("mode", "DCR") == "DCR":
        y = b.reshape(x, (n, bs, bs, c // (bs * bs), h, w))
        y = b.transpose(y, (0, 3, 4, 1, 5, 2))
    else:
        y = b.reshape(x, (n, c // (bs * bs), bs, bs, h, w))
        y = b.transpose(y, (0, 1, 4, 2, 5, 3))
    return [b.reshape(y, (n, c // (bs * bs), h * bs, w * bs))]


@onnx_op("SpaceToDepth", since=1)
def import_space_to_depth(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    n, c, h, w = static_dims(node, x.shape.dims, "input dims")
    bs = node.attr("blocksize")
    if h % bs or w % bs:
        raise node.error(f"spatial dims {h}x{w} are not divisible by blocksize {bs}")
    y = b.reshape(x, (n, c, h // bs, bs, w // bs, bs))
    crd = node.attr("mode", "DCR") == "CRD"  # the mode attribute arrived in opset 28
    y = b.transpose(y, (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4))
    return [b.reshape(y, (n, c * bs * bs, h // bs, w // bs))]


# ---- joining and cutting


@onnx_op("Concat", since=4)
def import_concat(b: Builder, node: OnnxNode) -> list[Result]:
    xs = node.inputs()
    rank = xs[0].shape.rank
    axis = node.axis(node.attr("axis"), rank)
    nonempty = [x for x in xs if x.shape.dims[axis] != 0]
    if len(nonempty) < len(xs) and nonempty:
        xs = nonempty
    if len(xs) == 1:
        return [xs[0]]
    given = None
    if any(x.shape.dims[axis] == "?" for x in xs):  # a dim ONNX could not infer
        given = Shape(xs[0].shape.dtype, node.inferred_dims(0, "concatenated shape"))
    return [b.op("concatenate", xs, given, dimension=axis)]


def slice_axis(b: Builder, x: Instruction, axis: int, start: int, limit: int, stride: int = 1) -> Instruction:
    """x[start:limit:stride] along one axis."""
    dims = x.shape.dims
    if start == 0 and limit == dims[axis] and stride == 1:
        return x
    starts = [0] * len(dims)
    limits = list(dims)
    strides = [1] * len(dims)
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return b.op("slice", [x], start_indices=tuple(starts), limit_indices=tuple(limits), strides=tuple(strides))


@onnx_op("Split", since=2)
@onnx_op("Split", since=13)
@onnx_op("Split", since=18)
def import_split(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    axis = node.axis(node.attr("axis", 0), x.shape.rank)
    dim = x.shape.dims[axis]
    if not isinstance(dim, int):
        raise node.unsupported(f"splitting symbolic dim {dim}")
    n = node.num_outputs
    if node.opset >= 13 and node.has_input(1) and node.value(1) is None:
        sizes = [node.inferred_dims(j, "split sizes", 1)[axis] for j in range(n)]
    elif node.opset >= 13 and node.has_input(1):
        sizes = node.ints(1, "split sizes")
    elif node.opset < 13 and node.has_attr("split"):
        sizes = list(node.attr("split"))
    elif node.opset >= 18 and node.has_attr("num_outputs"):
        num = node.attr("num_outputs")
        chunk = -(-dim // num)
        sizes = [chunk] * (num - 1) + [dim - chunk * (num - 1)]
    else:
        if dim % n:
            raise node.error(f"dim {dim} does not split evenly into {n} outputs")
        sizes = [dim // n] * n
    if len(sizes) != n or sum(sizes) != dim or any(s < 0 for s in sizes):
        raise node.error(f"split sizes {sizes} do not cut dim {dim} into {n} outputs")
    outs: list[Result] = []
    start = 0
    for s in sizes:
        outs.append(slice_axis(b, x, axis, start, start + s))
        start += s
    return outs


@onnx_op("Slice", since=1)
@onnx_op("Slice", since=10)
def import_slice(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    dims = x.shape.dims
    if node.opset >= 10:
        starts, ends = node.sizes(1, "starts"), node.sizes(2, "ends")
        axes = node.ints(3, "axes") if node.has_input(3) else list(range(len(starts)))
        steps = node.ints(4, "steps") if node.has_input(4) else [1] * len(starts)
    else:
        starts, ends = list(node.attr("starts")), list(node.attr("ends"))
        axes = list(node.attr("axes", list(range(len(starts)))))
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.error("starts, ends, axes and steps differ in length")
    axes = [node.axis(a, len(dims)) for a in axes]
    if len(set(axes)) != len(axes):
        raise node.error(f"repeated axes {axes}")
    lo, hi, st = [0] * len(dims), list(dims), [1] * len(dims)
    flip = []
    for a, s, e, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise node.error("a step of 0")
        d = dims[a]
        if not all(isinstance(v, int) for v in (d, s, e)):
            lo[a], hi[a] = _symbolic_slice(node, s, e, step, d)
            continue
        s, e = clamp_slice(s, e, step, d)
        count = len(range(s, e, step))
        if count == 0:
            lo[a], hi[a], st[a] = 0, 0, 1
        elif step > 0:
            lo[a], hi[a], st[a] = s, s + (count - 1) * step + 1, step
        else:
            last = s + (count - 1) * step
            lo[a], hi[a], st[a] = last, s + 1, -step
            if count > 1:
                flip.append(a)
    y = x
    if lo != [0] * len(dims) or hi != list(dims) or st != [1] * len(dims):
        y = b.op("slice", [x], start_indices=tuple(lo), limit_indices=tuple(hi), strides=tuple(st))
    if flip:
        y = b.op("reverse", [y], dimensions=tuple(sorted(flip)))
    return [y]


def _symbolic_slice(node: OnnxNode, start: int | Sym, end: int | Sym, step: int, dim: Dim) -> tuple[Dim, Dim]:
    """[start, end) of a step-1 slice where the dim or a bound is symbolic, clamped as ONNX does; the
    comparisons that needs are decided with the symbol ranges (unsupported when they are not)."""
    if step != 1:
        raise node.unsupported(f"a step of {step} where dim {dim} or a bound ({start}, {end}) is symbolic")
    lo = _slice_bound(node, start, dim)
    hi = dim if isinstance(end, int) and end >= 2 ** 31 - 1 else _slice_bound(node, end, dim)
    ordered = at_most(lo, hi, node.ctx.ranges)
    if ordered is None:
        raise node.unsupported(f"cannot tell whether slice [{start}:{end}] of dim {dim} is empty (give dim_ranges)")
    return (lo, hi) if ordered else (lo, lo)


def _slice_bound(node: OnnxNode, v: int | Sym, dim: Dim) -> Dim:
    """A Slice start or end: counted from the end when negative, then clamped into [0, dim]."""
    ranges = node.ctx.ranges
    negative = at_most(v, -1, ranges)
    if negative:
        v = as_sym(dim) + v
        if at_most(v, -1, ranges):
            return 0
        negative = at_most(v, -1, ranges)
    if negative is None:
        raise node.unsupported(f"cannot tell the sign of slice bound {v} (give dim_ranges)")
    inside = at_most(v, dim, ranges)
    if inside is None and _implies_range(node, v, dim):
        inside = True
    if inside is None:
        raise node.unsupported(f"cannot tell whether slice bound {v} <= dim {dim} (give dim_ranges)")
    return dim_of(v) if inside else dim


def _implies_range(node: OnnxNode, v: int | Sym, dim: Dim) -> bool:
    """A symbol given no range that slices a static dim ([0:seq] of a 64-row position table) is taken to be at
    most that dim: past it the slice would clamp to the dim while the rest of the model keeps the symbol's
    length, so the model has no longer valid size. The symbol gets the range 0..dim (the runtime refuses a
    longer input, naming it); True when that is what was done."""
    s = as_sym(v)
    names = s.symbols()
    if not isinstance(dim, int) or dim < 1 or len(names) != 1 or s != Sym.symbol(names[0]):
        return False
    if names[0] in node.ctx.ranges:
        return False
    node.ctx.ranges[names[0]] = (0, dim)
    return True


@onnx_op("Tile", since=6)
def import_tile(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    dims = x.shape.dims
    if node.value(1) is None:  # the repeats follow from ONNX's inferred output dims
        out = static_dims(node, node.inferred_dims(0, "repeats", 1), "output dims")
        reps = [o // d if isinstance(d, int) and d else 1 for o, d in zip(out, dims)]
    else:
        reps = node.ints(1, "repeats")
    if len(reps) != len(dims) or any(r < 0 for r in reps):
        raise node.error(f"repeats {reps} do not match rank {len(dims)}")
    if all(r == 1 for r in reps):
        return [x]
    wide: list[Dim] = []
    mapping = []
    final: list[Dim] = []
    for d, r in zip(dims, reps):
        if r != 1:
            wide.append(r)
        mapping.append(len(wide))
        wide.append(d)
        if r == 1:
            final.append(d)
        else:
            final.append(dim_of(as_sym(d) * r))
    y = broadcast_in_dims(b, x, wide, mapping)
    return [b.reshape(y, final)]


@onnx_op("Pad", since=2)
@onnx_op("Pad", since=11)
def import_pad(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    rank = x.shape.rank
    mode = node.attr("mode", "constant")
    if node.opset >= 11:
        pads = node.ints(1, "pads")
        axes = node.ints(3, "axes") if node.opset >= 18 and node.has_input(3) else list(range(rank))
    else:
        pads = list(node.attr("pads"))
        axes = list(range(rank))
    axes = [node.axis(a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise node.error(f"{len(pads)} pads for {len(axes)} axes")
    low, high = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        low[a], high[a] = pads[k], pads[k + len(axes)]
    if not any(low) and not any(high):
        return [x]
    if mode == "constant":
        if node.opset >= 11 and node.has_input(2):
            value = node.input(2)
            value = b.reshape(value, ()) if value.shape.rank else value
        else:
            value = b.splat(node.attr("value", 0.0) if node.opset < 11 else 0, x.shape.dtype)
        return [b.op("pad", [x, value], edge_padding_low=tuple(low), edge_padding_high=tuple(high),
                     interior_padding=(0,) * rank)]
    if mode not in ("reflect", "edge", "wrap"):
        raise node.unsupported(f"pad mode '{mode}'")
    y = x
    for a in range(rank):
        y = _pad_axis(b, node, y, a, low[a], high[a], mode)
    return [y]


def _pad_axis(b: Builder, node: OnnxNode, x: Instruction, axis: int, lo: int, hi: int, mode: str) -> Instruction:
    """Pad one axis by copying edges, reflecting or wrapping around (negative pads crop)."""
    n = x.shape.dims[axis]
    if lo == 0 and hi == 0:
        return x
    if not isinstance(n, int):
        raise node.unsupported(f"{mode} padding of symbolic dim {n}")
    if lo < 0 or hi < 0:
        x = slice_axis(b, x, axis, max(-lo, 0), n - max(-hi, 0))
        n = x.shape.dims[axis]
        lo, hi = max(lo, 0), max(hi, 0)
    if mode == "reflect" and (lo > n - 1 or hi > n - 1):
        raise node.error(f"reflect padding {lo},{hi} needs more than {n} elements along axis {axis}")
    if mode == "wrap" and (lo > n or hi > n):
        raise node.error(f"wrap padding {lo},{hi} is larger than dim {n} along axis {axis}")
    if n == 0:
        raise node.error(f"{mode} padding of an empty axis")
    parts: list[Instruction] = []
    if lo:
        parts.append(_pad_piece(b, x, axis, lo, mode, before=True))
    parts.append(x)
    if hi:
        parts.append(_pad_piece(b, x, axis, hi, mode, before=False))
    return b.op("concatenate", parts, dimension=axis)


def _pad_piece(b: Builder, x: Instruction, axis: int, k: int, mode: str, before: bool) -> Instruction:
    n = x.shape.dims[axis]
    if mode == "edge":
        edge = slice_axis(b, x, axis, 0, 1) if before else slice_axis(b, x, axis, n - 1, n)
        dims = list(edge.shape.dims)
        dims[axis] = k
        return b.op("broadcast", [edge], Shape(x.shape.dtype, tuple(dims)), dimensions=tuple(range(len(dims))))
    if mode == "wrap":
        return slice_axis(b, x, axis, n - k, n) if before else slice_axis(b, x, axis, 0, k)
    piece = slice_axis(b, x, axis, 1, k + 1) if before else slice_axis(b, x, axis, n - 1 - k, n - 1)
    return b.op("reverse", [piece], dimensions=(axis,)) if k > 1 else piece


# ---- generated values


@onnx_op("Range", since=11)
def import_range(b: Builder, node: OnnxNode) -> list[Result]:
    if any(node.tensor(i).is_symbolic for i in range(3)):
        return [_symbolic_range(b, node)]
    start, limit, delta = (node.const(i, name) for i, name in enumerate(("start", "limit", "delta")))
    if start.size != 1 or limit.size != 1 or delta.size != 1:
        raise node.error("start, limit and delta must be scalars")
    dtype = start.dtype
    start, limit, delta = (v.reshape(()) for v in (start, limit, delta))
    if delta == 0:
        raise node.error("delta is 0")
    n = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    return [(start + np.arange(n).astype(dtype) * delta).astype(dtype)]


def _symbolic_range(b: Builder, node: OnnxNode) -> Instruction:
    """Range with a symbolic start or limit (``arange(seq)``): an iota of symbolic length, shifted and scaled."""
    start, limit, delta = (node.sizes(i, name) for i, name in enumerate(("start", "limit", "delta")))
    if len(start) != 1 or len(limit) != 1 or len(delta) != 1:
        raise node.error("start, limit and delta must be scalars")
    (start,), (limit,), (delta,) = start, limit, delta
    if not isinstance(delta, int) or delta == 0:
        raise node.unsupported(f"a delta of {delta} with a symbolic start or limit")
    if not isinstance(start, int):
        return _range_from_symbolic_start(b, node, start, limit, delta)
    span = as_sym(limit) - start
    try:
        n = (span + (delta - 1)) // delta if delta > 0 else (-span + (-delta - 1)) // -delta
    except SymbolicError:
        raise node.unsupported(f"the length of range({start}, {limit}, {delta}) is not a polynomial") from None
    if not at_most(0, n, node.ctx.ranges):
        raise node.unsupported(f"range({start}, {limit}, {delta}) may be empty or negative (give dim_ranges)")
    dtype = node.dtype(0)
    y = b.op("iota", [], Shape(dtype, (dim_of(n),)), iota_dimension=0)
    if delta != 1:
        y = b.op("multiply", [y, full(b, delta, dtype, y.shape.dims)])
    if start != 0:
        y = b.op("add", [y, full(b, start, dtype, y.shape.dims)])
    return y


def _range_from_symbolic_start(b: Builder, node: OnnxNode, start: Sym, limit: int | Sym, delta: int) -> Instruction:
    """range(past, past + seq): the IR has no op reading a symbol as data, but iota(limit)[start:limit] is it."""
    ranges = node.ctx.ranges
    if delta != 1 or not at_most(0, start, ranges) or not at_most(start, limit, ranges):
        raise node.unsupported(f"range({start}, {limit}, {delta}): a symbolic start needs delta 1 and "
                               "0 <= start <= limit (give dim_ranges)")
    dtype = node.dtype(0)
    y = b.op("iota", [], Shape(dtype, (dim_of(limit),)), iota_dimension=0)
    return b.op("slice", [y], start_indices=(dim_of(start),), limit_indices=(dim_of(limit),), strides=(1,))


@onnx_op("EyeLike", since=9)
def import_eye_like(b: Builder, node: OnnxNode) -> list[Result]:
    rows, cols = static_dims(node, node.dims(0), "input dims")
    dtype = ir_dtype(node.attr("dtype")) if node.has_attr("dtype") else node.dtype(0)
    if dtype is None:
        raise node.unsupported(f"dtype {onnx_type_name(node.attr('dtype'))}")
    return [np.eye(rows, cols, node.attr("k", 0), dtype=numpy_dtype(dtype))]


@onnx_op("Trilu", since=14)
def import_trilu(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    dims = x.shape.dims
    if len(dims) < 2:
        raise node.error("input must have rank >= 2")
    k = node.sizes(1, "k")[0] if node.has_input(1) else 0
    n, m = dims[-2:]
    if isinstance(k, int):
        idx = Shape("s64", (n, m))
        rows = b.op("iota", [], idx, iota_dimension=0)
        cols = b.op("iota", [], idx, iota_dimension=1)
        shifted = b.op("add", [rows, full(b, k, "s64", (n, m))])
    elif at_most(0, k, node.ctx.ranges):  # cols vs rows + k
        cols, shifted = b.op("iota", [], Shape("s64", (n, m)), iota_dimension=1), _shifted_iota(b, (n, m), 0, k)
    elif at_most(k, 0, node.ctx.ranges):  # cols - k vs rows
        cols, shifted = _shifted_iota(b, (n, m), 1, -k), b.op("iota", [], Shape("s64", (n, m)), iota_dimension=0)
    else:
        raise node.unsupported(f"the sign of the diagonal k = {k} is not known (give dim_ranges)")
    keep = b.op("compare", [cols, shifted], direction="GE" if node.attr("upper", 1) else "LE")
    keep = broadcast_in_dims(b, keep, dims, [len(dims) - 2, len(dims) - 1])
    return [b.op("select", [keep, x, full(b, 0, x.shape.dtype, dims)])]


def _shifted_iota(b: Builder, dims: Sequence[Dim], axis: int, shift: Sym) -> Instruction:
    """Indices along ``axis`` plus a symbolic shift >= 0: a longer iota sliced from ``shift`` on (a symbol
    is never data in the IR)."""
    wide = list(dims)
    wide[axis] = dim_of(as_sym(dims[axis]) + shift)
    y = b.op("iota", [], Shape("s64", tuple(wide)), iota_dimension=axis)
    starts = [0] * len(dims)
    starts[axis] = dim_of(shift)
    return b.op("slice", [y], start_indices=tuple(starts), limit_indices=tuple(wide), strides=(1,) * len(dims))


@onnx_op("OneHot", since=11)
def import_one_hot(b: Builder, node: OnnxNode) -> list[Result]:
    indices = b.convert(node.input(0), "s64")
    depth = int(node.const(1, "depth").reshape(-1)[0])
    values = node.input(2)
    rank = indices.shape.rank + 1
    axis = node.axis(node.attr("axis", -1), rank)
    dims = list(indices.shape.dims)
    dims.insert(axis, depth)
    wrapped = b.op("select", [b.op("compare", [indices, full(b, 0, "s64", indices.shape.dims)], direction="LT"),
                              b.op("add", [indices, full(b, depth, "s64", indices.shape.dims)]), indices])
    mapping = [i for i in range(rank) if i != axis]
    hot = b.op("compare", [b.op("iota", [], Shape("s64", tuple(dims)), iota_dimension=axis),
                           broadcast_in_dims(b, wrapped, dims, mapping)], direction="EQ")
    off = b.reshape(slice_axis(b, values, 0, 0, 1), ())
    on = b.reshape(slice_axis(b, values, 0, 1, 2), ())
    return [b.op("select", [hot, b.broadcast_to(on, dims), b.broadcast_to(off, dims)])]
