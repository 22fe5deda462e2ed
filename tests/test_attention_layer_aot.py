"""Attention layer kernels (each encoder layer one kernel: mlcc/hlo/passes/attention_layer.py) compile ahead of
time for sm_80, sm_90 and gfx942 without spilling registers: bert_tiny's and the float encoder's (the quantized
models' original), and the largest rows the pass takes (mlcc/hlo/passes/attention_layer.py: [64, 64] without
the FFN, [32, 64] with it), with --werror-spills. On 4 warps bert_tiny's sm_90 binary spilled 16 bytes, and the
[64, 64] layer's sm_80 one 12: the heuristic gives layer kernels 8 (`mlcc inspect --binaries`: 80/96/118
registers for bert_tiny's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mlcc.cli import main
from tests.hlo.passes.qkv_encoder import encoder_layer

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.parametrize("model", ["examples/models/bert_tiny.onnx", "tests/data/models/quant/encoder.onnx"])
def test_attention_layer_kernels_compile_without_spills(tmp_path, model):
    r = CliRunner().invoke(main, ["compile", str(ROOT / model), "-o", str(tmp_path / "b"), "--target",
                                  "sm_80,sm_90,gfx942", "--werror-spills", "--no-cache"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "b"), "--binaries"])
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.output.splitlines() if line.startswith("fused_attention")]
    assert sorted(row[1] for row in rows) == ["gfx942", "sm_80", "sm_90"]  # one kernel: every layer
    assert all(row[5].startswith("0/") for row in rows), r.output  # spill stores
    assert all(row[8] == "8" for row in rows), r.output  # warps (after the shared size, "16.0 KiB")


@pytest.mark.slow
@pytest.mark.parametrize("seq, ffn, launches", [(64, 128, 2), (32, 128, 1)])
def test_the_largest_layer_kernels_compile_without_spills(tmp_path, seq, ffn, launches):
    # hidden 64 (2 heads of 32): [64, 64] rows take the output projection, not the FFN; [32, 64] rows take both
    model = tmp_path / "layer.hlo"
    model.write_text(encoder_layer(seq=seq, d=32, ffn=ffn))
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(tmp_path / "b"), "--target", "sm_80,sm_90,gfx942",
                                  "--werror-spills", "--no-cache"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "b"), "--binaries"])
    rows = [line.split() for line in r.output.splitlines() if line.startswith("fused_attention")]
    assert len(rows) == 3 and all(row[5].startswith("0/") for row in rows), r.output
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert len(manifest["schedule"]) == launches
