"""GPU benchmark: mlcc's bundle against PyTorch eager and torch.compile on the same weights and inputs.

    python benchmarks/gpu.py [--out results.json] [--runs 50] [--precisions fp16,tf32,fp32] [--batches 1,16]
                             [--tuning-db tuning.yaml]

Run on a machine with an NVIDIA GPU (H100/H200 class). Builds GPT-2 small (12 layers, 768 hidden,
random weights, exported with torch.onnx), compiles it with mlcc for the device's architecture, and
times, at batch 1 and 16, sequence 128, in fp16, tf32 and fp32: mlcc's bundle (CUDA runtime, AOT
binaries), torch eager and torch.compile on the same weights and inputs (torch's TF32 matmuls on for
tf32 only). Median of --runs runs after warm-up, CUDA events. mlcc's time includes copying the inputs
to the device and the outputs back (the runtime's numpy interface), which torch's does not: the
comparison is conservative for mlcc. Each row also has mlcc's largest |logit - eager logit|.

`benchmarks/gpu_check.py` (`make gpu-check`) runs this with the rest of the GPU kit; with SIM=1 it runs
it on a simulated device (`Setup`): tiny sizes, torch on CPU, host wall-clock times that mean nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))


@dataclass(frozen=True)
class GPT2Config:
    vocab: int = 50257
    positions: int = 1024
    embd: int = 768
    layers: int = 12
    heads: int = 12
    seq: int = 128
    name: str = "gpt2-small"


GPT2_SMALL = GPT2Config()
GPT2_TINY = GPT2Config(vocab=64, positions=16, embd=32, layers=1, heads=2, seq=8, name="gpt2-kit-tiny")


@dataclass(frozen=True)
class Setup:
    """Where the benchmark runs. device: mlcc's (cuda, cuda:N, or sim:TARGET, a simulated CUDA device;
    cpu stands in for one); target: what bundles are compiled for (default: the CUDA device's, or
    sim:TARGET's); torch runs on the CUDA device, else on CPU; torch.compile uses torch_compile_backend."""
    device: str = "cuda"
    target: str | None = None
    torch_compile_backend: str = "inductor"

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def torch_device(self) -> str:
        return self.device if self.cuda else "cpu"

    def compile_target(self) -> str:
        if self.target:
            return self.target
        if self.device.startswith("sim:"):
            return self.device.split(":", 1)[1]
        if self.cuda:
            return arch(self.device)
        raise ValueError(f"device {self.device} needs a target")

    def sync(self) -> None:
        if self.cuda:
            import torch
            torch.cuda.synchronize(self.torch_device)

    def time_ms(self, fn: Callable[[], Any], runs: int, warmup: int = 10) -> float:
        """Median milliseconds of fn() over runs: CUDA events on a GPU, else the host's wall clock."""
        return cuda_time(fn, runs, warmup) if self.cuda else wall_time(fn, runs, min(warmup, 1))


def cuda_time(fn, runs: int, warmup: int = 10) -> float:
    """Median milliseconds of fn() over runs, timed with CUDA events."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def wall_time(fn, runs: int, warmup: int = 1) -> float:
    """Median wall-clock milliseconds of fn() over runs (at least one)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(runs, 1)):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def arch(device: str = "cuda") -> str:
    import torch
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def gpt2_model(cfg: GPT2Config, seed: int = 0):
    """GPT-2 with cfg's random weights (seeded), eval mode, on CPU, fp32."""
    import torch
    from gpt2_export import GPT2
    torch.manual_seed(seed)
    return GPT2(cfg.vocab, cfg.positions, cfg.embd, cfg.layers, cfg.heads).eval()


def export_gpt2(model, cfg: GPT2Config, batch: int, path: Path) -> None:
    """model (on CPU, fp32) exported to ONNX at path for input_ids of batch x cfg.seq."""
    import torch
    ids = torch.zeros(batch, cfg.seq, dtype=torch.long)
    with torch.no_grad():
        torch.onnx.export(model, (ids,), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids"], output_names=["logits"])


def set_tf32(on: bool) -> None:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def bench_gpt2(batch: int, precision: str, runs: int, tmp: Path, setup: Setup = Setup(),
               cfg: GPT2Config = GPT2_SMALL, tuning_db: str | None = None) -> dict:
    """One row: mlcc's bundle, torch eager and torch.compile at batch x cfg.seq in precision (fp16, tf32,
    fp32), milliseconds; the bundle is left at row["bundle"]."""
    import numpy as np
    import torch

    import mlcc
    tag = f"{cfg.name}_b{batch}"
    path = tmp / f"{tag}.onnx"
    model = gpt2_model(cfg)
    if not path.exists():
        export_gpt2(model, cfg, batch, path)
    model = model.to(setup.torch_device)
    if precision == "fp16":
        model = model.half()
    set_tf32(precision == "tf32")
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab, (batch, cfg.seq), generator=gen).to(setup.torch_device)
    bundle = tmp / f"{tag}_{precision}" if tuning_db is None else tmp / f"{tag}_{precision}_tuned"
    start = time.perf_counter()
    mlcc.compile(path, bundle, targets=[setup.compile_target()], precision=precision, tuning_db=tuning_db,
                 quiet=True)
    compile_s = time.perf_counter() - start
    exe = mlcc.load(bundle, device=setup.device)
    feeds = {"input_ids": ids.cpu().numpy().astype(np.int64)}
    with torch.no_grad():
        want = model(ids).float().cpu().numpy()
        eager = setup.time_ms(lambda: model(ids), runs)
        compiled = torch.compile(model, backend=setup.torch_compile_backend)
        compiled(ids)
        inductor = setup.time_ms(lambda: compiled(ids), runs)
    got = exe.run(feeds)["logits"].astype(np.float32)
    ours = setup.time_ms(lambda: exe.run(feeds), runs)
    return {"model": cfg.name, "batch": batch, "seq": cfg.seq, "precision": precision,
            "tuned": tuning_db is not None, "mlcc_ms": ours, "eager_ms": eager, "torch_compile_ms": inductor,
            "vs_eager": eager / ours, "vs_torch_compile": inductor / ours,
            "max_abs_err_vs_eager": float(np.abs(got - want).max()), "compile_s": compile_s,
            "bundle": str(bundle)}


def main() -> None:
    import torch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_results.json"))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--precisions", default="fp16,tf32,fp32")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--tuning-db", default=None, help="compile mlcc's bundles with this tuning database")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py needs an NVIDIA GPU (benchmarks/gpu_check.py --sim runs it simulated)")
    results = {"device": torch.cuda.get_device_name(), "arch": arch(), "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        for precision in a.precisions.split(","):
            for batch in (int(b) for b in a.batches.split(",")):
                row = bench_gpt2(batch, precision, a.runs, Path(tmp), tuning_db=a.tuning_db)
                results["rows"].append(row)
                print(json.dumps(row))
    a.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
