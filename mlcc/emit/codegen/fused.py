"""Prologues and epilogues: the loop ops of input, output and attention fusions, computed inside the
heavy op's kernel.

Such a fusion calls a computation with one heavy op (a reduction, a contraction or attention); every
other member is a loop op (mlcc/hlo/passes/fusion.py). The heavy op's template runs as it does alone,
except where it touches the fused values:
- a prologue: where it would load a tile of an operand (a reduction's input, the attention mask), it
  evaluates the operand's producers at the tile's logical coordinates instead;
- an epilogue: where it would store its result, it evaluates the fusion's root at the output tile's
  coordinates, the heavy op's value (the accumulator) standing in for the heavy op, and stores that
  through the fusion's layout.

Both are the LoopEmitter's statements (mlcc/emit/codegen/loop.py), rendered by loop_ops.py.jinja with the tile's
shape (``BLOCK_M, BLOCK_N``) where a loop kernel has ``[BLOCK]``. The coordinates come from lane
variables the template defines, each a flat row-major index over some logical dims (``offs_m[:, None]``
for the rows of a tile, ``pid_b`` for the batch element of a program), unravelled by the emitter's index
arithmetic. A contraction's or attention's q/k/v operands are read as they are: parameters, possibly
re-described by bitcasts, which are the same bytes under another shape.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from mlcc.emit.codegen.coords import is_wide, kernel_dims
from mlcc.emit.codegen.body import Stmt, format_body
from mlcc.emit.codegen.builder import Body
from mlcc.emit.codegen.indexing import Affine, Mask, Ranges, Size, interval, size, size_code
from mlcc.emit.codegen.loop import FUSIBLE_OPS, LINEAR, TAIL_MASK, Coords, LoopEmitter, Value
from mlcc.errors import UnsupportedError
from mlcc.hlo.blockquant import packed_source
from mlcc.hlo.views import affine_view
from mlcc.hlo.ir import Instruction, Shape

MASK = TAIL_MASK  # the variable a template defines before a section: the tile's lanes that store
_OWN_LOOPS = frozenset({"scatter-nd"})  # loops over rows of their own: loop kernels only


@dataclass(frozen=True)
class Lanes:
    """A template variable numbering a tile's lanes row-major over some logical dims (major first);
    ``per_lane=False`` for one value per program (a batch element's index)."""
    var: str
    dims: tuple[int, ...]
    per_lane: bool = True


@dataclass(frozen=True)
class Section:
    """Statements computing one fused value over a tile, for loop_ops.stmt; ``result`` holds it."""
    body: list[Stmt]
    result: str
    shape: str


@dataclass(frozen=True)
class FusedOperand:
    """A heavy op's operand read from memory as it is: fusion operand ``index``, described by ``shape``;
    for a view (attention's q, k, v sliced out of one buffer) an element ``offset`` and explicit
    ``view_strides`` replace the dense strides of the shape's layout."""
    index: int
    shape: Shape
    offset: Size = 0
    view_strides: tuple[Size, ...] | None = None

    @property
    def ptr(self) -> str:
        return f"in{self.index}" if self.offset == 0 else f"(in{self.index} + {size_code(self.offset)})"


class _PrefixedBody(Body):
    """Statement variables named ``<prefix><kind><n>``, apart from the template's own."""

    def __init__(self, prefix: str, index_dtype: str, ranges: Ranges) -> None:
        super().__init__(index_dtype, ranges)
        self.prefix = prefix

    def fresh(self, prefix: str) -> str:
        return super().fresh(self.prefix + prefix)


class TileEmitter(LoopEmitter):
    """Values of a fusion's computation over a kernel tile, at coordinates unravelled from lane variables.

    ``space`` is the dims of the coordinate space (the output's, or the heavy op's operand's); each
    section adds the statements of one value; an instruction bound to a template variable (the heavy
    op's value) is read from it instead of being computed.
    """

    def __init__(self, fusion: Instruction, prefix: str, shape: str, space: Sequence[Size],
                 lanes: Sequence[Lanes], wide: bool, ranges: Ranges) -> None:
        super().__init__([op.shape for op in fusion.operands], "s64" if wide else "s32", ranges)
        self.shape = shape
        self.body = _PrefixedBody(prefix, self.body.index_dtype, ranges)
        self.body.declare(LINEAR, self.body.index_dtype)
        self.body.declare(MASK, "pred")
        for lane in lanes:
            self.body.declare(lane.var, self.body.index_dtype, block=lane.per_lane)
        self.coords = self._unravel(space, lanes)
        self._bound: dict[tuple[int, Coords], Value] = {}
        self._sections: list[tuple[int, str]] = []  # (end of its statements, result variable)

    def _unravel(self, space: Sequence[int], lanes: Sequence[Lanes]) -> Coords:
        coords = [Affine()] * len(space)
        for lane in lanes:
            sizes = [space[d] for d in lane.dims]
            count: Size = 1
            for n in sizes:
                count = size(count * n)
            self.body.bound(lane.var, 0, max(interval(count, self.body.ranges)[1] - 1, 0))
            for d, c in zip(lane.dims, self.body.unravel(Affine.var(lane.var), sizes)):
                coords[d] = c
        return tuple(coords)

    def value(self, inst: Instruction, coords: Sequence[Affine], mask: Mask) -> Value:
        bound = self._bound.get((id(inst), tuple(coords)))
        if bound is not None:
            return bound
        return super().value(inst, coords, mask)

    def bind(self, inst: Instruction, var: str, dtype: str) -> None:
        """inst's value at this tile's coordinates is the template's ``var``, held in dtype."""
        self.body.declare(var, dtype)
        self._bound[(id(inst), self.coords)] = self.convert(Value(var, dtype, True), inst.shape.dtype)

    def bind_scalars(self, scalars: Sequence[tuple[Instruction, str]]) -> None:
        """Each rank-0 (instruction, variable): a value the template computed before the body (the min and max
        of a dot's first pass over its activation) is that scalar variable."""
        for inst, var in scalars:
            self.body.declare(var, inst.shape.dtype, block=False)
            self._bound[(id(inst), ())] = Value(var, inst.shape.dtype, False)

    def section(self, inst: Instruction, coords: Coords | None = None, mask: str = MASK) -> None:
        """The statements of inst's value (one per lane) at coords (this tile's by default), reading
        memory where mask holds (a template variable: the tile's ``mask``, or one for fewer dims)."""
        if mask not in self.body.inputs:
            self.body.declare(mask, "pred")
        v = self.block(self.value(inst, self.coords if coords is None else coords, mask))
        self._sections.append((len(self.body.stmts), v.name))

    def sections(self) -> list[Section]:
        """The sections in order, without the statements no result needs."""
        live = {id(s) for s in self.body.live(keep=[name for _, name in self._sections])}
        out, start = [], 0
        for end, name in self._sections:
            body = [s for s in self.body.stmts[start:end] if id(s) in live]
            out.append(Section(body, name, self.shape))
            start = end
        return out


def sections_ir(**sections: Section | None) -> str:
    """The printed body IR (Kernel.body_ir) of a kernel's fused sections, each under its name."""
    return "\n".join(f"{name}:\n" + "\n".join("  " + line for line in format_body(sec.body).split("\n"))
                     for name, sec in sections.items() if sec is not None)


def broadcast_coords(coords: Coords, shape: Shape) -> Coords:
    """The coordinates of a value broadcast numpy-style (trailing dims aligned, size 1 repeated)."""
    lead = len(coords) - shape.rank
    return tuple(Affine() if n == 1 else coords[lead + j] for j, n in enumerate(shape.dims))


def heavy_op(fusion: Instruction, opcodes: Collection[str]) -> Instruction:
    """The one instruction of these opcodes in the fusion; the others must be loop ops with static dims."""
    found = heavy_ops(fusion, opcodes)
    if len(found) != 1:
        raise UnsupportedError(f"%{fusion.name}: a {fusion.attrs['kind']} fusion needs exactly one of "
                               f"{', '.join(sorted(opcodes))}, found {len(found)}")
    return found[0]


def heavy_ops(fusion: Instruction, opcodes: Collection[str]) -> list[Instruction]:
    """The instructions of these opcodes in the fusion, in its order; the others must be loop ops with
    static dims."""
    comp = fusion.called
    if comp is None:
        raise UnsupportedError(f"%{fusion.name}: fusion without a called computation")
    found = [i for i in comp.instructions if i.opcode in opcodes]
    if not found:
        raise UnsupportedError(f"%{fusion.name}: a {fusion.attrs['kind']} fusion needs one of "
                               f"{', '.join(sorted(opcodes))}, found none")
    for inst in comp.instructions:
        if inst is comp.root and inst.opcode == "tuple":
            continue  # a multi-output fusion's results (result_roots)
        if not any(inst is h for h in found) and (inst.opcode not in FUSIBLE_OPS or inst.opcode in _OWN_LOOPS):
            raise UnsupportedError(f"%{fusion.name}: %{inst.name} ({inst.opcode}) cannot be fused into the "
                                   f"{found[0].opcode}'s kernel")
        if inst.shape.is_tuple:
            raise UnsupportedError(f"%{fusion.name}: fused kernels need array shapes, %{inst.name} is "
                                   f"{inst.shape}")
    return found


def read_in_place(operand: Instruction, fusion: Instruction) -> FusedOperand:
    """An attention operand: a fusion parameter, or an affine view of one (slices, transposes, reshapes)."""
    view = affine_view(operand)
    if view is None or view.source.opcode != "parameter":
        return read_as_is(operand, fusion)
    return FusedOperand(int(view.source.attrs["index"]), operand.shape, view.offset, view.strides)


def read_as_is(operand: Instruction, fusion: Instruction) -> FusedOperand:
    """A contraction's or attention's operand: a fusion parameter, possibly through bitcasts."""
    x = operand
    while x.opcode == "bitcast":
        x = x.operands[0]
    if x.opcode != "parameter":
        raise UnsupportedError(f"%{fusion.name}: %{operand.name} is computed by a {x.opcode}; a contraction's "
                               "operands are read from memory as they are")
    return FusedOperand(int(x.attrs["index"]), operand.shape)


def pointer_params(fusion: Instruction) -> list[str]:
    """The kernel's pointer parameters: the fusion's operands, then its results (several for a multi-output
    fusion, in the order of its root tuple)."""
    return [f"in{i}" for i in range(len(fusion.operands))] + [f"out{i}" for i in range(len(result_roots(fusion)))]


def result_roots(fusion: Instruction) -> list[Instruction]:
    """The values a fusion returns: its root, or each element of a multi-output fusion's root tuple (the
    first is the heavy op's result or its epilogue)."""
    root = fusion.called.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def epilogue(fusion: Instruction, heavy: Instruction, acc: str, acc_dtype: str, lanes: Sequence[Lanes],
             shape: str, wide: bool, ranges: Ranges,
             also: Sequence[tuple[Instruction, str]] = (),
             scalars: Sequence[tuple[Instruction, str]] = (), packs: bool = False) -> tuple[Section, int]:
    """The fusion's root over an output tile, ``acc`` (held in acc_dtype) standing for the heavy op, and
    each (instruction, variable) of ``also`` for another op at the same coordinates (a second
    convolution's accumulator); and the ops it costs per element. ``packs``: the template stores a packed
    root's bytes itself (packed_value), so the section computes the 4/2-bit value they pack."""
    root = check_root(fusion, heavy, packs)
    em = TileEmitter(fusion, "e_", shape, kernel_dims(heavy.shape), lanes, wide, ranges)
    em.bind(heavy, acc, acc_dtype)
    for inst, var in also:
        em.bind(inst, var, acc_dtype)
    em.bind_scalars(scalars)
    em.section(root)
    (section,) = em.sections()
    return section, em.ops


def check_root(fusion: Instruction, heavy: Instruction, packs: bool = False) -> Instruction:
    """The fusion's root (its first result), which an epilogue computes at the heavy op's result coordinates
    (with ``packs``, the value a packed root packs)."""
    root = result_roots(fusion)[0]
    if packs and packed_value(fusion) is not None:
        root = packed_value(fusion)
    if tuple(root.shape.dims) != tuple(heavy.shape.dims):
        raise UnsupportedError(f"%{fusion.name}: the fused root %{root.name} {root.shape} is not at the "
                               f"{heavy.opcode}'s dims {heavy.shape}")
    return root


def packed_value(fusion: Instruction | None) -> Instruction | None:
    """The 4/2-bit value a fusion returns packed (pack-arena-values: its root is the value's ONNX-order bytes),
    whose kernel computes the value at its own coordinates and stores whole bytes; None for any other fusion."""
    if fusion is None or fusion.called is None or fusion.called.root.opcode == "tuple":
        return None
    return packed_source(fusion.called.root)


def needs_int64(ranges: Ranges, fusion: Instruction, *shapes: Shape) -> bool:
    """Whether an offset or a flat index of the fused kernel may not fit in int32: over the kernel's own
    shapes, the fusion's operands and result, or any value of its computation."""
    values = [i.shape for i in fusion.called.instructions if not i.shape.is_tuple]
    results = [r.shape for r in result_roots(fusion)]
    return is_wide(ranges, *shapes, *results, *[op.shape for op in fusion.operands], *values)
