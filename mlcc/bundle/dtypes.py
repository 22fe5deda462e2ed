"""Element types in a bundle: each tensor's ``numpy_dtype`` is a numpy dtype name (``float32``, ``bfloat16``,
``bool``, ...); the runtime views bytes as the matching numpy or torch dtype.

The quantized storage types have ml_dtypes' names (``float8_e4m3fn``, ``float8_e4m3fnuz``, ``float8_e5m2``,
``float8_e5m2fnuz``, ``float8_e8m0fnu``, ``float4_e2m1fn``, ``int4``, ``uint4``, ``int2``, ``uint2``) and its
in-memory form: one element per byte, the value's bit pattern in the low bits and the high bits zero (the 4- and
2-bit types are not packed in a bundle's buffers, inputs or outputs). A 4- or 2-bit integer weight is stored
packed, but as a ``uint8`` tensor of ONNX's packed bytes (README "The bundle" gives the order), which the kernels
unpack; no tensor of one of these names is packed. The runtime moves them as torch.uint8."""

from __future__ import annotations

from typing import Any

import numpy as np

STORAGE_NAMES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                 "float4_e2m1fn", "int4", "uint4", "int2", "uint2")
NUMPY_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "bfloat16", "float32", "float64") + STORAGE_NAMES


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a bundle dtype name (bfloat16 and the storage types from ml_dtypes)."""
    if name == "bfloat16" or name in STORAGE_NAMES:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def as_dtype(array: Any, name: str) -> np.ndarray:
    """``array`` as the bundle dtype ``name`` when it holds that dtype's bytes without its type: numpy writes an
    ml_dtypes array (bfloat16, float8, int4...) to an .npz as raw records (``|V2``, ``|V1``), and np.load gives
    them back so. Other arrays are returned as they are (their dtype is checked by whoever uses them)."""
    array = np.asarray(array)
    want = numpy_dtype(name)
    if array.dtype.kind == "V" and array.dtype.names is None and array.dtype != want \
            and array.dtype.itemsize == want.itemsize:
        return array.view(want)
    return array


def torch_dtype(name: str) -> Any:
    """The torch dtype of a bundle dtype name (torch.uint8 for a storage type: kernels hold its bits)."""
    import torch
    if name in STORAGE_NAMES:
        return torch.uint8
    return {"bool": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
            "int64": torch.int64, "uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32,
            "uint64": torch.uint64, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float32": torch.float32, "float64": torch.float64}[name]
