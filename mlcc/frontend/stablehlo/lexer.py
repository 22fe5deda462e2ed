"""Tokens of MLIR's textual form, read lazily so a parser can also match raw text.

Types like ``tensor<8x128xf32>`` do not split into ordinary tokens (``8x128xf32``
would lex as a number then a word); the parser reads them with ``match_raw``.
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from mlcc.frontend.stablehlo.errors import StableHLOParseError

_SKIP = re.compile(r"(?:\s+|//[^\n]*)+")
_ID_CHARS = r"[A-Za-z0-9_$.\-]"
_TOKEN = re.compile(r"""
    (?P<value>%ID+(?:\#\d+)?)
  | (?P<symbol>@(?:"(?:[^"\\\n]|\\.)*"|ID+))
  | (?P<caret>\^ID+)
  | (?P<hash>\#[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<bang>![A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<hex>0x[0-9A-Fa-f]+)
  | (?P<float>[-+]?\d+\.\d*(?:[eE][-+]?\d+)?)
  | (?P<int>[-+]?\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<punct>->|\{-\#|\#-\}|::|[(){}\[\]<>,:=*?+\-|])
""".replace("ID", _ID_CHARS), re.VERBOSE)


class Token(NamedTuple):
    kind: str   # value symbol caret hash bang string hex float int ident punct eof
    text: str
    pos: int
    end: int


class Lexer:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.pos = 0
        self._peeked: Token | None = None
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    # ---- positions
    def location(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, pos)
        return line, pos - self._line_starts[line - 1] + 1

    def error(self, message: str, pos: int | None = None) -> StableHLOParseError:
        line, col = self.location(self.peek().pos if pos is None else pos)
        return StableHLOParseError(message, file=self.filename, line=line, col=col)

    # ---- tokens
    def _skip(self) -> int:
        m = _SKIP.match(self.text, self.pos)
        return m.end() if m else self.pos

    def peek(self) -> Token:
        if self._peeked is None:
            start = self._skip()
            if start >= len(self.text):
                self._peeked = Token("eof", "", start, start)
            else:
                m = _TOKEN.match(self.text, start)
                if m is None:
                    raise self.error(f"unexpected character {self.text[start]!r}", start)
                self._peeked = Token(m.lastgroup or "", m.group(), start, m.end())
        return self._peeked

    def next(self) -> Token:
        tok = self.peek()
        self.pos = tok.end
        self._peeked = None
        return tok

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok.text == text and tok.kind in ("punct", "ident")

    def accept(self, text: str) -> Token | None:
        if self.at(text):
            return self.next()
        return None

    def expect(self, text: str, context: str = "") -> Token:
        tok = self.peek()
        if not (tok.text == text and tok.kind in ("punct", "ident")):
            raise self.error(f"expected '{text}'{' ' + context if context else ''}, found {describe(tok)}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        tok = self.peek()
        if tok.kind != kind:
            raise self.error(f"expected {what}, found {describe(tok)}")
        return self.next()

    def token_line(self, tok: Token) -> int:
        return self.location(tok.pos)[0]

    def mark(self) -> tuple[int, Token | None]:
        """The lexer's place, to go back to with reset() after looking ahead."""
        return self.pos, self._peeked

    def reset(self, mark: tuple[int, Token | None]) -> None:
        self.pos, self._peeked = mark

    # ---- raw text
    def match_raw(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """Match pattern at the next non-blank character; on success consume it."""
        start = self._skip()
        m = pattern.match(self.text, start)
        if m is not None:
            self.pos = m.end()
            self._peeked = None
        return m

    def skip_balanced(self) -> None:
        """Skip one token, or a whole bracketed group when the next token opens one."""
        pairs = {"(": ")", "[": "]", "{": "}", "<": ">", "{-#": "#-}"}
        tok = self.next()
        if tok.kind != "punct" or tok.text not in pairs:
            return
        stack = [pairs[tok.text]]
        while stack:
            tok = self.next()
            if tok.kind == "eof":
                raise self.error(f"expected '{stack[-1]}' before the end of the file", tok.pos)
            if tok.kind == "punct":
                if tok.text in pairs:
                    stack.append(pairs[tok.text])
                elif tok.text == stack[-1]:
                    stack.pop()


def describe(tok: Token) -> str:
    return "end of file" if tok.kind == "eof" else f"'{tok.text}'"


def unquote(text: str) -> str:
    """The value of an MLIR string literal (escapes: \\n \\t \\" \\\\ and two hex digits)."""
    body = text[1:-1]
    if "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in "\\\"":
            out.append(nxt)
            i += 2
        elif nxt == "n":
            out.append("\n")
            i += 2
        elif nxt == "t":
            out.append("\t")
            i += 2
        else:
            out.append(chr(int(body[i + 1:i + 3], 16)))
            i += 3
    return "".join(out)
