"""The StableHLO frontend: MLIR text (pretty or generic form) or a portable artifact -> IR Module.

    from mlcc.frontend.stablehlo import import_stablehlo
    module = import_stablehlo("model.mlir")   # what jax.jit(f).lower(*args).as_text() prints

Inputs are named arg0, arg1, ... in the order of @main's arguments and outputs
out0, out1, ... in the order it returns them.
"""

from __future__ import annotations

import os
from pathlib import Path

from mlcc.errors import InputMissingError
from mlcc.frontend.stablehlo import pretty  # noqa: F401  (registers the pretty-form readers)
from mlcc.frontend.stablehlo.bytecode import BYTECODE_MAGIC, bytecode_to_text
from mlcc.frontend.stablehlo.errors import (StableHLOError, StableHLOParseError, StableHLOUnsupportedError,
                                            UnsupportedOpsError)
from mlcc.frontend.stablehlo.importer import RULES, import_module
from mlcc.frontend.stablehlo.ops import (complex, contraction, control, data, elementwise, fft,  # noqa: F401
                                         indexing, linalg, precision, quantization, reduction, rng, sorting, special,
                                         windows)
from mlcc.frontend.stablehlo.parser import Parser
from mlcc.hlo.ir import Module

__all__ = ["RULES", "StableHLOError", "StableHLOParseError", "StableHLOUnsupportedError", "UnsupportedOpsError",
           "import_stablehlo", "parse_stablehlo"]


def _read(source: str | bytes | os.PathLike) -> tuple[str, str, str | None]:
    """(text, filename for messages, default module name)."""
    if isinstance(source, bytes):
        data, filename, stem = source, "<bytes>", None
    elif isinstance(source, os.PathLike) or ("\n" not in source and "{" not in source):
        path = Path(source)
        if not path.is_file():
            raise InputMissingError(f"no such file: {path}")
        data, filename, stem = path.read_bytes(), str(source), path.name.split(".")[0]
    else:
        return source, "<string>", None
    if data.startswith(BYTECODE_MAGIC):
        return bytecode_to_text(data, filename), filename, stem
    try:
        return data.decode("utf-8"), filename, stem
    except UnicodeDecodeError as e:
        raise StableHLOParseError(f"not UTF-8 text (byte {e.start}) and not MLIR bytecode", file=filename) from None


def parse_stablehlo(source: str | bytes | os.PathLike):
    """The ParsedModule of a file, text or bytes (no IR is built)."""
    text, filename, _ = _read(source)
    return Parser(text, filename).parse_module()


def import_stablehlo(path_or_text: str | bytes | os.PathLike, *, name: str | None = None) -> Module:
    """Import a StableHLO module: a path, MLIR text, or the bytes of a file (text or bytecode).

    Complex values inside the program become pairs of real values. A complex argument or result of the entry
    is a real tensor with a last dim of 2, the real and imaginary parts (numpy: ``x[..., None].view(x.real.dtype)``;
    back: ``y[..., 0] + 1j * y[..., 1]``), marked as complex (a parameter's complex=true, the module's
    complex_outputs): the evaluator and a bundle take and give them as complex arrays."""
    text, filename, stem = _read(path_or_text)
    parsed = Parser(text, filename).parse_module()
    return import_module(parsed, name or parsed.name or stem)
