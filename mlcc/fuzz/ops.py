"""One generator per ONNX op: each knows the op's operand constraints and its result's dtype, dims, bound
and exactness (see ``mlcc.fuzz.generator``). ``OPS`` maps an op name to its weight and generator."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from mlcc.fuzz.builder import (BOOL, F16, F32, FLOAT_LIMIT, FLOATS, I32, I64, INT_LIMIT, INTS, MAX_ELEMENTS, NP_TYPE,
                                NUMERIC, ModelBuilder, Skip, Value, broadcast_shape, limit, partner, partner_shape)

# ---- op generators ---------------------------------------------------------------------------------------

OpGen = Callable[[ModelBuilder], None]
OPS: dict[str, tuple[float, OpGen]] = {}


def op(name: str, weight: float = 1.0) -> Callable[[OpGen], OpGen]:
    def register(fn: OpGen) -> OpGen:
        OPS[name] = (weight, fn)
        return fn
    return register


# unary float ops: name -> (result bound from operand bound (None: not generated), exact-only operand, attrs)
UNARY_FLOAT: dict[str, tuple[Callable[[float], float | None], bool, Callable[[ModelBuilder], dict]]] = {
    "Relu": (lambda b: b, False, lambda g: {}),
    "Sigmoid": (lambda b: 1.0, False, lambda g: {}),
    "Tanh": (lambda b: 1.0, False, lambda g: {}),
    "Abs": (lambda b: b, False, lambda g: {}),
    "Neg": (lambda b: b, False, lambda g: {}),
    "Exp": (lambda b: math.exp(b) if b <= 6 else None, False, lambda g: {}),
    "Erf": (lambda b: 1.0, False, lambda g: {}),
    "Sin": (lambda b: 1.0, False, lambda g: {}),
    "Cos": (lambda b: 1.0, False, lambda g: {}),
    "Softplus": (lambda b: b + 1, False, lambda g: {}),
    "Softsign": (lambda b: 1.0, False, lambda g: {}),
    "Elu": (lambda b: b + 1, False, lambda g: {"alpha": g.choice([1.0, 0.5])}),
    "Selu": (lambda b: 1.06 * b + 2, False, lambda g: {}),
    "LeakyRelu": (lambda b: b, False, lambda g: {"alpha": g.choice([0.01, 0.2])}),
    "HardSigmoid": (lambda b: 1.0, False, lambda g: {"alpha": 0.2, "beta": 0.5}),
    "HardSwish": (lambda b: b, False, lambda g: {}),
    "Mish": (lambda b: b, False, lambda g: {}),
    "Gelu": (lambda b: b, False, lambda g: {"approximate": g.choice(["none", "tanh"])}),
    "Floor": (lambda b: b + 1, True, lambda g: {}),
    "Ceil": (lambda b: b + 1, True, lambda g: {}),
    "Round": (lambda b: b + 1, True, lambda g: {}),
    "Sign": (lambda b: 1.0, True, lambda g: {}),
}
EXACT_UNARY = {"Relu", "Abs", "Neg", "Floor", "Ceil", "Round", "Sign"}


def _unary(name: str) -> OpGen:
    bound_of, exact_only, attrs = UNARY_FLOAT[name]

    def gen(g: ModelBuilder) -> None:
        x = g.operand(FLOATS, exact=exact_only)
        b = bound_of(x.bound)
        if b is None or b > limit(x.dtype):
            raise Skip("would overflow")
        g.node(name, [x], [(x.dtype, x.shape, b, x.exact and name in EXACT_UNARY)], **attrs(g))
    return gen


for _name in UNARY_FLOAT:
    op(_name, 0.5)(_unary(_name))


@op("IntUnary", 0.5)
def gen_int_unary(g: ModelBuilder) -> None:
    x = g.operand(INTS)
    name = g.choice(["Abs", "Neg", "Sign"])
    g.node(name, [x], [(x.dtype, x.shape, x.bound if name != "Sign" else 1, True)])


@op("Sqrt", 0.4)
def gen_sqrt(g: ModelBuilder) -> None:
    x = g.operand(FLOATS)
    (a,) = g.node("Abs", [x], [(x.dtype, x.shape, x.bound, x.exact)])
    g.node("Sqrt", [a], [(x.dtype, x.shape, math.sqrt(x.bound) + 1, False)])


@op("Log", 0.4)
def gen_log(g: ModelBuilder) -> None:
    x = g.operand(FLOATS)
    (a,) = g.node("Abs", [x], [(x.dtype, x.shape, x.bound, x.exact)])
    shift = g.const(np.array(1.5, NP_TYPE[x.dtype]))  # log(1 + tiny) would turn last-bit noise into large
    (s,) = g.node("Add", [a, shift], [(x.dtype, x.shape, x.bound + 1.5, False)])  # relative errors
    g.node("Log", [s], [(x.dtype, x.shape, max(1.0, math.log(x.bound + 2)), False)])


@op("Reciprocal", 0.3)
def gen_reciprocal(g: ModelBuilder) -> None:
    x = g.operand(FLOATS)
    (a,) = g.node("Abs", [x], [(x.dtype, x.shape, x.bound, x.exact)])
    one = g.const(np.array(1.0, NP_TYPE[x.dtype]))
    (s,) = g.node("Add", [a, one], [(x.dtype, x.shape, x.bound + 1, False)])
    g.node("Reciprocal", [s], [(x.dtype, x.shape, 1.0, False)])


@op("Clip", 0.5)
def gen_clip(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC)
    lo = -g.choice([0.5, 1.0, 2.0]) if x.dtype in FLOATS else -g.int_in(0, 3)
    hi = g.choice([0.5, 1.0, 3.0]) if x.dtype in FLOATS else g.int_in(0, 3)
    ins: list[Value | None] = [x, g.const(np.array(lo, NP_TYPE[x.dtype])) if g.chance(0.8) else None]
    if g.chance(0.8):
        ins.append(g.const(np.array(hi, NP_TYPE[x.dtype])))
    while ins and ins[-1] is None:
        ins.pop()
    g.node("Clip", ins, [(x.dtype, x.shape, max(abs(lo), abs(hi), 1.0) if len(ins) == 3 else x.bound, x.exact)])


BINARY_BOUND = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a + b, "Mul": lambda a, b: a * b,
    "Max": lambda a, b: max(a, b), "Min": lambda a, b: max(a, b),
}


@op("Binary", 6.0)
def gen_binary(g: ModelBuilder) -> None:
    name = g.choice(list(BINARY_BOUND))
    x = g.operand(NUMERIC)
    y = partner(g, x)
    bound = BINARY_BOUND[name](x.bound, y.bound)
    if bound > limit(x.dtype):
        raise Skip("would overflow")
    exact = x.exact and y.exact and (x.dtype in INTS or name in ("Max", "Min"))
    g.node(name, [x, y], [(x.dtype, broadcast_shape(x.shape, y.shape), bound, exact)])


@op("Div", 1.0)
def gen_div(g: ModelBuilder) -> None:
    """x / (|y| + 1): never a division by zero; ints truncate toward zero."""
    x = g.operand(NUMERIC)
    y = partner(g, x)
    (a,) = g.node("Abs", [y], [(y.dtype, y.shape, y.bound, y.exact)])
    one = g.const(np.array(1, NP_TYPE[x.dtype]))
    (d,) = g.node("Add", [a, one], [(y.dtype, y.shape, y.bound + 1, y.exact and y.dtype in INTS)])
    if g.chance(0.5) and x.dtype in INTS:
        (d,) = g.node("Neg", [d], [(y.dtype, y.shape, y.bound + 1, True)])  # a negative divisor too
    g.node("Div", [x, d], [(x.dtype, broadcast_shape(x.shape, y.shape), x.bound, x.exact and x.dtype in INTS)])


@op("Mod", 0.6)
def gen_mod(g: ModelBuilder) -> None:
    """Integer Mod with fmod=0 (sign of the divisor) over divisors that are never zero."""
    x = g.operand(INTS)
    y = partner(g, x)
    (a,) = g.node("Abs", [y], [(y.dtype, y.shape, y.bound, True)])
    one = g.const(np.array(g.choice([1, 2]), NP_TYPE[x.dtype]))
    (d,) = g.node("Add", [a, one], [(y.dtype, y.shape, y.bound + 2, True)])
    if g.chance(0.5):
        (d,) = g.node("Neg", [d], [(y.dtype, y.shape, y.bound + 2, True)])
    g.node("Mod", [x, d], [(x.dtype, broadcast_shape(x.shape, y.shape), y.bound + 2, True)], fmod=0)


@op("Pow", 0.4)
def gen_pow(g: ModelBuilder) -> None:
    x = g.operand(FLOATS, max_bound=8)
    (a,) = g.node("Abs", [x], [(x.dtype, x.shape, x.bound, x.exact)])
    half = g.const(np.array(0.5, NP_TYPE[x.dtype]))
    (base,) = g.node("Add", [a, half], [(x.dtype, x.shape, x.bound + 0.5, False)])
    e = g.choice([0.5, 2.0, 3.0, -1.0, 1.5])
    g.node("Pow", [base, g.const(np.array(e, NP_TYPE[x.dtype]))],
           [(x.dtype, x.shape, max((x.bound + 0.5) ** e, 2.0 ** abs(e)), False)])


@op("Compare", 1.5)
def gen_compare(g: ModelBuilder) -> None:
    name = g.choice(["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
    x = g.operand(NUMERIC if name != "Equal" else INTS + (BOOL,), exact=True)
    y = partner(g, x, exact=lambda u: u.exact)
    if not y.exact:
        raise Skip("inexact operand")
    g.node(name, [x, y], [(BOOL, broadcast_shape(x.shape, y.shape), 1, True)])


@op("Logical", 0.6)
def gen_logical(g: ModelBuilder) -> None:
    x = g.operand((BOOL,))
    if g.chance(0.3):
        g.node("Not", [x], [(BOOL, x.shape, 1, x.exact)])
        return
    y = partner(g, x)
    g.node(g.choice(["And", "Or", "Xor"]), [x, y], [(BOOL, broadcast_shape(x.shape, y.shape), 1, x.exact and y.exact)])


@op("Where", 1.0)
def gen_where(g: ModelBuilder) -> None:
    c = g.operand((BOOL,), exact=True)
    x = partner(g, c, dtype=g.choice([F32, F32, F16, I64]))
    shape = broadcast_shape(c.shape, x.shape)
    y = g.pick(lambda u: u.dtype == x.dtype and _broadcasts(shape, u.shape),
               lambda: g.leaf(x.dtype, partner_shape(g, shape)))
    g.node("Where", [c, x, y], [(x.dtype, broadcast_shape(shape, y.shape), max(x.bound, y.bound),
                                 c.exact and x.exact and y.exact)])


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        return np.prod(broadcast_shape(a, b), dtype=np.int64) <= MAX_ELEMENTS
    except ValueError:
        return False


@op("Cast", 1.2)
def gen_cast(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,))
    to = g.choice([t for t in (F32, F16, I64, I32, BOOL) if t != x.dtype])
    if x.dtype in FLOATS and (to in INTS or to == BOOL) and not x.exact:
        raise Skip("a float -> int cast of an inexact value")
    if to == F16 and x.bound > FLOAT_LIMIT[F16]:
        raise Skip("f16 overflow")
    g.node("Cast", [x], [(to, x.shape, 1.0 if to == BOOL else x.bound + 1, x.exact)], to=to)


@op("MatMul", 2.0)
def gen_matmul(g: ModelBuilder) -> None:
    a = g.operand((F32, F32, F32, F16), min_rank=1, max_bound=20)
    k = a.shape[-1]
    n = g.choice([1, 2, 3, 8, 16, 17, 33])
    if a.rank == 1:
        b_shape: tuple[int, ...] = (k, n) if g.chance(0.7) else (k,)
    else:
        batch = partner_shape(g, a.shape[:-2]) if g.chance(0.4) else ()
        b_shape = tuple(batch) + (k, n)
    if g.chance(0.5):
        b = g.const(g.random_data(a.dtype, b_shape, scale=1.0 / math.sqrt(max(k, 1))), bound=4.0 / math.sqrt(max(k, 1)))
    else:
        b = g.pick(lambda u: u.dtype == a.dtype and u.shape == b_shape, lambda: g.leaf(a.dtype, b_shape))
    out = np.matmul(np.zeros(a.shape, np.int8), np.zeros(b_shape, np.int8)).shape
    bound = max(k, 1) * a.bound * b.bound
    if bound > limit(a.dtype):
        raise Skip("would overflow")
    g.node("MatMul", [a, b], [(a.dtype, out, bound, False)])


@op("Gemm", 0.8)
def gen_gemm(g: ModelBuilder) -> None:
    a = g.operand((F32, F32, F16), min_rank=2, max_rank=2, max_bound=20)
    trans_a, trans_b = g.int_in(0, 1), g.int_in(0, 1)
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = g.choice([1, 3, 8, 17])
    b = g.const(g.random_data(a.dtype, (n, k) if trans_b else (k, n), scale=1.0 / math.sqrt(max(k, 1))),
                bound=4.0 / math.sqrt(max(k, 1)))
    alpha, beta = g.choice([1.0, 0.5, 2.0]), g.choice([1.0, 0.5])
    ins = [a, b]
    if g.chance(0.7):
        ins.append(g.const(g.random_data(a.dtype, g.choice([(n,), (1, n), (m, n), (m, 1), ()]))))
    bound = abs(alpha) * max(k, 1) * a.bound * b.bound + 4 * beta
    if bound > limit(a.dtype):
        raise Skip("would overflow")
    g.node("Gemm", ins, [(a.dtype, (m, n), bound, False)], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)


def _conv_out(size: int, k: int, stride: int, pad: int, dil: int, ceil: bool = False) -> int:
    span = size + pad - dil * (k - 1) - 1
    return (-(-span // stride) if ceil else span // stride) + 1


@op("Conv", 1.5)
def gen_conv(g: ModelBuilder) -> None:
    rank = g.choice([4, 4, 4, 3])
    x = g.operand((F32, F32, F16), min_rank=rank, max_rank=rank, max_bound=20, nonempty=True)
    n, c, *spatial = x.shape
    groups = g.choice([d for d in (1, 1, 2, 3, 4, c) if c % d == 0])
    m = groups * g.choice([1, 2, 3])
    kernel, strides, dil, pads_lo, pads_hi, out = [], [], [], [], [], []
    for size in spatial:
        k = g.int_in(1, min(3, size + 2))
        s, d = g.choice([1, 1, 2]), g.choice([1, 1, 2])
        pl, ph = g.int_in(0, min(2, k)), g.int_in(0, min(2, k))
        o = _conv_out(size, k, s, pl + ph, d)
        if o < 1:
            raise Skip("empty window")
        kernel.append(k), strides.append(s), dil.append(d), pads_lo.append(pl), pads_hi.append(ph), out.append(o)
    fan_in = c // groups * int(np.prod(kernel))
    w = g.const(g.random_data(x.dtype, (m, c // groups, *kernel), scale=1.0 / math.sqrt(fan_in)),
                bound=4.0 / math.sqrt(fan_in))
    ins = [x, w] + ([g.const(g.random_data(x.dtype, (m,)))] if g.chance(0.6) else [])
    bound = fan_in * x.bound * w.bound + 4
    if bound > limit(x.dtype):
        raise Skip("would overflow")
    g.node("Conv", ins, [(x.dtype, (n, m, *out), bound, False)], kernel_shape=kernel, strides=strides,
           dilations=dil, pads=pads_lo + pads_hi, group=groups)


@op("Pool", 1.2)
def gen_pool(g: ModelBuilder) -> None:
    x = g.operand((F32, F32, F16), min_rank=3, max_rank=4, nonempty=True)
    spatial = x.shape[2:]
    kind = g.choice(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
    if kind.startswith("Global"):
        g.node(kind, [x], [(x.dtype, x.shape[:2] + (1,) * len(spatial), x.bound, x.exact and kind == "GlobalMaxPool")])
        return
    ceil = g.chance(0.2)
    kernel, strides, pads_lo, pads_hi, out = [], [], [], [], []
    for size in spatial:
        k = g.int_in(1, min(3, size))
        s = g.choice([1, 2, k])
        pl, ph = (g.int_in(0, k - 1), g.int_in(0, k - 1)) if g.chance(0.4) else (0, 0)
        o = _conv_out(size, k, s, pl + ph, 1, ceil)
        if ceil and (o - 1) * s >= size + pl:
            raise Skip("the last ceil-mode window starts in the padding (onnx and onnxruntime disagree there)")
        kernel.append(k), strides.append(s), pads_lo.append(pl), pads_hi.append(ph), out.append(o)
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads_lo + pads_hi, "ceil_mode": int(ceil)}
    if kind == "AveragePool":
        attrs["count_include_pad"] = g.int_in(0, 1)
    g.node(kind, [x], [(x.dtype, x.shape[:2] + tuple(out), x.bound, x.exact and kind == "MaxPool")], **attrs)


REDUCE = {  # name -> (dtypes, bound(x bound, count), exact for exact input)
    "ReduceSum": (NUMERIC, lambda b, n: b * n, False),
    "ReduceMean": (FLOATS, lambda b, n: b, False),
    "ReduceMax": (NUMERIC, lambda b, n: b, True),
    "ReduceMin": (NUMERIC, lambda b, n: b, True),
    "ReduceProd": (FLOATS, lambda b, n: b ** n if n <= 8 and b <= 2 else None, False),
    "ReduceL1": (FLOATS, lambda b, n: b * n, False),
    "ReduceL2": (FLOATS, lambda b, n: b * math.sqrt(n), False),
    "ReduceSumSquare": (FLOATS, lambda b, n: b * b * n, False),
    "ReduceLogSumExp": (FLOATS, lambda b, n: b + math.log(max(n, 1)) + 1, False),
}


@op("Reduce", 2.5)
def gen_reduce(g: ModelBuilder) -> None:
    name = g.choice(list(REDUCE))
    dtypes, bound_of, exact_kind = REDUCE[name]
    x = g.operand(dtypes, min_rank=1)
    axes = sorted(a for a in range(x.rank) if g.chance(0.5)) or ([] if g.chance(0.3) else [x.rank - 1])
    reduced = axes or list(range(x.rank))
    count = int(np.prod([x.shape[a] for a in reduced], dtype=np.int64))
    if count == 0 and name in ("ReduceMax", "ReduceMin", "ReduceProd", "ReduceLogSumExp"):
        raise Skip("a reduction over nothing")  # ONNX leaves the result implementation-defined for some
    bound = bound_of(x.bound, count)
    if bound is None or bound > limit(x.dtype) or (x.dtype in INTS and name == "ReduceSum" and bound > INT_LIMIT):
        raise Skip("would overflow")
    keep = g.int_in(0, 1)
    shape = tuple((1 if keep else None) if a in reduced else d for a, d in enumerate(x.shape))
    shape = tuple(d for d in shape if d is not None)
    exact = x.exact and (exact_kind or x.dtype in INTS)
    negative = [a - x.rank if g.chance(0.3) else a for a in axes]
    ins = [x, g.ints(negative, "axes")] if axes else [x]
    g.node(name, ins, [(x.dtype, shape, max(bound, 1.0), exact)], keepdims=keep)


@op("ArgMax", 0.5)
def gen_argmax(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC, min_rank=1, exact=True, nonempty=True)
    axis = g.int_in(-x.rank, x.rank - 1)
    if x.shape[axis] == 0:
        raise Skip("empty axis")
    keep = g.int_in(0, 1)
    shape = tuple(1 if i == axis % x.rank else d for i, d in enumerate(x.shape)) if keep else \
        tuple(d for i, d in enumerate(x.shape) if i != axis % x.rank)
    g.node(g.choice(["ArgMax", "ArgMin"]), [x], [(I64, shape, max(x.shape), True)], axis=axis, keepdims=keep,
           select_last_index=g.int_in(0, 1))


@op("Softmax", 1.2)
def gen_softmax(g: ModelBuilder) -> None:
    x = g.operand(FLOATS, min_rank=1, max_bound=100)
    name = g.choice(["Softmax", "LogSoftmax"])
    bound = 1.0 if name == "Softmax" else 2 * x.bound + math.log(max(x.shape) + 1) + 1
    g.node(name, [x], [(x.dtype, x.shape, bound, False)], axis=g.int_in(-x.rank, x.rank - 1))


@op("LayerNormalization", 1.0)
def gen_layer_norm(g: ModelBuilder) -> None:
    x = g.operand(FLOATS, min_rank=1, max_bound=100)
    axis = g.int_in(-x.rank, x.rank - 1)
    norm_shape = x.shape[axis % x.rank:]
    if not np.prod(norm_shape):
        raise Skip("nothing to normalize")
    scale = g.const(g.random_data(x.dtype, norm_shape))
    ins = [x, scale] + ([g.const(g.random_data(x.dtype, norm_shape))] if g.chance(0.7) else [])
    n = int(np.prod(norm_shape))
    g.node("LayerNormalization", ins, [(x.dtype, x.shape, 4 * math.sqrt(max(n, 1)) * 4 + 4, False)], axis=axis,
           epsilon=g.choice([1e-3, 1e-2]))  # eps 1e-5 on a near-constant row amplifies rounding noise 300x


@op("Transpose", 1.2)
def gen_transpose(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), min_rank=2)
    perm = [int(p) for p in g.rng.permutation(x.rank)]
    g.node("Transpose", [x], [(x.dtype, tuple(x.shape[p] for p in perm), x.bound, x.exact)], perm=perm)


def _factor(g: ModelBuilder, n: int, rank: int) -> list[int]:
    dims = []
    for _ in range(rank - 1):
        divisors = [d for d in range(1, min(n, 64) + 1) if n % d == 0] if n else [0, 1, 2]
        d = g.choice(divisors)
        dims.append(d)
        n = n // d if d else n
    return dims + [n]


@op("Reshape", 1.2)
def gen_reshape(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,))
    if x.numel == 0:
        raise Skip("0-size reshape needs allowzero care")
    dims = _factor(g, x.numel, g.int_in(0, 4)) if x.numel != 1 or g.chance(0.5) else []
    spec = list(dims)
    if dims and g.chance(0.4):
        spec[g.int_in(0, len(dims) - 1)] = -1
    for i, d in enumerate(spec):
        if i < x.rank and d == x.shape[i] and g.chance(0.3):
            spec[i] = 0  # copy the input's dim
    g.node("Reshape", [x, g.ints(spec, "shape")], [(x.dtype, tuple(dims), x.bound, x.exact)])


@op("Flatten", 0.5)
def gen_flatten(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), min_rank=1)
    axis = g.int_in(-x.rank, x.rank)
    a = axis + x.rank if axis < 0 else axis
    shape = (int(np.prod(x.shape[:a])), int(np.prod(x.shape[a:])))
    g.node("Flatten", [x], [(x.dtype, shape, x.bound, x.exact)], axis=axis)


@op("Squeeze", 0.6)
def gen_squeeze(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), min_rank=1)
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if not ones:
        raise Skip("nothing to squeeze")
    axes = [a for a in ones if g.chance(0.6)] or ones[:1]
    ins = [x, g.ints([a - x.rank if g.chance(0.3) else a for a in axes], "axes")]
    g.node("Squeeze", ins, [(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in axes), x.bound, x.exact)])


@op("Unsqueeze", 0.6)
def gen_unsqueeze(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), max_rank=3)
    out_rank = x.rank + g.int_in(1, 2)
    axes = sorted(int(a) for a in g.rng.choice(out_rank, out_rank - x.rank, replace=False))
    shape, it = [], iter(x.shape)
    for i in range(out_rank):
        shape.append(1 if i in axes else next(it))
    g.node("Unsqueeze", [x, g.ints(axes, "axes")], [(x.dtype, tuple(shape), x.bound, x.exact)])


@op("Concat", 1.0)
def gen_concat(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), min_rank=1)
    axis = g.int_in(0, x.rank - 1)
    parts = [x]
    for _ in range(g.int_in(1, 2)):
        shape = list(x.shape)
        shape[axis] = g.choice([1, 2, 3, x.shape[axis]])
        parts.append(g.pick(lambda u: u.dtype == x.dtype and u.rank == x.rank and
                            all(a == b for i, (a, b) in enumerate(zip(u.shape, x.shape)) if i != axis),
                            lambda: g.leaf(x.dtype, tuple(shape)), p_fresh=0.6))
    out = list(x.shape)
    out[axis] = sum(p.shape[axis] for p in parts)
    g.node("Concat", parts, [(x.dtype, tuple(out), max(p.bound for p in parts), all(p.exact for p in parts))],
           axis=axis - x.rank if g.chance(0.3) else axis)


@op("Slice", 1.2)
def gen_slice(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), min_rank=1)
    axes = [a for a in range(x.rank) if g.chance(0.6)] or [x.rank - 1]
    starts, ends, steps, shape = [], [], [], list(x.shape)
    for a in axes:
        n = x.shape[a]
        step = g.choice([1, 1, 1, 2, 3, -1, -2] if n else [1, 2])
        start = g.int_in(-n - 2, n + 2)
        end = g.int_in(-n - 2, n + 2) if g.chance(0.8) else (2**62 if step > 0 else -(2**62))
        starts.append(start), ends.append(end), steps.append(step)
        shape[a] = onnx_slice_length(n, start, end, step)
    ins = [x, g.ints(starts, "starts"), g.ints(ends, "ends"), g.ints(axes, "axes")]
    if any(s != 1 for s in steps) or g.chance(0.5):
        ins.append(g.ints(steps, "steps"))
    g.node("Slice", ins, [(x.dtype, tuple(shape), x.bound, x.exact)])


def onnx_slice_length(n: int, start: int, end: int, step: int) -> int:
    """How many elements ONNX Slice takes from a dim of size n (its clamping rules, which differ from Python's
    for negative steps)."""
    start, end = start + n if start < 0 else start, end + n if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), n), min(max(end, 0), n)
        return max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    return max(0, -(-(start - end) // -step))


@op("Split", 0.6)
def gen_split(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), min_rank=1)
    axis = g.int_in(0, x.rank - 1)
    n = x.shape[axis]
    if n < 2:
        raise Skip("too small to split")
    if g.chance(0.5):
        parts = g.int_in(2, min(n, 4))
        size = -(-n // parts)
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
        if len(sizes) != parts:
            raise Skip("ONNX wants the last chunk to be the only short one")
        outs = [(x.dtype, tuple(s if i == axis else d for i, d in enumerate(x.shape)), x.bound, x.exact) for s in sizes]
        g.node("Split", [x], outs, axis=axis, num_outputs=parts)
        return
    cut = sorted(set(int(c) for c in g.rng.integers(0, n + 1, g.int_in(1, 3))))
    bounds = [0] + cut + [n]
    sizes = [b - a for a, b in zip(bounds, bounds[1:])]
    outs = [(x.dtype, tuple(s if i == axis else d for i, d in enumerate(x.shape)), x.bound, x.exact) for s in sizes]
    g.node("Split", [x, g.ints(sizes, "split")], outs, axis=axis)


@op("Pad", 0.8)
def gen_pad(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC, min_rank=1, nonempty=True)
    mode = g.choice(["constant", "constant", "reflect", "edge"])
    lo, hi = [], []
    for d in x.shape:
        top = d - 1 if mode == "reflect" else 3
        a, b = g.int_in(0, min(top, 3)), g.int_in(0, min(top, 3))
        if mode == "constant" and g.chance(0.15):
            a = -g.int_in(0, max(d - 1, 0) // 2)  # a negative pad crops
        lo.append(a), hi.append(b)
    shape = tuple(d + a + b for d, a, b in zip(x.shape, lo, hi))
    ins = [x, g.ints(lo + hi, "pads")]
    value = 0.0
    if mode == "constant" and g.chance(0.5):
        value = g.choice([0.5, -1.0, 2.0]) if x.dtype in FLOATS else g.int_in(-2, 2)
        ins.append(g.const(np.array(value, NP_TYPE[x.dtype])))
    g.node("Pad", ins, [(x.dtype, shape, max(x.bound, abs(value)), x.exact)], mode=mode)


@op("Gather", 1.0)
def gen_gather(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), min_rank=1, nonempty=True)
    axis = g.int_in(-x.rank, x.rank - 1)
    n = x.shape[axis % x.rank]
    idx_shape = g.random_shape(g.int_in(0, 2), max_elements=64)
    idx = g.rng.integers(-n, n, idx_shape).astype(np.int64)
    a = axis % x.rank
    shape = x.shape[:a] + tuple(idx_shape) + x.shape[a + 1:]
    if np.prod(shape) > MAX_ELEMENTS:
        raise Skip("too big")
    g.node("Gather", [x, g.const(idx, g.fresh("idx"))], [(x.dtype, shape, x.bound, x.exact)], axis=axis)


@op("GatherElements", 0.4)
def gen_gather_elements(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC, min_rank=1, nonempty=True)
    axis = g.int_in(0, x.rank - 1)
    shape = tuple(g.int_in(1, d) if i != axis else g.int_in(1, 5) for i, d in enumerate(x.shape))
    idx = g.rng.integers(-x.shape[axis], x.shape[axis], shape).astype(np.int64)
    g.node("GatherElements", [x, g.const(idx, g.fresh("idx"))], [(x.dtype, shape, x.bound, x.exact)], axis=axis)


@op("Expand", 0.8)
def gen_expand(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), max_rank=3)
    target = [g.choice([2, 3, 4]) if d == 1 and g.chance(0.6) else (1 if g.chance(0.15) else d) for d in x.shape]
    target = [g.choice([1, 2, 3]) for _ in range(g.int_in(0, 1))] + target
    out = broadcast_shape(x.shape, tuple(target))
    if np.prod(out) > MAX_ELEMENTS:
        raise Skip("too big")
    g.node("Expand", [x, g.ints(target, "shape")], [(x.dtype, out, x.bound, x.exact)])


@op("Tile", 0.5)
def gen_tile(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,), min_rank=1, max_rank=3)
    reps = [g.choice([1, 1, 2, 3]) for _ in x.shape]
    out = tuple(d * r for d, r in zip(x.shape, reps))
    if np.prod(out) > MAX_ELEMENTS:
        raise Skip("too big")
    g.node("Tile", [x, g.ints(reps, "repeats")], [(x.dtype, out, x.bound, x.exact)])


@op("CumSum", 0.4)
def gen_cumsum(g: ModelBuilder) -> None:
    x = g.operand((F32, I64, I32), min_rank=1)
    axis = g.int_in(-x.rank, x.rank - 1)
    bound = x.bound * max(x.shape[axis % x.rank], 1)
    if bound > limit(x.dtype):
        raise Skip("would overflow")
    g.node("CumSum", [x, g.const(np.array(axis, np.int64), g.fresh("axis"))],
           [(x.dtype, x.shape, bound, x.exact and x.dtype in INTS)], exclusive=g.int_in(0, 1), reverse=g.int_in(0, 1))


@op("Identity", 0.2)
def gen_identity(g: ModelBuilder) -> None:
    x = g.operand(NUMERIC + (BOOL,))
    g.node("Identity", [x], [(x.dtype, x.shape, x.bound, x.exact)])
