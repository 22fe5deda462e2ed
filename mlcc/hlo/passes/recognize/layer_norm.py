"""LayerNorm and RMSNorm from their decomposed forms.

The normalization is matched at the product that divides by the standard deviation:

    t * rsqrt(var + eps)        t / sqrt(var + eps)        t * (1 / sqrt(var + eps)) * scale ...

with var = mean(t * t) and, for LayerNorm, t = x - mean(x) (torch's exported
ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div, JAX's sum/divide/square/rsqrt, flax's
``(x - mean) * (rsqrt(var + eps) * scale)``), or var = mean(x*x) - mean(x)^2 (flax's
fast variance, clamped at 0). Without the ``x - mean`` it is RMSNorm.
A scale found in the product becomes the op's scale; a later ``* scale`` or
``+ bias`` over the normalized dims folds in (``norm-scale``, ``norm-bias``).
TensorFlow's ``x * inv + (beta - mean * inv)`` with ``inv = rsqrt(var + eps) * gamma``
is its own rule (``layer-norm-tf``). Anything that does not fit exactly is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlcc.hlo.ir import Instruction, Module, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, op, scalar_value, var
from mlcc.hlo.passes.recognize.common import (
    Product,
    Step,
    flatten_product,
    keepdims_aligned,
    mean_of,
    near,
    project,
    projection,
    sum_below,
    walk,
)


@dataclass
class InverseStd:
    epsilon: float
    axes: tuple[int, ...]
    squared: Instruction | None = None    # var = mean(squared * squared)
    fast_of: Instruction | None = None    # var = mean(x * x) - mean(x)^2 of this x


def _square_root(value: Instruction) -> Instruction | None:
    if value.opcode == "multiply" and value.operands[0] is value.operands[1]:
        return value.operands[0]
    if value.opcode == "power" and scalar_value(value.operands[1]) == 2:
        return value.operands[0]
    return None


def _mean_scale(step: Step, reduced: Instruction, axes: tuple[int, ...]) -> bool:
    count = 1
    for a in axes:
        count *= reduced.shape.dims[a]
    return step.opcode == "mul" and near(step.scalar, 1.0 / count, reduced.shape.dtype)


def inverse_std(factor: Instruction, denominator: bool, rank: int, module: Module | None) -> InverseStd | None:
    """``factor`` == 1/sqrt(var + eps) (or sqrt(var + eps) when it divides), per row of a rank-``rank`` value."""
    base, pos, steps = walk(factor, module)
    if denominator:
        head = [Step("sqrt")]
    elif steps[:1] == [Step("rsqrt")]:
        head = [Step("rsqrt")]
    elif steps[:2] in ([Step("reciprocal"), Step("sqrt")], [Step("rdiv", 1), Step("sqrt")]):
        head = steps[:2]
    else:
        return None
    if steps[:len(head)] != head or len(steps) <= len(head) or steps[len(head)].opcode != "add":
        return None
    epsilon = steps[len(head)].scalar
    rest = steps[len(head) + 1:]
    if epsilon is None or not epsilon >= 0 or factor.shape.rank != rank:
        return None
    if base.opcode == "reduce" and base.attrs["kind"] == "add" and len(rest) == 1:
        axes = tuple(sorted(base.attrs["dimensions"]))
        source = base.operands[0]
        squared = _square_root(source)
        if squared is None or not _mean_scale(rest[0], source, axes) or not keepdims_aligned(pos, rank, axes):
            return None
        return InverseStd(float(epsilon), axes, squared=squared)
    if base.opcode == "subtract" and rest in ([], [Step("max", 0)]):
        return _fast_variance(base, pos, float(epsilon), rank, module)
    return None


def _fast_variance(sub: Instruction, pos: dict[int, int], epsilon: float, rank: int,
                   module: Module | None) -> InverseStd | None:
    """sub == mean(x*x) - mean(x)^2 over the same axes."""
    mean_sq, square = sub.operands
    found = sum_below(mean_sq, module)
    mu = _square_root(square)
    if found is None or mu is None:
        return None
    red, steps = found
    x = _square_root(red.source)
    mu_found = sum_below(mu, module)
    if x is None or mu_found is None or len(steps) != 1 or not _mean_scale(steps[0], red.source, red.axes):
        return None
    mu_red, mu_steps = mu_found
    if mu_red.source is not x or mu_red.axes != red.axes or len(mu_steps) != 1 \
            or not _mean_scale(mu_steps[0], x, red.axes):
        return None
    for p in (red.pos, mu_red.pos):
        if not keepdims_aligned({j: pos[d] for j, d in p.items()}, rank, red.axes):
            return None
    return InverseStd(epsilon, red.axes, fast_of=x)


def _centered_source(t: Instruction, axes: tuple[int, ...], module: Module | None) -> Instruction | None:
    """x when t == x - mean(x) over axes."""
    if t.opcode != "subtract":
        return None
    red = mean_of(t.operands[1], module)
    if red is None or red.source is not t.operands[0] or red.axes != axes:
        return None
    return t.operands[0]


def _scale(rw: Rewriter, factors: list[Instruction], coefficient: float, x: Instruction,
           axes: tuple[int, ...]) -> Instruction | None:
    """The scale operand for factors (each varying only along axes) times coefficient."""
    dims = tuple(x.shape.dims[a] for a in axes)
    if len(factors) > 1 or any(projection(f, axes) is None for f in factors):
        return None
    if not factors:
        return rw.constant(coefficient, x.shape.dtype, dims)
    scale = project(rw, factors[0], axes, x.shape.dims)
    if coefficient != 1:
        scale = rw.op("multiply", [scale, rw.constant(coefficient, x.shape.dtype, dims)])
    return scale


def _build(rw: Rewriter, x: Instruction, centered: bool, inv: InverseStd, product: Product,
           factors: list[Instruction]) -> Instruction | None:
    if product.denominators or tuple(x.shape.dims) != tuple(rw.root.shape.dims):
        return None
    if any(projection(f, inv.axes) is None for f in factors) or len(factors) > 1:
        return None
    scale = _scale(rw, factors, product.coefficient, x, inv.axes)
    if scale is None:
        return None
    if centered:
        bias = rw.constant(0.0, x.shape.dtype, scale.shape.dims)
        return rw.op("layer-norm", [x, scale, bias], dimensions=inv.axes, epsilon=inv.epsilon)
    return rw.op("rms-norm", [x, scale], dimensions=inv.axes, epsilon=inv.epsilon)


def _remove_first(items: list[Instruction], item: Instruction) -> list[Instruction] | None:
    for i, v in enumerate(items):
        if v is item:
            return items[:i] + items[i + 1:]
    return None


def _normalization(rw: Rewriter, m: Match) -> Instruction | None:
    n = m.root
    if not is_float(n.shape.dtype):
        return None
    product = flatten_product(n, rw.module)
    candidates = [(f, False) for f in product.numerators] + [(f, True) for f in product.denominators]
    for factor, denominator in candidates:
        inv = inverse_std(factor, denominator, n.shape.rank, rw.module)
        if inv is None:
            continue
        rest = Product(product.coefficient,
                       _remove_first(product.numerators, factor) if not denominator else list(product.numerators),
                       _remove_first(product.denominators, factor) if denominator else list(product.denominators))
        if inv.squared is not None:
            others = _remove_first(rest.numerators, inv.squared)
            if others is None:
                continue
            x = _centered_source(inv.squared, inv.axes, rw.module)
            centered = x is not None
            x = x if centered else inv.squared
        else:
            x, centered = inv.fast_of, True
            t = next((f for f in rest.numerators if _centered_source(f, inv.axes, rw.module) is x), None)
            if t is None:
                continue
            others = _remove_first(rest.numerators, t)
        return _build(rw, x, centered, inv, rest, others)
    return None


def _fold_scale(rw: Rewriter, m: Match) -> Instruction | None:
    """norm(x, s) * f with s uniform (and a zero bias) -> norm(x, s * f)."""
    norm, f = m.norm, m.f
    x, axes = norm.operands[0], tuple(norm.attrs["dimensions"])
    s = scalar_value(norm.operands[1], rw.module)
    if s is None or (norm.opcode == "layer-norm" and scalar_value(norm.operands[2], rw.module) != 0):
        return None
    c = scalar_value(f, rw.module)
    if c is not None:
        scale = _scale(rw, [], c * s, x, axes)
    else:
        scale = _scale(rw, [f], s, x, axes)
    if scale is None:
        return None
    return rw.op(norm.opcode, [x, scale, *norm.operands[2:]], **norm.attrs)


def _fold_bias(rw: Rewriter, m: Match) -> Instruction | None:
    """layer-norm(x, s, b) + f, f varying only along the normalized dims -> layer-norm(x, s, b + f)."""
    norm, f = m.norm, m.f
    x, axes = norm.operands[0], tuple(norm.attrs["dimensions"])
    if projection(f, axes) is None:
        return None
    bias = project(rw, f, axes, x.shape.dims)
    if scalar_value(norm.operands[2], rw.module) != 0:
        bias = rw.op("add", [norm.operands[2], bias])
    return rw.op("layer-norm", [x, norm.operands[1], bias], **norm.attrs)


def _tensorflow(rw: Rewriter, m: Match) -> Instruction | None:
    """x * inv + (beta - mean(x) * inv), inv = rsqrt(var + eps) [* gamma], var = mean((x - mean(x))^2)."""
    for p, q in ((m.p, m.q), (m.q, m.p)):
        if p.opcode != "multiply":
            continue
        shift, beta = None, None
        if q.opcode == "subtract":
            beta, shift = q.operands
        elif q.opcode == "negate":
            shift = q.operands[0]
        if shift is None or shift.opcode != "multiply":
            continue
        for x, inv in (p.operands, reversed(p.operands)):
            if inv not in shift.operands:
                continue
            mean = shift.operands[1] if shift.operands[0] is inv else shift.operands[0]
            red = mean_of(mean, rw.module)
            if red is None or red.source is not x:
                continue
            result = _tensorflow_build(rw, x, inv, red.axes, beta)
            if result is not None:
                return result
    return None


def _tensorflow_build(rw: Rewriter, x: Instruction, inv: Instruction, axes: tuple[int, ...],
                      beta: Instruction | None) -> Instruction | None:
    product = flatten_product(inv, rw.module, interior_single_use=False)
    if product.denominators or tuple(x.shape.dims) != tuple(rw.root.shape.dims):
        return None
    for factor in product.numerators:
        std = inverse_std(factor, False, x.shape.rank, rw.module)
        if std is None or std.squared is None or std.axes != axes:
            continue
        if _centered_source(std.squared, axes, rw.module) is not x:
            continue
        if beta is not None and projection(beta, axes) is None:
            return None
        scale = _scale(rw, _remove_first(product.numerators, factor), product.coefficient, x, axes)
        if scale is None:
            return None
        bias = project(rw, beta, axes, x.shape.dims) if beta is not None else \
            rw.constant(0.0, x.shape.dtype, scale.shape.dims)
        return rw.op("layer-norm", [x, scale, bias], dimensions=axes, epsilon=std.epsilon)
    return None


_NORM = ("layer-norm", "rms-norm")

RULES = [
    Rule("norm", op(("multiply", "divide")), _normalization),
    Rule("norm-scale", op("multiply", op(_NORM, name="norm", one_use=True), var("f")), _fold_scale),
    Rule("norm-bias", op("add", op("layer-norm", name="norm", one_use=True), var("f")), _fold_bias),
    Rule("layer-norm-tf", op("add", var("p"), var("q")), _tensorflow),
]


class RecognizeLayerNorm(RewritePass):
    def __init__(self) -> None:
        super().__init__("recognize-norm", RULES)
