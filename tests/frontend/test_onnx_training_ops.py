"""ai.onnx.preview.training's optimizer updates (Adagrad, Adam, Momentum) against the ONNX reference
evaluator (onnxruntime's CPU build has no training ops): imported, verified, evaluated with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from mlcc.frontend.onnx import import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

RNG = np.random.default_rng(1)
DOMAIN = "ai.onnx.preview.training"


def _values(shape, n):
    return [RNG.uniform(-1, 1, shape).astype(np.float32) for _ in range(n)]


def _check(op: str, runs: int, tensors: int, attrs: dict, t: int) -> None:
    shapes = [(3,), (2, 4)][:tensors]
    feeds = {"R": np.float32(0.1), "T": np.int64(t)}
    names = []
    for k in range(runs):
        for i, shape in enumerate(shapes):
            name = f"in{k}_{i}"
            value = RNG.uniform(0.1 if k == runs - 1 and op in ("Adagrad", "Adam") else -1, 1, shape)
            feeds[name] = value.astype(np.float32)
            names.append(name)
    outputs = [f"out{j}" for j in range((runs - 1) * tensors)]
    node = helper.make_node(op, ["R", "T"] + names, outputs, domain=DOMAIN, **attrs)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                            np.asarray(v).shape) for n, v in feeds.items()]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT,
                                                                                  shapes[j % tensors])
                                                    for j, o in enumerate(outputs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)])
    want = ReferenceEvaluator(model).run(None, {k: np.asarray(v) for k, v in feeds.items()})
    module = import_onnx(model)
    verify_module(module)
    got = evaluate(module, {k: np.asarray(v) for k, v in feeds.items()})
    for name, w in zip(outputs, want):
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("tensors", [1, 2])
def test_adagrad(t, tensors):
    _check("Adagrad", 3, tensors, {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.01}, t)


@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("tensors", [1, 2])
def test_adam(t, tensors):
    _check("Adam", 4, tensors, {"alpha": 0.95, "beta": 0.1, "epsilon": 1e-7, "norm_coefficient": 0.001,
                                "norm_coefficient_post": 0.02}, t)


@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum(t, mode):
    _check("Momentum", 3, 2, {"alpha": 0.9, "beta": 0.3, "norm_coefficient": 0.02, "mode": mode}, t)
