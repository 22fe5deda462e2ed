"""What fusion must achieve on real models: launches per inference, distinct kernels, modeled bytes."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner

import mlcc
from mlcc.cli import main

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "models"

# The fusion issue's bars: launches at most, and modeled global-memory bytes (each kernel reads its inputs
# once and writes its output once) at most half of the graph run one kernel per source op. That baseline
# counts views (Reshape, Squeeze, Unsqueeze, Flatten) as free, so it is smaller than it was when these bars
# were set. bert_tiny: issue #24 asks for 0.40, which needs each encoder layer in about one kernel (see
# tests/test_bytes_breakdown.py); 0.39 holds its 0.380: each layer is one attention kernel computing its QKV
# projection, attention, output projection, residual and LayerNorm, and its FFN's two GEMMs, GELU, residual
# and LayerNorm (neither the merged [16, 192] projection, the attention output, the first LayerNorm's output
# nor the GELU output stored: 4 launches).
# gpt2_tiny meets issue #24's 13 launches and 0.40 bytes (its norms are applied in the GEMMs' A loads, its
# MLPs are b2b kernels: 10 launches, 0.33); bert_tiny meets its 12 (the pooler reads its first-token row in
# place as it loads its A tiles; 10 with the b2b FFNs, 8 with the QKV projections in the attention kernels, 6
# with the output projections and first LayerNorms there too, 4 with the FFNs as well).
TARGETS = {"gpt2_tiny": 10, "gpt2_tiny_legacy": 10, "bert_tiny": 4}
BYTES = {"gpt2_tiny": 0.34, "gpt2_tiny_legacy": 0.42, "bert_tiny": 0.39, "light_resnet50": 0.5}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_transformers_run_in_few_kernels_with_one_attention_kernel_per_layer(tmp_path, shared_models, name):
    r = mlcc.compile(shared_models / f"{name}.onnx", tmp_path / "b", targets=[], check_numerics=True)
    m = r.manifest
    stats = m["stats"]
    assert len(m["schedule"]) <= TARGETS[name]
    assert stats["bytes"] <= BYTES[name] * stats["unfused"]["bytes"]
    attention = [s for s in m["schedule"] if "attention" in s["kernel"]]
    assert len(attention) == 2  # two layers, one kernel each
    # No [batch, heads, seq, seq] score matrix reaches memory: the only buffers of that shape (head dim 16
    # equals seq 16 here) are the attention kernels' own outputs.
    intent = json.loads((tmp_path / "b" / "intent.json").read_text())
    for b in intent["buffers"]:
        if b["shape"] == [1, 4, 16, 16] and b["tensor_class"] == "ACTIVATION":
            assert "attention" in b["producer"], b["name"]


def test_bert_normalizes_rows_in_the_epilogue_of_the_projection_before_each_layer_norm(tmp_path, shared_models):
    # residual add + LayerNorm after the attention output and the FFN output projections: 4 in 2 layers, each in
    # the dot's kernel (hidden size 64: one output tile spans a row), so no plain layer-norm kernel reads a dot:
    # both in the layer's attention kernel (mlcc/hlo/passes/attention_layer.py), which computes the FFN (width
    # 128) on the first LayerNorm's rows too
    r = mlcc.compile(shared_models / "bert_tiny.onnx", tmp_path / "b", targets=[])
    hlo = (tmp_path / "b" / "model.hlo").read_text()
    layer = [c for c in hlo.split("\n}\n") if "%fused_attention" in c and c.count(" layer-norm(") == 2 and
             c.count(" dot(") == 4 and " attention(" in c and " gelu(" in c]
    assert len(layer) == 2
    assert not [c for c in hlo.split("\n}\n") if ("%fused_output" in c or "%fused_b2b" in c) and " layer-norm(" in c]
    assert len(r.manifest["schedule"]) <= 4


def test_bert_computes_each_layers_qkv_projection_in_its_attention_kernel(tmp_path, shared_models):
    # encoder self-attention, 16 tokens in one query block: each attention kernel computes q, k and v from the
    # layer's input and the merged [64, 192] weights, so no [1, 16, 192] projection is stored, and no dot is
    # left a kernel of its own; then the output projection ([64, 64]), residual and LayerNorm, and the FFN, so
    # the attention output ([1, 4, 16, 16], stored [1, 16, 64]) is not stored either: each attention kernel
    # writes the layer's output rows [1, 16, 64] alone
    r = mlcc.compile(shared_models / "bert_tiny.onnx", tmp_path / "b", targets=[], check_numerics=True)
    hlo = (tmp_path / "b" / "model.hlo").read_text()
    attention = [c for c in hlo.split("\n}\n") if c[c.find("%"):].startswith("%fused_attention")]
    assert len(attention) == 2 and all(c.count(" dot(") == 4 and "f32[64,192]" in c and "f32[64,64]" in c
                                       for c in attention)
    assert not [s for s in r.manifest["schedule"] if s["kernel"].startswith("dot")]
    intent = json.loads((tmp_path / "b" / "intent.json").read_text())
    assert not [b for b in intent["buffers"] if b["shape"] in ([1, 16, 192], [1, 4, 16, 16])]
    for s in r.manifest["schedule"]:
        if "attention" in s["kernel"]:
            assert s["bytes_written"] == 16 * 64 * 4


@pytest.mark.parametrize("device, target", [("cpu", "none"), ("sim:sm_90", "sm_90")])
def test_bert_matches_onnxruntime_with_a_padding_mask_on_cpu_and_the_simulated_sm_90(tmp_path, device, target):
    # the example's inputs mask the last 3 of 16 tokens and mix both token types; sim:sm_90 runs the sm_90
    # binaries' launch configs under the interpreter (about 13 s on the 2-core CPU machine)
    path = EXAMPLES / "bert_tiny.onnx"
    r = CliRunner().invoke(main, ["verify", str(path), "--bundle", str(tmp_path / "b"), "--device", device,
                                  "--target", target, "--inputs", str(EXAMPLES / "bert_tiny.inputs.npz")])
    assert r.exit_code == 0, r.output
    assert "FAIL" not in r.output and r.output.startswith("ok")
    assert r.output.count("(vs onnxruntime)") == 2


@pytest.mark.slow
def test_gpt2_matches_onnxruntime_on_the_simulated_sm_90(tmp_path, shared_models):
    path = shared_models / "gpt2_tiny.onnx"
    r = CliRunner().invoke(main, ["verify", str(path), "--bundle", str(tmp_path / "b"), "--device", "sim:sm_90",
                                  "--target", "sm_90", "--inputs", str(path.with_suffix(".ref.npz"))])
    assert r.exit_code == 0, r.output
    assert "FAIL" not in r.output and r.output.startswith("ok")


def test_resnet50_fuses_into_at_most_58_launches_of_at_most_34_kernels(tmp_path):
    r = mlcc.compile(LIGHT / "light_resnet50.onnx", tmp_path / "b", targets=[])
    m = r.manifest
    assert len(m["schedule"]) <= 58
    assert len(m["kernels"]) <= 34
    assert m["stats"]["bytes"] <= BYTES["light_resnet50"] * m["stats"]["unfused"]["bytes"]
    assert m["stats"]["layout_conversions"]["count"] <= 2
    hlo = (tmp_path / "b" / "model.hlo").read_text()
    convs = [line for line in hlo.splitlines() if " convolution(" in line]
    assert len(convs) == 53
    assert all("{1,3,2,0} convolution(" in c for c in convs)  # NHWC results everywhere
    # every convolution is in a fusion: the 4 downsampling blocks' shortcut and main-path convolutions share
    # one output tile, so neither result is stored and read back
    assert not [s for s in m["schedule"] if s["kernel"].startswith("convolution_")]
    assert sum(1 for c in hlo.split("\n}\n") if c.count(" convolution(") == 2) == 4
    json.loads((tmp_path / "b" / "intent.json").read_text())


def test_the_kv_cache_appends_are_stored_by_the_attention_kernels(tmp_path):
    # examples/models/gpt2_kv_tiny.onnx: 4 new tokens after a cache of 12, 2 layers. Each present cache (a model
    # output, concat(past, new)) is a result of its layer's attention kernel (multi-output fusion), so no kernel
    # of its own: 12 launches (16 with a loop kernel per cache), checked kernel by kernel against the evaluator
    model = Path(__file__).parent.parent / "examples" / "models" / "gpt2_kv_tiny.onnx"
    r = mlcc.compile(model, tmp_path / "b", targets=[], check_numerics=True)
    m = r.manifest
    assert len(m["schedule"]) <= 12
    attention = [s for s in m["schedule"] if "attention" in s["kernel"]]
    assert len(attention) == 2
    presents = {o["buffer"] for o in m["outputs"] if o["name"].startswith("present")}
    assert len(presents) == 4 and presents == {a for s in attention for a in s["args"]} & presents
    for s in attention:  # the attention output and its layer's two caches, written in full
        assert s["bytes_written"] == (4 * 64 + 2 * 16 * 64) * 4
