"""Weight-only 4-bit quantization of float models (``mlcc compile --quantize w4[:BLOCK]``).

Every dot whose weight (operand 1) is a float constant matrix [K, N] (contracted on K; [N, K] contracted
on its dim 1 too) and has no batch dims gets the weight onnxruntime's MatMulNBitsQuantizer (RTN, symmetric,
``block_size`` 32 or 128) would give it, in the IR mlcc's MatMulNBits import builds (mlcc/hlo/blockquant.py):
packed u8 nibbles [N, ceil(K / 2)], f32 scales [N, ceil(K / block)], no zero points (8, the symmetric
default), unpacked and dequantized by elementwise ops that fusion computes in the dot's weight loads.

The rounding is onnxruntime's (MLAS MlasQuantizeBlockwise, symmetric): per block of a column of W, the
value of the largest magnitude ``v`` (the max when |max| > |min|, else the min) gives ``scale = v / -8``;
``q = clamp(roundf(w * (1 / scale) + 8), 0, 15)`` in f32 (roundf: halves away from zero); a block of
zeros has scale 0 and q = 8. The last block of a K that is not a multiple of the block size is quantized
over its K % block values only (onnxruntime pads with zeros, which changes neither v nor the stored bytes:
the padding's bytes are dropped, as the MatMulNBits import drops them).

Weights of f16/bf16 are quantized from their f32 values (scales stay f32, the dequantized weight is
converted back to the weight's type).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcc.hlo.blockquant import dequantize_blocks, unpack
from mlcc.hlo.builder import ValueOps
from mlcc.hlo.ir import Instruction, Shape, is_float
from mlcc.hlo.passes.pattern import Match, RewritePass, Rewriter, Rule, constant_array, op, var

BLOCK_SIZES = (32, 128)
SCHEMES = "int8 (with --calibration), w4, w4:32, w4:128"


def is_static_int8(text: str | None) -> bool:
    """Whether a --quantize scheme is ``int8``: static int8 QDQ, done on the ONNX model before import
    (mlcc/frontend/onnx/quantize_static.py), so no pass of this module runs for it."""
    return text is not None and text.strip().lower() == "int8"


def parse_scheme(text: str) -> int | None:
    """The block size of a --quantize scheme ``w4`` / ``w4:BLOCK``; None when the text is not one."""
    name, colon, block = text.strip().lower().partition(":")
    if name != "w4":
        return None
    if not colon:
        return 32
    return int(block) if block.isdigit() and int(block) in BLOCK_SIZES else None


def quantize_rtn_sym4(w_nk: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """W [N, K] (rows are the output features) -> (packed u8 [N, ceil(K / 2)], f32 scales [N, blocks]),
    exactly as onnxruntime's quantize_matmul_4bits with is_symmetric (the module docstring says how)."""
    n, k = w_nk.shape
    blocks = -(-k // block)
    padded = np.zeros((n, blocks * block), np.float32)
    padded[:, :k] = w_nk.astype(np.float32)
    x = padded.reshape(n, blocks, block)
    mx, mn = x.max(-1), x.min(-1)
    v = np.where(np.abs(mx) > np.abs(mn), mx, mn)
    scales = (v / np.float32(-8)).astype(np.float32)
    nonzero = scales != 0
    recip = np.where(nonzero, np.float32(1) / np.where(nonzero, scales, np.float32(1)), np.float32(0))
    y = (x * recip[..., None].astype(np.float32)).astype(np.float32) + np.float32(8)
    fl = np.floor(y)
    q = np.clip(np.where(y - fl >= 0.5, fl + 1, fl), 0, 15).astype(np.uint8).reshape(n, blocks * block)[:, :k]
    if k % 2:
        q = np.concatenate([q, np.zeros((n, 1), np.uint8)], axis=1)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(packed), scales


class _Emitter(ValueOps):
    """The Builder's methods blockquant uses, on a Rewriter (new instructions go before the matched dot)."""

    def __init__(self, rw: Rewriter) -> None:
        self.rw = rw

    def op(self, opcode: str, operands: list[Instruction], shape: Shape | None = None, **attrs: Any) -> Instruction:
        return self.rw.op(opcode, operands, shape, **attrs)

    def constant(self, data: Any, dtype: str, ref_hint: str = "c") -> Instruction:
        return self.rw.constant(data, dtype)

    def splat(self, value: float | int, dtype: str, dims: tuple = ()) -> Instruction:
        return self.rw.constant(value, dtype, tuple(dims))

    def reshape(self, x: Instruction, dims: tuple) -> Instruction:
        return self.rw.reshape(x, dims)


def _quantize_dot(block: int, rw: Rewriter, m: Match) -> Instruction | None:
    dot, weight = m.root, m["w"]
    a = dot.attrs
    dtype = weight.shape.dtype
    if weight.opcode != "constant" or weight.shape.rank != 2 or a["rhs_batch_dims"] or not is_float(dtype):
        return None
    if dtype == "f64" or tuple(a["rhs_contracting_dims"]) not in ((0,), (1,)):
        return None
    w = constant_array(weight, rw.module)
    if w is None or w.size == 0:
        return None
    w_nk = w.T if tuple(a["rhs_contracting_dims"]) == (0,) else w
    n, k = w_nk.shape
    packed, scales = quantize_rtn_sym4(np.asarray(w_nk, np.float32), block)
    b = _Emitter(rw)
    q = unpack(b, rw.constant(packed, "u8"), 4)
    deq = dequantize_blocks(b, q, rw.constant(scales, "f32"), None, False, 4, block, k, "f32")
    attrs = dict(a, rhs_contracting_dims=(1,))
    return rw.op("dot", [m["a"], b.convert(deq, dtype)], dot.shape, **attrs)


class QuantizeWeights(RewritePass):
    """--quantize w4[:BLOCK]: every dot's constant float weight matrix becomes 4-bit blocks (RTN, symmetric)."""

    def __init__(self, block: int = 32) -> None:
        if block not in BLOCK_SIZES:
            raise ValueError(f"block size {block} (supported: {', '.join(map(str, BLOCK_SIZES))})")
        self.block = block
        super().__init__("quantize-weights", [Rule("quantize-w4", op("dot", var("a"), var("w")),
                                                    lambda rw, m: _quantize_dot(block, rw, m))])
