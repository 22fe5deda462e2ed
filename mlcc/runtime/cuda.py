"""Launch a bundle's kernels on a CUDA (or ROCm) device.

load_binary rebuilds Triton's CompiledKernel from the bundle's binary and
metadata: nothing is recompiled. load_source compiles the bundled source with
Triton for a device whose architecture the bundle was not built for.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable


def _import_jit(source: Path, name: str) -> Any:
    mod_name = f"mlcc_cuda_kernel_{abs(hash(str(source.resolve())))}_{name}"
    spec = importlib.util.spec_from_file_location(mod_name, source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load kernel source {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def load_binary(bundle: Path, kernel: dict, arch: str) -> Callable:
    from triton.compiler import ASTSource
    from triton.compiler.compiler import CompiledKernel

    entry = kernel["binaries"][arch]
    jit_fn = _import_jit(bundle / kernel["source"], kernel["name"])
    constexprs = kernel["gpu"]["constexprs"]
    runtime = [a for a in jit_fn.arg_names if a not in constexprs]
    signature = dict(zip(runtime, kernel["arg_types"]))
    signature.update({c: "constexpr" for c in constexprs})
    attrs = {(jit_fn.arg_names.index(a),): [["tt.divisibility", 16]]
             for a, t in zip(runtime, kernel["arg_types"]) if t.startswith("*")}
    src = ASTSource(fn=jit_fn, signature=signature, constexprs=dict(constexprs), attrs=attrs)
    binary = bundle / entry["path"]
    group = {f"{entry['function']}.json": str(bundle / entry["metadata"]),
             f"{entry['function']}.{binary.suffix[1:]}": str(binary)}
    compiled = CompiledKernel(src, group, hash=kernel["name"])

    def run(grid: tuple, args: list, _kernel: dict) -> None:
        compiled[grid](*args)
    return run


def load_source(source: Path, name: str) -> Callable:
    jit_fn = _import_jit(source, name)

    def run(grid: tuple, args: list, kernel: dict) -> None:
        cfg = kernel["gpu"]
        jit_fn[grid](*args, **cfg["constexprs"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                     enable_fp_fusion=True)
    return run
