"""A dot's A-operand prologues (mlcc/hlo/passes/fusion.py): the chains of instructions the dot's kernel computes
as it loads its A tiles, so their results never reach memory:
- a layer-norm or rms-norm whose rows are the dot's K (norm_prologue_chain): the tile spans whole rows, the
  row statistics come from a first pass over it;
- a gather or slice picking rows by constant indices (picked_rows_chain): read in place.
"""

from __future__ import annotations

from mlcc.hlo.ir import Instruction
from mlcc.hlo.opcodes import ops_with

ROW_NORMS = ops_with("row_norm")

MAX_NORM_ROW = 256  # a norm joins a dot's A loads when its row fits one K tile (BLOCK_K >= row)


def norm_below(p: Instruction) -> Instruction | None:
    """The row norm p is a view of (through bitcasts), if any."""
    while p.opcode == "bitcast":
        p = p.operands[0]
    return p if p.opcode in ROW_NORMS else None


def picked_rows(p: Instruction) -> Instruction | None:
    """The gather or slice p is a view of (through bitcasts) when it picks rows by constant indices (BERT's
    first token for the pooler), if so."""
    while p.opcode == "bitcast":
        p = p.operands[0]
    if p.opcode == "slice" or (p.opcode == "gather" and all(o.opcode == "constant" and "ref" not in o.attrs
                                                            for o in p.operands[1:])):
        return p
    return None


def picked_rows_chain(dot: Instruction, p: Instruction) -> tuple[list[Instruction], str | None]:
    """The views from the dot's lhs p down to the gather or slice picking its rows (see picked_rows), which the
    dot's kernel reads in place as it loads its A tiles: the same bytes a load of a stored copy reads."""
    if dot.attrs["lhs_batch_dims"] or len(dot.attrs["lhs_contracting_dims"]) != 1:
        return [], "the dot has batch dims or more than one contracting dim"
    chain = [p]
    while chain[-1].opcode == "bitcast":
        chain.append(chain[-1].operands[0])
    if not all(v.shape.is_static for v in chain):
        return [], "a view between the rows and the dot is not static"
    for a, b in zip(chain, chain[1:]):
        if any(u is not a for u in b.users):
            return [], f"%{b.name} has users other than the dot's lhs"
    if any(u is not dot for u in p.users):
        return [], f"%{p.name} has users other than the dot"
    return chain, None


def norm_prologue_chain(dot: Instruction, p: Instruction) -> tuple[list[Instruction], str | None]:
    """The views from the dot's lhs p down to the row norm they show (the norm last), which the dot's kernel
    may apply as it loads its A tiles, computing each row's statistics in a first pass over the tile (so the
    normalized activations never reach memory). Refused (with why) unless the dot has no batch dims and
    contracts the lhs's last dim alone, the norm normalizes its last dim alone, of at most MAX_NORM_ROW elements (one K tile
    holds a whole row), every view is a row-major reshape (so the dot's rows are the norm's rows, flat; their number may be
    symbolic), and
    no one but the dot reads the norm or its views."""
    if dot.attrs["lhs_batch_dims"] or list(dot.attrs["lhs_contracting_dims"]) != [p.shape.rank - 1]:
        return [], "the dot has batch dims or does not contract its lhs's last dim alone"
    chain = [p]
    while chain[-1].opcode == "bitcast":
        chain.append(chain[-1].operands[0])
    norm = chain[-1]
    if list(norm.attrs["dimensions"]) != [norm.shape.rank - 1]:
        return [], f"the {norm.opcode} normalizes dims {list(norm.attrs['dimensions'])}, not its last alone"
    if not all(v.shape.is_row_major() for v in chain + [norm.operands[0]]):
        return [], "the norm, its input or a view between it and the dot is not row-major"
    if not isinstance(norm.shape.dims[-1], int):
        return [], "its rows have a symbolic length"
    row = int(norm.shape.dims[-1])
    if row > MAX_NORM_ROW:
        return [], f"its rows of {row} elements do not fit one K tile (at most {MAX_NORM_ROW})"
    if norm.shape.dtype not in ("f32", "f16", "bf16"):
        return [], f"a {norm.shape.dtype} norm"
    for a, b in zip(chain, chain[1:]):
        if any(u is not a for u in b.users):
            return [], f"%{b.name} has users other than the dot's lhs"
    if any(u is not dot for u in p.users):
        return [], f"%{p.name} has users other than the dot"
    return chain, None
