"""Run generated Triton kernels on CPU under Triton's interpreter.

The runtime imports the bundle's kernel sources (files the compiler generated and
checked with ast.parse) and wraps each @triton.jit function in the interpreter.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Sequence


def load_kernel(path: str | Path, name: str) -> Any:
    """Import ``name`` from the kernel source at path, wrapped for the interpreter."""
    from triton.runtime.interpreter import InterpretedFunction

    path = Path(path)
    mod_name = f"mlcc_kernel_{abs(hash(str(path.resolve())))}_{name}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load kernel source {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # inspect.getsource needs the module registered
    spec.loader.exec_module(module)
    jit_fn = getattr(module, name)
    return InterpretedFunction(jit_fn.fn)


def launch(fn: Any, grid: Sequence[int], args: Sequence[Any], constexprs: dict[str, int], num_warps: int = 4) -> None:
    fn[tuple(grid)](*args, **constexprs)
