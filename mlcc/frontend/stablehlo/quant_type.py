"""Reading ``!quant.uniform<...>``, the quantized element type of StableHLO's spec ("Quantized element types"):

    !quant.uniform<i8:f32, 0.1:-3>                              per tensor: one scale and zero point
    !quant.uniform<i8:f32, 0.1>                                 the zero point is 0 when left out
    !quant.uniform<i8<-127:127>:f32:1, {0.1:-3, 0.2:4}>         storage min:max, quantization dim 1, per axis

The storage type is an integer type in the quant dialect's spelling (``i8`` signed, ``u8`` unsigned; 2 to 32
bits) and the expressed type a float type. The spec's constraints on the values are checked here: every scale
positive and finite (C6, C7), storage_min <= zero point <= storage_max (C8), min_value(storage) <= storage_min <
storage_max <= max_value(storage) (C4), one scale per tensor without a quantization dim (C11); a violation is
invalid input naming the value. A storage or expressed type the IR lacks is unsupported.
"""

from __future__ import annotations

import math
import re

from mlcc.frontend.stablehlo.syntax import EXPRESSED_TYPES, STORAGE_TYPES, QuantType

_HEAD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:<\s*([-+]?\d+)\s*:\s*([-+]?\d+)\s*>)?\s*:\s*"
                   r"([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*([-+]?\d+)\s*)?,\s*(.*?)\s*$", re.S)
_PARAM = re.compile(r"\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan|0x[0-9A-Fa-f]+))\s*(?::\s*([-+]?\d+))?\s*$")


class QuantTypeError(ValueError):
    """A malformed or invalid quantized type; ``unsupported`` when it is valid but mlcc lacks its types."""

    def __init__(self, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


def storage_range(storage: str) -> tuple[int, int]:
    """min_value and max_value of a storage type (i8: -128..127, u4: 0..15)."""
    bits = int(storage[1:])
    if storage[0] == "u":
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _scale(text: str) -> float:
    if text.lower().startswith("0x"):
        raise QuantTypeError(f"scale {text}: a scale is written as a decimal number")
    return float(text)


def parse_quant_body(body: str) -> QuantType:
    """The text between the angle brackets of ``!quant.uniform<...>``."""
    text = f"!quant.uniform<{body}>"
    m = _HEAD.fullmatch(body)
    if m is None:
        raise QuantTypeError(f"cannot read the quantized type {text}", unsupported=True)
    storage, lo, hi, expressed, dim, params = m.groups()
    if storage not in STORAGE_TYPES:
        raise QuantTypeError(f"storage type {storage} of {text} is not supported (i2/i4/i8/i16/i32 and u2..u32)",
                             unsupported=True)
    if expressed not in EXPRESSED_TYPES:
        raise QuantTypeError(f"expressed type {expressed} of {text} is not supported (f16, bf16, f32, f64)",
                             unsupported=True)
    tmin, tmax = storage_range(storage)
    smin = tmin if lo is None else int(lo)
    smax = tmax if hi is None else int(hi)
    for what, v in (("storage_min", smin), ("storage_max", smax)):
        if not tmin <= v <= tmax:
            raise QuantTypeError(f"{what} {v} of {text} is outside {storage}'s range {tmin}..{tmax}")
    if smin >= smax:
        raise QuantTypeError(f"storage_min {smin} of {text} is not below storage_max {smax}")
    if params.startswith("{"):
        if not params.endswith("}"):
            raise QuantTypeError(f"cannot read the quantization parameters of {text}")
        items = [p for p in params[1:-1].split(",")]
    else:
        items = [params]
    scales: list[float] = []
    zeros: list[int] = []
    for item in items:
        pm = _PARAM.fullmatch(item)
        if pm is None:
            raise QuantTypeError(f"cannot read the quantization parameter '{item.strip()}' of {text}")
        scale = _scale(pm.group(1))
        zero = int(pm.group(2)) if pm.group(2) is not None else 0
        if not math.isfinite(scale) or scale <= 0:
            raise QuantTypeError(f"scale {pm.group(1)} of {text} is not a positive finite number")
        if not smin <= zero <= smax:
            raise QuantTypeError(f"zero point {zero} of {text} is outside the storage range {smin}..{smax}")
        scales.append(scale)
        zeros.append(zero)
    qdim = None if dim is None else int(dim)
    if qdim is None and len(scales) != 1:
        raise QuantTypeError(f"{text} has {len(scales)} scales and no quantization dimension")
    if qdim is not None and qdim < 0:
        raise QuantTypeError(f"quantization dimension {qdim} of {text} is negative")
    return QuantType(storage, smin, smax, expressed, qdim, tuple(scales), tuple(zeros), text)


def check_tensor_dims(q: QuantType, dims: tuple) -> None:
    """A per-axis type's dimension exists and has one scale per index (the spec's C12, C13)."""
    if q.dim is None:
        return
    if q.dim >= len(dims):
        raise QuantTypeError(f"quantization dimension {q.dim} of {q.text} is not a dim of a rank-{len(dims)} tensor")
    if dims[q.dim] is not None and dims[q.dim] != len(q.scales):
        raise QuantTypeError(f"{q.text} has {len(q.scales)} scales for dim {q.dim} of size {dims[q.dim]}")
