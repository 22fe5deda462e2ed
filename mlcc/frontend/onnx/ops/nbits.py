"""Weight-only quantized ops of com.microsoft: MatMulNBits and GatherBlockQuantized.

The quantized weights stay packed: the packed bytes (u8, ``8 // bits`` values a byte, the low bits first),
the per-block scales and the zero points are constants of the IR as the model stores them, and the
dequantization is IR ops on them:

    unpack:  q[..., i] = (packed[..., i // per_byte] >> bits * (i % per_byte)) & (2**bits - 1)
             a broadcast of the bytes to [..., bytes, per_byte], shifted by a broadcast [0, bits, ...] and
             masked, reshaped to [..., bytes * per_byte]
    dequant: w = (convert(q) - zero_point[block]) * scale[block]

so nothing of the unpacked weight is materialized at import. Fusion computes the chain where the matmul
kernel loads its weight tiles (mlcc/hlo/passes/fusion.py, the B-operand prologue), and the unpacked weight
never reaches memory.

MatMulNBits (ContribOperators.md): Y = A @ dequant(B)^T + bias, with B u8 [N, k_blocks, blob_size]
(blob_size = block_size * bits / 8), scales [N * k_blocks] (or [N, k_blocks]), zero_points packed u8
[N * ceil(k_blocks * bits / 8)] or of the scales' type [N * k_blocks] (default 2**(bits - 1)); K need not
be a multiple of block_size (the last block is padded). ``accuracy_level`` only lets a backend compute in
lower precision: mlcc accumulates in f32 whatever it says. ``g_idx`` (act-order) is refused (exit 69).

GatherBlockQuantized: rows of a table quantized in blocks along its last axis, gathered on axis 0 and then
dequantized (only the gathered rows are unpacked). Data packed as u8 with ``bits`` (4 or 8) is supported;
the INT4/UINT4-typed form waits for those IR types (exit 69).
"""

from __future__ import annotations

import numpy as np

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.blockquant import dequantize_blocks, take, unpack, unpack_by_gather
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Instruction, is_float

BITS = (2, 4, 8)


def _check_block_size(node: OnnxNode, block_size: int) -> None:
    if block_size < 16 or block_size & (block_size - 1):
        raise node.error(f"block_size {block_size} is not a power of two >= 16")


def _numel(x: Instruction) -> int:
    n = 1
    for d in x.shape.dims:
        n *= int(d)
    return n


def _packed_weight(b: Builder, node: OnnxNode, n: int, k: int, bits: int, row_bytes: int) -> Instruction:
    """MatMulNBits's B as u8 [N, ceil(K * bits / 8)]: the blocks of a row are consecutive in k, so the bytes
    of the last block's padding (K not a multiple of block_size) are dropped, never stored nor read."""
    used = -(-k * bits // 8)
    known = node.value(1)
    if known is not None:
        return b.constant(np.ascontiguousarray(known.reshape(n, row_bytes)[:, :used]), "u8",
                          ref_hint=node.proto.input[1])
    return take(b, b.reshape(node.input(1), (n, row_bytes)), used)


def _input_named(node: OnnxNode, i: int) -> str:
    return f"'{node.proto.input[i]}'"


@onnx_op("MatMulNBits", since=1, domain="com.microsoft")
def import_matmul_nbits(b: Builder, node: OnnxNode) -> list[Result]:
    k, n = int(node.attr("K")), int(node.attr("N"))
    bits, block_size = int(node.attr("bits", 4)), int(node.attr("block_size"))
    if bits not in BITS:
        raise node.unsupported(f"bits={bits} (supported: {', '.join(map(str, BITS))})")
    _check_block_size(node, block_size)
    if node.has_input(4):
        raise node.unsupported(f"g_idx {_input_named(node, 4)} (act-order group indices)")
    a, packed, scales = node.input(0), node.input(1), node.input(2)
    dtype = a.shape.dtype
    if not is_float(dtype):
        raise node.error(f"A must be a float tensor, not {dtype}")
    if a.shape.rank < 1 or a.shape.dims[-1] != k:
        raise node.error(f"A {list(a.shape.dims)} does not end in K={k}")
    blocks = -(-k // block_size)
    blob = block_size * bits // 8
    if packed.shape.dtype != "u8":
        raise node.error(f"packed weight {_input_named(node, 1)} must be uint8, not {packed.shape.dtype}")
    if _numel(packed) != n * blocks * blob:
        raise node.error(f"packed weight {_input_named(node, 1)} has {_numel(packed)} bytes, not "
                         f"N * ceil(K / block_size) * block_size * bits / 8 = {n * blocks * blob} "
                         f"(K={k}, N={n}, bits={bits}, block_size={block_size})")
    if _numel(scales) != n * blocks or not is_float(scales.shape.dtype):
        raise node.error(f"scales {_input_named(node, 2)} has {_numel(scales)} {scales.shape.dtype} elements, not "
                         f"N * ceil(K / block_size) = {n * blocks} floats")
    zero, zero_packed = None, False
    if node.has_input(3):
        zero = node.input(3)
        zero_packed = zero.shape.dtype == "u8"
        per_row = -(-blocks * bits // 8) if zero_packed else blocks
        if zero.shape.dtype != "u8" and zero.shape.dtype != scales.shape.dtype:
            raise node.error(f"zero points {_input_named(node, 3)} must be uint8 or of the scales' type, not "
                             f"{zero.shape.dtype}")
        if _numel(zero) != n * per_row:
            raise node.error(f"zero points {_input_named(node, 3)} has {_numel(zero)} elements, not {n * per_row} "
                             f"(N={n}, {blocks} blocks{', packed' if zero_packed else ''})")
        zero = b.reshape(zero, (n, per_row))
    compute = "f64" if dtype == "f64" else "f32"
    q = unpack(b, _packed_weight(b, node, n, k, bits, blocks * blob), bits)
    w = dequantize_blocks(b, q, b.reshape(scales, (n, blocks)), zero, zero_packed, bits, block_size, k,
                          compute)
    w = b.convert(w, dtype)
    rank = a.shape.rank
    y = b.op("dot", [a, w], lhs_batch_dims=(), lhs_contracting_dims=(rank - 1,), rhs_batch_dims=(),
             rhs_contracting_dims=(1,))
    if node.has_input(5):
        bias = node.input(5)
        if tuple(bias.shape.dims) != (n,):
            raise node.error(f"bias {_input_named(node, 5)} {list(bias.shape.dims)} is not [N={n}]")
        y = b.op("add", [y, broadcast_in_dims(b, b.convert(bias, dtype), y.shape.dims, [y.shape.rank - 1])])
    return [y]


@onnx_op("GatherBlockQuantized", since=1, domain="com.microsoft")
def import_gather_block_quantized(b: Builder, node: OnnxNode) -> list[Result]:
    data, indices, scales = node.input(0), node.input(1), node.input(2)
    bits, block_size = int(node.attr("bits", 4)), int(node.attr("block_size", 128))
    _check_block_size(node, block_size)
    if data.shape.dtype != "u8":
        raise node.unsupported(f"data {_input_named(node, 0)} of type {data.shape.dtype} (packed uint8 only)")
    if bits not in (4, 8):
        raise node.unsupported(f"bits={bits} (supported: 4, 8)")
    rank = data.shape.rank
    gather_axis = node.axis(node.attr("gather_axis", 0), rank)
    quantize_axis = node.axis(node.attr("quantize_axis", 1), rank)
    if gather_axis != 0 or quantize_axis != rank - 1 or rank < 2:
        raise node.unsupported(f"gather_axis={gather_axis}, quantize_axis={quantize_axis} on rank {rank} data "
                               "(supported: gathering rows, quantized along the last axis)")
    per_byte = 8 // bits
    length = int(data.shape.dims[-1]) * per_byte
    blocks = -(-length // block_size)
    want = tuple(data.shape.dims[:-1]) + (blocks,)
    if tuple(scales.shape.dims) != want or not is_float(scales.shape.dtype):
        raise node.error(f"scales {_input_named(node, 2)} {list(scales.shape.dims)} is not {list(want)} floats "
                         f"(data {list(data.shape.dims)} holds {length} values a row, block_size={block_size})")
    zero = None
    if node.has_input(3):
        zero = node.input(3)
        zwant = tuple(data.shape.dims[:-1]) + (-(-blocks // per_byte),)
        if zero.shape.dtype != "u8" or tuple(zero.shape.dims) != zwant:
            raise node.error(f"zero points {_input_named(node, 3)} {zero.shape} is not u8{list(zwant)} "
                             f"({blocks} blocks a row, packed {per_byte} a byte)")
    dtype = scales.shape.dtype
    rows = b.op("gather", [data, indices], axis=0)
    rscales = b.op("gather", [scales, indices], axis=0)
    rzero = b.op("gather", [zero, indices], axis=0) if zero is not None else None
    q = unpack_by_gather(b, rows, bits)
    compute = "f64" if dtype == "f64" else "f32"
    y = dequantize_blocks(b, q, rscales, rzero, True, bits, block_size, length, compute, gathers=True)
    return [b.convert(y, dtype)]

