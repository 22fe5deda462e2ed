"""Reshape and broadcast chains: one reshape for two, no reshape to the same dims, one
broadcast for two, broadcasts that only add size-1 dims become reshapes."""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.passes.pattern import Match, Rewriter, Rule, op, var
from mlcc.hlo.passes.views import is_degenerate_reshape, nonunit


def _reshape_of_reshape(rw: Rewriter, m: Match) -> Instruction:
    return rw.reshape(m.x, m.root.shape.dims)


def _same_shape(rw: Rewriter, m: Match) -> Instruction | None:
    return m.x if m.x.shape == m.root.shape else None


def _broadcast_noop(rw: Rewriter, m: Match) -> Instruction | None:
    b = m.root
    if list(b.attrs["dimensions"]) == list(range(b.shape.rank)) and m.x.shape == b.shape:
        return m.x
    return None


def _broadcast_of_broadcast(rw: Rewriter, m: Match) -> Instruction:
    inner, outer = m.inner, m.root
    dims = [outer.attrs["dimensions"][d] for d in inner.attrs["dimensions"]]
    return rw.broadcast(m.x, outer.shape.dims, dims)


def _broadcast_is_reshape(rw: Rewriter, m: Match) -> Instruction | None:
    """A broadcast that repeats nothing (every operand dim keeps its size) is a reshape."""
    b, x = m.root, m.x
    dims = b.attrs["dimensions"]
    if not b.shape.is_static or not x.shape.is_static or b.shape.numel() != x.shape.numel():
        return None
    if any(x.shape.dims[i] != b.shape.dims[d] for i, d in enumerate(dims)):
        return None
    return rw.reshape(x, b.shape.dims)


def _broadcast_of_reshape(rw: Rewriter, m: Match) -> Instruction | None:
    """broadcast(reshape(x)) where the reshape only adds or drops size-1 dims -> broadcast(x)."""
    reshape, b, x = m.inner, m.root, m.x
    if not is_degenerate_reshape(x.shape.dims, reshape.shape.dims):
        return None
    bdims = b.attrs["dimensions"]
    fixed = dict(zip(nonunit(x.shape.dims), (bdims[o] for o in nonunit(reshape.shape.dims))))
    # x's size-1 dims may go to any result dim keeping the order increasing
    dims: list[int] = []
    for i in range(x.shape.rank):
        if i in fixed:
            if dims and fixed[i] <= dims[-1]:
                return None
            dims.append(fixed[i])
            continue
        low = dims[-1] + 1 if dims else 0
        high = min([fixed[j] for j in fixed if j > i], default=b.shape.rank)
        if low >= high:
            return None
        dims.append(low)
    return rw.broadcast(x, b.shape.dims, dims)


def _view_of_scalar_broadcast(rw: Rewriter, m: Match) -> Instruction:
    """A reshape or transpose of a broadcast scalar is a broadcast of that scalar."""
    return rw.op("broadcast", [m.x], Shape(m.x.shape.dtype, m.root.shape.dims), dimensions=())


def _rank0(inst: Instruction) -> bool:
    return inst.shape.rank == 0


RULES = [
    Rule("reshape-noop", op("reshape", var("x")), _same_shape),
    Rule("reshape-reshape", op("reshape", op("reshape", var("x"))), _reshape_of_reshape),
    Rule("broadcast-noop", op("broadcast", var("x")), _broadcast_noop),
    Rule("broadcast-broadcast", op("broadcast", op("broadcast", var("x"), name="inner")), _broadcast_of_broadcast),
    Rule("broadcast-is-reshape", op("broadcast", var("x")), _broadcast_is_reshape),
    Rule("broadcast-reshape", op("broadcast", op("reshape", var("x"), name="inner")), _broadcast_of_reshape),
    Rule("scalar-broadcast-view", op(("reshape", "transpose"), op("broadcast", var("x", where=_rank0))),
         _view_of_scalar_broadcast),
]
