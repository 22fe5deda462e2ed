"""Merge sibling matmuls: dots that read the same activation with constant weights become one dot
over the concatenated weights (Q, K and V projections in one kernel), each sibling a slice of it.

    q = dot(x, Wq) + bq;  k = dot(x, Wk) + bk;  v = dot(x, Wv) + bv
 -> qkv = dot(x, [Wq|Wk|Wv]) + [bq|bk|bv];  q, k, v = slices of qkv

The weights (and biases) are concatenated at compile time: the weights lazily (mlcc/hlo/lazy_constants.py),
so a model's mapped weights are not copied into memory to make the merged one. The slices are views: a consumer that
reads through strides (attention) reads them in place. Only 2-D weights [K, N] contracted on K; or weights computed
from packed constants (MatMulNBits' [N, K], an int4 blocked DequantizeLinear's [K, N]), whose constants are
concatenated instead and the chain computing the weight rebuilt over them (mlcc/hlo/passes/sibling_chains.py).
Two siblings combined elementwise (a gated MLP's gate and up projections) stay apart: the fusion pass
accumulates both in one output tile.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Computation, Instruction, Module, Shape
from mlcc.hlo.lazy_constants import ConcatenatedWeights
from mlcc.hlo.opcodes import ELEMENTWISE_OPS
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.passes.sibling_chains import build_chain, plan_chains


def _weight(inst: Instruction, module: Module) -> np.ndarray | None:
    if inst.opcode != "constant" or inst.shape.rank != 2:
        return None
    dt = numpy_dtype(inst.shape.dtype)
    if "ref" in inst.attrs:
        value = module.constants[inst.attrs["ref"]]
        if isinstance(value, ConcatenatedWeights) and value.dtype == dt:
            return value.reshape(tuple(inst.shape.dims))
        return np.asarray(value, dtype=dt).reshape(inst.shape.dims)  # a view of a mapped weight, not a copy
    if "value" in inst.attrs:
        return np.array(inst.attrs["value"], dtype=dt).reshape(inst.shape.dims)
    if "splat" in inst.attrs:
        return np.full(inst.shape.dims, inst.attrs["splat"], dtype=dt)
    return None


def _sibling(dot: Instruction, x: Instruction) -> bool:
    a = dot.attrs
    return (dot.opcode == "dot" and dot.operands[0] is x and not a["lhs_batch_dims"] and not a["rhs_batch_dims"]
            and tuple(a["lhs_contracting_dims"]) == (x.shape.rank - 1,) and tuple(a["rhs_contracting_dims"]) == (0,)
            and dot.operands[1].opcode == "constant" and dot.operands[1].shape.rank == 2)


def _computed_sibling(dot: Instruction, x: Instruction) -> bool:
    """dot reads x as its lhs, contracted on its last dim, by a [K, N] or [N, K] weight some chain computes."""
    if dot.opcode != "dot" or dot.operands[0] is not x:
        return False
    a, w = dot.attrs, dot.operands[1]
    return (not a["lhs_batch_dims"] and not a["rhs_batch_dims"] and w.opcode != "constant" and w.shape.rank == 2
            and tuple(a["lhs_contracting_dims"]) == (x.shape.rank - 1,) and len(a["rhs_contracting_dims"]) == 1)


def _bias(dot: Instruction, module: Module) -> tuple[Instruction, np.ndarray] | None:
    """dot's only user, when it is add(dot, broadcast(c)) with c a constant vector along the last dim."""
    if len(dot.users) != 1:
        return None
    add = dot.users[0]
    if add.opcode != "add" or add.operands[0] is not dot:
        return None
    b = add.operands[1]
    if b.opcode != "broadcast" or tuple(b.attrs["dimensions"]) != (dot.shape.rank - 1,):
        return None
    c = b.operands[0]
    if c.opcode != "constant" or c.shape.rank != 1:
        return None
    if "ref" in c.attrs:
        return add, np.asarray(module.constants[c.attrs["ref"]]).reshape(-1)
    if "splat" in c.attrs:
        return add, np.full(c.shape.dims, c.attrs["splat"])
    return add, np.array(c.attrs["value"])


def _elementwise_users(inst: Instruction, depth: int = 4) -> set[int]:
    """The instructions inst reaches through at most ``depth`` elementwise ops."""
    found: set[int] = set()
    frontier = [inst]
    for _ in range(depth):
        frontier = [u for i in frontier for u in i.users if u.opcode in ELEMENTWISE_OPS and id(u) not in found]
        found.update(id(u) for u in frontier)
    return found


def _gated_pair(dots: list[Instruction]) -> bool:
    """Two dots combined elementwise (a gated MLP: silu(x @ Wg) * (x @ Wu)): the fusion pass computes both
    in one output tile with two accumulators and stores only their combination, which merging them (one
    [.., 2F] result, then a kernel reading its two halves) would prevent."""
    return len(dots) == 2 and bool(_elementwise_users(dots[0]) & _elementwise_users(dots[1]))


class MergeSiblingDots(Pass):
    name = "merge-sibling-dots"

    def run(self, module: Module) -> bool:
        comp = module.entry
        changed = False
        for x in list(comp.instructions):
            if x.parent is not comp or x.shape.is_tuple:
                continue
            changed |= self._merge_computed(module, comp, x)
            dots = [u for u in x.users if _sibling(u, x)]
            results, operands = {d.shape.dtype for d in dots}, {d.operands[1].shape.dtype for d in dots}
            if len(dots) < 2 or len(results) != 1 or len(operands) != 1 or _gated_pair(dots):
                continue  # (an int8 dot's s8 weights and s32 result differ: quantized siblings merge too)
            weights = [_weight(d.operands[1], module) for d in dots]
            if any(w is None for w in weights):
                continue
            biases = [_bias(d, module) for d in dots]
            with_bias = all(b is not None for b in biases)
            self._merge(module, comp, x, dots, weights, biases if with_bias else None)
            changed = True
        return changed

    def _merge_computed(self, module: Module, comp: Computation, x: Instruction) -> bool:
        """Merge x's sibling dots whose weights are computed from packed constants (sibling_chains.py)."""
        groups: dict[tuple, list[Instruction]] = {}
        for u in x.users:
            if _computed_sibling(u, x):
                key = (tuple(u.attrs["rhs_contracting_dims"]), u.shape.dtype, u.operands[1].shape.dtype)
                groups.setdefault(key, []).append(u)
        changed = False
        for key, dots in groups.items():
            if len(dots) < 2 or _gated_pair(dots):
                continue
            ws = [d.operands[1] for d in dots]
            plan = plan_chains(ws, 1 - key[0][0], module)
            if plan is None or not (plan.packed and plan.unpacks):
                continue
            biases = [_bias(d, module) for d in dots]
            anchor = self._anchor(comp, dots)
            wc = build_chain(comp, module, anchor, ws, plan)
            self._merge(module, comp, x, dots, [int(d.shape.dims[-1]) for d in dots],
                        biases if all(b is not None for b in biases) else None, wc)
            changed = True
        return changed

    @staticmethod
    def _anchor(comp: Computation, dots: list[Instruction]) -> Instruction:
        last = max(comp.instructions.index(d) for d in dots)
        return comp.instructions[last + 1] if last + 1 < len(comp.instructions) else comp.root

    def _merge(self, module: Module, comp: Computation, x: Instruction, dots: list[Instruction],
               weights: list[np.ndarray] | list[int], biases: list[Any] | None,
               wc: Instruction | None = None) -> None:
        """Replace dots by one dot over their weights concatenated (constant weights, or ``wc`` computing
        them: then ``weights`` are the dots' output widths) and slices of its result."""
        dtype = dots[0].shape.dtype
        anchor = self._anchor(comp, dots)
        origin = tuple(dict.fromkeys(o for d in dots for o in d.origin))
        if wc is None:
            w = ConcatenatedWeights(weights, axis=1)  # its parts until the writer streams it (weights.bin)
            key = _fresh_key(module, "merged_weights")
            module.constants[key] = w
            wc = comp.insert_before(anchor, Instruction(comp.unique_name("merged_weights"), "constant",
                                                        Shape(dots[0].operands[1].shape.dtype, w.shape),
                                                        attrs={"ref": key}))
        widths = [int(wt) if isinstance(wt, int) else int(wt.shape[1]) for wt in weights]
        dims = tuple(x.shape.dims[:-1]) + (sum(widths),)
        merged = comp.insert_before(anchor, Instruction(comp.unique_name(dots[0].name), "dot", Shape(dtype, dims),
                                                        [x, wc], dict(dots[0].attrs), origin=origin))
        targets: list[Instruction] = list(dots)
        if biases is not None:
            b = np.concatenate([np.asarray(bb[1], dtype=numpy_dtype(dtype)) for bb in biases])
            bkey = _fresh_key(module, "merged_bias")
            module.constants[bkey] = b
            bc = comp.insert_before(anchor, Instruction(comp.unique_name("merged_bias"), "constant",
                                                        Shape(dtype, b.shape), attrs={"ref": bkey}))
            bb = comp.insert_before(anchor, Instruction(comp.unique_name("merged_bias.bcast"), "broadcast",
                                                        Shape(dtype, dims), [bc], {"dimensions": (len(dims) - 1,)}))
            add_origin = tuple(dict.fromkeys(o for a, _ in biases for o in a.origin))
            merged = comp.insert_before(anchor, Instruction(comp.unique_name(biases[0][0].name), "add",
                                                            Shape(dtype, dims), [merged, bb], origin=add_origin))
            targets = [a for a, _ in biases]
        start = 0
        rank = len(dims)
        for t, n in zip(targets, widths):
            sl = comp.insert_before(anchor, Instruction(
                comp.unique_name(f"{t.name}.slice"), "slice", Shape(dtype, dims[:-1] + (n,)), [merged],
                {"start_indices": (0,) * (rank - 1) + (start,), "limit_indices": dims[:-1] + (start + n,),
                 "strides": (1,) * rank}, origin=t.origin))
            t.replace_all_uses_with(sl)
            start += n
        for t in targets:  # the old adds and dots are dead now (DCE takes their broadcasts and weights)
            if t.parent is comp and not t.users:
                comp.remove(t)
        for d in dots:
            if d.parent is comp and not d.users:
                comp.remove(d)
        comp.topological_sort()


def _fresh_key(module: Module, hint: str) -> str:
    key, n = hint, 0
    while key in module.constants:
        n += 1
        key = f"{hint}.{n}"
    return key
