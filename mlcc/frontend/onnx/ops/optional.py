"""Optional, OptionalHasElement, OptionalGetElement on tensors and sequences: whether an optional holds a value
is known when compiling.

An optional that holds a tensor is that tensor (an optional-typed graph input is a tensor input); an empty
one (``Optional`` with no input) is a value with no IR value whose use as data is an error naming it, so
OptionalHasElement is a constant and OptionalGetElement the tensor itself. ``mlcc.backend`` compiles a model
fed an empty optional input (None) with that input an empty ``Optional``. An optional that holds a sequence
(ops/sequence.py) is that sequence, the same way.
"""

from __future__ import annotations

import numpy as np
import onnx

from mlcc.frontend.onnx.registry import Deferred, OnnxNode, Result, Tensor, onnx_op
from mlcc.hlo.builder import Builder

EMPTY = "is an empty optional (it holds no tensor)"


def _is_empty(t: Tensor) -> bool:
    return t.deferred == EMPTY


def _held(node: OnnxNode) -> Result:
    t = node.tensor(0)
    if t.seq is not None:
        return t
    if t.value is not None:
        return t.value
    if t.inst is None and t.deferred is not None:
        return Deferred(t.deferred)
    return node.input(0)


@onnx_op("Optional", since=15, sequences=True)
def import_optional(b: Builder, node: OnnxNode) -> list[Result]:
    if node.has_input(0):
        return [_held(node)]
    kind: onnx.TypeProto | None = node.attr("type", None)
    if kind is None or not (kind.HasField("tensor_type") or kind.HasField("sequence_type")):
        raise node.unsupported("an empty optional of a type other than a tensor or a sequence")
    return [Deferred(EMPTY)]


@onnx_op("OptionalHasElement", since=15, sequences=True)
def import_optional_has_element(b: Builder, node: OnnxNode) -> list[Result]:
    return [np.array(node.has_input(0) and not _is_empty(node.tensor(0)))]


@onnx_op("OptionalGetElement", since=15, sequences=True)
def import_optional_get_element(b: Builder, node: OnnxNode) -> list[Result]:
    if _is_empty(node.tensor(0)):
        raise node.error(f"input '{node.proto.input[0]}' {EMPTY}")
    return [_held(node)]
