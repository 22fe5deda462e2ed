"""stablehlo.triangular_solve in each of its forms (left/right side, lower/upper, transposed, unit diagonal,
batched) against numpy's general solver on the triangle the op reads."""

from __future__ import annotations

import numpy as np
import pytest
from shlo_programs import evaluate_text, module_text, run_kernels, tensor

rng = np.random.default_rng(3)


def solve_text(a, b, *, left, lower, unit, transpose):
    ta, tb = tensor(a.shape, a.dtype), tensor(b.shape, b.dtype)
    body = (f'    %0 = "stablehlo.triangular_solve"(%arg0, %arg1) <{{left_side = {str(left).lower()}, '
            f'lower = {str(lower).lower()}, transpose_a = #stablehlo<transpose {transpose}>, '
            f'unit_diagonal = {str(unit).lower()}}}> : ({ta}, {tb}) -> {tb}\n    return %0 : {tb}')
    return module_text([a, b], [(b.shape, b.dtype)], body)


def reference(a, b, *, left, lower, unit, transpose):
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t = t - np.diag(np.diagonal(t)) + np.eye(a.shape[-1]) if t.ndim == 2 else \
            t * (1 - np.eye(a.shape[-1])) + np.eye(a.shape[-1])
    if transpose != "NO_TRANSPOSE":
        t = np.swapaxes(t, -1, -2)
    t, b = t.astype(np.float64), b.astype(np.float64)
    if left:
        return np.linalg.solve(t, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


FORMS = [dict(left=left, lower=lower, unit=unit, transpose=transpose)
         for left in (True, False) for lower in (True, False) for unit in (False, True)
         for transpose in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT") if not (unit and transpose == "ADJOINT")]


def _inputs(form, batch=(), n=4, m=3, dtype=np.float32):
    a = (rng.uniform(-1, 1, batch + (n, n)) + 3 * np.eye(n)).astype(dtype)  # well conditioned
    b = rng.uniform(-2, 2, batch + ((n, m) if form["left"] else (m, n))).astype(dtype)
    return a, b


@pytest.mark.parametrize("form", FORMS, ids=lambda f: "-".join(f"{k}={v}" for k, v in f.items()))
def test_triangular_solve_form(form):
    a, b = _inputs(form)
    (got,) = evaluate_text(solve_text(a, b, **form), [a, b])
    np.testing.assert_allclose(got, reference(a, b, **form), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_triangular_solve_through_kernels(tmp_path, dtype):
    form = dict(left=False, lower=True, unit=False, transpose="TRANSPOSE")
    a, b = _inputs(form, batch=(2,), n=5, m=2, dtype=dtype)
    text = solve_text(a, b, **form)
    want = reference(a, b, **form)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(evaluate_text(text, [a, b])[0], want, rtol=tol, atol=tol)
    np.testing.assert_allclose(run_kernels(text, [a, b], tmp_path)[0], want, rtol=tol * 10, atol=tol * 10)
