"""The global-memory traffic model: a kernel reads each operand once and writes its result once,
except that a gather reads only the rows it gathers (an embedding table is not read whole)."""

from __future__ import annotations

from mlcc.hlo.ir import Instruction
from mlcc.hlo.symbolic import current_ranges

GATHERS = frozenset({"gather", "gather-nd", "gather-elements"})


def value_bytes(inst: Instruction) -> int:
    """Bytes of inst's value (0 for a tuple); a symbolic size counts at the largest value of its range."""
    return 0 if inst.shape.is_tuple else inst.shape.upper_nbytes(current_ranges())


def _param_read_bytes(param: Instruction, full: int) -> int:
    users = param.users
    if users and all(u.opcode in GATHERS and u.operands[0] is param and not any(o is param for o in u.operands[1:])
                     for u in users):
        return min(full, sum(value_bytes(u) for u in users))
    return full


def operand_read_bytes(inst: Instruction, index: int) -> int:
    """Bytes inst's kernel reads of its index-th operand."""
    op = inst.operands[index]
    full = value_bytes(op)
    if inst.opcode in GATHERS and index == 0:
        return min(full, value_bytes(inst))
    if inst.opcode == "fusion" and inst.called is not None:
        params = inst.called.parameters()
        if index < len(params):
            return _param_read_bytes(params[index], full)
    return full


def kernel_bytes(inst: Instruction) -> tuple[int, int]:
    """(bytes read, bytes written) by inst's kernel; an operand passed twice is read once."""
    seen: set[int] = set()
    read = 0
    for i, o in enumerate(inst.operands):
        if id(o) in seen:
            continue
        seen.add(id(o))
        read += operand_read_bytes(inst, i)
    return read, value_bytes(inst)
