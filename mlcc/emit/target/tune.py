"""mlcc tune: time launch-config candidates of a model's tunable kernels on this GPU, keep the fastest.

The model is lowered as `mlcc compile` would lower it for the device's target. For each tunable
kernel (matmul, convolution, attention: mlcc/emit/tiling.py) the candidates are the target's
heuristic config and those its lowering proposes for the problem, filtered by the target's shared
memory and registers (tiling.tuning_candidates). Each one is compiled by Triton for this device and
launched on random inputs of the kernel's operand shapes and dtypes; its time is the median of
`repeat` runs after warm-up, each between two CUDA events after an L2 flush (which also keeps the
GPU busy while the launch is queued, so the host's launch overhead is not timed). A candidate whose
results differ from the heuristic's is dropped. The winners are merged into the tuning database:
entries of other kernels and other targets stay.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any, Callable

from mlcc.bundle.dtypes import torch_dtype as torch_dtype_by_numpy_name
from mlcc.bundle.kernels import import_jit
from mlcc.compiler import CompileOptions, lower_model
from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.emit.codegen.lower_module import tilings
from mlcc.emit.target.targets import Target, TargetError, parse_target
from mlcc.emit.target.tuning_db import TunedConfig, TuningDb, load_tuning_db, write_tuning_db
from mlcc.emit.tiling import TILINGS, tunable, tuning_candidates
from mlcc.errors import UnsupportedError
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Shape

WARMUP = 5
L2_FLUSH_BYTES = 256 << 20   # more than any GPU's L2: every timed run starts with a cold cache
TOLERANCE = {"f16": 1e-2, "bf16": 5e-2, "f32": 1e-3, "f64": 1e-9}   # of the largest |result|

Log = Callable[[str], None]


def device_target() -> str:
    """This machine's GPU's target name (sm_90, gfx942), as the device reports it; UnsupportedError (69)
    without one."""
    import torch
    if not torch.cuda.is_available():
        raise UnsupportedError("mlcc tune needs a CUDA device to time kernels on, and none is available")
    if getattr(torch.version, "hip", None):
        return torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


def _check_target(target: str | None, device: str) -> Target:
    """The target to tune for: the device's, or one it runs natively (sm_90a on an sm_90)."""
    try:
        have = parse_target(device)
        want = have if target is None else parse_target(target)
    except TargetError as e:
        raise UnsupportedError(str(e)) from None
    if (want.backend, want.arch) != (have.backend, have.arch):
        raise UnsupportedError(f"cannot tune for {target} on this {device} GPU: timings only hold for the GPU "
                               f"they are taken on")
    return want


def tune_model(model: Any, db_path: str | Path, options: CompileOptions, target: str | None = None,
               repeat: int = 50, log: Log | None = None) -> list[dict[str, Any]]:
    """Tune every tunable kernel of model for target (default: this GPU's) and merge the winners into the
    database at db_path (created if missing). Returns one record per kernel: its name, template, target,
    the heuristic's and the best median time in microseconds, and how many candidates were timed."""
    tuned = _check_target(target, device_target())
    db = load_tuning_db(db_path, tilings()) if Path(db_path).exists() else TuningDb(str(db_path))
    _, kernels, launches = lower_model(model, options, [tuned])
    results = []
    for name in sorted(kernels):
        kernel = kernels[name]
        if not tunable(kernel):
            continue
        insts = [inst for inst, kn in launches if kn == name]
        ops = sorted({o for inst in insts for o in inst.origin})
        if log:
            log(f"tuning {name} ({kernel.template}, {', '.join(ops)}) for {tuned.name}")
        timings = time_candidates(kernel, insts[0], tuned, repeat)
        if not timings:
            if log:
                log(f"  no candidate ran: {name} keeps its heuristic config")
            continue
        best_us, best = min(timings, key=lambda tc: tc[0])
        tiles = {n: best.constexprs[n] for n in TILINGS[kernel.template].tunable}
        db.record(kernel.signature, kernel.template, ops, tuned,
                  TunedConfig(tiles, best.num_warps, best.num_stages, best_us))
        results.append({"kernel": name, "template": kernel.template, "target": tuned.name,
                        "signature": kernel.signature,
                        "heuristic_us": timings[0][0], "best_us": best_us, "candidates": len(timings),
                        "config": best.to_json()})
    write_tuning_db(db, db_path)
    return results


def time_candidates(kernel: Kernel, inst: Instruction, target: Target,
                    repeat: int) -> list[tuple[float, LaunchConfig]]:
    """(median microseconds, config) of every candidate that compiles, runs and agrees with the first one
    that does (the heuristic's, first in the list)."""
    import torch

    torch.manual_seed(0)
    inputs = [random_tensor(op.shape) for op in inst.operands]
    results = list(inst.shape.elements) if inst.shape.is_tuple else [inst.shape]
    outputs = [torch.empty(max(s.numel(), 1), dtype=_torch_dtype(s.dtype), device="cuda") for s in results]
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    timings: list[tuple[float, LaunchConfig]] = []
    reference = None
    with tempfile.TemporaryDirectory(prefix="mlcc-tune-") as tmp:
        path = Path(tmp) / f"{kernel.name}.py"
        path.write_text(kernel.source)
        fn = import_jit(path, kernel.name)
        for config in tuning_candidates(kernel, target):
            def launch(config: LaunchConfig = config) -> None:
                fn[config.grid](*inputs, *outputs, **config.constexprs, num_warps=config.num_warps,
                                num_stages=config.num_stages, enable_fp_fusion=True)
            try:
                launch()
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - a config Triton cannot build or launch here is skipped
                continue
            got = [o.clone() for o in outputs]
            if reference is None:
                reference = got
            elif not all(_agrees(g, r, s.dtype) for g, r, s in zip(got, reference, results)):
                continue
            timings.append((median_us(launch, repeat, flush), config))
    return timings


def median_us(launch: Callable[[], None], repeat: int, flush) -> float:
    """The median time of launch() over repeat runs after WARMUP, from CUDA events, in microseconds."""
    import torch
    for _ in range(WARMUP):
        launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.zero_()
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def _torch_dtype(dtype: str):
    return torch_dtype_by_numpy_name(numpy_dtype(dtype).name)


def random_tensor(shape: Shape):
    """A flat device buffer of shape's elements: normal floats, small integers, random booleans."""
    import torch
    n, dtype = max(shape.numel(), 1), _torch_dtype(shape.dtype)
    if dtype.is_floating_point:
        return torch.randn(n, device="cuda").to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), device="cuda").bool()
    return torch.randint(0, 3, (n,), device="cuda").to(dtype)


def _agrees(got, want, dtype: str) -> bool:
    """Equal for integers; floats within TOLERANCE of the largest finite |want| (sums in another order)."""
    import torch
    if not want.dtype.is_floating_point:
        return torch.equal(got, want)
    g, w = got.double(), want.double()
    finite = w[torch.isfinite(w)]
    scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
    tol = TOLERANCE.get(dtype, 1e-3) * scale
    return torch.allclose(g, w, rtol=0.0, atol=tol, equal_nan=True)
