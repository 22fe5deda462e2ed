"""gather and scatter in every dimension-number form, through one element-wise index map.

The StableHLO spec defines both ops by the operand index each result (or update)
element reads (or writes). This module builds that index as a tensor: for gather,
one s64 vector of operand coordinates per result element (shape result + [rank]),
then one ``gather-nd``; for scatter, one per update element (shape updates +
[rank]), then one ``scatter-nd`` per operand. The spec's terms, per operand dim d:

- the start index (``start_index_map`` / ``scatter_dims_to_operand_dims``), read from
  the index vector of the element's batch (gather) or scatter (scatter) coordinates;
  gather clamps it into ``[0, dim - slice_size]``;
- the batching index (``operand_batching_dims`` / ``input_batching_dims``): the
  element's coordinate along the matching indices batching dim;
- the offset (window) index: the element's coordinate along its offset dim.

Scatter skips an update window whose start is out of bounds (XLA's rule; the spec
leaves it to the implementation): the whole window is sent to a padding row that is
cut off afterwards. A combining body that is add, multiply, maximum or minimum (or
one that returns the update: replace) is the scatter-nd reduction; any other body is
applied one update element at a time, in order, as a sequence of gather-nd, the
body, and scatter-nd (exact, and linear in the number of update elements); complex operands take this
path as their (real, imaginary) parts, the body applied to complex values.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from mlcc.frontend.stablehlo import quantized
from mlcc.frontend.stablehlo.importer import Complex, Context
from mlcc.frontend.stablehlo.syntax import Block, Op
from mlcc.hlo.ir import Instruction, Shape

SCATTER_KINDS = {"stablehlo.add": "add", "stablehlo.multiply": "mul", "stablehlo.maximum": "max",
                 "stablehlo.minimum": "min"}
MAX_GENERAL_SCATTER_ELEMENTS = 1024  # update elements a scatter with a general body is unrolled over

INDEX = "s64"


def index_vector_last(cx: Context, indices: Instruction, ivd: int) -> Instruction:
    """Indices with the index vector as their last dim (added when index_vector_dim == rank)."""
    rank = indices.shape.rank
    if ivd == rank:
        return cx.b.reshape(indices, tuple(indices.shape.dims) + (1,))
    if ivd == rank - 1:
        return indices
    perm = [d for d in range(rank) if d != ivd] + [ivd]
    return cx.b.transpose(indices, perm)


def moved(dim: int, ivd: int, rank: int) -> int:
    """Where indices dim ``dim`` lands once the index vector dim has been moved last."""
    return dim - 1 if ivd < rank and dim > ivd else dim


def _column(cx: Context, indices: Instruction, k: int) -> Instruction:
    """indices[..., k] as s64 (indices has its index vector last)."""
    dims = tuple(indices.shape.dims)
    rank = len(dims)
    piece = cx.b.op("slice", [indices], start_indices=(0,) * (rank - 1) + (k,), limit_indices=dims[:-1] + (k + 1,),
                    strides=(1,) * rank)
    column = cx.b.reshape(piece, dims[:-1])
    if column.shape.dtype in ("u64",):  # huge unsigned indices stay huge (out of range), not negative
        limit = cx.scalar(np.iinfo(np.int64).max, "u64")
        column = cx.b.op("minimum", [column, cx.b.broadcast_to(limit, column.shape.dims)])
    return cx.b.convert(column, INDEX) if column.shape.dtype != INDEX else column


def _spread(cx: Context, x: Instruction, dims: Sequence[int], positions: Sequence[int]) -> Instruction:
    """x (one value per coordinate of ``positions``) broadcast to ``dims``."""
    if tuple(x.shape.dims) == tuple(dims):
        return x
    return cx.b.op("broadcast", [x], Shape(x.shape.dtype, tuple(dims)), dimensions=tuple(positions))


def _iota(cx: Context, dims: Sequence[int], dim: int) -> Instruction:
    return cx.b.op("iota", [], Shape(INDEX, tuple(dims)), iota_dimension=dim)


def _sum(cx: Context, terms: list[Instruction], dims: Sequence[int]) -> Instruction:
    if not terms:
        return cx.b.splat(0, INDEX, tuple(dims))
    total = terms[0]
    for t in terms[1:]:
        total = cx.b.op("add", [total, t])
    return total


def _stack(cx: Context, columns: list[Instruction], dims: Sequence[int]) -> Instruction:
    """Per-dim coordinates (each shaped dims) -> one index vector per element (dims + [rank])."""
    pieces = [cx.b.reshape(c, tuple(dims) + (1,)) for c in columns]
    return pieces[0] if len(pieces) == 1 else cx.b.op("concatenate", pieces, dimension=len(dims))


def _clamped(cx: Context, x: Instruction, high: int) -> Instruction:
    if high == 0:
        return cx.b.splat(0, INDEX, tuple(x.shape.dims))
    return cx.b.op("clamp", [cx.scalar(0, INDEX), x, cx.scalar(high, INDEX)])


# ---------------------------------------------------------------- gather
def gather(cx: Context, op: Op, data: Instruction, indices: Instruction, *, offset_dims: list[int],
           collapsed: list[int], operand_batching: list[int], indices_batching: list[int], start_map: list[int],
           ivd: int, sizes: Sequence[int]) -> Instruction:
    """result[r] = data[clamp(start) + batching + offset] for every result index r (the spec's gather)."""
    out = cx.result_shape(op)
    dims = [int(d) for d in data.shape.dims]
    rank = data.shape.rank
    if rank == 0:
        raise cx.unsupported(op, "gather from a rank-0 operand")
    index_rank = indices.shape.rank
    vectors = index_vector_last(cx, indices, ivd)
    if vectors.shape.dims[-1] != len(start_map):
        raise cx.error(op, f"index vectors have {vectors.shape.dims[-1]} entries for {len(start_map)} "
                           "start_index_map dims")
    batch_positions = [p for p in range(out.rank) if p not in offset_dims]
    offset_operand = [d for d in range(rank) if d not in collapsed and d not in operand_batching]
    if len(offset_operand) != len(offset_dims) or len(batch_positions) != vectors.shape.rank - 1:
        raise cx.error(op, f"offset_dims={offset_dims} and collapsed_slice_dims={collapsed} do not fit "
                           f"a rank-{rank} operand and a rank-{out.rank} result")
    columns = []
    for d in range(rank):
        terms = []
        if d in start_map:
            start = _column(cx, vectors, start_map.index(d))
            terms.append(_spread(cx, _clamped(cx, start, dims[d] - int(sizes[d])), out.dims, batch_positions))
        if d in operand_batching:
            j = moved(indices_batching[operand_batching.index(d)], ivd, index_rank)
            terms.append(_iota(cx, out.dims, batch_positions[j]))
        if d in offset_operand and out.dims[offset_dims[offset_operand.index(d)]] > 1:
            terms.append(_iota(cx, out.dims, offset_dims[offset_operand.index(d)]))
        columns.append(_sum(cx, terms, out.dims))
    return cx.b.op("gather-nd", [data, _stack(cx, columns, out.dims)], batch_dims=0)


# ---------------------------------------------------------------- scatter
def scatter_kinds(block: Block, n: int) -> list[str] | None:
    """Per operand: 'none' (the body returns the update), 'keep' (it returns the old value) or the
    combining op's scatter-nd reduction; None when the body is anything else."""
    if len(block.args) != 2 * n or not block.ops or block.ops[-1].name != "stablehlo.return":
        return None
    ret = block.ops[-1]
    if len(ret.operands) != n:
        return None
    defs = {id(r): o for o in block.ops[:-1] for r in o.results}
    used = set()
    kinds = []
    for i, value in enumerate(ret.operands):
        old, new = block.args[i], block.args[n + i]
        if value is new:
            kinds.append("none")
            continue
        if value is old:
            kinds.append("keep")
            continue
        combine = defs.get(id(value))
        if (combine is None or combine.name not in SCATTER_KINDS or len(combine.operands) != 2
                or {id(v) for v in combine.operands} != {id(old), id(new)} or combine.operands[0] is combine.operands[1]):
            return None
        used.add(id(combine))
        kinds.append(SCATTER_KINDS[combine.name])
    if len(used) != len(block.ops) - 1:  # ops beyond the combining ones
        return None
    return kinds


def scatter(cx: Context, op: Op, operands: list[Instruction], indices: Instruction, updates: list[Instruction], *,
            window_dims: list[int], inserted: list[int], input_batching: list[int], indices_batching: list[int],
            to_operand: list[int], ivd: int, pairs: bool = False) -> list[Instruction]:
    """The spec's scatter: every update element to its operand index, its window skipped when out of bounds.
    With pairs, operands and updates are the (real, imaginary) parts of complex values, two by two."""
    dims = [int(d) for d in operands[0].shape.dims]
    rank = len(dims)
    if rank == 0:
        raise cx.unsupported(op, "scatter into a rank-0 operand")
    upd_dims = tuple(int(d) for d in updates[0].shape.dims)
    index_rank = indices.shape.rank
    vectors = index_vector_last(cx, indices, ivd)
    if vectors.shape.dims[-1] != len(to_operand):
        raise cx.error(op, f"index vectors have {vectors.shape.dims[-1]} entries for {len(to_operand)} "
                           "scatter_dims_to_operand_dims")
    scatter_positions = [p for p in range(len(upd_dims)) if p not in window_dims]
    window_operand = [d for d in range(rank) if d not in inserted and d not in input_batching]
    if len(window_operand) != len(window_dims) or len(scatter_positions) != vectors.shape.rank - 1:
        raise cx.error(op, f"update_window_dims={window_dims} and inserted_window_dims={inserted} do not fit "
                           f"a rank-{rank} operand and rank-{len(upd_dims)} updates")
    columns, in_bounds = [], []
    known = cx.value_of(indices)
    for d in range(rank):
        terms = []
        if d in to_operand:
            start = _column(cx, vectors, to_operand.index(d))
            window = upd_dims[window_dims[window_operand.index(d)]] if d in window_operand else 1
            in_bounds.append((start, dims[d] - window))
            terms.append(_spread(cx, start, upd_dims, scatter_positions))
        if d in input_batching:
            j = moved(indices_batching[input_batching.index(d)], ivd, index_rank)
            terms.append(_iota(cx, upd_dims, scatter_positions[j]))
        if d in window_operand and upd_dims[window_dims[window_operand.index(d)]] > 1:
            terms.append(_iota(cx, upd_dims, window_dims[window_operand.index(d)]))
        columns.append(_sum(cx, terms, upd_dims))
    full = _stack(cx, columns, upd_dims)
    all_in = known is not None and _known_in_bounds(known, ivd, to_operand, dims, upd_dims, window_dims,
                                                    window_operand)
    ok = None if all_in else _in_bounds_mask(cx, in_bounds, full, scatter_positions)
    return scatter_at(cx, op, op.regions[0] if op.regions else None, operands, full, updates, ok, pairs=pairs)


def scatter_at(cx: Context, op: Op, body: list[Block] | None, operands: list[Instruction], full: Instruction,
               updates: list[Instruction], ok: Instruction | None, *, pairs: bool = False) -> list[Instruction]:
    """Each update element combined by body into operands at its index vector in full (updates' dims + [rank]),
    except where ok (pred, full's dims) is false. With pairs, operands and updates are complex values' parts
    (re0, im0, re1, ...), combined one update at a time by the body on complex values."""
    n = len(operands)
    dims = [int(d) for d in operands[0].shape.dims]
    rank = len(dims)
    all_in = ok is None
    if not all_in:
        full = _redirect(cx, full, ok, dims[0])
        operands = [_pad_first_dim(cx, x) for x in operands]
    # on quantized storage integers (a body quantized.py keeps quantized) each update goes through the body's ops
    kinds = scatter_kinds(body[0], n) if body and not pairs and not quantized.involved(op) else None
    if kinds is None:
        if body is None:
            raise cx.error(op, "scatter needs an update computation")
        results = _scatter_general(cx, op, body, operands, full, updates, pairs)
    else:
        results = [x if kind == "keep" else cx.b.op("scatter-nd", [x, full, u], reduction=kind)
                   for x, u, kind in zip(operands, updates, kinds)]
    if not all_in:
        results = [cx.b.op("slice", [r], start_indices=(0,) * rank, limit_indices=tuple(dims), strides=(1,) * rank)
                   for r in results]
    return results


def _known_in_bounds(known: np.ndarray, ivd: int, to_operand: list[int], dims: list[int], upd_dims: tuple,
                     window_dims: list[int], window_operand: list[int]) -> bool:
    vectors = np.moveaxis(known[..., None] if ivd == known.ndim else known, ivd, -1).reshape(-1, len(to_operand))
    for k, d in enumerate(to_operand):
        window = upd_dims[window_dims[window_operand.index(d)]] if d in window_operand else 1
        if not np.all((vectors[:, k] >= 0) & (vectors[:, k] <= dims[d] - window)):
            return False
    return True


def _in_bounds_mask(cx: Context, in_bounds: list[tuple[Instruction, int]], full: Instruction,
                    scatter_positions: list[int]) -> Instruction:
    """Whether each window starts in bounds (0 <= start <= high on every indexed dim), over full's dims."""
    ok = None
    for start, high in in_bounds:
        zero = cx.b.broadcast_to(cx.scalar(0, INDEX), start.shape.dims)
        top = cx.b.broadcast_to(cx.scalar(high, INDEX), start.shape.dims)
        both = cx.b.op("and", [cx.b.op("compare", [start, zero], direction="GE"),
                               cx.b.op("compare", [start, top], direction="LE")])
        ok = both if ok is None else cx.b.op("and", [ok, both])
    assert ok is not None
    return cx.b.op("broadcast", [ok], Shape("pred", tuple(full.shape.dims)), dimensions=tuple(scatter_positions))


def _redirect(cx: Context, full: Instruction, ok: Instruction, first: int) -> Instruction:
    """Index vectors where ok is false -> (first, 0, ..., 0): the padding row."""
    rank = int(full.shape.dims[-1])
    pad_row = np.zeros(rank, np.int64)
    pad_row[0] = first
    pad = cx.b.op("broadcast", [cx.constant(pad_row)], full.shape, dimensions=(full.shape.rank - 1,))
    return cx.b.op("select", [ok, full, pad])


def _pad_first_dim(cx: Context, x: Instruction) -> Instruction:
    rank = x.shape.rank
    zero = cx.scalar(0, x.shape.dtype)
    return cx.b.op("pad", [x, zero], edge_padding_low=(0,) * rank, edge_padding_high=(1,) + (0,) * (rank - 1),
                   interior_padding=(0,) * rank)


def _scatter_general(cx: Context, op: Op, body: list[Block], operands: list[Instruction], full: Instruction,
                     updates: list[Instruction], pairs: bool = False) -> list[Instruction]:
    """Any update computation: each update element in order, result[i] = body(result[i], update)."""
    count = math.prod(int(d) for d in updates[0].shape.dims)
    if count > MAX_GENERAL_SCATTER_ELEMENTS:
        what = "a complex scatter whose body is not add or replace" if pairs else \
            "a scatter whose body is not add, multiply, maximum, minimum or replace"
        raise cx.unsupported(op, f"{what} is applied one update at a time; {count} updates exceed the "
                                 f"{MAX_GENERAL_SCATTER_ELEMENTS} supported")
    rank = int(full.shape.dims[-1])
    rows = cx.b.reshape(full, (count, rank))
    flat = [cx.b.reshape(u, (count,)) for u in updates]
    results = list(operands)
    for t in range(count):
        row = cx.b.op("slice", [rows], start_indices=(t, 0), limit_indices=(t + 1, rank), strides=(1, 1))
        index = cx.b.reshape(row, (rank,))
        olds = [cx.b.op("gather-nd", [r, index], batch_dims=0) for r in results]
        news = [cx.b.reshape(cx.b.op("slice", [u], start_indices=(t,), limit_indices=(t + 1,), strides=(1,)), ())
                for u in flat]
        if pairs:  # the body takes and gives complex values: (re, im) two by two
            given = cx.import_region(body, _complex(olds) + _complex(news))
            if not all(isinstance(v, Complex) for v in given):
                raise cx.error(op, "the update computation of a complex scatter returns a real value")
            values = [part for v in given for part in v]
        else:
            values = cx.import_region(body, olds + news)
        if len(values) != len(results):
            raise cx.error(op, f"the update computation returns {len(values)} values for {len(results)} operands")
        results = [cx.b.op("scatter-nd", [r, row, cx.b.reshape(v, (1,))], reduction="none")
                   for r, v in zip(results, values)]
    return results


def _complex(parts: list[Instruction]) -> list[Complex]:
    return [Complex(parts[k], parts[k + 1]) for k in range(0, len(parts), 2)]
