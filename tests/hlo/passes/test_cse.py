from mlcc.hlo.passes.cse import CommonSubexpressionElimination
from mlcc.hlo.testing import check_pass


def test_cse_merges_identical_instructions_and_their_origins():
    check_pass(CommonSubexpressionElimination(), """
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %a = f32[4]{0} exp(%p0), origin={"n1"}
        %b = f32[4]{0} exp(%p0), origin={"n2"}
        ROOT %r = f32[4]{0} add(%a, %b)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %a = f32[4]{0} exp(%p0), origin={"n1","n2"}
        ROOT %r = f32[4]{0} add(%a, %a)
      }""")


def test_cse_keeps_different_attributes_and_weights_apart():
    check_pass(CommonSubexpressionElimination(), """
      ENTRY %main {
        %p0 = f32[2,3]{1,0} parameter(0)
        %a = f32[2]{0} reduce(%p0), dimensions={1}, kind=add
        %b = f32[2]{0} reduce(%p0), dimensions={1}, kind=maximum
        %w0 = f32[2]{0} constant(), ref=w0
        %w1 = f32[2]{0} constant(), ref=w1
        %s = f32[2]{0} add(%a, %b)
        %t = f32[2]{0} add(%w0, %w1)
        ROOT %r = f32[2]{0} add(%s, %t)
      }""", expected=None)


def test_cse_merges_equal_inline_constants():
    check_pass(CommonSubexpressionElimination(), """
      ENTRY %main {
        %c0 = f32[] constant(), value={2.0}
        %c1 = f32[] constant(), value={2.0}
        ROOT %r = f32[] multiply(%c0, %c1)
      }""", expected="""
      ENTRY %main {
        %c0 = f32[] constant(), value={2.0}
        ROOT %r = f32[] multiply(%c0, %c0)
      }""")
