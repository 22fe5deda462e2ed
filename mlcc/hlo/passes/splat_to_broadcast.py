"""A splat constant of rank >= 1 becomes a broadcast of a scalar constant.

Splats are never materialized in the weights file (a 150-byte model may ask for
petabytes); the broadcast is computed by a kernel, or fused into its consumer.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Module, Shape
from mlcc.hlo.passes.pass_manager import Pass


class SplatToBroadcast(Pass):
    name = "splat-to-broadcast"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            for inst in list(comp.instructions):
                if inst.opcode != "constant" or "splat" not in inst.attrs or inst.shape.rank == 0:
                    continue
                scalar = comp.insert_before(inst, Instruction(
                    comp.unique_name(inst.name + ".scalar"), "constant", Shape(inst.shape.dtype, ()),
                    attrs={"value": (inst.attrs["splat"],)}, origin=inst.origin))
                bcast = comp.insert_before(inst, Instruction(
                    comp.unique_name(inst.name + ".bcast"), "broadcast", inst.shape, [scalar],
                    attrs={"dimensions": ()}, origin=inst.origin))
                inst.replace_all_uses_with(bcast)
                comp.remove(inst)
                changed = True
        return changed
