import numpy as np

from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.sink_bitcasts import SinkBitcasts
from mlcc.hlo.testing import check_pass
from mlcc.hlo.verifier import verify_module

GEMM_VIEW_ADD = """
  HloModule m, output_names={y}

  ENTRY %main {
    %x = f32[16,64]{1,0} parameter(0), name=x
    %r = f32[1,16,64]{2,1,0} parameter(1), name=r
    %w = f32[64,64]{1,0} constant(), ref=w
    %d = f32[16,64]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
    %v = f32[1,16,64]{2,1,0} bitcast(%d)
    %c = f32[] constant(), value={0.5}
    %h = f32[1,16,64]{2,1,0} broadcast(%c), dimensions={}
    %s = f32[1,16,64]{2,1,0} multiply(%v, %h)
    %a = f32[1,16,64]{2,1,0} add(%s, %r)
    ROOT %t = (f32[1,16,64]{2,1,0}) tuple(%a)
  }"""


def test_an_epilogue_moves_above_the_reshape_that_hid_it():
    check_pass(SinkBitcasts(), GEMM_VIEW_ADD, expected="""
      HloModule m, output_names={y}

      ENTRY %main {
        %x = f32[16,64]{1,0} parameter(0), name=x
        %r = f32[1,16,64]{2,1,0} parameter(1), name=r
        %w = f32[64,64]{1,0} constant(), ref=w
        %d = f32[16,64]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %v = f32[1,16,64]{2,1,0} bitcast(%d)
        %c = f32[] constant(), value={0.5}
        %h = f32[1,16,64]{2,1,0} broadcast(%c), dimensions={}
        %h.1 = f32[16,64]{1,0} broadcast(%c), dimensions={}
        %s.1 = f32[16,64]{1,0} multiply(%d, %h.1)
        %v.1 = f32[1,16,64]{2,1,0} bitcast(%s.1)
        %r.view = f32[16,64]{1,0} bitcast(%r)
        %a.1 = f32[16,64]{1,0} add(%s.1, %r.view)
        %v.1.1 = f32[1,16,64]{2,1,0} bitcast(%a.1)
        ROOT %t = (f32[1,16,64]{2,1,0}) tuple(%v.1.1)
      }""")


def test_values_are_unchanged_and_a_relayout_is_left_alone():
    module = parse_module(GEMM_VIEW_ADD)
    rng = np.random.default_rng(0)
    module.constants["w"] = rng.standard_normal((64, 64)).astype(np.float32)
    feeds = {"x": rng.standard_normal((16, 64)).astype(np.float32), "r": rng.standard_normal((1, 16, 64)).astype(np.float32)}
    want = evaluate(module, feeds)["y"]
    SinkBitcasts().run(module)
    DeadCodeElimination().run(module)
    verify_module(module)
    np.testing.assert_allclose(evaluate(module, feeds)["y"], want, rtol=1e-6)
    check_pass(SinkBitcasts(), """
      ENTRY %main {
        %x = f32[4,8]{1,0} parameter(0)
        %v = f32[8,4]{0,1} bitcast(%x)
        ROOT %e = f32[8,4]{0,1} exp(%v)
      }""", expected=None)
