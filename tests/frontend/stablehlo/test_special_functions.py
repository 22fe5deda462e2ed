"""CHLO special functions against Python's math module (and references written here from their definitions):
erfc in f16/bf16 to the ulp, lgamma, digamma, erf_inv and next_after; through the evaluator and the kernels."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from shlo_programs import assert_same, evaluate_text, module_text, run_kernels, tensor


def unary(op: str, x: np.ndarray) -> str:
    t = tensor(x.shape, x.dtype)
    return module_text([x], [(x.shape, x.dtype)], f"    %0 = {op} %arg0 : {t} -> {t}\n    return %0 : {t}")


def correctly_rounded(fn, x: np.ndarray) -> np.ndarray:
    return np.array([fn(float(v)) for v in x.astype(np.float64)]).astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_erfc_in_half_types_is_correctly_rounded(tmp_path, dtype):
    """1 - erf(x) in the half type was many ulps off (0 where erfc(x) < 2^-11 in f16); now every result is
    math.erfc rounded once."""
    x = np.concatenate([np.linspace(-3, 1, 41), np.linspace(1, 9, 81), [0.0, 1e-3, -1e-3, 0.7, -0.7]])
    x = x.astype(dtype)
    if dtype is np.float16:
        x = x[x.astype(np.float64) < 5.5]  # erfc underflows f16 beyond
    want = correctly_rounded(math.erfc, x)
    text = unary("chlo.erfc", x)
    assert_same(evaluate_text(text, [x])[0], want, "evaluator")
    assert_same(run_kernels(text, [x], tmp_path)[0], want, "kernels")


def test_erfc_f32_keeps_relative_precision_in_the_tail(tmp_path):
    """1 - erf(x) in f32 gave 0 from x = ~3.9 (erfc(4) = 1.5e-8) and lost relative precision from ~1; now
    every f32 result is math.erfc correctly rounded (up to one ulp for a double rounding), out to where erfc
    underflows f32 (x = 10.05), and for negative x (2 - erfc(-x))."""
    x = np.concatenate([np.linspace(-4, 0.5, 19), np.linspace(0.5, 10.5, 201), [2.5, np.nextafter(2.5, 0)]])
    x = x.astype(np.float32)
    want = correctly_rounded(math.erfc, x)
    text = unary("chlo.erfc", x)
    for what, got in (("evaluator", evaluate_text(text, [x])[0]), ("kernels", run_kernels(text, [x], tmp_path)[0])):
        assert got.dtype == np.float32
        ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
        assert ulps.max() <= 1, f"{what}: x = {x[ulps.argmax()]}: {got[ulps.argmax()]} != {want[ulps.argmax()]}"


GAMMA_ARGS = np.array([0.5, 1.0, 2.0, 3.0, 1e-3, 0.1, 1.5, 2.5, 7.25, 30.0, 100.5, -0.25, -1.5, -2.75, -4.1, 12.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lgamma(dtype):
    x = GAMMA_ARGS.astype(dtype)
    (got,) = evaluate_text(unary("chlo.lgamma", x), [x])
    want = np.array([math.lgamma(v) for v in x.astype(np.float64)])
    rtol, atol = (2e-6, 2e-6) if dtype == np.float32 else (1e-12, 1e-13)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


def digamma_reference(x: float) -> float:
    """psi by reflection, recurrence up to 10 and the asymptotic series."""
    if x <= 0 and x == math.floor(x):
        return math.nan
    if x < 0.5:
        return digamma_reference(1 - x) - math.pi / math.tan(math.pi * x)
    shift = 0.0
    while x < 10:
        shift -= 1 / x
        x += 1
    inv = 1 / (x * x)
    series = inv * (1 / 12 - inv * (1 / 120 - inv * (1 / 252 - inv * (1 / 240 - inv * 1 / 132))))
    return shift + math.log(x) - 0.5 / x - series


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_digamma(dtype):
    x = np.concatenate([GAMMA_ARGS, [0.0, -2.0]]).astype(dtype)
    (got,) = evaluate_text(unary("chlo.digamma", x), [x])
    want = np.array([digamma_reference(v) for v in x.astype(np.float64)])
    rtol, atol = (1e-5, 1e-5) if dtype == np.float32 else (1e-11, 1e-11)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


def erf_inv_reference(y: float) -> float:
    if abs(y) == 1 or y == 0:
        return math.copysign(math.inf, y) if y else y
    lo, hi = -7.0, 7.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.erf(mid) < y else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_inv(dtype):
    y = np.array([0.0, 0.1, -0.3, 0.5, 0.9, -0.99, 0.999, 0.99999, 1.0, -1.0, 1e-5, 0.75], dtype)
    (got,) = evaluate_text(unary("chlo.erf_inv", y), [y])
    want = np.array([erf_inv_reference(v) for v in y.astype(np.float64)])
    rtol = 3e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_next_after_is_numpys(tmp_path, dtype):
    x = np.array([0.0, -0.0, 1.0, -1.0, 3.5, np.inf, 2.0, np.nan, 1.0, -3.0], dtype)
    y = np.array([1.0, -1.0, 2.0, -2.0, 3.5, 0.0, -np.inf, 1.0, np.nan, 0.0], dtype)
    t = tensor(x.shape, x.dtype)
    text = module_text([x, y], [(x.shape, x.dtype)],
                       f"    %0 = chlo.next_after %arg0, %arg1 : {t}, {t} -> {t}\n    return %0 : {t}")
    want = np.nextafter(x, y)
    assert_same(evaluate_text(text, [x, y])[0], want)
    if dtype == np.float32:
        assert_same(run_kernels(text, [x, y], tmp_path)[0], want, "kernels")


def i1e_reference(x: float) -> float:
    """exp(-|x|) I1(x) from I1's power series (all terms positive: no cancellation)."""
    half, total, term, k = abs(x) / 2, 0.0, abs(x) / 2, 0
    while term > 1e-18 * total or k < 5:
        total += term
        k += 1
        term *= half * half / (k * (k + 1))
    return math.copysign(total * math.exp(-abs(x)), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bessel_i1e(dtype):
    x = np.array([0.0, 1e-3, 0.5, -1.0, 2.5, -7.0, 15.0, 29.9, 30.1, 45.0, -60.0, 99.0, 101.0, 150.0], dtype)
    t = tensor(x.shape, x.dtype)
    text = module_text([x], [(x.shape, x.dtype)], f"    %0 = chlo.bessel_i1e %arg0 : {t} -> {t}\n    return %0 : {t}")
    (got,) = evaluate_text(text, [x])
    want = np.array([i1e_reference(v) for v in x.astype(np.float64)])
    rtol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=1e-300)
