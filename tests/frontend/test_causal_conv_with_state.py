"""CausalConvWithState beyond the node suite: kernel sizes on both sides of the unrolled-taps limit, past state,
bias, SiLU and f16 against onnxruntime; the kernels under Triton's interpreter; a decode loop whose carried
state reproduces one call over the whole sequence; inconsistent shapes a one-line error naming the node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import mlcc
import mlcc.backend
from mlcc.frontend.onnx import InvalidModelError, import_onnx
from mlcc.frontend.onnx.ops.causal_conv import MAX_UNROLLED_TAPS
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

NAMES = ("x", "w", "b", "past")


def _model(shapes: dict[str, tuple[int, ...]], dtype: int = TensorProto.FLOAT, name: str = "ccs",
           **attrs) -> onnx.ModelProto:
    names = [n if n in shapes else "" for n in NAMES]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("CausalConvWithState", names, ["y", "state"], name=name, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, dtype, s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info("y", dtype, [None] * 3),
                               helper.make_tensor_value_info("state", dtype, [None] * 3)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)], ir_version=10)


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _feeds(rng, batch: int, channels: int, length: int, k: int, bias: bool, past: bool,
           dtype=np.float32) -> dict[str, np.ndarray]:
    feeds = {"x": rng.standard_normal((batch, channels, length)), "w": rng.standard_normal((channels, 1, k))}
    if bias:
        feeds["b"] = rng.standard_normal(channels)
    if past:
        feeds["past"] = rng.standard_normal((batch, channels, k - 1))
    return {n: v.astype(dtype) for n, v in feeds.items()}


CASES = {  # id: (batch, channels, length, k, bias, past, activation)
    "k4-bias-past-silu": (2, 6, 9, 4, True, True, "silu"),
    "k3-no-state-short-input": (1, 3, 1, 3, False, False, "none"),
    "k1": (2, 2, 5, 1, True, False, "swish"),
    f"k{MAX_UNROLLED_TAPS + 4}-convolution": (2, 5, 7, MAX_UNROLLED_TAPS + 4, True, True, "silu"),
    f"k{MAX_UNROLLED_TAPS}-longest-unrolled": (1, 4, 12, MAX_UNROLLED_TAPS, False, True, "none"),
}


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_causal_conv_matches_onnxruntime(case_id: str) -> None:
    batch, channels, length, k, bias, past, activation = CASES[case_id]
    feeds = _feeds(np.random.default_rng(0), batch, channels, length, k, bias, past)
    model = _model({n: v.shape for n, v in feeds.items()}, activation=activation)
    want = _ort(model, feeds)
    module = import_onnx(model)
    verify_module(module)
    got = evaluate(module, feeds)
    for name, w in zip(("y", "state"), want):
        assert got[name].shape == w.shape and got[name].dtype == w.dtype, name
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("k", [4, MAX_UNROLLED_TAPS + 2])
def test_causal_conv_kernels_match_onnxruntime(k: int) -> None:
    """Both lowerings (the unrolled taps, the convolution), their kernels run by Triton's interpreter."""
    feeds = _feeds(np.random.default_rng(k), 2, 8, 6, k, True, True)
    model = _model({n: v.shape for n, v in feeds.items()}, activation="silu")
    want = _ort(model, feeds)
    got = mlcc.backend.prepare(model).run(feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_causal_conv_in_f16_matches_onnxruntime() -> None:
    feeds = _feeds(np.random.default_rng(5), 1, 4, 10, 4, True, True, np.float16)
    model = _model({n: v.shape for n, v in feeds.items()}, TensorProto.FLOAT16, activation="silu")
    want = _ort(model, feeds)
    got = evaluate(import_onnx(model), feeds)
    np.testing.assert_array_equal(got["state"], want[1])
    assert got["y"].dtype == np.float16
    np.testing.assert_allclose(got["y"].astype(np.float32), want[0].astype(np.float32), rtol=2e-3, atol=2e-3)


def test_a_decode_loop_carrying_the_state_equals_one_call_over_the_sequence() -> None:
    rng = np.random.default_rng(7)
    whole = _feeds(rng, 2, 3, 7, 4, True, True)
    one_call = evaluate(import_onnx(_model({n: v.shape for n, v in whole.items()})), whole)
    step = import_onnx(_model({"x": (2, 3, 1), "w": (3, 1, 4), "b": (3,), "past": (2, 3, 3)}))
    state, ys = whole["past"], []
    for t in range(7):
        out = evaluate(step, {"x": whole["x"][:, :, t:t + 1], "w": whole["w"], "b": whole["b"], "past": state})
        ys.append(out["y"])
        state = out["state"]
    np.testing.assert_allclose(np.concatenate(ys, axis=2), one_call["y"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(state, one_call["state"])


BAD = [
    ({"x": (1, 3, 5), "w": (4, 1, 3)}, {}, "weight dims [4, 1, 3] are not (3, 1, k) for 3 channels"),
    ({"x": (1, 3, 5), "w": (3, 2, 3)}, {}, "weight dims [3, 2, 3] are not (3, 1, k) for 3 channels"),
    ({"x": (1, 3, 5), "w": (3, 1, 3), "past": (1, 3, 3)}, {},
     "past_state dims [1, 3, 3] are not [1, 3, 2] (batch, channels, k - 1)"),
    ({"x": (1, 3, 5), "w": (3, 1, 3), "b": (4,)}, {}, "bias dims [4] are not [3]"),
    ({"x": (1, 3, 5), "w": (3, 1, 3)}, {"activation": "gelu"}, "unknown activation 'gelu' (one of none, silu, swish)"),
    ({"x": (3, 5), "w": (3, 1, 3)}, {}, "input dims [3, 5] are not (batch, channels, length)"),
]


@pytest.mark.parametrize("shapes,attrs,message", BAD, ids=range(len(BAD)))
def test_inconsistent_shapes_are_one_line_errors_naming_the_node(tmp_path: Path, shapes, attrs, message) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_model(shapes, name="conv_state_2", **attrs), path)
    with pytest.raises(InvalidModelError) as err:
        import_onnx(path)
    text = str(err.value)
    assert text.startswith("model.onnx: node 'conv_state_2' (CausalConvWithState): ") and message in text
    assert "\n" not in text and err.value.exit_code == 65


@pytest.mark.parametrize("k", [1, 4, MAX_UNROLLED_TAPS + 2])
def test_symbolic_batch_and_length_compile_and_match_onnxruntime(tmp_path: Path, k: int) -> None:
    """A symbolic sequence length takes the unrolled taps at any kernel size; run at two sizes of the range."""
    node = helper.make_node("CausalConvWithState", ["x", "w", "", "past"], ["y", "state"], activation="silu")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, ["batch", 3, "seq"]),
                                            vi("w", TensorProto.FLOAT, [3, 1, k]),
                                            vi("past", TensorProto.FLOAT, ["batch", 3, k - 1])],
                              [vi("y", TensorProto.FLOAT, ["batch", 3, "seq"]),
                               vi("state", TensorProto.FLOAT, ["batch", 3, k - 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)], ir_version=10)
    mlcc.compile(model, tmp_path / "bundle", targets=[], cache_dir="", shapes={"batch": "1..2", "seq": "1..16"})
    exe = mlcc.load(tmp_path / "bundle", device="cpu")
    rng = np.random.default_rng(k)
    for batch, seq in ((2, 9), (1, 1)):
        feeds = {"x": rng.standard_normal((batch, 3, seq)).astype(np.float32),
                 "w": rng.standard_normal((3, 1, k)).astype(np.float32),
                 "past": rng.standard_normal((batch, 3, k - 1)).astype(np.float32)}
        got = exe.run(feeds)
        for name, want in zip(("y", "state"), _ort(model, feeds)):
            assert got[name].shape == want.shape, name
            np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5, err_msg=name)
