"""Errors the StableHLO frontend raises, on top of the shared ones in ``mlcc.errors``.

Every message is one line that starts with the place it is about, as MLIR's own
diagnostics do: ``model.mlir:12:5: use of undefined value '%7'``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlcc.errors import InvalidInputError, MlccError, UnsupportedError


class StableHLOError(MlccError):
    """An error at a place in a StableHLO file (``line``/``col`` are 1-based; 0 when unknown)."""

    def __init__(self, message: str, *, file: str | None = None, line: int = 0, col: int = 0) -> None:
        super().__init__(message, file=file)
        self.line = line
        self.col = col

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line:
            where += f":{self.line}:{self.col}"
        return f"{where}: {self.message}"

    def to_json(self) -> dict:
        record = super().to_json()
        if self.line:
            record["message"] = f"{self.line}:{self.col}: {self.message}"
        return record


class StableHLOParseError(StableHLOError, InvalidInputError):
    """The text is not valid MLIR, or not a valid StableHLO program (types that disagree...)."""


class StableHLOUnsupportedError(StableHLOError, UnsupportedError):
    """A valid program that uses something mlcc does not support (an op, an attribute value, a dtype)."""


@dataclass(frozen=True)
class UnsupportedOp:
    name: str
    line: int
    detail: str = ""

    def describe(self) -> str:
        return f"{self.name}{' ' + self.detail if self.detail else ''} (line {self.line})"


class UnsupportedOpsError(StableHLOUnsupportedError):
    """Every op without an import rule, listed at once."""

    def __init__(self, ops: list[UnsupportedOp], *, file: str | None = None) -> None:
        self.ops = list(ops)
        noun = "op" if len(ops) == 1 else "ops"
        message = f"{len(ops)} unsupported {noun}: " + ", ".join(op.describe() for op in ops)
        super().__init__(message, file=file, line=ops[0].line if ops else 0, col=0)

    def __str__(self) -> str:
        return f"{self.file or '<input>'}: {self.message}"
