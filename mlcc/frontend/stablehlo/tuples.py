"""Tuples flattened away before import: a tuple is the list of its (tensor) elements.

Every tuple-typed value becomes its leaves, depth first: a function's arguments and results, a block's
arguments (while's loop variables), every op's results (while, if, case, call) and operands (return,
call, while). ``stablehlo.tuple`` and ``stablehlo.get_tuple_element`` leave no op: the first names the
concatenation of its operands' leaves, the second a slice of its operand's. So
``@main(%arg0: tuple<A, tuple<B, C>>, %arg1: D)`` takes four inputs (arg0..arg3: A, B, C, D), and a
function returning ``tuple<A, B>`` has two outputs.
"""

from __future__ import annotations

from typing import Any

from mlcc.frontend.stablehlo.errors import StableHLOParseError
from mlcc.frontend.stablehlo.syntax import Block, FunctionType, Op, ParsedModule, TupleType, Value


def leaf_types(t: Any) -> list[Any]:
    if isinstance(t, TupleType):
        return [leaf for e in t.elements for leaf in leaf_types(e)]
    return [t]


def _has_tuple(t: Any) -> bool:
    if isinstance(t, FunctionType):
        return any(map(_has_tuple, t.inputs + t.results))
    return isinstance(t, TupleType)


class _Flattener:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.leaves: dict[Value, list[Value]] = {}

    def of(self, v: Value) -> list[Value]:
        return self.leaves.get(v, [v])

    def split(self, v: Value) -> list[Value]:
        """A defined value's leaves: new values for a tuple's elements, the value itself otherwise."""
        if v in self.leaves:  # a function's arguments are also its body's block arguments
            return self.leaves[v]
        if not isinstance(v.type, TupleType):
            return [v]
        out = [Value(f"{v.name}#{i}", t) for i, t in enumerate(leaf_types(v.type))]
        self.leaves[v] = out
        return out

    def error(self, op: Op, message: str) -> StableHLOParseError:
        return StableHLOParseError(f"{op.name}: {message}", file=self.filename, line=op.line, col=op.col)

    def block(self, block: Block) -> None:
        block.args = [leaf for a in block.args for leaf in self.split(a)]
        kept: list[Op] = []
        for op in block.ops:
            if op.name == "stablehlo.tuple":
                self.leaves[op.results[0]] = [leaf for o in op.operands for leaf in self.of(o)]
                continue
            if op.name == "stablehlo.get_tuple_element":
                self.get_element(op)
                continue
            op.operands = [leaf for o in op.operands for leaf in self.of(o)]
            op.results = [leaf for r in op.results for leaf in self.split(r)]
            for region in op.regions:
                for b in region:
                    self.block(b)
            kept.append(op)
        block.ops = kept

    def get_element(self, op: Op) -> None:
        (t,) = op.operands
        if not isinstance(t.type, TupleType):
            raise self.error(op, f"operand {t.name} is {t.type}, not a tuple")
        index = op.attrs.get("index")
        if not isinstance(index, int) or not 0 <= index < len(t.type.elements):
            raise self.error(op, f"index {index} is outside {t.type}")
        sizes = [len(leaf_types(e)) for e in t.type.elements]
        start = sum(sizes[:index])
        self.leaves[op.results[0]] = self.of(t)[start:start + sizes[index]]


def flatten_tuples(parsed: ParsedModule) -> None:
    """Rewrite the parsed module in place so no value, argument or result is a tuple."""
    uses = any(_has_tuple(v.type) for fn in parsed.functions.values() for v in fn.args) or any(
        _has_tuple(t) for fn in parsed.functions.values() for t in fn.result_types) or any(
        _has_tuple(v.type) for fn in parsed.functions.values() for top in fn.body.ops for op in top.walk()
        for v in op.results + op.operands)
    if not uses:
        return
    f = _Flattener(parsed.filename)
    for fn in parsed.functions.values():
        fn.args = [leaf for a in fn.args for leaf in f.split(a)]
        fn.result_types = [leaf for t in fn.result_types for leaf in leaf_types(t)]
        f.block(fn.body)
