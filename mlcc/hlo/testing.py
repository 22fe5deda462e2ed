"""Helpers for IR-text-in, IR-text-out tests of passes (like XLA's RunAndFilecheckHloRewrite)."""

from __future__ import annotations

import textwrap

from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.printer import format_module
from mlcc.hlo.verifier import verify_module


def canonical(text: str) -> str:
    """The printed form of a module given as text (normalizes spacing and quoting)."""
    return format_module(parse_module(textwrap.dedent(text)))


def run_pass(p: Pass, text: str) -> tuple[bool, str]:
    module = parse_module(textwrap.dedent(text))
    verify_module(module)
    changed = p.run(module)
    verify_module(module)
    return changed, format_module(module)


def check_pass(p: Pass, text: str, expected: str | None) -> None:
    """Run p on text; expected=None means the pass must leave the module unchanged."""
    changed, out = run_pass(p, text)
    if expected is None:
        assert not changed, f"{p.name} changed the module:\n{out}"
        assert out == canonical(text)
        return
    assert changed, f"{p.name} reported no change"
    want = canonical(expected)
    assert out == want, f"{p.name} produced:\n{out}\nexpected:\n{want}"
