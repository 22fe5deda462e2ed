"""4- and 2-bit values materialized in the arena are stored packed (mlcc/hlo/passes/packed_arena.py): the
loop kernel that computes one stores ceil(n * bits / 8) bytes in ONNX's order and every loop kernel that
reads it unpacks them in its loads. Checked against onnx.reference and the buffer sizes of the memory plan."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import mlcc
from mlcc.frontend.onnx import import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.printer import format_module
from mlcc.hlo.passes.packed_arena import PackArenaValues
from mlcc.hlo.passes.pass_manager import Pipeline, PipelineOptions
from mlcc.hlo.verifier import verify_module
from mlcc.pipeline import compile_pipeline, phases

TYPES = {"s4": (TensorProto.INT4, 4, ml_dtypes.int4), "u4": (TensorProto.UINT4, 4, ml_dtypes.uint4),
         "s2": (TensorProto.INT2, 2, ml_dtypes.int2), "u2": (TensorProto.UINT2, 2, ml_dtypes.uint2)}


def _model(dtype: str, m: int, k: int, n: int = 3) -> onnx.ModelProto:
    """q = QuantizeLinear(x) to ``dtype``, read by two kernels that do not fuse with its producer: a
    DequantizeLinear feeding a MatMul (y) and a Cast to int32 (c)."""
    qtype, bits, _ = TYPES[dtype]
    w = ((np.arange(k * n, dtype=np.float32).reshape(k, n) % 5) - 2) * 0.5
    zero = 1 if dtype[0] == "u" else 0
    inits = [numpy_helper.from_array(np.array(0.25, np.float32), "s"), helper.make_tensor("z", qtype, [], [zero]),
             numpy_helper.from_array(w, "w")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node("MatMul", ["d", "w"], ["y"]),
             helper.make_node("Cast", ["q"], ["c"], to=TensorProto.INT32)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n]),
                               helper.make_tensor_value_info("c", TensorProto.INT32, [m, k])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _x(dtype: str, m: int, k: int) -> np.ndarray:
    """Values over the type's whole range and past it (saturated), halves included (rounded to even)."""
    span = 2 ** TYPES[dtype][1]
    return (np.random.default_rng(m * k).integers(-2 * span, 2 * span, size=(m, k)) * 0.125).astype(np.float32)


@pytest.mark.parametrize("dtype,m,k", [("s4", 5, 7), ("u4", 4, 6), ("s2", 3, 5), ("u2", 2, 7), ("s4", 1, 1),
                                       ("u2", 4, 4), ("s4", 33, 129), ("u2", 17, 131)])
def test_a_4_or_2_bit_arena_value_is_stored_packed(tmp_path, dtype, m, k):
    model = _model(dtype, m, k)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    mlcc.compile(path, tmp_path / "b", cache_dir="", targets=[])
    x = _x(dtype, m, k)
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": x})
    want = dict(zip(("y", "c"), ReferenceEvaluator(model).run(None, {"x": x})))
    np.testing.assert_array_equal(got["c"], want["c"])
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    buffers = manifest["memory_plan"]["buffers"]
    assert not [b for b in buffers if b["dtype"] == dtype], "stored a byte a value"
    packed = -(-m * k * TYPES[dtype][1] // 8)
    assert [b["bytes"] for b in buffers if b["dtype"] == "u8"] == [packed]


def test_the_packed_arena_value_prints_parses_and_evaluates_back(tmp_path):
    model = _model("s4", 3, 5)
    module = import_onnx(model)
    compile_pipeline().run(module)
    text = format_module(module)
    assert "u8[8]{0} fusion(" in text  # 15 values in 8 bytes, the last half used
    again = parse_module(text)
    assert format_module(again) == text
    x = _x("s4", 3, 5)
    got = evaluate(again, {"x": x})
    want = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_array_equal(np.asarray(got["c"]), want[1])
    np.testing.assert_allclose(np.asarray(got["y"]), want[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", list(TYPES))
def test_the_pass_takes_fused_ir_text_and_keeps_its_meaning(dtype):
    """IR text in (the fused module, the pass disabled), IR text out: the same values, the 4- or 2-bit
    value's kernel returning its packed bytes and both readers taking them."""
    model = _model(dtype, 3, 7)
    module = import_onnx(model)
    fused = Pipeline("to-fusion", [p for p in phases() if p.name in ("simplify", "recognize", "precision",
                                                                     "layouts", "fusion")])
    fused.run(module, PipelineOptions(disabled=frozenset({"pack-arena-values"})))
    before = parse_module(format_module(module))
    before.constants = module.constants  # text holds a weight by its ref
    assert f"{dtype}[3,7]{{1,0}} fusion(" in format_module(before)
    after = parse_module(format_module(before))
    assert PackArenaValues().run(after)
    verify_module(after)
    text = format_module(after)
    nbytes = -(-21 * TYPES[dtype][1] // 8)
    assert f"{dtype}[3,7]{{1,0}} fusion(" not in text and f"u8[{nbytes}]{{0}} fusion(" in text
    assert text.count(f"u8[{nbytes}]{{0}} parameter(0)") == 2  # both readers unpack the bytes
    assert not PackArenaValues().run(parse_module(text))  # nothing left to pack
    x = _x(dtype, 3, 7)
    again = parse_module(text)
    again.constants = module.constants
    want, got = evaluate(before, {"x": x}), evaluate(again, {"x": x})
    np.testing.assert_array_equal(np.asarray(got["c"]), np.asarray(want["c"]))
    np.testing.assert_array_equal(np.asarray(got["y"]), np.asarray(want["y"]))


def test_a_bundles_model_hlo_compiles_back_to_the_same_packed_arena(tmp_path):
    model = _model("s4", 5, 7)
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    mlcc.compile(tmp_path / "b" / "model.hlo", tmp_path / "again", cache_dir="", targets=[])
    first, again = (json.loads((tmp_path / d / "manifest.json").read_text())["memory_plan"] for d in ("b", "again"))
    assert again == first and [b["bytes"] for b in first["buffers"] if b["dtype"] == "u8"] == [18]
    x = _x("s4", 5, 7)
    got = mlcc.load(tmp_path / "again", device="cpu").run({"x": x})
    want = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_array_equal(got["c"], want[1])
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-6, atol=1e-6)


LAID_OUT = """HloModule laid_out, output_names={c,d}

%fused_loop.q {
  %param_0 = f32[3,4]{1,0} parameter(0)
  %lo = f32[] constant(), value={-8.0}
  %hi = f32[] constant(), value={7.0}
  %r = f32[3,4]{1,0} round-nearest-even(%param_0)
  %cl = f32[3,4]{1,0} clamp(%lo, %r, %hi)
  ROOT %q = s4[3,4]{0,1} convert(%cl)
}

%fused_loop.c {
  %param_0 = s4[3,4]{0,1} parameter(0)
  ROOT %c = s32[3,4]{1,0} convert(%param_0)
}

%fused_loop.d {
  %param_0 = s4[3,4]{0,1} parameter(0)
  %b = s4[4,3]{1,0} bitcast(%param_0)
  ROOT %d = s32[4,3]{1,0} convert(%b)
}

ENTRY %main {
  %x = f32[3,4]{1,0} parameter(0), name=x
  %q = s4[3,4]{0,1} fusion(%x), calls=%fused_loop.q, kind=loop
  %c = s32[3,4]{1,0} fusion(%q), calls=%fused_loop.c, kind=loop
  %d = s32[4,3]{1,0} fusion(%q), calls=%fused_loop.d, kind=loop
  ROOT %t = (s32[3,4]{1,0}, s32[4,3]{1,0}) tuple(%c, %d)
}
"""


def test_a_value_of_another_layout_is_packed_in_row_major_order_unless_a_reader_bitcasts_it():
    """IR text in: a column-major int4 value a loop kernel writes packs (its bytes hold the values in row-major
    order, which each reader unpacks at logical coordinates), with the same values; read through a bitcast,
    which reinterprets the column-major layout (a transpose here), it keeps its layout and a byte a value."""
    x = (np.random.default_rng(4).integers(-12, 12, (3, 4)) * 0.75).astype(np.float32)
    want = np.clip(np.round(x), -8, 7).astype(np.int32)
    module = parse_module(LAID_OUT)
    verify_module(module)
    np.testing.assert_array_equal(np.asarray(evaluate(module, {"x": x})["d"]), want.T)  # the bitcast transposes
    assert not PackArenaValues().run(module)
    one_reader = parse_module(LAID_OUT.replace("output_names={c,d}", "output_names={c}").replace(
        "ROOT %t = (s32[3,4]{1,0}, s32[4,3]{1,0}) tuple(%c, %d)", "ROOT %t = (s32[3,4]{1,0}) tuple(%c)").replace(
        "  %d = s32[4,3]{1,0} fusion(%q), calls=%fused_loop.d, kind=loop\n", ""))
    assert PackArenaValues().run(one_reader)
    verify_module(one_reader)
    text = format_module(one_reader)
    assert "u8[6]{0} fusion(%x)" in text and "s4[3,4]{0,1} fusion(" not in text
    again = parse_module(text)
    np.testing.assert_array_equal(np.asarray(evaluate(again, {"x": x})["c"]), want)
