import numpy as np

from mlcc.hlo.passes.constant_folding import ConstantFolding
from mlcc.hlo.testing import check_pass
from tests.hlo.passes.pass_numerics import check_rewrite, run


def test_folds_through_the_evaluator_and_inlines_small_results():
    check_rewrite(ConstantFolding(), """
      ENTRY %main {
        %p0 = f32[3]{0} parameter(0)
        %c = f32[3]{0} constant(), value={1.0,4.0,9.0}
        %s = f32[3]{0} sqrt(%c)
        %n = f32[3]{0} negate(%s)
        ROOT %r = f32[3]{0} add(%p0, %n)
      }""", expected="""
      ENTRY %main {
        %p0 = f32[3]{0} parameter(0)
        %n.folded = f32[3]{0} constant(), value={-1.0,-2.0,-3.0}
        ROOT %r = f32[3]{0} add(%p0, %n.folded)
      }""")


def test_ops_on_splats_stay_splats_whatever_their_size():
    check_pass(ConstantFolding(), """
      ENTRY %main {
        %z = f32[] constant(), value={0.0}
        %b = f32[100000,100000]{1,0} broadcast(%z), dimensions={}
        %e = f32[100000,100000]{1,0} exp(%b)
        %t = f32[100000,100000]{1,0} transpose(%e), dimensions={1,0}
        %h = f16[100000,100000]{1,0} convert(%t)
        ROOT %r = (f16[100000,100000]{1,0}) tuple(%h)
      }""", expected="""
      ENTRY %main {
        %h.folded = f16[100000,100000]{1,0} constant(), splat=1.0
        ROOT %r = (f16[100000,100000]{1,0}) tuple(%h.folded)
      }""")


def test_small_results_may_grow_but_large_ones_and_broadcasts_may_not():
    # the iota compare (1 KiB) folds; the 64 KiB iota and the broadcast of a vector stay
    changed, module = run(ConstantFolding(), """
      ENTRY %main {
        %i0 = s32[16,16]{1,0} iota(), iota_dimension=0
        %i1 = s32[16,16]{1,0} iota(), iota_dimension=1
        %tril = pred[16,16]{1,0} compare(%i0, %i1), direction=GE
        %big = s32[128,128]{1,0} iota(), iota_dimension=0
        %v = f32[4]{0} constant(), value={1.0,2.0,3.0,4.0}
        %bv = f32[2,4]{1,0} broadcast(%v), dimensions={1}
        ROOT %r = (pred[16,16]{1,0}, s32[128,128]{1,0}, f32[2,4]{1,0}) tuple(%tril, %big, %bv)
      }""")
    assert changed
    tril = module.entry.root.operands[0]
    assert tril.opcode == "constant"
    np.testing.assert_array_equal(module.constants[tril.attrs["ref"]], np.tril(np.ones((16, 16), bool)))
    assert [o.opcode for o in module.entry.root.operands[1:]] == ["iota", "broadcast"]


def test_copies_of_weights_another_op_reads_are_not_folded():
    w = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    check_rewrite(ConstantFolding(), """
      ENTRY %main {
        %ids = s32[2]{0} parameter(0)
        %w = f32[64,32]{1,0} constant(), ref=w
        %g = f32[2,32]{1,0} gather(%w, %ids), axis=0
        %t = f32[32,64]{1,0} transpose(%w), dimensions={1,0}
        ROOT %r = (f32[2,32]{1,0}, f32[32,64]{1,0}) tuple(%g, %t)
      }""", expected=None, constants={"w": w})


def test_results_over_the_budget_are_not_folded():
    text = """
      ENTRY %main {
        %w = f32[64,32]{1,0} constant(), ref=w
        %n = f32[64,32]{1,0} negate(%w)
        ROOT %r = (f32[64,32]{1,0}) tuple(%n)
      }"""
    w = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    changed, module = run(ConstantFolding(), text, {"w": w})
    folded = module.entry.root.operands[0]
    assert changed and folded.opcode == "constant"
    np.testing.assert_array_equal(module.constants[folded.attrs["ref"]], -w)
    changed, _ = run(ConstantFolding(budget_bytes=4096), text, {"w": w})
    assert not changed


def test_leaves_parameters_and_missing_weights_alone():
    check_rewrite(ConstantFolding(), """
      ENTRY %main {
        %p0 = f32[3]{0} parameter(0)
        %e = f32[3]{0} exp(%p0)
        ROOT %r = (f32[3]{0}) tuple(%e)
      }""", expected=None)
