"""Forms of gather, scatter and select_and_scatter that JAX emits and that once went wrong, each against numpy:

- a gather or scatter whose ``index_vector_dim`` is 0 prints without it (the attribute leaves out a 0), as
  ``jnp.take(x, i, axis=0)`` with a scalar ``i`` does: the index vector is the rank-1 indices themselves;
- a half-precision scatter or select_and_scatter that adds several updates into one element rounds each sum to
  the element type, one update at a time in order (the spec applies the body per update; XLA does the same),
  where computing in f32 and rounding once can differ by an ulp or more.

Each case runs through the evaluator and through the generated kernels (Triton's interpreter on CPU)."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from shlo_programs import assert_same, evaluate_text, module_text, run_kernels, tensor

rng = np.random.default_rng(22)


def _both(text, inputs, tmp_path):
    return evaluate_text(text, inputs)[0], run_kernels(text, inputs, tmp_path)[0]


# ---------------------------------------------------------------- index_vector_dim left out (0)
def test_gather_index_vector_dim_left_out(tmp_path):
    x = rng.uniform(-4, 4, (6, 3, 5)).astype(np.float32)
    i = np.array([4], np.int32)
    tx, ti, tr = tensor(x.shape, x.dtype), tensor(i.shape, i.dtype), tensor((3, 5), x.dtype)
    body = (f'    %0 = "stablehlo.gather"(%arg0, %arg1) <{{dimension_numbers = #stablehlo.gather<offset_dims = [0, 1], '
            f'collapsed_slice_dims = [0], start_index_map = [0]>, slice_sizes = array<i64: 1, 3, 5>}}> : '
            f'({tx}, {ti}) -> {tr}\n    return %0 : {tr}')
    text = module_text([x, i], [((3, 5), x.dtype)], body)
    for got in _both(text, [x, i], tmp_path):
        assert_same(got, x[4])


def test_gather_index_vector_dim_left_out_two_starts(tmp_path):
    """A rank-1 index vector of two starts (dynamic_slice as a gather), the second one clamped into range."""
    x = rng.uniform(-4, 4, (5, 7)).astype(np.float32)
    i = np.array([1, 6], np.int32)
    tx, ti, tr = tensor(x.shape, x.dtype), tensor(i.shape, i.dtype), tensor((2, 3), x.dtype)
    body = (f'    %0 = "stablehlo.gather"(%arg0, %arg1) <{{dimension_numbers = #stablehlo.gather<offset_dims = [0, 1], '
            f'start_index_map = [0, 1]>, slice_sizes = array<i64: 2, 3>}}> : ({tx}, {ti}) -> {tr}\n'
            f'    return %0 : {tr}')
    text = module_text([x, i], [((2, 3), x.dtype)], body)
    for got in _both(text, [x, i], tmp_path):
        assert_same(got, x[1:3, 4:7])


def test_scatter_index_vector_dim_left_out(tmp_path):
    x = rng.uniform(-4, 4, (4, 3)).astype(np.float32)
    i = np.array([2], np.int32)
    u = rng.uniform(-4, 4, (3,)).astype(np.float32)
    tx, ti, tu, s = tensor(x.shape, x.dtype), tensor(i.shape, i.dtype), tensor(u.shape, u.dtype), tensor((), x.dtype)
    body = (f'    %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{scatter_dimension_numbers = #stablehlo.scatter<'
            f'update_window_dims = [0], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0]>}}> ({{\n'
            f'    ^bb0(%a: {s}, %b: {s}):\n      %r = stablehlo.add %a, %b : {s}\n      stablehlo.return %r : {s}\n'
            f'    }}) : ({tx}, {ti}, {tu}) -> {tx}\n    return %0 : {tx}')
    text = module_text([x, i, u], [(x.shape, x.dtype)], body)
    want = x.copy()
    want[2] += u
    for got in _both(text, [x, i, u], tmp_path):
        assert_same(got, want)


# ---------------------------------------------------------------- half precision: each update rounded in order
def _sequential(result, updates, positions, combine):
    """result[p] = combine(result[p], u) for each update in order, in the element type (numpy's half and
    ml_dtypes' bfloat16 round every operation's result)."""
    result = result.copy()
    for u, p in zip(updates, positions):
        result[p] = combine(result[p], u)
    return result


def _rounded_once(result, updates, positions, combine):
    wide = result.astype(np.float32)
    for u, p in zip(updates, positions):
        wide[p] = combine(wide[p], np.float32(u))
    return wide.astype(result.dtype)


HALF = [ml_dtypes.bfloat16, np.float16]


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "f16"])
def test_select_and_scatter_half_rounds_each_add(tmp_path, dtype):
    """Overlapping 2x2 windows with stride 1 over peaks at every other row and column: four source values land
    on most peaks."""
    operand = rng.uniform(-3, 3, (9, 10)).astype(np.float32)
    operand[::2, ::2] += 10
    operand = operand.astype(dtype)
    out = (8, 9)
    source = rng.uniform(0.1, 9, out).astype(np.float32).astype(dtype)
    positions = []
    for s in itertools.product(*[range(n) for n in out]):  # the first greatest element of each window (GE keeps)
        chosen = None
        for w in itertools.product(range(2), range(2)):
            index = (s[0] + w[0], s[1] + w[1])
            if chosen is None or not operand[chosen] >= operand[index]:
                chosen = index
        positions.append(chosen)
    updates = [source[s] for s in itertools.product(*[range(n) for n in out])]
    zero = np.zeros(operand.shape, dtype)
    want = _sequential(zero, updates, positions, np.add)
    assert not np.array_equal(want, _rounded_once(zero, updates, positions, np.add)), "the case must tell them apart"
    to, ts, s = tensor(operand.shape, dtype), tensor(out, dtype), tensor((), dtype)
    body = (f'    %i = stablehlo.constant dense<0.0> : {s}\n'
            f'    %0 = "stablehlo.select_and_scatter"(%arg0, %arg1, %i) <{{window_dimensions = array<i64: 2, 2>}}> ({{\n'
            f'    ^bb0(%a: {s}, %b: {s}):\n'
            f'      %c = stablehlo.compare GE, %a, %b, FLOAT : ({s}, {s}) -> tensor<i1>\n'
            f'      stablehlo.return %c : tensor<i1>\n    }}, {{\n    ^bb0(%a: {s}, %b: {s}):\n'
            f'      %r = stablehlo.add %a, %b : {s}\n      stablehlo.return %r : {s}\n'
            f'    }}) : ({to}, {ts}, {s}) -> {to}\n    return %0 : {to}')
    text = module_text([operand, source], [(operand.shape, dtype)], body)
    for got in _both(text, [operand, source], tmp_path):
        assert_same(got, want)


@pytest.mark.parametrize("dtype, kind", [(ml_dtypes.bfloat16, "add"), (np.float16, "add"),
                                         (ml_dtypes.bfloat16, "multiply")], ids=["bf16-add", "f16-add", "bf16-mul"])
def test_scatter_half_duplicate_indices_round_each_update(tmp_path, dtype, kind):
    x = rng.uniform(0.5, 2, (3, 4)).astype(np.float32).astype(dtype)
    idx = np.array([[1], [0], [1], [1], [2], [1], [0], [1]], np.int32)
    u = rng.uniform(0.5, 1.9, (8, 4)).astype(np.float32).astype(dtype)
    combine = {"add": np.add, "multiply": np.multiply}[kind]
    rows = [u[k] for k in range(len(idx))]
    want = _sequential(x, rows, [int(r[0]) for r in idx], combine)
    assert not np.array_equal(want, _rounded_once(x, rows, [int(r[0]) for r in idx], combine)), \
        "the case must tell them apart"
    tx, ti, tu, s = tensor(x.shape, dtype), tensor(idx.shape, idx.dtype), tensor(u.shape, dtype), tensor((), dtype)
    body = (f'    %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{scatter_dimension_numbers = #stablehlo.scatter<'
            f'update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], '
            f'index_vector_dim = 1>}}> ({{\n'
            f'    ^bb0(%a: {s}, %b: {s}):\n      %r = stablehlo.{kind} %a, %b : {s}\n      stablehlo.return %r : {s}\n'
            f'    }}) : ({tx}, {ti}, {tu}) -> {tx}\n    return %0 : {tx}')
    text = module_text([x, idx, u], [(x.shape, dtype)], body)
    for got in _both(text, [x, idx, u], tmp_path):
        assert_same(got, want)
