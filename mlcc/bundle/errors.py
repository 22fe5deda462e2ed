"""Errors users see, each with its documented exit code (README, "Exit codes"): the compiler's and the
runtime's, so that both raise the same hierarchy (mlcc/errors.py is the compiler's name for it).

Every message is one line naming the file and, where there is one, the node or
tensor: ``model.onnx: node 'Add_3' (Add): inputs have incompatible shapes``.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_MISMATCH = 1        # verification found outputs that differ from the reference
EXIT_USAGE = 2           # bad command line or option
EXIT_INVALID_INPUT = 65  # malformed, inconsistent or hostile input; a limit exceeded
EXIT_INPUT_MISSING = 66  # an input file (model, external data, inputs npz) does not exist
EXIT_UNSUPPORTED = 69    # valid input that mlcc does not support (op, opset, dtype, target)
EXIT_INTERNAL = 70       # a bug in mlcc: invalid IR after a pass, a kernel that fails to compile
EXIT_CANT_CREATE = 73    # the output directory or a file in it cannot be written


class MlccError(Exception):
    exit_code = EXIT_INTERNAL
    kind = "internal"

    def __init__(self, message: str, *, file: str | None = None, node: str | None = None) -> None:
        super().__init__(message)
        self.message = " ".join(str(message).split())  # one line, always
        self.file = file
        self.node = node

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(f"{self.file}:")
        if self.node:
            parts.append(f"{self.node}:")
        parts.append(self.message)
        return " ".join(parts)

    def to_json(self) -> dict:
        return {"severity": "error", "kind": self.kind, "exit_code": self.exit_code,
                "file": self.file, "node": self.node, "message": self.message}


class InvalidInputError(MlccError):
    exit_code = EXIT_INVALID_INPUT
    kind = "invalid-input"


class InputMissingError(MlccError):
    exit_code = EXIT_INPUT_MISSING
    kind = "input-missing"


class UnsupportedError(MlccError):
    exit_code = EXIT_UNSUPPORTED
    kind = "unsupported"


class InternalError(MlccError):
    exit_code = EXIT_INTERNAL
    kind = "internal"


class OutputError(MlccError):
    exit_code = EXIT_CANT_CREATE
    kind = "cannot-create-output"


class MismatchError(MlccError):
    exit_code = EXIT_MISMATCH
    kind = "mismatch"


class UsageError(MlccError):
    exit_code = EXIT_USAGE
    kind = "usage"


class BundleError(InvalidInputError):
    """A bundle that cannot be loaded, or inputs that do not fit it (exit code 65)."""
