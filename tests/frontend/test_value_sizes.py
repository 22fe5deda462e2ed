"""A value no device could hold (more than 2**48 bytes) is invalid input (exit 65) naming the value and its bytes:
an input, and an intermediate or an output that the graph computes (ConstantOfShape to [10^6, 10^6, 10^6]
compiled with exit 0 before, since 4e18 bytes fit in int64), from either frontend."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc
from mlcc.errors import MlccError
from mlcc.frontend.onnx import import_onnx


def model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_output_that_cannot_exist_is_65_naming_it_and_its_bytes():
    shape = numpy_helper.from_array(np.array([10**6] * 3, np.int64), "shape")
    m = model([helper.make_node("ConstantOfShape", ["shape"], ["huge"],
                                value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))],
              [], [helper.make_tensor_value_info("huge", TensorProto.FLOAT, [10**6] * 3)], [shape])
    with pytest.raises(MlccError, match=r"value 'huge' with dims \[1000000, 1000000, 1000000\] needs "
                                        r"4000000000000000000 bytes") as info:
        import_onnx(m)
    assert info.value.exit_code == 65


def test_an_intermediate_that_cannot_exist_is_65():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**20])
    shape = numpy_helper.from_array(np.array([2**10, 2**20, 2**20], np.int64), "shape")
    nodes = [helper.make_node("Expand", ["x", "shape"], ["wide"]),
             helper.make_node("ReduceSum", ["wide"], ["s"], keepdims=0)]
    m = model(nodes, [x], [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])], [shape])
    with pytest.raises(MlccError, match=r"value 'wide' .* needs 4503599627370496 bytes") as info:
        import_onnx(m)
    assert info.value.exit_code == 65


def test_a_large_but_possible_value_imports():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**20])
    shape = numpy_helper.from_array(np.array([2**10, 2**20], np.int64), "shape")
    m = model([helper.make_node("Expand", ["x", "shape"], ["y"])], [x],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**10, 2**20])], [shape])
    assert import_onnx(m).entry.root is not None


def test_stablehlo_values_that_cannot_exist_are_65(tmp_path):
    """A constant is refused before it is built; a computed value by the compiler's check of every value."""
    constant = ("func.func @main() -> tensor<1000000x1000000x1000000xf32> {\n"
                "  %0 = stablehlo.constant dense<1.0> : tensor<1000000x1000000x1000000xf32>\n"
                "  return %0 : tensor<1000000x1000000x1000000xf32>\n}\n")
    computed = ("func.func @main(%x: tensor<1048576xf32>) -> tensor<1024x1048576x1048576xf32> {\n"
                "  %0 = stablehlo.broadcast_in_dim %x, dims = [2] : (tensor<1048576xf32>) -> "
                "tensor<1024x1048576x1048576xf32>\n"
                "  return %0 : tensor<1024x1048576x1048576xf32>\n}\n")
    for name, text, pattern in [("c.mlir", constant, r"needs 4000000000000000000 bytes"),
                                ("b.mlir", computed, r"value 'main/%0' of type f32\[1024,1048576,1048576\]")]:
        (tmp_path / name).write_text(text)
        with pytest.raises(MlccError, match=pattern) as info:
            mlcc.compile(tmp_path / name, tmp_path / "out", targets=[], cache_dir="")
        assert info.value.exit_code == 65
        assert not (tmp_path / "out").exists()


def _outer_product(tmp_path):
    """x[s] -> x[s, 1] * x[1, s]: a [s, s] output, 4 * s**2 bytes, possible or not by the range of s."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s"])
    axes = [numpy_helper.from_array(np.array([k], np.int64), f"a{k}") for k in (0, 1)]
    nodes = [helper.make_node("Unsqueeze", ["x", "a1"], ["col"]), helper.make_node("Unsqueeze", ["x", "a0"], ["row"]),
             helper.make_node("Mul", ["col", "row"], ["outer"], name="outer_mul")]
    m = model(nodes, [x], [helper.make_tensor_value_info("outer", TensorProto.FLOAT, ["s", "s"])], axes)
    path = tmp_path / "outer.onnx"
    onnx.save(m, path)
    return path


def test_a_symbolic_value_is_sized_at_the_top_of_its_range(tmp_path):
    """s up to 2**24: the [s, s] output needs 4 * 2**48 bytes at the top of the range, though s = 1 needs 4."""
    path = _outer_product(tmp_path)
    with pytest.raises(MlccError, match=r"value 'outer_mul' of type f32\[s,s\]\{1,0\} needs 1125899906842624 bytes") \
            as info:
        mlcc.compile(path, tmp_path / "out", targets=[], cache_dir="", shapes={"s": "1..16777216"})
    assert info.value.exit_code == 65
    assert not (tmp_path / "out").exists()
    m = mlcc.compile(path, tmp_path / "ok", targets=[], cache_dir="", shapes={"s": "1..1024"}).manifest
    out = m["outputs"][0]
    assert out["name"] == "outer" and m["buffers"][out["buffer"]]["bytes"] == 4 * 1024 * 1024  # planned at s = 1024


def test_the_command_line_exits_65_naming_the_value(tmp_path):
    import subprocess
    import sys
    path = _outer_product(tmp_path)
    r = subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(path), "-o", str(tmp_path / "out"),
                        "--target", "none", "--shape", "s=1..16777216"], capture_output=True, text=True)
    assert r.returncode == 65
    assert r.stderr.count("\n") == 1 and "'outer_mul'" in r.stderr and "1125899906842624 bytes" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()
