"""What the recognizers share: products of factors, per-row statistics seen through the
keepdims reshapes and broadcasts exporters put around them, and parameters (scale,
bias) projected onto the normalized dims."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Dim, Instruction, Module, is_float
from mlcc.hlo.opcodes import UNARY_OPS
from mlcc.hlo.passes.pattern import Rewriter, scalar_value
from mlcc.hlo.passes.views import VIEW_OPCODES, nonunit, order_preserving, peel_views


def tolerance(dtype: str) -> float:
    """Relative tolerance for constants written in ``dtype`` (a few ulps, at least 1e-5)."""
    if not is_float(dtype):
        return 0.0
    return max(1e-5, 4 * float(np.finfo(numpy_dtype(dtype)).eps))


def near(value: float | None, want: float, dtype: str) -> bool:
    if value is None or isinstance(value, bool):
        return False
    return abs(value - want) <= tolerance(dtype) * abs(want)


# ---------------------------------------------------------------- products

@dataclass
class Product:
    """value = coefficient * prod(numerators) / prod(denominators)."""

    coefficient: float = 1.0
    numerators: list[Instruction] = field(default_factory=list)
    denominators: list[Instruction] = field(default_factory=list)


def flatten_product(inst: Instruction, module: Module | None, interior_single_use: bool = True) -> Product:
    """Split a tree of multiplies and divides into scalar constants and other factors.

    The tree is followed through multiplies and divides that feed only their parent
    (when ``interior_single_use``): a factor used elsewhere stays one factor.
    """
    out = Product()

    def visit(v: Instruction, top: bool, denominator: bool) -> None:
        c = scalar_value(v, module)
        if c is not None and not isinstance(c, bool) and not top:
            out.coefficient = out.coefficient / c if denominator else out.coefficient * c
            return
        expand = v.opcode in ("multiply", "divide") and (top or not interior_single_use or len(v.users) == 1)
        if expand and v.opcode == "multiply":
            visit(v.operands[0], False, denominator)
            visit(v.operands[1], False, denominator)
        elif expand:
            visit(v.operands[0], False, denominator)
            visit(v.operands[1], False, not denominator)
        elif v.opcode == "negate" and (not interior_single_use or len(v.users) == 1) and not top:
            out.coefficient = -out.coefficient
            visit(v.operands[0], False, denominator)
        else:
            (out.denominators if denominator else out.numerators).append(v)

    visit(inst, True, False)
    return out


# ---------------------------------------------------------------- elementwise chains

@dataclass(frozen=True)
class Step:
    """One elementwise op on the way down: ``opcode`` (mul, add, max, rdiv, or a unary opcode) and its scalar."""

    opcode: str
    scalar: float | None = None


def walk(value: Instruction, module: Module | None) -> tuple[Instruction, dict[int, int], list[Step]]:
    """Follow views, unary ops, and binary ops with a scalar constant, down from ``value``.

    Returns the instruction where that stops, where its non-1 dims land in ``value``,
    and the elementwise steps from the top down (subtract c and divide by c are
    recorded as add -c and mul 1/c).
    """
    cur = value
    pos = {d: d for d in nonunit(value.shape.dims)}
    steps: list[Step] = []
    while True:
        if cur.opcode in VIEW_OPCODES:
            below, inner = peel_views(cur)
            if below is cur:
                break
            pos = {i: pos[o] for i, o in inner.items()}
            cur = below
            continue
        if cur.opcode in UNARY_OPS and cur.opcode not in ("convert", "bitcast-convert"):
            steps.append(Step(cur.opcode))
            cur = cur.operands[0]
            continue
        if cur.opcode in ("multiply", "add", "subtract", "divide", "maximum") and len(cur.operands) == 2:
            a, b = cur.operands
            ca, cb = scalar_value(a, module), scalar_value(b, module)
            if cb is not None and ca is None:
                step = {"multiply": Step("mul", cb), "add": Step("add", cb), "subtract": Step("add", -cb),
                        "divide": Step("mul", 1 / cb if cb else math.inf), "maximum": Step("max", cb)}[cur.opcode]
                steps.append(step)
                cur = a
                continue
            if ca is not None and cb is None and cur.opcode != "subtract":
                step = {"multiply": Step("mul", ca), "add": Step("add", ca), "divide": Step("rdiv", ca),
                        "maximum": Step("max", ca)}[cur.opcode]
                steps.append(step)
                cur = b
                continue
        break
    return cur, pos, steps


def keepdims_aligned(pos: dict[int, int], rank: int, axes: Sequence[int]) -> bool:
    """True when a value with ``rank - len(axes)`` dims lands on the dims not in ``axes``, in order."""
    kept = [d for d in range(rank) if d not in axes]
    return all(j < len(kept) and pos[j] == kept[j] for j in pos)


@dataclass(frozen=True)
class Reduction:
    source: Instruction      # what is reduced
    axes: tuple[int, ...]
    pos: dict                # the reduced value's non-1 dims -> dims of the top value


def sum_below(value: Instruction, module: Module | None, steps_allowed: int = 0) -> tuple[Reduction, list[Step]] | None:
    """The add-reduce under ``value`` (through views and scalar steps), with those steps."""
    base, pos, steps = walk(value, module)
    if base.opcode != "reduce" or base.attrs["kind"] != "add":
        return None
    return Reduction(base.operands[0], tuple(sorted(base.attrs["dimensions"])), pos), steps


def mean_of(value: Instruction, module: Module | None) -> Reduction | None:
    """``value`` == mean(source, axes), broadcast back keepdims-style onto the source's dims."""
    found = sum_below(value, module)
    if found is None:
        return None
    red, steps = found
    if len(steps) != 1 or steps[0].opcode != "mul" or not red.source.shape.is_static:
        return None
    count = math.prod(red.source.shape.dims[a] for a in red.axes)
    if not near(steps[0].scalar, 1.0 / count, red.source.shape.dtype):
        return None
    if value.shape.rank != red.source.shape.rank or not keepdims_aligned(red.pos, value.shape.rank, red.axes):
        return None
    return red


# ---------------------------------------------------------------- parameters over normalized dims

def projection(value: Instruction, axes: Sequence[int]) -> tuple[Instruction, dict[int, int]] | None:
    """The value under ``value``'s views when it varies only along ``axes`` (in order)."""
    src, pos = peel_views(value)
    if any(p not in axes for p in pos.values()) or not order_preserving(pos):
        return None
    return src, pos


def project(rw: Rewriter, value: Instruction, axes: Sequence[int], dims: Sequence[Dim]) -> Instruction | None:
    """An instruction of dims ``[dims[a] for a in axes]`` holding ``value`` (which varies only along axes)."""
    found = projection(value, axes)
    if found is None:
        return None
    src, pos = found
    target = tuple(dims[a] for a in axes)
    keep = sorted(pos)
    squeezed = rw.reshape(src, tuple(src.shape.dims[i] for i in keep)) if len(keep) != src.shape.rank else src
    return rw.broadcast(squeezed, target, [list(axes).index(pos[i]) for i in keep])
