"""mlcc opt: named passes over IR text, verified after each one that changes it, IR text out.

Any bug a bundle shows can be reproduced from its model.hlo: run the passes one
at a time, read the text between them, cut the module down by hand.
"""

from __future__ import annotations

from pathlib import Path

from mlcc.errors import UnsupportedError
from mlcc.frontend.hlo_text import import_hlo_text
from mlcc.hlo.ir import Module, Property
from mlcc.hlo.passes.pass_manager import Phase, Pipeline, PipelineOptions
from mlcc.hlo.printer import format_module
from mlcc.pipeline import named_passes


def optimize(path: Path, passes: list[str], precision: str = "fp32", io_layout: str = "row-major",
             dump_dir: Path | None = None) -> tuple[Module, Pipeline]:
    """The module in path after the named passes (or phases) ran over it, in order."""
    module = import_hlo_text(path, require_weights=False)
    chosen = named_passes(passes, precision, io_layout)
    have = set(module.properties)
    for p in chosen:  # a phase needs what earlier phases establish: say so before running anything
        if isinstance(p, Phase):
            missing = [q.value for q in Property if q in p.requires - have]
            if missing:
                raise UnsupportedError(f"phase {p.name} requires {', '.join(missing)}: run the phases that establish "
                                       f"it first (mlcc/pipeline.py), or start from IR text whose header has it")
            have |= p.guarantees
    pipeline = Pipeline("opt", chosen)
    pipeline.run(module, PipelineOptions(dump_dir=dump_dir))
    return module, pipeline


def optimized_text(path: Path, passes: list[str], **kwargs) -> str:
    return format_module(optimize(path, passes, **kwargs)[0])
