"""The ulp-distance helper the exact half-precision checks rely on, against ml_dtypes' own spacing."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from half_ulp import assert_half_exact, is_subnormal, ulp_distance


@pytest.mark.parametrize("dtype, t", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_ulp_distance_counts_representable_steps(dtype, t):
    info = ml_dtypes.finfo(t)
    one = np.array([1.0], t)
    up = one.astype(np.float64) + float(info.eps)  # next value above 1
    assert ulp_distance(np.array(up, t), one, dtype)[0] == 1
    assert ulp_distance(one, one, dtype)[0] == 0
    tiny = np.array([float(info.smallest_subnormal)], t)
    # across zero: -tiny, -0, +0, +tiny are 2 steps from -tiny to +tiny
    assert ulp_distance(-tiny, tiny, dtype)[0] == 2
    assert ulp_distance(np.array([-0.0], t), np.array([0.0], t), dtype)[0] == 0
    big = np.array([float(info.max)], t)
    assert ulp_distance(big, np.array([np.inf], t), dtype)[0] == 1
    nan = np.array([np.nan], t)
    assert ulp_distance(nan, nan, dtype)[0] == 0
    assert ulp_distance(nan, one, dtype)[0] == np.inf
    # a 1-ulp step from every finite positive value, counted over a whole binade
    x = np.arange(0x3C00 if dtype == "f16" else 0x3F80, 0x3F00 if dtype == "f16" else 0x4000, dtype=np.uint16).view(t)
    assert (ulp_distance(x[1:], x[:-1], dtype) == 1).all()
    assert is_subnormal(tiny, dtype)[0] and not is_subnormal(one, dtype)[0]


def test_half_exact_rejects_one_ulp_and_allows_only_listed_flushes():
    t = ml_dtypes.bfloat16
    want = np.array([1.0, 0.0], np.float32)
    assert_half_exact(want.astype(t), want, "bf16", "any", "same")
    with pytest.raises(AssertionError, match="1 bf16 results off JAX's, up to 1.0 ulp"):
        assert_half_exact(np.array([1.0078125, 0.0], t), want, "bf16", "any", "one ulp")
    sub = np.array([1.0, 1.2857e-39], np.float32).astype(t)  # a subnormal where JAX flushed to 0
    assert_half_exact(sub, want, "bf16", "chlo_erfc_half", "flushed")
    with pytest.raises(AssertionError):
        assert_half_exact(sub, want, "bf16", "unary_bf16_f16", "not allowed here")
