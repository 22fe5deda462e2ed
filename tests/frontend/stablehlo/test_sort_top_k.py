"""stablehlo.sort (any comparator, several operands, any dimension, stable) and chlo.top_k against numpy's
stable sorts, through the evaluator and the generated kernels; compare's TOTALORDER type; stablehlo.map."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from shlo_programs import assert_same, evaluate_text, module_text, run_kernels, tensor

DATA = Path(__file__).resolve().parent.parent.parent / "data" / "stablehlo"
rng = np.random.default_rng(11)


def sort_text(operands, dim, comparator_lines, *, stable=True):
    n = len(operands)
    scalars = [tensor((), o.dtype) for o in operands]
    block_args = ", ".join(f"%l{i}: {t}, %r{i}: {t}" for i, t in enumerate(scalars))
    types = ", ".join(tensor(o.shape, o.dtype) for o in operands)
    names = ", ".join(f"%arg{i}" for i in range(n))
    lhs = f"%0:{n}" if n > 1 else "%0"
    rets = ", ".join(f"%0#{i}" for i in range(n)) if n > 1 else "%0"
    body = (f'    {lhs} = "stablehlo.sort"({names}) <{{dimension = {dim} : i64, is_stable = {str(stable).lower()}}}> '
            f'({{\n    ^bb0({block_args}):\n{comparator_lines}\n    }}) : ({types}) -> ({types})\n'
            f'    return {rets} : {types}')
    return module_text(operands, [(o.shape, o.dtype) for o in operands], body)


def compare(direction, a, b, t, out="%c", kind=""):
    kind = f", {kind}" if kind else ""
    return f"      {out} = stablehlo.compare {direction}, {a}, {b}{kind} : ({t}, {t}) -> tensor<i1>"


def ret(v="%c"):
    return f"      stablehlo.return {v} : tensor<i1>"


def stable_order(keys: np.ndarray, axis: int) -> np.ndarray:
    return np.argsort(keys, axis=axis, kind="stable")


def test_jax_comparator_sorts_nan_last_and_keeps_equal_zeros_in_order():
    """JAX's float comparator (NaN and -0 canonicalized, then TOTALORDER LT), on rows with NaN, infinities, zeros."""
    text = (DATA / "unsupported" / "sort.mlir").read_text() if (DATA / "unsupported" / "sort.mlir").exists() \
        else (DATA / "sort.mlir").read_text()
    x = rng.uniform(-3, 3, (4, 8)).astype(np.float32)
    x[0] = [3, np.nan, -0.0, 0.0, -1, 2, -np.inf, 3]
    x[1] = [0.0, -0.0, 0.0, -0.0, np.inf, np.nan, 1, -1]
    x[2] = np.round(x[2])
    (got,) = evaluate_text(text, [x])
    want = np.take_along_axis(x, stable_order(x, 1), 1)  # numpy: NaN last, -0 == 0, stable
    assert_same(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


CASES = {
    # name: (operands, dim, comparator, numpy order of the operands along dim)
    "ascending_f32_dim1": ([np.round(rng.uniform(-5, 5, (3, 9)).astype(np.float32))], 1,
                           [compare("LT", "%l0", "%r0", "tensor<f32>", kind="FLOAT"), ret()],
                           lambda ops: stable_order(ops[0], 1)),
    "descending_i32_dim0": ([rng.integers(-4, 4, (7, 3)).astype(np.int32)], 0,
                            [compare("GT", "%l0", "%r0", "tensor<i32>", kind="SIGNED"), ret()],
                            lambda ops: stable_order(-ops[0].astype(np.int64), 0)),
    "key_and_payload": ([rng.integers(0, 3, (2, 10)).astype(np.int32), rng.uniform(-1, 1, (2, 10)).astype(np.float32)],
                        1, [compare("LT", "%l0", "%r0", "tensor<i32>"), ret()],
                        lambda ops: stable_order(ops[0], 1)),
    "two_keys_lexicographic": (
        [rng.integers(0, 3, (12,)).astype(np.int32), rng.integers(0, 4, (12,)).astype(np.int32)], 0,
        [compare("LT", "%l0", "%r0", "tensor<i32>", out="%a"), compare("EQ", "%l0", "%r0", "tensor<i32>", out="%e"),
         compare("LT", "%l1", "%r1", "tensor<i32>", out="%b"),
         "      %t = stablehlo.and %e, %b : tensor<i1>", "      %c = stablehlo.or %a, %t : tensor<i1>", ret()],
        lambda ops: np.lexsort((ops[1], ops[0]))),
    "bf16_rank3_middle_dim": ([rng.uniform(-8, 8, (2, 6, 3)).astype(ml_dtypes.bfloat16)], 1,
                              [compare("LT", "%l0", "%r0", "tensor<bf16>"), ret()],
                              lambda ops: stable_order(ops[0].astype(np.float32), 1)),
    "constant_in_comparator_abs_order": (
        [rng.integers(-5, 6, (10,)).astype(np.int32)], 0,
        ["      %z = stablehlo.constant dense<0> : tensor<i32>",
         "      %ml = stablehlo.maximum %l0, %z : tensor<i32>", "      %mr = stablehlo.maximum %r0, %z : tensor<i32>",
         compare("LT", "%ml", "%mr", "tensor<i32>"), ret()],
        lambda ops: stable_order(np.maximum(ops[0], 0), 0)),
}


def _case(name):
    operands, dim, lines, order = CASES[name]
    text = sort_text(operands, dim, "\n".join(lines))
    perm = order(operands)
    want = [np.take_along_axis(o, perm, dim) if perm.ndim == o.ndim else o[perm] for o in operands]
    return text, operands, want


@pytest.mark.parametrize("name", sorted(CASES))
def test_sort_matches_numpys_stable_sort(name):
    text, operands, want = _case(name)
    for got, w in zip(evaluate_text(text, operands), want):
        assert_same(got, w, name)


@pytest.mark.parametrize("name", ["key_and_payload", "bf16_rank3_middle_dim", "two_keys_lexicographic"])
def test_sort_through_kernels(tmp_path, name):
    text, operands, want = _case(name)
    for got, w in zip(run_kernels(text, operands, tmp_path), want):
        assert_same(got, w, name)


def top_k_text(x, k):
    vt, it = tensor(x.shape[:-1] + (k,), x.dtype), tensor(x.shape[:-1] + (k,), np.int32)
    body = (f"    %0:2 = chlo.top_k(%arg0, k = {k}) : {tensor(x.shape, x.dtype)} -> ({vt}, {it})\n"
            f"    return %0#0, %0#1 : {vt}, {it}")
    return module_text([x], [(x.shape[:-1] + (k,), x.dtype), (x.shape[:-1] + (k,), np.int32)], body)


def top_k_reference(x, k):
    """Largest first in the total order (NaN above +inf, +0 above -0), ties by lower index."""
    order = []
    for row in x.reshape(-1, x.shape[-1]).astype(np.float64):
        nan = np.isnan(row)
        value = np.where(nan, 0, row)
        order.append(np.lexsort((np.arange(row.size), np.signbit(value), -value, -nan.astype(int))))
    idx = np.array(order).reshape(x.shape)[..., :k]
    return np.take_along_axis(x, idx, -1), idx.astype(np.int32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32])
def test_top_k_matches_a_stable_descending_sort(tmp_path, dtype):
    x = np.round(rng.uniform(-6, 6, (3, 11))).astype(dtype)
    if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16:
        x[0, 3], x[1, 0], x[1, 5], x[2, 2] = np.nan, np.inf, -np.inf, -0.0
    text = top_k_text(x, 4)
    want = top_k_reference(x, 4)
    for got, w in zip(evaluate_text(text, [x]), want):
        assert_same(got, w, str(dtype))
    if dtype is np.float32:
        for got, w in zip(run_kernels(text, [x], tmp_path), want):
            assert_same(got, w, "kernels")


def test_totalorder_compare_orders_nan_and_signed_zeros():
    a = np.array([-0.0, 0.0, np.nan, 1.0, -np.inf, -np.nan], np.float32)
    b = np.array([0.0, -0.0, np.inf, np.nan, -1.0, -np.inf], np.float32)
    t, p = tensor(a.shape, a.dtype), tensor(a.shape, np.bool_)
    body = (f"    %0 = stablehlo.compare LT, %arg0, %arg1, TOTALORDER : ({t}, {t}) -> {p}\n"
            f"    %1 = stablehlo.compare LT, %arg0, %arg1, FLOAT : ({t}, {t}) -> {p}\n    return %0, %1 : {p}, {p}")
    total, plain = evaluate_text(module_text([a, b], [(a.shape, np.bool_)] * 2, body), [a, b])
    np.testing.assert_array_equal(total, [True, False, False, True, True, True])
    np.testing.assert_array_equal(plain, a < b)


def test_map_applies_its_computation_to_every_element(tmp_path):
    a = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    b = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    t, s = tensor(a.shape, a.dtype), tensor((), np.float32)
    body = (f'    %0 = "stablehlo.map"(%arg0, %arg1) <{{dimensions = array<i64: 0, 1>}}> ({{\n'
            f'    ^bb0(%x: {s}, %y: {s}):\n      %c = stablehlo.constant dense<0.5> : {s}\n'
            f'      %m = stablehlo.multiply %x, %c : {s}\n      %r = stablehlo.maximum %m, %y : {s}\n'
            f'      stablehlo.return %r : {s}\n    }}) : ({t}, {t}) -> {t}\n    return %0 : {t}')
    text = module_text([a, b], [(a.shape, a.dtype)], body)
    want = np.maximum(a * np.float32(0.5), b)
    assert_same(evaluate_text(text, [a, b])[0], want)
    assert_same(run_kernels(text, [a, b], tmp_path)[0], want)
