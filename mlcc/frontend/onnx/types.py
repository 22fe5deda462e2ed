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
}
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
