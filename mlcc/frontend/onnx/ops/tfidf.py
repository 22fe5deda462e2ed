"""TfIdfVectorizer over integer tokens: n-gram counts per row, as onnx's reference counts them.

The pool holds n-grams grouped by size (``ngram_counts`` gives where each size starts); pool n-gram k is
counted into output column ``ngram_indexes[k]``. An n-gram of size n >= 2 is counted once per skip distance
d in 1..max_skip_count + 1 at every start s where ``X[s + i * d] == gram[i]`` for each i; a unigram is
counted once (skips do not apply to it). An n-gram may appear once in the pool. For each (n, d) the n
windows ``X[..., i*d : i*d + L]`` are compared with the pool's n-grams of size n at once ([rows, L, grams]
predicates, anded over i), summed over the starts, and one dot with a 0/1 matrix scatters the counts into
the output columns. Then ``mode``:
TF the counts, IDF the weight (or 1) where a count is positive, TFIDF the weight times the count. Weight k
belongs to pool n-gram k, so to output column ``ngram_indexes[k]``, as the spec and onnxruntime read it
(onnx's reference reads weight k as column k's: the node suite's cases, all TF, cannot tell).
"""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Instruction

MODES = ("TF", "IDF", "TFIDF")


def _pool_grams(node: OnnxNode, pool: list[int], counts: list[int], min_n: int,
                max_n: int) -> tuple[dict[int, list[tuple[tuple[int, ...], int]]], int]:
    """(size -> [(gram, pool index)] for the sizes in [min_n, max_n]; the number of pool n-grams of every
    size). A repeated n-gram is an error, as in onnxruntime."""
    if not counts or counts[0] < 0 or any(b < a for a, b in zip(counts, counts[1:])) or counts[-1] > len(pool):
        raise node.error(f"ngram_counts {counts} are not ascending start offsets into a pool of {len(pool)} items")
    grams: dict[int, dict[tuple[int, ...], int]] = {}
    index = 0
    for level, start in enumerate(counts):
        size = level + 1
        end = counts[level + 1] if level + 1 < len(counts) else len(pool)
        if (end - start) % size:
            raise node.error(f"the pool's {end - start} items of {size}-grams are not a whole number of {size}-grams")
        for at in range(start, end, size):
            gram = tuple(pool[at:at + size])
            if gram in grams.setdefault(size, {}):
                raise node.error(f"the pool holds the {size}-gram {list(gram)} twice")
            grams[size][gram] = index
            index += 1
    return {size: sorted(found.items(), key=lambda kv: kv[1]) for size, found in grams.items()
            if min_n <= size <= max_n}, index


@onnx_op("TfIdfVectorizer", since=9)
def import_tfidf_vectorizer(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    if x.shape.dtype not in ("s32", "s64"):
        raise node.unsupported(f"input type {x.shape.dtype} (integer tokens are supported; strings have no IR dtype)")
    if x.shape.rank not in (1, 2):
        raise node.error(f"input dims {list(x.shape.dims)} are neither [C] nor [N, C]")
    length = x.shape.dims[-1]
    if not isinstance(length, int):
        raise node.unsupported(f"a symbolic row length {length} (static dims are needed)")
    mode = node.attr("mode")
    if mode not in MODES:
        raise node.error(f"unknown mode '{mode}' (one of {', '.join(MODES)})")
    if node.has_attr("pool_strings"):
        raise node.unsupported("pool_strings (string tokens have no IR dtype)")
    min_n, max_n = int(node.attr("min_gram_length")), int(node.attr("max_gram_length"))
    max_skip = int(node.attr("max_skip_count"))
    if min_n < 1 or max_n < min_n or max_skip < 0:
        raise node.error(f"gram lengths {min_n}..{max_n} and max_skip_count {max_skip} are out of range")
    pool = [int(v) for v in node.attr("pool_int64s")]
    indexes = [int(v) for v in node.attr("ngram_indexes")]
    grams, n_grams = _pool_grams(node, pool, [int(v) for v in node.attr("ngram_counts")], min_n, max_n)
    if len(indexes) != n_grams or min(indexes, default=0) < 0:
        raise node.error(f"ngram_indexes has {len(indexes)} entries for {n_grams} pool n-grams (or a negative one)")
    width = max(indexes) + 1 if indexes else 0
    weights = node.attr("weights", None)
    if weights is not None and len(weights) != len(indexes):
        raise node.error(f"weights has {len(weights)} entries for {len(indexes)} pool n-grams")

    rows = x if x.shape.rank == 2 else b.reshape(x, (1, length))
    n_rows = rows.shape.dims[0]
    rows = b.convert(rows, "s64")
    counts: Instruction | None = None
    for size, found in sorted(grams.items()):
        table = np.array([g for g, _ in found], np.int64)  # [grams, size]
        scatter = np.zeros((len(found), width), np.float32)
        for k, (_, index) in enumerate(found):
            scatter[k, indexes[index]] = 1.0
        for skip in range(1, (max_skip + 2) if size > 1 else 2):
            starts = length - skip * (size - 1)
            if starts <= 0:
                break
            dims = (n_rows, starts, len(found))
            hit = None
            for i in range(size):
                window = b.op("slice", [rows], start_indices=(0, i * skip), limit_indices=(n_rows, i * skip + starts),
                              strides=(1, 1))
                want = broadcast_in_dims(b, b.constant(table[:, i]), dims, [2])
                eq = b.op("compare", [broadcast_in_dims(b, window, dims, [0, 1]), want], direction="EQ")
                hit = eq if hit is None else b.op("and", [hit, eq])
            per_gram = b.op("reduce", [b.convert(hit, "f32")], dimensions=(1,), kind="add")  # [rows, grams]
            part = b.op("dot", [per_gram, b.constant(scatter)], lhs_batch_dims=(), lhs_contracting_dims=(1,),
                        rhs_batch_dims=(), rhs_contracting_dims=(0,))
            counts = part if counts is None else b.op("add", [counts, part])
    if counts is None:
        counts = b.splat(0.0, "f32", (n_rows, width))
    if mode == "TF":
        y = counts
    else:
        column_weight = np.ones(width, np.float32)
        if weights is not None:  # a column's count is 0 unless some n-gram, whose weight it takes, maps to it
            column_weight[indexes] = np.asarray(weights, np.float32)
        scale = b.constant(column_weight)
        scale = broadcast_in_dims(b, scale, counts.shape.dims, [1])
        if mode == "IDF":
            zero = b.splat(0.0, "f32", counts.shape.dims)
            y = b.op("select", [b.op("compare", [counts, zero], direction="GT"), scale, zero])
        else:
            y = b.op("multiply", [counts, scale])
    return [y if x.shape.rank == 2 else b.reshape(y, (width,))]

