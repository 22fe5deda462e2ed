"""DFT and STFT as one float64 dot: the transform is linear in the real and imaginary parts of the signal, so its
matrix is computed at import time by applying numpy's FFT (as the ONNX reference does) to each basis signal."""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, require_float, static_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.frontend.onnx.types import ir_dtype, onnx_type_name
from mlcc.hlo.builder import Builder
from mlcc.hlo.dtypes import numpy_dtype

MAX_DFT_MATRIX_ELEMENTS = 1 << 24


def _transform(signal: np.ndarray, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The reference's DFT of one complex signal: [K, 2] (real, imaginary), or [K, 1] for an inverse one-sided."""
    if not inverse:
        out = np.fft.fft(signal, n=length)
        if onesided:
            out = out[:length // 2 + 1]
    elif onesided:
        return np.fft.irfft(signal, n=length)[:, None]
    else:
        out = np.fft.ifft(signal, n=length)
    return np.stack([out.real, out.imag], axis=-1)


def dft_matrix(size: int, parts: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """[size * parts, K * out_parts]: row j is the transform of the j-th basis signal (parts 1: real input,
    2: real and imaginary interleaved)."""
    rows = []
    for j in range(size * parts):
        basis = np.zeros(size * parts)
        basis[j] = 1.0
        pairs = basis.reshape(size, parts)
        signal = pairs[:, 0] + (1j * pairs[:, 1] if parts == 2 else 0)
        rows.append(_transform(signal, length, inverse, onesided).reshape(-1))
    return np.stack(rows)


@onnx_op("DFT", since=17)
@onnx_op("DFT", since=20)
def import_dft(b: Builder, node: OnnxNode) -> list[Result]:
    x = node.input(0)
    require_float(node, x)
    rank = x.shape.rank
    parts = static_dims(node, x.shape.dims[-1:], "complex dim")[0]
    if parts not in (1, 2):
        raise node.error(f"the last dim must be 1 (real) or 2 (complex), is {parts}")
    if node.opset >= 20:
        axis = node.ints(2, "axis")[0] if node.has_input(2) else -2
    else:
        axis = node.attr("axis", 1)
    axis = node.axis(axis, rank)
    if axis == rank - 1:
        raise node.error("the axis cannot be the last (complex) dim")
    size = static_dims(node, [x.shape.dims[axis]], "signal length")[0]
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if node.has_input(1):
        length = node.ints(1, "dft_length")[0]
    else:
        length = 2 * (size - 1) if inverse and onesided else size
    if length < 1:
        raise node.error(f"dft_length {length} must be positive")
    matrix = dft_matrix(size, parts, length, inverse, onesided)
    if matrix.size > MAX_DFT_MATRIX_ELEMENTS:
        raise node.unsupported(f"a DFT of {size} points to {length} (its matrix would have {matrix.size} elements)")
    out_parts = 1 if inverse and onesided else 2
    bins = matrix.shape[1] // out_parts
    # move the signal axis next to the complex dim, flatten the two, multiply, and move it back
    perm = [d for d in range(rank - 1) if d != axis] + [axis, rank - 1]
    moved = b.transpose(x, perm)
    lead = moved.shape.dims[:-2]
    flat = b.convert(b.reshape(moved, (*lead, size * parts)), "f64")  # as the reference: float64, then cast
    y = b.op("dot", [flat, b.constant(matrix)], lhs_batch_dims=(), lhs_contracting_dims=(len(lead),),
             rhs_batch_dims=(), rhs_contracting_dims=(0,))
    y = b.convert(b.reshape(y, (*lead, bins, out_parts)), x.shape.dtype)
    inverse_perm = [perm.index(d) for d in range(rank)]
    return [b.transpose(y, inverse_perm)]


@onnx_op("MelWeightMatrix", since=17)
def import_mel_weight_matrix(b: Builder, node: OnnxNode) -> list[Result]:
    """[dft_length // 2 + 1, num_mel_bins] triangular filters, computed at import time as the ONNX
    reference computes them (in the inputs' own types: the bin edges are truncated to integers)."""
    num_mel_bins = int(node.ints(0, "num_mel_bins")[0])
    dft_length = int(node.ints(1, "dft_length")[0])
    sample_rate = node.const(2, "sample_rate").reshape(())
    lower = node.const(3, "lower_edge_hertz").reshape(())
    upper = node.const(4, "upper_edge_hertz").reshape(())
    dtype = ir_dtype(node.attr("output_datatype", 1))
    if dtype is None:
        raise node.unsupported(f"output_datatype {onnx_type_name(node.attr('output_datatype'))}")
    if num_mel_bins < 1 or dft_length < 1 or int(sample_rate) <= 0:
        raise node.error(f"num_mel_bins {num_mel_bins}, dft_length {dft_length} and sample_rate "
                         f"{int(sample_rate)} must be positive")
    low_mel = 2595 * np.log1p(lower / 700) / np.log(10)
    high_mel = 2595 * np.log1p(upper / 700) / np.log(10)
    edges = np.arange(0, num_mel_bins + 2)
    edges = edges * ((high_mel - low_mel) / edges.shape[0]) + low_mel
    edges = (((dft_length + 1) * (700 * np.expm1(edges / 2595 * np.log(10)))) // sample_rate).astype(int)
    bins = dft_length // 2 + 1
    if edges.min() < 0 or edges[1:-1].max() >= bins:
        raise node.error(f"the filter edges {edges.tolist()} fall outside the {bins} spectrogram bins")
    out = np.zeros((bins, num_mel_bins))
    for i in range(num_mel_bins):
        left, center, right = (int(v) for v in edges[i:i + 3])
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    return [out.astype(numpy_dtype(dtype))]


@onnx_op("STFT", since=17)
def import_stft(b: Builder, node: OnnxNode) -> list[Result]:
    """[batch, length, 1 or 2] -> [batch, frames, bins, 2]: the frames gathered at import-time offsets,
    times the window, then one float64 dot with the DFT matrix of a frame (as DFT is imported)."""
    x = node.input(0)
    require_float(node, x)
    if x.shape.rank != 3:
        raise node.error(f"the signal must be [batch, length, 1 or 2], has dims {list(x.shape.dims)}")
    batch, length, parts = static_dims(node, x.shape.dims, "signal dims")
    if parts not in (1, 2):
        raise node.error(f"the last dim must be 1 (real) or 2 (complex), is {parts}")
    step = node.ints(1, "frame_step")[0]
    window = node.input(2) if node.has_input(2) else None
    if node.has_input(3):
        size = node.ints(3, "frame_length")[0]
    else:
        size = static_dims(node, window.shape.dims, "window dims")[0] if window is not None else length
    if window is not None and tuple(window.shape.dims) != (size,):
        raise node.error(f"the window has dims {list(window.shape.dims)}, the frame length is {size}")
    if step < 1 or size < 1 or size > length:
        raise node.error(f"frame_step {step} and frame_length {size} do not fit a signal of length {length}")
    onesided = bool(node.attr("onesided", 1))
    if onesided and parts == 2:
        raise node.error("onesided applies to real signals only")
    frames = 1 + (length - size) // step
    offsets = (np.arange(frames) * step)[:, None] + np.arange(size)[None, :]
    y = b.op("gather", [x, b.constant(offsets.astype(np.int64))], axis=1)  # [batch, frames, size, parts]
    if window is not None:
        y = b.op("multiply", [y, broadcast_in_dims(b, b.convert(window, x.shape.dtype), y.shape.dims, [2])])
    matrix = dft_matrix(size, parts, size, False, onesided)
    if matrix.size > MAX_DFT_MATRIX_ELEMENTS:
        raise node.unsupported(f"frames of {size} points (the DFT matrix would have {matrix.size} elements)")
    flat = b.convert(b.reshape(y, (batch, frames, size * parts)), "f64")
    y = b.op("dot", [flat, b.constant(matrix)], lhs_batch_dims=(), lhs_contracting_dims=(2,),
             rhs_batch_dims=(), rhs_contracting_dims=(0,))
    return [b.convert(b.reshape(y, (batch, frames, matrix.shape[1] // 2, 2)), x.shape.dtype)]
