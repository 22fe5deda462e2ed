"""Constant folding: an instruction whose operands are all constants becomes a constant.

Every opcode folds through the reference evaluator (``evaluate_instruction``), under
a byte budget:

- a result over ``budget_bytes`` (1 MiB) is never folded;
- a result larger than the constant bytes of its operands is folded only when it is
  under 4 KiB, so a broadcast (ConstantOfShape, Expand) of a scalar stays a splat or
  a broadcast of any size instead of becoming weights; a broadcast of a non-uniform
  constant is never folded (it only repeats data, and recognizers read its structure);
- a result over 4 KiB that would copy weights another instruction still reads (a
  transposed embedding shared with a gather) is not folded either.

Splats stay splats: an elementwise op on splats, or a data-movement op on one, folds
to a splat of its result dims whatever their size, computing only one element; a
reduce of a splat folds in closed form (a sum is value * count).

The budget bounds the work too: nothing else is evaluated when its operands exceed
``budget_bytes``, a splat counted at its full logical size (the evaluator visits every
element of a broadcast splat, and a 2**50-element one never finishes).
"""

from __future__ import annotations

import numpy as np

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import EvaluationError, evaluate_instruction
from mlcc.hlo.ir import DTYPE_BYTES, FLOAT_DTYPES, Computation, Instruction, Module, Shape
from mlcc.hlo.opcodes import ELEMENTWISE_OPS, ops_with
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.passes.pattern import constant_array, constant_attrs, python_scalar, remove_dead, scalar_value

DEFAULT_BUDGET = 1 << 20
SMALL_RESULT = 4096
NOT_FOLDED = ops_with("structural") | ops_with("binds_count")  # a count binds a symbol at run time
SPLAT_PRESERVING = ops_with("splat_preserving")


def _materialized_bytes(inst: Instruction) -> int:
    """Bytes a constant occupies in the weights: a splat is one element."""
    if "splat" in inst.attrs:
        return DTYPE_BYTES[inst.shape.dtype]
    return inst.shape.nbytes()


class ConstantFolding(Pass):
    name = "constant-folding"

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET) -> None:
        self.budget_bytes = budget_bytes

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            for inst in list(comp.instructions):
                if inst.parent is comp and self._fold(module, comp, inst):
                    changed = True
        return changed

    def _fold(self, module: Module, comp: Computation, inst: Instruction) -> bool:
        if inst.opcode in NOT_FOLDED or inst.shape.is_tuple or not inst.shape.is_static:
            return False
        if any(op.opcode != "constant" or not op.shape.is_static for op in inst.operands):
            return False
        attrs = self._splat_result(module, inst)
        if attrs is None:
            attrs = self._reduced_splat(module, inst)
        if attrs is None:
            attrs = self._folded_result(module, inst)
        if attrs is None:
            return False
        folded = Instruction(comp.unique_name(inst.name + ".folded"), "constant", inst.shape, (), attrs,
                             origin=inst.origin)
        comp.insert_before(inst, folded)
        inst.replace_all_uses_with(folded)
        remove_dead(comp, [inst])
        return True

    def _splat_result(self, module: Module, inst: Instruction) -> dict | None:
        """The splat an op on splats gives (one element computed), or None when that does not apply."""
        if inst.opcode not in ELEMENTWISE_OPS and inst.opcode not in SPLAT_PRESERVING:
            return None
        values = [scalar_value(op, module) for op in inst.operands]
        if inst.opcode in SPLAT_PRESERVING:
            values = values[:1]
        if any(v is None for v in values) or inst.shape.numel() == 0:
            return None
        if inst.opcode in SPLAT_PRESERVING:
            (value,) = values
        else:
            scalars = [np.array(v, numpy_dtype(op.shape.dtype)) for v, op in zip(values, inst.operands)]
            one = Instruction(inst.name, inst.opcode, Shape(inst.shape.dtype, ()), (), inst.attrs)
            try:
                value = evaluate_instruction(one, scalars, module.constants).reshape(())
            except EvaluationError:
                return None
        value = python_scalar(value, inst.shape.dtype)
        return {"splat": value} if inst.shape.rank else {"value": (value,)}

    def _reduced_splat(self, module: Module, inst: Instruction) -> dict | None:
        """The value a reduce of a splat gives, in closed form (no element visited), or None."""
        if inst.opcode != "reduce" or len(inst.operands) != 1:
            return None
        (x,) = inst.operands
        value = scalar_value(x, module)
        count = 1
        for d in inst.attrs["dimensions"]:
            count *= int(x.shape.dims[d])
        if value is None or count == 0 or inst.shape.numel() == 0:
            return None
        reduced = _repeated(inst.attrs["kind"], value, count, inst.shape.dtype)
        if reduced is None:
            return None
        return {"splat": reduced} if inst.shape.rank else {"value": (reduced,)}

    def _folded_result(self, module: Module, inst: Instruction) -> dict | None:
        result_bytes = inst.shape.nbytes()
        if result_bytes > self.budget_bytes:
            return None
        if sum(op.shape.nbytes() for op in inst.operands) > self.budget_bytes:
            return None  # the evaluator would visit every element, a splat's too
        operand_bytes = sum(_materialized_bytes(op) for op in inst.operands)
        if result_bytes > operand_bytes and inst.opcode == "broadcast":
            return None
        if result_bytes >= SMALL_RESULT:
            if result_bytes > operand_bytes:
                return None
            if any("ref" in op.attrs and any(u is not inst for u in op.users) for op in inst.operands):
                return None
        values = [constant_array(op, module) for op in inst.operands]
        if any(v is None for v in values):
            return None
        try:
            result = evaluate_instruction(inst, values, module.constants)
        except EvaluationError:
            return None
        return constant_attrs(module, np.asarray(result), inst.shape.dtype, inst.name)


def _repeated(kind: str, value: bool | int | float, count: int, dtype: str) -> bool | int | float | None:
    """``value`` combined with itself ``count`` times by a reduction ``kind`` (None for a kind not known
    here), in ``dtype``: floats rounded once, integers wrapped like the evaluator's arithmetic."""
    if dtype in FLOAT_DTYPES and kind in ("and", "or", "xor"):
        return None  # the evaluator rejects these
    if kind in ("maximum", "minimum", "and", "or") or (dtype == "pred" and kind in ("add", "multiply")):
        return value
    if kind == "xor":
        return value if count % 2 else python_scalar(0, dtype)
    if kind not in ("add", "multiply"):
        return None
    if dtype in FLOAT_DTYPES:
        with np.errstate(all="ignore"):  # a sum starts at +0.0, so -0.0 * count + 0.0 is +0.0 as there
            exact = value * float(count) + 0.0 if kind == "add" else float(np.float64(value) ** count)
            return python_scalar(np.array(exact, np.float64).astype(numpy_dtype(dtype)), dtype)
    modulus = 1 << (8 * DTYPE_BYTES[dtype])
    wrapped = int(value) * count % modulus if kind == "add" else pow(int(value), count, modulus)
    if dtype.startswith("s") and wrapped >= modulus // 2:
        wrapped -= modulus
    return wrapped
