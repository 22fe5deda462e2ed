"""ONNX sequences of a length known when compiling (ops/sequence.py): SplitToSequence, SequenceInsert/Erase/At/
Length with constant positions, ConcatFromSequence, SequenceMap unrolled, optionals of sequences; a sequence graph
output is one bundle output per element (NAME.0, NAME.1, ...), a sequence graph input is fed by mlcc.backend as one
tensor per element. Against onnxruntime (onnx.reference where onnxruntime lacks the op). A position known only at
run time, or a sequence-typed input of a compiled model, is a one-line exit 69 naming the node or the input; a
sequence fed to an op that takes tensors is exit 65."""

from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import mlcc
import mlcc.backend
from mlcc.frontend.onnx import InvalidModelError, UnsupportedFeatureError, import_onnx

vi = helper.make_tensor_value_info
F32 = TensorProto.FLOAT


def _seq_type(dims: list) -> onnx.TypeProto:
    return helper.make_sequence_type_proto(helper.make_tensor_type_proto(F32, dims))


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _ints(name: str, values) -> onnx.TensorProto:
    return helper.make_tensor(name, TensorProto.INT64, np.shape(values), np.asarray(values).reshape(-1).tolist())


def _ort(model: onnx.ModelProto, feeds: dict) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _ops_model() -> onnx.ModelProto:
    """x [4, 3] split into rows, y inserted at 1, the last erased, one read back, counted, stacked and concatenated;
    x also split in chunks of 3 along axis 0 (sizes 3 and 1), returned as a sequence."""
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["rows"], name="split", axis=0, keepdims=0),
        helper.make_node("SequenceInsert", ["rows", "y", "one"], ["inserted"], name="insert"),
        helper.make_node("SequenceErase", ["inserted"], ["erased"], name="erase"),
        helper.make_node("SequenceAt", ["erased", "minus_two"], ["at"], name="at"),
        helper.make_node("SequenceLength", ["erased"], ["length"], name="length"),
        helper.make_node("ConcatFromSequence", ["erased"], ["stacked"], name="stack", axis=1, new_axis=1),
        helper.make_node("ConcatFromSequence", ["erased"], ["joined"], name="join", axis=0),
        helper.make_node("Relu", ["at"], ["at_relu"], name="relu"),
        helper.make_node("SplitToSequence", ["x", "three"], ["chunks"], name="chunks", axis=0),
    ]
    return _model(nodes, [vi("x", F32, [4, 3]), vi("y", F32, [3])],
                  [vi("at_relu", F32, [3]), vi("length", TensorProto.INT64, []), vi("stacked", F32, [3, 4]),
                   vi("joined", F32, [12]), helper.make_value_info("chunks", _seq_type([None, 3]))],
                  [_ints("one", 1), _ints("minus_two", -2), _ints("three", 3)])


def _ops_feeds() -> dict:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((4, 3)).astype(np.float32), "y": rng.standard_normal(3).astype(np.float32)}


def test_sequence_ops_with_constant_positions_match_onnxruntime() -> None:
    model, feeds = _ops_model(), _ops_feeds()
    want = _ort(model, feeds)
    got = mlcc.backend.prepare(model).run(feeds)
    assert len(got) == len(want) == 5
    for g, w in zip(got[:4], want[:4]):
        np.testing.assert_allclose(g, w, rtol=0, atol=0)
        assert np.asarray(g).dtype == w.dtype and np.shape(g) == w.shape
    assert isinstance(got.chunks, list) and [c.shape for c in got.chunks] == [(3, 3), (1, 3)] == \
        [w.shape for w in want[4]]
    for g, w in zip(got.chunks, want[4]):
        np.testing.assert_array_equal(g, w)


def test_a_sequence_output_is_one_bundle_output_per_element(tmp_path: Path) -> None:
    model, feeds = _ops_model(), _ops_feeds()
    mlcc.compile(model, tmp_path / "b", targets=[], cache_dir="", quiet=True)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    names = [o["name"] for o in manifest["outputs"]]
    assert names == ["at_relu", "length", "stacked", "joined", "chunks.0", "chunks.1"], names
    out = mlcc.load(tmp_path / "b").run(feeds)
    want = _ort(model, feeds)[4]
    np.testing.assert_array_equal(out["chunks.0"], want[0])
    np.testing.assert_array_equal(out["chunks.1"], want[1])


def _map_model() -> onnx.ModelProto:
    """SequenceMap over a sequence input and a tensor: each element times 2 plus t, then stacked on a new axis 0."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["e", "two"], ["e2"]), helper.make_node("Add", ["e2", "t"], ["out"])], "body",
        [vi("e", F32, ["N"]), vi("t", F32, ["N"])], [vi("out", F32, ["N"])],
        [helper.make_tensor("two", F32, [], [2.0])])
    nodes = [helper.make_node("SequenceMap", ["s", "t"], ["mapped"], name="map", body=body),
             helper.make_node("ConcatFromSequence", ["mapped"], ["y"], name="stack", axis=0, new_axis=1)]
    return _model(nodes, [helper.make_value_info("s", _seq_type(["N"])), vi("t", F32, ["N"])],
                  [vi("y", F32, [None, "N"]), helper.make_value_info("mapped", _seq_type(["N"]))])


@pytest.mark.parametrize("count", [1, 3])
def test_a_sequence_input_fed_through_the_backend_matches_the_reference(count: int) -> None:
    model = _map_model()
    rng = np.random.default_rng(count)
    s = [rng.standard_normal(5).astype(np.float32) for _ in range(count)]
    t = rng.standard_normal(5).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"s": s, "t": t})
    got = mlcc.backend.prepare(model).run([s, t])
    np.testing.assert_allclose(got.y, want[0], rtol=1e-6, atol=0)
    assert got.y.shape == (count, 5)
    assert len(got.mapped) == count
    for g, w in zip(got.mapped, want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=0)


def test_an_empty_sequence_input_and_sequence_empty() -> None:
    nodes = [helper.make_node("SequenceLength", ["s"], ["n"], name="n"),
             helper.make_node("SequenceEmpty", [], ["fresh"], name="fresh", dtype=F32),
             helper.make_node("SequenceInsert", ["fresh", "x"], ["one"], name="insert"),
             helper.make_node("SequenceLength", ["one"], ["m"], name="m")]
    model = _model(nodes, [helper.make_value_info("s", _seq_type([2])), vi("x", F32, [2])],
                   [vi("n", TensorProto.INT64, []), vi("m", TensorProto.INT64, []),
                    helper.make_value_info("one", _seq_type([2]))])
    x = np.array([1.0, -1.0], np.float32)
    rep = mlcc.backend.prepare(model)
    for s in ([], [x, x]):
        want = _ort(model, {"s": s, "x": x})
        got = rep.run([s, x])
        assert int(got.n) == int(want[0]) == len(s) and int(got.m) == int(want[1]) == 1
        np.testing.assert_array_equal(got.one[0], want[2][0])


def test_an_optional_of_a_sequence_holds_it_and_an_empty_one_has_nothing() -> None:
    empty_type = _seq_type([3])
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"], name="construct"),
             helper.make_node("Optional", ["s"], ["opt"], name="wrap"),
             helper.make_node("OptionalHasElement", ["opt"], ["has"], name="has"),
             helper.make_node("OptionalGetElement", ["opt"], ["back"], name="get"),
             helper.make_node("ConcatFromSequence", ["back"], ["y"], name="join", axis=0),
             helper.make_node("Optional", [], ["none"], name="empty", type=empty_type),
             helper.make_node("OptionalHasElement", ["none"], ["has_none"], name="has_none")]
    model = _model(nodes, [vi("a", F32, [3]), vi("b", F32, [3])],
                   [vi("y", F32, [6]), vi("has", TensorProto.BOOL, []), vi("has_none", TensorProto.BOOL, [])])
    feeds = {"a": np.array([1, 2, 3], np.float32), "b": np.array([4, 5, 6], np.float32)}
    want = _ort(model, feeds)
    got = mlcc.backend.prepare(model).run(feeds)
    np.testing.assert_array_equal(got.y, want[0])
    assert bool(got.has) is bool(want[1]) is True and bool(got.has_none) is bool(want[2]) is False


def test_loop16_seq_none_matches_the_cases_data_element_by_element() -> None:
    """The node case onnx's runner cannot compare (a 0-d element in a sequence output: expected_failures.yaml)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module("onnx.backend.test.case.node.loop")  # only the Loop cases are generated
        from onnx.backend.test.case.node import collect_testcases
        (case,) = [c for c in collect_testcases(None) if c.name == "test_loop16_seq_none"]
    rep = mlcc.backend.prepare(case.model)
    for inputs, outputs in case.data_sets:
        (got,) = rep.run(inputs)
        (want,) = outputs
        assert len(got) == len(want) == 6
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


def _save(tmp_path: Path, model: onnx.ModelProto) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def test_a_position_known_only_at_run_time_is_a_one_line_69_naming_the_node(tmp_path: Path) -> None:
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"], name="construct"),
             helper.make_node("SequenceAt", ["s", "pos"], ["y"], name="at_7")]
    model = _model(nodes, [vi("x", F32, [2]), vi("pos", TensorProto.INT64, [])], [vi("y", F32, [2])])
    with pytest.raises(UnsupportedFeatureError) as err:
        import_onnx(_save(tmp_path, model))
    assert str(err.value) == ("model.onnx: node 'at_7' (SequenceAt): the position (input 'pos') must be known at "
                              "import time"), str(err.value)
    assert err.value.exit_code == 69


def test_a_split_known_only_at_run_time_is_a_one_line_69_naming_the_node(tmp_path: Path) -> None:
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["s"], name="split_2"),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], name="join", axis=0)]
    model = _model(nodes, [vi("x", F32, [4]), vi("split", TensorProto.INT64, [2])], [vi("y", F32, [4])])
    with pytest.raises(UnsupportedFeatureError) as err:
        import_onnx(_save(tmp_path, model))
    assert str(err.value) == ("model.onnx: node 'split_2' (SplitToSequence): the split (input 'split') must be "
                              "known at import time"), str(err.value)
    assert err.value.exit_code == 69


def test_a_sequence_typed_graph_input_of_a_compiled_model_is_a_one_line_69(tmp_path: Path) -> None:
    nodes = [helper.make_node("ConcatFromSequence", ["s"], ["y"], name="join", axis=0)]
    model = _model(nodes, [helper.make_value_info("s", _seq_type([2]))], [vi("y", F32, [None])])
    with pytest.raises(UnsupportedFeatureError) as err:
        import_onnx(_save(tmp_path, model))
    assert str(err.value).startswith("model.onnx: input 's' is a sequence: a compiled model takes tensors"), \
        str(err.value)
    assert "\n" not in str(err.value) and err.value.exit_code == 69


def test_verify_compares_a_sequence_output_element_by_element_with_onnxruntime(tmp_path: Path) -> None:
    """onnxruntime gives a sequence output as a list; verify compares it as the bundle's NAME.0, NAME.1, ..."""
    from mlcc.verify import compare, onnxruntime_outputs
    model, feeds = _ops_model(), _ops_feeds()
    path = _save(tmp_path, model)
    mlcc.compile(path, tmp_path / "b", targets=[], cache_dir="", quiet=True)
    expected = onnxruntime_outputs(path, feeds)
    assert sorted(expected) == ["at_relu", "chunks.0", "chunks.1", "joined", "length", "stacked"]
    checks = compare(mlcc.load(tmp_path / "b").run(feeds), expected)
    assert len(checks) == 6 and all(c.ok for c in checks), checks


def test_a_sequence_fed_to_an_op_that_takes_tensors_is_a_one_line_65(tmp_path: Path) -> None:
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"], name="construct"),
             helper.make_node("Relu", ["s"], ["y"], name="relu_1")]
    model = _model(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])])
    with pytest.raises(InvalidModelError) as err:
        import_onnx(_save(tmp_path, model))
    assert str(err.value) == ("model.onnx: node 'relu_1' (Relu): input 's' is a sequence, and this op takes tensors "
                              "(its type constraints)"), str(err.value)
    assert err.value.exit_code == 65
