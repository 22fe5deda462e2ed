"""Sigmoid and SiLU (Swish) from exp.

    1 / (1 + exp(-x))  ->  logistic(x)        x / (1 + exp(-x))  ->  x * logistic(x)

The IR has no silu opcode: SiLU stays ``multiply(x, logistic(x))``, which fusion
turns into one kernel; what this pass does is give every spelling that form.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Module, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, match, op, scalar, var
from mlcc.hlo.passes.recognize.common import flatten_product


def _negated(v: Instruction, module: Module | None) -> Instruction | None:
    """x when v == -x (negate, or a product with -1)."""
    if v.opcode == "negate":
        return v.operands[0]
    p = flatten_product(v, module)
    if len(p.numerators) == 1 and not p.denominators and p.coefficient == -1:
        return p.numerators[0]
    return None


def _sigmoid_argument(denominator: Instruction, module: Module | None) -> Instruction | None:
    """x when denominator == 1 + exp(-x)."""
    m = match(op("add", scalar(value=1), op("exp", var("e"))), denominator, module)
    return None if m is None else _negated(m.e, module)


def _logistic(rw: Rewriter, m: Match) -> Instruction | None:
    if not is_float(m.root.shape.dtype):
        return None
    x = _sigmoid_argument(m.d, rw.module)
    return None if x is None else rw.op("logistic", [x])


def _silu(rw: Rewriter, m: Match) -> Instruction | None:
    if not is_float(m.root.shape.dtype):
        return None
    x = _sigmoid_argument(m.d, rw.module)
    if x is None or x is not m.x:
        return None
    return rw.op("multiply", [x, rw.op("logistic", [x])])


RULES = [
    Rule("sigmoid", op("reciprocal", var("d")), _logistic),
    Rule("sigmoid", op("divide", scalar(value=1), var("d")), _logistic),
    Rule("silu", op("divide", var("x"), var("d")), _silu),
]


class RecognizeSilu(RewritePass):
    def __init__(self) -> None:
        super().__init__("recognize-silu", RULES)
