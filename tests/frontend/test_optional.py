"""Optional, OptionalHasElement and OptionalGetElement on tensors: an optional graph input fed a tensor or None
(mlcc.backend compiles the None case with the input an empty Optional), an If whose condition is whether the
optional holds a tensor, Optional built in the graph; against onnx.reference (numpy where its Optional
fails). Reading an empty optional is a one-line error naming the node (exit 65)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import mlcc.backend
from mlcc.frontend.onnx import InvalidModelError, import_onnx

vi = helper.make_tensor_value_info
OPT_F32 = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))


def _branch(name: str, op: str) -> onnx.GraphProto:
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    return helper.make_graph([helper.make_node(op, ["x", "one"], [f"{name}_y"])], name, [],
                             [vi(f"{name}_y", TensorProto.FLOAT, [3])], [one])


def _optional_input_model() -> onnx.ModelProto:
    """y = x + 1 when the optional input holds a tensor, else x - 1; has = whether it does."""
    nodes = [helper.make_node("OptionalHasElement", ["opt"], ["has"], name="has"),
             helper.make_node("If", ["has"], ["y"], name="pick", then_branch=_branch("then", "Add"),
                              else_branch=_branch("else", "Sub"))]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [3]),
                                           helper.make_value_info("opt", OPT_F32)],
                              [vi("y", TensorProto.FLOAT, [3]), vi("has", TensorProto.BOOL, [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.mark.parametrize("given", [True, False], ids=["tensor", "none"])
def test_an_optional_input_fed_a_tensor_or_none_matches_the_reference(given: bool) -> None:
    model = _optional_input_model()
    x = np.array([1.0, 2.0, 3.0], np.float32)
    opt = np.array([5.0, 6.0, 7.0], np.float32) if given else None
    want = ReferenceEvaluator(model).run(None, {"x": x, "opt": opt})
    rep = mlcc.backend.prepare(model)
    got = rep.run([x, opt])
    assert bool(got.has) is given and bool(want[1]) is given
    np.testing.assert_array_equal(got.y, want[0])
    np.testing.assert_array_equal(rep.run([x, np.zeros(3, np.float32)]).y, x + 1)  # the other bundle too


def test_optional_get_element_reads_the_tensor_and_optional_wraps_one() -> None:
    nodes = [helper.make_node("OptionalGetElement", ["opt"], ["got"], name="get"),
             helper.make_node("Optional", ["got"], ["wrapped"], name="wrap"),
             helper.make_node("OptionalGetElement", ["wrapped"], ["again"], name="get_again"),
             helper.make_node("Mul", ["again", "x"], ["y"], name="mul"),
             helper.make_node("Optional", [], ["nothing"], name="empty", type=OPT_F32.optional_type.elem_type),
             helper.make_node("OptionalHasElement", ["nothing"], ["has_nothing"], name="has_nothing")]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [3]), helper.make_value_info("opt", OPT_F32)],
                              [vi("y", TensorProto.FLOAT, [3]), vi("has_nothing", TensorProto.BOOL, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    feeds = {"x": np.array([1.0, -2.0, 3.0], np.float32), "opt": np.array([4.0, 5.0, 0.5], np.float32)}
    got = mlcc.backend.prepare(model).run(feeds)  # onnx.reference's Optional fails on a tensor input: numpy
    np.testing.assert_array_equal(got.y, feeds["opt"] * feeds["x"])
    assert got.y.dtype == np.float32 and bool(got.has_nothing) is False


def test_reading_an_empty_optional_is_a_one_line_error_naming_the_node(tmp_path: Path) -> None:
    nodes = [helper.make_node("Optional", [], ["nothing"], name="empty", type=OPT_F32.optional_type.elem_type),
             helper.make_node("OptionalGetElement", ["nothing"], ["y"], name="get_3")]
    graph = helper.make_graph(nodes, "g", [], [vi("y", TensorProto.FLOAT, [3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9),
              tmp_path / "model.onnx")
    with pytest.raises(InvalidModelError) as err:
        import_onnx(tmp_path / "model.onnx")
    text = str(err.value)
    assert text == ("model.onnx: node 'get_3' (OptionalGetElement): input 'nothing' is an empty optional "
                    "(it holds no tensor)"), text
    assert err.value.exit_code == 65
