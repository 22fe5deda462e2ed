"""The HLO-like IR: modules of computations of instructions.

Every array value carries a Shape: a dtype, dims (ints or symbolic names) and a
layout, the minor-to-major order of its dims, printed as XLA prints it:
``f32[8,16]{1,0}``. This module imports nothing from onnx, numpy, triton or jinja2.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Union

from mlcc.hlo.analyses import Analyses
from mlcc.hlo.symbolic import product, upper

# Quantized storage types, spelt as XLA spells them: 8-bit floats (e4m3fn and e5m2 with their fnuz forms,
# e8m0 the power-of-two scale type of MX formats), the 4-bit float e2m1 and 4- and 2-bit integers. They hold
# values only: convert, bitcast-convert, data movement and constants take them; arithmetic happens after a
# convert to a wide type (the verifier checks it, mlcc/hlo/verifier.py). In memory each element takes one byte,
# its bit pattern in the low bits and the high bits zero (ml_dtypes' in-memory form of int4, float4_e2m1fn...),
# so a buffer of n elements is n bytes and DTYPE_BYTES holds for every dtype; DTYPE_BITS is the width of the
# value itself.
F8_DTYPES = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0fnu")
NARROW_FLOAT_DTYPES = F8_DTYPES + ("f4e2m1fn",)
NARROW_INT_DTYPES = ("s4", "u4", "s2", "u2")
STORAGE_DTYPES = NARROW_FLOAT_DTYPES + NARROW_INT_DTYPES
DTYPES = ("pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
          "f16", "bf16", "f32", "f64") + STORAGE_DTYPES
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
               "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, **{t: 1 for t in STORAGE_DTYPES}}
DTYPE_BITS = {**{t: 8 * n for t, n in DTYPE_BYTES.items()}, "f4e2m1fn": 4, "s4": 4, "u4": 4, "s2": 2, "u2": 2}
# No device mlcc targets addresses more than 2**48 bytes (256 TiB: the 48-bit virtual address space of x86-64 and
# of the GPUs' unified addressing): a larger value cannot exist.
MAX_VALUE_BYTES = 2**48
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
SIGNED_DTYPES = ("s8", "s16", "s32", "s64")
UNSIGNED_DTYPES = ("u8", "u16", "u32", "u64")
INT_DTYPES = SIGNED_DTYPES + UNSIGNED_DTYPES

Dim = Union[int, str]


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_storage(dtype: str) -> bool:
    """A quantized storage type (fp8, fp4, 4- and 2-bit ints): values only, no arithmetic."""
    return dtype in STORAGE_DTYPES


def default_layout(rank: int) -> tuple[int, ...]:
    """Row-major: the last dim is minor-most."""
    return tuple(range(rank - 1, -1, -1))


@dataclass(frozen=True)
class Shape:
    """An array shape: dtype, logical dims, and physical layout (minor-to-major)."""

    dtype: str
    dims: tuple[Dim, ...]
    layout: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        if self.layout is None:
            object.__setattr__(self, "layout", default_layout(len(self.dims)))
        else:
            object.__setattr__(self, "layout", tuple(self.layout))

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_tuple(self) -> bool:
        return False

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.dims)

    def numel(self) -> int:
        if not self.is_static:
            raise ValueError(f"shape {self} has symbolic dims")
        n = 1
        for d in self.dims:
            n *= d
        return n

    def nbytes(self) -> int:
        return self.numel() * DTYPE_BYTES[self.dtype]

    def numel_expr(self) -> Dim:
        """The element count, symbolic when a dim is (canonical text, see mlcc/hlo/symbolic.py)."""
        if self.is_static:
            return self.numel()  # what product() gives for ints, without building expressions
        return product(self.dims)

    def upper_numel(self, ranges: dict[str, tuple[int, int]]) -> int:
        """The largest element count over the symbols' ranges."""
        return upper(self.numel_expr(), ranges)

    def upper_nbytes(self, ranges: dict[str, tuple[int, int]]) -> int:
        """Bytes at the largest element count over the symbols' ranges (nbytes() when static)."""
        return self.upper_numel(ranges) * DTYPE_BYTES[self.dtype]

    def with_dtype(self, dtype: str) -> "Shape":
        return Shape(dtype, self.dims, self.layout)

    def with_layout(self, layout: Iterable[int]) -> "Shape":
        return Shape(self.dtype, self.dims, tuple(layout))

    def is_row_major(self) -> bool:
        return self.layout == default_layout(self.rank)

    def strides(self) -> tuple[Dim, ...]:
        """Element strides of each logical dim under this layout (static dims only)."""
        strides: list[Any] = [0] * self.rank
        step = 1
        for d in self.layout:
            strides[d] = step
            step = step * self.dims[d] if isinstance(step, int) and isinstance(self.dims[d], int) else None
        return tuple(strides)

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.dims)
        if self.rank == 0:
            return f"{self.dtype}[]"
        return f"{self.dtype}[{dims}]{{{','.join(str(i) for i in self.layout)}}}"


@dataclass(frozen=True)
class TupleShape:
    elements: tuple[Shape, ...]

    @property
    def is_tuple(self) -> bool:
        return True

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elements) + ")"


AnyShape = Union[Shape, TupleShape]


class Users:
    """The instructions that use a value, in the order they became users, each once.

    Behaves as the list it replaces (iteration, len, indexing, ``in`` by identity, append), but
    membership and removal take constant time: a value read by thousands of instructions (a shared
    constant, a fan-out) loses its users one by one in time linear in their number."""

    __slots__ = ("_by_id",)

    def __init__(self, users: Iterable["Instruction"] = ()) -> None:
        self._by_id: dict[int, Instruction] = {}
        for u in users:
            self._by_id.setdefault(id(u), u)

    def append(self, user: "Instruction") -> None:
        self._by_id.setdefault(id(user), user)

    def discard(self, user: "Instruction") -> None:
        self._by_id.pop(id(user), None)

    def __contains__(self, user: object) -> bool:
        return self._by_id.get(id(user)) is user

    def __iter__(self) -> Iterator["Instruction"]:
        return iter(self._by_id.values())  # rewiring users while walking them raises: walk list(users)

    def __reversed__(self) -> Iterator["Instruction"]:
        return iter(list(self._by_id.values())[::-1])

    def __len__(self) -> int:
        return len(self._by_id)

    def __bool__(self) -> bool:
        return bool(self._by_id)

    def __getitem__(self, index: Any) -> Any:
        if index == 0 and self._by_id:
            return next(iter(self._by_id.values()))
        return list(self._by_id.values())[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Users):
            other = list(other)
        return isinstance(other, list) and len(other) == len(self) and all(a is b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return repr(list(self._by_id.values()))


class Instruction:
    """One SSA value: ``%name = shape opcode(operands), attr=value, ...``.

    Operands are Instruction objects; each instruction keeps its users so
    passes can rewrite without rescanning the computation.
    """

    __slots__ = ("name", "opcode", "shape", "operands", "attrs", "called", "origin", "_users", "parent")

    def __init__(self, name: str, opcode: str, shape: AnyShape, operands: Iterable["Instruction"] = (),
                 attrs: dict[str, Any] | None = None, called: "Computation | None" = None,
                 origin: Iterable[str] = ()) -> None:
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[Instruction] = []
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.called = called
        self.origin: tuple[str, ...] = tuple(origin)
        self._users = Users()
        self.parent: Computation | None = None
        for op in operands:
            self.operands.append(op)
            op._users.append(self)

    @property
    def users(self) -> Users:
        return self._users

    @users.setter
    def users(self, value: Iterable["Instruction"]) -> None:
        self._users = value if isinstance(value, Users) else Users(value)

    def set_operand(self, index: int, new: "Instruction") -> None:
        old = self.operands[index]
        self.operands[index] = new
        if not any(o is old for o in self.operands):
            old._users.discard(self)
        new._users.append(self)

    def replace_all_uses_with(self, new: "Instruction") -> None:
        for user in list(self._users):
            for i, op in enumerate(user.operands):
                if op is self:
                    user.set_operand(i, new)
        comp = self.parent
        if comp is not None and comp.root is self:
            comp.root = new

    def drop_operands(self) -> None:
        for op in self.operands:
            op._users.discard(self)
        self.operands = []

    def __repr__(self) -> str:
        return f"<{self.opcode} %{self.name} {self.shape}>"


class Computation:
    """An ordered list of instructions (topological; the entry's order is its schedule once scheduled).

    Inserting and removing take constant time: they are recorded and applied to the list in one
    linear pass the next time someone reads ``instructions`` (a pass that inserts or removes one
    instruction per node of a long graph would otherwise be quadratic). Instruction names are
    indexed for ``unique_name`` the same way."""

    def __init__(self, name: str, is_entry: bool = False) -> None:
        self.name = name
        self.is_entry = is_entry
        self._instructions: list[Instruction] = []
        self._before: dict[int, list[Instruction]] = {}  # anchor id -> instructions inserted just before it
        self._after: dict[int, list[Instruction]] = {}   # anchor id -> instructions inserted just after it
        self._removed: set[int] = set()                   # ids still in _instructions, removed since
        self._inserted = 0                                # instructions waiting in _before
        self._names: dict[str, int] | None = None         # name -> how many instructions here carry it
        self._names_count = 0                             # len(instructions) when _names was last right
        self._free_from: dict[str, int] = {}              # hint -> N: hint.1 .. hint.(N-1) are all taken
        self.root: Instruction | None = None
        self.fusion_kind: str | None = None

    @property
    def instructions(self) -> list[Instruction]:
        if self._inserted or self._removed:
            self._apply_edits()
        return self._instructions

    @instructions.setter
    def instructions(self, value: list[Instruction]) -> None:
        self._instructions = value
        self._before = {}
        self._after = {}
        self._removed = set()
        self._inserted = 0
        self._names = None

    def _apply_edits(self) -> None:
        """Put the recorded insertions in place and drop the removed, as if each edit had been made on the
        list at the time: what was inserted before an anchor sits just before it in the order inserted,
        what was inserted after it sits just after it, the latest first."""
        order: list[Instruction] = []
        before, after, removed = self._before, self._after, self._removed
        for inst in self._instructions:
            key = id(inst)
            if key in before or key in after:
                self._emit_edited(inst, order)
            elif key not in removed:
                order.append(inst)
        self._instructions = order
        self._before = {}
        self._after = {}
        self._removed = set()
        self._inserted = 0

    def _emit_edited(self, inst: Instruction, order: list[Instruction]) -> None:
        """inst with what was inserted around it (and around those, in turn) onto order."""
        before, after, removed = self._before, self._after, self._removed
        stack: list[tuple[Instruction, bool]] = [(inst, False)]
        while stack:
            x, expanded = stack.pop()
            if expanded:
                if id(x) not in removed:
                    order.append(x)
                continue
            following = after.pop(id(x), None)
            if following:
                stack.extend((p, False) for p in following)  # popped latest first
            stack.append((x, True))
            preceding = before.pop(id(x), None)
            if preceding:
                stack.extend((p, False) for p in reversed(preceding))

    def _name_index(self) -> dict[str, int]:
        """name -> count, rebuilt when instructions came or went behind this class's back (a pass that
        edits the list directly)."""
        size = len(self._instructions) + self._inserted - len(self._removed)  # without applying the edits
        if self._names is None or self._names_count != size:
            self._names = {}
            for i in self.instructions:
                self._names[i.name] = self._names.get(i.name, 0) + 1
            self._names_count = len(self._instructions)
            self._free_from = {}
        return self._names

    def _named(self, inst: Instruction, delta: int) -> None:
        if self._names is None:
            return
        count = self._names.get(inst.name, 0) + delta
        if count > 0:
            self._names[inst.name] = count
        else:
            self._names.pop(inst.name, None)
            hint, dot, suffix = inst.name.rpartition(".")
            if dot and suffix.isdecimal() and 0 < int(suffix) < self._free_from.get(hint, 0):
                self._free_from[hint] = int(suffix)  # hint.N is free again
        self._names_count += delta

    def _placed(self, inst: Instruction) -> None:
        if id(inst) in self._removed:  # back after a removal: settle the list before placing it again
            self._apply_edits()
        inst.parent = self
        self._named(inst, +1)

    def add(self, inst: Instruction) -> Instruction:
        self._placed(inst)
        self._instructions.append(inst)
        return inst

    def insert_before(self, anchor: Instruction, inst: Instruction) -> Instruction:
        if anchor.parent is not self:
            raise ValueError(f"cannot insert before %{anchor.name}: not in %{self.name}")
        self._placed(inst)
        self._before.setdefault(id(anchor), []).append(inst)
        self._inserted += 1
        return inst

    def insert_after(self, anchor: Instruction, inst: Instruction) -> Instruction:
        if anchor.parent is not self:
            raise ValueError(f"cannot insert after %{anchor.name}: not in %{self.name}")
        self._placed(inst)
        self._after.setdefault(id(anchor), []).append(inst)
        self._inserted += 1
        return inst

    def returned_ids(self) -> set[int]:
        """The ids of the values this computation returns: a tuple root's elements, or a bare root itself (a
        pass that would stop storing a value keeps those)."""
        root = self.root
        if root is None:
            return set()
        return {id(o) for o in root.operands} if root.opcode == "tuple" else {id(root)}

    def unique_name(self, hint: str) -> str:
        """hint, or hint.N for the smallest N that no instruction here uses."""
        names = self._name_index()
        if hint not in names:
            return hint
        n = self._free_from.get(hint, 1)  # every suffix below it is taken: a hint used a thousand times costs one step
        while f"{hint}.{n}" in names:
            n += 1
        self._free_from[hint] = n
        return f"{hint}.{n}"

    def parameters(self) -> list[Instruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda p: p.attrs["index"])

    def remove(self, inst: Instruction) -> None:
        if inst.users:
            raise ValueError(f"cannot remove %{inst.name}: still used by %{inst.users[0].name}")
        if inst.parent is not self or id(inst) in self._removed:
            raise ValueError(f"cannot remove %{inst.name}: not in %{self.name}")
        inst.drop_operands()
        self._removed.add(id(inst))
        self._named(inst, -1)
        inst.parent = None

    def topological_sort(self) -> None:
        """Reorder instructions so every operand precedes its users (stable; worklist, no recursion)."""
        order: list[Instruction] = []
        seen: set[int] = set()
        for start in self.instructions:
            if id(start) in seen:
                continue
            stack = [(start, 0)]
            while stack:
                inst, i = stack.pop()
                if i < len(inst.operands):
                    stack.append((inst, i + 1))
                    op = inst.operands[i]
                    if id(op) not in seen:
                        stack.append((op, 0))
                elif id(inst) not in seen:
                    seen.add(id(inst))
                    order.append(inst)
        self.instructions = order

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)


class Property(enum.Enum):
    """What a phase of the pipeline (mlcc/pipeline.py) guarantees about a module, in the order the phases
    establish them. The verifier checks more of a module the more of these it has."""

    LAYOUTS_ASSIGNED = "layouts_assigned"  # every value's layout is final (bitcasts and copies follow it)
    FUSED = "fused"                        # fusion decisions are final; fusion bodies are checked
    SCHEDULED = "scheduled"                # the entry's instruction order is the launch order
    BUFFERS_ASSIGNED = "buffers_assigned"  # module.buffer_plan places every value (not in the text form)


# A module printed with is_scheduled=true went through every phase up to the schedule.
SCHEDULED_PROPERTIES = frozenset({Property.LAYOUTS_ASSIGNED, Property.FUSED, Property.SCHEDULED})


@dataclass
class Module:
    """A module: an entry computation plus the computations it calls (fusions).

    ``constants`` maps a constant's ``ref`` attribute to its data (an array from
    the frontend; this module never looks inside). ``output_names`` names the
    entry's results in order (the root is a tuple of them).
    """

    name: str
    computations: list[Computation] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)
    properties: set[Property] = field(default_factory=set)  # what the phases run so far guarantee
    buffer_plan: Any = None  # mlcc.hlo.buffer_assignment.BufferPlan once assigned
    analyses: Analyses = field(default_factory=Analyses)
    # Each symbolic dim's inclusive range of sizes (mlcc/hlo/symbolic.py); size decisions use the upper end.
    symbols: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Symbols given no range: their entry in ``symbols`` is (lo, DEFAULT_SIZE), the size tiles are planned for,
    # and at run time they take any size from lo up (buffer sizes and arena offsets become expressions).
    unbounded: set[str] = field(default_factory=set)
    source_files: list[Path] = field(default_factory=list)  # files besides the model the frontend read (ONNX data)
    # Outputs of a 4- or 2-bit integer type the entry returns packed (README "The bundle"): output index ->
    # the logical shape; the root's operand is then the u8 bytes. Inputs say so on their parameter
    # (attributes packed=DTYPE, packed_dims={...}).
    packed_outputs: dict[int, Shape] = field(default_factory=dict)
    # Outputs the user sees as complex (a StableHLO complex<f32>/complex<f64> result): the root's operand is
    # the real pairs, f32[..., 2] (f64), numpy's ``x[..., None].view(np.float32)``. A complex input is a
    # parameter of that form with attribute complex=true.
    complex_outputs: set[int] = field(default_factory=set)

    @property
    def is_scheduled(self) -> bool:
        return Property.SCHEDULED in self.properties

    @is_scheduled.setter
    def is_scheduled(self, value: bool) -> None:
        """Scheduled means every phase up to the schedule ran (the text form's is_scheduled=true)."""
        if value:
            self.properties |= SCHEDULED_PROPERTIES
        else:
            self.properties -= {Property.SCHEDULED, Property.BUFFERS_ASSIGNED}

    @property
    def entry(self) -> Computation:
        for c in self.computations:
            if c.is_entry:
                return c
        raise ValueError("module has no entry computation")

    def computation(self, name: str) -> Computation:
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(name)

    def add_computation(self, comp: Computation) -> Computation:
        self.computations.append(comp)
        return comp

    def all_instructions(self) -> Iterator[Instruction]:
        for c in self.computations:
            yield from c.instructions
