"""Run ONNX's node conformance cases through mlcc.backend, as onnx's BackendTest does.

    python tools/run_node_conformance.py --jobs 2
    python tools/run_node_conformance.py -k conv -k pool -v
    python tools/run_node_conformance.py --json results.json
    python tools/run_node_conformance.py --expected tests/backend/expected_failures.yaml
    python tools/run_node_conformance.py --write-expected tests/backend/expected_failures.yaml

Each case (onnx.backend.test.case.node) is prepared with mlcc.backend, run on
every data set, and compared with the case's own tolerance (rtol 1e-3, atol 1e-7
unless the case says otherwise) exactly like BackendTest.assert_similar_outputs:
same count, shapes and dtypes, then allclose. Prints pass/fail/skip counts,
failure reasons grouped (the error's type and message with names and numbers
blanked), and the slowest cases. A case is "skipped" when BackendTest would skip
it (unittest.SkipTest); an mlcc error (an unsupported op, dtype or attribute)
is a failure, as it is in BackendTest.

``--expected FILE`` compares the failures with the expected-failure file the
test suite reads (tests/backend/expected_failures.yaml) and exits 1 on a case
that fails unexpectedly or passes unexpectedly. ``--write-expected FILE``
rewrites that file from this run: groups whose reason was written by hand keep
it (and keep the cases of theirs that still fail); other failures are grouped by
the unsupported op or feature their error names.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import re
import sys
import time
import traceback
import unittest
import warnings
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

MIN_PASSING = 1350  # the target; onnxruntime's own backend passes 1,334 on this harness


@dataclass
class CaseResult:
    name: str
    status: str              # "pass", "fail" or "skip"
    seconds: float
    reason: str = ""         # one line: the error type and message
    baked: list[str] = field(default_factory=list)  # inputs compiled in as constants


def node_cases() -> dict:
    """name -> onnx TestCase for every node case BackendTest runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.loader import load_model_tests
        return {c.name: c for c in load_model_tests(kind="node")}


def _normalize(value):
    import onnx
    from onnx import numpy_helper
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return value


def check_case(case, reps: list | None = None) -> None:
    """Prepare one node case with mlcc.backend and run every data set, compared with the case's own
    tolerance the way BackendTest's run_node does (AssertionError on a mismatch). The prepared rep is
    appended to ``reps`` when given (it says which inputs were baked in)."""
    from onnx.backend.test.runner import Runner

    import mlcc.backend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = mlcc.backend.prepare(case.model, "CPU")
        if reps is not None:
            reps.append(rep)
        for inputs, ref_outputs in case.data_sets:
            outputs = rep.run([_normalize(x) for x in inputs])
            Runner.assert_similar_outputs([_normalize(x) for x in ref_outputs], outputs,
                                          rtol=case.rtol, atol=case.atol)


def run_case(name: str) -> CaseResult:
    """One case's verdict, its time and, on failure, the reason in one line."""
    start = time.perf_counter()
    reps: list = []
    try:
        check_case(_CASES[name], reps)
    except unittest.SkipTest as e:
        return CaseResult(name, "skip", time.perf_counter() - start, f"SkipTest: {e}")
    except Exception as e:  # noqa: BLE001 - every failure is reported, grouped
        return CaseResult(name, "fail", time.perf_counter() - start, one_line(e),
                          list(reps[0].baked) if reps else [])
    return CaseResult(name, "pass", time.perf_counter() - start, "", list(reps[0].baked))


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    if isinstance(e, AssertionError):
        text = _assertion_summary(str(e))
    elif not type(e).__module__.startswith("mlcc"):  # a crash, not a reported error: say where
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        if where is not None:
            text += f" [at {Path(where.filename).name}:{where.lineno}]"
    return f"{type(e).__name__}: {text}"[:400]


def _assertion_summary(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    keep = [ln for ln in lines if ln.startswith(("Not equal", "Arrays are not", "Mismatched", "Max absolute",
                                                 "Output", "x and y", "(shapes", "ACTUAL", "DESIRED"))]
    return " ".join(keep or lines[:3])


def reason_group(reason: str) -> str:
    """A failure reason with case-specific names and numbers blanked, so like failures group together."""
    g = re.sub(r"'[^']*'", "'…'", reason)
    g = re.sub(r"\[[^\]]*\]", "[…]", g)
    g = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", g)
    g = re.sub(r"Mismatched elements: .*", "Mismatched elements", g)
    return g[:200]


def expected_group(reason: str) -> tuple[str, str]:
    """(group id, group reason) for a failure that no hand-written group claims."""
    m = re.match(r"UnsupportedOpError: \d+ unsupported nodes?: (.*)", reason)
    if m:
        ops = sorted(set(re.findall(r"\(([A-Za-z0-9]+), ([a-z.]+) opset", m.group(1))))
        names = ", ".join(f"{op}" if domain == "ai.onnx" else f"{op} ({domain})" for op, domain in ops)
        return "unsupported-op-" + "-".join(op for op, _ in ops), f"no import rule for {names}"
    m = re.search(r"(?:has element type|has|cast to) (FLOAT8E\w+|FLOAT4E2M1|U?INT[24]|STRING|FLOAT8E8M0)\b", reason)
    if m:
        return f"unsupported-dtype-{m.group(1)}", f"element type {m.group(1)} has no IR dtype"
    m = re.match(r"UnsupportedFeatureError: (?:node '[^']*' \((\w+)\): )?(.*)", reason)
    if m:
        op, message = m.group(1) or "input", m.group(2)
        slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"'[^']*'|\d+", "", message).lower()).strip("-")[:60]
        return f"unsupported-{op}-{slug}", f"{op}: unsupported: {message}"
    return "unclassified", "not yet diagnosed: " + reason_group(reason)


def load_expected(path: Path) -> dict[str, dict]:
    """group id -> {"reason": str, "cases": [names], "written": "by hand" or absent}."""
    groups = yaml.safe_load(path.read_text()) or {}
    seen: dict[str, str] = {}
    for gid, group in groups.items():
        for name in group["cases"]:
            if name in seen:
                raise ValueError(f"{path}: {name} is in groups {seen[name]} and {gid}")
            seen[name] = gid
    return groups


def expected_names(groups: dict[str, dict]) -> set[str]:
    return {name for g in groups.values() for name in g["cases"]}


def write_expected(path: Path, results: list[CaseResult]) -> None:
    old = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}  # hand-written groups win any overlap
    by_hand = {gid: g for gid, g in old.items() if g.get("written") == "by hand"}
    owner = {name: gid for gid, g in by_hand.items() for name in g["cases"]}
    groups: dict[str, dict] = {gid: {"reason": g["reason"], "written": "by hand", "cases": []}
                               for gid, g in by_hand.items()}
    for r in sorted(results, key=lambda r: r.name):
        if r.status != "fail":
            continue
        gid = owner.get(r.name)
        if gid is None:
            gid, reason = expected_group(r.reason)
            groups.setdefault(gid, {"reason": reason, "cases": []})
        groups[gid]["cases"].append(r.name)
    groups = {gid: g for gid, g in sorted(groups.items(), key=lambda kv: (-len(kv[1]["cases"]), kv[0]))
              if g["cases"]}
    header = ("# Node cases of onnx.backend.test that mlcc.backend fails, grouped by cause: one reason per group.\n"
              "# tests/backend/test_backend_suite.py marks them expected failures (an unexpected pass fails too).\n"
              "# Regenerate with: python tools/run_node_conformance.py --write-expected " + str(path) + "\n"
              "# Groups `written: by hand` keep their reason; the rest are grouped by the error's op or feature.\n")
    path.write_text(header + yaml.safe_dump(groups, sort_keys=False, width=120))


def check_expected(groups: dict[str, dict], results: list[CaseResult]) -> list[str]:
    expected = expected_names(groups)
    problems = [f"unexpected failure: {r.name}: {r.reason}" for r in results
                if r.status == "fail" and r.name not in expected]
    problems += [f"unexpected pass: {r.name}" for r in results if r.status == "pass" and r.name in expected]
    return problems


_CASES: dict = {}


def _init_worker() -> None:
    global _CASES
    _CASES = node_cases()
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def run_all(names: list[str], jobs: int, progress: bool) -> list[CaseResult]:
    results: list[CaseResult] = []
    if jobs <= 1:
        _init_worker()
        for i, name in enumerate(names):
            results.append(run_case(name))
            if progress:
                _progress(i + 1, len(names), results[-1])
        return results
    ctx = multiprocessing.get_context("spawn")
    # No max_tasks_per_child: with it, Python 3.11's executor can hang when it replaces workers.
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker) as pool:
        futures = {pool.submit(run_case, n): n for n in names}
        for i, fut in enumerate(concurrent.futures.as_completed(futures)):
            try:
                r = fut.result()
            except Exception as e:  # noqa: BLE001 - a worker that died (segfault, OOM)
                r = CaseResult(futures[fut], "fail", 0.0, f"worker died: {type(e).__name__}: {e}")
            results.append(r)
            if progress:
                _progress(i + 1, len(names), r)
    return results


def _progress(done: int, total: int, r: CaseResult) -> None:
    print(f"[{done}/{total}] {r.status:4} {r.seconds:6.2f}s {r.name}"
          + (f"  {r.reason[:160]}" if r.status == "fail" else ""), file=sys.stderr, flush=True)


def summarize(results: list[CaseResult], wall: float, slowest: int = 10) -> str:
    counts = Counter(r.status for r in results)
    lines = [f"node cases: {len(results)}  pass {counts['pass']}  fail {counts['fail']}  skip {counts['skip']}"
             f"  ({wall:.0f} s wall)"]
    baked = [r for r in results if r.status == "pass" and r.baked]
    if baked:
        lines.append(f"  of the passing, {len(baked)} compiled with shape-fixing inputs baked in as constants")
    groups: dict[str, list[str]] = defaultdict(list)
    for r in results:
        if r.status == "fail":
            groups[reason_group(r.reason)].append(r.name)
    if groups:
        lines.append("\nfailures by reason:")
        for reason, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            shown = ", ".join(sorted(names)[:6]) + (", …" if len(names) > 6 else "")
            lines.append(f"  {len(names):4d}  {reason}\n        {shown}")
    lines.append(f"\n{slowest} slowest cases:")
    for r in sorted(results, key=lambda r: -r.seconds)[:slowest]:
        lines.append(f"  {r.seconds:7.2f} s  {r.status:4}  {r.name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("-k", action="append", default=[], metavar="PATTERN",
                        help="run only cases whose name contains a PATTERN (regex; repeatable)")
    parser.add_argument("--failed-in", metavar="FILE", help="run only the cases that failed in a earlier --json FILE")
    parser.add_argument("--json", metavar="FILE", help="write every case's result to FILE")
    parser.add_argument("--from-json", metavar="FILE", help="run nothing: report on (and check, write) a --json FILE")
    parser.add_argument("--expected", metavar="FILE", help="exit 1 on failures or passes that FILE does not expect")
    parser.add_argument("--write-expected", metavar="FILE", help="rewrite the expected-failure FILE from this run")
    parser.add_argument("--min-passing", type=int, default=0,
                        help=f"exit 1 when fewer cases pass (the issue's target is {MIN_PASSING})")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each case as it finishes")
    args = parser.parse_args(argv)

    if args.write_expected and (args.k or args.failed_in):
        parser.error("--write-expected needs a run of every case (no -k, no --failed-in)")
    if args.from_json:
        results = [CaseResult(**r) for r in json.loads(Path(args.from_json).read_text())]
        return _report(args, results, 0.0)
    names = sorted(node_cases())
    if args.k:
        names = [n for n in names if any(re.search(p, n) for p in args.k)]
    if args.failed_in:
        failed = {r["name"] for r in json.loads(Path(args.failed_in).read_text()) if r["status"] == "fail"}
        names = [n for n in names if n in failed]
    start = time.perf_counter()
    results = run_all(names, args.jobs, args.verbose)
    wall = time.perf_counter() - start
    results.sort(key=lambda r: r.name)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1, sort_keys=True) + "\n")
    return _report(args, results, wall)


def _report(args: argparse.Namespace, results: list[CaseResult], wall: float) -> int:
    print(summarize(results, wall))
    status = 0
    if args.write_expected:
        write_expected(Path(args.write_expected), results)
    if args.expected:
        problems = check_expected(load_expected(Path(args.expected)), results)
        if problems:
            print("\n" + "\n".join(problems))
            status = 1
    passed = sum(r.status == "pass" for r in results)
    return 1 if passed < args.min_passing else status


if __name__ == "__main__":
    sys.exit(main())
