"""Quantized ONNX ops (ops/qlinear.py) against onnxruntime, one node at a time.

Each model is imported, the quantized-contraction and fake-quant passes run (so the integer contractions are
what is evaluated), and the numpy evaluator's results are compared with onnxruntime's: integer outputs within
one quantization step (onnxruntime requantizes with a fixed-point multiplier, mlcc with the float scales: the
rounding of a value within an ulp of a half step can differ), floats within the scales' precision.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mlcc.frontend.onnx import UnsupportedFeatureError, import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.passes.quantized_dot import FoldFakeQuant, QuantizedContraction
from mlcc.hlo.verifier import verify_module

RNG = np.random.default_rng(3)
MS = "com.microsoft"


def u8(*dims):
    return RNG.integers(0, 256, dims).astype(np.uint8)


def s8(*dims):
    return RNG.integers(-127, 128, dims).astype(np.int8)


def f32(v):
    return np.asarray(v, np.float32)


def _run(op: str, inputs: list, attrs: dict | None = None, domain: str = "", outputs: int = 1, opset: int = 17):
    feeds, inits, names = {}, [], []
    for i, x in enumerate(inputs):
        if x is None:
            names.append("")
        elif isinstance(x, tuple):  # ("k", array): an initializer
            inits.append(numpy_helper.from_array(x[1], f"k{i}"))
            names.append(f"k{i}")
        else:
            feeds[f"x{i}"] = np.asarray(x)
            names.append(f"x{i}")
    outs = [f"y{j}" for j in range(outputs)]
    node = helper.make_node(op, names, outs, name=f"{op}_node", domain=domain, **(attrs or {}))
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                          a.shape) for n, a in feeds.items()],
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(MS, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip(outs, sess.run(outs, feeds)))
    for out, value in zip(model.graph.output, want.values()):
        out.CopyFrom(helper.make_tensor_value_info(out.name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
    module = import_onnx(model)
    QuantizedContraction().run(module)
    FoldFakeQuant().run(module)
    verify_module(module)
    return module, evaluate(module, feeds), want


def _close(got: dict, want: dict, atol: float = 1e-5) -> None:
    for name, w in want.items():
        g = got[name]
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol, err_msg=name)
        else:
            assert np.abs(g.astype(np.int64) - w.astype(np.int64)).max() <= 1, name


def _s32_contractions(module) -> int:
    return sum(1 for i in module.entry.instructions if i.opcode in ("dot", "convolution") and i.shape.dtype == "s32")


def test_qlinear_matmul_per_column_weights_is_an_int8_dot():
    k = ("k", s8(32, 16))
    m, got, want = _run("QLinearMatMul", [u8(4, 32), ("k", f32(0.02)), ("k", np.uint8(120)), k,
                                          ("k", f32(RNG.uniform(0.005, 0.02, 16))), ("k", np.zeros(16, np.int8)),
                                          ("k", f32(0.5)), ("k", np.uint8(128))], opset=21)
    _close(got, want)
    assert _s32_contractions(m) == 1


def test_matmul_integer_is_exact():
    a, b = u8(5, 64), s8(64, 7)
    m, got, want = _run("MatMulInteger", [a, b, np.uint8(37), None])
    np.testing.assert_array_equal(got["y0"], (a.astype(np.int64) - 37) @ b.astype(np.int64))
    _close(got, want)
    assert _s32_contractions(m) == 1


def test_qlinear_conv_with_bias_and_padding():
    x, w = u8(1, 4, 7, 7), ("k", s8(6, 4, 3, 3))
    m, got, want = _run("QLinearConv", [x, ("k", f32(0.03)), ("k", np.uint8(90)), w,
                                        ("k", f32(RNG.uniform(0.005, 0.02, 6))), ("k", np.zeros(6, np.int8)),
                                        ("k", f32(0.2)), ("k", np.uint8(100)),
                                        ("k", RNG.integers(-500, 500, 6).astype(np.int32))],
                        {"pads": [1, 1, 1, 1], "strides": [2, 2]})
    _close(got, want)
    assert _s32_contractions(m) == 1


def test_conv_integer_is_exact():
    x, w = u8(1, 3, 6, 6), s8(5, 3, 3, 3)
    m, got, want = _run("ConvInteger", [x, w, np.uint8(11)])
    np.testing.assert_array_equal(got["y0"], want["y0"])
    assert _s32_contractions(m) == 1


def test_dynamic_quantize_linear():
    x = (RNG.standard_normal((3, 10)) * 4).astype(np.float32)
    _, got, want = _run("DynamicQuantizeLinear", [x], outputs=3)
    np.testing.assert_allclose(got["y1"], want["y1"], rtol=1e-6)
    assert got["y2"] == want["y2"]
    _close(got, want)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary(op):
    _, got, want = _run(op, [u8(2, 8), f32(0.05), np.uint8(100), u8(8), f32(0.03), np.uint8(130), f32(0.1),
                             np.uint8(120)], domain=MS)
    _close(got, want)


@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1}),
                                      ("QLinearSoftmax", {"axis": -1, "opset": 13}),
                                      ("QLinearGlobalAveragePool", {"channels_last": 0})])
def test_qlinear_unary(op, attrs):
    x = u8(1, 3, 4, 5)
    scale = f32(1 / 256) if op == "QLinearSoftmax" else f32(0.05)
    _, got, want = _run(op, [x, f32(0.05), np.uint8(128), scale, np.uint8(0 if op == "QLinearSoftmax" else 128)],
                        attrs, domain=MS)
    _close(got, want)


def test_qlinear_concat():
    _, got, want = _run("QLinearConcat", [f32(0.1), np.uint8(128), u8(2, 3), f32(0.05), np.uint8(100), u8(2, 5),
                                          f32(0.2), np.uint8(140)], {"axis": 1}, domain=MS)
    _close(got, want)


def test_qgemm_with_bias_quantized_and_float_out():
    a, b = u8(3, 32), ("k", s8(10, 32))
    common = [a, ("k", f32(0.04)), ("k", np.uint8(110)), b, ("k", f32(RNG.uniform(0.005, 0.02, 10))),
              ("k", np.zeros(10, np.int8)), ("k", RNG.integers(-900, 900, 10).astype(np.int32))]
    m, got, want = _run("QGemm", common + [("k", f32(0.3)), ("k", np.uint8(128))], {"transB": 1}, domain=MS)
    _close(got, want)
    assert _s32_contractions(m) == 1
    _, got, want = _run("QGemm", common, {"transB": 1}, domain=MS)
    _close(got, want, atol=1e-4)


def test_matmul_integer_to_float_and_dynamic_quantize_matmul():
    b = ("k", s8(16, 8))
    m, got, want = _run("MatMulIntegerToFloat", [u8(4, 16), b, f32(0.03), ("k", f32(RNG.uniform(0.01, 0.02, 8))),
                                                 np.uint8(99), None, ("k", f32(RNG.standard_normal(8)))], domain=MS)
    _close(got, want, atol=1e-4)
    assert _s32_contractions(m) == 1
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    m, got, want = _run("DynamicQuantizeMatMul", [x, b, ("k", f32(RNG.uniform(0.01, 0.02, 8)))], domain=MS)
    _close(got, want, atol=1e-4)
    assert _s32_contractions(m) == 1


def test_a_float_input_to_a_quantized_op_is_unsupported():
    node = helper.make_node("MatMulInteger", ["a", "b"], ["y"], name="mmi")
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 3])],
                              [numpy_helper.from_array(s8(4, 3), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(UnsupportedFeatureError, match="mmi.*8-bit integers only"):
        import_onnx(model)
