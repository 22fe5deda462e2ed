"""Mapping between IR dtype names and numpy dtypes (Triton's names are codegen's: mlcc/emit/codegen/triton_types.py)."""

from __future__ import annotations

import numpy as np

try:
    import ml_dtypes
    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes ships with onnx's deps
    _BF16 = None

_TO_NUMPY = {
    "pred": np.dtype(np.bool_), "s8": np.dtype(np.int8), "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32), "s64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}
if _BF16 is not None:
    _TO_NUMPY["bf16"] = _BF16
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}


def numpy_dtype(dtype: str) -> np.dtype:
    return _TO_NUMPY[dtype]


def dtype_of_numpy(dt: np.dtype) -> str:
    dt = np.dtype(dt)
    if dt not in _FROM_NUMPY:
        raise TypeError(f"unsupported numpy dtype {dt}")
    return _FROM_NUMPY[dt]
