"""Blocked low-bit weights in the IR: unpacking packed u8 values and dequantizing them by blocks.

Shared by the import of MatMulNBits / GatherBlockQuantized (mlcc/frontend/onnx/ops/nbits.py) and by the
weight quantization pass (mlcc/hlo/passes/quantize_weights.py), so a model quantized by mlcc has the IR of
one quantized by onnxruntime; and by the import of any 4- or 2-bit integer initializer (packed_constant: an
int4 blocked DequantizeLinear weight, mlcc/frontend/onnx/registry.py), which stays packed the same way:

    unpack:  q[..., i] = (packed[..., i // per_byte] >> bits * (i % per_byte)) & (2**bits - 1)
             a broadcast of the bytes to [..., bytes, per_byte], shifted by a broadcast [0, bits, ...] and
             masked, reshaped to [..., bytes * per_byte]
    dequant: w = (convert(q) - zero_point[block]) * scale[block]

``b`` is anything with the Builder's op / constant / splat / reshape / convert (mlcc.hlo.builder.Builder,
or a pass's adapter of its Rewriter).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mlcc.hlo.builder import INLINE_CONSTANT_ELEMENTS
from mlcc.hlo.dtypes import pack_bits
from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.symbolic import Sym, as_sym


def broadcast_in_dims(b: Any, x: Instruction, dims: Sequence[Any], mapping: Sequence[int]) -> Instruction:
    """Broadcast x to ``dims``, x's dim i landing on result dim ``mapping[i]``."""
    if tuple(dims) == tuple(x.shape.dims) and list(mapping) == list(range(len(dims))):
        return x
    return b.op("broadcast", [x], Shape(x.shape.dtype, tuple(dims)), dimensions=tuple(mapping))


def unpack(b: Any, packed: Instruction, bits: int) -> Instruction:
    """u8 [..., P] holding 8 // bits values a byte, the low bits first -> u8 [..., P * (8 // bits)]."""
    if bits == 8:
        return packed
    per_byte = 8 // bits
    dims = tuple(packed.shape.dims)
    wide = dims + (per_byte,)
    rank = len(dims)
    x = broadcast_in_dims(b, packed, wide, list(range(rank)))
    shifts = b.constant(np.arange(per_byte, dtype=np.uint8) * bits, "u8", ref_hint="nibble_shifts")
    shifts = broadcast_in_dims(b, shifts, wide, [rank])
    mask = b.splat((1 << bits) - 1, "u8", wide)
    q = b.op("and", [b.op("shift-right-logical", [x, shifts]), mask])
    return b.reshape(q, dims[:-1] + (dims[-1] * per_byte,))


PACKED_DTYPE_BITS = {"s4": 4, "u4": 4, "s2": 2, "u2": 2}  # the integer types ONNX packs (f4e2m1fn: one a byte)


def packs(values: np.ndarray) -> bool:
    """Whether a constant of a 4- or 2-bit integer type is stored packed (packed_constant): one that would be
    a reference into weights.bin, not one inline in the IR (a few elements) or a splat."""
    flat = np.asarray(values).reshape(-1)
    return flat.size > INLINE_CONSTANT_ELEMENTS and bool((flat != flat[0]).any())


def pack_values(values: np.ndarray, bits: int) -> np.ndarray:
    """A 4- or 2-bit integer array (ml_dtypes int4, uint4, int2, uint2) packed as ONNX packs it: its flat
    elements ``8 // bits`` a byte, element 0 in the low bits, the last byte padded with zeros. Returned as
    u8 [..., last // per_byte] when the last dim is a multiple of the values a byte (a row packs on its own),
    else flat."""
    per_byte = 8 // bits
    arr = np.asarray(values)
    packed = pack_bits(arr, bits)
    if arr.ndim and arr.shape[-1] % per_byte == 0:
        return packed.reshape(arr.shape[:-1] + (arr.shape[-1] // per_byte,))
    return packed


def packed_constant(b: Any, values: np.ndarray, dtype: str, bits: int, ref_hint: str) -> Instruction:
    """A constant of a 4- or 2-bit integer type (``dtype``: s4, u4, s2, u2) held packed: a u8 constant of
    ``pack_values``' bytes (what weights.bin stores), unpacked to the values' bit patterns and converted
    to ``dtype`` (a wrapping convert, so 15 is -1 in s4). The unpack is loop ops on a constant, which the
    consumer's kernel computes as it loads (a dot's weight prologue, a loop fusion's producers): the values
    are never stored a byte each."""
    arr = np.asarray(values)
    return unpacked(b, b.constant(pack_values(arr, bits), "u8", ref_hint=ref_hint), dtype, tuple(arr.shape))


def unpacked(b: Any, packed: Instruction, dtype: str, dims: tuple[int, ...]) -> Instruction:
    """The ``dtype`` values of static ``dims`` that u8 ``packed`` holds in ONNX's order: [..., last /
    per_byte] (rows packed on their own) or flat, ceil(n * bits / 8) bytes."""
    q = unpack(b, packed, PACKED_DTYPE_BITS[dtype])
    if tuple(q.shape.dims) != tuple(dims):  # packed flat: the values in order, the padding dropped
        q = b.reshape(take(b, q, int(np.prod(dims, dtype=np.int64))), tuple(dims))
    return b.convert(q, dtype)


def packed_bytes(b: Any, x: Instruction) -> Instruction:
    """x (s4, u4, s2 or u2, static dims) as the u8 [ceil(n * bits / 8)] bytes ONNX packs it to: byte i is
    the or of value ``per_byte * i + j`` shifted up by ``bits * j`` (a strided slice of the flat bit
    patterns each), the last byte padded with zero bits. Each byte is computed whole, from its own values,
    so a kernel writing these bytes never shares one with another program."""
    bits = PACKED_DTYPE_BITS[x.shape.dtype]
    per_byte = 8 // bits
    n = int(np.prod(x.shape.dims, dtype=np.int64))
    count = -(-n // per_byte)
    dims = tuple(x.shape.dims)
    flat = b.reshape(b.op("and", [b.convert(x, "u8"), b.splat((1 << bits) - 1, "u8", dims)]), (n,))
    if count * per_byte != n:
        flat = b.op("concatenate", [flat, b.splat(0, "u8", (count * per_byte - n,))],
                    Shape("u8", (count * per_byte,)), dimension=0)
    out = None
    for j in range(per_byte):
        part = b.op("slice", [flat], Shape("u8", (count,)), start_indices=(j,),
                    limit_indices=(j + per_byte * (count - 1) + 1,), strides=(per_byte,))
        if j:
            part = b.op("shift-left", [part, b.splat(bits * j, "u8", (count,))])
        out = part if out is None else b.op("or", [out, part])
    return out


def symbolic_packed_count(dims: Sequence[Any], bits: int) -> str | None:
    """The bytes of a 4/2-bit value of symbolic ``dims`` packed, as a dim: n * bits / 8 when that is a
    polynomial (n a multiple of the values a byte at every size), else None (ceil is not a polynomial)."""
    n = Sym.const(1)
    for d in dims:
        n = n * as_sym(d)
    count = (n * bits).exact_div(8)
    return None if count is None else str(count)


def unpacked_symbolic(b: Any, packed: Instruction, dtype: str, dims: Sequence[Any]) -> Instruction:
    """unpacked for symbolic dims whose count is whole bytes (symbolic_packed_count)."""
    per_byte = 8 // PACKED_DTYPE_BITS[dtype]
    count = packed.shape.dims[0]
    wide = (count, per_byte)
    x = broadcast_in_dims(b, packed, wide, [0])
    shifts = b.constant(np.arange(per_byte, dtype=np.uint8) * (8 // per_byte), "u8", ref_hint="nibble_shifts")
    shifts = broadcast_in_dims(b, shifts, wide, [1])
    mask = b.splat((1 << (8 // per_byte)) - 1, "u8", wide)
    q = b.op("and", [b.op("shift-right-logical", [x, shifts]), mask])
    return b.convert(b.reshape(q, tuple(dims)), dtype)


def packed_bytes_symbolic(b: Any, x: Instruction) -> Instruction:
    """packed_bytes for symbolic dims whose count is whole bytes: the flat bit patterns as [bytes, per_byte],
    column j shifted up by bits * j and or-ed (each byte computed whole, from its own values)."""
    bits = PACKED_DTYPE_BITS[x.shape.dtype]
    per_byte = 8 // bits
    count = symbolic_packed_count(x.shape.dims, bits)
    dims = tuple(x.shape.dims)
    rows = b.reshape(b.op("and", [b.convert(x, "u8"), b.splat((1 << bits) - 1, "u8", dims)]), (count, per_byte))
    out = None
    for j in range(per_byte):
        part = b.reshape(b.op("slice", [rows], Shape("u8", (count, 1)), start_indices=(0, j),
                              limit_indices=(count, j + 1), strides=(1, 1)), (count,))
        if j:
            part = b.op("shift-left", [part, b.splat(bits * j, "u8", (count,))])
        out = part if out is None else b.op("or", [out, part])
    return out


def packed_source(root: Instruction) -> Instruction | None:
    """The s4/u4/s2/u2 value x whose bytes ``root`` is when root is the chain packed_bytes(b, x) built (as a
    kernel's fused root: the kernel then computes x at its own coordinates and stores whole bytes), else None."""
    parts = []
    while root.opcode == "or":
        parts.append(root.operands[1])
        root = root.operands[0]
    parts.append(root)
    parts.reverse()
    if len(parts) not in (2, 4):
        return None
    bits = 8 // len(parts)
    flat = None
    for j, part in enumerate(parts):
        if j:
            if part.opcode != "shift-left" or part.operands[1].attrs.get("splat") != bits * j:
                return None
            part = part.operands[0]
        if part.opcode != "slice" or tuple(part.attrs.get("strides", ())) != (len(parts),) \
                or tuple(part.attrs.get("start_indices", ())) != (j,) or (flat is not None and part.operands[0] is not flat):
            return None
        flat = part.operands[0]
    if flat.opcode == "concatenate":
        pad = flat.operands[1]
        if len(flat.operands) != 2 or pad.opcode != "constant" or pad.attrs.get("splat") != 0:
            return None
        flat = flat.operands[0]
    if flat.opcode in ("reshape", "bitcast"):
        flat = flat.operands[0]
    if flat.opcode != "and" or flat.operands[1].attrs.get("splat") != (1 << bits) - 1 \
            or flat.operands[0].opcode != "convert":
        return None
    x = flat.operands[0].operands[0]
    return x if PACKED_DTYPE_BITS.get(x.shape.dtype) == bits else None


def unpack_by_gather(b: Any, packed: Instruction, bits: int) -> Instruction:
    """unpack's values computed at their own coordinates: byte i // per_byte of the row, gathered along the
    last axis with constant indices, shifted by bits * (i % per_byte). No reshape, so the values stay at
    the result's dims through later passes (a reshape after an elementwise chain is sunk below it, and a
    residual add of a dequantized embedding row would then run at the bytes' [..., P, per_byte] dims, where
    the next matmul's epilogue cannot take it)."""
    if bits == 8:
        return packed
    per_byte = 8 // bits
    rank = packed.shape.rank
    length = int(packed.shape.dims[-1]) * per_byte
    i = np.arange(length)
    idx = b.constant((i // per_byte).astype(np.int32), "s32", ref_hint="nibble_bytes")
    x = b.op("gather", [packed, idx], axis=rank - 1)
    shifts = broadcast_in_dims(b, b.constant((i % per_byte * bits).astype(np.uint8), "u8", ref_hint="nibble_shifts"),
                               x.shape.dims, [rank - 1])
    mask = b.splat((1 << bits) - 1, "u8", x.shape.dims)
    return b.op("and", [b.op("shift-right-logical", [x, shifts]), mask])


def _blocks_to_elements(b: Any, v: Instruction, rows: tuple, blocks: int, block_size: int) -> Instruction:
    """[*rows, blocks] -> [*rows, blocks * block_size]: each block's value repeated over its elements."""
    r = len(rows)
    wide = tuple(rows) + (blocks, block_size)
    return b.reshape(broadcast_in_dims(b, v, wide, list(range(r + 1))), tuple(rows) + (blocks * block_size,))


def take(b: Any, x: Instruction, length: int) -> Instruction:
    """x's first ``length`` elements along its last axis."""
    if int(x.shape.dims[-1]) == length:
        return x
    rank = x.shape.rank
    return b.op("slice", [x], start_indices=(0,) * rank, limit_indices=tuple(x.shape.dims[:-1]) + (length,),
                strides=(1,) * rank)


def _blocks_by_gather(b: Any, v: Instruction, block_size: int, length: int) -> Instruction:
    """[*rows, blocks] -> [*rows, length]: element i takes its block's value, gathered (no reshape)."""
    idx = b.constant((np.arange(length) // block_size).astype(np.int32), "s32", ref_hint="block_of")
    return b.op("gather", [v, idx], axis=v.shape.rank - 1)


def dequantize_blocks(b: Any, q: Instruction, scales: Instruction, zero: Instruction | None,
                      zero_packed: bool, bits: int, block_size: int, length: int, dtype: str,
                      gathers: bool = False) -> Instruction:
    """Blocked dequantization along the last axis: q u8 [*rows, >= length] (unpacked), scales and zero
    points [*rows, blocks] (zero points packed along the last axis when zero_packed); the result has
    ``length`` elements on the last axis (the padding of the last block dropped) and type dtype. With
    ``gathers`` each value's block is gathered rather than broadcast and reshaped (unpack_by_gather says
    why); without, the chain is only elementwise ops and views a dot computes in its weight loads."""
    rows = tuple(q.shape.dims[:-1])
    blocks = int(scales.shape.dims[-1])

    def per_element(v: Instruction) -> Instruction:
        if gathers:
            return _blocks_by_gather(b, v, block_size, length)
        return take(b, _blocks_to_elements(b, v, rows, blocks, block_size), length)

    y = b.convert(take(b, q, length), dtype)
    if zero is None:
        zp = b.splat(float(1 << (bits - 1)), dtype, rows + (blocks,))
    else:
        if zero_packed:
            zero = take(b, (unpack_by_gather if gathers else unpack)(b, zero, bits), blocks)
        zp = b.convert(zero, dtype)
    y = b.op("subtract", [y, per_element(zp)])
    return b.op("multiply", [y, per_element(b.convert(scales, dtype))])
