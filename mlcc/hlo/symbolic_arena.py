"""Arena offsets as expressions, for buffers whose size grows with a symbol that has no upper end.

A module whose symbols all have ranges plans its arena at the top of the ranges, in numbers
(mlcc/hlo/buffer_assignment.py). A symbol given no range (``Module.unbounded``) has no top: a buffer
of ``256*seq`` bytes has no largest size, so no number can be its neighbour's offset. The rule:

1. Buffers whose size does not grow with an unbounded symbol are placed first, by the numeric plan,
   in ``[0, F)``: their offsets are numbers, as in a ranged build.
2. The others are placed above F. The numeric plan, run at the planned sizes (each unbounded symbol at
   DEFAULT_SIZE), decides only their *order*: for two that are live at once, the one placed lower stays
   below the other at every size.
3. Each one's offset is then the longest path below it: ``F`` or, over the buffers live with it and
   ordered below it, the largest ``offset + aligned size``, kept as an expression. A buffer's offset is
   at least the end of every buffer below it that it overlaps in time, at every value of the symbols,
   so no two live buffers ever share a byte; at the planned sizes it is never above the numeric plan's.

Expressions are maxima of sums: each term a polynomial in the symbols, or the aligned size of a buffer
(``cdiv(8*seq, 256)*256``) when the polynomial is not a multiple of the alignment. A term is dropped
when another is at least as large at every size (coefficient by coefficient, as every symbol is >= 0),
so an expression holds only the terms that can be the largest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from mlcc.bundle.layout import ALIGNMENT, align
from mlcc.bundle.sizes import call
from mlcc.hlo.symbolic import Sym


@dataclass(frozen=True)
class Term:
    """poly + sum(count * align(size) for size, count in aligned): a sum of buffers' aligned sizes."""
    poly: Sym = field(default_factory=Sym)
    aligned: tuple[tuple[str, int], ...] = ()  # (a size's canonical text, how many times), sorted

    def plus(self, size: Sym) -> "Term":
        """self + align(size)."""
        if all(c % ALIGNMENT == 0 for c in size.terms.values()):
            return Term(self.poly + size, self.aligned)
        counts = dict(self.aligned)
        counts[str(size)] = counts.get(str(size), 0) + 1
        return Term(self.poly, tuple(sorted(counts.items())))

    def covers(self, other: "Term") -> bool:
        """self >= other for every value of the symbols (all >= 0): term by term."""
        counts = dict(self.aligned)
        return (all(c >= 0 for c in (self.poly - other.poly).terms.values())
                and all(counts.get(s, 0) >= n for s, n in other.aligned))

    def text(self) -> str:
        parts = [] if not self.poly and self.aligned else [str(self.poly)]
        for s, n in self.aligned:
            parts.append(("" if n == 1 else f"{n}*") + f"{call('cdiv', s, ALIGNMENT)}*{ALIGNMENT}")
        return " + ".join(parts)


def _max_of(terms: list[Term]) -> list[Term]:
    """The terms none of the others covers (one of equal ones), in a stable order."""
    kept: list[Term] = []
    for t in sorted(set(terms), key=lambda t: (t.text())):
        if any(k.covers(t) for k in kept):
            continue
        kept = [k for k in kept if not t.covers(k)] + [t]
    return sorted(kept, key=lambda t: t.text())


def expression(terms: list[Term]) -> int | str:
    """The maximum of terms as a size the bundle writes: a number when it is one."""
    terms = _max_of(terms)
    if len(terms) == 1 and terms[0].poly.is_const and not terms[0].aligned:
        return terms[0].poly.value
    texts = [t.text() for t in terms]
    return texts[0] if len(texts) == 1 else call("max", *texts)


@dataclass
class Chain:
    """Buffers that share bytes (an in-place chain), live from first to last, ``size`` bytes at most."""
    name: str
    size: Sym
    first: int
    last: int
    planned_offset: int  # where the numeric plan at the planned sizes put it (its order only is kept)


def place_symbolic(chains: list[Chain], base: int) -> tuple[dict[str, int | str], int | str]:
    """Each chain's offset (by name) and the arena's size, as expressions, above ``base`` bytes."""
    order = sorted(chains, key=lambda c: (c.planned_offset, c.name))
    tops: dict[str, list[Term]] = {}  # chain -> the terms of its offset + aligned size
    offsets: dict[str, int | str] = {}
    done: list[Chain] = []
    for c in order:
        below = [t for d in done if d.first <= c.last and c.first <= d.last and d.planned_offset < c.planned_offset
                 for t in tops[d.name]]
        start = _max_of(below + [Term(Sym.const(align(base)))])
        offsets[c.name] = expression(start)
        tops[c.name] = _max_of([t.plus(c.size) for t in start])
        done.append(c)
    arena = expression([t for c in done for t in tops[c.name]] + [Term(Sym.const(base))])
    return offsets, arena

