"""Converts: to the same type dropped; a chain x -> a -> b whose first step is exact becomes x -> b.

When every value of x's type is exactly representable in a, converting to a and then
to b gives what converting x to b directly gives (each conversion depends only on
the value), so the intermediate type goes.
"""

from __future__ import annotations

from mlcc.hlo.ir import DTYPE_BYTES, Instruction, is_float, is_int
from mlcc.hlo.passes.pattern import Match, Rewriter, Rule, op, var

MANTISSA_BITS = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}
EXPONENT_MAX = {"f16": 15, "bf16": 127, "f32": 127, "f64": 1023}


def _int_bits(dtype: str) -> int:
    """Bits of magnitude an integer type needs (sign excluded)."""
    bits = DTYPE_BYTES[dtype] * 8
    return bits - 1 if dtype.startswith("s") else bits


def exact(src: str, dst: str) -> bool:
    """Whether every value of src converts to dst exactly."""
    if src == dst or (src == "pred" and dst != "f8e8m0fnu"):  # e8m0 has no 0 (its powers of two are positive)
        return True
    if dst == "pred":
        return False
    if is_int(src) and is_int(dst):
        if src.startswith("s") and dst.startswith("u"):
            return False
        return _int_bits(src) <= _int_bits(dst)
    if is_int(src) and is_float(dst):
        return _int_bits(src) <= MANTISSA_BITS[dst]
    if is_float(src) and is_float(dst):
        return MANTISSA_BITS[src] <= MANTISSA_BITS[dst] and EXPONENT_MAX[src] <= EXPONENT_MAX[dst]
    return False


def _noop(rw: Rewriter, m: Match) -> Instruction | None:
    return m.x if m.x.shape.dtype == m.root.shape.dtype else None


def _chain(rw: Rewriter, m: Match) -> Instruction | None:
    x, mid, out = m.x.shape.dtype, m.inner.shape.dtype, m.root.shape.dtype
    if not exact(x, mid):
        return None
    if x == out:
        return m.x
    return rw.op("convert", [m.x], m.root.shape)


RULES = [
    Rule("convert-noop", op("convert", var("x")), _noop),
    Rule("convert-convert", op("convert", op("convert", var("x"), name="inner")), _chain),
]
