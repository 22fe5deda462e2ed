"""Back-to-back GEMM fusion: a dot, its elementwise epilogue and the dot that reads it, in one kernel.

A transformer's FFN is dot1 -> epilogue (bias, GELU or SiLU, the gated silu(gate) * up pairing) -> dot2 ->
epilogue (bias, residual add, a following LayerNorm/RMSNorm when dot2's output row fits a tile). Fusion
(mlcc/hlo/passes/fusion.py) makes each dot an output fusion and stores the intermediate [M, N1] between
them. When a row of the intermediate is narrow (N1 <= MAX_B2B_WIDTH, the FFN width of the small models)
one kernel can keep it on chip, as CUTLASS's b2b GEMM does: each program takes BLOCK_M rows, computes
the intermediate a chunk of N1 columns at a time (dot1's K loop, then the epilogue), multiplies each chunk
by the matching rows of dot2's weight into dot2's accumulator, and applies dot2's epilogue at the end
(templates/b2b.py.jinja). The intermediate never reaches memory.

This pass runs after Fusion and merges such pairs into one fusion of kind ``b2b``::

    %fusion.gelu = f32[1,16,128]{2,1,0} fusion(%x, %w1), kind=output          (dot1 + GELU)
    %fusion.ln   = f32[1,16,64]{2,1,0} fusion(%fusion.gelu, %w2, %res), kind=output   (dot2 + add + LN)
 -> %fusion.ln   = f32[1,16,64]{2,1,0} fusion(%x, %w1, %w2, %res), kind=b2b

The consumer may be a bare dot, and row-major bitcasts may sit between the two. A pair is merged only
when the intermediate has no other user (the two fusions' chain is its only reader and it is no model
output), both dots are float dots without batch dims whose weights are read as they are (no weight
prologue), dot1's output columns are exactly dot2's contracted elements, at most MAX_B2B_WIDTH of them,
and dot2 holds no second accumulator. dot1 may normalize its A tiles (a norm prologue) and pair with a
second dot on the same lhs (a gated MLP). Each refusal is reported by ``--explain-fusion``.
"""

from __future__ import annotations

import math

from mlcc.hlo.ir import Computation, Instruction, Module
from mlcc.hlo.passes.a_prologue import MAX_NORM_ROW
from mlcc.hlo.passes.fusion import MAX_PARAMETERS, _unique_comp_name
from mlcc.hlo.passes.pass_manager import Pass

MAX_B2B_WIDTH = 256  # N1, dot1's output columns, the most a program's intermediate chunks span
FLOATS = ("f32", "f16", "bf16")
ROW_NORMS = ("layer-norm", "rms-norm")


def _views_below(x: Instruction) -> Instruction:
    while x.opcode == "bitcast":
        x = x.operands[0]
    return x


def _dots(inst: Instruction) -> list[Instruction]:
    """The dots an output fusion computes (or the bare dot itself)."""
    if inst.opcode == "dot":
        return [inst]
    if inst.opcode == "fusion" and inst.attrs.get("kind") == "output" and not inst.shape.is_tuple:
        return [i for i in inst.called.instructions if i.opcode == "dot"]
    return []


def _outer(fusion: Instruction, x: Instruction) -> Instruction | None:
    """The entry value a fusion's parameter x (through views) reads, or None if x is computed in the fusion."""
    if fusion.opcode != "fusion":
        return x
    x = _views_below(x)
    return fusion.operands[x.attrs["index"]] if x.opcode == "parameter" else None


def _plain(dot: Instruction) -> str | None:
    """Why dot cannot be one of a b2b kernel's two dots, if so."""
    a = dot.attrs
    if a["lhs_batch_dims"] or a["rhs_batch_dims"]:
        return "a dot with batch dims"
    if any(v.shape.dtype not in FLOATS for v in (*dot.operands, dot)):
        return f"a {dot.operands[0].shape.dtype} x {dot.operands[1].shape.dtype} dot (float dots only)"
    if not all(v.shape.is_static for v in (*dot.operands, dot)):
        return "symbolic dims"
    return None


def _numel(dims) -> int:
    return math.prod(int(d) for d in dims)


def chain_of(consumer: Instruction, outputs: set[int]) -> tuple[Instruction, list[Instruction], str | None] | None:
    """(producer, views between, why not) for a consumer (a bare dot or an output fusion with one dot) whose
    dot's lhs is another dot's output fusion's result; None where the lhs is no dot's result at all."""
    dots = _dots(consumer)
    if len(dots) != 1:
        return None
    dot2 = dots[0]
    x = _outer(consumer, dot2.operands[0])
    views: list[Instruction] = []
    while x is not None and x.opcode == "bitcast":
        views.append(x)
        x = x.operands[0]
    if x is None or not _dots(x):
        return None
    views.reverse()  # producer to consumer
    producer = x
    dots1 = _dots(producer)
    why = _why_not(consumer, dot2, producer, dots1, views, outputs)
    return producer, views, why


def _why_not(consumer: Instruction, dot2: Instruction, producer: Instruction, dots1: list[Instruction],
             views: list[Instruction], outputs: set[int]) -> str | None:
    chain = [producer, *views]
    for a, b in zip(chain, [*views, consumer]):
        if id(a) in outputs or [u for u in a.users] != [b]:
            return f"the intermediate %{a.name} has other users (it must stay on chip for the second dot alone)"
    if consumer.opcode == "fusion":
        reader = dot2
        x = dot2.operands[0]
        while True:
            if list(x.users) != [reader]:
                return "the second fusion reads the intermediate outside its dot too"
            if x.opcode != "bitcast":
                break
            reader, x = x, x.operands[0]
        if consumer.operands.count(chain[-1]) != 1:
            return "the second fusion reads the intermediate outside its dot too"
    for d in dots1 + [dot2]:
        why = _plain(d)
        if why is not None:
            return why
    dot1 = dots1[0]
    if len(dots1) > 2 or (len(dots1) == 2 and dots1[1].operands[0] is not dot1.operands[0]):
        return "the first fusion holds dots on different lhs"
    if producer.opcode == "fusion":
        for d in dots1:
            if _outer(producer, d.operands[1]) is None:
                return "the first dot computes its weight in its loads"
        if any(i.opcode in ROW_NORMS and i is not _views_below(dot1.operands[0]) for i in producer.called.instructions):
            return "the first fusion normalizes its output rows"
        a_norm = _views_below(dot1.operands[0])
        if a_norm.opcode in ROW_NORMS and int(a_norm.shape.dims[-1]) > MAX_NORM_ROW:
            return f"the first dot normalizes rows of {a_norm.shape.dims[-1]} elements in its A loads, more than " \
                   f"one K tile holds ({MAX_NORM_ROW}: a statistics loop the b2b kernel does not run)"
        if tuple(producer.called.root.shape.dims) != tuple(dot1.shape.dims):
            return "the first fusion's result is not at its dot's output dims"
    if _outer(consumer, dot2.operands[1]) is None:
        return "the second dot computes its weight in its loads"
    lc2 = list(dot2.attrs["lhs_contracting_dims"])
    lhs2 = dot2.operands[0].shape
    if lc2 != list(range(lhs2.rank - len(lc2), lhs2.rank)):
        return "the second dot contracts dims that are not its lhs's last"
    lc1 = list(dot1.attrs["lhs_contracting_dims"])
    m1 = _numel(d for i, d in enumerate(dot1.operands[0].shape.dims) if i not in lc1)
    n1 = _numel(dot1.shape.dims) // max(m1, 1)
    k2 = _numel(lhs2.dims[lhs2.rank - len(lc2):])
    if n1 != k2 or m1 * n1 != _numel(lhs2.dims):
        return f"the first dot's {n1} output columns are not the second dot's {k2} contracted elements"
    if n1 > MAX_B2B_WIDTH:
        return f"the intermediate's rows of {n1} elements are wider than {MAX_B2B_WIDTH} (MAX_B2B_WIDTH)"
    values = [producer.called.root if producer.opcode == "fusion" else producer, *views]
    if consumer.opcode == "fusion":
        x = dot2.operands[0]
        while x.opcode == "bitcast":
            values.append(x)
            x = x.operands[0]
        values.append(x)
    if not all(v.shape.is_row_major() for v in values):
        return "a view between the dots is not row-major"
    return None


class B2bFusion(Pass):
    name = "b2b-fusion"

    def __init__(self, kinds: frozenset[str] = frozenset({"b2b"})) -> None:
        self.kinds = kinds  # the fusion kinds the backend has kernels for

    def run(self, module: Module) -> bool:
        if "b2b" not in self.kinds:
            return False
        comp = module.entry
        root = comp.root
        outputs = {id(o) for o in root.operands} if root is not None and root.opcode == "tuple" else set()
        if root is not None and root.opcode != "tuple":
            outputs.add(id(root))
        changed = False
        notes: list[str] = []
        for inst in list(comp.instructions):
            if inst.parent is not comp:
                continue
            found = chain_of(inst, outputs)
            if found is None:
                continue
            producer, views, why = found
            if why is None:
                stale = _edge_prefixes(inst, producer, views)
                merged = _merge(module, comp, inst, producer, views)
                if merged is None:
                    why = f"the kernel would read more than {MAX_PARAMETERS} buffers"
                else:  # Fusion's word on the edge into the second dot (read from memory as it is) is moot now
                    module.analyses.fusion_explanations = [
                        line for line in module.analyses.fusion_explanations if not line.startswith(stale)]
                    changed = True
                    continue
            notes.append(f"%{producer.name} -> %{inst.name}: not fused back to back (b2b): {why}")
        module.analyses.fusion_explanations = list(module.analyses.fusion_explanations) + notes
        return changed


def _edge_prefixes(consumer: Instruction, producer: Instruction, views: list[Instruction]) -> tuple[str, ...]:
    """How Fusion's explanations of the edge into the second dot begin: the dot's lhs as it was in the entry
    (the first fusion's root or a view of it, by the names fusion bodies keep) -> the dot."""
    (dot2,) = _dots(consumer)
    names = [producer.called.root.name if producer.opcode == "fusion" else producer.name, *(v.name for v in views)]
    x = dot2.operands[0]
    while x.opcode == "bitcast":
        names.append(x.name)
        x = x.operands[0]
    return tuple(f"%{n} -> %{dot2.name}:" for n in names)


def _merge(module: Module, comp: Computation, consumer: Instruction, producer: Instruction,
           views: list[Instruction]) -> Instruction | None:
    """One b2b fusion computing consumer with producer (and the views between) inlined; None if it would read
    too many buffers. Parameters are numbered in the order a walk from the root first reads them (as Fusion
    numbers them), so two layers' FFNs are one kernel."""
    root = consumer.called.root if consumer.opcode == "fusion" else consumer
    body = Computation(_unique_comp_name(module, f"fused_b2b.{root.name}"))
    inline = {id(producer), *(id(v) for v in views)}
    params: list[Instruction] = []
    param_of: dict[int, Instruction] = {}
    clone: dict[tuple[int, int], Instruction] = {}

    def outer(x: Instruction) -> Instruction:  # an entry value read by the merged kernel
        if id(x) in inline:
            return inner(x, None)
        found = param_of.get(id(x))
        if found is None:
            found = body.add(Instruction(f"param_{len(params)}", "parameter", x.shape, (), {"index": len(params)}))
            param_of[id(x)] = found
            params.append(x)
        return found

    def inner(x: Instruction, fusion: Instruction | None) -> Instruction:  # x of fusion's body (or the entry's)
        key = (id(x), id(fusion))
        if key in clone:
            return clone[key]
        if x.opcode == "fusion" and fusion is None:
            made = inner(x.called.root, x)
        elif x.opcode == "parameter" and fusion is not None:
            made = outer(fusion.operands[x.attrs["index"]])
        else:
            operands = [inner(o, fusion) if fusion is not None or id(o) in inline else outer(o) for o in x.operands]
            made = body.add(Instruction(body.unique_name(x.name), x.opcode, x.shape, operands, x.attrs, x.called,
                                        x.origin))
        clone[key] = made
        return made

    if consumer.opcode == "fusion":
        body.root = inner(root, consumer)
    else:  # a bare dot: its lhs through the inlined chain, its rhs a parameter
        lhs, rhs = inner(consumer.operands[0], None), outer(consumer.operands[1])
        body.root = body.add(Instruction(body.unique_name(consumer.name), "dot", consumer.shape, [lhs, rhs],
                                         consumer.attrs, None, consumer.origin))
    if len(params) > MAX_PARAMETERS:
        return None
    body.instructions = body.parameters() + [i for i in body.instructions if i.opcode != "parameter"]
    module.add_computation(body)
    origin = tuple(dict.fromkeys(producer.origin + tuple(o for v in views for o in v.origin) + consumer.origin))
    name = consumer.name if consumer.opcode == "fusion" else comp.unique_name(f"fusion.{consumer.name}")
    merged = comp.insert_before(consumer, Instruction(name, "fusion", consumer.shape, params, {"kind": "b2b"},
                                                      body, origin))
    consumer.replace_all_uses_with(merged)
    gone = [consumer, *reversed(views), producer]
    for x in gone:
        comp.remove(x)
    module.computations = [c for c in module.computations
                           if not any(x.opcode == "fusion" and c is x.called for x in gone)]
    return merged

