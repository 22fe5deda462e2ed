"""KV-cache analysis: find decoder caches, the inputs a step extends and returns.

A cache is an entry parameter that reaches a `concatenate` (through views and copies) whose
result reaches an entry output: the past keys/values in, the present ones out. The tokens are
the concatenated dim; with a symbolic past length (``past``) the ranges are size expressions
(``[0, "past"]``, ``["past", "past+1"]``). Recorded in module.analyses.kv_cache for the memory-intent sidecar; the
module is not changed.
"""

from __future__ import annotations

from mlcc.hlo.analyses import KvCache
from mlcc.hlo.ir import Instruction, Module
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.symbolic import as_sym, dim_of

VIEWS = ops_with("one_to_one")  # a cache flowing through these is still the cache


def _source(inst: Instruction) -> Instruction:
    while inst.opcode in VIEWS:
        inst = inst.operands[0]
    return inst


def _reaches_output(inst: Instruction, outputs: dict[int, int]) -> int | None:
    work = [inst]
    seen: set[int] = set()
    while work:
        v = work.pop()
        if id(v) in outputs:
            return outputs[id(v)]
        if id(v) in seen:
            continue
        seen.add(id(v))
        work.extend(u for u in v.users if u.opcode in VIEWS)
    return None


class KvCacheAnalysis(Pass):
    name = "kv-cache-analysis"

    def run(self, module: Module) -> bool:
        comp = module.entry
        root = comp.root
        outputs = {id(o): i for i, o in enumerate(root.operands)} if root is not None and root.opcode == "tuple" else {}
        found: dict[str, KvCache] = {}
        for inst in comp.instructions:
            if inst.opcode != "concatenate":
                continue
            axis = inst.attrs["dimension"]
            out = _reaches_output(inst, outputs)
            if out is None:
                continue
            start = as_sym(0)
            for op in inst.operands:
                src = _source(op)
                stop = start + as_sym(op.shape.dims[axis])
                if src.opcode == "parameter":
                    found[src.name] = KvCache(src.attrs.get("name", src.name), out, [dim_of(start), dim_of(stop)],
                                              axis, [0, inst.shape.dims[axis]])
                start = stop
        module.analyses.kv_cache = found
        return False
