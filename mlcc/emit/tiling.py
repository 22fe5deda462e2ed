"""Launch configs per GPU target: the tile heuristics' registry, and the checks every config passes.

A lowering picks `Kernel.gpu`, a config every GPU can run. For a template registered here the
best config also depends on the target (shared memory, warp width, SM count: the Target record,
mlcc/emit/target/targets.py), so each target's config is asked of the template's Tiling (the
heuristic, or a tuning-database entry: mlcc/emit/target/tuning_db.configure_targets) and the ones
that differ are kept in `Kernel.targets`. A Tiling is what a lowering module knows about its tiles:
- heuristic(problem, target): the config for a target when the tuning database has no entry;
- config(problem, constexprs, num_warps, num_stages): the config of given tiles, its grid computed
  the way the heuristic computes it, so a tuning entry needs only tiles, warps and stages;
- resources(problem, config, warp_size): the shared memory and registers per thread it needs: the
  heuristics, tuning entries and `mlcc tune`'s candidates stay within the target's shared memory
  (a hard limit), and the candidates within its registers too (past them a kernel spills: slow);
- candidates(problem, target): the configs `mlcc tune` times (a template without them is not tunable);
- check(problem, constexprs): why tiles cannot compute this problem correctly, or None;
- tunable and fixed: the constexprs a tuning entry sets, and those that follow from the problem.
The problem is the dict of dims and dtype a lowering stores in ``Kernel.extra["problem"]``.

The registry stays beside the lowerings that fill it (code generation); the targets it reads are data.
It imports nothing from the tuning database: the database reads it, not the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.emit.target.targets import Target


class Resources(NamedTuple):
    shared_bytes: int   # shared memory (LDS) one program allocates, estimated
    registers: int      # 32-bit registers per thread for its tiles, estimated


def _any_problem(problem: dict) -> bool:
    return True


def _no_check(problem: dict, constexprs: dict[str, int]) -> str | None:
    return None


@dataclass(frozen=True)
class Tiling:
    heuristic: Callable[[dict, Target], LaunchConfig]
    tunable: tuple[str, ...] = ()      # the constexprs a tuning entry sets
    fixed: tuple[str, ...] = ()        # constexprs that follow from the problem (an entry may repeat them)
    config: Callable[[dict, dict[str, int], int, int], LaunchConfig] | None = None
    resources: Callable[[dict, LaunchConfig, int], Resources] | None = None
    candidates: Callable[[dict, Target], list[LaunchConfig]] | None = None
    check: Callable[[dict, dict[str, int]], str | None] = _no_check
    tunes: Callable[[dict], bool] = _any_problem   # whether a problem is tunable (integer matmuls are not)

    def is_tunable(self, problem: dict) -> bool:
        return self.candidates is not None and self.tunes(problem)


TILINGS: dict[str, Tiling] = {}


def register_tiling(tiling: Tiling, *templates: str) -> Tiling:
    """Register how the kernels of templates pick their launch configs per target."""
    for template in templates:
        if template in TILINGS:
            raise ValueError(f"two tilings for {template}")
        TILINGS[template] = tiling
    return tiling


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def tunable(kernel: Kernel) -> bool:
    t = TILINGS.get(kernel.template)
    return t is not None and t.is_tunable(kernel.extra["problem"])


def fits(kernel: Kernel, config: LaunchConfig, target: Target) -> str | None:
    """Why config cannot run on target's GPU (too many threads, too much shared memory), or None. The
    shared-memory estimate is conservative (Triton buffers one stage fewer), so nothing that passes fails
    to launch for want of it."""
    t = TILINGS[kernel.template]
    if config.num_warps > target.max_warps:
        return f"{config.num_warps} warps of {target.warp_size} lanes exceed 1024 threads"
    if t.resources is None:
        return None
    need = t.resources(kernel.extra["problem"], config, target.warp_size)
    if need.shared_bytes > target.shared_bytes:
        return (f"needs about {need.shared_bytes // 1024} KiB of shared memory, "
                f"{target.name} has {target.shared_bytes // 1024} KiB")
    return None


def spills(kernel: Kernel, config: LaunchConfig, target: Target) -> bool:
    """Whether config's tiles likely need more registers per thread than target has (they would spill: slow,
    not wrong, so only `mlcc tune` skips such candidates)."""
    t = TILINGS[kernel.template]
    return t.resources is not None and t.resources(kernel.extra["problem"], config, target.warp_size).registers > \
        target.registers


def tuning_candidates(kernel: Kernel, target: Target) -> list[LaunchConfig]:
    """What `mlcc tune` times for kernel on target: the heuristic's config first, then every candidate
    that fits the target without spilling, each once."""
    t = TILINGS[kernel.template]
    problem = kernel.extra["problem"]
    found = [t.heuristic(problem, target)]
    for c in t.candidates(problem, target) if t.is_tunable(problem) else []:
        if c not in found and t.check(problem, c.constexprs) is None and fits(kernel, c, target) is None \
                and not spills(kernel, c, target):
            found.append(c)
    return found


def tuned_config(kernel: Kernel, target: Target, constexprs: dict[str, int], num_warps: int,
                 num_stages: int) -> LaunchConfig:
    """kernel's config from a tuning entry's tiles; ValueError says why they do not fit it."""
    t = TILINGS[kernel.template]
    if not t.is_tunable(kernel.extra["problem"]):
        raise ValueError(f"this {kernel.template} kernel is not tunable")
    problem = kernel.extra["problem"]
    missing = sorted(set(t.tunable) - set(constexprs))
    if missing:
        raise ValueError(f"missing constexpr {', '.join(missing)} (a {kernel.template} kernel tunes "
                         f"{', '.join(t.tunable)})")
    tiles = {name: constexprs[name] for name in t.tunable}
    config = t.config(problem, tiles, num_warps, num_stages)
    for name, value in sorted(constexprs.items()):
        if name not in config.constexprs:
            raise ValueError(f"unknown constexpr {name} (a {kernel.template} kernel tunes {', '.join(t.tunable)})")
        if config.constexprs[name] != value:
            raise ValueError(f"{name} is {config.constexprs[name]} for this kernel's problem, not {value}")
    why = t.check(problem, tiles) or fits(kernel, config, target)
    if why:
        raise ValueError(why)
    return config


def untuned(kernels: Sequence[Kernel], targets: Sequence[Target]) -> list[tuple[Kernel, Target]]:
    """Every (tunable kernel, target) without a tuning-database entry."""
    return [(k, t) for k in kernels if tunable(k) for t in targets if t.name not in k.tuned]
