"""The tuning database: launch configs measured on GPUs, by kernel signature and target.

A YAML file (read with yaml.safe_load, written with sorted keys so it diffs well):

    version: 1
    kernels:
      3f9c...e1:                      # the kernel's signature (manifest.json: kernels[i].signature)
        template: matmul.py.jinja     # the template and source ops, for the humans reading it
        ops: [node_gelu, node_linear]
        targets:
          sm_90:
            constexprs: {BLOCK_K: 32, BLOCK_M: 64, BLOCK_N: 128, GROUP_M: 8}
            num_warps: 4
            num_stages: 4
            median_us: 12.5           # what `mlcc tune` measured (optional)

`mlcc tune` writes it; `mlcc compile --tuning-db FILE` launches a kernel on a target with the entry
for its (signature, target), the grid recomputed from the tiles, and falls back to the target's
heuristic where there is none (configure_targets). A signature hashes the kernel's code and problem, never its launch
config (mlcc/emit/codegen/lower_module.py), so entries survive changes to the heuristics. Every entry is
checked when the file is read (types, names, powers of two; templates and constexprs against the
tilings the reader passes, mlcc/emit/codegen/lower_module.tilings()) and again against its kernel when used
(the problem's constraints, the target's shared memory): a bad one is exit 65 naming the file and
the entry. Target names are parsed once, when read, by the one parse function (parse_target).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from mlcc.atomic import write_file_atomic
from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.emit.target.targets import Target, TargetError, parse_target
from mlcc.emit.tiling import TILINGS, Tiling, tuned_config
from mlcc.errors import InputMissingError, InvalidInputError

DB_VERSION = 1
_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")
_KERNEL_KEYS = ("ops", "targets", "template")
_ENTRY_KEYS = ("constexprs", "median_us", "num_warps", "num_stages")
MAX_STAGES = 16


@dataclass(frozen=True)
class TunedConfig:
    """One (kernel, target) entry: the tiles, warps and stages; the grid follows from them."""
    constexprs: dict[str, int]
    num_warps: int
    num_stages: int
    median_us: float | None = None

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"constexprs": dict(sorted(self.constexprs.items())), "num_warps": self.num_warps,
                               "num_stages": self.num_stages}
        if self.median_us is not None:
            out["median_us"] = round(float(self.median_us), 2)
        return out


@dataclass
class TunedKernel:
    template: str
    ops: list[str]
    targets: dict[str, TunedConfig] = field(default_factory=dict)


@dataclass
class TuningDb:
    path: str | None = None
    kernels: dict[str, TunedKernel] = field(default_factory=dict)

    def lookup(self, signature: str, target: Target) -> TunedConfig | None:
        kernel = self.kernels.get(signature)
        return None if kernel is None else kernel.targets.get(target.name)

    @staticmethod
    def entry_name(signature: str, target: str) -> str:
        return f"kernels.{signature}.targets.{target}"

    def record(self, signature: str, template: str, ops: list[str], target: Target, config: TunedConfig) -> None:
        """Set the entry of (signature, target); the kernel's other targets and other kernels stay."""
        kernel = self.kernels.setdefault(signature, TunedKernel(template, sorted(ops)))
        kernel.template, kernel.ops = template, sorted(set(kernel.ops) | set(ops))
        kernel.targets[target.name] = config

    def to_yaml(self) -> str:
        data = {"version": DB_VERSION, "kernels": {
            sig: {"template": k.template, "ops": list(k.ops),
                  "targets": {t: c.to_yaml() for t, c in sorted(k.targets.items())}}
            for sig, k in sorted(self.kernels.items())}}
        header = "# mlcc tuning database: launch configs by kernel signature and target (written by `mlcc tune`)\n"
        return header + yaml.safe_dump(data, sort_keys=True, default_flow_style=False)


def load_tuning_db(path: str | Path, tilings: Mapping[str, Tiling]) -> TuningDb:
    """Read and check a tuning database against tilings (every template's, by name: lower_module.tilings());
    InputMissingError (66) or InvalidInputError (65) naming it."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise InputMissingError("no such tuning database", file=path) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"cannot read the tuning database ({e})", file=path) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidInputError(f"not valid YAML ({str(e).splitlines()[0]})", file=path) from None
    return parse_tuning_db(data, path, tilings)


def parse_tuning_db(data: Any, path: str, tilings: Mapping[str, Tiling]) -> TuningDb:
    def bad(where: str, why: str) -> InvalidInputError:
        return InvalidInputError(f"{where}: {why}" if where else why, file=path)

    db = TuningDb(path)
    if data is None:
        return db
    if not isinstance(data, dict) or set(data) - {"version", "kernels"}:
        raise bad("", "a tuning database is a mapping with keys 'version' and 'kernels'")
    if data.get("version") != DB_VERSION:
        raise bad("version", f"expected {DB_VERSION}, got {data.get('version')!r}")
    kernels = data.get("kernels") or {}
    if not isinstance(kernels, dict):
        raise bad("kernels", "expected a mapping of kernel signatures to entries")
    for signature, kernel in kernels.items():
        where = f"kernels.{signature}"
        if not isinstance(signature, str) or not _SIGNATURE.match(signature):
            raise bad(where, "a signature is 64 lowercase hex digits (manifest.json: kernels[i].signature)")
        db.kernels[signature] = _parse_kernel(kernel, where, tilings, bad)
    return db


def _parse_kernel(kernel: Any, where: str, table: Mapping[str, Tiling], bad) -> TunedKernel:
    if not isinstance(kernel, dict):
        raise bad(where, "expected a mapping with 'template', 'ops' and 'targets'")
    unknown = sorted(set(map(str, kernel)) - set(_KERNEL_KEYS))
    if unknown:
        raise bad(where, f"unknown key {', '.join(unknown)} (known: {', '.join(_KERNEL_KEYS)})")
    template = kernel.get("template")
    tunable = sorted(name for name, t in table.items() if t.candidates is not None)
    if template not in tunable:
        raise bad(where, f"template {template!r} is not a tunable template ({', '.join(tunable)})")
    ops = kernel.get("ops", [])
    if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
        raise bad(where, "ops must be a list of node names")
    targets = kernel.get("targets")
    if not isinstance(targets, dict) or not targets:
        raise bad(where, "expected 'targets': a mapping of target names to configs")
    out = TunedKernel(template, sorted(ops))
    names = set(table[template].tunable) | set(table[template].fixed)
    for target, entry in targets.items():
        out.targets[_target_name(target, f"{where}.targets.{target}", bad)] = _parse_entry(
            entry, f"{where}.targets.{target}", names, bad)
    return out


def _target_name(target: Any, where: str, bad) -> str:
    if not isinstance(target, str):
        raise bad(where, "a target is a name such as sm_90 or gfx942")
    try:
        return parse_target(target).name
    except TargetError as e:
        raise bad(where, str(e)) from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_entry(entry: Any, where: str, names: set[str], bad) -> TunedConfig:
    if not isinstance(entry, dict):
        raise bad(where, "expected a mapping with 'constexprs', 'num_warps' and 'num_stages'")
    unknown = sorted(set(map(str, entry)) - set(_ENTRY_KEYS))
    missing = sorted({"constexprs", "num_warps", "num_stages"} - set(entry))
    if unknown or missing:
        raise bad(where, f"unknown key {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}")
    constexprs = entry["constexprs"]
    if not isinstance(constexprs, dict) or not constexprs:
        raise bad(where, "constexprs must be a mapping of names to integers")
    for name, value in constexprs.items():
        if name not in names:
            raise bad(where, f"unknown constexpr {name!r} (known: {', '.join(sorted(names))})")
        if not _is_int(value):
            raise bad(where, f"constexpr {name} must be an integer, not {value!r}")
        if name.startswith("BLOCK_") and (value < 1 or value & (value - 1)):
            raise bad(where, f"constexpr {name} must be a power of two, not {value}")
    warps, stages = entry["num_warps"], entry["num_stages"]
    if not _is_int(warps) or warps < 1 or warps > 32 or warps & (warps - 1):
        raise bad(where, f"num_warps must be a power of two from 1 to 32, not {warps!r}")
    if not _is_int(stages) or not 1 <= stages <= MAX_STAGES:
        raise bad(where, f"num_stages must be an integer from 1 to {MAX_STAGES}, not {stages!r}")
    median = entry.get("median_us")
    if median is not None and (isinstance(median, bool) or not isinstance(median, (int, float)) or median < 0):
        raise bad(where, f"median_us must be a non-negative number, not {median!r}")
    return TunedConfig(dict(constexprs), warps, stages, None if median is None else float(median))


def write_tuning_db(db: TuningDb, path: str | Path) -> None:
    write_file_atomic(Path(path), db.to_yaml())


def configure_targets(kernel: Kernel, targets: Sequence[Target], tuning: TuningDb | None = None) -> None:
    """Fill kernel.targets with each target's config where it differs from kernel.gpu: the tuning
    database's entry for (signature, target) if there is one, else the target's heuristic. The kernel's
    lowering registered its template's tiling in TILINGS when it was imported, so no table is passed here."""
    t = TILINGS.get(kernel.template)
    if t is None:
        return
    for target in targets:
        entry = tuning.lookup(kernel.signature, target) if tuning is not None else None
        if entry is None:
            config = t.heuristic(kernel.extra["problem"], target)
        else:
            config = _entry_config(kernel, target, tuning, entry)
            kernel.tuned.append(target.name)
        if config != kernel.gpu:
            kernel.targets[target.name] = config


def _entry_config(kernel: Kernel, target: Target, tuning: TuningDb, entry: TunedConfig) -> LaunchConfig:
    """The config of kernel's tuning entry for target; InvalidInputError (65) naming the file and the
    entry if the kernel cannot take it."""
    template = tuning.kernels[kernel.signature].template
    try:
        if template != kernel.template:
            raise ValueError(f"the entry is for a {template} kernel, this one is {kernel.template}")
        return tuned_config(kernel, target, entry.constexprs, entry.num_warps, entry.num_stages)
    except ValueError as e:
        raise InvalidInputError(f"{tuning.entry_name(kernel.signature, target.name)}: {e}",
                                file=tuning.path) from None
