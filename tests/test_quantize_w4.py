"""mlcc compile --quantize w4[:BLOCK]: the float decoder of tests/data/models/nbits quantized by mlcc against
the same decoder quantized by onnxruntime's MatMulNBitsQuantizer (RTN, symmetric; tools/make_nbits_models.py):
the same packed bytes and scales, the same outputs as onnxruntime runs on its quantization, and the IR the
MatMulNBits import builds (the packed weights stay packed in weights.bin)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from onnxruntime.capi._pybind_state import quantize_matmul_4bits
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

import mlcc
from mlcc.hlo.passes.quantize_weights import parse_scheme, quantize_rtn_sym4

DATA = Path(__file__).parent / "data" / "models" / "nbits"
ROOT = Path(__file__).resolve().parent.parent


def _onnxruntime_rtn(w: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's own symmetric 4-bit RTN of W [K, N]: (bytes [N, ceil(K / 2)], scales [N, blocks])."""
    k, n = w.shape
    blocks = -(-k // block)
    padded = np.pad(w, ((0, blocks * block - k), (0, 0)))
    packed = np.zeros((n, blocks, block // 2), np.uint8)
    zero = np.zeros((n, -(-blocks // 2)), np.uint8)
    scales = np.zeros((n, blocks), np.float32)
    quantize_matmul_4bits(packed, padded, scales, zero, block, n, k, True)
    packed = packed.reshape(n, -1)[:, :-(-k // 2)].copy()
    if k % 2:  # the high nibble of an odd K's last byte is padding onnxruntime leaves undefined (mlcc: 0)
        packed[:, -1] &= 15
    return packed, scales


@pytest.mark.parametrize("k,n,block", [(64, 48, 32), (100, 24, 32), (70, 8, 128), (256, 40, 128), (33, 5, 32)])
def test_rtn_matches_onnxruntime_bit_for_bit(k, n, block):
    rng = np.random.default_rng(k * n + block)
    w = (rng.standard_normal((k, n)) * rng.uniform(0.01, 3)).astype(np.float32)
    w[:, 1] = 0                                   # a column of zero blocks: scale 0, q = 8
    w[:block, 2] = np.round(w[:block, 2] * 4) / 4  # halves after scaling (roundf ties)
    w[0, 3] = -8 * np.abs(w[:, 3]).max()           # the most negative value sets the scale
    packed, scales = quantize_rtn_sym4(w.T, block)
    want_packed, want_scales = _onnxruntime_rtn(w, block)
    np.testing.assert_array_equal(packed, want_packed)
    np.testing.assert_array_equal(scales, want_scales)


def test_rtn_ties_round_half_away_from_zero_after_the_offset():
    w = np.zeros((32, 1), np.float32)
    w[:6, 0] = [-8, 0.5, 2.5, -0.5, 1.5, -2.5]    # scale 1: q = roundf(x + 8)
    packed, scales = quantize_rtn_sym4(w.T, 32)
    np.testing.assert_array_equal(packed, _onnxruntime_rtn(w, 32)[0])
    q = np.stack([packed[0] & 15, packed[0] >> 4], 1).reshape(-1)[:6]
    assert q.tolist() == [0, 9, 11, 8, 10, 6] and scales[0, 0] == 1


def test_parse_scheme():
    assert [parse_scheme(s) for s in ("w4", "W4:128", "w4:32", "w4:64", "int8", "w4:")] == [32, 128, 32, None,
                                                                                            None, None]


def _matmul_nbits_weights(model: onnx.ModelProto) -> list[np.ndarray]:
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    out = []
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
            out.append(np.ascontiguousarray(inits[node.input[1]].reshape(a["N"], -1)[:, :-(-a["K"] // 2)]))
            out.append(np.ascontiguousarray(inits[node.input[2]].reshape(a["N"], -1)))
    return out


def test_w4_bundle_matches_onnxruntime_running_its_own_quantization(tmp_path):
    """float.onnx --quantize w4 (block 32) == b32_sym.onnx (MatMulNBitsQuantizer, block 32, symmetric)."""
    out = tmp_path / "w4"
    mlcc.compile(DATA / "float.onnx", out, cache_dir="", targets=[], shapes={"seq": [4]}, quantize="w4")
    m = json.loads((out / "manifest.json").read_text())
    assert m["build"]["options"]["quantize"] == "w4"
    inputs = dict(np.load(DATA / "inputs.npz"))
    got = mlcc.load(out, device="cpu").run(inputs)["logits"]
    want = np.load(DATA / "b32_sym.ref.npz")["logits"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # it is the quantized model, not the float one: the float outputs are farther away than the tolerance
    assert np.abs(np.load(DATA / "float.ref.npz")["logits"] - want).max() > 1e-2
    # every packed weight and scale onnxruntime made is stored as is; no float weight matrix is left
    blob = (out / "weights.bin").read_bytes()
    stored = {blob[t["offset"]:t["offset"] + t["bytes"]] for t in m["weights"]["tensors"]}
    expected = _matmul_nbits_weights(onnx.load(DATA / "b32_sym.onnx"))
    assert len(expected) == 30
    for arr in expected:  # as is, or rows of a merged projection's (Q, K and V concatenated along N)
        assert any(arr.tobytes() in s for s in stored)
    # and no float MatMul weight of the float model is (in either orientation)
    float_model = onnx.load(DATA / "float.onnx")
    inits = {t.name: numpy_helper.to_array(t) for t in float_model.graph.initializer}
    weights = [inits[n.input[1]] for n in float_model.graph.node if n.op_type == "MatMul" and n.input[1] in inits]
    assert len(weights) == 15
    for w in weights:
        assert w.tobytes() not in stored and np.ascontiguousarray(w.T).tobytes() not in stored


def _node_ops(hlo: str) -> list[str]:
    """The instructions an ONNX node became (those with an origin), without names or operands; the weight
    data (constants with a ref=) aside."""
    return [re.sub(r"\(.*?\)|, origin=\{.*\}", "", line.split(" = ", 1)[1])
            for line in hlo.splitlines() if "origin={" in line and "ref=" not in line]


def test_w4_ir_is_the_matmul_nbits_import(tmp_path):
    """The pass's IR for a dot is the importer's for the MatMulNBits onnxruntime's quantizer makes of it, op
    for op, and computes x @ dequant(W) with onnxruntime's dequantized weight."""
    rng = np.random.default_rng(3)
    k, n = 40, 16
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, k])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, n])
    g = onnx.helper.make_graph([onnx.helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y],
                               [numpy_helper.from_array(w, "w")])
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "mm.onnx")
    q = MatMulNBitsQuantizer(model, bits=4, block_size=32, is_symmetric=True)
    q.process()
    q.model.save_model_to_file(str(tmp_path / "mm_q.onnx"))
    mlcc.compile(tmp_path / "mm.onnx", tmp_path / "b", cache_dir="", targets=[], quantize="w4:32",
                 dump_ir=str(tmp_path / "ir"))
    mlcc.compile(tmp_path / "mm_q.onnx", tmp_path / "bq", cache_dir="", targets=[], dump_ir=str(tmp_path / "irq"))
    ours = _node_ops((tmp_path / "ir" / "01-quantize-weights.hlo").read_text())
    assert len(ours) == 18 and "dot" in ours[-1] and "shift-right-logical" in ours[4]
    assert ours == _node_ops((tmp_path / "irq" / "00-input.hlo").read_text())
    xin = rng.standard_normal((2, k)).astype(np.float32)
    got = mlcc.load(tmp_path / "b", device="cpu").run({"x": xin})["y"]
    packed, scales = _onnxruntime_rtn(w, 32)
    qv = np.stack([packed & 15, packed >> 4], -1).reshape(n, -1)[:, :k].astype(np.float32)
    deq = (qv - 8) * np.repeat(scales, 32, axis=1)[:, :k]
    np.testing.assert_allclose(got, xin @ deq.T, rtol=1e-5, atol=1e-5)
    sess = ort.InferenceSession(str(tmp_path / "mm_q.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, sess.run(None, {"x": xin})[0], rtol=1e-5, atol=1e-5)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_cli_unknown_scheme_is_one_line_exit_2(tmp_path):
    r = _cli("compile", str(DATA / "float.onnx"), "-o", str(tmp_path / "b"), "--target", "none",
             "--quantize", "w3", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "unknown --quantize scheme 'w3'" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "b").exists()


@pytest.mark.slow
def test_verify_reports_the_accuracy_change_against_the_float_build(tmp_path):
    r = _cli("verify", str(DATA / "float.onnx"), "--quantize", "w4", "--target", "none", "--shape", "seq=4",
             "--inputs", str(DATA / "inputs.npz"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] and out["quantize"] == "w4" and out["reference"] == "onnxruntime"
    (q,), (f,) = out["outputs"], out["float_outputs"]
    assert f["max_abs"] < 1e-4 and f["ok"]
    # the quantized build's error against the float model is onnxruntime's own quantization error
    want = np.abs(np.load(DATA / "b32_sym.ref.npz")["logits"] - np.load(DATA / "float.ref.npz")["logits"]).max()
    assert abs(q["max_abs"] - want) < 1e-3 * want
    text = _cli("verify", str(DATA / "float.onnx"), "--quantize", "w4", "--target", "none", "--shape", "seq=4",
                "--inputs", str(DATA / "inputs.npz"), "--atol", "1e-3", cwd=tmp_path)
    assert text.returncode == 1  # held to a tolerance it does not meet, it fails
    assert "--quantize w4: max abs err vs onnxruntime, float build -> quantized: logits" in text.stdout
