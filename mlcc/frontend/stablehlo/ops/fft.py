"""stablehlo.fft (FFT, IFFT, RFFT, IRFFT over the last 1 to 3 dims) as dots with constant DFT matrices.

Each transformed dim of size n is one complex dot_general (four real dots) with an n x n matrix of twiddle
factors exp(-+2 pi i jk / n), computed in f64 from jk mod n (so the exact zeros and ones are exact) and then
rounded to the operand's part type; IFFT and IRFFT fold their 1/n into the matrix. That is O(n^2) work per
transformed row, not O(n log n): fine for the sizes a compiled model transforms (MAX_FFT_LENGTH).
RFFT transforms the last dim from real to its n/2 + 1 non-negative frequencies, then the other dims;
IRFFT transforms the other dims back first, then the last from n/2 + 1 frequencies (the rest are their
conjugates: Hermitian symmetry) to n real values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcc.frontend.stablehlo.importer import Complex, Context, complex_op, stablehlo_op
from mlcc.frontend.stablehlo.ops.data import int_tuple
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")
MAX_FFT_LENGTH = 4096  # the largest transformed dim (its matrix has n^2 entries)


def _angles(rows: int, cols: int, n: int) -> np.ndarray:
    """2 pi (jk mod n) / n for j < rows, k < cols, in f64."""
    jk = (np.arange(rows, dtype=np.int64)[:, None] * np.arange(cols, dtype=np.int64)[None, :]) % n
    return 2.0 * np.pi * jk / n


def _cos_sin(angles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c, s = np.cos(angles), np.sin(angles)
    c[np.abs(c) < 1e-15] = 0.0  # cos(pi/2), sin(pi)...: exactly 0
    s[np.abs(s) < 1e-15] = 0.0
    return c, s


def dft_matrix(n: int, inverse: bool, columns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The real and imaginary parts of W[j, k] = exp(-+2 pi i jk / n) (divided by n when inverse), k < columns."""
    c, s = _cos_sin(_angles(n, n if columns is None else columns, n))
    if inverse:
        return c / n, s / n
    return c, -s


def irfft_matrix(n: int) -> tuple[np.ndarray, np.ndarray]:
    """x[j] = (1/n) sum_k w_k (Re X_k cos(2 pi jk/n) - Im X_k sin(2 pi jk/n)) over k <= n/2: rows k, columns j;
    w_k is 2 for the frequencies that stand for a conjugate pair, 1 for k = 0 and k = n/2 (n even)."""
    half = n // 2 + 1
    c, s = _cos_sin(_angles(half, n, n))
    w = np.full((half, 1), 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w * c / n, -w * s / n


def _dot_axis(cx: Context, x: Instruction, matrix: np.ndarray, axis: int) -> Instruction:
    """x contracted on axis with matrix's rows; the matrix's columns take axis's place."""
    m = cx.constant(matrix.astype(numpy_dtype(x.shape.dtype)), ref_hint="dft")
    out = cx.b.op("dot", [x, m], lhs_batch_dims=(), rhs_batch_dims=(), lhs_contracting_dims=(axis,),
                  rhs_contracting_dims=(0,))
    rank = x.shape.rank
    perm = list(range(axis)) + [rank - 1] + list(range(axis, rank - 1))  # the new last dim back to axis
    return cx.b.transpose(out, perm)


def _transform(cx: Context, z: Complex, axis: int, matrix: tuple[np.ndarray, np.ndarray]) -> Complex:
    w = Complex(*(cx.constant(p.astype(numpy_dtype(z.re.shape.dtype)), ref_hint="dft") for p in matrix))
    rank = z.re.shape.rank
    perm = list(range(axis)) + [rank - 1] + list(range(axis, rank - 1))

    def dot(x: Instruction, m: Instruction) -> Instruction:
        return cx.b.op("dot", [x, m], lhs_batch_dims=(), rhs_batch_dims=(), lhs_contracting_dims=(axis,),
                       rhs_contracting_dims=(0,))

    out = Complex(cx.b.op("subtract", [dot(z.re, w.re), dot(z.im, w.im)]),
                  cx.b.op("add", [dot(z.re, w.im), dot(z.im, w.re)]))
    return Complex(*(cx.b.transpose(p, perm) for p in out))


@complex_op("stablehlo.fft")
@stablehlo_op("stablehlo.fft")
def import_fft(cx: Context, op: Op, args: list[Any]) -> Any:
    (x,) = args
    kind = str(op.attrs.get("fft_type", "")).split()[-1].strip(">") if op.attrs.get("fft_type") else ""
    if kind not in FFT_TYPES:
        raise cx.error(op, f"unknown fft_type {op.attrs.get('fft_type')!r} (one of {', '.join(FFT_TYPES)})")
    lengths = int_tuple(cx, op, "fft_length")
    part = x.re if isinstance(x, Complex) else x
    rank = part.shape.rank
    if not 1 <= len(lengths) <= min(3, rank):
        raise cx.error(op, f"fft_length {list(lengths)} must name 1 to 3 of the operand's {rank} dims")
    if isinstance(x, Complex) == (kind == "RFFT"):
        raise cx.error(op, f"{kind} takes a {'real' if kind == 'RFFT' else 'complex'} operand")
    dims = tuple(part.shape.dims)
    axes = list(range(rank - len(lengths), rank))
    for axis, n in zip(axes, lengths):
        want = n // 2 + 1 if (kind == "IRFFT" and axis == rank - 1) else n
        if dims[axis] != want:
            raise cx.error(op, f"{kind} with fft_length {list(lengths)} needs dim {axis} of size {want}, "
                               f"not {dims[axis]}")
        if n > MAX_FFT_LENGTH:
            raise cx.unsupported(op, f"a transform of length {n} (at most {MAX_FFT_LENGTH}: each is a dot with "
                                     "an n x n matrix)")
    empty = cx.empty_result(op)
    if empty is not None:
        return empty
    last, n_last = rank - 1, lengths[-1]
    if kind == "RFFT":
        c, s = dft_matrix(n_last, False, n_last // 2 + 1)
        z = Complex(_dot_axis(cx, x, c, last), _dot_axis(cx, x, s, last))
        for axis, n in zip(axes[:-1], lengths[:-1]):
            z = _transform(cx, z, axis, dft_matrix(n, False))
        return z
    inverse = kind in ("IFFT", "IRFFT")
    z = x
    for axis, n in zip(axes[:-1], lengths[:-1]):
        z = _transform(cx, z, axis, dft_matrix(n, inverse))
    if kind == "IRFFT":
        c, s = irfft_matrix(n_last)
        return cx.b.op("add", [_dot_axis(cx, z.re, c, last), _dot_axis(cx, z.im, s, last)])
    return _transform(cx, z, last, dft_matrix(n_last, inverse))

