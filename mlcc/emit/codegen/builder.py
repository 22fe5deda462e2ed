"""The builder of kernel bodies: typed statements (mlcc/emit/codegen/body.py) added in order, with the
index arithmetic that folds what it can before it costs a statement.

Masks say which lanes may touch memory: a variable name is that predicate,
``None`` needs no guard (an address the same for every lane and in bounds), and
``NEVER`` is statically no lane (the caller then skips the read altogether).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from mlcc.emit.codegen.body import (Broadcast, Div, For, Index, IndexValue, MaskStmt, Mod, Stmt, Store, Widen,
                                    verify_body)
from mlcc.emit.codegen.indexing import (NEVER, Affine, Mask, Ranges, Size, exact_quotient, interval, settled, size, sound,
                                        size_code)


class Body:
    """The statements of a kernel body, in order; ``inputs`` are the variables the template defines before
    it (name: IR dtype), and index arithmetic is in ``index_dtype``; a symbolic size's bounds are over
    ``ranges`` (the module's symbols)."""

    def __init__(self, index_dtype: str, ranges: Ranges) -> None:
        self.index_dtype = index_dtype
        self.ranges = sound(ranges)  # proofs hold at every size the symbols take, not only the planned one
        self.stmts: list[Stmt] = []
        self.inputs: dict[str, str] = {}
        self.depth = 0
        self._block: set[str] = set()
        self._counts: dict[str, int] = {}
        self._bounds: dict[str, tuple[int, int]] = {}  # inclusive value ranges, in the lanes that store

    def fresh(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}{n}"

    def declare(self, name: str, dtype: str, block: bool = True) -> None:
        """A variable the template defines before the body: a block (one value per lane) or a scalar."""
        self.inputs[name] = dtype
        if block:
            self._block.add(name)

    def add(self, kind: type[Stmt], out: str | None, block: bool, **fields: Any) -> str | None:
        """Append a statement of this kind defining out (a block when ``block``) at the current depth."""
        self.stmts.append(kind(out=out, depth=self.depth, **fields))
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
        lo, hi = interval(a.const, self.ranges)
        for v, c in a.terms:
            if v not in self._bounds:
                return None
            vlo, vhi = self._bounds[v]
            clo, chi = interval(c, self.ranges)
            corners = (clo * vlo, clo * vhi, chi * vlo, chi * vhi)
            lo, hi = lo + min(corners), hi + max(corners)
        return lo, hi

    def materialize(self, a: Affine) -> Affine:
        """a as one variable (a constant stays a constant)."""
        if a.is_const or a.single_var is not None:
            return a
        out = self.add(Index, self.fresh("i"), self.is_block(a), expr=a)
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
        klo, khi = interval(k, self.ranges)
        if rng is not None and 0 <= rng[0] and rng[1] < klo:
            return multiples, rest
        x = self.materialize(a).single_var
        block = self.is_block(x)
        q = self.add(Div, self.fresh("q"), block, x=x, k=size_code(k))
        r = self.add(Mod, self.fresh("r"), block, x=x, k=size_code(k))
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
            holds = settled(op, interval(diff.const, self.ranges)) if diff.is_const else None
            if holds is False:
                return NEVER
            if holds is True:
                continue
            kept.append((lhs, op, rhs))
        if not kept:
            return base
        kept = [c if self.is_block(c[0], c[2]) else self._lane_clause(*c) for c in kept]
        return self.add(MaskStmt, self.fresh("m"), True, base=base, clauses=tuple(kept))

    def _lane_clause(self, lhs: Affine, op: str, rhs: Affine) -> tuple[Affine, str, Affine]:
        """A clause over scalars (an index read once for all lanes) as one over a block: lhs - rhs
        broadcast, compared with 0. A mask is always a block: Triton's interpreter rejects a scalar
        predicate as a load's mask, and and-ed with a block mask it comes out mistyped."""
        diff = self.materialize(lhs - rhs)
        lanes = self.add(Broadcast, self.fresh("i"), True, x=diff.single_var)
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
        out = self.add(IndexValue, self.fresh("j"), block, x=x, src=dtype, work=work,
                       index=self.index_dtype, **code)
        if lo is not None and hi is not None:
            self.bound(out, interval(size(lo), self.ranges)[0], interval(size(hi), self.ranges)[1])
        return Affine.var(out)

    # ---- control flow
    def loop(self, count: Size) -> Affine:
        """Open ``for u in range(count)``; statements until end_loop() form its body."""
        u = self.add(For, self.fresh("u"), False, count=size_code(count))
        self.depth += 1
        if self.index_dtype == "s64":
            u = self.add(Widen, self.fresh("u"), False, x=u, index=self.index_dtype)
        self.bound(u, 0, interval(count, self.ranges)[1] - 1)
        return Affine.var(u)

    def end_loop(self) -> None:
        self.depth -= 1

    # ---- cleanup
    def live(self, keep: Collection[str] = ()) -> list[Stmt]:
        """The statements minus those whose result nothing reads (no store, no variable in keep),
        and loops left empty; verified (mlcc/emit/codegen/body.py), so a lowering's slip stops here."""
        needed: set[str] = set(keep)
        live = [False] * len(self.stmts)
        for i in reversed(range(len(self.stmts))):
            s = self.stmts[i]
            if isinstance(s, Store) or (not isinstance(s, For) and s.out in needed):
                live[i] = True
                needed.update(s.reads())
        for i, s in enumerate(self.stmts):
            if isinstance(s, For):
                j = i + 1
                while j < len(self.stmts) and self.stmts[j].depth > s.depth:
                    live[i] = live[i] or live[j]
                    j += 1
        stmts = [s for s, keep in zip(self.stmts, live) if keep]
        verify_body(stmts, self.inputs, self.index_dtype)
        return stmts
