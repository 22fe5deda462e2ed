"""Conversions to and from the quantized storage types (fp8, fp4, 4- and 2-bit ints), through ml_dtypes.

The IR's ``convert`` of these types (mlcc/hlo/ir.py STORAGE_DTYPES) is ONNX's non-saturating Cast, which is
what ml_dtypes computes and what ONNX's reference implementation calls:

- to a narrow float: round to nearest, ties to even; a magnitude past the largest finite value becomes
  infinity where the type has one (f8e5m2) and NaN where it has not (f8e4m3fn, the fnuz forms), except
  f4e2m1fn, which has neither and saturates to +-6; NaN stays NaN; -0 is +0 in the fnuz types (their one NaN
  is the bit pattern of -0). f8e8m0fnu (unsigned powers of two) rounds a float32's exponent up when its
  significand is at least 1.5 (its top fraction bit), and is NaN for zero, negative values, NaN and infinity.
  Every source converts through float32 first (ONNX's Cast does; the kernels compute in float32).
- to a 4- or 2-bit integer: floats truncate toward zero (NaN and infinities give 0), then the value wraps
  modulo 2**bits, as an integer does in any narrowing integer conversion.
- from them: exact (every value of every narrow type is a float32, and a narrow int an int8).

Saturation (ONNX's Cast ``saturate=1``, QuantizeLinear) is a clamp before the convert, written by the
importer; the e8m0 rounding modes "up" and "down" are integer arithmetic on the float32's bits, likewise.
"""

from __future__ import annotations

import numpy as np

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import DTYPE_BITS, NARROW_FLOAT_DTYPES, NARROW_INT_DTYPES, STORAGE_DTYPES

_F32 = np.dtype(np.float32)
_STORAGE = {numpy_dtype(t): t for t in STORAGE_DTYPES}


def is_narrow(dtype: np.dtype) -> bool:
    return dtype in _STORAGE


def widen(x: np.ndarray) -> np.ndarray:
    """A narrow value as the wide type that holds it exactly: float32 for the floats, int8/uint8 for the ints."""
    name = _STORAGE[x.dtype]
    if name in NARROW_FLOAT_DTYPES:
        return x.astype(_F32)
    return x.astype(np.int8 if name[0] == "s" else np.uint8)


def convert(x: np.ndarray, dtype: np.dtype, wide_convert) -> np.ndarray:
    """x converted to ``dtype``, where x's dtype or ``dtype`` is narrow; ``wide_convert`` converts between
    the wide types (the evaluator's rule)."""
    if is_narrow(x.dtype):
        x = widen(x)
        if not is_narrow(dtype):
            return wide_convert(x, dtype)
    name = _STORAGE[dtype]
    if name in NARROW_INT_DTYPES:
        if x.dtype.kind == "b":
            x = x.astype(np.int8)
        if x.dtype.kind == "f" or x.dtype.kind == "V":  # bf16 is a V kind in numpy
            t = np.trunc(x.astype(np.float64))
            x = np.where(np.isfinite(t), np.fmod(t, 2.0 ** 8), 0.0).astype(np.int64)
        bits = DTYPE_BITS[name]
        low = (x.astype(np.int64) & ((1 << bits) - 1))
        if name[0] == "s":
            low = np.where(low >= 1 << (bits - 1), low - (1 << bits), low)
        return low.astype(dtype)
    return x.astype(np.float64).astype(_F32).astype(dtype)
