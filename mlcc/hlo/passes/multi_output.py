"""Multi-output fusion: one kernel writes several results (XLA's multi-output fusion, after instruction fusion).

Fusion gives every group one result. A decoder step's present KV cache, ``concat(past, new k or v)``, is a
model output and the attention's k (or v) at once: fusion leaves it to a loop kernel of its own, which
reads the past cache and the new row and stores the present, and the attention kernel reads the present
again. This pass merges such a loop fusion into the attention fusion that reads it as k or v: the attention
kernel computes each k and v tile from the past cache and the new row as it loads it (as it computes any
k or v from its inputs) and stores it into the present cache too, so the concatenation launches nothing
and the present is read back by no one.

The merged fusion returns a tuple: the attention's result (or its epilogue's) first, then each cache::

    %fusion.attention = (f32[1,4,1,8]{3,2,1,0}, f32[1,4,16,8]{3,2,1,0}) fusion(...), kind=attention, ...
    %attention = f32[1,4,1,8]{3,2,1,0} get-tuple-element(%fusion.attention), index=0
    %concatenate = f32[1,4,16,8]{3,2,1,0} get-tuple-element(%fusion.attention), index=1

and the buffers of the get-tuple-elements are what its kernel writes (mlcc/hlo/buffer_assignment.py).
A loop fusion joins only when its result is exactly the attention's k or v (same shape and layout: the
kernel stores each tile at the coordinates it loaded it from), it is a model output read by nothing but
the attention and the entry's root, and the attention is not fake-quantized (whose two passes over the
keys would store twice).
"""

from __future__ import annotations

from mlcc.hlo.ir import Computation, Instruction, Module, TupleShape
from mlcc.hlo.passes.fusion import MAX_PARAMETERS, _unique_comp_name
from mlcc.hlo.passes.pass_manager import Pass


class MultiOutputFusion(Pass):
    name = "multi-output-fusion"

    def __init__(self, kinds: frozenset[str] = frozenset({"attention"})) -> None:
        self.kinds = kinds  # the fusion kinds the backend has kernels for

    def run(self, module: Module) -> bool:
        if "attention" not in self.kinds:
            return False
        comp = module.entry
        root = comp.root
        if root is None or root.opcode != "tuple":
            return False  # no model output to merge
        outputs = {id(o) for o in root.operands}
        changed = False
        for inst in list(comp.instructions):
            fusion = inst
            tried: set[int] = set()
            while fusion.parent is comp:
                producer = next((p for p in _candidates(fusion, outputs, root) if id(p) not in tried), None)
                if producer is None:
                    break
                tried.add(id(producer))
                merged = _merge(module, comp, fusion, producer)
                if merged is not None:
                    _drop_explanations(module, producer, merged)
                    fusion = merged
                    changed = True
        return changed


def attention_of(fusion: Instruction) -> Instruction | None:
    """The attention op of an attention fusion, if it has exactly one."""
    if fusion.opcode != "fusion" or fusion.attrs.get("kind") != "attention" or fusion.called is None:
        return None
    found = [i for i in fusion.called.instructions if i.opcode == "attention"]
    return found[0] if len(found) == 1 else None


def _candidates(fusion: Instruction, outputs: set[int], root: Instruction) -> list[Instruction]:
    """Loop fusions that may become results of this attention fusion: the one whose result the attention reads
    as k or v, and a model output computed from values the fusion reads (a small cache, which the attention
    fusion recomputes as its k or v: _merge keeps it only if it is)."""
    heavy = attention_of(fusion)
    if heavy is None or "score_quant" in heavy.attrs or "prob_quant" in heavy.attrs:
        return []
    found: list[Instruction] = []
    for i in (1, 2):
        param = heavy.operands[i]
        if param.opcode == "parameter" and list(param.users) == [heavy] and heavy.operands.count(param) == 1:
            found.append(fusion.operands[param.attrs["index"]])
    reads = {id(o) for o in fusion.operands}
    found += [o for o in root.operands if o not in found and o.opcode == "fusion"
              and all(id(x) in reads for x in o.operands)]
    return [p for p in found if p.opcode == "fusion" and p.attrs.get("kind") == "loop" and not p.shape.is_tuple
            and id(p) in outputs and all(u is fusion or u is root for u in p.users)]


def _merge(module: Module, comp: Computation, fusion: Instruction, producer: Instruction) -> Instruction | None:
    """fusion with producer's computation inlined and its result appended to fusion's results; the entry's
    readers of either read through get-tuple-element. None (nothing changed) if it would read too many
    buffers or the producer's result is not the attention's k or v (what the kernel stores)."""
    body = Computation(_unique_comp_name(module, f"{fusion.called.name}.merged"))
    results = list(fusion.called.root.operands) if fusion.shape.is_tuple else [fusion.called.root]
    inliner = _Inliner(body, fusion, producer)
    elements = [inliner.value(r) for r in results] + [inliner.value(producer.called.root)]
    heavy = inliner.value(attention_of(fusion))
    if len(inliner.params) > MAX_PARAMETERS or elements[-1] in elements[:-1] or \
            not any(elements[-1] is heavy.operands[i] for i in (1, 2)) or elements[-1].shape != producer.shape:
        return None  # too many buffers, or the producer's result is not the attention's k or v as laid out
    shape = TupleShape(tuple(e.shape for e in elements))
    body.root = body.add(Instruction(body.unique_name("tuple"), "tuple", shape, elements))
    body.instructions = body.parameters() + [i for i in body.instructions if i.opcode != "parameter"]
    module.add_computation(body)
    origin = tuple(dict.fromkeys(fusion.origin + producer.origin))
    merged = comp.insert_before(fusion, Instruction(fusion.name, "fusion", shape, inliner.params, dict(fusion.attrs),
                                                    body, origin))
    # every result read out of the merged fusion, in order: fusion's (its get-tuple-elements, or itself), then
    # the producer's; each new get-tuple-element takes the place and the name of what it replaces
    if fusion.shape.is_tuple:
        olds = sorted((u for u in fusion.users if u.opcode == "get-tuple-element"), key=lambda u: u.attrs["index"])
    else:
        olds = [fusion]
    olds.append(producer)
    for old in olds:
        index = old.attrs["index"] if old.opcode == "get-tuple-element" else (0 if old is fusion else len(results))
        name = old.name if old.opcode == "get-tuple-element" else comp.unique_name(elements[index].name)
        gte = comp.insert_before(fusion, Instruction(name, "get-tuple-element", elements[index].shape, [merged],
                                                     {"index": index}, origin=old.origin))
        old.replace_all_uses_with(gte)
        if old.opcode == "get-tuple-element":
            comp.remove(old)
    comp.remove(fusion)
    comp.remove(producer)
    module.computations = [c for c in module.computations if c is not fusion.called and c is not producer.called]
    body.name = fusion.called.name  # the attention fusion's body, grown: its name is free again
    return merged


class _Inliner:
    """Clones fusion's computation into body, with producer's computation in place of the parameter that
    read producer's result. Parameters are numbered in the order the clone first reads them (as Fusion
    numbers them: fusions computing the same thing get the same body, hence one kernel), a value both
    computations read is one parameter, and an instruction both compute (a view of the shared QKV
    projection) is cloned once."""

    def __init__(self, body: Computation, fusion: Instruction, producer: Instruction) -> None:
        self.body, self.fusion, self.producer = body, fusion, producer
        self.params: list[Instruction] = []        # the merged fusion's operands, in parameter order
        self._param_of: dict[int, Instruction] = {}  # id(outer value) -> its parameter in body
        self._clone: dict[int, Instruction] = {}     # id(instruction of either body) -> its clone
        self._same: dict[tuple, Instruction] = {}    # (opcode, shape, operands, attrs) -> the clone computing it

    def value(self, start: Instruction) -> Instruction:
        stack: list[tuple[Instruction, int]] = [(start, 0)]  # post-order, operands in order: no recursion
        while stack:
            inst, i = stack.pop()
            if id(inst) in self._clone:
                continue
            if inst.opcode == "parameter":
                owner = self.fusion if inst.parent is self.fusion.called else self.producer
                outer = owner.operands[inst.attrs["index"]]
                if outer is not self.producer:
                    self._clone[id(inst)] = self._parameter(outer, inst)
                    continue
                inner = self.producer.called.root  # the producer's result: its computation, inlined
                if id(inner) in self._clone:
                    self._clone[id(inst)] = self._clone[id(inner)]
                else:
                    stack += [(inst, 0), (inner, 0)]  # back to it once the producer's root is cloned
                continue
            if i < len(inst.operands):
                stack.append((inst, i + 1))
                stack.append((inst.operands[i], 0))
                continue
            operands = [self._clone[id(o)] for o in inst.operands]
            key = (inst.opcode, str(inst.shape), tuple(id(o) for o in operands), repr(sorted(inst.attrs.items())))
            clone = self._same.get(key)
            if clone is None:
                clone = self.body.add(Instruction(self.body.unique_name(inst.name), inst.opcode, inst.shape,
                                                  operands, inst.attrs, inst.called, inst.origin))
                self._same[key] = clone
            self._clone[id(inst)] = clone
        return self._clone[id(start)]

    def _parameter(self, outer: Instruction, param: Instruction) -> Instruction:
        found = self._param_of.get(id(outer))
        if found is None:
            index = len(self.params)
            found = self.body.add(Instruction(f"param_{index}", "parameter", param.shape, (), {"index": index}))
            self._param_of[id(outer)] = found
            self.params.append(outer)
        return found


def _drop_explanations(module: Module, producer: Instruction, fusion: Instruction) -> None:
    """Fusion explained why the producer's result stayed a kernel of its own: it is fused now."""
    heavy = attention_of(fusion)
    prefix = f"%{producer.called.root.name} -> %{heavy.name}:" if heavy is not None else None
    module.analyses.fusion_explanations = [line for line in module.analyses.fusion_explanations
                                           if prefix is None or not line.startswith(prefix)]
