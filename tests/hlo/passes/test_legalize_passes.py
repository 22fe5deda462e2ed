from mlcc.hlo.passes.output_copies import OutputCopies
from mlcc.hlo.passes.reshape_to_bitcast import ReshapeToBitcast
from mlcc.hlo.passes.splat_to_broadcast import SplatToBroadcast
from mlcc.hlo.testing import check_pass


def test_splat_becomes_broadcast_of_a_scalar():
    check_pass(SplatToBroadcast(), """
      ENTRY %main {
        %p0 = f32[1000000,1000000]{1,0} parameter(0)
        %s = f32[1000000,1000000]{1,0} constant(), splat=0.02
        ROOT %r = f32[1000000,1000000]{1,0} add(%p0, %s)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[1000000,1000000]{1,0} parameter(0)
        %s.scalar = f32[] constant(), value={0.02}
        %s.bcast = f32[1000000,1000000]{1,0} broadcast(%s.scalar), dimensions={}
        ROOT %r = f32[1000000,1000000]{1,0} add(%p0, %s.bcast)
      }""")


def test_row_major_reshape_is_a_bitcast_but_a_relayout_is_not():
    check_pass(ReshapeToBitcast(), """
      ENTRY %main {
        %p0 = f32[2,3,4]{2,1,0} parameter(0)
        %a = f32[6,4]{1,0} reshape(%p0)
        %t = f32[6,4]{0,1} copy(%a)
        %b = f32[24]{0} reshape(%t)
        ROOT %r = (f32[6,4]{1,0}, f32[24]{0}) tuple(%a, %b)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[2,3,4]{2,1,0} parameter(0)
        %a = f32[6,4]{1,0} bitcast(%p0)
        %t = f32[6,4]{0,1} copy(%a)
        %b = f32[24]{0} reshape(%t)
        ROOT %r = (f32[6,4]{1,0}, f32[24]{0}) tuple(%a, %b)
      }""")


def test_outputs_that_alias_inputs_or_each_other_are_copied():
    check_pass(OutputCopies(), """
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %v = f32[2,2]{1,0} bitcast(%p0)
        %e = f32[4]{0} exp(%p0)
        ROOT %r = (f32[2,2]{1,0}, f32[4]{0}, f32[4]{0}) tuple(%v, %e, %e)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %v = f32[2,2]{1,0} bitcast(%p0)
        %e = f32[4]{0} exp(%p0)
        %v.out0 = f32[2,2]{1,0} copy(%v)
        %e.out2 = f32[4]{0} copy(%e)
        ROOT %r = (f32[2,2]{1,0}, f32[4]{0}, f32[4]{0}) tuple(%v.out0, %e, %e.out2)
      }""")
