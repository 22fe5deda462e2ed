"""Calls (inlined), composites (their decomposition, inlined), while loops (unrolled) and if/case.

An if or case whose predicate or index is known at import time imports the branch it
takes; otherwise every branch is imported (they have no side effects) and each result
is selected from the branches' results by the predicate or index (an index out of
range takes the last branch, as the spec says).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcc.frontend.stablehlo import fold, quantized
from mlcc.frontend.stablehlo.importer import Complex, Context, Results, complex_op, stablehlo_op
from mlcc.frontend.stablehlo.syntax import Block, Op
from mlcc.hlo.ir import Instruction

MAX_TRIP_COUNT = 1024


@stablehlo_op("func.call")
def import_call(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.call(op, op.attrs.get("callee"), args)


@complex_op("stablehlo.composite")
@stablehlo_op("stablehlo.composite")
def import_composite(cx: Context, op: Op, args: list[Instruction]) -> Results:
    return cx.call(op, op.attrs.get("decomposition"), args)


@complex_op("stablehlo.while")  # a complex carry: its parts, Complex(re, im), through the unrolled trips
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
        if quantized.involved(op):  # folding would compute on the storage integers
            return None
        out = fold.evaluate(op, values, op.results[0].type.dtype)
        if out is None:
            return None
        known[id(op.results[0])] = out
    return None


@complex_op("stablehlo.if")  # complex results: each part selected
@stablehlo_op("stablehlo.if")
def import_if(cx: Context, op: Op, args: list[Instruction]) -> Results:
    if len(op.regions) != 2:
        raise cx.error(op, "if needs a true and a false region")
    (pred,) = args
    known = cx.value_of(pred)
    if known is not None:
        return cx.import_region(op.regions[0] if bool(known.reshape(())) else op.regions[1], [])
    on_true, on_false = (cx.import_region(r, []) for r in op.regions)
    return [_select(cx, op, pred, t, f) for t, f in zip(on_true, on_false)]


@complex_op("stablehlo.case")
@stablehlo_op("stablehlo.case")
def import_case(cx: Context, op: Op, args: list[Instruction]) -> Results:
    if not op.regions:
        raise cx.error(op, "case needs at least one branch")
    (index,) = args
    n = len(op.regions)
    known = cx.value_of(index)
    if known is not None:
        i = int(known.reshape(()))
        return cx.import_region(op.regions[i if 0 <= i < n else n - 1], [])
    branches = [cx.import_region(r, []) for r in op.regions]
    results = branches[-1]
    for i in reversed(range(n - 1)):
        here = cx.b.op("compare", [index, cx.scalar(i, index.shape.dtype)], direction="EQ")
        results = [_select(cx, op, here, a, b) for a, b in zip(branches[i], results)]
    return results


def _select(cx: Context, op: Op, pred: Instruction, a: Instruction | Complex,
            b: Instruction | Complex) -> Instruction | Complex:
    if a is b:
        return a
    if isinstance(a, Complex) and isinstance(b, Complex):
        return Complex(*(_select(cx, op, pred, p, q) for p, q in zip(a, b)))
    if isinstance(a, Complex) or isinstance(b, Complex):
        raise cx.error(op, "its branches return a complex and a real value for one result")
    if a.shape.rank:
        pred = cx.b.broadcast_to(pred, a.shape.dims)
    return cx.b.op("select", [pred, a, b])


@complex_op("stablehlo.map")  # complex operands or result: the body's ops on Complex(re, im) tensors
@stablehlo_op("stablehlo.map")
def import_map(cx: Context, op: Op, args: list[Any]) -> Results:
    """The scalar computation applied to every element: its ops applied to the whole tensors at once."""
    if not op.regions or not args:
        raise cx.error(op, "map needs operands and a computation")
    first = args[0].re if isinstance(args[0], Complex) else args[0]
    dims = tuple(first.shape.dims)
    (result,) = cx.import_lifted(op.regions[0], list(args), dims)
    if isinstance(result, Complex):  # a constant result of the body is rank 0
        return Complex(*(p if tuple(p.shape.dims) == dims else cx.b.broadcast_to(p, dims) for p in result))
    return result if tuple(result.shape.dims) == dims else cx.b.broadcast_to(result, dims)
