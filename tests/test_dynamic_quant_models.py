"""onnxruntime's quantize_dynamic form, DynamicQuantizeLinear -> MatMulInteger (-> the a_scale * b_scale Mul and
a bias), compiled into one kernel: the integer dot quantizes its A tiles as it loads them and computes the
activation's min and max in a first pass of its own (mlcc/hlo/passes/a_prologue.py quantized_rows_cone,
mlcc/hlo/passes/dynamic_quant.py). The s32 result is exact, so it equals onnxruntime's only if every u8 value
rounds the same (round half to even, the zero point saturated), on CPU and on sim:sm_90."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import mlcc

RNG = np.random.default_rng(18)
W = RNG.integers(-127, 128, (32, 16)).astype(np.int8)
W_SCALE = RNG.uniform(0.01, 0.05, 16).astype(np.float32)
BIAS = RNG.normal(size=16).astype(np.float32)


def _model(dequantize: bool) -> onnx.ModelProto:
    nodes = [h.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             h.make_node("MatMulInteger", ["xq", "w", "xz"], ["acc"])]
    inits = [numpy_helper.from_array(W, "w")]
    out = h.make_tensor_value_info("acc", T.INT32, [1, 8, 16])
    if dequantize:  # what quantize_dynamic writes after each MatMulInteger, then the layer's bias
        nodes += [h.make_node("Cast", ["acc"], ["accf"], to=T.FLOAT), h.make_node("Mul", ["xs", "ws"], ["s"]),
                  h.make_node("Mul", ["accf", "s"], ["yd"]), h.make_node("Add", ["yd", "b"], ["y"])]
        inits += [numpy_helper.from_array(W_SCALE, "ws"), numpy_helper.from_array(BIAS, "b")]
        out = h.make_tensor_value_info("y", T.FLOAT, [1, 8, 16])
    graph = h.make_graph(nodes, "dyn", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 32])], [out], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


def _inputs() -> dict[str, np.ndarray]:
    ties = np.zeros((1, 8, 32), np.float32)  # range [0, 127.5]: scale 0.5, and x / scale = k + 0.5 at 0.25, 0.75, ...
    ties[0, :, :] = (np.arange(256, dtype=np.float32).reshape(8, 32) % 256) * 0.25
    ties[0, 0, 0] = 127.5
    return {"normal": RNG.normal(size=(1, 8, 32)).astype(np.float32),
            "positive": RNG.uniform(0.5, 3.0, (1, 8, 32)).astype(np.float32),    # the range is widened to 0
            "negative": -RNG.uniform(0.5, 3.0, (1, 8, 32)).astype(np.float32),   # zero point 255
            "ties": ties}


def _launches(out) -> int:
    return len(json.loads((out / "manifest.json").read_text())["schedule"])


@pytest.mark.parametrize("dequantize", [False, True])
def test_dynamic_quantize_and_matmul_integer_are_one_kernel_matching_onnxruntime(tmp_path, dequantize):
    model = _model(dequantize)
    mlcc.compile(model, tmp_path / "b", targets=[])
    # before: a min reduction, a max reduction, the quantize and the dot (and the scale Mul and bias: 5)
    assert _launches(tmp_path / "b") == 1
    exe = mlcc.load(tmp_path / "b", device="cpu")
    out = "y" if dequantize else "acc"
    for name, x in _inputs().items():
        got, want = exe.run({"x": x})[out], _ort(model, x)
        if dequantize:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)  # every u8 value rounds the same


def test_dynamic_quantize_matches_onnxruntime_on_sim_sm_90(tmp_path):
    # the sm_90 binaries' launch configs (their tiles), run under the interpreter
    model = _model(False)
    mlcc.compile(model, tmp_path / "b", targets=["sm_90"])
    exe = mlcc.load(tmp_path / "b", device="sim:sm_90")
    for name, x in _inputs().items():
        np.testing.assert_array_equal(exe.run({"x": x})["acc"], _ort(model, x), err_msg=name)


def test_a_scale_read_by_another_output_keeps_its_own_min_max_kernels(tmp_path):
    # the scale is a model output too: the min and max are stored for it, and the dot reads them (still
    # quantizing its A tiles as it loads them)
    model = _model(False)
    model.graph.output.append(h.make_tensor_value_info("xs", T.FLOAT, []))
    mlcc.compile(model, tmp_path / "b", targets=[])
    assert _launches(tmp_path / "b") == 4  # min, max, the scale output, the dot (5 before: the quantize too)
    x = _inputs()["normal"]
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    acc, xs = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": x})
    np.testing.assert_array_equal(got["acc"], acc)
    np.testing.assert_array_equal(got["xs"], xs)
