"""TfIdfVectorizer (integer tokens) and ai.onnx.ml TreeEnsemble beyond the node suite's cases: random pools with
every mode, several gram lengths and skips, a repeated pool n-gram refused; random forests with every node mode, set
membership, missing-value tracking, one-leaf trees and every aggregate. Checked against onnxruntime
(TfIdfVectorizer) and onnx.reference (TreeEnsemble), through the numpy evaluator and through the kernels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import mlcc.backend
from mlcc.frontend.onnx import InvalidModelError, UnsupportedFeatureError, import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

ML = "ai.onnx.ml"


def _tfidf_model(x_dims, elem=TensorProto.INT64, name="tfidf", **attrs) -> onnx.ModelProto:
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], name=name, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, x_dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(x_dims))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _random_pool(rng, vocab: int, per_size: dict[int, int]) -> tuple[list[int], list[int]]:
    pool, counts = [], []
    for size in range(1, max(per_size) + 1):
        counts.append(len(pool))
        codes = rng.choice(vocab ** size, per_size.get(size, 0), replace=False)  # distinct n-grams
        for code in codes:
            pool.extend(int(code) // vocab ** i % vocab for i in range(size))
    return pool, counts


TFIDF_CASES = {  # id: (x dims, grams per size, min, max, max skip, mode, with weights)
    "tf-uni-bi-tri-skip2-batch": ((3, 17), {1: 3, 2: 5, 3: 4}, 1, 3, 2, "TF", False),
    "idf-weights-bigrams-only-1d": ((23,), {1: 2, 2: 6}, 2, 2, 3, "IDF", True),
    "tfidf-weights": ((2, 15), {1: 3, 2: 4}, 1, 2, 1, "TFIDF", True),
    "idf-no-weights-trigrams-skip-past-row": ((2, 7), {1: 1, 2: 1, 3: 4}, 3, 3, 4, "IDF", False),
    "tfidf-no-weights-unigrams": ((4, 9), {1: 3}, 1, 1, 2, "TFIDF", False),
}


def _tfidf_case(case_id: str, seed: int = 0):
    x_dims, per_size, lo, hi, skip, mode, with_weights = TFIDF_CASES[case_id]
    rng = np.random.default_rng(seed)
    vocab = 3
    pool, counts = _random_pool(rng, vocab, per_size)
    n_grams = sum(per_size.values())
    indexes = rng.permutation(n_grams + 2)[:n_grams]  # some output columns unused
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip, pool_int64s=pool,
                 ngram_counts=counts, ngram_indexes=[int(i) for i in indexes])
    if with_weights:
        attrs["weights"] = rng.uniform(0.5, 2.0, n_grams).astype(np.float32).tolist()  # one per pool n-gram
    x = rng.integers(0, vocab, x_dims).astype(np.int64)
    return _tfidf_model(list(x_dims), **attrs), {"x": x}


@pytest.mark.parametrize("case_id", sorted(TFIDF_CASES))
def test_tfidf_matches_onnxruntime(case_id: str) -> None:
    model, feeds = _tfidf_case(case_id)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert want.any()  # the case counts something
    module = import_onnx(model)
    verify_module(module)
    got = evaluate(module, feeds)["y"]
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_tfidf_kernels_match_onnxruntime_for_int32_tokens() -> None:
    model, feeds = _tfidf_case("tf-uni-bi-tri-skip2-batch", seed=3)
    model = _tfidf_model([3, 17], TensorProto.INT32, **{a.name: helper.get_attribute_value(a)
                                                         for a in model.graph.node[0].attribute})
    feeds = {"x": feeds["x"].astype(np.int32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(mlcc.backend.prepare(model).run(feeds)[0], want, rtol=1e-6, atol=0)


def test_a_repeated_pool_gram_is_a_one_line_error(tmp_path: Path) -> None:
    onnx.save(_tfidf_model([8], name="tfidf_2", mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0,
                           pool_int64s=[1, 2, 3, 4, 3, 4], ngram_counts=[0, 2], ngram_indexes=[0, 1, 2, 3]),
              tmp_path / "model.onnx")
    with pytest.raises(InvalidModelError) as err:
        import_onnx(tmp_path / "model.onnx")
    text = str(err.value)
    assert text == "model.onnx: node 'tfidf_2' (TfIdfVectorizer): the pool holds the 2-gram [3, 4] twice", text
    assert err.value.exit_code == 65


def _tree_model(n_features: int, dtype=TensorProto.FLOAT, name="forest", **attrs) -> onnx.ModelProto:
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], name=name, domain=ML, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dtype, [None, n_features])],
                              [helper.make_tensor_value_info("y", dtype, [None, None])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 5)],
                             ir_version=10)


def _random_forest(rng, n_trees: int, depth: int, n_features: int, n_targets: int, np_dtype, modes: list[int]):
    """Attributes of a forest of full trees of ``depth``, node modes drawn from ``modes``, plus a one-leaf tree."""
    feats, splits, node_modes, t_ids, f_ids, t_leaf, f_leaf, tracks, members = [], [], [], [], [], [], [], [], []
    leaf_targets, leaf_weights, roots = [], [], []

    def leaf() -> int:
        leaf_targets.append(int(rng.integers(0, n_targets)))
        leaf_weights.append(float(np.round(rng.uniform(-5, 5), 2)))
        return len(leaf_targets) - 1

    def grow(level: int) -> int:
        at = len(feats)
        mode = int(rng.choice(modes))
        feats.append(int(rng.integers(0, n_features)))
        splits.append(float(rng.integers(-2, 3)) if mode in (4, 5, 6) else float(np.round(rng.uniform(-1, 1), 2)))
        node_modes.append(mode)
        tracks.append(int(rng.integers(0, 2)))
        if mode == 6:
            # No member 0: the reference's parser ends a set at a 0 (its loop tests the member's truth).
            members.extend([float(v) for v in rng.choice([-2, -1, 1, 2], 2, replace=False)] + [np.nan])
        for ids, leafs in ((t_ids, t_leaf), (f_ids, f_leaf)):
            ids.append(0)
            leafs.append(0)
        for ids, leafs in ((t_ids, t_leaf), (f_ids, f_leaf)):
            if level + 1 == depth:
                ids[at], leafs[at] = leaf(), 1
            else:
                ids[at], leafs[at] = grow(level + 1), 0
        return at

    for _ in range(n_trees):
        roots.append(grow(0))
    # A one-leaf tree: its root node's index is also its leaf's (the reference reads it so).
    root = len(feats)
    while len(leaf_targets) <= root:
        leaf()
    feats.append(0), splits.append(0.0), node_modes.append(0), tracks.append(0)
    t_ids.append(root), f_ids.append(root), t_leaf.append(1), f_leaf.append(1)
    roots.append(root)
    attrs = dict(nodes_featureids=feats, nodes_splits=numpy_helper.from_array(np.array(splits, np_dtype)),
                 nodes_modes=numpy_helper.from_array(np.array(node_modes, np.uint8)), nodes_truenodeids=t_ids,
                 nodes_falsenodeids=f_ids, nodes_trueleafs=t_leaf, nodes_falseleafs=f_leaf,
                 nodes_missing_value_tracks_true=tracks, leaf_targetids=leaf_targets,
                 leaf_weights=numpy_helper.from_array(np.array(leaf_weights, np_dtype)), tree_roots=roots,
                 n_targets=n_targets)
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, np_dtype))
    return attrs


TREE_CASES = {  # id: (trees, depth, features, targets, dtype, aggregate, modes)
    "sum-comparisons-f32": (3, 3, 4, 2, np.float32, 1, [0, 1, 2, 3]),
    "average-eq-neq-member-f64": (4, 3, 3, 3, np.float64, 0, [0, 4, 5, 6]),
    "min-all-modes-f32": (3, 2, 3, 4, np.float32, 2, [0, 1, 2, 3, 4, 5, 6]),
    "max-all-modes-f64": (5, 3, 2, 2, np.float64, 3, [0, 1, 2, 3, 4, 5, 6]),
    "sum-f16": (2, 3, 3, 2, np.float16, 1, [0, 2, 6]),
}


def _tree_case(case_id: str, seed: int = 0):
    trees, depth, n_features, n_targets, np_dtype, aggregate, modes = TREE_CASES[case_id]
    rng = np.random.default_rng(seed)
    attrs = _random_forest(rng, trees, depth, n_features, n_targets, np_dtype, modes)
    x = rng.integers(-2, 3, (16, n_features)).astype(np_dtype)  # integers hit EQ, NEQ and the sets
    x[:8] += rng.uniform(-1, 1, (8, n_features)).astype(np_dtype)
    x[rng.random(x.shape) < 0.1] = np.nan
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))
    return _tree_model(n_features, elem, aggregate_function=aggregate, **attrs), {"x": x}


@pytest.mark.parametrize("case_id", sorted(TREE_CASES))
def test_tree_ensemble_matches_the_onnx_reference(case_id: str) -> None:
    model, feeds = _tree_case(case_id)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    module = import_onnx(model)
    verify_module(module)
    got = evaluate(module, feeds)["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    # f16: the reference rounds to f16 after each tree's add, mlcc once at the end (a one-ulp difference).
    tol = 2e-3 if want.dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("case_id", ["average-eq-neq-member-f64", "min-all-modes-f32"])
def test_tree_ensemble_kernels_match_the_onnx_reference(case_id: str) -> None:
    model, feeds = _tree_case(case_id, seed=5)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(mlcc.backend.prepare(model).run(feeds)[0], want, rtol=1e-6, atol=1e-6)


def test_tree_ensemble_post_transform_is_an_unsupported_error(tmp_path: Path) -> None:
    model, _ = _tree_case("sum-comparisons-f32")
    model.graph.node[0].attribute.append(helper.make_attribute("post_transform", 2))
    onnx.save(model, tmp_path / "model.onnx")
    with pytest.raises(UnsupportedFeatureError) as err:
        import_onnx(tmp_path / "model.onnx")
    assert "node 'forest' (TreeEnsemble)" in str(err.value) and "post_transform 2" in str(err.value)
    assert err.value.exit_code == 69


BAD = [
    (lambda a: a.update(tree_roots=[999]), "tree root 999 is not a node index"),
    (lambda a: a.update(leaf_targetids=[7] * len(a["leaf_targetids"])), "are not all below n_targets 2"),
    (lambda a: a.update(nodes_featureids=[9] * len(a["nodes_featureids"])), "are not all below the input's 4"),
    (lambda a: a.update(nodes_truenodeids=[0] * len(a["nodes_truenodeids"]), nodes_trueleafs=[0] * len(
        a["nodes_trueleafs"])), "has a cycle through node 0"),
]


@pytest.mark.parametrize("edit,message", BAD, ids=range(len(BAD)))
def test_inconsistent_forests_are_one_line_errors_naming_the_node(tmp_path: Path, edit, message) -> None:
    attrs = _random_forest(np.random.default_rng(0), 2, 2, 4, 2, np.float32, [0])
    edit(attrs)
    onnx.save(_tree_model(4, name="forest_3", **attrs), tmp_path / "model.onnx")
    with pytest.raises(InvalidModelError) as err:
        import_onnx(tmp_path / "model.onnx")
    text = str(err.value)
    assert text.startswith("model.onnx: node 'forest_3' (TreeEnsemble): ") and message in text, text
    assert "\n" not in text and err.value.exit_code == 65
