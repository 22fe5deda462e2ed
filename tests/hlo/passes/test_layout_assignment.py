import numpy as np

from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.parser import parse_module
from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.layout_assignment import LayoutAssignment, TransposeToBitcast, layout_conversions
from mlcc.hlo.passes.reshape_to_bitcast import ReshapeToBitcast
from mlcc.hlo.testing import check_pass
from mlcc.hlo.verifier import verify_module

CONV = "dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={1,1}, padding_low={1,1}, rhs_dilation={1,1}, window_strides={1,1}"


def test_convolution_gets_nhwc_activations_and_a_contiguous_filter():
    # The model's NCHW input is read through its strides (the boundary conversion is in the
    # convolution's loads); the result is NHWC and the relu converts back for the output.
    check_pass(LayoutAssignment(), f"""
      HloModule m, output_names={{y}}

      ENTRY %main {{
        %x = f32[1,3,8,8]{{3,2,1,0}} parameter(0), name=x
        %w = f32[4,3,3,3]{{3,2,1,0}} constant(), ref=w
        %c = f32[1,4,8,8]{{3,2,1,0}} convolution(%x, %w), {CONV}
        %r = f32[1,4,8,8]{{3,2,1,0}} relu(%c)
        ROOT %t = (f32[1,4,8,8]{{3,2,1,0}}) tuple(%r)
      }}""", expected=f"""
      HloModule m, output_names={{y}}

      ENTRY %main {{
        %x = f32[1,3,8,8]{{3,2,1,0}} parameter(0), name=x
        %w = f32[4,3,3,3]{{0,1,3,2}} constant(), ref=w
        %c = f32[1,4,8,8]{{1,3,2,0}} convolution(%x, %w), {CONV}
        %r = f32[1,4,8,8]{{3,2,1,0}} relu(%c)
        ROOT %t = (f32[1,4,8,8]{{3,2,1,0}}) tuple(%r)
      }}""")


def test_nhwc_propagates_through_elementwise_ops_between_convolutions():
    module = parse_module(f"""
      HloModule m, output_names={{y}}

      ENTRY %main {{
        %x = f32[1,4,8,8]{{3,2,1,0}} parameter(0), name=x
        %w1 = f32[4,4,3,3]{{3,2,1,0}} constant(), ref=w1
        %w2 = f32[4,4,3,3]{{3,2,1,0}} constant(), ref=w2
        %c1 = f32[1,4,8,8]{{3,2,1,0}} convolution(%x, %w1), {CONV}
        %r1 = f32[1,4,8,8]{{3,2,1,0}} relu(%c1)
        %c2 = f32[1,4,8,8]{{3,2,1,0}} convolution(%r1, %w2), {CONV}
        %s = f32[1,4,8,8]{{3,2,1,0}} add(%c2, %r1)
        %m = f32[1,4]{{1,0}} reduce(%s), dimensions={{2,3}}, kind=add
        ROOT %t = (f32[1,4]{{1,0}}) tuple(%m)
      }}""")
    LayoutAssignment().run(module)
    verify_module(module)
    layouts = {i.name: i.shape.layout for i in module.entry.instructions if not i.shape.is_tuple}
    assert layouts["r1"] == layouts["c2"] == layouts["s"] == (1, 3, 2, 0)
    assert layouts["m"] == (1, 0)
    assert layout_conversions(module)[0] == 0  # the NCHW input is read through strides by the first convolution


def test_a_conflict_is_resolved_by_one_copy_on_the_cheaper_side():
    # %e feeds two convolutions (wanting NHWC) and the output (row-major): NHWC wins by bytes,
    # and a single copy converts for the output.
    module = parse_module(f"""
      HloModule m, output_names={{a,b,e}}

      ENTRY %main {{
        %x = f32[1,4,8,8]{{3,2,1,0}} parameter(0), name=x
        %w1 = f32[4,4,3,3]{{3,2,1,0}} constant(), ref=w1
        %w2 = f32[4,4,3,3]{{3,2,1,0}} constant(), ref=w2
        %e = f32[1,4,8,8]{{3,2,1,0}} exp(%x)
        %a = f32[1,4,8,8]{{3,2,1,0}} convolution(%e, %w1), {CONV}
        %b = f32[1,4,8,8]{{3,2,1,0}} convolution(%e, %w2), {CONV}
        ROOT %t = (f32[1,4,8,8]{{3,2,1,0}}, f32[1,4,8,8]{{3,2,1,0}}, f32[1,4,8,8]{{3,2,1,0}}) tuple(%a, %b, %e)
      }}""")
    LayoutAssignment().run(module)
    verify_module(module)
    by_name = {i.name: i for i in module.entry.instructions}
    assert by_name["e"].shape.layout == (1, 3, 2, 0)
    copies = [i for i in module.entry.instructions if i.opcode == "copy"]
    assert [c.operands[0].name for c in copies] == ["e", "a", "b"]  # e for the output; a, b back to row-major
    assert module.entry.root.operands[2].opcode == "copy"


def test_transposes_become_bitcasts_and_values_are_unchanged():
    text = """
      HloModule m, output_names={y}

      ENTRY %main {
        %x = f32[2,16,64]{2,1,0} parameter(0), name=x
        %w = f32[64,64]{1,0} constant(), ref=w
        %wt = f32[64,64]{1,0} transpose(%w), dimensions={1,0}
        %q = f32[2,16,64]{2,1,0} dot(%x, %wt), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %h = f32[2,16,4,16]{3,2,1,0} reshape(%q)
        %t = f32[2,4,16,16]{3,2,1,0} transpose(%h), dimensions={0,2,1,3}
        %s = f32[2,4,16,16]{3,2,1,0} exp(%t)
        %b = f32[2,16,4,16]{3,2,1,0} transpose(%s), dimensions={0,2,1,3}
        %y = f32[2,16,64]{2,1,0} reshape(%b)
        ROOT %r = (f32[2,16,64]{2,1,0}) tuple(%y)
      }"""
    module = parse_module(text)
    rng = np.random.default_rng(0)
    module.constants["w"] = rng.standard_normal((64, 64)).astype(np.float32)
    x = rng.standard_normal((2, 16, 64)).astype(np.float32)
    want = evaluate(module, {"x": x})["y"]
    for p in (LayoutAssignment(), TransposeToBitcast(), ReshapeToBitcast(), DeadCodeElimination()):
        p.run(module)
        verify_module(module)
    ops = [i.opcode for i in module.entry.instructions]
    assert "transpose" not in ops and "copy" not in ops and "reshape" not in ops  # no data movement kernels
    # exp's result is laid out so that the transpose back and the reshape are views of it.
    assert next(i for i in module.entry.instructions if i.name == "s").shape.layout == (3, 1, 2, 0)
    np.testing.assert_allclose(evaluate(module, {"x": x})["y"], want, rtol=1e-6)


def test_layout_assignment_keeps_the_meaning_of_existing_bitcasts():
    # %v views %e's bytes row-major; when %e becomes NHWC for the convolution, %v must still read
    # the same logical values (it becomes a reshape kernel or reads through a copy).
    text = f"""
      HloModule m, output_names={{c,v}}

      ENTRY %main {{
        %x = f32[1,4,8,8]{{3,2,1,0}} parameter(0), name=x
        %w = f32[4,4,3,3]{{3,2,1,0}} constant(), ref=w
        %e = f32[1,4,8,8]{{3,2,1,0}} exp(%x)
        %v = f32[4,64]{{1,0}} bitcast(%e)
        %c = f32[1,4,8,8]{{3,2,1,0}} convolution(%e, %w), {CONV}
        ROOT %t = (f32[1,4,8,8]{{3,2,1,0}}, f32[4,64]{{1,0}}) tuple(%c, %v)
      }}"""
    module = parse_module(text)
    rng = np.random.default_rng(1)
    module.constants["w"] = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    want = evaluate(module, {"x": x})
    for p in (LayoutAssignment(), TransposeToBitcast(), ReshapeToBitcast(), DeadCodeElimination()):
        p.run(module)
        verify_module(module)
    got = evaluate(module, {"x": x})
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=k)
