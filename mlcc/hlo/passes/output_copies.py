"""Each entry output gets a buffer of its own, written by a kernel.

An output that is an input, a constant, a view of one of those (bitcast), or the same
value as another output is copied, so the runtime can hand every output back as
a separate array.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Module
from mlcc.hlo.passes.pass_manager import Pass


def alias_root(inst: Instruction) -> Instruction:
    while inst.opcode == "bitcast":
        inst = inst.operands[0]
    return inst


class OutputCopies(Pass):
    name = "output-copies"

    def run(self, module: Module) -> bool:
        comp = module.entry
        root = comp.root
        if root is None or root.opcode != "tuple":
            return False
        changed = False
        seen: set[int] = set()
        for i, out in enumerate(list(root.operands)):
            base = alias_root(out)
            if base.opcode in ("parameter", "constant") or id(base) in seen:
                copy = comp.insert_before(root, Instruction(
                    comp.unique_name(f"{out.name}.out{i}"), "copy", out.shape, [out], origin=out.origin))
                root.set_operand(i, copy)
                base = copy
                changed = True
            seen.add(id(base))
        return changed
