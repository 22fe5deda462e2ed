"""Reading an ONNX file whose large initializers are inline (``raw_data`` in the protobuf) without copying them.

``onnx.load`` reads the file (one copy) and parses it (a second), and the ONNX checker and shape inference
each serialize the proto again: a 650 MB GPT-2 peaked at five times its size. Here the file is
memory-mapped and walked at the protobuf wire level down to the main graph's initializers; an initializer
whose ``raw_data`` is at least ``min_bytes`` long is parsed without it, and its data comes back as a
read-only array over the file's map. Everything else (nodes, small tensors, attributes) is parsed by
protobuf as usual, from a copy of the file that leaves the large payloads out.

Only the fields on the path to the payloads are read by hand: ModelProto.graph (7), GraphProto.initializer
(5), TensorProto.raw_data (9) and TensorProto.data_location (14). Anything the walk does not understand
(a group, a truncated field) gives None, and the caller falls back to ``onnx.load``, whose errors then
describe the file.
"""

from __future__ import annotations

import mmap
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto

MODEL_GRAPH, GRAPH_INITIALIZER, TENSOR_RAW_DATA, TENSOR_DATA_LOCATION = 7, 5, 9, 14
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class _Malformed(Exception):
    pass


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _fields(buf, start: int, end: int):
    """(field number, wire type, start of the field, start of its payload, end) for each field in [start, end)."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            _, pos = _varint(buf, pos, end)
            payload = pos
        elif wire == FIXED64:
            payload, pos = pos, pos + 8
        elif wire == FIXED32:
            payload, pos = pos, pos + 4
        elif wire == LENGTH:
            length, payload = _varint(buf, pos, end)
            pos = payload + length
        else:  # groups (deprecated) and anything unknown
            raise _Malformed
        if pos > end:
            raise _Malformed
        yield number, wire, field_start, payload, pos


def _length_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | LENGTH) + _encode_varint(len(payload)) + payload


def _strip_tensor(buf, start: int, end: int, min_bytes: int) -> tuple[bytes, int, int] | None:
    """The tensor's fields without raw_data, and the raw_data's (offset, length) in ``buf``; None when it
    keeps its data (small, external, or no raw_data)."""
    raw: tuple[int, int] | None = None
    kept: list[tuple[int, int]] = []
    for number, wire, field_start, payload, field_end in _fields(buf, start, end):
        if number == TENSOR_DATA_LOCATION and wire == VARINT:
            location, _ = _varint(buf, payload, field_end)
            if location == TensorProto.EXTERNAL:
                return None
        if number == TENSOR_RAW_DATA and wire == LENGTH:
            raw = (payload, field_end - payload)  # the last raw_data wins, as in protobuf
            continue
        kept.append((field_start, field_end))
    if raw is None or raw[1] < min_bytes:
        return None
    return b"".join(bytes(buf[a:b]) for a, b in kept), raw[0], raw[1]


def load_without_payloads(view: mmap.mmap, min_bytes: int,
                          mappable: Callable[[TensorProto], np.dtype | None]
                          ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """The model in ``view`` with main-graph initializers of at least ``min_bytes`` of ``raw_data`` parsed
    without it, and those initializers as arrays over ``view`` (by name; a dtype ``mappable`` rejects keeps
    its data in the proto). None when the walk finds something it does not understand."""
    try:
        return _load(view, min_bytes, mappable)
    except _Malformed:
        return None


def _load(view, min_bytes: int, mappable) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    end = len(view)
    model_parts: list[bytes] = []
    mapped: dict[str, np.ndarray] = {}
    for number, wire, field_start, payload, field_end in _fields(view, 0, end):
        if number != MODEL_GRAPH or wire != LENGTH:
            model_parts.append(bytes(view[field_start:field_end]))
            continue
        graph_parts: list[bytes] = []
        for g_number, g_wire, g_start, g_payload, g_end in _fields(view, payload, field_end):
            stripped = None
            if g_number == GRAPH_INITIALIZER and g_wire == LENGTH:
                stripped = _strip_tensor(view, g_payload, g_end, min_bytes)
            if stripped is not None:
                fields, offset, length = stripped
                tensor = TensorProto()
                tensor.ParseFromString(fields)
                dtype = mappable(tensor)
                count = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
                if dtype is not None and count * dtype.itemsize == length and tensor.name not in mapped:
                    mapped[tensor.name] = np.frombuffer(view, dtype=dtype, count=count,
                                                        offset=offset).reshape(tuple(tensor.dims))
                    graph_parts.append(_length_field(GRAPH_INITIALIZER, fields))
                    continue
            graph_parts.append(bytes(view[g_start:g_end]))
        model_parts.append(_length_field(MODEL_GRAPH, b"".join(graph_parts)))
    if not mapped:
        return None
    model = onnx.ModelProto()
    model.ParseFromString(b"".join(model_parts))
    return model, mapped
