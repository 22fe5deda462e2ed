"""A 4- or 2-bit value an attention kernel reads is stored packed (mlcc/hlo/passes/packed_arena.py
PACKED_READERS, README "The bundle"): q, k or v dequantized from it fuse into the attention kernel, whose
q/k/v tiles are computed at their coordinates (attention.py.jinja's sections), the unpack of the packed bytes
included. Checked against onnx.reference with the arena buffer's size, on the CPU and on sim:sm_90."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import mlcc

QTYPES = {"s4": (T.INT4, 4), "u4": (T.UINT4, 4), "s2": (T.INT2, 2), "u2": (T.UINT2, 2)}


def _attention_reading(dtype: str, dims: tuple[int, ...], which: str) -> onnx.ModelProto:
    """qa = QuantizeLinear(which) to dtype (a loop kernel), dequantized into softmax(q k^T / sqrt(d)) v in
    place of which (the attention kernel's tiles), and read by a Cast to int32 (c) as well."""
    qtype, _ = QTYPES[dtype]
    zero = 1 if dtype[0] == "u" else 0
    inits = [nh.from_array(np.array(0.25, np.float32), "s"), h.make_tensor("z", qtype, [], [zero]),
             nh.from_array(np.array(1 / np.sqrt(dims[-1]), np.float32), "scale")]
    name = {n: ("dq" if n == which else n) for n in "qkv"}
    nodes = [h.make_node("QuantizeLinear", [which, "s", "z"], ["qa"]),
             h.make_node("DequantizeLinear", ["qa", "s", "z"], ["dq"]), h.make_node("Cast", ["qa"], ["c"], to=T.INT32),
             h.make_node("Transpose", [name["k"]], ["kt"], perm=[0, 1, 3, 2]),
             h.make_node("MatMul", [name["q"], "kt"], ["qk"]), h.make_node("Mul", ["qk", "scale"], ["sc"]),
             h.make_node("Softmax", ["sc"], ["p"], axis=-1), h.make_node("MatMul", ["p", name["v"]], ["a"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, T.FLOAT, list(dims)) for n in "qkv"],
                         [h.make_tensor_value_info("a", T.FLOAT, list(dims)),
                          h.make_tensor_value_info("c", T.INT32, list(dims))], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])


@pytest.mark.parametrize("dtype,dims,which,device", [("s4", (1, 2, 8, 16), "k", "cpu"), ("u2", (2, 2, 5, 12), "v", "cpu"),
                                                     ("u4", (1, 3, 7, 9), "q", "cpu"), ("s2", (1, 2, 6, 8), "k", "cpu"),
                                                     ("s4", (1, 2, 5, 16), "v", "sim:sm_90"),
                                                     ("u2", (1, 2, 9, 12), "k", "sim:sm_90")])
def test_an_attention_kernel_reads_a_packed_4_or_2_bit_value(tmp_path, dtype, dims, which, device):
    model = _attention_reading(dtype, dims, which)
    onnx.save(model, tmp_path / "m.onnx")
    mlcc.compile(tmp_path / "m.onnx", tmp_path / "b", cache_dir="", targets=["sm_90"] if device != "cpu" else [])
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert sum("attention" in s["kernel"] for s in manifest["schedule"]) == 1  # the dequantize fused into it
    rng = np.random.default_rng(sum(dims))
    feeds = {n: (rng.standard_normal(dims) * 2).astype(np.float32) for n in "qkv"}
    got = mlcc.load(tmp_path / "b", device=device).run(feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    np.testing.assert_array_equal(got["c"], want[1])
    np.testing.assert_allclose(got["a"], want[0], rtol=1e-5, atol=1e-5)
    buffers = manifest["memory_plan"]["buffers"]
    assert not [b for b in buffers if b["dtype"] == dtype], "stored a byte a value"
    assert [b["bytes"] for b in buffers if b["dtype"] == "u8"] == [-(-int(np.prod(dims)) * QTYPES[dtype][1] // 8)]
