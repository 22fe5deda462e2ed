"""stablehlo.sort (any comparator, several operands, any dimension) and chlo.top_k, by rank counting.

The IR has no sort op; a sort of n elements along a dim is built from existing ops:
the comparator, imported once over all n x n pairs (Context.import_lifted), says for
each pair (i, j) whether j goes before i; element i's place is the number of
elements that go before it, where an element equal to i (neither before the other)
counts when it comes earlier (a stable sort, which also satisfies is_stable = false).
The permutation is inverted with one compare per (place, element) pair and every
operand is read through it with gather-elements. That costs O(n^2) work and memory
per sorted row: exact, and fine for the rows models sort (top-k heads, small
vocabularies); a row of more than MAX_SORTED elements is refused.

chlo.top_k is the same with "greater" as the comparator, in the total order XLA
uses for floats (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN), and only the
first k places inverted.
"""

from __future__ import annotations

from typing import Any, Callable

from mlcc.frontend.stablehlo.importer import Complex, Context, Results, complex_op, custom_call_target, stablehlo_op
from mlcc.frontend.stablehlo.ops.elementwise import total_order_key
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.ir import Instruction, Shape

MAX_SORTED = 4096  # elements per sorted row (the pair tensors hold n^2 per row)
PLACE = "s32"


def _moved_last(cx: Context, x: Instruction, dim: int) -> Instruction:
    rank = x.shape.rank
    return x if dim == rank - 1 else cx.b.transpose(x, [d for d in range(rank) if d != dim] + [dim])


def _moved_back(cx: Context, x: Instruction, dim: int) -> Instruction:
    rank = x.shape.rank
    if dim == rank - 1:
        return x
    perm = [d for d in range(rank) if d != dim] + [dim]
    return cx.b.transpose(x, [perm.index(d) for d in range(rank)])


def _pairs(cx: Context, x: Instruction, axis: int) -> Instruction:
    """x (rows + [n]) over rows + [n, n], varying along ``axis`` (-1: the other element j, -2: this one i)."""
    rows = tuple(x.shape.dims[:-1])
    n = int(x.shape.dims[-1])
    lead = tuple(range(len(rows)))
    return cx.b.op("broadcast", [x], Shape(x.shape.dtype, rows + (n, n)), dimensions=lead + (len(rows) + 2 + axis,))


def _inverse(cx: Context, places: Instruction, count: int) -> Instruction:
    """The element at each of the first ``count`` places (rows + [count]), from each element's place."""
    rows = tuple(places.shape.dims[:-1])
    n = int(places.shape.dims[-1])
    dims = rows + (count, n)
    rank = len(dims)
    spread = cx.b.op("broadcast", [places], Shape(PLACE, dims), dimensions=tuple(range(len(rows))) + (rank - 1,))
    here = cx.b.op("compare", [spread, cx.b.op("iota", [], Shape(PLACE, dims), iota_dimension=rank - 2)],
                   direction="EQ")
    which = cx.b.op("select", [here, cx.b.op("iota", [], Shape(PLACE, dims), iota_dimension=rank - 1),
                               cx.b.splat(0, PLACE, dims)])
    return cx.b.op("reduce", [which], dimensions=(rank - 1,), kind="add")


def sort_rows(cx: Context, op: Op, values: list[Instruction], goes_before: Callable[[list, list], Instruction],
              count: int | None = None) -> Instruction:
    """The permutation that sorts rows (every value has the sorted dim last): the element at each of the first
    count places. goes_before(this, other) -> pred: whether the other element goes strictly before this one."""
    n = int(values[0].shape.dims[-1])
    if n > MAX_SORTED:
        raise cx.unsupported(op, f"sorting rows of {n} elements (at most {MAX_SORTED}: the sort compares all pairs)")
    this = [_pairs(cx, v, -2) for v in values]
    other = [_pairs(cx, v, -1) for v in values]
    other_first = goes_before(this, other)
    this_first = goes_before(other, this)
    j_first = cx.b.op("compare", [cx.b.op("iota", [], Shape(PLACE, tuple(other_first.shape.dims)),
                                          iota_dimension=other_first.shape.rank - 1),
                                  cx.b.op("iota", [], Shape(PLACE, tuple(other_first.shape.dims)),
                                          iota_dimension=other_first.shape.rank - 2)], direction="LT")
    tie_first = cx.b.op("and", [j_first, cx.b.op("not", [this_first])])
    before = cx.b.op("or", [other_first, tie_first])
    rank = before.shape.rank
    places = cx.b.op("reduce", [cx.b.convert(before, PLACE)], dimensions=(rank - 1,), kind="add")
    return _inverse(cx, places, n if count is None else count)


def read_through(cx: Context, x: Instruction, perm: Instruction) -> Instruction:
    return cx.b.op("gather-elements", [x, perm], axis=x.shape.rank - 1)


# ---------------------------------------------------------------- sort
@stablehlo_op("stablehlo.sort")
def import_sort(cx: Context, op: Op, args: list[Instruction]) -> Results:
    if not op.regions:
        raise cx.error(op, "sort needs a comparator region")
    rank = args[0].shape.rank
    dim = int(op.attrs.get("dimension", -1))
    dim = dim + rank if dim < 0 else dim
    if not 0 <= dim < max(rank, 1):
        raise cx.error(op, f"dimension {dim} is out of range for rank {rank}")
    if rank == 0:
        return list(args)
    moved = [_moved_last(cx, a, dim) for a in args]
    if int(moved[0].shape.dims[-1]) <= 1:
        return list(args)
    return _sorted(cx, op, op.regions[0], moved, dim)


def _sorted(cx: Context, op: Op, comparator: list, moved: list[Instruction], dim: int,
            count: int | None = None) -> list[Instruction]:
    """The operands (sorted dim moved last) sorted by the comparator region, their first count places, with
    the sorted dim back in its place."""

    def goes_before(this: list, other: list) -> Instruction:
        operands = [x for pair in zip(other, this) for x in pair]  # comparator(lhs_0, rhs_0, lhs_1, rhs_1, ...)
        (less,) = cx.import_lifted(comparator, operands, other[0].shape.dims)
        if less.shape.dtype != "pred":
            raise cx.error(op, "the comparator must return a tensor<i1>")
        if less.shape.rank == 0:
            less = cx.b.broadcast_to(less, other[0].shape.dims)
        return less

    perm = sort_rows(cx, op, moved, goes_before, count)
    return [_moved_back(cx, read_through(cx, m, perm), dim) for m in moved]


# ---------------------------------------------------------------- ApproxTopK
@custom_call_target("ApproxTopK")
def import_approx_top_k(cx: Context, op: Op, args: list[Instruction]) -> Results:
    """jax.lax.approx_max_k/approx_min_k: custom_call @ApproxTopK(operands..., init values...) with the
    comparator in called_computations. mlcc computes it exactly, as XLA does off TPU (is_fallback): the
    operands sorted along reduction_dim by the comparator, their first top_k places. XLA's sort there is not
    stable, so where values tie the indices XLA returns are its sort's choice; mlcc's sort keeps the first."""
    config = op.attrs.get("mhlo.backend_config")
    callees = op.attrs.get("called_computations")
    if not isinstance(config, dict) or not isinstance(callees, list) or len(callees) != 1:
        raise cx.error(op, "ApproxTopK needs mhlo.backend_config and one comparator in called_computations")
    n = len(args) // 2
    if n < 1 or len(args) != 2 * n or len(op.results) != n:
        raise cx.error(op, f"ApproxTopK takes n operands and n init values for n results, not {len(args)} "
                           f"operands for {len(op.results)} results")
    fn = cx.parsed.functions.get(getattr(callees[0], "name", str(callees[0])))
    if fn is None:
        raise cx.error(op, f"ApproxTopK's comparator {callees[0]} is not defined")
    operands = args[:n]
    rank = operands[0].shape.rank
    dim = int(config.get("reduction_dim", -1))
    dim = dim + rank if dim < 0 else dim
    if not 0 <= dim < rank:
        raise cx.error(op, f"reduction_dim {config.get('reduction_dim')} is out of range for rank {rank}")
    # top_k places with aggregate_to_topk; without, XLA's fallback keeps the larger count it computes from
    # the recall target (the results' size along reduction_dim), also sorted
    k = int(cx.result_shape(op, 0).dims[dim])
    size = int(operands[0].shape.dims[dim])
    if k > size or any(tuple(cx.result_shape(op, i).dims)[dim] != k for i in range(n)):
        raise cx.error(op, f"results of {k} elements along dim {dim} from an operand of {size}")
    return _sorted(cx, op, [fn.body], [_moved_last(cx, a, dim) for a in operands], dim, count=k)


@complex_op("stablehlo.sort")
def import_complex_sort(cx: Context, op: Op, args: list[Any]) -> Results:
    """A sort with complex operands: each part moved with the permutation, the comparator given Complex values
    (its compare orders them lexicographically on (real, imaginary), as the spec says)."""
    if not op.regions:
        raise cx.error(op, "sort needs a comparator region")
    first = args[0].re if isinstance(args[0], Complex) else args[0]
    rank = first.shape.rank
    dim = int(op.attrs.get("dimension", -1))
    dim = dim + rank if dim < 0 else dim
    if not 0 <= dim < max(rank, 1):
        raise cx.error(op, f"dimension {dim} is out of range for rank {rank}")
    if rank == 0 or int(first.shape.dims[dim]) <= 1:
        return list(args)
    parts = [list(a) if isinstance(a, Complex) else [a] for a in args]
    flat = [_moved_last(cx, p, dim) for ps in parts for p in ps]

    def grouped(values: list) -> list:
        out, k = [], 0
        for ps in parts:
            out.append(Complex(values[k], values[k + 1]) if len(ps) == 2 else values[k])
            k += len(ps)
        return out

    def goes_before(this: list, other: list) -> Instruction:
        pairs = [x for pair in zip(grouped(other), grouped(this)) for x in pair]
        (less,) = cx.import_lifted(op.regions[0], pairs, other[0].shape.dims)
        if isinstance(less, Complex) or less.shape.dtype != "pred":
            raise cx.error(op, "the comparator must return a tensor<i1>")
        if less.shape.rank == 0:
            less = cx.b.broadcast_to(less, other[0].shape.dims)
        return less

    perm = sort_rows(cx, op, flat, goes_before)
    return grouped([_moved_back(cx, read_through(cx, m, perm), dim) for m in flat])


# ---------------------------------------------------------------- top_k
@stablehlo_op("chlo.top_k")
def import_top_k(cx: Context, op: Op, args: list[Instruction]) -> Results:
    (x,) = args
    if x.shape.rank == 0:
        raise cx.error(op, "top_k of a rank-0 operand")
    k = int(op.attrs.get("k", -1))
    n = int(x.shape.dims[-1])
    if not 0 <= k <= n:
        raise cx.error(op, f"k = {k} is not in [0, {n}]")
    index_type = cx.result_shape(op, 1).dtype
    key = total_order_key(cx, x)

    def goes_before(this: list, other: list) -> Instruction:
        return cx.b.op("compare", [other[0], this[0]], direction="GT")

    perm = sort_rows(cx, op, [key], goes_before, count=k)
    return [read_through(cx, x, perm), cx.b.convert(perm, index_type) if index_type != PLACE else perm]
