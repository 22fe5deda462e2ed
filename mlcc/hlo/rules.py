"""RuleTable: rules keyed by opcode, the one way every per-op table registers and finds its rules.

The evaluator, shape inference, the loop emitter and the kernel lowerings each keep one table::

    EVAL_RULES = RuleTable("evaluation rule")

    @EVAL_RULES.register("floor", "ceil")
    def _rounding(inst, ops): ...

    EVAL_RULES.lookup("floor")   # the rule, or NoRuleError naming the table and the opcode

Registering an opcode twice is an error (two rules for one op is a merge accident), as is
registering a name the opcode table does not know. A table keyed by other names says which:
``keys=KNOWN_OPS`` (the StableHLO importer's op names: a misspelt name fails at import) or
``keys="any"`` (the lowering table also keys fusions as ``fusion:<kind>``; the ONNX folds key by op
type). A table is a dict, so ``in``, ``get`` and iteration read it as before.
"""

from __future__ import annotations

from typing import Callable, Collection, Generic, TypeVar

from mlcc.hlo.opcodes import OPCODES

R = TypeVar("R")


class NoRuleError(KeyError):
    """An opcode has no rule in a table."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


class RuleTable(dict, Generic[R]):
    def __init__(self, what: str, keys: str | Collection[str] = "opcodes") -> None:
        """keys: "opcodes" (the opcode table's names), "any", or the collection of names a key must be in."""
        super().__init__()
        if isinstance(keys, str) and keys not in ("opcodes", "any"):
            raise ValueError(f"keys must be 'opcodes', 'any' or a collection of names, not {keys!r}")
        self.what = what
        self.known: frozenset[str] | None = (frozenset(OPCODES) if keys == "opcodes" else None if keys == "any"
                                             else frozenset(keys))
        self._noun = "opcode" if keys == "opcodes" else "op"

    def register(self, *opcodes: str) -> Callable[[R], R]:
        """Decorator: fn becomes the rule of each opcode."""
        def add(fn: R) -> R:
            for opcode in opcodes:
                self.add(opcode, fn)
            return fn
        return add

    def add(self, opcode: str, fn: R) -> None:
        if self.known is not None and opcode not in self.known:
            raise ValueError(f"{self.what} for unknown {self._noun} '{opcode}'")
        if opcode in self:
            raise ValueError(f"two {self.what}s for '{opcode}'")
        self[opcode] = fn

    def lookup(self, opcode: str) -> R:
        try:
            return self[opcode]
        except KeyError:
            raise NoRuleError(f"no {self.what} for '{opcode}'") from None

    def missing(self, opcodes: set[str] | frozenset[str]) -> list[str]:
        """The opcodes among ``opcodes`` this table has no rule for, sorted."""
        return sorted(set(opcodes) - set(self))
