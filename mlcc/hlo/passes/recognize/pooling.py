"""Average pooling from a window sum divided by the window size (JAX's ``avg_pool``).

    reduce-window(x, add) * (1 / prod(window))  ->  reduce-window(x, avg)

Padding, where there is any, counts: x / prod(window) is avg with count_include_pad.
"""

from __future__ import annotations

import math

from mlcc.hlo.ir import Instruction, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, op, scalar
from mlcc.hlo.passes.recognize.common import near


def _average(rw: Rewriter, m: Match) -> Instruction | None:
    window_sum = m.sum
    if not is_float(window_sum.shape.dtype) or window_sum.attrs["kind"] != "add":
        return None
    count = math.prod(window_sum.attrs["window_dimensions"])
    if not near(m.c, 1.0 / count, window_sum.shape.dtype):
        return None
    attrs = dict(window_sum.attrs, kind="avg")
    if any(window_sum.attrs["padding_low"]) or any(window_sum.attrs["padding_high"]):
        attrs["count_include_pad"] = True
    return rw.op("reduce-window", window_sum.operands, **attrs)


RULES = [Rule("avg-pool", op("multiply", op("reduce-window", name="sum", one_use=True), scalar("c")), _average)]


class RecognizePooling(RewritePass):
    def __init__(self) -> None:
        super().__init__("recognize-pooling", RULES)
