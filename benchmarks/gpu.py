"""GPU benchmark: mlcc's bundle against PyTorch eager and torch.compile on the same weights and inputs.

    python benchmarks/gpu.py [--out results.json] [--runs 50]

Run on a machine with an NVIDIA GPU (H100/H200 class). Builds GPT-2 small (12 layers, 768 hidden,
random weights, exported with torch.onnx), compiles it with mlcc for the device's architecture, and
times, at batch 1 and 16, sequence 128, in fp16 and fp32: mlcc's bundle (CUDA runtime, AOT binaries),
torch eager and torch.compile on the same weights and inputs. Median of --runs runs after warm-up,
CUDA events. mlcc's time includes copying the inputs to the device and the outputs back (the runtime's
numpy interface), which torch's does not: the comparison is conservative for mlcc.

Not yet measured here: ResNet-50, and per-kernel achieved TFLOP/s and GB/s (no GPU was available to
the session that wrote this script; see BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))


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


def arch() -> str:
    import torch
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def bench_gpt2(batch: int, precision: str, runs: int, tmp: Path) -> dict:
    import numpy as np
    import torch
    from gpt2_export import GPT2

    import mlcc
    torch.manual_seed(0)
    model = GPT2(50257, 1024, 768, 12, 12).eval().cuda()
    ids = torch.randint(0, 50257, (batch, 128), device="cuda")
    path = tmp / f"gpt2_b{batch}.onnx"
    with torch.no_grad():
        torch.onnx.export(model.cpu(), (ids.cpu(),), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids"], output_names=["logits"])
    model = model.cuda()
    if precision == "fp16":
        model = model.half()
    bundle = tmp / f"gpt2_b{batch}_{precision}"
    mlcc.compile(path, bundle, targets=[arch()], precision=precision)
    exe = mlcc.load(bundle, device="cuda")
    feeds = {"input_ids": ids.cpu().numpy().astype(np.int64)}
    with torch.no_grad():
        eager = cuda_time(lambda: model(ids), runs)
        compiled = torch.compile(model)
        compiled(ids)
        inductor = cuda_time(lambda: compiled(ids), runs)
    ours = cuda_time(lambda: exe.run(feeds), runs)
    return {"model": "gpt2-small", "batch": batch, "seq": 128, "precision": precision,
            "mlcc_ms": ours, "eager_ms": eager, "torch_compile_ms": inductor,
            "vs_eager": eager / ours, "vs_torch_compile": inductor / ours}


def main() -> None:
    import torch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_results.json"))
    ap.add_argument("--runs", type=int, default=50)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py needs an NVIDIA GPU")
    results = {"device": torch.cuda.get_device_name(), "arch": arch(), "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        for precision in ("fp16", "fp32"):
            for batch in (1, 16):
                row = bench_gpt2(batch, precision, a.runs, Path(tmp))
                results["rows"].append(row)
                print(json.dumps(row))
    a.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
