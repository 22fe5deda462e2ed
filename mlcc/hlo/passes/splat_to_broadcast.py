"""A splat constant of rank >= 1 becomes a broadcast of a scalar constant.

Splats are never materialized in the weights file (a 150-byte model may ask for
petabytes); the broadcast is computed by a kernel, or fused into its consumer.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Module, Shape
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo.passes.pass_manager import Pass


# A splat read as a dot's or convolution's operand (a filter, a weight matrix) is cheaper stored than
# recomputed by a kernel every inference: it stays a constant, materialized into the weights file,
# up to this size. Larger splats, and splats feeding anything else, become broadcasts.
MATERIALIZE_OPERAND_BYTES = 64 << 20
CONTRACTIONS = ops_with("contraction")


def _read_by_contraction(inst: Instruction) -> bool:
    return any(u.opcode in CONTRACTIONS for u in inst.users)


class SplatToBroadcast(Pass):
    name = "splat-to-broadcast"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            for inst in list(comp.instructions):
                if inst.opcode != "constant" or "splat" not in inst.attrs or inst.shape.rank == 0:
                    continue
                if (_read_by_contraction(inst) and inst.shape.is_static
                        and inst.shape.nbytes() <= MATERIALIZE_OPERAND_BYTES):
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
