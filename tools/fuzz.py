"""Differential fuzzing of mlcc against onnxruntime.

    python tools/fuzz.py --n 1000 --seed 0 --jobs 2

Generates ``--n`` random valid ONNX models (seeds ``--seed`` .. ``--seed + n - 1``), compiles each with mlcc
(no GPU targets), runs it on CPU through the generated Triton kernels and compares every output with
onnxruntime. Each failure is shrunk to a minimal model and saved under tests/fuzz/regressions/ (the first
``--shrink-per-signature`` failures of each distinct signature). Prints ``N passed, N failed`` (and how many
onnxruntime itself rejected), then the failures grouped by signature. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlcc.fuzz.generator import AVOIDABLE, generate  # noqa: E402
from mlcc.fuzz.runner import CASE_TIMEOUT, CaseResult, preload, run_seeds  # noqa: E402
from mlcc.fuzz.shrink import REGRESSIONS, save_regression, shrink  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="how many models (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--jobs", type=int, default=1, help="models checked at once, each in its own process")
    ap.add_argument("--timeout", type=float, default=CASE_TIMEOUT, help="seconds per model before it counts as hung")
    ap.add_argument("--max-nodes", type=int, default=10, help="ops per model: 2 to this many (default 10)")
    ap.add_argument("--avoid", default="", help=f"comma list of model features to leave out: {','.join(AVOIDABLE)}")
    ap.add_argument("--no-shrink", action="store_true", help="report failures without shrinking or saving them")
    ap.add_argument("--shrink-per-signature", type=int, default=1, help="failures shrunk and saved per signature")
    ap.add_argument("--save-dir", type=Path, default=REGRESSIONS, help="where regressions go")
    ap.add_argument("--results", type=Path, default=None, help="also write every verdict as JSON lines here")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per model, not only per failure")
    args = ap.parse_args(argv)
    avoid = frozenset(a for a in args.avoid.split(",") if a)
    warnings.filterwarnings("ignore")

    preload()
    start = time.monotonic()
    results: list[CaseResult] = []
    out = args.results.open("w") if args.results else None
    seeds = range(args.seed, args.seed + args.n)
    for r in run_seeds(seeds, jobs=args.jobs, timeout=args.timeout, avoid=avoid, max_nodes=args.max_nodes):
        results.append(r)
        if out:
            out.write(json.dumps(r.to_json()) + "\n")
            out.flush()
        o = r.outcome
        if args.verbose or o.failed:
            print(f"seed {r.seed}: {o.status}{' ' + o.kind if o.kind else ''} ({r.seconds:.1f} s) "
                  f"[{' '.join(r.ops)}] {o.detail[:300]}", flush=True)
    failed = [r for r in results if r.outcome.failed]
    skipped = [r for r in results if r.outcome.status == "skip"]
    passed = len(results) - len(failed) - len(skipped)

    by_signature: dict[str, list[CaseResult]] = collections.defaultdict(list)
    for r in failed:
        by_signature[r.outcome.signature].append(r)
    saved: dict[str, list[str]] = collections.defaultdict(list)
    if not args.no_shrink:
        for sig, cases in by_signature.items():
            for r in cases[: args.shrink_per_signature]:
                print(f"shrinking seed {r.seed} ({sig})", flush=True)
                model = generate(r.seed, args.max_nodes, avoid).model
                small, outcome = shrink(model, r.seed, r.outcome, log=lambda s: print(s, flush=True))
                path = save_regression(small, r.seed, outcome, r.ops, args.save_dir, avoid)
                saved[sig].append(str(path))
                print(f"  saved {path} ({len(small.graph.node)} nodes: "
                      f"{' '.join(n.op_type for n in small.graph.node)})", flush=True)

    print(f"{passed} passed, {len(failed)} failed, {len(skipped)} skipped (onnxruntime rejects the model, or its "
          f"output contradicts the declared shape) in {time.monotonic() - start:.0f} s")
    for sig, cases in sorted(by_signature.items(), key=lambda kv: -len(kv[1])):
        first = cases[0]
        print(f"  {len(cases):4d} x {sig}")
        print(f"         e.g. seed {first.seed} [{' '.join(first.ops)}]: {first.outcome.detail[:300]}")
        print(f"         seeds {' '.join(str(c.seed) for c in cases[:20])}{' ...' if len(cases) > 20 else ''}")
        for p in saved.get(sig, []):
            print(f"         regression {p}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
