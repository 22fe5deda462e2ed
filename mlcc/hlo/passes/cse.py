"""Common subexpression elimination: one instruction per (opcode, operands, attrs, shape)."""

from __future__ import annotations

from typing import Any

from mlcc.hlo.ir import Instruction, Module
from mlcc.hlo.passes.pass_manager import Pass


def _freeze(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, float) and v != v:
        return ("nan",)
    return v


def _key(inst: Instruction) -> tuple | None:
    if inst.opcode in ("parameter", "tuple"):
        return None
    if inst.opcode == "constant" and "ref" in inst.attrs:
        return None  # distinct weights stay distinct unless a folding pass proves them equal
    attrs = tuple(sorted((k, _freeze(v)) for k, v in inst.attrs.items()))
    return (inst.opcode, str(inst.shape), tuple(id(o) for o in inst.operands), attrs, id(inst.called))


class CommonSubexpressionElimination(Pass):
    name = "cse"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            seen: dict[tuple, Instruction] = {}
            for inst in list(comp.instructions):
                key = _key(inst)
                if key is None:
                    continue
                prior = seen.get(key)
                if prior is None:
                    seen[key] = inst
                    continue
                inst.replace_all_uses_with(prior)
                if inst.origin:
                    prior.origin = tuple(dict.fromkeys(prior.origin + inst.origin))
                comp.remove(inst)
                changed = True
        return changed
