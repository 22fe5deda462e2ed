"""dot_general, dot and convolution."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.stablehlo.importer import Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.ops.data import int_tuple
from mlcc.frontend.stablehlo.syntax import Op, as_array
from mlcc.hlo.ir import Instruction, is_float


def _same_dtype(cx: Context, op: Op, lhs: Instruction, rhs: Instruction) -> tuple[Instruction, Instruction]:
    """Operands of one dtype; mixed operands, and integer operands of a floating-point result (JAX's
    preferred_element_type), are converted to the result's dtype first, as XLA does."""
    dtype = cx.result_shape(op).dtype
    integer_to_float = not is_float(lhs.shape.dtype) and not is_float(rhs.shape.dtype) and is_float(dtype)
    if lhs.shape.dtype == rhs.shape.dtype and not integer_to_float:
        return lhs, rhs
    return cx.b.convert(lhs, dtype), cx.b.convert(rhs, dtype)


@stablehlo_op("stablehlo.dot_general")
def import_dot_general(cx: Context, op: Op, args: list[Instruction]) -> Results:
    lhs, rhs = _same_dtype(cx, op, *args)
    dn = op.attrs.get("dot_dimension_numbers")
    if not isinstance(dn, dict):
        raise cx.error(op, "missing dot_dimension_numbers")

    def dims(key: str) -> tuple[int, ...]:
        return tuple(int(d) for d in dn.get(key, ()))

    empty = cx.empty_result(op)
    if empty is not None:
        return empty
    # StableHLO and the IR both order the result as batch, lhs free, rhs free.
    return cx.b.op("dot", [lhs, rhs], cx.result_shape(op),
                   lhs_batch_dims=dims("lhs_batching_dimensions"),
                   lhs_contracting_dims=dims("lhs_contracting_dimensions"),
                   rhs_batch_dims=dims("rhs_batching_dimensions"),
                   rhs_contracting_dims=dims("rhs_contracting_dimensions"))


@stablehlo_op("stablehlo.dot")
def import_dot(cx: Context, op: Op, args: list[Instruction]) -> Results:
    lhs, rhs = _same_dtype(cx, op, *args)
    if not (1 <= lhs.shape.rank <= 2 and 1 <= rhs.shape.rank <= 2):
        raise cx.error(op, "dot takes operands of rank 1 or 2")
    return cx.b.op("dot", [lhs, rhs], cx.result_shape(op), lhs_batch_dims=(), rhs_batch_dims=(),
                   lhs_contracting_dims=(lhs.shape.rank - 1,), rhs_contracting_dims=(0,))


@stablehlo_op("stablehlo.convolution")
def import_convolution(cx: Context, op: Op, args: list[Instruction]) -> Results:
    x, w = args
    labels = op.attrs.get("dimension_numbers")
    if not isinstance(labels, dict):
        raise cx.error(op, "missing dimension_numbers")
    empty = cx.empty_result(op)  # e.g. a dilated window larger than the padded input: no output position
    if empty is not None:
        return empty
    groups = int(op.attrs.get("batch_group_count", 1))
    if groups == 1:
        return _convolution(cx, op, x, w, labels)
    # the spec: lhs split into groups along its batch dim, rhs along its output features, one convolution
    # per pair, the results concatenated along the output's feature dim
    b, o = labels["lhs"].index("b"), labels["rhs"].index("o")
    if int(op.attrs.get("feature_group_count", 1)) != 1 or x.shape.dims[b] % groups or w.shape.dims[o] % groups:
        raise cx.error(op, f"batch_group_count {groups} must divide the batch and output feature sizes, with "
                           "feature_group_count 1")
    parts = [_convolution(cx, op, _split(cx, x, b, groups, g), _split(cx, w, o, groups, g), labels)
             for g in range(groups)]
    return cx.b.op("concatenate", parts, dimension=labels["out"].index("f"))


def _split(cx: Context, x: Instruction, dim: int, groups: int, g: int) -> Instruction:
    """The g-th of groups equal slices of x along dim."""
    dims = tuple(int(d) for d in x.shape.dims)
    size = dims[dim] // groups
    start = tuple(g * size if d == dim else 0 for d in range(len(dims)))
    limit = tuple((g + 1) * size if d == dim else n for d, n in enumerate(dims))
    return cx.b.op("slice", [x], start_indices=start, limit_indices=limit, strides=(1,) * len(dims))


def _convolution(cx: Context, op: Op, x: Instruction, w: Instruction, labels: dict) -> Instruction:
    out = cx.result_shape(op)
    spatial = x.shape.rank - 2
    ones = (1,) * spatial
    lhs_dilation = int_tuple(cx, op, "lhs_dilation", ones)
    padding = np.asarray(as_array(op.attrs["padding"]), dtype=np.int64).reshape(spatial, 2) \
        if "padding" in op.attrs else np.zeros((spatial, 2), np.int64)
    if any(d != 1 for d in lhs_dilation):  # a transposed convolution: the input dilated and padded by pad
        x = _dilated(cx, x, labels["lhs"], lhs_dilation, padding)
        padding = np.zeros((spatial, 2), np.int64)
    reversal = [bool(r) for r in op.attrs.get("window_reversal", [False] * spatial)]
    if any(reversal):  # a reversed window is the convolution with the kernel flipped
        w = cx.b.op("reverse", [w], dimensions=tuple(labels["rhs"].index(str(k))
                                                     for k in range(spatial) if reversal[k]))
    if x.shape.dtype != out.dtype or w.shape.dtype != out.dtype:
        x, w = cx.b.convert(x, out.dtype), cx.b.convert(w, out.dtype)
    return cx.b.op("convolution", [x, w], window_strides=int_tuple(cx, op, "window_strides", ones),
                   padding_low=tuple(int(p) for p in padding[:, 0]),
                   padding_high=tuple(int(p) for p in padding[:, 1]),
                   rhs_dilation=int_tuple(cx, op, "rhs_dilation", ones),
                   feature_group_count=int(op.attrs.get("feature_group_count", 1)),
                   dim_labels=f"{labels['lhs']}_{labels['rhs']}->{labels['out']}")


def _dilated(cx: Context, x: Instruction, lhs_labels: str, dilation: tuple[int, ...], padding: np.ndarray) -> Instruction:
    """x with dilation - 1 zeros between its spatial elements and the convolution's padding at its edges."""
    rank = x.shape.rank
    low, high, interior = [0] * rank, [0] * rank, [0] * rank
    for k in range(len(dilation)):
        d = lhs_labels.index(str(k))
        low[d], high[d], interior[d] = int(padding[k, 0]), int(padding[k, 1]), dilation[k] - 1
    return cx.b.op("pad", [x, cx.scalar(0, x.shape.dtype)], edge_padding_low=tuple(low),
                   edge_padding_high=tuple(high), interior_padding=tuple(interior))
