"""Transposes: identities dropped, two composed into one, one that only moves size-1 dims
becomes a reshape, and a transpose of a degenerate reshape moves below it (so the
reshapes around a head split meet and cancel)."""

from __future__ import annotations

from mlcc.hlo.ir import Instruction
from mlcc.hlo.passes.pattern import Match, Rewriter, Rule, op, var
from mlcc.hlo.passes.views import is_degenerate_reshape, nonunit


def _identity_perm(rw: Rewriter, m: Match) -> Instruction | None:
    perm = m.root.attrs["dimensions"]
    return m.x if list(perm) == list(range(len(perm))) else None


def _compose(rw: Rewriter, m: Match) -> Instruction:
    inner, outer = m.inner.attrs["dimensions"], m.root.attrs["dimensions"]
    return rw.transpose(m.x, [inner[p] for p in outer])


def _moves_only_unit_dims(rw: Rewriter, m: Match) -> Instruction | None:
    perm, dims = m.root.attrs["dimensions"], m.x.shape.dims
    order = [p for p in perm if dims[p] != 1]
    if order != sorted(order) or list(perm) == list(range(len(perm))):
        return None
    return rw.reshape(m.x, m.root.shape.dims)


def _sink_reshape(rw: Rewriter, m: Match) -> Instruction | None:
    """transpose(reshape(x)) -> reshape(transpose(x)) when the reshape only adds or drops size-1 dims."""
    reshape, x, perm = m.inner, m.x, m.root.attrs["dimensions"]
    if not is_degenerate_reshape(x.shape.dims, reshape.shape.dims):
        return None
    x_of = dict(zip(nonunit(reshape.shape.dims), nonunit(x.shape.dims)))  # reshape dim -> x dim
    order = [x_of[p] for p in perm if p in x_of]                           # x dims in result order
    slots = nonunit(x.shape.dims)
    x_perm = list(range(x.shape.rank))
    for slot, d in zip(slots, order):
        x_perm[slot] = d
    return rw.reshape(rw.transpose(x, x_perm), m.root.shape.dims)


RULES = [
    Rule("transpose-identity", op("transpose", var("x")), _identity_perm),
    Rule("transpose-transpose", op("transpose", op("transpose", var("x"), name="inner")), _compose),
    Rule("transpose-is-reshape", op("transpose", var("x")), _moves_only_unit_dims),
    Rule("transpose-reshape", op("transpose", op("reshape", var("x"), name="inner")), _sink_reshape),
]
