"""ONNX element types and their IR dtype names."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from mlcc.hlo.dtypes import numpy_dtype

IR_DTYPE_OF_ONNX: dict[int, str] = {
    TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f64", TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16", TensorProto.BOOL: "pred",
    TensorProto.INT8: "s8", TensorProto.INT16: "s16", TensorProto.INT32: "s32", TensorProto.INT64: "s64",
    TensorProto.UINT8: "u8", TensorProto.UINT16: "u16", TensorProto.UINT32: "u32", TensorProto.UINT64: "u64",
    TensorProto.FLOAT8E4M3FN: "f8e4m3fn", TensorProto.FLOAT8E4M3FNUZ: "f8e4m3fnuz",
    TensorProto.FLOAT8E5M2: "f8e5m2", TensorProto.FLOAT8E5M2FNUZ: "f8e5m2fnuz", TensorProto.FLOAT8E8M0: "f8e8m0fnu",
    TensorProto.FLOAT4E2M1: "f4e2m1fn", TensorProto.INT4: "s4", TensorProto.UINT4: "u4",
    TensorProto.INT2: "s2", TensorProto.UINT2: "u2",
}
# Element types ONNX packs several to a byte in raw_data (element 0 in the low bits): their bits each.
PACKED_BITS = {TensorProto.FLOAT4E2M1: 4, TensorProto.INT4: 4, TensorProto.UINT4: 4, TensorProto.INT2: 2,
               TensorProto.UINT2: 2}
# Element types a TensorProto may store one to an int32_data entry: the range an entry must be in.
INT32_DATA_RANGES = {TensorProto.INT8: (-128, 127), TensorProto.UINT8: (0, 255), TensorProto.INT16: (-32768, 32767),
                     TensorProto.UINT16: (0, 65535), TensorProto.BOOL: (0, 1)}
ONNX_OF_IR_DTYPE = {v: k for k, v in IR_DTYPE_OF_ONNX.items()}


def onnx_type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type {elem_type}"


def ir_dtype(elem_type: int) -> str | None:
    """The IR dtype of an ONNX element type, or None when mlcc has no such dtype (string, complex, fp8...)."""
    return IR_DTYPE_OF_ONNX.get(elem_type)


def as_ir_array(arr: np.ndarray, dtype: str) -> np.ndarray:
    """``arr`` with the numpy dtype that stands for the IR dtype ``dtype``."""
    want = numpy_dtype(dtype)
    arr = np.asarray(arr)
    return arr if arr.dtype == want else arr.astype(want)
