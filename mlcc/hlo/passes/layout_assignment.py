"""Layout assignment: every array gets a physical layout, chosen so conversions are rare.

As in XLA: some ops state which layouts they want (a convolution wants channels-last
activations and a filter its kernel reads contiguously; the model's inputs and outputs keep
row-major), the wishes propagate backward through layout-agnostic ops (elementwise ops,
transposes, which map a wish through their permutation), layouts are then assigned forward,
and a `copy` is inserted only where a requirement still conflicts. A transpose then becomes a
bitcast: a change of layout over the same bytes, and the kernels that read it go through
strides. Constants take whatever layout their consumer wants, at compile time.
"""

from __future__ import annotations

from mlcc.hlo.ir import Computation, Instruction, Module, Shape, default_layout
from mlcc.hlo.opcodes import ELEMENTWISE_OPS, ops_with
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.passes.reshape_to_bitcast import preserves_byte_order
from mlcc.hlo.shape_inference import conv_dim_labels
from mlcc.hlo.views import transposed_layout

Layout = tuple[int, ...]

# Ops whose kernels read every operand through its strides and accept any result layout.
AGNOSTIC = ops_with("layout_agnostic")


def channels_last(labels: str) -> Layout:
    """Minor-to-major for an activation labelled like 'bf01': f minor-most, then spatial, then b."""
    spatial = sorted((c for c in labels if c.isdigit()), reverse=True)
    return tuple(labels.index(c) for c in ["f", *spatial, "b"])


def filter_layout(labels: str) -> Layout:
    """Minor-to-major for a filter labelled like 'oi01': o minor-most (the GEMM's N), then i, then spatial."""
    spatial = sorted((c for c in labels if c.isdigit()), reverse=True)
    return tuple(labels.index(c) for c in ["o", "i", *spatial])


def _reduced_layout(layout: Layout, removed: set[int]) -> Layout:
    kept = [d for d in layout if d not in removed]
    renumber = {d: i for i, d in enumerate(sorted(kept))}
    return tuple(renumber[d] for d in kept)


def _required_operand_layouts(inst: Instruction, pinned: set[int] = frozenset()) -> dict[int, Layout]:
    """Operand layouts an op cannot do without (a copy is inserted otherwise)."""
    if id(inst) in pinned:  # a bitcast whose bytes must stay as they are
        return {0: inst.operands[0].shape.layout}
    if inst.opcode == "convolution":
        lhs, rhs, _ = conv_dim_labels(inst.attrs["dim_labels"])
        return {0: channels_last(lhs), 1: filter_layout(rhs)}
    return {}


class LayoutAssignment(Pass):
    name = "layout-assignment"

    def __init__(self, io_layout: str = "row-major") -> None:
        self.io_layout = io_layout

    def run(self, module: Module) -> bool:
        comp = module.entry
        before = {inst.name: getattr(inst.shape, "layout", None) for inst in comp.instructions}
        # A bitcast's meaning depends on its layouts. Row-major ones are logical reshapes: make them
        # reshapes again (reshape-to-bitcast restores what stays row-major); pin any other's layouts.
        pinned: set[int] = set()
        for inst in comp.instructions:
            if inst.opcode == "bitcast":
                if preserves_byte_order(inst.operands[0].shape, inst.shape) and inst.shape.is_row_major():
                    inst.opcode = "reshape"
                else:
                    pinned.add(id(inst))
        self._pinned = pinned
        wishes = self._wishes(comp)
        self._assign(comp, wishes)
        self._legalize(comp)
        after = {inst.name: getattr(inst.shape, "layout", None) for inst in comp.instructions}
        return before != after

    # ---- backward: what each value's users would like
    def _wishes(self, comp: Computation) -> dict[int, Layout]:
        """Each value's wished layout: the one whose users would otherwise move the most bytes.

        Users vote with the bytes a conversion on their side would move; a value whose users
        disagree takes the heavier wish, and one copy serves the rest (the cheaper side)."""
        votes: dict[int, dict[Layout, int]] = {}

        def vote(v: Instruction, layout: Layout, weight: int) -> None:
            votes.setdefault(id(v), {}).setdefault(layout, 0)
            votes[id(v)][layout] += max(weight, 1)

        def size(v: Instruction) -> int:
            return v.shape.nbytes() if v.shape.is_static else 1

        root = comp.root
        if root is not None and root.opcode == "tuple":
            for o in root.operands:
                if not o.shape.is_tuple:
                    vote(o, default_layout(o.shape.rank), size(o))
        wish: dict[int, Layout] = {}
        for inst in reversed(comp.instructions):
            if inst.shape.is_tuple:
                continue
            ballot = votes.get(id(inst))
            if ballot:
                wish[id(inst)] = max(sorted(ballot.items()), key=lambda kv: kv[1])[0]
            for i, layout in _required_operand_layouts(inst, self._pinned).items():
                vote(inst.operands[i], layout, size(inst.operands[i]))
            mine = wish.get(id(inst))
            if inst.opcode in ("reshape", "bitcast"):
                op = inst.operands[0]
                vote(op, default_layout(op.shape.rank), size(op))
            elif inst.opcode == "transpose" and mine is not None:
                perm = inst.attrs["dimensions"]
                vote(inst.operands[0], tuple(perm[d] for d in mine), size(inst))
            elif inst.opcode in ELEMENTWISE_OPS and mine is not None:
                for op in inst.operands:
                    if op.shape.rank == inst.shape.rank:
                        vote(op, mine, size(inst))
        return wish

    # ---- forward: choose each layout
    def _assign(self, comp: Computation, wish: dict[int, Layout]) -> None:
        for inst in comp.instructions:
            shape = inst.shape
            if shape.is_tuple or shape.rank == 0:
                continue
            layout = self._choose(inst, wish.get(id(inst)))
            if layout != shape.layout:
                inst.shape = shape.with_layout(layout)

    def _choose(self, inst: Instruction, wished: Layout | None) -> Layout:
        rank = inst.shape.rank
        op = inst.opcode
        if id(inst) in self._pinned:
            return inst.shape.layout
        if op == "parameter":
            return default_layout(rank) if self.io_layout == "row-major" else (wished or default_layout(rank))
        if op == "constant":
            return wished or default_layout(rank)
        if op == "convolution":
            return channels_last(conv_dim_labels(inst.attrs["dim_labels"])[2])
        if op == "transpose":
            return transposed_layout(inst.operands[0].shape.layout, inst.attrs["dimensions"])
        if op in ("reshape", "bitcast"):
            return default_layout(rank)
        if op == "reduce":
            return wished or _reduced_layout(inst.operands[0].shape.layout, set(inst.attrs["dimensions"]))
        if wished is not None:
            return wished
        if op in AGNOSTIC:
            same_rank = [o for o in inst.operands if not o.shape.is_tuple and o.shape.rank == rank
                         and o.opcode != "constant"]
            if same_rank:
                biggest = max(same_rank, key=lambda o: o.shape.numel() if o.shape.is_static else 0)
                return biggest.shape.layout
        return default_layout(rank)

    # ---- conversions where requirements still conflict
    def _legalize(self, comp: Computation) -> None:
        for inst in list(comp.instructions):
            for i, want in _required_operand_layouts(inst, self._pinned).items():
                op = inst.operands[i]
                if op.shape.layout == want:
                    continue
                if op.opcode == "constant" and len(op.users) == 1:
                    op.shape = op.shape.with_layout(want)  # weights are laid out at compile time
                    continue
                if op.opcode == "parameter" and inst.opcode != "bitcast":
                    continue  # the model's input, read through its own strides: the boundary conversion is in the load
                inst.set_operand(i, self._convert(comp, op, want, before=inst))
        root = comp.root
        if root is None or root.opcode != "tuple" or self.io_layout != "row-major":
            return
        for i, out in enumerate(list(root.operands)):
            if out.shape.is_tuple or out.shape.rank == 0:
                continue
            want = default_layout(out.shape.rank)
            if out.shape.layout != want:
                if out.opcode == "constant" and len(out.users) == 1:
                    out.shape = out.shape.with_layout(want)
                    continue
                root.set_operand(i, self._convert(comp, out, want, before=root))

    @staticmethod
    def _convert(comp: Computation, value: Instruction, layout: Layout, before: Instruction) -> Instruction:
        for u in value.users:  # reuse an equal conversion
            if u.opcode == "copy" and u.shape.layout == layout:
                return u
        copy = Instruction(comp.unique_name(f"{value.name}.relayout"), "copy", value.shape.with_layout(layout),
                           [value], origin=value.origin)
        return comp.insert_after(value, copy)


class TransposeToBitcast(Pass):
    """A transpose (or copy) whose result layout re-describes its operand's bytes becomes a bitcast."""

    name = "transpose-to-bitcast"

    def run(self, module: Module) -> bool:
        changed = False
        for inst in module.entry.instructions:
            if inst.opcode == "transpose":
                src = inst.operands[0].shape
                if inst.shape.layout == transposed_layout(src.layout, inst.attrs["dimensions"]):
                    inst.opcode = "bitcast"
                    inst.attrs = {}
                    changed = True
            elif inst.opcode == "copy" and inst.shape.layout == inst.operands[0].shape.layout:
                if not _is_output(module, inst):
                    inst.replace_all_uses_with(inst.operands[0])
                    changed = True
        return changed


def _is_output(module: Module, inst: Instruction) -> bool:
    root = module.entry.root
    return root is not None and any(o is inst for o in root.operands)


def layout_conversions(module: Module) -> tuple[int, int]:
    """Copies that change layout, and the bytes they move (read + write)."""
    count, nbytes = 0, 0
    for inst in module.entry.instructions:
        if inst.opcode == "copy" and isinstance(inst.shape, Shape) and inst.shape.layout != inst.operands[0].shape.layout:
            count += 1
            nbytes += 2 * inst.shape.nbytes() if inst.shape.is_static else 0
    return count, nbytes
