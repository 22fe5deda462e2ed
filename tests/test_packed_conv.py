"""A 4- or 2-bit value a convolution's kernel writes is stored packed (mlcc/hlo/passes/packed_arena.py
_packing_conv, conv.py.jinja, README "The bundle"): the convolution's output fusion computes the quantized
value in its epilogue and or-s the values a byte holds, neighbours along the tile's positions (an NCHW
result: H x W a multiple of the values a byte) or its features (an NHWC-labelled result: features a multiple
of the values a byte), into whole bytes. Checked against onnx.reference with the arena buffer's size, on the
CPU (interpreter tiles) and on sim:sm_90 (the sm_90 binaries' tiles under the interpreter)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import mlcc
from mlcc.frontend.onnx import import_onnx
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module
from mlcc.pipeline import compile_pipeline

QTYPES = {"s4": (T.INT4, 4), "u4": (T.UINT4, 4), "s2": (T.INT2, 2), "u2": (T.UINT2, 2)}


def _conv_model(dtype: str, n: int, c: int, hw: tuple[int, int], f: int) -> tuple[onnx.ModelProto, list[int]]:
    """q = QuantizeLinear(Conv(x, w)) to dtype (3x3, pad 1, computed in the convolution's epilogue), read by
    a DequantizeLinear (d) and a Cast to int32 (c), loop kernels."""
    qtype, _ = QTYPES[dtype]
    zero = 1 if dtype[0] == "u" else 0
    w = ((np.arange(f * c * 9).reshape(f, c, 3, 3) % 7) - 3).astype(np.float32) * 0.25
    inits = [nh.from_array(np.array(0.5, np.float32), "s"), h.make_tensor("z", qtype, [], [zero]),
             nh.from_array(w, "w")]
    nodes = [h.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["a", "s", "z"], ["q"]),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]), h.make_node("Cast", ["q"], ["c"], to=T.INT32)]
    dims = [n, f, *hw]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [n, c, *hw])],
                         [h.make_tensor_value_info("d", T.FLOAT, dims), h.make_tensor_value_info("c", T.INT32, dims)],
                         inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)]), dims


def _run(tmp_path, model: onnx.ModelProto, x: np.ndarray, device: str) -> tuple[dict, list, dict]:
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=["sm_90"] if device != "cpu" else [])
    got = mlcc.load(tmp_path / "b", device=device).run({"x": x})
    want = dict(zip(("d", "c"), ReferenceEvaluator(model).run(None, {"x": x})))
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    return got, manifest["memory_plan"]["buffers"], want


def _check(got: dict, want: dict) -> None:
    np.testing.assert_array_equal(got["c"], want["c"])
    np.testing.assert_allclose(got["d"], want["d"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype,n,c,hw,f,device", [("s4", 2, 3, (4, 5), 4, "cpu"), ("u4", 1, 2, (3, 6), 5, "cpu"),
                                                   ("s2", 3, 2, (2, 6), 3, "cpu"), ("u2", 1, 4, (4, 4), 6, "cpu"),
                                                   ("s4", 2, 3, (6, 3), 5, "sim:sm_90"),
                                                   ("u2", 2, 2, (2, 10), 3, "sim:sm_90")])
def test_a_convolution_stores_its_4_or_2_bit_result_packed(tmp_path, dtype, n, c, hw, f, device):
    model, dims = _conv_model(dtype, n, c, hw, f)
    x = (np.random.default_rng(n * 7 + f).standard_normal((n, c, *hw)) * 2).astype(np.float32)
    got, buffers, want = _run(tmp_path, model, x, device)
    _check(got, want)
    assert not [b for b in buffers if b["dtype"] == dtype], "stored a byte a value"
    assert [b["bytes"] for b in buffers if b["dtype"] == "u8"] == [-(-int(np.prod(dims)) * QTYPES[dtype][1] // 8)]


def test_a_convolution_whose_positions_split_a_byte_keeps_a_byte_a_value(tmp_path):
    """README "The bundle": 3 x 3 positions of int4 values end mid-byte, so a byte would hold the last
    position of one feature and the first of the next, which other programs compute: a byte a value."""
    model, dims = _conv_model("s4", 1, 2, (3, 3), 4)
    x = (np.random.default_rng(5).standard_normal((1, 2, 3, 3)) * 2).astype(np.float32)
    got, buffers, want = _run(tmp_path, model, x, "cpu")
    _check(got, want)
    assert [b["bytes"] for b in buffers if b["dtype"] == "s4"] == [int(np.prod(dims))]


NHWC_HLO = """HloModule nhwc, output_names={{c,d}}

ENTRY %main {{
  %x = f32[{n},{h},{w},{c}]{{3,2,1,0}} parameter(0), name=x
  %w = f32[3,3,{c},{f}]{{3,2,1,0}} parameter(1), name=w
  %conv = f32[{out}]{{3,2,1,0}} convolution(%x, %w), dim_labels=b01f_01io->b01f, feature_group_count=1, padding_high={{1,1}}, padding_low={{1,1}}, rhs_dilation={{1,1}}, window_strides={{1,1}}
  %r = f32[{out}]{{3,2,1,0}} round-nearest-even(%conv)
  %lo = f32[] constant(), value={{{lo}.0}}
  %hi = f32[] constant(), value={{{hi}.0}}
  %cl = f32[{out}]{{3,2,1,0}} clamp(%lo, %r, %hi)
  %q = {dtype}[{out}]{{3,2,1,0}} convert(%cl)
  %c = s32[{out}]{{3,2,1,0}} convert(%q)
  %fq = f32[{out}]{{3,2,1,0}} convert(%q)
  %d = f32[{out}]{{3,2,1,0}} add(%fq, %fq)
  ROOT %t = (s32[{out}]{{3,2,1,0}}, f32[{out}]{{3,2,1,0}}) tuple(%c, %d)
}}
"""


def _conv_nhwc(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """numpy's 3x3 convolution, padding 1, NHWC input, HWIO weights, NHWC result (float64 sums)."""
    n, hh, ww, _ = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, hh, ww, w.shape[3]))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nhwc,cf->nhwf", xp[:, i:i + hh, j:j + ww, :], w[i, j].astype(np.float64))
    return out


@pytest.mark.parametrize("dtype,n,hw,c,f,device", [("s4", 2, (4, 5), 3, 4, "cpu"), ("u2", 1, (3, 3), 2, 8, "cpu"),
                                                   ("u4", 2, (3, 5), 3, 6, "sim:sm_90")])
def test_an_nhwc_convolution_packs_along_its_features(tmp_path, dtype, n, hw, c, f, device):
    """IR text in (a StableHLO-style NHWC convolution, features innermost, an odd count of positions): the
    values a byte holds are neighbours along the tile's features; checked against numpy."""
    bits = QTYPES[dtype][1]
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dtype[0] == "s" else (0, 2 ** bits - 1)
    out = [n, *hw, f]
    text = NHWC_HLO.format(n=n, h=hw[0], w=hw[1], c=c, f=f, out=",".join(map(str, out)), lo=lo, hi=hi, dtype=dtype)
    (tmp_path / "m.hlo").write_text(text)
    mlcc.compile(tmp_path / "m.hlo", tmp_path / "b", cache_dir="", targets=["sm_90"] if device != "cpu" else [])
    rng = np.random.default_rng(n * 11 + f)
    x = (rng.standard_normal((n, *hw, c)) * 2).astype(np.float32)
    w = (rng.integers(-3, 4, (3, 3, c, f)) * 0.5).astype(np.float32)
    got = mlcc.load(tmp_path / "b", device=device).run({"x": x, "w": w})
    q = np.clip(np.round(_conv_nhwc(x, w)), lo, hi).astype(np.int32)
    np.testing.assert_array_equal(got["c"], q)
    np.testing.assert_array_equal(got["d"], (2 * q).astype(np.float32))
    buffers = json.loads((tmp_path / "b" / "manifest.json").read_text())["memory_plan"]["buffers"]
    assert not [b for b in buffers if b["dtype"] == dtype], "stored a byte a value"
    assert [b["bytes"] for b in buffers if b["dtype"] == "u8"] == [-(-int(np.prod(out)) * bits // 8)]


def test_a_value_laid_out_for_the_convolution_reading_it_is_stored_packed(tmp_path):
    """q = QuantizeLinear(x) to int4, dequantized into a Conv and cast to int32: layout assignment lays q out
    as the convolution reads it (NHWC), and its loop kernel still computes whole bytes of the values in
    row-major order, which the DequantizeLinear's loop kernel (the convolution's operand) unpacks."""
    w = ((np.arange(4 * 3 * 9).reshape(4, 3, 3, 3) % 7) - 3).astype(np.float32) * 0.25
    inits = [nh.from_array(np.array(0.5, np.float32), "s"), h.make_tensor("z", T.INT4, [], [0]), nh.from_array(w, "w")]
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             h.make_node("Conv", ["d", "w"], ["y"], pads=[1] * 4), h.make_node("Cast", ["q"], ["c"], to=T.INT32)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 5, 5])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 5, 5]),
                          h.make_tensor_value_info("c", T.INT32, [1, 3, 5, 5])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    assert "f32[1,3,5,5]{1,3,2,0} fusion(" in (tmp_path / "b" / "model.hlo").read_text()  # laid out NHWC
    x = (np.random.default_rng(0).standard_normal((1, 3, 5, 5)) * 3).astype(np.float32)
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": x})
    want = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_array_equal(got["c"], want[1])
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-5, atol=1e-5)
    buffers = json.loads((tmp_path / "b" / "manifest.json").read_text())["memory_plan"]["buffers"]
    assert not [b for b in buffers if b["dtype"] == "s4"]
    assert [b["bytes"] for b in buffers if b["dtype"] == "u8"] == [38]  # 75 values


def test_a_packed_convolution_writer_prints_parses_evaluates_and_compiles_back(tmp_path):
    """IR text out, IR text in: the fused module whose convolution fusion returns packed bytes parses back to
    the same text and evaluates to onnx.reference's values; a bundle's model.hlo compiles back to the same
    memory plan and still matches."""
    model, dims = _conv_model("u4", 2, 3, (4, 4), 5)
    module = import_onnx(model)
    compile_pipeline().run(module)
    text = format_module(module)
    assert "u8[80]{0} fusion(" in text and "kind=output" in text  # 160 values, the convolution's kernel packs
    again = parse_module(text)
    again.constants = module.constants  # the text holds a weight by its ref
    verify_module(again)
    assert format_module(again) == text
    x = (np.random.default_rng(9).standard_normal((2, 3, 4, 4)) * 2).astype(np.float32)
    want = dict(zip(("d", "c"), ReferenceEvaluator(model).run(None, {"x": x})))
    np.testing.assert_array_equal(np.asarray(evaluate(again, {"x": x})["c"]), want["c"])
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=[])
    mlcc.compile(tmp_path / "b" / "model.hlo", tmp_path / "again", cache_dir="", targets=[])
    first, second = (json.loads((tmp_path / d / "manifest.json").read_text())["memory_plan"] for d in ("b", "again"))
    assert second == first and [b["bytes"] for b in first["buffers"] if b["dtype"] == "u8"] == [80]
    _check(mlcc.load(tmp_path / "again", device="cpu").run({"x": x}), want)
