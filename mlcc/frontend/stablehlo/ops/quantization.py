"""uniform_quantize and uniform_dequantize (the spec's sections of those names), on top of the dequantize and
quantize of mlcc/frontend/stablehlo/quantized.py."""

from __future__ import annotations

from mlcc.frontend.stablehlo.importer import Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.quantized import dequantize, is_quantized, quantize
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.ir import Instruction


@stablehlo_op("stablehlo.uniform_quantize")
def import_uniform_quantize(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """quantize(operand) for a float operand; quantize(dequantize(operand)) for a quantized one (requantize)."""
    (x,) = args
    src, dst = op.operands[0].type, op.results[0].type
    if not is_quantized(dst):
        raise cx.error(op, f"the result {dst} is not a quantized tensor")
    if is_quantized(src):
        if src.quant.expressed != dst.quant.expressed:
            raise cx.error(op, f"requantizing {src} to {dst} changes the expressed type")
        if src.quant.same_values(dst.quant) and src.quant.dim == dst.quant.dim:
            return x
        x = dequantize(cx.b, x, src)
    elif cx.shape(op, src).dtype != dst.quant.expressed:
        raise cx.error(op, f"the operand {src} is not of the result's expressed type {dst.quant.expressed}")
    return quantize(cx.b, x, dst)


@stablehlo_op("stablehlo.uniform_dequantize")
def import_uniform_dequantize(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """dequantize(operand), in the operand's expressed type."""
    src, dst = op.operands[0].type, op.results[0].type
    if not is_quantized(src):
        raise cx.error(op, f"the operand {src} is not a quantized tensor")
    if is_quantized(dst) or cx.shape(op, dst).dtype != src.quant.expressed:
        raise cx.error(op, f"the result {dst} is not of the operand's expressed type {src.quant.expressed}")
    return dequantize(cx.b, args[0], src)
