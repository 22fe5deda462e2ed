"""The global-memory traffic model: a kernel reads each operand once and writes its result once,
except that a gather reads only the rows it gathers (an embedding table is not read whole).
A symbolic size counts at the top of its range: ``ranges`` is the module's ``symbols``."""

from __future__ import annotations

from typing import Mapping

from mlcc.hlo.ir import Instruction
from mlcc.hlo.opcodes import ops_with

Ranges = Mapping[str, tuple[int, int]]

GATHERS = ops_with("indexed_read")


def value_bytes(inst: Instruction, ranges: Ranges) -> int:
    """Bytes of inst's value (a tuple's: its elements', which a multi-output fusion writes; the entry's root
    tuple launches nothing); a symbolic size counts at the largest value of its range."""
    if inst.shape.is_tuple:
        return sum(e.upper_nbytes(ranges) for e in inst.shape.elements)
    return inst.shape.upper_nbytes(ranges)


def _param_read_bytes(param: Instruction, full: int, ranges: Ranges) -> int:
    users = param.users
    if users and all(u.opcode in GATHERS and u.operands[0] is param and not any(o is param for o in u.operands[1:])
                     for u in users):
        return min(full, sum(value_bytes(u, ranges) for u in users))
    return full


def operand_read_bytes(inst: Instruction, index: int, ranges: Ranges) -> int:
    """Bytes inst's kernel reads of its index-th operand."""
    op = inst.operands[index]
    full = value_bytes(op, ranges)
    if inst.opcode in GATHERS and index == 0:
        return min(full, value_bytes(inst, ranges))
    if inst.opcode == "fusion" and inst.called is not None:
        params = inst.called.parameters()
        if index < len(params):
            return _param_read_bytes(params[index], full, ranges)
    return full


def kernel_bytes(inst: Instruction, ranges: Ranges) -> tuple[int, int]:
    """(bytes read, bytes written) by inst's kernel; an operand passed twice is read once."""
    seen: set[int] = set()
    read = 0
    for i, o in enumerate(inst.operands):
        if id(o) in seen:
            continue
        seen.add(id(o))
        read += operand_read_bytes(inst, i, ranges)
    return read, value_bytes(inst, ranges)
