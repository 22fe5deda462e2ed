"""A bundle's kernel sources: ``kernels/<name>.py`` is a Python module that defines the @triton.jit function
``<name>`` (the compiler generated it from a template and checked it with ast.parse)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from mlcc.bundle import interpreter_numerics


def import_jit(source: str | Path, name: str, prefix: str = "mlcc_kernel") -> Any:
    """The @triton.jit function ``name`` defined by the kernel source file at ``source``. Loading one also makes
    Triton's interpreter convert bfloat16 as the GPU does (interpreter_numerics), for CPU runs of it."""
    interpreter_numerics.install()
    source = Path(source)
    mod_name = f"{prefix}_{abs(hash(str(source.resolve())))}_{name}"
    spec = importlib.util.spec_from_file_location(mod_name, source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load kernel source {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # inspect.getsource (Triton reads the function's text) needs it registered
    spec.loader.exec_module(module)
    return getattr(module, name)
