"""The GPU kit: every measurement only a GPU can give, in one command, into one report.

    python benchmarks/gpu_check.py [--out build/gpu-check] [--device cuda] [--time-limit 1200]
    python benchmarks/gpu_check.py --sim [--device sim:sm_90]        # `make gpu-check SIM=1`

Stages, each with a time budget (seconds on an H100; the whole kit fits in 20 minutes):

    env          device name, driver, versions
    pytest       `pytest -m gpu` (the tests that need a CUDA device)
    benchmark    benchmarks/gpu.py: GPT-2 small, batch 1 and 16, seq 128, fp16, tf32 and fp32:
                 mlcc against torch eager and torch.compile in this process
    tune         `mlcc tune` (tune_model) on GPT-2 small in fp16, both batches, into one tuning database
    tuned        the fp16 benchmark rerun with bundles compiled with that database
    streaming    the largest fp16 bundle under hbm_budget=50% (or the least it runs in, if more): time, bit-identical
    microbench   mlcc's largest fp16 GEMM kernel against the device's measured peak (torch.matmul's best);
                 a Triton copy kernel against the measured bandwidth (torch's device-to-device copy)

A stage that fails is recorded with its error and the kit goes on; one that would start after the time
limit is skipped. The kit writes OUT/gpu_check.md and OUT/gpu_check.json (device, driver, versions,
every figure, each stage's status and time) and exits 1 when a stage failed.

--sim runs the same stages on a simulated CUDA device (mlcc's runtime device sim:TARGET, kernels under
Triton's interpreter; --device cpu stands in for it) with tiny sizes: a 1-layer GPT-2, 64x64 GEMMs,
torch on CPU, torch.compile with its eager backend, only tests/test_tuning.py's gpu tests collected.
Its timings are host wall-clock and mean nothing; the report says so. It runs in the default test suite
(tests/test_gpu_kit.py), so the kit cannot rot between the rare runs on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

import mlcc  # noqa: E402
from gpu import GPT2_SMALL, GPT2_TINY, GPT2Config, Setup, bench_gpt2, export_gpt2, gpt2_model  # noqa: E402
from mlcc.compiler import CompileOptions, lower_model  # noqa: E402
from mlcc.emit.target.targets import parse_target  # noqa: E402
from mlcc.emit.target.tune import Bench, time_candidates, tune_model, wall_clock_us  # noqa: E402
from mlcc.emit.tiling import tunable, tuning_candidates  # noqa: E402

# Seconds each stage may take on an H100 (20 minutes in all); a stage over budget is flagged in the report.
BUDGETS = {"env": 15, "pytest": 180, "benchmark": 420, "tune": 300, "tuned": 150, "streaming": 60,
           "microbench": 60}
SIM_NOTE = ("SIMULATED: no GPU ran this. Kernels ran under Triton's interpreter on the host CPU and torch "
            "on CPU; every time below is host wall-clock and means nothing about any GPU.")


@dataclass
class Sizes:
    """What the kit measures: the real sizes on a GPU, tiny ones when simulated."""
    model: GPT2Config
    batches: tuple[int, ...]
    precisions: tuple[str, ...]
    runs: int
    tune_repeat: int
    gemm: tuple[int, ...]          # square fp16 GEMM sizes for the peak; mlcc's runs at the largest
    copy_bytes: int


GPU_SIZES = Sizes(GPT2_SMALL, (1, 16), ("fp16", "tf32", "fp32"), 50, 20, (4096, 8192), 1 << 30)
SIM_SIZES = Sizes(GPT2_TINY, (1,), ("fp16", "fp32"), 1, 1, (32, 64), 1 << 14)


@dataclass
class Kit:
    setup: Setup
    sizes: Sizes
    sim: bool
    out: Path
    work: Path
    deadline: float
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    bundles: dict[tuple[str, int], str] = field(default_factory=dict)   # (precision, batch): untuned bundle
    rows: list[dict[str, Any]] = field(default_factory=list)

    def log(self, line: str) -> None:
        print(f"[gpu-check] {line}", file=sys.stderr, flush=True)

    def run(self, name: str, fn: Callable[["Kit"], dict[str, Any]]) -> None:
        record: dict[str, Any] = {"budget_s": BUDGETS[name]}
        if time.monotonic() > self.deadline:
            record.update(status="skipped", reason="the kit's time limit was reached")
        else:
            self.log(f"{name} ...")
            start = time.monotonic()
            try:
                record.update(status="passed", **fn(self))
            except Exception as e:  # noqa: BLE001 - a failed stage is reported, and the kit goes on
                record.update(status="failed", error=f"{type(e).__name__}: {e}",
                              traceback=traceback.format_exc(limit=8))
            record["elapsed_s"] = round(time.monotonic() - start, 2)
            record["over_budget"] = record["elapsed_s"] > BUDGETS[name]
            if record.get("failures"):
                record["status"] = "failed"
            self.log(f"{name}: {record['status']} in {record['elapsed_s']} s")
        self.stages[name] = record

    def torch_device(self) -> str:
        return self.setup.torch_device

    def tune_device(self) -> str:
        return self.setup.device if self.setup.cuda else f"sim:{self.setup.compile_target()}"

    def sync(self) -> None:
        self.setup.sync()

    def model_path(self, batch: int) -> Path:
        return self.work / f"{self.sizes.model.name}_b{batch}.onnx"


# ---- stages


def stage_env(kit: Kit) -> dict[str, Any]:
    import onnx
    import torch
    info: dict[str, Any] = {
        "simulated": kit.sim, "device": kit.setup.device, "target": kit.setup.compile_target(),
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
                     "onnx": onnx.__version__, "mlcc": mlcc.__version__, "cuda_runtime": torch.version.cuda},
        "host": {"machine": platform.machine(), "cpus": os.cpu_count()},
        "git_commit": _git_commit()}
    if kit.setup.cuda:
        props = torch.cuda.get_device_properties(kit.setup.torch_device)
        info.update(device_name=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                    multiprocessors=props.multi_processor_count, driver=_driver_version())
    else:
        info.update(device_name=f"simulated {kit.setup.compile_target()} (mlcc device {kit.setup.device})",
                    driver=None)
    return info


def stage_pytest(kit: Kit) -> dict[str, Any]:
    args = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider"]
    if kit.sim:   # no CUDA: the gpu tests skip; collect one file's, so the stage runs in seconds
        args.append("tests/test_tuning.py")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env, timeout=BUDGETS["pytest"] * 3)
    summary = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?)", summary)}
    ok = r.returncode in (0, 5)   # 5: nothing collected (every test deselected)
    return {"command": " ".join(args[1:]), "returncode": r.returncode, "summary": summary, "counts": counts,
            "failures": [] if ok else [r.stdout[-4000:] + r.stderr[-2000:]]}


def _bench_rows(kit: Kit, precisions, tuning_db: str | None) -> dict[str, Any]:
    rows, failures = [], []
    start = time.monotonic()
    budget = BUDGETS["tuned" if tuning_db else "benchmark"]
    for precision in precisions:
        for batch in kit.sizes.batches:
            if time.monotonic() - start > budget:
                rows.append({"precision": precision, "batch": batch, "skipped": "over the stage's budget"})
                continue
            try:
                row = bench_gpt2(batch, precision, kit.sizes.runs, kit.work, kit.setup, kit.sizes.model, tuning_db)
            except Exception as e:  # noqa: BLE001 - one row failing leaves the others to measure
                failures.append(f"{precision} batch {batch}: {type(e).__name__}: {e}")
                continue
            if tuning_db is None:
                kit.bundles[(precision, batch)] = row["bundle"]
            kit.log(f"  {precision} b{batch}: mlcc {row['mlcc_ms']:.3f} ms, eager {row['eager_ms']:.3f} ms, "
                    f"torch.compile {row['torch_compile_ms']:.3f} ms")
            rows.append({k: v for k, v in row.items() if k != "bundle"})
    return {"rows": rows, "failures": failures}


def stage_benchmark(kit: Kit) -> dict[str, Any]:
    result = _bench_rows(kit, kit.sizes.precisions, None)
    kit.rows = result["rows"]
    return result


def stage_tune(kit: Kit) -> dict[str, Any]:
    db = kit.out / "tuning.yaml"
    kernels, skipped = [], []
    start = time.monotonic()
    for batch in kit.sizes.batches:
        if time.monotonic() - start > BUDGETS["tune"]:
            skipped.append(batch)
            continue
        if not kit.model_path(batch).exists():
            export_gpt2(gpt2_model(kit.sizes.model), kit.sizes.model, batch, kit.model_path(batch))
        for r in tune_model(kit.model_path(batch), db, CompileOptions(precision="fp16"), repeat=kit.sizes.tune_repeat,
                            log=kit.log, device=kit.tune_device()):
            kernels.append({"batch": batch, **{k: r[k] for k in ("kernel", "template", "heuristic_us", "best_us",
                                                                   "candidates", "config")}})
    return {"db": str(db), "kernels": kernels, "skipped_batches": skipped,   # over the stage's budget
            "failures": [] if kernels else ["no kernel was tuned"]}


def stage_tuned(kit: Kit) -> dict[str, Any]:
    db = kit.out / "tuning.yaml"
    if not db.exists():
        raise RuntimeError("no tuning database: the tune stage did not write one")
    result = _bench_rows(kit, ("fp16",), str(db))
    untuned = {(r["precision"], r["batch"]): r for r in kit.rows if "mlcc_ms" in r}
    for row in result["rows"]:
        before = untuned.get((row.get("precision"), row.get("batch")))
        if before and "mlcc_ms" in row:
            row["untuned_mlcc_ms"] = before["mlcc_ms"]
            row["speedup_from_tuning"] = before["mlcc_ms"] / row["mlcc_ms"]
    return result


def stage_streaming(kit: Kit) -> dict[str, Any]:
    import numpy as np
    batch = max(kit.sizes.batches)
    bundle = kit.bundles.get(("fp16", batch))
    if bundle is None:
        raise RuntimeError(f"no fp16 batch-{batch} bundle: the benchmark stage did not build one")
    feeds = {"input_ids": np.random.default_rng(2).integers(0, kit.sizes.model.vocab,
                                                           (batch, kit.sizes.model.seq), dtype=np.int64)}
    full = mlcc.load(bundle, device=kit.setup.device)
    budget = streaming_budget(bundle)
    half = mlcc.load(bundle, device=kit.setup.device, hbm_budget=budget)
    want, got = full.run(feeds), half.run(feeds)
    identical = all(np.array_equal(want[k].view(np.uint8), got[k].view(np.uint8)) for k in want)
    full_ms = kit.setup.time_ms(lambda: full.run(feeds), kit.sizes.runs)
    half_ms = kit.setup.time_ms(lambda: half.run(feeds), kit.sizes.runs)
    return {"batch": batch, "precision": "fp16", "budget": budget, "full_ms": full_ms, "budget_ms": half_ms,
            "slowdown": half_ms / full_ms, "bit_identical": identical,
            "failures": [] if identical else [f"the run under hbm_budget={budget} differs from the full run"]}


def streaming_budget(bundle: Path) -> int | str:
    """Half the bundle's device footprint, or the least any policy can run it in (the fixed bytes and the
    weights its largest step reads) where that is more: a tiny model whose MLP is one back-to-back GEMM
    kernel reads most of its weights in one step."""
    from mlcc.bundle.memory import parse_budget
    from mlcc.runtime.simulate import load_models, minimum_budget, repeat_trace
    from mlcc.runtime.workload import Workload
    work = repeat_trace(Path(bundle).name, 1).fill(Workload(load_models([bundle])))
    least = minimum_budget(work)
    return "50%" if parse_budget("50%", work.footprint()) >= least else least


def stage_microbench(kit: Kit) -> dict[str, Any]:
    return {"gemm": gemm_bench(kit), "copy": copy_bench(kit)}


def gemm_bench(kit: Kit) -> dict[str, Any]:
    """mlcc's fp16 matmul kernel (its heuristic config) at the largest size against the best TFLOP/s
    torch.matmul reaches over the sizes (the device's measured peak)."""
    import torch
    peak = 0.0
    for n in kit.sizes.gemm:
        a = torch.randn(n, n, device=kit.torch_device()).half()
        b = torch.randn(n, n, device=kit.torch_device()).half()
        ms = kit.setup.time_ms(lambda: torch.matmul(a, b), kit.sizes.runs)
        peak = max(peak, 2 * n ** 3 / (ms * 1e-3) / 1e12)
    n = max(kit.sizes.gemm)
    target = parse_target(kit.setup.compile_target())
    _, kernels, launches = lower_model(matmul_model(n), CompileOptions(precision="fp16"), [target])
    name, kernel = next((k, v) for k, v in kernels.items() if tunable(v))
    inst = next(i for i, k in launches if k == name)
    bench = Bench(kit.torch_device()) if kit.setup.cuda else Bench("cpu", interpret=True, timer=wall_clock_us)
    timed = time_candidates(kernel, inst, target, kit.sizes.runs, bench=bench,
                            configs=tuning_candidates(kernel, target)[:1])
    if not timed:
        raise RuntimeError(f"mlcc's {n}x{n}x{n} fp16 matmul kernel did not run")
    us, config = timed[0]
    tflops = 2 * n ** 3 / (us * 1e-6) / 1e12
    return {"m": n, "n": n, "k": n, "kernel": name, "config": config.to_json(), "mlcc_us": us,
            "mlcc_tflops": tflops, "measured_peak_tflops": peak, "fraction_of_peak": tflops / peak}


def matmul_model(n: int):
    """An ONNX model of one MatMul: [n, n] @ [n, n], both inputs."""
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    y = helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])
    z = helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm", [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def copy_bench(kit: Kit) -> dict[str, Any]:
    """A Triton copy kernel's bandwidth against torch's device-to-device copy (the measured bandwidth),
    bytes read plus bytes written."""
    import torch
    n = kit.sizes.copy_bytes // 4
    src = torch.randn(n, device=kit.torch_device())
    dst = torch.empty_like(src)
    block = 4096 if kit.setup.cuda else 1024
    fn = copy_kernel
    if not kit.setup.cuda:
        from triton.runtime.interpreter import InterpretedFunction
        fn = InterpretedFunction(copy_kernel.fn)
    grid = (triton.cdiv(n, block),)
    fn[grid](src, dst, n, BLOCK=block)
    kit.sync()
    if not torch.equal(src, dst):
        raise RuntimeError("the copy kernel's output differs from its input")
    ours = kit.setup.time_ms(lambda: fn[grid](src, dst, n, BLOCK=block), kit.sizes.runs)
    theirs = kit.setup.time_ms(lambda: dst.copy_(src), kit.sizes.runs)
    moved = 2 * n * 4
    ours_gbs, theirs_gbs = moved / (ours * 1e-3) / 1e9, moved / (theirs * 1e-3) / 1e9
    return {"bytes": n * 4, "kernel_gb_s": ours_gbs, "measured_gb_s": theirs_gbs,
            "fraction_of_measured": ours_gbs / theirs_gbs}


STAGES: dict[str, Callable[[Kit], dict[str, Any]]] = {
    "env": stage_env, "pytest": stage_pytest, "benchmark": stage_benchmark, "tune": stage_tune,
    "tuned": stage_tuned, "streaming": stage_streaming, "microbench": stage_microbench}


# ---- report


def _git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None


def _driver_version() -> str | None:
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None


def _f(x: Any, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if isinstance(x, float) else "-" if x is None else str(x)


def markdown(report: dict[str, Any]) -> str:
    env = report["stages"].get("env", {})
    lines = [f"# mlcc GPU kit: {env.get('device_name', report['device'])}", ""]
    if report["simulated"]:
        lines += [f"**{SIM_NOTE}**", ""]
    versions = env.get("versions", {})
    lines += [f"- device: {env.get('device_name', '-')} (mlcc device `{report['device']}`, target "
              f"{env.get('target', '-')}); driver {env.get('driver') or '-'}; CUDA runtime "
              f"{versions.get('cuda_runtime') or '-'}",
              "- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if k != "cuda_runtime"),
              f"- commit {env.get('git_commit') or '-'}; started {report['started']}; "
              f"{report['elapsed_s']} s in all (limit {report['time_limit_s']} s)", "",
              "## Stages", "", "| stage | status | seconds | budget |", "|---|---|---:|---:|"]
    for name, st in report["stages"].items():
        status = st["status"] + (" (over budget)" if st.get("over_budget") else "")
        detail = st.get("error") or st.get("reason") or "; ".join(st.get("failures", []))[:200]
        lines.append(f"| {name} | {status}{': ' + detail if detail else ''} | {_f(st.get('elapsed_s'), 1)} | "
                     f"{st['budget_s']} |")
    pytest_stage = report["stages"].get("pytest", {})
    if "summary" in pytest_stage:
        lines += ["", f"`{pytest_stage['command']}`: {pytest_stage['summary']}"]
    for name, title in (("benchmark", "GPT-2 benchmark (ms)"), ("tuned", "With the tuning database (fp16, ms)")):
        rows = report["stages"].get(name, {}).get("rows", [])
        if not rows:
            continue
        lines += ["", f"## {title}", "", "| model | batch | seq | precision | mlcc | eager | torch.compile | "
                  "vs eager | vs torch.compile | max abs err | untuned mlcc |", "|---|---:|---:|---|---:|---:|---:|"
                  "---:|---:|---:|---:|"]
        for r in rows:
            if "skipped" in r:
                lines.append(f"| - | {r['batch']} | - | {r['precision']} | skipped: {r['skipped']} |||||||")
                continue
            lines.append(f"| {r['model']} | {r['batch']} | {r['seq']} | {r['precision']} | {_f(r['mlcc_ms'])} | "
                         f"{_f(r['eager_ms'])} | {_f(r['torch_compile_ms'])} | {_f(r['vs_eager'], 2)} | "
                         f"{_f(r['vs_torch_compile'], 2)} | {r['max_abs_err_vs_eager']:.2e} | "
                         f"{_f(r.get('untuned_mlcc_ms'))} |")
    tune = report["stages"].get("tune", {})
    kernels = tune.get("kernels", [])
    if tune.get("skipped_batches"):
        lines += ["", f"mlcc tune skipped batch(es) {tune['skipped_batches']}: over the stage's budget"]
    if kernels:
        lines += ["", "## mlcc tune (fp16, µs)", "", "| batch | kernel | template | heuristic | best | candidates |",
                  "|---:|---|---|---:|---:|---:|"]
        lines += [f"| {k['batch']} | {k['kernel']} | {k['template']} | {_f(k['heuristic_us'], 1)} | "
                  f"{_f(k['best_us'], 1)} | {k['candidates']} |" for k in kernels]
    s = report["stages"].get("streaming", {})
    if "full_ms" in s:
        lines += ["", "## Streaming under hbm_budget", "",
                  f"fp16 batch {s['batch']}: {_f(s['full_ms'])} ms without a budget, {_f(s['budget_ms'])} ms at "
                  f"{s['budget']} ({_f(s['slowdown'], 2)}x); bit-identical: {s['bit_identical']}"]
    m = report["stages"].get("microbench", {})
    if "gemm" in m:
        g, c = m["gemm"], m["copy"]
        lines += ["", "## Microbenchmarks", "",
                  f"- fp16 GEMM {g['m']}x{g['n']}x{g['k']}: mlcc {_f(g['mlcc_tflops'], 1)} TFLOP/s "
                  f"({_f(g['mlcc_us'], 1)} µs), measured peak (torch.matmul) {_f(g['measured_peak_tflops'], 1)} "
                  f"TFLOP/s: {_f(100 * g['fraction_of_peak'], 1)}%",
                  f"- copy of {c['bytes']} bytes: Triton kernel {_f(c['kernel_gb_s'], 1)} GB/s, measured "
                  f"(torch copy) {_f(c['measured_gb_s'], 1)} GB/s: {_f(100 * c['fraction_of_measured'], 1)}%"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-check")
    ap.add_argument("--sim", action="store_true", help="tiny sizes on a simulated device (timings meaningless)")
    ap.add_argument("--device", default=None, help="mlcc's device (default cuda; with --sim, sim:sm_90)")
    ap.add_argument("--target", default=None, help="compile target (default: the device's)")
    ap.add_argument("--stages", default=",".join(STAGES), help="comma-separated subset of: " + ", ".join(STAGES))
    ap.add_argument("--time-limit", type=float, default=1200.0, help="no stage starts after this many seconds")
    a = ap.parse_args(argv)
    device = a.device or ("sim:sm_90" if a.sim else "cuda")
    if not a.sim and not device.startswith("cuda"):
        ap.error(f"--device {device} is not a CUDA device: use --sim for a simulated one")
    if not a.sim:
        import torch
        if not torch.cuda.is_available():
            print("gpu-check needs a CUDA GPU; `make gpu-check SIM=1` runs it simulated", file=sys.stderr)
            return 69
    setup = Setup(device, a.target, "inductor" if not a.sim else "eager")
    a.out.mkdir(parents=True, exist_ok=True)
    started, started_at = time.monotonic(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="mlcc-gpu-check-") as work:
        kit = Kit(setup, SIM_SIZES if a.sim else GPU_SIZES, a.sim, a.out, Path(work), started + a.time_limit)
        for name in a.stages.split(","):
            if name not in STAGES:
                ap.error(f"unknown stage '{name}' (stages: {', '.join(STAGES)})")
            kit.run(name, STAGES[name])
    report = {"simulated": a.sim, "device": device, "started": started_at,
              "elapsed_s": round(time.monotonic() - started, 1), "time_limit_s": a.time_limit,
              "note": SIM_NOTE if a.sim else None, "budgets_s": BUDGETS, "stages": kit.stages}
    (a.out / "gpu_check.json").write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    (a.out / "gpu_check.md").write_text(markdown(report))
    failed = [n for n, st in kit.stages.items() if st["status"] == "failed"]
    print(f"gpu-check: {a.out / 'gpu_check.md'}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
