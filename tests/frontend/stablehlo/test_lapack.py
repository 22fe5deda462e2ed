"""The LAPACK custom calls JAX lowers its linalg to on CPU (stablehlo.custom_call @lapack_<t><routine>_ffi),
each in a program of our own, against numpy: np.linalg (itself LAPACK: cholesky is potrf, qr's raw mode is
geqrf's packed output and tau) and loops written from the LAPACK documentation (getrf's partial pivoting)."""

from __future__ import annotations

import numpy as np
import pytest
from shlo_programs import run_kernels

from mlcc.frontend.stablehlo import StableHLOUnsupportedError, UnsupportedOpsError, import_stablehlo
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

rng = np.random.default_rng(11)
ELEMENT = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.complex64): "complex<f32>",
           np.dtype(np.complex128): "complex<f64>", np.dtype(np.int32): "i32"}
LETTER = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", np.dtype(np.complex64): "c",
          np.dtype(np.complex128): "z"}
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def tensor(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + ELEMENT[np.dtype(dtype)] + ">"


def custom_call(routine: str, args, results, config: str = "") -> str:
    """A program calling lapack_<t><routine>_ffi on its arguments and returning every result."""
    dtype = np.dtype(args[0].dtype)
    params = ", ".join(f"%arg{i}: {tensor(a.shape, a.dtype)}" for i, a in enumerate(args))
    types = [tensor(s, d) for s, d in results]
    names = ", ".join(f"%0#{i}" for i in range(len(results))) if len(results) > 1 else "%0"
    count = f":{len(results)}" if len(results) > 1 else ""
    ins = ", ".join(tensor(a.shape, a.dtype) for a in args)
    outs = types[0] if len(types) == 1 else f"({', '.join(types)})"
    return (f"module @m {{\n  func.func public @main({params}) -> ({', '.join(types)}) {{\n"
            f"    %0{count} = stablehlo.custom_call @lapack_{LETTER[dtype]}{routine}_ffi("
            f"{', '.join(f'%arg{i}' for i in range(len(args)))}) {{mhlo.backend_config = {{{config}}}, "
            f"mhlo.frontend_attributes = {{num_batch_dims = \"{args[0].ndim - 2}\"}}}} : ({ins}) -> {outs}\n"
            f"    return {names} : {', '.join(types)}\n  }}\n}}\n")


def run(text: str, args) -> list[np.ndarray]:
    module = import_stablehlo(text)
    verify_module(module)
    out = evaluate(module, {f"arg{i}": a for i, a in enumerate(args)})
    return [out[n] for n in module.output_names]


def tol(dtype) -> dict:
    single = np.dtype(dtype) in (np.float32, np.complex64)
    return {"rtol": 2e-5, "atol": 2e-5} if single else {"rtol": 1e-12, "atol": 1e-12}


def matrix(shape, dtype) -> np.ndarray:
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x.astype(dtype)


def hermitian_positive(shape, dtype) -> np.ndarray:
    x = matrix(shape, np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def char(c: str) -> int:
    return ord(c)


# ---------------------------------------------------------------- potrf
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_potrf_factors_one_triangle_and_leaves_the_other(dtype, uplo):
    a = hermitian_positive((2, 5, 5), dtype)
    mine = np.tril(np.ones((5, 5), bool)) if uplo == "L" else np.triu(np.ones((5, 5), bool))
    a = np.where(mine, a, matrix((2, 5, 5), dtype))  # LAPACK reads only its triangle: the other is junk
    text = custom_call("potrf", [a], [(a.shape, dtype), ((2,), np.int32)], f"uplo = {char(uplo)} : ui8")
    got, info = run(text, [a])
    full = np.where(mine, a, np.conj(np.swapaxes(a, -1, -2))).astype(np.complex128 if a.dtype.kind == "c"
                                                                       else np.float64)
    lower = np.linalg.cholesky(full)
    want = lower if uplo == "L" else np.conj(np.swapaxes(lower, -1, -2))
    np.testing.assert_allclose(got, np.where(mine, want, a), **tol(dtype))
    np.testing.assert_array_equal(got[:, ~mine], a[:, ~mine])
    np.testing.assert_array_equal(info, [0, 0])


def test_potrf_info_is_the_first_non_positive_pivot():
    a = np.stack([hermitian_positive((4, 4), np.float64), np.diag([4.0, 1.0, -1.0, 2.0]),
                  np.diag([np.nan, 1.0, 1.0, 1.0])])
    _, info = run(custom_call("potrf", [a], [(a.shape, np.float64), ((3,), np.int32)], "uplo = 76 : ui8"), [a])
    np.testing.assert_array_equal(info, [0, 3, 1])


# ---------------------------------------------------------------- trsm
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
@pytest.mark.parametrize("side, uplo, trans, diag", [("L", "L", "N", "N"), ("L", "U", "C", "N"),
                                                      ("R", "U", "T", "U"), ("R", "L", "C", "N")])
def test_trsm_solves_op_a(dtype, side, uplo, trans, diag):
    n, m = 4, 3
    a = (matrix((n, n), dtype) + 3 * np.eye(n)).astype(dtype)
    b = matrix((n, m) if side == "L" else (m, n), dtype)
    config = f"diag = {char(diag)} : ui8, side = {char(side)} : ui8, trans_x = {char(trans)} : ui8, " \
             f"uplo = {char(uplo)} : ui8"
    (got,) = run(custom_call("trsm", [a, b], [(b.shape, dtype)], config), [a, b])
    t = (np.tril(a) if uplo == "L" else np.triu(a)).astype(np.complex128)
    if diag == "U":
        np.fill_diagonal(t, 1)
    t = {"N": t, "T": t.T, "C": np.conj(t.T)}[trans]
    want = np.linalg.solve(t, b) if side == "L" else np.linalg.solve(t.T, b.T).T
    np.testing.assert_allclose(got, want, **tol(dtype))


# ---------------------------------------------------------------- getrf
def lu_reference(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """dgetf2 from its documentation: pivot on the first largest |re| + |im| on or below the diagonal, swap
    whole rows, scale the column, update the trailing matrix."""
    a = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64).copy()
    m, n = a.shape
    pivots = []
    for j in range(min(m, n)):
        p = j + int(np.argmax(np.abs(a[j:, j].real) + np.abs(a[j:, j].imag)))
        pivots.append(p + 1)
        a[[j, p]] = a[[p, j]]
        if a[j, j] != 0:
            a[j + 1:, j] /= a[j, j]
        a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
    return a, np.array(pivots, np.int32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (3, 5), (5, 3), (2, 4, 4)])
def test_getrf_matches_partial_pivoting(dtype, shape):
    a = matrix(shape, dtype)
    batch, k = shape[:-2], min(shape[-2:])
    text = custom_call("getrf", [a], [(shape, dtype), (batch + (k,), np.int32), (batch, np.int32)])
    lu, pivots, info = run(text, [a])
    for i in np.ndindex(*batch):
        want_lu, want_pivots = lu_reference(a[i])
        np.testing.assert_array_equal(pivots[i], want_pivots)
        np.testing.assert_allclose(lu[i], want_lu, **tol(dtype))
    np.testing.assert_array_equal(info, np.zeros(batch, np.int32))


def test_getrf_info_names_the_first_zero_pivot():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]])  # column 2 is zero below row 1
    _, pivots, info = run(custom_call("getrf", [a], [((3, 3), np.float64), ((3,), np.int32), ((), np.int32)]), [a])
    np.testing.assert_array_equal(pivots, lu_reference(a)[1])
    np.testing.assert_array_equal(pivots, [2, 2, 3])  # the zero column's pivot is its first row
    assert int(info) == 2


def test_getrf_through_kernels(tmp_path):
    a = matrix((2, 4, 4), np.float32)
    text = custom_call("getrf", [a], [(a.shape, np.float32), ((2, 4), np.int32), ((2,), np.int32)])
    lu, pivots, _ = run_kernels(text, [a], tmp_path)
    for i in range(2):
        want_lu, want_pivots = lu_reference(a[i])
        np.testing.assert_array_equal(pivots[i], want_pivots)
        np.testing.assert_allclose(lu[i], want_lu, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- geqrf, orgqr/ungqr
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_geqrf_is_lapacks_packed_qr(dtype, shape):
    a = matrix(shape, dtype)
    k = min(shape)
    packed, tau = run(custom_call("geqrf", [a], [(shape, dtype), ((k,), dtype)]), [a])
    h, want_tau = np.linalg.qr(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), mode="raw")
    np.testing.assert_allclose(packed, h.T, **tol(dtype))  # numpy gives LAPACK's column-major array
    np.testing.assert_allclose(tau, want_tau, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_orgqr_builds_q_from_the_reflectors(dtype):
    a = matrix((2, 6, 4), dtype)
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    packed = np.stack([np.linalg.qr(x.astype(wide), mode="raw")[0].T for x in a]).astype(dtype)
    tau = np.stack([np.linalg.qr(x.astype(wide), mode="raw")[1] for x in a]).astype(dtype)
    routine = "ungqr" if a.dtype.kind == "c" else "orgqr"
    (q,) = run(custom_call(routine, [packed, tau], [(packed.shape, dtype)]), [packed, tau])
    want = np.stack([np.linalg.qr(x.astype(wide), mode="reduced")[0] for x in a])
    np.testing.assert_allclose(q, want, **tol(dtype))


# ---------------------------------------------------------------- refused
@pytest.mark.parametrize("routine", ["syevd", "gesdd", "geev"])
def test_iterative_decompositions_are_refused_with_a_reason(routine):
    a = matrix((3, 3), np.float32)
    text = custom_call(routine, [a], [((3, 3), np.float32)])
    with pytest.raises(UnsupportedOpsError, match=rf"@lapack_s{routine}_ffi \(.*its own.*\) \(line 3\)"):
        import_stablehlo(text)


def test_a_larger_factorization_is_refused():
    a = hermitian_positive((65, 65), np.float32)
    with pytest.raises(StableHLOUnsupportedError, match=r"stablehlo.custom_call: @lapack_spotrf_ffi: a matrix of 65 "
                                                        r"rows or columns \(at most 64 are unrolled\)"):
        import_stablehlo(custom_call("potrf", [a], [(a.shape, np.float32), ((), np.int32)], "uplo = 76 : ui8"))


# ---------------------------------------------------------------- gtsv
def gtsv_program(dl, d, du, b) -> str:
    dtype, batch = b.dtype, d.shape[:-1]
    return custom_call("gtsv", [dl, d, du, b], [(dl.shape, dtype), (d.shape, dtype), (du.shape, dtype),
                                                (b.shape, dtype), (batch, np.int32)]).replace(
        f'num_batch_dims = "{dl.ndim - 2}"', f'num_batch_dims = "{len(batch)}"')


@pytest.mark.parametrize("dtype", DTYPES)
def test_gtsv_solves_the_tridiagonal_system(dtype):
    n = 6
    dl, d, du, b = matrix((2, n), dtype), matrix((2, n), dtype), matrix((2, n), dtype), matrix((2, n, 3), dtype)
    d[0, :3] *= 0.01  # small diagonal entries: rows are swapped (partial pivoting)
    dl[:, 0] = 0
    du[:, -1] = 0
    *_, x, info = run(gtsv_program(dl, d, du, b), [dl, d, du, b])
    for i in range(2):
        a = np.diag(d[i]) + np.diag(dl[i, 1:], -1) + np.diag(du[i, :-1], 1)
        np.testing.assert_allclose(x[i], np.linalg.solve(a.astype(np.complex128), b[i]), **tol(dtype))
    np.testing.assert_array_equal(info, [0, 0])


def test_gtsv_info_names_the_zero_pivot():
    dl, d, du = np.array([0.0, 1.0, 0.0]), np.array([1.0, 1.0, 5.0]), np.array([1.0, 0.0, 0.0])
    b = np.ones((3, 1))  # [[1, 1, 0], [1, 1, 0], [0, 0, 5]]: eliminating row 2 leaves a zero pivot, none below
    *_, info = run(gtsv_program(dl, d, du, b), [dl, d, du, b])
    assert int(info) == 2


def test_an_empty_decomposition_is_imported():
    # syevd of 0 x 0 matrices: nothing to compute, so nothing LAPACK-specific to reproduce
    a = np.zeros((2, 0, 0), np.float32)
    text = custom_call("syevd", [a], [((2, 0, 0), np.float32), ((2, 0), np.float32), ((2,), np.int32)],
                       "mode = 86 : ui8, uplo = 76 : ui8")
    vectors, values, info = run(text, [a])
    assert vectors.shape == (2, 0, 0) and values.shape == (2, 0)
    np.testing.assert_array_equal(info, [0, 0])
