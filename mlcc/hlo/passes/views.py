"""Helpers for ops that only re-describe a value: broadcasts, transposes, and reshapes that
insert or drop size-1 dims ("degenerate" reshapes).

``peel_views`` walks down such a chain and says where each dim of the value at the
bottom ended up, which lets a matcher see ``mean`` through the keepdims reshape and
the broadcast an exporter wrapped around it.
"""

from __future__ import annotations

from typing import Sequence

from mlcc.hlo.ir import Dim, Instruction
from mlcc.hlo.opcodes import ops_with

VIEW_OPCODES = ops_with("logical_view")  # broadcast, transpose, copy, reshape: dims map without layouts


def nonunit(dims: Sequence[Dim]) -> list[int]:
    """Indices of the dims that are not 1."""
    return [i for i, d in enumerate(dims) if d != 1]


def is_degenerate_reshape(src: Sequence[Dim], dst: Sequence[Dim]) -> bool:
    """True when dst is src with size-1 dims inserted or removed (the order of the rest kept)."""
    return [d for d in src if d != 1] == [d for d in dst if d != 1]


def peel_views(value: Instruction) -> tuple[Instruction, dict[int, int]]:
    """The instruction below a chain of views, and where each of its non-1 dims lands in ``value``.

    Views are broadcasts, transposes, copies and degenerate reshapes. The map has
    an entry for every dim of the returned instruction whose size is not 1; dims of
    size 1 carry one element, which the views repeat or drop.
    """
    cur = value
    pos = {d: d for d in nonunit(value.shape.dims)}
    while cur.opcode in VIEW_OPCODES:
        x = cur.operands[0]
        if cur.opcode == "broadcast":
            dims = cur.attrs["dimensions"]
            new = {i: pos[d] for i, d in enumerate(dims) if x.shape.dims[i] != 1}
        elif cur.opcode == "reshape":
            if not is_degenerate_reshape(x.shape.dims, cur.shape.dims):
                break
            new = {i: pos[o] for i, o in zip(nonunit(x.shape.dims), nonunit(cur.shape.dims))}
        elif cur.opcode == "transpose":
            perm = cur.attrs["dimensions"]
            new = {perm[i]: pos[i] for i in pos}
        else:  # copy
            new = dict(pos)
        pos, cur = new, x
    return cur, pos


def order_preserving(pos: dict[int, int]) -> bool:
    keys = sorted(pos)
    return all(pos[a] < pos[b] for a, b in zip(keys, keys[1:]))
