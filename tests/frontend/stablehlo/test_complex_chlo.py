"""The chlo trigonometric and hyperbolic functions (and bitcast_convert) on complex values, against numpy's
complex128 functions (C99's principal branches), through the evaluator and the generated kernels."""

from __future__ import annotations

import numpy as np
import pytest
from shlo_programs import run_kernels

from mlcc.frontend.stablehlo import import_stablehlo
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

TYPES = {np.dtype(np.complex64): "complex<f32>", np.dtype(np.complex128): "complex<f64>"}
FUNCTIONS = {"sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "asin": np.arcsin, "acos": np.arccos,
             "acosh": np.arccosh, "atanh": np.arctanh, "atan": np.arctan}
# relative to max(1, |want|) per value: a few ulps of the part type, more for f32 near the branch points
TOL = {np.dtype(np.complex64): 2e-6, np.dtype(np.complex128): 1e-14}


def tensor(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + TYPES[np.dtype(dtype)] + ">"


def program(name: str, z: np.ndarray) -> str:
    t = tensor(z.shape, z.dtype)
    return (f"func.func public @main(%arg0: {t}) -> {t} {{\n  %0 = chlo.{name} %arg0 : {t} -> {t}\n"
            f"  return %0 : {t}\n}}\n")


def points(dtype) -> np.ndarray:
    rng = np.random.default_rng(7)
    z = rng.uniform(-3, 3, 40) + 1j * rng.uniform(-3, 3, 40)
    special = [0.25j, -0.75 + 0.1j, 1e-4 + 2e-4j, -1e-4 - 3e-5j, 2.5 - 0.5j, -2.5 + 0.5j, 0.5 + 2j, -0.3 - 2.2j,
               1.5 + 1e-3j, -1.5 - 1e-3j, 0.9 + 0.9j, -0.9 - 0.9j, 4 + 0j, 0.5 + 0j]
    return np.concatenate([special, z]).astype(dtype)


def check(got: np.ndarray, z: np.ndarray, name: str) -> None:
    want = FUNCTIONS[name](z.astype(np.complex128))
    assert got.dtype == z.dtype and got.shape == z.shape
    err = np.abs(got.astype(np.complex128) - want) / np.maximum(1.0, np.abs(want))
    tol = TOL[z.dtype]
    assert err.max() <= tol, f"{name}: worst at {z[err.argmax()]}: got {got[err.argmax()]}, want {want[err.argmax()]}"


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_chlo_complex_functions_evaluator(name, dtype):
    z = points(dtype)
    module = import_stablehlo(program(name, z))
    verify_module(module)
    (got,) = evaluate(module, {"arg0": z}).values()
    check(got, z, name)


@pytest.mark.parametrize("name", ["asinh", "acos", "atanh"])
def test_chlo_complex_functions_kernels(name, tmp_path):
    z = points(np.complex64)
    (got,) = run_kernels(program(name, z), [z], tmp_path)
    check(got, z, name)


def test_bitcast_convert_complex_to_itself_and_refused_to_another_type():
    z = points(np.complex64)
    t = tensor(z.shape, z.dtype)
    text = (f"func.func public @main(%arg0: {t}) -> {t} {{\n  %0 = stablehlo.bitcast_convert %arg0 : ({t}) -> {t}\n"
            f"  return %0 : {t}\n}}\n")
    (got,) = evaluate(import_stablehlo(text), {"arg0": z}).values()
    np.testing.assert_array_equal(got, z)
    f64 = "tensor<" + "".join(f"{d}x" for d in z.shape) + "f64>"
    text = text.replace(f"-> {t} {{", f"-> {f64} {{").replace(f"({t}) -> {t}", f"({t}) -> {f64}") \
        .replace(f"return %0 : {t}", f"return %0 : {f64}")
    with pytest.raises(Exception, match="bitcast between a complex and another element type is not supported"):
        import_stablehlo(text)
