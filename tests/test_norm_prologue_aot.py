"""The A-prologue matmul kernels (a norm applied as the GEMM loads its A tiles, rows gathered in place) compile
ahead of time for sm_80 and sm_90: bert_tiny has both (its pooler reads the first token's row in place,
LLaMA-style norms are covered by gpt2_tiny's pre-norm layers)."""

from __future__ import annotations

import json

import pytest

import mlcc


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2_tiny", "bert_tiny"])
def test_a_prologue_kernels_compile_for_sm_80_and_sm_90(tmp_path, shared_models, name):
    r = mlcc.compile(shared_models / f"{name}.onnx", tmp_path / name, targets=["sm_80", "sm_90"])
    m = json.loads((r.out_dir / "manifest.json").read_text())
    prologues = [k for k in m["kernels"] if k.get("template") == "matmul.py.jinja"
                 and "a = tl.where(mask_a" in (r.out_dir / k["source"]).read_text()]
    assert prologues, "no kernel computes its A tiles"
    for k in prologues:
        for t in ("sm_80", "sm_90"):
            assert (r.out_dir / k["binaries"][t]["path"]).read_bytes()[:4] == b"\x7fELF"
