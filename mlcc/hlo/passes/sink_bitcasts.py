"""Sink reshape-like bitcasts below elementwise ops, so epilogues sit right on their producer.

Exporters reshape between a matmul and its bias, activation or residual add
(`Gemm -> view -> add`); a bitcast there hides the add from output fusion. When every operand of
an elementwise op can be viewed at the bitcast source's dims (another row-major value is
bitcast too, a broadcast of a scalar is re-broadcast), the op moves above the bitcast:

    add(bitcast(dot), r)  ->  bitcast(add(dot, bitcast(r)))

Only row-major bitcasts move (their bytes are a plain reshape), so values are unchanged.
"""

from __future__ import annotations

from mlcc.hlo.ir import Computation, Instruction, Module, Shape
from mlcc.hlo.opcodes import ELEMENTWISE_OPS
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.passes.reshape_to_bitcast import preserves_byte_order


def _row_major_view(inst: Instruction) -> bool:
    return (inst.opcode == "bitcast" and inst.shape.is_row_major() and inst.operands[0].shape.is_row_major()
            and preserves_byte_order(inst.operands[0].shape, inst.shape))


class SinkBitcasts(Pass):
    name = "sink-bitcasts"

    def run(self, module: Module) -> bool:
        comp = module.entry
        changed = False
        for inst in list(comp.instructions):
            if inst.parent is not comp or inst.opcode not in ELEMENTWISE_OPS or not inst.shape.is_row_major():
                continue
            view = next((o for o in inst.operands if _row_major_view(o)), None)
            if view is None:
                continue
            src = view.operands[0]
            dims = src.shape.dims
            if inst.shape.dims == dims:
                continue
            operands = [self._at(comp, o, dims, inst) for o in inst.operands]
            if any(o is None for o in operands):
                continue
            moved = comp.insert_before(inst, Instruction(comp.unique_name(inst.name), inst.opcode,
                                                         Shape(inst.shape.dtype, dims), operands, inst.attrs,
                                                         origin=inst.origin))
            back = comp.insert_before(inst, Instruction(comp.unique_name(view.name), "bitcast", inst.shape, [moved],
                                                        origin=view.origin))
            inst.replace_all_uses_with(back)
            comp.remove(inst)
            changed = True
        return changed

    @staticmethod
    def _at(comp: Computation, value: Instruction, dims: tuple, before: Instruction) -> Instruction | None:
        """value viewed at dims without moving bytes, or None."""
        if value.shape.dims == dims:
            return value
        if _row_major_view(value) and value.operands[0].shape.dims == dims:
            return value.operands[0]
        if value.opcode == "broadcast" and value.operands[0].shape.rank == 0:
            return comp.insert_before(before, Instruction(comp.unique_name(value.name), "broadcast",
                                                          Shape(value.shape.dtype, dims), value.operands,
                                                          {"dimensions": ()}, origin=value.origin))
        if value.shape.is_row_major():
            target = Shape(value.shape.dtype, dims)
            if preserves_byte_order(value.shape, target) and value.shape.numel_expr() == target.numel_expr():
                return comp.insert_before(before, Instruction(comp.unique_name(f"{value.name}.view"), "bitcast",
                                                              target, [value], origin=value.origin))
        return None
