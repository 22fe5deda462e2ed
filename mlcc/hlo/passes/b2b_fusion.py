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
output), both dots are without batch dims, dot1's output columns are exactly dot2's contracted elements, at
most MAX_B2B_WIDTH of them, and dot2 holds no second accumulator. dot1 may normalize its A tiles (a norm
prologue) and pair with a second dot on the same lhs (a gated MLP). The rows (the lhs's free dims) may be
symbolic, as a model's batch or sequence is; the weights and a row's elements must be static. Quantized
builds take it too:
- float dots may compute their weights as they load them (a weight prologue: a 4/8-bit weight-only
  decoder's packed bytes unpacked, zero point subtracted, block scale applied; MatMulNBits or blocked int4
  DequantizeLinear), in both dots and in the gated pair: the kernel dequantizes each weight tile in
  registers, so neither the weights nor the intermediate reach memory;
- or both dots are 8-bit integer contractions (u8/s8 x s8 -> s32, quantized_dot.py) whose operands are
  read as stored: dot1's epilogue (dequantize, bias, GELU, requantize) leaves the intermediate as u8/s8 on
  chip, the second integer product's lhs. Not with a dynamic quantization (its scale is the min and max of
  the whole intermediate), nor one float and one integer dot.
Each refusal is reported by ``--explain-fusion``.
"""

from __future__ import annotations

from mlcc.hlo.ir import Computation, Instruction, Module
from mlcc.hlo.passes.a_prologue import MAX_NORM_ROW
from mlcc.hlo.passes.fusion import MAX_PARAMETERS, _unique_comp_name
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.symbolic import Sym, as_sym, product

MAX_B2B_WIDTH = 256  # N1, dot1's output columns, the most a program's intermediate chunks span
FLOATS = ("f32", "f16", "bf16")
INT8 = ("s8", "u8")
ROW_NORMS = ("layer-norm", "rms-norm")
HEAVY = ("dot", "convolution", "reduce", "reduce-window", "gather", "scatter", "sort", *ROW_NORMS)


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
    if not _float(dot) and not _int8(dot):
        return f"a {dot.operands[0].shape.dtype} x {dot.operands[1].shape.dtype} dot (float dots or 8-bit ones only)"
    if not dot.operands[1].shape.is_static:  # so are the contracted dims (and a row of the result): rows alone vary
        return "a weight of symbolic dims"
    return None


def _computed_weight(fusion: Instruction, dot: Instruction, which: str) -> str | None:
    """Why dot's weight, computed from the fusion's parameters as it is loaded (a weight prologue: a packed
    4- or 8-bit weight unpacked, its zero point subtracted and its scale applied per block), cannot be computed
    in a b2b kernel's weight loads too, if so; None for a weight read as stored."""
    if _outer(fusion, dot.operands[1]) is not None:
        return None
    if len(dot.attrs["rhs_contracting_dims"]) != 1:
        return f"the {which} dot computes its weight in its loads over more than one contracting dim"
    work, seen = [dot.operands[1]], set()
    while work:
        x = work.pop()
        if id(x) in seen or x.opcode == "parameter":
            continue
        seen.add(id(x))
        if x.opcode in HEAVY:
            return f"the {which} dot's weight is computed with a {x.opcode} (elementwise weight loads only)"
        work.extend(x.operands)
    return None


def _float(dot: Instruction) -> bool:
    return all(v.shape.dtype in FLOATS for v in (*dot.operands, dot))


def _int8(dot: Instruction) -> bool:
    """An s8/u8 x s8/u8 -> s32 contraction (mlcc/hlo/passes/quantized_dot.py), exact on the integer tensor cores."""
    return all(v.shape.dtype in INT8 for v in dot.operands) and dot.shape.dtype == "s32"


def _integer_pair(consumer: Instruction, dot2: Instruction, producer: Instruction,
                  dots1: list[Instruction]) -> str | None:
    """Why two dots, at least one of them 8-bit, cannot be a b2b kernel's pair, if so: both must be 8-bit (the
    intermediate requantized to 8 bits by the first dot's epilogue on chip and fed to the second's integer
    tensor-core product), with their operands read as stored, one dot on the first lhs, and no first pass over
    an activation (a dynamic quantization's min and max span the whole intermediate)."""
    if not all(_int8(d) for d in (*dots1, dot2)):
        return "one dot multiplies 8-bit integers, the other floats"
    if len(dots1) > 1:
        return "two 8-bit dots on the first lhs"
    for fusion, d in ((producer, dots1[0]), (consumer, dot2)):
        if fusion.opcode != "fusion":
            continue
        if any(i.opcode == "reduce" for i in fusion.called.instructions):
            return "a dot quantizes its activations with their min and max (a pass over all of them first)"
        if _outer(fusion, d.operands[1]) is None:
            return "an 8-bit dot computes its weight in its loads"
    if producer.opcode == "fusion" and _outer(producer, dots1[0].operands[0]) is None:
        return "the first 8-bit dot computes its lhs in its loads"
    return None


def _numel(dims) -> Sym:
    """The element count of dims, symbolic where one is (a b2b kernel's rows may be)."""
    return as_sym(product(list(dims)))


def chain_of(consumer: Instruction, outputs: set[int]) -> tuple[Instruction, list[Instruction], str | None] | None:
    """(producer, views between, why not) for a consumer (a bare dot or an output fusion with one dot) whose
    dot's lhs is another dot's output fusion's result; None where the lhs is no dot's result at all."""
    dots = _dots(consumer)
    if len(dots) != 1:
        return None
    dot2 = dots[0]
    x = _outer(consumer, dot2.operands[0])
    if x is None:  # a norm prologue's dot2 is no pair's and needs no word; a quantizing one's is explained
        return _computed_lhs(consumer, dot2) if _int8(dot2) else None
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


def _computed_lhs(consumer: Instruction, dot2: Instruction) -> tuple[Instruction, list[Instruction], str] | None:
    """(producer, no views, why not) where the second (8-bit) dot computes its lhs from a dot's result as it
    loads it (the activation quantized in the A loads, as a dynamic quantization's is); None where no dot's
    result is read there."""
    work, seen, reduces = [dot2.operands[0]], set(), False
    sources: list[Instruction] = []
    while work:
        x = work.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.opcode == "parameter":
            outer = _views_below(consumer.operands[x.attrs["index"]])
            if _dots(outer) and outer not in sources:
                sources.append(outer)
            continue
        reduces = reduces or x.opcode == "reduce"
        work.extend(x.operands)
    if len(sources) != 1:
        return None
    why = ("the second dot quantizes the intermediate with the min and max of all of it (a dynamic "
           "quantization: a pass over the whole intermediate first)") if reduces else \
        "the second dot quantizes the intermediate as it loads it"
    return sources[0], [], why


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
    if not all(_float(d) for d in (*dots1, dot2)):
        why = _integer_pair(consumer, dot2, producer, dots1)
        if why is not None:
            return why
    if len(dots1) > 2 or (len(dots1) == 2 and dots1[1].operands[0] is not dot1.operands[0]):
        return "the first fusion holds dots on different lhs"
    if producer.opcode == "fusion":
        for d in dots1:
            why = _computed_weight(producer, d, "first")
            if why is not None:
                return why
        if any(i.opcode in ROW_NORMS and i is not _views_below(dot1.operands[0]) for i in producer.called.instructions):
            return "the first fusion normalizes its output rows"
        a_norm = _views_below(dot1.operands[0])
        if a_norm.opcode in ROW_NORMS and int(a_norm.shape.dims[-1]) > MAX_NORM_ROW:
            return f"the first dot normalizes rows of {a_norm.shape.dims[-1]} elements in its A loads, more than " \
                   f"one K tile holds ({MAX_NORM_ROW}: a statistics loop the b2b kernel does not run)"
        if tuple(producer.called.root.shape.dims) != tuple(dot1.shape.dims):
            return "the first fusion's result is not at its dot's output dims"
    why = _computed_weight(consumer, dot2, "second")
    if why is not None:
        return why
    lc2 = list(dot2.attrs["lhs_contracting_dims"])
    lhs2 = dot2.operands[0].shape
    if lc2 != list(range(lhs2.rank - len(lc2), lhs2.rank)):
        return "the second dot contracts dims that are not its lhs's last"
    lc1 = list(dot1.attrs["lhs_contracting_dims"])
    rc1 = list(dot1.attrs["rhs_contracting_dims"])
    m1 = _numel(d for i, d in enumerate(dot1.operands[0].shape.dims) if i not in lc1)
    n1 = _numel(d for i, d in enumerate(dot1.operands[1].shape.dims) if i not in rc1).value  # a static weight's
    k2 = _numel(lhs2.dims[lhs2.rank - len(lc2):]).value  # static (_plain): the intermediate's row
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
        outputs = comp.returned_ids()
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

