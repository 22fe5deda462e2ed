"""Distance in units in the last place between half-precision arrays, on their integer bit patterns.

Each 16-bit pattern maps to a point on one integer line (+0 and -0 both at 0, negatives below), so
adjacent representable values are 1 apart, across the subnormals and across zero. NaNs must agree in
place: a NaN against a NaN is 0 ulp, a NaN against a number is an infinite distance.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

HALF = {"f16": np.float16, "float16": np.float16, "bf16": ml_dtypes.bfloat16, "bfloat16": ml_dtypes.bfloat16}


def _ordinal(a: np.ndarray) -> np.ndarray:
    bits = a.view(np.uint16).astype(np.int64)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def ulp_distance(got: np.ndarray, want: np.ndarray, dtype: str) -> np.ndarray:
    """|got - want| in ulps of `dtype` (f16 or bf16); both are rounded to it first (want may be f32)."""
    t = HALF[dtype]
    g = np.asarray(got).astype(t)
    w = np.asarray(want).astype(t)
    d = np.abs(_ordinal(g) - _ordinal(w)).astype(np.float64)
    gn, wn = np.isnan(g.astype(np.float32)), np.isnan(w.astype(np.float32))
    d = np.where(gn | wn, np.where(gn & wn, 0.0, np.inf), d)
    return d


def is_subnormal(a: np.ndarray, dtype: str) -> np.ndarray:
    """Nonzero values below the type's smallest normal."""
    t = HALF[dtype]
    x = np.abs(np.asarray(a).astype(t).astype(np.float64))
    return (x > 0) & (x < float(ml_dtypes.finfo(t).smallest_normal))


# The JAX conformance set's per-program allowances for f16/bf16 results; every other half result must
# be 0 ulp from JAX's.
# None of the transcendentals needs a 1-ulp allowance: each result is computed in f32 (or f64) and rounded
# once, as XLA does, and lands on JAX's value. The one exception is underflow: XLA's CPU runtime runs with
# denormals flushed to zero, so where erfc's bf16 result is subnormal (erfc(9.3125) = 1.31e-39) JAX
# returns 0; mlcc keeps the correctly rounded subnormal (checked against math.erfc in
# tests/frontend/stablehlo/test_special_functions.py).
FLUSHED_SUBNORMALS = {"chlo_erfc_half"}


def assert_half_exact(got: np.ndarray, want: np.ndarray, dtype: str, program: str, what: str) -> None:
    """0 ulp from the reference, but for a subnormal the reference flushed to zero where allowed."""
    dist = ulp_distance(got, want, dtype)
    if program in FLUSHED_SUBNORMALS:
        flushed = (np.asarray(want, np.float64) == 0) & is_subnormal(got, dtype)
        dist = np.where(flushed, 0.0, dist)
    bad = np.flatnonzero(dist > 0)
    assert bad.size == 0, (f"{what}: {bad.size} {dtype} results off JAX's, up to {dist.max()} ulp; first at "
                           f"{bad[0]}: {np.ravel(got)[bad[0]]!r} vs {np.ravel(want)[bad[0]]!r}")
