"""Ahead-of-time compilation of a kernel with triton.compile for a GPU target (no GPU needed)."""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.emit.target.targets import Target


def _load_jit(source_path: Path, name: str) -> Any:
    mod_name = f"mlcc_aot_{abs(hash(str(source_path)))}_{name}"
    spec = importlib.util.spec_from_file_location(mod_name, source_path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return getattr(module, name)


@dataclass
class Binary:
    target: str
    data: bytes
    ext: str
    shared: int
    num_warps: int
    num_stages: int
    name: str
    metadata: str  # triton's kernel metadata as JSON: what the runtime needs to launch the binary


def compile_kernel(kernel: Kernel, target: Target, config: LaunchConfig | None = None,
                   source_path: Path | None = None) -> Binary:
    """Compile kernel.source for target with config (default: the kernel's config for that target); returns
    the ELF (cubin) or hsaco bytes and launch metadata."""
    config = config or kernel.config_for(target)
    compiled = triton_compile(kernel, target, config, source_path)
    data = compiled.asm[target.binary_format]
    if isinstance(data, str):
        data = data.encode()
    meta = json.dumps(compiled.metadata._asdict(), default=vars, sort_keys=True)
    return Binary(target.name, data, target.binary_format, int(compiled.metadata.shared),
                  config.num_warps, config.num_stages, compiled.metadata.name, meta)


def triton_compile(kernel: Kernel, target: Target, config: LaunchConfig | None = None,
                   source_path: Path | None = None) -> Any:
    """Triton's compiled kernel (its ``asm`` holds the binary and the texts on the way: ptx, amdgcn)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    config = config or kernel.config_for(target)
    # No line info: it would embed the source's temporary path and break byte-identical bundles.
    with triton.knobs.compilation.scope(), tempfile.TemporaryDirectory(prefix="mlcc-aot-") as tmp:
        triton.knobs.compilation.disable_line_info = True
        path = source_path or Path(tmp) / f"{kernel.name}.py"
        if source_path is None:
            path.write_text(kernel.source)
        jit_fn = _load_jit(path, kernel.name)
        arg_names = jit_fn.arg_names
        constexpr_names = set(config.constexprs)
        runtime_args = [a for a in arg_names if a not in constexpr_names]
        if len(runtime_args) != len(kernel.arg_types):
            raise ValueError(f"kernel {kernel.name}: {len(runtime_args)} runtime params, {len(kernel.arg_types)} types")
        signature = dict(zip(runtime_args, kernel.arg_types))
        for c in constexpr_names:
            signature[c] = "constexpr"
        # Every buffer starts on a 16-byte boundary (arena and weight offsets are 256-aligned, the runtime's
        # allocations more): say so, as Triton's JIT specialization would, so loads and stores vectorize.
        attrs = {(arg_names.index(a),): [["tt.divisibility", 16]]
                 for a, t in zip(runtime_args, kernel.arg_types) if t.startswith("*")}
        src = ASTSource(fn=jit_fn, signature=signature, constexprs=dict(config.constexprs), attrs=attrs)
        # FMA contraction on, stated explicitly (Triton 3.9 warns when the default is left implicit).
        options = {"num_warps": config.num_warps, "num_stages": config.num_stages, "enable_fp_fusion": True}
        return triton.compile(src, target=GPUTarget(target.backend, target.arch, target.warp_size), options=options)
