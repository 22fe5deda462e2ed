"""GELU from its erf and tanh forms, in the arrangements exporters produce.

    erf:   0.5 * x * (1 + erf(x / sqrt(2)))
    tanh:  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

The outer product is matched as a set of factors (any association and order, the
0.5 anywhere, also ``x * (0.5 + 0.5 * erf(...))``); x^3 may be ``pow(x, 3)`` (which
algsimp turns into ``x * x * x``) and the tanh argument may be written
``k * x * (1 + 0.044715 * x * x)`` or ``k * x + k * 0.044715 * x^3``.
Constants must match to a few ulps of the dtype.
"""

from __future__ import annotations

import math

from mlcc.hlo.ir import Instruction, Module, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, op, scalar_value
from mlcc.hlo.passes.recognize.common import Product, flatten_product, near

SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
CUBIC = 0.044715


def _power_of(f: Instruction, x: Instruction, module: Module | None) -> int | None:
    """n when f == x^n: x itself, or power(x, n) for a whole n >= 1."""
    if f is x:
        return 1
    if f.opcode == "power" and f.operands[0] is x:
        n = scalar_value(f.operands[1], module)
        if isinstance(n, (int, float)) and not isinstance(n, bool) and n == int(n) and n >= 1:
            return int(n)
    return None


def _monomial(v: Instruction, x: Instruction, module: Module | None) -> tuple[float, int] | None:
    """(c, n) when v == c * x^n (n >= 1), as a product of factors of x."""
    n = _power_of(v, x, module)
    if n is not None:
        return 1.0, n
    p = flatten_product(v, module)
    powers = [_power_of(f, x, module) for f in p.numerators]
    if p.denominators or not powers or any(k is None for k in powers):
        return None
    return p.coefficient, sum(powers)


def _sum_of_monomials(v: Instruction, x: Instruction, module: Module | None) -> dict[int, float] | None:
    """{n: c} when v == sum of c * x^n terms (a constant term is n = 0)."""
    if v is x:
        return {1: 1.0}
    if v.opcode == "add":
        a = _sum_of_monomials(v.operands[0], x, module)
        b = _sum_of_monomials(v.operands[1], x, module)
        if a is None or b is None or set(a) & set(b):
            return None
        return {**a, **b}
    c = scalar_value(v, module)
    if c is not None and not isinstance(c, bool):
        return {0: float(c)}
    term = _monomial(v, x, module)
    return None if term is None else {term[1]: term[0]}


def _polynomial(v: Instruction, x: Instruction, module: Module | None) -> dict[int, float] | None:
    """v as a polynomial in x, for products of one sum and powers of x: {power: coefficient}."""
    direct = _sum_of_monomials(v, x, module)
    if direct is not None:
        return direct
    p = flatten_product(v, module)
    if p.denominators:
        return None
    sums = [f for f in p.numerators if f is not x]
    shift = len(p.numerators) - len(sums)
    if len(sums) != 1:
        return None
    inner = _sum_of_monomials(sums[0], x, module)
    if inner is None:
        return None
    return {n + shift: c * p.coefficient for n, c in inner.items()}


def _inner_matches(t: Instruction, x: Instruction, module: Module | None) -> str | None:
    """'none' or 'tanh' when t is erf(x/sqrt2) or tanh(sqrt(2/pi) (x + 0.044715 x^3))."""
    dtype = x.shape.dtype
    if t.opcode not in ("erf", "tanh"):
        return None
    poly = _polynomial(t.operands[0], x, module)
    if poly is None:
        return None
    if t.opcode == "erf":
        return "none" if set(poly) == {1} and near(poly[1], SQRT_HALF, dtype) else None
    if set(poly) != {1, 3} or not near(poly[1], SQRT_2_OVER_PI, dtype):
        return None
    return "tanh" if near(poly[3] / poly[1], CUBIC, dtype) else None


def _one_plus(f: Instruction, module: Module | None) -> tuple[float, Instruction] | None:
    """(c, t) when f == c * (1 + t), written 1 + t or c + c * t."""
    if f.opcode != "add":
        return None
    for a, b in (f.operands, reversed(f.operands)):
        c = scalar_value(a, module)
        if c is None or isinstance(c, bool) or c == 0:
            continue
        p = flatten_product(b, module)
        if len(p.numerators) == 1 and not p.denominators and near(p.coefficient, c, f.shape.dtype):
            return float(c), p.numerators[0]
    return None


def _gelu(rw: Rewriter, m: Match) -> Instruction | None:
    root = m.root
    if not is_float(root.shape.dtype):
        return None
    p: Product = flatten_product(root, rw.module)
    if p.denominators or len(p.numerators) != 2:
        return None
    for x, f in (p.numerators, reversed(p.numerators)):
        found = _one_plus(f, rw.module)
        if found is None:
            continue
        c, t = found
        approximate = _inner_matches(t, x, rw.module)
        if approximate is not None and near(p.coefficient * c, 0.5, root.shape.dtype):
            return rw.op("gelu", [x], approximate=approximate)
    return None


RULES = [Rule("gelu", op("multiply"), _gelu)]


class RecognizeGelu(RewritePass):
    def __init__(self) -> None:
        super().__init__("recognize-gelu", RULES)
