"""`mlcc run --inputs in.npz` takes arrays saved the ordinary way, whatever their dtype: numpy writes ml_dtypes'
bfloat16 to an .npz as two-byte records (|V2), and the outputs it writes read back exactly with np.load plus
the manifest's dtype."""

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


def bf16_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Max", ["x", "y"], ["m"]), helper.make_node("Neg", ["m"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.BFLOAT16, [3, 5])
                                           for n in ("x", "y")],
                              [helper.make_tensor_value_info("z", TensorProto.BFLOAT16, [3, 5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "mlcc.cli", *args], capture_output=True, text=True, env=env)


def test_bf16_npz_round_trips_through_mlcc_run_bit_exactly(tmp_path):
    mlcc.compile(bf16_model(), tmp_path / "b", targets=[], cache_dir="")
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((3, 5)).astype(ml_dtypes.bfloat16) for _ in range(2))
    np.savez(tmp_path / "in.npz", x=x, y=y)
    assert np.load(tmp_path / "in.npz")["x"].dtype == np.dtype("V2")  # what numpy gives back: raw records

    proc = run_cli("run", str(tmp_path / "b"), "--inputs", str(tmp_path / "in.npz"), "--output",
                   str(tmp_path / "out.npz"))
    assert proc.returncode == 0, proc.stderr

    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    (out,) = manifest["outputs"]
    assert out["numpy_dtype"] == "bfloat16"
    raw = np.load(tmp_path / "out.npz")["z"]
    got = raw.view(np.dtype(getattr(ml_dtypes, out["numpy_dtype"])))
    want = -np.maximum(x.astype(np.float32), y.astype(np.float32)).astype(ml_dtypes.bfloat16)  # exact in bf16
    assert got.tobytes() == want.tobytes()


def test_verify_takes_bf16_inputs_and_expected_outputs_from_an_npz(tmp_path):
    """onnxruntime has no bfloat16 Max on CPU: verify compares with the npz's out:<name> instead, and says so; with
    no expected outputs either, it is one line naming the model, exit 69."""
    model = tmp_path / "m.onnx"
    onnx.save(bf16_model(), model)
    x = np.array([[1.5, -2.25, 3.0, 0.0, 7.5]] * 3, dtype=ml_dtypes.bfloat16)
    y = np.full((3, 5), 0.5, dtype=ml_dtypes.bfloat16)
    z = -np.maximum(x.astype(np.float32), 0.5).astype(ml_dtypes.bfloat16)
    np.savez(tmp_path / "in.npz", x=x, y=y, **{"out:z": z})
    proc = run_cli("verify", str(model), "--inputs", str(tmp_path / "in.npz"), "--target", "none")
    assert proc.returncode == 0, proc.stderr
    assert "ok   z: bfloat16[3, 5] max abs err 0" in proc.stdout and "(vs npz)" in proc.stdout

    np.savez(tmp_path / "in.npz", x=x, y=np.full((3, 5), 9.0, dtype=ml_dtypes.bfloat16), **{"out:z": z})
    assert run_cli("verify", str(model), "--inputs", str(tmp_path / "in.npz"), "--target", "none").returncode == 1

    np.savez(tmp_path / "in.npz", x=x, y=y)
    proc = run_cli("verify", str(model), "--inputs", str(tmp_path / "in.npz"), "--target", "none")
    assert proc.returncode == 69 and proc.stderr.count("\n") == 1
    assert "m.onnx: onnxruntime cannot run this model" in proc.stderr and "out:<name>" in proc.stderr
