from mlcc.hlo.passes.algsimp import AlgebraicSimplifier
from tests.hlo.passes.pass_numerics import check_rewrite


def test_reshape_chains_collapse_and_reshapes_to_the_same_dims_vanish():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[2,3,4]{2,1,0} parameter(0)
        %a = f32[6,4]{1,0} reshape(%p0)
        %b = f32[24]{0} reshape(%a)
        %c = f32[2,12]{1,0} reshape(%b)
        %d = f32[2,3,4]{2,1,0} reshape(%p0)
        ROOT %r = (f32[2,12]{1,0}, f32[2,3,4]{2,1,0}) tuple(%c, %d)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[2,3,4]{2,1,0} parameter(0)
        %reshape-reshape.1 = f32[2,12]{1,0} reshape(%p0)
        ROOT %r = (f32[2,12]{1,0}, f32[2,3,4]{2,1,0}) tuple(%reshape-reshape.1, %p0)
      }""")


def test_broadcast_chains_compose_and_a_broadcast_that_repeats_nothing_is_a_reshape():
    # JAX's keepdims idiom: broadcast_in_dim [1,16] -> [1,16,1], then -> [1,16,64]; the inner
    # broadcasts repeat nothing, become reshapes, and fold into the outer broadcasts
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[1,16]{1,0} parameter(0)
        %p1 = f32[64]{0} parameter(1)
        %k = f32[1,16,1]{2,1,0} broadcast(%p0), dimensions={0,1}
        %e = f32[1,16,64]{2,1,0} broadcast(%k), dimensions={0,1,2}
        %b1 = f32[1,1,64]{2,1,0} broadcast(%p1), dimensions={2}
        %b2 = f32[1,16,64]{2,1,0} broadcast(%b1), dimensions={0,1,2}
        %s = f32[1,16,64]{2,1,0} add(%e, %b2)
        ROOT %r = (f32[1,16,64]{2,1,0}) tuple(%s)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[1,16]{1,0} parameter(0)
        %p1 = f32[64]{0} parameter(1)
        %broadcast-reshape = f32[1,16,64]{2,1,0} broadcast(%p0), dimensions={0,1}
        %broadcast-reshape.1 = f32[1,16,64]{2,1,0} broadcast(%p1), dimensions={2}
        %s = f32[1,16,64]{2,1,0} add(%broadcast-reshape, %broadcast-reshape.1)
        ROOT %r = (f32[1,16,64]{2,1,0}) tuple(%s)
      }""")


def test_broadcast_of_a_keepdims_reshape_becomes_one_broadcast():
    # the ONNX ReduceMean(keepdims=1) import: reduce, reshape [2,8] -> [2,8,1], broadcast back
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[2,8]{1,0} parameter(0)
        %k = f32[2,8,1]{2,1,0} reshape(%p0)
        %e = f32[2,8,32]{2,1,0} broadcast(%k), dimensions={0,1,2}
        ROOT %r = (f32[2,8,32]{2,1,0}) tuple(%e)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[2,8]{1,0} parameter(0)
        %broadcast-reshape = f32[2,8,32]{2,1,0} broadcast(%p0), dimensions={0,1}
        ROOT %r = (f32[2,8,32]{2,1,0}) tuple(%broadcast-reshape)
      }""")


def test_broadcast_of_broadcast_composes():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[3]{0} parameter(0)
        %a = f32[2,3]{1,0} broadcast(%p0), dimensions={1}
        %b = f32[2,4,3]{2,1,0} broadcast(%a), dimensions={0,2}
        ROOT %r = (f32[2,4,3]{2,1,0}) tuple(%b)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[3]{0} parameter(0)
        %broadcast-broadcast = f32[2,4,3]{2,1,0} broadcast(%p0), dimensions={2}
        ROOT %r = (f32[2,4,3]{2,1,0}) tuple(%broadcast-broadcast)
      }""")


def test_real_broadcasts_and_reshapes_that_move_data_stay():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %p1 = f32[2,6]{1,0} parameter(1)
        %b = f32[3,4]{1,0} broadcast(%p0), dimensions={1}
        %k = f32[4,1]{1,0} reshape(%p0)
        %c = f32[4,3]{1,0} broadcast(%k), dimensions={0,1}
        %t = f32[6,2]{1,0} reshape(%p1)
        ROOT %r = (f32[3,4]{1,0}, f32[4,3]{1,0}, f32[6,2]{1,0}) tuple(%b, %c, %t)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[4]{0} parameter(0)
        %p1 = f32[2,6]{1,0} parameter(1)
        %b = f32[3,4]{1,0} broadcast(%p0), dimensions={1}
        %broadcast-reshape = f32[4,3]{1,0} broadcast(%p0), dimensions={0}
        %t = f32[6,2]{1,0} reshape(%p1)
        ROOT %r = (f32[3,4]{1,0}, f32[4,3]{1,0}, f32[6,2]{1,0}) tuple(%b, %broadcast-reshape, %t)
      }""")


def test_views_of_a_broadcast_scalar_are_broadcasts():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[] parameter(0)
        %b = f32[4,6]{1,0} broadcast(%p0), dimensions={}
        %t = f32[6,4]{1,0} transpose(%b), dimensions={1,0}
        %s = f32[24]{0} reshape(%b)
        ROOT %r = (f32[6,4]{1,0}, f32[24]{0}) tuple(%t, %s)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[] parameter(0)
        %scalar-broadcast-view = f32[6,4]{1,0} broadcast(%p0), dimensions={}
        %scalar-broadcast-view.1 = f32[24]{0} broadcast(%p0), dimensions={}
        ROOT %r = (f32[6,4]{1,0}, f32[24]{0}) tuple(%scalar-broadcast-view, %scalar-broadcast-view.1)
      }""")
