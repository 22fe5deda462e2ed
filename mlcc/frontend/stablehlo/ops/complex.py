"""Complex element types (complex<f32>, complex<f64>) written as real ops on the real and imaginary parts.

The importer binds a complex value to a ``Complex(re, im)`` pair (mlcc/frontend/stablehlo/importer.py); the
rules here build each complex op of the StableHLO spec from real IR ops, with the usual overflow-safe forms:
|z| as max * sqrt(1 + (min/max)^2), division by Smith's scaled formula, the principal square root from |z|
and |re|, tanh from tanh(re) and tan(im). Data movement and add/subtract/negate need no rule here: the
importer applies their real rule to each part (COMPONENTWISE).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcc.frontend.stablehlo.importer import Complex, Context, complex_op, is_complex_type, stablehlo_op
from mlcc.frontend.stablehlo.ops.contraction import import_dot, import_dot_general
from mlcc.frontend.stablehlo.ops.data import int_tuple
from mlcc.frontend.stablehlo.ops.elementwise import total_order_key
from mlcc.frontend.stablehlo.ops.reduction import body_kinds, import_reduce
from mlcc.frontend.stablehlo.ops.windows import reduce_any_body
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.ir import Instruction

Value = Instruction | Complex


# ---------------------------------------------------------------- real helpers
def _op(cx: Context, opcode: str, *args: Instruction, **attrs: Any) -> Instruction:
    return cx.b.op(opcode, list(args), **attrs)


def _const(cx: Context, value: float, like: Instruction) -> Instruction:
    return cx.b.splat(value, like.shape.dtype, like.shape.dims)


def _cmp(cx: Context, a: Instruction, b: Instruction, direction: str) -> Instruction:
    return cx.b.op("compare", [a, b], direction=direction)


def _select(cx: Context, pred: Instruction, a: Instruction, b: Instruction) -> Instruction:
    return cx.b.op("select", [pred, a, b])


def _as_complex(cx: Context, x: Value) -> Complex:
    return x if isinstance(x, Complex) else Complex(x, _const(cx, 0.0, x))


def hypot(cx: Context, a: Instruction, b: Instruction) -> Instruction:
    """sqrt(a^2 + b^2) without overflow or underflow: max * sqrt(1 + (min/max)^2), 0 for 0, inf for inf."""
    ax, bx = _op(cx, "abs", a), _op(cx, "abs", b)
    big, small = _op(cx, "maximum", ax, bx), _op(cx, "minimum", ax, bx)
    zero = _const(cx, 0.0, a)
    ratio = _select(cx, _cmp(cx, big, zero, "EQ"), zero, _op(cx, "divide", small, big))
    r = _op(cx, "multiply", big, _op(cx, "sqrt", _op(cx, "add", _const(cx, 1.0, a), _op(cx, "multiply", ratio, ratio))))
    return _select(cx, _op(cx, "is-inf", big), big, r)


# ---------------------------------------------------------------- complex arithmetic
def mul(cx: Context, x: Complex, y: Complex) -> Complex:
    a, b = x
    c, d = y
    return Complex(_op(cx, "subtract", _op(cx, "multiply", a, c), _op(cx, "multiply", b, d)),
                   _op(cx, "add", _op(cx, "multiply", a, d), _op(cx, "multiply", b, c)))


def div(cx: Context, x: Complex, y: Complex) -> Complex:
    """Smith's formula: divide by the larger of |c|, |d| first, so no intermediate overflows needlessly."""
    a, b = x
    c, d = y
    m = lambda p, q: _op(cx, "multiply", p, q)  # noqa: E731
    r1 = _op(cx, "divide", d, c)  # |c| >= |d|
    den1 = _op(cx, "add", c, m(d, r1))
    re1 = _op(cx, "divide", _op(cx, "add", a, m(b, r1)), den1)
    im1 = _op(cx, "divide", _op(cx, "subtract", b, m(a, r1)), den1)
    r2 = _op(cx, "divide", c, d)  # |d| > |c|
    den2 = _op(cx, "add", m(c, r2), d)
    re2 = _op(cx, "divide", _op(cx, "add", m(a, r2), b), den2)
    im2 = _op(cx, "divide", _op(cx, "subtract", m(b, r2), a), den2)
    first = _cmp(cx, _op(cx, "abs", c), _op(cx, "abs", d), "GE")
    return Complex(_select(cx, first, re1, re2), _select(cx, first, im1, im2))


def exp(cx: Context, z: Complex) -> Complex:
    ea = _op(cx, "exp", z.re)
    return Complex(_op(cx, "multiply", ea, _op(cx, "cos", z.im)), _op(cx, "multiply", ea, _op(cx, "sin", z.im)))


def log(cx: Context, z: Complex) -> Complex:
    return Complex(_op(cx, "log", hypot(cx, z.re, z.im)), _op(cx, "atan2", z.im, z.re))


def sqrt(cx: Context, z: Complex) -> Complex:
    """The principal root: t = sqrt((|z| + |a|) / 2); (t, b / 2t) for a >= 0, else (|b| / 2t, t with b's sign,
    so -x - 0i, below the branch cut, has a negative imaginary root as in C's csqrt)."""
    a, b = z
    zero = _const(cx, 0.0, a)
    t = _op(cx, "sqrt", _op(cx, "multiply", _op(cx, "add", hypot(cx, a, b), _op(cx, "abs", a)), _const(cx, 0.5, a)))
    t2 = _op(cx, "add", t, t)
    tiny = _cmp(cx, t, zero, "EQ")
    other = _select(cx, tiny, zero, _op(cx, "divide", b, t2))
    other_abs = _select(cx, tiny, zero, _op(cx, "divide", _op(cx, "abs", b), t2))
    negative_b = _cmp(cx, _op(cx, "atan2", b, _const(cx, -1.0, b)), zero, "LT")  # b's sign bit: -0 included
    signed_t = _select(cx, negative_b, _op(cx, "negate", t), t)
    nonneg = _cmp(cx, a, zero, "GE")
    return Complex(_select(cx, nonneg, t, other_abs), _select(cx, nonneg, other, signed_t))


def tanh(cx: Context, z: Complex) -> Complex:
    """t = tanh(a), s = tan(b): ((t (1 + s^2), s sech(a)^2) / (1 + t^2 s^2)), finite for large |a|."""
    a, b = z
    one = _const(cx, 1.0, a)
    t, s = _op(cx, "tanh", a), _op(cx, "tan", b)
    sech = _op(cx, "divide", one, _op(cx, "cosh", a))
    den = _op(cx, "add", one, _op(cx, "multiply", _op(cx, "multiply", t, t), _op(cx, "multiply", s, s)))
    re = _op(cx, "divide", _op(cx, "multiply", t, _op(cx, "add", one, _op(cx, "multiply", s, s))), den)
    im = _op(cx, "divide", _op(cx, "multiply", s, _op(cx, "multiply", sech, sech)), den)
    return Complex(re, im)


def _abs(cx: Context, z: Complex) -> Instruction:
    return hypot(cx, z.re, z.im)


def _sign(cx: Context, z: Complex) -> Complex:
    m = _abs(cx, z)
    zero = _const(cx, 0.0, m)
    at_zero = _cmp(cx, m, zero, "EQ")
    return Complex(*(_select(cx, at_zero, zero, _op(cx, "divide", p, m)) for p in z))


def _expm1(cx: Context, z: Complex) -> Complex:
    """(expm1(a) cos b - 2 sin(b/2)^2, e^a sin b): no cancellation near 0."""
    a, b = z
    half = _op(cx, "sin", _op(cx, "multiply", b, _const(cx, 0.5, b)))
    re = _op(cx, "subtract", _op(cx, "multiply", _op(cx, "expm1", a), _op(cx, "cos", b)),
             _op(cx, "multiply", _const(cx, 2.0, a), _op(cx, "multiply", half, half)))
    return Complex(re, _op(cx, "multiply", _op(cx, "exp", a), _op(cx, "sin", b)))


def _log1p(cx: Context, z: Complex) -> Complex:
    """(log|1 + z|, atan2(b, 1 + a)); near 0 the real part is log1p(2a + a^2 + b^2) / 2 (no cancellation)."""
    a, b = z
    one = _const(cx, 1.0, a)
    a1 = _op(cx, "add", one, a)
    near = _op(cx, "multiply", _op(cx, "log-plus-one", _op(cx, "add", _op(cx, "multiply", a, _op(cx, "add", a1, one)),
                                                              _op(cx, "multiply", b, b))), _const(cx, 0.5, a))
    small = _cmp(cx, _op(cx, "maximum", _op(cx, "abs", a), _op(cx, "abs", b)), _const(cx, 0.5, a), "LT")
    return Complex(_select(cx, small, near, _op(cx, "log", hypot(cx, a1, b))), _op(cx, "atan2", b, a1))


def _sine(cx: Context, z: Complex) -> Complex:
    a, b = z
    return Complex(_op(cx, "multiply", _op(cx, "sin", a), _op(cx, "cosh", b)),
                   _op(cx, "multiply", _op(cx, "cos", a), _op(cx, "sinh", b)))


def _cosine(cx: Context, z: Complex) -> Complex:
    a, b = z
    return Complex(_op(cx, "multiply", _op(cx, "cos", a), _op(cx, "cosh", b)),
                   _op(cx, "negate", _op(cx, "multiply", _op(cx, "sin", a), _op(cx, "sinh", b))))


def _tan(cx: Context, z: Complex) -> Complex:
    p, q = tanh(cx, Complex(_op(cx, "negate", z.im), z.re))  # tan z = -i tanh(iz)
    return Complex(q, _op(cx, "negate", p))


def _one(cx: Context, like: Instruction) -> Complex:
    return Complex(_const(cx, 1.0, like), _const(cx, 0.0, like))


def _logistic(cx: Context, z: Complex) -> Complex:
    e = exp(cx, Complex(_op(cx, "negate", z.re), _op(cx, "negate", z.im)))
    return div(cx, _one(cx, z.re), Complex(_op(cx, "add", _const(cx, 1.0, z.re), e.re), e.im))


def _sinh(cx: Context, z: Complex) -> Complex:
    a, b = z
    return Complex(_op(cx, "multiply", _op(cx, "sinh", a), _op(cx, "cos", b)),
                   _op(cx, "multiply", _op(cx, "cosh", a), _op(cx, "sin", b)))


def _cosh(cx: Context, z: Complex) -> Complex:
    a, b = z
    return Complex(_op(cx, "multiply", _op(cx, "cosh", a), _op(cx, "cos", b)),
                   _op(cx, "multiply", _op(cx, "sinh", a), _op(cx, "sin", b)))


def _add(cx: Context, x: Complex, y: Complex) -> Complex:
    return Complex(_op(cx, "add", x.re, y.re), _op(cx, "add", x.im, y.im))


def _times_i(cx: Context, z: Complex) -> Complex:
    return Complex(_op(cx, "negate", z.im), z.re)


def _times_minus_i(cx: Context, z: Complex) -> Complex:
    return Complex(z.im, _op(cx, "negate", z.re))


def _asinh(cx: Context, z: Complex) -> Complex:
    """asinh is odd: w = z or -z, whichever has re's sign bit clear (on the cut, -0 + iy is the left side), and asinh w = log1p(w + w^2 / (sqrt(w^2 + 1) + 1))
    (log(w + sqrt(w^2 + 1)) with the 1 taken out exactly: no cancellation near 0, none between w and the root
    for re w >= 0); the sign put back."""
    zero = _const(cx, 0.0, z.re)
    flip = _cmp(cx, _op(cx, "atan2", z.re, _const(cx, -1.0, z.re)), zero, "LT")  # re's sign bit: -0 flips too
    w = Complex(*(_select(cx, flip, _op(cx, "negate", p), p) for p in z))
    one = _one(cx, w.re)
    w2 = mul(cx, w, w)
    i = Complex(one.im, one.re)
    # sqrt(w^2 + 1) as sqrt(w + i) sqrt(w - i) (Kahan): the root on the right side of the cut at re w = 0
    root = mul(cx, sqrt(cx, _add(cx, w, i)), sqrt(cx, Complex(w.re, _op(cx, "subtract", w.im, one.re))))
    r = _log1p(cx, _add(cx, w, div(cx, w2, _add(cx, root, one))))
    return Complex(*(_select(cx, flip, _op(cx, "negate", p), p) for p in r))


def _asin(cx: Context, z: Complex) -> Complex:
    return _times_minus_i(cx, _asinh(cx, _times_i(cx, z)))  # asin z = -i asinh(iz)


def _acos(cx: Context, z: Complex) -> Complex:
    s = _asin(cx, z)  # acos z = pi/2 - asin z (C99's principal values)
    return Complex(_op(cx, "subtract", _const(cx, np.pi / 2, s.re), s.re), _op(cx, "negate", s.im))


def _acosh(cx: Context, z: Complex) -> Complex:
    """log(z + sqrt(z + 1) sqrt(z - 1)) (Kahan's principal branch: cut along re < 1 of the real axis)."""
    one = _one(cx, z.re)
    minus = Complex(_op(cx, "subtract", z.re, one.re), z.im)
    return log(cx, _add(cx, z, mul(cx, sqrt(cx, _add(cx, z, one)), sqrt(cx, minus))))


def _atanh(cx: Context, z: Complex) -> Complex:
    """(log1p(z) - log1p(-z)) / 2."""
    p = _log1p(cx, z)
    q = _log1p(cx, Complex(_op(cx, "negate", z.re), _op(cx, "negate", z.im)))
    half = _const(cx, 0.5, z.re)
    return Complex(*(_op(cx, "multiply", _op(cx, "subtract", a, b), half) for a, b in zip(p, q)))


def _atan(cx: Context, z: Complex) -> Complex:
    return _times_minus_i(cx, _atanh(cx, _times_i(cx, z)))  # atan z = -i atanh(iz)


UNARY = {
    "chlo.sinh": _sinh, "chlo.cosh": _cosh, "chlo.asinh": _asinh, "chlo.asin": _asin, "chlo.acos": _acos,
    "chlo.acosh": _acosh, "chlo.atanh": _atanh, "chlo.atan": _atan,
    "stablehlo.abs": _abs, "stablehlo.sign": _sign, "stablehlo.exponential": exp,
    "stablehlo.exponential_minus_one": _expm1, "stablehlo.log": log, "stablehlo.log_plus_one": _log1p,
    "stablehlo.sqrt": sqrt, "stablehlo.rsqrt": lambda cx, z: div(cx, _one(cx, z.re), sqrt(cx, z)),
    "stablehlo.sine": _sine, "stablehlo.cosine": _cosine, "stablehlo.tan": _tan, "chlo.tan": _tan,
    "stablehlo.tanh": tanh, "stablehlo.logistic": _logistic,
    "chlo.conj": lambda cx, z: Complex(z.re, _op(cx, "negate", z.im)),
    "chlo.square": lambda cx, z: mul(cx, z, z),
}
BINARY = {
    "stablehlo.multiply": mul, "stablehlo.divide": div,
    "stablehlo.power": lambda cx, x, y: _power(cx, x, y),
}


def _power(cx: Context, x: Complex, y: Complex) -> Complex:
    """exp(y log x); at x = 0 (where log x is -inf): 1 for y = 0, 0 for Re y > 0 (as numpy and XLA)."""
    p = exp(cx, mul(cx, y, log(cx, x)))
    zero = _const(cx, 0.0, x.re)
    at_zero = _op(cx, "and", _cmp(cx, x.re, zero, "EQ"), _cmp(cx, x.im, zero, "EQ"))
    y_zero = _op(cx, "and", _cmp(cx, y.re, zero, "EQ"), _cmp(cx, y.im, zero, "EQ"))
    re = _select(cx, at_zero, _select(cx, y_zero, _const(cx, 1.0, zero), _select(cx, _cmp(cx, y.re, zero, "GT"),
                                                                              zero, p.re)), p.re)
    im = _select(cx, _op(cx, "and", at_zero, _op(cx, "or", y_zero, _cmp(cx, y.re, zero, "GT"))), zero, p.im)
    return Complex(re, im)


def _complex_args(cx: Context, op: Op, args: list[Any]) -> list[Complex]:
    for a in args:
        if not isinstance(a, Complex):
            raise cx.error(op, "mixes real and complex operands")
    return args


@complex_op(*UNARY)
def import_unary(cx: Context, op: Op, args: list[Any]) -> Any:
    (z,) = _complex_args(cx, op, args)
    return UNARY[op.name](cx, z)


@complex_op(*BINARY)
def import_binary(cx: Context, op: Op, args: list[Any]) -> Any:
    x, y = _complex_args(cx, op, args)
    return BINARY[op.name](cx, x, y)


@complex_op("stablehlo.compare")
def import_compare(cx: Context, op: Op, args: list[Any]) -> Any:
    x, y = _complex_args(cx, op, args)
    direction = op.attrs.get("comparison_direction")
    if direction not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        raise cx.error(op, f"unknown comparison direction {direction}")
    if op.attrs.get("compare_type") == "TOTALORDER":  # each part by its total order (NaN, -0 included)
        x, y = Complex(*(total_order_key(cx, p) for p in x)), Complex(*(total_order_key(cx, p) for p in y))
    if direction in ("EQ", "NE"):
        re, im = (cx.b.op("compare", [p, q], direction=direction) for p, q in zip(x, y))
        return cx.b.op("and" if direction == "EQ" else "or", [re, im])
    # the spec's order of complex values: lexicographic on (real, imaginary)
    strict = {"LE": "LT", "GE": "GT"}.get(direction, direction)
    first = _cmp(cx, x.re, y.re, strict)
    tie = cx.b.op("and", [_cmp(cx, x.re, y.re, "EQ"), _cmp(cx, x.im, y.im, direction)])
    return cx.b.op("or", [first, tie])


# ---------------------------------------------------------------- making and taking apart
@complex_op("stablehlo.constant")
def import_constant(cx: Context, op: Op, args: list[Any]) -> Any:
    value = getattr(op.attrs.get("value"), "array", None)
    if value is None or value.dtype.kind != "c":
        raise cx.error(op, "a complex constant needs a dense complex value")
    return Complex(cx.constant(np.array(value.real)), cx.constant(np.array(value.imag)))


@complex_op("stablehlo.complex")
@stablehlo_op("stablehlo.complex")
def import_complex(cx: Context, op: Op, args: list[Any]) -> Any:
    re, im = args
    if isinstance(re, Complex) or isinstance(im, Complex):
        raise cx.error(op, "takes real operands")
    return Complex(re, im)


@complex_op("stablehlo.real", "stablehlo.imag")
@stablehlo_op("stablehlo.real", "stablehlo.imag")
def import_real_imag(cx: Context, op: Op, args: list[Any]) -> Any:
    (z,) = args
    if isinstance(z, Complex):
        return z.re if op.name == "stablehlo.real" else z.im
    return z if op.name == "stablehlo.real" else _const(cx, 0.0, z)  # the spec's real and imag of a float


@stablehlo_op("chlo.conj")
def import_real_conj(cx: Context, op: Op, args: list[Any]) -> Any:
    return args[0]  # a real value is its own conjugate (the complex form is in UNARY)


@complex_op("stablehlo.convert")
def import_convert(cx: Context, op: Op, args: list[Any]) -> Any:
    """complex -> complex: each part; real -> complex: imaginary part 0; complex -> real: the real part."""
    (x,) = args
    out = cx.result_shape(op)
    if not is_complex_type(op.results[0].type):
        return cx.b.convert(x.re, out.dtype)
    z = _as_complex(cx, x)
    return Complex(cx.b.convert(z.re, out.dtype), cx.b.convert(z.im, out.dtype))


@complex_op("stablehlo.bitcast_convert")
def import_bitcast_convert(cx: Context, op: Op, args: list[Any]) -> Any:
    """complex -> the same complex type: the value itself; other complex bitcasts are refused."""
    if op.operands[0].type != op.results[0].type:
        raise cx.unsupported(op, "a bitcast between a complex and another element type is not supported")
    return args[0]


@complex_op("stablehlo.iota")
def import_iota(cx: Context, op: Op, args: list[Any]) -> Any:
    re = cx.b.op("iota", [], cx.result_shape(op), iota_dimension=int(op.attrs["iota_dimension"]))
    return Complex(re, _const(cx, 0.0, re))


# ---------------------------------------------------------------- contractions and reductions
@complex_op("stablehlo.dot_general", "stablehlo.dot")
def import_complex_dot(cx: Context, op: Op, args: list[Any]) -> Any:
    """(a + bi)(c + di) as four real dots: (ac - bd, ad + bc); two when an operand is real."""
    rule = import_dot_general if op.name == "stablehlo.dot_general" else import_dot
    x, y = args

    def dot(p: Instruction, q: Instruction) -> Instruction:
        return rule(cx, op, [p, q])  # type: ignore[return-value]

    if not isinstance(y, Complex):
        return Complex(dot(x.re, y), dot(x.im, y))
    if not isinstance(x, Complex):
        return Complex(dot(x, y.re), dot(x, y.im))
    return Complex(_op(cx, "subtract", dot(x.re, y.re), dot(x.im, y.im)),
                   _op(cx, "add", dot(x.re, y.im), dot(x.im, y.re)))


@complex_op("stablehlo.reduce")
def import_complex_reduce(cx: Context, op: Op, args: list[Any]) -> Any:
    """A sum reduces each part; a product multiplies pairs of halves until one element is left; any other body
    (max/min in the spec's lexicographic order, several operands) is applied to pairs of halves the same way."""
    n = len(args) // 2
    kinds = body_kinds(op.regions[0], n) if op.regions else None
    if n != 1 or kinds not in (["add"], ["multiply"]) or not all(isinstance(a, Complex) for a in args):
        return reduce_any_body(cx, op, args[:n], args[n:], int_tuple(cx, op, "dimensions"))
    x, init = args
    if kinds == ["add"]:
        parts = [import_reduce(cx, op, [x[k], init[k]]) for k in (0, 1)]
        return Complex(*(p[0] if isinstance(p, list) else p for p in parts))
    dims = int_tuple(cx, op, "dimensions")
    kept = [d for d in range(x.re.shape.rank) if d not in dims]
    out_dims = tuple(x.re.shape.dims[d] for d in kept)
    count = int(np.prod([x.re.shape.dims[d] for d in dims], dtype=np.int64))
    z = Complex(*(cx.b.reshape(cx.b.transpose(p, kept + list(dims)), out_dims + (count,)) for p in x))
    z = _product(cx, z, len(out_dims))
    z = Complex(*(cx.b.reshape(p, out_dims) for p in z))
    init_value = [cx.value_of(p) for p in init]
    if not (init_value[0] is not None and init_value[1] is not None and init_value[0].size == 1
            and float(init_value[0].reshape(())) == 1.0 and float(init_value[1].reshape(())) == 0.0):
        z = mul(cx, z, Complex(*(cx.b.broadcast_to(p, out_dims) for p in init)))
    return z


def _product(cx: Context, z: Complex, axis: int) -> Complex:
    """The product along the last axis (of size n >= 0): halves multiplied pairwise, padded with 1 when odd."""
    n = int(z.re.shape.dims[axis])
    if n == 0:
        dims = tuple(z.re.shape.dims[:axis]) + (1,)
        return Complex(cx.b.splat(1.0, z.re.shape.dtype, dims), cx.b.splat(0.0, z.re.shape.dtype, dims))
    while n > 1:
        if n % 2:
            z = Complex(*(cx.b.op("pad", [p, cx.scalar(v, p.shape.dtype)], edge_padding_low=(0,) * (axis + 1),
                                  edge_padding_high=(0,) * axis + (1,), interior_padding=(0,) * (axis + 1))
                          for p, v in zip(z, (1.0, 0.0))))
            n += 1
        half = n // 2
        lead = tuple(z.re.shape.dims[:axis])

        def part(p: Instruction, lo: int) -> Instruction:
            return cx.b.op("slice", [p], start_indices=(0,) * axis + (lo,), limit_indices=lead + (lo + half,),
                           strides=(1,) * (axis + 1))

        z = mul(cx, Complex(part(z.re, 0), part(z.im, 0)), Complex(part(z.re, half), part(z.im, half)))
        n = half
    return z
