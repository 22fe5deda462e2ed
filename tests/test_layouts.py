"""Layouts seen from a whole model: a transpose feeding a matmul is a change of layout, not a kernel."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc


def _transposed_matmul_model(transpose_weight: bool, transpose_activation: bool) -> onnx.ModelProto:
    """y = (x or xᵀ) @ (w or wᵀ), with x [8, 12] (or [12, 8] before its transpose) and w [12, 16] (or [16, 12])."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x_shape = [12, 8] if transpose_activation else [8, 12]
    a = "x"
    if transpose_activation:
        nodes.append(helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0], name="transpose_x"))
        a = "xt"
    w = rng.standard_normal((16, 12) if transpose_weight else (12, 16)).astype(np.float32)
    inits.append(numpy_helper.from_array(w, "w"))
    b = "w"
    if transpose_weight:
        nodes.append(helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0], name="transpose_w"))
        b = "wt"
    nodes.append(helper.make_node("MatMul", [a, b], ["y"], name="matmul"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("transpose_weight,transpose_activation", [(True, False), (False, True), (True, True)],
                         ids=["weight", "activation", "both"])
def test_matmul_fed_by_a_transpose_launches_no_transpose_kernel(tmp_path, transpose_weight, transpose_activation):
    model = _transposed_matmul_model(transpose_weight, transpose_activation)
    result = mlcc.compile(model, tmp_path / "b", targets=[])
    schedule = result.manifest["schedule"]
    assert len(schedule) == 1, [s["kernel"] for s in schedule]  # the matmul alone: its operands read through strides
    kernel = next(k for k in result.manifest["kernels"] if k["name"] == schedule[0]["kernel"])
    assert "matmul" in kernel["ops"]
    x_shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": x})["y"]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
