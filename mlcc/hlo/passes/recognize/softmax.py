"""Softmax and log-softmax from exp, max and sum over one dim.

    e = exp(x - max(x, d))        softmax:      e / sum(e, d)      (or e * (1 / sum(e, d)))
                                  log-softmax:  (x - max) - log(sum(e, d))

with the reductions broadcast back keepdims-style (JAX, tf, older ONNX exports).
The form without the max subtraction is the same function, computed less safely.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Module, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, op, var
from mlcc.hlo.passes.recognize.common import Step, keepdims_aligned, walk


def _row_reduce(value: Instruction, kind: str, rank: int, module: Module | None,
                steps: list[Step]) -> tuple[Instruction, int] | None:
    """(source, dim) when value == reduce(source, {dim}, kind) (after ``steps``), broadcast back keepdims-style."""
    base, pos, found = walk(value, module)
    found = [s for s in found if s != Step("max", float("-inf"))]  # max(-inf, m) is m (JAX writes it)
    if found != steps or base.opcode != "reduce" or base.attrs["kind"] != kind:
        return None
    dims = base.attrs["dimensions"]
    if len(dims) != 1 or value.shape.rank != rank or not keepdims_aligned(pos, rank, dims):
        return None
    return base.operands[0], dims[0]


def _shifted(z: Instruction, module: Module | None) -> tuple[Instruction, int | None]:
    """(x, d) when z == x - max(x, d); else (z, None): z itself is the softmax input."""
    if z.opcode == "subtract":
        found = _row_reduce(z.operands[1], "maximum", z.shape.rank, module, [])
        if found is not None and found[0] is z.operands[0]:
            return z.operands[0], found[1]
    return z, None


def _softmax(rw: Rewriter, m: Match) -> Instruction | None:
    root, e = m.root, m.e
    if not is_float(root.shape.dtype):
        return None
    if root.opcode == "divide":
        total = _row_reduce(m.s, "add", root.shape.rank, rw.module, [])
    else:
        total = _row_reduce(m.s, "add", root.shape.rank, rw.module, [Step("reciprocal")])
    if total is None or total[0] is not e:
        return None
    x, d = _shifted(e.operands[0], rw.module)
    if d is not None and d != total[1]:
        return None
    return rw.op("softmax", [x], dimension=total[1])


def _log_softmax(rw: Rewriter, m: Match) -> Instruction | None:
    z = m.z
    if not is_float(z.shape.dtype):
        return None
    found = _row_reduce(m.s, "add", z.shape.rank, rw.module, [Step("log")])
    if found is None or found[0].opcode != "exp" or found[0].operands[0] is not z:
        return None
    x, d = _shifted(z, rw.module)
    if d is not None and d != found[1]:
        return None
    return rw.op("softmax", [x], dimension=found[1], log=True)


RULES = [
    Rule("softmax", op("divide", op("exp", name="e"), var("s")), _softmax),
    Rule("softmax", op("multiply", op("exp", name="e"), var("s")), _softmax),
    Rule("log-softmax", op("subtract", var("z"), var("s")), _log_softmax),
]


class RecognizeSoftmax(RewritePass):
    def __init__(self) -> None:
        super().__init__("recognize-softmax", RULES)
