"""mlcc: an ahead-of-time model compiler.

    import mlcc
    mlcc.compile("model.onnx", "build/")            # or an onnx.ModelProto, or a .mlir file
    outputs = mlcc.load("build/", device="cpu").run({"x": x})
"""

from mlcc.compiler import CompileOptions, CompileResult, compile
from mlcc.errors import MlccError
from mlcc.runtime import load
from mlcc.version import __version__

__all__ = ["CompileOptions", "CompileResult", "MlccError", "__version__", "compile", "load"]
