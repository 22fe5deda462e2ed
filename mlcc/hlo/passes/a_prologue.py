"""A dot's A-operand prologues (mlcc/hlo/passes/fusion.py): the chains of instructions the dot's kernel computes
as it loads its A tiles, so their results never reach memory:
- a layer-norm or rms-norm whose rows are the dot's K (norm_prologue_chain): when a row fits one K tile (at
  most MAX_NORM_ROW elements) the tile spans whole rows and the row statistics come from a first pass over it;
  longer rows (hidden 512..4096) take a statistics loop over the program's rows before the K loop (sums of
  squares for rms-norm, per-tile means and M2 combined by Chan's formula for layer-norm, in f32), and each A
  tile is normalized as it loads; a gated MLP's gate and up dots (one output tile, two accumulators) share
  the normalized A tile (fusion.py's twin: norm_prologue_chain's twins);
- a gather or slice picking rows by constant indices (picked_rows_chain): read in place;
- a dynamic quantization (DynamicQuantizeLinear: quantized_rows_cone): the u8 tile computed elementwise
  from the float activation and its scale and zero point, which come from the activation's min and max;
  those the kernel computes in a first pass over the whole activation when no other kernel needs them
  (mlcc/hlo/passes/fusion.py decides), so the u8 activation, and its min and max, never reach memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlcc.hlo.ir import Instruction
from mlcc.hlo.opcodes import ELEMENTWISE_OPS, ops_with

ROW_NORMS = ops_with("row_norm")

MAX_NORM_ROW = 256  # a row that fits one K tile (BLOCK_K >= row) is normalized from that tile alone; longer rows
# take a statistics loop over the program's rows before the K loop


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


def norm_prologue_chain(dot: Instruction, p: Instruction,
                        twins: tuple[Instruction, ...] = ()) -> tuple[list[Instruction], str | None]:
    """The views from the dot's lhs p down to the row norm they show (the norm last), which the dot's kernel
    may apply as it loads its A tiles, computing each row's statistics in a first pass over the tile (so the
    normalized activations never reach memory). Refused (with why) unless the dot has no batch dims and
    contracts the lhs's last dim alone, the norm normalizes its last dim alone, of a static length (rows longer
    than MAX_NORM_ROW, which no K tile holds, get a statistics loop before the K loop), every view is a
    row-major reshape (so the dot's rows are the norm's rows, flat; their number may be symbolic), and
    no one but the dot (and twins: a gated MLP's second dot on the same lhs, loading the same A tiles) reads
    the norm or its views."""
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
    if norm.shape.dtype not in ("f32", "f16", "bf16"):
        return [], f"a {norm.shape.dtype} norm"
    for a, b in zip(chain, chain[1:]):
        if any(u is not a for u in b.users):
            return [], f"%{b.name} has users other than the dot's lhs"
    if any(u is not dot and all(u is not t for t in twins) for u in p.users):
        return [], f"%{p.name} has users other than the dot"
    return chain, None


def gated_twin(dot: Instruction, p: Instruction) -> Instruction | None:
    """The other dot reading dot's normalized lhs p when it is that norm's only other reader and a twin an
    output tile may hold next to dot (a gated MLP's gate beside its up projection: fusion.py's _second_dot)."""
    others = [u for u in p.users if u is not dot]
    if norm_below(p) is None or len(others) != 1 or others[0].opcode != "dot" or others[0].operands[0] is not p:
        return None
    twin = others[0]
    a, b = twin.operands[1].shape, dot.operands[1].shape
    if twin.attrs != dot.attrs or (a.dtype, tuple(a.dims), a.layout) != (b.dtype, tuple(b.dims), b.layout) \
            or tuple(twin.shape.dims) != tuple(dot.shape.dims) or twin.shape.dtype != dot.shape.dtype:
        return None
    return twin


NO_KERNEL = ops_with("no_kernel") - ops_with("loop_fusible")  # arguments and constants: read as they are


def prologue_reads(outside: Sequence[Instruction], x: Instruction, weights: Sequence[Instruction],
                   inside: Callable[[Instruction], bool], recomputed: Callable[[Instruction], bool]) -> set[int]:
    """The buffers (ids) a gated pair's kernel normalizing its A tiles reads once its prologues join: what its
    members read now (outside) but the norm's input x and the weights, x's own reads where x is recomputed in
    the loads (a decode step's residual stream, from its embedding row and the GEMM outputs added to it), and
    each weight's where it is dequantized in its loads (packed bytes, scales, zero points)."""
    reads = {id(v) for v in outside if v is not x and all(v is not w for w in weights)}
    work, seen = [(x, False)] + [(w, True) for w in weights], set()
    while work:
        v, weight = work.pop()
        if id(v) in seen or (v.opcode == "constant" and "ref" not in v.attrs) or inside(v):
            continue
        seen.add(id(v))
        if v.opcode not in NO_KERNEL and (weight or recomputed(v)):
            work.extend((o, weight) for o in v.operands)
        else:
            reads.add(id(v))
    return reads


MAX_STATS_ELEMENTS = 1 << 16  # every program of the dot reads the whole activation for its min and max
SCALAR_SOURCES = ("constant", "reduce")


def quantized_rows(p: Instruction) -> Instruction | None:
    """The convert to u8 or s8 the dot's lhs p is a view of (through bitcasts), if any."""
    while p.opcode == "bitcast":
        p = p.operands[0]
    return p if p.opcode == "convert" and p.shape.dtype in ("u8", "s8") else None


def view_source(x: Instruction) -> Instruction:
    while x.opcode == "bitcast":
        x = x.operands[0]
    return x


def activation_stats(r: Instruction, x: Instruction) -> bool:
    """r is the f32 minimum or maximum of every element of x (through views, which hold the same elements)."""
    return (r.opcode == "reduce" and r.attrs.get("kind") in ("minimum", "maximum") and r.shape.rank == 0
            and r.shape.dtype == "f32" and list(r.attrs["dimensions"]) == list(range(r.operands[0].shape.rank))
            and view_source(r.operands[0]) is view_source(x))


def quantized_rows_cone(dot: Instruction, p: Instruction) -> tuple[list[Instruction], list[Instruction],
                                                                  Instruction | None, str | None]:
    """The instructions computing the dot's lhs p, a quantized activation convert(clamp(round(x / s) + z))
    seen through views: elementwise from one full-size f32 value x and rank-0 values (its scale and zero
    point, from inline constants and reductions); and those reductions of x to its min or max (each a
    candidate for the kernel's first pass), and x. Refused (with why) unless the dot has no batch dims and one
    contracting dim, every full-size member is read by nothing but the cone and the dot, and x is static."""
    if dot.attrs["lhs_batch_dims"] or len(dot.attrs["lhs_contracting_dims"]) != 1:
        return [], [], None, "the dot has batch dims or more than one contracting dim"
    q = quantized_rows(p)
    cone = [p]
    while cone[-1] is not q:
        cone.append(cone[-1].operands[0])
    seen: set[int] = {id(m) for m in cone}
    inside = set(seen)  # a full-size value with a user outside the chain is the activation itself (a GELU's)
    sources: list[Instruction] = []
    stats: list[Instruction] = []
    stack = list(q.operands)
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if v.opcode == "reduce" and v.shape.rank == 0:
            stats.append(v)
        elif (v.opcode in ELEMENTWISE_OPS and (v.shape.rank == 0 or all(id(u) in inside for u in v.users))) or (
                v.opcode == "constant" and "ref" not in v.attrs) or (
                v.opcode == "broadcast" and v.operands[0].shape.rank == 0):
            cone.append(v)
            inside.add(id(v))
            stack.extend(v.operands)
        else:
            sources.append(v)
    if any(s.shape.rank == 0 for s in sources):
        return [], [], None, "its scale or zero point is not computed from the activation's min and max"
    if len({id(view_source(s)) for s in sources}) != 1:
        return [], [], None, "it is not computed from one float activation"
    x = sources[0]
    if x.shape.dtype != "f32" or not x.shape.is_static:
        return [], [], None, "the activation is not a static f32 value"
    if not stats:  # a QuantizeLinear's constant scale: its u8 is stored by a kernel of its own, as it was
        return [], [], None, "its scale and zero point are not computed from the activation (not dynamic)"
    if not all(activation_stats(r, x) for r in stats):
        return [], [], None, "its scale or zero point comes from a reduction other than the activation's min or max"
    members = {id(m) for m in cone}
    for m in cone:
        if m.shape.rank > 0 and m.opcode != "broadcast" and m.opcode != "constant" and any(
                id(u) not in members and u is not dot for u in m.users):
            return [], [], None, f"%{m.name} has users other than the dot's lhs"
    if x.shape.numel() > MAX_STATS_ELEMENTS:
        stats = []  # the min and max stay a kernel of their own: a first pass per program would cost too much
    return cone, stats, x, None


def quantize_prologue_members(dot: Instruction, p: Instruction, busy: bool, contains: Callable[[Instruction], bool],
                              taken: Callable[[Instruction], bool], elsewhere: Callable[[Instruction], bool],
                              ) -> tuple[list[Instruction], list[Instruction], Instruction | None, str | None]:
    """What a dot's output fusion (contains: its members) takes to quantize its A tiles as it loads them: the
    cone's instructions it does not hold yet, and the activation's min and max reductions whose every use,
    through the rank-0 values computed from them, would be in the fusion and in no other (elsewhere: a value
    another fusion computes too); and the activation below its views (the fusion reads it as it is). Refused
    (with why) when the fusion is busy (its output tile holds a second accumulator or it computes its weight
    tiles) or a full-size member of the cone is taken (fused elsewhere or a model output)."""
    if busy:
        return [], [], None, "the output tile already holds a second accumulator or a weight prologue"
    cone, stats, x, why = quantized_rows_cone(dot, p)
    if why is not None:
        return [], [], None, why
    if any(taken(m) for m in cone if m.shape.rank > 0 and m.opcode != "broadcast"):
        return [], [], None, "the quantization is already fused elsewhere or is a model output"
    new = [m for m in cone if not contains(m)]
    ids = {id(m) for m in new}

    def only_here(r: Instruction) -> bool:
        stack, seen = [r], set()
        while stack:
            for u in stack.pop().users:
                if id(u) in seen:
                    continue
                seen.add(id(u))
                if not (contains(u) or id(u) in ids) or elsewhere(u):
                    return False
                if u.shape.rank == 0:
                    stack.append(u)
        return True
    return new, [r for r in stats if not taken(r) and only_here(r)], view_source(x), None
