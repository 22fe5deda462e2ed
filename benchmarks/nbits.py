"""Weight-only 4-bit (and 8-bit) decoders (tests/data/models/nbits, tools/make_nbits_models.py): a row per
model for BENCHMARKS.md (MatMulNBits, GatherBlockQuantized, and the int4 blocked-DequantizeLinear ``qdq_*``).

    python benchmarks/nbits.py [--targets sm_80,sm_90] [--models qdq_b32_asym,qdq_b128_sym] [--no-split-k]
                               [--json out.json]

Per model: launches and modeled global-memory bytes (the manifest's traffic model: each kernel reads its
inputs once and writes its outputs once) of a decode step (batch 1, one token, --precision fp16), its
weights.bin, and their ratios to the float model's fp16 build; the size of weights.bin and of the whole
bundle (fp32 build at seq=4, binaries for --targets); and the largest absolute error of the bundle's
logits, run under Triton's interpreter at seq=4, against onnxruntime's on the same quantized model and
against onnxruntime's on the float model (the quantization's own error). Then the split-K table: programs,
launches and bytes of decode-sized MatMulNBits with the split the tile heuristics choose and without it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import mlcc  # noqa: E402

DATA = ROOT / "tests" / "data" / "models" / "nbits"
MODELS = ["float", "b32_asym", "b32_sym", "b128_asym", "b128_sym", "b32_8bit", "b32_asym_gbq", "qdq_b32_asym",
          "qdq_b128_sym"]
# the float model quantized by mlcc (compile --quantize), compared with onnxruntime on its own quantization
QUANTIZED_BY_MLCC = {"float --quantize w4": ("w4", "b32_sym"), "float --quantize w4:128": ("w4:128", "b128_sym")}


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(name: str, targets: list[str], tmp: Path, float_row: dict | None) -> dict:
    quantize, ref_name = QUANTIZED_BY_MLCC.get(name, (None, name))
    source = DATA / ("float.onnx" if quantize else f"{name}.onnx")
    half = tmp / f"{name}_decode".replace(" ", "_")
    decode = mlcc.compile(source, half, targets=[], cache_dir="", precision="fp16", quantize=quantize,
                          shapes={"seq": [1]}).manifest["stats"]
    weights_fp16 = (half / "weights.bin").stat().st_size
    base = float_row or {"decode_bytes": decode["bytes"], "weights_bin_fp16": weights_fp16}
    out = tmp / name.replace(" ", "_")
    full = mlcc.compile(source, out, targets=targets, cache_dir="", shapes={"seq": [4]}, quantize=quantize).manifest
    inputs = dict(np.load(DATA / "inputs.npz"))
    got = mlcc.load(out, device="cpu").run(inputs)["logits"]
    ref = np.load(DATA / f"{ref_name}.ref.npz")["logits"]
    float_ref = np.load(DATA / "float.ref.npz")["logits"]
    return {"model": name, "decode_launches": decode["launches"], "decode_bytes": decode["bytes"],
            "decode_ratio": round(decode["bytes"] / base["decode_bytes"], 3), "weights_bin_fp16": weights_fp16,
            "weights_ratio": round(weights_fp16 / base["weights_bin_fp16"], 3),
            "launches": full["stats"]["launches"], "weights_bin": (out / "weights.bin").stat().st_size,
            "bundle": _size(out), "err_vs_onnxruntime": float(np.abs(got - ref).max()),
            "err_vs_float": float(np.abs(got - float_ref).max())}


def split_k_rows(tmp: Path) -> list[dict]:
    """Decode-sized MatMulNBits (one row, 4-bit, block 32, fp16): the programs of the dot's kernel and the
    modeled bytes, with split-K as the tile heuristics choose it and with the split-k pass disabled."""
    sys.path.insert(0, str(ROOT / "tests" / "frontend"))
    from test_nbits_ops import F16, matmul_nbits  # the tests' single-node model builder

    rows = []
    for k, n in ((4096, 1024), (4096, 4096), (11008, 2048)):
        model = matmul_nbits(k, n, a_dims=(1, None), dtype=F16, zero=None)
        row: dict = {"k": k, "n": n}
        for label, disabled in (("split", []), ("whole", ["split-k"])):
            m = mlcc.compile(model, tmp / f"sk_{k}_{n}_{label}", targets=["sm_90"], cache_dir="",
                             disable_passes=disabled).manifest
            dot = next(s for s in m["schedule"] if s["kernel"].startswith("fused_output"))
            kernel = next(e for e in m["kernels"] if e["name"] == dot["kernel"])
            grid = kernel["binaries"]["sm_90"]["config"]["grid"]
            row[label] = {"launches": len(m["schedule"]), "programs": grid[0] * grid[1], "bytes": m["stats"]["bytes"]}
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="sm_80,sm_90", help="GPU targets of the bundles (none: no binaries)")
    ap.add_argument("--models", help="only these rows, comma-separated (the float row, the baseline, always)")
    ap.add_argument("--no-split-k", action="store_true", help="skip the split-K table")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = ap.parse_args()
    targets = [] if args.targets == "none" else args.targets.split(",")
    names = MODELS + list(QUANTIZED_BY_MLCC)
    if args.models:
        names = ["float"] + [n for n in args.models.split(",") if n != "float"]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            rows.append(measure(name, targets, Path(tmp), rows[0] if rows else None))
        split = [] if args.no_split_k else split_k_rows(Path(tmp))
    print("| model | decode launches | decode bytes (fp16) | vs float fp16 | weights.bin (fp16) | vs float fp16 | "
          "launches (seq 4) | weights.bin (fp32) | bundle (fp32) | max err vs onnxruntime | max err vs float model |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['decode_launches']} | {r['decode_bytes']:,} | {r['decode_ratio']:.3f}x | "
              f"{r['weights_bin_fp16']:,} | {r['weights_ratio']:.3f}x | {r['launches']} | {r['weights_bin']:,} | "
              f"{r['bundle']:,} | {r['err_vs_onnxruntime']:.2e} | {r['err_vs_float']:.2e} |")
    if args.json:
        args.json.write_text(json.dumps({"models": rows, "split_k": split}, indent=1))
    if not split:
        return
    print()
    print("| MatMulNBits [1, K] x [K, N] (fp16, sm_90) | programs | launches | bytes | programs, split-k off | "
          "launches | bytes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in split:
        a, b = r["split"], r["whole"]
        print(f"| K={r['k']}, N={r['n']} | {a['programs']} | {a['launches']} | {a['bytes']:,} | {b['programs']} | "
              f"{b['launches']} | {b['bytes']:,} |")


if __name__ == "__main__":
    main()
