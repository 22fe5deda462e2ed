"""Lower every launching instruction of the scheduled entry to a kernel; identical kernels once.

A kernel's name is derived from its content (template output with a placeholder
name, signature and launch configs, every target's included), so two instructions
that need the same code share one source and one binary per target, and names
never depend on the model's strings.

A kernel's tuning signature hashes what defines its code and problem but not its
launch configs (template, source with the placeholder name, argument types): the
tuning database keys its entries by it, so an entry outlives any change of
heuristics, and the kernel's config for a target is the entry's where it has one.
"""

from __future__ import annotations

import hashlib
import json
from types import ModuleType
from typing import Sequence

# Importing the lowering modules registers their lowerings in LOWERINGS: a plain import, so a module
# missing or misnamed here fails when this module loads instead of its fusion kind silently vanishing.
from mlcc.emit.codegen import attention, b2b, contraction, dynamic, loop, normalization, pooling, reduction
from mlcc.emit.codegen.indexing import PlannedRanges, Ranges
from mlcc.emit.codegen.kernel import LOWERINGS, Kernel, lower, lowering_key
from mlcc.emit.target.targets import Target
from mlcc.emit.target.tuning_db import TuningDb, configure_targets
from mlcc.emit.tiling import TILINGS, Tiling
from mlcc.errors import InternalError, UnsupportedError
from mlcc.hlo.buffer_assignment import BufferPlan
from mlcc.hlo.ir import Instruction, Module
from mlcc.hlo.symbolic import SymbolicError, sound_ranges, symbols_of
from mlcc.names import sanitize_identifier

LOWERING_MODULES = (loop, reduction, pooling, contraction, normalization, attention, dynamic, b2b)
PLACEHOLDER = "mlcc_kernel"


def check_lowering_modules(modules: Sequence[ModuleType]) -> None:
    """Every lowering module registers at least one lowering (else it is not the module meant)."""
    registering = {fn.__module__ for fn in LOWERINGS.values()}
    idle = [m.__name__ for m in modules if m.__name__ not in registering]
    if idle:
        raise ImportError(f"lowering modules register no lowering: {', '.join(idle)}")


check_lowering_modules(LOWERING_MODULES)


def fusion_kinds() -> frozenset[str]:
    """The fusion kinds some lowering registers (what fusion may form)."""
    return frozenset(k.split(":", 1)[1] for k in LOWERINGS if k.startswith("fusion:"))


def tilings() -> dict[str, Tiling]:
    """Every template's tiling (the lowering modules register them as they load)."""
    return TILINGS


def _content_key(k: Kernel) -> str:
    payload = {"source": k.source, "arg_types": k.arg_types, "gpu": k.gpu.to_json(),
               "interpreter": k.interpreter.to_json(),
               "targets": {t: c.to_json() for t, c in k.targets.items()}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def kernel_signature(draft: Kernel) -> str:
    """The tuning database's key of a kernel lowered with the PLACEHOLDER name: its code and problem
    (the template, the source, the argument types), never its launch configs."""
    payload = {"template": draft.template, "source": draft.source, "arg_types": draft.arg_types}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def lower_module(module: Module, plan: BufferPlan, targets: Sequence[Target] = (),
                 tuning: TuningDb | None = None) -> tuple[dict[str, Kernel], list[tuple[Instruction, str]]]:
    """Kernels by name and the launches of the schedule; each kernel configured for every GPU target
    (its heuristic, or the tuning database's entry)."""
    kernels: dict[str, Kernel] = {}
    by_key: dict[str, str] = {}
    launches: list[tuple[Instruction, str]] = []
    missing = sorted({lowering_key(i) for i in plan.steps if lowering_key(i) not in LOWERINGS})
    if missing:
        raise UnsupportedError(f"no kernel template for {', '.join(missing)}")
    ranges: Ranges = module.symbols
    if module.unbounded:
        ranges = PlannedRanges(module.symbols, sound_ranges(module.symbols, module.unbounded))
    _lower_steps(plan, ranges, targets, tuning, kernels, by_key, launches)
    return kernels, launches


def _is_symbolic(inst: Instruction) -> bool:
    shapes = [inst.shape, *(o.shape for o in inst.operands)]
    if inst.called is not None:
        shapes += [i.shape for i in inst.called.instructions]
    return any(not e.is_static for s in shapes for e in (s.elements if s.is_tuple else (s,)))


def _symbolic_error(inst: Instruction, why: str) -> UnsupportedError:
    names = sorted({n for s in [inst.shape, *(o.shape for o in inst.operands)] if not s.is_tuple
                    for n in symbols_of(s.dims)})
    hint = " ".join(f"--shape {n}=N" for n in names) or "--shape"
    origin = f" from {', '.join(inst.origin[:3])}" if inst.origin else ""
    return UnsupportedError(f"%{inst.name} ({lowering_key(inst)}){origin} has symbolic sizes and {why}; "
                            f"specialize them at compile time ({hint})")


def _lower_steps(plan: BufferPlan, ranges: Ranges, targets: Sequence[Target], tuning: TuningDb | None,
                 kernels: dict[str, Kernel], by_key: dict[str, str], launches: list[tuple[Instruction, str]]) -> None:
    for inst in plan.steps:
        symbolic = _is_symbolic(inst)
        try:
            draft = lower(inst, PLACEHOLDER, ranges)
        except (TypeError, SymbolicError) as e:
            if symbolic:  # a size decision no symbolic rule covers: say so, never a wrong kernel
                raise _symbolic_error(inst, str(e)) from e
            raise InternalError(f"lowering %{inst.name} ({inst.opcode}) failed: {type(e).__name__}: {e}") from e
        except (ValueError, KeyError, IndexError) as e:
            raise InternalError(f"lowering %{inst.name} ({inst.opcode}) failed: {type(e).__name__}: {e}") from e
        draft.signature = kernel_signature(draft)
        configure_targets(draft, targets, tuning)
        key = _content_key(draft)
        name = by_key.get(key)
        if name is None:
            stem = sanitize_identifier(lowering_key(inst).replace("fusion:", "fused_"))
            name = f"{stem}_{key[:10]}"
            kernel = lower(inst, name, ranges)
            kernel.signature, kernel.targets, kernel.tuned = draft.signature, draft.targets, draft.tuned
            kernels[name] = kernel
            by_key[key] = name
        launches.append((inst, name))
