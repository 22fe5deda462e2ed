"""Dynamically quantized contractions (onnxruntime's ``quantize_dynamic``: DynamicQuantizeLinear ->
MatMulInteger -> Mul by a_scale * b_scale): the scale product into the integer dot's epilogue.

The dequantizing Mul multiplies the s32 result by ``a_scale * b_scale``: a run-time scalar (a_scale comes
from the activation's min and max) times a per-column weight scale, computed as a vector and broadcast to
the dot's result. Fusion takes only elementwise ops at the dot's result dims into its epilogue, so the vector
product would end the dot's kernel there (and the bias, the GELU or the LayerNorm after it would be a kernel
of their own). SinkDynamicScale rewrites

    broadcast(multiply(broadcast(s), v))  ->  multiply(broadcast(s), broadcast(v))

for a rank-0 s computed at run time (a constant scale product is folded at compile time and never reaches
here), so the whole dequantization is elementwise at the result's dims and joins the dot's epilogue. Each
product is rounded once, of the same two f32 values, so the result is the same bits.

The quantize itself (scale and zero point from the min and max, round half to even, saturate to u8) is
computed where the dot loads its A tiles, and the min and max in a first pass over the activation of the
dot's own kernel: mlcc/hlo/passes/a_prologue.py's quantized_rows_chain.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, op, scalar_value, var


def _runtime_scalar_broadcast(inst: Instruction, module) -> Instruction | None:
    """s when inst is broadcast(s) of a rank-0 s that is not a compile-time constant."""
    if inst.opcode != "broadcast" or inst.operands[0].shape.rank != 0:
        return None
    s = inst.operands[0]
    return None if s.opcode == "constant" or scalar_value(s, module) is not None else s


def _sink_scale(rw: Rewriter, m: Match) -> Instruction | None:
    outer, product = m.root, m.product
    if outer.shape.dtype != "f32" or product.shape.rank != 1 or len(outer.attrs["dimensions"]) != 1:
        return None
    for a, v in (product.operands, product.operands[::-1]):
        s = _runtime_scalar_broadcast(a, rw.module)
        if s is None or v.shape.rank != 1:
            continue
        dims = tuple(outer.shape.dims)
        spread_v = rw.op("broadcast", [v], Shape(v.shape.dtype, dims), dimensions=tuple(outer.attrs["dimensions"]))
        spread_s = rw.op("broadcast", [s], Shape(s.shape.dtype, dims), dimensions=())
        return rw.op("multiply", [spread_s, spread_v], Shape(outer.shape.dtype, dims))
    return None


class SinkDynamicScale(RewritePass):
    def __init__(self) -> None:
        super().__init__("sink-dynamic-scale", [
            Rule("sink-dynamic-scale", op("broadcast", op("multiply", var("a"), var("b"), name="product")),
                 _sink_scale),
        ])
