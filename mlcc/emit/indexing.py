"""Index arithmetic and the statement list of loop kernels.

A coordinate is an ``Affine`` expression over Triton variables (a sum of
``var * coef`` plus a constant) that folds as it is built, so a slice, a
transpose, a broadcast or a reverse costs no statement at all: only divisions
(unravelling a flat index) and loads reach the kernel. ``Body`` collects the
statements that ``templates/loop_ops.py.jinja`` renders, as plain dicts of
numbers, dtype names and mangled variable names; it builds no source text.

Masks say which lanes may touch memory: a variable name is that predicate,
``None`` needs no guard (an address the same for every lane and in bounds), and
``NEVER`` is statically no lane (the caller then skips the read altogether).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

NEVER = False
Mask = str | None | bool  # a predicate variable, None (all lanes) or NEVER


@dataclass(frozen=True)
class Affine:
    terms: tuple[tuple[str, int], ...] = ()  # sorted by variable, no zero coefficients
    const: int = 0

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

    def __add__(self, other: Affine | int) -> Affine:
        if isinstance(other, int):
            return Affine(self.terms, self.const + other)
        coefs = dict(self.terms)
        for v, c in other.terms:
            coefs[v] = coefs.get(v, 0) + c
        return Affine(tuple(sorted((v, c) for v, c in coefs.items() if c != 0)), self.const + other.const)

    def __sub__(self, other: Affine | int) -> Affine:
        return self + (other * -1)

    def __mul__(self, k: int) -> Affine:
        if k == 0:
            return Affine()
        return Affine(tuple((v, c * k) for v, c in self.terms), self.const * k)

    def __rsub__(self, other: int) -> Affine:
        return (self * -1) + other


def linear_offset(coords: Sequence[Affine], strides: Sequence[int]) -> Affine:
    """sum(coords[d] * strides[d])."""
    total = Affine()
    for c, s in zip(coords, strides):
        total = total + c * int(s)
    return total


def row_major_strides(dims: Sequence[int]) -> list[int]:
    strides, step = [0] * len(dims), 1
    for d in reversed(range(len(dims))):
        strides[d] = step
        step *= dims[d]
    return strides


_HOLDS = {">=": lambda d: d >= 0, "<": lambda d: d < 0, "==": lambda d: d == 0}


class Body:
    """Statements of a kernel body, each a dict with ``kind``, ``out`` and ``depth``."""

    def __init__(self, index_dtype: str, block_vars: Sequence[str]) -> None:
        self.index_dtype = index_dtype
        self.stmts: list[dict[str, Any]] = []
        self.depth = 0
        self._block: set[str] = set(block_vars)
        self._counts: dict[str, int] = {}
        self._bounds: dict[str, tuple[int, int]] = {}  # inclusive value ranges, in the lanes that store

    def fresh(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}{n}"

    def add(self, kind: str, out: str | None, block: bool, **fields: Any) -> str | None:
        self.stmts.append({"kind": kind, "out": out, "depth": self.depth, **fields})
        if out is not None and block:
            self._block.add(out)
        return out

    def is_block(self, *items: Affine | str | None | bool) -> bool:
        """Whether any of these is a block (one value per lane) rather than a scalar."""
        for item in items:
            if isinstance(item, Affine):
                if any(v in self._block for v, _ in item.terms):
                    return True
            elif isinstance(item, str) and item in self._block:
                return True
        return False

    # ---- index arithmetic
    def bound(self, name: str, lo: int, hi: int) -> None:
        """Declare lo <= name <= hi (in every lane whose result is stored)."""
        self._bounds[name] = (lo, hi)

    def range(self, a: Affine) -> tuple[int, int] | None:
        """Bounds of a's value, when every variable in it has bounds."""
        lo = hi = a.const
        for v, c in a.terms:
            if v not in self._bounds:
                return None
            vlo, vhi = self._bounds[v]
            lo, hi = lo + min(c * vlo, c * vhi), hi + max(c * vlo, c * vhi)
        return lo, hi

    def materialize(self, a: Affine) -> Affine:
        """a as one variable (a constant stays a constant)."""
        if a.is_const or a.single_var is not None:
            return a
        out = self.add("index", self.fresh("i"), self.is_block(a), expr=a)
        rng = self.range(a)
        if rng is not None:
            self.bound(out, *rng)
        return Affine.var(out)

    def divmod(self, a: Affine, k: int) -> tuple[Affine, Affine]:
        """(a // k, a % k) for a >= 0; by bounds alone where they settle it (a = q * k + r, 0 <= r < k)."""
        multiples = Affine(tuple((v, c // k) for v, c in a.terms if c % k == 0), a.const // k)
        rest = Affine(tuple((v, c) for v, c in a.terms if c % k != 0), a.const % k)
        rng = self.range(rest)
        if rng is not None and 0 <= rng[0] and rng[1] < k:
            return multiples, rest
        x = self.materialize(a).single_var
        block = self.is_block(x)
        q = self.add("div", self.fresh("q"), block, x=x, k=k)
        r = self.add("mod", self.fresh("r"), block, x=x, k=k)
        self.bound(r, 0, k - 1)
        rng = self.range(a)
        if rng is not None and rng[0] >= 0:
            self.bound(q, rng[0] // k, rng[1] // k)
        return Affine.var(q), Affine.var(r)

    def unravel(self, flat: Affine, dims: Sequence[int]) -> list[Affine]:
        """Coordinates (major to minor, row-major) of a flat index below prod(dims)."""
        coords = [Affine()] * len(dims)
        sized = [i for i, d in enumerate(dims) if d != 1]
        rest = flat
        for i in reversed(sized[1:]):
            rest, coords[i] = self.divmod(rest, dims[i])
        if sized:
            coords[sized[0]] = rest
        return coords

    def mask(self, base: Mask, clauses: Sequence[tuple[Affine, str, Affine | int]]) -> Mask:
        """base & every clause (lhs op rhs, op in >=, <, ==), folding the constant ones."""
        if base is NEVER:
            return NEVER
        kept = []
        for lhs, op, rhs in clauses:
            rhs = rhs if isinstance(rhs, Affine) else Affine(const=rhs)
            diff = lhs - rhs
            if diff.is_const:
                if not _HOLDS[op](diff.const):
                    return NEVER
                continue
            kept.append((lhs, op, rhs))
        if not kept:
            return base
        kept = [c if self.is_block(c[0], c[2]) else self._lane_clause(*c) for c in kept]
        return self.add("mask", self.fresh("m"), True, base=base, clauses=kept)

    def _lane_clause(self, lhs: Affine, op: str, rhs: Affine) -> tuple[Affine, str, Affine]:
        """A clause over scalars (an index read once for all lanes) as one over a block: lhs - rhs
        broadcast, compared with 0. A mask is always a block: Triton's interpreter rejects a scalar
        predicate as a load's mask, and and-ed with a block mask it comes out mistyped."""
        diff = self.materialize(lhs - rhs)
        lanes = self.add("broadcast", self.fresh("i"), True, x=diff.single_var)
        rng = self.range(diff)
        if rng is not None:
            self.bound(lanes, *rng)
        return Affine.var(lanes), op, Affine()

    def index_value(self, x: str, dtype: str, block: bool, wrap: int | None,
                    lo: int | None, hi: int | None) -> Affine:
        """An index read from data: widened, negatives wrapped by ``wrap``, clamped to [lo, hi]."""
        work = dtype if dtype in ("s64", "u64") else ("s64" if dtype == "u32" else self.index_dtype)
        if dtype.startswith("u"):
            wrap = None
        out = self.add("index_value", self.fresh("j"), block, x=x, src=dtype, work=work,
                       index=self.index_dtype, wrap=wrap, lo=lo, hi=hi)
        if lo is not None and hi is not None:
            self.bound(out, lo, hi)
        return Affine.var(out)

    # ---- control flow
    def loop(self, count: int) -> Affine:
        """Open ``for u in range(count)``; statements until end_loop() form its body."""
        u = self.add("for", self.fresh("u"), False, count=count)
        self.depth += 1
        if self.index_dtype == "s64":
            u = self.add("widen", self.fresh("u"), False, x=u, index=self.index_dtype)
        self.bound(u, 0, count - 1)
        return Affine.var(u)

    def end_loop(self) -> None:
        self.depth -= 1

    # ---- cleanup
    def live(self, keep: Collection[str] = ()) -> list[dict[str, Any]]:
        """The statements minus those whose result nothing reads (no store, no variable in keep),
        and loops left empty."""
        needed: set[str] = set(keep)
        live = [False] * len(self.stmts)
        for i in reversed(range(len(self.stmts))):
            s = self.stmts[i]
            if s["kind"] == "store" or (s["kind"] != "for" and s["out"] in needed):
                live[i] = True
                needed.update(_reads(s))
        for i, s in enumerate(self.stmts):
            if s["kind"] == "for":
                j = i + 1
                while j < len(self.stmts) and self.stmts[j]["depth"] > s["depth"]:
                    live[i] = live[i] or live[j]
                    j += 1
        return [s for s, keep in zip(self.stmts, live) if keep]


_NOT_VARIABLES = {"kind", "out", "depth", "op", "variant", "category", "dtype", "utype", "stype", "src", "dst",
                  "work", "index", "ptr"}


def _reads(stmt: dict[str, Any]) -> set[str]:
    names: set[str] = set()

    def visit(v: Any) -> None:
        if isinstance(v, str):
            names.add(v)
        elif isinstance(v, Affine):
            names.update(name for name, _ in v.terms)
        elif isinstance(v, (list, tuple)):
            for item in v:
                visit(item)

    for key, value in stmt.items():
        if key not in _NOT_VARIABLES:
            visit(value)
    return names
