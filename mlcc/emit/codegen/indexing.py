"""Index arithmetic of kernel bodies.

A coordinate is an ``Affine`` expression over Triton variables (a sum of
``var * coef`` plus a constant) that folds as it is built, so a slice, a
transpose, a broadcast or a reverse costs no statement at all: only divisions
(unravelling a flat index) and loads reach the kernel (mlcc/emit/codegen/builder.py
adds those statements, mlcc/emit/codegen/body.py defines them).

Masks say which lanes may touch memory: a variable name is that predicate,
``None`` needs no guard (an address the same for every lane and in bounds), and
``NEVER`` is statically no lane (the caller then skips the read altogether).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Union

from mlcc.hlo.symbolic import Sym
from mlcc.hlo.symbolic import number as size  # x with a constant Sym as its int

NEVER = False
Mask = str | None | bool  # a predicate variable, None (all lanes) or NEVER
Size = Union[int, Sym]  # a coefficient or constant: an int, or a size known only at run time (a kernel argument)

# The symbols' ranges a lowering decides by (Module.symbols: name -> inclusive (lo, hi)): lower_module hands
# the module's to every lowering, which passes them on to whatever reads a size's bounds (tiles, masks, loops).
Ranges = Mapping[str, tuple[int, int]]
NO_RANGES: Ranges = MappingProxyType({})


class PlannedRanges(dict):
    """A module's ranges when a symbol has no upper end: read as a mapping, each such symbol at the size it is
    planned at (tiles, index widths, costs); ``sound`` holds the values it may take at run time, what index
    arithmetic, masks and loop bounds must hold for (Builder reads it)."""

    def __init__(self, planned: Ranges, sound: Ranges) -> None:
        super().__init__(planned)
        self.sound = dict(sound)


def sound(ranges: Ranges) -> Ranges:
    """The values the symbols may take at run time (a PlannedRanges' sound ranges; any other's own)."""
    return getattr(ranges, "sound", ranges)  # a static module's: a symbolic size then fails loudly (SymbolicError)


def interval(x: Size, ranges: Ranges) -> tuple[int, int]:
    """The values x takes (a symbolic size over its symbols' ranges)."""
    if isinstance(x, Sym):
        return x.bounds(ranges)
    return x, x


def size_code(x: Size) -> str:
    """Source text of a size: a number, or an expression over the kernel's ``sym_`` arguments."""
    return x.code() if isinstance(x, Sym) else str(x)


def exact_quotient(c: Size, k: Size) -> Size | None:
    """c / k when k divides c for every value of the symbols."""
    if isinstance(c, int) and isinstance(k, int):
        return c // k if c % k == 0 else None
    q = Sym.const(c).exact_div(k) if isinstance(c, int) else c.exact_div(k)
    return None if q is None else size(q)


@dataclass(frozen=True)
class Affine:
    terms: tuple[tuple[str, Size], ...] = ()  # sorted by variable, no zero coefficients
    const: Size = 0

    @staticmethod
    def var(name: str) -> Affine:
        return Affine(((name, 1),))

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def single_var(self) -> str | None:
        """The variable when this is exactly one variable."""
        if len(self.terms) == 1 and self.terms[0][1] == 1 and self.const == 0:
            return self.terms[0][0]
        return None

    def __add__(self, other: Affine | Size) -> Affine:
        if not isinstance(other, Affine):
            return Affine(self.terms, size(self.const + other))
        coefs = dict(self.terms)
        for v, c in other.terms:
            coefs[v] = size(coefs.get(v, 0) + c)
        return Affine(tuple(sorted(((v, c) for v, c in coefs.items() if c != 0), key=lambda t: t[0])),
                      size(self.const + other.const))

    def __sub__(self, other: Affine | Size) -> Affine:
        return self + (other * -1)

    def __mul__(self, k: Size) -> Affine:
        if k == 0:
            return Affine()
        return Affine(tuple((v, size(c * k)) for v, c in self.terms), size(self.const * k))

    def __rsub__(self, other: Size) -> Affine:
        return (self * -1) + other

    def code(self) -> str:
        """Source text: sum of var * coef plus the constant (sizes known at run time as expressions)."""
        out = ""
        for i, (v, c) in enumerate(self.terms):
            neg = isinstance(c, int) and c < 0
            mag = -c if neg else c
            out += (f" {'-' if neg else '+'} " if i else ("-" if neg else "")) + v
            if mag != 1:
                out += f" * {size_code(mag)}"
        if not self.terms:
            return size_code(self.const)
        if isinstance(self.const, Sym):
            return out + f" + {self.const.code()}"
        if self.const > 0:
            return out + f" + {self.const}"
        if self.const < 0:
            return out + f" - {-self.const}"
        return out


def linear_offset(coords: Sequence[Affine], strides: Sequence[Size]) -> Affine:
    """sum(coords[d] * strides[d])."""
    total = Affine()
    for c, s in zip(coords, strides):
        total = total + c * (s if isinstance(s, Sym) else int(s))
    return total


def row_major_strides(dims: Sequence[Size]) -> list[Size]:
    strides: list[Size] = [0] * len(dims)
    step: Size = 1
    for d in reversed(range(len(dims))):
        strides[d] = step
        step = size(step * dims[d])
    return strides


def settled(op: str, rng: tuple[int, int] | None) -> bool | None:
    """Whether ``diff op 0`` holds for every value in rng (True), for none (False), or depends (None)."""
    if rng is None:
        return None
    lo, hi = rng
    if op == ">=":
        return True if lo >= 0 else (False if hi < 0 else None)
    if op == "<":
        return True if hi < 0 else (False if lo >= 0 else None)
    if op == "==":
        return True if lo == hi == 0 else (False if lo > 0 or hi < 0 else None)
    raise ValueError(op)
