"""The fusion pass: IR text in, IR text out, the same values before and after (the evaluator runs a
fusion's computation), and for every edge left unfused, the reason --explain-fusion prints."""

from __future__ import annotations

from mlcc.hlo.passes.fusion import MAX_ROW_IN_TILE, Fusion
from mlcc.hlo.printer import format_module
from tests.hlo.passes.pass_numerics import check_rewrite, run

CONV = "rhs_dilation={1,1}, dim_labels=bf01_oi01->bf01"


def explanations(module) -> list[str]:
    return module.analyses.fusion_explanations


# ---- two convolutions in one output tile ----------------------------------------------------

# ResNet's downsampling block (NHWC): the main path's last 1x1 convolution plus its bias, the 1x1 stride-2
# shortcut convolution of the block's input, their sum, relu
DOWNSAMPLE = f"""
  ENTRY %main {{
    %x = f32[1,8,6,6]{{1,3,2,0}} parameter(0), name=x
    %a = f32[1,4,3,3]{{1,3,2,0}} parameter(1), name=a
    %wa = f32[16,4,1,1]{{1,0,3,2}} parameter(2), name=wa
    %wb = f32[16,8,1,1]{{1,0,3,2}} parameter(3), name=wb
    %bias = f32[16]{{0}} parameter(4), name=bias
    %main = f32[1,16,3,3]{{1,3,2,0}} convolution(%a, %wa), feature_group_count=1, padding_high={{0,0}}, padding_low={{0,0}}, window_strides={{1,1}}, {CONV}
    %shortcut = f32[1,16,3,3]{{1,3,2,0}} convolution(%x, %wb), feature_group_count=1, padding_high={{0,0}}, padding_low={{0,0}}, window_strides={{2,2}}, {CONV}
    %b = f32[1,16,3,3]{{1,3,2,0}} broadcast(%bias), dimensions={{1}}
    %biased = f32[1,16,3,3]{{1,3,2,0}} add(%main, %b)
    %sum = f32[1,16,3,3]{{1,3,2,0}} add(%biased, %shortcut)
    %relu = f32[1,16,3,3]{{1,3,2,0}} relu(%sum)
    ROOT %t = (f32[1,16,3,3]{{1,3,2,0}}) tuple(%relu)
  }}"""


def test_resnet_shortcut_convolution_accumulates_in_the_main_paths_output_tile():
    # one kernel, two K loops: the shortcut's [1,16,3,3] result is never stored and read back
    module = check_rewrite(Fusion(), DOWNSAMPLE, expected=f"""
      %fused_output.relu {{
        %param_0 = f32[1,4,3,3]{{1,3,2,0}} parameter(0)
        %param_1 = f32[16,4,1,1]{{1,0,3,2}} parameter(1)
        %param_2 = f32[16]{{0}} parameter(2)
        %param_3 = f32[1,8,6,6]{{1,3,2,0}} parameter(3)
        %param_4 = f32[16,8,1,1]{{1,0,3,2}} parameter(4)
        %main = f32[1,16,3,3]{{1,3,2,0}} convolution(%param_0, %param_1), feature_group_count=1, padding_high={{0,0}}, padding_low={{0,0}}, window_strides={{1,1}}, {CONV}
        %b = f32[1,16,3,3]{{1,3,2,0}} broadcast(%param_2), dimensions={{1}}
        %biased = f32[1,16,3,3]{{1,3,2,0}} add(%main, %b)
        %shortcut = f32[1,16,3,3]{{1,3,2,0}} convolution(%param_3, %param_4), feature_group_count=1, padding_high={{0,0}}, padding_low={{0,0}}, window_strides={{2,2}}, {CONV}
        %sum = f32[1,16,3,3]{{1,3,2,0}} add(%biased, %shortcut)
        ROOT %relu = f32[1,16,3,3]{{1,3,2,0}} relu(%sum)
      }}

      ENTRY %main {{
        %x = f32[1,8,6,6]{{1,3,2,0}} parameter(0), name=x
        %a = f32[1,4,3,3]{{1,3,2,0}} parameter(1), name=a
        %wa = f32[16,4,1,1]{{1,0,3,2}} parameter(2), name=wa
        %wb = f32[16,8,1,1]{{1,0,3,2}} parameter(3), name=wb
        %bias = f32[16]{{0}} parameter(4), name=bias
        %fusion.relu = f32[1,16,3,3]{{1,3,2,0}} fusion(%a, %wa, %bias, %x, %wb), calls=%fused_output.relu, kind=output
        ROOT %t = (f32[1,16,3,3]{{1,3,2,0}}) tuple(%fusion.relu)
      }}""")
    assert [e for e in explanations(module) if "%shortcut ->" in e or "%main ->" in e] == []


def _three_convs(groups: int = 1) -> str:
    """Three convolutions of one input summed; the third has `groups` feature groups."""
    w3 = f"f32[8,{4 // groups},1,1]{{3,2,1,0}}"
    window = f"padding_high={{0,0}}, padding_low={{0,0}}, window_strides={{1,1}}, {CONV}"
    return f"""
      ENTRY %main {{
        %x = f32[1,4,5,5]{{3,2,1,0}} parameter(0), name=x
        %w0 = f32[8,4,1,1]{{3,2,1,0}} parameter(1), name=w0
        %w1 = f32[8,4,1,1]{{3,2,1,0}} parameter(2), name=w1
        %w2 = {w3} parameter(3), name=w2
        %c0 = f32[1,8,5,5]{{3,2,1,0}} convolution(%x, %w0), feature_group_count=1, {window}
        %c1 = f32[1,8,5,5]{{3,2,1,0}} convolution(%x, %w1), feature_group_count=1, {window}
        %c2 = f32[1,8,5,5]{{3,2,1,0}} convolution(%x, %w2), feature_group_count={groups}, {window}
        %s0 = f32[1,8,5,5]{{3,2,1,0}} add(%c0, %c1)
        %s1 = f32[1,8,5,5]{{3,2,1,0}} add(%s0, %c2)
        ROOT %t = (f32[1,8,5,5]{{3,2,1,0}}) tuple(%s1)
      }}"""


def test_a_third_convolution_keeps_its_own_kernel_and_says_why():
    _, module = run(Fusion(), _three_convs())
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 1
    assert [i.opcode for i in fusions[0].called.instructions].count("convolution") == 2
    assert [i.opcode for i in module.entry.instructions].count("convolution") == 1
    assert any("already accumulates two convolutions" in e for e in explanations(module)), explanations(module)


def test_a_grouped_convolution_does_not_share_the_tile():
    # the grouped one is merged first (the last add's operand) and the other two stay kernels of their own
    _, module = run(Fusion(), _three_convs(groups=2))
    for f in (i for i in module.entry.instructions if i.opcode == "fusion"):
        assert [i.opcode for i in f.called.instructions].count("convolution") == 1
    assert "%c1 -> %s0: grouped convolutions do not share an output tile" in explanations(module)


# ---- a row norm in a dot's epilogue ------------------------------------------------------------

def _projection_norm(cols: int, norm_dims: str = "{2}", rows: int = 16) -> str:
    return f"""
      ENTRY %main {{
        %h = f32[1,{rows},64]{{2,1,0}} parameter(0), name=h
        %res = f32[1,{rows},{cols}]{{2,1,0}} parameter(1), name=res
        %w = f32[64,{cols}]{{1,0}} parameter(2), name=w
        %g = f32[{cols}]{{0}} parameter(3), name=g
        %b = f32[{cols}]{{0}} parameter(4), name=b
        %d = f32[1,{rows},{cols}]{{2,1,0}} dot(%h, %w), lhs_batch_dims={{}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
        %x = f32[1,{rows},{cols}]{{2,1,0}} add(%d, %res)
        %ln = f32[1,{rows},{cols}]{{2,1,0}} layer-norm(%x, %g, %b), dimensions={norm_dims}, epsilon=1e-12
        ROOT %t = (f32[1,{rows},{cols}]{{2,1,0}}) tuple(%ln)
      }}"""


def test_residual_layer_norm_joins_the_epilogue_of_the_projection_whose_tile_holds_whole_rows():
    # BERT's attention output projection: dot, residual add, LayerNorm over the 64 columns, one kernel
    check_rewrite(Fusion(), _projection_norm(64), expected="""
      %fused_output.ln {
        %param_0 = f32[1,16,64]{2,1,0} parameter(0)
        %param_1 = f32[64,64]{1,0} parameter(1)
        %param_2 = f32[1,16,64]{2,1,0} parameter(2)
        %param_3 = f32[64]{0} parameter(3)
        %param_4 = f32[64]{0} parameter(4)
        %d = f32[1,16,64]{2,1,0} dot(%param_0, %param_1), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %x = f32[1,16,64]{2,1,0} add(%d, %param_2)
        ROOT %ln = f32[1,16,64]{2,1,0} layer-norm(%x, %param_3, %param_4), dimensions={2}, epsilon=1e-12
      }

      ENTRY %main {
        %h = f32[1,16,64]{2,1,0} parameter(0), name=h
        %res = f32[1,16,64]{2,1,0} parameter(1), name=res
        %w = f32[64,64]{1,0} parameter(2), name=w
        %g = f32[64]{0} parameter(3), name=g
        %b = f32[64]{0} parameter(4), name=b
        %fusion.ln = f32[1,16,64]{2,1,0} fusion(%h, %w, %res, %g, %b), calls=%fused_output.ln, kind=output
        ROOT %t = (f32[1,16,64]{2,1,0}) tuple(%fusion.ln)
      }""", rtol=1e-4, atol=1e-5)


def test_rows_wider_than_a_tile_keep_the_norm_in_its_own_kernel():
    _, module = run(Fusion(), _projection_norm(2 * MAX_ROW_IN_TILE))
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1
    assert f"%d -> %x: its rows of {2 * MAX_ROW_IN_TILE} elements do not fit one output tile (at most " \
           f"{MAX_ROW_IN_TILE})" in explanations(module)


def test_a_norm_over_the_dots_rows_rather_than_its_columns_stays_apart():
    _, module = run(Fusion(), _projection_norm(64, norm_dims="{1}"))
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1
    assert "%d -> %x: the layer-norm normalizes dims [1], not the dot's columns [2]" in explanations(module)


# ---- canonical parameters, contraction operands ------------------------------------------------

def test_fusions_computing_the_same_thing_number_their_parameters_alike():
    # the weight sits between the two activations in the entry: by entry position the second fusion would
    # read (weight, activation) and the first (activation, weight), two kernels for one computation
    _, module = run(Fusion(), f"""
      ENTRY %main {{
        %x = f32[1,4,5,5]{{1,3,2,0}} parameter(0), name=x
        %w = f32[4,4,3,3]{{3,2,1,0}} parameter(1), name=w
        %c0 = f32[1,4,5,5]{{1,3,2,0}} convolution(%x, %w), feature_group_count=1, padding_high={{1,1}}, padding_low={{1,1}}, window_strides={{1,1}}, {CONV}
        %r0 = f32[1,4,5,5]{{1,3,2,0}} relu(%c0)
        %c1 = f32[1,4,5,5]{{1,3,2,0}} convolution(%r0, %w), feature_group_count=1, padding_high={{1,1}}, padding_low={{1,1}}, window_strides={{1,1}}, {CONV}
        %r1 = f32[1,4,5,5]{{1,3,2,0}} relu(%c1)
        ROOT %t = (f32[1,4,5,5]{{1,3,2,0}}) tuple(%r1)
      }}""")
    first, second = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in first.operands] == ["x", "w"]
    assert [o.name for o in second.operands] == ["fusion.r0", "w"]
    bodies = [[(i.opcode, str(i.shape), [o.name for o in i.operands]) for i in f.called.instructions
               if i.opcode in ("parameter", "convolution")] for f in (first, second)]
    assert bodies[0] == bodies[1]


def test_a_contraction_never_joins_a_fusion_that_computes_its_operand():
    # b is cheap, so the add's fusion takes a copy of it; the dot reading b must then stay outside, or its
    # kernel would have to compute its own operand (contraction operands are read as they are)
    _, module = run(Fusion(), """
      ENTRY %main {
        %p = f32[8]{0} parameter(0), name=p
        %w = f32[8,8]{1,0} parameter(1), name=w
        %b = f32[4,8]{1,0} broadcast(%p), dimensions={1}
        %d = f32[4,8]{1,0} dot(%b, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %s = f32[4,8]{1,0} add(%b, %d)
        ROOT %t = (f32[4,8]{1,0}) tuple(%s)
      }""")
    (f,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert f.attrs["kind"] == "loop" and "dot" not in [i.opcode for i in f.called.instructions]
    assert "%d -> %s: dot operands are read from memory as they are, and one is computed in the fusion" \
        in explanations(module)


# ---- symbolic sizes -------------------------------------------------------------------------------

SYMBOLIC_CHAIN = """
  HloModule m, output_names={y,s}, symbols={seq={1,64}}

  ENTRY %main {
    %x = f32[seq,64]{1,0} parameter(0), name=x
    %b = f32[64]{0} parameter(1), name=b
    %bb = f32[seq,64]{1,0} broadcast(%b), dimensions={1}
    %a = f32[seq,64]{1,0} add(%x, %bb)
    %t = f32[seq,64]{1,0} tanh(%a)
    %s = f32[seq]{0} reduce(%t), dimensions={1}, kind=add
    %e = f32[seq,64]{1,0} exp(%x)
    %m = f32[seq]{0} multiply(%s, %s)
    ROOT %r = (f32[seq,64]{1,0}, f32[seq]{0}) tuple(%e, %m)
  }"""


def test_symbolic_ir_fuses_as_its_static_specialization():
    # every kind of fusion takes symbolic sizes: the same groups form at seq as at seq=5, and compute the same
    module = check_rewrite(Fusion(), SYMBOLIC_CHAIN, symbols={"seq": 5}, expected="""
      HloModule m, output_names={y,s}, symbols={seq={1,64}}

      %fused_input.m {
        %param_0 = f32[seq,64]{1,0} parameter(0)
        %param_1 = f32[64]{0} parameter(1)
        %bb = f32[seq,64]{1,0} broadcast(%param_1), dimensions={1}
        %a = f32[seq,64]{1,0} add(%param_0, %bb)
        %t = f32[seq,64]{1,0} tanh(%a)
        %s = f32[seq]{0} reduce(%t), dimensions={1}, kind=add
        ROOT %m = f32[seq]{0} multiply(%s, %s)
      }

      ENTRY %main {
        %x = f32[seq,64]{1,0} parameter(0), name=x
        %b = f32[64]{0} parameter(1), name=b
        %e = f32[seq,64]{1,0} exp(%x)
        %fusion.m = f32[seq]{0} fusion(%x, %b), calls=%fused_input.m, kind=input
        ROOT %r = (f32[seq,64]{1,0}, f32[seq]{0}) tuple(%e, %fusion.m)
      }""")
    static_text = SYMBOLIC_CHAIN.replace("seq,", "5,").replace("[seq]", "[5]").replace(", symbols={seq={1,64}}", "")
    _, static = run(Fusion(), static_text)
    assert format_module(module).replace("seq,", "5,").replace("[seq]", "[5]").replace(
        ", symbols={seq={1,64}}", "") == format_module(static)
