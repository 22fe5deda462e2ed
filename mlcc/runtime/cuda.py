"""Launch a bundle's kernels on a CUDA (or ROCm) device.

load_binary rebuilds Triton's CompiledKernel from the bundle's binary and
metadata, with the constexprs of the binary's own launch config (older bundles:
the kernel's "gpu" config): nothing is recompiled. The caller launches it with
that config's grid. load_source compiles the bundled source with
Triton for a device whose architecture the bundle was not built for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from mlcc.bundle.kernels import import_jit
from mlcc.bundle.manifest import KernelEntry


def load_binary(bundle: Path, kernel: KernelEntry, arch: str) -> Callable:
    from triton.compiler import ASTSource
    from triton.compiler.compiler import CompiledKernel

    entry = kernel.binaries[arch]
    jit_fn = import_jit(bundle / kernel.source, kernel.name, prefix="mlcc_cuda_kernel")
    constexprs = (entry.config or kernel.gpu).constexprs   # what this binary was compiled with
    runtime = [a for a in jit_fn.arg_names if a not in constexprs]
    signature = dict(zip(runtime, kernel.arg_types))
    signature.update({c: "constexpr" for c in constexprs})
    attrs = {(jit_fn.arg_names.index(a),): [["tt.divisibility", 16]]
             for a, t in zip(runtime, kernel.arg_types) if t.startswith("*")}
    src = ASTSource(fn=jit_fn, signature=signature, constexprs=dict(constexprs), attrs=attrs)
    binary = bundle / entry.path
    group = {f"{entry.function}.json": str(bundle / entry.metadata),
             f"{entry.function}.{binary.suffix[1:]}": str(binary)}
    compiled = CompiledKernel(src, group, hash=kernel.name)

    def run(grid: tuple, args: list, _kernel: KernelEntry) -> None:
        compiled[grid](*args)
    return run


def load_source(source: Path, name: str) -> Callable:
    jit_fn = import_jit(source, name, prefix="mlcc_cuda_kernel")

    def run(grid: tuple, args: list, kernel: KernelEntry) -> None:
        cfg = kernel.gpu
        jit_fn[grid](*args, **cfg.constexprs, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                     enable_fp_fusion=True)
    return run
