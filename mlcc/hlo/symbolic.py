"""Symbolic sizes: polynomials with integer coefficients over named dims.

A dim of a Shape is an int or a symbolic expression kept as its canonical text
(``seq``, ``4*seq``, ``seq*seq``, ``past+seq``), so shapes stay hashable and
print as XLA-style text; ``Sym`` is the arithmetic form. Every symbol is a
non-negative size bound at run time; a module records each one's range
(``Module.symbols``), and decisions that depend on a size (tiles, arena
offsets) use the range's upper end. A symbol given no range is planned at
DEFAULT_SIZE (its entry in ``Module.symbols`` is (0, DEFAULT_SIZE)) and named in
``Module.unbounded``: tiles are chosen for that size, but nothing that must hold
at every size (index arithmetic, masks, buffer sizes) may rely on it; those use
``sound_ranges``, where it reaches SYMBOL_MAX. Pure Python: the runtime evaluates the same
expressions a bundle's manifest holds, with no compiler module imported.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from mlcc.bundle.sizes import SizeError, eval_size

Monomial = tuple[str, ...]  # symbol names, sorted, repeated for powers; () is the constant term

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")


# A symbol given no range: tiles are chosen as if it were DEFAULT_SIZE. Small on purpose: the sizes a dynamic
# dim takes most (a batch, a prompt) are short, a tile chosen for a short size still covers a long one with
# more programs (every template loops or launches over the rest), and a tile chosen for a long size wastes
# most of its lanes at a short one. The shared tiny models' position tables (64 rows) reach past it.
DEFAULT_SIZE = 32
# The largest value any symbol takes at run time: kernels receive sizes as 32-bit arguments.
SYMBOL_MAX = 2**31 - 1


class SymbolicError(ValueError):
    pass


class Sym:
    """An integer polynomial over symbols. Immutable; == and hash are structural (canonical form)."""

    __slots__ = ("terms",)

    def __init__(self, terms: Mapping[Monomial, int] | None = None) -> None:
        self.terms: dict[Monomial, int] = {m: c for m, c in sorted((terms or {}).items()) if c != 0}

    @staticmethod
    def symbol(name: str) -> "Sym":
        return Sym({(name,): 1})

    @staticmethod
    def const(value: int) -> "Sym":
        return Sym({(): int(value)})

    # ---- queries
    @property
    def is_const(self) -> bool:
        return all(m == () for m in self.terms)

    @property
    def value(self) -> int:
        """The constant value; SymbolicError if this depends on a symbol."""
        if not self.is_const:
            raise SymbolicError(f"'{self}' is not a constant")
        return self.terms.get((), 0)

    def symbols(self) -> list[str]:
        return sorted({s for m in self.terms for s in m})

    def evaluate(self, env: Mapping[str, int]) -> int:
        total = 0
        for m, c in self.terms.items():
            v = c
            for s in m:
                if s not in env:
                    raise SymbolicError(f"no value for '{s}'")
                v *= int(env[s])
            total += v
        return total

    def bounds(self, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
        """Inclusive (lo, hi) over every symbol in its range (ranges are of non-negative values)."""
        lo = hi = 0
        for m, c in self.terms.items():
            mlo = mhi = 1
            for s in m:
                if s not in ranges:
                    raise SymbolicError(f"no range for '{s}'")
                a, b = ranges[s]
                mlo, mhi = mlo * a, mhi * b
            lo += min(c * mlo, c * mhi)
            hi += max(c * mlo, c * mhi)
        return lo, hi

    # ---- arithmetic
    def __add__(self, other: "Sym | int") -> "Sym":
        other = as_sym(other)
        terms = dict(self.terms)
        for m, c in other.terms.items():
            terms[m] = terms.get(m, 0) + c
        return Sym(terms)

    __radd__ = __add__

    def __neg__(self) -> "Sym":
        return Sym({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: "Sym | int") -> "Sym":
        return self + (-as_sym(other))

    def __rsub__(self, other: "Sym | int") -> "Sym":
        return as_sym(other) - self

    def __mul__(self, other: "Sym | int") -> "Sym":
        other = as_sym(other)
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2))
                terms[m] = terms.get(m, 0) + c1 * c2
        return Sym(terms)

    __rmul__ = __mul__

    def exact_div(self, other: "Sym | int") -> "Sym | None":
        """self / other when it divides exactly for every value of the symbols (other a monomial times an int)."""
        other = as_sym(other)
        if len(other.terms) != 1:
            return Sym.const(1) if other == self else None
        (om, oc), = other.terms.items()
        if oc == 0:
            return None
        out: dict[Monomial, int] = {}
        for m, c in self.terms.items():
            rest = list(m)
            for s in om:
                if s not in rest:
                    return None
                rest.remove(s)
            if c % oc:
                return None
            out[tuple(rest)] = c // oc
        return Sym(out)

    def __floordiv__(self, other: "Sym | int") -> "Sym":
        q = self.exact_div(other)
        if q is not None:
            return q
        other = as_sym(other)
        if other.is_const and other.value > 0:
            k = other.value
            # (k*a + r) // k == a + r // k when every non-constant coefficient is a multiple of k
            if all(c % k == 0 for m, c in self.terms.items() if m):
                return Sym({m: c // k for m, c in self.terms.items()})
        raise SymbolicError(f"'{self}' // '{other}' is not a polynomial")

    def __mod__(self, other: "Sym | int") -> "Sym":
        other = as_sym(other)
        if self.exact_div(other) is not None:
            return Sym()
        if other.is_const and other.value > 0:
            k = other.value
            if all(c % k == 0 for m, c in self.terms.items() if m):
                return Sym.const(self.terms.get((), 0) % k)
        raise SymbolicError(f"'{self}' % '{other}' is not a polynomial")

    # ---- identity
    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            return self.is_const and self.value == other
        return isinstance(other, Sym) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(tuple(self.terms.items()))

    def __bool__(self) -> bool:
        return bool(self.terms)

    def __str__(self) -> str:
        """The canonical IR text (``4*seq``), everywhere: kernel source text is code(), asked for by name."""
        return _format(self.terms, lambda s: s)

    def __format__(self, spec: str) -> str:  # f-strings print the canonical text, as str() does
        return format(str(self), spec)

    def __repr__(self) -> str:
        return f"Sym({self})"

    def code(self, prefix: str = "sym_") -> str:
        """The expression as source text over kernel parameters named prefix + symbol, parenthesized."""
        return "(" + _format(self.terms, lambda s: prefix + s, sep=" ") + ")"


def _format(terms: Mapping[Monomial, int], name, sep: str = "") -> str:
    if not terms:
        return "0"
    order = sorted(terms.items(), key=lambda mc: (-len(mc[0]), mc[0]))
    out = ""
    for i, (m, c) in enumerate(order):
        factors = [name(s) for s in m]
        mag = abs(c)
        if mag != 1 or not factors:
            factors.insert(0, str(mag))
        text = "*".join(factors)
        if i == 0:
            out = ("-" if c < 0 else "") + text
        else:
            out += f"{sep}{'-' if c < 0 else '+'}{sep}{text}"
    return out


def as_sym(x: "Sym | int | str") -> Sym:
    if isinstance(x, Sym):
        return x
    if isinstance(x, str):
        return parse(x)
    if isinstance(x, bool):
        raise SymbolicError(f"{x!r} is not a size")
    return Sym.const(int(x))


def dim_of(x: "Sym | int | str") -> "int | str":
    """The Shape dim for x: an int when constant, else the canonical expression text."""
    s = as_sym(x)
    return s.value if s.is_const else str(s)


def product(dims: Sequence["int | str | Sym"]) -> "int | str":
    total: Sym = Sym.const(1)
    for d in dims:
        total = total * as_sym(d)
    return dim_of(total)


def number(x: "int | str | Sym") -> "int | Sym":
    """A size to compute with: an int, or a Sym when it depends on a symbol."""
    if isinstance(x, int):
        return x
    s = as_sym(x)
    return s.value if s.is_const else s


def sizes(dims: Sequence["int | str"]) -> tuple["int | Sym", ...]:
    """A shape's dims to compute with (kernels, views): ints, and symbolic ones as Sym."""
    return tuple(number(d) for d in dims)


def strides(dims: Sequence["int | str"], layout: Sequence[int]) -> tuple["int | Sym", ...]:
    """Element strides of each logical dim under a minor-to-major layout, symbolic where a more minor dim is."""
    numbers = sizes(dims)
    out: list[int | Sym] = [0] * len(numbers)
    step: int | Sym = 1
    for d in layout:
        out[d] = step
        step = number(step * numbers[d])
    return tuple(out)


def symbols_of(dims: Sequence["int | str | Sym"]) -> list[str]:
    names: set[str] = set()
    for d in dims:
        if not isinstance(d, int):
            names.update(as_sym(d).symbols())
    return sorted(names)


def evaluate(d: "int | str | Sym", env: Mapping[str, int]) -> int:
    """A dim's value for the symbols' values: a dim's text is evaluated as the runtime evaluates a manifest's
    sizes (mlcc.bundle.sizes, the one grammar of size expressions), a Sym as its polynomial."""
    if isinstance(d, Sym):
        return d.evaluate(env)
    try:
        return eval_size(d, env)
    except SizeError as e:
        raise SymbolicError(str(e)) from None


def upper(d: "int | str | Sym", ranges: Mapping[str, tuple[int, int]]) -> int:
    """The largest value d takes with every symbol in its range."""
    return d if isinstance(d, int) else as_sym(d).bounds(ranges)[1]


def sound_ranges(symbols: Mapping[str, tuple[int, int]], unbounded: "set[str] | frozenset[str]") -> dict[str, tuple[int, int]]:
    """The values each symbol may take at run time: its range, or from its low end up to SYMBOL_MAX when it
    has no upper end (``symbols`` holds the size it was planned at)."""
    return {k: ((lo, SYMBOL_MAX) if k in unbounded else (lo, hi)) for k, (lo, hi) in symbols.items()}


def parse(text: str) -> Sym:
    """An expression of ints, symbol names, +, -, * and parentheses."""
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        tok = m.group(1) or m.group(2) or m.group(3)
        if tok and not tok.isspace():
            tokens.append(tok)
        pos = m.end()
    if not tokens:
        raise SymbolicError(f"empty size expression '{text}'")
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take() -> str:
        nonlocal at
        at += 1
        return tokens[at - 1]

    def atom() -> Sym:
        tok = peek()
        if tok is None:
            raise SymbolicError(f"size expression '{text}' ends early")
        take()
        if tok == "(":
            v = expr()
            if peek() != ")":
                raise SymbolicError(f"unbalanced '(' in '{text}'")
            take()
            return v
        if tok == "-":
            return -atom()
        if tok.isdigit():
            return Sym.const(int(tok))
        if NAME.match(tok):
            return Sym.symbol(tok)
        raise SymbolicError(f"unexpected '{tok}' in size expression '{text}'")

    def term() -> Sym:
        v = atom()
        while peek() == "*":
            take()
            v = v * atom()
        return v

    def expr() -> Sym:
        v = term()
        while peek() in ("+", "-"):
            op = take()
            v = v + term() if op == "+" else v - term()
        return v

    out = expr()
    if at != len(tokens):
        raise SymbolicError(f"unexpected '{tokens[at]}' in size expression '{text}'")
    return out

