"""stablehlo.scatter as JAX prints it: dimension numbers that leave out index_vector_dim (MLIR omits it when it
is 0, its default), and f16/bf16 sums and products over repeated indices, where the body rounds after every
update. References: the spec's index math as a numpy loop (shlo_programs.spec_scatter) with the body applied
in the element type by numpy / ml_dtypes, one rounded op per update; checked through the evaluator and through
the generated kernels."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from shlo_programs import assert_same, evaluate_text, module_text, run_kernels, spec_scatter, tensor

rng = np.random.default_rng(22)

BF16 = np.dtype(ml_dtypes.bfloat16)
BODY_OPS = {"add": ("stablehlo.add", np.add), "mul": ("stablehlo.multiply", np.multiply)}


def scatter_program(operand, indices, updates, dn: str, kind: str) -> str:
    """One scatter whose body is `kind` on scalars of the operand's type; dn is the text inside <...>."""
    t = tensor((), operand.dtype)
    name = BODY_OPS[kind][0]
    types = ", ".join(tensor(a.shape, a.dtype) for a in (operand, indices, updates))
    body = (f'    %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{indices_are_sorted = false, '
            f'scatter_dimension_numbers = #stablehlo.scatter<{dn}>, unique_indices = false}}> ({{\n'
            f'    ^bb0(%a: {t}, %b: {t}):\n      %r = {name} %a, %b : {t}\n      stablehlo.return %r : {t}\n'
            f'    }}) : ({types}) -> {tensor(operand.shape, operand.dtype)}\n'
            f'    return %0 : {tensor(operand.shape, operand.dtype)}')
    return module_text([operand, indices, updates], [(operand.shape, operand.dtype)], body)


def _in_type(kind: str):
    """The body on two scalars of one type, computed in that type (one correctly rounded op)."""
    op = BODY_OPS[kind][1]
    return lambda a, b: (op(a, b),)


def _check(text, inputs, want, tmp_path):
    (got,) = evaluate_text(text, inputs)
    assert_same(got, want, "evaluator")
    (got,) = run_kernels(text, inputs, tmp_path)
    assert_same(got, want, "kernels")


# ---------------------------------------------------------------- index_vector_dim left out means 0
def test_omitted_index_vector_dim_is_zero_for_a_one_element_index(tmp_path):
    # jnp's x.at[:, 3].add(u) on a 1x5 operand: indices tensor<1xi64>, its only dim the index vector
    operand = rng.uniform(-4, 4, (2, 5)).astype(np.float32)
    indices = np.array([3], np.int64)
    updates = rng.uniform(-4, 4, (2,)).astype(np.float32)
    dn = dict(window_dims=[0], inserted=[1], to_operand=[1])
    text = scatter_program(operand, indices, updates,
                           "update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1]",
                           "add")
    (want,) = spec_scatter([operand], indices, [updates], _in_type("add"), ivd=0, **dn)
    _check(text, [operand, indices, updates], want, tmp_path)


def test_omitted_index_vector_dim_reads_index_vectors_down_the_columns(tmp_path):
    # indices 2x3 with index_vector_dim 0: three index vectors (column j is (row, col) of update j)
    operand = rng.integers(-50, 50, (4, 5)).astype(np.int32)
    indices = np.array([[0, 3, 0], [4, 1, 4]], np.int32)
    updates = rng.integers(-9, 9, (3,)).astype(np.int32)
    text = scatter_program(operand, indices, updates,
                           "inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1]", "mul")
    (want,) = spec_scatter([operand], indices, [updates], _in_type("mul"), window_dims=[], inserted=[0, 1],
                           to_operand=[0, 1], ivd=0)
    assert want[0, 4] == operand[0, 4] * updates[0] * updates[2]  # the repeated vector (0, 4) got both
    _check(text, [operand, indices, updates], want, tmp_path)


# ---------------------------------------------------------------- half precision, repeated indices
def test_bf16_sum_over_a_repeated_index_rounds_after_every_update(tmp_path):
    # 1 + 2^-8 is a tie that rounds back to 1 in bf16, three times over; summed in f32 and rounded once,
    # 1 + 3 * 2^-8 would round up to 1.015625
    operand = np.ones((3,), BF16)
    indices = np.array([[1], [1], [1]], np.int64)
    updates = np.full((3,), 2.0 ** -8, BF16)
    text = scatter_program(operand, indices, updates,
                           "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1",
                           "add")
    (want,) = spec_scatter([operand], indices, [updates], _in_type("add"), window_dims=[], inserted=[0],
                           to_operand=[0], ivd=1)
    assert float(want[1]) == 1.0
    _check(text, [operand, indices, updates], want, tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("kind", ["add", "mul"])
def test_half_precision_rows_at_repeated_indices_match_updates_applied_in_order(kind, dtype, tmp_path):
    # jnp's x.at[:, (2, 2, 0, 2)].add(u) on a 3x4 operand: whole columns, the index vector dim last
    operand = rng.uniform(0.5, 2, (3, 4)).astype(np.float32).astype(dtype)
    indices = np.array([[[2], [2], [0], [2]]], np.int32)
    updates = rng.uniform(0.5, 2, (3, 1, 4)).astype(np.float32).astype(dtype)
    dn = dict(window_dims=[0], inserted=[1], to_operand=[1], ivd=2)
    text = scatter_program(operand, indices, updates,
                           "update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1], "
                           "index_vector_dim = 2", kind)
    (want,) = spec_scatter([operand], indices, [updates], _in_type(kind), **dn)
    _check(text, [operand, indices, updates], want, tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_half_precision_sum_through_the_general_index_map(dtype, tmp_path):
    # a window form that is not whole rows (full_index's path), with a window start out of bounds skipped
    operand = rng.uniform(-4, 4, (5, 6)).astype(np.float32).astype(dtype)
    indices = np.array([[0, 0], [0, 0], [1, 1], [4, 5], [0, 1]], np.int32)
    updates = rng.uniform(-4, 4, (5, 2, 3)).astype(np.float32).astype(dtype)
    dn = dict(window_dims=[1, 2], inserted=[], to_operand=[0, 1], ivd=1)
    text = scatter_program(operand, indices, updates,
                           "update_window_dims = [1, 2], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1",
                           "add")
    (want,) = spec_scatter([operand], indices, [updates], _in_type("add"), **dn)
    _check(text, [operand, indices, updates], want, tmp_path)


# ---------------------------------------------------------------- complex values, bodies other than add
CTYPES = {np.dtype(np.complex64): "complex<f32>", np.dtype(np.complex128): "complex<f64>"}
MAX_BODY = """      %1 = stablehlo.real %a : (S) -> R
      %2 = stablehlo.real %b : (S) -> R
      %3 = stablehlo.compare EQ, %1, %2, FLOAT : (R, R) -> tensor<i1>
      %4 = stablehlo.compare GT, %1, %2, FLOAT : (R, R) -> tensor<i1>
      %5 = stablehlo.imag %a : (S) -> R
      %6 = stablehlo.imag %b : (S) -> R
      %7 = stablehlo.compare GT, %5, %6, FLOAT : (R, R) -> tensor<i1>
      %8 = stablehlo.select %3, %7, %4 : tensor<i1>, tensor<i1>
      %r = stablehlo.select %8, %a, %b : tensor<i1>, S"""  # lax.scatter_max's body on complex values


def _ctensor(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + CTYPES[np.dtype(dtype)] + ">"


def complex_scatter_program(operand, indices, updates, body: str) -> str:
    s, r = _ctensor((), operand.dtype), f"tensor<{CTYPES[operand.dtype][8:-1]}>"
    t, it, ut = _ctensor(operand.shape, operand.dtype), tensor(indices.shape, indices.dtype), \
        _ctensor(updates.shape, updates.dtype)
    lines = body.replace("S", s).replace("R", r)
    return (f"module @m {{\n  func.func public @main(%arg0: {t}, %arg1: {it}, %arg2: {ut}) -> {t} {{\n"
            f'    %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{indices_are_sorted = false, scatter_dimension_numbers'
            f" = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], "
            f"scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}}> ({{\n"
            f"    ^bb0(%a: {s}, %b: {s}):\n{lines}\n      stablehlo.return %r : {s}\n    }}) : ({t}, {it}, {ut}) -> {t}\n"
            f"    return %0 : {t}\n  }}\n}}\n")


def _complex_inputs(dtype):
    c = lambda *shape: (rng.uniform(-1.5, 1.5, shape) + 1j * rng.uniform(-1.5, 1.5, shape)).astype(dtype)  # noqa: E731
    operand, updates = c(5, 2), c(5, 2)
    # at [1, 1]: the first update wins on the real part, the next two tie with it there, one larger, one smaller
    operand[1, 1], updates[0, 1], updates[2, 1], updates[4, 1] = 0.25 + 0.5j, 1 + 0.1j, 1 + 0.7j, 1 - 0.3j
    indices = np.array([[1], [4], [1], [9], [1]], np.int32)  # [9]: out of bounds, skipped
    return operand, indices, updates


def _complex_reference(operand, indices, updates, combine):
    want = operand.copy()
    for j, (i,) in enumerate(indices):
        if 0 <= i < operand.shape[0]:
            want[i] = [combine(a, b) for a, b in zip(want[i], updates[j])]
    return want


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_scatter_with_the_lexicographic_maximum_body(dtype, tmp_path):
    operand, indices, updates = _complex_inputs(dtype)
    text = complex_scatter_program(operand, indices, updates, MAX_BODY)
    want = _complex_reference(operand, indices, updates,
                              lambda a, b: a if (a.real, a.imag) > (b.real, b.imag) else b)
    assert want[1, 1] == 1 + 0.7j  # the tie on the real part went to the larger imaginary part
    for got, what in ((evaluate_text(text, [operand, indices, updates])[0], "evaluator"),
                      (run_kernels(text, [operand, indices, updates], tmp_path)[0], "kernels")):
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_scatter_product_over_repeated_indices(dtype, tmp_path):
    operand, indices, updates = _complex_inputs(dtype)
    text = complex_scatter_program(operand, indices, updates, "      %r = stablehlo.multiply %a, %b : S")
    want = _complex_reference(operand.astype(np.complex128), indices, updates.astype(np.complex128),
                              lambda a, b: a * b)
    tol = {"rtol": 2e-5, "atol": 2e-6} if np.dtype(dtype) == np.complex64 else {"rtol": 1e-11, "atol": 1e-12}
    for got, what in ((evaluate_text(text, [operand, indices, updates])[0], "evaluator"),
                      (run_kernels(text, [operand, indices, updates], tmp_path)[0], "kernels")):
        assert got.dtype == dtype, what
        np.testing.assert_allclose(got, want, err_msg=what, **tol)
