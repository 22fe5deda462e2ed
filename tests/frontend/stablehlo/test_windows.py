"""select_and_scatter and reduce_window with bodies JAX's gradients do not emit, against numpy loops over the
windows (padding left out of every window, as in XLA)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from shlo_programs import assert_same, evaluate_text, module_text, run_kernels, tensor

rng = np.random.default_rng(5)


def select_and_scatter_reference(operand, source, init, window, strides, low, keep, combine):
    result = np.full(operand.shape, init, operand.dtype)
    for s in itertools.product(*[range(n) for n in source.shape]):
        chosen = None
        for w in itertools.product(*[range(n) for n in window]):
            index = tuple(si * st + wi - lo for si, st, wi, lo in zip(s, strides, w, low))
            if any(not 0 <= i < n for i, n in zip(index, operand.shape)):
                continue
            if chosen is None or not keep(operand[chosen], operand[index]):
                chosen = index
        if chosen is not None:
            result[chosen] = combine(result[chosen], source[s])
    return result


SELECT = {"GE": lambda a, b: a >= b, "GT": lambda a, b: a > b, "LT": lambda a, b: a < b}
COMBINE = {"add": ("stablehlo.add", np.add), "max": ("stablehlo.maximum", np.maximum),
           "mul": ("stablehlo.multiply", np.multiply)}


@pytest.mark.parametrize("direction, combine, padding", [("GE", "add", ((0, 0), (0, 0))),
                                                         ("GT", "max", ((1, 0), (0, 2))),
                                                         ("LT", "mul", ((1, 1), (1, 1)))])
def test_select_and_scatter(tmp_path, direction, combine, padding):
    operand = np.round(rng.uniform(-3, 3, (5, 6))).astype(np.float32)  # ties exercise the select order
    window, strides = (2, 3), (2, 2)
    low = tuple(p[0] for p in padding)
    out = [(n + lo + hi - w) // s + 1 for n, (lo, hi), w, s in zip(operand.shape, padding, window, strides)]
    source = rng.uniform(0.5, 2, out).astype(np.float32)
    init = np.float32(1.0 if combine == "mul" else 0.0)
    to, ts, s = tensor(operand.shape, np.float32), tensor(source.shape, np.float32), tensor((), np.float32)
    pad = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
    body = (f'    %i = stablehlo.constant dense<{float(init)}> : {s}\n'
            f'    %0 = "stablehlo.select_and_scatter"(%arg0, %arg1, %i) <{{padding = dense<[{pad}]> : tensor<2x2xi64>, '
            f'window_dimensions = array<i64: 2, 3>, window_strides = array<i64: 2, 2>}}> ({{\n'
            f'    ^bb0(%a: {s}, %b: {s}):\n'
            f'      %c = stablehlo.compare {direction}, %a, %b : ({s}, {s}) -> tensor<i1>\n'
            f'      stablehlo.return %c : tensor<i1>\n    }}, {{\n    ^bb0(%a: {s}, %b: {s}):\n'
            f'      %r = {COMBINE[combine][0]} %a, %b : {s}\n      stablehlo.return %r : {s}\n'
            f'    }}) : ({to}, {ts}, {s}) -> {to}\n    return %0 : {to}')
    text = module_text([operand, source], [(operand.shape, np.float32)], body)
    want = select_and_scatter_reference(operand, source, init, window, strides, low, SELECT[direction],
                                        COMBINE[combine][1])
    assert_same(evaluate_text(text, [operand, source])[0], want)
    assert_same(run_kernels(text, [operand, source], tmp_path)[0], want)


def test_reduce_window_general_body_with_base_dilation(tmp_path):
    """A body no IR reduction has (max of |a| and |b|), base and window dilation, padding and strides."""
    x = rng.uniform(-3, 3, (4, 5)).astype(np.float32)
    window, strides, base, dil, padding = (2, 2), (1, 2), (2, 1), (1, 2), ((1, 0), (0, 1))
    size = [(n - 1) * b + 1 + lo + hi for n, b, (lo, hi) in zip(x.shape, base, padding)]
    out = [(n - (w - 1) * d - 1) // s + 1 for n, w, d, s in zip(size, window, dil, strides)]
    want = np.full(out, np.float32(0.25))
    for o in itertools.product(*[range(n) for n in out]):
        for w in itertools.product(*[range(n) for n in window]):
            p = [oi * st + wi * di - lo for oi, st, wi, di, (lo, _) in zip(o, strides, w, dil, padding)]
            if all(pi % b == 0 and 0 <= pi // b < n for pi, b, n in zip(p, base, x.shape)):
                want[o] = max(abs(want[o]), abs(x[tuple(pi // b for pi, b in zip(p, base))]))
    t, s, r = tensor(x.shape, np.float32), tensor((), np.float32), tensor(out, np.float32)
    pad = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
    body = (f'    %i = stablehlo.constant dense<0.25> : {s}\n'
            f'    %0 = "stablehlo.reduce_window"(%arg0, %i) <{{base_dilations = array<i64: 2, 1>, '
            f'padding = dense<[{pad}]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 2>, '
            f'window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 1, 2>}}> ({{\n'
            f'    ^bb0(%a: {s}, %b: {s}):\n      %p = stablehlo.abs %a : {s}\n      %q = stablehlo.abs %b : {s}\n'
            f'      %m = stablehlo.maximum %p, %q : {s}\n      stablehlo.return %m : {s}\n'
            f'    }}) : ({t}, {s}) -> {r}\n    return %0 : {r}')
    text = module_text([x], [(tuple(out), np.float32)], body)
    assert_same(evaluate_text(text, [x])[0], want)
    assert_same(run_kernels(text, [x], tmp_path)[0], want)
