"""4- and 2-bit integer initializers stored packed (mlcc/hlo/blockquant.py packed_constant): weights.bin holds
ONNX's own packed bytes (two or four values a byte, element 0 in the low bits), and the kernels that read
the values unpack them in their loads. Checked against onnx's packing and onnx.reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import mlcc
from mlcc.frontend.onnx import import_onnx
from mlcc.hlo.blockquant import pack_values
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.printer import format_module

TYPES = {"s4": (TensorProto.INT4, ml_dtypes.int4, 4), "u4": (TensorProto.UINT4, ml_dtypes.uint4, 4),
         "s2": (TensorProto.INT2, ml_dtypes.int2, 2), "u2": (TensorProto.UINT2, ml_dtypes.uint2, 2)}


def _values(dtype: str, dims: tuple[int, ...], seed: int = 0) -> np.ndarray:
    info = ml_dtypes.iinfo(TYPES[dtype][1])
    return np.random.default_rng(seed).integers(int(info.min), int(info.max) + 1, size=dims).astype(TYPES[dtype][1])


@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("dims", [(8, 6), (5, 7), (3, 4, 9), (37,)])
def test_pack_values_gives_onnx_packed_bytes(dtype, dims):
    values = _values(dtype, dims)
    raw = numpy_helper.from_array(values, "w").raw_data
    assert pack_values(values, TYPES[dtype][2]).tobytes() == raw


def _model(dtype: str, dims: tuple[int, ...], zero_point: bool) -> tuple[onnx.ModelProto, np.ndarray]:
    """y = DequantizeLinear(w, scale per row of axis 0[, zero point per row]) + x, w an initializer (a
    DequantizeLinear is not folded at import, so a kernel reads w; a Cast of w would be)."""
    w = _values(dtype, dims, seed=len(dims))
    scales = (0.25 * (1 + np.arange(dims[0]))).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scales, "s")]
    if zero_point:
        inits.append(numpy_helper.from_array(_values(dtype, dims[:1], seed=7), "z"))
    nodes = [helper.make_node("DequantizeLinear", [t.name for t in inits], ["wf"], axis=0),
             helper.make_node("Add", ["wf", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))], inits)
    assert inits[0].data_type == TYPES[dtype][0]
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), w


@pytest.mark.parametrize("dtype,dims,zero_point", [("s4", (16, 24), False), ("u4", (9, 13), True),
                                                   ("s4", (12, 20), True), ("u2", (8, 12), True),
                                                   ("s2", (6, 11), False), ("u2", (3, 5, 7), False)])
def test_packed_initializer_is_read_by_a_loop_kernel(tmp_path, dtype, dims, zero_point):
    model, w = _model(dtype, dims, zero_point)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    mlcc.compile(path, tmp_path / "b", cache_dir="", targets=[])
    x = np.random.default_rng(1).standard_normal(dims).astype(np.float32)
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": x})["y"]
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    tensors = manifest["weights"]["tensors"]
    assert not [t for t in tensors if t["dtype"] == dtype], f"{dtype} stored a byte a value"
    blob = (tmp_path / "b" / "weights.bin").read_bytes()
    raw = model.graph.initializer[0].raw_data
    assert any(blob[t["offset"]:t["offset"] + t["bytes"]] == raw for t in tensors if t["dtype"] == "u8")
    # and not unpacked into the arena either: the kernel that adds x computes the values as it loads them
    assert all(b["bytes"] < w.size for b in manifest["memory_plan"]["buffers"] if b["name"] not in ("x", "y"))


@pytest.mark.parametrize("dtype", ["s2", "u4"])
def test_packed_initializer_in_external_data_is_read_at_its_packed_length(tmp_path, dtype):
    """ONNX writes a 4- or 2-bit tensor's packed bytes to the data file: ceil(n * bits / 8) of them."""
    model, w = _model(dtype, (8, 20), zero_point=False)
    x = np.random.default_rng(2).standard_normal(w.shape).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    saved = onnx.load(tmp_path / "m.onnx", load_external_data=False).graph.initializer[0]
    assert saved.data_location == TensorProto.EXTERNAL
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_packed_external_data_of_the_wrong_length_is_one_line_exit_65(tmp_path):
    model, w = _model("s4", (8, 20), zero_point=False)
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    bad = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    for e in bad.graph.initializer[0].external_data:
        if e.key == "length":
            e.value = str(w.size)  # one byte a value: not ONNX's packed length
    onnx.save(bad, tmp_path / "bad.onnx")
    r = subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(tmp_path / "bad.onnx"), "-o",
                        str(tmp_path / "out"), "--target", "none"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent)))
    assert r.returncode == 65, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "tensor 'w'" in r.stderr
    assert f"length {w.size} does not match the {w.size // 2} bytes" in r.stderr


def _io_model(dtype: str, dims: tuple[int, ...]) -> onnx.ModelProto:
    """q (a 4- or 2-bit input) -> d = DequantizeLinear(q, 0.5) and t = Transpose(q); r = QuantizeLinear(x / 0.25)
    to the same type (a computed 4- or 2-bit output)."""
    ttype = TYPES[dtype][0]
    zero = numpy_helper.from_array(np.zeros((), TYPES[dtype][1]), "z")
    nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["d"]),
             helper.make_node("Transpose", ["q"], ["t"], perm=[1, 0]),
             helper.make_node("QuantizeLinear", ["x", "s2", "z"], ["r"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("q", ttype, list(dims)),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("d", TensorProto.FLOAT, list(dims)),
         helper.make_tensor_value_info("t", ttype, list(dims[::-1])),
         helper.make_tensor_value_info("r", ttype, list(dims))],
        [numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.float32(0.25), "s2"), zero])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("dtype,dims", [("s4", (5, 7)), ("u4", (4, 6)), ("s2", (3, 5)), ("u2", (6, 4))])
def test_bundle_inputs_and_outputs_of_4_and_2_bit_types_are_packed(tmp_path, dtype, dims):
    model = _io_model(dtype, dims)
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    n, bits = int(np.prod(dims)), TYPES[dtype][2]
    packed = -(-n * bits // 8)
    io = {s["name"]: s for s in manifest["inputs"] + manifest["outputs"]}
    for name in ("q", "t", "r"):
        assert io[name]["packed"] is True and io[name]["dtype"] == dtype
        assert manifest["buffers"][io[name]["buffer"]]["bytes"] == packed  # ceil(n * bits / 8), not n
    assert "packed" not in io["x"] and "packed" not in io["d"]
    assert manifest["schema_version"] == 5  # an older runtime, which would read a byte a value, refuses it
    q = _values(dtype, dims, seed=3)
    x = np.random.default_rng(4).uniform(-3, 3, dims).astype(np.float32)
    got = mlcc.load(tmp_path / "b", device="cpu").run({"q": q, "x": x})
    want = dict(zip(["d", "t", "r"], ReferenceEvaluator(model).run(None, {"q": q, "x": x})))
    np.testing.assert_array_equal(got["d"], want["d"])
    for name in ("t", "r"):
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        np.testing.assert_array_equal(got[name].astype(np.int8), want[name].astype(np.int8))


def test_packed_io_prints_parses_and_compiles_back(tmp_path):
    onnx.save(_io_model("s4", (5, 7)), tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    text = (tmp_path / "b" / "model.hlo").read_text()
    assert "packed=s4, packed_dims={5,7}" in text and 'packed_outputs={"1:s4[7,5]{1,0}","2:s4[5,7]{1,0}"}' in text
    module = parse_module(text)
    assert format_module(module) == text
    assert [str(s) for s in module.packed_outputs.values()] == ["s4[7,5]{1,0}", "s4[5,7]{1,0}"]
    # the bundle's own model.hlo compiles back to a bundle with the same packed inputs and outputs
    mlcc.compile(tmp_path / "b" / "model.hlo", tmp_path / "again", cache_dir="", targets=[])
    first, again = (json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("b", "again"))
    assert again["inputs"] == first["inputs"] and again["outputs"] == first["outputs"]


def test_the_evaluator_takes_and_gives_packed_io_as_values():
    """evaluate(module, feeds) stays the module's meaning as a bundle's user sees it: values in, values out."""
    model = _io_model("u2", (3, 5))
    module = import_onnx(model)
    assert module.packed_outputs and any("packed" in p.attrs for p in module.entry.parameters())
    q = _values("u2", (3, 5), seed=5)
    x = np.random.default_rng(6).uniform(-3, 3, (3, 5)).astype(np.float32)
    got = evaluate(module, {"q": q, "x": x})
    for name, want in zip(["d", "t", "r"], ReferenceEvaluator(model).run(None, {"q": q, "x": x})):
        assert got[name].dtype == want.dtype and got[name].shape == want.shape
        np.testing.assert_array_equal(got[name].astype(np.float32), want.astype(np.float32))
    # an input given as its packed bytes is taken as it is
    packed = evaluate(module, {"q": pack_values(q.reshape(-1), 2), "x": x})
    np.testing.assert_array_equal(packed["t"].astype(np.int8), got["t"].astype(np.int8))
