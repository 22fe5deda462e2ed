"""The kernel-body IR (mlcc/emit/codegen/body.py): the verifier pairs each bad body with its message, the
printer's text, the elementwise table, and the loop kernels' bodies verified as they are lowered."""

from __future__ import annotations

import pytest

from mlcc.emit.codegen.body import (Assign, BodyError, Broadcast, Convert, Div, ElementOp, For, Full, Index, Load,
                                    MaskStmt, Select, Store, Widen, format_body, verify_body)
from mlcc.emit.codegen.builder import Body
from mlcc.emit.codegen.elementwise import EXPR, Lines, element_code, has_code
from mlcc.emit.codegen.indexing import NO_RANGES, Affine
from mlcc.emit.codegen.kernel import lower
from mlcc.emit.codegen.loop import LINEAR, TAIL_MASK, loop_body
from mlcc.emit.codegen.lower_module import LOWERING_MODULES
from mlcc.hlo.opcodes import ELEMENTWISE_OPS
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module

INPUTS = {"lin": "s32", "mask": "pred"}


def op(out: str, name: str, dtype: str, *args: str, depth: int = 0, result: str | None = None) -> ElementOp:
    bits = 8 if dtype == "pred" else int(dtype[1:])
    category = {"f": "float", "s": "signed", "u": "unsigned", "p": "pred"}[dtype[0]]
    return ElementOp(out=out, depth=depth, op=name, variant=None, category=category, dtype=dtype, args=tuple(args),
                     bits=bits, utype=f"u{bits}", stype=f"s{bits}", result=result or dtype)


def load(out: str, dtype: str, offset: str = "lin", depth: int = 0) -> Load:
    return Load(out=out, depth=depth, ptr="in0", offset=Affine.var(offset), mask="mask", offset_block=True,
                index="s32", dtype=dtype)


def store(x: str, depth: int = 0) -> Store:
    return Store(out=None, depth=depth, ptr="out0", offset=Affine.var("lin"), x=x, mask="mask")


GOOD = [
    load("v0", "f16"),
    Convert(out="v1", depth=0, x="v0", src="f16", dst="f32", lo=0, hi=0),
    Full(out="v2", depth=0, value=1.5, dtype="f32"),
    Broadcast(out="v3", depth=0, x="v2"),
    op("v4", "add", "f32", "v1", "v3"),
    Assign(out="acc0", depth=0, x="v4"),
    For(out="u0", depth=0, count="3"),
    Index(out="i0", depth=1, expr=Affine.var("lin") * 3 + Affine.var("u0")),
    load("v5", "f32", "i0", depth=1),
    op("v6", "multiply", "f32", "acc0", "v5", depth=1),
    Assign(out="acc0", depth=1, x="v6"),
    store("acc0"),
]


def test_a_good_body_verifies_and_prints():
    verify_body(GOOD, INPUTS, "s32")
    assert format_body(GOOD, INPUTS) == """\
inputs lin: s32, mask: pred
v0 = load f16 in0[lin] if mask
v1 = convert v0: f16 to f32
v2 = full f32 1.5
v3 = broadcast v2
v4 = op add(v1, v3): f32 -> f32
acc0 = assign v4
for u0 in range(3):
  i0 = index lin * 3 + u0
  v5 = load f32 in0[i0] if mask
  v6 = op multiply(acc0, v5): f32 -> f32
  acc0 = assign v6
store out0[lin] = acc0 if mask"""


BAD = {
    "read before defined": (
        [Convert(out="v1", depth=0, x="v0", src="f32", dst="f16", lo=0, hi=0)],
        r"statement 0 \(v1 = convert v0: f32 to f16\): v0 is read before it is defined"),
    "a loop's variable read after the loop": (
        [For(out="u0", depth=0, count="4"), Index(out="i0", depth=1, expr=Affine.var("u0") * 2),
         load("v0", "f32", "i0")],
        r"statement 2 \(v0 = load f32 in0\[i0\] if mask\): i0 is read before it is defined"),
    "convert of the wrong dtype": (
        [load("v0", "s32"), Convert(out="v1", depth=0, x="v0", src="f32", dst="f16", lo=0, hi=0)],
        r"statement 1 \(v1 = convert v0: f32 to f16\): v0 is s32, expected f32"),
    "op operands of two dtypes": (
        [load("v0", "f32"), load("v1", "s32"), op("v2", "add", "f32", "v0", "v1")],
        r"statement 2 \(v2 = op add\(v0, v1\): f32 -> f32\): v1 is s32, expected f32"),
    "op result neither its dtype nor pred": (
        [load("v0", "f32"), op("v1", "negate", "f32", "v0", result="s8")],
        r"an op on f32 gives s8"),
    "select on a non-pred condition": (
        [load("v0", "f32"), load("v1", "f32"), Select(out="v2", depth=0, cond="v0", a="v1", b="v1")],
        r"statement 2 \(v2 = select v0, v1, v1\): v0 is f32, expected pred"),
    "mask over a float": (
        [load("v0", "f32"),
         MaskStmt(out="m0", depth=0, base="mask", clauses=((Affine.var("v0"), ">=", Affine()),))],
        r"v0 is f32, not an integer index"),
    "mask with an unknown comparison": (
        [MaskStmt(out="m0", depth=0, base=None, clauses=((Affine.var("lin"), "!=", Affine()),))],
        r"unknown comparison '!='"),
    "index over a float": (
        [load("v0", "f32"), Div(out="q0", depth=0, x="v0", k="4")],
        r"statement 1 \(q0 = div v0, 4\): v0 is f32, not an integer index"),
    "a variable defined twice": (
        [Full(out="v0", depth=0, value=0, dtype="f32"), Full(out="v0", depth=0, value=1, dtype="f32")],
        r"statement 1 \(v0 = full f32 1\): v0 is defined twice"),
    "an accumulator reassigned another dtype": (
        [load("v0", "f32"), Assign(out="acc0", depth=0, x="v0"), load("v1", "s32"),
         Assign(out="acc0", depth=0, x="v1")],
        r"statement 3 \(acc0 = assign v1\): acc0 is f32, assigned a s32"),
    "a statement deeper than any loop": (
        [Full(out="v0", depth=1, value=0, dtype="f32")],
        r"statement 0 \(v0 = full f32 0\): at depth 1 after a statement at depth 0"),
    "a loop header without a body": (
        [For(out="u0", depth=0, count="4"), Full(out="v0", depth=0, value=0, dtype="f32")],
        r"at depth 0 after a statement at depth 0 opening a loop"),
    "a body ending in a loop header": (
        [For(out="u0", depth=0, count="4")],
        r"the body ends with a loop header"),
    "widen of a float": (
        [load("v0", "f32"), Widen(out="u1", depth=0, x="v0", index="s64")],
        r"v0 is f32, not an integer index"),
    "an unknown statement kind": (
        [{"kind": "index", "out": "i0", "depth": 0}],
        r"statement 0: unknown statement kind dict"),
    "a store of an undefined value": (
        [store("v9")],
        r"statement 0 \(store out0\[lin\] = v9 if mask\): v9 is read before it is defined"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_verifier_rejects(name: str):
    body, message = BAD[name]
    with pytest.raises(BodyError, match=message) as caught:
        verify_body(body, INPUTS, "s32")
    assert caught.value.body == format_body(body, INPUTS)  # the error carries the printed body
    assert str(caught.value).endswith("\n" + caught.value.body)


def test_body_live_verifies_what_it_returns():
    body = Body("s32", NO_RANGES)
    body.declare(LINEAR, "s32")
    body.add(Convert, "v0", True, x="v9", src="f32", dst="f16", lo=0, hi=0)  # v9 undefined
    body.add(Store, None, False, ptr="out0", offset=Affine.var(LINEAR), x="v0", mask=TAIL_MASK)
    with pytest.raises(BodyError, match="v9 is read before it is defined"):
        body.live()


def test_live_drops_dead_statements_and_empty_loops():
    body = Body("s32", NO_RANGES)
    body.declare(LINEAR, "s32")
    body.declare(TAIL_MASK, "pred")
    body.add(Full, "v0", False, value=0, dtype="f32")  # read by nothing
    body.loop(4)
    body.add(Full, "v1", False, value=1, dtype="f32")  # neither
    body.end_loop()
    body.add(Load, "v2", True, ptr="in0", offset=Affine.var(LINEAR), mask=TAIL_MASK, offset_block=True,
             index="s32", dtype="f32")
    body.add(Store, None, False, ptr="out0", offset=Affine.var(LINEAR), x="v2", mask=TAIL_MASK)
    assert format_body(body.live()) == "v2 = load f32 in0[lin] if mask\nstore out0[lin] = v2 if mask"


FUSION = """HloModule m
%fused {
  %p0 = f16[4,6]{1,0} parameter(0)
  %p1 = f16[6]{0} parameter(1)
  %b = f16[4,6]{1,0} broadcast(%p1), dimensions={1}
  %a = f16[4,6]{1,0} add(%p0, %b)
  ROOT %e = f16[4,6]{0,1} exp(%a)
}
ENTRY %main {
  %x = f16[4,6]{1,0} parameter(0)
  %y = f16[6]{0} parameter(1)
  ROOT %f = f16[4,6]{0,1} fusion(%x, %y), kind=loop, calls=%fused
}
"""


def test_a_loop_kernel_prints_its_body():
    """The walk is column-major (the result's layout): q0 is the column, r0 the row."""
    module = parse_module(FUSION)
    verify_module(module)
    inst = module.entry.root
    kernel = lower(inst, "k")
    assert kernel.body_ir == """\
inputs lin: s32, mask: pred
q0 = div lin, 4
r0 = mod lin, 4
v0 = load f16 in0[q0 + r0 * 6] if mask
v1 = load f16 in1[q0] if mask
v2 = convert v0: f16 to f32
v3 = convert v1: f16 to f32
v4 = op add(v2, v3): f32 -> f32
v5 = convert v4: f32 to f16
v6 = convert v5: f16 to f32
v7 = op exp(v6): f32 -> f32
v8 = convert v7: f32 to f16
store out0[lin] = v8 if mask"""
    em = loop_body(inst.called, inst, NO_RANGES)
    assert format_body(em.body.live(), em.body.inputs) == kernel.body_ir


def test_each_elementwise_entry_is_one_place():
    """Every entry is for an elementwise opcode (compare and gelu by variant), and writes either one
    expression or a loop_math macro's lines."""
    for key, table in EXPR.items():
        assert key.split("/")[0] in ELEMENTWISE_OPS, key
        assert set(table) <= {"float", "signed", "unsigned", "pred", "any"}, key
        assert all(isinstance(code, (str, Lines)) for code in table.values()), key
    assert has_code("exp", None, "float") and not has_code("exp", None, "signed")
    assert element_code(op("v1", "exp", "f32", "v0")).expr == "tl.exp(v0)"
    assert element_code(op("v1", "sqrt", "f64", "v0")).expr == "tl.sqrt(v0)"
    code = element_code(op("v2", "power", "s16", "v0", "v1"))
    assert (code.macro, code.args) == ("ipow", ("v0", "v1", 16, True))


DOT_BIAS_RELU = """HloModule m
%fused {
  %p0 = f32[17,33]{1,0} parameter(0)
  %p1 = f32[33,19]{0,1} parameter(1)
  %p2 = f32[19]{0} parameter(2)
  %d = f32[17,19]{1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %b = f32[17,19]{1,0} broadcast(%p2), dimensions={1}
  %a = f32[17,19]{1,0} add(%d, %b)
  ROOT %r = f32[17,19]{1,0} relu(%a)
}
ENTRY %main {
  %x = f32[17,33]{1,0} parameter(0)
  %w = f32[33,19]{0,1} parameter(1)
  %bias = f32[19]{0} parameter(2)
  ROOT %f = f32[17,19]{0,1} fusion(%x, %w, %bias), kind=output, calls=%fused
}
"""


def test_a_fused_kernel_prints_its_sections():
    """An output fusion's epilogue: the accumulator (the template's acc) stands for the dot."""
    assert LOWERING_MODULES  # importing the registry registered the contraction lowering
    module = parse_module(DOT_BIAS_RELU)
    verify_module(module)
    assert lower(module.entry.root, "k").body_ir == """\
epilogue:
  e_v0 = load f32 in2[lane_n] if mask
  e_v1 = op add(acc, e_v0): f32 -> f32
  e_v2 = op relu(e_v1): f32 -> f32"""
