"""Fold batch-norm-inference into the convolution (or dot, from Gemm) before it.

    bn(conv(x, W) [+ b]) = conv(x, W * s) + (b - mean) * s + offset,   s = scale / sqrt(var + eps)

W is scaled along its output-feature dim. It applies only when the weights and the
batch-norm parameters are constants and nothing else reads the convolution (or its
bias add), so the old weights die. The new weights and bias are computed in f64 and
rounded once to the weights' dtype.
"""

from __future__ import annotations

import numpy as np

from mlcc.hlo.ir import Instruction, Shape, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, constant_array, merged_origin, op, var
from mlcc.hlo.passes.views import peel_views
from mlcc.hlo.shape_inference import conv_dim_labels


def _feature_dim_of_weights(contraction: Instruction, feature_index: int) -> int | None:
    """The dim of the weights (operand 1) that becomes result dim ``feature_index``."""
    if contraction.opcode == "convolution":
        _, rhs, out = conv_dim_labels(contraction.attrs["dim_labels"])
        if out[feature_index] != "f" or contraction.attrs["feature_group_count"] < 1:
            return None
        return rhs.index("o")
    a = contraction.attrs
    lhs, rhs = contraction.operands[0].shape, contraction.operands[1].shape
    batch = len(a["lhs_batch_dims"])
    lhs_free = lhs.rank - batch - len(a["lhs_contracting_dims"])
    rhs_free = [d for d in range(rhs.rank) if d not in a["rhs_batch_dims"] and d not in a["rhs_contracting_dims"]]
    k = feature_index - batch - lhs_free
    return rhs_free[k] if 0 <= k < len(rhs_free) else None


def _bias_vector(bias: Instruction, rw: Rewriter, feature_index: int, features: int) -> np.ndarray | None:
    """The per-feature values of a bias add's broadcast operand (a constant along one dim)."""
    src, pos = peel_views(bias)
    data = constant_array(src, rw.module)
    if data is None:
        return None
    if data.size == 1:
        return np.full(features, data.reshape(-1)[0], np.float64)
    if list(pos.values()) != [feature_index] or data.size != features:
        return None
    return data.reshape(-1).astype(np.float64)


def _fold(rw: Rewriter, m: Match) -> Instruction | None:
    bn = m.root
    x = bn.operands[0]
    bias = None
    contraction = x
    if x.opcode == "add" and len(x.users) == 1:
        for i in (0, 1):
            if x.operands[i].opcode in ("convolution", "dot"):
                contraction, bias = x.operands[i], x.operands[1 - i]
                break
    if contraction.opcode not in ("convolution", "dot") or len(contraction.users) != 1:
        return None
    if not is_float(bn.shape.dtype) or contraction.shape.dtype != bn.shape.dtype:
        return None
    weights = contraction.operands[1]
    w = constant_array(weights, rw.module)
    params = [constant_array(p, rw.module) for p in bn.operands[1:]]
    if w is None or any(p is None for p in params):
        return None
    feature_index = bn.attrs["feature_index"]
    wdim = _feature_dim_of_weights(contraction, feature_index)
    features = bn.shape.dims[feature_index]
    if wdim is None or w.shape[wdim] != features:
        return None
    b = np.zeros(features) if bias is None else _bias_vector(bias, rw, feature_index, features)
    if b is None:
        return None
    scale, offset, mean, var_ = (p.astype(np.float64).reshape(-1) for p in params)
    s = scale / np.sqrt(var_ + bn.attrs["epsilon"])
    shape = [1] * w.ndim
    shape[wdim] = features
    new_w = rw.constant(w.astype(np.float64) * s.reshape(shape), weights.shape.dtype)
    new_b = rw.constant((b - mean) * s + offset, bn.shape.dtype)
    folded = rw.op(contraction.opcode, [contraction.operands[0], new_w], contraction.shape, **contraction.attrs)
    bcast = rw.op("broadcast", [new_b], Shape(bn.shape.dtype, bn.shape.dims), dimensions=(feature_index,))
    origin = merged_origin([contraction, x, bn])
    for inst in rw.created:
        inst.origin = origin
    return rw.op("add", [folded, bcast])


RULES = [Rule("bn-folding", op("batch-norm-inference", var("x"), var("scale"), var("offset"), var("mean"),
                                var("var")), _fold)]


class BatchNormFolding(RewritePass):
    def __init__(self) -> None:
        super().__init__("bn-folding", RULES)
