"""How compile time grows with graph length: time per instruction per pass on synthetic graphs.

    python benchmarks/pass_scaling.py                      # chains of 2k and 20k, fan-out, 100 and 1,000 layers
    python benchmarks/pass_scaling.py --graph layers:100 --graph chain:2000 [--profile out.prof]

Graphs from tools/synthetic_graphs.py (ONNX built with onnx.helper, weights seeded and tiny): chain:N elementwise
nodes in a row, fanout:N consumers of one value summed back, layers:N stacked transformer layers.
Each compiles with targets none (as `mlcc compile --target none --time-passes`) and no kernel cache. Printed per
graph: the CPU time of each stage (import, each pass summed over its runs, the verifier, lowering and writing,
each outside Python's garbage collector, and the collector's own) in microseconds per instruction of the module
the first pass leaves, so a near-linear pass prints the same number for every size. CPU time (this process's),
not wall time: the machine is shared, and a busy neighbour stretches wall time, not CPU time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import sys
import types
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import mlcc  # noqa: E402
from synthetic_graphs import build  # noqa: E402

DEFAULT = ["chain:2000", "chain:20000", "fanout:1000", "fanout:10000", "layers:100", "layers:1000"]


class _Timed:
    """While active: the pass manager times passes in CPU seconds outside the garbage collector, and the
    verifier's and the collector's CPU seconds are summed (the verifier runs after every pass that changed
    the module)."""

    def __init__(self) -> None:
        self.verifier = 0.0
        self.verifier_runs = 0
        self.gc = 0.0
        self._gc_start = 0.0

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.process_time()
        else:
            self.gc += time.process_time() - self._gc_start

    def cpu(self) -> float:
        """CPU seconds outside the garbage collector: a full collection scans every object alive, whichever
        pass happens to allocate when it is due, so it is counted on its own row."""
        return time.process_time() - self.gc

    def __enter__(self) -> "_Timed":
        import mlcc.hlo.passes.pass_manager as pm
        self._pm, self._verify, self._time = pm, pm.verify_module, pm.time

        def timed(module, *args, **kwargs):
            start = self.cpu()
            try:
                return self._verify(module, *args, **kwargs)
            finally:
                self.verifier += self.cpu() - start
                self.verifier_runs += 1
        pm.verify_module = timed
        pm.time = types.SimpleNamespace(perf_counter=self.cpu)
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc) -> None:
        self._pm.verify_module, self._pm.time = self._verify, self._time
        gc.callbacks.remove(self._on_gc)


def measure(spec: str, profile: Path | None = None) -> tuple[int, float, dict[str, float]]:
    """(instructions after the first pass, CPU seconds, CPU seconds by stage) for one compile of the graph."""
    model = build(spec)
    marks: list[tuple[str, float]] = []
    gc.collect()
    with tempfile.TemporaryDirectory() as tmp, _Timed() as timed:
        def progress(stage: str, done: int, total: int) -> None:
            marks.append((f"{stage}:{'end' if done >= total else 'start'}", timed.cpu()))

        prof = cProfile.Profile() if profile is not None else None
        start = time.process_time()
        if prof is not None:
            prof.enable()
        result = mlcc.compile(model, Path(tmp) / "b", progress=progress, targets=[], cache_dir="")
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(profile))
        total, end_outside_gc = time.process_time() - start, timed.cpu()
    at = dict(marks)
    stages: dict[str, float] = defaultdict(float)
    stages["import"] = at["import:end"] - at["import:start"]
    for r in result.pass_records:
        stages[r.name] += r.seconds
    stages["verifier"] = timed.verifier
    print(f"  {spec}: the verifier ran {timed.verifier_runs} times", flush=True)
    stages["lower+write"] = end_outside_gc - at["passes:end"]
    stages["gc"] = timed.gc
    instructions = result.pass_records[0].instructions if result.pass_records else 1
    return instructions, total, dict(stages)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", action="append", help="KIND:N (chain, fanout, layers); repeatable")
    ap.add_argument("--profile", type=Path, default=None, help="write a cProfile of the last graph's compile here")
    a = ap.parse_args()
    specs = a.graph or DEFAULT
    results = []
    for i, spec in enumerate(specs):
        n, total, stages = measure(spec, a.profile if i == len(specs) - 1 else None)
        results.append((spec, n, total, stages))
        print(f"{spec}: {n} instructions, {total:.2f} CPU s", flush=True)
    names = list(dict.fromkeys(k for _, _, _, s in results for k in s))
    print()
    print("us per instruction | " + " | ".join(spec for spec, *_ in results))
    print("---|" + "---:|" * len(results))
    for name in names:
        print(f"{name} | " + " | ".join(f"{1e6 * s.get(name, 0.0) / n:.1f}" for _, n, _, s in results))
    print("total | " + " | ".join(f"{1e6 * t / n:.1f}" for _, n, t, _ in results))
    print("instructions | " + " | ".join(str(n) for _, n, _, _ in results))
    print("CPU seconds | " + " | ".join(f"{t:.2f}" for _, _, t, _ in results))


if __name__ == "__main__":
    main()
