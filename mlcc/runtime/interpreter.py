"""Run generated Triton kernels on CPU under Triton's interpreter; the ``cpu`` device.

The runtime imports the bundle's kernel sources (files the compiler generated and
checked with ast.parse) and wraps each @triton.jit function in the interpreter.
The ``cpu`` device launches them with the interpreter launch configs the compiler
chose (big tiles, few programs); its one stream runs copies synchronously.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from mlcc.bundle.kernels import import_jit
from mlcc.bundle.manifest import KernelEntry, Launch
from mlcc.bundle.sizes import eval_size
from mlcc.runtime.device import Device


def load_kernel(path: str | Path, name: str) -> Any:
    """Import ``name`` from the kernel source at path, wrapped for the interpreter."""
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(import_jit(path, name).fn)


def launch(fn: Any, grid: Sequence[int], args: Sequence[Any], constexprs: dict[str, int], num_warps: int = 4) -> None:
    fn[tuple(grid)](*args, **constexprs)


class CpuDevice(Device):
    """Host memory, the interpreter, the interpreter launch configs."""

    def __init__(self) -> None:
        self.spec = "cpu"
        self.torch_device = "cpu"

    def load(self, bundle: Path, kernel: KernelEntry) -> Any:
        return load_kernel(bundle / kernel.source, kernel.name)

    def launch(self, step: int, launch: Launch, kernel: KernelEntry, fn: Any, args: Sequence[Any],
               env: Mapping[str, int]) -> None:
        cfg = kernel.interpreter
        fn[tuple(eval_size(g, env) for g in cfg.grid)](*args, **cfg.constexprs)
