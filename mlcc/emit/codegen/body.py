"""The kernel-body IR: the typed statements a lowering emits, their verifier and their printer.

A loop kernel's body, and each fused section of a heavier kernel (mlcc/emit/codegen/fused.py), is a list of
statements that ``templates/loop_ops.py.jinja`` renders, one small macro per statement kind. A
statement defines at most one variable (``out``) at a loop ``depth``; its other fields are numbers, IR
dtype names, index expressions (``Affine``) and the names of the variables it reads, never source text
from a model. Every variable holds a value of one IR dtype: index arithmetic is in the body's index
dtype (s32 or s64), a mask is pred, a value is its HLO instruction's dtype (or the f32 a half computes
in). Variables the template defines before the body (the lanes' positions, the tail mask, a tile's
accumulator) are the body's inputs, declared with their dtypes.

``verify_body`` checks what the renderer relies on: every statement is of a known kind, reads only
variables defined before it (at its loop depth or outside), and gets operands of the dtypes it says.
``format_body`` prints a body as text, one statement a line, for error messages and debugging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from mlcc.emit.codegen.indexing import Affine, Mask
from mlcc.errors import InternalError

Number = int | float | bool
Clause = tuple[Affine, str, Affine]  # lhs op rhs, op one of >=, <, ==
COMPARISONS = (">=", "<", "==")


def _vars(a: Affine) -> tuple[str, ...]:
    return tuple(name for name, _ in a.terms)


def _mask_text(mask: Mask) -> str:
    return "" if mask is None else f" if {mask}"


@dataclass(frozen=True)
class Stmt:
    """A statement: defines ``out`` (None for a store) at loop ``depth``."""
    kind: ClassVar[str]
    out: str | None
    depth: int

    def reads(self) -> tuple[str, ...]:
        """The variables this statement reads."""
        raise NotImplementedError

    def text(self) -> str:
        """The statement as one line of the printed body, without its indentation."""
        raise NotImplementedError


@dataclass(frozen=True)
class Index(Stmt):
    """out = expr, an index expression."""
    kind = "index"
    expr: Affine

    def reads(self) -> tuple[str, ...]:
        return _vars(self.expr)

    def text(self) -> str:
        return f"{self.out} = index {self.expr.code()}"


@dataclass(frozen=True)
class Div(Stmt):
    """out = x // k (x >= 0; k a size: a number, or an expression over the kernel's sym_ arguments)."""
    kind = "div"
    x: str
    k: str

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        return f"{self.out} = div {self.x}, {self.k}"


@dataclass(frozen=True)
class Mod(Stmt):
    """out = x % k."""
    kind = "mod"
    x: str
    k: str

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        return f"{self.out} = mod {self.x}, {self.k}"


@dataclass(frozen=True)
class Widen(Stmt):
    """out = x cast to the index dtype (a loop counter in an int64 kernel)."""
    kind = "widen"
    x: str
    index: str

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        return f"{self.out} = widen {self.x} to {self.index}"


@dataclass(frozen=True)
class MaskStmt(Stmt):
    """out = base & every clause: which lanes may touch memory."""
    kind = "mask"
    base: str | None
    clauses: tuple[Clause, ...]

    def reads(self) -> tuple[str, ...]:
        names = [self.base] if self.base else []
        for lhs, _, rhs in self.clauses:
            names += [*_vars(lhs), *_vars(rhs)]
        return tuple(names)

    def text(self) -> str:
        terms = [self.base] if self.base else []
        terms += [f"({lhs.code()} {op} {rhs.code()})" for lhs, op, rhs in self.clauses]
        return f"{self.out} = mask {' & '.join(terms)}"


@dataclass(frozen=True)
class IndexValue(Stmt):
    """out = an index read from data: x (of dtype src) widened to ``work``, negatives wrapped by ``wrap``,
    clamped to [lo, hi], in the ``index`` dtype."""
    kind = "index_value"
    x: str
    src: str
    work: str
    index: str
    wrap: str | None
    lo: str | None
    hi: str | None

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in (("wrap", self.wrap), ("lo", self.lo), ("hi", self.hi))
                        if v is not None)
        return f"{self.out} = index_value {self.x}: {self.src} via {self.work} to {self.index}{extra}"


@dataclass(frozen=True)
class Load(Stmt):
    """out = ptr[offset] where mask holds (0 elsewhere), one element per lane, of ``dtype``."""
    kind = "load"
    ptr: str
    offset: Affine
    mask: str | None
    offset_block: bool  # the offset differs per lane (else it is broadcast to the block)
    index: str
    dtype: str

    def reads(self) -> tuple[str, ...]:
        return _vars(self.offset) + ((self.mask,) if self.mask else ())

    def text(self) -> str:
        return f"{self.out} = load {self.dtype} {self.ptr}[{self.offset.code()}]{_mask_text(self.mask)}"


@dataclass(frozen=True)
class Full(Stmt):
    """out = a constant (the same in every lane)."""
    kind = "full"
    value: Number
    dtype: str

    def reads(self) -> tuple[str, ...]:
        return ()

    def text(self) -> str:
        return f"{self.out} = full {self.dtype} {self.value!r}"


@dataclass(frozen=True)
class Table(Stmt):
    """out = entries[x]: an inline constant read at a computed position."""
    kind = "table"
    x: str
    entries: tuple[Number, ...]
    dtype: str

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        return f"{self.out} = table {self.dtype}[{len(self.entries)}] at {self.x}"


@dataclass(frozen=True)
class Convert(Stmt):
    """out = x converted from src to dst (the evaluator's rule; [lo, hi] bounds an integer dst)."""
    kind = "convert"
    x: str
    src: str
    dst: str
    lo: int
    hi: int

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        return f"{self.out} = convert {self.x}: {self.src} to {self.dst}"


@dataclass(frozen=True)
class BitcastConvert(Stmt):
    """out = x's bits read as dst."""
    kind = "bitcast_convert"
    x: str
    src: str
    dst: str

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        return f"{self.out} = bitcast_convert {self.x}: {self.src} to {self.dst}"


@dataclass(frozen=True)
class ElementOp(Stmt):
    """out = an elementwise HLO op of args, computed in ``dtype`` (its dtype ``category``: float, signed,
    unsigned or pred); the result is of dtype ``result``. Its Triton code is the op's entry in
    mlcc/emit/codegen/elementwise.py."""
    kind = "op"
    op: str
    variant: str | None  # compare's direction, gelu's approximation
    category: str
    dtype: str
    args: tuple[str, ...]
    bits: int
    utype: str  # the unsigned and signed integer dtypes of dtype's width (shifts, popcnt)
    stype: str
    result: str

    def reads(self) -> tuple[str, ...]:
        return self.args

    def text(self) -> str:
        op = self.op + (f"/{self.variant}" if self.variant else "")
        return f"{self.out} = op {op}({', '.join(self.args)}): {self.dtype} -> {self.result}"


@dataclass(frozen=True)
class Select(Stmt):
    """out = cond ? a : b (out may be an accumulator defined before: a loop's running value)."""
    kind = "select"
    cond: str
    a: str
    b: str

    def reads(self) -> tuple[str, ...]:
        return (self.cond, self.a, self.b)

    def text(self) -> str:
        return f"{self.out} = select {self.cond}, {self.a}, {self.b}"


@dataclass(frozen=True)
class Assign(Stmt):
    """out = x (out may be an accumulator defined before)."""
    kind = "assign"
    x: str

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        return f"{self.out} = assign {self.x}"


@dataclass(frozen=True)
class Broadcast(Stmt):
    """out = x, the same value in every lane of the block (or of the tile)."""
    kind = "broadcast"
    x: str

    def reads(self) -> tuple[str, ...]:
        return (self.x,)

    def text(self) -> str:
        return f"{self.out} = broadcast {self.x}"


@dataclass(frozen=True)
class For(Stmt):
    """for out in range(count): the statements after it one depth deeper are its body."""
    kind = "for"
    count: str

    def reads(self) -> tuple[str, ...]:
        return ()

    def text(self) -> str:
        return f"for {self.out} in range({self.count}):"


@dataclass(frozen=True)
class Store(Stmt):
    """ptr[offset] = x where mask holds."""
    kind = "store"
    ptr: str
    offset: Affine
    x: str
    mask: str

    def reads(self) -> tuple[str, ...]:
        return (self.x, *_vars(self.offset), self.mask)

    def text(self) -> str:
        return f"store {self.ptr}[{self.offset.code()}] = {self.x}{_mask_text(self.mask)}"


STATEMENT_KINDS: dict[str, type[Stmt]] = {cls.kind: cls for cls in (
    Index, Div, Mod, Widen, MaskStmt, IndexValue, Load, Full, Table, Convert, BitcastConvert, ElementOp, Select,
    Assign, Broadcast, For, Store)}


# ---- printer ---------------------------------------------------------------

def format_stmt(stmt: object) -> str:
    if isinstance(stmt, Stmt) and type(stmt) in STATEMENT_KINDS.values():
        return stmt.text()
    return f"<unknown statement {stmt!r}>"


def format_body(stmts: Sequence[object], inputs: Mapping[str, str] | None = None) -> str:
    """The body as text: its inputs, then one statement a line, indented by loop depth."""
    lines = []
    if inputs:
        lines.append("inputs " + ", ".join(f"{name}: {dtype}" for name, dtype in inputs.items()))
    for s in stmts:
        depth = s.depth if isinstance(s, Stmt) else 0
        lines.append("  " * depth + format_stmt(s))
    return "\n".join(lines)


# ---- verifier --------------------------------------------------------------

class BodyError(InternalError):
    """A malformed kernel body: a lowering's bug, never the model's. ``message`` says what is wrong, in one
    line; ``body`` is the printed body it is wrong in."""

    def __init__(self, message: str, body: str) -> None:
        super().__init__(message)
        self.body = body

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.body}"


def _is_int(dtype: str | None) -> bool:
    return dtype is not None and dtype[0] in "su" and dtype[1:].isdigit()


class _Malformed(Exception):
    """What is wrong with one statement (verify_body adds which statement, and the body)."""


def verify_body(stmts: Sequence[object], inputs: Mapping[str, str], index_dtype: str) -> None:
    """Raise BodyError unless every statement is of a known kind, reads only variables defined before it
    (an input, or an earlier statement's out at its depth or outside) and gets operands of its dtypes."""
    types: dict[str, str] = dict(inputs)  # the variables in scope, with their dtypes
    opened: list[list[str]] = []  # per open loop: the variables defined in it
    prev_depth, prev_for = 0, False
    for i, s in enumerate(stmts):
        if not isinstance(s, Stmt) or type(s) not in STATEMENT_KINDS.values():
            raise BodyError(f"statement {i}: unknown statement kind {type(s).__name__}",
                            format_body(stmts, inputs))
        try:
            if s.depth < 0 or s.depth > prev_depth + prev_for or (prev_for and s.depth != prev_depth + 1):
                raise _Malformed(f"at depth {s.depth} after a statement at depth {prev_depth}"
                                 + (" opening a loop" if prev_for else ""))
            while len(opened) > s.depth:  # the loops this statement is after: their variables are gone
                for name in opened.pop():
                    del types[name]
            for name in s.reads():
                if name not in types:
                    raise _Malformed(f"{name} is read before it is defined")
            result = _result_type(s, types, index_dtype)
            if s.out is not None and s.out in types:
                if not isinstance(s, (Assign, Select)):
                    raise _Malformed(f"{s.out} is defined twice")
                if types[s.out] != result:
                    raise _Malformed(f"{s.out} is {types[s.out]}, assigned a {result}")
            elif s.out is not None:
                types[s.out] = result
                if opened:
                    opened[-1].append(s.out)
        except _Malformed as e:
            raise BodyError(f"statement {i} ({s.text()}): {e}", format_body(stmts, inputs)) from None
        if isinstance(s, For):
            opened.append([])
        prev_depth, prev_for = s.depth, isinstance(s, For)
    if prev_for:
        raise BodyError("the body ends with a loop header", format_body(stmts, inputs))


def _result_type(s: Stmt, types: Mapping[str, str], index_dtype: str) -> str | None:
    """The dtype of s's result, after checking its operands' dtypes (raising _Malformed)."""

    def want_int(*names: str) -> None:
        for name in names:
            if not _is_int(types[name]):
                raise _Malformed(f"{name} is {types[name]}, not an integer index")

    def want(name: str, dtype: str) -> None:
        if types[name] != dtype:
            raise _Malformed(f"{name} is {types[name]}, expected {dtype}")

    if isinstance(s, Index):
        want_int(*s.reads())
        return index_dtype
    if isinstance(s, (Div, Mod, Widen)):
        want_int(s.x)
        return s.index if isinstance(s, Widen) else types[s.x]
    if isinstance(s, MaskStmt):
        if s.base:
            want(s.base, "pred")
        for lhs, op, rhs in s.clauses:
            if op not in COMPARISONS:
                raise _Malformed(f"unknown comparison {op!r}")
            want_int(*_vars(lhs), *_vars(rhs))
        return "pred"
    if isinstance(s, IndexValue):
        want(s.x, s.src)
        return s.index
    if isinstance(s, (Load, Store)):
        want_int(*_vars(s.offset))
        if s.mask:
            want(s.mask, "pred")
        return s.dtype if isinstance(s, Load) else None
    if isinstance(s, (Full, Table)):
        if isinstance(s, Table):
            want_int(s.x)
        return s.dtype
    if isinstance(s, (Convert, BitcastConvert)):
        want(s.x, s.src)
        return s.dst
    if isinstance(s, ElementOp):
        operands = s.args[1:] if s.op == "select" else s.args
        if s.op == "select":
            want(s.args[0], "pred")
        for name in operands:
            want(name, s.dtype)
        if s.result not in (s.dtype, "pred"):
            raise _Malformed(f"an op on {s.dtype} gives {s.result}")
        return s.result
    if isinstance(s, Select):
        want(s.cond, "pred")
        want(s.b, types[s.a])
        return types[s.a]
    if isinstance(s, (Assign, Broadcast)):
        return types[s.x]
    if isinstance(s, For):
        return "s32"
    raise _Malformed("no type rule")  # pragma: no cover - every kind in STATEMENT_KINDS has one above
