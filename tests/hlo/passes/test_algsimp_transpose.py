from mlcc.hlo.passes.algsimp import AlgebraicSimplifier
from tests.hlo.passes.pass_numerics import check_rewrite


def test_two_transposes_compose_and_inverse_ones_vanish():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[2,3,4]{2,1,0} parameter(0)
        %a = f32[3,4,2]{2,1,0} transpose(%p0), dimensions={1,2,0}
        %b = f32[4,3,2]{2,1,0} transpose(%a), dimensions={1,0,2}
        %c = f32[2,3,4]{2,1,0} transpose(%a), dimensions={2,0,1}
        ROOT %r = (f32[4,3,2]{2,1,0}, f32[2,3,4]{2,1,0}) tuple(%b, %c)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[2,3,4]{2,1,0} parameter(0)
        %transpose-transpose = f32[4,3,2]{2,1,0} transpose(%p0), dimensions={2,1,0}
        ROOT %r = (f32[4,3,2]{2,1,0}, f32[2,3,4]{2,1,0}) tuple(%transpose-transpose, %p0)
      }""")


def test_a_transpose_that_only_moves_size_one_dims_is_a_reshape():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[1,16,1,8]{3,2,1,0} parameter(0)
        %t = f32[16,1,8,1]{3,2,1,0} transpose(%p0), dimensions={1,0,3,2}
        %u = f32[8,16,1,1]{3,2,1,0} transpose(%p0), dimensions={3,1,0,2}
        ROOT %r = (f32[16,1,8,1]{3,2,1,0}, f32[8,16,1,1]{3,2,1,0}) tuple(%t, %u)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[1,16,1,8]{3,2,1,0} parameter(0)
        %transpose-is-reshape = f32[16,1,8,1]{3,2,1,0} reshape(%p0)
        %u = f32[8,16,1,1]{3,2,1,0} transpose(%p0), dimensions={3,1,0,2}
        ROOT %r = (f32[16,1,8,1]{3,2,1,0}, f32[8,16,1,1]{3,2,1,0}) tuple(%transpose-is-reshape, %u)
      }""")


def test_torch_dynamo_key_transpose_through_squeezed_batch_cancels():
    # gpt2_tiny (torch.onnx dynamo): k^T is Reshape [1,4,16,16]->[4,16,16], Transpose, Reshape back;
    # the attention recognizer transposes it back, and the four ops cancel to the head split alone.
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[1,16,4,16]{3,2,1,0} parameter(0)
        %transpose = f32[1,4,16,16]{3,2,1,0} transpose(%p0), dimensions={0,2,1,3}, origin={node_transpose}
        %reshape.5 = f32[4,16,16]{2,1,0} reshape(%transpose), origin={node_Reshape_84}
        %transpose.3 = f32[4,16,16]{2,1,0} transpose(%reshape.5), dimensions={0,2,1}, origin={node_Transpose_85}
        %reshape.6 = f32[1,4,16,16]{3,2,1,0} reshape(%transpose.3), origin={node_Reshape_87}
        %k = f32[1,4,16,16]{3,2,1,0} transpose(%reshape.6), dimensions={0,1,3,2}
        ROOT %r = (f32[1,4,16,16]{3,2,1,0}) tuple(%k)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[1,16,4,16]{3,2,1,0} parameter(0)
        %transpose = f32[1,4,16,16]{3,2,1,0} transpose(%p0), dimensions={0,2,1,3}, origin={node_transpose}
        ROOT %r = (f32[1,4,16,16]{3,2,1,0}) tuple(%transpose)
      }""")


def test_head_split_transposes_stay():
    check_rewrite(AlgebraicSimplifier(), """
      ENTRY %main {
        %p0 = f32[1,16,64]{2,1,0} parameter(0)
        %s = f32[1,16,4,16]{3,2,1,0} reshape(%p0)
        %t = f32[1,4,16,16]{3,2,1,0} transpose(%s), dimensions={0,2,1,3}
        ROOT %r = (f32[1,4,16,16]{3,2,1,0}) tuple(%t)
      }""", expected=None)
