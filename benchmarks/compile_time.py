"""Cold and warm compile time of a model (and onnxruntime's session creation, for scale).

    python benchmarks/compile_time.py MODEL.onnx [--target sm_90] [--jobs N]

Cold: empty mlcc kernel cache and empty Triton cache. Warm: the same model into a new directory
with the cache the cold run filled.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed_compile(model: Path, out: Path, cache: Path, triton_cache: Path, target: str, jobs: int) -> float:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), TRITON_CACHE_DIR=str(triton_cache),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mlcc.cli", "compile", str(model), "-o", str(out), "--target", target,
                    "-j", str(jobs), "-q"], check=True, env=env)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cold = timed_compile(a.model, tmp / "cold", tmp / "cache", tmp / "triton", a.target, a.jobs)
        warm = timed_compile(a.model, tmp / "warm", tmp / "cache", tmp / "triton2", a.target, a.jobs)
    import onnxruntime as ort
    t = time.perf_counter()
    ort.InferenceSession(str(a.model), providers=["CPUExecutionProvider"])
    session = time.perf_counter() - t
    print(f"{a.model.name}: cold compile {cold:.1f} s, warm-cache compile {warm:.1f} s "
          f"({100 * warm / cold:.0f}% of cold), target {a.target}, -j {a.jobs}; "
          f"onnxruntime session creation {session:.2f} s")


if __name__ == "__main__":
    main()
