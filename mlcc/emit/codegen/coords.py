"""Flat indices to element offsets, for the kernels of reductions, contractions and composites.

A kernel numbers the elements it walks with one flat index (row-major over a
list of axes, major first) and turns it back into offsets, one per tensor, as
``sum(coord * stride)``. An ``Axis`` is the size of one such axis plus each
tensor's element stride along it (0 where a tensor is broadcast along it).
Templates unravel with the macros in ``templates/_coords.jinja``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from mlcc.emit.codegen.indexing import Ranges, Size, interval, size
from mlcc.errors import UnsupportedError
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo import symbolic
from mlcc.hlo.symbolic import symbols_of

INT32_LIMIT = 2**31 - 1
MAX_GRID_Y = 65535   # CUDA's limit on grid axes 1 and 2


@dataclass(frozen=True)
class Axis:
    size: Size                 # a symbolic size renders in a template as the kernel's expression for it
    strides: tuple[Size, ...]


def static_dims(shape: Shape, inst: Instruction) -> tuple[int, ...]:
    if not shape.is_static:
        names = " ".join(f"--shape {n}=N" for n in symbols_of(shape.dims))
        raise UnsupportedError(f"%{inst.name} ({inst.opcode}): its kernel template takes static sizes only, got "
                               f"{shape}; specialize them at compile time ({names})")
    return tuple(int(d) for d in shape.dims)


def strides(shape: Shape) -> tuple[int, ...]:
    return tuple(int(s) for s in shape.strides())


def kernel_dims(shape: Shape) -> tuple[Size, ...]:
    """The dims as a kernel sees them: ints, and symbolic ones as Sym (sizes it takes at run time)."""
    return symbolic.sizes(shape.dims)


def kernel_strides(shape: Shape) -> tuple[Size, ...]:
    """Element strides under the layout, symbolic where a more minor dim is."""
    return symbolic.strides(shape.dims, shape.layout)


def upper(n: Size | str, ranges: Ranges) -> int:
    """The largest value of a size (or a dim's text) over its symbols' ranges: what tiles are chosen for."""
    return interval(size(n), ranges)[1]


def merge_axes(axes: Iterable[Axis]) -> list[Axis]:
    """Drop size-1 axes and fuse neighbours (major, then minor) that every tensor steps through as one."""
    merged: list[Axis] = []
    for ax in axes:
        if ax.size == 1:
            continue
        if merged and all(p == s * ax.size for p, s in zip(merged[-1].strides, ax.strides)):
            merged[-1] = Axis(size(merged[-1].size * ax.size), ax.strides)
        else:
            merged.append(ax)
    return merged


def by_stride(axes: Sequence[Axis], ranges: Ranges, which: int = 0) -> list[Axis]:
    """Axes ordered major to minor by one tensor's strides, so the flat index walks it in memory order."""
    return sorted(axes, key=lambda ax: -upper(ax.strides[which], ranges))


def numel(dims: Sequence[Size]) -> Size:
    n: Size = 1
    for d in dims:
        n = size(n * d)
    return n


def is_wide(ranges: Ranges, *shapes: Shape) -> bool:
    """True when some offset may not fit in int32, so a kernel must index in int64."""
    return any(upper(s.numel_expr(), ranges) > INT32_LIMIT for s in shapes)


def clamp_pow2(n: int, lo: int, hi: int) -> int:
    """next_pow2(n) clamped to [lo, hi] (lo and hi powers of two)."""
    p = 1
    while p < n:
        p *= 2
    return max(lo, min(p, hi))


def largest_pow2_at_most(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def lowest(dtype: str) -> float | int:
    """The identity of maximum for a dtype (-inf for floats)."""
    if dtype == "pred":
        return 0
    np_type = numpy_dtype(dtype)
    if np.issubdtype(np_type, np.integer):
        return int(np.iinfo(np_type).min)
    return float("-inf")


def highest(dtype: str) -> float | int:
    """The identity of minimum for a dtype (+inf for floats)."""
    if dtype == "pred":
        return 1
    np_type = numpy_dtype(dtype)
    if np.issubdtype(np_type, np.integer):
        return int(np.iinfo(np_type).max)
    return float("inf")


def accumulator_dtype(dtype: str) -> str:
    """Where sums and products of a dtype accumulate: f32 for halves, 32-bit at least for integers."""
    if dtype in ("f16", "bf16", "f32"):
        return "f32"
    if dtype in ("f64", "s64", "u64"):
        return dtype
    if dtype in ("u8", "u16", "u32"):
        return "u32"
    return "s32"
