"""Split-K of dense decode-sized GEMMs: the light_* CNNs' classifiers at batch 1, a row for BENCHMARKS.md.

    python benchmarks/split_k_dense.py [--light]

A [1, K] x [K, N] Gemm with its bias and a Relu (the weight an initializer, read as stored), compiled for sm_90:
the programs of the GEMM's kernel (its sm_90 launch config's grid), the launches and the modeled bytes (each
kernel reads its inputs once and writes its outputs once), with split-K as the tile heuristics choose it
(mlcc/emit/matmul_tiles.py: dense_split_k_slices) and with the split-k pass disabled. With --light, the same
counts for the light_* models of the onnx package (launches and modeled bytes, --target none).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import mlcc  # noqa: E402

SHAPES = ((1024, 1000), (2048, 1000), (4096, 1000), (4096, 4096))  # densenet/inception, resnet50, alexnet/vgg
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def classifier(k: int, n: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((k, n)) * 0.02).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, n])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def row(k: int, n: int, tmp: Path) -> dict:
    out: dict = {"k": k, "n": n}
    for label, disabled in (("split", []), ("whole", ["split-k"])):
        m = mlcc.compile(classifier(k, n), tmp / f"{k}_{n}_{label}", targets=["sm_90"], cache_dir="",
                         disable_passes=disabled).manifest
        templates = {e["name"]: e for e in m["kernels"]}
        gemm = next(templates[s["kernel"]] for s in m["schedule"] if templates[s["kernel"]]["template"] == "matmul.py.jinja")
        grid = gemm["binaries"]["sm_90"]["config"]["grid"]
        out[label] = {"programs": grid[0] * grid[1], "launches": len(m["schedule"]), "bytes": m["stats"]["bytes"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--light", action="store_true", help="also the light_* models' launches and bytes")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [row(k, n, Path(tmp)) for k, n in SHAPES]
        print("| dense [1, K] x [K, N] + bias, relu (f32, sm_90) | programs | launches | bytes | "
              "programs, split-k off | launches | bytes |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            a, b = r["split"], r["whole"]
            print(f"| K={r['k']}, N={r['n']} | {a['programs']} | {a['launches']} | {a['bytes']:,} | {b['programs']} | "
                  f"{b['launches']} | {b['bytes']:,} |")
        if not args.light:
            return
        print()
        print("| model | launches | bytes | launches, split-k off | bytes |")
        print("|---|---:|---:|---:|---:|")
        for path in sorted(LIGHT.glob("light_*.onnx")):
            counts = []
            for label, disabled in (("split", []), ("whole", ["split-k"])):
                m = mlcc.compile(path, Path(tmp) / f"{path.stem}_{label}", targets=[], cache_dir="",
                                 disable_passes=disabled).manifest
                counts += [len(m["schedule"]), m["stats"]["bytes"]]
            print(f"| {path.stem} | {counts[0]} | {counts[1]:,} | {counts[2]} | {counts[3]:,} |")


if __name__ == "__main__":
    main()
