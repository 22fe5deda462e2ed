"""Schedule and buffer assignment: which kernel runs at which step, and where every value lives.

The schedule is the entry computation's instruction order restricted to the
instructions that launch a kernel. Values that launch no kernel live elsewhere:
parameters are INPUT buffers, constants are WEIGHT/CONSTANT buffers in the weights
file, a bitcast is a view of its operand's buffer, tuples hold no data. Every
other value is an ACTIVATION in one arena, or an OUTPUT buffer of its own. Arena
offsets are chosen greedily by size over live ranges (best fit, as XLA's heap
simulator does for its default heuristic) and the peak is compared with the lower
bound: the largest sum of bytes live at one step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlcc.hlo.ir import Instruction, Module, Shape

NO_KERNEL = frozenset({"parameter", "constant", "bitcast", "tuple", "get-tuple-element"})
ALIGNMENT = 256


def launches_kernel(inst: Instruction) -> bool:
    return inst.opcode not in NO_KERNEL


def align(n: int, a: int = ALIGNMENT) -> int:
    return -(-n // a) * a


@dataclass
class Buffer:
    name: str
    tensor_class: str           # INPUT, OUTPUT, WEIGHT, CONSTANT, ACTIVATION
    shape: Shape
    bytes: int
    producer_step: int | None   # the step whose kernel writes it (None for inputs and weights)
    uses: list[int] = field(default_factory=list)  # steps whose kernel reads or writes it
    offset: int | None = None   # arena offset (ACTIVATION only)

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
    for inst in comp.instructions:
        if inst.opcode in ("tuple", "get-tuple-element"):
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
        nbytes = shape.nbytes() if shape.is_static else 0
        buffers[inst.name] = Buffer(inst.name, cls, shape, nbytes, step_of.get(id(inst)))

    for s, inst in enumerate(steps):
        for v in [*inst.operands, inst]:
            b = buffers[value_buffer[v.name]]
            if not b.uses or b.uses[-1] != s:
                b.uses.append(s)

    arena = [b for b in buffers.values() if b.tensor_class == "ACTIVATION"]
    arena_bytes = _place(arena)
    lower_bound = 0
    for s in range(len(steps)):
        live = sum(align(b.bytes) for b in arena if b.first_step <= s <= b.last_step)
        lower_bound = max(lower_bound, live)
    plan = BufferPlan(steps, buffers, value_buffer, arena_bytes, lower_bound)
    module.buffer_plan = plan
    return plan


def _place(buffers: list[Buffer]) -> int:
    """Greedy by size: each buffer at the lowest offset free over its whole live range."""
    placed: list[Buffer] = []
    peak = 0
    for b in sorted(buffers, key=lambda b: (-b.bytes, b.first_step, b.name)):
        size = align(max(b.bytes, 1))
        busy = sorted((p.offset, p.offset + align(max(p.bytes, 1))) for p in placed
                      if p.first_step <= b.last_step and b.first_step <= p.last_step)
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        b.offset = offset
        placed.append(b)
        peak = max(peak, offset + size)
    return peak
