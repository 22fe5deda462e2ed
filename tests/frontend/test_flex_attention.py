"""FlexAttention (ai.onnx.preview) beyond the node suite: grouped-query heads, other value head sizes, scale,
score_mod graphs (a causal mask with more keys than queries, soft cap, a per-head bias), a prob_mod graph,
f16 and f64 and softmax_precision, against onnx.reference (onnxruntime has no FlexAttention); the kernels under
Triton's interpreter; inconsistent shapes and modifier graphs a one-line error naming the node."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import mlcc.backend
from mlcc.frontend.onnx import InvalidModelError, import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.passes.pipelines import default_pipeline
from mlcc.hlo.verifier import verify_module

PREVIEW = "ai.onnx.preview"
vi = helper.make_tensor_value_info


def _graph(name: str, nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray] | None = None,
           dtype: int = TensorProto.FLOAT, inputs: tuple[str, ...] = ("s",)) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [vi(n, dtype, None) for n in inputs], [vi("out", dtype, None)],
                             [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])


def causal_mod(dtype: int = TensorProto.FLOAT) -> onnx.GraphProto:
    """Keys after the query's position (aligned bottom-right, as with a KV cache) set to -inf."""
    neg = np.array(-np.inf, helper.tensor_dtype_to_np_dtype(dtype))
    return _graph("causal", [
        helper.make_node("Shape", ["s"], ["dims"]),
        helper.make_node("Gather", ["dims", "two"], ["L"], axis=0),
        helper.make_node("Gather", ["dims", "three"], ["S"], axis=0),
        helper.make_node("Sub", ["S", "L"], ["shift"]),
        helper.make_node("Range", ["shift", "S", "one"], ["q_pos"]),
        helper.make_node("Unsqueeze", ["q_pos", "axis1"], ["q_col"]),
        helper.make_node("Range", ["zero", "S", "one"], ["k_pos"]),
        helper.make_node("GreaterOrEqual", ["q_col", "k_pos"], ["keep"]),
        helper.make_node("Where", ["keep", "s", "neg"], ["out"]),
    ], {"two": np.int64(2), "three": np.int64(3), "one": np.int64(1), "zero": np.int64(0),
        "axis1": np.array([1], np.int64), "neg": neg}, dtype)


def soft_cap_mod(cap: float) -> onnx.GraphProto:
    return _graph("soft_cap", [helper.make_node("Div", ["s", "cap"], ["a"]), helper.make_node("Tanh", ["a"], ["t"]),
                               helper.make_node("Mul", ["t", "cap"], ["out"])], {"cap": np.float32(cap)})


def head_bias_mod(heads: int) -> onnx.GraphProto:
    """A bias per query head (ALiBi-like slopes times the key index)."""
    slopes = (2.0 ** -np.arange(1, heads + 1)).astype(np.float32).reshape(1, heads, 1, 1)
    keys = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)
    return _graph("head_bias", [helper.make_node("Mul", ["slopes", "keys"], ["bias"]),
                                helper.make_node("Sub", ["s", "bias"], ["out"])], {"slopes": slopes, "keys": keys})


def scale_probs_mod(factor: float) -> onnx.GraphProto:
    return _graph("scale_probs", [helper.make_node("Mul", ["s", "f"], ["out"])], {"f": np.float32(factor)})


def _model(q, k, v, dtype: int = TensorProto.FLOAT, name: str = "flex", **attrs) -> onnx.ModelProto:
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], name=name, domain=PREVIEW, **attrs)
    graph = helper.make_graph([node], "g", [vi("q", dtype, q), vi("k", dtype, k), vi("v", dtype, v)],
                              [vi("y", dtype, [None] * 4)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid(PREVIEW, 1)],
                             ir_version=10)


def _feeds(q, k, v, dtype=np.float32, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(s).astype(dtype) for n, s in (("q", q), ("k", k), ("v", v))}


CASES = {  # id: (q dims, k dims, v dims, attrs)
    "gqa-6-over-2-other-value-size": ((2, 6, 4, 8), (2, 2, 5, 8), (2, 2, 5, 12), {}),
    "scale-causal-more-keys": ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), {"scale": 0.3, "score_mod": causal_mod()}),
    "soft-cap-gqa": ((1, 4, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8), {"score_mod": soft_cap_mod(2.0), "scale": 1.5}),
    "head-bias-and-prob-mod": ((2, 3, 4, 6), (2, 3, 5, 6), (2, 3, 5, 6),
                               {"score_mod": head_bias_mod(3), "prob_mod": scale_probs_mod(0.5)}),
}


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_flex_attention_matches_the_onnx_reference(case_id: str) -> None:
    q, k, v, attrs = CASES[case_id]
    model, feeds = _model(q, k, v, **attrs), _feeds(q, k, v)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    module = import_onnx(model)
    verify_module(module)
    got = evaluate(module, feeds)["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case_id", ["gqa-6-over-2-other-value-size", "head-bias-and-prob-mod"])
def test_flex_attention_kernels_match_the_onnx_reference(case_id: str) -> None:
    q, k, v, attrs = CASES[case_id]
    model, feeds = _model(q, k, v, **attrs), _feeds(q, k, v, seed=1)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(mlcc.backend.prepare(model).run(feeds)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("np_dtype,onnx_dtype,attrs,tol", [
    (np.float16, TensorProto.FLOAT16, {}, 2e-3),
    (np.float16, TensorProto.FLOAT16, {"softmax_precision": TensorProto.FLOAT16, "score_mod": causal_mod(
        TensorProto.FLOAT16)}, 5e-3),
    (np.float64, TensorProto.DOUBLE, {"score_mod": causal_mod(TensorProto.DOUBLE)}, 1e-12),
], ids=["f16", "f16-softmax-in-f16-causal", "f64-causal"])
def test_flex_attention_precisions_match_the_onnx_reference(np_dtype, onnx_dtype, attrs, tol) -> None:
    dims = ((1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8))
    model, feeds = _model(*dims, dtype=onnx_dtype, **attrs), _feeds(*dims, dtype=np_dtype, seed=2)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = evaluate(import_onnx(model), feeds)["y"]
    assert got.dtype == np_dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def _reduce_mod() -> onnx.GraphProto:
    return _graph("shrinks", [helper.make_node("ReduceSum", ["s", "axes"], ["out"], keepdims=1)],
                  {"axes": np.array([3], np.int64)})


BAD = [
    (((1, 2, 3, 4), (1, 2, 5, 6), (1, 2, 5, 4)), {}, "K dims [1, 2, 5, 6] and V dims [1, 2, 5, 4] do not match"),
    (((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 6, 4)), {}, "K dims [1, 2, 5, 4] and V dims [1, 2, 6, 4] do not match"),
    (((1, 3, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)), {}, "3 query heads are not a multiple of 2 key/value heads"),
    (((1, 2, 3), (1, 2, 5, 4), (1, 2, 5, 4)), {}, "Q, K and V must be 4-D"),
    (((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)), {"score_mod": _reduce_mod()},
     "score_mod turns dims [1, 2, 3, 5] into [1, 2, 3, 1] (it must keep them)"),
    (((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)),
     {"prob_mod": _graph("two", [helper.make_node("Mul", ["s", "t"], ["out"])], inputs=("s", "t"))},
     "prob_mod takes 2 inputs and gives 1 outputs (one each is required)"),
]


@pytest.mark.parametrize("dims,attrs,message", BAD, ids=range(len(BAD)))
def test_inconsistent_shapes_are_one_line_errors_naming_the_node(tmp_path: Path, dims, attrs, message) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_model(*dims, name="flex_4", **attrs), path)
    with pytest.raises(InvalidModelError) as err:
        import_onnx(path)
    text = str(err.value)
    assert text.startswith("model.onnx: node 'flex_4' (FlexAttention): ") and message in text, text
    assert "\n" not in text and err.value.exit_code == 65


@pytest.mark.parametrize("mods", [{}, {"score_mod": causal_mod()}, {"score_mod": soft_cap_mod(2.0), "scale": 0.5},
                                  {"score_mod": head_bias_mod(4)}],
                         ids=["plain", "causal-more-keys", "soft-cap", "head-bias"])
def test_f16_flex_attention_is_one_attention_kernel_matching_the_reference(mods) -> None:
    """Half-precision inputs with the default f32 softmax precision (score_mod graphs in f32): the recognizer
    reads through the widening converts, so q, k and v reach one f16 attention op."""
    dims = ((1, 4, 3, 8), (1, 2, 5, 8), (1, 2, 5, 8))  # grouped-query heads, more keys than queries
    model = _model(*dims, dtype=TensorProto.FLOAT16, **mods)
    feeds = _feeds(*dims, dtype=np.float16, seed=4)
    module = import_onnx(model)
    default_pipeline().run(module)
    ops = Counter(i.opcode for i in module.all_instructions())
    assert ops["attention"] == 1 and not ops["softmax"] and not ops["dot"], dict(ops)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = mlcc.backend.prepare(model).run(feeds)[0]
    assert got.dtype == np.float16 and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=3e-3, atol=3e-3)
