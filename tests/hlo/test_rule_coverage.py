"""Every opcode of the table has a rule in every per-op table, or an explicit reason why not.

Adding an opcode to mlcc/hlo/opcodes.py without its evaluator rule, shape rule or lowering fails
here, naming the table and the opcode, rather than at the first model that uses it.
"""

from __future__ import annotations

import numpy as np
import pytest

from mlcc.emit.codegen import kernel, loop, normalization, reduction
from mlcc.emit.codegen.lower_module import fusion_kinds
from mlcc.hlo.evaluator import EVAL_RULES, evaluate_instruction
from mlcc.hlo.ir import Shape
from mlcc.hlo.opcodes import FLAGS, FUSION_KINDS, OPCODES, ops_with
from mlcc.hlo.parser import parse_module
from mlcc.hlo.rules import NoRuleError, RuleTable
from mlcc.hlo.shape_inference import SHAPE_RULES, infer_shape
from mlcc.hlo.verifier import verify_module

# Fusion kinds the table names that no template lowers, and why. Fusion forms only the kinds
# fusion_kinds() reports, so an entry here is a kind that is never formed, said out loud.
NOT_LOWERED_FUSION_KINDS = {
    "multi_output": "reserved: no template yet, so the fusion pass never forms it",
}


def test_every_opcode_has_an_evaluation_rule():
    assert EVAL_RULES.missing(frozenset(OPCODES)) == []
    assert set(EVAL_RULES) == set(OPCODES)


def test_every_opcode_has_a_shape_rule():
    assert SHAPE_RULES.missing(frozenset(OPCODES)) == []
    assert set(SHAPE_RULES) == set(OPCODES)


def test_every_opcode_is_lowered_or_launches_no_kernel():
    kinds = fusion_kinds()  # imports every lowering module, filling kernel.LOWERINGS
    unlowered = {op for op in OPCODES if op != "fusion" and op not in kernel.LOWERINGS}
    assert unlowered == ops_with("no_kernel"), FLAGS["no_kernel"]
    assert not ops_with("no_kernel") & set(kernel.LOWERINGS)
    for kind in FUSION_KINDS:
        assert (kind in kinds) != (kind in NOT_LOWERED_FUSION_KINDS), kind
    assert set(NOT_LOWERED_FUSION_KINDS) <= set(FUSION_KINDS)
    assert {k for k in kernel.LOWERINGS if k not in OPCODES} == {f"fusion:{k}" for k in kinds}


def test_every_loop_fusible_op_has_a_loop_emission_rule():
    """Elementwise ops share the loop emitter's generic rule; every other fusible op has its own."""
    assert sorted(ops_with("loop_fusible") - ops_with("elementwise") - set(loop.RULES)) == []
    assert set(loop.RULES) <= ops_with("loop_fusible") | ops_with("no_kernel") | ops_with("data_movement")


def _elementwise_case(op: str) -> str:
    """A one-op module computing op on operands of a dtype it accepts."""
    info = OPCODES[op]
    dtype = "s32" if op in ("and", "or", "xor", "not", "popcnt") or op.startswith("shift-") else "f32"
    result = {"compare": "pred", "convert": "f16", "bitcast-convert": "s32"}.get(op, dtype)
    if op.startswith("is-"):
        result = "pred"
    attrs = {"compare": ", direction=LT", "gelu": ", approximate=none"}.get(op, "")
    params = "\n".join(f"  %p{i} = {dtype}[8]{{0}} parameter({i})" for i in range(info.arity))
    if op == "select":
        params = params.replace("%p0 = f32", "%p0 = pred")
    args = ", ".join(f"%p{i}" for i in range(info.arity))
    return f"ENTRY %main {{\n{params}\n  ROOT %r = {result}[8]{{0}} {op}({args}){attrs}\n}}\n"


@pytest.mark.parametrize("op", sorted(ops_with("elementwise")))
def test_every_elementwise_op_renders_a_loop_kernel(op):
    module = parse_module(_elementwise_case(op))
    verify_module(module)
    k = kernel.lower(module.entry.root, "kernel")
    assert "def kernel(" in k.source


# ---------------------------------------------------------------- the op flags


def test_flags_are_consistent_with_their_meaning():
    elementwise, data = ops_with("elementwise"), ops_with("data_movement")
    assert elementwise == {n for n, i in OPCODES.items() if i.category in ("unary", "binary", "ternary")}
    assert data == {n for n, i in OPCODES.items() if i.category == "data"}
    assert ops_with("in_place_safe") <= elementwise
    assert ops_with("loop_fusible") <= elementwise | data
    for flag in ("view", "logical_view", "strided_view", "one_to_one"):
        assert all(OPCODES[op].arity == 1 for op in ops_with(flag)), flag
    assert ops_with("logical_view") <= ops_with("view")
    assert ops_with("view") <= data


def test_in_place_safe_is_every_elementwise_op_but_a_width_changing_bitcast_convert():
    assert ops_with("elementwise") - ops_with("in_place_safe") == {"bitcast-convert"}


def test_the_scatters_are_data_movement_that_never_joins_a_loop_fusion():
    assert ops_with("data_movement") - ops_with("loop_fusible") == {"dynamic-update-slice", "scatter-nd"}
    fusion_kinds()  # loads the lowerings: the scatters run as kernels of their own
    assert {"dynamic-update-slice", "scatter-nd"} <= set(kernel.LOWERINGS)


def test_unknown_flags_fail_by_name():
    with pytest.raises(KeyError, match="unknown op flag 'elementwize'"):
        ops_with("elementwize")
    with pytest.raises(KeyError, match="unknown op flag"):
        OPCODES["add"].has("fast")
    assert OPCODES["expm1"].has("in_place_safe") and not OPCODES["scatter-nd"].has("loop_fusible")


# ---------------------------------------------------------------- the registration helper


def test_rule_table_registers_and_looks_up():
    table: RuleTable = RuleTable("test rule")

    @table.register("exp", "log")
    def transcendental(x):
        return x

    assert table.lookup("exp") is transcendental and table["log"] is transcendental
    assert table.missing(frozenset({"exp", "log", "sin"})) == ["sin"]
    with pytest.raises(NoRuleError, match="no test rule for 'sin'"):
        table.lookup("sin")


def test_rule_table_refuses_a_second_rule_and_an_unknown_opcode():
    table: RuleTable = RuleTable("test rule")
    table.register("exp")(abs)
    with pytest.raises(ValueError, match="two test rules for 'exp'"):
        table.register("exp")(abs)
    with pytest.raises(ValueError, match="test rule for unknown opcode 'expp'"):
        table.register("expp")(abs)
    free: RuleTable = RuleTable("lowering", keys="any")
    free.register("fusion:loop")(abs)
    assert "fusion:loop" in free


def test_the_category_flags_are_the_categories():
    for flag, category in (("structural", "structural"), ("contraction", "contraction")):
        assert ops_with(flag) == {n for n, i in OPCODES.items() if i.category == category}, flag
    assert ops_with("elementwise") <= ops_with("layout_agnostic")


def test_the_fusion_flags_nest():
    """A row norm is a row normalization, which an input fusion's loop computes; a reindex is data movement."""
    assert ops_with("row_norm") < ops_with("row_normalization") < ops_with("input_fusible")
    assert ops_with("reindex") <= ops_with("data_movement") & ops_with("loop_fusible")
    assert not {"copy", "pad", "gather", "dynamic-slice"} & ops_with("reindex")
    assert ops_with("view") <= ops_with("splat_preserving") <= ops_with("data_movement")
    assert ops_with("indexed_read") <= ops_with("data_movement")
    assert ops_with("no_kernel") <= ops_with("structural") | ops_with("view")


@pytest.mark.parametrize("op", sorted(ops_with("row_normalization")))
def test_a_row_normalization_keeps_its_operand_dims(op):
    arity = OPCODES[op].arity
    shapes = [Shape("f32", (2, 8))] + [Shape("f32", (8,))] * (arity - 1)
    attrs = {"dimension": 1} if op == "softmax" else {"dimensions": (1,), "epsilon": 1e-5}
    assert infer_shape(op, shapes, attrs).dims == (2, 8)


@pytest.mark.parametrize("op", sorted(ops_with("predicate")))
def test_a_predicate_gives_pred_whatever_its_operand_type(op):
    shapes = [Shape("f16", (4,))] * OPCODES[op].arity
    assert infer_shape(op, shapes, {"direction": "LT"} if op == "compare" else {}).dtype == "pred"


@pytest.mark.parametrize("op", sorted(ops_with("commutative")))
def test_a_commutative_op_gives_the_same_result_with_its_operands_swapped(op):
    assert OPCODES[op].category == "binary"
    dtype = "s32" if op in ("and", "or", "xor") else "f32"
    module = parse_module(f"ENTRY %main {{\n  %a = {dtype}[4]{{0}} parameter(0)\n  %b = {dtype}[4]{{0}} parameter(1)\n"
                          f"  ROOT %r = {dtype}[4]{{0}} {op}(%a, %b)\n}}\n")
    np_dtype = np.int32 if dtype == "s32" else np.float32
    a, b = np.array([1, -2, 3, 6], np_dtype), np.array([5, 7, -3, 2], np_dtype)
    root = module.entry.root
    np.testing.assert_array_equal(evaluate_instruction(root, [a, b]), evaluate_instruction(root, [b, a]))
    assert not np.array_equal(evaluate_instruction(root, [a, b]), a)  # the op did something


def test_rule_table_keyed_by_a_list_of_names():
    table: RuleTable = RuleTable("import rule", keys=frozenset({"x.add", "x.sub"}))
    table.register("x.add")(abs)
    with pytest.raises(ValueError, match="import rule for unknown op 'x.mul'"):
        table.register("x.mul")(abs)
    with pytest.raises(ValueError, match="keys must be"):
        RuleTable("rule", keys="opcode")
    assert list(table.keys()) == ["x.add"]  # still a dict


def test_every_op_fusion_makes_heavy_has_a_fused_kernel():
    """Fusion forms input fusions around input_fusible ops and output fusions around contractions (with a
    row norm in a dot's epilogue): the kernels those fusions lower to know exactly these ops."""
    assert set(reduction.FUSED_REDUCTIONS) == ops_with("input_fusible")
    assert set(normalization.ROW_KERNELS) == ops_with("row_normalization")
