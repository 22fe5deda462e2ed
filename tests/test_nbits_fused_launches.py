"""A 4-bit decoder's decode step in the float model's launches (tests/data/models/nbits): its Q, K and V
MatMulNBits (or int4 DequantizeLinear -> MatMul) merge into one dot over the concatenated packed bytes,
scales and zero points, which normalizes its A tiles (the RMSNorm) while dequantizing its B tiles; the gated
MLP's gate and up projections and its down projection are one back-to-back kernel (b2b_fusion.py), as in the
float build, each of the three weights dequantized in its own tile loads, so the [seq, ffn] intermediate never
reaches memory. The fused build still matches onnxruntime, on CPU and on the simulated sm_90 device."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mlcc

DATA = Path(__file__).parent / "data" / "models" / "nbits"
DECODE = {"precision": "fp16", "shapes": {"seq": [1]}}
PACKED_LINEAR = ["b32_asym", "b32_sym", "b128_asym", "b128_sym", "b32_8bit", "qdq_b32_asym", "qdq_b128_sym"]


def _manifest(name: str, out: Path, **options) -> dict:
    mlcc.compile(DATA / f"{name}.onnx", out, cache_dir="", **{"targets": [], **options})
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def float_decode(tmp_path_factory) -> dict:
    return _manifest("float", tmp_path_factory.mktemp("float"), **DECODE)


def _b2b_steps(m: dict) -> int:
    kernels = {k["name"]: k for k in m["kernels"]}
    return sum(kernels[s["kernel"]]["template"] == "b2b.py.jinja" for s in m["schedule"])


@pytest.mark.parametrize("name", PACKED_LINEAR)
def test_a_4bit_decoders_decode_step_takes_the_float_models_launches(tmp_path, name, float_decode):
    m = _manifest(name, tmp_path / name, **DECODE)
    assert m["stats"]["launches"] == float_decode["stats"]["launches"] == 9
    assert _b2b_steps(m) == _b2b_steps(float_decode) == 2  # each layer's MLP one b2b kernel, as in the float build
    # per layer: one QKV dot (its RMSNorm in the A loads), attention, the output projection, the gated MLP with
    # its second RMSNorm and down projection (the norm applied as gate and up load their one A tile, gate and up
    # in one tile, the intermediate kept on chip); then the final norm with the lm head. The RMSNorms sit in
    # the A loads next to the weights' dequantization in the B loads; the gate and up weights are each
    # dequantized in the b2b kernel's first dot's B loads (b, b_1), the down projection's in its second dot's (w2)
    kernels = {k["name"]: k for k in m["kernels"]}

    def source(step: dict) -> str:
        kernel = kernels[step["kernel"]]
        return (tmp_path / name / kernel["source"]).read_text() \
            if kernel["template"] in ("matmul.py.jinja", "b2b.py.jinja") else ""
    for layer in ("l0", "l1"):
        norm = [source(s) for s in m["schedule"] if f"{layer}_ln1_out" in s["ops"]]
        assert len(norm) == 1 and "a_rstd" in norm[0] and "b = tl.where(mask_w" in norm[0]
        mlp = [(s["ops"], source(s)) for s in m["schedule"] if f"{layer}_gated" in s["ops"]]
        assert len(mlp) == 1 and any(op.startswith(f"{layer}_down") for op in mlp[0][0]), mlp
        text = mlp[0][1]
        assert "b = tl.where(mask_w" in text and "b_1 = tl.where(mask_w" in text and "w2 = tl.where(mask_v" in text
        assert f"{layer}_ln2_out" in mlp[0][0] and "a_rstd" in text


def test_the_gather_block_quantized_decoders_transformer_takes_the_float_models_launches_but_two(tmp_path,
                                                                                                 float_decode):
    # (its embedding row's own dequantization, kernels of nothing but the GatherBlockQuantized, aside)
    m = _manifest("b32_asym_gbq", tmp_path / "gbq", **DECODE)
    rest = [s for s in m["schedule"] if set(s["ops"]) != {"embedded_Q4"}]
    # each MLP norm's input, the residual stream, is recomputed where read from the dequantized embedding row
    # (packed bytes, scales, zero points) and the GEMM outputs added to it: layer 0's norm joins its gate | up
    # GEMM's A loads (its two dequantized weights beside), but that kernel with the down projection's would
    # read more than a b2b kernel's 16 buffers; layer 1's, one residual term more, would read more than 16
    # already in the gate | up GEMM and stays a row kernel before the b2b MLP. Either way 2 launches a layer
    # where the float build's MLP, norm included, is one b2b kernel
    assert len(rest) == float_decode["stats"]["launches"] + 2
    ln2 = [s for s in rest if any(op.endswith("_ln2_out") for op in s["ops"])]
    assert [any(op.endswith("_gate_Q4") for op in s["ops"]) for s in ln2] == [True, False]
    assert len(rest) == 11  # as before the MLP norms were applied in the gated GEMM's loads
    # the nibbles' shifts, masks and converts are recomputed where read: only the gathers of the gathered row
    # by constant indices launch kernels of their own (14 one-op kernels before)
    assert len(m["schedule"]) - len(rest) <= 4


@pytest.mark.parametrize("name", ["b32_asym", "qdq_b128_sym"])
def test_the_fused_decoder_matches_onnxruntime_with_the_float_models_launches(tmp_path, name):
    m = _manifest(name, tmp_path / name, shapes={"seq": [4]})
    assert m["stats"]["launches"] == _manifest("float", tmp_path / "float", shapes={"seq": [4]})["stats"]["launches"]
    got = mlcc.load(tmp_path / name, device="cpu").run(dict(np.load(DATA / "inputs.npz")))["logits"]
    np.testing.assert_allclose(got, np.load(DATA / f"{name}.ref.npz")["logits"], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_the_fused_qdq_decoder_matches_onnxruntime_on_the_simulated_sm90_device(tmp_path):
    # the GPU launch configs of the merged, norm-prologue dequantizing dots and of the b2b MLP kernels (three
    # weights dequantized in their loads) under the interpreter
    options = {"precision": "fp16", "shapes": {"seq": [4]}}
    m = _manifest("qdq_b32_asym", tmp_path / "b", targets=["sm_90"], **options)
    assert m["stats"]["launches"] == _manifest("float", tmp_path / "float", **options)["stats"]["launches"]
    assert _b2b_steps(m) == 2
    got = mlcc.load(tmp_path / "b", device="sim:sm_90").run(dict(np.load(DATA / "inputs.npz")))["logits"]
    np.testing.assert_allclose(got.astype(np.float32), np.load(DATA / "qdq_b32_asym.ref.npz")["logits"],
                               rtol=2e-2, atol=2e-2)
