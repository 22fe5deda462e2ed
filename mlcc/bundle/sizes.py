"""Sizes in a bundle: an int, or an expression over the bundle's symbols (``manifest["symbols"]``), evaluated
once the inputs bind the symbols. The one grammar of size expressions, printed by the compiler (symbolic
dims such as ``4*seq`` or ``past+seq`` come from mlcc/hlo/symbolic.py; grids add ``cdiv``, ``max``) and
evaluated here, by the runtime and by the compiler's evaluator alike:

    size  := int | name | size (+ | - | * | //) size | -size | (size) | cdiv(size, size)
           | max(size, ...) | min(size, ...)

Pure Python: a manifest is data, never code, so it is parsed with Python's ast and only these node kinds
are allowed.
"""

from __future__ import annotations

import ast
import functools
import operator
from typing import Mapping, Union

Size = Union[int, str]  # a manifest's dim or grid entry


class SizeError(ValueError):
    pass


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_CALLS = {"cdiv": cdiv, "max": max, "min": min}


# ---- print

def call(function: str, *args: Size) -> str:
    """``function(a, b, ...)``, one of the grammar's functions."""
    if function not in _CALLS:
        raise SizeError(f"'{function}' is not a size function ({', '.join(sorted(_CALLS))})")
    return f"{function}({', '.join(str(a) for a in args)})"


def programs(n: Size, block: int) -> Size:
    """How many blocks of ``block`` cover n items, at least one: a number, or the expression for the runtime."""
    if isinstance(n, int):
        return max(1, cdiv(n, block))
    return call("max", 1, call("cdiv", n, block))


# ---- evaluate

@functools.lru_cache(maxsize=4096)
def _parse(expr: str) -> ast.Expression:
    """The expression's tree, parsed once per text: a run evaluates every launch's grid again."""
    try:
        return ast.parse(expr, mode="eval")
    except SyntaxError:
        raise SizeError(f"'{expr}' is not a size expression") from None


def eval_size(expr: Size, env: Mapping[str, int]) -> int:
    """A size a bundle's manifest writes (an int, or an expression over symbols with + - * // and the
    functions cdiv, max and min, e.g. ``max(1, cdiv(64*seq, 1024))``), evaluated for the symbols' values."""
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


def size_symbols(expr: Size) -> list[str]:
    """The symbols a size expression reads, sorted (a function's name is not a symbol)."""
    if isinstance(expr, int):
        return []
    tree = _parse(str(expr))
    functions = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in functions})
