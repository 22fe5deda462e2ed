from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.testing import check_pass


def test_dce_removes_unused_add():
    check_pass(DeadCodeElimination(), """
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %dead = f32[4]{0} add(%p0, %p0)
        %dead2 = f32[4]{0} exp(%dead)
        ROOT %r = f32[4]{0} negate(%p0)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        ROOT %r = f32[4]{0} negate(%p0)
      }""")


def test_dce_keeps_unused_entry_parameters_and_live_values():
    check_pass(DeadCodeElimination(), """
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %p1 = f32[4]{0} parameter(1)
        %e = f32[4]{0} exp(%p0)
        ROOT %r = (f32[4]{0}) tuple(%e)
      }""", expected=None)


def test_dce_drops_computations_no_fusion_calls():
    check_pass(DeadCodeElimination(), """
      %unused {
        %q = f32[4]{0} parameter(0)
        ROOT %n = f32[4]{0} negate(%q)
      }

      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %f = f32[4]{0} fusion(%p0), calls=%unused, kind=loop
        ROOT %r = f32[4]{0} exp(%p0)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        ROOT %r = f32[4]{0} exp(%p0)
      }""")
