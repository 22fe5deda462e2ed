"""A numpy reading of the StableHLO spec's quantized element types ("Quantization computations"), written from
the spec's formulas independently of mlcc, and the text of small programs that use them. Used by
tests/frontend/stablehlo/test_quantized.py and tools/gen_stablehlo_quantized.py (the quantized programs of the
conformance set)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

STORAGE = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "i32": np.int32, "i4": ml_dtypes.int4, "u4": ml_dtypes.uint4}


class Q:
    """A quantized element type and the numpy reading of the spec's quantize and dequantize."""

    def __init__(self, storage: str, scales, zeros, dim: int | None = None, lo: int | None = None,
                 hi: int | None = None, expressed: str = "f32") -> None:
        self.storage, self.scales, self.zeros, self.dim = storage, list(scales), list(zeros), dim
        bits = int(storage[1:])
        tmin, tmax = (0, 2 ** bits - 1) if storage[0] == "u" else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)
        self.lo, self.hi, self.minmax = tmin if lo is None else lo, tmax if hi is None else hi, lo is not None
        self.expressed = expressed

    def text(self) -> str:
        st = self.storage + (f"<{self.lo}:{self.hi}>" if self.minmax else "")
        if self.dim is None:
            return f"!quant.uniform<{st}:{self.expressed}, {self.scales[0]!r}:{self.zeros[0]}>"
        params = ", ".join(f"{s!r}:{z}" for s, z in zip(self.scales, self.zeros))
        return f"!quant.uniform<{st}:{self.expressed}:{self.dim}, {{{params}}}>"

    def _spread(self, values, shape, dtype):
        v = np.asarray(values, dtype)
        if self.dim is None:
            return np.broadcast_to(v[0], shape)
        idx = [1] * len(shape)
        idx[self.dim] = -1
        return np.broadcast_to(v.reshape(idx), shape)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        diff = q.astype(np.int64) - self._spread(self.zeros, q.shape, np.int64)
        return diff.astype(np.float32) * self._spread(self.scales, q.shape, np.float32)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float32)
        y = x / self._spread(self.scales, x.shape, np.float32) + self._spread(self.zeros, x.shape, np.float32)
        y = np.rint(np.clip(y, np.float32(self.lo), np.float32(self.hi)))   # rint: round half to even
        return y.astype(STORAGE[self.storage])

    def random(self, rng: np.random.Generator, shape) -> np.ndarray:
        return rng.integers(self.lo, self.hi + 1, size=shape).astype(STORAGE[self.storage])


def step(q: Q, fn):
    """The spec's dequantize_op_quantize of a binary float op, on storage integers of type q (one body step)."""
    return lambda a, b: q.quantize(np.asarray(fn(q.dequantize(np.asarray(a)), q.dequantize(np.asarray(b)))))


def fold(values, init, combine):
    """A region applied along values from init, left to right (the schedule of the spec's interpreter)."""
    acc = np.asarray(init)
    for v in values:
        acc = combine(acc, v)
    return acc


def qtensor(shape, q: Q) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + q.text() + ">"


def ftensor(shape, dtype: str = "f32") -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def program(params: list[str], results: list[str], body: str) -> str:
    args = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(params))
    return f"func.func @main({args}) -> ({', '.join(results)}) {{\n{body}\n}}\n"


def conv_nchw(x, w, pad):
    """NCHW x OIHW, stride 1, zero padding: direct loops."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + kh, j:j + kw], w)
    return out
