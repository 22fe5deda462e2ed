"""Pre-norm blocks with rows longer than a K tile (hidden 512, LLaMA's RMSNorm and GPT-2's LayerNorm): the norm
is applied as the consuming GEMM loads its A tiles (mlcc/hlo/passes/a_prologue.py), its row statistics from a
loop over the program's rows before the K loop (templates/_norm_prologue.jinja's row_stats). The residual
stream is computed by a GEMM's epilogue (an attention output projection plus its residual), normalized, and
read by the merged Q/K projection. It must launch no norm kernel, store no normalized activations, and match
onnxruntime on CPU and under the sm_90 binaries' launch configs (sim:sm_90)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc

HIDDEN, SEQ, HEAD = 512, 16, 64


def pre_norm_block(tmp_path, kind: str) -> tuple[str, dict[str, np.ndarray]]:
    """h = x @ w1 + b1 + res (a model output, as the residual stream is read by the next residual add), then
    q = norm(h) @ wq and k = norm(h) @ wk."""
    rng = np.random.default_rng(3)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    arrays = {"w1": weight(HIDDEN, HIDDEN), "b1": 0.1 * rng.standard_normal(HIDDEN).astype(np.float32),
              "g": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
              "beta": (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
              "wq": weight(HIDDEN, HEAD), "wk": weight(HIDDEN, HEAD)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["p"]), helper.make_node("Add", ["p", "b1"], ["pb"]),
             helper.make_node("Add", ["pb", "res"], ["h"])]
    if kind == "rms":
        nodes.append(helper.make_node("RMSNormalization", ["h", "g"], ["n"], axis=-1, epsilon=1e-6))
        del arrays["beta"]
    else:
        nodes.append(helper.make_node("LayerNormalization", ["h", "g", "beta"], ["n"], axis=-1, epsilon=1e-5))
    nodes += [helper.make_node("MatMul", ["n", "wq"], ["q"]), helper.make_node("MatMul", ["n", "wk"], ["k"])]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, f"pre_{kind}_norm",
        [value("x", TensorProto.FLOAT, [1, SEQ, HIDDEN]), value("res", TensorProto.FLOAT, [1, SEQ, HIDDEN])],
        [value("h", TensorProto.FLOAT, [1, SEQ, HIDDEN]), value("q", TensorProto.FLOAT, [1, SEQ, HEAD]),
         value("k", TensorProto.FLOAT, [1, SEQ, HEAD])],
        [numpy_helper.from_array(a, n) for n, a in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    path = tmp_path / f"pre_{kind}_norm.onnx"
    onnx.save(model, path)
    return str(path), arrays


@pytest.mark.parametrize("kind", ["rms", "layer"])
@pytest.mark.parametrize("device, target", [("cpu", "none"), ("sim:sm_90", "sm_90")])
def test_a_long_row_norm_is_applied_in_the_gemms_a_loads_and_matches_onnxruntime(tmp_path, kind, device, target):
    path, arrays = pre_norm_block(tmp_path, kind)
    r = mlcc.compile(path, tmp_path / "b", targets=[] if target == "none" else [target], cache_dir="")
    manifest = json.loads((r.out_dir / "manifest.json").read_text())
    kernels = {k["name"]: k for k in manifest["kernels"]}
    templates = [kernels[s["kernel"]]["template"] for s in manifest["schedule"]]
    # the residual GEMM, the normalizing Q/K GEMM, and the two slices of the merged projection's output: no
    # norm kernel
    assert "row_norm.py.jinja" not in templates and templates[:2] == ["matmul.py.jinja", "matmul.py.jinja"]
    assert len(templates) == 4
    source = (r.out_dir / kernels[manifest["schedule"][1]["kernel"]]["source"]).read_text()
    assert source.count("for k_start in range(0, 512, BLOCK_K)") == 2  # the statistics loop, then the K loop
    # the normalizing GEMM reads h, the norm's scale (and bias) and both weights: the normalized [16, 512] rows
    # are neither written nor read by anyone
    expected = (SEQ * HIDDEN + sum(arrays[n].size for n in ("g", "beta", "wq", "wk") if n in arrays)) * 4
    assert manifest["schedule"][1]["bytes_read"] == expected
    rng = np.random.default_rng(4)
    inputs = {n: rng.standard_normal((1, SEQ, HIDDEN)).astype(np.float32) for n in ("x", "res")}
    want = dict(zip(("h", "q", "k"), ort.InferenceSession(path).run(None, inputs)))
    got = mlcc.load(r.out_dir, device=device).run(inputs)
    for name, ref in want.items():
        np.testing.assert_allclose(got[name], ref, rtol=1e-4, atol=1e-4, err_msg=name)
