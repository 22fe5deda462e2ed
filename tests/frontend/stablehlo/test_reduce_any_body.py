"""stablehlo.reduce with any (associative, commutative) body and reduce_window on complex values (max/min in
the spec's lexicographic order, products), through the evaluator and the generated kernels, against numpy
loops over the spec's definitions."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from shlo_programs import assert_same, evaluate_text, run_kernels

rng = np.random.default_rng(2222)
C64 = "complex<f32>"


def t(shape, element) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def cplx(*shape) -> np.ndarray:
    """Complex values with repeated real parts (so the lexicographic order looks at the imaginary ones)."""
    re = rng.integers(-2, 3, shape).astype(np.float32)
    return (re + 1j * rng.uniform(-1, 1, shape)).astype(np.complex64)


def lex_greater(a: complex, b: complex) -> bool:
    return (a.real, a.imag) > (b.real, b.imag)


def both(text: str, inputs: list[np.ndarray], tmp_path) -> list[list[np.ndarray]]:
    return [evaluate_text(text, inputs), run_kernels(text, inputs, tmp_path)]


def test_complex_max_with_an_int_min_in_one_reduce(tmp_path):
    """Two operands: the lexicographic max of complex values (init 0.5 + 0j) and the min of ints (init 7)."""
    z, k = cplx(4, 6), rng.integers(-9, 9, (4, 6)).astype(np.int32)
    text = f"""module @m {{
  func.func public @main(%arg0: {t((4, 6), C64)}, %arg1: {t((4, 6), "i32")}) -> ({t((6,), C64)}, {t((6,), "i32")}) {{
    %z0 = stablehlo.constant dense<(5.000000e-01,0.000000e+00)> : {t((), C64)}
    %k0 = stablehlo.constant dense<7> : tensor<i32>
    %0:2 = "stablehlo.reduce"(%arg0, %arg1, %z0, %k0) <{{dimensions = array<i64: 0>}}> ({{
    ^bb0(%a: {t((), C64)}, %i: tensor<i32>, %b: {t((), C64)}, %j: tensor<i32>):
      %g = stablehlo.compare GT, %a, %b : ({t((), C64)}, {t((), C64)}) -> tensor<i1>
      %m = stablehlo.select %g, %a, %b : tensor<i1>, {t((), C64)}
      %n = stablehlo.minimum %i, %j : tensor<i32>
      stablehlo.return %m, %n : {t((), C64)}, tensor<i32>
    }}) : ({t((4, 6), C64)}, {t((4, 6), "i32")}, {t((), C64)}, tensor<i32>) -> ({t((6,), C64)}, {t((6,), "i32")})
    return %0#0, %0#1 : {t((6,), C64)}, {t((6,), "i32")}
  }}
}}
"""
    want_z = np.empty(6, np.complex64)
    for c in range(6):
        best = np.complex64(0.5)
        for r in range(4):
            best = z[r, c] if lex_greater(z[r, c], best) else best
        want_z[c] = best
    want_k = np.minimum(k.min(axis=0), 7)
    for got_z, got_k in both(text, [z, k], tmp_path):
        assert_same(got_z, want_z, "complex max")
        assert_same(got_k, want_k, "int min")


@pytest.mark.parametrize("shape,dims", [((5, 7), (1,)), ((3, 4, 5), (0, 2)), ((9,), (0,))])
def test_integer_reduce_with_a_body_no_kind_names(tmp_path, shape, dims):
    """a * b + a + b = (a + 1)(b + 1) - 1: associative and commutative but not one of add/multiply/max/...;
    with init 2 the result is 3 * prod(x + 1) - 1, exactly, over odd and even counts of elements."""
    x = rng.integers(-1, 3, shape).astype(np.int32)
    out = tuple(n for d, n in enumerate(shape) if d not in dims)
    text = f"""module @m {{
  func.func public @main(%arg0: {t(shape, "i32")}) -> {t(out, "i32")} {{
    %c = stablehlo.constant dense<2> : tensor<i32>
    %0 = "stablehlo.reduce"(%arg0, %c) <{{dimensions = array<i64: {", ".join(map(str, dims))}>}}> ({{
    ^bb0(%a: tensor<i32>, %b: tensor<i32>):
      %p = stablehlo.multiply %a, %b : tensor<i32>
      %s = stablehlo.add %a, %b : tensor<i32>
      %r = stablehlo.add %p, %s : tensor<i32>
      stablehlo.return %r : tensor<i32>
    }}) : ({t(shape, "i32")}, tensor<i32>) -> {t(out, "i32")}
    return %0 : {t(out, "i32")}
  }}
}}
"""
    want = (3 * np.prod(x.astype(np.int64) + 1, axis=dims) - 1).astype(np.int32)
    for (got,) in both(text, [x], tmp_path):
        assert_same(got, want)


def spec_reduce_window(x, init, body, window, padding):
    """XLA's reading: each window reduced from init over its elements inside x (padding takes no part)."""
    out_shape = tuple(n + lo + hi - w + 1 for n, w, (lo, hi) in zip(x.shape, window, padding))
    out = np.empty(out_shape, x.dtype)
    for o in itertools.product(*[range(n) for n in out_shape]):
        acc = init
        for w in itertools.product(*[range(n) for n in window]):
            at = tuple(oi + wi - lo for oi, wi, (lo, _) in zip(o, w, padding))
            if all(0 <= a < n for a, n in zip(at, x.shape)):
                acc = body(acc, x[at])
        out[o] = acc
    return out


@pytest.mark.parametrize("kind", ["max", "multiply"])
def test_complex_reduce_window(tmp_path, kind):
    """A running (cummax-like) lexicographic max down the rows, and 2 x 2 products with edge padding."""
    z = cplx(5, 4)
    if kind == "max":
        window, padding, init_text = (5, 1), ((4, 0), (0, 0)), "(0xFF800000,0.000000e+00)"
        init, body = np.complex64(complex(-np.inf, 0)), lambda a, b: b if lex_greater(b, a) else a
        body_text = (f"      %g = stablehlo.compare GT, %a, %b : ({t((), C64)}, {t((), C64)}) -> tensor<i1>\n"
                     f"      %r = stablehlo.select %g, %a, %b : tensor<i1>, {t((), C64)}")
    else:
        window, padding, init_text = (2, 2), ((1, 0), (0, 1)), "(1.000000e+00,0.000000e+00)"
        init, body = np.complex64(1), lambda a, b: np.complex64(a * b)
        body_text = f"      %r = stablehlo.multiply %a, %b : {t((), C64)}"
    want = spec_reduce_window(z, init, body, window, padding)
    pad_text = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
    text = f"""module @m {{
  func.func public @main(%arg0: {t(z.shape, C64)}) -> {t(want.shape, C64)} {{
    %c = stablehlo.constant dense<{init_text}> : {t((), C64)}
    %0 = "stablehlo.reduce_window"(%arg0, %c) <{{padding = dense<[{pad_text}]> : tensor<2x2xi64>, window_dimensions = array<i64: {window[0]}, {window[1]}>}}> ({{
    ^bb0(%a: {t((), C64)}, %b: {t((), C64)}):
{body_text}
      stablehlo.return %r : {t((), C64)}
    }}) : ({t(z.shape, C64)}, {t((), C64)}) -> {t(want.shape, C64)}
    return %0 : {t(want.shape, C64)}
  }}
}}
"""
    for (got,) in both(text, [z], tmp_path):
        assert got.shape == want.shape and got.dtype == want.dtype
        if kind == "max":
            assert_same(got.real, want.real, "re")
            assert_same(got.imag, want.imag, "im")
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def sequential_running_sum(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """XLA's reduce_window add: each window's elements added one at a time from 0, in window order, each sum
    rounded to the element type (ml_dtypes rounds to nearest even)."""
    x = np.moveaxis(x, axis, -1)
    n = x.shape[-1]
    out = np.empty_like(x)
    for i in range(n):
        acc = np.zeros(x.shape[:-1], x.dtype)
        for j in (range(i, n) if reverse else range(0, i + 1)):
            acc = (acc.astype(np.float32) + x[..., j].astype(np.float32)).astype(x.dtype)
        out[..., i] = acc
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("dtype,element", [(ml_dtypes.bfloat16, "bf16"), (np.float16, "f16")])
@pytest.mark.parametrize("reverse", [False, True])
def test_half_precision_cumsum_adds_in_xlas_order(tmp_path, dtype, element, reverse):
    """JAX's cumsum (a reduce_window of n elements padded by n - 1) in bf16/f16 gives XLA's running sum,
    rounded at each step, not the f32 sum rounded once (which differs here: checked)."""
    shape, axis = (5, 24), 1
    x = rng.uniform(0, 4, shape).astype(dtype)
    n = shape[axis]
    padding = "[[0, 0], [0, 23]]" if reverse else "[[0, 0], [23, 0]]"
    text = f"""module @m {{
  func.func public @main(%arg0: {t(shape, element)}) -> {t(shape, element)} {{
    %c = stablehlo.constant dense<0.000000e+00> : tensor<{element}>
    %0 = "stablehlo.reduce_window"(%arg0, %c) <{{padding = dense<{padding}> : tensor<2x2xi64>, window_dimensions = array<i64: 1, {n}>}}> ({{
    ^bb0(%a: tensor<{element}>, %b: tensor<{element}>):
      %r = stablehlo.add %a, %b : tensor<{element}>
      stablehlo.return %r : tensor<{element}>
    }}) : ({t(shape, element)}, tensor<{element}>) -> {t(shape, element)}
    return %0 : {t(shape, element)}
  }}
}}
"""
    want = sequential_running_sum(x, axis, reverse)
    summed_once = np.flip(np.cumsum(np.flip(x.astype(np.float32), axis), axis), axis) if reverse \
        else np.cumsum(x.astype(np.float32), axis)
    assert not np.array_equal(summed_once.astype(dtype).astype(np.float32), want.astype(np.float32))
    for (got,) in both(text, [x], tmp_path):
        assert_same(got, want)
