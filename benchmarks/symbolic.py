"""One symbolic bundle against one static bundle per length: build time, launches, arena, CPU run time.

    python benchmarks/symbolic.py [--model tests/data/models/gpt2_tiny_dynseq.onnx] [--dim seq]
                                  [--range 1..64] [--lengths 1,7,16,64] [--targets sm_80,sm_90]

Compiles MODEL once with --shape DIM=RANGE and once per length with --shape DIM=N (cold: no kernel
cache), then runs each static bundle and the symbolic one at that length under Triton's interpreter
(median of --repeat runs). Build times and launch counts are what a user deploying many lengths sees;
the CPU times only say that taking sizes as arguments costs the interpreter nothing measurable, not how
a GPU behaves.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mlcc  # noqa: E402
from mlcc.verify import random_inputs  # noqa: E402


def build(model: Path, out: Path, shape: list | str, dim: str, targets: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    mlcc.compile(model, out, targets=targets, shapes={dim: shape}, cache_dir="", force=True)
    return time.perf_counter() - start, json.loads((out / "manifest.json").read_text())


def run_ms(bundle: Path, feeds: dict, repeat: int) -> float:
    exe = mlcc.load(bundle)
    exe.run(feeds)  # warm-up: the interpreter imports each kernel once
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        exe.run(feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "tests" / "data" / "models" / "gpt2_tiny_dynseq.onnx"))
    ap.add_argument("--dim", default="seq")
    ap.add_argument("--range", default="1..64")
    ap.add_argument("--lengths", default="1,7,16,64")
    ap.add_argument("--targets", default="sm_80,sm_90")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    model, targets = Path(a.model), [t for t in a.targets.split(",") if t]
    lengths = [int(n) for n in a.lengths.split(",")]
    with tempfile.TemporaryDirectory(prefix="mlcc-bench-") as tmp:
        sym_s, sym_m = build(model, Path(tmp) / "sym", a.range, a.dim, targets)
        print(f"{model.name}, targets {','.join(targets) or 'none'}: one bundle for {a.dim} in {a.range} built in "
              f"{sym_s:.1f} s, {len(sym_m['schedule'])} launches, arena {sym_m['memory_plan']['arena_bytes']:,} B")
        print(f"{a.dim:>6} {'static build s':>15} {'launches':>9} {'arena B':>10} {'static ms':>10} "
              f"{'symbolic ms':>12} {'sym/static':>11}")
        total = 0.0
        for n in lengths:
            out = Path(tmp) / f"s{n}"
            secs, m = build(model, out, [n], a.dim, targets)
            total += secs
            feeds = random_inputs(m["inputs"], seed=n)
            if "attention_mask" in feeds:  # right padding, as real inputs are
                feeds["attention_mask"] = np.ones_like(feeds["attention_mask"])
            static_ms = run_ms(out, feeds, a.repeat)
            sym_ms = run_ms(Path(tmp) / "sym", feeds, a.repeat)
            print(f"{n:>6} {secs:>15.1f} {len(m['schedule']):>9} {m['memory_plan']['arena_bytes']:>10,} "
                  f"{static_ms:>10.1f} {sym_ms:>12.1f} {sym_ms / static_ms:>11.2f}")
        print(f"static builds for {len(lengths)} lengths: {total:.1f} s; the symbolic bundle: {sym_s:.1f} s "
              f"({total / sym_s:.1f}x less build time, and one bundle to ship)")


if __name__ == "__main__":
    main()
