import pytest

from mlcc.hlo.ir import Instruction, Shape
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import VerifierError, verify_module


def verify(body: str) -> None:
    verify_module(parse_module("ENTRY %main {\n" + body + "\n}"))


def test_valid_module_passes():
    verify("""%a = f32[2,3]{1,0} parameter(0)
  %b = f32[3,2]{0,1} transpose(%a), dimensions={1,0}
  ROOT %c = f32[3,2]{1,0} negate(%b)""")


@pytest.mark.parametrize("body, message", [
    ("%a = f32[2]{0} parameter(0)\n  ROOT %b = f32[3]{0} negate(%a)", r"%b \(negate\): shape is f32\[3\]\{0\}, expected f32\[2\]\{0\}"),
    ("%a = f32[2]{0} parameter(0)\n  %i = s32[2]{0} parameter(1)\n  ROOT %b = f32[2]{0} add(%a, %i)", "operand dtypes f32 and s32 differ"),
    ("%a = f32[2,3]{0,0} parameter(0)\n  ROOT %b = f32[2,3]{1,0} negate(%a)", r"layout \{0,0\} is not a permutation"),
    ("%a = f32[2]{0} parameter(0)\n  ROOT %b = f32[2]{0} add(%a)", "needs 2 operands, has 1"),
    ("%a = f32[2]{0} parameter(0)\n  ROOT %b = f32[2]{0} transpose(%a)", "missing attribute 'dimensions'"),
    ("%a = f32[2]{0} parameter(0)\n  ROOT %b = f32[2]{0} negate(%a), bogus=1", "unexpected attribute 'bogus'"),
    ("%a = f32[2]{0} parameter(0)\n  %b = f32[2]{0} parameter(0)\n  ROOT %c = f32[2]{0} add(%a, %b)", "parameter index 0 used twice"),
    ("%a = f32[6]{0} parameter(0)\n  ROOT %b = f32[4]{0} reshape(%a)", "has 6 elements"),
    ("%a = f32[2,3]{1,0} parameter(0)\n  ROOT %b = f32[3]{0} broadcast(%a), dimensions={0,1}", "must be increasing and < 1"),
])
def test_bad_ir_is_reported(body, message):
    with pytest.raises(VerifierError, match=message):
        verify(body)


def test_use_before_definition_is_reported():
    m = parse_module("ENTRY %main {\n %a = f32[2]{0} parameter(0)\n ROOT %b = f32[2]{0} negate(%a)\n}")
    comp = m.entry
    comp.instructions.reverse()
    with pytest.raises(VerifierError, match="operand %a is not defined before use"):
        verify_module(m)


def test_stale_user_list_is_reported():
    m = parse_module("ENTRY %main {\n %a = f32[2]{0} parameter(0)\n ROOT %b = f32[2]{0} negate(%a)\n}")
    a = m.entry.instructions[0]
    ghost = Instruction("ghost", "negate", Shape("f32", (2,)))
    a.users.append(ghost)
    with pytest.raises(VerifierError, match="stale user %ghost"):
        verify_module(m)


MULTI_OUTPUT = """HloModule m{props}

%fused {{
  %p0 = f32[4]{{0}} parameter(0)
  %n = f32[4]{{0}} negate(%p0)
  ROOT %t = (f32[4]{{0}}, f32[4]{{0}}) tuple(%n, {second})
}}

ENTRY %main {{
  %x = f32[4]{{0}} parameter(0)
  %f = (f32[4]{{0}}, f32[4]{{0}}) fusion(%x), calls=%fused, kind=loop
  {reads}
}}
"""
READ_OUT = """%a = f32[4]{0} get-tuple-element(%f), index=0
  %b = f32[4]{0} get-tuple-element(%f), index=1
  ROOT %r = (f32[4]{0}, f32[4]{0}) tuple(%a, %b)"""


def test_a_multi_output_fusion_returns_computed_arrays_read_out_by_get_tuple_element():
    verify_module(parse_module(MULTI_OUTPUT.format(props=", properties={fused}", second="%n", reads=READ_OUT)))
    with pytest.raises(VerifierError, match="root must be a tuple of computed arrays, not tuple %t"):
        verify_module(parse_module(MULTI_OUTPUT.format(props="", second="%p0", reads=READ_OUT)))
    with pytest.raises(VerifierError, match="%r: reads multi-output fusion %f whole"):
        verify_module(parse_module(MULTI_OUTPUT.format(props=", properties={fused}", second="%n",
                                                       reads="ROOT %r = ((f32[4]{0}, f32[4]{0})) tuple(%f)")))
