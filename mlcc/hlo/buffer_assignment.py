"""Schedule and buffer assignment: which kernel runs at which step, and where every value lives.

The schedule is the entry computation's instruction order restricted to the
instructions that launch a kernel. Values that launch no kernel live elsewhere:
parameters are INPUT buffers, constants are WEIGHT/CONSTANT buffers in the weights
file, a bitcast is a view of its operand's buffer, tuples hold no data. A
multi-output fusion (tuple-shaped) writes one buffer per element, each the buffer
of the get-tuple-element that reads it out (``BufferPlan.results``). Every
other value is an ACTIVATION in one arena, or an OUTPUT buffer of its own. Arena
offsets are chosen greedily by size over live ranges (best fit, as XLA's heap
simulator does for its default heuristic) and the peak is compared with the lower
bound: the largest sum of bytes live at one step. A module with a symbol that has no upper end
(``Module.unbounded``) places the buffers that grow with it above the others, with offsets and the arena's
size as expressions (mlcc/hlo/symbolic_arena.py); ``bytes`` and ``offset`` are then their values at the
planned sizes, ``size`` and ``offset_expr`` what holds at every size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlcc.bundle.layout import ALIGNMENT, align  # noqa: F401 - the bundle format's alignment, named here too
from mlcc.hlo.ir import DTYPE_BYTES, Instruction, Module, Shape
from mlcc.hlo.opcodes import ops_with
from mlcc.hlo.symbolic import Sym, as_sym, evaluate
from mlcc.hlo.symbolic_arena import Chain, place_symbolic

NO_KERNEL = ops_with("no_kernel")


def launches_kernel(inst: Instruction) -> bool:
    return inst.opcode not in NO_KERNEL


@dataclass
class Buffer:
    name: str
    tensor_class: str           # INPUT, OUTPUT, WEIGHT, CONSTANT, ACTIVATION
    shape: Shape
    bytes: int
    producer_step: int | None   # the step whose kernel writes it (None for inputs and weights)
    uses: list[int] = field(default_factory=list)  # steps whose kernel reads or writes it
    offset: int | None = None   # arena offset (ACTIVATION only)
    size: Sym | None = None     # bytes as an expression, when they grow with an unbounded symbol
    offset_expr: int | str | None = None  # the offset at every size (an unbounded module's arena only)

    @property
    def size_key(self) -> tuple[int, str]:
        """What two buffers of the same size share: bytes, and the expression when they have one."""
        return self.bytes, "" if self.size is None else str(self.size)

    @property
    def bytes_expr(self) -> int | str:
        """The bytes at every size: a number, or an expression over the symbols."""
        return self.bytes if self.size is None else str(self.size)

    @property
    def first_step(self) -> int:
        return min(self.uses) if self.uses else 0

    @property
    def last_step(self) -> int:
        return max(self.uses) if self.uses else 0


@dataclass
class BufferPlan:
    steps: list[Instruction]              # kernel launches in order
    buffers: dict[str, Buffer]            # by buffer name
    value_buffer: dict[str, str]          # instruction name -> the buffer holding its bytes
    arena_bytes: int
    lower_bound: int
    in_place: dict[str, str] = field(default_factory=dict)  # output buffer -> operand buffer it overwrites
    arena_expr: int | str | None = None  # the arena's bytes at every size, when a symbol has no upper end
    results: dict[str, list[str]] = field(default_factory=dict)  # step's instruction -> the buffers it writes

    def results_of(self, inst: Instruction) -> list[str]:
        """The buffers inst's kernel writes, in the order of its pointer params: one, or one per element of a
        multi-output fusion."""
        return self.results.get(inst.name) or [self.value_buffer[inst.name]]

    def buffer_of(self, inst: Instruction) -> Buffer:
        return self.buffers[self.value_buffer[inst.name]]

    def arena_buffers(self) -> list[Buffer]:
        return [b for b in self.buffers.values() if b.offset is not None]


def _defining(inst: Instruction) -> Instruction:
    while inst.opcode == "bitcast":
        inst = inst.operands[0]
    return inst


def assign_buffers(module: Module) -> BufferPlan:
    comp = module.entry
    steps = [i for i in comp.instructions if launches_kernel(i)]
    step_of = {id(inst): s for s, inst in enumerate(steps)}
    outputs = {id(_defining(o)) for o in comp.root.operands} if comp.root is not None and comp.root.opcode == "tuple" else set()

    buffers: dict[str, Buffer] = {}
    value_buffer: dict[str, str] = {}
    results = _element_values(steps)
    for inst in comp.instructions:
        if inst.opcode == "tuple" or inst.shape.is_tuple:
            continue
        if inst.opcode == "get-tuple-element" and not launches_kernel(inst.operands[0]):
            continue
        base = _defining(inst)
        value_buffer[inst.name] = base.name
        if base is not inst:
            continue
        if inst.opcode == "parameter":
            cls = "INPUT"
        elif inst.opcode == "constant":
            cls = "WEIGHT" if "ref" in inst.attrs else "CONSTANT"
        elif id(inst) in outputs:
            cls = "OUTPUT"
        else:
            cls = "ACTIVATION"
        shape = inst.shape
        nbytes = shape.upper_nbytes(module.symbols)  # a symbolic size is planned at the top of its range
        producer = inst.operands[0] if inst.opcode == "get-tuple-element" else inst
        buffers[inst.name] = Buffer(inst.name, cls, shape, nbytes, step_of.get(id(producer)))
        size = as_sym(shape.numel_expr()) * DTYPE_BYTES[shape.dtype]
        if set(size.symbols()) & module.unbounded:
            buffers[inst.name].size = size
    for inst in steps:  # an element no get-tuple-element reads: the kernel still writes it somewhere
        for i, v in enumerate(results.get(id(inst), ())):
            if isinstance(v, str):
                element = inst.shape.elements[i]
                buffers[v] = Buffer(v, "ACTIVATION", element, element.upper_nbytes(module.symbols), step_of[id(inst)])
                size = as_sym(element.numel_expr()) * DTYPE_BYTES[element.dtype]
                if set(size.symbols()) & module.unbounded:
                    buffers[v].size = size
                value_buffer[v] = v
    written = {inst.name: [v if isinstance(v, str) else value_buffer[v.name] for v in results[id(inst)]]
               for inst in steps if id(inst) in results}

    for s, inst in enumerate(steps):
        names = [value_buffer[o.name] for o in inst.operands] + written.get(inst.name, [value_buffer.get(inst.name)])
        for name in names:
            b = buffers[name]
            if not b.uses or b.uses[-1] != s:
                b.uses.append(s)

    arena = [b for b in buffers.values() if b.tensor_class == "ACTIVATION"]
    shares = _in_place_pairs(steps, buffers, value_buffer)
    if module.unbounded:
        arena_bytes, arena_expr = _place_unbounded(arena, shares, module.symbols)
    else:
        arena_bytes, arena_expr = _place(arena, shares), None
    lower_bound = _peak_live(arena, len(steps))
    plan = BufferPlan(steps, buffers, value_buffer, arena_bytes, lower_bound, shares, arena_expr, written)
    module.buffer_plan = plan
    return plan


def _element_values(steps: list[Instruction]) -> dict[int, list["Instruction | str"]]:
    """For each multi-output (tuple-shaped) step, the value holding each element: its get-tuple-element, or
    a name for a buffer of its own where none reads it."""
    found: dict[int, list[Instruction | str]] = {}
    for inst in steps:
        if not inst.shape.is_tuple:
            continue
        values: list[Instruction | str] = [f"{inst.name}.{i}" for i in range(len(inst.shape.elements))]
        for u in inst.users:
            if u.opcode == "get-tuple-element" and isinstance(values[u.attrs["index"]], str):
                values[u.attrs["index"]] = u
        found[id(inst)] = values
    return found


ELEMENTWISE_IN_PLACE = ops_with("in_place_safe")


def _elementwise_path_only(param: Instruction, root: Instruction) -> bool:
    """Every use of param inside a fused computation is an elementwise op at the root's dims."""
    work, seen = [param], {id(param)}
    while work:
        v = work.pop()
        for u in v.users:
            if u.opcode not in ELEMENTWISE_IN_PLACE or u.shape.dims != root.shape.dims:
                return False
            if u is not root and id(u) not in seen:
                seen.add(id(u))
                work.append(u)
    return True


def in_place_operands(inst: Instruction) -> list[int]:
    """Operands inst's kernel may overwrite with its result: each element read once, at the very
    coordinates it writes, before it writes them (elementwise kernels and loop fusions of them)."""
    if inst.shape.is_tuple:
        return []
    if inst.opcode in ELEMENTWISE_IN_PLACE:
        return list(range(len(inst.operands)))
    if inst.opcode == "fusion" and inst.attrs.get("kind") == "loop" and inst.called is not None:
        root = inst.called.root
        params = inst.called.parameters()
        return [i for i, p in enumerate(params) if root.opcode != "parameter" and _elementwise_path_only(p, root)]
    return []


def _in_place_pairs(steps: list[Instruction], buffers: dict[str, Buffer], value_buffer: dict[str, str]) -> dict[str, str]:
    """output buffer -> the dying operand buffer whose bytes it reuses."""
    shares: dict[str, str] = {}
    taken: set[str] = set()
    for s, inst in enumerate(steps):
        out = buffers.get(value_buffer.get(inst.name, ""))
        if out is None or out.tensor_class != "ACTIVATION":
            continue
        for i in in_place_operands(inst):
            op = inst.operands[i]
            src = buffers[value_buffer[op.name]]
            if (src.tensor_class == "ACTIVATION" and src.last_step == s and src.name not in taken
                    and op.shape.layout == inst.shape.layout and src.size_key == out.size_key
                    and sum(1 for o in inst.operands if value_buffer[o.name] == src.name) == 1):
                shares[out.name] = src.name
                taken.add(src.name)
                break
    return shares


def _place_unbounded(arena: list[Buffer], shares: dict[str, str],
                     planned: dict[str, tuple[int, int]]) -> tuple[int, int | str]:
    """The arena when some buffers grow with a symbol that has no upper end (mlcc/hlo/symbolic_arena.py):
    the fixed ones by the numeric plan at the bottom, the growing ones above them with offsets as expressions,
    ordered as the numeric plan orders them at the planned sizes. (arena bytes at those sizes, at every size)"""
    growing = [b for b in arena if b.size is not None]
    fixed = [b for b in arena if b.size is None]
    base = _place(fixed, shares)
    for b in fixed:
        b.offset_expr = b.offset
    _place(growing, shares)  # the order only
    head: dict[str, str] = {}  # each buffer's in-place chain, named by its first buffer (as _place names it)
    for b in growing:
        n = b.name
        while n in shares:
            n = shares[n]
        head[b.name] = n
    chains: dict[str, Chain] = {}
    for b in growing:
        c = chains.get(head[b.name])
        if c is None:
            chains[head[b.name]] = Chain(head[b.name], b.size, b.first_step, b.last_step, b.offset)
        else:
            c.first, c.last = min(c.first, b.first_step), max(c.last, b.last_step)
    offsets, arena_expr = place_symbolic(list(chains.values()), base)
    at = {k: hi for k, (_, hi) in planned.items()}
    for b in growing:
        b.offset_expr = offsets[head[b.name]]
        b.offset = evaluate(b.offset_expr, at)
    return evaluate(arena_expr, at), arena_expr


def _place(buffers: list[Buffer], shares: dict[str, str] | None = None) -> int:
    """Greedy by size: each chain of in-place buffers at the lowest offset free over its whole live range."""
    shares = shares or {}
    head: dict[str, str] = {}
    for b in buffers:  # follow out -> in -> in ... to the chain's first buffer
        n = b.name
        while n in shares:
            n = shares[n]
        head[b.name] = n
    chains: dict[str, list[Buffer]] = {}
    for b in buffers:
        chains.setdefault(head[b.name], []).append(b)
    spans = [(max(x.bytes for x in c), min(x.first_step for x in c), max(x.last_step for x in c), h, c)
             for h, c in chains.items()]
    placed = _PlacedIndex()
    peak = 0
    for nbytes, first, last, name, chain in sorted(spans, key=lambda t: (-t[0], t[1], t[3])):
        size = align(max(nbytes, 1))
        busy = sorted(placed.overlapping(first, last))
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        for b in chain:
            b.offset = offset
        placed.add(offset, offset + size, first, last)
        peak = max(peak, offset + size)
    return peak


def _peak_live(arena: list[Buffer], nsteps: int) -> int:
    """The largest sum of aligned bytes live at one step (0..nsteps-1): one sweep over start and end events."""
    delta = [0] * (nsteps + 1)
    for b in arena:
        first, last = b.first_step, b.last_step
        lo, hi = max(first, 0), min(last, nsteps - 1)
        if lo > hi:
            continue
        delta[lo] += align(b.bytes)
        delta[hi + 1] -= align(b.bytes)
    peak = live = 0
    for s in range(nsteps):
        live += delta[s]
        peak = max(peak, live)
    return peak


class _PlacedIndex:
    """Arena blocks placed so far, found by the steps they are live over: each block is listed in every
    bucket of BUCKET steps its live range touches, so a query reads the blocks near its range instead of
    every block placed (a long graph has thousands, each live a few steps). A query whose buckets hold more
    entries than there are blocks (values live across much of the graph: a wide fan-out) reads every block
    once instead, as a plain scan would."""

    BUCKET = 32

    def __init__(self) -> None:
        self.blocks: list[tuple[int, int, int, int]] = []
        self.buckets: dict[int, list[tuple[int, int, int, int]]] = {}

    def add(self, lo: int, hi: int, first: int, last: int) -> None:
        block = (lo, hi, first, last)
        self.blocks.append(block)
        for k in range(first // self.BUCKET, last // self.BUCKET + 1):
            self.buckets.setdefault(k, []).append(block)

    def overlapping(self, first: int, last: int) -> list[tuple[int, int]]:
        """(lo, hi) of every block placed whose live range meets first..last, each once."""
        keys = range(first // self.BUCKET, last // self.BUCKET + 1)
        if len(keys) > len(self.blocks) or sum(len(self.buckets.get(k, ())) for k in keys) >= len(self.blocks):
            return [(lo, hi) for lo, hi, f, l in self.blocks if f <= last and first <= l]
        if len(keys) == 1:
            return [(lo, hi) for lo, hi, f, l in self.buckets.get(keys[0], ()) if f <= last and first <= l]
        found: dict[int, tuple[int, int]] = {}
        for k in keys:
            for block in self.buckets.get(k, ()):
                lo, hi, f, l = block
                if f <= last and first <= l:
                    found[id(block)] = (lo, hi)
        return list(found.values())
