"""fp8 contractions: a dot or convolution of two dequantized float8 values becomes an fp8 contraction.

    (convert(xq) * sx)  .  (convert(wq) * sw)        xq, wq: f8e4m3fn, f8e5m2, f8e4m3fnuz or f8e5m2fnuz

(any pairing, mixed types included) is rewritten to multiply the fp8 values themselves, accumulating in f32
(fp8 wgmma on sm_90 for e4m3fn/e5m2, fp8/bf8 MFMA on gfx942 for the fnuz forms), and apply the scales in the
epilogue:

    y = convert_f32(dot(xq, wq) -> f32) * sx * sw

The products of two such values are exact in f32 (at most 4 significant bits each, exponents within 2**+-34),
so only the order of the f32 sums differs from the float contraction of the dequantized values; a NaN (an fnuz
type's 0x80, e4m3fn's 0x7f, an e5m2 NaN) or an e5m2 infinity propagates as it does there. fp8 has no zero
point. The scales follow the int8 rule (mlcc/hlo/passes/quantized_dot.py): the activation's per tensor, the
weight's per tensor or along one weight dim that is not contracted. Convolutions must be ungrouped (the grouped
kernels multiply without a tensor-core dot). A target whose tensor cores do not take the pairing upcasts the
tiles to f16 in the kernel (exact: every value of the four types is an f16 value), or with ``--fp8 strict``
refuses to build (mlcc/compiler.py). Builds at --precision fp16|bf16 skip this pass (mlcc/pipeline.py): the
unscaled sums would be stored in the half type.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Shape, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, op, var
from mlcc.hlo.passes.quantized_dot import Dequantized, Operands, per_tensor, scale_epilogue, weight_scale
from mlcc.hlo.shape_inference import FP8_DOT, conv_dim_labels


def _fp8(v: Instruction) -> Dequantized | None:
    """convert(q) or convert(q) * scale (either order), q a value of an fp8 type (FP8_DOT)."""
    if not is_float(v.shape.dtype):
        return None
    pairs: list[tuple[Instruction, Instruction | None]] = [(v, None)]
    if v.opcode == "multiply":
        pairs = [(v.operands[0], v.operands[1]), (v.operands[1], v.operands[0])]
    for c, s in pairs:
        if c.opcode == "convert" and c.operands[0].shape.dtype in FP8_DOT and is_float(c.shape.dtype):
            return Dequantized(c.operands[0], None, s)
    return None


def _operands(root: Instruction) -> Operands | None:
    if root.shape.dtype not in ("f32", "f16", "bf16"):
        return None  # an f64 contraction (an f64 scale) keeps its f64 sums
    x, w = (_fp8(o) for o in root.operands)
    if x is None or w is None:
        return None
    sx = per_tensor(x.scale) if x.scale is not None else None
    if x.scale is not None and sx is None:
        return None
    found = weight_scale(w.scale)
    if found is None:
        return None
    sw, sw_dim = found
    return Operands(x, w, sx, None, sw, sw_dim)


def _fp8_dot(rw: Rewriter, m: Match) -> Instruction | None:
    dot = m.root
    ops = _operands(dot)
    if ops is None:
        return None
    a = dot.attrs
    rb, rc = list(a["rhs_batch_dims"]), list(a["rhs_contracting_dims"])
    nb, nlf = len(rb), ops.x.q.shape.rank - len(rb) - len(a["lhs_contracting_dims"])
    rf = [d for d in range(ops.w.q.shape.rank) if d not in rb + rc]
    sw_out = None
    if ops.sw_dim is not None:
        if ops.sw_dim in rc:
            return None  # a scale along the contracted dim cannot leave the sum
        sw_out = rb.index(ops.sw_dim) if ops.sw_dim in rb else nb + nlf + rf.index(ops.sw_dim)
    acc = rw.op("dot", [ops.x.q, ops.w.q], Shape("f32", tuple(dot.shape.dims)), **a)
    return scale_epilogue(rw, dot, acc, ops, None, sw_out)


def _fp8_convolution(rw: Rewriter, m: Match) -> Instruction | None:
    conv = m.root
    ops = _operands(conv)
    if ops is None or conv.attrs["feature_group_count"] != 1 or conv.attrs.get("batch_group_count", 1) != 1:
        return None
    _, rhs, out = conv_dim_labels(conv.attrs["dim_labels"])
    sw_out = None
    if ops.sw_dim is not None:
        if ops.sw_dim != rhs.index("o"):
            return None
        sw_out = out.index("f")
    acc = rw.op("convolution", [ops.x.q, ops.w.q], Shape("f32", tuple(conv.shape.dims)), **conv.attrs)
    return scale_epilogue(rw, conv, acc, ops, None, sw_out)


class Fp8Contraction(RewritePass):
    def __init__(self) -> None:
        super().__init__("fp8-contraction", [
            Rule("fp8-dot", op("dot", var("x"), var("w")), _fp8_dot),
            Rule("fp8-convolution", op("convolution", var("x"), var("w")), _fp8_convolution),
        ])
