"""Algebraic simplification: named local rewrites, grouped by the ops they touch.

The groups (arith, reshape, transpose, convert) are rule tables; the pass applies all
of them until none fires, like XLA's AlgebraicSimplifier split into readable parts.
"""

from __future__ import annotations

from mlcc.hlo.passes.algsimp import arith, convert, reshape, transpose
from mlcc.hlo.passes.pattern import RewritePass

RULES = [*arith.RULES, *reshape.RULES, *transpose.RULES, *convert.RULES]


class AlgebraicSimplifier(RewritePass):
    def __init__(self) -> None:
        super().__init__("algsimp", RULES)
