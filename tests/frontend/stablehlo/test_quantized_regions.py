"""Ops with regions on quantized tensors (reduce, reduce_window, scatter, select_and_scatter, sort, map, while, if,
case) and complex values in map regions, against numpy readings of the StableHLO spec written independently of
mlcc: a reduction is the spec's body applied step by step (each quantized step dequantize_op_quantize, in the
left-to-right schedule the spec's reference interpreter uses), the operands first converted to the body's types
(to_destination_type); sort and select compare dequantized values (dequantize_compare)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mlcc
from mlcc.frontend.stablehlo import StableHLOParseError, StableHLOUnsupportedError
from tests.frontend.stablehlo.quant_spec import Q, fold, program, qtensor, step
from tests.frontend.stablehlo.shlo_programs import assert_same, evaluate_text, run_kernels

A = Q("i8", [0.05], [-3])
B = Q("i8", [0.08], [4])
WIDE = Q("i32", [0.025], [0])   # a wider accumulation type of A's expressed type (the spec's is_promotable)
rng = np.random.default_rng(22)


def small(q: Q, shape, lo=-20, hi=15) -> np.ndarray:
    """Storage integers near the zero point, so that no partial sum of a few of them leaves the storage range."""
    return (rng.integers(lo, hi, size=shape) + q.zeros[0]).astype(np.int8)


def body(s: str, opname: str) -> str:
    return (f"  ^bb0(%a: {s}, %b: {s}):\n    %r = {opname} %a, %b : ({s}, {s}) -> {s}\n"
            f"    stablehlo.return %r : {s}\n")


# ---------------------------------------------------------------- reduce
@pytest.mark.parametrize("opname,fn,init", [("stablehlo.add", np.add, -3), ("stablehlo.add", np.add, 5),
                                            ("stablehlo.maximum", np.maximum, -128),
                                            ("stablehlo.minimum", np.minimum, 127)])
def test_reduce(opname, fn, init):
    x = small(A, (4, 6))
    t, s, r = qtensor((4, 6), A), qtensor((), A), qtensor((4,), A)
    text = program([t, s], [r], f"""
  %0 = "stablehlo.reduce"(%arg0, %arg1) ({{
{body(s, opname)}  }}) {{dimensions = array<i64: 1>}} : ({t}, {s}) -> {r}
  return %0 : {r}""")
    combine = step(A, fn)
    want = np.array([fold(row, np.int8(init), combine) for row in x])
    (got,) = evaluate_text(text, [x, np.int8(init)])
    assert_same(got, want.astype(np.int8))


def binary_trees(leaves, combine):
    """Every value the spec's reduce may give: the body over any full binary tree with these leaves in order."""
    if len(leaves) == 1:
        return {int(leaves[0])}
    out = set()
    for k in range(1, len(leaves)):
        for left in binary_trees(leaves[:k], combine):
            for right in binary_trees(leaves[k:], combine):
                out.add(int(combine(np.int8(left), np.int8(right))))
    return out


def test_a_sum_that_saturates_on_the_way_is_one_the_spec_allows():
    # partial sums leave the storage range: the spec's schedule is implementation-defined, and mlcc's sum (exact,
    # clamped once) is the result of one of the schedules the spec allows
    q = Q("i8", [0.5], [0])
    x = np.array([[127, 127, -127, -127], [100, 100, -100, 5], [-128, -128, 120, 100]], np.int8)
    t, s, r = qtensor((3, 4), q), qtensor((), q), qtensor((3,), q)
    text = program([t, s], [r], f"""
  %0 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.add across dimensions = [1] : ({t}, {s}) -> {r}
  return %0 : {r}""")
    (got,) = evaluate_text(text, [x, np.int8(0)])
    for row, value in zip(x, got):
        allowed = binary_trees(list(row), step(q, np.add))
        assert len(allowed) > 1 and int(value) in allowed, (row, value, allowed)


def test_reduce_pretty_form_and_a_wider_body_type():
    # i8 elements summed in an i32 body type of another scale: each element converted first (to_destination_type)
    x = A.random(rng, (3, 8))
    t, s, r = qtensor((3, 8), A), qtensor((), WIDE), qtensor((3,), WIDE)
    text = program([t, s], [r], f"""
  %0 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.add across dimensions = [1] : ({t}, {s}) -> {r}
  return %0 : {r}""")
    converted = WIDE.quantize(A.dequantize(x))
    want = np.array([fold(row, np.int32(0), step(WIDE, np.add)) for row in converted], np.int32)
    (got,) = evaluate_text(text, [x, np.int32(0)])
    assert_same(got, want)


def test_a_body_step_of_another_quantized_type_rounds_to_its_grid():
    # the body adds into a coarser type and takes the maximum back in A's: each step rounds to the coarse grid
    coarse = Q("i8", [0.2], [0])
    x = small(A, (3, 5))
    t, s, sc, r = qtensor((3, 5), A), qtensor((), A), qtensor((), coarse), qtensor((3,), A)
    text = program([t, s], [r], f"""
  %0 = "stablehlo.reduce_window"(%arg0, %arg1) <{{window_dimensions = array<i64: 1, 5>}}> ({{
  ^bb0(%a: {s}, %b: {s}):
    %c = stablehlo.add %a, %b : ({s}, {s}) -> {sc}
    %m = stablehlo.maximum %c, %a : ({sc}, {s}) -> {s}
    stablehlo.return %m : {s}
  }}) : ({t}, {s}) -> {qtensor((3, 1), A)}
  %1 = stablehlo.reshape %0 : ({qtensor((3, 1), A)}) -> {r}
  return %1 : {r}""")

    def combine(acc, v):
        c = coarse.quantize(A.dequantize(np.asarray(acc)) + A.dequantize(np.asarray(v)))
        return A.quantize(np.maximum(coarse.dequantize(c), A.dequantize(np.asarray(acc))))

    (got,) = evaluate_text(text, [x, np.int8(-3)])
    assert_same(got, np.array([fold(row, np.int8(-3), combine) for row in x], np.int8))


# ---------------------------------------------------------------- reduce_window
def window_reference(x, init, window, strides, pad, combine):
    padded = np.pad(x, pad, constant_values=init)
    out = [(n - w) // s + 1 for n, w, s in zip(padded.shape, window, strides)]
    want = np.zeros(out, x.dtype)
    for o in itertools.product(*[range(n) for n in out]):
        cells = [padded[tuple(oi * st + wi for oi, st, wi in zip(o, strides, w))]
                 for w in itertools.product(*[range(n) for n in window])]
        want[o] = fold(cells, np.asarray(init, x.dtype), combine)
    return want


def reduce_window_text(q: Q, shape, out, attrs: str, region: str) -> str:
    t, s, r = qtensor(shape, q), qtensor((), q), qtensor(out, q)
    return program([t, s], [r], f"""
  %0 = "stablehlo.reduce_window"(%arg0, %arg1) <{{{attrs}}}> ({{
{region}  }}) : ({t}, {s}) -> {r}
  return %0 : {r}""")


@pytest.mark.parametrize("opname,fn,init,pad", [("stablehlo.add", np.add, -3, ((0, 0), (0, 0))),
                                                ("stablehlo.maximum", np.maximum, -128, ((1, 0), (0, 1)))])
def test_reduce_window(opname, fn, init, pad):
    x = small(A, (4, 5))
    window, strides = (2, 3), (1, 2)
    padded = [n + lo + hi for n, (lo, hi) in zip(x.shape, pad)]
    out = tuple((n - w) // st + 1 for n, w, st in zip(padded, window, strides))
    attrs = (f"padding = dense<{[list(p) for p in pad]}> : tensor<2x2xi64>, window_dimensions = array<i64: 2, 3>, "
             "window_strides = array<i64: 1, 2>")
    text = reduce_window_text(A, x.shape, out, attrs, body(qtensor((), A), opname))
    (got,) = evaluate_text(text, [x, np.int8(init)])
    assert_same(got, window_reference(x, np.int8(init), window, strides, pad, step(A, fn)))


def test_reduce_window_product_rounds_at_every_step():
    # a multiply body: each product is quantized before the next (the spec's body, step by step), which is not
    # the product of the dequantized window quantized once
    q = Q("i8", [0.5], [0])
    x = rng.integers(-4, 5, size=(3, 4)).astype(np.int8)
    x[:2, :2] = 3  # 1.5 four times: 1.5, 2.25 -> 2.0 (half to even), 3.0, 4.5 step by step; 5.0625 -> 5.0 at once
    init = np.int8(2)  # 1.0
    attrs = "window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 1, 1>"
    text = reduce_window_text(q, x.shape, (2, 3), attrs, body(qtensor((), q), "stablehlo.multiply"))
    want = window_reference(x, init, (2, 2), (1, 1), ((0, 0), (0, 0)), step(q, np.multiply))
    (got,) = evaluate_text(text, [x, init])
    assert_same(got, want)
    once = np.array([[q.quantize(np.prod(q.dequantize(x[i:i + 2, j:j + 2]))) for j in range(3)] for i in range(2)])
    assert (once != want).any()  # the inputs tell the two apart


# ---------------------------------------------------------------- scatter
def scatter_text(q: Q, opname: str | None) -> str:
    t, u, s = qtensor((5, 3), q), qtensor((3, 3), q), qtensor((), q)
    region = body(s, opname) if opname else f"  ^bb0(%a: {s}, %b: {s}):\n    stablehlo.return %b : {s}\n"
    dn = ("update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
          "index_vector_dim = 1")
    return program([t, "tensor<3x1xi32>", u], [t], f"""
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{indices_are_sorted = false,
      scatter_dimension_numbers = #stablehlo.scatter<{dn}>, unique_indices = false}}> ({{
{region}  }}) : ({t}, tensor<3x1xi32>, {u}) -> {t}
  return %0 : {t}""")


@pytest.mark.parametrize("opname,fn", [("stablehlo.add", np.add), ("stablehlo.multiply", np.multiply),
                                       ("stablehlo.maximum", np.maximum), (None, None)])
def test_scatter(opname, fn):
    q = Q("i8", [0.25], [1])
    x, upd = small(q, (5, 3), -6, 6), small(q, (3, 3), -6, 6)
    idx = np.array([[3], [0], [3]], np.int32)  # row 3 twice: the second update combines with the first
    want = x.copy()
    for k, i in enumerate(idx[:, 0]):
        want[i] = upd[k] if fn is None else step(q, fn)(want[i], upd[k])
    (got,) = evaluate_text(scatter_text(q, opname), [x, idx, upd])
    assert_same(got, want)


# ---------------------------------------------------------------- select_and_scatter
@pytest.mark.parametrize("opname,fn,init", [("stablehlo.add", np.add, -3), ("stablehlo.multiply", np.multiply, 17)])
def test_select_and_scatter(opname, fn, init):
    # add runs on dequantized values; multiply, on the storage integers one source element at a time
    operand, source = small(A, (4, 6)), small(A, (2, 3), -5, 5)
    operand[0, :2] = operand[1, 0]  # a tie: GE keeps the first
    t, src, s = qtensor((4, 6), A), qtensor((2, 3), A), qtensor((), A)
    text = program([t, src, s], [t], f"""
  %0 = "stablehlo.select_and_scatter"(%arg0, %arg1, %arg2) <{{window_dimensions = array<i64: 2, 2>,
      window_strides = array<i64: 2, 2>}}> ({{
  ^bb0(%a: {s}, %b: {s}):
    %c = stablehlo.compare GE, %a, %b : ({s}, {s}) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}, {{
{body(s, opname)}  }}) : ({t}, {src}, {s}) -> {t}
  return %0 : {t}""")
    init = np.int8(init)
    want = np.full(operand.shape, init)
    combine = step(A, fn)
    for i, j in itertools.product(range(2), range(3)):
        cells = [(2 * i + a, 2 * j + b) for a, b in itertools.product(range(2), range(2))]
        best = cells[0]
        for c in cells[1:]:
            if not A.dequantize(operand[best]) >= A.dequantize(operand[c]):
                best = c
        want[best] = combine(want[best], source[i, j])
    (got,) = evaluate_text(text, [operand, source, init])
    assert_same(got, want)


# ---------------------------------------------------------------- sort, map
def sort_text() -> str:
    ta, tb, ti = qtensor((3, 7), A), qtensor((3, 7), B), "tensor<3x7xi32>"
    s, sb, si = qtensor((), A), qtensor((), B), "tensor<i32>"
    return program([ta, tb, ti], [ta, tb, ti], f"""
  %0:3 = "stablehlo.sort"(%arg0, %arg1, %arg2) <{{dimension = 1 : i64, is_stable = true}}> ({{
  ^bb0(%a0: {s}, %b0: {s}, %a1: {sb}, %b1: {sb}, %a2: {si}, %b2: {si}):
    %c = stablehlo.compare LT, %a0, %b0 : ({s}, {s}) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}) : ({ta}, {tb}, {ti}) -> ({ta}, {tb}, {ti})
  return %0#0, %0#1, %0#2 : {ta}, {tb}, {ti}""")


def sort_reference(keys, other, payload):
    order = np.argsort(A.dequantize(keys), axis=1, kind="stable")
    return [np.take_along_axis(v, order, axis=1) for v in (keys, other, payload)]


def test_sort_moves_storage_and_compares_dequantized_values():
    keys = small(A, (3, 7), -4, 4)  # ties: the sort is stable
    other, payload = B.random(rng, (3, 7)), rng.integers(0, 100, (3, 7)).astype(np.int32)
    for got, want in zip(evaluate_text(sort_text(), [keys, other, payload]), sort_reference(keys, other, payload)):
        assert_same(got, want)


def test_a_comparator_that_dequantizes_its_arguments():
    # the comparator reads the keys through uniform_dequantize and compares floats (descending)
    keys = small(A, (2, 9), -5, 5)
    t, s = qtensor((2, 9), A), qtensor((), A)
    text = program([t], [t], f"""
  %0 = "stablehlo.sort"(%arg0) <{{dimension = 1 : i64, is_stable = true}}> ({{
  ^bb0(%a: {s}, %b: {s}):
    %fa = stablehlo.uniform_dequantize %a : ({s}) -> tensor<f32>
    %fb = stablehlo.uniform_dequantize %b : ({s}) -> tensor<f32>
    %c = stablehlo.compare GT, %fa, %fb : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}) : ({t}) -> {t}
  return %0 : {t}""")
    order = np.argsort(-A.dequantize(keys), axis=1, kind="stable")
    (got,) = evaluate_text(text, [keys])
    assert_same(got, np.take_along_axis(keys, order, 1))


MAP_TEXT = (lambda ta, tb, s, sb: program([ta, tb], [ta], f"""
  %0 = "stablehlo.map"(%arg0, %arg1) <{{dimensions = array<i64: 0, 1>}}> ({{
  ^bb0(%a: {s}, %b: {sb}):
    %m = stablehlo.multiply %a, %b : ({s}, {sb}) -> {s}
    %r = stablehlo.add %m, %a : ({s}, {s}) -> {s}
    stablehlo.return %r : {s}
  }}) : ({ta}, {tb}) -> {ta}
  return %0 : {ta}"""))(qtensor((4, 5), A), qtensor((4, 5), B), qtensor((), A), qtensor((), B))


def map_reference(x, y):
    m = A.quantize(A.dequantize(x) * B.dequantize(y))   # each op of the body quantized to its result type
    return A.quantize(A.dequantize(m) + A.dequantize(x))


def test_map_computes_each_body_op_on_quantized_values():
    x, y = A.random(rng, (4, 5)), B.random(rng, (4, 5))
    (got,) = evaluate_text(MAP_TEXT, [x, y])
    assert_same(got, map_reference(x, y))


# ---------------------------------------------------------------- while, if, case
def control_text() -> str:
    t, i, p = qtensor((4,), A), "tensor<i32>", "tensor<i1>"
    return program([t, t, i, p], [t, t, t], f"""
  %c0 = stablehlo.constant dense<0> : {i}
  %c1 = stablehlo.constant dense<1> : {i}
  %c3 = stablehlo.constant dense<3> : {i}
  %r:2 = stablehlo.while(%k = %c0, %acc = %arg0) : {i}, {t}
   cond {{
    %lt = stablehlo.compare LT, %k, %c3, SIGNED : ({i}, {i}) -> {p}
    stablehlo.return %lt : {p}
  }} do {{
    %n = stablehlo.add %acc, %arg1 : ({t}, {t}) -> {t}
    %k1 = stablehlo.add %k, %c1 : {i}
    stablehlo.return %k1, %n : {i}, {t}
  }}
  %s = "stablehlo.case"(%arg2) ({{
    %a = stablehlo.maximum %r#1, %arg1 : ({t}, {t}) -> {t}
    stablehlo.return %a : {t}
  }}, {{
    stablehlo.return %arg1 : {t}
  }}) : ({i}) -> {t}
  %f = "stablehlo.if"(%arg3) ({{
    stablehlo.return %arg0 : {t}
  }}, {{
    %m = stablehlo.multiply %arg0, %arg1 : ({t}, {t}) -> {t}
    stablehlo.return %m : {t}
  }}) : ({p}) -> {t}
  return %r#1, %s, %f : {t}, {t}, {t}""")


def control_reference(x, y, index, pred):
    acc = x
    for _ in range(3):
        acc = step(A, np.add)(acc, y)
    case = step(A, np.maximum)(acc, y) if index == 0 else y
    return [acc, case, x if pred else step(A, np.multiply)(x, y)]


@pytest.mark.parametrize("index,pred", [(0, True), (1, False), (5, True)])
def test_while_case_and_if_carry_quantized_values(index, pred):
    x, y = small(A, (4,)), small(A, (4,), -8, 8)
    got = evaluate_text(control_text(), [x, y, np.int32(index), np.bool_(pred)])
    for g, w in zip(got, control_reference(x, y, index, pred)):
        assert_same(g, w)


# ---------------------------------------------------------------- complex values in a map region
def test_map_of_complex_values():
    c = "tensor<2x3xcomplex<f32>>"
    s = "tensor<complex<f32>>"
    text = program([c, c], [c], f"""
  %0 = "stablehlo.map"(%arg0, %arg1) <{{dimensions = array<i64: 0, 1>}}> ({{
  ^bb0(%a: {s}, %b: {s}):
    %m = stablehlo.multiply %a, %b : {s}
    %e = stablehlo.exponential %a : {s}
    %r = stablehlo.add %m, %e : {s}
    stablehlo.return %r : {s}
  }}) : ({c}, {c}) -> {c}
  return %0 : {c}""")
    a = (rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))).astype(np.complex64)
    b = (rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))).astype(np.complex64)
    (got,) = evaluate_text(text, [a, b])
    want = a.astype(np.complex128) * b + np.exp(a.astype(np.complex128))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- through the kernels
def kernel_text() -> str:
    t, s, r, w = qtensor((4, 6), A), qtensor((), A), qtensor((4,), A), qtensor((3, 5), A)
    return program([t, s], [r, w], f"""
  %0 = "stablehlo.reduce"(%arg0, %arg1) ({{
{body(s, "stablehlo.add")}  }}) {{dimensions = array<i64: 1>}} : ({t}, {s}) -> {r}
  %1 = "stablehlo.reduce_window"(%arg0, %arg1) <{{window_dimensions = array<i64: 2, 2>,
      window_strides = array<i64: 1, 1>}}> ({{
{body(s, "stablehlo.maximum")}  }}) : ({t}, {s}) -> {w}
  return %0, %1 : {r}, {w}""")


def kernel_reference(x):
    add, mx = step(A, np.add), step(A, np.maximum)
    sums = np.array([fold(row, np.int8(-3), add) for row in x], np.int8)
    return [sums, window_reference(x, np.int8(-3), (2, 2), (1, 1), ((0, 0), (0, 0)), mx)]


def test_reduce_sort_map_through_the_kernels(tmp_path):
    for sub in "rsm":
        (tmp_path / sub).mkdir()
    x, y = small(A, (4, 6)), small(A, (4, 6))
    for got, want in zip(run_kernels(kernel_text(), [x, np.int8(-3)], tmp_path / "r"), kernel_reference(x)):
        assert_same(got, want)
    keys, other, payload = small(A, (3, 7), -4, 4), B.random(rng, (3, 7)), np.arange(21, dtype=np.int32).reshape(3, 7)
    got = run_kernels(sort_text(), [keys, other, payload], tmp_path / "s")
    for g, w in zip(got, sort_reference(keys, other, payload)):
        assert_same(g, w)
    x, y = A.random(rng, (4, 5)), B.random(rng, (4, 5))
    (got,) = run_kernels(MAP_TEXT, [x, y], tmp_path / "m")
    assert_same(got, map_reference(x, y))


def test_quantized_reductions_on_sim_sm_90(tmp_path):
    x = small(A, (4, 6))
    (tmp_path / "p.mlir").write_text(kernel_text())
    mlcc.compile(tmp_path / "p.mlir", tmp_path / "b", targets=["sm_90"])
    got = mlcc.load(tmp_path / "b", device="sim:sm_90").run({"arg0": x, "arg1": np.int8(-3)})
    for k, want in enumerate(kernel_reference(x)):
        assert_same(got[f"out{k}"], want)


# ---------------------------------------------------------------- bad input
def _compile(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    src = tmp_path / "bad.mlir"
    src.write_text(text)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[3]))
    return subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(src), "-o", str(tmp_path / "out"),
                           "--target", "none"], capture_output=True, text=True, env=env)


def test_a_reduce_with_a_product_body_is_unsupported_exit_69(tmp_path):
    t, s, r = qtensor((4,), A), qtensor((), A), qtensor((), A)
    text = program([t, s], [r], f"""
  %0 = "stablehlo.reduce"(%arg0, %arg1) ({{
{body(s, "stablehlo.multiply")}  }}) {{dimensions = array<i64: 0>}} : ({t}, {s}) -> {r}
  return %0 : {r}""")
    with pytest.raises(StableHLOUnsupportedError, match="a reduce of quantized elements whose body"):
        evaluate_text(text, [np.zeros(4, np.int8), np.int8(2)])
    r = _compile(tmp_path, text)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 69 and len(lines) == 1 and "bad.mlir:3:" in lines[0], r.stderr


def test_a_per_axis_quantized_reduce_operand_is_invalid_exit_65(tmp_path):
    q = Q("i8", [0.1, 0.2], [0, 0], dim=0)
    t, s, r = qtensor((2, 3), q), qtensor((), A), qtensor((2,), A)
    text = program([t, s], [r], f"""
  %0 = "stablehlo.reduce"(%arg0, %arg1) ({{
{body(s, "stablehlo.add")}  }}) {{dimensions = array<i64: 1>}} : ({t}, {s}) -> {r}
  return %0 : {r}""")
    with pytest.raises(StableHLOParseError, match="per-axis quantized"):
        evaluate_text(text, [np.zeros((2, 3), np.int8), np.int8(0)])
    r = _compile(tmp_path, text)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 65 and len(lines) == 1 and "per-axis quantized" in lines[0], r.stderr


def test_a_quantized_body_for_float_elements_is_invalid():
    t, s = "tensor<4xf32>", qtensor((), A)
    text = program([t, s], [s], f"""
  %0 = "stablehlo.reduce"(%arg0, %arg1) ({{
{body(s, "stablehlo.add")}  }}) {{dimensions = array<i64: 0>}} : ({t}, {s}) -> {s}
  return %0 : {s}""")
    with pytest.raises(StableHLOParseError, match="is_promotable"):
        evaluate_text(text, [np.zeros(4, np.float32), np.int8(0)])


def test_a_float_body_for_quantized_elements_is_invalid(tmp_path):
    t, s, r = qtensor((4,), A), qtensor((), A), "tensor<f32>"
    text = program([t, s], [r], f"""
  %0 = "stablehlo.reduce"(%arg0, %arg1) ({{
{body("tensor<f32>", "stablehlo.add")}  }}) {{dimensions = array<i64: 0>}} : ({t}, {s}) -> {r}
  return %0 : {r}""")
    r = _compile(tmp_path, text)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 65 and len(lines) == 1 and "is_promotable" in lines[0], r.stderr
