"""mlcc/bundle/sizes.py: the one grammar of size expressions, printed by the compiler and evaluated by the
runtime and by the compiler's evaluator alike."""

from __future__ import annotations

import numpy as np
import pytest

from mlcc.bundle.sizes import SizeError, call, eval_size, programs, size_symbols
from mlcc.hlo import symbolic


def test_printed_grids_evaluate_to_the_static_count():
    assert programs(1000, 256) == 4 and programs(0, 256) == 1
    text = programs("64*seq", 1024)
    assert text == "max(1, cdiv(64*seq, 1024))"
    for seq in (1, 16, 17, 100):
        assert eval_size(text, {"seq": seq}) == programs(64 * seq, 1024)


def test_evaluate_every_form_of_the_grammar():
    env = {"seq": 10, "past": 3}
    assert eval_size(7, {}) == 7
    assert eval_size(np.int64(7), {}) == 7
    assert eval_size("past+seq", env) == 13
    assert eval_size("seq*seq-1", env) == 99
    assert eval_size("-seq+20", env) == 10
    assert eval_size("(seq+1)//4", env) == 2
    assert eval_size(call("min", "seq", 4), env) == 4
    assert eval_size(call("cdiv", "seq", 4), env) == 3


def test_any_identifier_is_a_symbol_and_a_function_name_only_before_a_parenthesis():
    assert eval_size("in+None*2", {"in": 1, "None": 3}) == 7
    assert eval_size("max(max, 2)", {"max": 5}) == 5
    assert eval_size("  007 * seq ", {"seq": 2}) == 14


@pytest.mark.parametrize("text", ["__import__('os')", "seq.real", "seq**2", "seq/2", "seq if 1 else 2", "",
                                  "cdiv(seq)", "max()", "(seq", "seq)", "seq 2", "1e3"])
def test_anything_but_a_size_is_refused(text):
    with pytest.raises(SizeError):
        eval_size(text, {"seq": 4})


def test_unbound_symbols_and_unknown_functions_are_named():
    with pytest.raises(SizeError, match="no value for 'past' in 'past\\+seq'"):
        eval_size("past+seq", {"seq": 1})
    with pytest.raises(SizeError, match="'pow' is not a size function"):
        call("pow", "seq", 2)


def test_symbols_of_an_expression_leave_out_function_names():
    assert size_symbols("max(1, cdiv(past+seq, 64))") == ["past", "seq"]
    assert size_symbols(12) == []


def test_the_compiler_evaluates_dims_with_the_same_grammar():
    env = {"seq": 5, "past": 2}
    for dim in ("seq", "4*seq", "past+seq", "seq*seq-1", 9):
        assert symbolic.evaluate(dim, env) == eval_size(dim, env)
    assert symbolic.evaluate(symbolic.parse("past+2*seq"), env) == 12
    with pytest.raises(symbolic.SymbolicError, match="no value for 'seq'"):
        symbolic.evaluate("4*seq", {})
