"""Kernel code of conversions to and from the quantized storage types (fp8, fp4, 4- and 2-bit ints).

A kernel holds a value of a storage type as its bit pattern in a uint8 (the low bits; loads and stores move
the byte as it is, mlcc/emit/codegen/triton_types.py), and converts it with integer arithmetic on the bits:
exact, rounding to nearest even, with the NaN, infinity and -0 rules of the evaluator
(mlcc/hlo/evaluator/narrow.py). Nothing here relies on Triton's own fp8 casts, so a kernel computes the same
bits under Triton's interpreter (TRITON_INTERPRET=1, which has no fp8 arithmetic of its own) as on any GPU.

``convert_lines(o, x, src, dst, lo, hi, wide)`` writes the statements; ``wide(o, x, src, dst, lo, hi)`` writes
a conversion between wide types (the loop_ops.py.jinja ``convert`` macro), used to reach float32 or int32
and back. ``bits(value, dtype)`` is a constant's bit pattern, as a kernel holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import DTYPE_BITS, NARROW_FLOAT_DTYPES, NARROW_INT_DTYPES, STORAGE_DTYPES


@dataclass(frozen=True)
class FloatFormat:
    """A narrow float: exponent and mantissa bits, exponent bias, whether it has a sign bit and infinities,
    the encoding of NaN (None where it has none), the largest finite field (bits without the sign), and
    whether it is fnuz (no -0: the sign bit alone is NaN)."""
    ebits: int
    mbits: int
    bias: int
    signed: bool
    has_inf: bool
    nan: int | None
    max_field: int
    fnuz: bool


FORMATS = {
    "f8e4m3fn": FloatFormat(4, 3, 7, True, False, 0x7F, 0x7E, False),
    "f8e4m3fnuz": FloatFormat(4, 3, 8, True, False, 0x80, 0x7F, True),
    "f8e5m2": FloatFormat(5, 2, 15, True, True, 0x7E, 0x7B, False),
    "f8e5m2fnuz": FloatFormat(5, 2, 16, True, False, 0x80, 0x7F, True),
    "f4e2m1fn": FloatFormat(2, 1, 1, True, False, None, 0x7, False),
    "f8e8m0fnu": FloatFormat(8, 0, 127, False, False, 0xFF, 0xFE, False),
}

Wide = Callable[[str, str, str, str, int, int], str]


def is_storage(dtype: str) -> bool:
    return dtype in STORAGE_DTYPES


def bits(value: Any, dtype: str) -> Any:
    """A constant as a kernel holds it: a storage type's value as its bit pattern (an int), others as they are."""
    if dtype not in STORAGE_DTYPES:
        return value
    return int(np.asarray(value).astype(np.float64).astype(np.float32).astype(numpy_dtype(dtype))
               .reshape(1).view(np.uint8)[0]) if dtype in NARROW_FLOAT_DTYPES else \
        int(np.asarray(int(value)).astype(numpy_dtype(dtype)).reshape(1).view(np.uint8)[0])


def decode_float(o: str, x: str, dtype: str) -> list[str]:
    """``o`` = the float32 value of the bits ``x`` of a narrow float."""
    f = FORMATS[dtype]
    e_mask, m_mask = (1 << f.ebits) - 1, (1 << f.mbits) - 1
    lines = [f"{o}_b = {x}.to(tl.int32) & {(1 << (f.ebits + f.mbits + f.signed)) - 1}",
             f"{o}_e = ({o}_b >> {f.mbits}) & {e_mask}",
             f"{o}_m = {o}_b & {m_mask}"]
    if dtype == "f8e8m0fnu":  # 2**(e - 127): e = 0 is 2**-127, a float32 subnormal
        lines.append(f"{o}_u = tl.where({o}_e == 0, 0x400000, {o}_e << 23)")
        lines.append(f"{o} = tl.where({o}_e == 255, float(\"nan\"), {o}_u.to(tl.uint32).to(tl.float32, bitcast=True))")
        return lines
    # normal: the float32 with the exponent rebiased and the mantissa shifted up; subnormal: m * 2**(1-bias-M)
    rebias = 127 - f.bias
    lines += [f"{o}_n = ((({o}_e + {rebias}) << 23) | ({o}_m << {23 - f.mbits})).to(tl.uint32)",
              f"{o}_a = tl.where({o}_e == 0, {o}_m.to(tl.float32) * {2.0 ** (1 - f.bias - f.mbits)!r}, "
              f"{o}_n.to(tl.float32, bitcast=True))"]
    if f.has_inf:
        lines.append(f"{o}_a = tl.where({o}_e == {e_mask}, tl.where({o}_m == 0, float(\"inf\"), float(\"nan\")), {o}_a)")
    elif f.nan is not None and not f.fnuz:
        lines.append(f"{o}_a = tl.where(({o}_b & 0x7F) == {f.nan}, float(\"nan\"), {o}_a)")
    sign = 1 << (f.ebits + f.mbits)
    lines.append(f"{o} = tl.where(({o}_b & {sign}) != 0, -{o}_a, {o}_a)")
    if f.fnuz:
        lines.append(f"{o} = tl.where({o}_b == {f.nan}, float(\"nan\"), {o})")
    return lines


def encode_float(o: str, x: str, dtype: str) -> list[str]:
    """``o`` = the bits (uint8) of float32 ``x`` as a narrow float: round to nearest even; past the largest
    finite value infinity (f8e5m2), saturation (f4e2m1fn) or NaN (the rest); NaN is NaN; no -0 in fnuz."""
    f = FORMATS[dtype]
    lines = [f"{o}_u = {x}.to(tl.uint32, bitcast=True)",
             f"{o}_s = ({o}_u >> 31).to(tl.int32)",
             f"{o}_a = ({o}_u & 0x7FFFFFFF).to(tl.int32)",
             f"{o}_nan = {o}_a > 0x7F800000"]
    if dtype == "f8e8m0fnu":  # ml_dtypes: the exponent, plus one when the top fraction bit is set (for a
        # float32 subnormal: 1 above 2**-127, else 0)
        lines += [f"{o}_e = tl.where(({o}_a >> 23) == 0, ({o}_a > 0x400000).to(tl.int32), "
                  f"({o}_a >> 23) + (({o}_a >> 22) & 1))",
                  f"{o}_e = tl.where(({o}_s != 0) | ({o}_a == 0) | ({o}_a >= 0x7F800000) | ({o}_e > 254), 255, {o}_e)",
                  f"{o} = {o}_e.to(tl.uint8)"]
        return lines
    shift = 23 - f.mbits
    rebias = (127 - f.bias) << f.mbits
    lines += [
        # normal in the target: round the exponent|mantissa field to nearest even, then rebias
        f"{o}_c = tl.minimum({o}_a, 0x7F800000)",
        f"{o}_r = (({o}_c + {(1 << (shift - 1)) - 1} + (({o}_c >> {shift}) & 1)) >> {shift}) - {rebias}",
        # subnormal (or zero) in the target: the significand shifted down by k, rounded to nearest even
        f"{o}_ex = tl.maximum({o}_a >> 23, 1)",
        f"{o}_sig = ({o}_a & 0x7FFFFF) | tl.where(({o}_a >> 23) > 0, 0x800000, 0)",
        f"{o}_k = tl.minimum(tl.maximum({23 + 127 + 1 - f.bias - f.mbits} - {o}_ex, 1), 31)",
        f"{o}_q = ({o}_sig + (1 << ({o}_k - 1)) - 1 + (({o}_sig >> {o}_k) & 1)) >> {o}_k",
        f"{o}_f = tl.where(({o}_a >> 23) - 127 + {f.bias} >= 1, {o}_r, {o}_q)",
    ]
    over = ({"f8e5m2": 0x7C, "f4e2m1fn": f.max_field}.get(dtype, f.nan if not f.fnuz else -1))
    if dtype in ("f8e4m3fnuz", "f8e5m2fnuz"):
        lines.append(f"{o}_f = tl.where({o}_f > {f.max_field}, -1, {o}_f)")  # -1: NaN, below
    else:
        lines.append(f"{o}_f = tl.where({o}_f > {f.max_field}, {over}, {o}_f)")
    sign = 1 << (f.ebits + f.mbits)
    if f.fnuz:
        lines += [f"{o}_f = tl.where({o}_nan | ({o}_f < 0), {f.nan}, tl.where({o}_f == 0, 0, {o}_f | ({o}_s * {sign})))"]
    elif f.nan is None:  # f4e2m1fn has no NaN: ml_dtypes gives a NaN the zero of the opposite sign
        lines += [f"{o}_f = tl.where({o}_nan, (1 - {o}_s) * {sign}, {o}_f | ({o}_s * {sign}))"]
    else:
        lines += [f"{o}_f = tl.where({o}_nan, {f.nan}, {o}_f) | ({o}_s * {sign})"]
    lines.append(f"{o} = {o}_f.to(tl.uint8)")
    return lines


def round_trip(o: str, x: str, dtype: str) -> str:
    """The statements of ``o`` = float32 ``x`` converted to the narrow float dtype and back (a fake-quant's
    rounding: the attention kernel's fp8 score_quant and prob_quant steps)."""
    return "\n".join(encode_float(f"{o}_bits", x, dtype) + decode_float(o, f"{o}_bits", dtype))


def convert_lines(o: str, x: str, src: str, dst: str, lo: int, hi: int, wide: Wide) -> str:
    """The statements of ``o = convert x: src to dst`` where src or dst is a storage type."""
    lines: list[str] = []
    if src in NARROW_FLOAT_DTYPES:
        lines += decode_float(f"{o}_w", x, src)
        x, src = f"{o}_w", "f32"
    elif src in NARROW_INT_DTYPES:
        bits = DTYPE_BITS[src]
        lines.append(f"{o}_w = {x}.to(tl.int32) & {(1 << bits) - 1}")
        if src[0] == "s":
            lines.append(f"{o}_w = tl.where({o}_w >= {1 << (bits - 1)}, {o}_w - {1 << bits}, {o}_w)")
        x, src = f"{o}_w", "s32"
    if dst in NARROW_FLOAT_DTYPES:
        if src != "f32":
            lines.append(str(wide(f"{o}_v", x, src, "f32", 0, 0)))
            x = f"{o}_v"
        lines += encode_float(o, x, dst)
    elif dst in NARROW_INT_DTYPES:
        mask = (1 << DTYPE_BITS[dst]) - 1
        if src in ("f16", "bf16"):
            lines.append(str(wide(f"{o}_v", x, src, "f32", 0, 0)))
            x, src = f"{o}_v", "f32"
        if src in ("f32", "f64"):  # truncate toward zero, NaN and infinities to 0, keep the low bits
            lines += [f"{o}_t = tl.where(tl.abs({x}) < float(\"inf\"), {x}, 0.0) % 256.0",
                      f"{o} = ({o}_t.to(tl.int32) & {mask}).to(tl.uint8)"]
        elif src == "pred":
            lines.append(f"{o} = {x}.to(tl.uint8)")
        else:
            lines.append(f"{o} = ({x} & {mask}).to(tl.uint8)")
    else:
        lines.append(str(wide(o, x, src, dst, lo, hi)))
    return "\n".join(lines)
