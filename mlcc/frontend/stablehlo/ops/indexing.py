"""gather and scatter: the forms JAX emits for indexing on fast paths, every other form by index map.

The IR has numpy-style gather (one axis), ONNX-style gather-nd, dynamic-slice and
scatter-nd. A gather whose indexed dims take slices of size 1 and whose other dims
are taken whole becomes gather / gather-nd plus transposes; one with a single index
vector and arbitrary slice sizes becomes dynamic-slice. StableHLO clamps gather
start indices into range, so the importer clamps too (the IR's gathers reject
out-of-range indices). Batching dims (vmapped gathers, take_along_axis) become
indexed dims whose index is the batch coordinate. A scatter of whole rows with an
add/multiply/max/min/replace body becomes scatter-nd; its out-of-range updates,
which StableHLO skips, are sent to a padding row that is cut off afterwards.
Every other form (any dimension numbers, several operands, any body) goes through
``full_index``, which computes the spec's index map element by element.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcc.frontend.stablehlo import quantized
from mlcc.frontend.stablehlo.importer import Complex, Context, Results, complex_op, stablehlo_op
from mlcc.frontend.stablehlo.ops import full_index
from mlcc.frontend.stablehlo.ops.data import int_tuple
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Shape

def _numbers(cx: Context, op: Op, key: str) -> dict[str, Any]:
    dn = op.attrs.get(key)
    if not isinstance(dn, dict):
        raise cx.error(op, f"missing {key}")
    return dn


def _add_coordinates(cx: Context, indices: Instruction, positions: list[int]) -> Instruction:
    """Extend every index vector with its own coordinate along each of the given indices dims."""
    dims = tuple(indices.shape.dims)
    column = Shape(indices.shape.dtype, dims[:-1] + (1,))
    pieces = [indices] + [cx.b.op("iota", [], column, iota_dimension=p) for p in positions]
    return cx.b.op("concatenate", pieces, dimension=len(dims) - 1)


def _limits(cx: Context, indices: Instruction, highs: list[int]) -> Instruction:
    """A constant the shape of indices holding highs[j] along the last dim."""
    dtype = numpy_dtype(indices.shape.dtype)
    vector = cx.constant(np.minimum(np.array(highs, dtype=np.int64), np.iinfo(dtype).max).astype(dtype))
    return cx.b.op("broadcast", [vector], indices.shape, dimensions=(indices.shape.rank - 1,))


def _in_range(cx: Context, indices: Instruction, sizes: list[int]) -> bool:
    value = cx.value_of(indices)
    return value is not None and bool(np.all((value >= 0) & (value < np.array(sizes))))


# ---------------------------------------------------------------- gather
@stablehlo_op("stablehlo.gather")
def import_gather(cx: Context, op: Op, args: list[Instruction]) -> Results:
    data, indices = args
    dn = _numbers(cx, op, "dimension_numbers")
    offset_dims = [int(d) for d in dn.get("offset_dims", [])]
    collapsed = [int(d) for d in dn.get("collapsed_slice_dims", [])]
    start_map = [int(d) for d in dn.get("start_index_map", [])]
    sizes = int_tuple(cx, op, "slice_sizes")
    ivd = int(dn.get("index_vector_dim", 0))  # the printed form leaves out a 0
    rank = indices.shape.rank
    batching = [int(d) for d in dn.get("operand_batching_dims", [])]
    indices_batching = [int(d) for d in dn.get("start_indices_batching_dims", [])]
    dims = list(data.shape.dims)
    indexed, dropped = start_map + batching, collapsed + batching
    whole = [d for d in range(data.shape.rank) if d not in indexed]
    batch = [n for i, n in enumerate(indices.shape.dims) if i != ivd]
    if (all(sizes[d] == dims[d] for d in whole) and all(sizes[d] == 1 for d in indexed)
            and set(dropped) <= set(indexed) and len(set(indexed)) == len(indexed)):
        vectors = full_index.index_vector_last(cx, indices, ivd)
        if batching:  # each batching dim becomes one more indexed dim, indexed by its own coordinate
            vectors = _add_coordinates(cx, vectors, [full_index.moved(d, ivd, rank) for d in indices_batching])
        if vectors.shape.dims[-1] != len(indexed):
            raise cx.error(op, f"index vectors have {vectors.shape.dims[-1]} entries for {len(indexed)} "
                               "start_index_map dims")
        return _gather_rows(cx, op, data, vectors, indexed, dropped, offset_dims)
    if all(b == 1 for b in batch) and not batching:
        return _gather_slice(cx, op, data, full_index.index_vector_last(cx, indices, ivd), start_map, sizes)
    return full_index.gather(cx, op, data, indices, offset_dims=offset_dims, collapsed=collapsed,
                             operand_batching=batching, indices_batching=indices_batching, start_map=start_map,
                             ivd=ivd, sizes=sizes)


def _gather_rows(cx: Context, op: Op, data: Instruction, indices: Instruction, start_map: list[int],
                 collapsed: list[int], offset_dims: list[int]) -> Instruction:
    """Rows picked by index vectors: IR gather (one indexed dim) or gather-nd (several)."""
    dims = list(data.shape.dims)
    highs = [dims[d] - 1 for d in start_map]
    if not _in_range(cx, indices, [h + 1 for h in highs]):
        zero = cx.scalar(0, indices.shape.dtype)
        high = _limits(cx, indices, highs) if len(highs) > 1 else \
            cx.scalar(min(highs[0], np.iinfo(numpy_dtype(indices.shape.dtype)).max), indices.shape.dtype)
        indices = cx.b.op("clamp", [zero, indices, high])
    batch = list(indices.shape.dims[:-1])
    whole = [d for d in range(data.shape.rank) if d not in start_map]
    if len(start_map) == 1:
        (axis,) = start_map
        index = cx.b.reshape(indices, batch)
        if index.shape.dtype not in ("s32", "s64"):  # the IR's gather takes s32/s64 (already in range)
            index = cx.b.convert(index, "s64")
        rows = cx.b.op("gather", [data, index], axis=axis)
        labels = [("o", d) for d in range(axis)] + [("b", j) for j in range(len(batch))] + \
                 [("o", d) for d in range(axis + 1, data.shape.rank)]
    else:
        moved = cx.b.transpose(data, start_map + whole)
        rows = cx.b.op("gather-nd", [moved, indices], batch_dims=0)
        labels = [("b", j) for j in range(len(batch))] + [("o", d) for d in whole]
    kept = [d for d in range(data.shape.rank) if d not in collapsed]
    out = cx.result_shape(op)
    wanted, next_batch = [], 0
    for p in range(out.rank):
        if p in offset_dims:
            wanted.append(("o", kept[offset_dims.index(p)]))
        else:
            wanted.append(("b", next_batch))
            next_batch += 1
    present = [w for w in wanted if w in labels]  # indexed dims kept as size-1 offsets come back by reshape
    rows = cx.b.transpose(rows, [labels.index(w) for w in present])
    return cx.b.reshape(rows, out.dims)


def _gather_slice(cx: Context, op: Op, data: Instruction, indices: Instruction, start_map: list[int],
                  sizes: tuple[int, ...]) -> Instruction:
    """One index vector: a dynamic slice (which clamps its starts as gather does)."""
    k = len(start_map)
    vector = cx.b.reshape(indices, (k,))
    starts = []
    for d in range(data.shape.rank):
        if d in start_map:
            j = start_map.index(d)
            piece = cx.b.op("slice", [vector], start_indices=(j,), limit_indices=(j + 1,), strides=(1,))
            starts.append(cx.b.reshape(piece, ()))
        else:
            starts.append(cx.scalar(0, indices.shape.dtype))
    window = cx.b.op("dynamic-slice", [data] + starts, slice_sizes=tuple(sizes))
    return cx.b.reshape(window, cx.result_shape(op).dims)


# ---------------------------------------------------------------- scatter
def _scatter_numbers(cx: Context, op: Op) -> dict[str, Any]:
    dn = _numbers(cx, op, "scatter_dimension_numbers")
    return dict(window_dims=[int(d) for d in dn.get("update_window_dims", [])],
                inserted=[int(d) for d in dn.get("inserted_window_dims", [])],
                input_batching=[int(d) for d in dn.get("input_batching_dims", [])],
                indices_batching=[int(d) for d in dn.get("scatter_indices_batching_dims", [])],
                to_operand=[int(d) for d in dn.get("scatter_dims_to_operand_dims", [])],
                ivd=int(dn.get("index_vector_dim", 0)))  # MLIR prints the attribute without it when it is 0


@complex_op("stablehlo.scatter")
def import_complex_scatter(cx: Context, op: Op, args: list[Any]) -> Results:
    """A body of adds (or one that replaces) acts on the real and the imaginary parts apart; any other body
    (a product, the lexicographic maximum and minimum JAX writes) is applied to complex values, one update
    at a time."""
    if len(args) % 2 != 1 or len(args) < 3:
        raise cx.error(op, f"scatter takes operands, indices and as many updates ({len(args)} operands given)")
    n = len(args) // 2
    operands, indices, updates = args[:n], args[n], args[n + 1:]
    if isinstance(indices, Complex) or not all(isinstance(a, Complex) for a in operands + updates):
        raise cx.unsupported(op, "a scatter must take complex values for all its operands and updates or none")
    if all(o.name in ("stablehlo.add", "stablehlo.return") for region in op.regions for block in region
           for o in block.ops):
        parts = [import_scatter(cx, op, [a[k] if isinstance(a, Complex) else a for a in args])
                 for k in (0, 1)]
        re, im = ([p] if isinstance(p, Instruction) else list(p) for p in parts)
        return [Complex(r, i) for r, i in zip(re, im)]
    flat = [part for z in operands for part in z]
    results = full_index.scatter(cx, op, flat, indices, [part for z in updates for part in z],
                                 **_scatter_numbers(cx, op), pairs=True)
    return [Complex(results[k], results[k + 1]) for k in range(0, len(results), 2)]


@stablehlo_op("stablehlo.scatter")
def import_scatter(cx: Context, op: Op, args: list[Instruction]) -> Results:
    if len(args) % 2 != 1 or len(args) < 3:
        raise cx.error(op, f"scatter takes operands, indices and as many updates ({len(args)} operands given)")
    n = len(args) // 2
    operands, indices, updates = list(args[:n]), args[n], list(args[n + 1:])
    kinds = full_index.scatter_kinds(op.regions[0][0], n) if op.regions and not quantized.involved(op) else None
    dn = _numbers(cx, op, "scatter_dimension_numbers")
    window_dims = [int(d) for d in dn.get("update_window_dims", [])]
    inserted = [int(d) for d in dn.get("inserted_window_dims", [])]
    to_operand = [int(d) for d in dn.get("scatter_dims_to_operand_dims", [])]
    ivd = int(dn.get("index_vector_dim", 0))  # the printed form leaves out a 0
    batching = [int(d) for d in dn.get("input_batching_dims", [])]
    indices_batching = [int(d) for d in dn.get("scatter_indices_batching_dims", [])]
    data, rows = operands[0], updates[0]
    dims = list(data.shape.dims)
    indexed, dropped = to_operand + batching, inserted + batching
    whole = [d for d in range(data.shape.rank) if d not in indexed]
    scatter_dims = [d for d in range(rows.shape.rank) if d not in window_dims]
    batch = [m for i, m in enumerate(indices.shape.dims) if i != ivd]
    if (n == 1 and kinds is not None and kinds[0] != "keep" and sorted(dropped) == sorted(indexed)
            and len(window_dims) == len(whole) and [rows.shape.dims[u] for u in window_dims] == [dims[d] for d in whole]
            and [rows.shape.dims[u] for u in scatter_dims] == batch):
        return _scatter_rows(cx, data, indices, rows, ivd, window_dims, batching, indices_batching, to_operand,
                             kinds[0])
    return full_index.scatter(cx, op, operands, indices, updates, window_dims=window_dims, inserted=inserted,
                              input_batching=batching, indices_batching=indices_batching, to_operand=to_operand,
                              ivd=ivd)


def _scatter_rows(cx: Context, data: Instruction, indices: Instruction, updates: Instruction, ivd: int,
                  window_dims: list[int], batching: list[int], indices_batching: list[int], to_operand: list[int],
                  kind: str) -> Instruction:
    """Whole rows written at index vectors: one scatter-nd on the operand with its indexed dims first."""
    rank = indices.shape.rank
    indices = full_index.index_vector_last(cx, indices, ivd)
    if batching:
        indices = _add_coordinates(cx, indices, [full_index.moved(d, ivd, rank) for d in indices_batching])
        to_operand = to_operand + batching
    dims = list(data.shape.dims)
    whole = [d for d in range(data.shape.rank) if d not in to_operand]
    scatter_dims = [d for d in range(updates.shape.rank) if d not in window_dims]
    moved = cx.b.transpose(data, to_operand + whole)
    rows = cx.b.transpose(updates, scatter_dims + window_dims)
    sizes = [dims[d] for d in to_operand]
    if _in_range(cx, indices, sizes):
        result = cx.b.op("scatter-nd", [moved, indices, rows], reduction=kind)
    else:
        result = _scatter_dropping_out_of_range(cx, moved, indices, rows, sizes, kind)
    inverse = [0] * data.shape.rank
    for i, d in enumerate(to_operand + whole):
        inverse[d] = i
    return cx.b.transpose(result, inverse)


def _scatter_dropping_out_of_range(cx: Context, data: Instruction, indices: Instruction, rows: Instruction,
                                   sizes: list[int], kind: str) -> Instruction:
    """scatter-nd where an index vector out of range updates nothing: it is sent to an extra row, then cut."""
    k, rank = len(sizes), data.shape.rank
    pad_high = tuple([1] * k + [0] * (rank - k))
    zero = cx.scalar(0, data.shape.dtype)
    padded = cx.b.op("pad", [data, zero], edge_padding_low=(0,) * rank, edge_padding_high=pad_high,
                     interior_padding=(0,) * rank)
    dtype = indices.shape.dtype
    low_ok = cx.b.op("compare", [indices, cx.b.broadcast_to(cx.scalar(0, dtype), indices.shape.dims)],
                     direction="GE")
    limit = _limits(cx, indices, sizes)
    high_ok = cx.b.op("compare", [indices, limit], direction="LT")
    ok = cx.b.op("reduce", [cx.b.op("and", [low_ok, high_ok])], dimensions=(indices.shape.rank - 1,), kind="and")
    ok = cx.b.op("broadcast", [ok], indices.shape.with_dtype("pred"),
                 dimensions=tuple(range(indices.shape.rank - 1)))
    redirected = cx.b.op("select", [ok, indices, limit])
    result = cx.b.op("scatter-nd", [padded, redirected, rows], reduction=kind)
    return cx.b.op("slice", [result], start_indices=(0,) * rank, limit_indices=tuple(data.shape.dims),
                   strides=(1,) * rank)
