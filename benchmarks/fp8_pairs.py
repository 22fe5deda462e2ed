"""fp8 QDQ graphs of every pairing of e4m3fn, e5m2, e4m3fnuz and e5m2fnuz (tests/test_fp8_types.py's qdq_model:
a [64,128] x [128,64] MatMul and a 32 -> 64 channel 3x3 Conv on 16x16, each of two DequantizeLinear outputs):
launches, modeled bytes, weights.bin and the max error against onnxruntime on CPU.

    PYTHONPATH=. python benchmarks/fp8_pairs.py

Each is compiled with `--target none` and run on CPU under Triton's interpreter (the f16 decode path).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import mlcc
from tests.test_fp8_types import PAIRS, feed, qdq_model, reference


def main() -> None:
    print("| pair (activation x weight) | launches | bytes | weights.bin | err ORT |")
    print("|---|---|---|---|---|")
    for ta, tw in PAIRS:
        model = qdq_model(ta, tw)
        with tempfile.TemporaryDirectory() as d:
            r = mlcc.compile(model, Path(d) / "b", targets=[])
            inputs = feed()
            got = mlcc.load(r.out_dir, device="cpu").run(inputs)
            err = max(float(np.abs(got[n] - ref).max()) for n, ref in zip(("y", "c"), reference(model, inputs)))
            stats = r.manifest["stats"]
            print(f"| {ta} x {tw} | {stats['launches']} | {stats['bytes']:,} | "
                  f"{(r.out_dir / 'weights.bin').stat().st_size:,} | {err:.1e} |")


if __name__ == "__main__":
    main()
