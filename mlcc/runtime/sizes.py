"""Sizes in a bundle's manifest: an int, or an expression over the bundle's symbols (see
mlcc/hlo/symbolic.py for how the compiler writes them), evaluated once the inputs bind the symbols."""

from __future__ import annotations

import ast
import functools
import operator
from typing import Mapping


class SizeError(ValueError):
    pass


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_CALLS = {"cdiv": _cdiv, "max": max, "min": min}


@functools.lru_cache(maxsize=4096)
def _parse(expr: str) -> ast.Expression:
    """The expression's tree, parsed once per text: a run evaluates every launch's grid again."""
    try:
        return ast.parse(expr, mode="eval")
    except SyntaxError:
        raise SizeError(f"'{expr}' is not a size expression") from None


def eval_size(expr: "int | str", env: Mapping[str, int]) -> int:
    """A size a bundle's manifest writes (an int, or an expression over symbols with + - * // and the
    functions cdiv and max, e.g. ``max(1, cdiv(64*seq, 1024))``), evaluated for the symbols' values.
    Parsed with Python's ast and only these node kinds allowed: a manifest is data, never code."""
    if isinstance(expr, int):
        return expr

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise SizeError(f"no value for '{node.id}' in '{expr}'")
            return int(env[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS \
                and not node.keywords:
            return _CALLS[node.func.id](*(walk(a) for a in node.args))
        raise SizeError(f"'{expr}' is not a size expression")

    return walk(_parse(str(expr)))
