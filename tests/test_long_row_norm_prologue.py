"""Pre-norm blocks with rows longer than a K tile (hidden 512, LLaMA's RMSNorm and GPT-2's LayerNorm): the norm
is applied as the consuming GEMM loads its A tiles (mlcc/hlo/passes/a_prologue.py). The residual stream is
normalized and read by the merged Q/K projection. When a GEMM's epilogue computes it (an attention output
projection plus its residual), that kernel also stores its rows' statistics as per-64-column partials
(mlcc/hlo/passes/norm_statistics.py) and the Q/K GEMM combines them; when a loop kernel computes it (a plain
residual add), the Q/K GEMM computes them itself in a loop over its rows before its K loop
(templates/_norm_prologue.jinja's row_stats). Either way no norm kernel is launched, no normalized activations
are stored, and the outputs match onnxruntime on CPU and under the sm_90 binaries' launch configs (sim:sm_90)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlcc

HIDDEN, SEQ, HEAD = 512, 16, 64


def pre_norm_block(tmp_path, kind: str, producer: str = "gemm") -> tuple[str, dict[str, np.ndarray]]:
    """h = x @ w1 + b1 + res (producer "gemm") or h = x + res ("add"), a model output as the residual stream is
    read by the next residual add; then q = norm(h) @ wq and k = norm(h) @ wk."""
    rng = np.random.default_rng(3)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    arrays = {"w1": weight(HIDDEN, HIDDEN), "b1": 0.1 * rng.standard_normal(HIDDEN).astype(np.float32),
              "g": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
              "beta": (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
              "wq": weight(HIDDEN, HEAD), "wk": weight(HIDDEN, HEAD)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["p"]), helper.make_node("Add", ["p", "b1"], ["pb"]),
             helper.make_node("Add", ["pb", "res"], ["h"])]
    if producer == "add":
        nodes = [helper.make_node("Add", ["x", "res"], ["h"])]
        del arrays["w1"], arrays["b1"]
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
    path = tmp_path / f"pre_{kind}_norm_{producer}.onnx"
    onnx.save(model, path)
    return str(path), arrays


@pytest.mark.parametrize("kind", ["rms", "layer"])
@pytest.mark.parametrize("producer", ["gemm", "add"])
@pytest.mark.parametrize("device, target", [("cpu", "none"), ("sim:sm_90", "sm_90")])
def test_a_long_row_norm_is_applied_in_the_gemms_a_loads_and_matches_onnxruntime(tmp_path, kind, producer, device,
                                                                                 target):
    path, arrays = pre_norm_block(tmp_path, kind, producer)
    r = mlcc.compile(path, tmp_path / "b", targets=[] if target == "none" else [target], cache_dir="")
    manifest = json.loads((r.out_dir / "manifest.json").read_text())
    kernels = {k["name"]: k for k in manifest["kernels"]}
    steps = manifest["schedule"]
    templates = [kernels[s["kernel"]]["template"] for s in steps]
    # the residual (GEMM or add), the normalizing Q/K GEMM, the two slices of the merged projection's output:
    # no norm kernel
    assert templates == ["matmul.py.jinja" if producer == "gemm" else "loop.py.jinja", "matmul.py.jinja",
                         "loop.py.jinja", "loop.py.jinja"]
    source = (r.out_dir / kernels[steps[1]["kernel"]]["source"]).read_text()
    rows = SEQ * HIDDEN * 4
    # the partials: 8 of 64 columns per row, a sum of squares (rms) or a mean and an M2 (layer) each, in f32
    stats = SEQ * (HIDDEN // 64) * (1 if kind == "rms" else 2) * 4 if producer == "gemm" else 0
    assert steps[0]["bytes_written"] == rows + stats
    # the Q/K GEMM reads h (and its statistics), the norm's scale (and bias) and both weights: the normalized
    # [16, 512] rows are neither written nor read by anyone
    params = sum(arrays[n].size for n in ("g", "beta", "wq", "wk") if n in arrays) * 4
    assert steps[1]["bytes_read"] == rows + params + stats
    loops = source.count("for k_start in range(0, 512, BLOCK_K)")
    assert loops == (1 if producer == "gemm" else 2)  # the statistics loop only where no producer stored them
    rng = np.random.default_rng(4)
    inputs = {n: rng.standard_normal((1, SEQ, HIDDEN)).astype(np.float32) for n in ("x", "res")}
    want = dict(zip(("h", "q", "k"), ort.InferenceSession(path).run(None, inputs)))
    got = mlcc.load(r.out_dir, device=device).run(inputs)
    for name, ref in want.items():
        np.testing.assert_allclose(got[name], ref, rtol=1e-4, atol=1e-4, err_msg=name)


def test_a_norm_whose_input_no_gemm_computes_says_why_its_statistics_are_not_stored(tmp_path):
    path, _ = pre_norm_block(tmp_path, "rms", "add")
    r = mlcc.compile(path, tmp_path / "b", targets=[], cache_dir="")
    assert "%add -> %fusion.dot.2: row statistics not computed by the producer: the norm's input comes from a " \
           "kernel of its own (add), not a GEMM's epilogue" in r.fusion_explanations


def llama_mlp_block(tmp_path) -> str:
    """LLaMA's MLP at hidden 512 and the next layer's attention norm: n = rms(x), h = x + (silu(n @ wg) * (n @ wu))
    @ wd (a model output), then q = rms(h) @ wq."""
    rng = np.random.default_rng(11)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    arrays = {"g1": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32), "wg": weight(HIDDEN, 2 * HIDDEN),
              "wu": weight(HIDDEN, 2 * HIDDEN), "wd": weight(2 * HIDDEN, HIDDEN),
              "g2": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32), "wq": weight(HIDDEN, HEAD)}
    nodes = [helper.make_node("RMSNormalization", ["x", "g1"], ["n"], axis=-1, epsilon=1e-6),
             helper.make_node("MatMul", ["n", "wg"], ["gate"]), helper.make_node("MatMul", ["n", "wu"], ["up"]),
             helper.make_node("Sigmoid", ["gate"], ["sig"]), helper.make_node("Mul", ["gate", "sig"], ["silu"]),
             helper.make_node("Mul", ["silu", "up"], ["gated"]), helper.make_node("MatMul", ["gated", "wd"], ["down"]),
             helper.make_node("Add", ["x", "down"], ["h"]),
             helper.make_node("RMSNormalization", ["h", "g2"], ["n2"], axis=-1, epsilon=1e-6),
             helper.make_node("MatMul", ["n2", "wq"], ["q"])]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "llama_mlp", [value("x", TensorProto.FLOAT, [1, SEQ, HIDDEN])],
        [value("h", TensorProto.FLOAT, [1, SEQ, HIDDEN]), value("q", TensorProto.FLOAT, [1, SEQ, HEAD])],
        [numpy_helper.from_array(a, n) for n, a in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    path = tmp_path / "llama_mlp.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.mark.parametrize("device, target", [("cpu", "none"), ("sim:sm_90", "sm_90")])
def test_llamas_mlp_norm_is_applied_in_the_gated_gemm_and_the_split_k_sum_stores_the_next_norms_statistics(
        tmp_path, device, target):
    path = llama_mlp_block(tmp_path)
    r = mlcc.compile(path, tmp_path / "b", targets=[] if target == "none" else [target], cache_dir="")
    manifest = json.loads((r.out_dir / "manifest.json").read_text())
    kernels = {k["name"]: k for k in manifest["kernels"]}
    steps = manifest["schedule"]
    # the gate | up GEMM normalizing its A tiles (a statistics loop: x is a model input), the down projection's
    # K slices, their sum plus the residual storing h's partials, the q GEMM reading them: no norm kernel
    assert [kernels[s["kernel"]]["template"] for s in steps] == ["matmul.py.jinja", "matmul.py.jinja",
                                                                  "reduce.py.jinja", "matmul.py.jinja"]
    sources = [(r.out_dir / kernels[s["kernel"]]["source"]).read_text() for s in steps]
    assert sources[0].count(f"for k_start in range(0, {HIDDEN}, BLOCK_K)") == 2 and "acc_1" in sources[0]
    stats = SEQ * (HIDDEN // 64) * 4
    assert steps[2]["bytes_written"] == SEQ * HIDDEN * 4 + stats and "tl.store(out1" in sources[2]
    assert sources[3].count(f"for k_start in range(0, {HIDDEN}, BLOCK_K)") == 1 and "s_squares" in sources[3]
    inputs = {"x": np.random.default_rng(12).standard_normal((1, SEQ, HIDDEN)).astype(np.float32)}
    want = dict(zip(("h", "q"), ort.InferenceSession(path).run(None, inputs)))
    got = mlcc.load(r.out_dir, device=device).run(inputs)
    for name, ref in want.items():
        np.testing.assert_allclose(got[name], ref, rtol=1e-4, atol=1e-4, err_msg=name)
