"""Mapping between IR dtype names and numpy dtypes (Triton's names are codegen's: mlcc/emit/codegen/triton_types.py)."""

from __future__ import annotations

import numpy as np

import ml_dtypes  # ships with onnx's deps

_TO_NUMPY = {
    "pred": np.dtype(np.bool_), "s8": np.dtype(np.int8), "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32), "s64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}
_TO_NUMPY.update({
    "bf16": np.dtype(ml_dtypes.bfloat16), "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz), "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f8e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz), "f8e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    "f4e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn), "s4": np.dtype(ml_dtypes.int4), "u4": np.dtype(ml_dtypes.uint4),
    "s2": np.dtype(ml_dtypes.int2), "u2": np.dtype(ml_dtypes.uint2),
})
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}


def numpy_dtype(dtype: str) -> np.dtype:
    return _TO_NUMPY[dtype]


def dtype_of_numpy(dt: np.dtype) -> str:
    dt = np.dtype(dt)
    if dt not in _FROM_NUMPY:
        raise TypeError(f"unsupported numpy dtype {dt}")
    return _FROM_NUMPY[dt]


def pack_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """A 4- or 2-bit integer array (ml_dtypes int4, uint4, int2, uint2) packed as ONNX packs it: its flat
    elements ``8 // bits`` a byte, element 0 in the low bits, the last byte padded with zero bits (u8, flat)."""
    per_byte = 8 // bits
    q = (np.ascontiguousarray(values).reshape(-1).view(np.uint8) & ((1 << bits) - 1)).astype(np.uint8)
    q = np.concatenate([q, np.zeros(-q.size % per_byte, np.uint8)]).reshape(-1, per_byte)
    return np.bitwise_or.reduce(q << (np.arange(per_byte, dtype=np.uint8) * bits), axis=1).astype(np.uint8)


def unpack_bits(data: np.ndarray, dtype: str, bits: int, n: int) -> np.ndarray:
    """The first n values of IR type ``dtype`` (s4, u4, s2, u2) that bytes packed by pack_bits hold."""
    per_byte = 8 // bits
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    q = ((raw[:, None] >> (np.arange(per_byte, dtype=np.uint8) * bits)) & ((1 << bits) - 1)).reshape(-1)[:n]
    q = q.astype(np.int16)
    if dtype[0] == "s":
        q = np.where(q >= 1 << (bits - 1), q - (1 << bits), q)
    return q.astype(numpy_dtype(dtype))
