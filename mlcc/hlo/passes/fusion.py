"""Fusion: merge producers into consumers so intermediates never round-trip through memory.

Kinds (XLA's, plus attention):
- loop: elementwise ops and data movement (broadcast, slice, concat, pad, gather, casts,
  layout copies): one pass over the output.
- input: producers computed inside a reduction's loads (reduce, softmax, layer-norm, rms-norm),
  plus elementwise work on its result.
- output: elementwise epilogue (bias, activation, residual, scale, cast) applied to a dot's or a
  convolution's accumulator before it is stored. Two convolutions with the same output coordinates
  share the tile (each its own K loop and accumulator: a ResNet shortcut and the main path it is added
  to), and a dot whose output tile spans whole rows (at most MAX_ROW_IN_TILE columns) normalizes them
  in its epilogue (residual add + LayerNorm after a projection).
- attention: the attention op, with its mask computed in the kernel.

Decisions, made consumer first (reverse post-order), per producer-consumer edge:
- a producer is merged when every user of it is in the fusion; one that is cheap to recompute
  (a broadcast of a small value, an iota, a scalar constant) is duplicated into each consumer;
  an expensive producer with other users is never duplicated;
- at most one reduction or contraction per fusion (except the two above), contraction operands are
  read as they are (their producers stay separate kernels), except a dot's weight (B) operand computed
  from constants alone (a packed 4-bit weight's unpack, zero point and scale: weight_prologue_cone),
  which the dot's kernel computes as it loads its B tiles; limits on parameters and size keep the
  tile's registers in check.
Parameters are numbered in the order a walk from the root first reads them, so fusions computing the
same thing on same-shaped inputs are the same kernel.
Every edge left unfused gets a reason (`--explain-fusion`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mlcc.hlo.ir import Computation, Instruction, Module, is_float
from mlcc.hlo.opcodes import ELEMENTWISE_OPS, ops_with
from mlcc.hlo.passes.a_prologue import (gated_twin, norm_below, norm_prologue_chain, picked_rows, picked_rows_chain,
                                       prologue_reads, quantize_prologue_members, quantized_rows)
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.passes.unfused import unfused_stats
from mlcc.hlo.traffic import Ranges
from mlcc.hlo.traffic import value_bytes as _bytes

LOOP_OPS = ops_with("loop_fusible")  # elementwise ops and data movement except the scatters
DATA_MOVEMENT = LOOP_OPS & ops_with("data_movement")
REDUCTIONS = ops_with("input_fusible")
FULL_SIZE_REDUCTIONS = ops_with("row_normalization")  # result has the operand's dims
CONTRACTIONS = ops_with("contraction")
NO_KERNEL = ops_with("no_kernel") - LOOP_OPS  # arguments, constants, tuples (a bitcast joins loop fusions)
ROW_NORMS = ops_with("row_norm")
MAX_PARAMETERS = 16
MAX_INSTRUCTIONS = 96
CHEAP_BYTES = 4096  # a broadcast whose source is at most this big is recomputed rather than stored
TINY_BYTES = 256    # any loop op this small (a mask row, a few indices) is recomputed rather than stored
MAX_ROW_IN_TILE = 256  # a norm joins a dot's epilogue when one output tile spans its rows (BLOCK_N >= row)


@dataclass
class Group:
    root: Instruction
    kind: str                                   # loop | input | output | attention
    members: list[Instruction] = field(default_factory=list)
    heavy: Instruction | None = None            # the reduction, contraction or attention op
    cone: set[int] = field(default_factory=set)  # members that attention's q, k, v are views of
    second: Instruction | None = None           # a second convolution accumulated over the same output tile
    norm: Instruction | None = None             # a row norm in a dot's epilogue (the tile holds whole rows)
    prologue: set[int] = field(default_factory=set)  # members computed where the dot loads its weight (B) tiles
    shared: set[int] = field(default_factory=set)    # prologue members other kernels compute too (duplicated)
    lhs_prologue: Instruction | None = None      # a row norm (or rows picked) the dot computes as it loads A tiles
    a_source: Instruction | None = None          # the activation (below views) a quantizing A prologue reads
    # Indexes over members, brought up to date as members are appended (a new or shorter list is reindexed):
    # the id of every member, and the values members read from outside in the order they first read them.
    _ids: set[int] = field(default_factory=set, repr=False, compare=False)
    _outside: dict[int, Instruction] = field(default_factory=dict, repr=False, compare=False)
    _synced: int = field(default=0, repr=False, compare=False)  # members indexed so far
    _indexed: list[Instruction] | None = field(default=None, repr=False, compare=False)  # the list they are in

    def contains(self, inst: Instruction) -> bool:
        return id(inst) in self._index()

    def _index(self) -> set[int]:
        members = self.members
        if members is not self._indexed or len(members) < self._synced:
            self._ids, self._outside, self._synced, self._indexed = set(), {}, 0, members
        while self._synced < len(members):
            m = members[self._synced]
            self._synced += 1
            self._ids.add(id(m))
            self._outside.pop(id(m), None)
            for o in m.operands:
                if id(o) not in self._ids:
                    self._outside.setdefault(id(o), o)
        return self._ids

    def outside(self) -> list[Instruction]:
        """The values members read that no member computes, in the order members first read them."""
        self._index()
        return list(self._outside.values())

    def grown(self, p: Instruction, kind: str, heavy: Instruction | None, second: Instruction | None,
              norm: Instruction | None) -> "Group":
        """The group with p added and these kind and heavy ops: a trial that refers to this group's members
        rather than copying them, so checking one candidate costs p's operands, not the group's size."""
        return _Grown(self, p, kind, heavy, second, norm)


class _Members(Sequence):
    """A group's members followed by one more, without copying them."""

    def __init__(self, base: list[Instruction], extra: Instruction) -> None:
        self.base, self.extra = base, extra

    def __len__(self) -> int:
        return len(self.base) + 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(self)[i]
        n = len(self.base)
        if i == n or i == -1:
            return self.extra
        if -n - 1 <= i < n:
            return self.base[i if i >= 0 else i + 1]
        raise IndexError(i)

    def __iter__(self):
        yield from self.base
        yield self.extra

    def __add__(self, other: list[Instruction]) -> list[Instruction]:
        return [*self, *other]


class _Grown(Group):
    """Group.grown's trial: membership and outside reads answered from the base group's indexes."""

    def __init__(self, base: Group, p: Instruction, kind: str, heavy: Instruction | None,
                 second: Instruction | None, norm: Instruction | None) -> None:
        super().__init__(base.root, kind, _Members(base.members, p), heavy, second=second, norm=norm)
        self.base, self.extra = base, p

    def contains(self, inst: Instruction) -> bool:
        return inst is self.extra or self.base.contains(inst)

    def outside(self) -> list[Instruction]:
        p = self.extra
        self.base._index()
        seen = self.base._outside
        reads = [o for o in seen.values() if o is not p]
        added: set[int] = set()
        for o in p.operands:
            if o is p or id(o) in seen or id(o) in added or self.base.contains(o):
                continue
            added.add(id(o))
            reads.append(o)
        return reads


def _kind_of(inst: Instruction) -> str | None:
    if inst.opcode in LOOP_OPS or (inst.opcode == "constant" and "ref" not in inst.attrs):
        return "loop"
    if inst.opcode in REDUCTIONS:
        return "input"
    if inst.opcode in CONTRACTIONS:
        return "output"
    if inst.opcode == "attention":
        return "attention"
    return None


def _cheap(inst: Instruction, ranges: Ranges) -> bool:
    """Recomputing inst in every consumer costs less than storing and loading it."""
    if inst.opcode in ("iota", "size"):
        return True
    if inst.opcode == "constant":
        return "ref" not in inst.attrs
    if inst.opcode in ("broadcast", "bitcast", "convert", "reshape"):
        src = inst.operands[0]
        if inst.opcode == "convert" and src.opcode in LOOP_OPS and src.opcode != "constant" and len(src.users) == 1 \
                and not (is_float(inst.shape.dtype) and _cheap(src, ranges)):
            return False  # its source exists only for it (a quantization's clamp): recomputing would store that,
            # unless a dequantization (to f16..f64) of a source as cheap to recompute (a nibble of a few bytes)
        return _bytes(src, ranges) <= CHEAP_BYTES or src.opcode in ("parameter", "constant") and inst.opcode != "broadcast"
    if inst.opcode in LOOP_OPS and _bytes(inst, ranges) <= TINY_BYTES \
            and all(_bytes(o, ranges) <= CHEAP_BYTES for o in inst.operands):
        return True  # a few elements: recompute wherever needed (a few rows of a big table: see _table_rows)
    return _from_indices(inst) or _table_rows(inst)


def _table_rows(inst: Instruction) -> bool:
    """inst gathers rows of a table in memory (an embedding lookup) by indices the model is given: a consumer
    that gathers them itself reads the same bytes as one loading a stored copy, so the lookup joins every
    consumer (the first norm, the first residual add) and launches nothing of its own. So do those rows
    scaled by an inline constant (Gemma's embedding times sqrt(hidden))."""
    if inst.opcode in ELEMENTWISE_OPS and inst.operands:
        rows = [o for o in inst.operands if not _from_indices(o)]
        return len(rows) == 1 and rows[0].opcode in GATHERS and _table_rows(rows[0])
    return (inst.opcode in GATHERS and inst.operands[0].opcode in ("constant", "parameter")
            and all(o.opcode in ("parameter", "constant") for o in inst.operands[1:]))


def _stored(inst: Instruction, ranges: Ranges) -> bool:
    """inst is computed by a kernel and written to memory unless a fusion takes it in."""
    return inst.opcode not in NO_KERNEL and not _cheap(inst, ranges)


INDEX_OPS = ELEMENTWISE_OPS | ops_with("reindex")
GATHERS = ops_with("indexed_read")


def _from_indices(inst: Instruction, depth: int = 8) -> bool:
    """inst is computed from element indices and inline constants alone (a causal mask: iotas compared):
    it reads no memory, so each consumer recomputes it at whatever size rather than storing it."""
    if inst.opcode in ("iota", "size"):
        return True
    if inst.opcode == "constant":
        return "ref" not in inst.attrs
    if depth == 0 or inst.opcode not in INDEX_OPS or not inst.operands:
        return False
    return all(_from_indices(o, depth - 1) for o in inst.operands)


def _operands_outside(group: Group) -> list[Instruction]:
    """The values the group's members read from outside it, in the order the members first read them."""
    return group.outside()


def _epilogue_ok(group: Group, heavy: Instruction) -> str | None:
    """Members downstream of the heavy op must be elementwise at its result's dims (or the row norm a dot's
    tile holds whole rows of, whose result has those dims too)."""
    dims = heavy.shape.dims
    for m in group.members:
        if m is heavy or m is group.second:
            continue
        if m.opcode in ELEMENTWISE_OPS and m.shape.dims == dims:
            continue
        if m is group.norm and m.shape.dims == dims:
            continue
        if (m.opcode in ("broadcast", "constant", "iota", "size", "bitcast", "convert", "reshape") or _table_rows(m)
                or m.opcode in ELEMENTWISE_OPS and m.shape.rank == 0) and not _depends_on(m, heavy):
            continue  # side inputs of the epilogue (a bias broadcast, an embedding lookup, a scalar scale), computed at the output's coordinates
        return f"%{m.name} ({m.opcode}) is not an elementwise op at the {heavy.opcode}'s result dims"
    return None


def _contractions(group: Group) -> list[Instruction]:
    """The ops whose operands the kernel reads as they are: the heavy op, and a second convolution."""
    return [x for x in (group.heavy, group.second) if x is not None]


def _second_contraction(group: Group, p: Instruction) -> str | None:
    """Why convolution p cannot be accumulated in the same output tile as the group's convolution, if so.

    Both contractions compute the same output coordinates, so the kernel runs p's K loop into a second
    accumulator tile next to the first and applies the epilogue to both: p's result never reaches memory
    (a ResNet downsampling block's shortcut convolution and its main path's last convolution, summed)."""
    heavy = group.heavy
    if p.opcode == "dot" and heavy.opcode == "dot":
        return _second_dot(group, p)
    if p.opcode != "convolution" or heavy.opcode != "convolution":
        return f"a {p.opcode} cannot join the output fusion of a {heavy.opcode} (one contraction per tile, " \
               "except two convolutions)"
    if group.second is not None:
        return "the output tile already accumulates two convolutions (a third accumulator does not fit in registers)"
    if group.norm is not None:
        return "the epilogue already normalizes rows"
    if tuple(p.shape.dims) != tuple(heavy.shape.dims) or p.shape.dtype != heavy.shape.dtype:
        return f"its result {p.shape} is not at the {heavy.opcode}'s output coordinates {heavy.shape}"
    if p.attrs["dim_labels"].split("->")[-1] != heavy.attrs["dim_labels"].split("->")[-1]:
        return "its output dims are labelled unlike the other convolution's"
    if p.attrs.get("feature_group_count", 1) != 1 or heavy.attrs.get("feature_group_count", 1) != 1:
        return "grouped convolutions do not share an output tile"
    if p.operands[0].shape.dtype != heavy.operands[0].shape.dtype:
        return "the two convolutions' inputs have different types"
    if p.operands[1].shape.dtype != heavy.operands[1].shape.dtype:
        return "the two convolutions' weights have different types (one kernel reads both as one type)"
    return None


def _second_dot(group: Group, p: Instruction) -> str | None:
    """Why dot p cannot be accumulated next to the group's dot, if so: both must multiply the same lhs by
    weights laid out alike into the same output (a gated MLP's gate and up projections), so the kernel
    loads each lhs tile once for two accumulators and stores only the epilogue's combination of them."""
    heavy = group.heavy
    if group.second is not None or group.norm is not None:
        return "the output tile already holds a second accumulator or a row norm"
    if p.operands[0] is not heavy.operands[0]:
        return "the two dots multiply different left operands (only a shared one is loaded once for both)"
    a, b = p.operands[1].shape, heavy.operands[1].shape
    if p.attrs != heavy.attrs or (a.dtype, tuple(a.dims), a.layout) != (b.dtype, tuple(b.dims), b.layout) \
            or tuple(p.shape.dims) != tuple(heavy.shape.dims) or p.shape.dtype != heavy.shape.dtype:
        return "the two dots' weights or results differ in shape, layout or type"
    computed = [_computed(w) for w in (p.operands[1], heavy.operands[1])]
    if computed[0] != computed[1]:
        return "one of the two dots computes its weight in its B-tile loads and the other does not"
    if computed[0]:  # both dequantized in their B-tile loads (a 4-bit gated MLP): each its own weight prologue
        why = next((w for d in (heavy, p) for w in [weight_prologue_cone(d, d.operands[1], {})[1]] if w), None)
        if why is not None:
            return f"a dot whose weight is computed keeps its output tile to itself unless both compute theirs: {why}"
    return None


def _computed(w: Instruction) -> bool:
    """A dot's weight is computed by some op (a dequantization), not read as it is stored (through views)."""
    while w.opcode in ("bitcast", "reshape"):
        w = w.operands[0]
    return w.opcode not in NO_KERNEL


def _norm_epilogue(group: Group, p: Instruction) -> str | None:
    """Why dot p cannot compute the group's row norm in its epilogue, if so: the norm must normalize exactly
    the dot's output columns (its rhs free dims), and a row must fit one output tile."""
    norm = group.heavy
    if p.opcode != "dot":
        return f"a {p.opcode} cannot join a {norm.opcode} fusion (only a dot's tile holds whole rows)"
    if tuple(p.shape.dims) != tuple(norm.shape.dims):
        return f"the {norm.opcode} is not at the dot's output dims"
    nb, nlf = len(p.attrs["lhs_batch_dims"]), p.operands[0].shape.rank - len(p.attrs["lhs_batch_dims"]) - \
        len(p.attrs["lhs_contracting_dims"])
    columns = list(range(nb + nlf, p.shape.rank))
    if sorted(norm.attrs["dimensions"]) != columns:
        return f"the {norm.opcode} normalizes dims {sorted(norm.attrs['dimensions'])}, not the dot's columns {columns}"
    row = 1
    for d in columns:
        row *= int(p.shape.dims[d])
    if row > MAX_ROW_IN_TILE:
        return f"its rows of {row} elements do not fit one output tile (at most {MAX_ROW_IN_TILE})"
    return None


def _depends_on(inst: Instruction, target: Instruction) -> bool:
    work, seen = [inst], set()
    while work:
        x = work.pop()
        if x is target:
            return True
        if id(x) in seen:
            continue
        seen.add(id(x))
        work.extend(x.operands)
    return False


class Fusion(Pass):
    name = "fusion"

    def __init__(self, kinds: frozenset[str] = frozenset({"loop", "input", "output", "attention"})) -> None:
        self.kinds = kinds  # the fusion kinds the backend has kernels for
        self.explanations: list[str] = []
        self.ranges: Ranges = {}
        self.copies: dict[int, list[Group]] = {}  # a cheap producer -> the groups it was duplicated into
        self._comp_names: set[str] = set()  # the module's computation names while fusions are built

    def run(self, module: Module) -> bool:
        self.ranges = module.symbols  # sizes decide what is cheap: symbolic ones at the top of their range
        comp = module.entry
        if module.analyses.unfused is None:  # the compiler records it right after import
            module.analyses.unfused = unfused_stats(module)
        self.explanations = []
        self.copies = {}
        groups = self._form_groups(comp)
        self._comp_names = {c.name for c in module.computations}
        changed = False
        for g in groups:
            # A cheap root duplicated into all its consumers' fusions is gone by now.
            if len(g.members) > 1 and g.root.parent is comp:
                self._materialize(module, comp, g)
                changed = True
            elif g.prologue and g.heavy is not None and g.heavy.parent is comp:
                # the root was cheap and went into its consumers: the dot still computes its weight in its loads
                chain = [m for m in g.members if id(m) in g.prologue and m.parent is comp]
                self._materialize(module, comp, Group(g.heavy, "output", [g.heavy] + chain, g.heavy,
                                                      prologue=g.prologue, shared=g.shared))
                changed = True
        module.analyses.fusion_explanations = list(module.analyses.unrecognized) + list(self.explanations)
        return changed

    # ---- grouping
    def _form_groups(self, comp: Computation) -> list[Group]:
        owner: dict[int, Group] = {}
        groups: list[Group] = []
        pending: dict[int, tuple[Instruction, Instruction, str]] = {}  # norms a dot and its gated twin may share
        outputs = set()
        if comp.root is not None and comp.root.opcode == "tuple":
            outputs = {id(o) for o in comp.root.operands}
        for inst in reversed(comp.instructions):
            if inst.opcode in NO_KERNEL or inst.shape.is_tuple:
                continue
            group = owner.get(id(inst))
            if group is None and self._duplicated_everywhere(inst, outputs):
                continue  # its consumers compute it; its operands root groups of their own
            if group is None:
                kind = _kind_of(inst)
                if kind is None or inst.opcode == "bitcast":  # a bitcast is a view: it joins fusions, never roots one
                    continue
                group = Group(inst, kind, [inst], inst if kind != "loop" else None)
                owner[id(inst)] = group
                groups.append(group)
            if (group.heavy is inst or group.second is inst) and inst.opcode in CONTRACTIONS | {"attention"}:
                for i, p in enumerate(inst.operands):
                    if p.opcode in NO_KERNEL:
                        continue
                    if inst.opcode == "attention" and i == 3:  # the mask: computed per score tile in the kernel
                        reason = self._try_merge(group, p, owner, outputs)
                        if reason is not None:
                            self._explain(p, inst, reason)
                        continue
                    if inst.opcode == "attention" and _kind_of(p) == "loop":
                        # q, k, v as strided views (slices of a fused QKV projection), read in place, or
                        # computed from them as the kernel loads its tiles (rotary embeddings)
                        group.cone.add(id(p))
                        reason = self._try_merge(group, p, owner, outputs)
                        if reason is not None:
                            group.cone.discard(id(p))
                            self._explain(p, inst, reason)
                        continue
                    quant = quantized_rows(p) is not None  # a DynamicQuantizeLinear's u8 (dynamic_quant.py)
                    if inst.opcode == "dot" and i == 0 and group.heavy is inst and (
                            norm_below(p) is not None or picked_rows(p) is not None or quant):
                        reason = (self._quantize_prologue if quant else self._norm_prologue)(group, p, owner, outputs)
                        if reason is not None and not quant and gated_twin(inst, p) is not None:
                            pending[id(p)] = (p, inst, reason)  # decided again once the gated twin joins
                            continue
                        if reason is None and group.second is not None:  # the twin, visited first, called it read as is
                            stale = f"%{p.name} -> %{group.second.name}: "
                            self.explanations = [e for e in self.explanations if not e.startswith(stale)]
                        if reason is not None:
                            what = "quantized" if quant else "normalized"
                            self._explain(p, inst, f"not {what} in the dot's A-tile loads: {reason}")
                        continue
                    if i == 0 and group.second is inst and group.contains(p):
                        continue  # a gated twin's lhs, normalized as the shared A tiles load
                    if i == 0 and group.second is inst and id(p) in pending and p is group.heavy.operands[0]:
                        # a gated MLP's twin dot on the same normalized lhs: both apply the norm as they load it
                        _, heavy, _ = pending.pop(id(p))
                        reason = self._norm_prologue(group, p, owner, outputs)
                        if reason is None:
                            continue
                        self._explain(p, heavy, f"not normalized in the dot's A-tile loads: {reason}")
                    if inst.opcode == "dot" and i == 1:
                        reason = self._weight_prologue(group, p, owner, outputs, inst)
                        if reason is not None:
                            self._explain(p, inst, f"not computed in the dot's weight loads: {reason}")
                        continue
                    self._explain(p, inst, f"{inst.opcode} operands are read from memory as they are "
                                           "(no prologue fusion into its operand loads)")
                continue
            for p in inst.operands:
                if p.opcode in NO_KERNEL and not (p.opcode == "constant" and "ref" not in p.attrs):
                    continue
                if group.contains(p):
                    continue
                reason = self._try_merge(group, p, owner, outputs)
                if reason is not None:
                    self._explain(p, inst, reason)
        for p, dot, reason in pending.values():  # the gated twin never joined the dot's fusion
            self._explain(p, dot, f"not normalized in the dot's A-tile loads: {reason}")
        return groups

    def _try_merge(self, group: Group, p: Instruction, owner: dict[int, Group], outputs: set[int]) -> str | None:
        kind = _kind_of(p)
        if kind is None:
            return f"{p.opcode} has no fusible kernel"
        if p.shape.is_tuple:
            return "tuple-shaped value"
        if p is group.a_source:
            return "the dot quantizes it as it loads its A tiles: read as it is"
        users_inside = all(group.contains(u) for u in p.users) and id(p) not in outputs
        if id(p) in owner and not _cheap(p, self.ranges):
            return "already fused elsewhere"
        new_kind, heavy, second, norm = group.kind, group.heavy, group.second, group.norm
        if kind == "loop" and group.kind not in self.kinds:
            return f"no kernel template for {group.kind} fusions"
        if kind == "loop":
            pass
        elif group.kind == "loop" and kind in ("input", "output") and (kind == "output" or p.opcode in FULL_SIZE_REDUCTIONS
                                                                       or p.opcode == "reduce"):
            new_kind, heavy = kind, p
            if new_kind not in self.kinds:
                return f"no kernel template for {new_kind} fusions"
        elif group.kind == "output" and kind == "output":
            why = _second_contraction(group, p)
            if why is not None:
                return why
            second = p
        elif group.kind == "input" and kind == "output" and group.heavy.opcode in ROW_NORMS:
            why = _norm_epilogue(group, p)
            if why is not None:
                return why
            new_kind, heavy, norm = "output", p, group.heavy
        elif group.kind == "loop" and _quantized_attention(p) and "attention" in self.kinds:
            new_kind, heavy = "attention", p  # its requantization, computed on the output tile
        else:
            return f"a {p.opcode} cannot join a {group.kind} fusion rooted at {group.root.opcode}"
        if not users_inside:
            if kind != "loop" or not _cheap(p, self.ranges):
                where = "is a model output" if id(p) in outputs else "has users outside the fusion"
                return f"{p.opcode} {where} and is too expensive to recompute ({_bytes(p, self.ranges)} bytes)"
        if p.opcode in CONTRACTIONS and any(group.contains(o) for o in p.operands):
            return f"{p.opcode} operands are read from memory as they are, and one is computed in the fusion"
        trial = group.grown(p, new_kind, heavy, second, norm)
        if heavy is not None and heavy is not group.heavy:
            why = _epilogue_ok(trial, heavy)
            if why is not None:
                return why
        elif heavy is not None and group.kind == "attention" and (
                id(p) in group.cone or any(id(u) in group.cone for u in p.users)):
            why = _attention_prologue(group, p)
            if why is not None:
                return why
            group.cone.add(id(p))
        elif heavy is not None and group.kind in ("output", "attention"):
            fed = next((c for c in _contractions(trial) if _feeds_heavy_operands(p, c)), None)
            if fed is not None:
                return f"{p.opcode} feeds the {fed.opcode}'s operands (no prologue fusion)"
        if len(_operands_outside(trial)) > MAX_PARAMETERS:
            return f"the fusion would read more than {MAX_PARAMETERS} buffers"
        limit = _instruction_limit(trial)
        if len(trial.members) > limit:
            return f"the fusion would exceed {limit} instructions"
        group.kind, group.heavy, group.second, group.norm = new_kind, heavy, second, norm
        group.members.append(p)
        if users_inside and (not _cheap(p, self.ranges) or any(_stored(q, self.ranges) for q in p.operands)):
            owner[id(p)] = group  # cheap producers stay free to be duplicated, unless this group is their only user
            # and reads an operand that would have to be stored for them (the u8 of a Q -> DQ pair)
        else:  # a duplicated producer is never visited for this group: consider its operands now
            self.copies.setdefault(id(p), []).append(group)
            for q in p.operands:
                if group.contains(q) or (q.opcode in NO_KERNEL and not (q.opcode == "constant" and "ref" not in q.attrs)):
                    continue
                if q.opcode == "constant" or _cheap(q, self.ranges) or id(p) in group.cone:
                    reason = self._try_merge(group, q, owner, outputs)
                    if reason is not None and id(p) in group.cone:
                        self._explain(q, p, reason)
        return None

    def _duplicated_everywhere(self, inst: Instruction, outputs: set[int]) -> bool:
        """inst is a cheap producer every consumer of which computes it in its own fusion: rooting a group at
        it would build a fusion that no one calls once those consumers are materialized."""
        groups = self.copies.get(id(inst))
        if not groups or id(inst) in outputs:
            return False
        return all(any(g.contains(u) for g in groups) for u in inst.users)

    def _weight_prologue(self, group: Group, p: Instruction, owner: dict[int, Group],
                         outputs: set[int], dot: Instruction) -> str | None:
        """Merge the chain computing the weight operand p of the group's dot (or of its second dot, when both
        compute theirs: _second_dot) into the group, computed as the kernel loads its B tiles, or say why
        not (see weight_prologue_cone)."""
        if group.kind != "output" or (group.second is not None and not _computed(group.second.operands[1])):
            return "the output tile already holds another contraction"
        if group.lhs_prologue is not None and group.lhs_prologue.opcode not in ROW_NORMS:
            return "the dot already reads its A tiles through a gather or slice"
        cone, why = weight_prologue_cone(dot, p, self.ranges)
        if why is not None:
            return why
        members = [m for m in cone if m.opcode != "constant" or "ref" not in m.attrs]
        if any(id(m) in owner for m in members if not _cheap(m, self.ranges)):
            return "part of its chain is already fused elsewhere"
        trial = Group(group.root, group.kind, group.members + members, group.heavy)
        if len(_operands_outside(trial)) > MAX_PARAMETERS:
            return f"the fusion would read more than {MAX_PARAMETERS} buffers"
        if len(trial.members) > MAX_INSTRUCTIONS:
            return f"the fusion would exceed {MAX_INSTRUCTIONS} instructions"
        inside = {id(m) for m in members} | {id(dot)}
        for m in members:
            group.members.append(m)
            group.prologue.add(id(m))
            if all(id(u) in inside for u in m.users) and id(m) not in outputs:
                owner[id(m)] = group
            else:  # a cheap one used elsewhere too is duplicated, not owned
                group.shared.add(id(m))
        return None

    def _norm_prologue(self, group: Group, p: Instruction, owner: dict[int, Group],
                       outputs: set[int]) -> str | None:
        """Merge the row norm the dot's lhs p is a view of into the group, applied as the kernel loads its A
        tiles, or say why not (see norm_prologue_chain); the norm's cheap operands (its scale and bias
        broadcasts, an embedding lookup) are computed there too, its input is read as it is."""
        twin = group.second is not None and group.second.opcode == "dot" and group.second.operands[0] is p \
            and norm_below(p) is not None  # a gated MLP's gate and up projections: one A tile for both
        if group.kind != "output" or (group.second is not None and not twin) or group.norm is not None \
                or group.prologue and not twin:  # (a twin's weight prologues: counted in prologue_reads)
            return "the output tile already holds a second accumulator, a row norm or a weight prologue"
        # (a dequantized weight computed in the B-tile loads is on the other operand: both prologues fit)
        chain, why = norm_prologue_chain(group.heavy, p, (group.second,) if twin else ()) if picked_rows(p) is None \
            else picked_rows_chain(group.heavy, p)
        if why is not None:
            return why
        if any(id(m) in owner or id(m) in outputs for m in chain):
            return "the norm is already fused elsewhere or is a model output"
        trial = Group(group.root, group.kind, group.members + chain, group.heavy)
        if len(_operands_outside(trial)) > MAX_PARAMETERS:
            return f"the fusion would read more than {MAX_PARAMETERS} buffers"
        norm = chain[-1]
        weights = [d.operands[1] for d in (group.heavy, group.second) if twin and _computed(d.operands[1])]
        if twin and len(prologue_reads(_operands_outside(trial), norm.operands[0], weights, trial.contains,
                                       lambda v: v.opcode in LOOP_OPS and _cheap(v, self.ranges))) > MAX_PARAMETERS:
            return f"with the norm's input computed in the loads as well as both dots' weights the kernel would read " \
                   f"more than {MAX_PARAMETERS} buffers"
        for m in chain:
            group.members.append(m)
            owner[id(m)] = group
        group.lhs_prologue = norm
        for q in norm.operands[1:]:  # the norm's scale and bias, or the gather's indices
            if q.opcode in NO_KERNEL and not (q.opcode == "constant" and "ref" not in q.attrs):
                continue
            if not group.contains(q) and _cheap(q, self.ranges):
                reason = self._try_merge(group, q, owner, outputs)
                if reason is not None:
                    self._explain(q, norm, reason)
        return None

    def _quantize_prologue(self, group: Group, p: Instruction, owner: dict[int, Group], outputs: set[int]) -> str | None:
        """Merge the quantization the dot's lhs p is into the group, or say why not (quantize_prologue_members)."""
        new, local, x, why = quantize_prologue_members(
            group.heavy, p, group.kind != "output" or group.second is not None or bool(group.prologue), group.contains,
            lambda m: id(m) in owner or id(m) in outputs, lambda u: any(g is not group for g in self.copies.get(id(u), [])))
        if why is not None:
            return why
        if len(_operands_outside(Group(group.root, group.kind, group.members + new + local, group.heavy))) > MAX_PARAMETERS:
            return f"the fusion would read more than {MAX_PARAMETERS} buffers"
        for m in new + local:
            group.members.append(m)
            if (m.shape.rank > 0 and m.opcode != "broadcast") or m.opcode == "reduce":
                owner[id(m)] = group
            else:  # the scale and zero point: other kernels (the attention's loads) may compute them too
                self.copies.setdefault(id(m), []).append(group)
        group.lhs_prologue, group.a_source = p, x
        return None

    def _explain(self, producer: Instruction, consumer: Instruction, reason: str) -> None:
        self.explanations.append(f"%{producer.name} -> %{consumer.name}: {reason}")

    # ---- building the fusion instruction
    def _materialize(self, module: Module, comp: Computation, g: Group) -> None:
        order, params = _canonical_order(g)
        body = Computation(_unique_comp_name(module, f"fused_{g.kind}.{g.root.name}", self._comp_names))
        mapping: dict[int, Instruction] = {}
        for i, p in enumerate(params):
            mapping[id(p)] = body.add(Instruction(f"param_{i}", "parameter", p.shape, (), {"index": i}))
        shared = _shared_prologue(g, order)
        for inst in order:
            clone = Instruction(inst.name, inst.opcode, inst.shape, [mapping[id(o)] for o in inst.operands],
                                inst.attrs, inst.called, () if id(inst) in shared else inst.origin)
            mapping[id(inst)] = body.add(clone)
        body.root = mapping[id(g.root)]
        module.add_computation(body)
        origin = tuple(dict.fromkeys(o for m in order if id(m) not in shared for o in m.origin))
        fused = Instruction(comp.unique_name(f"fusion.{g.root.name}"), "fusion", g.root.shape, params,
                            {"kind": g.kind}, body, origin)
        comp.insert_before(g.root, fused)
        g.root.replace_all_uses_with(fused)
        for inst in reversed(order):  # members no one else uses any more
            if not inst.users and inst.parent is comp:
                comp.remove(inst)


def _shared_prologue(g: Group, order: list[Instruction]) -> set[int]:
    """The weight-prologue members other kernels compute too (the nibble shifts and masks every unpack of a
    shape uses, one instruction after CSE, whose origin names every MatMulNBits node), and the members only
    they use: their origins are not this kernel's sources."""
    shared = set(g.shared)
    grew = True
    while grew:
        grew = False
        for m in order:
            if id(m) in g.prologue and id(m) not in shared and \
                    all(id(u) in shared or not g.contains(u) for u in m.users):
                shared.add(id(m))
                grew = True
    return shared


def _canonical_order(g: Group) -> tuple[list[Instruction], list[Instruction]]:
    """The members in post-order from the root (operands in order), and the values read from outside in
    the order that walk first reaches them. Both depend only on the fused computation's structure, not on
    where its inputs happen to sit in the entry computation, so two fusions computing the same thing on
    same-shaped inputs get the same body and parameter order, hence one kernel (a residual block's
    convolution reading [activation, weights] and its twin reading [weights, activation] are the same)."""
    order: list[Instruction] = []
    params: list[Instruction] = []
    done: set[int] = set()
    stack: list[tuple[Instruction, int]] = [(g.root, 0)]
    while stack:
        inst, i = stack.pop()
        if i < len(inst.operands):
            stack.append((inst, i + 1))
            o = inst.operands[i]
            if id(o) in done:
                continue
            if g.contains(o):
                stack.append((o, 0))
            else:
                done.add(id(o))
                params.append(o)
            continue
        if id(inst) not in done:
            done.add(id(inst))
            order.append(inst)
    return order, params


PROLOGUE_OPS = LOOP_OPS - ops_with("indexed_read") - {"dynamic-slice", "size"}


def weight_prologue_cone(dot: Instruction, w: Instruction, ranges: Ranges) -> tuple[list[Instruction], str | None]:
    """The instructions computing a dot's weight operand w from constants alone (w first), which the dot's
    kernel may compute as it loads its B tiles so the computed weight never reaches memory: a dequantization
    of packed 4-bit weights (byte broadcast, shift, mask, convert, zero point and scale per block), an int8 or
    f16 weight converted, any chain of elementwise ops, converts and reindexing views whose leaves are
    constants. Refused (with why) unless every member is such a loop op used only inside the chain or cheap
    to recompute, the dot has one contracting dim (batch dims, as split-K's slices, are fine), and the
    constants read are fewer bytes than the weight they compute (else reading the weight costs less)."""
    if dot.opcode != "dot" or len(dot.attrs["rhs_contracting_dims"]) != 1:
        return [], "only a dot with one contracting dim computes its weight in its loads"
    if w.opcode not in PROLOGUE_OPS:
        return [], f"{w.opcode} is not a loop op"
    cone: list[Instruction] = []
    seen: set[int] = set()
    work = [w]
    leaf_bytes = 0
    while work:
        x = work.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.opcode == "constant":
            cone.append(x)
            leaf_bytes += _bytes(x, ranges) if "ref" in x.attrs else 0
            continue
        if x.opcode not in PROLOGUE_OPS or x.shape.is_tuple or not x.shape.is_static:
            return [], f"%{x.name} ({x.opcode}) is not a loop op on constants"
        cone.append(x)
        work.extend(x.operands)
    ids = seen | {id(dot)}
    for x in cone:
        if x is not w and x.opcode != "constant" and not all(id(u) in ids for u in x.users) and not _cheap(x, ranges):
            return [], f"%{x.name} ({x.opcode}) has users outside the weight's chain"
    if w.users and not all(u is dot for u in w.users):
        return [], f"%{w.name} has users other than the dot"
    if leaf_bytes >= _bytes(w, ranges):
        return [], f"its constants ({leaf_bytes} bytes) are no smaller than the weight ({_bytes(w, ranges)} bytes)"
    return cone, None


def _feeds_heavy_operands(p: Instruction, heavy: Instruction) -> bool:
    """p is computed into the contraction's operands (which are read from memory as they are), or into
    attention's q, k or v; an attention mask, and every epilogue side input, may be computed in-kernel."""
    operands = heavy.operands[:3] if heavy.opcode == "attention" else heavy.operands
    return any(o is p for o in operands)  # the heavy op's operands are never members, so only p itself can be


def _attention_prologue(group: Group, p: Instruction) -> str | None:
    """Why p cannot be computed as the attention kernel loads q, k or v tiles (None: it can). Views of the
    inputs are read in place; elementwise ops, slices and concatenations of them (rotary embeddings:
    x * cos + rotate_half(x) * sin) are evaluated per tile."""
    if _quantized_attention(group.heavy) and _dequantized_prologue(p):
        return None
    if p.opcode not in LOOP_OPS:
        return f"attention computes only loop ops as it loads q, k and v, not {p.opcode}"
    producer = next((o for o in p.operands if o.opcode in CONTRACTIONS), None)
    if p.opcode in ELEMENTWISE_OPS and producer is not None:
        # a projection's bias: added once by the projection's epilogue, not per tile of every query block
        return f"{p.opcode} of the {producer.opcode}'s result is left to its epilogue"
    return None


def _quantized_attention(inst: Instruction | None) -> bool:
    """An attention with fake-quantized scores (mlcc/hlo/passes/recognize/quant_attention.py)."""
    return inst is not None and inst.opcode == "attention" and "score_quant" in inst.attrs


def _instruction_limit(group: Group) -> int:
    """A quantized attention computes three dequantize-requantize chains (half of their members scalar
    constants and their broadcasts) as it loads q, k and v: it may hold twice as many instructions."""
    return 2 * MAX_INSTRUCTIONS if _quantized_attention(group.heavy) else MAX_INSTRUCTIONS


def _dequantized_prologue(p: Instruction) -> bool:
    """p may be computed per q, k or v tile of a quantized attention: a scalar constant (a scale or a zero
    point, inlined), or an elementwise op of an integer contraction's result (the dequantize-bias-requantize
    epilogue of a QKV projection, which must run somewhere: per tile, its s32 result is all that is stored)."""
    if p.opcode == "constant":
        return "ref" not in p.attrs and p.shape.rank == 0
    return p.opcode in ELEMENTWISE_OPS and any(o.opcode in CONTRACTIONS and not is_float(o.shape.dtype)
                                               for o in p.operands)


def _unique_comp_name(module: Module, hint: str, names: set[str] | None = None) -> str:
    """hint, or hint.N for the smallest N no computation of module is named; names, when given, is the set of
    those names, kept up to date by the caller (one fusion after another: no rescan of the module each time)."""
    if names is None:
        names = {c.name for c in module.computations}
    name, n = hint, 1
    while name in names:
        name = f"{hint}.{n}"
        n += 1
    names.add(name)
    return name
