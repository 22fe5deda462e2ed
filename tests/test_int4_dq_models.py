"""The int4 blocked-DequantizeLinear decoders of tests/data/models/nbits (tools/make_nbits_models.py, the
``qdq_*`` variants: onnxruntime's MatMulNBitsQuantizer with QuantFormat.QDQ, INT4 and UINT4 weights in
blocks of 32 and 128 along K): compiled, run under Triton's interpreter and compared with onnxruntime; the
weights stay packed in weights.bin (ONNX's own packed bytes, no 4-bit tensor a byte a value) and no unpacked
weight reaches the arena (each DequantizeLinear is computed in its matmul's weight loads); and a decode step
moves at most 0.35x the bytes of the float model's fp16 build."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

import mlcc

DATA = Path(__file__).parent / "data" / "models" / "nbits"
MODELS = ["qdq_b32_asym", "qdq_b128_sym"]


def _compile(name: str, out: Path, **options) -> dict:
    mlcc.compile(DATA / f"{name}.onnx", out, cache_dir="", **{"targets": [], **options})
    return json.loads((out / "manifest.json").read_text())


def _packed_weights(model: onnx.ModelProto) -> list[tuple[tuple[int, ...], bytes]]:
    """(dims, ONNX's packed bytes) of each 4-bit initializer a DequantizeLinear reads as its x."""
    inits = {t.name: t for t in model.graph.initializer}
    out = []
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear":
            t = inits[node.input[0]]
            assert t.data_type in (TensorProto.INT4, TensorProto.UINT4)
            out.append((tuple(t.dims), t.raw_data))
    return out


def _holds(data: bytes, shape: list[int], raw: bytes, dims: tuple[int, ...]) -> bool:
    """A stored u8 tensor holds a [K, N] weight's packed bytes as they are, or as a block of columns (a merged
    projection's weights, Q, K and V concatenated along N, each K row of its bytes in place)."""
    if data == raw:
        return True
    rows = int(dims[0])
    if len(shape) != 2 or shape[0] != rows or len(raw) % rows:
        return False
    width = len(raw) // rows
    merged = np.frombuffer(data, np.uint8).reshape(shape)
    mine = np.frombuffer(raw, np.uint8).reshape(rows, width)
    return any(np.array_equal(merged[:, j:j + width], mine) for j in range(shape[1] - width + 1))


@pytest.mark.parametrize("name", MODELS)
def test_int4_dq_decoder_matches_onnxruntime_on_cpu(tmp_path, name):
    _compile(name, tmp_path / name, shapes={"seq": [4]})
    inputs = dict(np.load(DATA / "inputs.npz"))
    got = mlcc.load(tmp_path / name, device="cpu").run(inputs)["logits"]
    np.testing.assert_allclose(got, np.load(DATA / f"{name}.ref.npz")["logits"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", MODELS)
def test_int4_weights_stay_packed_in_weights_bin_and_out_of_the_arena(tmp_path, name):
    model = onnx.load(DATA / f"{name}.onnx")
    m = _compile(name, tmp_path / name, shapes={"seq": [4]})
    tensors = m["weights"]["tensors"]
    blob = (tmp_path / name / "weights.bin").read_bytes()
    stored = [(blob[t["offset"]:t["offset"] + t["bytes"]], t["shape"]) for t in tensors if t["dtype"] == "u8"]
    weights = _packed_weights(model)
    assert len(weights) == 15
    for dims, raw in weights:
        assert len(raw) == int(np.prod(dims)) // 2
        assert any(_holds(data, shape, raw, dims) for data, shape in stored), f"the packed bytes of a {list(dims)} weight"
    assert not [t for t in tensors if t["dtype"] in ("s4", "u4")], "a 4-bit tensor stored a byte a value"
    # nothing dequantized is stored: no float weight larger than the model's largest float initializer
    # (a merged projection's scales are its siblings' concatenated: smaller than any weight dequantized)
    floats = [int(np.prod(t["shape"])) for t in tensors if t["dtype"] in ("f32", "f16")]
    assert sum(floats) <= sum(numpy_helper.to_array(t).size for t in model.graph.initializer
                              if t.data_type == TensorProto.FLOAT)
    assert max(floats) <= max(numpy_helper.to_array(t).size for t in model.graph.initializer
                              if t.data_type == TensorProto.FLOAT)
    # weights.bin holds no more than the model's initializers at their own sizes (the 4-bit ones packed, zero
    # points too) and the 256-byte alignment of each tensor: an unpacked copy of the weights would not fit
    own = sum(len(t.raw_data) if t.HasField("raw_data") else numpy_helper.to_array(t).nbytes
              for t in model.graph.initializer)
    assert len(blob) <= own + 256 * len(tensors), (len(blob), own)
    # and no buffer of the arena holds an unpacked weight (even as one byte a value)
    smallest = min(int(np.prod(dims)) for dims, _ in weights)
    assert max(b["bytes"] for b in m["memory_plan"]["buffers"]) < smallest


@pytest.mark.parametrize("name", MODELS)
def test_int4_dq_decode_step_bytes_are_at_most_035_of_the_fp16_float_build(tmp_path, name):
    options = {"precision": "fp16", "shapes": {"seq": [1]}}
    fp16 = _compile("float", tmp_path / "float", **options)["stats"]["bytes"]
    quantized = _compile(name, tmp_path / name, **options)["stats"]["bytes"]
    assert quantized <= 0.35 * fp16, (quantized, fp16, quantized / fp16)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_int4_dq_decoder_compiles_for_sm80_and_sm90(tmp_path, name):
    m = _compile(name, tmp_path / name, targets=["sm_80", "sm_90"], shapes={"seq": [4]})
    for k in m["kernels"]:
        for t in ("sm_80", "sm_90"):
            assert (tmp_path / name / k["binaries"][t]["path"]).read_bytes()[:4] == b"\x7fELF"
