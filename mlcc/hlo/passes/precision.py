"""--precision fp16|bf16: weights stored and activations computed in a half type.

Every f32 value inside the model becomes the half type: constants are converted at compile time
(so weights.bin holds halves), the model's f32 inputs are converted on entry and its outputs
converted back to f32 on exit, so the bundle keeps the model's interface. Kernels accumulate
dots, convolutions, reductions and norms in f32 whatever their operand type (the templates'
rule), which is what "fp32 accumulation" means here. fp32 and tf32 leave the IR alone (tf32 is a
property of the contraction kernels, not of the stored types).
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction, Module
from mlcc.hlo.passes.pass_manager import Pass

HALF = {"fp16": "f16", "bf16": "bf16"}


class ReducedPrecision(Pass):
    name = "reduced-precision"

    def __init__(self, precision: str = "fp32") -> None:
        self.precision = precision

    def run(self, module: Module) -> bool:
        half = HALF.get(self.precision)
        if half is None:
            return False
        comp = module.entry
        changed = False
        root = comp.root
        for inst in list(comp.instructions):
            shape = inst.shape
            if shape.is_tuple or shape.dtype != "f32":
                continue
            if inst.opcode == "parameter":  # the interface stays f32: convert on entry
                users = list(inst.users)
                conv = Instruction(comp.unique_name(f"{inst.name}.{half}"), "convert", shape.with_dtype(half), [inst],
                                   origin=inst.origin)
                conv.parent = comp
                comp.instructions.insert(comp.instructions.index(inst) + 1, conv)
                for u in users:
                    for i, o in enumerate(u.operands):
                        if o is inst:
                            u.set_operand(i, conv)
            else:  # constants too: their data is cast to the instruction's dtype when the bundle is written
                inst.shape = shape.with_dtype(half)
            changed = True
        if root is not None and root.opcode == "tuple":
            for i, out in enumerate(list(root.operands)):
                if not out.shape.is_tuple and out.shape.dtype == half:
                    back = comp.insert_before(root, Instruction(comp.unique_name(f"{out.name}.f32"), "convert",
                                                                out.shape.with_dtype("f32"), [out], origin=out.origin))
                    root.set_operand(i, back)
            root.shape = type(root.shape)(tuple(o.shape for o in root.operands))
        return changed
