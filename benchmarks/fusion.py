"""Kernel launches and modeled global-memory bytes per inference: mlcc (fused) against the unfused
graph (one kernel per op) and the node count onnxruntime leaves after ORT_ENABLE_ALL.

    python benchmarks/fusion.py [--models-dir DIR ...] [--json out.json]

Models: examples/models, ../shared/models and the onnx wheel's light models. "bytes" is the
model of mlcc's manifest: each kernel reads its inputs once and writes its output once.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

import mlcc  # noqa: E402


def ort_nodes(path: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        opt = Path(tmp) / "opt.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(opt)
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        return len(onnx.load(str(opt), load_external_data=False).graph.node)


def default_models() -> list[Path]:
    paths = sorted((ROOT / "examples" / "models").glob("*.onnx"))
    shared = ROOT.parent / "shared" / "models"
    paths += sorted(p for p in shared.glob("*.onnx") if not any(p.name == q.name for q in paths))
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    paths += sorted(light.glob("light_*.onnx"))
    return paths


def measure(path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        r = mlcc.compile(path, Path(tmp) / "b", targets=[], cache_dir="")
        seconds = time.perf_counter() - t
    s = r.manifest["stats"]
    return {"model": path.name, "launches": s["launches"], "kernels": s["kernels"], "bytes": s["bytes"],
            "unfused_launches": s["unfused"]["launches"], "unfused_bytes": s["unfused"]["bytes"],
            "ort_nodes": ort_nodes(path), "compile_seconds": round(seconds, 2),
            "layout_conversions": s["layout_conversions"]["count"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows = []
    header = f"{'model':<28}{'launches':>9}{'unfused':>9}{'ORT nodes':>10}{'kernels':>9}{'bytes':>14}{'unfused bytes':>15}{'ratio':>7}"
    print(header)
    for p in a.models or default_models():
        try:
            row = measure(p)
        except mlcc.MlccError as e:
            print(f"{p.name:<28} failed: {e}")
            continue
        rows.append(row)
        print(f"{row['model']:<28}{row['launches']:>9}{row['unfused_launches']:>9}{row['ort_nodes']:>10}"
              f"{row['kernels']:>9}{row['bytes']:>14,}{row['unfused_bytes']:>15,}"
              f"{row['bytes'] / max(row['unfused_bytes'], 1):>7.2f}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
