"""The unfused baseline (mlcc/hlo/analyses.py's UnfusedBaseline): the graph as its source ran it, one kernel
per source op, against which fusion's launches and modeled bytes are reported."""

from __future__ import annotations

from mlcc.hlo.analyses import UnfusedBaseline
from mlcc.hlo.ir import Instruction, Module
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo.traffic import operand_read_bytes
from mlcc.hlo.traffic import value_bytes as _bytes

NO_KERNEL = ops_with("no_kernel") - ops_with("loop_fusible")  # arguments, constants, tuples (as fusion.py's)


def unfused_stats(module: Module) -> UnfusedBaseline:
    """The graph as its source ran it, one kernel per source op: launches, and modeled global-memory
    bytes (each op reads its inputs once and writes its outputs once). Instructions are grouped by the
    source node they came from (their first origin), so an op the importer expanded into several
    instructions (an implicit broadcast, a Gemm's bias) still counts once. A view (Reshape, Squeeze,
    Unsqueeze, Flatten: a reshape of a row-major value, or a bitcast) costs nothing: no launch, no bytes;
    its consumers read the viewed value through it, as any runtime that aliases views does."""
    comp = module.entry
    node_of: dict[int, str] = {}
    for inst in comp.instructions:
        node_of[id(inst)] = inst.origin[0] if inst.origin else f"%{inst.name}"
    launches: set[str] = set()
    nbytes = 0
    root_values = {id(o) for o in comp.root.operands} if comp.root is not None and comp.root.opcode == "tuple" else set()
    read: set[tuple[str, int]] = set()
    for inst in comp.instructions:
        if inst.opcode in NO_KERNEL or inst.shape.is_tuple or _is_free_view(inst):
            continue
        node = node_of[id(inst)]
        launches.add(node)
        for i, o in enumerate(inst.operands):
            if (node_of.get(id(o)) != node or o.opcode in ("parameter", "constant")) and (node, id(o)) not in read:
                read.add((node, id(o)))
                nbytes += operand_read_bytes(inst, i, module.symbols)
        if id(inst) in root_values or any(node_of.get(id(u)) != node for u in inst.users if u.opcode != "tuple"):
            nbytes += _bytes(inst, module.symbols)
    return UnfusedBaseline(len(launches), nbytes)


def _is_free_view(inst: Instruction) -> bool:
    """A bitcast, or a reshape between row-major values (every reshape as imported): the same bytes."""
    if inst.opcode == "bitcast":
        return True
    return inst.opcode == "reshape" and all(v.shape.is_row_major() for v in (inst, inst.operands[0]))
