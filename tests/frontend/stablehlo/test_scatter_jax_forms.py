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
