"""The 4-bit (and 8-bit) weight-only decoders of tests/data/models/nbits (tools/make_nbits_models.py):
compiled, run under Triton's interpreter and compared with onnxruntime's outputs; the packed weights stay
packed in weights.bin and no unpacked weight reaches the arena; and the modeled bytes of a decode step are
at most 0.35x the fp16 build's of the float model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import mlcc

DATA = Path(__file__).parent / "data" / "models" / "nbits"
QUICK = ["b32_asym", "b128_sym"]
OTHERS = ["b32_sym", "b128_asym", "b32_8bit", "b32_asym_gbq"]


def _compile(name: str, out: Path, **options) -> dict:
    mlcc.compile(DATA / f"{name}.onnx", out, cache_dir="", **{"targets": [], **options})
    return json.loads((out / "manifest.json").read_text())


def _check_against_onnxruntime(name: str, out: Path) -> None:
    _compile(name, out, shapes={"seq": [4]})
    inputs = dict(np.load(DATA / "inputs.npz"))
    got = mlcc.load(out, device="cpu").run(inputs)["logits"]
    np.testing.assert_allclose(got, np.load(DATA / f"{name}.ref.npz")["logits"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", QUICK)
def test_quantized_decoder_matches_onnxruntime_on_cpu(tmp_path, name):
    _check_against_onnxruntime(name, tmp_path / name)


@pytest.mark.slow
@pytest.mark.parametrize("name", OTHERS)
def test_other_quantized_decoders_match_onnxruntime_on_cpu(tmp_path, name):
    _check_against_onnxruntime(name, tmp_path / name)


def _quantized_matmuls(model: onnx.ModelProto) -> list[tuple[int, int, np.ndarray]]:
    """(K, N, the packed bytes a row holds for K: the last block's padding dropped) per MatMulNBits node."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    out = []
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
            k, n, bits = a["K"], a["N"], a["bits"]
            out.append((k, n, inits[node.input[1]].reshape(n, -1)[:, :-(-k * bits // 8)]))
    return out


def test_packed_weights_stay_packed_in_weights_bin_and_out_of_the_arena(tmp_path):
    model = onnx.load(DATA / "b32_asym_gbq.onnx")
    m = _compile("b32_asym_gbq", tmp_path / "b", shapes={"seq": [4]})
    blob = (tmp_path / "b" / "weights.bin").read_bytes()
    stored = {blob[t["offset"]:t["offset"] + t["bytes"]] for t in m["weights"]["tensors"] if t["dtype"] == "u8"}
    matmuls = _quantized_matmuls(model)
    assert len(matmuls) == 15
    for _, _, packed in matmuls:  # as they are, or rows of a merged projection's (Q, K, V concatenated along N)
        assert any(np.ascontiguousarray(packed).tobytes() in s for s in stored), "a MatMulNBits weight's packed bytes"
    # nothing dequantized is stored: no more float elements than the model's float initializers hold (a merged
    # projection's scales are its siblings' concatenated), none of them as large as a dequantized weight
    floats = [int(np.prod(t["shape"])) for t in m["weights"]["tensors"] if t["dtype"] in ("f32", "f16")]
    assert sum(floats) <= sum(t.size for t in map(numpy_helper.to_array, model.graph.initializer)
                              if t.dtype.kind == "f")
    assert max(floats) < min(k * n for k, n, _ in matmuls)
    # and no buffer of the arena holds an unpacked weight (even as one byte a value)
    smallest_unpacked = min(k * n for k, n, _ in matmuls)
    assert max(b["bytes"] for b in m["memory_plan"]["buffers"]) < smallest_unpacked


@pytest.mark.parametrize("name", ["b32_asym", "b128_asym"])
def test_decode_step_bytes_are_at_most_035_of_the_fp16_float_build(tmp_path, name):
    """batch 1, one token: the modeled global-memory bytes of a decode step (the manifest's traffic model)."""
    options = {"precision": "fp16", "shapes": {"seq": [1]}}
    fp16 = _compile("float", tmp_path / "float", **options)["stats"]["bytes"]
    quantized = _compile(name, tmp_path / name, **options)["stats"]["bytes"]
    assert quantized <= 0.35 * fp16, (quantized, fp16, quantized / fp16)


@pytest.mark.slow
@pytest.mark.parametrize("name", QUICK + OTHERS)
def test_quantized_decoder_compiles_for_sm80_and_sm90(tmp_path, name):
    m = _compile(name, tmp_path / name, targets=["sm_80", "sm_90"], shapes={"seq": [4]})
    for k in m["kernels"]:
        for t in ("sm_80", "sm_90"):
            assert (tmp_path / name / k["binaries"][t]["path"]).read_bytes()[:4] == b"\x7fELF"


@pytest.mark.slow
def test_fp16_decoder_runs_the_sm90_launch_configs_correctly_on_the_simulated_device(tmp_path):
    # the GPU tiles (small B tiles and 2 stages for the dequantizing dots) under Triton's interpreter
    _compile("b32_asym", tmp_path / "b", targets=["sm_90"], precision="fp16", shapes={"seq": [4]})
    inputs = dict(np.load(DATA / "inputs.npz"))
    got = mlcc.load(tmp_path / "b", device="sim:sm_90").run(inputs)["logits"].astype(np.float32)
    np.testing.assert_allclose(got, np.load(DATA / "b32_asym.ref.npz")["logits"], rtol=2e-2, atol=2e-2)
