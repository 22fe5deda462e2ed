"""Write the quantized programs of the StableHLO conformance set (JAX emits no quantized types, so
tools/gen_stablehlo_conformance.py cannot): tests/data/stablehlo/quant_*.mlir with NAME.ref.npz, whose outputs
are the spec's own stated results (quant_spec_examples) or numpy's reading of the spec's formulas
(tests/frontend/stablehlo/quant_spec.py).

    python tools/gen_stablehlo_quantized.py [OUT_DIR]

The scales of quant_uniform and quant_ops are powers of two, so every value the programs compute is exact in
f32 and the generated kernels (which multiply by 1/scale and apply contraction scales after the integer sum)
give the spec's integers exactly too; tests/frontend/stablehlo/test_quantized.py covers other scales.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.frontend.stablehlo.quant_spec import Q, conv_nchw, fold, ftensor, program, qtensor, step  # noqa: E402

_rng = np.random.default_rng(20261128)


def spec_examples() -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    """The examples of the spec's uniform_quantize and uniform_dequantize sections, with the results it states."""
    q1 = "tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>"
    q2 = "tensor<2x!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>>"
    text = program(["tensor<2xf32>", q1], [q1, "tensor<2xf32>", q2], f"""
  %0 = "stablehlo.uniform_quantize"(%arg0) : (tensor<2xf32>) -> {q1}
  %1 = "stablehlo.uniform_dequantize"(%arg1) : ({q1}) -> tensor<2xf32>
  %2 = "stablehlo.uniform_quantize"(%arg1) : ({q1}) -> {q2}
  return %0, %1, %2 : {q1}, tensor<2xf32>, {q2}""")
    inputs = [np.array([4.0, 15.0], np.float32), np.array([10, 10], np.int8)]
    return text, inputs, [np.array([10, 10], np.int8), np.array([4.0, 15.0], np.float32), np.array([20, 45], np.int8)]


def uniform() -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    """uniform_quantize per tensor, per axis with storage min/max, to u8 with storage min/max; dequantize;
    requantize per axis -> per tensor. The input has halves (round to even), and values past both ends."""
    shape = (6, 4)
    x = _rng.normal(0, 8, shape).astype(np.float32)
    x[0] = [0.0625 * 5, -0.125 * 3, 1e4, -1e4]
    pt = Q("i8", [0.125], [-3])
    pa = Q("i8", [0.25, 0.5, 0.125, 1.0], [0, 3, -2, 1], dim=1, lo=-127, hi=127)
    u8 = Q("u8", [0.0625], [128], lo=16, hi=240)
    rq = Q("i8", [0.5], [1])
    f, tpt, tpa, tu8, trq = ftensor(shape), qtensor(shape, pt), qtensor(shape, pa), qtensor(shape, u8), qtensor(shape, rq)
    text = program([f], [tpt, tpa, tu8, f, trq], f"""
  %0 = stablehlo.uniform_quantize %arg0 : ({f}) -> {tpt}
  %1 = stablehlo.uniform_quantize %arg0 : ({f}) -> {tpa}
  %2 = stablehlo.uniform_quantize %arg0 : ({f}) -> {tu8}
  %3 = stablehlo.uniform_dequantize %0 : ({tpt}) -> {f}
  %4 = stablehlo.uniform_quantize %1 : ({tpa}) -> {trq}
  return %0, %1, %2, %3, %4 : {tpt}, {tpa}, {tu8}, {f}, {trq}""")
    q0, q1 = pt.quantize(x), pa.quantize(x)
    return text, [x], [q0, q1, u8.quantize(x), pt.dequantize(q0), rq.quantize(pa.dequantize(q1))]


def ops() -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    """add, multiply, maximum, reshape + transpose, dot_general and convolution on quantized tensors."""
    a, b, out = Q("i8", [0.125], [-3]), Q("i8", [0.25], [4]), Q("i8", [0.5], [2])
    w = Q("i8", [0.0625, 0.125, 0.25, 0.03125, 0.5], [0] * 5, dim=1, lo=-127, hi=127)
    cw = Q("i8", [0.0625, 0.125, 0.03125], [0] * 3, dim=0)
    acc = Q("i8", [0.25], [-1])
    x, y, wv = a.random(_rng, (4, 6)), b.random(_rng, (4, 6)), w.random(_rng, (6, 5))
    cx, cwv = a.random(_rng, (1, 2, 5, 5)), cw.random(_rng, (3, 2, 3, 3))
    ta, tb, to, tw = qtensor((4, 6), a), qtensor((4, 6), b), qtensor((4, 6), out), qtensor((6, 5), w)
    tr, tt, td = qtensor((6, 4), a), qtensor((4, 6), a), qtensor((4, 5), acc)
    tcx, tcw, tco = qtensor((1, 2, 5, 5), a), qtensor((3, 2, 3, 3), cw), qtensor((1, 3, 5, 5), acc)
    text = program([ta, tb, tw, tcx, tcw], [to, to, to, tt, td, tco], f"""
  %0 = stablehlo.add %arg0, %arg1 : ({ta}, {tb}) -> {to}
  %1 = stablehlo.multiply %arg0, %arg1 : ({ta}, {tb}) -> {to}
  %2 = stablehlo.maximum %arg0, %arg1 : ({ta}, {tb}) -> {to}
  %3 = stablehlo.reshape %arg0 : ({ta}) -> {tr}
  %4 = stablehlo.transpose %3, dims = [1, 0] : ({tr}) -> {tt}
  %5 = stablehlo.dot_general %arg0, %arg2, contracting_dims = [1] x [0] : ({ta}, {tw}) -> {td}
  %6 = stablehlo.convolution(%arg3, %arg4) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {{stride = [1, 1], pad = [[1, 1], [1, 1]]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : ({tcx}, {tcw}) -> {tco}
  return %0, %1, %2, %4, %5, %6 : {to}, {to}, {to}, {tt}, {td}, {tco}""")
    fa, fb = a.dequantize(x), b.dequantize(y)
    outs = [out.quantize(fa + fb), out.quantize(fa * fb), out.quantize(np.maximum(fa, fb)), x.reshape(6, 4).T,
            acc.quantize(fa @ w.dequantize(wv)),
            acc.quantize(conv_nchw(a.dequantize(cx), cw.dequantize(cwv), 1).astype(np.float32))]
    return text, [x, y, wv, cx, cwv], outs


def _binary_region(s: str, opname: str) -> str:
    return (f"  ^bb0(%a: {s}, %b: {s}):\n    %r = {opname} %a, %b : ({s}, {s}) -> {s}\n"
            f"    stablehlo.return %r : {s}\n")


def regions() -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    """Ops with regions on quantized tensors: reduce (add, into a wider i32 body type), reduce_window (max),
    sort (a quantized comparator, an i32 payload moved along), scatter (add, an index twice), select_and_scatter
    (GE, add), map (multiply then add, each quantized) and a while loop carrying a quantized sum. The references
    apply each body step by step, left to right, each quantized step the spec's dequantize_op_quantize."""
    a, wide = Q("i8", [0.125], [-3]), Q("i32", [0.0625], [0])
    x = (_rng.integers(-12, 12, (4, 6)) - 3).astype(np.int8)
    y = (_rng.integers(-12, 12, (4, 6)) - 3).astype(np.int8)
    keys = (_rng.integers(-4, 4, (4, 6)) - 3).astype(np.int8)   # ties: the sort is stable
    payload = np.arange(24, dtype=np.int32).reshape(4, 6)
    idx = np.array([[2], [0], [2]], np.int32)
    t, s, r, w = qtensor((4, 6), a), qtensor((), a), qtensor((4,), wide), qtensor((3, 5), a)
    sw, u, ss = qtensor((), wide), qtensor((3, 6), a), qtensor((2, 3), a)
    ti, tp = "tensor<3x1xi32>", "tensor<4x6xi32>"
    dn = ("update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
          "index_vector_dim = 1")
    add, mx = _binary_region(s, "stablehlo.add"), _binary_region(s, "stablehlo.maximum")
    text = program([t, t, t, tp, ti, u], [r, w, t, tp, t, t, t, t], f"""
  %z = stablehlo.constant dense<-3> : {s}
  %zw = stablehlo.constant dense<0> : {sw}
  %lo = stablehlo.constant dense<-128> : {s}
  %0 = "stablehlo.reduce"(%arg0, %zw) ({{
{_binary_region(sw, "stablehlo.add")}  }}) {{dimensions = array<i64: 1>}} : ({t}, {sw}) -> {r}
  %1 = "stablehlo.reduce_window"(%arg0, %lo) <{{window_dimensions = array<i64: 2, 2>,
      window_strides = array<i64: 1, 1>}}> ({{
{mx}  }}) : ({t}, {s}) -> {w}
  %2:2 = "stablehlo.sort"(%arg2, %arg3) <{{dimension = 1 : i64, is_stable = true}}> ({{
  ^bb0(%p: {s}, %q: {s}, %i: tensor<i32>, %j: tensor<i32>):
    %c = stablehlo.compare LT, %p, %q : ({s}, {s}) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}) : ({t}, {tp}) -> ({t}, {tp})
  %3 = "stablehlo.scatter"(%arg0, %arg4, %arg5) <{{indices_are_sorted = false,
      scatter_dimension_numbers = #stablehlo.scatter<{dn}>, unique_indices = false}}> ({{
{add}  }}) : ({t}, {ti}, {u}) -> {t}
  %src = stablehlo.slice %arg1 [0:2, 0:3] : ({t}) -> {ss}
  %4 = "stablehlo.select_and_scatter"(%arg0, %src, %z) <{{window_dimensions = array<i64: 2, 2>,
      window_strides = array<i64: 2, 2>}}> ({{
  ^bb0(%p: {s}, %q: {s}):
    %c = stablehlo.compare GE, %p, %q : ({s}, {s}) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}, {{
{add}  }}) : ({t}, {ss}, {s}) -> {t}
  %5 = "stablehlo.map"(%arg0, %arg1) <{{dimensions = array<i64: 0, 1>}}> ({{
  ^bb0(%p: {s}, %q: {s}):
    %m = stablehlo.multiply %p, %q : ({s}, {s}) -> {s}
    %n = stablehlo.add %m, %p : ({s}, {s}) -> {s}
    stablehlo.return %n : {s}
  }}) : ({t}, {t}) -> {t}
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %6:2 = stablehlo.while(%k = %c0, %acc = %arg0) : tensor<i32>, {t}
   cond {{
    %lt = stablehlo.compare LT, %k, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }} do {{
    %n = stablehlo.add %acc, %arg1 : ({t}, {t}) -> {t}
    %k1 = stablehlo.add %k, %c1 : tensor<i32>
    stablehlo.return %k1, %n : tensor<i32>, {t}
  }}
  return %0, %1, %2#0, %2#1, %3, %4, %5, %6#1 : {r}, {w}, {t}, {tp}, {t}, {t}, {t}, {t}""")
    upd = (_rng.integers(-6, 6, (3, 6)) - 3).astype(np.int8)
    qadd, qmax, qmul = step(a, np.add), step(a, np.maximum), step(a, np.multiply)
    sums = np.array([fold(row, np.int32(0), step(wide, np.add)) for row in wide.quantize(a.dequantize(x))], np.int32)
    windows = np.array([[fold(x[i:i + 2, j:j + 2].ravel(), np.int8(-128), qmax) for j in range(5)] for i in range(3)])
    order = np.argsort(a.dequantize(keys), axis=1, kind="stable")
    scattered = x.copy()
    for k, i in enumerate(idx[:, 0]):
        scattered[i] = qadd(scattered[i], upd[k])
    selected = np.full(x.shape, np.int8(-3))
    for i, j in np.ndindex(2, 3):
        cells = [(2 * i + p, 2 * j + q) for p, q in np.ndindex(2, 2)]
        best = cells[0]
        for c in cells[1:]:
            if not a.dequantize(x[best]) >= a.dequantize(x[c]):
                best = c
        selected[best] = qadd(selected[best], y[i, j])
    mapped = qadd(qmul(x, y), x)
    looped = fold([y] * 3, x, qadd)
    outs = [sums, windows.astype(np.int8), np.take_along_axis(keys, order, 1), np.take_along_axis(payload, order, 1),
            scattered, selected, mapped, looped]
    return text, [x, y, keys, payload, idx, upd], outs


CASES = {"quant_spec_examples": spec_examples, "quant_uniform": uniform, "quant_ops": ops, "quant_regions": regions}


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, make in CASES.items():
        text, inputs, outputs = make()
        (out_dir / f"{name}.mlir").write_text(text)
        arrays = {f"arg{i}": v for i, v in enumerate(inputs)} | {f"out{i}": v for i, v in enumerate(outputs)}
        np.savez(out_dir / f"{name}.ref.npz", **arrays)
        print(f"{name}: {len(inputs)} inputs, {len(outputs)} outputs")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "stablehlo")
