"""The schedule and buffer-assignment passes: the last two phases before lowering.

The entry's instruction order is the launch order; the schedule pass makes sure
it is one (operands before users, the root last, otherwise as the passes left
it), and the buffer-assignment pass plans every value's memory for it
(mlcc/hlo/buffer_assignment.py), kept as ``module.buffer_plan``.
"""

from __future__ import annotations

from mlcc.hlo.buffer_assignment import assign_buffers
from mlcc.hlo.ir import Module
from mlcc.hlo.passes.pass_manager import Pass


class Schedule(Pass):
    name = "schedule"

    def run(self, module: Module) -> bool:
        comp = module.entry
        before = list(comp.instructions)
        comp.topological_sort()  # stable: an order that already is one stays as it is
        if comp.root is not None and comp.instructions[-1] is not comp.root and not comp.root.users:
            comp.instructions.remove(comp.root)
            comp.instructions.append(comp.root)
        return [id(i) for i in comp.instructions] != [id(i) for i in before]


class BufferAssignment(Pass):
    name = "buffer-assignment"

    def run(self, module: Module) -> bool:
        assign_buffers(module)
        return False  # the IR is unchanged; the plan is module.buffer_plan
