"""StableHLO's quantized element types (``!quant.uniform``), uniform_quantize, uniform_dequantize and ops on
quantized tensors, against numpy implementations of the spec's formulas ("Quantization computations"):

    dequantize(x) = convert(x - zero_points, expressed) * scales
    quantize(x)   = convert(round_nearest_even(clamp(storage_min, x / scales + zero_points, storage_max)))

and the spec's own examples for uniform_quantize and uniform_dequantize with the results it states."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import mlcc
from tests.frontend.stablehlo.quant_spec import Q, conv_nchw, ftensor, program, qtensor
from tests.frontend.stablehlo.shlo_programs import assert_same, evaluate_text, run_kernels


def assert_kernels_match(got: np.ndarray, want: np.ndarray) -> None:
    """The kernels' integers against the spec's. The optimizer multiplies by 1/scale (algsimp's div-to-mul, as
    for ONNX QuantizeLinear) and the int8 contraction applies the scales after the integer sum, so a value
    within an f32 rounding of a half step may land one step away; no further, and rarely."""
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max() <= 1, (got, want)
    assert (diff != 0).mean() <= 0.05, (got, want)


# ---------------------------------------------------------------- the spec's examples, with its stated results
SPEC_Q = "!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>"


def test_spec_example_uniform_dequantize():
    text = program([f"tensor<2x{SPEC_Q}>"], ["tensor<2xf32>"], f"""
  %0 = "stablehlo.uniform_dequantize"(%arg0) : (tensor<2x{SPEC_Q}>) -> tensor<2xf32>
  return %0 : tensor<2xf32>""")
    (got,) = evaluate_text(text, [np.array([10, 10], np.int8)])
    assert_same(got, np.array([4.0, 15.0], np.float32))


def test_spec_example_uniform_quantize():
    text = program(["tensor<2xf32>"], [f"tensor<2x{SPEC_Q}>"], f"""
  %0 = "stablehlo.uniform_quantize"(%arg0) : (tensor<2xf32>) -> tensor<2x{SPEC_Q}>
  return %0 : tensor<2x{SPEC_Q}>""")
    (got,) = evaluate_text(text, [np.array([4.0, 15.0], np.float32)])
    assert_same(got, np.array([10, 10], np.int8))


def test_spec_example_requantize():
    out = "!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>"
    text = program([f"tensor<2x{SPEC_Q}>"], [f"tensor<2x{out}>"], f"""
  %0 = "stablehlo.uniform_quantize"(%arg0) : (tensor<2x{SPEC_Q}>) -> tensor<2x{out}>
  return %0 : tensor<2x{out}>""")
    (got,) = evaluate_text(text, [np.array([10, 10], np.int8)])
    assert_same(got, np.array([20, 45], np.int8))


# ---------------------------------------------------------------- quantize and dequantize
QUANTIZE_TYPES = {
    "per_tensor": Q("i8", [0.05], [-3]),
    "no_zero_point": Q("i8", [0.5], [0]),
    "storage_min_max": Q("i8", [0.1], [2], lo=-100, hi=100),
    "u8": Q("u8", [0.02], [128]),
    "i16": Q("i16", [0.001], [7]),
    "per_axis": Q("i8", [0.1, 0.25, 0.5], [-5, 0, 9], dim=1),
    "per_axis_min_max": Q("i8", [0.3, 0.02, 1.5], [1, -2, 0], dim=1, lo=-127, hi=127),
}


@pytest.mark.parametrize("name", sorted(QUANTIZE_TYPES))
def test_quantize_then_dequantize_match_the_spec_formulas(name):
    q = QUANTIZE_TYPES[name]
    rng = np.random.default_rng(1)
    # values that clamp at both ends, halves that round to even, and ordinary values
    x = np.concatenate([rng.normal(0, 20, (4, 3)), np.array([[1e6, -1e6, 0.0]]),
                        np.array([[0.25, 0.75, -1.25]]) * np.array(q.scales if q.dim is not None else q.scales * 3)
                        ]).astype(np.float32)
    qt = qtensor(x.shape, q)
    text = program([ftensor(x.shape)], [qt, ftensor(x.shape)], f"""
  %0 = stablehlo.uniform_quantize %arg0 : ({ftensor(x.shape)}) -> {qt}
  %1 = stablehlo.uniform_dequantize %0 : ({qt}) -> {ftensor(x.shape)}
  return %0, %1 : {qt}, {ftensor(x.shape)}""")
    got_q, got_f = evaluate_text(text, [x])
    want_q = q.quantize(x)
    assert_same(got_q, want_q, "quantize")
    assert got_q.min() >= q.lo and got_q.max() <= q.hi
    assert_same(got_f, q.dequantize(want_q), "dequantize")


def test_round_half_to_even_applies_after_the_zero_point():
    # 2.5 + 1 = 3.5 rounds to 4; rounding 2.5 first (to 2) and adding 1 would give 3
    q = Q("i8", [1.0], [1])
    x = np.array([2.5, 1.5, -0.5, -1.5], np.float32)
    text = program([ftensor((4,))], [qtensor((4,), q)], f"""
  %0 = stablehlo.uniform_quantize %arg0 : ({ftensor((4,))}) -> {qtensor((4,), q)}
  return %0 : {qtensor((4,), q)}""")
    (got,) = evaluate_text(text, [x])
    assert_same(got, np.array([4, 2, 0, 0], np.int8))
    assert_same(got, q.quantize(x))


@pytest.mark.parametrize("src,dst", [
    (Q("i8", [0.1], [-3]), Q("i8", [0.07], [5])),
    (Q("i8", [0.1, 0.2, 0.3], [1, 2, 3], dim=1), Q("u8", [0.05], [100])),
    (Q("u8", [0.5], [10]), Q("i8", [0.2, 0.4, 0.1], [0, 1, -1], dim=1, lo=-127, hi=127)),
])
def test_requantize_is_dequantize_then_quantize(src, dst):
    rng = np.random.default_rng(2)
    x = src.random(rng, (5, 3))
    text = program([qtensor(x.shape, src)], [qtensor(x.shape, dst)], f"""
  %0 = stablehlo.uniform_quantize %arg0 : ({qtensor(x.shape, src)}) -> {qtensor(x.shape, dst)}
  return %0 : {qtensor(x.shape, dst)}""")
    (got,) = evaluate_text(text, [x])
    assert_same(got, dst.quantize(src.dequantize(x)))


# ---------------------------------------------------------------- ops on quantized tensors
A = Q("i8", [0.05], [-3])
B = Q("i8", [0.08], [4])
OUT = Q("i8", [0.1], [2])


def _binary(op: str, fn):
    rng = np.random.default_rng(3)
    x, y = A.random(rng, (4, 6)), B.random(rng, (4, 6))
    ta, tb, to = qtensor(x.shape, A), qtensor(x.shape, B), qtensor(x.shape, OUT)
    text = program([ta, tb], [to], f"""
  %0 = stablehlo.{op} %arg0, %arg1 : ({ta}, {tb}) -> {to}
  return %0 : {to}""")
    (got,) = evaluate_text(text, [x, y])
    assert_same(got, OUT.quantize(fn(A.dequantize(x), B.dequantize(y))), op)


@pytest.mark.parametrize("op,fn", [("add", np.add), ("multiply", np.multiply), ("maximum", np.maximum),
                                   ("subtract", np.subtract), ("minimum", np.minimum)])
def test_elementwise_binary_ops_dequantize_compute_quantize(op, fn):
    _binary(op, fn)


def test_unary_op_with_a_different_result_type():
    rng = np.random.default_rng(4)
    x = A.random(rng, (3, 5))
    ta, to = qtensor(x.shape, A), qtensor(x.shape, OUT)
    text = program([ta], [to], f"""
  %0 = stablehlo.abs %arg0 : ({ta}) -> {to}
  return %0 : {to}""")
    (got,) = evaluate_text(text, [x])
    assert_same(got, OUT.quantize(np.abs(A.dequantize(x))))


def test_reshape_and_transpose_move_the_stored_integers():
    rng = np.random.default_rng(5)
    x = A.random(rng, (2, 3, 4))
    t0, t1, t2 = qtensor((2, 3, 4), A), qtensor((6, 4), A), qtensor((4, 6), A)
    text = program([t0], [t2], f"""
  %0 = stablehlo.reshape %arg0 : ({t0}) -> {t1}
  %1 = stablehlo.transpose %0, dims = [1, 0] : ({t1}) -> {t2}
  return %1 : {t2}""")
    (got,) = evaluate_text(text, [x])
    assert_same(got, x.reshape(6, 4).T)
    hlo = mlcc.frontend.stablehlo.import_stablehlo(text)
    assert not any(i.opcode in ("multiply", "divide") for i in hlo.entry.instructions)


def test_transpose_of_a_per_axis_tensor_moves_its_quantization_dim():
    q0 = Q("i8", [0.1, 0.2, 0.3], [1, 2, 3], dim=1)
    q1 = Q("i8", [0.1, 0.2, 0.3], [1, 2, 3], dim=0)
    rng = np.random.default_rng(6)
    x = q0.random(rng, (2, 3))
    t0, t1 = qtensor((2, 3), q0), qtensor((3, 2), q1)
    text = program([t0], [ftensor((3, 2))], f"""
  %0 = stablehlo.transpose %arg0, dims = [1, 0] : ({t0}) -> {t1}
  %1 = stablehlo.uniform_dequantize %0 : ({t1}) -> {ftensor((3, 2))}
  return %1 : {ftensor((3, 2))}""")
    (got,) = evaluate_text(text, [x])
    assert_same(got, q0.dequantize(x).T)


def test_reshape_to_other_parameters_requantizes():
    rng = np.random.default_rng(7)
    x = A.random(rng, (2, 6))
    t0, t1 = qtensor((2, 6), A), qtensor((3, 4), OUT)
    text = program([t0], [t1], f"""
  %0 = stablehlo.reshape %arg0 : ({t0}) -> {t1}
  return %0 : {t1}""")
    (got,) = evaluate_text(text, [x])
    assert_same(got, OUT.quantize(A.dequantize(x).reshape(3, 4)))


W = Q("i8", [0.02, 0.03, 0.015, 0.04, 0.025], [0, 0, 0, 0, 0], dim=1, lo=-127, hi=127)
ACC = Q("i8", [0.25], [-1])


def _dot_program():
    rng = np.random.default_rng(8)
    x, w = A.random(rng, (3, 8)), W.random(rng, (8, 5))
    tx, tw, to = qtensor(x.shape, A), qtensor(w.shape, W), qtensor((3, 5), ACC)
    text = program([tx, tw], [to], f"""
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : ({tx}, {tw}) -> {to}
  return %0 : {to}""")
    want = ACC.quantize(A.dequantize(x).astype(np.float64) @ W.dequantize(w).astype(np.float64))
    return text, [x, w], want


def test_dot_general_per_axis_weights():
    text, inputs, want = _dot_program()
    (got,) = evaluate_text(text, inputs)
    assert_same(got, want)


def test_dot_general_becomes_the_int8_dot_and_matches_in_the_kernels(tmp_path):
    text, inputs, want = _dot_program()
    (got,) = run_kernels(text, inputs, tmp_path)
    assert_kernels_match(got, want)
    hlo = (tmp_path / "bundle" / "model.hlo").read_text()
    dots = [line for line in hlo.splitlines() if " dot(" in line]
    assert dots and all("s32[" in line.split("=")[1].split("(")[0] for line in dots), dots


def test_hybrid_dot_general_float_lhs_quantized_rhs():
    rng = np.random.default_rng(9)
    x, w = rng.normal(size=(2, 8)).astype(np.float32), W.random(rng, (8, 5))
    tw = qtensor(w.shape, W)
    text = program([ftensor(x.shape), tw], [ftensor((2, 5))], f"""
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : ({ftensor(x.shape)}, {tw}) -> {ftensor((2, 5))}
  return %0 : {ftensor((2, 5))}""")
    (got,) = evaluate_text(text, [x, w])
    np.testing.assert_allclose(got, x @ W.dequantize(w), rtol=1e-5, atol=1e-5)


def test_convolution_per_channel_weights_becomes_the_int8_convolution(tmp_path):
    wq = Q("i8", [0.01, 0.02, 0.03, 0.015], [0, 0, 0, 0], dim=0)
    rng = np.random.default_rng(10)
    x, w = A.random(rng, (1, 3, 5, 5)), wq.random(rng, (4, 3, 3, 3))
    tx, tw, to = qtensor(x.shape, A), qtensor(w.shape, wq), qtensor((1, 4, 5, 5), ACC)
    text = program([tx, tw], [to], f"""
  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {{stride = [1, 1], pad = [[1, 1], [1, 1]]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : ({tx}, {tw}) -> {to}
  return %0 : {to}""")
    want = ACC.quantize(conv_nchw(A.dequantize(x).astype(np.float64), wq.dequantize(w).astype(np.float64), 1))
    (got,) = evaluate_text(text, [x, w])
    assert_same(got, want)
    (got,) = run_kernels(text, [x, w], tmp_path)
    assert_kernels_match(got, want)
    # the activation's zero point pads the integers (the border then dequantizes to 0): an s8 -> s32 convolution
    hlo = (tmp_path / "bundle" / "model.hlo").read_text()
    convs = [line for line in hlo.splitlines() if " convolution(" in line]
    assert convs and all("s32[" in line.split("=")[1].split("(")[0] for line in convs), convs


def test_a_quantized_constant_holds_storage_integers():
    q = Q("i8", [0.5], [1])
    tq = qtensor((3,), q)
    text = program([tq], [tq], f"""
  %c = "stablehlo.constant"() {{value = dense<[4, -2, 7]> : {tq}}} : () -> {tq}
  %0 = stablehlo.add %arg0, %c : ({tq}, {tq}) -> {tq}
  return %0 : {tq}""")
    x = np.array([3, 5, -9], np.int8)
    (got,) = evaluate_text(text, [x])
    assert_same(got, q.quantize(q.dequantize(x) + q.dequantize(np.array([4, -2, 7], np.int8))))


# ---------------------------------------------------------------- bundles and bad input
def test_a_bundle_takes_and_returns_storage_integers(tmp_path):
    rng = np.random.default_rng(11)
    x, y = A.random(rng, (4, 6)), B.random(rng, (4, 6))
    ta, tb, to = qtensor(x.shape, A), qtensor(x.shape, B), qtensor(x.shape, OUT)
    text = program([ta, tb], [to], f"""
  %0 = stablehlo.add %arg0, %arg1 : ({ta}, {tb}) -> {to}
  return %0 : {to}""")
    (got,) = run_kernels(text, [x, y], tmp_path)
    assert_kernels_match(got, OUT.quantize(A.dequantize(x) + B.dequantize(y)))
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert "s8" in json.dumps(manifest["inputs"]) and "s8" in json.dumps(manifest["outputs"])


@pytest.mark.parametrize("qtype,match", [
    ("!quant.uniform<i8:f32, 0.0:1>", "scale 0.0 of !quant.uniform<i8:f32, 0.0:1> is not a positive"),
    ("!quant.uniform<i8:f32, -0.5:1>", "scale -0.5 of"),
    ("!quant.uniform<i8:f32, 0.5:200>", "zero point 200 of"),
    ("!quant.uniform<i8<-10:10>:f32, 0.5:11>", "zero point 11 of"),
    ("!quant.uniform<i8<-200:10>:f32, 0.5:1>", "storage_min -200 of"),
    ("!quant.uniform<u8<0:300>:f32, 0.5:1>", "storage_max 300 of"),
])
def test_bad_quantized_type_is_one_line_exit_65_naming_the_value(tmp_path, qtype, match):
    src = tmp_path / "bad.mlir"
    src.write_text(program([f"tensor<2x{qtype}>"], ["tensor<2xf32>"], f"""
  %0 = stablehlo.uniform_dequantize %arg0 : (tensor<2x{qtype}>) -> tensor<2xf32>
  return %0 : tensor<2xf32>"""))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[3]))
    r = subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(src), "-o", str(tmp_path / "out"),
                        "--target", "none"], capture_output=True, text=True, env=env)
    assert r.returncode == 65, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0] and "bad.mlir:1:33:" in lines[0], r.stderr


def test_compare_and_select_on_quantized_tensors():
    # compare is the spec's dequantize_compare (different parameters compared as numbers); select moves integers
    rng = np.random.default_rng(12)
    x, y = A.random(rng, (3, 4)), B.random(rng, (3, 4))
    ta, tb = qtensor(x.shape, A), qtensor(x.shape, B)
    text = program([ta, tb, ta], [ta, "tensor<3x4xi1>"], f"""
  %0 = stablehlo.compare GT, %arg0, %arg1 : ({ta}, {tb}) -> tensor<3x4xi1>
  %1 = stablehlo.select %0, %arg0, %arg2 : tensor<3x4xi1>, {ta}
  return %1, %0 : {ta}, tensor<3x4xi1>""")
    z = A.random(rng, (3, 4))
    got, pred = evaluate_text(text, [x, y, z])
    want_pred = A.dequantize(x) > B.dequantize(y)
    assert_same(pred, want_pred)
    assert_same(got, np.where(want_pred, x, z))


def test_bitcast_convert_reads_the_storage_bits():
    q = Q("i8", [0.5], [1])
    tq = qtensor((4,), q)
    text = program([tq], ["tensor<4xui8>"], f"""
  %0 = stablehlo.bitcast_convert %arg0 : ({tq}) -> tensor<4xui8>
  return %0 : tensor<4xui8>""")
    x = np.array([-128, -1, 0, 127], np.int8)
    (got,) = evaluate_text(text, [x])
    assert_same(got, x.view(np.uint8))


def test_convert_of_a_quantized_tensor_is_invalid():
    tq = qtensor((4,), A)
    text = program([tq], ["tensor<4xf32>"], f"""
  %0 = stablehlo.convert %arg0 : ({tq}) -> tensor<4xf32>
  return %0 : tensor<4xf32>""")
    with pytest.raises(mlcc.frontend.stablehlo.StableHLOParseError, match="convert takes plain tensors only"):
        evaluate_text(text, [np.zeros(4, np.int8)])


@pytest.mark.parametrize("storage,zero", [("i4", -1), ("u4", 3)])
def test_4_bit_storage_with_a_bf16_expressed_type(tmp_path, storage, zero):
    # the values divide and shift exactly, so the spec's bf16 arithmetic and numpy's f32 reading agree
    q = Q(storage, [0.5], [zero], expressed="bf16")
    x = np.array([0.25, 0.75, -3.0, 100.0, -100.0, 1.25], ml_dtypes.bfloat16)
    tq, tf = qtensor((6,), q), ftensor((6,), "bf16")
    text = program([tf], [tq, tf], f"""
  %0 = stablehlo.uniform_quantize %arg0 : ({tf}) -> {tq}
  %1 = stablehlo.uniform_dequantize %0 : ({tq}) -> {tf}
  return %0, %1 : {tq}, {tf}""")
    want_q = q.quantize(x.astype(np.float32))
    want_f = q.dequantize(want_q).astype(ml_dtypes.bfloat16)
    for got_q, got_f in (evaluate_text(text, [x]), run_kernels(text, [x], tmp_path)):
        assert_same(got_q, want_q)
        assert_same(got_f, want_f)


def test_i32_storage_saturates_where_f32_cannot_hold_its_max():
    # 2^31 - 1 is 2^31 in f32, which no s32 holds: values past the top end at the largest f32 below it
    q = Q("i32", [1.0], [0])
    tq = qtensor((3,), q)
    text = program([ftensor((3,))], [tq], f"""
  %0 = stablehlo.uniform_quantize %arg0 : ({ftensor((3,))}) -> {tq}
  return %0 : {tq}""")
    (got,) = evaluate_text(text, [np.array([1e12, -1e12, 12345.5], np.float32)])
    assert_same(got, np.array([2147483520, -2147483648, 12346], np.int32))


def test_one_type_spelled_two_ways_is_one_type():
    # MLIR prints scales as 1.000000e-01; a hand-written program may say 0.1 for the same type
    text = program(["tensor<2x!quant.uniform<i8:f32, 1.000000e-01:-3>>"], ["tensor<2xf32>"], """
  %0 = stablehlo.uniform_dequantize %arg0 : (tensor<2x!quant.uniform<i8<-128:127>:f32, 0.1:-3>>) -> tensor<2xf32>
  return %0 : tensor<2xf32>""")
    (got,) = evaluate_text(text, [np.array([7, -3], np.int8)])
    assert_same(got, Q("i8", [0.1], [-3]).dequantize(np.array([7, -3], np.int8)))
