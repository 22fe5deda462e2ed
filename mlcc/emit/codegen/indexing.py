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
from typing import Any, Union

from mlcc.hlo.symbolic import Sym, current_ranges
from mlcc.hlo.symbolic import number as size  # x with a constant Sym as its int

NEVER = False
Mask = str | None | bool  # a predicate variable, None (all lanes) or NEVER
Size = Union[int, Sym]  # a coefficient or constant: an int, or a size known only at run time (a kernel argument)

def interval(x: Size) -> tuple[int, int]:
    """The values x takes (a symbolic size over its symbols' ranges)."""
    if isinstance(x, Sym):
        return x.bounds(current_ranges())
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


def _settled(op: str, rng: tuple[int, int] | None) -> bool | None:
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
        lo, hi = interval(a.const)
        for v, c in a.terms:
            if v not in self._bounds:
                return None
            vlo, vhi = self._bounds[v]
            clo, chi = interval(c)
            corners = (clo * vlo, clo * vhi, chi * vlo, chi * vhi)
            lo, hi = lo + min(corners), hi + max(corners)
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

    def divmod(self, a: Affine, k: Size) -> tuple[Affine, Affine]:
        """(a // k, a % k) for a >= 0; by bounds alone where they settle it (a = q * k + r, 0 <= r < k).
        A symbolic k counts only by the range of values it takes: the split must hold for each."""
        k = size(k)
        kept = [(v, c, exact_quotient(c, k)) for v, c in a.terms]
        const_q = exact_quotient(a.const, k)
        if isinstance(k, int) and isinstance(a.const, int):
            const_q, const_r = a.const // k, a.const % k
        else:
            const_r = 0 if const_q is not None else a.const
            const_q = const_q if const_q is not None else 0
        multiples = Affine(tuple((v, q) for v, _, q in kept if q is not None), const_q)
        rest = Affine(tuple((v, c) for v, c, q in kept if q is None), const_r)
        rng = self.range(rest)
        klo, khi = interval(k)
        if rng is not None and 0 <= rng[0] and rng[1] < klo:
            return multiples, rest
        x = self.materialize(a).single_var
        block = self.is_block(x)
        q = self.add("div", self.fresh("q"), block, x=x, k=size_code(k))
        r = self.add("mod", self.fresh("r"), block, x=x, k=size_code(k))
        self.bound(r, 0, khi - 1)
        rng = self.range(a)
        if rng is not None and rng[0] >= 0 and klo > 0:
            self.bound(q, rng[0] // khi, rng[1] // klo)
        return Affine.var(q), Affine.var(r)

    def unravel(self, flat: Affine, dims: Sequence[Size]) -> list[Affine]:
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
            settled = _settled(op, interval(diff.const)) if diff.is_const else None
            if settled is False:
                return NEVER
            if settled is True:
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

    def index_value(self, x: str, dtype: str, block: bool, wrap: Size | None,
                    lo: Size | None, hi: Size | None) -> Affine:
        """An index read from data: widened, negatives wrapped by ``wrap``, clamped to [lo, hi]."""
        work = dtype if dtype in ("s64", "u64") else ("s64" if dtype == "u32" else self.index_dtype)
        if dtype.startswith("u"):
            wrap = None
        code = {k: None if v is None else size_code(size(v)) for k, v in (("wrap", wrap), ("lo", lo), ("hi", hi))}
        out = self.add("index_value", self.fresh("j"), block, x=x, src=dtype, work=work,
                       index=self.index_dtype, **code)
        if lo is not None and hi is not None:
            self.bound(out, interval(size(lo))[0], interval(size(hi))[1])
        return Affine.var(out)

    # ---- control flow
    def loop(self, count: Size) -> Affine:
        """Open ``for u in range(count)``; statements until end_loop() form its body."""
        u = self.add("for", self.fresh("u"), False, count=size_code(count))
        self.depth += 1
        if self.index_dtype == "s64":
            u = self.add("widen", self.fresh("u"), False, x=u, index=self.index_dtype)
        self.bound(u, 0, interval(count)[1] - 1)
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
