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

from tests.frontend.stablehlo.quant_spec import Q, conv_nchw, ftensor, program, qtensor  # noqa: E402

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


CASES = {"quant_spec_examples": spec_examples, "quant_uniform": uniform, "quant_ops": ops}


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
