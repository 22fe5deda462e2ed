"""bfloat16 conversions under Triton's interpreter, made to match the GPU.

A bundle's kernels run on CPU under Triton's interpreter, which stores bfloat16 as uint16 and converts it with
a general float-format routine that (as of Triton 3.x) truncates float32 -> bfloat16 instead of rounding to
nearest even, and flushes bfloat16 subnormals when widening them. On a GPU, `x.to(tl.bfloat16)` rounds to
nearest even and widening is exact, so a CPU run of a bf16 kernel drifted from the GPU's by one bf16 ulp per
rounding (3.140625 * 3.140625 gave 9.8125, not 9.875), and ceil/floor of a subnormal gave 0.

It also multiplies bfloat16 `tl.dot` operands as their uint16 bit patterns, which made the bf16 matmul
branch (`DOT_F32=0`) compute garbage on CPU.

``install()`` replaces the interpreter's two bfloat16 <-> float32 conversions with exact bit arithmetic:
widening shifts the 16 bits into the top of a float32 (exact for every value, subnormals included);
narrowing rounds to nearest, ties to even, keeps NaNs NaN (quiet) and infinities infinite; and it widens
bfloat16 dot operands to float32 (exact) before the product, accumulated in the dot's own type as on a
GPU. Every other cast is left to the interpreter. Idempotent; the interpreter is only imported when this is
called.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_installed = False


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 values, exactly."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(values: np.ndarray, round_to_nearest: bool = True) -> np.ndarray:
    """float32 values -> bfloat16 bit patterns (uint16): round to nearest, ties to even (or toward zero)."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    if round_to_nearest:
        bias = np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
        rounded = ((u.astype(np.uint64) + bias) >> np.uint64(16)).astype(np.uint16)
    else:
        rounded = (u >> np.uint32(16)).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet_nan = ((u >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return np.where(nan, quiet_nan, rounded)


def install() -> None:
    """Patch Triton's interpreter (once) so bfloat16 <-> float32 casts are the GPU's."""
    global _installed
    if _installed:
        return
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original_cast = builder.cast_impl
    original_fp_to_fp = builder.create_fp_to_fp
    TensorHandle = interpreter.TensorHandle

    def bf16_cast(src: Any, dst_type: Any, round_to_nearest: bool = True) -> Any:
        src_type, dst = src.dtype.scalar, dst_type.scalar
        if src_type == tl.bfloat16 and dst == tl.float32:
            return TensorHandle(bf16_bits_to_f32(src.data), dst)
        if src_type == tl.float32 and dst == tl.bfloat16:
            return TensorHandle(f32_to_bf16_bits(src.data, round_to_nearest), dst)
        return None

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        exact = bf16_cast(src, dst_type)
        return exact if exact is not None else original_cast(self, src, dst_type)

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        rtz = rounding_mode is not None and str(rounding_mode).upper().endswith("RTZ")
        exact = bf16_cast(src, dst_type, round_to_nearest=not rtz)
        return exact if exact is not None else original_fp_to_fp(self, src, dst_type, rounding_mode)

    original_dot = builder.create_dot

    def widened(x: Any) -> Any:
        return TensorHandle(bf16_bits_to_f32(x.data), tl.float32) if x.dtype.scalar == tl.bfloat16 else x

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        # bf16 operands are uint16 bit patterns to the interpreter: np.matmul would multiply the patterns
        return original_dot(self, widened(a), widened(b), d, input_precision, max_num_imprecise_acc)

    builder.cast_impl = cast_impl
    builder.create_fp_to_fp = create_fp_to_fp
    builder.create_dot = create_dot
    _installed = True
