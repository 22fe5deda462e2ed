"""fp8 and int4 through a bundle's inputs and outputs (#23): arrays saved the ordinary way (``np.savez`` of
ml_dtypes arrays, which numpy writes as one-byte records, |V1) feed `mlcc run`, whose outputs read back
bit-exactly with np.load plus the manifest's dtype; `mlcc verify --inputs` takes them too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

import mlcc

ROOT = Path(__file__).resolve().parent.parent


def quant_model() -> onnx.ModelProto:
    """y = fp8(-float(x)) (exact: negation keeps every fp8 value), t = transpose of the int4 q, d = float(q) * 0.5."""
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node("Neg", ["xf"], ["n"]),
             helper.make_node("Cast", ["n"], ["y"], to=TensorProto.FLOAT8E4M3FN),
             helper.make_node("Transpose", ["q"], ["t"], perm=[1, 0]),
             helper.make_node("DequantizeLinear", ["q", "s"], ["d"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [3, 5]),
         helper.make_tensor_value_info("q", TensorProto.INT4, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [3, 5]),
         helper.make_tensor_value_info("t", TensorProto.INT4, [6, 4]),
         helper.make_tensor_value_info("d", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True, env=env)


def inputs() -> tuple[np.ndarray, np.ndarray]:
    finite = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    finite = finite[np.isfinite(finite.astype(np.float32))]
    x = finite[np.random.default_rng(0).choice(finite.size, 15, replace=False)].reshape(3, 5)
    q = (np.arange(24) % 16 - 8).astype(ml_dtypes.int4).reshape(4, 6)
    return x, q


def test_fp8_and_int4_npz_round_trip_through_mlcc_run_bit_exactly(tmp_path):
    mlcc.compile(quant_model(), tmp_path / "b", targets=[], cache_dir="")
    x, q = inputs()
    np.savez(tmp_path / "in.npz", x=x, q=q)
    assert np.load(tmp_path / "in.npz")["x"].dtype == np.dtype("V1")  # raw records, as numpy writes them

    proc = run_cli("run", str(tmp_path / "b"), "--inputs", str(tmp_path / "in.npz"), "--output",
                   str(tmp_path / "out.npz"))
    assert proc.returncode == 0, proc.stderr

    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    types = {o["name"]: o["numpy_dtype"] for o in manifest["outputs"] + manifest["inputs"]}
    assert types == {"x": "float8_e4m3fn", "q": "int4", "y": "float8_e4m3fn", "t": "int4", "d": "float32"}
    out = np.load(tmp_path / "out.npz")
    y = out["y"].view(np.dtype(getattr(ml_dtypes, types["y"])))
    t = out["t"].view(np.dtype(getattr(ml_dtypes, types["t"])))
    assert y.tobytes() == (-x.astype(np.float32)).astype(ml_dtypes.float8_e4m3fn).tobytes()
    assert t.tobytes() == np.ascontiguousarray(q.T).tobytes()
    np.testing.assert_array_equal(out["d"], q.astype(np.float32) * 0.5)


def test_verify_takes_fp8_and_int4_inputs_from_an_npz(tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(quant_model(), model)
    x, q = inputs()
    want = {"out:y": (-x.astype(np.float32)).astype(ml_dtypes.float8_e4m3fn), "out:t": np.ascontiguousarray(q.T),
            "out:d": q.astype(np.float32) * 0.5}
    np.savez(tmp_path / "in.npz", x=x, q=q, **want)
    proc = run_cli("verify", str(model), "--inputs", str(tmp_path / "in.npz"), "--target", "none")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "ok   y: float8_e4m3fn[3, 5] max abs err 0" in proc.stdout, proc.stdout


def test_verify_compares_an_fp8_model_with_onnxruntime(tmp_path):
    """onnxruntime takes fp8 inputs and gives fp8 outputs as OrtValues of their bits: verify's random fp8 inputs
    reach it, and its fp8 outputs compare with the bundle's bit for bit."""
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT), helper.make_node("Relu", ["xf"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s"], ["q"], output_dtype=TensorProto.FLOAT8E4M3FN)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT8E5M2, [4, 16])],
                              [helper.make_tensor_value_info("q", TensorProto.FLOAT8E4M3FN, [4, 16])],
                              [helper.make_tensor("s", TensorProto.FLOAT, [], [0.25])])
    model = tmp_path / "f8.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), model)
    proc = run_cli("verify", str(model), "--target", "none")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "ok   q: float8_e4m3fn[4, 16] max abs err 0, max rel err 0 (vs onnxruntime)" in proc.stdout, proc.stdout


def test_manifest_schema_lists_every_dtype():
    from mlcc.bundle.dtypes import NUMPY_NAMES
    from mlcc.bundle.schemas import load_schema
    from mlcc.hlo.dtypes import numpy_dtype
    from mlcc.hlo.ir import DTYPES
    io = load_schema("manifest")["$defs"]["io"]["properties"]
    assert io["dtype"]["enum"] == list(DTYPES)
    assert io["numpy_dtype"]["enum"] == list(NUMPY_NAMES)
    assert sorted(numpy_dtype(d).name for d in DTYPES) == sorted(NUMPY_NAMES)
