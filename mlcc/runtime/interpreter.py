"""Run generated Triton kernels on CPU under Triton's interpreter.

The runtime imports the bundle's kernel sources (files the compiler generated and
checked with ast.parse) and wraps each @triton.jit function in the interpreter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mlcc.bundle.kernels import import_jit


def load_kernel(path: str | Path, name: str) -> Any:
    """Import ``name`` from the kernel source at path, wrapped for the interpreter."""
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(import_jit(path, name).fn)


def launch(fn: Any, grid: Sequence[int], args: Sequence[Any], constexprs: dict[str, int], num_warps: int = 4) -> None:
    fn[tuple(grid)](*args, **constexprs)
