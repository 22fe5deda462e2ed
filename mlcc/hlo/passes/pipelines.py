"""The default optimization pipeline, in order: simplify, legalize, then views."""

from __future__ import annotations

from mlcc.hlo.passes.cse import CommonSubexpressionElimination
from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.output_copies import OutputCopies
from mlcc.hlo.passes.pass_manager import FixedPoint, Pipeline
from mlcc.hlo.passes.reshape_to_bitcast import ReshapeToBitcast
from mlcc.hlo.passes.splat_to_broadcast import SplatToBroadcast


def default_pipeline() -> Pipeline:
    return Pipeline("optimize", [
        FixedPoint("cleanup", [DeadCodeElimination(), CommonSubexpressionElimination()]),
        SplatToBroadcast(),
        ReshapeToBitcast(),
        OutputCopies(),
        DeadCodeElimination(),
    ])


def pass_names() -> list[str]:
    names: list[str] = []

    def walk(passes) -> None:
        for p in passes:
            if isinstance(p, FixedPoint):
                walk(p.passes)
            elif p.name not in names:
                names.append(p.name)
    walk(default_pipeline().passes)
    return names
