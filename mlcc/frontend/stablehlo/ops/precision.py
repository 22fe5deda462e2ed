"""reduce_precision: a float rounded to fewer exponent and mantissa bits, in its own type, by integer arithmetic on
its bits (round to nearest even on the mantissa, then overflow to infinity and underflow to signed zero), as XLA
expands it; NaN stays NaN."""

from __future__ import annotations

from mlcc.frontend.stablehlo.importer import Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.ir import Instruction

# float type -> (unsigned type of its bits, exponent bits, mantissa bits)
LAYOUT = {"f16": ("u16", 5, 10), "bf16": ("u16", 8, 7), "f32": ("u32", 8, 23), "f64": ("u64", 11, 52)}


@stablehlo_op("stablehlo.reduce_precision")
def import_reduce_precision(cx: Context, op: Op, args: list[Instruction]) -> Results:
    (x,) = args
    if x.shape.dtype not in LAYOUT:
        raise cx.error(op, f"reduce_precision of {x.shape.dtype} (a float type is required)")
    unsigned, exp_bits, man_bits = LAYOUT[x.shape.dtype]
    e, m = int(op.attrs.get("exponent_bits", exp_bits)), int(op.attrs.get("mantissa_bits", man_bits))
    if e < 1 or m < 0:
        raise cx.error(op, f"exponent_bits {e} and mantissa_bits {m} (at least 1 and 0)")
    dims = tuple(x.shape.dims)

    def const(v: int) -> Instruction:
        return cx.b.splat(v, unsigned, dims)

    bits = cx.b.op("bitcast-convert", [x], x.shape.with_dtype(unsigned))
    if m < man_bits:
        shift = man_bits - m
        last_bit = 1 << shift
        last = cx.b.op("shift-right-logical", [cx.b.op("and", [bits, const(last_bit)]), const(shift)])
        bias = cx.b.op("add", [last, const((last_bit >> 1) - 1)])
        width = {"u16": 16, "u32": 32, "u64": 64}[unsigned]
        keep = ((1 << width) - 1) ^ (last_bit - 1)
        bits = cx.b.op("and", [cx.b.op("add", [bits, bias]), const(keep)])
    if e < exp_bits:
        width = {"u16": 16, "u32": 32, "u64": 64}[unsigned]
        sign_mask = 1 << (width - 1)
        exp_mask = ((1 << exp_bits) - 1) << man_bits
        bias = (1 << (exp_bits - 1)) - 1
        reduced_bias = (1 << (e - 1)) - 1
        exponent = cx.b.op("and", [bits, const(exp_mask)])
        overflows = cx.b.op("compare", [exponent, const((bias + reduced_bias) << man_bits)], direction="GT")
        underflows = cx.b.op("compare", [exponent, const((bias - reduced_bias) << man_bits)], direction="LE")
        signed_zero = cx.b.op("and", [bits, const(sign_mask)])
        signed_inf = cx.b.op("or", [signed_zero, const(exp_mask)])
        bits = cx.b.op("select", [overflows, signed_inf, cx.b.op("select", [underflows, signed_zero, bits])])
    if m >= man_bits and e >= exp_bits:
        return x
    reduced = cx.b.op("bitcast-convert", [bits], x.shape)
    is_nan = cx.b.op("compare", [x, x], direction="NE")
    return cx.b.op("select", [is_nan, x, reduced])
