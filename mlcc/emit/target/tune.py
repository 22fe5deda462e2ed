"""mlcc tune: time launch-config candidates of a model's tunable kernels on this GPU, keep the fastest.

The model is lowered as `mlcc compile` would lower it for the device's target. For each tunable
kernel (matmul, convolution, attention: mlcc/emit/tiling.py) the candidates are the target's
heuristic config and those its lowering proposes for the problem, filtered by the target's shared
memory and registers (tiling.tuning_candidates). Each one is compiled by Triton for this device and
launched on random inputs of the kernel's operand shapes and dtypes (a symbolic kernel at the top of
its symbols' ranges, with those values as its ``sym_`` scalars); its time is the median of `repeat`
runs after warm-up, each between two CUDA events after an L2 flush (which also keeps the GPU busy
while the launch is queued, so the host's launch overhead is not timed). Before a candidate's
results are read its outputs are filled twice, with NaN (the largest integer, True) and with zeros,
and it is run after each: a candidate that leaves any output element unwritten, or whose results
differ from the heuristic's, is dropped. The winners are merged into the tuning database: entries of
other kernels and other targets stay.

Where candidates run is a `Bench`: CUDA (``cuda``, ``cuda:N``), or ``sim:TARGET``, which runs them
on CPU under Triton's interpreter with TARGET's candidates and a wall-clock timer (its times mean
nothing; it checks everything else `mlcc tune` does without a GPU).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mlcc.bundle.dtypes import torch_dtype as torch_dtype_by_numpy_name
from mlcc.bundle.kernels import import_jit
from mlcc.bundle.sizes import eval_size
from mlcc.compiler import CompileOptions, lower_model
from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.emit.codegen.lower_module import tilings
from mlcc.emit.target.targets import Target, TargetError, parse_target
from mlcc.emit.target.tuning_db import TunedConfig, TuningDb, load_tuning_db, write_tuning_db
from mlcc.emit.tiling import TILINGS, tunable, tuning_candidates
from mlcc.errors import UnsupportedError
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.symbolic import evaluate

WARMUP = 5
L2_FLUSH_BYTES = 256 << 20   # more than any GPU's L2: every timed run starts with a cold cache
TOLERANCE = {"f16": 1e-2, "bf16": 5e-2, "f32": 1e-3, "f64": 1e-9}   # of the largest |result|

Log = Callable[[str], None]
Launch = Callable[[], None]
Timer = Callable[[Launch, int], float]   # median microseconds of launch() over repeat runs


@dataclass(frozen=True)
class Bench:
    """Where candidates run: buffers on torch_device; kernels compiled by Triton for it, or run under
    Triton's interpreter (interpret); timed by timer, or by CUDA events after an L2 flush when None."""
    torch_device: str = "cuda"
    interpret: bool = False
    timer: Timer | None = None

    def sync(self) -> None:
        if self.torch_device.startswith("cuda"):
            import torch
            torch.cuda.synchronize(self.torch_device)


def device_target() -> str:
    """This machine's (current) GPU's target name (sm_90, gfx942), as the device reports it;
    UnsupportedError (69) without one."""
    import torch
    if not torch.cuda.is_available():
        raise UnsupportedError("mlcc tune needs a CUDA device to time kernels on, and none is available")
    index = torch.cuda.current_device()
    if getattr(torch.version, "hip", None):
        return torch.cuda.get_device_properties(index).gcnArchName.split(":")[0]
    major, minor = torch.cuda.get_device_capability(index)
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


def _device_guard(device: str):
    """A context that makes cuda:N the current device (kernels launch on the current one)."""
    import torch
    if device.startswith("cuda:") and device[5:].isdigit() and torch.cuda.is_available():
        return torch.cuda.device(int(device[5:]))
    return nullcontext()   # without CUDA, _bench says so (69)


def _bench(device: str) -> tuple[str, Bench]:
    """The target device (cuda, cuda:N, sim:TARGET) is, and where its candidates run."""
    if device.startswith("sim:"):
        return device.split(":", 1)[1], Bench("cpu", interpret=True, timer=wall_clock_us)
    if device != "cuda" and not (device.startswith("cuda:") and device[5:].isdigit()):
        raise UnsupportedError(f"mlcc tune runs on cuda, cuda:N or sim:TARGET, not '{device}'")
    return device_target(), Bench(device)


def tune_model(model: Any, db_path: str | Path, options: CompileOptions, target: str | None = None,
               repeat: int = 50, log: Log | None = None, device: str = "cuda") -> list[dict[str, Any]]:
    """Tune every tunable kernel of model for target (default: the device's) on device (cuda, cuda:N, or
    sim:TARGET: the interpreter on CPU, times meaningless) and merge the winners into the database at
    db_path (created if missing). Returns one record per kernel: its name, template, target, the heuristic
    config's median time in microseconds (None when it did not run), the best one, and how many candidates
    were timed."""
    with _device_guard(device):
        have, bench = _bench(device)
        tuned = _check_target(target, have)
        db = load_tuning_db(db_path, tilings()) if Path(db_path).exists() else TuningDb(str(db_path))
        module, kernels, launches = lower_model(model, options, [tuned])
        symbols = {name: hi for name, (_, hi) in module.symbols.items()}   # the largest problem
        results = []
        for name in sorted(kernels):
            kernel = kernels[name]
            if not tunable(kernel):
                continue
            insts = [inst for inst, kn in launches if kn == name]
            ops = sorted({o for inst in insts for o in inst.origin})
            if log:
                log(f"tuning {name} ({kernel.template}, {', '.join(ops)}) for {tuned.name}")
            timings = time_candidates(kernel, insts[0], tuned, repeat, bench=bench, symbols=symbols)
            if not timings:
                if log:
                    log(f"  no candidate ran: {name} keeps its heuristic config")
                continue
            best_us, best = min(timings, key=lambda tc: tc[0])
            heuristic = tuning_candidates(kernel, tuned)[0]
            tiles = {n: best.constexprs[n] for n in TILINGS[kernel.template].tunable}
            db.record(kernel.signature, kernel.template, ops, tuned,
                      TunedConfig(tiles, best.num_warps, best.num_stages, best_us))
            results.append({"kernel": name, "template": kernel.template, "target": tuned.name,
                            "signature": kernel.signature,
                            "heuristic_us": next((us for us, c in timings if c == heuristic), None),
                            "best_us": best_us, "candidates": len(timings), "config": best.to_json()})
        write_tuning_db(db, db_path)
    return results


def kernel_scalars(kernel: Kernel, symbols: Mapping[str, int]) -> list[int]:
    """The values of kernel's ``sym_`` arguments, in its parameter order; UnsupportedError names a
    symbol without one."""
    missing = [s for s in kernel.scalars if s not in symbols]
    if missing:
        raise UnsupportedError(f"kernel {kernel.name} takes symbol(s) {', '.join(missing)}, which have no value")
    return [int(symbols[s]) for s in kernel.scalars]


def time_candidates(kernel: Kernel, inst: Instruction, target: Target, repeat: int, bench: Bench = Bench(),
                    symbols: Mapping[str, int] | None = None,
                    configs: Sequence[LaunchConfig] | None = None) -> list[tuple[float, LaunchConfig]]:
    """(median microseconds, config) of every candidate that compiles, runs, writes every output element and
    agrees with the first one that does (the heuristic's, first in the list). symbols: a value for each of
    the kernel's symbols (its ``sym_`` scalars, and the sizes of its buffers and grid); configs: the ones
    to time instead of the kernel's tuning candidates (the GPU kit times the heuristic's alone)."""
    import torch

    env = dict(symbols or {})
    scalars = kernel_scalars(kernel, env)
    torch.manual_seed(0)
    inputs = [random_tensor(op.shape, bench.torch_device, env) for op in inst.operands]
    results = list(inst.shape.elements) if inst.shape.is_tuple else [inst.shape]
    outputs = [torch.empty(max(evaluate(s.numel_expr(), env), 1), dtype=_torch_dtype(s.dtype),
                           device=bench.torch_device) for s in results]
    timer = bench.timer or cuda_timer(torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=bench.torch_device))
    timings: list[tuple[float, LaunchConfig]] = []
    reference = None
    with tempfile.TemporaryDirectory(prefix="mlcc-tune-") as tmp:
        path = Path(tmp) / f"{kernel.name}.py"
        path.write_text(kernel.source)
        fn = import_jit(path, kernel.name)
        if bench.interpret:
            from triton.runtime.interpreter import InterpretedFunction
            fn = InterpretedFunction(fn.fn)
        for config in tuning_candidates(kernel, target) if configs is None else configs:
            grid = tuple(eval_size(g, env) for g in config.grid)

            def launch(config: LaunchConfig = config, grid: tuple = grid) -> None:
                fn[grid](*inputs, *outputs, *scalars, **config.constexprs, num_warps=config.num_warps,
                         num_stages=config.num_stages, enable_fp_fusion=True)
            got = run_checked(launch, outputs, bench)
            if got is None:
                continue
            if reference is None:
                reference = got
            elif not all(_agrees(g, r, s.dtype) for g, r, s in zip(got, reference, results)):
                continue
            timings.append((timer(launch, repeat), config))
    return timings


def run_checked(launch: Launch, outputs: Sequence[Any], bench: Bench) -> list[Any] | None:
    """The outputs of launch(), or None when it fails (a config Triton cannot build or launch here) or
    leaves an output element unwritten: it runs twice, after outputs are filled with two different
    values (NaN, the largest integer or True; then zeros), and both runs must give the same bits."""
    runs = []
    for fill in (0, 1):
        for o in outputs:
            clear(o, fill)
        try:
            launch()
            bench.sync()
        except Exception:  # noqa: BLE001 - a config Triton cannot build or launch here is skipped
            return None
        runs.append([o.clone() for o in outputs])
    import torch
    if not all(torch.equal(_bits(a), _bits(b)) for a, b in zip(*runs)):
        return None
    return runs[0]


def clear(t, fill: int) -> None:
    """Fill t with what no kernel is expected to write: fill 0 is NaN (the dtype's largest integer, True),
    fill 1 is zero (False)."""
    import torch
    if fill:
        t.zero_()
    elif t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)


def _bits(t):
    """t's bytes, so NaNs compare equal to themselves."""
    import torch
    return t.view(torch.uint8) if t.dtype != torch.bool else t


def cuda_timer(flush) -> Timer:
    def timer(launch: Launch, repeat: int) -> float:
        return median_us(launch, repeat, flush)
    return timer


def median_us(launch: Launch, repeat: int, flush) -> float:
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


def wall_clock_us(launch: Launch, repeat: int) -> float:
    """The median wall-clock time of launch() over repeat runs (at least one), in microseconds: for the
    interpreter, where it measures the host, never a GPU."""
    times = []
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        launch()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def _torch_dtype(dtype: str):
    return torch_dtype_by_numpy_name(numpy_dtype(dtype).name)


def random_tensor(shape: Shape, device: str = "cuda", symbols: Mapping[str, int] | None = None):
    """A flat buffer on device of shape's elements (symbolic dims at symbols' values): normal floats, small
    integers, random booleans."""
    import torch
    n, dtype = max(evaluate(shape.numel_expr(), symbols or {}), 1), _torch_dtype(shape.dtype)
    if dtype.is_floating_point:
        return torch.randn(n, device=device).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), device=device).bool()
    return torch.randint(0, 3, (n,), device=device).to(dtype)


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
