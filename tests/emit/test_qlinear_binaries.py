"""int8 contractions run on the integer tensor cores: the SASS of a quantized dot and convolution, compiled
ahead of time for sm_80 and sm_90, holds IMMA (sm_80's warp mma on int8) or IGMMA (sm_90's int8 wgmma)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc
from mlcc.emit.target.binaries import nvidia_tool
from mlcc.inspect import binaries_summary


def _model():
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMulInteger", ["a", "w", "za"], ["m"], name="mm"),
             helper.make_node("ConvInteger", ["x", "k", "zx"], ["c"], name="conv", pads=[1, 1, 1, 1])]
    inits = [numpy_helper.from_array(rng.integers(-127, 128, (128, 64)).astype(np.int8), "w"),
             numpy_helper.from_array(np.array(7, np.uint8), "za"),
             numpy_helper.from_array(rng.integers(-127, 128, (64, 32, 3, 3)).astype(np.int8), "k"),
             numpy_helper.from_array(np.array(9, np.uint8), "zx")]
    graph = helper.make_graph(nodes, "int8", [helper.make_tensor_value_info("a", TensorProto.UINT8, [64, 128]),
                                              helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 32, 16, 16])],
                              [helper.make_tensor_value_info("m", TensorProto.INT32, [64, 64]),
                               helper.make_tensor_value_info("c", TensorProto.INT32, [1, 64, 16, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), rng


@pytest.mark.slow  # two AOT compiles per kernel and a run under the interpreter: about 20 s on 2 cores
@pytest.mark.skipif(nvidia_tool("nvdisasm") is None, reason="needs nvdisasm (Triton's NVIDIA backend ships it)")
def test_int8_dot_and_convolution_use_imma_on_sm_80_and_integer_matrix_units_on_sm_90(tmp_path):
    model, rng = _model()
    r = mlcc.compile(model, tmp_path / "b", targets=["sm_80", "sm_90"])
    rows = binaries_summary(r.out_dir)["binaries"]
    by_target = {}
    for row in rows:
        if row["template"] not in ("matmul.py.jinja", "conv.py.jinja"):
            continue  # the convolution's input padded with its zero point: a loop kernel
        by_target.setdefault(row["target"], []).append(set(row["extra"]["matrix_opcodes"]))
    assert all("IMMA" in ops for ops in by_target["sm_80"]) and len(by_target["sm_80"]) == 2
    assert all(ops & {"IMMA", "IGMMA"} and not ops & {"HMMA", "HGMMA"} for ops in by_target["sm_90"])
    assert len(by_target["sm_90"]) == 2
    # and the same kernels, run by Triton's interpreter, are exact against numpy's int64 products
    a = rng.integers(0, 256, (64, 128)).astype(np.uint8)
    x = rng.integers(0, 256, (1, 32, 16, 16)).astype(np.uint8)
    got = mlcc.load(r.out_dir, device="cpu").run({"a": a, "x": x})
    w = numpy_helper.to_array(model.graph.initializer[0]).astype(np.int64)
    np.testing.assert_array_equal(got["m"], (a.astype(np.int64) - 7) @ w)
    k = numpy_helper.to_array(model.graph.initializer[2]).astype(np.int64)
    xp = np.pad(x.astype(np.int64) - 9, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # [1, 32, 16, 16, 3, 3]
    np.testing.assert_array_equal(got["c"], np.einsum("bchwij,ocij->bohw", windows, k))
