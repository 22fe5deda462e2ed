"""Sizes in a bundle: an int, or an expression over the bundle's symbols (``manifest["symbols"]``), evaluated
once the inputs bind the symbols. The one grammar of size expressions, printed by the compiler (symbolic
dims such as ``4*seq`` or ``past+seq`` come from mlcc/hlo/symbolic.py; grids add ``cdiv``, ``max``) and
evaluated here, by the runtime and by the compiler's evaluator alike:

    size  := term (("+" | "-") term)*
    term  := unary (("*" | "//") unary)*
    unary := "-" unary | int | name | function "(" size ("," size)* ")" | "(" size ")"
    function := "cdiv" | "max" | "min"

A manifest is data, never code: sizes are parsed by this grammar alone (a symbol may be any identifier,
``in`` and ``None`` included), and ``//`` rounds toward minus infinity as Python's does.
"""

from __future__ import annotations

import functools
import operator
import re
from typing import Mapping, Union

Size = Union[int, str]  # a manifest's dim or grid entry


class SizeError(ValueError):
    pass


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _max(*args: int) -> int:
    return max(args)


def _min(*args: int) -> int:
    return min(args)


_CALLS = {"cdiv": cdiv, "max": _max, "min": _min}
_ARITY = {"cdiv": (2, 2), "max": (1, None), "min": (1, None)}


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

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*(),]))")
Tree = Union[int, str, tuple]  # an int, a symbol's name, or (operator or function, operand trees...)


@functools.lru_cache(maxsize=4096)
def _parse(expr: str) -> Tree:
    """The expression's tree, parsed once per text: a run evaluates every launch's grid again."""
    tokens: list[str | int] = []
    pos = 0
    text = expr.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SizeError(f"'{expr}' is not a size expression")
        number, name, op = m.groups()
        tokens.append(int(number) if number is not None else name or op)
        pos = m.end()
    at = 0

    def peek() -> str | int | None:
        return tokens[at] if at < len(tokens) else None

    def take(want: str | None = None) -> str | int:
        nonlocal at
        tok = peek()
        if tok is None or (want is not None and tok != want):
            raise SizeError(f"'{expr}' is not a size expression")
        at += 1
        return tok

    def unary() -> Tree:
        tok = take()
        if tok == "-":
            return ("neg", unary())
        if tok == "(":
            inner = size()
            take(")")
            return inner
        if isinstance(tok, int):
            return tok
        if tok in _CALLS and peek() == "(":
            take("(")
            args = [size()]
            while peek() == ",":
                take(",")
                args.append(size())
            take(")")
            lo, hi = _ARITY[tok]
            if len(args) < lo or (hi is not None and len(args) > hi):
                raise SizeError(f"'{expr}': {tok} takes {lo if lo == hi else f'at least {lo}'} argument(s)")
            return (tok, *args)
        if tok[0].isalpha() or tok[0] == "_":
            return tok
        raise SizeError(f"'{expr}' is not a size expression")

    def term() -> Tree:
        tree = unary()
        while peek() in ("*", "//"):
            tree = (take(), tree, unary())
        return tree

    def size() -> Tree:
        tree = term()
        while peek() in ("+", "-"):
            tree = (take(), tree, term())
        return tree

    tree = size()
    if at != len(tokens):
        raise SizeError(f"'{expr}' is not a size expression")
    return tree


_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
              "neg": operator.neg, **_CALLS}


def eval_size(expr: Size, env: Mapping[str, int]) -> int:
    """A size a bundle's manifest writes (an int, or an expression over symbols with + - * // and the
    functions cdiv, max and min, e.g. ``max(1, cdiv(64*seq, 1024))``), evaluated for the symbols' values."""
    if not isinstance(expr, str):
        try:
            return operator.index(expr)  # an int (numpy's too)
        except TypeError:
            raise SizeError(f"{expr!r} is not a size") from None

    def walk(tree: Tree) -> int:
        if isinstance(tree, int):
            return tree
        if isinstance(tree, str):
            if tree not in env:
                raise SizeError(f"no value for '{tree}' in '{expr}'")
            return int(env[tree])
        return _OPERATORS[tree[0]](*(walk(t) for t in tree[1:]))

    try:
        return walk(_parse(expr))
    except ZeroDivisionError:
        raise SizeError(f"'{expr}' divides by zero for {dict(env)}") from None


def size_symbols(expr: Size) -> list[str]:
    """The symbols a size expression reads, sorted (a function's name is not a symbol)."""
    if isinstance(expr, int):
        return []
    names: set[str] = set()

    def walk(tree: Tree) -> None:
        if isinstance(tree, str):
            names.add(tree)
        elif isinstance(tree, tuple):
            for t in tree[1:]:
                walk(t)

    walk(_parse(str(expr)))
    return sorted(names)
