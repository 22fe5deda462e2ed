"""Arithmetic identities: x*1, x+0, x-0, x/1, x/c -> x*(1/c), --x, powers, selects, copies;
max(x, 0) is relu."""

from __future__ import annotations

import numpy as np

from mlcc.hlo.ir import Instruction, is_float, is_int
from mlcc.hlo.passes.pattern import Match, Rewriter, Rule, constant_array, op, scalar, scalar_value, var


def _float(inst: Instruction) -> bool:
    return is_float(inst.shape.dtype)


def _identity(rw: Rewriter, m: Match) -> Instruction:
    return m.x


def _divide_by_constant(rw: Rewriter, m: Match) -> Instruction | None:
    """x / c -> x * (1/c) for a float constant c; 1/c is computed in f64 and rounded once."""
    x, c = m.x, m.c
    if not _float(x):
        return None
    value = scalar_value(c, rw.module)
    data = np.float64(value) if value is not None else constant_array(c, rw.module)
    if data is None:
        return None
    with np.errstate(divide="ignore"):  # x / 0 is x * inf
        recip = 1.0 / np.asarray(data, np.float64)
    if value is not None:
        return rw.op("multiply", [x, rw.constant(recip, c.shape.dtype, c.shape.dims)])
    return rw.op("multiply", [x, rw.constant(recip, c.shape.dtype)])


def _power(exponent: float):
    def rewrite(rw: Rewriter, m: Match) -> Instruction | None:
        x = m.x
        if not _float(x):
            return None
        if exponent == 1:
            return x
        if exponent == 2:
            return rw.op("multiply", [x, x])
        if exponent == 3:
            return rw.op("multiply", [rw.op("multiply", [x, x]), x])
        if exponent == 0.5:
            return rw.op("sqrt", [x])
        if exponent == -0.5:
            return rw.op("rsqrt", [x])
        if exponent == -1:
            return rw.op("reciprocal", [x])
        raise AssertionError(exponent)
    return rewrite


def _select_constant(rw: Rewriter, m: Match) -> Instruction:
    return m.a if m.p else m.b


def _pred(inst: Instruction) -> bool:
    return inst.shape.dtype == "pred"


def _recip_sqrt(rw: Rewriter, m: Match) -> Instruction | None:
    return rw.op("rsqrt", [m.x]) if _float(m.x) else None


def _one_over(rw: Rewriter, m: Match) -> Instruction | None:
    return rw.op("reciprocal", [m.x]) if _float(m.x) else None


def _copy_of_copy(rw: Rewriter, m: Match) -> Instruction:
    return rw.op("copy", [m.x])


def _only_float(rewrite):
    def guarded(rw: Rewriter, m: Match) -> Instruction | None:
        return rewrite(rw, m) if _float(m.root) else None
    return guarded


def _not_pred(rw: Rewriter, m: Match) -> Instruction:
    return rw.op("not", [m.p])


def _relu(rw: Rewriter, m: Match) -> Instruction | None:
    return rw.op("relu", [m.x]) if m.x.shape.dtype != "pred" else None


def _indices(x: Instruction) -> bool:
    """x holds element indices (>= 0): an integer iota, through reshapes, broadcasts and transposes."""
    while x.opcode in ("reshape", "bitcast", "broadcast", "transpose", "copy"):
        x = x.operands[0]
    return x.opcode == "iota" and is_int(x.shape.dtype)


def _index_compare(rw: Rewriter, m: Match) -> Instruction | None:
    """iota OP c with every index >= 0 on one side of c: all true or all false, whatever the size
    (the all-keep attention mask transformers builds as arange(seq) >= 0)."""
    c = m.c
    if c is None or isinstance(c, bool) or not is_int(m.i.shape.dtype):
        return None
    holds = {"GE": True if c <= 0 else None, "GT": True if c < 0 else None, "LT": False if c <= 0 else None,
             "LE": False if c < 0 else None, "EQ": False if c < 0 else None,
             "NE": True if c < 0 else None}.get(m.root.attrs["direction"])
    if holds is None:
        return None
    return rw.broadcast(rw.constant(holds, "pred", ()), m.root.shape.dims, ())


RULES = [
    Rule("iota-compare", op("compare", var("i", where=_indices), scalar("c")), _index_compare),
    Rule("mul-by-one", op("multiply", var("x"), scalar(value=1)), _identity),
    Rule("add-zero", op("add", var("x"), scalar(value=0)), _identity),
    Rule("sub-zero", op("subtract", var("x"), scalar(value=0)), _identity),
    Rule("div-by-one", op("divide", var("x"), scalar(value=1)), _identity),
    Rule("recip-sqrt", op("divide", scalar(value=1), op("sqrt", var("x"))), _recip_sqrt),
    Rule("recip-sqrt", op("reciprocal", op("sqrt", var("x"))), _recip_sqrt),
    Rule("one-over", op("divide", scalar(value=1), var("x")), _one_over),
    Rule("div-to-mul", op("divide", var("x"), var("c", where=lambda c: c.opcode in ("constant", "broadcast"))),
         _divide_by_constant),
    Rule("neg-neg", op("negate", op("negate", var("x"))), _identity),
    Rule("max-neg-inf", op("maximum", var("x"), scalar(value=float("-inf"))), _only_float(_identity)),
    Rule("min-pos-inf", op("minimum", var("x"), scalar(value=float("inf"))), _only_float(_identity)),
    Rule("max-zero", op("maximum", var("x"), scalar(value=0)), _relu),
    Rule("select-const-pred", op("select", scalar("p"), var("a"), var("b")), _select_constant),
    Rule("select-same", op("select", var("p"), var("a"), var("a")), lambda rw, m: m.a),
    Rule("select-true-false", op("select", var("p"), scalar(value=True), scalar(value=False),
                                 where=_pred), lambda rw, m: m.p),
    Rule("select-false-true", op("select", var("p"), scalar(value=False), scalar(value=True),
                                 where=_pred), _not_pred),
    Rule("and-true", op("and", var("x"), scalar(value=True), where=_pred), _identity),
    Rule("or-false", op("or", var("x"), scalar(value=False), where=_pred), _identity),
    Rule("copy-copy", op("copy", op("copy", var("x"))), _copy_of_copy),
    *[Rule(f"pow-{name}", op("power", var("x"), scalar(value=e)), _power(e))
      for name, e in (("one", 1.0), ("two", 2.0), ("three", 3.0), ("half", 0.5), ("neg-half", -0.5),
                      ("neg-one", -1.0))],
]
