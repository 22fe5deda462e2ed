"""Lower every launching instruction of the scheduled entry to a kernel; identical kernels once.

A kernel's name is derived from its content (template output with a placeholder
name, signature and launch configs), so two instructions that need the same code
share one source and one binary per target, and names never depend on the model's
strings.
"""

from __future__ import annotations

import hashlib
import json

# Importing the lowering modules registers their templates in LOWERINGS.
from mlcc.emit import kernel as _kernel
from mlcc.emit.kernel import Kernel, lower, lowering_key
from mlcc.errors import InternalError, UnsupportedError
from mlcc.hlo.buffer_assignment import BufferPlan
from mlcc.hlo.ir import Instruction, Module
from mlcc.names import sanitize_identifier

_LOWERING_MODULES = ("loop", "reduction", "pooling", "contraction", "normalization", "attention")
PLACEHOLDER = "mlcc_kernel"


def _load_lowerings() -> None:
    import importlib
    for name in _LOWERING_MODULES:
        try:
            importlib.import_module(f"mlcc.emit.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"mlcc.emit.{name}":
                raise


def fusion_kinds() -> frozenset[str]:
    """The fusion kinds some template can lower."""
    _load_lowerings()
    return frozenset(k.split(":", 1)[1] for k in _kernel.LOWERINGS if k.startswith("fusion:"))


def _content_key(k: Kernel) -> str:
    payload = {"source": k.source, "arg_types": k.arg_types, "gpu": k.gpu.to_json(),
               "interpreter": k.interpreter.to_json()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def lower_module(module: Module, plan: BufferPlan) -> tuple[dict[str, Kernel], list[tuple[Instruction, str]]]:
    _load_lowerings()
    kernels: dict[str, Kernel] = {}
    by_key: dict[str, str] = {}
    launches: list[tuple[Instruction, str]] = []
    missing = sorted({lowering_key(i) for i in plan.steps if lowering_key(i) not in _kernel.LOWERINGS})
    if missing:
        raise UnsupportedError(f"no kernel template for {', '.join(missing)}")
    for inst in plan.steps:
        try:
            draft = lower(inst, PLACEHOLDER)
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise InternalError(f"lowering %{inst.name} ({inst.opcode}) failed: {type(e).__name__}: {e}") from e
        key = _content_key(draft)
        name = by_key.get(key)
        if name is None:
            stem = sanitize_identifier(lowering_key(inst).replace("fusion:", "fused_"))
            name = f"{stem}_{key[:10]}"
            kernels[name] = lower(inst, name)
            by_key[key] = name
        launches.append((inst, name))
    return kernels, launches
