"""Matrix products: MatMul (numpy matmul semantics), Gemm, Einsum -> dot, transpose, reduce; Det."""

from __future__ import annotations

import itertools

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, scalar_op, uniform_value
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Dim, Instruction


def dot(b: Builder, x: Instruction, y: Instruction, lhs_batch=(), lhs_contract=(), rhs_batch=(),
        rhs_contract=()) -> Instruction:
    return b.op("dot", [x, y], lhs_batch_dims=tuple(lhs_batch), lhs_contracting_dims=tuple(lhs_contract),
                rhs_batch_dims=tuple(rhs_batch), rhs_contracting_dims=tuple(rhs_contract))


def _all_ones(dims) -> bool:
    return all(d == 1 for d in dims)


def matmul(b: Builder, x: Instruction, y: Instruction) -> Instruction:
    """numpy.matmul: 1-D operands are vectors, leading dims are broadcast batch dims.

    A side whose batch dims are all 1 is not broadcast: the dot treats its
    matrix as shared by every batch (the common activations x weight case).
    """
    rx, ry = x.shape.rank, y.shape.rank
    if rx == 1 and ry == 1:
        return dot(b, x, y, lhs_contract=[0], rhs_contract=[0])
    if rx == 1:
        return dot(b, x, y, lhs_contract=[0], rhs_contract=[ry - 2])
    if ry == 1:
        return dot(b, x, y, lhs_contract=[rx - 1], rhs_contract=[0])
    bx, by = x.shape.dims[:-2], y.shape.dims[:-2]
    batch = b.broadcast_shapes(bx, by)
    m, n = x.shape.dims[-2], y.shape.dims[-1]
    out = tuple(batch) + (m, n)
    if _all_ones(by):
        r = dot(b, x, b.reshape(y, y.shape.dims[-2:]), lhs_contract=[rx - 1], rhs_contract=[0])
        return b.reshape(r, out)
    if _all_ones(bx):
        r = dot(b, b.reshape(x, x.shape.dims[-2:]), y, lhs_contract=[1], rhs_contract=[ry - 2])
        nb = ry - 2  # r is [M, batch..., N]
        r = b.transpose(r, list(range(1, nb + 1)) + [0, nb + 1])
        return b.reshape(r, out)
    nb = len(batch)
    x = b.broadcast_to(x, tuple(batch) + tuple(x.shape.dims[-2:]))
    y = b.broadcast_to(y, tuple(batch) + tuple(y.shape.dims[-2:]))
    return dot(b, x, y, range(nb), [nb + 1], range(nb), [nb])


@onnx_op("MatMul", since=1)
def import_matmul(b: Builder, node: OnnxNode) -> list[Result]:
    x, y = node.input(0), node.input(1)
    if x.shape.rank == 0 or y.shape.rank == 0:
        raise node.error("MatMul operands must have rank >= 1")
    return [matmul(b, x, y)]


@onnx_op("Gemm", since=7)
def import_gemm(b: Builder, node: OnnxNode) -> list[Result]:
    x, y = node.input(0), node.input(1)
    if x.shape.rank != 2 or y.shape.rank != 2:
        raise node.error(f"A and B must be matrices, got ranks {x.shape.rank} and {y.shape.rank}")
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    out = dot(b, x, y, lhs_contract=[0 if node.attr("transA", 0) else 1],
              rhs_contract=[1 if node.attr("transB", 0) else 0])
    if alpha != 1.0:
        out = scalar_op(b, "multiply", out, alpha)
    uniform = uniform_value(node, 2) if node.has_input(2) else None
    if uniform is not None and uniform == 0:  # exporters write zero biases; adding them changes nothing
        return [out]
    if node.has_input(2) and beta != 0.0:
        known = node.value(2)
        if uniform is not None:
            c = full(b, uniform * beta, out.shape.dtype, out.shape.dims)
        elif known is not None and beta != 1.0:
            c = b.constant((known * np.asarray(beta, dtype=known.dtype)).astype(known.dtype),
                           ref_hint=node.proto.input[2])
        else:
            c = node.input(2)
            if beta != 1.0:
                c = scalar_op(b, "multiply", c, beta)
        out = b.op("add", [out, b.broadcast_to(c, out.shape.dims)])
    return [out]


# ---- Einsum


def _parse_einsum(node: OnnxNode, equation: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """Terms and output as label lists; the dims under '...' get labels '0', '1', ... (right-aligned)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise node.error(f"equation '{equation}' has {len(terms)} terms for {len(ranks)} inputs")
    n_ell = 0
    for t, r in zip(terms, ranks):
        if "..." in t:
            n_ell = max(n_ell, r - (len(t) - 3))
    def labels(term: str, rank: int | None) -> list[str]:
        if "..." not in term:
            if not term.isalpha() and term:
                raise node.error(f"bad einsum term '{term}'")
            return list(term)
        head, _, tail = term.partition("...")
        k = n_ell if rank is None else rank - len(head) - len(tail)
        return list(head) + [str(n_ell - k + i) for i in range(k)] + list(tail)
    parsed = [labels(t, r) for t, r in zip(terms, ranks)]
    for t, r in zip(parsed, ranks):
        if len(t) != r:
            raise node.error(f"einsum term {''.join(t)!r} does not match an input of rank {r}")
    if arrow:
        result = labels(out, None)
    else:
        counts: dict[str, int] = {}
        for t in parsed:
            for label in t:
                counts[label] = counts.get(label, 0) + 1
        ell = [str(i) for i in range(n_ell)]
        result = ell + sorted(l for l, c in counts.items() if c == 1 and not l.isdigit())
    return parsed, result


def _diagonals(b: Builder, node: OnnxNode, x: Instruction, labels: list[str]) -> tuple[Instruction, list[str]]:
    """x with each label that repeats in its term taken once: the diagonal over the repeated dims (the
    elements off it masked to 0 and summed away, which adds only zeros)."""
    while len(set(labels)) != len(labels):
        first = next(i for i, l in enumerate(labels) if labels.index(l) != i)
        p, q = labels.index(labels[first]), first
        n = x.shape.dims[p]
        if x.shape.dims[q] != n:
            raise node.error(f"label '{labels[p]}' has sizes {n} and {x.shape.dims[q]}")
        if not isinstance(n, int):
            raise node.unsupported(f"a diagonal over the symbolic dim {n}")
        mask = broadcast_in_dims(b, b.constant(np.eye(n, dtype=bool)), x.shape.dims, [p, q])
        x = b.op("select", [mask, x, full(b, 0, x.shape.dtype, x.shape.dims)])
        x = b.op("reduce", [x], dimensions=(q,), kind="add")
        labels = labels[:q] + labels[q + 1:]
    return x, labels


def _sum_out(b: Builder, x: Instruction, labels: list[str], keep: set[str]) -> tuple[Instruction, list[str]]:
    drop = [i for i, l in enumerate(labels) if l not in keep]
    if not drop:
        return x, labels
    x = b.op("reduce", [x], dimensions=tuple(drop), kind="add")
    return x, [l for l in labels if l in keep]


@onnx_op("Einsum", since=12)
def import_einsum(b: Builder, node: OnnxNode) -> list[Result]:
    xs = node.inputs()
    terms, out = _parse_einsum(node, node.attr("equation"), [x.shape.rank for x in xs])
    for i, (x, t) in enumerate(zip(xs, terms)):
        xs[i], terms[i] = _diagonals(b, node, x, t)
    sizes: dict[str, Dim] = {}
    for x, t in zip(xs, terms):
        for label, d in zip(t, x.shape.dims):
            if d != 1 or label not in sizes:
                if label in sizes and sizes[label] not in (1, d):
                    raise node.error(f"label '{label}' has sizes {sizes[label]} and {d}")
                sizes[label] = d
    xs = [broadcast_in_dims(b, x, [sizes[l] for l in t], range(len(t))) if any(
        d != sizes[l] for l, d in zip(t, x.shape.dims)) else x for x, t in zip(xs, terms)]
    acc, acc_labels = xs[0], terms[0]
    rest = list(zip(xs[1:], terms[1:]))
    needed = set(out) | {l for _, t in rest for l in t}
    acc, acc_labels = _sum_out(b, acc, acc_labels, needed)
    while rest:
        (y, y_labels), rest = rest[0], rest[1:]
        needed = set(out) | {l for _, t in rest for l in t}
        y, y_labels = _sum_out(b, y, y_labels, needed | set(acc_labels))
        acc, acc_labels = _sum_out(b, acc, acc_labels, needed | set(y_labels))
        batch = [l for l in acc_labels if l in y_labels and l in needed]
        contract = [l for l in acc_labels if l in y_labels and l not in needed]
        acc = dot(b, acc, y, [acc_labels.index(l) for l in batch], [acc_labels.index(l) for l in contract],
                  [y_labels.index(l) for l in batch], [y_labels.index(l) for l in contract])
        acc_labels = batch + [l for l in acc_labels if l not in y_labels] + [l for l in y_labels if l not in acc_labels]
    acc, acc_labels = _sum_out(b, acc, acc_labels, set(out))
    missing = [l for l in out if l not in acc_labels]
    if missing:
        raise node.error(f"output labels {missing} appear in no input")
    return [b.transpose(acc, [acc_labels.index(l) for l in out])]


MAX_DET_SIZE = 6  # Leibniz's sum has n! terms


@onnx_op("Det", since=11)
def import_det(b: Builder, node: OnnxNode) -> list[Result]:
    """The determinant of each [n, n] matrix by Leibniz's formula: the sum over the permutations p of
    sign(p) * prod_i x[i, p(i)], as one gather of the n! products' factors, a product and a signed sum
    (exact up to rounding for the small n it allows)."""
    x = node.input(0)
    require_float(node, x)
    if x.shape.rank < 2:
        raise node.error(f"the input must have rank >= 2, has {x.shape.rank}")
    n, m = x.shape.dims[-2:]
    if n != m:
        raise node.error(f"the matrices are {n}x{m}, not square")
    if not isinstance(n, int) or n > MAX_DET_SIZE:
        raise node.unsupported(f"determinants of {n}x{n} matrices (at most {MAX_DET_SIZE}x{MAX_DET_SIZE})")
    lead = tuple(x.shape.dims[:-2])
    if n == 0:
        return [full(b, 1, x.shape.dtype, lead)]
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64).reshape(-1, n)
    signs = np.array([_parity(p) for p in perms], dtype=numpy_dtype(x.shape.dtype))
    flat = b.reshape(x, lead + (n * n,))
    factors = b.op("gather", [flat, b.constant(np.arange(n) * n + perms)], axis=len(lead))  # [..., n!, n]
    terms = b.op("reduce", [factors], dimensions=(len(lead) + 1,), kind="multiply")
    signed = b.op("multiply", [terms, broadcast_in_dims(b, b.constant(signs), terms.shape.dims, [len(lead)])])
    return [b.op("reduce", [signed], dimensions=(len(lead),), kind="add")]


def _parity(perm: np.ndarray) -> int:
    """+1 for an even permutation, -1 for an odd one."""
    seen, sign = set(), 1
    for start in range(len(perm)):
        length, j = 0, start
        while j not in seen:
            seen.add(j)
            j = int(perm[j])
            length += 1
        if length and length % 2 == 0:
            sign = -sign
    return sign
