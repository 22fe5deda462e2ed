"""Sibling dots whose weights are computed from constants (a packed 4-bit weight's unpack and blocked
dequantization: MatMulNBits, a blocked DequantizeLinear of an int4 weight) merged as mlcc/hlo/passes/
sibling_dots.py merges constant weights: one chain computing the concatenated weight from concatenated
constants, so the merged dot still computes its weight in its B-tile loads and the weights stay packed.

Concatenating the computed weights along their output axis N is concatenating each constant the chain reads
along the axis N comes from (the packed bytes [N, K/2], the scales [N, k_blocks], the zero points), when
every op of the chain keeps N an outer axis of its own:

    elementwise ops and converts:  N stays at the same dim
    broadcast:                     N at the operand dim mapped to it; an operand without N is shared, the same
                                   instruction in every sibling (the nibble shifts, the mask)
    bitcast / reshape:             the dims before N hold as many elements in the operand as in the result
                                   (the row-major blocks of a sibling's N are whole rows of the flat tail)
    slice:                         all of N, in order
    transpose:                     N at the permuted dim

The siblings' chains must be alike op by op, in every attribute and in every dim but N.
"""

from __future__ import annotations

from math import prod

import numpy as np

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Computation, Instruction, Module, Shape
from mlcc.hlo.lazy_constants import ConcatenatedWeights
from mlcc.hlo.opcodes import ELEMENTWISE_OPS

PACKED_LEAF_TYPES = ("u8", "s4", "u4", "s2", "u2")


def _operand_axis(x: Instruction, d: int, i: int) -> int | None:
    """The dim of x's operand i that x's dim d (N) comes from; None when the operand has no N (a broadcast's
    shared operand); -1 when N cannot be traced through x."""
    o = x.operands[i]
    if x.opcode in ELEMENTWISE_OPS:
        return d if tuple(o.shape.dims) == tuple(x.shape.dims) else -1
    if x.opcode == "broadcast":
        dims = list(x.attrs["dimensions"])
        return dims.index(d) if d in dims else None
    if x.opcode in ("bitcast", "reshape"):
        if not (o.shape.is_static and x.shape.is_static):
            return -1
        outer = prod(int(v) for v in x.shape.dims[:d])
        for j in range(o.shape.rank):
            if prod(int(v) for v in o.shape.dims[:j]) == outer:
                return j
        return -1
    if x.opcode == "slice":
        a = x.attrs
        full = a["start_indices"][d] == 0 and a["strides"][d] == 1 and a["limit_indices"][d] == o.shape.dims[d]
        return d if full else -1
    if x.opcode == "transpose":
        return list(x.attrs["dimensions"])[d]
    return -1


def _alike(a: Instruction, b: Instruction, d: int) -> bool:
    """a and b are the same op over shapes that differ at most in dim d, with the same attributes (a
    slice's limit along d aside)."""
    if a.opcode != b.opcode or a.shape.dtype != b.shape.dtype or a.shape.rank != b.shape.rank \
            or len(a.operands) != len(b.operands) or a.shape.layout != b.shape.layout:
        return False
    if any(x != y for i, (x, y) in enumerate(zip(a.shape.dims, b.shape.dims)) if i != d):
        return False
    if a.opcode == "slice":
        strip = [dict(x.attrs, limit_indices=tuple(v for i, v in enumerate(x.attrs["limit_indices"]) if i != d))
                 for x in (a, b)]
        return strip[0] == strip[1]
    if a.opcode == "constant":
        return set(a.attrs) == set(b.attrs) and ("ref" in a.attrs or a.attrs == b.attrs)
    return a.attrs == b.attrs


class ChainPlan:
    """The siblings' weight chains walked in step: for each instruction of the first, the dim N is at (None:
    a shared instruction without N), and the instructions of the other siblings in its place."""

    def __init__(self) -> None:
        self.axis: dict[int, int | None] = {}
        self.peers: dict[int, list[Instruction]] = {}
        self.packed = False    # some constant the chain reads holds packed or low-bit integers
        self.unpacks = False   # the chain unpacks bytes or spreads a block's scale (shift or bitcast)


def plan_chains(ws: list[Instruction], d: int, module: Module) -> ChainPlan | None:
    """The plan for concatenating the weights ws along their dim d, or None when their chains do not allow
    it (see the module doc)."""
    plan = ChainPlan()
    work = [(ws, d)]
    while work:
        xs, axis = work.pop()
        x = xs[0]
        if id(x) in plan.axis:
            if plan.axis[id(x)] != axis or any(p is not q for p, q in zip(plan.peers[id(x)], xs[1:])):
                return None
            continue
        if axis is None:
            if any(y is not x for y in xs[1:]):
                return None
            plan.axis[id(x)], plan.peers[id(x)] = None, []
            continue
        if not all(_alike(x, y, axis) for y in xs[1:]) or not x.shape.is_static:
            return None
        plan.axis[id(x)], plan.peers[id(x)] = axis, list(xs[1:])
        if x.opcode == "constant":
            if "ref" not in x.attrs and "splat" not in x.attrs:
                return None
            plan.packed |= x.shape.dtype in PACKED_LEAF_TYPES and "ref" in x.attrs
            continue
        plan.unpacks |= x.opcode in ("shift-right-logical", "bitcast", "reshape")
        for i in range(len(x.operands)):
            axes = [_operand_axis(y, axis, i) for y in xs]
            if any(a == -1 for a in axes) or len(set(axes)) != 1:
                return None
            work.append(([y.operands[i] for y in xs], axes[0]))
    return plan


def _array(inst: Instruction, module: Module):
    value = module.constants[inst.attrs["ref"]]
    if isinstance(value, ConcatenatedWeights) and tuple(value.shape) == tuple(inst.shape.dims):
        return value
    return np.asarray(value, dtype=numpy_dtype(inst.shape.dtype)).reshape(inst.shape.dims)


def build_chain(comp: Computation, module: Module, anchor: Instruction, ws: list[Instruction],
                plan: ChainPlan) -> Instruction:
    """The chain computing the concatenation of ws along N, inserted before anchor: the first sibling's
    chain with N as long as all siblings' together, reading concatenated constants (lazily: their parts
    until the writer streams them)."""
    built: dict[int, Instruction] = {}

    def grown(x: Instruction, axis: int) -> Shape:
        dims = list(x.shape.dims)
        dims[axis] = sum(int(y.shape.dims[axis]) for y in [x, *plan.peers[id(x)]])
        return Shape(x.shape.dtype, tuple(dims), x.shape.layout)

    def make(x: Instruction) -> Instruction:
        if id(x) in built:
            return built[id(x)]
        axis = plan.axis[id(x)]
        if axis is None:
            return x
        group = [x, *plan.peers[id(x)]]
        origin = tuple(dict.fromkeys(o for y in group for o in y.origin))
        shape = grown(x, axis)
        attrs = dict(x.attrs)
        if x.opcode == "constant" and "ref" in attrs:
            key, n = "merged_weights", 0
            while key in module.constants:
                n += 1
                key = f"merged_weights.{n}"
            module.constants[key] = ConcatenatedWeights([_array(y, module) for y in group], axis=axis)
            attrs = {"ref": key}
            operands: list[Instruction] = []
        else:
            if x.opcode == "slice":
                limits = list(attrs["limit_indices"])
                limits[axis] = shape.dims[axis]
                attrs["limit_indices"] = tuple(limits)
            operands = [make(o) for o in x.operands]
        inst = comp.insert_before(anchor, Instruction(comp.unique_name(x.name), x.opcode, shape, operands, attrs,
                                                      origin=origin))
        built[id(x)] = inst
        return inst

    return make(ws[0])
