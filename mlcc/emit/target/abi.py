"""The launch ABI, checked against the binaries: what the runtime passes a kernel is what its compiled entry
takes, for every kernel and target of a bundle, and every grid fits the target's limits.

What a launch passes (mlcc/runtime/bundle.py, then Triton's launcher in triton/backends/*/driver.py):
the runtime calls the kernel with the launch's `args` (buffers: device pointers) then its `scalars` (the
symbols' values, Python ints); Triton's launcher packs them by the kernel's `arg_types` (`*T`: an 8-byte
pointer, `i32`: 4 bytes, ...), and appends the global-scratch pointer and the profile-scratch pointer (both
always, a null pointer when the size is 0: `params[num_args]` and `params[num_args + 1]` in driver.c; we
take their presence from the binary's metadata keys `global_scratch_size` / `profile_scratch_size`, which
the Triton versions that append them write). What the binary takes: the entry's parameters, read by
mlcc/emit/target/binaries.py (a cubin's KPARAM_INFO records, an hsaco's kernel-descriptor arguments).

Each problem names the kernel, the target (or the schedule step) and the parameter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from mlcc.bundle.manifest import KernelEntry, Launch, Manifest
from mlcc.bundle.sizes import SizeError, eval_size, size_symbols
from mlcc.emit.target.binaries import Param, bundle_facts, load_manifest
from mlcc.emit.target.targets import Target, parse_target

I32_MAX = 2**31 - 1
SCALAR_BYTES = {"i32": 4, "u32": 4, "i64": 8, "u64": 8, "fp32": 4, "fp64": 8}   # others: 0, never matching
SCRATCH_PARAMS = (("global_scratch_size", "global_scratch"), ("profile_scratch_size", "profile_scratch"))


@dataclass(frozen=True)
class AbiProblem:
    kernel: str
    where: str     # the target (sm_90), or the schedule step (step 3)
    param: str     # the parameter: its name where known, and its position
    message: str

    def __str__(self) -> str:
        return f"kernel {self.kernel} [{self.where}]: parameter {self.param}: {self.message}"


@dataclass(frozen=True)
class Passed:
    """One parameter as the launch passes it."""
    name: str
    pointer: bool
    size: int

    def describe(self) -> str:
        return f"{'pointer' if self.pointer else 'scalar'} of {self.size} bytes"


def arg_size(arg_type: str) -> int:
    return 8 if arg_type.startswith("*") else SCALAR_BYTES.get(arg_type, 0)


def passed_params(kernel: KernelEntry, metadata: dict) -> list[Passed]:
    """What the launcher passes the binary: the kernel's runtime arguments packed by arg_types, then the
    scratch pointers the binary's Triton appends."""
    out = [Passed(f"#{i} ({t})", t.startswith("*"), arg_size(t)) for i, t in enumerate(kernel.arg_types)]
    out += [Passed(name, True, 8) for key, name in SCRATCH_PARAMS if key in metadata]
    return out


def check_entry(kernel: str, target: str, passed: list[Passed], params: list[Param]) -> list[AbiProblem]:
    """The launch's parameters against the binary's entry: count, order, pointer or scalar, width."""
    problems = []
    for i in range(max(len(passed), len(params))):
        p = passed[i] if i < len(passed) else None
        b = params[i] if i < len(params) else None
        label = f"{i}" + (f" ({p.name})" if p else "")
        if p is None:
            problems.append(AbiProblem(kernel, target, label, f"the binary takes a {b.describe()} the launch "
                                                              f"does not pass"))
        elif b is None:
            problems.append(AbiProblem(kernel, target, label, f"the launch passes a {p.describe()} the binary "
                                                              f"does not take"))
        elif (p.pointer, p.size) != (b.pointer, b.size):
            problems.append(AbiProblem(kernel, target, label, f"the launch passes a {p.describe()}, the binary "
                                                              f"takes a {b.describe()}"))
    return problems


def check_launch(kernel: KernelEntry, launch: Launch, symbols: dict[str, list[int]]) -> list[AbiProblem]:
    """A schedule step against its kernel's arg_types: buffers where pointers go, i32 symbols where scalars go."""
    where = f"step {launch.step}"
    passed = [(a, True) for a in launch.args] + [(s, False) for s in launch.scalars]
    problems = []
    for i in range(max(len(passed), len(kernel.arg_types))):
        name, pointer = passed[i] if i < len(passed) else ("-", False)
        t = kernel.arg_types[i] if i < len(kernel.arg_types) else None
        label = f"{i} ({name})"
        if t is None:
            problems.append(AbiProblem(kernel.name, where, label, "passed, but the kernel has no such parameter"))
        elif i >= len(passed):
            problems.append(AbiProblem(kernel.name, where, f"{i} ({t})", "the kernel takes it, the launch does "
                                                                        "not pass it"))
        elif pointer != t.startswith("*"):
            what = "a buffer (pointer)" if pointer else "a scalar"
            problems.append(AbiProblem(kernel.name, where, label, f"the launch passes {what}, the kernel's "
                                                                  f"arg_types say {t}"))
        elif not pointer and t != "i32":
            problems.append(AbiProblem(kernel.name, where, label, f"a symbol's value is passed as i32, the "
                                                                  f"kernel's arg_types say {t}"))
        elif not pointer and symbols.get(name, [0, 0])[1] > I32_MAX:
            problems.append(AbiProblem(kernel.name, where, label, f"symbol '{name}' reaches "
                                                                  f"{symbols[name][1]}, past i32"))
    return problems


def symbol_extremes(symbols: dict[str, list[int]]) -> list[dict[str, int]]:
    """The symbols all at the bottom and all at the top of their ranges (grids grow with the symbols)."""
    return [{s: r[0] for s, r in symbols.items()}, {s: r[1] for s, r in symbols.items()}]


def check_grid(kernel: str, target: Target, grid: list, symbols: dict[str, list[int]]) -> list[AbiProblem]:
    problems = []
    for env in symbol_extremes(symbols):
        for axis, (g, limit) in enumerate(zip(grid, target.grid_limits)):
            missing = [s for s in size_symbols(g) if s not in env]
            if missing:
                problems.append(AbiProblem(kernel, target.name, f"grid[{axis}]", f"'{g}' uses unknown symbols "
                                                                                 f"{missing}"))
                continue
            try:
                n = eval_size(g, env)
            except SizeError as e:
                problems.append(AbiProblem(kernel, target.name, f"grid[{axis}]", str(e)))
                continue
            at = f" at {env}" if env else ""
            if n > limit:
                problems.append(AbiProblem(kernel, target.name, f"grid[{axis}]",
                                           f"'{g}' is {n}{at}, past the target's limit {limit}"))
            elif n < 1:
                problems.append(AbiProblem(kernel, target.name, f"grid[{axis}]", f"'{g}' is {n}{at}"))
    return problems


def check_bundle(bundle: str | Path, manifest: Manifest | None = None,
                 targets: Iterable[str] | None = None) -> list[AbiProblem]:
    """Every problem of a bundle's launch ABI: each launch against its kernel's arg_types, each kernel's
    parameters against each target's binary, each grid against each target's limits. [] when sound."""
    bundle = Path(bundle)
    manifest = manifest or load_manifest(bundle)
    kernels = {k.name: k for k in manifest.kernels}
    problems: list[AbiProblem] = []
    for launch in manifest.schedule:
        kernel = kernels.get(launch.kernel)
        if kernel is None:
            problems.append(AbiProblem(launch.kernel, f"step {launch.step}", "-", "no such kernel in the bundle"))
        else:
            problems += check_launch(kernel, launch, manifest.symbols)
    wanted = set(targets) if targets is not None else None
    for kernel in manifest.kernels:
        for target, entry in sorted(kernel.binaries.items()):
            if wanted is not None and target not in wanted:
                continue
            metadata = json.loads((bundle / entry.metadata).read_text())
            facts = bundle_facts(bundle, kernel, target, disassemble=False)
            problems += check_entry(kernel.name, target, passed_params(kernel, metadata), facts.params)
            # the grid the runtime launches this binary with: its config's, else each launch's (older bundles)
            grids = [entry.config.grid] if entry.config else [s.grid for s in manifest.schedule
                                                              if s.kernel == kernel.name]
            for grid in grids:
                problems += check_grid(kernel.name, parse_target(target), grid, manifest.symbols)
    return problems
