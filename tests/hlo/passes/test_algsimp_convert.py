import pytest

from mlcc.hlo.passes.algsimp import AlgebraicSimplifier
from mlcc.hlo.passes.algsimp.convert import exact
from tests.hlo.passes.pass_numerics import check_rewrite


def test_exactness_of_conversions():
    assert exact("f16", "f32") and exact("bf16", "f64") and exact("s8", "f16") and exact("u16", "s32")
    assert exact("pred", "f16") and exact("s32", "f64") and exact("u8", "bf16")
    assert not exact("f32", "f16") and not exact("f16", "bf16") and not exact("s32", "f32")
    assert not exact("s8", "u16") and not exact("f32", "s32") and not exact("s16", "pred")


def test_convert_to_the_same_type_vanishes_and_a_round_trip_through_a_wider_type_too():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f16[4]{0} parameter(0)
        %a = f16[4]{0} convert(%p0)
        %b = f32[4]{0} convert(%a)
        %c = f16[4]{0} convert(%b)
        ROOT %r = (f16[4]{0}) tuple(%c)
      }""", expected="""
      ENTRY %main {
        %p0 = f16[4]{0} parameter(0)
        ROOT %r = (f16[4]{0}) tuple(%p0)
      }""")


@pytest.mark.parametrize("src,mid,dst,folds", [
    ("f16", "f32", "bf16", True),     # f16 -> f32 is exact: f16 -> bf16 directly rounds the same
    ("s32", "f64", "f32", True),
    ("s8", "s32", "u8", True),
    ("f32", "f16", "f32", False),     # through a narrower type: rounding happens
    ("f32", "s32", "f32", False),     # truncation
    ("s32", "f32", "s32", False),     # f32 cannot hold every s32
])
def test_convert_chains(src, mid, dst, folds):
    text = f"""
      ENTRY %main {{
        %p0 = {src}[4]{{0}} parameter(0)
        %a = {mid}[4]{{0}} convert(%p0)
        %b = {dst}[4]{{0}} convert(%a)
        ROOT %r = ({dst}[4]{{0}}) tuple(%b)
      }}"""
    expected = f"""
      ENTRY %main {{
        %p0 = {src}[4]{{0}} parameter(0)
        %convert-convert = {dst}[4]{{0}} convert(%p0)
        ROOT %r = ({dst}[4]{{0}}) tuple(%convert-convert)
      }}"""
    check_rewrite(AlgebraicSimplifier(), text, expected if folds else None)
