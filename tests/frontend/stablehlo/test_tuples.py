"""Tuples in StableHLO text (tuple, get_tuple_element, tuple-typed arguments, results and while/if/case/call
operands), flattened at import: each program checked against numpy, through the evaluator and the kernels."""

from __future__ import annotations

import numpy as np
import pytest
from shlo_programs import assert_same, evaluate_text, run_kernels

from mlcc.frontend.stablehlo import StableHLOParseError, import_stablehlo

NESTED = """module @m {
  func.func public @main(%arg0: tuple<tensor<2xf32>, tensor<f32>>, %arg1: tensor<2xf32>)
      -> (tuple<tensor<2xf32>, tuple<tensor<f32>, tensor<2xf32>>>, tensor<2xf32>) {
    %0 = stablehlo.get_tuple_element %arg0[0] : (tuple<tensor<2xf32>, tensor<f32>>) -> tensor<2xf32>
    %1 = stablehlo.get_tuple_element %arg0[1] : (tuple<tensor<2xf32>, tensor<f32>>) -> tensor<f32>
    %2 = stablehlo.add %0, %arg1 : tensor<2xf32>
    %3 = stablehlo.tuple %1, %2 : tuple<tensor<f32>, tensor<2xf32>>
    %4 = stablehlo.tuple %2, %3 : tuple<tensor<2xf32>, tuple<tensor<f32>, tensor<2xf32>>>
    %5 = "stablehlo.get_tuple_element"(%4) <{index = 1 : i32}> : (tuple<tensor<2xf32>, tuple<tensor<f32>, tensor<2xf32>>>) -> tuple<tensor<f32>, tensor<2xf32>>
    %6 = stablehlo.get_tuple_element %5[1] : (tuple<tensor<f32>, tensor<2xf32>>) -> tensor<2xf32>
    %7 = stablehlo.multiply %6, %0 : tensor<2xf32>
    return %4, %7 : tuple<tensor<2xf32>, tuple<tensor<f32>, tensor<2xf32>>>, tensor<2xf32>
  }
}
"""


def test_nested_tuples_flatten_depth_first():
    a, s, b = np.array([1.5, -2.0], np.float32), np.array(3.0, np.float32), np.array([0.25, 4.0], np.float32)
    module = import_stablehlo(NESTED)
    assert [p.attrs["name"] for p in module.entry.parameters()] == ["arg0", "arg1", "arg2"]
    assert module.output_names == ["out0", "out1", "out2", "out3"]
    got = evaluate_text(NESTED, [a, s, b])
    want = [a + b, s, a + b, (a + b) * a]
    for g, w in zip(got, want):
        assert_same(g, w, "evaluator")


# a fori loop over a tuple carry, as older JAX (and XLA's HLO-to-StableHLO) writes it
WHILE = """module @m {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %t = stablehlo.tuple %c0, %arg0 : tuple<tensor<i32>, tensor<4xf32>>
    %w = stablehlo.while(%it = %t) : tuple<tensor<i32>, tensor<4xf32>>
    cond {
      %i = stablehlo.get_tuple_element %it[0] : (tuple<tensor<i32>, tensor<4xf32>>) -> tensor<i32>
      %n = stablehlo.constant dense<5> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %i = stablehlo.get_tuple_element %it[0] : (tuple<tensor<i32>, tensor<4xf32>>) -> tensor<i32>
      %x = stablehlo.get_tuple_element %it[1] : (tuple<tensor<i32>, tensor<4xf32>>) -> tensor<4xf32>
      %r = func.call @step(%x) : (tensor<4xf32>) -> tuple<tensor<4xf32>>
      %y = stablehlo.get_tuple_element %r[0] : (tuple<tensor<4xf32>>) -> tensor<4xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %u = stablehlo.tuple %j, %y : tuple<tensor<i32>, tensor<4xf32>>
      stablehlo.return %u : tuple<tensor<i32>, tensor<4xf32>>
    }
    %out = stablehlo.get_tuple_element %w[1] : (tuple<tensor<i32>, tensor<4xf32>>) -> tensor<4xf32>
    return %out : tensor<4xf32>
  }
  func.func private @step(%arg0: tensor<4xf32>) -> tuple<tensor<4xf32>> {
    %h = stablehlo.constant dense<5.000000e-01> : tensor<4xf32>
    %m = stablehlo.multiply %arg0, %h : tensor<4xf32>
    %a = stablehlo.add %m, %h : tensor<4xf32>
    %t = stablehlo.tuple %a : tuple<tensor<4xf32>>
    return %t : tuple<tensor<4xf32>>
  }
}
"""


def test_while_over_a_tuple_carry_with_a_call_returning_a_tuple(tmp_path):
    x = np.array([1.0, -3.0, 8.0, 0.5], np.float32)
    want = x.copy()
    for _ in range(5):
        want = want * np.float32(0.5) + np.float32(0.5)
    assert_same(evaluate_text(WHILE, [x])[0], want, "evaluator")
    assert_same(run_kernels(WHILE, [x], tmp_path)[0], want, "kernels")


# if and case whose results (and branch returns) are tuples
BRANCHES = """module @m {
  func.func public @main(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<3xf32>) -> (tuple<tensor<3xf32>, tensor<f32>>, tensor<3xf32>) {
    %0 = "stablehlo.if"(%arg0) ({
      %c = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<3xf32>
      %m = stablehlo.multiply %arg2, %b : tensor<3xf32>
      %t = stablehlo.tuple %m, %c : tuple<tensor<3xf32>, tensor<f32>>
      stablehlo.return %t : tuple<tensor<3xf32>, tensor<f32>>
    }, {
      %c = stablehlo.constant dense<-1.000000e+00> : tensor<f32>
      %n = stablehlo.negate %arg2 : tensor<3xf32>
      %t = stablehlo.tuple %n, %c : tuple<tensor<3xf32>, tensor<f32>>
      stablehlo.return %t : tuple<tensor<3xf32>, tensor<f32>>
    }) : (tensor<i1>) -> tuple<tensor<3xf32>, tensor<f32>>
    %1 = "stablehlo.case"(%arg1) ({
      %e = stablehlo.exponential %arg2 : tensor<3xf32>
      %t = stablehlo.tuple %e : tuple<tensor<3xf32>>
      stablehlo.return %t : tuple<tensor<3xf32>>
    }, {
      %a = stablehlo.abs %arg2 : tensor<3xf32>
      %t = stablehlo.tuple %a : tuple<tensor<3xf32>>
      stablehlo.return %t : tuple<tensor<3xf32>>
    }) : (tensor<i32>) -> tuple<tensor<3xf32>>
    %2 = stablehlo.get_tuple_element %1[0] : (tuple<tensor<3xf32>>) -> tensor<3xf32>
    return %0, %2 : tuple<tensor<3xf32>, tensor<f32>>, tensor<3xf32>
  }
}
"""


@pytest.mark.parametrize("pred, index", [(True, 0), (False, 1), (True, 7)])
def test_if_and_case_with_tuple_results(tmp_path, pred, index):
    x = np.array([0.5, -1.25, 2.0], np.float32)
    args = [np.array(pred), np.array(index, np.int32), x]
    first = (x * 2, np.float32(2.0)) if pred else (-x, np.float32(-1.0))
    second = np.exp(x) if index == 0 else np.abs(x)  # an index out of range takes the last branch
    got = evaluate_text(BRANCHES, args)
    assert len(got) == 3
    assert_same(got[0], first[0], "evaluator")
    assert_same(got[1], np.array(first[1]), "evaluator")
    np.testing.assert_allclose(got[2], second, rtol=1e-6)
    if index == 0:
        kernels = run_kernels(BRANCHES, args, tmp_path)
        assert_same(kernels[0], first[0], "kernels")
        np.testing.assert_allclose(kernels[2], second, rtol=1e-6)


def test_get_tuple_element_out_of_range_is_an_error():
    text = NESTED.replace("%arg0[1] :", "%arg0[2] :")
    message = r"get_tuple_element: index 2 is outside tuple<tensor<2xf32>, tensor<f32>>"
    with pytest.raises(StableHLOParseError, match=message):
        import_stablehlo(text)
