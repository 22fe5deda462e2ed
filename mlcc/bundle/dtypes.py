"""Element types in a bundle: each tensor's ``numpy_dtype`` is a numpy dtype name (``float32``, ``bfloat16``,
``bool``, ...); the runtime views bytes as the matching numpy or torch dtype.

The quantized storage types have ml_dtypes' names (``float8_e4m3fn``, ``float8_e4m3fnuz``, ``float8_e5m2``,
``float8_e5m2fnuz``, ``float8_e8m0fnu``, ``float4_e2m1fn``, ``int4``, ``uint4``, ``int2``, ``uint2``) and its
in-memory form: one element per byte, the value's bit pattern in the low bits and the high bits zero, except an
input or output the manifest marks ``"packed": true`` (int4, uint4, int2, uint2): its buffer holds the values
packed in ONNX's order (``pack``; README "The bundle"), and ``Executable.run`` packs and unpacks them at the
boundary. A 4- or 2-bit integer weight is stored packed too, as a ``uint8`` tensor of ONNX's packed bytes, which
the kernels unpack. The runtime moves these types as torch.uint8."""

from __future__ import annotations

from typing import Any

import numpy as np

STORAGE_NAMES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                 "float4_e2m1fn", "int4", "uint4", "int2", "uint2")
NUMPY_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "bfloat16", "float32", "float64") + STORAGE_NAMES


PACKED_BITS = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}  # the types a bundle's I/O may hold packed


def packed_bytes(n: int, name: str) -> int:
    """The bytes of n values of ``name`` packed: ceil(n * bits / 8)."""
    return -(-n * PACKED_BITS[name] // 8)


def pack(array: np.ndarray, name: str) -> np.ndarray:
    """A 4- or 2-bit array (ml_dtypes int4, uint4, int2, uint2) as the uint8 bytes of an input marked
    ``packed``: its elements in row-major order, ``8 // bits`` a byte, element 0 in the low bits (ONNX's
    order), the last byte padded with zero bits."""
    bits = PACKED_BITS[name]
    per_byte = 8 // bits
    q = np.ascontiguousarray(array, dtype=numpy_dtype(name)).reshape(-1).view(np.uint8) & ((1 << bits) - 1)
    q = np.concatenate([q, np.zeros(-q.size % per_byte, np.uint8)]).reshape(-1, per_byte)
    return np.bitwise_or.reduce(q << (np.arange(per_byte, dtype=np.uint8) * bits), axis=1).astype(np.uint8)


def unpack(data: np.ndarray, name: str, n: int) -> np.ndarray:
    """The first n values of ``name`` that packed bytes hold (pack's inverse), one a byte as ml_dtypes
    holds them."""
    bits = PACKED_BITS[name]
    per_byte = 8 // bits
    raw = np.asarray(data).reshape(-1).view(np.uint8)
    q = (raw[:, None] >> (np.arange(per_byte, dtype=np.uint8) * bits)) & ((1 << bits) - 1)
    q = q.reshape(-1)[:n].astype(np.int16)
    if name.startswith("int"):  # the low bits as a signed value
        q = np.where(q >= 1 << (bits - 1), q - (1 << bits), q)
    return q.astype(numpy_dtype(name))


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


COMPLEX_NAMES = {"float32": "complex64", "float64": "complex128"}  # a complex input's or output's pair type


def complex_pairs(array: np.ndarray) -> np.ndarray:
    """A complex array as its real pairs (last dim 2: real, imaginary), how a bundle stores a complex input or
    output (``"complex": true``): numpy's ``x[..., None].view(np.float32)``, a view where x is contiguous."""
    array = np.asarray(array, order="C")  # (np.ascontiguousarray would make a rank-0 array rank 1)
    return array[..., None].view(array.real.dtype)


def from_complex_pairs(pairs: np.ndarray) -> np.ndarray:
    """complex_pairs' inverse: real pairs (last dim 2) as the complex array, a view where they are contiguous."""
    pairs = np.asarray(pairs, order="C")
    return pairs.view(np.dtype(COMPLEX_NAMES[pairs.dtype.name])).reshape(pairs.shape[:-1])


def complex_input(rng: np.random.Generator, shape: list[int], part: str) -> np.ndarray:
    """Random complex values for a complex input whose parts are ``part`` (float32/float64): N(0,1) each part."""
    pairs = rng.standard_normal(list(shape) + [2]).astype(part)
    return from_complex_pairs(pairs)
