import pytest

from mlcc.hlo.parser import ParseError, parse_module
from mlcc.hlo.printer import format_module

MODULE = '''HloModule "my model", is_scheduled=true, output_names={y,"weird \\"name\\"\\n"}

%fused.1 {
  %p0 = f32[8,64]{1,0} parameter(0)
  %p1 = f32[64]{0} parameter(1)
  %b = f32[8,64]{1,0} broadcast(%p1), dimensions={1}
  ROOT %a = f32[8,64]{1,0} add(%p0, %b)
}

ENTRY %main {
  %x = f32[batch,64]{0,1} parameter(0), name="x y"
  %w = f32[64,32]{0,1} constant(), ref=w0
  %c = bf16[] constant(), value={0.5}
  %s = f32[64]{0} constant(), splat=-inf
  %n = f64[2]{0} constant(), value={nan,1e-300}
  %i = s64[3]{0} constant(), value={-1,0,9223372036854775807}
  %f = f32[8,64]{1,0} fusion(%x, %s), calls=%fused.1, kind=loop, origin={"/h.0/Add","a b"}
  %d = f32[8,32]{1,0} dot(%f, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %conv = f32[2,8,32,32]{3,2,1,0} convolution(%f, %w), dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={1,1}, padding_low={1,1}, rhs_dilation={1,1}, window_strides={1,1}
  %p = pred[] parameter(1), name=flag
  ROOT %t = (f32[8,32]{1,0}, f32[2,8,32,32]{3,2,1,0}) tuple(%d, %conv)
}
'''


def test_round_trip_is_exact():
    text = format_module(parse_module(MODULE))
    assert format_module(parse_module(text)) == text


def test_module_header_and_attributes():
    m = parse_module(MODULE)
    assert m.name == "my model"
    assert m.is_scheduled
    assert m.output_names == ["y", 'weird "name"\n']
    entry = m.entry
    x = entry.instructions[0]
    assert x.attrs == {"index": 0, "name": "x y"}
    assert x.shape.dims == ("batch", 64) and x.shape.layout == (0, 1)
    f = next(i for i in entry.instructions if i.opcode == "fusion")
    assert f.called is m.computation("fused.1")
    assert f.origin == ("/h.0/Add", "a b")
    n = next(i for i in entry.instructions if i.name == "n")
    assert n.attrs["value"][0] != n.attrs["value"][0]  # nan survives
    assert entry.root.opcode == "tuple"


@pytest.mark.parametrize("text, message", [
    ("ENTRY %m {\n  %a = f32[2]{0} parameter(0)\n  %b = f32[2]{0} add(%a, %zz)\n}", "3:26: undefined operand"),
    ("ENTRY %m {\n  %a = f32[2]{0} frobnicate()\n}", "2:18: unknown opcode"),
    ("ENTRY %m {\n  %a = f99[2]{0} parameter(0)\n}", "2:8: expected a dtype"),
    ("ENTRY %m {\n  %a = f32[2] parameter(0)\n}", "2:15: expected a layout"),
    ("ENTRY %m {\n  %a = f32[2]{0} parameter(0)\n", "expected '}'"),
    ("ENTRY %m {\n  %a = f32[2]{0} parameter(0)\n  %a = f32[2]{0} negate(%a)\n}", "3:3: instruction %a defined twice"),
    ("ENTRY %m {\n  %a = f32[2]{0} parameter(0) @\n}", "2:31: unexpected character '@'"),
])
def test_parse_errors_name_line_and_column(text, message):
    with pytest.raises(ParseError, match=message.replace("(", r"\(").replace("%", "%")):
        parse_module(text)


PHASED = '''HloModule m, properties={layouts_assigned,fused}, output_names={y}

ENTRY %main {
  %x = f32[4]{0} parameter(0), name=x
  ROOT %t = (f32[4]{0}) tuple(%x)
}
'''


def test_module_properties_round_trip():
    m = parse_module(PHASED)
    assert {p.value for p in m.properties} == {"layouts_assigned", "fused"}
    assert not m.is_scheduled
    assert format_module(m) == PHASED


def test_is_scheduled_means_every_phase_up_to_the_schedule():
    m = parse_module(MODULE)
    assert {p.value for p in m.properties} == {"layouts_assigned", "fused", "scheduled"}
    assert format_module(m).startswith('HloModule "my model", is_scheduled=true,')


def test_unknown_module_property_is_a_parse_error():
    with pytest.raises(ParseError, match="unknown module property 'vectorized'"):
        parse_module(PHASED.replace("fused}", "vectorized}"))
