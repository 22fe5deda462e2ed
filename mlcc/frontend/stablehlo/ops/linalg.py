"""Linear algebra: stablehlo.triangular_solve and the LAPACK custom calls JAX's CPU lowering emits.

JAX lowers its linalg primitives on CPU to ``stablehlo.custom_call @lapack_<t><routine>_ffi`` (t = s, d, c, z:
f32, f64, complex<f32>, complex<f64>), with the LAPACK argument characters in ``mhlo.backend_config`` and
``num_batch_dims`` leading batch dims. The routines whose result the LAPACK documentation defines exactly
are imported here as the same algorithm unrolled over the matrix (one step per row or column, so the
size is bounded by MAX_FACTOR_STEPS, MAX_SOLVE_ROWS for a solve), in real IR ops on real or Complex values:

  trsm   op(a) x = alpha b or x op(a) = alpha b with alpha = 1 (the triangular_solve import)
  potrf  Cholesky, column by column; the other triangle is returned unchanged, as LAPACK leaves it;
         info = the first column (1-based) whose pivot is not positive, else 0
  getrf  LU with partial pivoting (the first row of largest |re| + |im| below the diagonal, as i?amax),
         ipiv 1-based, info = the first zero pivot (1-based), else 0
  geqrf  Householder QR with dlarfg/zlarfg's reflectors (beta = -sign(re alpha) |(alpha, x)|), R and the
         reflectors packed in a, tau beside it
  orgqr / ungqr  Q = H(1) H(2) ... H(k) applied to the first columns of the identity
  gtsv   a tridiagonal system by Gaussian elimination with partial pivoting (dgtsv)

The eigen and singular value routines (geev, syevd/heevd, gesdd) are iterative: their vectors are defined
only up to sign or phase and geev's eigenvalues only up to order, so no other algorithm gives LAPACK's
result; they are refused (REFUSED_TARGETS) with that reason.
"""

from __future__ import annotations

from typing import Any, Callable

from mlcc.frontend.stablehlo.importer import (REFUSED_CUSTOM_CALLS, Complex, Context, Results, complex_op,
                                              custom_call_target, is_complex_type, stablehlo_op)
from mlcc.frontend.stablehlo.ops import complex as cplx
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.ir import Instruction, Shape

Value = Instruction | Complex
MAX_FACTOR_STEPS = 64  # columns a factorization is unrolled over (200 took over 2 minutes to compile and run
# under the CPU interpreter)
MAX_SOLVE_ROWS = 256  # rows a triangular solve is unrolled over (forward substitution)
REFUSED_TARGETS = {
    "geev": "a general eigendecomposition (LAPACK's iterative QR algorithm: eigenvalue order and eigenvector "
            "phases are its own)",
    "syevd": "a symmetric eigendecomposition (LAPACK's divide and conquer: eigenvector signs are its own)",
    "heevd": "a Hermitian eigendecomposition (LAPACK's divide and conquer: eigenvector phases are its own)",
    "gesdd": "a singular value decomposition (LAPACK's divide and conquer: singular vector signs are its own)",
}
REFUSED_CUSTOM_CALLS.update({f"lapack_{t}{routine}_ffi": reason for routine, reason in REFUSED_TARGETS.items()
                             for t in ("cz" if routine == "heevd" else "sd" if routine == "syevd" else "sdcz")})


def import_empty_decomposition(cx: Context, op: Op, args: list[Any]) -> Results:
    """A refused decomposition of matrices with no elements: empty results, info 0."""
    results: list[Any] = []
    for i, value in enumerate(op.results):
        shape = cx.result_shape(op, i)
        if 0 not in shape.dims and not shape.dtype.startswith(("s", "u")):
            raise cx.unsupported(op, REFUSED_CUSTOM_CALLS[op.attrs["call_target_name"]])
        zeros = cx.b.splat(0, shape.dtype, shape.dims)
        results.append(Complex(zeros, cx.b.splat(0, shape.dtype, shape.dims)) if is_complex_type(value.type) else zeros)
    return results


for _target in REFUSED_CUSTOM_CALLS:
    if _target.startswith("lapack_"):
        custom_call_target(_target)(import_empty_decomposition)


# ---------------------------------------------------------------- values that are real or Complex
def _each(fn: Callable[[Instruction], Instruction], x: Value) -> Value:
    return Complex(fn(x.re), fn(x.im)) if isinstance(x, Complex) else fn(x)


def _real(x: Value) -> Instruction:
    return x.re if isinstance(x, Complex) else x


def _both(cx: Context, opcode: str, x: Value, y: Value) -> Value:
    if isinstance(x, Complex):
        return Complex(cx.b.op(opcode, [x.re, y.re]), cx.b.op(opcode, [x.im, y.im]))
    return cx.b.op(opcode, [x, y])


def _mul(cx: Context, x: Value, y: Value) -> Value:
    return cplx.mul(cx, x, y) if isinstance(x, Complex) else cx.b.op("multiply", [x, y])


def _div(cx: Context, x: Value, y: Value) -> Value:
    return cplx.div(cx, x, y) if isinstance(x, Complex) else cx.b.op("divide", [x, y])


def _scale(cx: Context, x: Value, r: Instruction) -> Value:
    """x times a real r of x's shape."""
    return _each(lambda p: cx.b.op("multiply", [p, r]), x)


def _conj(cx: Context, x: Value) -> Value:
    return Complex(x.re, cx.b.op("negate", [x.im])) if isinstance(x, Complex) else x


def _select(cx: Context, pred: Instruction, x: Value, y: Value) -> Value:
    if isinstance(x, Complex):
        return Complex(cx.b.op("select", [pred, x.re, y.re]), cx.b.op("select", [pred, x.im, y.im]))
    return cx.b.op("select", [pred, x, y])


def _zeros(cx: Context, like: Value, dims: tuple[int, ...] | None = None) -> Value:
    shape = _real(like).shape
    return _each(lambda p: cx.b.splat(0, shape.dtype, shape.dims if dims is None else dims), like)


def _dims(x: Value) -> tuple[int, ...]:
    return tuple(int(d) for d in _real(x).shape.dims)


def _slice(cx: Context, x: Value, r0: int, r1: int, c0: int, c1: int) -> Value:
    """x[..., r0:r1, c0:c1]."""
    dims = _dims(x)
    batch = dims[:-2]
    return _each(lambda p: cx.b.op("slice", [p], start_indices=(0,) * len(batch) + (r0, c0),
                                   limit_indices=batch + (r1, c1), strides=(1,) * len(dims)), x)


def _concat(cx: Context, xs: list[Value], dim: int) -> Value:
    if len(xs) == 1:
        return xs[0]
    if isinstance(xs[0], Complex):
        return Complex(cx.b.op("concatenate", [x.re for x in xs], dimension=dim),  # type: ignore[union-attr]
                       cx.b.op("concatenate", [x.im for x in xs], dimension=dim))  # type: ignore[union-attr]
    return cx.b.op("concatenate", xs, dimension=dim)


def _swap(cx: Context, x: Value) -> Value:
    rank = len(_dims(x))
    return _each(lambda p: cx.b.transpose(p, list(range(rank - 2)) + [rank - 1, rank - 2]), x)


def _reverse(cx: Context, x: Value, dims: tuple[int, ...]) -> Value:
    return _each(lambda p: cx.b.op("reverse", [p], dimensions=dims), x)


def _broadcast(cx: Context, x: Value, dims: tuple[int, ...]) -> Value:
    """x of shape batch + (1, 1) (or batch + (1, n), (m, 1)) broadcast to batch + (m, n)."""
    src = _dims(x)
    keep = tuple(i for i, d in enumerate(src) if d == dims[i])
    return _each(lambda p: cx.b.op("broadcast", [cx.b.reshape(p, tuple(src[i] for i in keep))],
                                   Shape(p.shape.dtype, dims), dimensions=keep), x)


def _matmul(cx: Context, x: Value, y: Value) -> Value:
    """x [..., m, k] times y [..., k, n], with leading batch dims."""
    rank = len(_dims(x))
    batch = tuple(range(rank - 2))

    def dot(p: Instruction, q: Instruction) -> Instruction:
        return cx.b.op("dot", [p, q], lhs_batch_dims=batch, rhs_batch_dims=batch,
                       lhs_contracting_dims=(rank - 1,), rhs_contracting_dims=(rank - 2,))
    if isinstance(x, Complex):
        assert isinstance(y, Complex)
        return Complex(cx.b.op("subtract", [dot(x.re, y.re), dot(x.im, y.im)]),
                       cx.b.op("add", [dot(x.re, y.im), dot(x.im, y.re)]))
    return dot(x, y)


def _index(cx: Context, dims: tuple[int, ...], axis: int) -> Instruction:
    """An s32 iota of dims along axis (a row or column number)."""
    return cx.b.op("iota", [], cx.b.splat(0, "s32", dims).shape, iota_dimension=axis)


def _where(cx: Context, index: Instruction, direction: str, k: int) -> Instruction:
    return cx.b.op("compare", [index, cx.b.splat(k, "s32", index.shape.dims)], direction=direction)


def _first_failure(cx: Context, failed: list[Instruction], batch: tuple[int, ...]) -> Instruction:
    """info: the first step (1-based) whose pred (of shape batch + (1, 1)) is true, else 0, as s32[batch]."""
    n = len(failed)
    if n == 0:
        return cx.b.splat(0, "s32", batch)
    flags = cx.b.reshape(_concat(cx, failed, len(batch)), batch + (n,))  # type: ignore[arg-type]
    step = cx.b.op("add", [_index(cx, batch + (n,), len(batch)), cx.b.splat(1, "s32", batch + (n,))])
    never = cx.b.splat(n + 1, "s32", batch + (n,))
    first = cx.b.op("reduce", [cx.b.op("select", [flags, step, never])], dimensions=(len(batch),), kind="minimum")
    none = cx.b.op("compare", [first, cx.b.splat(n + 1, "s32", batch)], direction="EQ")
    return cx.b.op("select", [none, cx.b.splat(0, "s32", batch), first])


def _config(cx: Context, op: Op, key: str, allowed: str) -> str:
    """A LAPACK argument character from mhlo.backend_config (stored as its code: 76 for 'L')."""
    config = op.attrs.get("mhlo.backend_config")
    value = config.get(key) if isinstance(config, dict) else None
    if value is None:
        raise cx.error(op, f"{_target(op)}mhlo.backend_config has no {key}")
    char = chr(int(value))
    if char not in allowed:
        raise cx.unsupported(op, f"{_target(op)}{key} = '{char}' (expected one of {', '.join(allowed)})")
    return char


def _target(op: Op) -> str:
    """``@lapack_spotrf_ffi: `` for a custom call, to name the routine in a message."""
    target = op.attrs.get("call_target_name")
    return f"@{target}: " if target else ""


def _steps(cx: Context, op: Op, n: int, limit: int = MAX_FACTOR_STEPS) -> None:
    if n > limit:
        raise cx.unsupported(op, f"{_target(op)}a matrix of {n} rows or columns (at most {limit} are unrolled)")


# ---------------------------------------------------------------- triangular_solve, trsm
def triangular_solve(cx: Context, op: Op, a: Value, b: Value, *, left: bool, lower: bool, transpose: str,
                     unit: bool) -> Value:
    """op(a) x = b (left) or x op(a) = b, by forward substitution one row at a time: the right side and
    op(a) = a^T become the left, lower form by transposing, an upper triangle becomes lower by reversing."""
    rank = len(_dims(a))
    if rank < 2 or len(_dims(b)) != rank or _dims(a)[-1] != _dims(a)[-2]:
        raise cx.error(op, "triangular_solve takes a square a and b of the same rank")
    _steps(cx, op, _dims(a)[-1], MAX_SOLVE_ROWS)
    if transpose == "ADJOINT":
        a, transpose = _conj(cx, a), "TRANSPOSE"
    flip_a = transpose == "TRANSPOSE"
    if not left:  # x op(a) = b  <=>  op(a)^T x^T = b^T
        flip_a = not flip_a
        b = _swap(cx, b)
    if flip_a:
        a, lower = _swap(cx, a), not lower
    if not lower:  # reverse rows and columns: the upper triangle becomes the lower one
        a = _reverse(cx, a, (rank - 2, rank - 1))
        b = _reverse(cx, b, (rank - 2,))
    x = _forward_substitution(cx, a, b, unit)
    if not lower:
        x = _reverse(cx, x, (rank - 2,))
    return x if left else _swap(cx, x)


def _forward_substitution(cx: Context, a: Value, b: Value, unit: bool) -> Value:
    n, m = _dims(a)[-1], _dims(b)[-1]
    rows: list[Value] = []
    for i in range(n):
        row = _slice(cx, b, i, i + 1, 0, m)
        if rows:
            row = _both(cx, "subtract", row, _matmul(cx, _slice(cx, a, i, i + 1, 0, i),
                                                     _concat(cx, rows, len(_dims(a)) - 2)))
        if not unit:
            row = _div(cx, row, _broadcast(cx, _slice(cx, a, i, i + 1, i, i + 1), _dims(row)))
        rows.append(row)
    return _concat(cx, rows, len(_dims(a)) - 2)


def _transpose_attr(op: Op) -> str:
    return str(op.attrs.get("transpose_a", "NO_TRANSPOSE")).split()[-1].strip(">")


@stablehlo_op("stablehlo.triangular_solve")
@complex_op("stablehlo.triangular_solve")
def import_triangular_solve(cx: Context, op: Op, args: list[Any]) -> Results:
    transpose = _transpose_attr(op)
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        raise cx.error(op, f"unknown transpose_a {transpose}")
    a, b = args
    return triangular_solve(cx, op, a, b, left=bool(op.attrs.get("left_side", False)),  # type: ignore[return-value]
                            lower=bool(op.attrs.get("lower", False)), transpose=transpose,
                            unit=bool(op.attrs.get("unit_diagonal", False)))


@custom_call_target(*(f"lapack_{t}trsm_ffi" for t in "sdcz"))
def import_trsm(cx: Context, op: Op, args: list[Any]) -> Results:
    a, b = args
    transpose = {"N": "NO_TRANSPOSE", "T": "TRANSPOSE", "C": "ADJOINT"}[_config(cx, op, "trans_x", "NTC")]
    return triangular_solve(cx, op, a, b, left=_config(cx, op, "side", "LR") == "L",  # type: ignore[return-value]
                            lower=_config(cx, op, "uplo", "LU") == "L", transpose=transpose,
                            unit=_config(cx, op, "diag", "NU") == "U")


# ---------------------------------------------------------------- potrf
def cholesky_lower(cx: Context, a: Value) -> tuple[Value, list[Instruction]]:
    """(L, pivots failed) for the lower triangle of a: column j is (a[:, j] - L[:, :j] L[j, :j]^H) / sqrt(d_j),
    d_j the real part of its diagonal entry; each failed pred (batch + (1, 1)) is d_j <= 0 or NaN."""
    dims = _dims(a)
    n, rank = dims[-1], len(dims)
    row = _index(cx, dims[:-1] + (1,), rank - 2)
    columns: list[Value] = []
    failed: list[Instruction] = []
    for j in range(n):
        col = _slice(cx, a, 0, n, j, j + 1)
        if j:
            done = _concat(cx, columns, rank - 1)
            col = _both(cx, "subtract", col, _matmul(cx, done, _conj(cx, _swap(cx, _slice(cx, done, j, j + 1, 0, j)))))
        d = _real(_slice(cx, col, j, j + 1, 0, 1))
        failed.append(cx.b.op("not", [cx.b.op("compare", [d, cx.b.splat(0, d.shape.dtype, d.shape.dims)],
                                                direction="GT")]))
        wide = _broadcast(cx, cx.b.op("sqrt", [d]), _dims(col))
        assert isinstance(wide, Instruction)
        below = _each(lambda p: cx.b.op("divide", [p, wide]), col)  # by a real root: each part on its own
        diagonal = Complex(wide, cx.b.splat(0, wide.shape.dtype, wide.shape.dims)) if isinstance(col, Complex) \
            else wide
        column = _select(cx, _where(cx, row, "GT", j), below,
                         _select(cx, _where(cx, row, "EQ", j), diagonal, _zeros(cx, col)))
        columns.append(column)
    return _concat(cx, columns, rank - 1), failed


@custom_call_target(*(f"lapack_{t}potrf_ffi" for t in "sdcz"))
def import_potrf(cx: Context, op: Op, args: list[Any]) -> Results:
    (a,) = args
    dims = _dims(a)
    if len(dims) < 2 or dims[-1] != dims[-2]:
        raise cx.error(op, "potrf takes square matrices")
    _steps(cx, op, dims[-1])
    lower = _config(cx, op, "uplo", "LU") == "L"
    rank, batch = len(dims), dims[:-2]
    if dims[-1] == 0:
        return [a, cx.b.splat(0, "s32", batch)]
    # the upper factor U = L^H of a^H's lower triangle, which is a's upper triangle conjugated
    factor, failed = cholesky_lower(cx, a if lower else _conj(cx, _swap(cx, a)))
    if not lower:
        factor = _conj(cx, _swap(cx, factor))
    row, col = _index(cx, dims, rank - 2), _index(cx, dims, rank - 1)
    mine = cx.b.op("compare", [row, col], direction="GE" if lower else "LE")
    return [_select(cx, mine, factor, a), _first_failure(cx, failed, batch)]  # type: ignore[list-item]


# ---------------------------------------------------------------- getrf
def _magnitude(cx: Context, x: Value) -> Instruction:
    """|x|, or |re| + |im| for a complex x (the measure LAPACK's i?amax picks a pivot by)."""
    if isinstance(x, Complex):
        return cx.b.op("add", [cx.b.op("abs", [x.re]), cx.b.op("abs", [x.im])])
    return cx.b.op("abs", [x])


def _is_zero(cx: Context, x: Value) -> Instruction:
    def zero(p: Instruction) -> Instruction:
        return cx.b.op("compare", [p, cx.b.splat(0, p.shape.dtype, p.shape.dims)], direction="EQ")
    return cx.b.op("and", [zero(x.re), zero(x.im)]) if isinstance(x, Complex) else zero(x)


def _row_where(cx: Context, x: Value, pick: Instruction) -> Value:
    """The row of x [..., m, n] where pick (pred, x's dims) holds in exactly one row, as [..., 1, n]: a sum of
    that row and zeros, so exact."""
    dims = _dims(x)
    return _each(lambda p: cx.b.reshape(cx.b.op("reduce", [cx.b.op("select", [pick, p, cx.b.splat(0, p.shape.dtype,
                                                                                                  dims)])],
                                                dimensions=(len(dims) - 2,), kind="add"),
                                        dims[:-2] + (1, dims[-1])), x)


def lu_factor(cx: Context, a: Value) -> tuple[Value, Instruction, list[Instruction]]:
    """(L and U packed, pivots s32[..., k] 0-based, zero-pivot preds): dgetf2's right-looking steps, the pivot
    the first row of largest magnitude on or below the diagonal, rows swapped whole."""
    dims = _dims(a)
    m, n, rank = dims[-2], dims[-1], len(dims)
    batch = dims[:-2]
    row, col = _index(cx, dims, rank - 2), _index(cx, dims, rank - 1)
    pivots: list[Instruction] = []
    failed: list[Instruction] = []
    for j in range(min(m, n)):
        mag = _magnitude(cx, _slice(cx, a, 0, m, j, j + 1))
        mag = cx.b.op("select", [_where(cx, _index(cx, batch + (m, 1), rank - 2), "LT", j),
                                 cx.b.splat(-1, mag.shape.dtype, mag.shape.dims), mag])
        p = cx.b.convert(cx.b.op("argmax", [cx.b.reshape(mag, batch + (m,))], dimension=rank - 2), "s32")
        pivots.append(cx.b.reshape(p, batch + (1,)))
        at_p = cx.b.op("compare", [row, cx.b.op("broadcast", [p], row.shape, dimensions=tuple(range(len(batch))))],
                       direction="EQ")
        at_j = _where(cx, row, "EQ", j)
        row_j, row_p = _broadcast(cx, _slice(cx, a, j, j + 1, 0, n), dims), _broadcast(cx, _row_where(cx, a, at_p), dims)
        a = _select(cx, at_j, row_p, _select(cx, at_p, row_j, a))
        pivot = _slice(cx, a, j, j + 1, j, j + 1)
        zero = _is_zero(cx, pivot)
        failed.append(zero)
        column = _slice(cx, a, 0, m, j, j + 1)
        scaled = _select(cx, _broadcast(cx, zero, (*batch, m, 1)),  # type: ignore[arg-type]
                         column, _div(cx, column, _broadcast(cx, pivot, (*batch, m, 1))))
        l_wide, u_wide = _broadcast(cx, scaled, dims), _broadcast(cx, _slice(cx, a, j, j + 1, 0, n), dims)
        below = _where(cx, row, "GT", j)
        trailing = cx.b.op("and", [below, _where(cx, col, "GT", j)])
        updated = _both(cx, "subtract", a, _mul(cx, l_wide, u_wide))
        a = _select(cx, trailing, updated, _select(cx, cx.b.op("and", [below, _where(cx, col, "EQ", j)]), l_wide, a))
    pivots_all = cx.b.op("concatenate", pivots, dimension=len(batch)) if len(pivots) > 1 else pivots[0]
    return a, pivots_all, failed


@custom_call_target(*(f"lapack_{t}getrf_ffi" for t in "sdcz"))
def import_getrf(cx: Context, op: Op, args: list[Any]) -> Results:
    (a,) = args
    dims = _dims(a)
    if len(dims) < 2:
        raise cx.error(op, "getrf takes matrices")
    batch, k = dims[:-2], min(dims[-2:])
    _steps(cx, op, k)
    if k == 0:
        return [a, cx.b.splat(0, "s32", batch + (0,)), cx.b.splat(0, "s32", batch)]
    lu, pivots, failed = lu_factor(cx, a)
    one_based = cx.b.op("add", [pivots, cx.b.splat(1, "s32", batch + (k,))])
    return [lu, one_based, _first_failure(cx, failed, batch)]  # type: ignore[list-item]


# ---------------------------------------------------------------- geqrf, orgqr/ungqr
def _sum_rows(cx: Context, x: Instruction) -> Instruction:
    """x [..., m, 1] summed over its rows, as [..., 1, 1]."""
    dims = tuple(int(d) for d in x.shape.dims)
    return cx.b.reshape(cx.b.op("reduce", [x], dimensions=(len(dims) - 2,), kind="add"), dims[:-2] + (1, 1))


def _square(cx: Context, x: Value) -> Instruction:
    """|x|^2, elementwise."""
    def sq(p: Instruction) -> Instruction:
        return cx.b.op("multiply", [p, p])
    return cx.b.op("add", [sq(x.re), sq(x.im)]) if isinstance(x, Complex) else sq(x)


def _apply_reflector(cx: Context, c: Value, v: Value, tau: Value) -> Value:
    """(I - tau v v^H) c, for v [..., m, 1] and tau [..., 1, 1]."""
    dims = _dims(c)
    w = _matmul(cx, _conj(cx, _swap(cx, v)), c)  # v^H c: [..., 1, n]
    return _both(cx, "subtract", c, _mul(cx, _broadcast(cx, _mul(cx, v, _broadcast(cx, tau, _dims(v))), dims),
                                          _broadcast(cx, w, dims)))


def householder_qr(cx: Context, a: Value) -> tuple[Value, Value]:
    """(R above the diagonal and the reflectors' v below it, tau [..., k]) by ?geqr2's steps: column j's
    reflector (zlarfg) has beta = -sign(re alpha) |(alpha, x)|, tau = (beta - alpha) / beta (conjugated for
    the imaginary part), v = (1, x / (alpha - beta)); tau = 0 and nothing changes when x = 0 and alpha is real.
    H^H = I - conj(tau) v v^H is applied to the columns after j."""
    dims = _dims(a)
    m, n, rank = dims[-2], dims[-1], len(dims)
    batch = dims[:-2]
    column_dims = batch + (m, 1)
    row = _index(cx, column_dims, rank - 2)
    col = _index(cx, dims, rank - 1)
    taus: list[Value] = []
    for j in range(min(m, n)):
        column = _slice(cx, a, 0, m, j, j + 1)
        below = _where(cx, row, "GT", j)
        x = _select(cx, below, column, _zeros(cx, column))
        alpha = _slice(cx, a, j, j + 1, j, j + 1)
        re_alpha = _real(alpha)
        zero = cx.b.splat(0, re_alpha.shape.dtype, re_alpha.shape.dims)
        xnorm2 = _sum_rows(cx, _square(cx, x))
        norm = cx.b.op("sqrt", [cx.b.op("add", [_square(cx, alpha), xnorm2])])
        beta = cx.b.op("select", [cx.b.op("compare", [re_alpha, zero], direction="GE"), cx.b.op("negate", [norm]),
                                  norm])
        trivial = cx.b.op("compare", [xnorm2, zero], direction="EQ")
        if isinstance(alpha, Complex):
            trivial = cx.b.op("and", [trivial, cx.b.op("compare", [alpha.im, zero], direction="EQ")])
            tau: Value = Complex(cx.b.op("divide", [cx.b.op("subtract", [beta, alpha.re]), beta]),
                                 cx.b.op("negate", [cx.b.op("divide", [alpha.im, beta])]))
            beta_value: Value = Complex(beta, zero)
        else:
            tau = cx.b.op("divide", [cx.b.op("subtract", [beta, alpha]), beta])
            beta_value = beta
        tau = _select(cx, trivial, _zeros(cx, tau), tau)
        scale = _div(cx, _each(lambda p: cx.b.splat(1 if p is _real(alpha) else 0, p.shape.dtype, p.shape.dims),
                               alpha), _both(cx, "subtract", alpha, beta_value))
        v_below = _select(cx, _broadcast(cx, trivial, column_dims), x,  # type: ignore[arg-type]
                          _mul(cx, x, _broadcast(cx, scale, column_dims)))
        at_j = _where(cx, row, "EQ", j)
        ones = _each(lambda p: cx.b.splat(1 if p is _real(column) else 0, p.shape.dtype, p.shape.dims), column)
        v = _select(cx, below, v_below, _select(cx, at_j, ones, _zeros(cx, column)))
        updated = _apply_reflector(cx, a, v, _conj(cx, tau))
        new_column = _select(cx, below, v_below,
                             _select(cx, at_j, _select(cx, _broadcast(cx, trivial, column_dims), column,  # type: ignore[arg-type]
                                                       _broadcast(cx, beta_value, column_dims)), column))
        after = _where(cx, col, "GT", j)
        a = _select(cx, after, updated, _select(cx, _where(cx, col, "EQ", j), _broadcast(cx, new_column, dims), a))
        taus.append(_each(lambda p: cx.b.reshape(p, batch + (1,)), tau))
    return a, _concat(cx, taus, len(batch))


def householder_q(cx: Context, a: Value, tau: Value) -> Value:
    """?org2r/?ung2r: H(1) H(2) ... H(k) applied to the first n columns of the m x m identity, H(i) = I -
    tau_i v_i v_i^H with v_i = (0, ..., 0, 1, a[i+1:, i])."""
    dims = _dims(a)
    m, rank = dims[-2], len(dims)
    batch = dims[:-2]
    k = _dims(tau)[-1]
    row, col = _index(cx, dims, rank - 2), _index(cx, dims, rank - 1)
    eye = cx.b.op("compare", [row, col], direction="EQ")
    q = _each(lambda p: cx.b.convert(eye, p.shape.dtype) if p is _real(a) else cx.b.splat(0, p.shape.dtype, dims), a)
    column_row = _index(cx, batch + (m, 1), rank - 2)
    for i in reversed(range(k)):
        column = _slice(cx, a, 0, m, i, i + 1)
        ones = _each(lambda p: cx.b.splat(1 if p is _real(column) else 0, p.shape.dtype, p.shape.dims), column)
        v = _select(cx, _where(cx, column_row, "GT", i), column,
                    _select(cx, _where(cx, column_row, "EQ", i), ones, _zeros(cx, column)))
        tau_i = _each(lambda p: cx.b.reshape(cx.b.op("slice", [p], start_indices=(0,) * len(batch) + (i,),
                                                     limit_indices=batch + (i + 1,), strides=(1,) * (len(batch) + 1)),
                                             batch + (1, 1)), tau)
        q = _apply_reflector(cx, q, v, tau_i)
    return q


@custom_call_target(*(f"lapack_{t}geqrf_ffi" for t in "sdcz"))
def import_geqrf(cx: Context, op: Op, args: list[Any]) -> Results:
    (a,) = args
    dims = _dims(a)
    if len(dims) < 2:
        raise cx.error(op, "geqrf takes matrices")
    k = min(dims[-2:])
    _steps(cx, op, k)
    if k == 0:
        return [a, _zeros(cx, a, dims[:-2] + (0,))]  # type: ignore[list-item]
    return list(householder_qr(cx, a))  # type: ignore[arg-type]


@custom_call_target(*(f"lapack_{t}orgqr_ffi" for t in "sd"), *(f"lapack_{t}ungqr_ffi" for t in "cz"))
def import_orgqr(cx: Context, op: Op, args: list[Any]) -> Results:
    a, tau = args
    dims = _dims(a)
    if len(dims) < 2 or _dims(tau) != dims[:-2] + (_dims(tau)[-1],) or _dims(tau)[-1] > dims[-1]:
        raise cx.error(op, "orgqr takes matrices [..., m, n] and tau [..., k], k <= n")
    _steps(cx, op, _dims(tau)[-1])
    if 0 in dims:
        return a
    return householder_q(cx, a, tau)  # type: ignore[return-value]


# ---------------------------------------------------------------- gtsv
def _element(cx: Context, x: Value, i: int) -> Value:
    """x[..., i] of a vector x [..., n], as [..., 1, 1]."""
    dims = _dims(x)
    batch = dims[:-1]
    return _each(lambda p: cx.b.reshape(cx.b.op("slice", [p], start_indices=(0,) * len(batch) + (i,),
                                                limit_indices=batch + (i + 1,), strides=(1,) * len(dims)),
                                        batch + (1, 1)), x)


def tridiagonal_solve(cx: Context, dl: list[Value], d: list[Value], du: list[Value], b: list[Value]
                      ) -> tuple[list[Value], list[Value], list[Value], list[Value], list[Instruction]]:
    """?gtsv on its elements (dl, du of n - 1, d and the rows of b of n): Gaussian elimination with partial
    pivoting (rows i and i + 1 swapped where |d_i| < |dl_i|, by |re| + |im| for complex), then back
    substitution. Returns dl, d, du as LAPACK leaves them (dl: U's second superdiagonal), the solution rows
    and the failure preds (a zero pivot)."""
    n = len(d)
    dl, d, du, b = list(dl), list(d), list(du), list(b)
    failed: list[Instruction] = []
    width = _dims(b[0])

    def times(s: Value, row: Value) -> Value:  # an element times a row of b
        return _mul(cx, _broadcast(cx, s, width), row)
    for i in range(n - 1):
        keep = cx.b.op("compare", [_magnitude(cx, d[i]), _magnitude(cx, dl[i])], direction="GE")
        keep_row = _broadcast(cx, keep, width)
        failed.append(cx.b.op("and", [keep, _is_zero(cx, d[i])]))
        fact = _div(cx, dl[i], d[i])  # no swap
        swap_fact = _div(cx, d[i], dl[i])
        d_next = _select(cx, keep, _both(cx, "subtract", d[i + 1], _mul(cx, fact, du[i])),
                         _both(cx, "subtract", du[i], _mul(cx, swap_fact, d[i + 1])))
        b_i = _select(cx, keep_row, b[i], b[i + 1])  # type: ignore[arg-type]
        b_next = _select(cx, keep_row, _both(cx, "subtract", b[i + 1], times(fact, b[i])),  # type: ignore[arg-type]
                         _both(cx, "subtract", b[i], times(swap_fact, b[i + 1])))
        d_i = _select(cx, keep, d[i], dl[i])
        du_i = _select(cx, keep, du[i], d[i + 1])
        if i < n - 2:
            dl_i = _select(cx, keep, _zeros(cx, dl[i]), du[i + 1])
            du[i + 1] = _select(cx, keep, du[i + 1], _each(lambda p: cx.b.op("negate", [p]),
                                                           _mul(cx, swap_fact, du[i + 1])))
            dl[i] = dl_i
        d[i], d[i + 1], du[i], b[i], b[i + 1] = d_i, d_next, du_i, b_i, b_next
    failed.append(_is_zero(cx, d[n - 1]))
    x: list[Value] = [b[0]] * n
    for i in reversed(range(n)):
        row = b[i]
        if i + 1 < n:
            row = _both(cx, "subtract", row, times(du[i], x[i + 1]))
        if i + 2 < n:
            row = _both(cx, "subtract", row, times(dl[i], x[i + 2]))
        x[i] = _div(cx, row, _broadcast(cx, d[i], width))
    return dl, d, du, x, failed


@custom_call_target(*(f"lapack_{t}gtsv_ffi" for t in "sdcz"))
def import_gtsv(cx: Context, op: Op, args: list[Any]) -> Results:
    """JAX passes dl, d, du of n each (dl[0] and du[n-1] unused: LAPACK reads dl from its second element) and
    b [..., n, nrhs], and gets them back overwritten, with info."""
    dl, d, du, b = args
    dims = _dims(b)
    n, rank = dims[-2], len(dims)
    batch = dims[:-2]
    if len(dims) < 2 or any(_dims(v) != batch + (n,) for v in (dl, d, du)):
        raise cx.error(op, "gtsv takes dl, d, du [..., n] and b [..., n, nrhs]")
    _steps(cx, op, n)
    if n == 0:
        return [dl, d, du, b, cx.b.splat(0, "s32", batch)]
    rows = [_slice(cx, b, i, i + 1, 0, dims[-1]) for i in range(n)]
    new_dl, new_d, new_du, x, failed = tridiagonal_solve(
        cx, [_element(cx, dl, i + 1) for i in range(n - 1)], [_element(cx, d, i) for i in range(n)],
        [_element(cx, du, i) for i in range(n - 1)], rows)

    def vector(elements: list[Value]) -> Value:
        return _each(lambda p: cx.b.reshape(p, batch + (len(elements),)),
                     _concat(cx, elements, rank - 1))
    return [vector([_element(cx, dl, 0)] + new_dl), vector(new_d),  # type: ignore[list-item]
            vector(new_du + [_element(cx, du, n - 1)]), _concat(cx, x, rank - 2), _first_failure(cx, failed, batch)]
