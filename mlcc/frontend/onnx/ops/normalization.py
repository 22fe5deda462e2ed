"""Normalizations: LayerNormalization, RMSNormalization, BatchNormalization, InstanceNormalization,
GroupNormalization (all through the layer-norm / rms-norm / batch-norm-inference composites) and LRN."""

from __future__ import annotations

from typing import Sequence

import onnx

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, scalar_op, static_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.frontend.onnx.types import ir_dtype
from mlcc.hlo.ir import Dim, Instruction, is_float


def _to_dims(b: Builder, node: OnnxNode, v: Instruction, dims: Sequence[Dim], what: str) -> Instruction:
    """``v`` broadcast (numpy-style) to ``dims``; leading size-1 dims beyond that rank are dropped."""
    extra = v.shape.rank - len(dims)
    if extra > 0:
        if any(d != 1 for d in v.shape.dims[:extra]):
            raise node.error(f"{what} dims {list(v.shape.dims)} do not broadcast to {list(dims)}")
        v = b.reshape(v, v.shape.dims[extra:])
    try:
        return b.broadcast_to(v, dims)
    except ValueError:
        raise node.error(f"{what} dims {list(v.shape.dims)} do not broadcast to {list(dims)}") from None


def _no_extra_outputs(node: OnnxNode, names: str) -> None:
    if any(node.output_used(j) for j in range(1, node.num_outputs)):
        raise node.unsupported(f"the {names} outputs (only the normalized output is supported)")


@onnx_op("LayerNormalization", since=17)
def import_layer_norm(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    rank = x.shape.rank
    axis = node.axis(node.attr("axis", -1), rank)
    dims = x.shape.dims[axis:]
    epsilon = float(node.attr("epsilon", 1e-5))
    scale = _to_dims(b, node, b.convert(node.input(1), x.shape.dtype), dims, "Scale")
    bias = (_to_dims(b, node, b.convert(node.input(2), x.shape.dtype), dims, "B") if node.has_input(2)
            else full(b, 0, x.shape.dtype, dims))
    y = b.op("layer-norm", [x, scale, bias], dimensions=tuple(range(axis, rank)), epsilon=epsilon)
    if not any(node.output_used(j) for j in (1, 2)):
        return [y]
    return [y, *_layer_norm_statistics(b, node, x, axis, epsilon)][:node.num_outputs]


def _layer_norm_statistics(b: Builder, node: OnnxNode, x: Instruction, axis: int,
                           epsilon: float) -> list[Instruction]:
    """LayerNormalization's Mean and InvStdDev outputs: x's dims with the normalized ones kept as 1,
    computed in the stash type (float32 unless ``stash_type`` says otherwise)."""
    stash = ir_dtype(node.attr("stash_type", onnx.TensorProto.FLOAT))
    if stash is None or not is_float(stash):
        raise node.unsupported(f"stash_type {node.attr('stash_type')}")
    xs = b.convert(x, stash)
    rank = x.shape.rank
    normalized = tuple(range(axis, rank))
    count = 1
    for d in static_dims(node, x.shape.dims[axis:], "normalized dims"):
        count *= d
    lead = x.shape.dims[:axis]
    kept = tuple(lead) + (1,) * (rank - axis)

    def mean(v: Instruction) -> Instruction:
        return scalar_op(b, "divide", b.op("reduce", [v], dimensions=normalized, kind="add"), count)

    mu = mean(xs)
    centered = b.op("subtract", [xs, broadcast_in_dims(b, mu, xs.shape.dims, list(range(axis)))])
    variance = mean(b.op("multiply", [centered, centered]))
    inv_std = b.op("rsqrt", [scalar_op(b, "add", variance, epsilon)])
    return [b.reshape(mu, kept), b.reshape(inv_std, kept)]


@onnx_op("RMSNormalization", since=23)
def import_rms_norm(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    rank = x.shape.rank
    axis = node.axis(node.attr("axis", -1), rank)
    scale = _to_dims(b, node, b.convert(node.input(1), x.shape.dtype), x.shape.dims[axis:], "scale")
    return [b.op("rms-norm", [x, scale], dimensions=tuple(range(axis, rank)),
                 epsilon=float(node.attr("epsilon", 1e-5)))]


@onnx_op("BatchNormalization", since=6)
def import_batch_norm(b: Builder, node: OnnxNode) -> list[Result]:
    training = node.opset >= 14 and bool(node.attr("training_mode", 0))
    if not training:
        _no_extra_outputs(node, "running mean / variance")
    if node.opset < 9 and not node.attr("spatial", 1):
        raise node.unsupported("spatial=0")
    x = node.input(0)
    require_float(node, x)
    if x.shape.rank < 2:
        raise node.error(f"input must have rank >= 2, has {x.shape.rank}")
    params = [b.convert(node.input(i), x.shape.dtype) for i in range(1, 5)]
    for p in params:
        if p.shape.rank != 1:
            raise node.error(f"scale, B, mean and var must be 1-D, one has dims {list(p.shape.dims)}")
    epsilon = float(node.attr("epsilon", 1e-5))
    if not training:
        return [b.op("batch-norm-inference", [x, *params], epsilon=epsilon, feature_index=1)]
    scale, bias, running_mean, running_var = params
    mean, var = _batch_moments(b, node, x)
    y = b.op("batch-norm-inference", [x, scale, bias, mean, var], epsilon=epsilon, feature_index=1)
    momentum = float(node.attr("momentum", 0.9))
    updated = [b.op("add", [scalar_op(b, "multiply", old, momentum), scalar_op(b, "multiply", new, 1 - momentum)])
               for old, new in ((running_mean, mean), (running_var, var))]
    return [y, *updated][:node.num_outputs]


def _batch_moments(b: Builder, node: OnnxNode, x: Instruction) -> tuple[Instruction, Instruction]:
    """Per channel (dim 1): the mean and the population variance over every other dim."""
    axes = tuple(d for d in range(x.shape.rank) if d != 1)
    count = 1
    for d in static_dims(node, [x.shape.dims[a] for a in axes], "batch and spatial dims"):
        count *= d
    mean = scalar_op(b, "divide", b.op("reduce", [x], dimensions=axes, kind="add"), count)
    centered = b.op("subtract", [x, broadcast_in_dims(b, mean, x.shape.dims, [1])])
    var = b.op("reduce", [b.op("multiply", [centered, centered])], dimensions=axes, kind="add")
    return mean, scalar_op(b, "divide", var, count)


def _per_channel(b: Builder, y: Instruction, scale: Instruction, bias: Instruction) -> Instruction:
    dims = y.shape.dims
    y = b.op("multiply", [y, broadcast_in_dims(b, scale, dims, [1])])
    return b.op("add", [y, broadcast_in_dims(b, bias, dims, [1])])


def _normalize_trailing(b: Builder, x: Instruction, first: int, epsilon: float) -> Instruction:
    """layer-norm over dims [first, rank) with unit scale and zero bias."""
    dims = x.shape.dims[first:]
    dtype = x.shape.dtype
    return b.op("layer-norm", [x, full(b, 1, dtype, dims), full(b, 0, dtype, dims)],
                dimensions=tuple(range(first, x.shape.rank)), epsilon=epsilon)


@onnx_op("InstanceNormalization", since=6)
def import_instance_norm(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    if x.shape.rank < 3:
        raise node.error(f"input must have rank >= 3, has {x.shape.rank}")
    y = _normalize_trailing(b, x, 2, float(node.attr("epsilon", 1e-5)))
    return [_per_channel(b, y, b.convert(node.input(1), x.shape.dtype), b.convert(node.input(2), x.shape.dtype))]


@onnx_op("GroupNormalization", since=18)
@onnx_op("GroupNormalization", since=21)
def import_group_norm(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    if x.shape.rank < 3:
        raise node.error(f"input must have rank >= 3, has {x.shape.rank}")
    groups = node.attr("num_groups")
    dims = static_dims(node, x.shape.dims[1:], "channel and spatial dims")
    channels = dims[0]
    if channels % groups:
        raise node.error(f"{channels} channels do not split into {groups} groups")
    rest = 1
    for d in dims:
        rest *= d
    grouped = b.reshape(x, (x.shape.dims[0], groups, rest // groups))
    y = b.reshape(_normalize_trailing(b, grouped, 2, float(node.attr("epsilon", 1e-5))), x.shape.dims)
    scale, bias = (b.convert(node.input(i), x.shape.dtype) for i in (1, 2))
    if node.opset < 21:  # one scale and bias per group
        scale, bias = (b.reshape(broadcast_in_dims(b, v, (groups, channels // groups), [0]), (channels,))
                       for v in (scale, bias))
    return [_per_channel(b, y, scale, bias)]


@onnx_op("LRN", since=1)
def import_lrn(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    size = node.attr("size")
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    rank = x.shape.rank
    low = (size - 1) // 2
    window = [1] * rank
    window[1] = size
    pad_low, pad_high = [0] * rank, [0] * rank
    pad_low[1], pad_high[1] = low, size - 1 - low
    sums = b.op("reduce-window", [b.op("multiply", [x, x])], kind="add", window_dimensions=tuple(window),
                window_strides=(1,) * rank, padding_low=tuple(pad_low), padding_high=tuple(pad_high))
    denom = scalar_op(b, "power", scalar_op(b, "add", scalar_op(b, "multiply", sums, alpha / size), bias), beta)
    return [b.op("divide", [x, denom])]


@onnx_op("LpNormalization", since=1)
def import_lp_normalization(b: Builder, node: OnnxNode) -> list[Result]:
    """x / ||x||_p along axis, 0 where the norm is 0."""
    x = node.input(0)
    require_float(node, x)
    axis = node.axis(node.attr("axis", -1), x.shape.rank)
    p = node.attr("p", 2)
    if p not in (1, 2):
        raise node.error(f"p={p} (only 1 and 2 are defined)")
    terms = b.op("abs", [x]) if p == 1 else b.op("multiply", [x, x])
    norm = b.op("reduce", [terms], dimensions=(axis,), kind="add")
    if p == 2:
        norm = b.op("sqrt", [norm])
    norm = broadcast_in_dims(b, norm, x.shape.dims, [i for i in range(x.shape.rank) if i != axis])
    zero = full(b, 0, x.shape.dtype, x.shape.dims)
    is_zero = b.op("compare", [norm, zero], direction="EQ")
    return [b.op("select", [is_zero, zero, b.op("divide", [x, norm])])]


@onnx_op("MeanVarianceNormalization", since=9)
def import_mean_variance_normalization(b: Builder, node: OnnxNode) -> list[Result]:
    """(x - E[x]) / sqrt(E[(x - E[x])^2]) over axes, as the ONNX function body computes it (no epsilon)."""
    x = node.input(0)
    require_float(node, x)
    rank = x.shape.rank
    axes = sorted({node.axis(a, rank) for a in node.attr("axes", [0, 2, 3])})
    count = 1
    for d in static_dims(node, [x.shape.dims[a] for a in axes], "normalized dims"):
        count *= d
    kept = [i for i in range(rank) if i not in axes]

    def mean(v: Instruction) -> Instruction:
        total = b.op("reduce", [v], dimensions=tuple(axes), kind="add")
        return broadcast_in_dims(b, scalar_op(b, "divide", total, count), x.shape.dims, kept)

    centered = b.op("subtract", [x, mean(x)])
    return [b.op("divide", [centered, b.op("sqrt", [mean(b.op("multiply", [centered, centered]))])])]
