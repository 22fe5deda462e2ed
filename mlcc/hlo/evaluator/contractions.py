"""Evaluation rules of the contractions (dot, convolution) and the composites (softmax, norms,
attention), which accumulate in f32."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction
from mlcc.hlo.shape_inference import conv_dim_labels
from mlcc.hlo.evaluator.core import _accumulator, _fail, _static_dims, _widen, rule
from mlcc.hlo.evaluator.data import _pad


# ---------------------------------------------------------------- contractions

@rule("dot")
def _dot(inst: Instruction, ops: list) -> np.ndarray:
    lhs, rhs = ops
    a = inst.attrs
    lb, lc = list(a["lhs_batch_dims"]), list(a["lhs_contracting_dims"])
    rb, rc = list(a["rhs_batch_dims"]), list(a["rhs_contracting_dims"])
    lf = [i for i in range(lhs.ndim) if i not in lb + lc]
    rf = [i for i in range(rhs.ndim) if i not in rb + rc]
    acc = _accumulator(lhs.dtype, numpy_dtype(inst.shape.dtype))
    batch = [lhs.shape[i] for i in lb]
    lfree, rfree = [lhs.shape[i] for i in lf], [rhs.shape[i] for i in rf]
    k = math.prod(lhs.shape[i] for i in lc)
    left = lhs.astype(acc).transpose(lb + lf + lc).reshape(math.prod(batch), math.prod(lfree), k)
    right = rhs.astype(acc).transpose(rb + rc + rf).reshape(math.prod(batch), k, math.prod(rfree))
    return np.matmul(left, right).reshape(batch + lfree + rfree)


@rule("convolution")
def _convolution(inst: Instruction, ops: list) -> np.ndarray:
    x, w = ops
    a = inst.attrs
    lhs_labels, rhs_labels, out_labels = conv_dim_labels(a["dim_labels"])
    spatial = "".join(str(k) for k in range(x.ndim - 2))
    canonical = "bf" + spatial
    acc = _accumulator(x.dtype, numpy_dtype(inst.shape.dtype))
    x = x.astype(acc).transpose([lhs_labels.index(c) for c in canonical])          # [N, C, S...]
    w = w.astype(acc).transpose([rhs_labels.index(c) for c in "oi" + spatial])     # [O, I, K...]
    out_dims = _static_dims(inst)
    groups = a["feature_group_count"]
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    if groups < 1 or c % groups or o % groups:
        _fail(inst, f"{c} input and {o} output features do not split into {groups} groups")
    if math.prod(out_dims) == 0:
        return np.zeros(out_dims, acc)
    rank = len(spatial)
    zero = [0, 0]
    padded = _pad(x, np.zeros((), acc), zero + list(a["padding_low"]), zero + list(a["padding_high"]),
                  [0] * x.ndim)
    dilation, strides = a["rhs_dilation"], a["window_strides"]
    extent = [d * (k - 1) + 1 for k, d in zip(w.shape[2:], dilation)]
    patches = sliding_window_view(padded, extent, axis=tuple(range(2, 2 + rank))) if rank else padded
    patches = patches[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
                      + tuple(slice(None, None, d) for d in dilation)]                  # [N, C, P..., K...]
    positions = patches.shape[2:2 + rank]
    patches = patches.reshape((n, groups, c // groups) + patches.shape[2:])
    filters = w.reshape((groups, o // groups) + w.shape[1:])
    p, k = "pqrstu"[:rank], "vwxyzk"[:rank]
    out = np.einsum(f"ngc{p}{k},goc{k}->ngo{p}", patches, filters, optimize=True)
    out = out.reshape((n, o) + positions)
    return out.transpose([canonical.index(ch) for ch in out_labels])


# ---------------------------------------------------------------- composites

@rule("softmax")
def _softmax(inst: Instruction, ops: list) -> np.ndarray:
    x = _widen(ops[0])
    d = inst.attrs["dimension"]
    if x.size == 0:
        return x
    shifted = x - np.max(x, axis=d, keepdims=True)
    e = np.exp(shifted)
    total = np.sum(e, axis=d, keepdims=True)
    if inst.attrs.get("log", False):
        return shifted - np.log(total)
    return e / total


def _norm_shape(x: np.ndarray, axes: Sequence[int]) -> list[int]:
    """The shape that lines a parameter of the normalized dims up with x."""
    return [n if i in axes else 1 for i, n in enumerate(x.shape)]


def _combined(inst: Instruction, stats: np.ndarray, row: int) -> tuple[np.ndarray | None, np.ndarray]:
    """A norm's rows' mean (None for rms-norm) and mean square about it, from a row-stats' partials (its last
    operand), in f32 as the kernel combines them: parts of equal size, Chan's formula for mean and M2."""
    stats = stats.astype(np.float32)
    if inst.opcode == "rms-norm":
        return None, (stats.sum(axis=-1, dtype=np.float32) / np.float32(row))[..., None]
    means, m2 = stats[..., 0], stats[..., 1]
    parts = means.shape[-1]
    mean = means.sum(axis=-1, dtype=np.float32) / np.float32(parts)
    deviation = means - mean[..., None]
    m2_all = m2.sum(axis=-1, dtype=np.float32) + np.float32(row // parts) * (deviation * deviation).sum(axis=-1)
    return mean[..., None], (m2_all / np.float32(row))[..., None]


@rule("layer-norm")
def _layer_norm(inst: Instruction, ops: list) -> np.ndarray:
    x, scale, bias = (_widen(v) for v in ops[:3])
    axes = tuple(sorted(inst.attrs["dimensions"]))
    if len(ops) == 4:  # statistics precomputed per row (the last dim)
        mean, var = _combined(inst, ops[3], x.shape[-1])
    else:
        mean = np.mean(x, axis=axes, keepdims=True)
        var = np.mean((x - mean) * (x - mean), axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + inst.attrs["epsilon"])
    shape = _norm_shape(x, axes)
    return y * scale.reshape(shape) + bias.reshape(shape)


@rule("rms-norm")
def _rms_norm(inst: Instruction, ops: list) -> np.ndarray:
    x, scale = (_widen(v) for v in ops[:2])
    axes = tuple(sorted(inst.attrs["dimensions"]))
    if len(ops) == 3:
        _, mean_square = _combined(inst, ops[2], x.shape[-1])
    else:
        mean_square = np.mean(x * x, axis=axes, keepdims=True)
    return x / np.sqrt(mean_square + inst.attrs["epsilon"]) * scale.reshape(_norm_shape(x, axes))


@rule("row-stats")
def _row_stats(inst: Instruction, ops: list) -> np.ndarray:
    x = ops[0].astype(np.float32)
    part = int(inst.attrs["part"])
    parts = x.reshape(x.shape[:-1] + (x.shape[-1] // part, part))
    if inst.attrs["moments"] == "squares":
        return (parts * parts).sum(axis=-1, dtype=np.float32)
    mean = parts.sum(axis=-1, dtype=np.float32) / np.float32(part)
    deviation = parts - mean[..., None]
    return np.stack([mean, (deviation * deviation).sum(axis=-1, dtype=np.float32)], axis=-1)


@rule("batch-norm-inference")
def _batch_norm(inst: Instruction, ops: list) -> np.ndarray:
    x, scale, offset, mean, var = (_widen(v) for v in ops)
    shape = _norm_shape(x, (inst.attrs["feature_index"],))
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + inst.attrs["epsilon"])
    return y * scale.reshape(shape) + offset.reshape(shape)


@rule("attention")
def _attention(inst: Instruction, ops: list) -> np.ndarray:
    q, k, v = ops[:3]
    mask = ops[3] if len(ops) > 3 else None
    acc = _accumulator(q.dtype, q.dtype)
    q, k, v = q.astype(acc), k.astype(acc), v.astype(acc)
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        heads, kv_heads = q.shape[-3], k.shape[-3]
        if kv_heads == 0 or heads % kv_heads or v.shape[-3] != kv_heads:
            _fail(inst, f"{heads} query heads cannot share {kv_heads} key/value heads")
        k = np.repeat(k, heads // kv_heads, axis=-3)
        v = np.repeat(v, heads // kv_heads, axis=-3)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * np.array(inst.attrs["scale"], acc)
    kind = inst.attrs.get("quant_type")
    for pre, *fq in inst.attrs.get("score_quant", ()):  # fake-quantized scores (QDQ exports)
        scores = scores * np.array(pre, acc) if pre != 1 else scores
        if fq:  # a step of one element is a constant multiply alone
            scores = _fake_quant(scores, fq, kind)
    softcap = inst.attrs.get("softcap")
    if softcap is not None:  # logit soft-capping, before any mask
        scores = np.array(softcap, acc) * np.tanh(scores / np.array(softcap, acc))
    sq, sk = scores.shape[-2:]
    keep = None
    if mask is not None:
        if mask.dtype.kind == "b":
            keep = mask
        else:
            scores = scores + mask.astype(acc)
    if inst.attrs["causal"]:
        causal = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        window = inst.attrs.get("window")
        if window is not None:  # sliding window: query i also sees no key older than its last `window`
            causal &= np.arange(sk)[None, :] > np.arange(sq)[:, None] + (sk - sq) - window
        keep = causal if keep is None else keep & causal
    masked = inst.attrs.get("masked_value")
    if keep is not None:
        if masked is not None:  # the model adds this finite value where it masks: every score of a row it
            kept_any = np.any(keep, axis=-1, keepdims=True)  # masks whole stays, plus the value
            scores = np.where(keep | ~kept_any, scores, -np.inf) + np.where(kept_any, 0, np.array(masked, acc))
        else:
            scores = np.where(keep, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(scores - np.where(row_max == -np.inf, 0, row_max))
    total = np.sum(e, axis=-1, keepdims=True)
    probs = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    if inst.attrs.get("prob_quant") is not None:
        probs = _fake_quant(probs, inst.attrs["prob_quant"], kind)
    return np.matmul(probs, v)


def _fake_quant(x: np.ndarray, fq, kind: str | None = None) -> np.ndarray:
    """(clamp(round-half-even(x * inv) + zp, lo, hi) - zp) * scale, each step in x's type; with kind an fp8
    type (quant_type), the rounding is the conversion to it and back, after the clamp (zp is 0)."""
    inv, zp, lo, hi, scale = (np.array(c, x.dtype) for c in fq)
    if kind is not None:
        return np.minimum(np.maximum(x * inv, lo), hi).astype(numpy_dtype(kind)).astype(x.dtype) * scale
    t = np.minimum(np.maximum(np.rint(x * inv) + zp, lo), hi)
    return (t - zp) * scale
