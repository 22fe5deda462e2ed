"""Symbolic sizes (mlcc/hlo/symbolic.py), the manifest's size expressions (mlcc/bundle/sizes.py) and
symbolic dims in IR text: canonical forms, exact arithmetic, ranges, and refusals where a size is not a
polynomial or a manifest holds anything but a size."""

from __future__ import annotations

import pytest

from mlcc.bundle.sizes import SizeError, eval_size
from mlcc.hlo.parser import ParseError, parse_module
from mlcc.hlo.printer import format_module
from mlcc.hlo.symbolic import Sym, SymbolicError, dim_of, parse, product, upper


def test_expressions_have_one_canonical_text():
    assert str(parse("seq * 64")) == "64*seq"
    assert str(parse("seq+past")) == str(parse("past + seq")) == "past+seq"
    assert str(parse("(seq + 1) * (seq - 1)")) == "seq*seq-1"
    assert dim_of(parse("seq") - parse("seq") + 3) == 3  # a constant is an int dim again
    assert product([1, "seq", 4, "seq"]) == "4*seq*seq"


def test_arithmetic_is_exact_or_refused():
    seq = Sym.symbol("seq")
    assert (seq * 64).exact_div(seq) == 64
    assert (seq * 64 + 8) // 8 == seq * 8 + 1
    assert (seq * 64 + 3) % 8 == 3
    assert (seq * 6).exact_div(4) is None
    with pytest.raises(SymbolicError, match="not a polynomial"):
        seq // 2  # depends on seq's parity: no polynomial says it


def test_ranges_bound_every_value():
    ranges = {"seq": (1, 16), "past": (0, 48)}
    assert parse("past+seq").bounds(ranges) == (1, 64)
    assert parse("seq-past").bounds(ranges) == (-47, 16)
    assert upper("seq*seq", ranges) == 256
    with pytest.raises(SymbolicError, match="no range for 'seq'"):
        upper("seq", {})


def test_a_size_prints_as_ir_text_and_as_kernel_code_only_when_asked():
    size = parse("4*seq*seq+seq")
    assert str(size) == f"{size}" == "4*seq*seq+seq"
    assert size.code() == "(4*sym_seq*sym_seq + sym_seq)"


def test_manifest_sizes_evaluate_and_nothing_else_does():
    assert eval_size("max(1, cdiv(64*seq, 1024))", {"seq": 40}) == 3
    assert eval_size(7, {}) == 7
    with pytest.raises(SizeError, match="no value for 'seq'"):
        eval_size("seq", {})
    for hostile in ("__import__('os').system('true')", "seq.__class__", "[1][0]", "2**64", "lambda: 1"):
        with pytest.raises(SizeError):
            eval_size(hostile, {"seq": 1})


def test_ir_text_round_trips_symbolic_dims_and_ranges():
    text = (
        "HloModule m, output_names={y}, symbols={past={0,48}, seq={1,16}}\n\n"
        "ENTRY %main {\n"
        "  %x = f32[1,4,past,16]{3,2,1,0} parameter(0), name=x\n"
        "  %y = f32[1,4,seq,16]{3,2,1,0} parameter(1), name=y\n"
        "  %c = f32[1,4,past+seq,16]{3,2,1,0} concatenate(%x, %y), dimension=2\n"
        "  %r = f32[4,16*past+16*seq]{1,0} reshape(%c)\n"
        "  ROOT %t = (f32[4,16*past+16*seq]{1,0}) tuple(%r)\n"
        "}\n")
    module = parse_module(text)
    assert module.symbols == {"past": (0, 48), "seq": (1, 16)}
    assert module.entry.root.operands[0].shape.dims == (4, "16*past+16*seq")
    assert format_module(module) == text
    with pytest.raises(ParseError, match="2:.*bad dimension"):
        parse_module("ENTRY %m {\n  %x = f32[seq**2]{0} parameter(0)\n  ROOT %t = (f32[seq**2]{0}) tuple(%x)\n}\n")


def test_a_size_op_is_the_value_of_its_expression():
    import numpy as np

    from mlcc.hlo.evaluator import evaluate
    from mlcc.hlo.verifier import verify_module
    text = (
        "HloModule m, output_names={y}, symbols={seq={1,16}}\n\n"
        "ENTRY %main {\n"
        "  %x = f32[seq]{0} parameter(0), name=x\n"
        "  %n = s64[] size(), expr=\"4*seq+1\"\n"
        "  %f = f32[] convert(%n)\n"
        "  %b = f32[seq]{0} broadcast(%f), dimensions={}\n"
        "  %y = f32[seq]{0} multiply(%x, %b)\n"
        "  ROOT %t = (f32[seq]{0}) tuple(%y)\n"
        "}\n")
    module = parse_module(text)
    verify_module(module)
    assert format_module(module) == text
    out = evaluate(module, {"x": np.ones(3, np.float32)})  # seq bound to 3 by the argument
    np.testing.assert_array_equal(out["y"], np.full(3, 13.0, np.float32))
