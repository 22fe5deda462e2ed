"""The int8 and fp8 models of tests/data/models/quant: launches, modeled bytes, bundle size and error, per model.

    python benchmarks/quant.py [--json out.json]

Each model (and its float original) is compiled with `--target none` and run on CPU under Triton's
interpreter on the input stored beside it. Columns:
- launches: `len(manifest["schedule"])`, and the ratio to the float model's launches;
- ORT nodes: the nodes onnxruntime leaves after ORT_ENABLE_ALL (its QDQ fusions included);
- bytes: the manifest's modeled global-memory traffic per inference (each kernel reads its inputs and
  writes its outputs once), and the ratio to the float model's;
- bundle: bytes of the bundle directory (kernels, weights.bin, manifest), and weights.bin alone;
- err ORT: max |mlcc - onnxruntime (default session)|; err literal: against onnxruntime with graph
  optimizations off (each Q/DQ run as written); err float: against the float model in onnxruntime.

The rows "NAME --quantize int8" compile the float model with `--quantize int8 --calibration`, calibrated on
the samples tools/make_quant_models.py calibrated NAME_qdq on (8 standard-normal inputs, seed 3): their err
ORT / err literal columns are against that model, onnxruntime's quantize_static of the same float model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import mlcc

ROOT = Path(__file__).resolve().parent.parent
QUANT = ROOT / "tests" / "data" / "models" / "quant"
MODELS = ["cnn_qdq", "cnn_qop", "encoder_qdq", "encoder_qop", "encoder_dyn", "cnn_fp8", "encoder_fp8"]
INT8 = ["cnn --quantize int8", "encoder --quantize int8"]  # mlcc's own static int8 of the float models


def ort_run(path: Path, x: np.ndarray, level: ort.GraphOptimizationLevel) -> np.ndarray:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = level
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def ort_nodes(path: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.log_severity_level = 3  # not the warning that the saved model is specific to this machine
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        return len(onnx.load(so.optimized_model_filepath, load_external_data=False).graph.node)


def calibration(name: str, out: Path) -> Path:
    """The calibration samples tools/make_quant_models.py gave quantize_static for NAME_qdq (its _RandomReader)."""
    shape = tuple(d.dim_value for d in onnx.load(QUANT / f"{name}.onnx").graph.input[0].type.tensor_type.shape.dim)
    rng = np.random.default_rng(3)
    path = out / f"{name}.calib.npz"
    np.savez(path, x=np.stack([rng.standard_normal(shape).astype(np.float32) for _ in range(8)]))
    return path


def measure(name: str, out: Path) -> dict:
    int8 = name.endswith(" --quantize int8")
    base = name.split(" ")[0]
    path = QUANT / f"{base}.onnx"
    opts = {"quantize": "int8", "calibration": str(calibration(base, out))} if int8 else {}
    r = mlcc.compile(path, out / name.replace(" ", "_"), targets=[], cache_dir="", force=True, **opts)
    m = r.manifest
    if int8:  # compared with onnxruntime's quantize_static of the same model on the same calibration samples
        path = QUANT / f"{base}_qdq.onnx"
    x = np.load(QUANT / f"{base}.ref.npz")["x"]
    got = mlcc.load(r.out_dir, device="cpu").run({"x": x})["y"]
    size = sum(p.stat().st_size for p in r.out_dir.rglob("*") if p.is_file())
    row = {"model": name, "launches": len(m["schedule"]), "ort_nodes": ort_nodes(path), "bytes": m["stats"]["bytes"],
           "bundle_bytes": size, "weights_bytes": (r.out_dir / "weights.bin").stat().st_size}
    if "_" in name or int8:
        float_path = QUANT / f"{base.split('_')[0]}.onnx"
        row["err_ort"] = float(np.abs(got - ort_run(path, x, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)).max())
        row["err_literal"] = float(np.abs(got - ort_run(path, x, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)).max())
        row["err_float"] = float(np.abs(got - ort_run(float_path, x, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)).max())
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = {n: measure(n, Path(tmp)) for n in ["cnn", "encoder"] + MODELS + INT8}
    print("| model | launches | vs float | ORT nodes | bytes | vs float | bundle | weights.bin | err ORT | "
          "err literal QDQ | err float |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        f = rows[name.split("_")[0].split(" ")[0]]
        errs = [f"{r[k]:.2g}" for k in ("err_ort", "err_literal", "err_float")] if "err_ort" in r else ["-"] * 3
        print(f"| {name} | {r['launches']} | {r['launches'] / f['launches']:.2f}x | {r['ort_nodes']} | {r['bytes']:,} | "
              f"{r['bytes'] / f['bytes']:.2f}x | {r['bundle_bytes']:,} | {r['weights_bytes']:,} | {' | '.join(errs)} |")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
