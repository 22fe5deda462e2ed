"""Dead code elimination: drop instructions whose value reaches no root (like XLA's HloDCE)."""

from __future__ import annotations

from mlcc.hlo.ir import Module
from mlcc.hlo.passes.pass_manager import Pass


class DeadCodeElimination(Pass):
    name = "dce"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            live: set[int] = set()
            work = [comp.root] if comp.root is not None else []
            # Parameters stay: the entry's are the model's inputs, a fusion's are bound by index.
            work += comp.parameters()
            while work:
                inst = work.pop()
                if id(inst) in live:
                    continue
                live.add(id(inst))
                work.extend(inst.operands)
            for inst in reversed(list(comp.instructions)):
                if id(inst) not in live:
                    comp.remove(inst)
                    changed = True
        # computations no fusion calls any more
        called = {id(i.called) for i in module.all_instructions() if i.called is not None}
        kept = [c for c in module.computations if c.is_entry or id(c) in called]
        if len(kept) != len(module.computations):
            module.computations = kept
            changed = True
        # weights no constant refers to any more (folded away): free their memory
        refs = {i.attrs["ref"] for i in module.all_instructions() if i.opcode == "constant" and "ref" in i.attrs}
        for key in [k for k in module.constants if k not in refs]:
            del module.constants[key]
        return changed
