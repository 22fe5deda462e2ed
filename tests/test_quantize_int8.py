"""mlcc compile --quantize int8 --calibration F: the float encoder and CNN of tests/data/models/quant quantized by
mlcc against the same models quantized by onnxruntime's quantize_static (QDQ, per-channel, u8 activations, s8
weights, MinMax) on the same calibration samples: the same QDQ model, the parameters the formulas give for the
calibrated ranges, the same IR and launches as the imported quantize_static model, int8 contractions, and
outputs that match onnxruntime running that model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

import mlcc
from mlcc.errors import InputMissingError, InvalidInputError, UsageError
from mlcc.frontend.onnx.quantize_static import calibrate, load_calibration, quantize_static_int8

QUANT = Path(__file__).parent / "data" / "models" / "quant"
ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"encoder": (1, 16, 64), "cnn": (1, 3, 32, 32)}


def _samples(name: str, count: int = 4, seed: int = 11) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.standard_normal(SHAPES[name]).astype(np.float32) for _ in range(count)])


class _Reader(CalibrationDataReader):
    def __init__(self, xs: np.ndarray) -> None:
        self.it = iter([{"x": x} for x in xs])

    def get_next(self):
        return next(self.it, None)


@pytest.fixture(scope="module", params=["encoder", "cnn"])
def case(request, tmp_path_factory):
    """(name, calibration npz, onnxruntime's quantize_static model) for one float model."""
    name = request.param
    tmp = tmp_path_factory.mktemp(f"int8_{name}")
    xs = _samples(name)
    npz = tmp / "calib.npz"
    np.savez(npz, x=xs)
    ref = tmp / f"{name}_ort.onnx"
    quantize_static(str(QUANT / f"{name}.onnx"), str(ref), _Reader(xs), quant_format=QuantFormat.QDQ,
                    per_channel=True, reduce_range=False, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
    return name, npz, ref


def _inits(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def test_the_model_is_quantize_statics(case):
    name, npz, ref = case
    got = quantize_static_int8(onnx.load(QUANT / f"{name}.onnx"), npz)
    want = onnx.load(ref)
    assert [(n.op_type, list(n.input), list(n.output)) for n in got.graph.node] == \
           [(n.op_type, list(n.input), list(n.output)) for n in want.graph.node]
    g, w = _inits(got), _inits(want)
    assert g.keys() == w.keys()
    for k in w:
        assert g[k].dtype == w[k].dtype and np.array_equal(g[k], w[k]), k


def test_parameters_follow_the_minmax_formulas(case):
    """Activation scales/zero points from the calibrated ranges (u8 asymmetric, the range widened to hold 0) and
    per-channel s8 weights (symmetric, 2 max|w| / 254), computed here with numpy from the float model."""
    name, npz, _ = case
    model = onnx.shape_inference.infer_shapes(onnx.load(QUANT / f"{name}.onnx"))
    xs = np.load(npz)["x"]
    ranges = calibrate(model, load_calibration(npz, model))
    q = quantize_static_int8(onnx.load(QUANT / f"{name}.onnx"), npz)
    inits = _inits(q)
    floats = _inits(model)
    # the ranges: min and max over every sample of the tensor as onnxruntime computes it (optimizations off, as
    # its calibrator runs the model: a fused LayerNormalization differs in the last bit)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(QUANT / f"{name}.onnx"), so, providers=["CPUExecutionProvider"])
    y = np.stack([sess.run(None, {"x": x})[0] for x in xs])
    assert ranges["x"] == (xs.min(), xs.max())
    out = model.graph.output[0].name
    assert ranges[out] == (y.min(), y.max())
    checked_act = checked_w = 0
    softmax = {n.output[0] for n in model.graph.node if n.op_type == "Softmax"}
    for node in q.graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] in ranges and node.input[1] == f"{node.input[0]}_scale":
            # onnxruntime's rule: a Softmax output is quantized over [0, 1], whatever the calibration saw
            lo, hi = (0.0, 1.0) if node.input[0] in softmax else (np.float64(v) for v in ranges[node.input[0]])
            lo, hi = min(lo, 0.0), max(hi, 0.0)
            scale = (hi - lo) / 255.0
            assert inits[node.input[1]] == np.float32(scale), node.input[0]
            assert inits[node.input[2]].dtype == np.uint8 and inits[node.input[2]] == np.round(-lo / scale)
            checked_act += 1
        if node.op_type == "DequantizeLinear" and node.input[0].endswith("_quantized") and \
                inits[node.input[0]].dtype == np.int8 and inits[node.input[1]].ndim == 1:
            w = floats[node.input[0][:-len("_quantized")]]
            axis = next(a.i for a in node.attribute if a.name == "axis")
            absmax = np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(1).astype(np.float64)
            scale = (2 * absmax / 254).astype(np.float32)
            np.testing.assert_array_equal(inits[node.input[1]], scale)
            assert not inits[node.input[2]].any()
            shape = [1] * w.ndim
            shape[axis] = -1
            np.testing.assert_array_equal(inits[node.input[0]],
                                          np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8))
            checked_w += 1
    assert checked_act >= 5 and checked_w == {"encoder": 12, "cnn": 5}[name]


def test_bundle_is_the_imported_qdq_bundle_and_matches_onnxruntime(case, tmp_path):
    name, npz, ref = case
    ours = mlcc.compile(QUANT / f"{name}.onnx", tmp_path / "int8", targets=[], cache_dir="", quantize="int8",
                        calibration=str(npz))
    imported = mlcc.compile(ref, tmp_path / "qdq", targets=[], cache_dir="")
    assert len(ours.manifest["schedule"]) == len(imported.manifest["schedule"])
    text = (tmp_path / "int8" / "model.hlo").read_text()
    assert text.split("\n", 1)[1] == (tmp_path / "qdq" / "model.hlo").read_text().split("\n", 1)[1]
    assert (tmp_path / "int8" / "weights.bin").read_bytes() == (tmp_path / "qdq" / "weights.bin").read_bytes()
    int8_dots = re.findall(r"= s32\[[^\]]*\]\S* (?:dot|convolution)\(", text)
    assert len(int8_dots) >= {"encoder": 8, "cnn": 5}[name]
    x = np.load(QUANT / f"{name}.ref.npz")["x"]
    got = mlcc.load(tmp_path / "int8", device="cpu").run({"x": x})["y"]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(str(ref), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # Within 5 steps of the output's scale (measured: cnn 0, encoder 4 steps, 0.115). mlcc's int8 dots sum the
    # integer products exactly and then scale; onnxruntime, running each DQ -> MatMul -> Q as written, sums the
    # dequantized products in float. In the encoder one of the 1,024 values of the second layer's FFN matmul
    # (matmul_50) lands on the other side of a rounding boundary: one step there, which the residual add and
    # the two LayerNorms after it spread over the row and grow to 4 steps at the output.
    step = float(_inits(onnx.load(ref))["y_scale"])
    assert np.abs(got - want).max() <= 5 * step


def test_calibration_file_errors(tmp_path):
    model = onnx.load(QUANT / "cnn.onnx")
    with pytest.raises(InputMissingError, match="calib.npz"):
        load_calibration(tmp_path / "calib.npz", model)
    np.savez(tmp_path / "other.npz", y=np.zeros((1, 3, 32, 32), np.float32))
    with pytest.raises(InvalidInputError, match=r"other\.npz.*no array for input 'x'"):
        load_calibration(tmp_path / "other.npz", model)
    np.savez(tmp_path / "shape.npz", x=np.zeros((2, 3, 16, 16), np.float32))
    with pytest.raises(InvalidInputError, match=r"shape\.npz.*input 'x' has shape 2x3x16x16.*1x3x32x32"):
        load_calibration(tmp_path / "shape.npz", model)
    np.savez(tmp_path / "ok.npz", x=np.zeros((5, 1, 3, 32, 32), np.float32))
    assert len(load_calibration(tmp_path / "ok.npz", model)) == 5
    np.savez(tmp_path / "one.npz", x=np.zeros((1, 3, 32, 32), np.float32))
    assert len(load_calibration(tmp_path / "one.npz", model)) == 1
    with pytest.raises(UsageError, match="--calibration"):
        mlcc.compile(QUANT / "cnn.onnx", tmp_path / "b", targets=[], quantize="int8")


def test_samples_of_several_inputs_must_agree(tmp_path):
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("MatMul", ["s", "w"], ["y"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in "ab"],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    np.savez(tmp_path / "counts.npz", a=np.zeros((3, 2, 4), np.float32), b=np.zeros((2, 2, 4), np.float32))
    with pytest.raises(InvalidInputError, match=r"counts\.npz.*different numbers of samples: 'a' 3, 'b' 2"):
        load_calibration(tmp_path / "counts.npz", model)
    np.savez(tmp_path / "dtype.npz", a=np.zeros((2, 4), np.int64), b=np.zeros((2, 4), np.float32))
    with pytest.raises(InvalidInputError, match=r"dtype\.npz.*'a' is int64"):
        load_calibration(tmp_path / "dtype.npz", model)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "ok.npz", a=rng.standard_normal((3, 2, 4)).astype(np.float32),
             b=rng.standard_normal((2, 4)).astype(np.float32)[None].repeat(3, 0))
    samples = load_calibration(tmp_path / "ok.npz", model)
    assert len(samples) == 3 and samples[1]["a"].shape == (2, 4)
    ranges = calibrate(onnx.shape_inference.infer_shapes(model), samples)
    s = np.stack([x["a"] + x["b"] for x in samples])
    assert ranges["s"] == (s.min(), s.max())


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_cli_errors_are_one_line(tmp_path):
    np.savez(tmp_path / "bad.npz", z=np.zeros((1, 3, 32, 32), np.float32))
    r = _cli("compile", str(QUANT / "cnn.onnx"), "-o", str(tmp_path / "b"), "--target", "none", "--quantize", "int8",
             "--calibration", str(tmp_path / "bad.npz"))
    assert r.returncode == 65 and len(r.stderr.strip().splitlines()) == 1
    assert "bad.npz" in r.stderr and "'x'" in r.stderr
    r = _cli("compile", str(QUANT / "cnn.onnx"), "-o", str(tmp_path / "b"), "--target", "none", "--quantize", "int8")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--calibration" in r.stderr


def test_verify_reports_the_accuracy_change(tmp_path):
    np.savez(tmp_path / "calib.npz", x=_samples("cnn"))
    r = _cli("verify", str(QUANT / "cnn.onnx"), "--target", "none", "--quantize", "int8",
             "--calibration", str(tmp_path / "calib.npz"), "--inputs", str(QUANT / "cnn.ref.npz"))
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "--quantize int8" in ln)
    before, after = (float(v) for v in re.search(r"y (\S+) -> (\S+)", line).groups())
    assert before < 1e-4 < after < 0.5  # the float build matches onnxruntime; int8 changes the output a little
