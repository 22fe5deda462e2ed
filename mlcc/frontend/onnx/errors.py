"""Errors the ONNX frontend raises, on top of the shared ones in ``mlcc.errors``.

Every message is one line: ``model.onnx: node 'Add_3' (Add): inputs have incompatible shapes [2,3] and [4]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlcc.errors import InputMissingError, InvalidInputError, MlccError, UnsupportedError


class FrontendError(MlccError):
    """An error tied to a model file and, where there is one, a node (``node`` is its name)."""

    def __init__(self, message: str, *, file: str | None = None, node: str | None = None,
                 op_type: str | None = None) -> None:
        super().__init__(message, file=file, node=node)
        self.op_type = op_type

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(f"{self.file}:")
        if self.node is not None:
            parts.append(f"node '{self.node}' ({self.op_type}):" if self.op_type else f"node '{self.node}':")
        parts.append(self.message)
        return " ".join(parts)


class InvalidModelError(FrontendError, InvalidInputError):
    """The model is malformed or inconsistent (bad shapes, a cycle, an unsafe external-data path)."""


class ModelNotFoundError(FrontendError, InputMissingError):
    """The model file or one of its external-data files does not exist."""


class UnsupportedFeatureError(FrontendError, UnsupportedError):
    """A valid node that uses something mlcc does not support (an attribute value, a dtype, an output)."""


class DeferredValueError(UnsupportedFeatureError):
    """A value computed from symbolic dims (it has no IR form) is used as data."""


@dataclass(frozen=True)
class UnsupportedNode:
    op_type: str
    domain: str
    opset: int
    name: str

    def describe(self) -> str:
        domain = self.domain or "ai.onnx"
        return f"'{self.name}' ({self.op_type}, {domain} opset {self.opset})"


class UnsupportedOpError(FrontendError, UnsupportedError):
    """Every node whose op type (at its opset) has no import rule, listed at once."""

    def __init__(self, nodes: list[UnsupportedNode], *, file: str | None = None) -> None:
        self.nodes = list(nodes)
        noun = "node" if len(nodes) == 1 else "nodes"
        message = f"{len(nodes)} unsupported {noun}: " + ", ".join(n.describe() for n in nodes)
        super().__init__(message, file=file)
