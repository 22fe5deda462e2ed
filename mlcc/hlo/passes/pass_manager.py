"""Pass and Pipeline, in the spirit of XLA's HloPassPipeline.

The verifier runs after every pass that changed the module; a failure names the
pass and the passes run before it. Fixed-point groups repeat until nothing changes.
A Phase is a named group that requires module properties, records the ones it
guarantees when it ends (the verifier's level rises with them), and is skipped
when the module already is past it (IR text read back from a bundle).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Sequence

from mlcc.errors import InternalError
from mlcc.hlo.ir import Module, Property
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import VerifierError, verify_module


class Pass:
    name = "pass"

    def run(self, module: Module) -> bool:  # True if the module changed
        raise NotImplementedError(f"pass {self.name} has no run()")


class FunctionPass(Pass):
    """A tiny pass from a plain function, like onnx-ir's pass_fn."""

    def __init__(self, name: str, fn: Callable[[Module], bool]) -> None:
        self.name = name
        self._fn = fn

    def run(self, module: Module) -> bool:
        return self._fn(module)


@dataclass
class PassRecord:
    name: str
    seconds: float
    changed: bool
    instructions: int


@dataclass
class PipelineOptions:
    dump_dir: Path | None = None
    disabled: frozenset[str] = frozenset()
    verify: bool = True
    max_iterations: int = 16
    on_pass: Callable[[str, int], None] | None = None  # told each pass's name as it starts, and how many ran before


class Pipeline(Pass):
    """Runs passes in order; a nested FixedPoint group repeats until no pass changes anything."""

    def __init__(self, name: str, passes: Sequence[Pass]) -> None:
        self.name = name
        self.passes = list(passes)
        self.records: list[PassRecord] = []

    def run(self, module: Module, options: PipelineOptions | None = None) -> bool:  # type: ignore[override]
        options = options or PipelineOptions()
        self._history: list[str] = []
        self._dump_index = 0
        done = done_phases(self.passes, module.properties)
        self.skipped = [p.name for p in done]
        if options.dump_dir is not None:
            options.dump_dir.mkdir(parents=True, exist_ok=True)
            self._dump(module, "input", options)
        return self._run_list(module, [p for p in self.passes if p not in done], options)

    def _run_list(self, module: Module, passes: Sequence[Pass], options: PipelineOptions) -> bool:
        changed_any = False
        for p in passes:
            if isinstance(p, Phase):
                missing = [q.value for q in Property if q in p.requires - module.properties]
                if missing:
                    raise InternalError(f"phase {p.name} requires {', '.join(missing)} (passes run before: "
                                        f"{', '.join(self._history) or 'none'})")
                changed = self._run_list(module, p.passes, options)
                changed_any |= changed
                if not p.guarantees <= module.properties:
                    module.properties |= p.guarantees
                    if options.verify:  # the new properties raise the verifier's level
                        self._verify(module, p.name, "phase")
                continue
            if isinstance(p, FixedPoint):
                for _ in range(options.max_iterations):
                    if not self._run_list(module, p.passes, options):
                        break
                    changed_any = True
                continue
            if p.name in options.disabled:
                continue
            if options.on_pass is not None:
                options.on_pass(p.name, len(self.records))
            start = time.perf_counter()
            changed = bool(p.run(module))
            elapsed = time.perf_counter() - start
            self._history.append(p.name)
            self.records.append(PassRecord(p.name, elapsed, changed, sum(1 for _ in module.all_instructions())))
            if changed:
                changed_any = True
                if options.verify:
                    self._verify(module, p.name)
                if options.dump_dir is not None:
                    self._dump(module, p.name, options)
        return changed_any

    def _verify(self, module: Module, after: str, kind: str = "pass") -> None:
        try:
            verify_module(module)
        except VerifierError as e:
            before = ", ".join(self._history[:-1] if kind == "pass" else self._history) or "none"
            raise InternalError(f"invalid IR after {kind} {after} (passes run before: {before}): {e}") from e

    def _dump(self, module: Module, pass_name: str, options: PipelineOptions) -> None:
        assert options.dump_dir is not None
        path = options.dump_dir / f"{self._dump_index:02d}-{pass_name}.hlo"
        path.write_text(format_module(module))
        self._dump_index += 1


class FixedPoint(Pass):
    """A group of passes that the pipeline repeats until none of them changes the module."""

    def __init__(self, name: str, passes: Sequence[Pass]) -> None:
        self.name = name
        self.passes = list(passes)


class Phase(Pass):
    """A named stage of the pipeline: its passes run in order once the module has every property in
    requires; when they are done the module has every property in guarantees. essential names the passes
    the guarantees rest on: --disable-pass refuses them while a later phase requires what they establish."""

    def __init__(self, name: str, passes: Sequence[Pass], requires: frozenset[Property] = frozenset(),
                 guarantees: frozenset[Property] = frozenset(), essential: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.passes = list(passes)
        self.requires = requires
        self.guarantees = guarantees
        self.essential = essential


def done_phases(passes: Collection[Pass], properties: Collection[Property]) -> list[Phase]:
    """The phases a module with properties is already past: every phase up to the last one whose
    guarantees it has (a module read back from text skips what its header shows was done)."""
    phases = [p for p in passes if isinstance(p, Phase)]
    last = max((i for i, p in enumerate(phases) if p.guarantees and p.guarantees <= set(properties)), default=-1)
    return phases[:last + 1]
