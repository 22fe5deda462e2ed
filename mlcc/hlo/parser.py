"""Parser for the text form written by printer.py. ``format_module(parse(s)) == s``.

Errors name line and column: ``ParseError: 3:17: expected ')'``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mlcc.hlo.ir import DTYPES, AnyShape, Computation, Instruction, Module, Property, Shape, TupleShape
from mlcc.hlo.opcodes import OPCODES
from mlcc.hlo.symbolic import SymbolicError, dim_of

_PACKED_OUTPUT = re.compile(r"(\d+):(\w+)\[([\w,*+-]*)\](?:\{([\d,]*)\})?")  # dims may be symbolic


class ParseError(ValueError):
    pass


_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+|\#[^\n]*)
  | (?P<nl>\n)
  | (?P<name>%[A-Za-z0-9_.\-]+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?(?:inf|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(?![A-Za-z_]))
  | (?P<word>[A-Za-z_][A-Za-z0-9_.>\-]*)
  | (?P<punct>[=,(){}\[\]*+])
""", re.VERBOSE)


class _Lexer:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str, int, int]] = []
        line, line_start, pos = 1, 0, 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ParseError(f"{line}:{pos - line_start + 1}: unexpected character {text[pos]!r}")
            kind = m.lastgroup
            if kind == "nl":
                line, line_start = line + 1, m.end()
            elif kind != "ws":
                self.tokens.append((kind, m.group(), line, m.start() - line_start + 1))
            pos = m.end()
        self.tokens.append(("eof", "", line, pos - line_start + 1))
        self.i = 0

    def peek(self) -> tuple[str, str, int, int]:
        return self.tokens[self.i]

    def next(self) -> tuple[str, str, int, int]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def error(self, msg: str, tok: tuple[str, str, int, int] | None = None) -> ParseError:
        tok = tok or self.peek()
        return ParseError(f"{tok[2]}:{tok[3]}: {msg} (found {tok[1]!r})" if tok[0] != "eof"
                          else f"{tok[2]}:{tok[3]}: {msg} (found end of input)")

    def expect(self, text: str) -> None:
        tok = self.next()
        if tok[1] != text:
            raise self.error(f"expected '{text}'", tok)

    def accept(self, text: str) -> bool:
        if self.peek()[1] == text and self.peek()[0] in ("punct", "word"):
            self.i += 1
            return True
        return False


def _number(text: str) -> int | float:
    if text in ("inf", "-inf"):
        return float(text)
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.lx = _Lexer(text)
        self.comps: dict[str, Computation] = {}

    def value(self) -> Any:
        kind, text, _, _ = tok = self.lx.next()
        if kind == "number":
            return _number(text)
        if kind == "string":
            return json.loads(text)
        if kind == "word":
            if text == "true":
                return True
            if text == "false":
                return False
            if text == "nan":
                return float("nan")
            return text
        if kind == "name":
            if text[1:] not in self.comps:
                raise self.lx.error(f"unknown computation {text}", tok)
            return self.comps[text[1:]]
        if text == "{":
            items: list[Any] = []
            if not self.lx.accept("}"):
                items.append(self.value())
                while self.lx.accept(","):
                    items.append(self.value())
                self.lx.expect("}")
            return tuple(items)
        raise self.lx.error("expected a value", tok)

    def int_list(self, open_: str, close: str, allow_words: bool) -> tuple:
        self.lx.expect(open_)
        out: list[Any] = []
        if self.lx.accept(close):
            return ()
        while True:
            kind, text, _, _ = tok = self.lx.next()
            if kind == "number" and "." not in text and not (allow_words and self.lx.peek()[1] in "*+"):
                out.append(int(text))
            elif kind in ("word", "number") and allow_words:
                out.append(self.dim_expr(tok))
            else:
                raise self.lx.error("expected a dimension", tok)
            if self.lx.accept(close):
                return tuple(out)
            self.lx.expect(",")

    def symbol_ranges(self) -> dict[str, tuple[int, int]]:
        """``{seq={1,64}, past={0,12}}``: each symbol's inclusive range."""
        self.lx.expect("{")
        out: dict[str, tuple[int, int]] = {}
        while not self.lx.accept("}"):
            if out:
                self.lx.expect(",")
            kind, name, _, _ = tok = self.lx.next()
            if kind != "word":
                raise self.lx.error("expected a symbol name", tok)
            self.lx.expect("=")
            lo, hi = self.int_list("{", "}", allow_words=False)
            out[name] = (lo, hi)
        return out

    def dim_expr(self, first: tuple[str, str, int, int]) -> Any:
        """A symbolic dim: words, numbers, '*' and '+' up to the next ',' or ']' (canonicalized)."""
        parts = [first[1]]
        while self.lx.peek()[1] in ("*", "+") or (parts[-1] in ("*", "+") and self.lx.peek()[0] in ("word", "number")):
            parts.append(self.lx.next()[1])
        try:
            return dim_of(" ".join(parts))
        except SymbolicError as e:
            raise self.lx.error(f"bad dimension: {e}", first) from None

    def shape(self) -> AnyShape:
        if self.lx.accept("("):
            elems = []
            if not self.lx.accept(")"):
                elems.append(self.shape())
                while self.lx.accept(","):
                    elems.append(self.shape())
                self.lx.expect(")")
            return TupleShape(tuple(elems))  # type: ignore[arg-type]
        kind, text, _, _ = tok = self.lx.next()
        if kind != "word" or text not in DTYPES:
            raise self.lx.error("expected a dtype", tok)
        dims = self.int_list("[", "]", allow_words=True)
        layout = None
        if self.lx.peek()[1] == "{":
            layout = self.int_list("{", "}", allow_words=False)
        elif dims:
            raise self.lx.error("expected a layout '{...}'")
        return Shape(text, dims, layout)

    def instruction(self, comp: Computation, env: dict[str, Instruction]) -> None:
        is_root = self.lx.accept("ROOT")
        kind, text, _, _ = tok = self.lx.next()
        if kind != "name":
            raise self.lx.error("expected an instruction name '%...'", tok)
        name = text[1:]
        if name in env:
            raise self.lx.error(f"instruction %{name} defined twice", tok)
        self.lx.expect("=")
        shape = self.shape()
        kind, opcode, _, _ = tok = self.lx.next()
        if kind != "word" or opcode not in OPCODES:
            raise self.lx.error("unknown opcode", tok)
        self.lx.expect("(")
        operands = []
        attrs: dict[str, Any] = {}
        if opcode == "parameter":
            kind, text, _, _ = tok = self.lx.next()
            if kind != "number" or not text.isdigit():
                raise self.lx.error("expected a parameter index", tok)
            attrs["index"] = int(text)
            self.lx.expect(")")
        elif not self.lx.accept(")"):
            while True:
                kind, text, _, _ = tok = self.lx.next()
                if kind != "name" or text[1:] not in env:
                    raise self.lx.error("undefined operand", tok)
                operands.append(env[text[1:]])
                if self.lx.accept(")"):
                    break
                self.lx.expect(",")
        origin: tuple = ()
        called = None
        while self.lx.accept(","):
            kind, key, _, _ = tok = self.lx.next()
            if kind != "word":
                raise self.lx.error("expected an attribute name", tok)
            self.lx.expect("=")
            val = self.value()
            if key == "origin":
                origin = tuple(val)
            elif key == "calls":
                if not isinstance(val, Computation):
                    raise self.lx.error("calls= needs a computation")
                called = val
            else:
                attrs[key] = val
        inst = Instruction(name, opcode, shape, operands, attrs, called, origin)
        comp.add(inst)
        env[name] = inst
        if is_root:
            comp.root = inst

    def computation(self) -> Computation:
        is_entry = self.lx.accept("ENTRY")
        kind, text, _, _ = tok = self.lx.next()
        if kind != "name":
            raise self.lx.error("expected a computation name '%...'", tok)
        comp = Computation(text[1:], is_entry=is_entry)
        self.lx.expect("{")
        env: dict[str, Instruction] = {}
        while not self.lx.accept("}"):
            if self.lx.peek()[0] == "eof":
                raise self.lx.error("expected '}'")
            self.instruction(comp, env)
        if comp.root is None and comp.instructions:
            comp.root = comp.instructions[-1]
        self.comps[comp.name] = comp
        return comp

    def module(self) -> Module:
        name: Any = "m"
        has_header = self.lx.accept("HloModule")
        if has_header:
            name = self.value()
            if not isinstance(name, str):
                raise self.lx.error("expected a module name")
        module = Module(name)
        while has_header and self.lx.accept(","):
            kind, key, _, _ = tok = self.lx.next()
            self.lx.expect("=")
            if key == "symbols":
                module.symbols = self.symbol_ranges()
                continue
            val = self.value()
            if key == "unbounded":
                module.unbounded = set(val if isinstance(val, tuple) else (val,))
            elif key == "is_scheduled":
                module.is_scheduled = bool(val)
            elif key == "properties":
                known = {p.value: p for p in Property}
                for v in val if isinstance(val, tuple) else (val,):
                    if v not in known:
                        raise self.lx.error(f"unknown module property '{v}' ({', '.join(known)})", tok)
                    module.properties.add(known[v])
            elif key == "output_names":
                module.output_names = list(val)
            elif key == "packed_outputs":
                for v in val if isinstance(val, tuple) else (val,):
                    m = _PACKED_OUTPUT.fullmatch(str(v))
                    if m is None:
                        raise self.lx.error(f"packed output '{v}' is not INDEX:DTYPE[DIMS]{{LAYOUT}}", tok)
                    try:
                        dims = tuple(dim_of(d) for d in m.group(3).split(",") if d)
                    except (SymbolicError, ValueError):
                        raise self.lx.error(f"packed output '{v}' has a dim that is not a size", tok) from None
                    layout = tuple(int(d) for d in m.group(4).split(",") if d) if m.group(4) is not None else None
                    module.packed_outputs[int(m.group(1))] = Shape(m.group(2), dims, layout)
            elif key == "complex_outputs":
                module.complex_outputs = {int(v) for v in (val if isinstance(val, tuple) else (val,))}
            else:
                raise self.lx.error(f"unknown module attribute '{key}'", tok)
        while self.lx.peek()[0] != "eof":
            module.add_computation(self.computation())
        return module


def parse_module(text: str) -> Module:
    """Parse a module; the ``HloModule`` header line is optional (tests write bare computations)."""
    return _Parser(text).module()


parse = parse_module
