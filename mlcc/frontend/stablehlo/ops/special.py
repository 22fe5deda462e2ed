"""CHLO special functions built from existing ops: erfc, lgamma, digamma, erf_inv, next_after.

The formulas are the ones CHLO's own decompositions use (XLA's): Lanczos' approximation
(g = 7, 9 terms) for lgamma and digamma with reflection below 1/2, Giles' polynomials for
erf_inv (in f64 followed by two Newton steps on erf), and bit arithmetic for next_after.
f16 and bf16 operands are computed in f32 and rounded once at the end, as XLA does.
"""

from __future__ import annotations

import math

import numpy as np

from mlcc.frontend.stablehlo.importer import Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.ir import DTYPE_BYTES, Instruction

HALF = ("f16", "bf16")
LANCZOS_G = 7.0
LANCZOS_BASE = 0.99999999999980993227684700473478
LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
           771.3234287776530788486528258894, -176.61502916214059906584551354, 12.507343278686904814458936853,
           -0.13857109526572011689554707, 9.984369578019570859563e-6, 1.50563273514931155834e-7)
ERF_INV_SMALL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                 -0.00417768164, 0.246640727, 1.50140941)
ERF_INV_LARGE = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                 0.00943887047, 1.00167406, 2.83297682)


class Math:
    """Elementwise arithmetic on one shape and float type, with constants broadcast."""

    def __init__(self, cx: Context, like: Instruction) -> None:
        self.cx, self.b = cx, cx.b
        self.dtype, self.dims = like.shape.dtype, tuple(like.shape.dims)

    def c(self, v: float) -> Instruction:
        return self.b.splat(v, self.dtype, self.dims)

    def op(self, name: str, *xs: Instruction | float) -> Instruction:
        return self.b.op(name, [x if isinstance(x, Instruction) else self.c(x) for x in xs])

    def add(self, a, b): return self.op("add", a, b)  # noqa: E704
    def sub(self, a, b): return self.op("subtract", a, b)  # noqa: E704
    def mul(self, a, b): return self.op("multiply", a, b)  # noqa: E704
    def div(self, a, b): return self.op("divide", a, b)  # noqa: E704

    def cmp(self, a, b, direction: str) -> Instruction:
        return self.b.op("compare", [a if isinstance(a, Instruction) else self.c(a),
                                     b if isinstance(b, Instruction) else self.c(b)], direction=direction)

    def where(self, p, a, b) -> Instruction:
        return self.op("select", p, a, b)

    def horner(self, coefficients, w: Instruction) -> Instruction:
        p = self.c(coefficients[0])
        for k in coefficients[1:]:
            p = self.add(self.mul(p, w), k)
        return p


def _widened(cx: Context, x: Instruction) -> Instruction:
    return cx.b.convert(x, "f32") if x.shape.dtype in HALF else x


def _narrowed(cx: Context, x: Instruction, dtype: str) -> Instruction:
    return cx.b.convert(x, dtype) if x.shape.dtype != dtype else x


def _float_operand(cx: Context, op: Op, x: Instruction) -> None:
    if x.shape.dtype not in ("f16", "bf16", "f32", "f64"):
        raise cx.error(op, f"{op.name} takes a float operand, not {x.shape.dtype}")


# ---------------------------------------------------------------- erfc
@stablehlo_op("chlo.erfc")
def import_erfc(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """In f64, rounded once to the operand's type: 1 - erf(x) below x = 2.5 (erfc(2.5) = 4e-4, so the
    cancellation costs under 3e-13 relative), and from 2.5 on the continued fraction
    exp(-x^2) / (sqrt(pi) (x + (1/2) / (x + (2/2) / (x + (3/2) / ...)))), 40 terms (under 3e-16 relative there).
    1 - erf(x) in the operand's type lost all relative precision where erfc(x) is tiny: f32 gave 0 for
    x > ~3.9 (erfc(4) = 1.5e-8), f16/bf16 were many ulps off; now f32, f16 and bf16 results are math.erfc's
    correctly rounded value but for rare double roundings (f64: within a few hundred ulps below 2.5)."""
    (x,) = args
    _float_operand(cx, op, x)
    wide = cx.b.convert(x, "f64") if x.shape.dtype != "f64" else x
    m = Math(cx, wide)
    direct = m.sub(1.0, m.op("erf", wide))
    far = m.op("maximum", wide, 2.5)  # the fraction where it is taken (and finite where it is not)
    f = far
    for k in range(40, 0, -1):
        f = m.add(far, m.div(k / 2, f))
    tail = m.div(m.op("exp", m.op("negate", m.mul(far, far))), m.mul(f, math.sqrt(math.pi)))
    return _narrowed(cx, m.where(m.cmp(wide, 2.5, "GE"), tail, direct), x.shape.dtype)


# ---------------------------------------------------------------- lgamma and digamma
def _lanczos_parts(m: Math, x: Instruction) -> tuple[Instruction, ...]:
    """(reflect, z, the base plus c_i / (z + i + 1), minus c_i / (z + i + 1)^2, t, log t): Lanczos' sums at x."""
    reflect = m.cmp(x, 0.5, "LT")
    z = m.where(reflect, m.op("negate", x), m.sub(x, 1.0))
    total, num = m.c(LANCZOS_BASE), m.c(0.0)
    for i, coefficient in enumerate(LANCZOS):
        shifted = m.add(z, float(i + 1))
        total = m.add(total, m.div(coefficient, shifted))
        num = m.sub(num, m.div(coefficient, m.mul(shifted, shifted)))
    t = m.add(z, LANCZOS_G + 0.5)
    log_t = m.add(m.op("log-plus-one", m.div(z, LANCZOS_G + 0.5)), math.log(LANCZOS_G + 0.5))
    return reflect, z, total, num, t, log_t


@stablehlo_op("chlo.lgamma")
def import_lgamma(cx: Context, op: Op, args: list[Instruction]) -> Results:
    (x0,) = args
    _float_operand(cx, op, x0)
    x = _widened(cx, x0)
    m = Math(cx, x)
    reflect, z, total, _, t, log_t = _lanczos_parts(m, x)
    log_y = m.add(m.add(m.mul(m.sub(m.add(z, 0.5), m.div(t, log_t)), log_t), m.op("log", total)),
                  0.5 * math.log(2 * math.pi))
    a = m.op("abs", x)
    frac = m.sub(a, m.op("floor", a))
    reduced = m.where(m.cmp(frac, 0.5, "GT"), m.sub(1.0, frac), frac)
    denom = m.op("log", m.op("sin", m.mul(reduced, math.pi)))
    finite = cx.b.op("is-finite", [denom])
    reflection = m.where(finite, m.sub(m.sub(math.log(math.pi), denom), log_y), m.op("negate", denom))
    result = m.where(reflect, reflection, log_y)
    result = m.where(m.cmp(a, np.inf, "EQ"), m.c(np.inf), result)
    return _narrowed(cx, result, x0.shape.dtype)


@stablehlo_op("chlo.digamma")
def import_digamma(cx: Context, op: Op, args: list[Instruction]) -> Results:
    (x0,) = args
    _float_operand(cx, op, x0)
    x = _widened(cx, x0)
    m = Math(cx, x)
    reflect, _, total, num, t, log_t = _lanczos_parts(m, x)
    y = m.sub(m.add(log_t, m.div(num, total)), m.div(LANCZOS_G, t))
    reduced = m.add(x, m.op("abs", m.op("floor", m.add(x, 0.5))))
    angle = m.mul(reduced, math.pi)
    reflection = m.sub(y, m.div(m.mul(m.op("cos", angle), math.pi), m.op("sin", angle)))
    result = m.where(reflect, reflection, y)
    pole = cx.b.op("and", [m.cmp(x, 0.0, "LE"), m.cmp(x, m.op("floor", x), "EQ")])
    return _narrowed(cx, m.where(pole, m.c(np.nan), result), x0.shape.dtype)


# ---------------------------------------------------------------- erf_inv
@stablehlo_op("chlo.erf_inv")
def import_erf_inv(cx: Context, op: Op, args: list[Instruction]) -> Results:
    (x0,) = args
    _float_operand(cx, op, x0)
    x = _widened(cx, x0)
    m = Math(cx, x)
    w = m.op("negate", m.op("log-plus-one", m.op("negate", m.mul(x, x))))
    small = m.horner(ERF_INV_SMALL, m.sub(w, 2.5))
    large = m.horner(ERF_INV_LARGE, m.sub(m.op("sqrt", w), 3.0))
    result = m.mul(m.where(m.cmp(w, 5.0, "LT"), small, large), x)
    if x.shape.dtype == "f64":  # Giles' polynomials are f32-accurate: two Newton steps on erf(r) = x
        for _ in range(2):
            slope = m.mul(m.op("exp", m.op("negate", m.mul(result, result))), 2 / math.sqrt(math.pi))
            result = m.sub(result, m.div(m.sub(m.op("erf", result), x), slope))
    one = m.cmp(m.op("abs", x), 1.0, "EQ")
    result = m.where(one, m.mul(x, np.inf), result)
    return _narrowed(cx, result, x0.shape.dtype)


# ---------------------------------------------------------------- next_after
@stablehlo_op("chlo.next_after")
def import_next_after(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """The float after x in the direction of y: x's bits plus one (away from zero) or minus one (toward it)."""
    x, y = args
    _float_operand(cx, op, x)
    width = 8 * DTYPE_BYTES[x.shape.dtype]
    bits_type = f"s{width}"
    b = cx.b
    dims = tuple(x.shape.dims)
    m = Math(cx, x)
    xb = b.op("bitcast-convert", [x], x.shape.with_dtype(bits_type))
    yb = b.op("bitcast-convert", [y], y.shape.with_dtype(bits_type))
    sign_mask = b.splat(-(1 << (width - 1)), bits_type, dims)
    one = b.splat(1, bits_type, dims)
    away = b.op("compare", [m.cmp(y, x, "GT"), m.cmp(x, 0.0, "GT")], direction="EQ")
    stepped = b.op("select", [away, b.op("add", [xb, one]), b.op("subtract", [xb, one])])
    from_zero = b.op("or", [b.op("and", [yb, sign_mask]), one])  # the smallest subnormal with y's sign
    stepped = b.op("select", [m.cmp(x, 0.0, "EQ"), from_zero, stepped])
    result = b.op("bitcast-convert", [stepped], x.shape)
    result = m.where(m.cmp(x, y, "EQ"), y, result)
    nan = b.op("or", [m.cmp(x, x, "NE"), m.cmp(y, y, "NE")])
    return m.where(nan, m.c(np.nan), result)


# ---------------------------------------------------------------- bessel_i1e
@stablehlo_op("chlo.bessel_i1e")
def import_bessel_i1e(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """exp(-|x|) I1(x), odd in x. Below |x| = 2, I1's power series; then (1/2pi) times the integral over a
    period of exp(|x| (cos t - 1)) cos t by the trapezoidal rule on M points (exact up to Fourier modes of
    order M, negligible below the crossover); above it Hankel's asymptotic series (f32: M = 64, from 30 on;
    f64: M = 128, from 100 on)."""
    (x0,) = args
    _float_operand(cx, op, x0)
    x = _widened(cx, x0)
    m = Math(cx, x)
    wide = x.shape.dtype == "f64"
    points, crossover, terms = (128, 100.0, 14) if wide else (64, 30.0, 8)
    a = m.op("abs", x)
    near = m.op("minimum", a, crossover)  # keeps exp finite where the series is used instead
    total = m.c(0.0)
    for k in range(points // 2 + 1):
        c = math.cos(2 * math.pi * k / points)
        weight = (1.0 if k in (0, points // 2) else 2.0) / points
        total = m.add(total, m.mul(m.op("exp", m.mul(near, c - 1.0)), weight * c))
    far = m.op("maximum", a, crossover)
    series, term = m.c(1.0), m.c(1.0)
    inv8x = m.div(1.0, m.mul(far, 8.0))
    for k in range(1, terms + 1):  # ((2k-1)^2 - 4) / (k 8x) times the previous term
        term = m.mul(term, m.mul(inv8x, ((2 * k - 1) ** 2 - 4.0) / k))
        series = m.add(series, term)
    asymptotic = m.mul(series, m.op("rsqrt", m.mul(far, 2 * math.pi)))
    small = m.op("minimum", a, 2.0)  # below 2 the sum cancels: I1's power series, every term positive
    y = m.mul(m.mul(small, small), 0.25)
    term = power = m.mul(small, 0.5)
    for k in range(1, 14):
        term = m.mul(term, m.mul(y, 1.0 / (k * (k + 1))))
        power = m.add(power, term)
    power = m.mul(power, m.op("exp", m.op("negate", small)))
    magnitude = m.where(m.cmp(a, crossover, "LT"), m.where(m.cmp(a, 2.0, "LT"), power, total), asymptotic)
    result = m.where(m.cmp(x, 0.0, "LT"), m.op("negate", magnitude), magnitude)
    return _narrowed(cx, result, x0.shape.dtype)
