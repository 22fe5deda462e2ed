"""mlcc: an ahead-of-time model compiler.

    import mlcc
    mlcc.compile("model.onnx", "build/")            # or an onnx.ModelProto, or a .mlir file
    outputs = mlcc.load("build/", device="cpu").run({"x": x})

``import mlcc`` loads the runtime only: the compiler (mlcc.compiler and the frontend, IR and emit layers
under it) is imported on first use of ``compile``, ``CompileOptions`` or ``CompileResult``, so a bundle is
loaded and run without a compiler module ever imported.
"""

import importlib
from typing import TYPE_CHECKING, Any

from mlcc.errors import MlccError
from mlcc.runtime import load
from mlcc.version import __version__

if TYPE_CHECKING:
    from mlcc.compiler import CompileOptions, CompileResult, compile

_COMPILER_NAMES = ("CompileOptions", "CompileResult", "compile")

__all__ = ["CompileOptions", "CompileResult", "MlccError", "__version__", "compile", "load"]


def __getattr__(name: str) -> Any:
    """The compiler's public names, from mlcc.compiler on first use (PEP 562)."""
    if name not in _COMPILER_NAMES:
        raise AttributeError(f"module 'mlcc' has no attribute '{name}'")
    value = getattr(importlib.import_module("mlcc.compiler"), name)
    globals()[name] = value
    return value
