"""Decoding ``dense<...>`` literals into numpy arrays.

Three spellings (a complex element is ``(real, imaginary)``; its hex bytes are the two parts in turn): a splat (``dense<1.0>``: every element), nested lists
(``dense<[[1, 2], [3, 4]]>``) and a hex string (``dense<"0x0000803F...">``: the
little-endian bytes of every element, one byte per i1, or of one element for a
splat). A float written as a hex integer (``dense<0xFF800000>``) is its bit pattern.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlcc.frontend.stablehlo.syntax import TensorType
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import MAX_VALUE_BYTES

_FLOAT_BITS = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}


class DenseError(ValueError):
    pass


@dataclass(frozen=True)
class Element:
    kind: str  # int float hex bool
    text: str


@dataclass(frozen=True)
class Literal:
    kind: str  # splat list hex
    data: Any  # Element, nested list of Elements, or the hex string


def float_from_bits(bits: int, element: str) -> float:
    dtype = numpy_dtype(element) if element in _FLOAT_BITS else np.dtype(np.float64)
    return float(np.array(bits, dtype=_FLOAT_BITS.get(element, np.uint64)).view(dtype))


def to_array(literal: Literal, ttype: TensorType) -> np.ndarray:
    """The array a literal denotes at type ttype (raises DenseError when they disagree)."""
    if ttype.complex_part is not None:
        return _complex_array(literal, ttype)
    if ttype.dtype is None:
        raise DenseError(f"element type {ttype.element} is not supported")
    if any(d is None for d in ttype.dims):
        raise DenseError(f"a constant needs a static shape, not {ttype}")
    dtype = numpy_dtype(ttype.dtype)
    dims = tuple(int(d) for d in ttype.dims)  # type: ignore[arg-type]
    count = math.prod(dims)
    if count * dtype.itemsize > MAX_VALUE_BYTES:
        raise DenseError(f"a constant of type {ttype} needs {count * dtype.itemsize} bytes, more than 2**48 "
                         f"(256 TiB, more than any device addresses)")
    if literal.kind == "hex":
        return _from_hex(literal.data, ttype.dtype, dtype, dims, count)
    if literal.kind == "splat":
        return np.full(dims, _scalars([literal.data], ttype.dtype, dtype)[0], dtype=dtype)
    shape, flat = _nested(literal.data)
    if count == 0 and not flat:
        return np.zeros(dims, dtype=dtype)
    if len(flat) != count or (len(shape) == len(dims) and shape != dims):
        raise DenseError(f"dense literal of shape {list(shape)} does not match {ttype}")
    return _scalars(flat, ttype.dtype, dtype).reshape(dims)


def _complex_array(literal: Literal, ttype: TensorType) -> np.ndarray:
    """complex<f32> -> complex64, complex<f64> -> complex128: the real and imaginary parts decoded as the part
    type (a hex literal holds the parts' bytes in turn, real first)."""
    part = TensorType(ttype.complex_part, ttype.dims)  # type: ignore[arg-type]
    dims = tuple(int(d) for d in ttype.dims if d is not None)
    if literal.kind == "hex":
        pairs = to_array(Literal("hex", literal.data), TensorType(part.element, dims + (2,))) \
            if _hex_bytes(literal.data) != 2 * numpy_dtype(part.element).itemsize \
            else np.broadcast_to(to_array(literal, TensorType(part.element, (2,))), dims + (2,))
        return (pairs[..., 0] + 1j * pairs[..., 1].astype(np.complex128)).astype(_COMPLEX[part.element])
    real = to_array(_part_literal(literal, 0), part)
    imag = to_array(_part_literal(literal, 1), part)
    return (real.astype(np.complex128) + 1j * imag.astype(np.complex128)).astype(_COMPLEX[part.element])


_COMPLEX = {"f32": np.complex64, "f64": np.complex128}


def _hex_bytes(text: str) -> int:
    return (len(text) - 2) // 2 if text.startswith("0x") else -1


def _part_literal(literal: Literal, index: int) -> Literal:
    def part(e: Any) -> Any:
        if isinstance(e, list):
            return [part(x) for x in e]
        if e.kind != "complex":  # a real number for a complex element: imaginary part 0
            return e if index == 0 else Element("int", "0")
        texts = e.text[1:-1].split(",")
        if len(texts) != 2:
            raise DenseError(f"malformed complex element {e.text}")
        text = texts[index].strip()
        kind = "hex" if text.startswith("0x") else ("float" if any(c in text for c in ".eEn") else "int")
        return Element(kind, text)
    return Literal(literal.kind, part(literal.data))


def _from_hex(text: str, ir_dtype: str, dtype: np.dtype, dims: tuple[int, ...], count: int) -> np.ndarray:
    if not text.startswith("0x"):
        raise DenseError("a hex dense literal must start with 0x")
    try:
        raw = bytes.fromhex(text[2:])
    except ValueError:
        raise DenseError("malformed hex dense literal") from None
    if ir_dtype == "pred":
        flat = np.frombuffer(raw, dtype=np.uint8) != 0
    else:
        size = dtype.itemsize
        if len(raw) % size:
            raise DenseError(f"hex dense literal of {len(raw)} bytes is not a whole number of {ir_dtype}")
        flat = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype)
    if flat.size == count:
        return flat.reshape(dims).copy()
    if flat.size == 1:
        return np.full(dims, flat[0], dtype=dtype)
    raise DenseError(f"hex dense literal holds {flat.size} elements, the type needs {count}")


def _nested(items: list[Any]) -> tuple[tuple[int, ...], list[Element]]:
    if not items:
        return (0,), []
    if isinstance(items[0], list):
        subs = [_nested(x) if isinstance(x, list) else None for x in items]
        if any(s is None for s in subs) or len({s[0] for s in subs}) != 1:  # type: ignore[index]
            raise DenseError("dense literal has ragged nested lists")
        inner = subs[0][0]  # type: ignore[index]
        return (len(items),) + inner, [e for s in subs for e in s[1]]  # type: ignore[index]
    if any(isinstance(x, list) for x in items):
        raise DenseError("dense literal has ragged nested lists")
    return (len(items),), list(items)


def _scalars(elements: list[Element], ir_dtype: str, dtype: np.dtype) -> np.ndarray:
    if any(e.kind == "complex" for e in elements):
        raise DenseError(f"complex literal for the real type {ir_dtype}")
    if ir_dtype in _FLOAT_BITS:
        if all(e.kind != "hex" for e in elements):
            return np.array([float(e.text) if e.kind != "bool" else float(e.text == "true")
                             for e in elements], dtype=np.float64).astype(dtype)
        out = np.empty(len(elements), dtype=dtype)
        for i, e in enumerate(elements):
            out[i] = float_from_bits(int(e.text, 16), ir_dtype) if e.kind == "hex" else float(e.text)
        return out
    values: list[int] = []
    bits = dtype.itemsize * 8
    for e in elements:
        if e.kind == "bool":
            values.append(int(e.text == "true"))
        elif e.kind == "float":
            raise DenseError(f"float literal {e.text} for an integer type")
        else:
            v = int(e.text, 0)
            if e.kind == "hex" and dtype.kind == "i" and v >= 1 << (bits - 1):
                v -= 1 << bits
            values.append(v)
    if ir_dtype == "pred":
        return np.array(values, dtype=np.int64) != 0
    info = np.iinfo(dtype)
    for v in values:
        if not info.min <= v <= info.max:
            raise DenseError(f"value {v} does not fit in {ir_dtype}")
    return np.array(values, dtype=dtype)
