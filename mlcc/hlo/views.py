"""Affine views: a value that is a slice / transpose / reshape-bitcast of another value's bytes.

``affine_view(v)`` walks up from v through those ops to the first value that owns its bytes (a
kernel's result, a parameter, a constant) and describes v as an element offset into that value
plus one stride per logical dim. A kernel can then read v directly from the owner's buffer: three
slices of a fused QKV projection cost no copies.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Union

from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo import symbolic
from mlcc.hlo.symbolic import Sym, as_sym, number, sizes

Size = Union[int, Sym]  # a symbolic dim's size or stride is a Sym (mlcc/hlo/symbolic.py)

VIEW_OPS = ops_with("strided_view")


@dataclass(frozen=True)
class View:
    source: Instruction          # the value owning the bytes (dense in its own layout)
    offset: Size                 # elements from the start of source's buffer
    strides: tuple[Size, ...]    # elements per step of each of the view's logical dims


def _reshape_strides(old_dims: tuple[int, ...], old_strides: tuple[int, ...],
                     new_dims: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides of a row-major reshape of a strided view (torch's view rule), or None when a group of
    old dims that the new dims split or merge is not evenly spaced in memory."""
    old = [(d, s) for d, s in zip(old_dims, old_strides) if d != 1]
    new = [(j, d) for j, d in enumerate(new_dims) if d != 1]
    out = [0] * len(new_dims)
    i = j = 0
    while i < len(old) or j < len(new):
        if i >= len(old) or j >= len(new):
            return None
        og, ng = [old[i]], [new[j]]
        po, pn = old[i][0], new[j][1]
        i, j = i + 1, j + 1
        while po != pn:
            if _smaller(po, pn):
                if i >= len(old):
                    return None
                og.append(old[i])
                po *= old[i][0]
                i += 1
            else:
                if j >= len(new):
                    return None
                ng.append(new[j])
                pn *= new[j][1]
                j += 1
        for (d1, s1), (d2, s2) in zip(og, og[1:]):
            if s1 != number(s2 * d2):
                return None
        acc = og[-1][1]
        for idx, d in reversed(ng):
            out[idx] = acc
            acc = number(acc * d)
    return tuple(out)


def _smaller(a: Size, b: Size) -> bool:
    """Whether group product a grows to meet b: a < b, or for symbolic sizes a divides b."""
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    return as_sym(b).exact_div(a) is not None



def transposed_layout(operand_layout: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    """The result layout that makes transpose(x, perm) a bitcast of x."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv[d] for d in operand_layout)


def _transpose_of(bitcast: Instruction) -> tuple[int, ...] | None:
    """The permutation a bitcast realizes when it re-labels its operand's dims (transpose-to-bitcast)."""
    src = bitcast.operands[0].shape
    dst = bitcast.shape
    if src.rank != dst.rank or Counter(src.dims) != Counter(dst.dims):
        return None
    if src.rank > 6:
        return None
    for perm in itertools.permutations(range(src.rank)):
        if all(dst.dims[i] == src.dims[p] for i, p in enumerate(perm)) and \
                dst.layout == transposed_layout(src.layout, perm):
            return tuple(perm)
    return None


def affine_view(value: Instruction, stop: frozenset[int] = frozenset()) -> View | None:
    """value as (source, offset, strides); None when some step is not an affine re-description.
    Walking stops at instructions whose id is in ``stop`` (e.g. a fusion's parameters)."""
    chain = []
    x = value
    while x.opcode in VIEW_OPS and id(x) not in stop:
        chain.append(x)
        x = x.operands[0]
    return view_of_steps(x, chain)


def view_of_steps(x: Instruction, chain: list[Instruction]) -> View | None:
    """The view of x that the view ops of chain (outermost first, each read from the next or from x) describe;
    None when some step is not an affine re-description. A chain may skip ops that keep coordinates (an
    elementwise op between two views): each bitcast reinterprets its own operand's layout."""
    if not isinstance(x.shape, Shape):
        return None
    strides = symbolic.strides(x.shape.dims, x.shape.layout)
    offset: Size = 0
    dims = sizes(x.shape.dims)
    for step in reversed(chain):
        if step.opcode == "slice":
            starts, st = step.attrs["start_indices"], step.attrs["strides"]
            for a, s in zip(starts, strides):
                offset = number(offset + number(a) * s)
            strides = tuple(number(s * k) for s, k in zip(strides, st))
        elif step.opcode == "transpose":
            perm = step.attrs["dimensions"]
            strides = tuple(strides[p] for p in perm)
        else:  # bitcast: a transpose re-labelling, or a row-major reshape
            perm = _transpose_of(step)
            src = step.operands[0].shape
            if perm is not None and src.layout != step.shape.layout:
                strides = tuple(strides[p] for p in perm)
            elif src.is_row_major() and step.shape.is_row_major():
                new = _reshape_strides(dims, strides, sizes(step.shape.dims))
                if new is None:
                    return None
                strides = new
            else:
                return None
        dims = sizes(step.shape.dims)
    return View(x, offset, strides)
