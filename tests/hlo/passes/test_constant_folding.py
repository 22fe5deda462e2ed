import numpy as np
import pytest

from mlcc.hlo.dtypes import numpy_dtype
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


_NUMPY_REDUCE = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
                 "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
_NUMPY_PRED_REDUCE = {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or,
                      "minimum": np.logical_and, "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


@pytest.mark.parametrize("kind,dtype,value", [
    ("add", "f32", 0.1), ("add", "f32", -0.0), ("add", "f16", 0.3), ("add", "s8", 100), ("add", "u8", 7), ("add", "s64", -3),
    ("multiply", "f32", 1.5), ("multiply", "s32", -3), ("multiply", "u16", 3), ("maximum", "f16", -2.5),
    ("minimum", "s64", 5), ("and", "u8", 6), ("or", "s32", -6), ("xor", "s32", 6), ("xor", "pred", True),
    ("add", "pred", True), ("multiply", "pred", False), ("or", "pred", True)])
def test_reduce_of_a_splat_folds_in_closed_form(kind, dtype, value):
    """Folded without visiting an element (a 1-byte budget refuses any evaluation), equal to numpy's
    reduction of the materialized array (small here, so that numpy can)."""
    literal = str(value).lower() if dtype == "pred" else value
    changed, module = run(ConstantFolding(budget_bytes=1), f"""
      ENTRY %main {{
        %c = {dtype}[3,5,7]{{2,1,0}} constant(), splat={literal}
        %r = {dtype}[5]{{0}} reduce(%c), dimensions={{0,2}}, kind={kind}
        ROOT %t = ({dtype}[5]{{0}}) tuple(%r)
      }}""")
    assert changed
    (folded,) = module.entry.root.operands
    assert folded.opcode == "constant" and "splat" in folded.attrs
    x = np.full((3, 5, 7), value, numpy_dtype(dtype))
    if dtype == "pred":
        want = _NUMPY_PRED_REDUCE[kind].reduce(x, axis=(0, 2))
    elif dtype in ("f16", "f32"):  # from the identity, as a reduce starts (a sum of -0.0 is +0.0)
        start = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}[kind]
        want = _NUMPY_REDUCE[kind].reduce(x.astype(np.float64), axis=(0, 2), initial=start).astype(x.dtype)
    else:
        want = _NUMPY_REDUCE[kind].reduce(x, axis=(0, 2), dtype=x.dtype)
    got = np.full(5, folded.attrs["splat"]).astype(x.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_reduce_of_a_petabyte_splat_is_value_times_count():
    """ONNX ConstantOfShape([2**25, 2**25]) then ReduceSum (the hostile corpus' petabyte_constant_of_shape):
    2**50 elements are never visited."""
    changed, module = run(ConstantFolding(), """
      ENTRY %main {
        %c = f32[33554432,33554432]{1,0} constant(), splat=0.75
        %s = f32[] reduce(%c), dimensions={0,1}, kind=add
        %m = f32[33554432]{0} reduce(%c), dimensions={1}, kind=maximum
        ROOT %t = (f32[], f32[33554432]{0}) tuple(%s, %m)
      }""")
    assert changed
    s, m = module.entry.root.operands
    assert s.attrs["value"] == (float(np.float32(0.75 * 2.0**50)),)
    assert m.attrs["splat"] == 0.75


def test_evaluating_operands_over_the_budget_is_not_done():
    """The budget bounds the work as well as the result: an argmax over a 2**42-element splat (a 16-byte
    result) and a slice of a 2 MiB weight stay unfolded; with room for the weight, the slice folds."""
    changed, module = run(ConstantFolding(), """
      ENTRY %main {
        %c = f32[4,1099511627776]{1,0} constant(), splat=1.0
        %a = s64[4]{0} argmax(%c), dimension=1
        ROOT %t = (s64[4]{0}) tuple(%a)
      }""")
    assert not changed and module.entry.root.operands[0].opcode == "argmax"
    w = np.arange(1 << 19, dtype=np.float32)
    text = """
      ENTRY %main {
        %w = f32[524288]{0} constant(), ref=w
        %s = f32[4]{0} slice(%w), start_indices={10}, limit_indices={18}, strides={2}
        ROOT %t = (f32[4]{0}) tuple(%s)
      }"""
    check_rewrite(ConstantFolding(), text, expected=None, constants={"w": w})
    changed, module = run(ConstantFolding(budget_bytes=4 << 20), text, {"w": w})
    (folded,) = module.entry.root.operands
    assert changed and folded.opcode == "constant"
    np.testing.assert_array_equal(np.array(folded.attrs["value"], np.float32), w[10:18:2])
