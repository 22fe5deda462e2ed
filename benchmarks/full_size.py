"""Full-size models on a small machine: wall time and peak RSS of compiling them, bundle size, determinism.

    python benchmarks/full_size.py [--only llama7b,gpt2,gpt2xl] [--dir SCRATCH] [--keep] [--jobs 2]
                                   [--target sm_90]

llama7b: tools/gen_llama.py at LLaMA-2-7B's shapes (fp16, 13.5 GB of external data, KV cache, symbolic past
and seq), compiled with ``--shape past=0..2048 --shape seq=1..2048 --target sm_90 -j 2`` twice (the second
time from the kernel cache the first one filled) into two bundles whose weights.bin digests must be equal;
then ``mlcc inspect`` on the bundle is timed and ``mlcc simulate --hbm-budget 8GiB`` prints its streaming
plan. gpt2: GPT-2 small from tools/gpt2_export.py (one 650 MB inline file), compiled the same way; its peak
RSS is compared with the file's size. gpt2xl: GPT-2 XL's shapes (48 layers, 1600 wide, 25 heads, fp16:
3.1 GB, so external data) through the same exporter.

Each compile runs as a child process (the CLI) and its peak RSS is the kernel's ``ru_maxrss`` for it from
``wait4``: the largest resident set of the compile or of any kernel-compiling worker it waited for. The
models and bundles go to a scratch folder: by default a temporary one, removed at the end unless --keep; with
--dir the models stay there (a model already there is reused, its generation time then not shown) and the
bundles are removed unless --keep.
Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from mlcc.bundle.digest import file_sha256  # noqa: E402

PY = sys.executable
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_measured(cmd: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes) and output of ``cmd`` run as a child; exits on failure.
    (``cpu_seconds`` of the last call: its user + system time, which other load on the machine leaves alone.)"""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ENV, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        run_measured.cpu_seconds = usage.ru_utime + usage.ru_stime
        log.seek(0)
        output = log.read()
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{output[-4000:]}")
    return seconds, usage.ru_maxrss * 1024, output


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def compile_cmd(model: Path, out: Path, args: argparse.Namespace, shapes: list[str], cache: Path) -> list[str]:
    cmd = [PY, "-m", "mlcc.cli", "compile", str(model), "-o", str(out), "--target", args.target,
           "-j", str(args.jobs), "--cache-dir", str(cache), "--force", "-q"]
    for s in shapes:
        cmd += ["--shape", s]
    return cmd


def bench_compiles(name: str, model: Path, model_bytes: int, scratch: Path, args: argparse.Namespace,
                   shapes: list[str], twice: bool) -> dict:
    """Compile (twice when ``twice``: weights.bin digests compared), inspect and simulate; a result row."""
    cache = scratch / f"{name}.cache"
    row: dict = {"model": name, "model_bytes": model_bytes, "shapes": shapes}
    digests = []
    for attempt in range(2 if twice else 1):
        out = scratch / f"{name}.bundle{attempt}"
        seconds, rss, _ = run_measured(compile_cmd(model, out, args, shapes, cache))
        row.setdefault("compiles", []).append((seconds, rss))
        print(f"{name}: compile {attempt + 1}: {seconds:.1f} s, peak RSS {gib(rss)}", flush=True)
        digests.append(file_sha256(out / "weights.bin"))
        if attempt == 0:
            row["bundle_bytes"] = dir_bytes(out)
            row["weights_bytes"] = (out / "weights.bin").stat().st_size
            row["manifest_bytes"] = (out / "manifest.json").stat().st_size
            seconds, _, text = run_measured([PY, "-m", "mlcc.cli", "inspect", str(out)])
            row["inspect_s"], row["inspect_cpu_s"] = seconds, run_measured.cpu_seconds
            print(f"{name}: mlcc inspect {seconds:.2f} s wall, {row['inspect_cpu_s']:.2f} s CPU "
                  f"({len(text.splitlines())} lines)", flush=True)
            if args.simulate:
                _, _, text = run_measured([PY, "-m", "mlcc.cli", "simulate", str(out), "--hbm-budget", args.simulate])
                row["simulate"] = text.strip()
                print(f"{name}: mlcc simulate --hbm-budget {args.simulate}\n{text.strip()}", flush=True)
        if twice and attempt == 0:
            shutil.rmtree(out)  # the disk holds the model and one bundle at a time
    if twice:
        row["identical"] = digests[0] == digests[1]
        print(f"{name}: weights.bin {'identical' if row['identical'] else 'DIFFERENT'} across compiles "
              f"(sha256 {digests[0][:16]}...)", flush=True)
    if not args.keep:
        for p in scratch.glob(f"{name}.bundle*"):
            shutil.rmtree(p)
    return row


def llama7b(scratch: Path, args: argparse.Namespace) -> dict:
    from gen_llama import Config, generate, parameter_count
    model = scratch / "llama7b" / "llama7b.onnx"
    c = Config()
    gen_s = None
    if not (model.exists() and model.with_suffix(".data").exists()):
        started = time.perf_counter()
        generate(model, c)
        gen_s = time.perf_counter() - started
        print(f"llama7b: generated {parameter_count(c):,} parameters in {gen_s:.0f} s", flush=True)
    size = model.with_suffix(".data").stat().st_size + model.stat().st_size
    row = bench_compiles("llama7b", model, size, scratch, args, ["past=0..2048", "seq=1..2048"], twice=True)
    row["generate_s"] = gen_s
    return row


def gpt2(scratch: Path, args: argparse.Namespace, xl: bool) -> dict:
    name = "gpt2xl" if xl else "gpt2"
    model = scratch / name / f"{name}.onnx"
    export = None
    if not model.exists():
        sizes = ["--layers", "48", "--embd", "1600", "--heads", "25", "--dtype", "float16"] if xl else []
        seconds, rss, _ = run_measured([PY, str(ROOT / "tools" / "gpt2_export.py"), str(model), *sizes])
        export = (seconds, rss)
        print(f"{name}: exported in {seconds:.0f} s, exporter's peak RSS {gib(rss)}", flush=True)
    size = sum(p.stat().st_size for p in model.parent.iterdir())
    row = bench_compiles(name, model, size, scratch, args, [], twice=False)
    row["export"] = export
    return row


def table(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [f"Machine: {os.cpu_count()} cores, {_mem_gib()} GiB RAM, {platform.machine()}, Python "
             f"{platform.python_version()}; target {args.target}, -j {args.jobs}.", "",
             "| model | model files | compile (wall) | peak RSS | peak RSS / model | bundle | weights.bin identical "
             "| mlcc inspect (wall, CPU) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        seconds, rss = r["compiles"][0]
        again = f" (again, warm kernel cache: {r['compiles'][1][0]:.0f} s, {gib(r['compiles'][1][1])})" \
            if len(r["compiles"]) > 1 else ""
        ident = {True: "yes", False: "NO"}.get(r.get("identical"), "-")
        lines.append(f"| {r['model']} | {gib(r['model_bytes'])} | {seconds:.0f} s{again} | {gib(rss)} | "
                     f"{rss / r['model_bytes']:.2f}x | {gib(r['bundle_bytes'])} | {ident} | {r['inspect_s']:.2f} s, {r['inspect_cpu_s']:.2f} s |")
    return "\n".join(lines)


def _mem_gib() -> int:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError):
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="llama7b,gpt2,gpt2xl", help="comma list of llama7b, gpt2, gpt2xl")
    ap.add_argument("--dir", type=Path, default=None, help="scratch folder (default: a temporary one in /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the models and bundles")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--simulate", default="8GiB", help="--hbm-budget for mlcc simulate ('' to skip)")
    args = ap.parse_args(argv)
    scratch = args.dir or Path(tempfile.mkdtemp(prefix="mlcc_full_size_"))
    scratch.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for name in args.only.split(","):
            if name == "llama7b":
                rows.append(llama7b(scratch, args))
            elif name in ("gpt2", "gpt2xl"):
                rows.append(gpt2(scratch, args, xl=name == "gpt2xl"))
            else:
                sys.exit(f"unknown model {name!r} (llama7b, gpt2, gpt2xl)")
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(table(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
