"""mlcc verify's random inputs reach every valid index: token ids over the whole embedding table (read from the
graph), not only rows 0 and 1; inputs that index nothing (masks) stay 0/1."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mlcc.verify import integer_ranges, random_inputs

ROOT_MODELS = "tests/data/models"


def embedding_model() -> onnx.ModelProto:
    """ids -> Cast -> Reshape -> Gather(table[50, 8]); pos -> Gather(axis=1 of a [1, 12, 8] table); mask * x."""
    table = numpy_helper.from_array(np.zeros((50, 8), np.float32), "table")
    positions = numpy_helper.from_array(np.zeros((1, 12, 8), np.float32), "positions")
    shape = numpy_helper.from_array(np.array([1, 4], np.int64), "shape")
    nodes = [helper.make_node("Cast", ["ids"], ["ids64"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["ids64", "shape"], ["ids2"]),
             helper.make_node("Gather", ["table", "ids2"], ["emb"]),
             helper.make_node("Gather", ["positions", "pos"], ["pemb"], axis=1),
             helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["emb", "maskf"], ["y"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT32, [4]),
         helper.make_tensor_value_info("pos", TensorProto.INT64, [4]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 4, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8]),
         helper.make_tensor_value_info("pemb", TensorProto.FLOAT, [1, 4, 8])],
        [table, positions, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_ranges_follow_indices_through_casts_and_reshapes_to_the_axis_they_index():
    assert integer_ranges(embedding_model()) == {"ids": (0, 50), "pos": (0, 12)}


def test_random_ids_cover_the_table_and_masks_stay_binary():
    model = embedding_model()
    spec = [{"name": "ids", "shape": [4000], "numpy_dtype": "int32"},
            {"name": "mask", "shape": [1, 4, 1], "numpy_dtype": "int64"}]
    feeds = random_inputs(spec, seed=0, ranges=integer_ranges(model))
    assert feeds["ids"].min() == 0 and feeds["ids"].max() == 49 and len(np.unique(feeds["ids"])) == 50
    assert set(np.unique(feeds["mask"])) <= {0, 1}


def test_real_exports_take_ids_over_their_vocabulary():
    assert integer_ranges(f"{ROOT_MODELS}/gpt2_tiny.onnx") == {"input_ids": (0, 1000)}
    assert integer_ranges(f"{ROOT_MODELS}/bert_tiny.onnx") == {"input_ids": (0, 1000), "token_type_ids": (0, 2)}
