"""Result shapes of every opcode, from operand shapes and attributes.

Builders use it to create instructions; the verifier uses it to check them.
Layouts are not inferred here: a result gets the default (row-major) layout and
layout assignment chooses later. Raises ShapeError with a readable reason.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from mlcc.hlo.ir import Dim, Shape, TupleShape, AnyShape
from mlcc.hlo.opcodes import BINARY_OPS, OPCODES, UNARY_OPS
from mlcc.hlo.rules import RuleTable
from mlcc.hlo.symbolic import Sym, SymbolicError, as_sym, dim_of, product, symbols_of


class ShapeError(ValueError):
    pass


ShapeRule = Callable[[str, list, dict, "AnyShape | None"], AnyShape]


def _same_dims(a: Shape, b: Shape, what: str) -> None:
    if a.dims != b.dims:
        raise ShapeError(f"{what}: dims {list(a.dims)} and {list(b.dims)} differ")


def _prod(dims: Sequence[Dim]) -> Dim:
    """The element count: an int, a canonical expression over symbolic dims, or "?" when a dim is unknown."""
    try:
        return product(dims)
    except SymbolicError:
        return "?"


def _sum(dims: Sequence[Dim]) -> Dim:
    try:
        return dim_of(sum((as_sym(d) for d in dims), Sym()))
    except SymbolicError:
        return "?"


def conv_dim_labels(labels: str) -> tuple[str, str, str]:
    """Split ``bf01_oi01->bf01`` into (lhs, rhs, out) label strings."""
    try:
        lhs_rhs, out = labels.split("->")
        lhs, rhs = lhs_rhs.split("_")
    except ValueError:
        raise ShapeError(f"bad dim_labels '{labels}'") from None
    return lhs, rhs, out


def window_output_dim(size: int, window: int, stride: int, lo: int, hi: int, dilation: int = 1) -> int:
    effective = dilation * (window - 1) + 1
    return (size + lo + hi - effective) // stride + 1


def infer_shape(opcode: str, operands: Sequence[AnyShape], attrs: dict[str, Any],
                given: AnyShape | None = None) -> AnyShape:
    """The result shape of ``opcode`` applied to ``operands``.

    ``given`` is the declared result shape; ops whose result cannot be derived
    (parameter, constant, reshape, convert, broadcast, iota...) take their dims
    and dtype from it and only their consistency is checked.
    """
    info = OPCODES.get(opcode)
    if info is None:
        raise ShapeError(f"unknown opcode '{opcode}'")
    ops = list(operands)
    for s in ops:
        if s.is_tuple and opcode not in ("get-tuple-element", "tuple"):
            raise ShapeError(f"{opcode}: tuple-shaped operand")
    fn = SHAPE_RULES.get(opcode)
    if fn is None:
        raise ShapeError(f"no shape rule for '{opcode}'")
    return fn(opcode, ops, attrs, given)


def _need_given(opcode: str, given: AnyShape | None) -> AnyShape:
    if given is None:
        raise ShapeError(f"{opcode}: result shape must be given")
    return given


def _unary(opcode, ops, attrs, given):
    (x,) = ops
    if OPCODES[opcode].has("predicate"):
        return Shape("pred", x.dims)
    if opcode in ("convert", "bitcast-convert"):
        g = _need_given(opcode, given)
        _same_dims(x, g, opcode)
        return Shape(g.dtype, x.dims)
    return Shape(x.dtype, x.dims)


def _binary(opcode, ops, attrs, given):
    a, b = ops
    _same_dims(a, b, opcode)
    if a.dtype != b.dtype:
        raise ShapeError(f"{opcode}: operand dtypes {a.dtype} and {b.dtype} differ")
    if opcode == "compare":
        return Shape("pred", a.dims)
    return Shape(a.dtype, a.dims)


def _select(opcode, ops, attrs, given):
    p, a, b = ops
    if p.dtype != "pred":
        raise ShapeError(f"select: predicate is {p.dtype}, not pred")
    _same_dims(p, a, "select")
    _same_dims(a, b, "select")
    if a.dtype != b.dtype:
        raise ShapeError(f"select: dtypes {a.dtype} and {b.dtype} differ")
    return Shape(a.dtype, a.dims)


def _clamp(opcode, ops, attrs, given):
    lo, x, hi = ops
    for bound in (lo, hi):
        if bound.rank != 0:
            _same_dims(bound, x, "clamp")
        if bound.dtype != x.dtype:
            raise ShapeError(f"clamp: bound dtype {bound.dtype} differs from {x.dtype}")
    return Shape(x.dtype, x.dims)


def _given(opcode, ops, attrs, given):
    return _need_given(opcode, given)


def _size(opcode, ops, attrs, given):
    g = _need_given(opcode, given)
    if g.rank != 0 or g.dtype not in ("s32", "s64"):
        raise ShapeError(f"size: the value of '{attrs['expr']}' is an s32[] or s64[] scalar, not {g}")
    return g


def _iota(opcode, ops, attrs, given):
    g = _need_given(opcode, given)
    if not 0 <= attrs["iota_dimension"] < max(g.rank, 1):
        raise ShapeError(f"iota: iota_dimension {attrs['iota_dimension']} out of range")
    return g


def _constant(opcode, ops, attrs, given):
    g = _need_given(opcode, given)
    kinds = [k for k in ("value", "splat", "ref") if k in attrs]
    if len(kinds) != 1:
        raise ShapeError("constant: needs exactly one of value=, splat=, ref=")
    if "value" in attrs and g.is_static and len(attrs["value"]) != g.numel():
        raise ShapeError(f"constant: {len(attrs['value'])} values for {g.numel()} elements")
    return g


def _tuple(opcode, ops, attrs, given):
    return TupleShape(tuple(ops))


def _gte(opcode, ops, attrs, given):
    (t,) = ops
    if not t.is_tuple:
        raise ShapeError("get-tuple-element: operand is not a tuple")
    i = attrs["index"]
    if not 0 <= i < len(t.elements):
        raise ShapeError(f"get-tuple-element: index {i} out of range")
    return t.elements[i]


def _broadcast(opcode, ops, attrs, given):
    (x,) = ops
    g = _need_given(opcode, given)
    dims = attrs["dimensions"]
    if len(dims) != x.rank:
        raise ShapeError(f"broadcast: {len(dims)} dimensions for operand of rank {x.rank}")
    if list(dims) != sorted(set(dims)) or any(not 0 <= d < g.rank for d in dims):
        raise ShapeError(f"broadcast: dimensions {list(dims)} must be increasing and < {g.rank}")
    for i, d in enumerate(dims):
        if x.dims[i] != g.dims[d] and x.dims[i] != 1:
            raise ShapeError(f"broadcast: operand dim {i} ({x.dims[i]}) does not match result dim {d} ({g.dims[d]})")
    return Shape(x.dtype, g.dims)


def _reshape(opcode, ops, attrs, given):
    (x,) = ops
    g = _need_given(opcode, given)
    if x.dtype != g.dtype:
        raise ShapeError(f"{opcode}: dtype changes from {x.dtype} to {g.dtype}")
    a, b = _prod(x.dims), _prod(g.dims)
    fresh = a == "?" or b == "?" or not set(symbols_of([b])) <= set(symbols_of([a]))
    if not fresh and a != b:  # a result with a symbol of its own defines it (the evaluator binds it)
        raise ShapeError(f"{opcode}: {list(x.dims)} has {a} elements, {list(g.dims)} has {b}")
    return Shape(x.dtype, g.dims)


def _copy(opcode, ops, attrs, given):
    (x,) = ops
    return Shape(x.dtype, x.dims)


def _transpose(opcode, ops, attrs, given):
    (x,) = ops
    perm = list(attrs["dimensions"])
    if sorted(perm) != list(range(x.rank)):
        raise ShapeError(f"transpose: {perm} is not a permutation of rank {x.rank}")
    return Shape(x.dtype, tuple(x.dims[p] for p in perm))


def _slice(opcode, ops, attrs, given):
    (x,) = ops
    starts, limits, strides = attrs["start_indices"], attrs["limit_indices"], attrs["strides"]
    if not len(starts) == len(limits) == len(strides) == x.rank:
        raise ShapeError(f"slice: attributes must have rank {x.rank} entries")
    out = []
    for d, s, l, st in zip(x.dims, starts, limits, strides):
        if not all(isinstance(v, int) for v in (d, s, l)):
            if s == 0 and l == d and st == 1:  # a symbolic dim taken whole
                out.append(d)
                continue
            if st != 1:
                raise ShapeError(f"slice: [{s}:{l}:{st}] of dim {d}: a symbolic bound needs stride 1")
            try:  # in range for every symbol value is the frontend's to decide (it has the ranges)
                out.append(dim_of(as_sym(l) - as_sym(s)))
            except SymbolicError:
                raise ShapeError(f"slice: [{s}:{l}:{st}] of dim {d}") from None
            continue
        if st <= 0 or s < 0 or l < s or l > d:
            raise ShapeError(f"slice: [{s}:{l}:{st}] out of range for dim {d}")
        out.append((l - s + st - 1) // st)
    return Shape(x.dtype, tuple(out))


def _dynamic_slice(opcode, ops, attrs, given):
    x, *idx = ops
    sizes = attrs["slice_sizes"]
    if len(idx) != x.rank or len(sizes) != x.rank:
        raise ShapeError(f"dynamic-slice: needs {x.rank} start indices and slice sizes")
    return Shape(x.dtype, tuple(sizes))


def _dynamic_update_slice(opcode, ops, attrs, given):
    x, upd, *idx = ops
    if len(idx) != x.rank or upd.rank != x.rank:
        raise ShapeError(f"dynamic-update-slice: needs {x.rank} start indices")
    return Shape(x.dtype, x.dims)


def _concatenate(opcode, ops, attrs, given):
    k = attrs["dimension"]
    first = ops[0]
    if not 0 <= k < first.rank:
        raise ShapeError(f"concatenate: dimension {k} out of range")
    for s in ops:
        if s.rank != first.rank or s.dtype != first.dtype:
            raise ShapeError("concatenate: operands differ in rank or dtype")
        for i in range(s.rank):
            if i != k and s.dims[i] != first.dims[i]:
                raise ShapeError(f"concatenate: dim {i} differs ({s.dims[i]} vs {first.dims[i]})")
    total = _sum([s.dims[k] for s in ops])
    if total == "?":
        return _need_given(opcode, given)
    return Shape(first.dtype, first.dims[:k] + (total,) + first.dims[k + 1:])


def _pad(opcode, ops, attrs, given):
    x, v = ops
    if v.rank != 0 or v.dtype != x.dtype:
        raise ShapeError("pad: padding value must be a scalar of the operand's dtype")
    lo, hi, inter = attrs["edge_padding_low"], attrs["edge_padding_high"], attrs["interior_padding"]
    out = []
    for d, l, h, i in zip(x.dims, lo, hi, inter):
        if not isinstance(d, int):
            if i != 0:
                raise ShapeError(f"pad: interior padding of symbolic dim {d}")
            out.append(dim_of(as_sym(d) + l + h))  # that it stays >= 0 is the frontend's to decide
            continue
        n = d + l + h + max(d - 1, 0) * i
        if n < 0:
            raise ShapeError("pad: negative result dim")
        out.append(n)
    return Shape(x.dtype, tuple(out))


def _reverse(opcode, ops, attrs, given):
    (x,) = ops
    return Shape(x.dtype, x.dims)


def _gather(opcode, ops, attrs, given):
    data, idx = ops
    axis = attrs["axis"]
    if not 0 <= axis < data.rank:
        raise ShapeError(f"gather: axis {axis} out of range for rank {data.rank}")
    if idx.dtype not in ("s32", "s64"):
        raise ShapeError(f"gather: indices must be s32 or s64, not {idx.dtype}")
    return Shape(data.dtype, data.dims[:axis] + idx.dims + data.dims[axis + 1:])


def _gather_elements(opcode, ops, attrs, given):
    data, idx = ops
    if data.rank != idx.rank:
        raise ShapeError("gather-elements: data and indices ranks differ")
    return Shape(data.dtype, idx.dims)


def _gather_nd(opcode, ops, attrs, given):
    data, idx = ops
    b = attrs["batch_dims"]
    k = idx.dims[-1] if idx.rank else 0
    if not isinstance(k, int) or b + k > data.rank:
        raise ShapeError("gather-nd: index depth exceeds data rank")
    return Shape(data.dtype, idx.dims[:-1] + data.dims[b + k:])


def _scatter_nd(opcode, ops, attrs, given):
    data, idx, upd = ops
    return Shape(data.dtype, data.dims)


def _reduce(opcode, ops, attrs, given):
    (x,) = ops
    dims = set(attrs["dimensions"])
    if any(not 0 <= d < x.rank for d in dims):
        raise ShapeError(f"reduce: dimensions {sorted(dims)} out of range for rank {x.rank}")
    return Shape(x.dtype, tuple(d for i, d in enumerate(x.dims) if i not in dims))


def _argminmax(opcode, ops, attrs, given):
    (x,) = ops
    k = attrs["dimension"]
    if not 0 <= k < x.rank:
        raise ShapeError(f"{opcode}: dimension {k} out of range")
    return Shape("s64", x.dims[:k] + x.dims[k + 1:])


def _reduce_window(opcode, ops, attrs, given):
    (x,) = ops
    w, s = attrs["window_dimensions"], attrs["window_strides"]
    lo, hi = attrs["padding_low"], attrs["padding_high"]
    dil = attrs.get("window_dilations", (1,) * x.rank)
    if not len(w) == len(s) == len(lo) == len(hi) == len(dil) == x.rank:
        raise ShapeError(f"reduce-window: attributes must have {x.rank} entries")
    out = []
    for d, wi, si, l, h, di in zip(x.dims, w, s, lo, hi, dil):
        if not isinstance(d, int):
            if wi == si == 1 and l == h == 0:
                out.append(d)
                continue
            raise ShapeError(f"reduce-window: windowing symbolic dim {d}")
        n = window_output_dim(d, wi, si, l, h, di)
        if n <= 0 and d > 0:
            raise ShapeError("reduce-window: window larger than padded input")
        out.append(max(n, 0))
    return Shape(x.dtype, tuple(out))


def _cumsum(opcode, ops, attrs, given):
    (x,) = ops
    return Shape(x.dtype, x.dims)


INT8 = ("s8", "u8")
# the fp8 types contractions take, in any pairing (mlcc/hlo/passes/quantized_fp8.py): products exact in f32
FP8_DOT = ("f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz")


def _contraction_dtype(opcode: str, lhs: str, rhs: str, given: Shape | None) -> str:
    """The result type of a dot or convolution: the operands' (or the one given), or for 8-bit integer
    operands, signed or unsigned each, an s32 accumulation (a quantized contraction, exact in 32 bits)."""
    if lhs in INT8 and rhs in INT8 and given is not None and given.dtype == "s32":
        return "s32"
    if lhs in FP8_DOT and rhs in FP8_DOT and given is not None and given.dtype == "f32":
        return "f32"  # an fp8 contraction, accumulated in f32
    if lhs != rhs:
        raise ShapeError(f"{opcode}: dtypes {lhs} and {rhs} differ")
    return given.dtype if given is not None else lhs


def _dot(opcode, ops, attrs, given):
    a, b = ops
    lb, lc = list(attrs["lhs_batch_dims"]), list(attrs["lhs_contracting_dims"])
    rb, rc = list(attrs["rhs_batch_dims"]), list(attrs["rhs_contracting_dims"])
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise ShapeError("dot: batch or contracting dim counts differ")
    for i, j in zip(lb + lc, rb + rc):
        if a.dims[i] != b.dims[j]:
            raise ShapeError(f"dot: lhs dim {i} ({a.dims[i]}) != rhs dim {j} ({b.dims[j]})")
    dtype = _contraction_dtype("dot", a.dtype, b.dtype, given)
    lf = [d for i, d in enumerate(a.dims) if i not in lb + lc]
    rf = [d for i, d in enumerate(b.dims) if i not in rb + rc]
    return Shape(dtype, tuple(a.dims[i] for i in lb) + tuple(lf) + tuple(rf))


def _convolution(opcode, ops, attrs, given):
    x, w = ops
    lhs, rhs, out = conv_dim_labels(attrs["dim_labels"])
    n = x.rank - 2
    if not len(lhs) == len(rhs) == len(out) == x.rank == w.rank:
        raise ShapeError("convolution: dim_labels do not match operand ranks")
    groups = attrs["feature_group_count"]
    cin = x.dims[lhs.index("f")]
    if cin != w.dims[rhs.index("i")] * groups:
        raise ShapeError(f"convolution: {cin} input channels, filter expects {w.dims[rhs.index('i')]} x {groups} groups")
    spatial = []
    for k in range(n):
        c = str(k)
        spatial.append(window_output_dim(x.dims[lhs.index(c)], w.dims[rhs.index(c)], attrs["window_strides"][k],
                                         attrs["padding_low"][k], attrs["padding_high"][k], attrs["rhs_dilation"][k]))
    dims: list[Any] = [0] * x.rank
    dims[out.index("b")] = x.dims[lhs.index("b")]
    dims[out.index("f")] = w.dims[rhs.index("o")]
    for k in range(n):
        dims[out.index(str(k))] = spatial[k]
    return Shape(_contraction_dtype("convolution", x.dtype, w.dtype, given), tuple(dims))


def _same_as_first(opcode, ops, attrs, given):
    return Shape(ops[0].dtype, ops[0].dims)


def _norm(opcode, ops, attrs, given):
    x = ops[0]
    plain = 3 if opcode == "layer-norm" else 2
    if len(ops) > plain + 1:
        raise ShapeError(f"{opcode}: at most {plain + 1} operands (x, scale{', bias' if plain == 3 else ''}, "
                         "row statistics)")
    if len(ops) == plain + 1:
        stats = ops[-1]
        if stats.dtype != "f32" or tuple(stats.dims[:x.rank - 1]) != tuple(x.dims[:-1]):
            raise ShapeError(f"{opcode}: row statistics {stats} are not f32 per row of {x}")
    return Shape(x.dtype, x.dims)


def _row_stats(opcode, ops, attrs, given):
    (x,) = ops
    part, moments = attrs["part"], attrs["moments"]
    if list(attrs["dimensions"]) != [x.rank - 1] or not isinstance(x.dims[-1], int):
        raise ShapeError("row-stats: rows are the static last dim")
    if moments not in ("squares", "mean-m2"):
        raise ShapeError(f"row-stats: moments {moments!r} is neither squares nor mean-m2")
    if not isinstance(part, int) or part <= 0 or x.dims[-1] % part:
        raise ShapeError(f"row-stats: parts of {part} do not divide rows of {x.dims[-1]}")
    parts = (x.dims[-1] // part,) + ((2,) if moments == "mean-m2" else ())
    return Shape("f32", tuple(x.dims[:-1]) + parts)


def _attention(opcode, ops, attrs, given):
    q, k, v = ops[:3]
    if q.dims[-1] != k.dims[-1]:
        raise ShapeError(f"attention: q head dim {q.dims[-1]} != k head dim {k.dims[-1]}")
    if k.dims[-2] != v.dims[-2]:
        raise ShapeError("attention: k and v sequence lengths differ")
    return Shape(q.dtype, q.dims[:-1] + (v.dims[-1],))


def _counted(opcode, ops, attrs, given):
    """The data-dependent ops (flag binds_count): a 1-D s64 result, the count at element 0 and the data after it,
    sized for the bound: nonzero [1 + rank*bound], unique [1 + 2*bound + 2*rows] (first indices, counts, inverse
    indices, each row's first occurrence), nms [1 + 3*bound] (batch, class, box rows), sort-indices [1 + numel] (every index, sorted)."""
    x = ops[0]
    if not x.is_static:
        raise ShapeError(f"{opcode}: operand dims {list(x.dims)} must be static")
    bound = attrs.get("bound", 0)
    if not isinstance(bound, int) or bound < 0:
        raise ShapeError(f"{opcode}: bound {bound!r} is not a size")
    if opcode == "nonzero":
        n = x.rank * bound
    elif opcode == "unique":
        if x.rank != 2:
            raise ShapeError(f"unique: operand must be rank 2 (rows compared whole), not {x.rank}")
        n = 2 * bound + 2 * x.dims[0]
    elif opcode == "nms":
        if x.rank != 3 or x.dims[2] != 4 or ops[1].rank != 3 or ops[1].dims[0] != x.dims[0] \
                or ops[1].dims[2] != x.dims[1]:
            raise ShapeError(f"nms: boxes [batch, boxes, 4] and scores [batch, classes, boxes], not "
                             f"{list(x.dims)} and {list(ops[1].dims)}")
        n = 3 * bound
    else:
        if not 0 <= attrs["dimension"] < x.rank or ops[1].dtype != "s64":
            raise ShapeError(f"sort-indices: dimension {attrs['dimension']} of rank {x.rank}, k of s64")
        n = x.numel()
    return Shape("s64", (1 + n,))


def _fusion(opcode, ops, attrs, given):
    return _need_given(opcode, given)


SHAPE_RULES: RuleTable[ShapeRule] = RuleTable("shape rule")
SHAPE_RULES.register(*UNARY_OPS)(_unary)    # every elementwise op of the table's unary and binary
SHAPE_RULES.register(*BINARY_OPS)(_binary)  # categories, so a new one needs no line here
for _opcode, _fn in {
    "parameter": _given, "constant": _constant, "iota": _iota, "size": _size, "tuple": _tuple,
    "get-tuple-element": _gte, "fusion": _fusion,
    "select": _select, "clamp": _clamp,
    "broadcast": _broadcast, "reshape": _reshape, "bitcast": _reshape, "copy": _copy,
    "transpose": _transpose, "slice": _slice, "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice, "concatenate": _concatenate, "pad": _pad,
    "reverse": _reverse, "gather": _gather, "gather-elements": _gather_elements,
    "gather-nd": _gather_nd, "scatter-nd": _scatter_nd,
    "reduce": _reduce, "argmax": _argminmax, "argmin": _argminmax,
    "reduce-window": _reduce_window, "cumsum": _cumsum,
    "dot": _dot, "convolution": _convolution,
    "softmax": _same_as_first, "layer-norm": _norm, "rms-norm": _norm, "row-stats": _row_stats,
    "batch-norm-inference": _same_as_first, "attention": _attention,
    "nonzero": _counted, "unique": _counted, "nms": _counted, "sort-indices": _counted,
}.items():
    SHAPE_RULES.add(_opcode, _fn)
