"""Element types in a bundle: each tensor's ``numpy_dtype`` is a numpy dtype name (``float32``, ``bfloat16``,
``bool``, ...); the runtime views bytes as the matching numpy or torch dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

NUMPY_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "bfloat16", "float32", "float64")


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a bundle dtype name (bfloat16 from ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def torch_dtype(name: str) -> Any:
    """The torch dtype of a bundle dtype name."""
    import torch
    return {"bool": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
            "int64": torch.int64, "uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32,
            "uint64": torch.uint64, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float32": torch.float32, "float64": torch.float64}[name]
