"""Calls (inlined), composites (their decomposition, inlined) and while loops (unrolled)."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.stablehlo import fold
from mlcc.frontend.stablehlo.importer import Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.syntax import Block, Op
from mlcc.hlo.ir import Instruction

MAX_TRIP_COUNT = 1024


@stablehlo_op("func.call")
def import_call(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.call(op, op.attrs.get("callee"), args)


@stablehlo_op("stablehlo.composite")
def import_composite(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.call(op, op.attrs.get("decomposition"), args)


@stablehlo_op("stablehlo.while")
def import_while(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """Unroll a loop whose condition is known at import time on every trip (a fori_loop over constants)."""
    if len(op.regions) != 2:
        raise cx.error(op, "while needs a cond and a body region")
    cond, body = op.regions
    carried = list(args)
    for trip in range(MAX_TRIP_COUNT + 1):
        go = _condition(cx, cond[0], carried)
        if go is None:
            raise cx.unsupported(op, "the loop condition is not known at compile time; only loops with a "
                                     "static trip count (fori_loop over constants) are supported")
        if not go:
            return carried
        if trip == MAX_TRIP_COUNT:
            break
        carried = cx.import_region(body, carried)
    raise cx.unsupported(op, f"loop runs more than {MAX_TRIP_COUNT} times; too many to unroll")


def _condition(cx: Context, block: Block, carried: list[Instruction]) -> bool | None:
    """The condition's value computed now from known values, without emitting IR; None if unknown."""
    known: dict[int, np.ndarray] = {}
    for value, inst in zip(block.args, carried):
        v = cx.value_of(inst)
        if v is not None:
            known[id(value)] = v
    for op in block.ops:
        values = []
        for v in op.operands:
            if id(v) in known:
                values.append(known[id(v)])
                continue
            inst = cx.env.get(v)
            outer = cx.value_of(inst) if inst is not None else None
            if outer is None:
                return None
            values.append(outer)
        if op.name == "stablehlo.return":
            return bool(values[0].reshape(())) if len(values) == 1 and values[0].size == 1 else None
        if not fold.can_fold(op.name) or len(op.results) != 1 or op.results[0].type.dtype is None:
            return None
        out = fold.evaluate(op, values, op.results[0].type.dtype)
        if out is None:
            return None
        known[id(op.results[0])] = out
    return None
