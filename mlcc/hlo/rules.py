"""RuleTable: rules keyed by opcode, the one way every per-op table registers and finds its rules.

The evaluator, shape inference, the loop emitter and the kernel lowerings each keep one table::

    EVAL_RULES = RuleTable("evaluation rule")

    @EVAL_RULES.register("floor", "ceil")
    def _rounding(inst, ops): ...

    EVAL_RULES.lookup("floor")   # the rule, or NoRuleError naming the table and the opcode

Registering an opcode twice is an error (two rules for one op is a merge accident), as is
registering a name the opcode table does not know, unless the table is built with
``keys="any"`` (the lowering table also keys fusions as ``fusion:<kind>``). A table is a dict, so
``in``, ``get`` and iteration read it as before.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from mlcc.hlo.opcodes import OPCODES

R = TypeVar("R")


class NoRuleError(KeyError):
    """An opcode has no rule in a table."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


class RuleTable(dict, Generic[R]):
    def __init__(self, what: str, keys: str = "opcodes") -> None:
        super().__init__()
        if keys not in ("opcodes", "any"):
            raise ValueError(f"keys must be 'opcodes' or 'any', not {keys!r}")
        self.what = what
        self.keys = keys

    def register(self, *opcodes: str) -> Callable[[R], R]:
        """Decorator: fn becomes the rule of each opcode."""
        def add(fn: R) -> R:
            for opcode in opcodes:
                self.add(opcode, fn)
            return fn
        return add

    def add(self, opcode: str, fn: R) -> None:
        if self.keys == "opcodes" and opcode not in OPCODES:
            raise ValueError(f"{self.what} for unknown opcode '{opcode}'")
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
