"""Triton's names of the IR dtypes: the kernel language's, so they live in codegen, not in the IR."""

from __future__ import annotations

from mlcc.hlo.ir import STORAGE_DTYPES

# A quantized storage type (fp8, fp4, 4- and 2-bit ints) is its bit pattern in a byte, the low bits
# (mlcc/emit/codegen/narrow.py converts it).

# Argument types of a kernel signature (a pointer is "*" + this).
TRITON_TYPES = {
    "pred": "i1", "s8": "i8", "s16": "i16", "s32": "i32", "s64": "i64",
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64",
    "f16": "fp16", "bf16": "bf16", "f32": "fp32", "f64": "fp64",
    **{t: "u8" for t in STORAGE_DTYPES},
}
# triton.language dtypes, as kernel source spells them.
TL_TYPES = {
    "pred": "tl.int1", "s8": "tl.int8", "s16": "tl.int16", "s32": "tl.int32", "s64": "tl.int64",
    "u8": "tl.uint8", "u16": "tl.uint16", "u32": "tl.uint32", "u64": "tl.uint64",
    "f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32", "f64": "tl.float64",
    **{t: "tl.uint8" for t in STORAGE_DTYPES},
}

# The fp8 types as Triton's tl.dot takes them (templates/_fp8_dot.jinja: the tiles' bits reinterpreted).
TL_FP8 = {"f8e4m3fn": "tl.float8e4nv", "f8e5m2": "tl.float8e5", "f8e4m3fnuz": "tl.float8e4b8",
          "f8e5m2fnuz": "tl.float8e5b16"}



def fp8_operand_types(source: str) -> tuple[str, ...]:
    """The fp8 types an fp8 contraction kernel's source multiplies (its tiles reinterpreted as TL_FP8 types)."""
    return tuple(t for t, tl in TL_FP8.items() if f".to({tl}, bitcast=True)" in source)


def tl_type(dtype: str) -> str:
    """The triton.language dtype of an IR dtype (``tl.float32`` for f32)."""
    return TL_TYPES[dtype]


def triton_type(dtype: str) -> str:
    """The signature type of an IR dtype (``fp32`` for f32)."""
    return TRITON_TYPES[dtype]
