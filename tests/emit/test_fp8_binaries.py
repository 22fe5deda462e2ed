"""fp8 contractions run on sm_90's fp8 tensor cores: the SASS of an fp8 QDQ matmul and convolution, compiled ahead
of time for sm_80 and sm_90, holds QGMMA with E4M3 operands (sm_90's fp8 wgmma) on sm_90 and HMMA (f16 tensor
cores, the tiles upcast exactly) on sm_80; the same kernels match onnxruntime on CPU in both of their forms:
the CPU's (decoded to f16, as on sm_80) and sm_90's (tl.dot on float8e4nv tiles, sim:sm_90)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc
from mlcc.emit.target.binaries import nvidia_tool
from mlcc.inspect import binaries_summary

FP8 = TensorProto.FLOAT8E4M3FN


def fp8_model():
    """y = DQ(Q(a)) @ DQ(w), c = Conv(DQ(Q(x)), DQ(k)): e4m3fn activations and weights, per-tensor scales."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", FP8, [128, 64], (rng.standard_normal(128 * 64) * 16).tolist())
    k = helper.make_tensor("k", FP8, [64, 32, 3, 3], (rng.standard_normal(64 * 32 * 9) * 16).tolist())
    scalars = [numpy_helper.from_array(np.array(v, np.float32), n)
               for n, v in (("sa", 0.02), ("sw", 0.01), ("sx", 0.03), ("sk", 0.005))]
    zero = helper.make_tensor("z", FP8, [], [0.0])
    nodes = [helper.make_node("QuantizeLinear", ["a", "sa", "z"], ["aq"], name="qa"),
             helper.make_node("DequantizeLinear", ["aq", "sa", "z"], ["ad"], name="dqa"),
             helper.make_node("DequantizeLinear", ["w", "sw", "z"], ["wd"], name="dqw"),
             helper.make_node("MatMul", ["ad", "wd"], ["y"], name="mm"),
             helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["k", "sk", "z"], ["kd"], name="dqk"),
             helper.make_node("Conv", ["xd", "kd"], ["c"], name="conv", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "fp8", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [64, 128]),
                                             helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64]),
                               helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 64, 16, 16])],
                              [w, k, zero, *scalars])
    feed = {"a": rng.standard_normal((64, 128)).astype(np.float32),
            "x": rng.standard_normal((1, 32, 16, 16)).astype(np.float32)}
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), feed


@pytest.mark.slow  # AOT compiles for two targets and two runs under the interpreter: about 30 s on 2 cores
@pytest.mark.skipif(nvidia_tool("nvdisasm") is None, reason="needs nvdisasm (Triton's NVIDIA backend ships it)")
def test_fp8_matmul_and_convolution_use_fp8_wgmma_on_sm_90_and_match_onnxruntime(tmp_path):
    model, feed = fp8_model()
    r = mlcc.compile(model, tmp_path / "b", targets=["sm_80", "sm_90"])
    assert r.warnings == ["warning: sm_80 has no e4m3fn tensor cores: 2 fp8 contraction kernels multiply in f16 there "
                          "(exact: every e4m3 value is an f16 value; f32 sums)"]
    by_target = {}
    for row in binaries_summary(r.out_dir)["binaries"]:
        if row["template"] in ("matmul.py.jinja", "conv.py.jinja"):
            by_target.setdefault(row["target"], []).append(set(row["extra"]["matrix_opcodes"]))
    assert len(by_target["sm_90"]) == 2 and all(ops == {"QGMMA"} for ops in by_target["sm_90"])
    assert len(by_target["sm_80"]) == 2 and all(ops == {"HMMA"} for ops in by_target["sm_80"])
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    for device in ("cpu", "sim:sm_90"):  # the f16 decode (sm_80's form) and tl.dot on float8e4nv (sm_90's)
        got = mlcc.load(r.out_dir, device=device).run(feed)
        np.testing.assert_allclose(got["y"], ref[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["c"], ref[1], rtol=1e-5, atol=1e-5)
