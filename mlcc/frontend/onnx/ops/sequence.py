"""Sequences of tensors whose length is known when compiling: a sequence is a list of values, no IR type.

SequenceConstruct, SequenceEmpty, SequenceInsert, SequenceErase, SequenceAt and SequenceLength (positions known
at import), SplitToSequence (split sizes known at import), ConcatFromSequence, and SequenceMap (its body imported
once per element, as a Loop is unrolled). A position or split that is only known at run time would make the
sequence's length or its elements depend on data: that is refused (exit 69) naming the node and the input.
A graph output that is a sequence is returned as one tensor per element, named ``NAME.0``, ``NAME.1``, ...
(importer.py); a sequence-typed graph input is refused (``mlcc.backend`` feeds one by rewriting it as tensors).
"""

from __future__ import annotations

import numpy as np
import onnx

from mlcc.frontend.onnx.ops.shape_ops import slice_axis
from mlcc.frontend.onnx.registry import OnnxNode, Result, Tensor, onnx_op, sequence
from mlcc.frontend.onnx.types import ir_dtype
from mlcc.hlo.builder import Builder

MAX_SEQUENCE_LENGTH = 4096  # elements of one sequence (each is at least one IR value)


def _seq(node: OnnxNode, i: int) -> Tensor:
    t = node.tensor(i)
    if t.seq is None:
        raise node.error(f"input '{t.name}' is not a sequence")
    return t


def _element(node: OnnxNode, i: int) -> Tensor:
    t = node.tensor(i)
    if t.seq is not None:
        raise node.error(f"input '{t.name}' is a sequence; a tensor is expected")
    return t


def _position(node: OnnxNode, i: int, length: int, inclusive: bool) -> int:
    """Input ``i`` as a position in a sequence of ``length`` elements (negative counts from the back); the
    end position ``length`` is valid only when ``inclusive`` (an insertion)."""
    pos = node.ints(i, "position")
    if len(pos) != 1:
        raise node.error(f"the position has {len(pos)} elements, not 1")
    p = pos[0]
    hi = length if inclusive else length - 1
    if not -length <= p <= hi:
        raise node.error(f"position {p} is out of range for a sequence of {length} elements")
    return p + length if p < 0 else p


def _check_length(node: OnnxNode, n: int) -> None:
    if n > MAX_SEQUENCE_LENGTH:
        raise node.unsupported(f"sequences of more than {MAX_SEQUENCE_LENGTH} elements ({n})")


def _check_dtype(node: OnnxNode, s: Tensor, t: Tensor) -> None:
    if s.dtype != t.dtype:
        raise node.error(f"a {t.dtype} tensor ('{t.name}') in a sequence of {s.dtype} ('{s.name}')")


def _out(node: OnnxNode, dtype: str, elements: list[Tensor]) -> Tensor:
    _check_length(node, len(elements))
    return sequence(node.proto.output[0], dtype, elements, (node.name,))


@onnx_op("SequenceConstruct", since=11, fold=False, sequences=True)
def import_sequence_construct(b: Builder, node: OnnxNode) -> list[Result]:
    elements = [_element(node, i) for i in range(node.num_inputs)]
    if not elements:
        raise node.error("SequenceConstruct takes at least one tensor")
    for t in elements[1:]:
        _check_dtype(node, elements[0], t)
    return [_out(node, elements[0].dtype, elements)]


@onnx_op("SequenceEmpty", since=11, fold=False, sequences=True)
def import_sequence_empty(b: Builder, node: OnnxNode) -> list[Result]:
    elem = node.attr("dtype", onnx.TensorProto.FLOAT)
    dtype = ir_dtype(elem)
    if dtype is None:
        raise node.unsupported(f"sequences of element type {onnx.TensorProto.DataType.Name(elem)}")
    return [_out(node, dtype, [])]


@onnx_op("SequenceInsert", since=11, fold=False, sequences=True)
def import_sequence_insert(b: Builder, node: OnnxNode) -> list[Result]:
    s, t = _seq(node, 0), _element(node, 1)
    _check_dtype(node, s, t)
    elements = list(s.seq or ())
    at = _position(node, 2, len(elements), inclusive=True) if node.has_input(2) else len(elements)
    elements.insert(at, t)
    return [_out(node, s.dtype, elements)]


@onnx_op("SequenceErase", since=11, fold=False, sequences=True)
def import_sequence_erase(b: Builder, node: OnnxNode) -> list[Result]:
    s = _seq(node, 0)
    elements = list(s.seq or ())
    if not elements:
        raise node.error(f"erasing from the empty sequence '{s.name}'")
    at = _position(node, 1, len(elements), inclusive=False) if node.has_input(1) else len(elements) - 1
    del elements[at]
    return [_out(node, s.dtype, elements)]


@onnx_op("SequenceAt", since=11, fold=False, sequences=True)
def import_sequence_at(b: Builder, node: OnnxNode) -> list[Result]:
    s = _seq(node, 0)
    elements = s.seq or ()
    if not elements:
        raise node.error(f"SequenceAt of the empty sequence '{s.name}'")
    return [elements[_position(node, 1, len(elements), inclusive=False)]]


@onnx_op("SequenceLength", since=11, fold=False, sequences=True)
def import_sequence_length(b: Builder, node: OnnxNode) -> list[Result]:
    return [np.array(len(_seq(node, 0).seq or ()), dtype=np.int64)]


@onnx_op("SplitToSequence", since=11, fold=False)
def import_split_to_sequence(b: Builder, node: OnnxNode) -> list[Result]:
    t = _element(node, 0)
    x = node.input(0)
    rank = x.shape.rank
    if rank == 0:
        raise node.error("SplitToSequence of a scalar")
    axis = node.axis(node.attr("axis", 0), rank)
    dim = x.shape.dims[axis]
    if not isinstance(dim, int):
        raise node.unsupported(f"splitting symbolic dim {dim} (the sequence's length would depend on it)")
    keepdims = node.attr("keepdims", 1)
    if node.has_input(1):
        split = np.asarray(node.const(1, "split"))
        if split.ndim == 0:
            chunk = int(split)
            if chunk <= 0:
                raise node.error(f"split {chunk} is not positive")
            sizes = [chunk] * (dim // chunk) + ([dim % chunk] if dim % chunk else [])
        else:
            sizes = [int(v) for v in split.reshape(-1)]
            if sum(sizes) != dim or any(v < 0 for v in sizes):
                raise node.error(f"split sizes {sizes} do not cut dim {dim}")
        squeeze = False
    else:
        sizes, squeeze = [1] * dim, not keepdims
    _check_length(node, len(sizes))
    elements = []
    start = 0
    for i, size in enumerate(sizes):
        piece = slice_axis(b, x, axis, start, start + size)
        if squeeze:
            piece = b.reshape(piece, tuple(d for k, d in enumerate(x.shape.dims) if k != axis))
        elements.append(Tensor(f"{t.name}.{i}", piece.shape.dtype, tuple(piece.shape.dims), inst=piece,
                               origin=(node.name,)))
        start += size
    return [_out(node, t.dtype, elements)]


@onnx_op("ConcatFromSequence", since=11, fold=False, sequences=True)
def import_concat_from_sequence(b: Builder, node: OnnxNode) -> list[Result]:
    s = _seq(node, 0)
    elements = list(s.seq or ())
    if not elements:
        raise node.error(f"ConcatFromSequence of the empty sequence '{s.name}'")
    new_axis = bool(node.attr("new_axis", 0))
    rank = len(elements[0].dims)
    axis = node.axis(node.attr("axis"), rank + 1 if new_axis else rank)
    if all(e.value is not None for e in elements):
        values = [e.value for e in elements]
        return [np.stack(values, axis=axis) if new_axis else np.concatenate(values, axis=axis)]
    parts = []
    for e in elements:
        x = node.ctx.materialize(b, e)
        if new_axis:
            dims = list(x.shape.dims)
            dims.insert(axis, 1)
            x = b.reshape(x, tuple(dims))
        parts.append(x)
    return [parts[0] if len(parts) == 1 else b.op("concatenate", parts, dimension=axis)]


@onnx_op("SequenceMap", since=17, fold=False, sequences=True)
def import_sequence_map(b: Builder, node: OnnxNode) -> list[Result]:
    body: onnx.GraphProto = node.attr("body")
    inputs = [node.tensor(i) for i in range(node.num_inputs)]
    if len(body.input) != len(inputs) or len(body.output) != node.num_outputs:
        raise node.error(f"the body takes {len(body.input)} inputs and gives {len(body.output)} outputs, "
                         f"the node has {len(inputs)} and {node.num_outputs}")
    lengths = {len(t.seq) for t in inputs if t.seq is not None}
    if inputs[0].seq is None:
        raise node.error(f"input '{inputs[0].name}' is not a sequence")
    if len(lengths) != 1:
        raise node.error(f"the input sequences have different lengths {sorted(lengths)}")
    length = lengths.pop()
    assert node.ctx.import_subgraph is not None
    columns: list[list[Tensor]] = [[] for _ in body.output]
    for i in range(length):
        args = [t.seq[i] if t.seq is not None else t for t in inputs]
        for column, out in zip(columns, node.ctx.import_subgraph(body, f"{node.name}/{i}", args)):
            if out.seq is not None:
                raise node.error(f"the body's output '{out.name}' is a sequence; a tensor is expected")
            column.append(out)
    results: list[Result] = []
    for j, (column, out) in enumerate(zip(columns, body.output)):
        elem = out.type.tensor_type.elem_type if out.type.HasField("tensor_type") else 0
        dtype = column[0].dtype if column else ir_dtype(elem)
        if dtype is None:
            raise node.unsupported(f"the body's output '{out.name}' has no tensor element type mlcc supports")
        _check_length(node, len(column))
        results.append(sequence(node.proto.output[j], dtype, column, (node.name,)))
    return results
